/*
 * tcp: one process per rank, a full mesh of TCP connections (built by src/bootstrap/rendezvous.c,
 * which hands the connected sockets to zen__transport_tcp_create).
 *
 * Receive side: one reader thread per peer connection reads frames and delivers them into this
 * rank's mailbox (mailbox.h). deliver_begin returns the posted receive's own buffer when the
 * receive was posted first, so the payload goes from the socket straight into the user buffer
 * (zero copy); otherwise into an unexpected-message buffer; dest NULL (too long for the posted
 * receive, or out of memory) means read and discard the bytes so the stream stays in sync.
 *
 * Send side: the calling thread writes header + payload with one writev under the peer's send
 * mutex and returns when the bytes are in the kernel (isend completes before returning). The
 * peer's reader threads always drain their sockets, so two ranks sending each other large
 * messages at the same time cannot deadlock. A send that makes no progress for the timeout
 * fails, naming the peer.
 *
 * Liveness: the settings are agreed first (liveness.h: the first frame on every connection is a
 * HEARTBEAT whose tag carries the sender's ZEN_HEARTBEAT_S and timeout, read before the readers
 * start). Then a heartbeat thread sends an empty HEARTBEAT frame to each peer every beat (never
 * blocking: skipped while a send holds the connection or its buffer is full, data being a
 * heartbeat too), also when this rank does not watch, and watches what arrives: a peer from which
 * nothing at all arrived for the window is stopped, hung or cut off, and this rank aborts naming
 * it. The ABORT frames carry that name to every other rank, so all survivors blame the silent
 * rank, not the neighbour that waits for it (as a timeout in a ring would). A receive that times
 * out first asks the same thread's record who has been silent (zen__tcp_silent_peer).
 *
 * Failures: end of stream or a socket error fails every receive from that peer (ZEN_EPEER); a bad
 * header fails it with ZEN_EPROTO. abort() fails this rank's requests and sends an ABORT frame
 * with the reason to every peer (best effort, never blocking), whose readers then fail all their
 * receives with "rank P aborted: <reason>", so an error reaches every rank fast, naming its cause.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/thread_sched.h"
#include "common/tunables.h"
#include "transport/liveness.h"
#include "transport/mailbox.h"
#include "transport/registry.h"
#include "transport/tcp_internal.h"
#include "transport/tcp_sock.h"

/* How long destroy waits for peers to close their side, so that no unread byte makes the
 * kernel reset a connection whose last messages the peer has not read yet. */
#define CLOSE_GRACE_NS (2 * (int64_t)1000000000)
/* The longest an abort waits for a connection another thread is writing (see tcp_abort). */
#define ABORT_LOCK_NS (250 * (int64_t)1000000)
#define POLL_SLICE_MS 200

typedef struct tcp_state tcp_state;

typedef struct tcp_peer {
    tcp_state *s;
    int rank;
    int fd;
    pthread_mutex_t send_lock;
    pthread_t reader;
    int reader_started;
    atomic_int broken; /* unusable for sends; why[] says why */
    char why[300];
    _Atomic int64_t last_rx_ns; /* when a byte last arrived from this peer */
    /* heartbeat thread only: last_rx_ns as it last saw it, and how long it has itself watched
     * that value stand still (observer time, see heartbeat_main) */
    int64_t hb_seen_rx;
    _Atomic int64_t hb_quiet_ns; /* also read by a timed-out wait (zen__tcp_silent_peer) */
    int hb_heard;                /* something arrived since the transport started */
    int rx_lowat;                /* the socket's SO_RCVLOWAT as the reader last set it */
} tcp_peer;

struct tcp_state {
    zen_transport base; /* first: a zen_transport * is a tcp_state * */
    zen_mailbox *mb;
    tcp_peer *peers;
    double timeout_s;
    int64_t stall_ns;
    atomic_int stopping; /* destroy: readers leave */
    atomic_int aborted;  /* abort or kill happened: refuse traffic, drop incoming data */
    atomic_int killed;   /* fault injection: behave as a dead process */
    atomic_int live_readers;
    pthread_mutex_t lock; /* peers[].why */
    int owns_mb;          /* 0: the mailbox belongs to an enclosing transport (shm's mixed mode) */
    zen_liveness live;    /* agreed with every peer at setup (agree_liveness) */
    uint64_t live_wire;   /* this rank's own settings, the tag of its heartbeats */
    int64_t silence_ns;   /* the watch window; INT64_MAX: this rank does not watch */
    int64_t beat_ns;      /* heartbeat period */
    int64_t suspect_ns;   /* silence that a timeout takes as proof (liveness.h) */
    pthread_t heartbeat;
    int heartbeat_started;
    atomic_int heartbeat_stop;
};

static const zen_transport_ops tcp_ops;

int zen__transport_is_tcp(const zen_transport *t)
{
    return t && t->ops == &tcp_ops;
}

/* Mark a connection unusable and fail every receive from that peer with status and msg. */
static void peer_broken(tcp_state *s, tcp_peer *pe, zen_status status, const char *msg)
{
    pthread_mutex_lock(&s->lock);
    if (!atomic_load(&pe->broken)) {
        snprintf(pe->why, sizeof pe->why, "%s", msg);
        atomic_store(&pe->broken, 1);
    }
    pthread_mutex_unlock(&s->lock);
    zen__mailbox_fail_peer(s->mb, pe->rank, status, msg);
}

enum {
    RD_OK,
    RD_STOP,
    RD_EOF,
    RD_ERR,
    RD_STALL
};

/*
 * Wake the reader once per RX_LOWAT_MAX bytes of a frame, not once per packet: SO_RCVLOWAT makes
 * poll report the socket readable only when that much is queued (or the stream ended, or the
 * receive window is nearly closed; tcp_poll). At 1 Gbit/s packets arrive every 12 us, and a
 * reader woken for each few of them spent most of its CPU (25 ms per 40 MB received, measured
 * on 4 ranks sharing 2 cores) on wake-ups and context switches, each one taking a core away from
 * the rank's training thread. Never more than the rest of the frame, so the wake-up that
 * completes a frame is never held back for bytes of a frame that may not come; the reader copies
 * at most RX_LOWAT_MAX bytes after the last packet (tens of microseconds).
 * Only the reader polls the socket for input, so the value is cached per peer. Failure (an old
 * kernel) leaves the default of 1 byte: correct, only more wake-ups.
 */
#define RX_LOWAT_MAX ((size_t)128 * 1024)

static void set_lowat(tcp_peer *pe, size_t rest)
{
    int want = (int)(rest < RX_LOWAT_MAX ? rest : RX_LOWAT_MAX);
    if (want == pe->rx_lowat)
        return;
    if (setsockopt(pe->fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want) == 0)
        pe->rx_lowat = want;
}

/*
 * Read exactly len bytes. Between messages (idle_ok) the connection may stay silent forever;
 * inside a message, silence longer than the timeout is a stalled peer. *partial tells whether
 * some bytes had arrived, *err the errno of RD_ERR.
 */
static int rd_exact(tcp_peer *pe, void *buf, size_t len, int idle_ok, int *partial, int *err)
{
    tcp_state *s = pe->s;
    char *p = buf;
    size_t got = 0;
    int64_t last = zen_now_ns();
    *partial = 0;
    while (got < len) {
        ssize_t n = recv(pe->fd, p + got, len - got, 0);
        if (n > 0) {
            got += (size_t)n;
            last = zen_now_ns();
            atomic_store(&pe->last_rx_ns, last);
            continue;
        }
        *partial = got > 0 || !idle_ok;
        if (n == 0)
            return RD_EOF;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            *err = errno;
            return RD_ERR;
        }
        if (atomic_load(&s->stopping))
            return RD_STOP;
        if (!(idle_ok && got == 0) && zen_now_ns() - last > s->stall_ns) /* never for INT64_MAX */
            return RD_STALL;
        set_lowat(pe, len - got);
        struct pollfd pf = { .fd = pe->fd, .events = POLLIN, .revents = 0 };
        (void)poll(&pf, 1, POLL_SLICE_MS);
    }
    return RD_OK;
}

static int rd_discard(tcp_peer *pe, uint64_t len, int *partial, int *err)
{
    char sink[16384];
    while (len > 0) {
        size_t n = len < sizeof sink ? (size_t)len : sizeof sink;
        int rc = rd_exact(pe, sink, n, 0, partial, err);
        if (rc != RD_OK)
            return rc;
        len -= n;
    }
    return RD_OK;
}

/* The reader stopped on rc: record why, naming the peer. */
static void read_ended(tcp_peer *pe, int rc, int partial, int err, zen_delivery *d)
{
    tcp_state *s = pe->s;
    char msg[400];
    zen_status st = ZEN_EPEER;
    switch (rc) {
    case RD_STOP:
        snprintf(msg, sizeof msg, "rank %d: connection closed locally", pe->rank);
        break;
    case RD_EOF:
        snprintf(msg, sizeof msg, "rank %d closed the connection (end of stream%s)", pe->rank,
                 partial ? " in the middle of a message" : "");
        break;
    case RD_STALL:
        st = ZEN_ETIMEDOUT;
        snprintf(msg, sizeof msg, "rank %d stopped sending in the middle of a message for %.1f s",
                 pe->rank, s->timeout_s);
        break;
    default:
        snprintf(msg, sizeof msg, "rank %d closed the connection (%s)", pe->rank, strerror(err));
        break;
    }
    if (d)
        zen__mailbox_deliver_fail(s->mb, d, st, msg);
    if (!atomic_load(&s->stopping) && !atomic_load(&s->aborted))
        ZEN_DEBUG("transport", "%s", msg);
    peer_broken(s, pe, st, msg);
}

/* A malformed frame: the stream cannot be resynchronised, so the peer is failed for good. */
static void protocol_error(tcp_peer *pe, const char *what, uint32_t a, uint64_t b)
{
    char msg[400];
    snprintf(msg, sizeof msg, "protocol error on the connection from rank %d: %s (%u, %llu)",
             pe->rank, what, a, (unsigned long long)b);
    ZEN_WARN("transport", "%s", msg);
    peer_broken(pe->s, pe, ZEN_EPROTO, msg);
    shutdown(pe->fd, SHUT_RDWR);
}

/* An ABORT frame: the job is failing; every receive fails naming the aborting peer. */
static int read_abort(tcp_peer *pe, uint64_t len)
{
    tcp_state *s = pe->s;
    char reason[ZEN_TCP_MAX_REASON + 1];
    int partial = 0, err = 0;
    int rc = rd_exact(pe, reason, (size_t)len, 0, &partial, &err);
    if (rc != RD_OK) {
        read_ended(pe, rc, partial, err, NULL);
        return -1;
    }
    reason[len] = '\0';
    for (uint64_t i = 0; i < len; i++)
        if ((unsigned char)reason[i] < 0x20)
            reason[i] = ' ';
    char msg[ZEN_TCP_MAX_REASON + 64];
    snprintf(msg, sizeof msg, "rank %d aborted: %s", pe->rank, reason);
    ZEN_INFO("transport", "%s", msg);
    peer_broken(s, pe, ZEN_EPEER, msg);
    zen__mailbox_fail_all(s->mb, ZEN_EPEER, msg);
    return 0;
}

static void *reader_main(void *arg)
{
    tcp_peer *pe = arg;
    tcp_state *s = pe->s;
    zen__log_set_thread_rank(s->base.rank);
    (void)prctl(PR_SET_NAME, "zen-tcp-rx"); /* top -H, /proc/PID/task/TID/comm */
    (void)zen__thread_comm_slice();         /* every ring hand-off wakes this thread */
    unsigned char h[ZEN_TCP_HEADER_BYTES];
    int aborted_by_peer = 0;
    for (;;) {
        int partial = 0, err = 0;
        int rc = rd_exact(pe, h, sizeof h, 1, &partial, &err);
        if (rc != RD_OK) {
            read_ended(pe, rc, partial, err, NULL);
            break;
        }
        uint32_t kind = 0;
        uint64_t tag = 0, len = 0;
        int hv = zen__tcp_parse_header(h, &kind, &tag, &len);
        if (hv == -1) {
            protocol_error(pe, "bad frame header (magic, version)", zen_get_u32(h),
                           zen_get_u16(h + 4));
            break;
        }
        if (hv != 0) {
            protocol_error(pe, "bad frame kind or length (kind, length)", kind, len);
            break;
        }
        if (kind == ZEN_TCP_KIND_ABORT) {
            if (read_abort(pe, len) != 0)
                break;
            aborted_by_peer = 1;
            continue;
        }
        if (kind == ZEN_TCP_KIND_HEARTBEAT)
            continue; /* its bytes already counted as a sign of life */
        if (aborted_by_peer || atomic_load(&s->aborted)) {
            /* Everything already failed: keep the stream in sync until the peer closes. */
            rc = rd_discard(pe, len, &partial, &err);
            if (rc != RD_OK) {
                read_ended(pe, rc, partial, err, NULL);
                break;
            }
            continue;
        }
        zen_delivery d;
        zen__mailbox_deliver_begin(s->mb, pe->rank, tag, (size_t)len, &d);
        rc = d.dest ? rd_exact(pe, d.dest, (size_t)len, 0, &partial, &err)
                    : rd_discard(pe, len, &partial, &err);
        if (rc != RD_OK) {
            read_ended(pe, rc, 1, err, &d);
            break;
        }
        zen__mailbox_deliver_end(s->mb, &d);
    }
    atomic_fetch_sub(&s->live_readers, 1);
    return NULL;
}

static void put_header(unsigned char *h, uint32_t kind, uint64_t tag, uint64_t len)
{
    zen_put_u32(h, ZEN_TCP_MAGIC);
    zen_put_u16(h + 4, ZEN_TCP_VERSION);
    zen_put_u16(h + 6, (uint16_t)kind);
    zen_put_u64(h + 8, tag);
    zen_put_u64(h + 16, len);
}

/* Common checks of a send to peer; ZEN_OK when the connection may be written. */
static zen_status send_check(tcp_state *s, int peer)
{
    zen_transport *t = &s->base;
    if (peer < 0 || peer >= t->size)
        return zen__transport_fail(t, ZEN_EINVAL, "send to rank %d of %d", peer, t->size);
    if (atomic_load(&s->aborted))
        return zen__transport_fail(t, ZEN_EABORTED, "send to rank %d after this rank aborted",
                                   peer);
    tcp_peer *pe = &s->peers[peer];
    if (peer != t->rank && atomic_load(&pe->broken)) {
        char why[sizeof pe->why];
        pthread_mutex_lock(&s->lock);
        snprintf(why, sizeof why, "%s", pe->why);
        pthread_mutex_unlock(&s->lock);
        return zen__transport_fail(t, ZEN_EPEER, "send to rank %d: %s", peer, why);
    }
    return ZEN_OK;
}

/* Write iov to peer under its send lock; a failure breaks the connection, naming the peer. */
static zen_status write_peer(tcp_state *s, int peer, struct iovec *iov, int iovcnt, size_t bytes)
{
    tcp_peer *pe = &s->peers[peer];
    pthread_mutex_lock(&pe->send_lock);
    int rc = zen__sock_writev_all(pe->fd, iov, iovcnt, s->stall_ns, INT64_MAX);
    pthread_mutex_unlock(&pe->send_lock);
    if (rc == 0)
        return ZEN_OK;
    if (atomic_load(&pe->broken)) { /* a reader or the heartbeat thread already said why */
        char why[sizeof pe->why];
        pthread_mutex_lock(&s->lock);
        snprintf(why, sizeof why, "%s", pe->why);
        pthread_mutex_unlock(&s->lock);
        return zen__transport_fail(&s->base, ZEN_EPEER, "send to rank %d: %s", peer, why);
    }
    char msg[300];
    zen_status st;
    if (rc == -ETIMEDOUT) {
        st = ZEN_ETIMEDOUT;
        snprintf(msg, sizeof msg,
                 "send of %zu bytes to rank %d made no progress for %.1f s: rank %d is not "
                 "reading (stuck or stopped)",
                 bytes, peer, s->timeout_s, peer);
    } else {
        st = ZEN_EPEER;
        snprintf(msg, sizeof msg,
                 "send of %zu bytes to rank %d failed: %s (rank %d closed the "
                 "connection or died)",
                 bytes, peer, strerror(-rc), peer);
    }
    /* The frame may be cut short: the stream is unusable from here on. */
    shutdown(pe->fd, SHUT_RDWR);
    peer_broken(s, pe, st, msg);
    return zen__transport_fail(&s->base, st, "%s", msg);
}

static zen_status tcp_isend(zen_transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                            zen_treq **req)
{
    tcp_state *s = (tcp_state *)t;
    *req = NULL;
    zen_status st = send_check(s, peer);
    if (st != ZEN_OK)
        return st;
    if (peer == t->rank) {
        zen__mailbox_deliver(s->mb, peer, tag, buf, len);
        return zen__mailbox_send_done(req);
    }
    unsigned char h[ZEN_TCP_HEADER_BYTES];
    put_header(h, ZEN_TCP_KIND_DATA, tag, len);
    struct iovec iov[2] = { { .iov_base = h, .iov_len = sizeof h },
                            { .iov_base = (void *)buf, .iov_len = len } };
    if ((st = write_peer(s, peer, iov, 2, len)) != ZEN_OK)
        return st;
    return zen__mailbox_send_done(req);
}

static zen_status tcp_send_raw(zen_transport *t, int peer, const void *bytes, size_t len)
{
    tcp_state *s = (tcp_state *)t;
    zen_status st = send_check(s, peer);
    if (st != ZEN_OK)
        return st;
    if (peer == t->rank)
        return zen__transport_fail(t, ZEN_EINVAL, "send_raw to itself");
    struct iovec iov = { .iov_base = (void *)bytes, .iov_len = len };
    return write_peer(s, peer, &iov, 1, len);
}

static zen_status tcp_irecv(zen_transport *t, int peer, uint64_t tag, void *buf, size_t cap,
                            zen_treq **req)
{
    tcp_state *s = (tcp_state *)t;
    zen_status st = zen__mailbox_irecv(s->mb, peer, tag, buf, cap, req);
    if (st == ZEN_EINVAL)
        return zen__transport_fail(t, st, "receive from rank %d of %d", peer, t->size);
    return st;
}

static zen_status tcp_wait(zen_transport *t, zen_treq *req, int64_t deadline_ns, size_t *len)
{
    return zen__mailbox_wait(((tcp_state *)t)->mb, req, deadline_ns, len);
}

static zen_status tcp_test(zen_transport *t, zen_treq *req, int *done, size_t *len)
{
    return zen__mailbox_test(((tcp_state *)t)->mb, req, done, len);
}

static void tcp_req_free(zen_transport *t, zen_treq *req)
{
    zen__mailbox_req_free(((tcp_state *)t)->mb, req);
}

static void tcp_abort(zen_transport *t, zen_status status, const char *reason)
{
    tcp_state *s = (tcp_state *)t;
    if (!reason || !*reason)
        reason = "aborted";
    if (atomic_exchange(&s->aborted, 1))
        return;
    zen__mailbox_fail_all(s->mb, status == ZEN_OK ? ZEN_EABORTED : status, reason);
    size_t rlen = strlen(reason);
    if (rlen > ZEN_TCP_MAX_REASON)
        rlen = ZEN_TCP_MAX_REASON;
    unsigned char frame[ZEN_TCP_HEADER_BYTES + ZEN_TCP_MAX_REASON];
    put_header(frame, ZEN_TCP_KIND_ABORT, 0, rlen);
    memcpy(frame + ZEN_TCP_HEADER_BYTES, reason, rlen);
    for (int p = 0; p < t->size; p++) {
        tcp_peer *pe = &s->peers[p];
        if (p == t->rank || pe->fd < 0)
            continue;
        /* Never block for long: wait at most ABORT_LOCK_NS for a writer that holds the
         * connection (the heartbeat thread holds it for microseconds; skipping the frame then
         * left the peer with a bare end of stream that names the wrong rank), and send only
         * what fits in the socket buffer. The shutdown tells the peer either way. */
        if (!atomic_load(&pe->broken) && zen_mutex_lock_within(&pe->send_lock, ABORT_LOCK_NS)) {
            (void)send(pe->fd, frame, ZEN_TCP_HEADER_BYTES + rlen, MSG_DONTWAIT | MSG_NOSIGNAL);
            pthread_mutex_unlock(&pe->send_lock);
        }
        shutdown(pe->fd, SHUT_WR);
    }
}

void zen__transport_tcp_kill(zen_transport *t)
{
    tcp_state *s = (tcp_state *)t;
    atomic_store(&s->killed, 1);
    if (atomic_exchange(&s->aborted, 1))
        return;
    zen__mailbox_fail_all(s->mb, ZEN_EABORTED, "this rank was killed by fault injection");
    for (int p = 0; p < t->size; p++)
        if (p != t->rank && s->peers[p].fd >= 0)
            shutdown(s->peers[p].fd, SHUT_RDWR);
}

/* One heartbeat to pe unless that would block: a send in progress (its bytes are a heartbeat)
 * or a full socket buffer (the peer is not reading; our silence is then its own doing). A
 * short write cannot be undone, so the rest is written blocking under the lock (the buffer had
 * room for the 24 bytes a moment before, so that is immediate in practice). */
static void send_heartbeat(tcp_state *s, tcp_peer *pe)
{
    if (atomic_load(&pe->broken) || pthread_mutex_trylock(&pe->send_lock) != 0)
        return;
    struct pollfd pf = { .fd = pe->fd, .events = POLLOUT, .revents = 0 };
    if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT)) {
        unsigned char h[ZEN_TCP_HEADER_BYTES];
        put_header(h, ZEN_TCP_KIND_HEARTBEAT, s->live_wire, 0);
        ssize_t n = send(pe->fd, h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0 && (size_t)n < sizeof h) {
            struct iovec iov = { .iov_base = h + n, .iov_len = sizeof h - (size_t)n };
            (void)zen__sock_writev_all(pe->fd, &iov, 1, s->stall_ns, INT64_MAX);
        }
    }
    pthread_mutex_unlock(&pe->send_lock);
}

/* Name the silent peer pe and abort: the ABORT frames carry the name to every survivor. */
static void name_silent_peer(tcp_state *s, tcp_peer *pe, int64_t quiet)
{
    char msg[300];
    zen__liveness_silent_msg(msg, sizeof msg, pe->rank, quiet, s->silence_ns,
                             "it is stopped, hung or cut off", "heartbeat ");
    ZEN_ERROR("transport", "%s", msg);
    peer_broken(s, pe, ZEN_ETIMEDOUT, msg);
    tcp_abort(&s->base, ZEN_ETIMEDOUT, msg);
}

static void *heartbeat_main(void *arg)
{
    tcp_state *s = arg;
    zen_transport *t = &s->base;
    zen__log_set_thread_rank(t->rank);
    (void)prctl(PR_SET_NAME, "zen-tcp-beat");
    int64_t period = s->beat_ns;
    /* Four looks per beat: silence is judged in beats (a peer is suspect after 5 quiet ones,
     * silent after the window, itself at least 5 beats), so a quarter beat is fine enough.
     * Looking more often only costs wake-ups: at the default 1 s beat a 50 ms look woke this
     * thread 20 times a second, which on a loaded 2-core VM cost 3-6 ms of CPU per second per
     * transport, taken from the rank's compute (docs/pytorch.md, "Heartbeat wake-ups"). */
    int64_t look_ns = period / 4;
    int64_t next = zen_now_ns(), last_look = next;
    while (!atomic_load(&s->heartbeat_stop) && !atomic_load(&s->aborted)) {
        int64_t now = zen_now_ns();
        if (now >= next) {
            for (int p = 0; p < t->size; p++)
                if (p != t->rank && s->peers[p].fd >= 0)
                    send_heartbeat(s, &s->peers[p]);
            next = now + period;
        }
        /* Silence is counted in this thread's own time, each gap between two looks at most
         * two looks long: a process that was itself descheduled (its readers too) must not
         * accuse a peer whose bytes sit unread in the socket. A peer never heard from yet gets
         * twice the window (a loaded host may be slow to start it). Counted also when this
         * rank does not watch: a timeout reads it. */
        int64_t gap = now - last_look;
        if (gap > 2 * look_ns)
            gap = 2 * look_ns;
        last_look = now;
        for (int p = 0; p < t->size; p++) {
            tcp_peer *pe = &s->peers[p];
            if (p == t->rank || pe->fd < 0 || atomic_load(&pe->broken))
                continue;
            int64_t rx = atomic_load(&pe->last_rx_ns);
            if (rx != pe->hb_seen_rx) {
                pe->hb_heard = pe->hb_heard || pe->hb_seen_rx != 0;
                pe->hb_seen_rx = rx;
                atomic_store(&pe->hb_quiet_ns, 0);
                continue;
            }
            int64_t quiet = atomic_load(&pe->hb_quiet_ns) + gap;
            atomic_store(&pe->hb_quiet_ns, quiet);
            if (s->silence_ns == INT64_MAX ||
                quiet <= (pe->hb_heard ? s->silence_ns : 2 * s->silence_ns))
                continue;
            name_silent_peer(s, pe, quiet);
            return NULL;
        }
        zen__sleep_ns(look_ns);
    }
    return NULL;
}

int zen__tcp_silent_peer(zen_transport *t, int64_t *quiet_ns)
{
    tcp_state *s = (tcp_state *)t;
    int who = -1;
    int64_t most = 0;
    for (int p = 0; p < t->size && s->heartbeat_started; p++) {
        tcp_peer *pe = &s->peers[p];
        if (p == t->rank || pe->fd < 0 || atomic_load(&pe->broken))
            continue;
        int64_t quiet = atomic_load(&pe->hb_quiet_ns);
        if (quiet >= s->suspect_ns && quiet > most) {
            who = p;
            most = quiet;
        }
    }
    *quiet_ns = most;
    return who;
}

static int silent_hook(void *arg, int64_t *quiet_ns)
{
    return zen__tcp_silent_peer(arg, quiet_ns);
}

zen_liveness zen__tcp_liveness(const zen_transport *t)
{
    return ((const tcp_state *)t)->live;
}

static void stop_heartbeat(tcp_state *s)
{
    if (!s->heartbeat_started)
        return;
    atomic_store(&s->heartbeat_stop, 1);
    pthread_join(s->heartbeat, NULL);
    s->heartbeat_started = 0;
}

static void tcp_free(tcp_state *s)
{
    if (s->peers) {
        for (int p = 0; p < s->base.size; p++) {
            if (s->peers[p].fd >= 0)
                close(s->peers[p].fd);
            pthread_mutex_destroy(&s->peers[p].send_lock);
        }
    }
    zen__free(s->peers);
    if (s->owns_mb)
        zen__mailbox_destroy(s->mb);
    pthread_mutex_destroy(&s->lock);
    zen__transport_base_release(&s->base);
    zen__free(s);
}

static void tcp_destroy(zen_transport *t)
{
    tcp_state *s = (tcp_state *)t;
    int n = t->size;
    stop_heartbeat(s); /* the peers are about to close: silence from here on is no news */
    for (int p = 0; p < n; p++)
        if (p != t->rank && s->peers[p].fd >= 0)
            shutdown(s->peers[p].fd, SHUT_WR);
    /* Let the readers drain until each peer closes too (normally a few ms: all ranks finish
     * together), bounded by the grace period. */
    int64_t grace = zen_ns_from_s(s->timeout_s);
    if (grace > CLOSE_GRACE_NS || grace <= 0)
        grace = CLOSE_GRACE_NS;
    int64_t until = zen_now_ns() + grace;
    while (atomic_load(&s->live_readers) > 0 && zen_now_ns() < until)
        zen__sleep_ns(1000000);
    atomic_store(&s->stopping, 1);
    for (int p = 0; p < n; p++)
        if (p != t->rank && s->peers[p].fd >= 0)
            shutdown(s->peers[p].fd, SHUT_RDWR);
    for (int p = 0; p < n; p++)
        if (s->peers[p].reader_started)
            pthread_join(s->peers[p].reader, NULL);
    tcp_free(s);
}

static const zen_transport_ops tcp_ops = {
    .name = "tcp",
    .isend = tcp_isend,
    .irecv = tcp_irecv,
    .wait = tcp_wait,
    .test = tcp_test,
    .req_free = tcp_req_free,
    .abort = tcp_abort,
    .destroy = tcp_destroy,
    .send_raw = tcp_send_raw,
};

static zen_status start_readers(tcp_state *s)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 512 * 1024);
    zen_status st = ZEN_OK;
    for (int p = 0; p < s->base.size && st == ZEN_OK; p++) {
        tcp_peer *pe = &s->peers[p];
        if (p == s->base.rank || pe->fd < 0) /* -1: a peer another transport serves (shm) */
            continue;
        atomic_fetch_add(&s->live_readers, 1);
        if (pthread_create(&pe->reader, &attr, reader_main, pe) != 0) {
            atomic_fetch_sub(&s->live_readers, 1);
            st = zen__transport_fail(&s->base, ZEN_ESYS,
                                     "cannot start the reader thread for rank %d", p);
        } else {
            pe->reader_started = 1;
        }
    }
    pthread_attr_destroy(&attr);
    return st;
}

/* Send this rank's liveness settings to one peer: a HEARTBEAT frame, the first on the stream. */
static zen_status send_settings(tcp_state *s, tcp_peer *pe, int64_t deadline)
{
    unsigned char h[ZEN_TCP_HEADER_BYTES];
    put_header(h, ZEN_TCP_KIND_HEARTBEAT, s->live_wire, 0);
    struct iovec iov = { .iov_base = h, .iov_len = sizeof h };
    int rc = zen__sock_writev_all(pe->fd, &iov, 1, s->stall_ns, deadline);
    if (rc == 0)
        return ZEN_OK;
    return zen__transport_fail(&s->base, rc == -ETIMEDOUT ? ZEN_ETIMEDOUT : ZEN_EPEER,
                               "setup: cannot send the heartbeat settings to rank %d: %s", pe->rank,
                               strerror(-rc));
}

/* Read one peer's first frame, its settings, and fold them into s->live. */
static zen_status read_settings(tcp_state *s, tcp_peer *pe, int64_t deadline)
{
    unsigned char h[ZEN_TCP_HEADER_BYTES];
    int rc = zen__sock_read_all(pe->fd, h, sizeof h, deadline);
    if (rc == -ETIMEDOUT)
        return zen__transport_fail(&s->base, ZEN_ETIMEDOUT,
                                   "setup: rank %d sent no heartbeat settings within %.1f s: rank "
                                   "%d is missing, slow or stuck",
                                   pe->rank, s->timeout_s, pe->rank);
    if (rc != 0)
        return zen__transport_fail(&s->base, ZEN_EPEER,
                                   "setup: rank %d closed the connection before its heartbeat "
                                   "settings (%s)",
                                   pe->rank, strerror(-rc));
    uint32_t kind = 0;
    uint64_t tag = 0, len = 0;
    if (zen__tcp_parse_header(h, &kind, &tag, &len) != 0 || kind != ZEN_TCP_KIND_HEARTBEAT)
        return zen__transport_fail(&s->base, ZEN_EPROTO,
                                   "protocol error on the connection from rank %d: its first frame "
                                   "is not a HEARTBEAT with its settings (kind %u)",
                                   pe->rank, kind);
    zen_liveness theirs = zen__liveness_decode(tag);
    zen__liveness_merge(&s->live, &theirs);
    return ZEN_OK;
}

/* Agree the liveness settings with every peer (liveness.h): all send, then all read, so nobody
 * waits for a peer that waits for it. floor (mixed mode) already holds the local peers'. */
static zen_status agree_liveness(tcp_state *s, const zen_liveness *floor)
{
    zen_liveness mine = zen__liveness_mine(s->timeout_s);
    s->live_wire = zen__liveness_encode(&mine);
    s->live = floor ? *floor : mine;
    int64_t deadline = zen_deadline_after(s->timeout_s);
    zen_status st = ZEN_OK;
    for (int p = 0; p < s->base.size && st == ZEN_OK; p++)
        if (p != s->base.rank && s->peers[p].fd >= 0)
            st = send_settings(s, &s->peers[p], deadline);
    for (int p = 0; p < s->base.size && st == ZEN_OK; p++)
        if (p != s->base.rank && s->peers[p].fd >= 0)
            st = read_settings(s, &s->peers[p], deadline);
    s->silence_ns = zen__liveness_window_ns(&s->live);
    s->beat_ns = zen__liveness_beat_ns(&s->live);
    s->suspect_ns = zen__liveness_suspect_ns(&s->live);
    return st;
}

static zen_status tcp_create(int rank, int size, int *fds, double timeout_s, zen_mailbox *shared_mb,
                             const zen_liveness *floor, zen_transport **out);

zen_status zen__transport_tcp_create(int rank, int size, int *fds, double timeout_s,
                                     zen_transport **out)
{
    return tcp_create(rank, size, fds, timeout_s, NULL, NULL, out);
}

zen_status zen__transport_tcp_create_shared(int rank, int size, int *fds, double timeout_s,
                                            zen_mailbox *mb, const zen_liveness *local,
                                            zen_transport **out)
{
    return tcp_create(rank, size, fds, timeout_s, mb, local, out);
}

static zen_status tcp_create(int rank, int size, int *fds, double timeout_s, zen_mailbox *shared_mb,
                             const zen_liveness *floor, zen_transport **out)
{
    *out = NULL;
    if (size < 1 || rank < 0 || rank >= size || !fds) {
        ZEN_ERROR("transport", "tcp: invalid rank %d / world size %d", rank, size);
        return ZEN_EINVAL;
    }
    tcp_state *s = zen__calloc(1, sizeof *s);
    if (!s)
        return ZEN_ENOMEM;
    zen__transport_base_init(&s->base, &tcp_ops, s, rank, size);
    pthread_mutex_init(&s->lock, NULL);
    s->timeout_s = timeout_s > 0 ? timeout_s : 300;
    s->stall_ns = zen_ns_from_s(s->timeout_s); /* INT64_MAX for inf: never a stall */
    s->peers = zen__calloc((size_t)size, sizeof *s->peers);
    s->owns_mb = shared_mb == NULL;
    s->mb = shared_mb;
    zen_status st = !s->peers   ? ZEN_ENOMEM
                    : shared_mb ? ZEN_OK
                                : zen__mailbox_create(&s->base, size, &s->mb);
    if (st == ZEN_OK && s->owns_mb) /* shm's mixed mode blames through its own wait */
        zen__mailbox_set_silent(s->mb, silent_hook, &s->base);
    if (st != ZEN_OK) {
        for (int p = 0; p < size; p++) {
            if (fds[p] >= 0)
                close(fds[p]);
            fds[p] = -1;
            if (s->peers)
                s->peers[p].fd = -1;
        }
        tcp_free(s);
        return st;
    }
    for (int p = 0; p < size; p++) {
        s->peers[p].s = s;
        s->peers[p].rank = p;
        s->peers[p].fd = fds[p];
        s->peers[p].rx_lowat = 1; /* the kernel's default */
        fds[p] = -1;              /* the transport owns the sockets now */
        pthread_mutex_init(&s->peers[p].send_lock, NULL);
        if (s->peers[p].fd >= 0)
            zen__sock_tune(s->peers[p].fd);
    }
    int64_t start = zen_now_ns();
    for (int p = 0; p < size; p++)
        atomic_store(&s->peers[p].last_rx_ns, start);
    if ((st = agree_liveness(s, floor)) == ZEN_OK && (st = start_readers(s)) == ZEN_OK &&
        size > 1) {
        if (pthread_create(&s->heartbeat, NULL, heartbeat_main, s) != 0)
            st = zen__transport_fail(&s->base, ZEN_ESYS, "cannot start the heartbeat thread");
        else
            s->heartbeat_started = 1;
    }
    if (st != ZEN_OK) {
        tcp_abort(&s->base, st, "tcp transport setup failed");
        tcp_destroy(&s->base);
        return st;
    }
    *out = &s->base;
    return ZEN_OK;
}

/* The bootstrap builds the mesh of sockets (rendezvous), then the transport takes them over. */
static zen_status tcp_open(const zen_transport_open_args *a, zen_transport **out,
                           zen_transport_kind *kind)
{
    (void)kind;
    zen_status st = zen__transport_need_rank(a, "tcp");
    if (st != ZEN_OK)
        return st;
    if (!a->store && (a->master_port < 1 || a->master_port > 65535)) {
        ZEN_ERROR("init", "tcp: master port %d is not a port number", a->master_port);
        return ZEN_EINVAL;
    }
    int *fds = zen__malloc_array((size_t)a->size, sizeof *fds);
    if (!fds)
        return ZEN_ENOMEM;
    char err[512];
    int64_t t0 = zen_now_ns();
    st = a->boot->mesh(a, fds, err, sizeof err);
    if (st == ZEN_OK) {
        st = zen__transport_tcp_create(a->rank, a->size, fds, a->timeout_s, out);
        ZEN_INFO("init", "tcp: rank %d of %d connected to its peers in %.3f s", a->rank, a->size,
                 (double)(zen_now_ns() - t0) / 1e9);
    }
    zen__free(fds);
    return st;
}

/* A 10 GbE-class link; the kernel's socket copies are CPU the cost model charges per byte. */
const zen_transport_desc zen__transport_tcp_desc = {
    .name = "tcp",
    .kind = ZEN_TRANSPORT_TCP,
    .open = tcp_open,
    .traits = { .reach = ZEN_REACH_HOSTS,
                .latency_us = 50,
                .gbps = 10,
                .wire_copies = -1,
                .store_rendezvous = true },
};
