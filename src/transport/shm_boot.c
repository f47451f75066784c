/*
 * shm setup: the Unix socket that hands segments over, the single-copy probe and the hand-over
 * itself (see shm.h for the steps). Everything here runs once, before any traffic, under the
 * communicator's deadline; a failure names the peer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/tunables.h"
#include "common/wait_report.h"
#include "transport/shm_hand.h"
#include "transport/shm_internal.h"

/* 2: the segment head holds a heartbeat word; 3: and the liveness settings */
#define BOOT_VERSION 3u

void (*zen__shm_boot_test_hook)(int stage, int rank, const char *sock_name);

struct zen_shm_boot {
    int listen_fd;
};

/* The value the probe reads from every peer; any process has it at cookie_addr. */
static const uint64_t probe_cookie = 0x7a656e2d636d6121ull;

static void abstract_addr(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    size_t n = strlen(name);
    memcpy(sa->sun_path + 1, name, n); /* sun_path[0] = 0: the abstract namespace */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static uint64_t random64(void)
{
    uint64_t r = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&r, sizeof r, 1, f) != 1)
        r = (uint64_t)zen_wall_ns() ^ ((uint64_t)getpid() << 32);
    if (f)
        fclose(f);
    return r;
}

zen_status zen__shm_boot_begin(zen_shm_boot **out, zen_shm_blob *mine)
{
    *out = NULL;
    memset(mine, 0, sizeof *mine);
    zen_shm_boot *b = zen__calloc(1, sizeof *b);
    if (!b)
        return ZEN_ENOMEM;
    b->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (b->listen_fd < 0) {
        zen__free(b);
        return ZEN_ESYS;
    }
    /* A random name: concurrent jobs (and the tests' forked ranks) never collide, and no
     * other process can guess where to connect before the mesh told the peers. */
    snprintf(mine->sock_name, sizeof mine->sock_name, "zen-shm-%d-%016llx", (int)getpid(),
             (unsigned long long)random64());
    struct sockaddr_un sa;
    socklen_t len;
    abstract_addr(mine->sock_name, &sa, &len);
    if (bind(b->listen_fd, (struct sockaddr *)&sa, len) != 0 || listen(b->listen_fd, 256) != 0) {
        close(b->listen_fd);
        zen__free(b);
        return ZEN_ESYS;
    }
    if (zen__shm_boot_test_hook)
        zen__shm_boot_test_hook(0, -1, mine->sock_name);
    mine->pid = (uint32_t)getpid();
    mine->version = BOOT_VERSION;
    mine->cookie_addr = (uint64_t)(uintptr_t)&probe_cookie;
    *out = b;
    return ZEN_OK;
}

void zen__shm_boot_cancel(zen_shm_boot *b)
{
    if (!b)
        return;
    if (b->listen_fd >= 0)
        close(b->listen_fd);
    zen__free(b);
}

/* Can this process read peer's memory (CMA)? Needs the same uid and ptrace permission (Yama
 * ptrace_scope, container seccomp profiles may forbid it): probe once, fall back to the ring. */
static int probe_cma(const zen_shm_blob *peer)
{
    uint64_t got = 0;
    struct iovec l = { .iov_base = &got, .iov_len = sizeof got };
    struct iovec r = { .iov_base = (void *)(uintptr_t)peer->cookie_addr, .iov_len = sizeof got };
    ssize_t n = process_vm_readv((pid_t)peer->pid, &l, 1, &r, 1, 0);
    return n == (ssize_t)sizeof got && got == probe_cookie;
}

/* Set a socket's send/receive timeouts to what is left until the deadline. */
static void sock_deadline(int fd, int64_t deadline)
{
    int64_t left = deadline - zen_now_ns();
    if (left < 1000000)
        left = 1000000;
    struct timeval tv = { .tv_sec = (time_t)(left / 1000000000),
                          .tv_usec = (suseconds_t)(left % 1000000000 / 1000) };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* Send this rank's hand-over message with the segment's descriptor. */
static int send_seg(int fd, int rank, int memfd, size_t seg_bytes)
{
    unsigned char m[ZEN_SHM_HAND_BYTES];
    zen__shm_hand_encode(m, (uint32_t)rank, seg_bytes);
    struct iovec iov = { .iov_base = m, .iov_len = sizeof m };
    char ctl[CMSG_SPACE(sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl
    };
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &memfd, sizeof(int));
    return sendmsg(fd, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof m ? 0 : -1;
}

/*
 * One recvmsg of the rest of a hand-over message into buf[*have..]: *have grows by what came,
 * and the first descriptor that comes along goes to *memfd (any other is closed; the kernel
 * discards those that do not fit the control buffer). Returns recvmsg's result.
 */
static ssize_t recv_part(int fd, unsigned char *buf, size_t *have, int *memfd, int flags)
{
    struct iovec iov = { .iov_base = buf + *have, .iov_len = ZEN_SHM_HAND_BYTES - *have };
    char ctl[CMSG_SPACE(sizeof(int))];
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl
    };
    ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | flags);
    if (n < 0)
        return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*memfd < 0)
                *memfd = got;
            else
                close(got);
        }
    }
    *have += (size_t)n;
    return n;
}

/* Receive rank want's hand-over (blocking, under the socket's timeouts). 0 with a descriptor in
 * *memfd, or -1 with errno set (EPROTO: a wrong message or no descriptor). */
static int recv_seg(int fd, uint32_t want, zen_shm_hand *h, int *memfd)
{
    *memfd = -1;
    unsigned char buf[ZEN_SHM_HAND_BYTES];
    size_t have = 0;
    int r = 1;
    while (r == 1) {
        ssize_t n = recv_part(fd, buf, &have, memfd, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ECONNRESET;
            break;
        }
        r = zen__shm_hand_parse(buf, have, want, h);
    }
    if (r == 0 && *memfd >= 0)
        return 0;
    if (r != 1)
        errno = EPROTO;
    if (*memfd >= 0)
        close(*memfd);
    *memfd = -1;
    return -1;
}

/* ZEN_SHM_PREFAULT=-1 prefaults up to this much ring memory per host: 32 processes at 512 KiB. */
#define PREFAULT_HOST_MAX (512.0 * 1024 * 1024)

/*
 * Map [p, p + len) of a shared mapping now, at setup, and touch every page from this process.
 * Untouched, a ring's pages are first used one by one as its stream passes over them, on both
 * sides, and the small messages of a sparse collective advance a 512 KiB ring by a few pages a
 * call: on the shared 2-core VM an allgather of 4 processes took 1.2-1.9 ms a call until its rings
 * had wrapped once (call 29) and 0.25-0.4 ms after, 16 processes 24-30 ms against 4-5 ms (a 64
 * KiB ring wrapped at call 4, a 2 MiB one not within 100). MADV_POPULATE_WRITE (Linux 5.14)
 * allocates and maps the pages in one call, which took the page faults away (no minor fault
 * after setup) but only half the slowdown; reading each page once from user space took the rest
 * (that VM's kernel is a PVM guest, and our reading is that its hypervisor builds its own entry
 * for a page at the first access from user space; docs/benchmarks.md). On shmem a read maps the
 * page writable, so the reads alone also work where the madvise is missing.
 */
static void prefault(const shm_state *s, void *p, size_t len)
{
    long mode = zen__param_long("SHM_PREFAULT");
    /* by default only while the host's rings (nlocal^2 of them) stay small: untouched pages of
     * rings that no algorithm uses cost no memory */
    double host_bytes = (double)s->nlocal * (double)s->nlocal * (double)s->ring_bytes;
    if (mode == 0 || (mode < 0 && host_bytes > PREFAULT_HOST_MAX) || len == 0)
        return;
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
    (void)madvise(p, len, MADV_POPULATE_WRITE); /* EINVAL before 5.14: the reads fault them in */
    long page = sysconf(_SC_PAGESIZE);
    size_t step = page > 0 ? (size_t)page : 4096;
    for (size_t i = 0; i < len; i += step)
        (void)*(volatile const char *)((const char *)p + i);
}

/* Fill pe's pointers into a mapped peer segment. */
static void attach_peer(shm_state *s, shm_peer *pe, void *seg, size_t seg_bytes)
{
    int me = s->peers[s->base.rank].lidx;
    pe->seg = seg;
    pe->seg_bytes = seg_bytes;
    pe->bell = &((zen_shm_seg_head *)seg)->bell;
    pe->out_ctl = (zen_shm_ring *)((char *)seg + zen_shm_ring_ctl_off(me));
    pe->out_data = (char *)seg + zen_shm_ring_data_off(s->nlocal, s->ring_bytes, me);
}

/* Map a peer's segment from its descriptor and check it is what the peer announced. */
static zen_status map_peer(shm_state *s, shm_peer *pe, int memfd, size_t seg_bytes)
{
    size_t want = zen_shm_seg_bytes(s->nlocal, s->ring_bytes);
    if (seg_bytes != want)
        return zen__transport_fail(&s->base, ZEN_EMISMATCH,
                                   "shm: rank %d's segment has %zu bytes, expected %zu (different "
                                   "ZEN_SHM_RING_KB?)",
                                   pe->rank, seg_bytes, want);
    void *p = mmap(NULL, seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (p == MAP_FAILED)
        return zen__transport_fail(&s->base, ZEN_ESYS, "shm: cannot map rank %d's segment: %s",
                                   pe->rank, strerror(errno));
    const zen_shm_seg_head *h = p;
    if (h->magic != ZEN_SHM_MAGIC || (int)h->nlocal != s->nlocal ||
        h->ring_bytes != s->ring_bytes) {
        munmap(p, seg_bytes);
        return zen__transport_fail(&s->base, ZEN_EMISMATCH,
                                   "shm: rank %d's segment does not match this job", pe->rank);
    }
    attach_peer(s, pe, p, seg_bytes);
    /* what this process touches in the peer's segment: the head and ring controls, and the data
     * of the ring it produces into */
    int me = s->peers[s->base.rank].lidx;
    prefault(s, p, zen_shm_ring_data_off(s->nlocal, s->ring_bytes, 0));
    prefault(s, (char *)p + zen_shm_ring_data_off(s->nlocal, s->ring_bytes, me), s->ring_bytes);
    prefault(s, (char *)p + zen_shm_slot_off(s->nlocal, s->ring_bytes, 0),
             2 * ZEN_SHM_SLOT_STRIDE); /* the collective slots, read by every peer */
    return ZEN_OK;
}

/* The peer at the other end of a Unix connection must be the process the mesh announced. */
static int peer_pid_ok(int fd, uint32_t pid)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && (uint32_t)cr.pid == pid;
}

/* Wait until rank peer answers the hand-over (it does from its accept loop, after its own
 * connects), saying every ZEN_WAIT_REPORT_S that this rank waits. 0, or -1 with errno
 * (ETIMEDOUT at the deadline). */
static int await_answer(const shm_state *s, int fd, int peer, int64_t deadline)
{
    zen_wait_report w;
    zen__wait_report_start(&w);
    for (;;) {
        int64_t now = zen_now_ns();
        if (now >= deadline) {
            errno = ETIMEDOUT;
            return -1;
        }
        int64_t ms = (zen__wait_report_slice(&w, deadline) - now) / 1000000 + 1;
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        int k = poll(&pf, 1, ms > 1000 ? 1000 : (int)ms);
        if (k > 0)
            return 0;
        if (k < 0 && errno != EINTR)
            return -1;
        if (zen__wait_report_due(&w)) {
            char times[48];
            zen__wait_report_times(&w, deadline, times, sizeof times);
            ZEN_WARN("shm",
                     "rank %d: shm setup: still waiting for rank %d to answer the hand-over "
                     "(%s)",
                     s->base.rank, peer, times);
        }
    }
}

/* A hand-over with rank peer failed: errno says why. */
static zen_status hand_failed(shm_state *s, int peer)
{
    return zen__transport_fail(&s->base, ZEN_EPEER,
                               "shm: handing segments over with rank %d failed (%s)", peer,
                               errno == EPROTO ? "a malformed reply" : strerror(errno));
}

/* Higher ranks connect to lower ones: connect, send ours, receive theirs. */
static zen_status hand_connect(shm_state *s, const zen_shm_blob *blob, shm_peer *pe, int memfd,
                               int64_t deadline)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return zen__transport_fail(&s->base, ZEN_ESYS, "shm: socket: %s", strerror(errno));
    sock_deadline(fd, deadline);
    struct sockaddr_un sa;
    socklen_t len;
    abstract_addr(blob->sock_name, &sa, &len);
    zen_status st = ZEN_OK;
    zen_shm_hand m = { 0, 0 };
    int theirs = -1;
    if (connect(fd, (struct sockaddr *)&sa, len) != 0)
        st = zen__transport_fail(&s->base, ZEN_EPEER,
                                 "shm: cannot reach rank %d's socket (%s): is it in another "
                                 "network namespace with the same host id? (set ZEN_HOST_ID or "
                                 "--transport tcp)",
                                 pe->rank, strerror(errno));
    else if (!peer_pid_ok(fd, blob->pid))
        st = zen__transport_fail(&s->base, ZEN_EPROTO,
                                 "shm: the socket of rank %d belongs to another process", pe->rank);
    else if (send_seg(fd, s->base.rank, memfd, s->seg_bytes) != 0)
        st = hand_failed(s, pe->rank);
    else if (await_answer(s, fd, pe->rank, deadline) != 0)
        st = errno != ETIMEDOUT ? hand_failed(s, pe->rank)
                                : zen__transport_fail(&s->base, ZEN_ETIMEDOUT,
                                                      "shm: rank %d never answered the hand-over "
                                                      "(stalled, or still handing over with lower "
                                                      "ranks)",
                                                      pe->rank);
    else if (recv_seg(fd, (uint32_t)pe->rank, &m, &theirs) != 0)
        st = hand_failed(s, pe->rank);
    if (st == ZEN_OK)
        st = map_peer(s, pe, theirs, (size_t)m.seg_bytes);
    if (theirs >= 0)
        close(theirs);
    close(fd);
    return st;
}

/*
 * Lower ranks accept from every higher local rank, in whatever order they come. The socket's name
 * is listed in /proc/net/unix, so anyone on the host can connect to it: SO_PEERCRED is checked
 * at accept, and a connection whose process is of another user, or is not one of the local ranks
 * still to hand over (their pids came with the blobs), is closed at once. Connections from those
 * pids are read together, without blocking, each for at most HAND_CONN_NS: none can hold up the
 * others, and the overall deadline names every rank that never handed over.
 */

/* A genuine rank sends its message right after connecting; one that has not within this time is
 * stopped or stuck, and its connection is dropped (it then fails on its side, naming this rank). */
#define HAND_CONN_NS (5LL * 1000000000)
/* Connections of the job's own pids read at once (a peer connects once; more drop the oldest). */
#define HAND_PENDING_MAX 32
/* Refused connections logged one by one; the rest are counted in one line at the end. */
#define HAND_LOG_MAX 4

typedef struct hand_conn {
    int fd;
    int peer;  /* the rank whose pid is at the other end; -1: several ranks share the pid */
    pid_t pid; /* the other end's process (SO_PEERCRED) */
    int memfd; /* the descriptor it sent, -1: none yet */
    size_t have;
    int64_t until; /* dropped at */
    unsigned char buf[ZEN_SHM_HAND_BYTES];
} hand_conn;

typedef struct hand_acc {
    shm_state *s;
    int listen_fd;
    const zen_shm_blob *blobs;
    int memfd; /* this rank's segment */
    int64_t deadline;
    int need; /* local ranks still to hand over */
    int nconn;
    unsigned refused;
    int64_t accept_pause; /* after an accept error (EMFILE...): leave the listener until then */
    hand_conn conn[HAND_PENDING_MAX];
} hand_acc;

static void refuse(hand_acc *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void refuse(hand_acc *a, const char *fmt, ...)
{
    if (++a->refused > HAND_LOG_MAX)
        return;
    char why[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    ZEN_WARN("shm", "rank %d: refused a connection to the shm setup socket: %s%s", a->s->base.rank,
             why, a->refused == HAND_LOG_MAX ? " (further refusals are only counted)" : "");
}

static void conn_close(hand_conn *c)
{
    if (c->memfd >= 0)
        close(c->memfd);
    close(c->fd);
    c->memfd = -1;
    c->fd = -1;
}

static int is_waiting(const hand_acc *a, int p, pid_t pid)
{
    const shm_state *s = a->s;
    return p > s->base.rank && p < s->base.size && s->peers[p].lidx >= 0 && !s->peers[p].seg &&
           (pid_t)a->blobs[p].pid == pid;
}

/* The local rank above this one, not yet handed over, whose process is pid; -1: none; -2:
 * several (ranks that are threads of one process, as in-process tests run them: the message
 * then says which). */
static int waiting_rank(const hand_acc *a, pid_t pid)
{
    int found = -1;
    for (int p = a->s->base.rank + 1; p < a->s->base.size; p++)
        if (is_waiting(a, p, pid))
            found = found == -1 ? p : -2;
    return found;
}

/* Accept every queued connection: refuse strangers at once, keep the job's ranks pending. */
static void accept_new(hand_acc *a)
{
    for (;;) {
        int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                a->accept_pause = zen_now_ns() + 10 * 1000000; /* EMFILE: do not spin */
            return;
        }
        struct ucred cr;
        socklen_t len = sizeof cr;
        int peer = -1;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
            refuse(a, "no peer credentials (%s)", strerror(errno));
        else if (cr.uid != geteuid())
            refuse(a, "pid %d belongs to another user (uid %u)", (int)cr.pid, (unsigned)cr.uid);
        else if ((peer = waiting_rank(a, cr.pid)) == -1)
            refuse(a, "pid %d is not a local rank of this job still to hand over", (int)cr.pid);
        if (peer == -1) {
            close(fd);
            continue;
        }
        if (a->nconn == HAND_PENDING_MAX) { /* drop the oldest */
            refuse(a, "%d connections of this job pending", HAND_PENDING_MAX);
            conn_close(&a->conn[0]);
            memmove(&a->conn[0], &a->conn[1], (size_t)(a->nconn - 1) * sizeof a->conn[0]);
            a->nconn--;
        }
        int64_t until = zen_now_ns() + HAND_CONN_NS;
        a->conn[a->nconn++] = (hand_conn){ .fd = fd,
                                           .peer = peer < 0 ? -1 : peer,
                                           .pid = cr.pid,
                                           .memfd = -1,
                                           .until = until < a->deadline ? until : a->deadline };
    }
}

/* Read what has arrived on c; once the message is whole, hand ours back and map theirs. c->fd
 * is -1 afterwards when c is done with (served or dropped). A failure of the job is returned. */
static zen_status read_conn(hand_acc *a, hand_conn *c)
{
    shm_state *s = a->s;
    ssize_t n = recv_part(c->fd, c->buf, &c->have, &c->memfd, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return ZEN_OK;
    if (n <= 0 || (c->peer >= 0 && s->peers[c->peer].seg)) {
        /* closed without a message (a rank that died is named when the deadline passes), or a
         * second connection of a rank already handed over */
        refuse(a, "rank %d's pid %s", c->peer,
               n <= 0 ? "closed its connection before handing over" : "connected twice");
        conn_close(c);
        return ZEN_OK;
    }
    zen_shm_hand h;
    int r = zen__shm_hand_parse(c->buf, c->have,
                                c->peer >= 0 ? (uint32_t)c->peer : ZEN_SHM_HAND_ANY_RANK, &h);
    if (r == 1)
        return ZEN_OK;
    if (r == 0 && c->peer < 0) { /* a process of several ranks: the message names one of them */
        if (h.rank > INT32_MAX || !is_waiting(a, (int)h.rank, c->pid)) {
            refuse(a, "pid %d named rank %u, not one of its ranks still to hand over", (int)c->pid,
                   (unsigned)h.rank);
            conn_close(c);
            return ZEN_OK;
        }
        c->peer = (int)h.rank;
    }
    zen_status st = ZEN_OK;
    /* the process is the rank's own (SO_PEERCRED): a wrong message is the rank's fault */
    if (r < 0 || c->memfd < 0)
        st = zen__transport_fail(&s->base, ZEN_EPROTO,
                                 "shm: rank %d (pid %d) sent a malformed segment hand-over (%s)",
                                 c->peer, (int)c->pid, r < 0 ? "wrong bytes" : "no descriptor");
    else if (send_seg(c->fd, s->base.rank, a->memfd, s->seg_bytes) != 0)
        st = zen__transport_fail(&s->base, ZEN_EPEER,
                                 "shm: handing this segment to rank %d failed: %s", c->peer,
                                 strerror(errno));
    else
        st = map_peer(s, &s->peers[c->peer], c->memfd, (size_t)h.seg_bytes);
    if (st == ZEN_OK)
        a->need--;
    conn_close(c);
    return st;
}

/* The local ranks that have not handed over yet, as "2, 3" into list; returns their number. */
static int missing_ranks(const hand_acc *a, char *list, size_t size)
{
    const shm_state *s = a->s;
    size_t used = 0;
    int k = 0;
    list[0] = '\0';
    for (int p = s->base.rank + 1; p < s->base.size; p++) {
        if (s->peers[p].lidx < 0 || s->peers[p].seg || used >= size)
            continue;
        int w = snprintf(list + used, size - used, "%s%d", k ? ", " : "", p);
        used += w > 0 ? (size_t)w : 0;
        k++;
    }
    return k;
}

/* The overall deadline passed: name every local rank that has not handed over. */
static zen_status hand_missing(hand_acc *a)
{
    char list[256];
    int k = missing_ranks(a, list, sizeof list);
    char refused[80] = "";
    if (a->refused)
        snprintf(refused, sizeof refused, " (%u other connection%s to the setup socket refused)",
                 a->refused, a->refused == 1 ? "" : "s");
    return zen__transport_fail(&a->s->base, ZEN_ETIMEDOUT,
                               "shm: rank%s %s never handed over %s segment%s%s", k > 1 ? "s" : "",
                               list, k > 1 ? "their" : "its", k > 1 ? "s" : "", refused);
}

/* Every ZEN_WAIT_REPORT_S of the hand-over: whom this rank still waits for. */
static void hand_report(hand_acc *a, zen_wait_report *w)
{
    if (!zen__wait_report_due(w))
        return;
    char list[256], times[48];
    int k = missing_ranks(a, list, sizeof list);
    zen__wait_report_times(w, a->deadline, times, sizeof times);
    ZEN_WARN(
        "shm", "rank %d: shm setup: still waiting for rank%s %s to hand over %s segment%s (%s)",
        a->s->base.rank, k > 1 ? "s" : "", list, k > 1 ? "their" : "its", k > 1 ? "s" : "", times);
}

/* Drop the pending connections whose time is up; the earliest time still pending. */
static int64_t expire_conns(hand_acc *a, int64_t now)
{
    int64_t next = a->deadline;
    for (int i = 0; i < a->nconn; i++) {
        hand_conn *c = &a->conn[i];
        if (c->until <= now) {
            refuse(a, "rank %d's pid sent no hand-over within %lld s", c->peer,
                   (long long)(HAND_CONN_NS / 1000000000));
            conn_close(c);
        } else if (c->until < next) {
            next = c->until;
        }
    }
    return next;
}

/* Remove the closed connections, keeping the others in accept order. */
static void compact_conns(hand_acc *a)
{
    int k = 0;
    for (int i = 0; i < a->nconn; i++)
        if (a->conn[i].fd >= 0)
            a->conn[k++] = a->conn[i];
    a->nconn = k;
}

static zen_status hand_accept(shm_state *s, zen_shm_boot *b, const zen_shm_blob *blobs, int memfd,
                              int64_t deadline)
{
    hand_acc *a = zen__calloc(1, sizeof *a);
    if (!a)
        return zen__transport_fail(&s->base, ZEN_ENOMEM, "shm: out of memory at setup");
    *a = (hand_acc){
        .s = s, .listen_fd = b->listen_fd, .blobs = blobs, .memfd = memfd, .deadline = deadline
    };
    for (int p = s->base.rank + 1; p < s->base.size; p++)
        a->need += s->peers[p].lidx >= 0;
    int fl = fcntl(b->listen_fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(b->listen_fd, F_SETFL, fl | O_NONBLOCK);
    zen_status st = ZEN_OK;
    struct pollfd pf[1 + HAND_PENDING_MAX];
    zen_wait_report w;
    zen__wait_report_start(&w);
    while (st == ZEN_OK && a->need > 0) {
        int64_t now = zen_now_ns();
        if (now >= deadline) {
            st = hand_missing(a);
            break;
        }
        hand_report(a, &w);
        int64_t wake = zen__wait_report_slice(&w, expire_conns(a, now));
        compact_conns(a);
        int listen_on = now >= a->accept_pause;
        if (!listen_on && a->accept_pause < wake)
            wake = a->accept_pause;
        pf[0] = (struct pollfd){ .fd = listen_on ? b->listen_fd : -1, .events = POLLIN };
        for (int i = 0; i < a->nconn; i++)
            pf[1 + i] = (struct pollfd){ .fd = a->conn[i].fd, .events = POLLIN };
        int64_t ms = (wake - now) / 1000000 + 1;
        int k = poll(pf, (nfds_t)(1 + a->nconn), ms > 1000 ? 1000 : (int)ms);
        if (k < 0 && errno != EINTR)
            st = zen__transport_fail(&s->base, ZEN_ESYS, "shm: poll: %s", strerror(errno));
        for (int i = 0; k > 0 && st == ZEN_OK && i < a->nconn; i++)
            if (pf[1 + i].revents)
                st = read_conn(a, &a->conn[i]);
        compact_conns(a);
        if (k > 0 && st == ZEN_OK && (pf[0].revents & POLLIN))
            accept_new(a);
    }
    for (int i = 0; i < a->nconn; i++)
        conn_close(&a->conn[i]);
    if (a->refused > HAND_LOG_MAX)
        ZEN_WARN("shm", "rank %d: %u connections to the shm setup socket refused in all",
                 s->base.rank, a->refused);
    zen__free(a);
    return st;
}

zen_status zen__shm_setup_segments(shm_state *s, zen_shm_boot *b, const zen_shm_blob *blobs,
                                   int64_t deadline)
{
    if (zen__shm_boot_test_hook)
        zen__shm_boot_test_hook(1, s->base.rank, blobs[s->base.rank].sock_name);
    s->seg_bytes = zen_shm_seg_bytes(s->nlocal, s->ring_bytes);
    int memfd = memfd_create("zen-shm", MFD_CLOEXEC);
    if (memfd < 0)
        return zen__transport_fail(&s->base, ZEN_ESYS, "shm: memfd_create: %s", strerror(errno));
    if (ftruncate(memfd, (off_t)s->seg_bytes) != 0) {
        close(memfd);
        return zen__transport_fail(&s->base, ZEN_ESYS, "shm: cannot size a %zu-byte segment: %s",
                                   s->seg_bytes, strerror(errno));
    }
    void *seg = mmap(NULL, s->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (seg == MAP_FAILED) {
        close(memfd);
        return zen__transport_fail(&s->base, ZEN_ESYS, "shm: cannot map this segment: %s",
                                   strerror(errno));
    }
    prefault(s, seg, s->seg_bytes); /* every inbound ring: this process reads them all */
    s->seg = seg;
    s->head = seg;
    s->head->magic = ZEN_SHM_MAGIC;
    s->head->nlocal = (uint32_t)s->nlocal;
    s->head->ring_bytes = s->ring_bytes;
    s->head->liveness = s->live_wire;
    int allow_cma = zen__shm_cma_allowed();
    for (int p = 0; p < s->base.size; p++) {
        shm_peer *pe = &s->peers[p];
        if (pe->lidx < 0 || p == s->base.rank)
            continue;
        pe->pid = (pid_t)blobs[p].pid;
        /* cma_ok lives in the ring the peer produces into: it tells the peer that this process
         * can read its buffers */
        zen_shm_ring *in = (zen_shm_ring *)((char *)seg + zen_shm_ring_ctl_off(pe->lidx));
        in->cma_ok = allow_cma && probe_cma(&blobs[p]);
        pe->in_ctl = in;
        pe->in_data = (char *)seg + zen_shm_ring_data_off(s->nlocal, s->ring_bytes, pe->lidx);
    }
    zen_status st = ZEN_OK;
    for (int p = 0; p < s->base.rank && st == ZEN_OK; p++)
        if (s->peers[p].lidx >= 0)
            st = hand_connect(s, &blobs[p], &s->peers[p], memfd, deadline);
    if (st == ZEN_OK)
        st = hand_accept(s, b, blobs, memfd, deadline);
    close(memfd); /* the mappings keep the memory; nothing has a name */
    return st;
}
