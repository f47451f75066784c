#include "bootstrap/rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/rdv_admit.h"
#include "bootstrap/rdv_msg.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/tunables.h"
#include "common/wait_report.h"
#include "transport/tcp_sock.h"

/* A connection gets this long from accept to a complete handshake, so a stranger that
 * connects and says nothing (or says it slowly) holds only its own slot, never the job. */
#define HANDSHAKE_NS (5 * (int64_t)1000000000)
/* How much longer than rank 0 a registered rank waits for the table. */
#define TABLE_GRACE_NS ((int64_t)1000000000)
/* Connections taken from the listen queue per turn of the handshake loop. */
#define ACCEPT_BATCH 32
/* Drop warnings: at most one line per this interval (rdv_admit.h). */
#define WARN_INTERVAL_NS ((int64_t)1000000000)
/* A rank whose connection is closed before the challenge (the listener was making room, or is
 * not listening yet) connects again after this, doubling up to RETRY_MAX_NS. */
#define RETRY_MIN_NS ((int64_t)10000000)
#define RETRY_MAX_NS ((int64_t)250000000)

typedef struct rdv_entry {
    uint32_t addr; /* network order */
    uint16_t port;
} rdv_entry;

typedef struct rdv {
    int rank;
    int size;
    double timeout_s;
    int64_t deadline;
    char *err;
    size_t err_size;
    int *fds;
    int listen_fd; /* this rank's data listener */
    uint16_t listen_port;
    uint32_t my_addr;
    rdv_entry *table;
    const zen_job_key *key;
    int *reg;          /* rank 0: registration connection of each rank */
    char refused[256]; /* the last connection refused without failing the job, for timeouts */
    int need;          /* connections still expected by serve_handshakes */
    zen_rdv_warn_limit drops; /* connections dropped by serve_handshakes, and their log lines */
} rdv;

static zen_status rdv_fail(rdv *r, zen_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static zen_status rdv_fail(rdv *r, zen_status st, const char *fmt, ...)
{
    char detail[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->err_size, "rank %d: tcp rendezvous: %s", r->rank, detail);
    ZEN_ERROR("bootstrap", "%s", r->err);
    return st;
}

/* A connection dropped without failing the job: counted, logged at most once a second (with
 * the number not logged since), and when remember is set kept for a later timeout message. */
static void rdv_drop(rdv *r, int remember, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void rdv_drop(rdv *r, int remember, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (remember)
        snprintf(r->refused, sizeof r->refused, "%s", why);
    long quiet = 0;
    if (!zen__rdv_warn_due(&r->drops, zen_now_ns(), &quiet))
        return;
    if (quiet > 0)
        ZEN_WARN("bootstrap",
                 "rank %d: dropped a rendezvous connection: %s (and %ld more since the last "
                 "such line, not logged one by one)",
                 r->rank, why, quiet);
    else
        ZEN_WARN("bootstrap", "rank %d: dropped a rendezvous connection: %s", r->rank, why);
}

#define rdv_refuse(r, ...) rdv_drop(r, 1, __VA_ARGS__)

/* "2, 5, 7" for the ranks r in [from, size) with fds[r] < 0, excluding skip. */
static void list_missing(const int *fds, int from, int size, int skip, char *out, size_t cap)
{
    size_t used = 0;
    int shown = 0, total = 0;
    out[0] = '\0';
    for (int p = from; p < size; p++) {
        if (p == skip || fds[p] >= 0)
            continue;
        total++;
        if (shown < 16 && used < cap) {
            int n = snprintf(out + used, cap - used, "%s%d", shown ? ", " : "", p);
            if (n > 0)
                used += (size_t)n;
            shown++;
        }
    }
    if (total > shown && used < cap)
        snprintf(out + used, cap - used, " and %d more", total - shown);
}

/* Every ZEN_WAIT_REPORT_S of serve_handshakes: whom this rank still waits for. */
static void report_serving(rdv *r, uint16_t kind, zen_wait_report *wr)
{
    if (!zen__wait_report_due(wr))
        return;
    char missing[160], times[48];
    if (kind == ZEN_RDV_REGISTER)
        list_missing(r->reg, 1, r->size, 0, missing, sizeof missing);
    else
        list_missing(r->fds, r->rank + 1, r->size, -1, missing, sizeof missing);
    zen__wait_report_times(wr, r->deadline, times, sizeof times);
    ZEN_WARN("bootstrap", "rank %d: tcp rendezvous: still waiting for rank(s) %s to %s (%s)",
             r->rank, missing,
             kind == ZEN_RDV_REGISTER ? "register with rank 0" : "connect to this rank", times);
}

static int write_bytes(int fd, const void *buf, size_t len, int64_t deadline)
{
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    return zen__sock_writev_all(fd, &iov, 1, 0, deadline);
}

/* Text for a negative errno from tcp_sock (-EPIPE there means the peer closed). */
static const char *why_rc(int rc)
{
    return rc == -EPIPE ? "end of stream" : strerror(-rc);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* ---- answering side: concurrent handshakes ---- */

/* One connection being vetted (rdv_admit.h); only after its PROOF does on_peer see the peer. */
typedef zen_rdv_pending pending;

/* What on_peer decided: keep the connection (it now owns fd), drop it, or fail the job. */
enum {
    PEER_KEEP = 1,
    PEER_DROP = 0,
    PEER_FATAL = -1
};

typedef int (*on_peer_fn)(rdv *r, int fd, const zen_rdv_first *m, int authenticated,
                          const char *host, zen_status *fatal);

static void drop_pending(pending *pd, int *npd, int i)
{
    close(pd[i].fd);
    pd[i] = pd[--*npd];
}

/* Feed readable bytes into pd; returns PEER_KEEP when the handshake is complete, PEER_DROP when
 * the connection must go, 2 when more bytes are needed. */
static int advance_handshake(rdv *r, pending *p, uint16_t kind)
{
    unsigned char *buf = p->stage == 0 ? p->first : p->proof;
    size_t want = p->stage == 0 ? sizeof p->first : sizeof p->proof;
    ssize_t n = recv(p->fd, buf + p->got, want - p->got, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        if (p->stage == 1) /* it read our proof and went: it could not check it */
            rdv_refuse(r,
                       "%s closed the connection after our challenge (another job secret, or "
                       "not a zen rank of this job)",
                       p->host);
        return PEER_DROP;
    }
    if (n < 0)
        return 2;
    p->got += (size_t)n;
    zen_rdv_first m;
    if (p->stage == 0 && p->got >= 16 && zen__rdv_parse_first(p->first, p->got, &m) == -2) {
        rdv_refuse(r, "%s, claiming rank %u of %u, speaks rendezvous version %u, this is %u",
                   p->host, m.rank, m.size, zen_get_u16(p->first + 4), ZEN_RDV_VERSION);
        return PEER_DROP;
    }
    if (p->got >= 4 && zen_get_u32(p->first) != ZEN_RDV_MAGIC) {
        rdv_drop(r, 0, "%s sent no zen magic", p->host);
        return PEER_DROP;
    }
    if (p->got < want)
        return 2;
    p->got = 0;
    if (p->stage == 0) {
        if (zen__rdv_parse_first(p->first, sizeof p->first, &m) != 0 || m.kind != kind) {
            rdv_drop(r, 0, "%s sent a malformed handshake", p->host);
            return PEER_DROP;
        }
        zen_rdv_challenge c = { .rank = (uint32_t)r->rank, .size = (uint32_t)r->size };
        zen__auth_nonce(c.nonce);
        zen__rdv_encode_challenge(p->challenge, &c);
        if (r->key->set) {
            unsigned char t[ZEN_RDV_TRANSCRIPT_BYTES];
            zen__rdv_transcript(t, p->first, p->challenge);
            zen__auth_mac(r->key, ZEN_RDV_LABEL_SERVER, t, sizeof t, c.mac);
            zen__rdv_encode_challenge(p->challenge, &c);
        }
        if (write_bytes(p->fd, p->challenge, sizeof p->challenge, p->deadline) < 0)
            return PEER_DROP;
        p->stage = 1;
        p->since = zen_now_ns();
        return 2;
    }
    return zen__rdv_check_head(p->proof, sizeof p->proof, ZEN_RDV_PROOF) == 0 ? PEER_KEEP
                                                                              : PEER_DROP;
}

/* The proof check of a complete handshake: 1 authenticated, 0 no secret on either side, -1
 * refused (logged). */
static int check_proof(rdv *r, const pending *p, const zen_rdv_first *m)
{
    int has = (m->flags & ZEN_RDV_FLAG_AUTH) != 0;
    if (!r->key->set) {
        if (has)
            rdv_refuse(r,
                       "%s, claiming rank %u, holds a job secret and this rank none (set the "
                       "same ZEN_JOB_SECRET on every rank)",
                       p->host, m->rank);
        return has ? -1 : 0;
    }
    unsigned char t[ZEN_RDV_TRANSCRIPT_BYTES];
    zen__rdv_transcript(t, p->first, p->challenge);
    if (!has || !zen__auth_verify(r->key, ZEN_RDV_LABEL_CLIENT, t, sizeof t, p->proof + 8)) {
        rdv_refuse(r, "%s, claiming rank %u, failed authentication (%s)", p->host, m->rank,
                   has ? "wrong job secret" : "no job secret");
        return -1;
    }
    return 1;
}

/* A watched connection (already part of the job) that reports end of stream means that rank
 * died or gave up during the rendezvous: name it instead of waiting for the deadline. */
static int watched_closed(int fd)
{
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/*
 * Take up to ACCEPT_BATCH connections from the listen queue into pd. When the table or the
 * source's share of it is full, the oldest unproven handshake is closed to make room, or the
 * new one is (zen__rdv_admit): a stranger holding or repeating connections pushes out only
 * unproven connections, and a rank pushed out connects again.
 */
static void accept_new(rdv *r, int listen_fd, pending *pd, int *npd)
{
    for (int k = 0; k < ACCEPT_BATCH; k++) {
        struct sockaddr_in sa;
        socklen_t slen = sizeof sa;
        int fd = accept(listen_fd, (struct sockaddr *)&sa, &slen);
        if (fd < 0)
            return; /* the queue is empty (or EMFILE: the next turn tries again) */
        if (zen__sock_nonblock(fd) != 0) {
            close(fd);
            continue;
        }
        int64_t now = zen_now_ns();
        uint32_t src = slen >= sizeof sa ? sa.sin_addr.s_addr : 0;
        char host[32] = "?";
        if (src)
            zen__sock_ntoa(src, host, sizeof host);
        int v = zen__rdv_admit(pd, *npd, src, now);
        if (v == ZEN_RDV_ADMIT_REFUSE) {
            rdv_drop(r, 0,
                     "closed a new connection from %s: the table is full and every "
                     "handshake it could replace got its challenge less than %.0f s ago",
                     host, ZEN_RDV_GRACE_NS / 1e9);
            close(fd);
            continue;
        }
        if (v >= 0) {
            rdv_drop(r, 0,
                     "closed the oldest unfinished handshake (from %s, %s for %.1f s) to "
                     "make room for a new connection from %s",
                     pd[v].host, pd[v].stage ? "challenged" : "no complete first message",
                     (double)(now - pd[v].since) / 1e9, host);
            drop_pending(pd, npd, v);
        }
        pending *p = &pd[(*npd)++];
        memset(p, 0, sizeof *p);
        p->fd = fd;
        p->src = src;
        p->since = now;
        p->deadline = now + HANDSHAKE_NS;
        snprintf(p->host, sizeof p->host, "%s", host);
    }
}

/* The end of serve_handshakes: one line with the number of connections dropped, when some of
 * them were not logged one by one. */
static void drops_summary(rdv *r, int listen_fd)
{
    if (r->drops.unlogged > 0) {
        struct sockaddr_in sa;
        socklen_t slen = sizeof sa;
        unsigned port = 0;
        if (getsockname(listen_fd, (struct sockaddr *)&sa, &slen) == 0)
            port = ntohs(sa.sin_port);
        ZEN_WARN("bootstrap",
                 "rank %d: %ld rendezvous connections dropped on port %u in all (%ld of them "
                 "not logged one by one)",
                 r->rank, r->drops.total, port, r->drops.unlogged);
    }
    r->drops = (zen_rdv_warn_limit){ .interval_ns = WARN_INTERVAL_NS };
}

/*
 * Accept on listen_fd and run every handshake at once (poll), until r->need reaches 0 (on_peer
 * counts down) or the deadline. Strangers, slow or silent clients only cost their own slot and
 * time out alone, or give way to newer connections (accept_new). watch[0..size) are
 * connections of the job already made: if one closes, the rendezvous fails naming that rank.
 * Returns ZEN_OK, a fatal status from on_peer, ZEN_ETIMEDOUT (the caller names the missing
 * ranks) or ZEN_EPEER (r->err set).
 */
static zen_status serve_handshakes(rdv *r, int listen_fd, uint16_t kind, const int *watch,
                                   on_peer_fn on_peer)
{
    pending *pd = zen__calloc(ZEN_RDV_MAX_PENDING, sizeof *pd);
    struct pollfd *pf = zen__calloc((size_t)(1 + ZEN_RDV_MAX_PENDING + r->size), sizeof *pf);
    unsigned char *quiet = zen__calloc((size_t)r->size, 1); /* watched fds that sent data */
    zen_status st = pd && pf && quiet ? ZEN_OK : ZEN_ENOMEM;
    if (st != ZEN_OK)
        rdv_fail(r, st, "no memory for the handshake table");
    int npd = 0;
    r->drops = (zen_rdv_warn_limit){ .interval_ns = WARN_INTERVAL_NS };
    zen_wait_report wr;
    zen__wait_report_start(&wr);
    while (st == ZEN_OK && r->need > 0) {
        int64_t now = zen_now_ns();
        if (now >= r->deadline) {
            st = ZEN_ETIMEDOUT;
            break;
        }
        report_serving(r, kind, &wr);
        for (int i = 0; i < npd;) {
            if (now >= pd[i].deadline) {
                rdv_drop(r, 0, "%s completed no handshake within %.0f s", pd[i].host,
                         HANDSHAKE_NS / 1e9);
                drop_pending(pd, &npd, i);
            } else {
                i++;
            }
        }
        int n = 0;
        pf[n++] = (struct pollfd){ .fd = listen_fd, .events = POLLIN };
        for (int i = 0; i < npd; i++)
            pf[n++] = (struct pollfd){ .fd = pd[i].fd, .events = POLLIN };
        int first_watch = n;
        for (int p = 0; p < r->size; p++)
            pf[n++] = (struct pollfd){ .fd = watch[p] >= 0 && !quiet[p] ? watch[p] : -1,
                                       .events = POLLIN };
        int64_t wait_ns = r->deadline - now;
        if (wait_ns > 100 * (int64_t)1000000)
            wait_ns = 100 * (int64_t)1000000; /* re-check handshake deadlines */
        int rc = poll(pf, (nfds_t)n, (int)(wait_ns / 1000000) + 1);
        if (rc < 0 && errno != EINTR) {
            st = rdv_fail(r, ZEN_ESYS, "poll: %s", strerror(errno));
            break;
        }
        if (rc <= 0)
            continue;
        for (int p = 0; p < r->size && st == ZEN_OK; p++) {
            if (watch[p] < 0 || quiet[p] || !pf[first_watch + p].revents)
                continue;
            if (watched_closed(watch[p]))
                st = rdv_fail(r, ZEN_EPEER,
                              "rank %d closed its connection during the rendezvous (it died or "
                              "failed: see its log)",
                              p);
            else
                quiet[p] = 1; /* it already sends data frames: stop watching */
        }
        /* handshakes first (their indices shift when one is dropped), from the back */
        for (int i = npd - 1; i >= 0 && st == ZEN_OK; i--) {
            if (!pf[1 + i].revents)
                continue;
            int a = advance_handshake(r, &pd[i], kind);
            if (a == 2)
                continue;
            zen_rdv_first m;
            int auth = a == PEER_KEEP ? (zen__rdv_parse_first(pd[i].first, sizeof pd[i].first, &m),
                                         check_proof(r, &pd[i], &m))
                                      : -1;
            int verdict = auth < 0 ? PEER_DROP : on_peer(r, pd[i].fd, &m, auth, pd[i].host, &st);
            if (verdict == PEER_KEEP)
                pd[i] = pd[--npd]; /* on_peer owns the fd now */
            else
                drop_pending(pd, &npd, i);
        }
        if (st == ZEN_OK && (pf[0].revents & POLLIN))
            accept_new(r, listen_fd, pd, &npd);
    }
    for (int i = 0; pd && i < npd; i++)
        close(pd[i].fd);
    drops_summary(r, listen_fd);
    zen__free(pd);
    zen__free(pf);
    zen__free(quiet);
    return st;
}

/* ---- connecting side ---- */

/* What client_handshake's *refused says about a failure. */
enum {
    NOT_THAT_RANK = 1, /* the other side is not (or not yet) the rank we want: worth retrying
                        * on the master port, which a stranger might hold before rank 0 starts */
    OTHER_SIZE = 2,    /* it is, but has another world size */
    CLOSED_EARLY = 3   /* closed or reset before its challenge: a listener making room for new
                        * connections (rdv_admit.h) does that, so connect again */
};

/*
 * Send first (REGISTER or HELLO), check the answer comes from rank expect and, with a job
 * secret, proves it; send our proof. 0, or a negative errno / -1 with a reason in why and
 * *refused set as above (0: any other failure).
 */
static int client_handshake(rdv *r, int fd, zen_rdv_first *m, int expect, char *why, size_t n,
                            int *refused)
{
    unsigned char first[ZEN_RDV_FIRST_BYTES], ch[ZEN_RDV_CHALLENGE_BYTES];
    unsigned char proof[ZEN_RDV_PROOF_BYTES] = { 0 };
    *refused = 0;
    m->flags = r->key->set ? ZEN_RDV_FLAG_AUTH : 0;
    zen__auth_nonce(m->nonce);
    zen__rdv_encode_first(first, m);
    int rc = write_bytes(fd, first, sizeof first, r->deadline);
    if (rc == 0)
        rc = zen__sock_read_all(fd, ch, sizeof ch, r->deadline);
    if (rc < 0) {
        snprintf(why, n, "%s before its challenge%s", why_rc(rc),
                 rc == -EPIPE || rc == -ECONNRESET
                     ? " (it was making room for other connections, or it refused this rank: "
                       "see its log)"
                     : "");
        if (rc == -EPIPE || rc == -ECONNRESET)
            *refused = CLOSED_EARLY;
        return rc;
    }
    zen_rdv_challenge c;
    if (zen__rdv_parse_challenge(ch, sizeof ch, &c) != 0 || c.rank != (uint32_t)expect) {
        snprintf(why, n,
                 "it answered as rank %u (rendezvous version %u), expected rank %d "
                 "(version %u)",
                 zen_get_u32(ch + 8), zen_get_u16(ch + 4), expect, ZEN_RDV_VERSION);
        *refused = NOT_THAT_RANK;
        return -1;
    }
    unsigned char t[ZEN_RDV_TRANSCRIPT_BYTES];
    zen__rdv_transcript(t, first, ch);
    if (r->key->set && !zen__auth_verify(r->key, ZEN_RDV_LABEL_SERVER, t, sizeof t, c.mac)) {
        snprintf(why, n,
                 "it did not prove the job secret (a stranger, or a rank started "
                 "without the same ZEN_JOB_SECRET)");
        *refused = NOT_THAT_RANK;
        return -1;
    }
    /* a world-size disagreement still gets our proof, so the other side can name it too */
    zen__rdv_put_head(proof, ZEN_RDV_PROOF);
    if (r->key->set)
        zen__auth_mac(r->key, ZEN_RDV_LABEL_CLIENT, t, sizeof t, proof + 8);
    if ((rc = write_bytes(fd, proof, sizeof proof, r->deadline)) < 0) {
        snprintf(why, n, "%s", why_rc(rc));
        return rc;
    }
    if (c.size != (uint32_t)r->size) {
        snprintf(why, n, "rank %d has world size %u, this rank %d", expect, c.size, r->size);
        *refused = OTHER_SIZE;
        return -1;
    }
    return 0;
}

/* Sleep before connecting again, *pause_ns doubling from RETRY_MIN_NS to RETRY_MAX_NS; 0 (no
 * sleep) when the deadline would pass first. */
static int retry_pause(const rdv *r, int64_t *pause_ns)
{
    int64_t p = *pause_ns > 0 ? *pause_ns : RETRY_MIN_NS;
    if (zen_now_ns() + p >= r->deadline)
        return 0;
    zen__sleep_ns(p);
    *pause_ns = p * 2 < RETRY_MAX_NS ? p * 2 : RETRY_MAX_NS;
    return 1;
}

/* ---- rank 0: registrations ---- */

static int on_register(rdv *r, int fd, const zen_rdv_first *m, int authenticated, const char *host,
                       zen_status *fatal)
{
    int peer = (int)m->rank;
    char reason[200] = "";
    if (m->size != (uint32_t)r->size)
        snprintf(reason, sizeof reason, "rank %d registered with world size %u, but rank 0 has %d",
                 peer, m->size, r->size);
    else if (m->rank < 1 || m->rank >= (uint32_t)r->size)
        snprintf(reason, sizeof reason, "a process registered as rank %u, outside 1..%d", m->rank,
                 r->size - 1);
    else if (r->reg[peer] >= 0)
        snprintf(reason, sizeof reason, "two processes registered as rank %d", peer);
    if (reason[0]) {
        /* A member of the job (it proved the secret) that disagrees is a configuration error:
         * fail at once. Without authentication anyone could send this: drop it and go on; a
         * timeout will quote it. */
        if (authenticated) {
            *fatal = rdv_fail(r, ZEN_EMISMATCH, "%s (from %s)", reason, host);
            return PEER_FATAL;
        }
        rdv_refuse(r, "%s (from %s)", reason, host);
        return PEER_DROP;
    }
    r->reg[peer] = fd;
    r->table[peer].addr = m->addr_be;
    r->table[peer].port = m->port;
    r->need--;
    return PEER_KEEP;
}

/* " (last refused: ...)" when a connection was dropped, for timeout messages. */
static const char *refused_note(const rdv *r, char *buf, size_t n)
{
    if (!r->refused[0])
        return "";
    snprintf(buf, n, "; refused meanwhile: %s", r->refused);
    return buf;
}

/*
 * Rank 0: send the rank table to every registered rank. At the deadline the same table is the
 * verdict: the entries of the ranks that never registered are zero (port 0 is no listener), so
 * that every registered rank names them too instead of only learning that rank 0 gave up.
 */
static zen_status send_table(rdv *r, int64_t deadline)
{
    size_t tbytes = ZEN_RDV_TABLE_HEAD_BYTES + (size_t)r->size * ZEN_RDV_TABLE_ENTRY_BYTES;
    unsigned char *tb = zen__calloc(1, tbytes);
    if (!tb)
        return rdv_fail(r, ZEN_ENOMEM, "no memory for a rank table of %zu bytes", tbytes);
    zen__rdv_encode_ack(tb, ZEN_RDV_TABLE, 0, (uint32_t)r->size);
    for (int p = 0; p < r->size; p++) {
        int in = p == 0 || r->reg[p] >= 0;
        zen__rdv_encode_entry(tb + ZEN_RDV_TABLE_HEAD_BYTES + (size_t)p * ZEN_RDV_TABLE_ENTRY_BYTES,
                              in ? r->table[p].addr : 0, in ? r->table[p].port : 0);
    }
    zen_status st = ZEN_OK;
    for (int p = 1; p < r->size && st == ZEN_OK; p++) {
        int rc = r->reg[p] >= 0 ? write_bytes(r->reg[p], tb, tbytes, deadline) : 0;
        if (rc < 0)
            st = rdv_fail(r, ZEN_EPEER, "sending the rank table to rank %d failed: %s", p,
                          why_rc(rc));
    }
    zen__free(tb);
    return st;
}

/* Rank 0: collect size-1 registrations on the master port, then send everyone the table. */
static zen_status serve_registrations(rdv *r, uint32_t master, int master_port)
{
    uint16_t bound = 0;
    /* listen where MASTER_ADDR points, not on every interface (0.0.0.0 only when asked for, or
     * when that address is not local, e.g. a NAT name) */
    int mfd = zen__sock_listen(master, (uint16_t)master_port, 1, &bound);
    if (mfd == -EADDRNOTAVAIL && master != htonl(INADDR_ANY)) {
        ZEN_WARN("bootstrap", "master address is not local; listening on every interface");
        mfd = zen__sock_listen(htonl(INADDR_ANY), (uint16_t)master_port, 1, &bound);
    }
    if (mfd < 0)
        return rdv_fail(r, mfd == -EADDRINUSE ? ZEN_EBUSY : ZEN_ESYS,
                        "cannot listen on master port %d: %s%s", master_port, strerror(-mfd),
                        mfd == -EADDRINUSE ? " (another job? choose another ZEN_MASTER_PORT)" : "");
    r->reg = zen__malloc_array((size_t)r->size, sizeof *r->reg);
    if (!r->reg) {
        close(mfd);
        return rdv_fail(r, ZEN_ENOMEM, "no memory for %d registrations", r->size);
    }
    for (int p = 0; p < r->size; p++)
        r->reg[p] = -1;
    r->need = r->size - 1;
    zen_status st = serve_handshakes(r, mfd, ZEN_RDV_REGISTER, r->reg, on_register);
    close(mfd);
    if (st == ZEN_ETIMEDOUT) {
        char missing[160], note[300];
        list_missing(r->reg, 1, r->size, 0, missing, sizeof missing);
        int arrived = 1;
        for (int p = 1; p < r->size; p++)
            arrived += r->reg[p] >= 0;
        (void)send_table(r, zen_deadline_after(0.5)); /* the verdict, best effort */
        st = rdv_fail(r, ZEN_ETIMEDOUT,
                      "%d of %d ranks arrived (registered with rank 0 on port %d) within %.1f s; "
                      "missing: %s %s%s",
                      arrived, r->size, master_port, r->timeout_s,
                      r->size - arrived > 1 ? "ranks" : "rank", missing,
                      refused_note(r, note, sizeof note));
    } else if (st == ZEN_OK) {
        st = send_table(r, r->deadline);
    }
    for (int p = 0; p < r->size; p++)
        close_fd(&r->reg[p]);
    zen__free(r->reg);
    r->reg = NULL;
    return st;
}

/* Ranks > 0, registered: wait until rank 0 starts sending the table (it does once every rank
 * registered) or until, saying every ZEN_WAIT_REPORT_S that this rank waits. 1 readable, 0 not
 * by until, -errno. */
static int await_table(rdv *r, int fd, int64_t until, zen_wait_report *wr)
{
    for (;;) {
        int64_t end = zen__wait_report_slice(wr, until), now = zen_now_ns();
        if (now >= until)
            return 0;
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int64_t ms = (end - now) / 1000000 + 1;
        int rc = poll(&pf, 1, ms > 60000 ? 60000 : (int)ms);
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -errno;
        if (zen__wait_report_due(wr)) {
            char times[48];
            zen__wait_report_times(wr, r->deadline, times, sizeof times);
            ZEN_WARN("bootstrap",
                     "rank %d: tcp rendezvous: registered; still waiting for rank 0's rank "
                     "table, which it sends once every rank registered (%s; rank 0's log names "
                     "the missing ranks)",
                     r->rank, times);
        }
    }
}

/* Connect to the master, retrying until the deadline and saying every ZEN_WAIT_REPORT_S that
 * rank 0 does not listen yet. */
static zen_status connect_master(rdv *r, uint32_t master, int master_port, const char *host,
                                 zen_wait_report *wr, int *fdp)
{
    for (;;) {
        int64_t attempt = zen_now_ns() + 2 * (int64_t)1000000000;
        int fd = zen__sock_connect(master, (uint16_t)master_port,
                                   attempt < r->deadline ? attempt : r->deadline);
        if (fd >= 0) {
            *fdp = fd;
            return ZEN_OK;
        }
        if (zen_now_ns() >= r->deadline)
            return rdv_fail(r, ZEN_ETIMEDOUT,
                            "cannot reach rank 0 at %s:%d within %.1f s (%s): is rank 0 "
                            "running with the same ZEN_MASTER_ADDR and ZEN_MASTER_PORT?",
                            host, master_port, r->timeout_s, strerror(-fd));
        if (zen__wait_report_due(wr)) {
            char times[48];
            zen__wait_report_times(wr, r->deadline, times, sizeof times);
            ZEN_WARN("bootstrap",
                     "rank %d: tcp rendezvous: still waiting for rank 0 to listen at %s:%d "
                     "(%s: %s)",
                     r->rank, host, master_port, times, strerror(-fd));
        }
        zen__sleep_ns(50 * 1000000);
    }
}

/* Ranks > 0: a table with zero entries is rank 0's verdict at the deadline (send_table): name
 * the ranks that never registered, as rank 0 does. */
static zen_status table_verdict(rdv *r)
{
    char missing[160];
    size_t used = 0;
    int absent = 0;
    missing[0] = '\0';
    for (int p = 1; p < r->size; p++) {
        if (r->table[p].port != 0)
            continue;
        if (absent++ < 16 && used < sizeof missing) {
            int n = snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "", p);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    if (absent == 0)
        return ZEN_OK;
    if (absent > 16 && used < sizeof missing)
        snprintf(missing + used, sizeof missing - used, " and %d more", absent - 16);
    return rdv_fail(r, ZEN_ETIMEDOUT,
                    "%d of %d ranks arrived (registered with rank 0) within %.1f s; missing: %s %s "
                    "(fewer ranks started than the world size %d, or they failed before the "
                    "rendezvous: see their logs)",
                    r->size - absent, r->size, r->timeout_s, absent > 1 ? "ranks" : "rank", missing,
                    r->size);
}

/* Ranks > 0: connect to the master (retrying until the deadline), register, read the table. */
static zen_status register_with_master(rdv *r, uint32_t master, int master_port, int have_ifaddr)
{
    char host[32];
    zen__sock_ntoa(master, host, sizeof host);
    int warned = 0, attempts = 0;
    int64_t pause_ns = 0;
    zen_wait_report wr;
    zen__wait_report_start(&wr);
    for (;;) {
        int fd = -1;
        zen_status cst = connect_master(r, master, master_port, host, &wr, &fd);
        if (cst != ZEN_OK)
            return cst;
        if (!have_ifaddr) {
            struct sockaddr_in sa;
            socklen_t slen = sizeof sa;
            if (getsockname(fd, (struct sockaddr *)&sa, &slen) == 0)
                r->my_addr = sa.sin_addr.s_addr;
        }
        if (r->listen_fd < 0) {
            r->listen_fd = zen__sock_listen(r->my_addr, 0, 0, &r->listen_port);
            if (r->listen_fd < 0) {
                close(fd);
                return rdv_fail(r, ZEN_ESYS, "cannot listen: %s", strerror(-r->listen_fd));
            }
        }
        zen_rdv_first m = { .kind = ZEN_RDV_REGISTER,
                            .rank = (uint32_t)r->rank,
                            .size = (uint32_t)r->size,
                            .addr_be = r->my_addr,
                            .port = r->listen_port };
        char why[200];
        int refused = 0;
        if (client_handshake(r, fd, &m, 0, why, sizeof why, &refused) != 0) {
            close(fd);
            /* whoever holds the master port is not our rank 0 (yet), or rank 0 closed us to
             * make room: try again */
            attempts++;
            if ((refused == NOT_THAT_RANK || refused == CLOSED_EARLY) &&
                retry_pause(r, &pause_ns)) {
                if (!(warned & (1 << refused)))
                    ZEN_WARN("bootstrap", "rank %d: %s %s:%d %s (%s); connecting again", r->rank,
                             refused == CLOSED_EARLY ? "rank 0 at" : "the process at", host,
                             master_port,
                             refused == CLOSED_EARLY ? "closed the connection"
                                                     : "is not this job's rank 0",
                             why);
                warned |= 1 << refused;
                continue;
            }
            return rdv_fail(r,
                            refused == OTHER_SIZE      ? ZEN_EMISMATCH
                            : refused == NOT_THAT_RANK ? ZEN_EPROTO
                                                       : ZEN_EPEER,
                            "registering with rank 0 at %s:%d failed after %d attempt(s): %s", host,
                            master_port, attempts, why);
        }
        zen_status st = ZEN_OK;
        unsigned char th[ZEN_RDV_TABLE_HEAD_BYTES];
        uint32_t zero, tsize = 0;
        /* Rank 0 names the missing ranks at the common deadline; wait a little past it so it
         * does (and then learn of it from the closed connection) instead of leaving first,
         * which rank 0 would take for this rank's death. */
        int64_t until = zen_ns_add_sat(r->deadline, TABLE_GRACE_NS);
        int rc = await_table(r, fd, until, &wr);
        rc = rc > 0 ? zen__sock_read_all(fd, th, sizeof th, until) : rc == 0 ? -ETIMEDOUT : rc;
        if (rc == -ETIMEDOUT)
            st = rdv_fail(r, ZEN_ETIMEDOUT,
                          "rank 0 did not send the rank table within %.1f s: some ranks never "
                          "registered (rank 0's log names them)",
                          r->timeout_s);
        else if (rc < 0)
            st = rdv_fail(r, ZEN_EPEER,
                          "rank 0 closed the rendezvous connection before sending the rank table "
                          "(%s): it refused this rank or failed, see its log",
                          why_rc(rc));
        else if (zen__rdv_parse_ack(th, sizeof th, ZEN_RDV_TABLE, &zero, &tsize) != 0 ||
                 tsize != (uint32_t)r->size)
            st = rdv_fail(r, ZEN_EPROTO, "rank 0 sent a malformed rank table");
        for (int p = 0; p < r->size && st == ZEN_OK; p++) {
            unsigned char e[ZEN_RDV_TABLE_ENTRY_BYTES];
            if ((rc = zen__sock_read_all(fd, e, sizeof e, until)) < 0) {
                st = rdv_fail(r, ZEN_EPEER, "reading the rank table from rank 0 failed: %s",
                              why_rc(rc));
                break;
            }
            zen__rdv_parse_entry(e, &r->table[p].addr, &r->table[p].port);
        }
        close(fd);
        return st == ZEN_OK ? table_verdict(r) : st;
    }
}

/* ---- the mesh ---- */

/* One HELLO, CHALLENGE, PROOF, ACK exchange with rank j on a new connection: 0 (r->fds[j]
 * set) or a negative errno / -1 with why and *refused (client_handshake). */
static int hello_lower(rdv *r, int j, int fd, char *why, size_t n, int *refused)
{
    zen_rdv_first m = { .kind = ZEN_RDV_HELLO,
                        .rank = (uint32_t)r->rank,
                        .size = (uint32_t)r->size,
                        .target = (uint32_t)j };
    unsigned char ack[ZEN_RDV_ACK_BYTES];
    uint32_t arank = 0, asize = 0;
    int rc = client_handshake(r, fd, &m, j, why, n, refused);
    if (rc == 0 && (rc = zen__sock_read_all(fd, ack, sizeof ack, r->deadline)) < 0)
        snprintf(why, n, "%s%s", why_rc(rc),
                 rc == -EPIPE ? " (it refused this rank: see its log)" : "");
    if (rc == 0 && (zen__rdv_parse_ack(ack, sizeof ack, ZEN_RDV_ACK, &arank, &asize) != 0 ||
                    arank != (uint32_t)j || asize != (uint32_t)r->size)) {
        snprintf(why, n, "malformed handshake answer");
        rc = -1;
    }
    if (rc == 0)
        r->fds[j] = fd;
    return rc;
}

/* Rank i connects to every j < i. Every j listens before it registers, so a refused connection
 * means j died after registering: fail at once. A connection j closes before its challenge
 * (making room for others: a stranger is holding connections to it) is made again. */
static zen_status connect_lower(rdv *r)
{
    for (int j = 0; j < r->rank; j++) {
        char host[32], why[200];
        zen__sock_ntoa(r->table[j].addr, host, sizeof host);
        int64_t pause_ns = 0;
        int attempts = 0, rc, refused = 0;
        do {
            if (attempts++ == 1)
                ZEN_WARN("bootstrap",
                         "rank %d: rank %d at %s:%u closed the connection (%s); "
                         "connecting again",
                         r->rank, j, host, r->table[j].port, why);
            int fd = zen__sock_connect(r->table[j].addr, r->table[j].port, r->deadline);
            if (fd < 0)
                return rdv_fail(r, fd == -ETIMEDOUT ? ZEN_ETIMEDOUT : ZEN_EPEER,
                                "cannot connect to rank %d at %s:%u: %s%s", j, host,
                                r->table[j].port, strerror(-fd),
                                fd == -ECONNREFUSED ? " (it exited after registering?)" : "");
            rc = hello_lower(r, j, fd, why, sizeof why, &refused);
            if (rc != 0)
                close(fd);
        } while (rc != 0 && refused == CLOSED_EARLY && retry_pause(r, &pause_ns));
        if (rc != 0)
            return rdv_fail(r,
                            rc == -ETIMEDOUT           ? ZEN_ETIMEDOUT
                            : refused == OTHER_SIZE    ? ZEN_EMISMATCH
                            : refused == NOT_THAT_RANK ? ZEN_EPROTO
                                                       : ZEN_EPEER,
                            "handshake with rank %d at %s:%u failed after %d attempt(s): %s", j,
                            host, r->table[j].port, attempts, why);
    }
    return ZEN_OK;
}

static int on_hello(rdv *r, int fd, const zen_rdv_first *m, int authenticated, const char *host,
                    zen_status *fatal)
{
    int peer = (int)m->rank;
    char reason[200] = "";
    if (m->size != (uint32_t)r->size)
        snprintf(reason, sizeof reason, "rank %d has world size %u, this rank %d", peer, m->size,
                 r->size);
    else if (m->target != (uint32_t)r->rank || peer <= r->rank || peer >= r->size ||
             r->fds[peer] >= 0)
        snprintf(reason, sizeof reason,
                 "unexpected handshake from a process claiming rank %d (duplicate or out of "
                 "range)",
                 peer);
    if (reason[0]) {
        if (authenticated) {
            *fatal = rdv_fail(r, ZEN_EMISMATCH, "%s (from %s)", reason, host);
            return PEER_FATAL;
        }
        rdv_refuse(r, "%s (from %s)", reason, host);
        return PEER_DROP;
    }
    unsigned char ack[ZEN_RDV_ACK_BYTES];
    zen__rdv_encode_ack(ack, ZEN_RDV_ACK, (uint32_t)r->rank, (uint32_t)r->size);
    int rc = write_bytes(fd, ack, sizeof ack, r->deadline);
    if (rc < 0) {
        rdv_refuse(r, "answering the handshake of rank %d failed: %s", peer, why_rc(rc));
        return PEER_DROP;
    }
    r->fds[peer] = fd;
    r->need--;
    return PEER_KEEP;
}

/* Accept one authenticated connection from every j > i. */
static zen_status accept_higher(rdv *r)
{
    r->need = r->size - 1 - r->rank;
    zen_status st = serve_handshakes(r, r->listen_fd, ZEN_RDV_HELLO, r->fds, on_hello);
    if (st == ZEN_ETIMEDOUT) {
        char missing[160], note[300];
        list_missing(r->fds, r->rank + 1, r->size, -1, missing, sizeof missing);
        st = rdv_fail(r, ZEN_ETIMEDOUT,
                      "timed out after %.1f s: rank(s) %s never connected to "
                      "rank %d%s",
                      r->timeout_s, missing, r->rank, refused_note(r, note, sizeof note));
    }
    return st;
}

static zen_status mesh(rdv *r)
{
    zen_status st = connect_lower(r);
    if (st == ZEN_OK)
        st = accept_higher(r);
    return st;
}

static void rdv_init(rdv *r, int rank, int size, double timeout_s, const zen_job_key *key, int *fds,
                     char *err, size_t err_size)
{
    memset(r, 0, sizeof *r);
    r->rank = rank;
    r->size = size;
    r->timeout_s = timeout_s;
    r->deadline = zen_deadline_after(timeout_s);
    r->err = err;
    r->err_size = err_size;
    r->fds = fds;
    r->listen_fd = -1;
    r->key = key;
    err[0] = '\0';
    for (int p = 0; p < size; p++)
        fds[p] = -1;
}

zen_status zen__rendezvous_mesh(int rank, int size, const uint32_t *addrs_be, const uint16_t *ports,
                                int listen_fd, const zen_job_key *key, double timeout_s, int *fds,
                                char *err, size_t err_size)
{
    static const zen_job_key none;
    rdv r;
    rdv_init(&r, rank, size, timeout_s, key ? key : &none, fds, err, err_size);
    if (size == 1)
        return ZEN_OK;
    char why[300];
    if (zen__job_key_required(r.key, why, sizeof why) != ZEN_OK)
        return rdv_fail(&r, ZEN_EINVAL, "%s", why);
    r.table = zen__calloc((size_t)size, sizeof *r.table);
    if (!r.table)
        return rdv_fail(&r, ZEN_ENOMEM, "no memory for a rank table of %d", size);
    for (int p = 0; p < size; p++) {
        r.table[p].addr = addrs_be[p];
        r.table[p].port = ports[p];
    }
    r.listen_fd = listen_fd;
    zen_status st = mesh(&r);
    zen__free(r.table);
    if (st != ZEN_OK)
        for (int p = 0; p < size; p++)
            close_fd(&fds[p]);
    return st;
}

static int is_loopback(uint32_t addr_be)
{
    return (ntohl(addr_be) >> 24) == 127;
}

zen_status zen__rendezvous_keyed(int rank, int size, const char *master_addr, int master_port,
                                 double timeout_s, const zen_job_key *key, int *fds, char *err,
                                 size_t err_size)
{
    rdv r;
    rdv_init(&r, rank, size, timeout_s, key, fds, err, err_size);
    if (size == 1)
        return ZEN_OK;
    r.table = zen__calloc((size_t)size, sizeof *r.table);
    if (!r.table)
        return rdv_fail(&r, ZEN_ENOMEM, "no memory for a rank table of %d", size);
    zen_status st = ZEN_OK;
    uint32_t master = 0;
    const char *ifaddr = NULL;
    char why[300];
    int have_ifaddr = zen__param_strict("SOCKET_IFADDR", &ifaddr, why, sizeof why);
    if (have_ifaddr < 0)
        st = rdv_fail(&r, ZEN_EINVAL, "%s", why);
    else if (zen__job_key_required(key, why, sizeof why) != ZEN_OK)
        st = rdv_fail(&r, ZEN_EINVAL, "%s", why);
    else if (zen__sock_resolve(master_addr ? master_addr : "127.0.0.1", &master) != 0)
        st = rdv_fail(&r, ZEN_EINVAL, "cannot resolve the master address '%s'",
                      master_addr ? master_addr : "");
    else if (have_ifaddr && zen__sock_resolve(ifaddr, &r.my_addr) != 0)
        st = rdv_fail(&r, ZEN_EINVAL, "cannot parse ZEN_SOCKET_IFADDR '%s'", ifaddr);
    if (st == ZEN_OK && !key->set && !is_loopback(master) && rank == 0)
        ZEN_WARN("bootstrap",
                 "NO JOB SECRET on a network address (master %s): any host that reaches "
                 "the master port can join or disturb this job. Set ZEN_JOB_SECRET (same on "
                 "every rank) and ZEN_REQUIRE_SECRET=1; see docs/security.md",
                 master_addr ? master_addr : "?");
    if (st == ZEN_OK && rank == 0) {
        if (!have_ifaddr)
            r.my_addr = master == htonl(INADDR_ANY) ? htonl(INADDR_LOOPBACK) : master;
        r.listen_fd = zen__sock_listen(r.my_addr, 0, 0, &r.listen_port);
        if (r.listen_fd < 0) {
            st = rdv_fail(&r, ZEN_ESYS, "cannot listen: %s", strerror(-r.listen_fd));
        } else {
            r.table[0].addr = r.my_addr;
            r.table[0].port = r.listen_port;
            st = serve_registrations(&r, master, master_port);
        }
    } else if (st == ZEN_OK) {
        st = register_with_master(&r, master, master_port, have_ifaddr);
    }
    if (st == ZEN_OK)
        st = mesh(&r);
    close_fd(&r.listen_fd);
    zen__free(r.table);
    if (st != ZEN_OK)
        for (int p = 0; p < size; p++)
            close_fd(&fds[p]);
    return st;
}

zen_status zen__rendezvous(int rank, int size, const char *master_addr, int master_port,
                           double timeout_s, int *fds, char *err, size_t err_size)
{
    zen_job_key key;
    err[0] = '\0';
    for (int p = 0; p < size; p++)
        fds[p] = -1;
    zen_status st = zen__job_key_from_env(&key, err, err_size);
    if (st != ZEN_OK) {
        ZEN_ERROR("bootstrap", "rank %d: %s", rank, err);
        return st;
    }
    st = zen__rendezvous_keyed(rank, size, master_addr, master_port, timeout_s, &key, fds, err,
                               err_size);
    memset(&key, 0, sizeof key);
    return st;
}
