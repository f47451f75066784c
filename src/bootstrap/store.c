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
    ENDPOINT_CAP = 32
}; /* "255.255.255.255:65535" and a NUL */

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

/* Parse "a.b.c.d:port"; 0 on success. */
static int parse_endpoint(const char *text, uint32_t *addr, uint16_t *port)
{
    char host[ENDPOINT_CAP];
    const char *colon = strrchr(text, ':');
    if (!colon || (size_t)(colon - text) >= sizeof host)
        return -1;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    unsigned long p = 0;
    char *end = NULL;
    errno = 0;
    p = strtoul(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end != '\0' || p < 1 || p > 65535)
        return -1;
    struct in_addr in;
    if (inet_pton(AF_INET, host, &in) != 1)
        return -1;
    *addr = in.s_addr;
    *port = (uint16_t)p;
    return 0;
}

/* One get of rank p's endpoint, waiting at most timeout_s: ZEN_OK (addrs[p], ports[p] set),
 * ZEN_ETIMEDOUT (not published yet), or a failure with err written. */
static zen_status read_endpoint(const zen_store *store, int rank, int p, double timeout_s,
                                uint32_t *addrs, uint16_t *ports, char *err, size_t err_size)
{
    char key[32], value[ENDPOINT_CAP];
    size_t got = 0;
    snprintf(key, sizeof key, "zen/tcp/%d", p);
    zen_status st = store->get(store->ctx, key, value, sizeof value - 1, &got,
                               timeout_s > 0.001 ? timeout_s : 0.001);
    if (st == ZEN_ETIMEDOUT)
        return st;
    if (st != ZEN_OK)
        return store_fail(rank, err, err_size, st, "reading key '%s' from the store: %s", key,
                          zen_strerror(st));
    value[got < sizeof value ? got : sizeof value - 1] = '\0';
    if (parse_endpoint(value, &addrs[p], &ports[p]) != 0)
        return store_fail(rank, err, err_size, ZEN_EPROTO,
                          "rank %d published '%s' under '%s', not an address:port", p, value, key);
    return ZEN_OK;
}

/* Look once (1 ms each) for the ranks after p not read yet, so that a report names every rank
 * still missing, not only the one this rank happens to wait on; *missing gets the list. */
static zen_status probe_rest(const zen_store *store, int rank, int size, int p, unsigned char *have,
                             uint32_t *addrs, uint16_t *ports, char *missing, size_t cap,
                             int *arrived, char *err, size_t err_size)
{
    for (int q = p + 1; q < size; q++) {
        if (have[q])
            continue;
        zen_status st = read_endpoint(store, rank, q, 0.001, addrs, ports, err, err_size);
        if (st != ZEN_OK && st != ZEN_ETIMEDOUT)
            return st;
        have[q] = st == ZEN_OK;
    }
    size_t len = 0;
    int shown = 0;
    *arrived = 0;
    missing[0] = '\0';
    for (int q = 0; q < size; q++) {
        if (have[q]) {
            ++*arrived;
        } else if (shown++ < 16 && len + 16 < cap) {
            len += (size_t)snprintf(missing + len, cap - len, "%s%d", len ? ", " : "", q);
        } else if (shown == 18 && len + 8 < cap) {
            len += (size_t)snprintf(missing + len, cap - len, ", ...");
        }
    }
    return ZEN_OK;
}

/*
 * Read every other rank's endpoint before the deadline. The gets block in slices that end at
 * the next progress report (ZEN_WAIT_REPORT_S): each report, and the timeout, say how many
 * ranks published and which are missing (a WORLD_SIZE larger than the ranks started shows as
 * "2 of 3 ranks ...: missing rank 2").
 */
static zen_status read_endpoints(const zen_store *store, int rank, int size, int64_t deadline,
                                 uint32_t *addrs, uint16_t *ports, char *err, size_t err_size)
{
    unsigned char *have = zen__calloc((size_t)size, 1);
    if (!have)
        return store_fail(rank, err, err_size, ZEN_ENOMEM, "no memory for %d ranks", size);
    have[rank] = 1;
    zen_wait_report wr;
    zen__wait_report_start(&wr);
    zen_status st = ZEN_OK;
    char missing[160];
    int arrived = 0;
    for (int p = 0; p < size && st == ZEN_OK; p++) {
        while (!have[p] && st == ZEN_OK) {
            int64_t end = zen__wait_report_slice(&wr, deadline);
            st = read_endpoint(store, rank, p, (double)(end - zen_now_ns()) / 1e9, addrs, ports,
                               err, err_size);
            have[p] = st == ZEN_OK;
            if (st != ZEN_ETIMEDOUT)
                continue;
            st = ZEN_OK;
            int late = zen_now_ns() >= deadline;
            if (!late && !zen__wait_report_due(&wr))
                continue;
            st = probe_rest(store, rank, size, p, have, addrs, ports, missing, sizeof missing,
                            &arrived, err, err_size);
            char times[48];
            zen__wait_report_times(&wr, deadline, times, sizeof times);
            if (st == ZEN_OK && late)
                st = store_fail(rank, err, err_size, ZEN_ETIMEDOUT,
                                "%d of %d ranks published their address in %s: missing rank(s) "
                                "%s (fewer ranks started than the world size %d, or they failed "
                                "before the rendezvous: see their logs)",
                                arrived, size, times, missing, size);
            else if (st == ZEN_OK)
                ZEN_WARN("bootstrap",
                         "rank %d: store rendezvous: still waiting for rank(s) %s (%d of %d "
                         "ranks arrived; %s)",
                         rank, missing, arrived, size, times);
        }
    }
    zen__free(have);
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
    uint32_t *addrs = zen__calloc((size_t)size, sizeof *addrs);
    uint16_t *ports = zen__calloc((size_t)size, sizeof *ports);
    if (!addrs || !ports)
        st = store_fail(rank, err, err_size, ZEN_ENOMEM, "no memory for %d addresses", size);
    if (st == ZEN_OK) {
        char key[32], value[ENDPOINT_CAP], host[ENDPOINT_CAP];
        snprintf(key, sizeof key, "zen/tcp/%d", rank);
        snprintf(value, sizeof value, "%s:%u", zen__sock_ntoa(my_addr, host, sizeof host), my_port);
        st = store->set(store->ctx, key, value, strlen(value));
        if (st != ZEN_OK)
            st = store_fail(rank, err, err_size, st, "publishing key '%s' in the store: %s", key,
                            zen_strerror(st));
    }
    if (st == ZEN_OK)
        st = read_endpoints(store, rank, size, deadline, addrs, ports, err, err_size);
    if (st == ZEN_OK) {
        double left = (double)(deadline - zen_now_ns()) / 1e9;
        st = zen__rendezvous_mesh(rank, size, addrs, ports, listen_fd, &job_key,
                                  left > 0.001 ? left : 0.001, fds, err, err_size);
    }
    memset(&job_key, 0, sizeof job_key);
    close(listen_fd);
    zen__free(addrs);
    zen__free(ports);
    return st;
}
