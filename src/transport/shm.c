/*
 * shm transport: the vtable, the send side, the liveness monitor and the life cycle. See shm.h
 * for the setup, shm_seg.h for the segment and shm_progress.c for the receive side.
 *
 * Send to a local peer (the calling thread, under the peer's send lock; isend completes before
 * it returns, like tcp, so callers may reuse the buffer at once):
 *  - len >= ZEN_SHM_CMA_MIN_BYTES and the receiver can read this process (probed at setup):
 *    one RTS record with the buffer's address; the receiver copies (or reduces) straight from
 *    it with process_vm_readv and acknowledges. One copy instead of two, and the copy is done
 *    by the receiver, so the ranks of a ring all copy in parallel.
 *  - otherwise the bytes go through the ring in records of at most ring/4 bytes; the receiver
 *    copies (or reduces) them out as they come, a pipeline of two copies.
 * While it waits (for ring space or the acknowledgement) the sender drains its own inbound
 * rings, so two processes sending to each other always progress.
 * Peers on other hosts (mixed mode) go through an inner tcp transport that delivers into the
 * same mailbox, so receives, ordering and failures look the same whichever way a peer is served.
 *
 * Failures: each local peer's tcp socket from the rendezvous stays open, watched by one monitor
 * thread (asleep in poll). End of stream: the peer closed or died (kill -9 included: the kernel
 * closes its sockets). Bytes: the peer's abort reason. Either way the peer's ring is drained
 * first (what it sent before is still delivered), then every receive from it fails naming it;
 * an abort fails every receive ("rank P aborted: reason"), as tcp does. A peer that is stopped
 * or hung keeps its socket open: the same monitor watches its heartbeat word instead
 * (shm_heartbeat.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/tunables.h"
#include "common/wait_report.h"
#include "transport/registry.h"
#include "transport/shm_internal.h"
#include "transport/tcp_internal.h"

#define ABORT_REASON_MAX 400

static const zen_transport_ops shm_ops;

int zen__transport_is_pure_shm(const zen_transport *t)
{
    return t && t->ops == &shm_ops && ((const shm_state *)t)->tcp == NULL;
}

/* ---- send ---- */

typedef struct send_wait {
    shm_state *s;
    shm_peer *pe;
    size_t need; /* ring bytes wanted (0: waiting for the ack of RTS number ack) */
    uint64_t ack;
} send_wait;

static int peer_gone(const shm_state *s, shm_peer *pe)
{
    return atomic_load(&s->aborted) || atomic_load(&pe->down) || atomic_load(&pe->failed);
}

/* The ring has the space, or the acknowledgement came. */
static int send_satisfied(const send_wait *w)
{
    zen_shm_ring *out = w->pe->out_ctl;
    if (w->need == 0)
        return atomic_load(&out->acked) >= w->ack;
    uint64_t used =
        atomic_load_explicit(&out->tail, memory_order_relaxed) - atomic_load(&out->head);
    return w->s->ring_bytes - used >= w->need;
}

static int send_ready(void *arg)
{
    send_wait *w = arg;
    return peer_gone(w->s, w->pe) || send_satisfied(w);
}

/* The error of a send that cannot go on (abort, dead peer). */
static zen_status send_failed(shm_state *s, shm_peer *pe)
{
    if (atomic_load(&s->aborted))
        return zen__transport_fail(&s->base, ZEN_EABORTED,
                                   "send to rank %d after this rank aborted", pe->rank);
    char why[sizeof pe->why];
    pthread_mutex_lock(&s->drain_lock);
    snprintf(why, sizeof why, "%s", pe->why);
    pthread_mutex_unlock(&s->drain_lock);
    return zen__transport_fail(&s->base, ZEN_EPEER, "send to rank %d: %s", pe->rank, why);
}

/* Wait for the ring or the acknowledgement; the stall limit restarts whenever the peer moves. */
static zen_status send_block(shm_state *s, shm_peer *pe, send_wait *w, size_t bytes)
{
    uint64_t seen = atomic_load(&pe->out_ctl->head) + atomic_load(&pe->out_ctl->acked);
    for (;;) {
        atomic_store(&pe->out_ctl->producer_waiting, 1);
        int ok = zen__shm_wait_until(s, send_ready, w, zen_ns_add_sat(zen_now_ns(), s->stall_ns));
        atomic_store(&pe->out_ctl->producer_waiting, 0);
        /* satisfied first: a peer that acknowledged and then left has what it needed */
        if (ok && send_satisfied(w))
            return ZEN_OK;
        if (peer_gone(s, pe))
            return send_failed(s, pe);
        uint64_t now = atomic_load(&pe->out_ctl->head) + atomic_load(&pe->out_ctl->acked);
        if (now == seen)
            return zen__transport_fail(&s->base, ZEN_ETIMEDOUT,
                                       "send of %zu bytes to rank %d made no progress for %.1f s: "
                                       "rank %d is not reading (stuck or stopped)",
                                       bytes, pe->rank, s->timeout_s, pe->rank);
        seen = now;
    }
}

/* Write a record at stream position at: header and payload first, the stamp last (release), so
 * the consumer sees all of it or nothing (shm_seg.h). */
static void write_record(shm_state *s, shm_peer *pe, uint64_t at, const zen_shm_rec *h,
                         const void *payload)
{
    zen_shm_rec *dst = (zen_shm_rec *)(pe->out_data + at % s->ring_bytes);
    dst->kind = h->kind;
    dst->bytes = h->bytes;
    dst->tag = h->tag;
    dst->total = h->total;
    dst->addr = h->addr;
    if (payload && h->bytes) /* a pad has neither */
        memcpy((char *)dst + ZEN_SHM_REC_HDR, payload, h->bytes);
    atomic_store_explicit(&dst->stamp, at + 1, memory_order_release);
}

/* Append one record (header + payload) to pe's ring, waiting for space. */
static zen_status put_record(shm_state *s, shm_peer *pe, const zen_shm_rec *h, const void *payload,
                             size_t total)
{
    zen_shm_ring *out = pe->out_ctl;
    size_t len = (ZEN_SHM_REC_HDR + h->bytes + ZEN_SHM_LINE - 1) / ZEN_SHM_LINE * ZEN_SHM_LINE;
    uint64_t tail = atomic_load_explicit(&out->tail, memory_order_relaxed);
    size_t pos = (size_t)(tail % s->ring_bytes);
    size_t pad = pos + len > s->ring_bytes ? s->ring_bytes - pos : 0;
    /* the record, the pad before it and the slot after it, which is cleared */
    size_t need = pad + len + ZEN_SHM_LINE;
    if (s->ring_bytes - (tail - pe->head_seen) < need) {
        send_wait w = { s, pe, need, 0 };
        if (!send_ready(&w)) {
            zen_status st = send_block(s, pe, &w, total);
            if (st != ZEN_OK)
                return st;
        }
        pe->head_seen = atomic_load(&out->head);
    }
    if (peer_gone(s, pe))
        return send_failed(s, pe);
    uint64_t at = tail + pad, end = at + len;
    zen_shm_rec *next = (zen_shm_rec *)(pe->out_data + end % s->ring_bytes);
    atomic_store_explicit(&next->stamp, 0, memory_order_relaxed); /* ordered by the stamp below */
    write_record(s, pe, at, h, payload);
    if (pad) { /* after the record it leads to, so the consumer finds that one complete */
        zen_shm_rec p = { .kind = ZEN_SHM_PAD };
        write_record(s, pe, tail, &p, NULL);
    }
    atomic_store_explicit(&out->tail, end, memory_order_release);
    zen__shm_ring_bell(pe->bell);
    return ZEN_OK;
}

static zen_status send_local(shm_state *s, shm_peer *pe, uint64_t tag, const void *buf, size_t len)
{
    zen_status st = ZEN_OK;
    pthread_mutex_lock(&pe->send_lock);
    if (len >= s->cma_min && pe->out_ctl->cma_ok) {
        zen_shm_rec h = {
            .kind = ZEN_SHM_RTS, .tag = tag, .total = len, .addr = (uint64_t)(uintptr_t)buf
        };
        st = put_record(s, pe, &h, NULL, len);
        if (st == ZEN_OK) {
            /* acknowledged is done, even if the peer left right after reading */
            send_wait w = { s, pe, 0, ++pe->rts_sent };
            if (!send_satisfied(&w))
                st = send_block(s, pe, &w, len);
        }
    } else {
        size_t off = 0;
        do {
            size_t n = len - off < s->frag_bytes ? len - off : s->frag_bytes;
            zen_shm_rec h = { .kind = off ? ZEN_SHM_MORE : ZEN_SHM_FIRST,
                              .bytes = (uint32_t)n,
                              .tag = tag,
                              .total = len,
                              .addr = off };
            st = put_record(s, pe, &h, (const char *)buf + off, len);
            off += n;
        } while (st == ZEN_OK && off < len);
    }
    pthread_mutex_unlock(&pe->send_lock);
    return st;
}

/* Copy the inner tcp transport's last error into ours (without its "rank R: " prefix). */
static zen_status tcp_error(shm_state *s, zen_status st)
{
    char e[sizeof s->base.err];
    zen__transport_last_error(s->tcp, e, sizeof e);
    const char *p = strstr(e, ": ");
    return zen__transport_fail(&s->base, st, "%s", p ? p + 2 : e);
}

static zen_status shm_isend(zen_transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                            zen_treq **req)
{
    shm_state *s = (shm_state *)t;
    *req = NULL;
    if (peer < 0 || peer >= t->size)
        return zen__transport_fail(t, ZEN_EINVAL, "send to rank %d of %d", peer, t->size);
    if (atomic_load(&s->aborted))
        return zen__transport_fail(t, ZEN_EABORTED, "send to rank %d after this rank aborted",
                                   peer);
    shm_peer *pe = &s->peers[peer];
    zen_status st;
    if (peer == t->rank) {
        zen__mailbox_deliver(s->mb, peer, tag, buf, len);
        st = ZEN_OK;
    } else if (pe->lidx < 0) {
        zen_treq *inner = NULL;
        st = s->tcp->ops->isend(s->tcp, peer, tag, buf, len, &inner);
        if (st != ZEN_OK)
            return tcp_error(s, st);
        *req = inner; /* a completed mailbox send: our req_free frees it */
        return ZEN_OK;
    } else {
        st = send_local(s, pe, tag, buf, len);
    }
    return st == ZEN_OK ? zen__mailbox_send_done(req) : st;
}

/* ---- receive ---- */

static zen_status check_recv(shm_state *s, int peer)
{
    if (peer < 0 || peer >= s->base.size)
        return zen__transport_fail(&s->base, ZEN_EINVAL, "receive from rank %d of %d", peer,
                                   s->base.size);
    return ZEN_OK;
}

static zen_status shm_irecv(zen_transport *t, int peer, uint64_t tag, void *buf, size_t cap,
                            zen_treq **req)
{
    shm_state *s = (shm_state *)t;
    *req = NULL;
    zen_status st = check_recv(s, peer);
    return st != ZEN_OK ? st : zen__mailbox_irecv(s->mb, peer, tag, buf, cap, req);
}

static zen_status shm_irecv_combine(zen_transport *t, int peer, uint64_t tag, void *buf, size_t cap,
                                    const zen_combine *combine, zen_treq **req)
{
    shm_state *s = (shm_state *)t;
    *req = NULL;
    zen_status st = check_recv(s, peer);
    return st != ZEN_OK ? st : zen__mailbox_irecv_combine(s->mb, peer, tag, buf, cap, combine, req);
}

typedef struct recv_wait {
    shm_state *s;
    zen_treq *req;
} recv_wait;

static int recv_done(void *arg)
{
    recv_wait *w = arg;
    return zen__mailbox_req_done(w->s->mb, w->req);
}

static int recv_idle(void *arg)
{
    recv_wait *w = arg;
    return !zen__mailbox_req_receiving(w->s->mb, w->req);
}

static zen_status shm_wait(zen_transport *t, zen_treq *req, int64_t deadline_ns, size_t *len)
{
    shm_state *s = (shm_state *)t;
    if (req->is_send) {
        if (len)
            *len = 0;
        return ZEN_OK;
    }
    recv_wait w = { s, req };
    int64_t start = zen_now_ns();
    zen_wait_report wr;
    zen__wait_report_start_at(&wr, start, s->report_ns);
    int peer;
    uint64_t tag;
    int got;
    /* in slices that end at each progress report (ZEN_WAIT_REPORT_S) */
    while (
        !(got = zen__shm_wait_until(s, recv_done, &w, zen__wait_report_slice(&wr, deadline_ns))) &&
        zen_now_ns() < deadline_ns) {
        zen__mailbox_req_info(req, &peer, &tag);
        if (zen__wait_report_due(&wr))
            zen__wait_report_say(&wr, deadline_ns, t->rank, peer);
    }
    if (!got) {
        zen__mailbox_req_info(req, &peer, &tag);
        int64_t quiet = 0;
        int silent = zen__shm_silent_peer(s, &quiet);
        char msg[400];
        return zen__transport_fail(t, ZEN_ETIMEDOUT, "%s",
                                   zen__liveness_blame(msg, sizeof msg, peer, zen_now_ns() - start,
                                                       (unsigned long long)tag, silent, quiet));
    }
    int done = 0;
    return zen__mailbox_test(s->mb, req, &done, len);
}

static zen_status shm_test(zen_transport *t, zen_treq *req, int *done, size_t *len)
{
    shm_state *s = (shm_state *)t;
    if (!req->is_send)
        zen__shm_progress(s);
    return zen__mailbox_test(s->mb, req, done, len);
}

static void shm_req_free(zen_transport *t, zen_treq *req)
{
    shm_state *s = (shm_state *)t;
    if (!req)
        return;
    /* A message arriving in pieces into this receive is finished (or failed) by the drainer:
     * keep draining until it lets go, so freeing it cannot wait on ourselves. */
    recv_wait w = { s, req };
    if (!req->is_send && !recv_idle(&w))
        zen__shm_wait_until(s, recv_idle, &w,
                            zen_ns_add_sat(zen_now_ns(), zen_ns_add_sat(s->stall_ns, 1000000000)));
    zen__mailbox_req_free(s->mb, req);
}

/* ---- failures ---- */

static void shm_abort(zen_transport *t, zen_status status, const char *reason)
{
    shm_state *s = (shm_state *)t;
    if (!reason || !*reason)
        reason = "aborted";
    if (atomic_exchange(&s->aborted, 1))
        return;
    snprintf(s->abort_why, sizeof s->abort_why, "%s", reason);
    atomic_store(&s->abort_why_set, 1);
    zen__mailbox_fail_all(s->mb, status == ZEN_OK ? ZEN_EABORTED : status, reason);
    size_t rlen = strlen(reason) < ABORT_REASON_MAX ? strlen(reason) : ABORT_REASON_MAX;
    for (int p = 0; p < t->size; p++) {
        shm_peer *pe = &s->peers[p];
        if (pe->lidx < 0 || p == t->rank || pe->sock < 0)
            continue;
        /* never blocks: the liveness socket carries nothing else, its buffer is empty */
        (void)send(pe->sock, reason, rlen, MSG_DONTWAIT | MSG_NOSIGNAL);
        shutdown(pe->sock, SHUT_WR);
    }
    if (s->tcp)
        s->tcp->ops->abort(s->tcp, status, reason);
    if (s->head)
        zen__shm_ring_bell(&s->head->bell);
}

typedef struct watch {
    int fd;
    int peer;
    size_t got;
    char reason[ABORT_REASON_MAX + 1];
} watch;

/* One liveness socket is readable: collect an abort reason, or learn the peer is gone. */
static int watch_event(shm_state *s, watch *w)
{
    char buf[512];
    ssize_t n = recv(w->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n > 0) {
        for (ssize_t i = 0; i < n && w->got < ABORT_REASON_MAX; i++)
            w->reason[w->got++] = (unsigned char)buf[i] < 0x20 ? ' ' : buf[i];
        return 0;
    }
    char msg[sizeof w->reason + 100];
    shm_peer *pe = &s->peers[w->peer];
    if (w->got) {
        w->reason[w->got] = '\0';
        snprintf(msg, sizeof msg, "rank %d aborted: %s", w->peer, w->reason);
        ZEN_INFO("transport", "%s", msg);
        zen__shm_peer_down(s, pe, ZEN_EPEER, 1, msg);
    } else {
        snprintf(msg, sizeof msg, "rank %d closed the connection (%s: it left or died)", w->peer,
                 n == 0 ? "end of stream" : strerror(errno));
        if (!atomic_load(&s->aborted))
            ZEN_DEBUG("transport", "%s", msg);
        zen__shm_peer_down(s, pe, ZEN_EPEER, 0, msg);
    }
    return 1;
}

static void *monitor_main(void *arg)
{
    shm_state *s = arg;
    zen__log_set_thread_rank(s->base.rank);
    (void)prctl(PR_SET_NAME, "zen-shm-monitor"); /* top -H, /proc/PID/task/TID/comm */
    int n = 0;
    struct pollfd *pf = zen__calloc((size_t)s->nlocal, sizeof *pf);
    watch *w = zen__calloc((size_t)s->nlocal, sizeof *w);
    if (!pf || !w) {
        zen__free(pf);
        zen__free(w);
        return NULL;
    }
    pf[n++] = (struct pollfd){ .fd = s->stop_fd, .events = POLLIN, .revents = 0 };
    for (int p = 0; p < s->base.size; p++) {
        if (s->peers[p].lidx < 0 || p == s->base.rank || s->peers[p].sock < 0)
            continue;
        w[n] = (watch){ .fd = s->peers[p].sock, .peer = p, .got = 0 };
        pf[n++] = (struct pollfd){ .fd = s->peers[p].sock, .events = POLLIN, .revents = 0 };
    }
    for (;;) {
        int got = poll(pf, (nfds_t)n, zen__shm_heartbeat_poll_ms(s));
        if (got < 0 && errno != EINTR)
            break;
        if (got > 0 && pf[0].revents)
            break;
        for (int i = 1; got > 0 && i < n; i++)
            if (pf[i].fd >= 0 && pf[i].revents && watch_event(s, &w[i]))
                pf[i].fd = -1;      /* done with this peer */
        zen__shm_heartbeat_tick(s); /* after the sockets: a peer that left is not silent */
    }
    zen__free(pf);
    zen__free(w);
    return NULL;
}

/* ---- life cycle ---- */

static void shm_free(shm_state *s)
{
    if (s->monitor_started) {
        uint64_t one = 1;
        (void)!write(s->stop_fd, &one, sizeof one);
        pthread_join(s->monitor, NULL);
    }
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    if (s->tcp)
        s->tcp->ops->destroy(s->tcp);
    for (int p = 0; s->peers && p < s->base.size; p++) {
        shm_peer *pe = &s->peers[p];
        if (pe->active)
            zen__mailbox_deliver_fail(s->mb, &pe->d, ZEN_EPEER, "transport closed");
        if (pe->sock >= 0)
            close(pe->sock);
        if (pe->seg)
            munmap(pe->seg, pe->seg_bytes);
        pthread_mutex_destroy(&pe->send_lock);
    }
    if (s->seg)
        munmap(s->seg, s->seg_bytes);
    zen__free(s->peers);
    zen__free(s->host_of);
    zen__free(s->bounce);
    zen__free(s->was_down);
    if (s->mb)
        zen__mailbox_destroy(s->mb);
    pthread_mutex_destroy(&s->drain_lock);
    zen__transport_base_release(&s->base);
    zen__free(s);
}

static void shm_destroy(zen_transport *t)
{
    shm_state *s = (shm_state *)t;
    /* Everything this rank sent is in its peers' rings or was acknowledged, so it can leave at
     * once; closing the sockets tells the peers (after they drain what is left). */
    for (int p = 0; p < t->size; p++)
        if (s->peers[p].lidx >= 0 && s->peers[p].sock >= 0)
            shutdown(s->peers[p].sock, SHUT_WR);
    shm_free(s);
}

static const zen_transport_ops shm_ops = {
    .name = "shm",
    .isend = shm_isend,
    .irecv = shm_irecv,
    .irecv_combine = shm_irecv_combine,
    .wait = shm_wait,
    .test = shm_test,
    .req_free = shm_req_free,
    .abort = shm_abort,
    .destroy = shm_destroy,
    .send_raw = NULL,
    .slot_cap = zen__shm_slot_cap,
    .slot_data = zen__shm_slot_data,
    .slot_post = zen__shm_slot_post,
    .slot_wait = zen__shm_slot_wait,
    .slot_wake = zen__shm_slot_wake,
};

static void mailbox_notify(void *arg)
{
    shm_state *s = arg;
    if (s->head)
        zen__shm_ring_bell(&s->head->bell);
}

static void read_tunables(shm_state *s, double timeout_s)
{
    long kb = zen__param_long("SHM_RING_KB"); /* 64 .. 65536: the tunables table's bounds */
    s->ring_bytes = (size_t)kb << 10;
    s->frag_bytes = s->ring_bytes / 4 - ZEN_SHM_REC_HDR;
    long cma_min = zen__param_long("SHM_CMA_MIN_BYTES");
    s->cma_min = cma_min > 0 ? (size_t)cma_min : 1;
    s->timeout_s = timeout_s > 0 ? timeout_s : 300;
    s->stall_ns = zen_ns_from_s(s->timeout_s);     /* INT64_MAX for inf: never a stall */
    s->report_ns = zen__wait_report_interval_ns(); /* read once: waits are a hot path */
    zen_liveness own = zen__liveness_mine(s->timeout_s);
    s->live_wire = zen__liveness_encode(&own);
    long spin = zen__param_long("SHM_SPIN_US");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    /* A waiter that spins takes the core its peer may need: oversubscribed (more ranks than
     * cores), or unpinned, when the scheduler's wake-up affinity puts two ranks that wake each
     * other on one core (measured: an 8-byte round trip took the whole spin budget, 20-60 us,
     * when spinning, 4-5 us when yielding; docs/benchmarks.md). So by default (-1) it yields
     * unless this process is pinned to one core (`zen launch` pins by default) and the ranks do
     * not outnumber the cores: then no peer can be queued behind it. */
    long yield = zen__param_long("SHM_SPIN_YIELD");
    cpu_set_t mine;
    int pinned = sched_getaffinity(0, sizeof mine, &mine) == 0 && CPU_COUNT(&mine) == 1;
    s->spin_yield = yield > 0 || (yield < 0 && (!pinned || (cpus > 0 && s->nlocal > cpus)));
    if (spin < 0)
        spin = 50;
    s->spin_ns = (int64_t)spin * 1000;
}

/* Local indices (rank order among the ranks of this host) and the host table. */
static zen_status assign_peers(shm_state *s, const int *host_of)
{
    int n = s->base.size, me = s->base.rank;
    s->host_of = zen__malloc_array((size_t)n, sizeof *s->host_of);
    if (!s->host_of)
        return ZEN_ENOMEM;
    for (int p = 0; p < n; p++) {
        shm_peer *pe = &s->peers[p];
        pe->rank = p;
        pe->sock = -1;
        pe->lidx = host_of[p] == host_of[me] ? s->nlocal++ : -1;
        pthread_mutex_init(&pe->send_lock, NULL);
        s->host_of[p] = host_of[p];
        if (host_of[p] + 1 > s->nhosts)
            s->nhosts = host_of[p] + 1;
    }
    s->base.local_rank = s->peers[me].lidx;
    s->base.local_size = s->nlocal;
    s->base.host_of = s->host_of;
    s->base.nhosts = s->nhosts;
    return ZEN_OK;
}

static zen_status shm_start(shm_state *s, int *fds, zen_shm_boot *b, const zen_shm_blob *blobs)
{
    zen_status st = zen__shm_setup_segments(s, b, blobs, zen_deadline_after(s->timeout_s));
    if (st != ZEN_OK)
        return st;
    int remote = 0;
    for (int p = 0; p < s->base.size; p++) {
        if (p == s->base.rank || s->peers[p].lidx < 0) {
            remote += p != s->base.rank;
            continue;
        }
        s->peers[p].sock = fds[p];
        fds[p] = -1;
    }
    zen__shm_liveness_local(s);
    if (remote &&
        (st = zen__transport_tcp_create_shared(s->base.rank, s->base.size, fds, s->timeout_s, s->mb,
                                               &s->live, &s->tcp)) != ZEN_OK)
        return zen__transport_fail(&s->base, st, "mixed: cannot start tcp for the other hosts");
    if (s->tcp)
        s->live = zen__tcp_liveness(s->tcp); /* every rank's settings now */
    zen__shm_heartbeat_setup(s);
    s->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (s->stop_fd < 0 || pthread_create(&s->monitor, NULL, monitor_main, s) != 0)
        return zen__transport_fail(&s->base, ZEN_ESYS, "shm: cannot start the liveness monitor");
    s->monitor_started = 1;
    return ZEN_OK;
}

zen_status zen__transport_shm_create(int rank, int size, int *fds, const int *host_of,
                                     const zen_shm_blob *blobs, zen_shm_boot *b, double timeout_s,
                                     zen_transport **out, char *err, size_t err_size)
{
    *out = NULL;
    err[0] = '\0';
    shm_state *s = zen__calloc(1, sizeof *s);
    zen_status st = s ? ZEN_OK : ZEN_ENOMEM;
    if (s) {
        zen__transport_base_init(&s->base, &shm_ops, s, rank, size);
        pthread_mutex_init(&s->drain_lock, NULL);
        s->stop_fd = -1;
        s->peers = zen__calloc((size_t)size, sizeof *s->peers);
        s->bounce = zen__malloc(ZEN_SHM_BOUNCE_BYTES);
        s->was_down = zen__calloc((size_t)size, sizeof *s->was_down);
        st = s->peers && s->bounce && s->was_down ? assign_peers(s, host_of) : ZEN_ENOMEM;
    }
    if (st == ZEN_OK)
        st = zen__mailbox_create(&s->base, size, &s->mb);
    if (st == ZEN_OK) {
        read_tunables(s, timeout_s);
        zen__mailbox_set_notify(s->mb, mailbox_notify, s);
        st = shm_start(s, fds, b, blobs);
    }
    zen__shm_boot_cancel(b);
    for (int p = 0; p < size; p++) {
        if (fds[p] >= 0)
            close(fds[p]);
        fds[p] = -1;
    }
    if (st != ZEN_OK) {
        if (s) {
            zen__transport_last_error(&s->base, err, err_size);
            shm_abort(&s->base, st, err[0] ? err : "shm setup failed");
            shm_free(s);
        }
        return st;
    }
    ZEN_INFO("transport", "shm: rank %d is local rank %d of %d (%s, single copy %s)", rank,
             s->base.local_rank, s->nlocal, s->tcp ? "mixed with tcp" : "all ranks on this host",
             s->cma_min && s->nlocal > 1 ? "probed" : "off");
    *out = &s->base;
    return ZEN_OK;
}

/* Host-aware: the bootstrap's host exchange decides per peer (shm inside a host, tcp across),
 * and the job's kind (SHM, MIXED or TCP) is known after it. */
static zen_status host_open(const zen_transport_open_args *a, zen_transport_kind want,
                            const char *name, zen_transport **out, zen_transport_kind *kind)
{
    zen_status st = zen__transport_need_rank(a, name);
    return st != ZEN_OK ? st : a->boot->hosts(a, want, out, kind);
}

static zen_status shm_only_open(const zen_transport_open_args *a, zen_transport **out,
                                zen_transport_kind *kind)
{
    return host_open(a, ZEN_TRANSPORT_SHM, "shm", out, kind);
}

static zen_status mixed_open(const zen_transport_open_args *a, zen_transport **out,
                             zen_transport_kind *kind)
{
    return host_open(a, ZEN_TRANSPORT_MIXED, "shm+tcp", out, kind);
}

/* Processes of one host: memory copies like inproc's, but each byte goes into a shared ring and
 * out of it (two copies) unless single copy (CMA) takes a large message. */
const zen_transport_desc zen__transport_shm_desc = {
    .name = "shm",
    .kind = ZEN_TRANSPORT_SHM,
    .open = shm_only_open,
    .traits = { .reach = ZEN_REACH_HOST,
                .latency_us = 5,
                .gbps = 40,
                .wire_copies = 2,
                .single_copy = true,
                .store_rendezvous = true },
};

/* shm inside each host, tcp across: the cost model sees the tcp links, the slowest. */
const zen_transport_desc zen__transport_mixed_desc = {
    .name = "shm+tcp",
    .kind = ZEN_TRANSPORT_MIXED,
    .open = mixed_open,
    .traits = { .reach = ZEN_REACH_HOSTS,
                .latency_us = 50,
                .gbps = 10,
                .wire_copies = -1,
                .single_copy = true,
                .store_rendezvous = true },
};
