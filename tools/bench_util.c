/* `zen bench` plumbing: the rank runner, the size sweep, timing statistics. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"

int bench_ranks_here(zen_comm *comm)
{
    int n = zen_comm_size(comm);
    if (zen_comm_transport(comm) == ZEN_TRANSPORT_INPROC)
        return n;
    int here = zen_comm_local_size(comm);
    return here > 0 ? here : n;
}

/* The cores this process may run on (sched_getaffinity). A process rank pinned to one core was
 * placed by its launcher (zen launch pins by default, mpirun when the ranks fit): the ranks then
 * share the host's online cores, not this rank's one. */
static int usable_cores(int threads)
{
    cpu_set_t set;
    int mine = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (mine < 1 || (!threads && mine == 1 && online > 1))
        return online > 0 ? (int)online : 1;
    return mine;
}

int bench_oversubscribed(int ranks_here, int threads, int *cores)
{
    *cores = usable_cores(threads);
    return ranks_here > *cores;
}

void bench_print_oversub(int ranks_here, int threads)
{
    int cores;
    if (bench_oversubscribed(ranks_here, threads, &cores))
        printf("# oversubscribed: %d ranks on %d core%s: times include scheduling\n", ranks_here,
               cores, cores == 1 ? "" : "s");
}

void bench_json_oversub(int ranks_here, int threads)
{
    int cores;
    int over = bench_oversubscribed(ranks_here, threads, &cores);
    printf("\"cores\":%d,\"oversubscribed\":%s,", cores, over ? "true" : "false");
}

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_percentile(double *v, size_t n, double p)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t rank = (size_t)ceil(p / 100.0 * (double)n); /* nearest-rank definition */
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return v[rank - 1];
}

zen_status bench_max_over_ranks(zen_comm *comm, double *v, size_t n)
{
    return zen_allreduce(comm, v, v, n, ZEN_F64, ZEN_MAX);
}

zen_status bench_sum_over_ranks(zen_comm *comm, int64_t *v)
{
    return zen_allreduce(comm, v, v, 1, ZEN_I64, ZEN_SUM);
}

size_t bench_sizes(const bench_opts *o, size_t unit, size_t *out, size_t max)
{
    size_t n = 0;
    double s = (double)o->min_bytes;
    while (s <= (double)o->max_bytes && n < max) {
        size_t bytes = (size_t)s / unit * unit;
        /* a size that rounds to nothing is only shown when the user asked for 0 */
        if ((bytes > 0 || o->min_bytes == 0) && (n == 0 || out[n - 1] != bytes))
            out[n++] = bytes;
        double next = s * o->factor;
        s = next < s + 1.0 ? s + 1.0 : next;
    }
    return n;
}

/* ---- running ranks ---- */

struct run_ctx {
    const bench_opts *o;
    bench_rank_fn fn;
    void *arg;
    char (*errors)[600]; /* per rank: the communicator's last error on failure */
};

static void record_error(struct run_ctx *ctx, zen_comm *comm, int rank, zen_status st)
{
    const char *le = zen_comm_last_error(comm);
    if (le && *le)
        snprintf(ctx->errors[rank], sizeof ctx->errors[rank], "%s (%s)", le, zen_status_name(st));
    else
        snprintf(ctx->errors[rank], sizeof ctx->errors[rank], "rank %d: %s (%s)", rank,
                 zen_strerror(st), zen_status_name(st));
}

/* The body every rank runs: the benchmark, then a collective flush so no rank tears down its
 * connections while a peer still finishes its last collective. */
static zen_status rank_body(zen_comm *comm, void *p)
{
    struct run_ctx *ctx = p;
    zen_status st = ctx->fn(comm, ctx->o, ctx->arg);
    if (st == ZEN_OK)
        st = zen_comm_finalize(comm);
    if (st != ZEN_OK)
        record_error(ctx, comm, ctx->o->transport == ZEN_TRANSPORT_INPROC ? zen_comm_rank(comm) : 0,
                     st);
    return st;
}

/* A peer's departure or an abort is a consequence; prefer the rank that failed first-hand. */
static int secondary(zen_status st)
{
    return st == ZEN_EPEER || st == ZEN_EABORTED;
}

int bench_run(const bench_opts *o, bench_rank_fn fn, void *arg)
{
    int nslots = o->transport == ZEN_TRANSPORT_INPROC ? o->ranks : 1;
    struct run_ctx ctx = { o, fn, arg, calloc((size_t)nslots, sizeof *ctx.errors) };
    zen_status *status = calloc((size_t)nslots, sizeof *status);
    if (!ctx.errors || !status) {
        free(ctx.errors);
        free(status);
        fprintf(stderr, "zen bench %s: out of memory\n", o->name);
        return ZEN_EXIT_FAIL;
    }
    zen_comm_options copts = ZEN_COMM_OPTIONS_INIT;
    copts.timeout_s = o->timeout;
    zen_status st;
    if (o->transport == ZEN_TRANSPORT_INPROC) {
        st = zen_run_inproc(o->ranks, &copts, rank_body, &ctx, status);
    } else {
        copts.transport = o->transport;
        zen_comm *comm = NULL;
        st = zen_comm_create(&copts, &comm);
        if (st != ZEN_OK) {
            snprintf(ctx.errors[0], sizeof ctx.errors[0], "cannot create the %s communicator: %s",
                     zen_transport_name(o->transport), zen_strerror(st));
        } else {
            st = rank_body(comm, &ctx);
            if (st != ZEN_OK)
                zen_comm_abort(comm); /* wake peers now rather than at their timeout */
            zen_comm_destroy(comm);
        }
        status[0] = st;
    }
    int code = ZEN_EXIT_OK;
    if (st != ZEN_OK) {
        int pick = -1;
        for (int r = 0; r < nslots && pick < 0; r++)
            if (status[r] != ZEN_OK && !secondary(status[r]) && ctx.errors[r][0])
                pick = r;
        for (int r = 0; r < nslots && pick < 0; r++)
            if (status[r] != ZEN_OK && ctx.errors[r][0])
                pick = r;
        if (pick >= 0)
            fprintf(stderr, "zen bench %s: %s\n", o->name, ctx.errors[pick]);
        else
            fprintf(stderr, "zen bench %s: %s (%s)\n", o->name, zen_strerror(st),
                    zen_status_name(st));
        code = ZEN_EXIT_FAIL;
    }
    free(ctx.errors);
    free(status);
    return code;
}
