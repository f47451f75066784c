/*
 * zen bench p2p: what one transport carries between two ranks, the yardstick for the busbw of
 * the collectives (a ring allreduce at 2 ranks sends and receives S bytes per rank, so its busbw
 * can at best approach the p2p bandwidth).
 *
 * Ranks 0 and 1 do the work; any other rank only joins the barriers and the time reduction.
 *   pingpong: r0 sends S, r1 sends S back; time = round trip / 2; bw = S / time.
 *   uni:      r0 posts W sends of S, r1 W receives (into one buffer: only the bytes moved
 *             matter), then r1 returns a 1-byte ack; bw = W * S / time; time is per message.
 *   bidir:    both post W receives and W sends at once; bw per direction = W * S / time.
 * Each iteration starts after a barrier; the slowest rank's time counts; p50/p99 over iterations.
 * With -c, one extra message of each mode's direction(s) is checked byte by byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

#define TAG_DATA   100
#define TAG_ACK    99
#define MAX_WINDOW 1024
#define MAX_SIZES  256

typedef struct p2p_rank {
    const bench_opts *o;
    zen_comm *comm;
    int rank, peer;
    char *send, *recv;
    double *times;
    int64_t *wrong_total; /* rank 0: sum of #wrong over the sweep */
    char ack;
    int posted; /* receives posted for the coming round */
    zen_request *reqs[2 * MAX_WINDOW];
} p2p_rank;

static int window_for(const bench_opts *o, size_t bytes)
{
    if (o->window > 0)
        return o->window;
    size_t w = bytes ? (64u << 20) / bytes : 16;
    return w < 1 ? 1 : (w > 16 ? 16 : (int)w);
}

/* Wait for and release reqs[from, to). */
static zen_status wait_range(p2p_rank *p, int from, int to)
{
    zen_status st = ZEN_OK;
    for (int i = from; i < to; i++) {
        if (st == ZEN_OK)
            st = zen_request_wait(p->reqs[i], -1.0, NULL);
        zen_request_destroy(p->reqs[i]);
        p->reqs[i] = NULL;
    }
    return st;
}

/* Release the posted receives unfinished (cancelling them) after a failure. */
static void cancel_posted(p2p_rank *p)
{
    for (int i = 0; i < p->posted; i++) {
        zen_request_destroy(p->reqs[i]);
        p->reqs[i] = NULL;
    }
    p->posted = 0;
}

/* Receives this rank posts for one round of a mode (reqs[0, n) ); the ack counts as one. */
static int recv_count(const p2p_rank *p, int mode, int w)
{
    if (mode == P2P_PINGPONG)
        return 1;
    if (mode == P2P_UNI)
        return p->rank == 1 ? w : 1;
    return w;
}

/*
 * Post this round's receives before the barrier that starts the clock, so a sender always finds
 * its receive waiting and the timing shows the transport's copy/wire path rather than the
 * unexpected-message path (a large-message rendezvous, as MPI libraries do).
 */
static zen_status post_recvs(p2p_rank *p, int mode, size_t bytes, int w)
{
    int nr = recv_count(p, mode, w);
    int ack_only = mode == P2P_UNI && p->rank == 0;
    for (int i = 0; i < nr; i++) {
        zen_status st = ack_only
                            ? zen_irecv(p->comm, &p->ack, 1, p->peer, TAG_ACK, &p->reqs[i])
                            : zen_irecv(p->comm, p->recv, bytes, p->peer, TAG_DATA, &p->reqs[i]);
        if (st != ZEN_OK) {
            cancel_posted(p);
            return st;
        }
        p->posted = i + 1;
    }
    return ZEN_OK;
}

/* Post nsend sends after the nr posted receives and wait for all of them. */
static zen_status send_and_wait(p2p_rank *p, const void *buf, size_t bytes, int tag, int nsend)
{
    zen_status st = ZEN_OK;
    int n = p->posted;
    for (int i = 0; i < nsend && st == ZEN_OK; i++) {
        st = zen_isend(p->comm, buf, bytes, p->peer, tag, &p->reqs[n]);
        if (st == ZEN_OK)
            n++;
    }
    zen_status wst = wait_range(p, 0, n);
    p->posted = 0;
    return st != ZEN_OK ? st : wst;
}

/* The timed part of one round (receives already posted by post_recvs). */
static zen_status one_round(p2p_rank *p, int mode, size_t bytes, int w)
{
    zen_status st;
    switch (mode) {
    case P2P_PINGPONG:
        if (p->rank == 0) /* ping, then wait for the pong */
            return send_and_wait(p, p->send, bytes, TAG_DATA, 1);
        st = wait_range(p, 0, 1);
        p->posted = 0;
        if (st != ZEN_OK)
            return st;
        return send_and_wait(p, p->send, bytes, TAG_DATA, 1);
    case P2P_UNI:
        if (p->rank == 0) /* stream, then wait for the ack */
            return send_and_wait(p, p->send, bytes, TAG_DATA, w);
        st = wait_range(p, 0, w);
        p->posted = 0;
        if (st != ZEN_OK)
            return st;
        return send_and_wait(p, &p->ack, 1, TAG_ACK, 1);
    default: /* bidir */
        return send_and_wait(p, p->send, bytes, TAG_DATA, w);
    }
}

static const char *mode_name(int mode)
{
    return mode == P2P_PINGPONG ? "pingpong" : (mode == P2P_UNI ? "uni" : "bidir");
}

/* Check one transfer of a mode: the receiving rank(s) compare every byte with the pattern. */
static zen_status check_mode(p2p_rank *p, int mode, size_t bytes, int64_t *wrong)
{
    int64_t w = 0;
    zen_status st = ZEN_OK;
    if (p->peer >= 0) {
        memset(p->recv, 0xA5, bytes);
        st = post_recvs(p, mode, bytes, 1);
        if (st == ZEN_OK)
            st = one_round(p, mode, bytes, 1);
        /* pingpong and bidir: both ranks receive; uni: only rank 1 */
        int receiver = mode != P2P_UNI || p->rank == 1;
        if (st == ZEN_OK && receiver)
            for (size_t i = 0; i < bytes; i++)
                w += (unsigned char)p->recv[i] != (unsigned char)((i * 7u + 3u) & 0xffu);
    }
    if (st != ZEN_OK)
        return st;
    st = bench_sum_over_ranks(p->comm, &w);
    *wrong = w;
    return st;
}

static zen_status measure(p2p_rank *p, int mode, size_t bytes, int w, double *p50, double *p99,
                          int64_t *wrong)
{
    const bench_opts *o = p->o;
    zen_status st;
    for (int it = -o->warmup; it < o->iters; it++) {
        if (p->peer >= 0 && (st = post_recvs(p, mode, bytes, w)) != ZEN_OK)
            return st;
        if ((st = zen_barrier(p->comm)) != ZEN_OK) {
            cancel_posted(p);
            return st;
        }
        double t0 = bench_now();
        if (p->peer >= 0 && (st = one_round(p, mode, bytes, w)) != ZEN_OK)
            return st;
        if (it >= 0)
            p->times[it] = p->peer >= 0 ? bench_now() - t0 : 0.0;
    }
    if ((st = bench_max_over_ranks(p->comm, p->times, (size_t)o->iters)) != ZEN_OK)
        return st;
    double per = mode == P2P_PINGPONG ? 0.5 : 1.0 / w; /* one message's share of a round */
    *p50 = bench_percentile(p->times, (size_t)o->iters, 50.0) * per;
    *p99 = bench_percentile(p->times, (size_t)o->iters, 99.0) * per;
    *wrong = -1;
    return o->check ? check_mode(p, mode, bytes, wrong) : ZEN_OK;
}

static void print_header(const p2p_rank *p, int n, const size_t *sizes, size_t nsizes)
{
    const bench_opts *o = p->o;
    char machine[256];
    zen_machine_line(machine, sizeof machine);
    printf("# zen bench p2p (ranks 0 <-> 1)\n# machine: %s\n", machine);
    printf("# ranks %d, transport %s, sizes %zu..%zu bytes x%g, warmup %d, iters %d, "
           "check %s\n",
           n, zen_transport_name(zen_comm_transport(p->comm)), nsizes ? sizes[0] : 0,
           nsizes ? sizes[nsizes - 1] : 0, o->factor, o->warmup, o->iters, o->check ? "on" : "off");
    printf("# time per message p50/p99 (us), bw = bytes / p50 time (GB/s, 1e9 bytes)\n#\n");
    printf("# %12s %9s %4s %10s %10s %8s %6s\n", "size(B)", "mode", "win", "p50(us)", "p99(us)",
           "bw(GB/s)", "#wrong");
    fflush(stdout);
}

static zen_status p2p_sweep(p2p_rank *p, int n, const size_t *sizes, size_t nsizes)
{
    const bench_opts *o = p->o;
    if (p->rank == 0 && !o->json)
        print_header(p, n, sizes, nsizes);
    static const int modes[] = { P2P_PINGPONG, P2P_UNI, P2P_BIDIR };
    for (size_t s = 0; s < nsizes; s++) {
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            if (!(o->p2p_modes & modes[m]))
                continue;
            size_t bytes = sizes[s];
            int w = modes[m] == P2P_PINGPONG ? 1 : window_for(o, bytes);
            double p50, p99;
            int64_t wrong;
            zen_status st = measure(p, modes[m], bytes, w, &p50, &p99, &wrong);
            if (st != ZEN_OK)
                return st;
            if (p->rank != 0)
                continue;
            if (wrong > 0)
                *p->wrong_total += wrong;
            double bw = p50 > 0 ? (double)bytes / p50 / 1e9 : 0.0;
            char wr[24];
            snprintf(wr, sizeof wr, wrong < 0 ? "null" : "%lld", (long long)wrong);
            if (o->json)
                printf("{\"op\":\"p2p\",\"mode\":\"%s\",\"ranks\":%d,\"transport\":\"%s\","
                       "\"bytes\":%zu,\"window\":%d,\"iters\":%d,\"time_us_p50\":%.3f,"
                       "\"time_us_p99\":%.3f,\"bw_gbs\":%.4f,\"wrong\":%s}\n",
                       mode_name(modes[m]), n, zen_transport_name(zen_comm_transport(p->comm)),
                       bytes, w, o->iters, p50 * 1e6, p99 * 1e6, bw, wr);
            else
                printf("  %12zu %9s %4d %10.2f %10.2f %8.3f %6s\n", bytes, mode_name(modes[m]), w,
                       p50 * 1e6, p99 * 1e6, bw, wrong < 0 ? "N/A" : wr);
            fflush(stdout);
        }
    }
    return ZEN_OK;
}

static zen_status p2p_rank_main(zen_comm *comm, const bench_opts *o, void *arg)
{
    p2p_rank p = { 0 };
    p.wrong_total = arg;
    p.o = o;
    p.comm = comm;
    p.rank = zen_comm_rank(comm);
    int n = zen_comm_size(comm);
    if (n < 2) {
        if (p.rank == 0)
            fprintf(stderr, "zen bench p2p: needs at least 2 ranks, the world has %d\n", n);
        return ZEN_EINVAL;
    }
    p.peer = p.rank == 0 ? 1 : (p.rank == 1 ? 0 : -1);
    size_t sizes[MAX_SIZES];
    size_t nsizes = bench_sizes(o, 1, sizes, MAX_SIZES);
    size_t maxb = nsizes ? sizes[nsizes - 1] : 0;
    zen_status st = ZEN_ENOMEM;
    p.send = malloc(maxb + 1);
    p.recv = malloc(maxb + 1);
    p.times = malloc((size_t)o->iters * sizeof *p.times);
    if (p.send && p.recv && p.times) {
        for (size_t i = 0; i < maxb; i++)
            p.send[i] = (char)((i * 7u + 3u) & 0xffu);
        memset(p.recv, 0, maxb + 1);
        st = p2p_sweep(&p, n, sizes, nsizes);
    }
    free(p.send);
    free(p.recv);
    free(p.times);
    return st;
}

int bench_p2p_main(const bench_opts *o)
{
    int64_t wrong = 0;
    int code = bench_run(o, p2p_rank_main, &wrong);
    if (code == ZEN_EXIT_OK && wrong > 0) {
        fprintf(stderr, "zen bench p2p: %lld wrong bytes\n", (long long)wrong);
        code = ZEN_EXIT_FAIL;
    }
    return code;
}
