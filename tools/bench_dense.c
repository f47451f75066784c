/*
 * zen bench allreduce|allgather|reduce_scatter|alltoall|broadcast|reduce|gather|scatter|sendrecv:
 * nccl-tests style timing of one dense collective over a size sweep.
 *
 * Per size and per placement (out-of-place, then in-place; broadcast has only in-place,
 * sendrecv only out-of-place: its send and receive overlap in time, so one buffer is a race):
 *   warmup iterations, then iters timed ones; each iteration = (untimed) restore the in-place
 *   input, barrier, time the call. After the loop one allreduce(max) of the iteration times
 *   gives the slowest rank's time per iteration; p50/p99 are taken over those.
 *   With -c, one more call on fresh inputs (outputs poisoned first) is checked element by
 *   element against bench_data.c's reference; the wrong counts are summed over ranks.
 * Buffers are allocated once for the largest size and reused, so page faults stay out of the
 * timings (the fill before the first size touches every page).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

/* What rank 0 accumulates for the footer and the exit status. */
typedef struct dense_summary {
    double busbw_sum;
    int results;
    int64_t wrong_total;
} dense_summary;

typedef struct dense_rank {
    const bench_opts *o;
    zen_comm *comm;
    int rank, n;
    size_t esize;
    char *send, *recv;
    double *times;
    bench_ref ref;
    int ref_ready;
} dense_rank;

static int is_reducing(bench_kind k)
{
    return k == BENCH_ALLREDUCE || k == BENCH_REDUCE_SCATTER || k == BENCH_REDUCE;
}

/* Only the root's output is defined for these. */
static int is_rooted(bench_kind k)
{
    return k == BENCH_REDUCE || k == BENCH_GATHER;
}

/* nccl-tests bus bandwidth correction factor. */
static double bus_factor(bench_kind k, int n)
{
    switch (k) {
    case BENCH_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case BENCH_ALLGATHER:
    case BENCH_REDUCE_SCATTER:
    case BENCH_ALLTOALL:
    case BENCH_GATHER:
    case BENCH_SCATTER:
        return (double)(n - 1) / n;
    default:
        return 1.0;
    }
}

static const char *factor_text(bench_kind k)
{
    switch (k) {
    case BENCH_ALLREDUCE:
        return "2(n-1)/n";
    case BENCH_BROADCAST:
    case BENCH_REDUCE:
    case BENCH_SENDRECV:
        return "1";
    default:
        return "(n-1)/n";
    }
}

/* S (bytes) is per rank for allreduce/broadcast/reduce/sendrecv and the whole array otherwise. */
static size_t size_unit(bench_kind k, int n, size_t esize)
{
    int per_rank =
        k == BENCH_ALLREDUCE || k == BENCH_BROADCAST || k == BENCH_REDUCE || k == BENCH_SENDRECV;
    return per_rank ? esize : esize * (size_t)n;
}

/* Placements run: [*first, *end) of {0 out-of-place, 1 in-place}. */
static void placements(bench_kind k, int *first, int *end)
{
    *first = k == BENCH_BROADCAST ? 1 : 0;
    *end = k == BENCH_SENDRECV ? 1 : 2;
}

/* Elements per call argument ("count" of the zen call) for S bytes. */
static size_t call_count(const dense_rank *d, size_t bytes)
{
    return bytes / size_unit(d->o->kind, d->n, d->esize);
}

static const char *algo_name(const dense_rank *d, size_t count)
{
    if (d->o->kind != BENCH_ALLREDUCE)
        return "default";
    zen_allreduce_algo a = d->o->algo;
    if (a == ZEN_ALLREDUCE_AUTO)
        a = zen_allreduce_choice(d->comm, count, d->o->dtype);
    return zen_allreduce_algo_name(a);
}

/* Put the input of one call in place (untimed). Out-of-place inputs are never modified. */
static void prepare(dense_rank *d, size_t c, int inplace)
{
    size_t blk = c * d->esize;
    switch (d->o->kind) {
    case BENCH_ALLREDUCE:
    case BENCH_REDUCE:
        if (inplace)
            memcpy(d->recv, d->send, blk);
        break;
    case BENCH_ALLGATHER:
    case BENCH_GATHER:
        if (inplace)
            memcpy(d->recv + (size_t)d->rank * blk, d->send, blk);
        break;
    case BENCH_REDUCE_SCATTER:
    case BENCH_ALLTOALL:
        if (inplace)
            memcpy(d->recv, d->send, blk * (size_t)d->n);
        break;
    case BENCH_SCATTER: /* in place: the root's array is recv, its own block stays there */
        if (inplace && d->rank == d->o->root)
            memcpy(d->recv, d->send, blk * (size_t)d->n);
        break;
    case BENCH_BROADCAST:
        if (d->rank == d->o->root)
            memcpy(d->recv, d->send, blk);
        break;
    default:
        break;
    }
}

/*
 * nccl-tests' sendrecv: rank r sends c elements to r+1 and receives as many from r-1, both at
 * once (the receive is posted before the blocking send, so no ring position waits on another).
 */
static zen_status run_sendrecv(dense_rank *d, size_t c)
{
    size_t bytes = c * d->esize;
    if (d->n == 1) {
        memcpy(d->recv, d->send, bytes);
        return ZEN_OK;
    }
    int next = (d->rank + 1) % d->n, prev = (d->rank + d->n - 1) % d->n;
    zen_request *req = NULL;
    zen_status st = zen_irecv(d->comm, d->recv, bytes, prev, 1, &req);
    if (st != ZEN_OK)
        return st;
    st = zen_send(d->comm, d->send, bytes, next, 1);
    zen_status wst = st == ZEN_OK ? zen_request_wait(req, -1.0, NULL) : ZEN_OK;
    zen_request_destroy(req);
    return st != ZEN_OK ? st : wst;
}

static zen_status run_op(dense_rank *d, size_t c, int inplace)
{
    const bench_opts *o = d->o;
    size_t blk = c * d->esize;
    switch (o->kind) {
    case BENCH_ALLREDUCE:
        return zen_allreduce_with(d->comm, inplace ? d->recv : d->send, d->recv, c, o->dtype, o->op,
                                  o->algo);
    case BENCH_ALLGATHER:
        return zen_allgather(d->comm, inplace ? d->recv + (size_t)d->rank * blk : d->send, d->recv,
                             c, o->dtype);
    case BENCH_REDUCE_SCATTER:
        return zen_reduce_scatter(d->comm, inplace ? d->recv : d->send, d->recv, c, o->dtype,
                                  o->op);
    case BENCH_ALLTOALL:
        return zen_alltoall(d->comm, inplace ? d->recv : d->send, d->recv, c, o->dtype);
    case BENCH_BROADCAST:
        return zen_broadcast(d->comm, d->recv, c, o->dtype, o->root);
    case BENCH_REDUCE:
        return zen_reduce(d->comm, inplace ? d->recv : d->send, d->recv, c, o->dtype, o->op,
                          o->root);
    case BENCH_GATHER:
        return zen_gather(d->comm, inplace ? d->recv + (size_t)d->rank * blk : d->send, d->recv, c,
                          o->dtype, o->root);
    case BENCH_SCATTER:
        return zen_scatter(d->comm, inplace ? d->recv : d->send,
                           inplace && d->rank == o->root ? d->recv + (size_t)o->root * blk
                                                         : d->recv,
                           c, o->dtype, o->root);
    case BENCH_SENDRECV:
        return run_sendrecv(d, c);
    default:
        return ZEN_EINVAL;
    }
}

/* Fill this rank's input for the largest size: element i of the send buffer. */
static void fill_input(dense_rank *d, size_t elems)
{
    int reducing = is_reducing(d->o->kind);
    for (size_t i = 0; i < elems; i++)
        bench_store(d->send, d->o->dtype, i, bench_value(d->rank, i, reducing, d->o->op));
}

/* Elements of the output and their expected values; returns the number that differ. */
static int64_t count_wrong(dense_rank *d, size_t c, int inplace)
{
    const bench_opts *o = d->o;
    int64_t wrong = 0;
    if (is_rooted(o->kind) && d->rank != o->root)
        return 0;
    int whole = o->kind == BENCH_ALLGATHER || o->kind == BENCH_ALLTOALL || o->kind == BENCH_GATHER;
    size_t total = whole ? c * (size_t)d->n : c;
    /* scatter in place: the root's block stays at its slot of the array */
    size_t at = o->kind == BENCH_SCATTER && inplace && d->rank == o->root ? (size_t)d->rank * c : 0;
    for (size_t i = 0; i < total; i++) {
        double want;
        switch (o->kind) {
        case BENCH_ALLREDUCE:
        case BENCH_REDUCE:
            want = bench_ref_at(&d->ref, i);
            break;
        case BENCH_REDUCE_SCATTER: /* block `rank` of every input */
            want = bench_ref_at(&d->ref, (size_t)d->rank * c + i);
            break;
        case BENCH_ALLGATHER: /* block b comes from rank b's input [0, c) */
        case BENCH_GATHER:
            want = bench_value((int)(i / c), i % c, 0, o->op);
            break;
        case BENCH_ALLTOALL: /* block b comes from block `rank` of rank b's input */
            want = bench_value((int)(i / c), (size_t)d->rank * c + i % c, 0, o->op);
            break;
        case BENCH_SCATTER: /* block `rank` of the root's input */
            want = bench_value(o->root, (size_t)d->rank * c + i, 0, o->op);
            break;
        case BENCH_SENDRECV: /* rank-1's input */
            want = bench_value((d->rank + d->n - 1) % d->n, i, 0, o->op);
            break;
        default: /* broadcast */
            want = bench_value(o->root, i, 0, o->op);
            break;
        }
        double got = bench_load(d->recv, o->dtype, at + i);
        /* want is exact in the dtype by construction, so store/load round-trips it */
        wrong += !bench_equal(o->dtype, got, want);
    }
    return wrong;
}

/* Time one (size, placement); fills p50/p99 (seconds) and *wrong (-1 without -c). */
static zen_status measure(dense_rank *d, size_t c, int inplace, double *p50, double *p99,
                          int64_t *wrong)
{
    const bench_opts *o = d->o;
    zen_status st;
    for (int it = -o->warmup; it < o->iters; it++) {
        prepare(d, c, inplace);
        if ((st = zen_barrier(d->comm)) != ZEN_OK)
            return st;
        double t0 = bench_now();
        if ((st = run_op(d, c, inplace)) != ZEN_OK)
            return st;
        if (it >= 0)
            d->times[it] = bench_now() - t0;
    }
    if ((st = bench_max_over_ranks(d->comm, d->times, (size_t)o->iters)) != ZEN_OK)
        return st;
    *p50 = bench_percentile(d->times, (size_t)o->iters, 50.0);
    *p99 = bench_percentile(d->times, (size_t)o->iters, 99.0);
    *wrong = -1;
    if (!o->check)
        return ZEN_OK;
    /* poison what the call must overwrite, then restore the input and run once more */
    int whole = o->kind == BENCH_ALLGATHER || o->kind == BENCH_ALLTOALL ||
                o->kind == BENCH_GATHER || (o->kind == BENCH_REDUCE_SCATTER && inplace);
    size_t out_elems = whole ? c * (size_t)d->n : c;
    for (size_t i = 0; i < out_elems; i++)
        bench_store(d->recv, o->dtype, i, -999.0);
    prepare(d, c, inplace);
    if ((st = run_op(d, c, inplace)) != ZEN_OK)
        return st;
    int64_t w = count_wrong(d, c, inplace);
    if ((st = bench_sum_over_ranks(d->comm, &w)) != ZEN_OK)
        return st;
    *wrong = w;
    return ZEN_OK;
}

static void print_header(const dense_rank *d, const size_t *sizes, size_t nsizes)
{
    const bench_opts *o = d->o;
    char machine[256];
    zen_machine_line(machine, sizeof machine);
    printf("# zen bench %s\n# machine: %s\n", o->name, machine);
    printf("# ranks %d, transport %s, dtype %s, op %s, algo %s, sizes %zu..%zu bytes x%g, "
           "warmup %d, iters %d, check %s\n",
           d->n, zen_transport_name(zen_comm_transport(d->comm)), zen_dtype_name(o->dtype),
           is_reducing(o->kind) ? zen_op_name(o->op) : "none",
           o->kind == BENCH_ALLREDUCE ? zen_allreduce_algo_name(o->algo) : "default",
           nsizes ? sizes[0] : 0, nsizes ? sizes[nsizes - 1] : 0, o->factor, o->warmup, o->iters,
           o->check ? "on" : "off");
    bench_print_oversub(bench_ranks_here(d->comm),
                        zen_comm_transport(d->comm) == ZEN_TRANSPORT_INPROC);
    printf("# time: slowest rank per iteration, p50/p99 over iterations (us); GB = 1e9 bytes; "
           "busbw = algbw x %s = %.4f\n#\n",
           factor_text(o->kind), bus_factor(o->kind, d->n));
    printf("# %12s %12s %5s %6s %7s   %-44s   %-44s\n", "", "", "", "", "",
           "---------------- out-of-place ----------------",
           "------------------ in-place ------------------");
    printf("# %12s %12s %5s %6s %7s   %10s %10s %7s %7s %6s   %10s %10s %7s %7s %6s\n", "size",
           "count", "type", "redop", "algo", "p50(us)", "p99(us)", "algbw", "busbw", "#wrong",
           "p50(us)", "p99(us)", "algbw", "busbw", "#wrong");
    printf("# %12s %12s %5s %6s %7s   %10s %10s %7s %7s %6s   %10s %10s %7s %7s %6s\n", "(B)",
           "(elements)", "", "", "", "", "", "(GB/s)", "(GB/s)", "", "", "", "(GB/s)", "(GB/s)",
           "");
    fflush(stdout);
}

static void print_json(const dense_rank *d, size_t bytes, size_t c, int inplace, double p50,
                       double p99, double algbw, double busbw, int64_t wrong)
{
    const bench_opts *o = d->o;
    printf("{\"op\":\"%s\",\"ranks\":%d,\"transport\":\"%s\",\"dtype\":\"%s\",\"redop\":\"%s\","
           "\"bytes\":%zu,\"count\":%zu,\"algo\":\"%s\",\"inplace\":%d,\"iters\":%d,"
           "\"time_us_p50\":%.3f,\"time_us_p99\":%.3f,\"algbw_gbs\":%.4f,\"busbw_gbs\":%.4f,",
           o->name, d->n, zen_transport_name(zen_comm_transport(d->comm)), zen_dtype_name(o->dtype),
           is_reducing(o->kind) ? zen_op_name(o->op) : "none", bytes, c, algo_name(d, c), inplace,
           o->iters, p50 * 1e6, p99 * 1e6, algbw, busbw);
    bench_json_oversub(bench_ranks_here(d->comm),
                       zen_comm_transport(d->comm) == ZEN_TRANSPORT_INPROC);
    if (wrong < 0)
        printf("\"wrong\":null}\n");
    else
        printf("\"wrong\":%lld}\n", (long long)wrong);
}

static void print_cols(double p50, double p99, double algbw, double busbw, int64_t wrong)
{
    char w[24];
    if (wrong < 0)
        snprintf(w, sizeof w, "N/A");
    else
        snprintf(w, sizeof w, "%lld", (long long)wrong);
    printf("   %10.2f %10.2f %7.3f %7.3f %6s", p50 * 1e6, p99 * 1e6, algbw, busbw, w);
}

static zen_status dense_sweep(dense_rank *d, const size_t *sizes, size_t nsizes, dense_summary *sum)
{
    const bench_opts *o = d->o;
    int root = d->rank == 0;
    if (!o->json) {
        zen_status st = bench_print_placement(d->comm);
        if (st != ZEN_OK)
            return st;
    }
    if (root && !o->json)
        print_header(d, sizes, nsizes);
    for (size_t s = 0; s < nsizes; s++) {
        size_t bytes = sizes[s], c = call_count(d, bytes);
        double p50[2] = { 0, 0 }, p99[2] = { 0, 0 };
        int64_t wrong[2] = { -1, -1 };
        int first, end;
        placements(o->kind, &first, &end);
        for (int inplace = first; inplace < end; inplace++) {
            zen_status st = measure(d, c, inplace, &p50[inplace], &p99[inplace], &wrong[inplace]);
            if (st != ZEN_OK)
                return st;
        }
        if (!root)
            continue;
        if (!o->json)
            printf("  %12zu %12zu %5s %6s %7s", bytes, c, zen_dtype_name(o->dtype),
                   is_reducing(o->kind) ? zen_op_name(o->op) : "none", algo_name(d, c));
        for (int inplace = 0; inplace < 2; inplace++) {
            if (inplace < first || inplace >= end) {
                if (!o->json)
                    printf("   %10s %10s %7s %7s %6s", "-", "-", "-", "-", "-");
                continue;
            }
            double t = p50[inplace];
            double algbw = t > 0 ? (double)bytes / t / 1e9 : 0.0;
            double busbw = algbw * bus_factor(o->kind, d->n);
            sum->busbw_sum += busbw;
            sum->results++;
            if (wrong[inplace] > 0)
                sum->wrong_total += wrong[inplace];
            if (o->json)
                print_json(d, bytes, c, inplace, p50[inplace], p99[inplace], algbw, busbw,
                           wrong[inplace]);
            else
                print_cols(p50[inplace], p99[inplace], algbw, busbw, wrong[inplace]);
        }
        if (!o->json)
            printf("\n");
        fflush(stdout); /* one line per size is the progress report of long sweeps */
    }
    if (root && !o->json) {
        if (o->check)
            printf("# Out of bounds values : %lld %s\n", (long long)sum->wrong_total,
                   sum->wrong_total ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %.4f GB/s (p50 times, %d results)\n#\n",
               sum->results ? sum->busbw_sum / sum->results : 0.0, sum->results);
        fflush(stdout);
    }
    return ZEN_OK;
}

#define MAX_SIZES 256

static zen_status dense_rank_main(zen_comm *comm, const bench_opts *o, void *arg)
{
    dense_summary *sum = arg;
    dense_rank d = { 0 };
    d.o = o;
    d.comm = comm;
    d.rank = zen_comm_rank(comm);
    d.n = zen_comm_size(comm);
    d.esize = zen_dtype_size(o->dtype);
    if (o->root >= d.n) {
        if (d.rank == 0)
            fprintf(stderr, "zen bench %s: --root %d is not a rank of %d\n", o->name, o->root, d.n);
        return ZEN_EINVAL;
    }
    size_t sizes[MAX_SIZES];
    size_t nsizes = bench_sizes(o, size_unit(o->kind, d.n, d.esize), sizes, MAX_SIZES);
    size_t maxb = nsizes ? sizes[nsizes - 1] : 0;
    zen_status st = ZEN_ENOMEM;
    /* +esize: never a zero-byte allocation */
    d.send = malloc(maxb + d.esize);
    d.recv = malloc(maxb + d.esize);
    d.times = malloc((size_t)o->iters * sizeof *d.times);
    if (!d.send || !d.recv || !d.times)
        goto out;
    if (o->check || is_reducing(o->kind)) {
        if (bench_ref_init(&d.ref, d.n, o->dtype, o->op) != 0)
            goto out;
        d.ref_ready = 1;
    }
    fill_input(&d, maxb / d.esize);
    memset(d.recv, 0, maxb + d.esize);
    st = dense_sweep(&d, sizes, nsizes, sum);
out:
    if (d.ref_ready)
        bench_ref_free(&d.ref);
    free(d.send);
    free(d.recv);
    free(d.times);
    return st;
}

int bench_dense_main(const bench_opts *o)
{
    dense_summary sum = { 0 };
    int code = bench_run(o, dense_rank_main, &sum);
    if (code == ZEN_EXIT_OK && sum.wrong_total > 0) {
        fprintf(stderr, "zen bench %s: %lld wrong elements\n", o->name, (long long)sum.wrong_total);
        code = ZEN_EXIT_FAIL;
    }
    return code;
}
