#include "bootstrap/store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/auth.h"
#include "bootstrap/rendezvous.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/tunables.h"
#include "common/wait_report.h"
#include "transport/tcp_sock.h"

enum {
    ENDPOINT_CAP = 48 /* "255.255.255.255:65535 +<ms>" and a NUL */
};

/* The most milliseconds a rank publishes as its time left (11.6 days); it means "no deadline". */
#define LEFT_MS_MAX 1000000000LL

/* How often a rank that waits republishes how long it will still wait. */
#define REFRESH_NS 500000000LL

/* How long past its deadline a rank waits for late ranks (at most the timeout itself): torch's
 * TCPStore starts rank 0's backend up to 1 s after the timeout when ranks are missing. */
#define GRACE_S 3.0

static zen_status store_fail(int rank, char *err, size_t err_size, zen_status st, const char *fmt,
                             ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static zen_status store_fail(int rank, char *err, size_t err_size, zen_status st, const char *fmt,
                             ...)
{
    char detail[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    snprintf(err, err_size, "rank %d: store rendezvous: %s", rank, detail);
    ZEN_ERROR("bootstrap", "%s", err);
    return st;
}

/*
 * The local address of the interface that routes to host: connect() on a UDP socket picks the
 * route without sending anything. Loopback when host is unset or unreachable.
 */
static uint32_t route_local_addr(const char *host)
{
    uint32_t dest = 0, local = htonl(INADDR_LOOPBACK);
    if (!host || !*host || zen__sock_resolve(host, &dest) != 0 || dest == htonl(INADDR_ANY))
        return local;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0)
        return local;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(9) };
    sa.sin_addr.s_addr = dest;
    socklen_t len = sizeof sa;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        local = sa.sin_addr.s_addr;
    close(fd);
    return local;
}

/* Parse "a.b.c.d:port", optionally followed by " +<ms>": how long the publishing rank will still
 * wait for the others (*left_ns, -1 when absent). 0 on success. */
static int parse_endpoint(const char *text, uint32_t *addr, uint16_t *port, int64_t *left_ns)
{
    char host[ENDPOINT_CAP];
    *left_ns = -1;
    const char *space = strchr(text, ' ');
    const char *stop = space ? space : text + strlen(text);
    const char *colon = memchr(text, ':', (size_t)(stop - text));
    if (!colon || (size_t)(colon - text) >= sizeof host)
        return -1;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    char *end = NULL;
    errno = 0;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (errno || end == colon + 1 || end != stop || p < 1 || p > 65535)
        return -1;
    if (space) {
        if (space[1] != '+' || space[2] < '0' || space[2] > '9')
            return -1;
        unsigned long long ms = strtoull(space + 2, &end, 10);
        if (errno || *end != '\0' || ms > LEFT_MS_MAX)
            return -1;
        *left_ns = ms < LEFT_MS_MAX ? (int64_t)ms * 1000000 : -1; /* the cap: no deadline */
    }
    struct in_addr in;
    if (inet_pton(AF_INET, host, &in) != 1)
        return -1;
    *addr = in.s_addr;
    *port = (uint16_t)p;
    return 0;
}

/*
 * The read phase of one rank. Every rank that waits republishes its key every REFRESH_NS with
 * the time it will still wait ("a.b.c.d:port +<ms>"), so that a rank that starts late (torch's
 * TCPStore holds rank 0 for the whole timeout, plus up to 1 s, before the backend starts when
 * fewer ranks joined than its world size) gives up with the others instead of waiting a whole
 * timeout of its own. Ranks keep waiting GRACE past their deadline so that such a late rank is
 * counted as arrived, not blamed.
 */
typedef struct store_wait {
    const zen_store *store;
    int rank, size;
    int64_t end;             /* when this rank gives up */
    char mine[ENDPOINT_CAP]; /* this rank's "a.b.c.d:port" */
    unsigned char *have;     /* size flags: that rank's address was read */
    uint32_t *addrs;
    uint16_t *ports;
    char *err;
    size_t err_size;
} store_wait;

/* One get of rank p's endpoint, waiting at most timeout_s: ZEN_OK (its address kept and this
 * rank's end moved up to p's), ZEN_ETIMEDOUT (not published yet), or a failure with err written. */
static zen_status read_endpoint(store_wait *w, int p, double timeout_s)
{
    char key[32], value[ENDPOINT_CAP];
    size_t got = 0;
    snprintf(key, sizeof key, "zen/tcp/%d", p);
    zen_status st = w->store->get(w->store->ctx, key, value, sizeof value - 1, &got,
                                  timeout_s > 0.001 ? timeout_s : 0.001);
    if (st == ZEN_ETIMEDOUT)
        return st;
    if (st != ZEN_OK)
        return store_fail(w->rank, w->err, w->err_size, st, "reading key '%s' from the store: %s",
                          key, zen_strerror(st));
    value[got < sizeof value ? got : sizeof value - 1] = '\0';
    int64_t left = -1;
    if (parse_endpoint(value, &w->addrs[p], &w->ports[p], &left) != 0)
        return store_fail(w->rank, w->err, w->err_size, ZEN_EPROTO,
                          "rank %d published '%s' under '%s', not an address:port", p, value, key);
    w->have[p] = 1;
    int64_t peer_end = left >= 0 ? zen_ns_add_sat(zen_now_ns(), left) : INT64_MAX;
    if (peer_end < w->end)
        w->end = peer_end;
    return ZEN_OK;
}

/* Republish this rank's address with the time it will still wait. */
static zen_status publish_left(store_wait *w, int64_t now)
{
    char key[32], value[ENDPOINT_CAP];
    long long ms = w->end > now ? (w->end - now) / 1000000 : 0;
    snprintf(key, sizeof key, "zen/tcp/%d", w->rank);
    snprintf(value, sizeof value, "%s +%lld", w->mine, ms < LEFT_MS_MAX ? ms : LEFT_MS_MAX);
    zen_status st = w->store->set(w->store->ctx, key, value, strlen(value));
    if (st != ZEN_OK)
        return store_fail(w->rank, w->err, w->err_size, st, "publishing key '%s' in the store: %s",
                          key, zen_strerror(st));
    return ZEN_OK;
}

/* Look once (1 ms each) for the ranks after p not read yet, so that a report names every rank
 * still missing, not only the one this rank happens to wait on; *missing gets the list. */
static zen_status probe_rest(store_wait *w, int p, char *missing, size_t cap, int *arrived)
{
    for (int q = p + 1; q < w->size; q++) {
        zen_status st = w->have[q] ? ZEN_OK : read_endpoint(w, q, 0.001);
        if (st != ZEN_OK && st != ZEN_ETIMEDOUT)
            return st;
    }
    size_t len = 0;
    int shown = 0;
    *arrived = 0;
    missing[0] = '\0';
    for (int q = 0; q < w->size; q++) {
        if (w->have[q]) {
            ++*arrived;
        } else if (shown++ < 16 && len + 16 < cap) {
            len += (size_t)snprintf(missing + len, cap - len, "%s%d", len ? ", " : "", q);
        } else if (shown == 18 && len + 8 < cap) {
            len += (size_t)snprintf(missing + len, cap - len, ", ...");
        }
    }
    return ZEN_OK;
}

/* A progress line, or at the end the failure: how many ranks arrived and which are missing
 * ("2 of 3 ranks arrived within 8.0 s; missing: rank 2"). */
static zen_status report_missing(store_wait *w, const zen_wait_report *wr, int p, int late)
{
    char missing[160];
    int arrived = 0;
    zen_status st = probe_rest(w, p, missing, sizeof missing, &arrived);
    if (st != ZEN_OK)
        return st;
    const char *ranks = w->size - arrived > 1 ? "ranks" : "rank";
    if (late)
        return store_fail(w->rank, w->err, w->err_size, ZEN_ETIMEDOUT,
                          "%d of %d ranks arrived within %.1f s; missing: %s %s (fewer ranks "
                          "started than the world size %d, or they failed before the rendezvous: "
                          "see their logs)",
                          arrived, w->size, zen__wait_report_elapsed_s(wr), ranks, missing,
                          w->size);
    char times[48];
    zen__wait_report_times(wr, w->end, times, sizeof times);
    ZEN_WARN("bootstrap",
             "rank %d: store rendezvous: still waiting for %s %s (%d of %d ranks arrived; %s)",
             w->rank, ranks, missing, arrived, w->size, times);
    return ZEN_OK;
}

/*
 * Read every other rank's endpoint before w->end. The gets block in slices that end at the next
 * progress report (ZEN_WAIT_REPORT_S) or republication (REFRESH_NS); each report, and the
 * timeout, say how many ranks arrived and which are missing.
 */
static zen_status read_endpoints(store_wait *w)
{
    zen_wait_report wr;
    zen__wait_report_start(&wr);
    int64_t refresh = zen_ns_add_sat(wr.start_ns, REFRESH_NS);
    zen_status st = ZEN_OK;
    for (int p = 0; p < w->size && st == ZEN_OK; p++) {
        while (!w->have[p] && st == ZEN_OK) {
            int64_t end = zen__wait_report_slice(&wr, w->end);
            end = refresh < end ? refresh : end;
            st = read_endpoint(w, p, (double)(end - zen_now_ns()) / 1e9);
            if (st != ZEN_ETIMEDOUT)
                continue;
            int64_t now = zen_now_ns();
            st = ZEN_OK;
            if (now >= refresh) {
                st = publish_left(w, now);
                refresh = zen_ns_add_sat(now, REFRESH_NS);
            }
            int late = now >= w->end;
            if (st == ZEN_OK && (late || zen__wait_report_due(&wr)))
                st = report_missing(w, &wr, p, late);
        }
    }
    return st;
}

/*
 * Publish this rank's address, read everyone's (until the deadline plus the grace, or earlier when
 * an arrived rank gives up earlier) and build the mesh. A rank whose last peer arrived in the grace
 * still gets the grace for the mesh.
 */
static zen_status exchange(const zen_store *store, int rank, int size, uint32_t my_addr,
                           uint16_t my_port, int listen_fd, const zen_job_key *job_key,
                           double timeout_s, int64_t deadline, int *fds, char *err, size_t err_size)
{
    double grace_s = timeout_s < GRACE_S ? timeout_s : GRACE_S;
    store_wait w = { .store = store,
                     .rank = rank,
                     .size = size,
                     .end = zen_ns_add_sat(deadline, zen_ns_from_s(grace_s)),
                     .have = zen__calloc((size_t)size, 1),
                     .addrs = zen__calloc((size_t)size, sizeof *w.addrs),
                     .ports = zen__calloc((size_t)size, sizeof *w.ports),
                     .err = err,
                     .err_size = err_size };
    zen_status st = ZEN_OK;
    if (!w.have || !w.addrs || !w.ports)
        st = store_fail(rank, err, err_size, ZEN_ENOMEM, "no memory for %d addresses", size);
    if (st == ZEN_OK) {
        char key[32], host[ENDPOINT_CAP];
        w.have[rank] = 1;
        snprintf(key, sizeof key, "zen/tcp/%d", rank);
        snprintf(w.mine, sizeof w.mine, "%s:%u", zen__sock_ntoa(my_addr, host, sizeof host),
                 my_port);
        st = store->set(store->ctx, key, w.mine, strlen(w.mine));
        if (st != ZEN_OK)
            st = store_fail(rank, err, err_size, st, "publishing key '%s' in the store: %s", key,
                            zen_strerror(st));
    }
    if (st == ZEN_OK)
        st = read_endpoints(&w);
    if (st == ZEN_OK) {
        double left = (double)(deadline - zen_now_ns()) / 1e9;
        st = zen__rendezvous_mesh(rank, size, w.addrs, w.ports, listen_fd, job_key,
                                  left > grace_s ? left : grace_s, fds, err, err_size);
    }
    zen__free(w.have);
    zen__free(w.addrs);
    zen__free(w.ports);
    return st;
}

zen_status zen__store_rendezvous(const zen_store *store, int rank, int size,
                                 const char *master_addr, double timeout_s, int *fds, char *err,
                                 size_t err_size)
{
    int64_t deadline = zen_deadline_after(timeout_s);
    err[0] = '\0';
    for (int p = 0; p < size; p++)
        fds[p] = -1;
    if (size == 1)
        return ZEN_OK;
    char why[300];
    const char *ifaddr = NULL;
    int have_ifaddr = zen__param_strict("SOCKET_IFADDR", &ifaddr, why, sizeof why);
    uint32_t my_addr = 0;
    if (have_ifaddr < 0)
        return store_fail(rank, err, err_size, ZEN_EINVAL, "%s", why);
    if (have_ifaddr) {
        if (zen__sock_resolve(ifaddr, &my_addr) != 0)
            return store_fail(rank, err, err_size, ZEN_EINVAL,
                              "cannot parse ZEN_SOCKET_IFADDR '%s'", ifaddr);
    } else {
        my_addr = route_local_addr(master_addr);
    }
    /* the job secret (ZEN_JOB_SECRET / _FILE) authenticates every HELLO as in the env path; it
     * and ZEN_REQUIRE_SECRET are checked before this rank publishes anything */
    zen_job_key job_key;
    zen_status st = zen__job_key_from_env(&job_key, why, sizeof why);
    if (st == ZEN_OK)
        st = zen__job_key_required(&job_key, why, sizeof why);
    if (st != ZEN_OK)
        return store_fail(rank, err, err_size, st, "%s", why);
    uint16_t my_port = 0;
    int listen_fd = zen__sock_listen(my_addr, 0, 0, &my_port);
    if (listen_fd < 0) {
        memset(&job_key, 0, sizeof job_key);
        return store_fail(rank, err, err_size, ZEN_ESYS, "cannot listen: %s", strerror(-listen_fd));
    }
    st = exchange(store, rank, size, my_addr, my_port, listen_fd, &job_key, timeout_s, deadline,
                  fds, err, err_size);
    memset(&job_key, 0, sizeof job_key);
    close(listen_fd);
    return st;
}
