/*
 * shm setup: the Unix socket that hands segments over, the single-copy probe and the hand-over
 * itself (see shm.h for the steps). Everything here runs once, before any traffic, under the
 * communicator's deadline; a failure names the peer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/tunables.h"
#include "transport/shm_internal.h"

/* 2: the segment head holds a heartbeat word; 3: and the liveness settings */
#define BOOT_VERSION 3u

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

typedef struct hand_msg {
    uint32_t magic;
    uint32_t rank;
    uint64_t seg_bytes;
} hand_msg;

static int send_seg(int fd, int rank, int memfd, size_t seg_bytes)
{
    hand_msg m = { ZEN_SHM_MAGIC, (uint32_t)rank, seg_bytes };
    struct iovec iov = { .iov_base = &m, .iov_len = sizeof m };
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

/* Receive a hand_msg and its descriptor; *memfd = -1 when none came. */
static int recv_seg(int fd, hand_msg *m, int *memfd)
{
    *memfd = -1;
    struct iovec iov = { .iov_base = m, .iov_len = sizeof *m };
    char ctl[CMSG_SPACE(sizeof(int))];
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl
    };
    ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            memcpy(memfd, CMSG_DATA(c), sizeof(int));
    if (n != (ssize_t)sizeof *m || m->magic != ZEN_SHM_MAGIC) {
        if (*memfd >= 0)
            close(*memfd);
        *memfd = -1;
        return -1;
    }
    return 0;
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
    zen__shm_attach_peer(s, pe, p, seg_bytes);
    /* what this process touches in the peer's segment: the head and ring controls, and the data
     * of the ring it produces into */
    int me = s->peers[s->base.rank].lidx;
    prefault(s, p, zen_shm_ring_data_off(s->nlocal, s->ring_bytes, 0));
    prefault(s, (char *)p + zen_shm_ring_data_off(s->nlocal, s->ring_bytes, me), s->ring_bytes);
    return ZEN_OK;
}

/* The peer at the other end of a Unix connection must be the process the mesh announced. */
static int peer_pid_ok(int fd, uint32_t pid)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && (uint32_t)cr.pid == pid;
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
    hand_msg m;
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
    else if (send_seg(fd, s->base.rank, memfd, s->seg_bytes) != 0 ||
             recv_seg(fd, &m, &theirs) != 0 || theirs < 0 || (int)m.rank != pe->rank)
        st = zen__transport_fail(&s->base, ZEN_EPEER,
                                 "shm: handing segments over with rank %d failed (%s)", pe->rank,
                                 errno ? strerror(errno) : "bad message");
    if (st == ZEN_OK)
        st = map_peer(s, pe, theirs, (size_t)m.seg_bytes);
    if (theirs >= 0)
        close(theirs);
    close(fd);
    return st;
}

/* Lower ranks accept from every higher local rank, in whatever order they come. */
static zen_status hand_accept(shm_state *s, zen_shm_boot *b, const zen_shm_blob *blobs, int memfd,
                              int64_t deadline)
{
    int need = 0;
    for (int p = s->base.rank + 1; p < s->base.size; p++)
        need += s->peers[p].lidx >= 0;
    while (need > 0) {
        struct pollfd pf = { .fd = b->listen_fd, .events = POLLIN, .revents = 0 };
        int ms = zen_poll_ms(deadline, INT32_MAX);
        if (ms == 0 || poll(&pf, 1, ms) <= 0) {
            for (int p = s->base.rank + 1; p < s->base.size; p++)
                if (s->peers[p].lidx >= 0 && !s->peers[p].seg)
                    return zen__transport_fail(&s->base, ZEN_ETIMEDOUT,
                                               "shm: rank %d never handed over its segment", p);
            return zen__transport_fail(&s->base, ZEN_ETIMEDOUT, "shm: segment hand-over timed out");
        }
        int fd = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        sock_deadline(fd, deadline);
        hand_msg m;
        int theirs = -1;
        int peer = -1;
        if (recv_seg(fd, &m, &theirs) == 0)
            peer = (int)m.rank;
        if (peer <= s->base.rank || peer >= s->base.size || s->peers[peer].lidx < 0 ||
            s->peers[peer].seg || !peer_pid_ok(fd, blobs[peer].pid)) {
            /* not one of ours (or a duplicate): ignore it */
            if (theirs >= 0)
                close(theirs);
            close(fd);
            continue;
        }
        zen_status st = ZEN_OK;
        if (send_seg(fd, s->base.rank, memfd, s->seg_bytes) != 0)
            st = zen__transport_fail(&s->base, ZEN_EPEER,
                                     "shm: handing this segment to rank %d failed: %s", peer,
                                     strerror(errno));
        if (st == ZEN_OK)
            st = map_peer(s, &s->peers[peer], theirs, (size_t)m.seg_bytes);
        close(theirs);
        close(fd);
        if (st != ZEN_OK)
            return st;
        need--;
    }
    return ZEN_OK;
}

zen_status zen__shm_setup_segments(shm_state *s, zen_shm_boot *b, const zen_shm_blob *blobs,
                                   int64_t deadline)
{
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
