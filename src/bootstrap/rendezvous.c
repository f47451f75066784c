#include "bootstrap/rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/tunables.h"
#include "transport/tcp_sock.h"

enum {
    KIND_REGISTER = 1,
    KIND_TABLE = 2,
    KIND_HELLO = 3
};

enum {
    REGISTER_BYTES = 24,
    TABLE_HEAD_BYTES = 16,
    TABLE_ENTRY_BYTES = 8,
    HELLO_BYTES = 16
};

/* A connection that opened but says nothing gets this long to send its first message, so a
 * stray client cannot stall the whole rendezvous. */
#define FIRST_MESSAGE_NS (5 * (int64_t)1000000000)

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

static int64_t first_message_deadline(const rdv *r)
{
    int64_t d = zen_now_ns() + FIRST_MESSAGE_NS;
    return d < r->deadline ? d : r->deadline;
}

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

static void put_head(unsigned char *b, uint16_t kind)
{
    zen_put_u32(b, ZEN_RDV_MAGIC);
    zen_put_u16(b + 4, ZEN_RDV_VERSION);
    zen_put_u16(b + 6, kind);
}

static int write_bytes(int fd, const void *buf, size_t len, int64_t deadline)
{
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    return zen_sock_writev_all(fd, &iov, 1, 0, deadline);
}

/* Check magic, version and kind of a received message. 0 ok, -1 not ours, -2 other version. */
static int check_head(const unsigned char *b, uint16_t kind)
{
    if (zen_get_u32(b) != ZEN_RDV_MAGIC)
        return -1;
    if (zen_get_u16(b + 4) != ZEN_RDV_VERSION)
        return -2;
    return zen_get_u16(b + 6) == kind ? 0 : -1;
}

/* Text for a negative errno from tcp_sock (-EPIPE there means the peer closed). */
static const char *why(int rc)
{
    return rc == -EPIPE ? "end of stream" : strerror(-rc);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Rank 0: collect size-1 registrations on the master port, then send everyone the table. */
static zen_status serve_registrations(rdv *r, int master_port)
{
    uint16_t bound = 0;
    int mfd = zen_sock_listen(htonl(INADDR_ANY), (uint16_t)master_port, 1, &bound);
    if (mfd < 0)
        return rdv_fail(r, mfd == -EADDRINUSE ? ZEN_EBUSY : ZEN_ESYS,
                        "cannot listen on master port %d: %s%s", master_port, strerror(-mfd),
                        mfd == -EADDRINUSE ? " (another job? choose another ZEN_MASTER_PORT)" : "");
    int *reg = zen_malloc_array((size_t)r->size, sizeof *reg);
    if (!reg) {
        close(mfd);
        return rdv_fail(r, ZEN_ENOMEM, "no memory for %d registrations", r->size);
    }
    for (int p = 0; p < r->size; p++)
        reg[p] = -1;
    zen_status st = ZEN_OK;
    int got = 1;
    while (got < r->size && st == ZEN_OK) {
        int fd = zen_sock_accept(mfd, r->deadline);
        if (fd < 0) {
            char missing[160];
            list_missing(reg, 1, r->size, 0, missing, sizeof missing);
            st = rdv_fail(r, fd == -ETIMEDOUT ? ZEN_ETIMEDOUT : ZEN_ESYS,
                          "%s after %.1f s: rank(s) %s of %d never registered with rank 0 on "
                          "port %d",
                          fd == -ETIMEDOUT ? "timed out" : strerror(-fd), r->timeout_s, missing,
                          r->size, master_port);
            break;
        }
        unsigned char b[REGISTER_BYTES];
        int rc = zen_sock_read_all(fd, b, sizeof b, first_message_deadline(r));
        int head = rc == 0 ? check_head(b, KIND_REGISTER) : -1;
        if (head == -1) {
            ZEN_WARN("bootstrap",
                     "ignoring a connection to the master port that did not "
                     "register (%s)",
                     rc ? why(rc) : "bad magic");
            close(fd);
            continue;
        }
        int peer = (int)zen_get_u32(b + 8);
        int psize = (int)zen_get_u32(b + 12);
        if (head == -2)
            st = rdv_fail(r, ZEN_EPROTO, "a rank registered with protocol version %u, this is %u",
                          zen_get_u16(b + 4), ZEN_RDV_VERSION);
        else if (psize != r->size)
            st = rdv_fail(r, ZEN_EMISMATCH,
                          "rank %d registered with world size %d, but rank 0 has %d", peer, psize,
                          r->size);
        else if (peer < 1 || peer >= r->size)
            st = rdv_fail(r, ZEN_EMISMATCH, "a process registered as rank %d, outside 1..%d", peer,
                          r->size - 1);
        else if (reg[peer] >= 0)
            st = rdv_fail(r, ZEN_EMISMATCH, "two processes registered as rank %d", peer);
        if (st != ZEN_OK) {
            close(fd);
            break;
        }
        reg[peer] = fd;
        memcpy(&r->table[peer].addr, b + 16, 4);
        r->table[peer].port = zen_get_u16(b + 20);
        got++;
    }
    close(mfd);
    size_t tbytes = TABLE_HEAD_BYTES + (size_t)r->size * TABLE_ENTRY_BYTES;
    unsigned char *tb = st == ZEN_OK ? zen_calloc(1, tbytes) : NULL;
    if (st == ZEN_OK && !tb)
        st = rdv_fail(r, ZEN_ENOMEM, "no memory for a rank table of %zu bytes", tbytes);
    if (st == ZEN_OK) {
        put_head(tb, KIND_TABLE);
        zen_put_u32(tb + 8, (uint32_t)r->size);
        for (int p = 0; p < r->size; p++) {
            unsigned char *e = tb + TABLE_HEAD_BYTES + (size_t)p * TABLE_ENTRY_BYTES;
            memcpy(e, &r->table[p].addr, 4);
            zen_put_u16(e + 4, r->table[p].port);
        }
        for (int p = 1; p < r->size && st == ZEN_OK; p++) {
            int rc = write_bytes(reg[p], tb, tbytes, r->deadline);
            if (rc < 0)
                st = rdv_fail(r, ZEN_EPEER, "sending the rank table to rank %d failed: %s", p,
                              why(rc));
        }
    }
    zen_free(tb);
    for (int p = 0; p < r->size; p++)
        close_fd(&reg[p]);
    zen_free(reg);
    return st;
}

/* Ranks > 0: connect to the master (retrying until the deadline), register, read the table. */
static zen_status register_with_master(rdv *r, uint32_t master, int master_port, int have_ifaddr)
{
    char host[32];
    zen_sock_ntoa(master, host, sizeof host);
    int fd = -1;
    for (;;) {
        int64_t attempt = zen_now_ns() + 2 * (int64_t)1000000000;
        fd = zen_sock_connect(master, (uint16_t)master_port,
                              attempt < r->deadline ? attempt : r->deadline);
        if (fd >= 0)
            break;
        if (zen_now_ns() >= r->deadline)
            return rdv_fail(r, ZEN_ETIMEDOUT,
                            "cannot reach rank 0 at %s:%d within %.1f s (%s): is rank 0 running "
                            "with the same ZEN_MASTER_ADDR and ZEN_MASTER_PORT?",
                            host, master_port, r->timeout_s, strerror(-fd));
        zen_sleep_ns(50 * 1000000);
    }
    if (!have_ifaddr) {
        struct sockaddr_in sa;
        socklen_t slen = sizeof sa;
        if (getsockname(fd, (struct sockaddr *)&sa, &slen) == 0)
            r->my_addr = sa.sin_addr.s_addr;
    }
    zen_status st = ZEN_OK;
    r->listen_fd = zen_sock_listen(r->my_addr, 0, 0, &r->listen_port);
    if (r->listen_fd < 0) {
        st = rdv_fail(r, ZEN_ESYS, "cannot listen: %s", strerror(-r->listen_fd));
        close(fd);
        return st;
    }
    unsigned char b[REGISTER_BYTES] = { 0 };
    put_head(b, KIND_REGISTER);
    zen_put_u32(b + 8, (uint32_t)r->rank);
    zen_put_u32(b + 12, (uint32_t)r->size);
    memcpy(b + 16, &r->my_addr, 4);
    zen_put_u16(b + 20, r->listen_port);
    int rc = write_bytes(fd, b, sizeof b, r->deadline);
    unsigned char th[TABLE_HEAD_BYTES];
    if (rc == 0)
        rc = zen_sock_read_all(fd, th, sizeof th, r->deadline);
    if (rc == -ETIMEDOUT)
        st = rdv_fail(r, ZEN_ETIMEDOUT,
                      "rank 0 did not send the rank table within %.1f s: some ranks never "
                      "registered (rank 0's log names them)",
                      r->timeout_s);
    else if (rc < 0)
        st = rdv_fail(r, ZEN_EPEER,
                      "rank 0 closed the rendezvous connection before sending the rank table "
                      "(%s): it refused this rank or failed, see its log",
                      why(rc));
    else if (check_head(th, KIND_TABLE) != 0 || zen_get_u32(th + 8) != (uint32_t)r->size)
        st = rdv_fail(r, ZEN_EPROTO, "rank 0 sent a malformed rank table");
    for (int p = 0; p < r->size && st == ZEN_OK; p++) {
        unsigned char e[TABLE_ENTRY_BYTES];
        if ((rc = zen_sock_read_all(fd, e, sizeof e, r->deadline)) < 0) {
            st = rdv_fail(r, ZEN_EPEER, "reading the rank table from rank 0 failed: %s", why(rc));
            break;
        }
        memcpy(&r->table[p].addr, e, 4);
        r->table[p].port = zen_get_u16(e + 4);
    }
    close(fd);
    return st;
}

static void put_hello(unsigned char *b, int rank, int size)
{
    put_head(b, KIND_HELLO);
    zen_put_u32(b + 8, (uint32_t)rank);
    zen_put_u32(b + 12, (uint32_t)size);
}

/* Rank i connects to every j < i; j answers the HELLO with its own. */
static zen_status connect_lower(rdv *r)
{
    for (int j = 0; j < r->rank; j++) {
        char host[32];
        zen_sock_ntoa(r->table[j].addr, host, sizeof host);
        int fd;
        for (;;) {
            fd = zen_sock_connect(r->table[j].addr, r->table[j].port, r->deadline);
            if (fd >= 0 || zen_now_ns() >= r->deadline)
                break;
            zen_sleep_ns(20 * 1000000);
        }
        if (fd < 0)
            return rdv_fail(r, fd == -ETIMEDOUT ? ZEN_ETIMEDOUT : ZEN_EPEER,
                            "cannot connect to rank %d at %s:%u: %s", j, host, r->table[j].port,
                            strerror(-fd));
        unsigned char b[HELLO_BYTES];
        put_hello(b, r->rank, r->size);
        int rc = write_bytes(fd, b, sizeof b, r->deadline);
        if (rc == 0)
            rc = zen_sock_read_all(fd, b, sizeof b, r->deadline);
        if (rc < 0) {
            close(fd);
            return rdv_fail(r, rc == -ETIMEDOUT ? ZEN_ETIMEDOUT : ZEN_EPEER,
                            "handshake with rank %d at %s:%u failed: %s%s", j, host,
                            r->table[j].port, why(rc),
                            rc == -EPIPE ? " (it refused this rank: see its log)" : "");
        }
        if (check_head(b, KIND_HELLO) != 0 || zen_get_u32(b + 8) != (uint32_t)j ||
            zen_get_u32(b + 12) != (uint32_t)r->size) {
            close(fd);
            return rdv_fail(r, ZEN_EPROTO,
                            "rank %d at %s:%u answered the handshake as rank %u of %u (version "
                            "%u), expected rank %d of %d (version %u)",
                            j, host, r->table[j].port, zen_get_u32(b + 8), zen_get_u32(b + 12),
                            zen_get_u16(b + 4), j, r->size, ZEN_RDV_VERSION);
        }
        r->fds[j] = fd;
    }
    return ZEN_OK;
}

/* Accept one connection from every j > i, check its HELLO and answer it. */
static zen_status accept_higher(rdv *r)
{
    int need = r->size - 1 - r->rank;
    while (need > 0) {
        int fd = zen_sock_accept(r->listen_fd, r->deadline);
        if (fd < 0) {
            char missing[160];
            list_missing(r->fds, r->rank + 1, r->size, -1, missing, sizeof missing);
            return rdv_fail(r, fd == -ETIMEDOUT ? ZEN_ETIMEDOUT : ZEN_ESYS,
                            "%s after %.1f s: rank(s) %s never connected to rank %d",
                            fd == -ETIMEDOUT ? "timed out" : strerror(-fd), r->timeout_s, missing,
                            r->rank);
        }
        unsigned char b[HELLO_BYTES];
        int rc = zen_sock_read_all(fd, b, sizeof b, first_message_deadline(r));
        int head = rc == 0 ? check_head(b, KIND_HELLO) : -1;
        if (head == -1) {
            ZEN_WARN("bootstrap", "ignoring a connection without a zen handshake (%s)",
                     rc ? why(rc) : "bad magic");
            close(fd);
            continue;
        }
        int peer = (int)zen_get_u32(b + 8);
        int psize = (int)zen_get_u32(b + 12);
        zen_status st = ZEN_OK;
        if (head == -2)
            st = rdv_fail(r, ZEN_EPROTO, "rank %d speaks protocol version %u, this rank %u", peer,
                          zen_get_u16(b + 4), ZEN_RDV_VERSION);
        else if (psize != r->size)
            st = rdv_fail(r, ZEN_EMISMATCH, "rank %d has world size %d, this rank %d", peer, psize,
                          r->size);
        else if (peer <= r->rank || peer >= r->size || r->fds[peer] >= 0)
            st = rdv_fail(r, ZEN_EMISMATCH,
                          "unexpected handshake from a process claiming rank %d (duplicate or "
                          "out of range)",
                          peer);
        if (st != ZEN_OK) {
            close(fd);
            return st;
        }
        put_hello(b, r->rank, r->size);
        if ((rc = write_bytes(fd, b, sizeof b, r->deadline)) < 0) {
            close(fd);
            return rdv_fail(r, ZEN_EPEER, "answering the handshake of rank %d failed: %s", peer,
                            why(rc));
        }
        r->fds[peer] = fd;
        need--;
    }
    return ZEN_OK;
}

zen_status zen_rendezvous(int rank, int size, const char *master_addr, int master_port,
                          double timeout_s, int *fds, char *err, size_t err_size)
{
    rdv r;
    memset(&r, 0, sizeof r);
    r.rank = rank;
    r.size = size;
    r.timeout_s = timeout_s;
    r.deadline = zen_deadline_after(timeout_s);
    r.err = err;
    r.err_size = err_size;
    r.fds = fds;
    r.listen_fd = -1;
    err[0] = '\0';
    for (int p = 0; p < size; p++)
        fds[p] = -1;
    if (size == 1)
        return ZEN_OK;
    r.table = zen_calloc((size_t)size, sizeof *r.table);
    if (!r.table)
        return rdv_fail(&r, ZEN_ENOMEM, "no memory for a rank table of %d", size);
    zen_status st = ZEN_OK;
    uint32_t master = 0;
    const char *ifaddr = zen_param_str("SOCKET_IFADDR");
    int have_ifaddr = ifaddr && *ifaddr;
    if (zen_sock_resolve(master_addr ? master_addr : "127.0.0.1", &master) != 0)
        st = rdv_fail(&r, ZEN_EINVAL, "cannot resolve the master address '%s'",
                      master_addr ? master_addr : "");
    else if (have_ifaddr && zen_sock_resolve(ifaddr, &r.my_addr) != 0)
        st = rdv_fail(&r, ZEN_EINVAL, "cannot parse ZEN_SOCKET_IFADDR '%s'", ifaddr);
    if (st == ZEN_OK && rank == 0) {
        if (!have_ifaddr)
            r.my_addr = master == htonl(INADDR_ANY) ? htonl(INADDR_LOOPBACK) : master;
        r.listen_fd = zen_sock_listen(r.my_addr, 0, 0, &r.listen_port);
        if (r.listen_fd < 0) {
            st = rdv_fail(&r, ZEN_ESYS, "cannot listen: %s", strerror(-r.listen_fd));
        } else {
            r.table[0].addr = r.my_addr;
            r.table[0].port = r.listen_port;
            st = serve_registrations(&r, master_port);
        }
    } else if (st == ZEN_OK) {
        st = register_with_master(&r, master, master_port, have_ifaddr);
    }
    if (st == ZEN_OK)
        st = connect_lower(&r);
    if (st == ZEN_OK)
        st = accept_higher(&r);
    close_fd(&r.listen_fd);
    zen_free(r.table);
    if (st != ZEN_OK)
        for (int p = 0; p < size; p++)
            close_fd(&fds[p]);
    return st;
}

zen_status zen_rendezvous_mesh(int rank, int size, int listen_fd, const uint32_t *addrs,
                               const uint16_t *ports, double timeout_s, int *fds, char *err,
                               size_t err_size)
{
    rdv r = { .rank = rank,
              .size = size,
              .timeout_s = timeout_s,
              .err = err,
              .err_size = err_size,
              .fds = fds,
              .listen_fd = listen_fd };
    r.deadline = zen_deadline_after(timeout_s);
    err[0] = '\0';
    for (int p = 0; p < size; p++)
        fds[p] = -1;
    r.table = zen_calloc((size_t)size, sizeof *r.table);
    if (!r.table)
        return rdv_fail(&r, ZEN_ENOMEM, "no memory for a rank table of %d", size);
    for (int p = 0; p < size; p++) {
        r.table[p].addr = addrs[p];
        r.table[p].port = ports[p];
    }
    zen_status st = connect_lower(&r);
    if (st == ZEN_OK)
        st = accept_higher(&r);
    zen_free(r.table);
    if (st != ZEN_OK)
        for (int p = 0; p < size; p++)
            close_fd(&fds[p]);
    return st;
}
