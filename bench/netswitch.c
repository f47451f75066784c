/*
 * zen_netswitch: a user-space switch with a delay line for scripts/cluster.sh, for kernels without
 * sch_netem. Every emulated host (network namespace <prefix><i>) has a TUN device; the switch
 * holds all of them, reads the IPv4 packets each host sends, and writes each one into its
 * destination host's TUN device after the one-way delay (and, with --gbps, after pacing the
 * sender's line at that rate; netswitch_line.h has the model).
 *
 * Outline:
 *   1. for each host: setns into /var/run/netns/<prefix><i>, open /dev/net/tun and attach to (or
 *      create) the TUN device <dev> with IFF_TUN|IFF_NO_PI, setns back. The fd keeps the device's
 *      namespace, so one process in the root namespace serves them all.
 *   2. one epoll set holds every TUN fd and a signalfd (SIGTERM/SIGINT: print counters and exit;
 *      SIGUSR1: print counters and go on).
 *   3. loop: write out every queued packet that is due; sleep in epoll_pwait2 until the earliest
 *      release time or until a TUN fd is readable; read what is there (bounded batches, so that
 *      due packets are not held back by a busy sender), route each by destination address, and
 *      queue it on its sender's line with its release time. No busy spinning: the process sleeps
 *      until something is due or arrives. Timer slack is set to 1 ns so that wake-ups are not
 *      rounded up by the default 50 us.
 * Packets to addresses outside the hosts (or not IPv4) are dropped and counted, and so are
 * packets refused by a full line; the counters are printed on exit.
 *
 * Usage: zen_netswitch --hosts N [--lat-us L] [--gbps G] [--queue-us Q] [--queue-pkts P]
 *                      [--rt-prio P (SCHED_FIFO; 0 = off)] [--netns-prefix zen-h] [--dev eth0]
 * [--subnet 198.18.0.0] Prints "ready" on stdout once every TUN device is attached. Needs root
 * (setns, TUN).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "netswitch_line.h"

#define BUF_BYTES    65536 /* largest IPv4 packet, so every read fits one buffer */
#define READ_BATCH   32    /* packets read from one device per wake-up before due ones go out */
#define MAX_HOSTS    250   /* host i is subnet + i + 1 inside one /24 */
#define LATE_BUCKETS 6

static const int64_t late_edges_ns[LATE_BUCKETS - 1] = { 10000, 50000, 200000, 1000000, 10000000 };
static const char *const late_names[LATE_BUCKETS] = { "<10us", "<50us", "<200us",
                                                      "<1ms",  "<10ms", ">=10ms" };

typedef struct host_stats {
    uint64_t rx_pkts, rx_bytes; /* read from this host */
    uint64_t tx_pkts, tx_bytes; /* written to this host */
    uint64_t drop_unknown, drop_full, drop_backlog, drop_write;
    uint32_t max_queue; /* deepest this host's line got, in packets */
} host_stats;

typedef struct netswitch {
    int n;
    int *fds;
    ns_line *lines;
    host_stats *st;
    ns_model model;
    uint32_t subnet;
    unsigned char **pool; /* free packet buffers */
    int npool, pool_cap;
    int64_t late[LATE_BUCKETS]; /* delivered packets by lateness behind their release time */
    int64_t late_max_ns;
    double late_sum_ns;
    uint64_t delivered;
} netswitch;

typedef struct opts {
    int hosts;
    double lat_us, gbps, queue_us;
    long queue_pkts;
    int rt_prio;
    const char *prefix, *dev, *subnet;
} opts;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void usage(void)
{
    fprintf(stderr, "usage: zen_netswitch --hosts N [--lat-us L] [--gbps G] [--queue-us Q]\n"
                    "         [--queue-pkts P] [--rt-prio P] [--netns-prefix zen-h] [--dev eth0]"
                    " [--subnet 198.18.0.0]\n"
                    "  --gbps 0 (default): no pacing (rate left to tc on the devices)\n");
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int parse_opts(int argc, char **argv, opts *o)
{
    *o = (opts){ .hosts = 0,
                 .lat_us = 0,
                 .gbps = 0,
                 .queue_us = 10000,
                 .queue_pkts = 4096,
                 .prefix = "zen-h",
                 .dev = "eth0",
                 .subnet = "198.18.0.0" };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        if (!v) {
            fprintf(stderr, "zen_netswitch: %s needs a value\n", a);
            goto bad_usage;
        }
        i++;
        if (!strcmp(a, "--hosts") && !parse_double(v, 1, MAX_HOSTS, &d))
            o->hosts = (int)d;
        else if (!strcmp(a, "--lat-us") && !parse_double(v, 0, 10e6, &d))
            o->lat_us = d;
        else if (!strcmp(a, "--gbps") && !parse_double(v, 0, 1000, &d))
            o->gbps = d;
        else if (!strcmp(a, "--queue-us") && !parse_double(v, 0, 10e6, &d))
            o->queue_us = d;
        else if (!strcmp(a, "--queue-pkts") && !parse_double(v, 1, 1 << 20, &d))
            o->queue_pkts = (long)d;
        else if (!strcmp(a, "--rt-prio") && !parse_double(v, 0, 99, &d))
            o->rt_prio = (int)d;
        else if (!strcmp(a, "--netns-prefix"))
            o->prefix = v;
        else if (!strcmp(a, "--dev"))
            o->dev = v;
        else if (!strcmp(a, "--subnet"))
            o->subnet = v;
        else {
            fprintf(stderr, "zen_netswitch: bad option or value: %s %s\n", a, v);
            goto bad_usage;
        }
    }
    if (o->hosts < 1) {
        fprintf(stderr, "zen_netswitch: --hosts N (1..%d) required\n", MAX_HOSTS);
        goto bad_usage;
    }
    return 0;
bad_usage:
    usage();
    return -1;
}

/* Attach to TUN device `dev` inside namespace /var/run/netns/<ns>; the fd or -1 (reported). */
static int open_tun_in(const char *ns, const char *dev, int self_ns)
{
    char path[256];
    snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) {
        fprintf(stderr, "zen_netswitch: open %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (setns(nsfd, CLONE_NEWNET) != 0) {
        fprintf(stderr, "zen_netswitch: setns %s: %s\n", path, strerror(errno));
        close(nsfd);
        return -1;
    }
    close(nsfd);
    /* the device is made in the namespace the opener is in at open() time */
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    int err = errno;
    if (fd >= 0) {
        struct ifreq ifr;
        memset(&ifr, 0, sizeof(ifr));
        ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
        snprintf(ifr.ifr_name, IFNAMSIZ, "%s", dev);
        if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    if (setns(self_ns, CLONE_NEWNET) != 0) {
        fprintf(stderr, "zen_netswitch: setns back to own namespace: %s\n", strerror(errno));
        exit(1); /* running in a host's namespace would be wrong for everything after */
    }
    if (fd < 0)
        fprintf(stderr, "zen_netswitch: TUN %s in %s: %s\n", dev, ns, strerror(err));
    return fd;
}

static unsigned char *buf_get(netswitch *s)
{
    return s->npool ? s->pool[--s->npool] : malloc(BUF_BYTES);
}

static void buf_put(netswitch *s, unsigned char *b)
{
    if (s->npool < s->pool_cap)
        s->pool[s->npool++] = b;
    else
        free(b);
}

static void note_lateness(netswitch *s, int64_t late)
{
    int b = 0;
    while (b < LATE_BUCKETS - 1 && late >= late_edges_ns[b])
        b++;
    s->late[b]++;
    s->late_sum_ns += (double)late;
    if (late > s->late_max_ns)
        s->late_max_ns = late;
    s->delivered++;
}

/* Write every packet whose release time has come; lines are visited round-robin per packet. */
static void deliver_due(netswitch *s, int64_t now)
{
    int more = 1;
    while (more) {
        more = 0;
        for (int i = 0; i < s->n; i++) {
            const ns_pkt *h = ns_line_head(&s->lines[i]);
            if (!h || h->release_ns > now)
                continue;
            ns_pkt p = *h;
            ns_line_pop(&s->lines[i]);
            host_stats *d = &s->st[p.dst];
            /* a TUN write hands the packet to the destination's stack; it fails only if that
             * device went away or the packet is malformed: count it as dropped */
            if (write(s->fds[p.dst], p.buf, p.len) == (ssize_t)p.len) {
                d->tx_pkts++;
                d->tx_bytes += p.len;
            } else {
                d->drop_write++;
            }
            note_lateness(s, now - p.release_ns);
            buf_put(s, p.buf);
            more = 1;
        }
        if (more)
            now = mono_ns();
    }
}

/* Read up to READ_BATCH packets from host i and queue them. -1 on a fatal read error. */
static int read_host(netswitch *s, int i)
{
    for (int k = 0; k < READ_BATCH; k++) {
        unsigned char *b = buf_get(s);
        if (!b) {
            fprintf(stderr, "zen_netswitch: out of memory\n");
            return -1;
        }
        ssize_t r = read(s->fds[i], b, BUF_BYTES);
        if (r <= 0) {
            buf_put(s, b);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
            fprintf(stderr, "zen_netswitch: read host %d: %s\n", i,
                    r < 0 ? strerror(errno) : "device closed");
            return -1;
        }
        host_stats *st = &s->st[i];
        st->rx_pkts++;
        st->rx_bytes += (uint64_t)r;
        int dst = ns_route(b, (size_t)r, s->subnet, s->n);
        ns_admit a = NS_ADMIT_FULL;
        if (dst >= 0)
            a = ns_line_push(&s->lines[i], &s->model, mono_ns(),
                             (ns_pkt){ .buf = b, .len = (uint32_t)r, .dst = dst });
        if (dst >= 0 && a == NS_ADMIT_OK) {
            if (s->lines[i].count > st->max_queue)
                st->max_queue = s->lines[i].count;
            continue;
        }
        if (dst < 0)
            st->drop_unknown++;
        else if (a == NS_ADMIT_BACKLOG)
            st->drop_backlog++;
        else
            st->drop_full++;
        buf_put(s, b);
    }
    return 0;
}

static void print_stats(const netswitch *s, FILE *f)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(f, "zen_netswitch counters: %d hosts, delay %.1f us, pacing %s\n", s->n,
            (double)s->model.delay_ns / 1e3, s->model.rate_bps ? "on" : "off");
    fprintf(f, "host  rx_pkts     rx_MB  tx_pkts     tx_MB  unknown  full  backlog  wr_err"
               "  max_q\n");
    for (int i = 0; i < s->n; i++) {
        const host_stats *h = &s->st[i];
        fprintf(f, "%4d %8llu %9.1f %8llu %9.1f %8llu %5llu %8llu %7llu %6u\n", i,
                (unsigned long long)h->rx_pkts, (double)h->rx_bytes / 1e6,
                (unsigned long long)h->tx_pkts, (double)h->tx_bytes / 1e6,
                (unsigned long long)h->drop_unknown, (unsigned long long)h->drop_full,
                (unsigned long long)h->drop_backlog, (unsigned long long)h->drop_write,
                h->max_queue);
    }
    fprintf(f, "lateness behind release (%llu delivered): mean %.1f us, max %.1f us;",
            (unsigned long long)s->delivered,
            s->delivered ? s->late_sum_ns / (double)s->delivered / 1e3 : 0.0,
            (double)s->late_max_ns / 1e3);
    for (int b = 0; b < LATE_BUCKETS; b++)
        fprintf(f, " %s %lld", late_names[b], (long long)s->late[b]);
    fprintf(f, "\ncpu: user %.3f s, sys %.3f s\n",
            (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
            (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
    fflush(f);
}

static int setup(netswitch *s, const opts *o)
{
    struct in_addr a;
    if (inet_pton(AF_INET, o->subnet, &a) != 1) {
        fprintf(stderr, "zen_netswitch: bad --subnet %s\n", o->subnet);
        return -1;
    }
    s->subnet = ntohl(a.s_addr) & 0xffffff00u;
    s->n = o->hosts;
    s->model = (ns_model){ .delay_ns = (int64_t)(o->lat_us * 1e3),
                           .rate_bps = (uint64_t)(o->gbps * 1e9),
                           .max_wait_ns = (int64_t)(o->queue_us * 1e3),
                           .max_pkts = (uint32_t)o->queue_pkts,
                           .max_bytes = (uint64_t)o->queue_pkts * BUF_BYTES };
    s->fds = malloc(sizeof(*s->fds) * (size_t)s->n);
    s->lines = calloc((size_t)s->n, sizeof(*s->lines));
    s->st = calloc((size_t)s->n, sizeof(*s->st));
    s->pool_cap = 256;
    s->pool = malloc(sizeof(*s->pool) * (size_t)s->pool_cap);
    if (!s->fds || !s->lines || !s->st || !s->pool)
        return -1;
    for (int i = 0; i < s->n; i++)
        s->fds[i] = -1;
    int self_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self_ns < 0) {
        fprintf(stderr, "zen_netswitch: /proc/self/ns/net: %s\n", strerror(errno));
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < s->n && rc == 0; i++) {
        char ns[128];
        snprintf(ns, sizeof(ns), "%s%d", o->prefix, i);
        s->fds[i] = open_tun_in(ns, o->dev, self_ns);
        if (s->fds[i] < 0 || ns_line_init(&s->lines[i], &s->model) != 0)
            rc = -1;
    }
    close(self_ns);
    return rc;
}

static void teardown(netswitch *s)
{
    for (int i = 0; s->lines && i < s->n; i++) {
        while (ns_line_head(&s->lines[i])) {
            free(ns_line_head(&s->lines[i])->buf);
            ns_line_pop(&s->lines[i]);
        }
        ns_line_free(&s->lines[i]);
    }
    for (int i = 0; s->fds && i < s->n; i++)
        if (s->fds[i] >= 0)
            close(s->fds[i]);
    while (s->npool)
        free(s->pool[--s->npool]);
    free(s->pool);
    free(s->fds);
    free(s->lines);
    free(s->st);
}

/* The event loop; returns the exit status. */
static int run(netswitch *s, int sfd)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return 1;
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)s->n };
    int rc = epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    for (int i = 0; i < s->n && rc == 0; i++) {
        ev = (struct epoll_event){ .events = EPOLLIN, .data.u32 = (uint32_t)i };
        rc = epoll_ctl(ep, EPOLL_CTL_ADD, s->fds[i], &ev);
    }
    if (rc != 0) {
        fprintf(stderr, "zen_netswitch: epoll_ctl: %s\n", strerror(errno));
        close(ep);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    int status = -1;
    struct epoll_event evs[64];
    while (status < 0) {
        int64_t now = mono_ns();
        deliver_due(s, now);
        int64_t next = ns_lines_next(s->lines, s->n);
        struct timespec ts, *tp = NULL;
        if (next >= 0) {
            int64_t wait = next > now ? next - now : 0;
            ts = (struct timespec){ .tv_sec = wait / 1000000000, .tv_nsec = wait % 1000000000 };
            tp = &ts;
        }
        int k = epoll_pwait2(ep, evs, 64, tp, NULL);
        if (k < 0 && errno != EINTR) {
            fprintf(stderr, "zen_netswitch: epoll_pwait2: %s\n", strerror(errno));
            status = 1;
        }
        for (int e = 0; e < k && status < 0; e++) {
            uint32_t who = evs[e].data.u32;
            if (who < (uint32_t)s->n) {
                if (read_host(s, (int)who) != 0)
                    status = 1;
                continue;
            }
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
                continue;
            print_stats(s, stdout);
            if (si.ssi_signo != SIGUSR1)
                status = 0;
        }
    }
    close(ep);
    return status;
}

int main(int argc, char **argv)
{
    /* A caller such as `flock LOCK cluster.sh up` passes its lock fd down; this process outlives
     * it and must not hold anything it was handed except stdio. */
    close_range(3, ~0u, 0);
    opts o;
    if (parse_opts(argc, argv, &o) != 0)
        return 2;
    /* release times are exact to the ns; the default 50 us timer slack would add up to 50 us */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    /* With the CPUs busy (the emulated hosts' own ranks), a normal-priority switch wakes late by
     * whole scheduler slices; a real fabric does not slow down when the hosts compute. The
     * switch sleeps whenever nothing is due, so a real-time priority costs others little. */
    if (o.rt_prio > 0) {
        struct sched_param sp = { .sched_priority = o.rt_prio };
        if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
            fprintf(stderr, "zen_netswitch: SCHED_FIFO %d: %s (going on without)\n", o.rt_prio,
                    strerror(errno));
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    netswitch s;
    memset(&s, 0, sizeof(s));
    int status = 1;
    if (sfd < 0)
        fprintf(stderr, "zen_netswitch: signalfd: %s\n", strerror(errno));
    else if (setup(&s, &o) != 0)
        fprintf(stderr, "zen_netswitch: setup failed\n");
    else
        status = run(&s, sfd);
    if (sfd >= 0)
        close(sfd);
    teardown(&s);
    return status;
}
