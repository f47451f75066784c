/* Delay-line arithmetic of zen_netswitch; the model is described in netswitch_line.h. */
#include "netswitch_line.h"

#include <stdlib.h>

int ns_line_init(ns_line *l, const ns_model *m)
{
    l->cap = m->max_pkts ? m->max_pkts : 1;
    l->head = l->count = 0;
    l->bytes = 0;
    l->free_ns = 0;
    l->ring = calloc(l->cap, sizeof(*l->ring));
    return l->ring ? 0 : -1;
}

void ns_line_free(ns_line *l)
{
    free(l->ring);
    l->ring = NULL;
    l->cap = l->count = 0;
}

int64_t ns_tx_ns(uint64_t rate_bps, uint32_t len)
{
    if (rate_bps == 0)
        return 0;
    /* an IPv4 packet is < 2^16 bytes; clamping at 2^20 keeps len * 8e9 well inside 64 bits */
    if (len > (1u << 20))
        len = 1u << 20;
    uint64_t bits_ns = (uint64_t)len * 8u * 1000000000u;
    return (int64_t)((bits_ns + rate_bps - 1) / rate_bps);
}

ns_admit ns_line_push(ns_line *l, const ns_model *m, int64_t now, ns_pkt pkt)
{
    if (l->count >= l->cap || l->bytes + pkt.len > m->max_bytes)
        return NS_ADMIT_FULL;
    int64_t start = now;
    if (m->rate_bps) {
        if (l->free_ns > start)
            start = l->free_ns;
        if (m->max_wait_ns > 0 && start - now > m->max_wait_ns)
            return NS_ADMIT_BACKLOG;
    }
    int64_t depart = start + ns_tx_ns(m->rate_bps, pkt.len);
    l->free_ns = depart;
    pkt.release_ns = depart + m->delay_ns;
    l->ring[(l->head + l->count) % l->cap] = pkt;
    l->count++;
    l->bytes += pkt.len;
    return NS_ADMIT_OK;
}

const ns_pkt *ns_line_head(const ns_line *l)
{
    return l->count ? &l->ring[l->head] : NULL;
}

void ns_line_pop(ns_line *l)
{
    l->bytes -= l->ring[l->head].len;
    l->head = (l->head + 1) % l->cap;
    l->count--;
}

int64_t ns_lines_next(const ns_line *lines, int n)
{
    int64_t next = -1;
    for (int i = 0; i < n; i++) {
        const ns_pkt *h = ns_line_head(&lines[i]);
        if (h && (next < 0 || h->release_ns < next))
            next = h->release_ns;
    }
    return next;
}

int ns_route(const unsigned char *pkt, size_t len, uint32_t subnet, int n)
{
    if (len < 20 || (pkt[0] >> 4) != 4)
        return -1;
    uint32_t dst = (uint32_t)pkt[16] << 24 | (uint32_t)pkt[17] << 16 | (uint32_t)pkt[18] << 8 |
                   (uint32_t)pkt[19];
    if ((dst & 0xffffff00u) != (subnet & 0xffffff00u))
        return -1;
    int host = (int)(dst & 0xffu) - 1;
    return host >= 0 && host < n ? host : -1;
}
