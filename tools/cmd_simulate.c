/*
 * zen simulate: predict every sparse scheme's time for 2..1024 ranks at given link speeds from
 * the cost model and a sparsity profile (synthetic, or measured on a gradient trace), and run the
 * real hash partitioner on real index sets at each scale to report BALANCED's imbalance. No
 * communication happens; everything runs in this process.
 *
 * The prediction counts each scheme's local compute (cost.h, zen_cpu_model) with constants from
 * --cpu FILE, else the ZEN_SPARSE_NS_PER_* tunables; --calibrate measures them on this machine
 * and prints them in the format --cpu reads.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zen/comm.h>
#include <zen/simulate.h>
#include <zen/sparse.h>

#include "cli.h"

typedef struct sim_args {
    int ranks[64];
    int nranks;
    double gbps[16];
    int ngbps;
    double lat_us;
    uint64_t rows;
    uint32_t width;
    int width_given; /* --width with --trace: the trace's profile at this row width */
    double density;
    const char *overlap;
    double skew; /* non-zeros fall in the first skew * rows rows */
    const char *trace;
    const char *tensor;
    const char *plot;
    uint64_t seed;
    int json;
    int calibrate;
    int dense_output;
    uint64_t global_topk; /* --global-topk K: the volume table of global top-k instead */
    zen_cpu_model cpu;
} sim_args;

static void help(void)
{
    printf("usage: zen simulate [options]\n\n"
           "Predict each sparse-allreduce scheme's time at many rank counts from the cost model,\n"
           "and measure BALANCED's partition imbalance by running the real hash partitioner.\n\n"
           "  --ranks LIST       rank counts (default 2,4,8,16,32,64,128,256,512,1024)\n"
           "  --gbps LIST        link speeds in Gbit/s (default 1,10)\n"
           "  --lat-us X         per-message latency in microseconds (default 10)\n"
           "  --rows N           rows of the tensor (default 1048576)\n"
           "  --width W          values per row (default 64)\n"
           "  --density D        fraction of rows non-zero per rank (default 0.01)\n"
           "  --overlap MODEL    random|identical|disjoint (default random)\n"
           "  --skew F           non-zeros only in the first F of the rows (default 1)\n"
           "  --trace DIR        profile from a gradient trace (zen train --dump-grads)\n"
           "  --tensor NAME      which tensor of the trace (default the first)\n"
           "                     (with --width W: the trace's sparsity profile, rows of W values,\n"
           "                     e.g. a recorded embedding at a larger model's width)\n"
           "  --seed S           hash seed for the partitioner (default 1)\n"
           "  --plot FILE.png    also draw predicted time vs ranks (python3 + matplotlib)\n"
           "  --json             one JSON object per (ranks, gbps)\n\n"
           "Compute (the CPU work of each scheme, added to the wire time; docs/algorithms.md):\n"
           "  --calibrate        time the real kernels here and print the constants\n"
           "                     (ZEN_SPARSE_NS_PER_*=... lines: save them, pass with --cpu)\n"
           "  --cpu FILE         constants from FILE (default: the ZEN_SPARSE_NS_PER_* values)\n"
           "  --no-cpu           network only (the model without compute)\n"
           "  --cpu-share F      fraction of a core per rank, e.g. 0.25 for 8 ranks on 2 cores\n"
           "                     (default 1, or ZEN_SPARSE_CPU_SHARE)\n"
           "  --dense-output     the caller wants the dense result (zen_sparse_allreduce_dense)\n"
           "  --global-topk K    instead: bytes one rank sends (width 1) for the union and for\n"
           "                     global top-k K (zen_sparse_options.global_topk) vs 2k(n-1)/n,\n"
           "                     4k(n-1)/n and Ok-Topk's 6k values, and their predicted times\n"
           "                     at the first --gbps (network only)\n\n"
           "Columns: ms per scheme; best; cpu%%: compute share of the best scheme's time; push,\n"
           "pull: BALANCED's partition imbalance. JSON adds SCHEME_cpu_ms (compute part of\n"
           "SCHEME_ms), cpu_share, dense_output and best_cpu_frac.\n");
}

/* A comma-separated list of numbers in [lo, hi] (whole numbers if whole); the count, or -1 for a
 * bad entry, an empty list or more than max entries. */
static int parse_list(const char *s, double lo, double hi, int whole, double *out, int max)
{
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    if (!copy)
        return -1;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == max || (whole ? zen_parse_whole(tok, lo, hi, &out[n])
                               : zen_parse_double(tok, lo, hi, &out[n])) != 0) {
            free(copy);
            return -1;
        }
        n++;
    }
    free(copy);
    return n > 0 ? n : -1;
}

static int parse_args(int argc, char **argv, sim_args *a)
{
    double tmp[64];
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (strcmp(o, "--json") == 0) {
            a->json = 1;
            takes = 0;
        } else if (strcmp(o, "--calibrate") == 0) {
            a->calibrate = 1;
            takes = 0;
        } else if (strcmp(o, "--no-cpu") == 0) {
            double share = a->cpu.share;
            memset(&a->cpu, 0, sizeof a->cpu);
            a->cpu.share = share;
            takes = 0;
        } else if (strcmp(o, "--dense-output") == 0) {
            a->dense_output = 1;
            takes = 0;
        } else if (!v) {
            return zen_usage_error("simulate", "option '%s' needs a value or is unknown", o);
        } else if (strcmp(o, "--global-topk") == 0) {
            if (zen_parse_whole(v, 1, 4294967295.0, &tmp[0]) != 0)
                return zen_usage_error("simulate", "bad --global-topk '%s' (1..2^32-1)", v);
            a->global_topk = (uint64_t)tmp[0];
        } else if (strcmp(o, "--ranks") == 0) {
            a->nranks = parse_list(v, 1, 65536, 1, tmp, 64);
            if (a->nranks <= 0)
                return zen_usage_error("simulate", "bad --ranks '%s' (up to 64 of 1..65536)", v);
            for (int k = 0; k < a->nranks; k++)
                a->ranks[k] = (int)tmp[k];
        } else if (strcmp(o, "--gbps") == 0) {
            /* a rate of 0 would divide by zero: the list's entries must be positive */
            if ((a->ngbps = parse_list(v, 1e-6, 1e6, 0, a->gbps, 16)) <= 0)
                return zen_usage_error("simulate", "bad --gbps '%s' (up to 16 of 1e-6..1e6)", v);
        } else if (strcmp(o, "--lat-us") == 0) {
            if (zen_parse_double(v, 0, 1e9, &a->lat_us) != 0)
                return zen_usage_error("simulate", "bad --lat-us '%s' (0..1e9)", v);
        } else if (strcmp(o, "--rows") == 0) {
            double rows; /* 4e7 as well as 40000000 */
            if (zen_parse_whole(v, 1, UINT32_MAX, &rows) != 0)
                return zen_usage_error("simulate", "bad --rows '%s' (1..2^32-1)", v);
            a->rows = (uint64_t)rows;
        } else if (strcmp(o, "--width") == 0) {
            double w;
            if (zen_parse_whole(v, 1, 1 << 20, &w) != 0)
                return zen_usage_error("simulate", "bad --width '%s' (1..2^20)", v);
            a->width = (uint32_t)w;
            a->width_given = 1;
        } else if (strcmp(o, "--density") == 0) {
            if (zen_parse_double(v, 0, 1, &a->density) != 0 || !(a->density > 0))
                return zen_usage_error("simulate", "bad --density '%s' (0 < D <= 1)", v);
        } else if (strcmp(o, "--overlap") == 0) {
            a->overlap = v;
        } else if (strcmp(o, "--skew") == 0) {
            if (zen_parse_double(v, 0, 1, &a->skew) != 0 || !(a->skew > 0))
                return zen_usage_error("simulate", "bad --skew '%s' (0 < F <= 1)", v);
        } else if (strcmp(o, "--trace") == 0) {
            a->trace = v;
        } else if (strcmp(o, "--tensor") == 0) {
            a->tensor = v;
        } else if (strcmp(o, "--seed") == 0) {
            if (zen_parse_u64(v, &a->seed) != 0)
                return zen_usage_error("simulate", "bad --seed '%s' (0..2^64-1)", v);
        } else if (strcmp(o, "--plot") == 0) {
            a->plot = v;
        } else if (strcmp(o, "--cpu") == 0) {
            double share = a->cpu.share;
            zen_status st = zen_sparse_cpu_model_read(v, &a->cpu);
            if (st == ZEN_ECORRUPT)
                return zen_usage_error("simulate",
                                       "--cpu '%s' is not a constants file (it needs "
                                       "ZEN_SPARSE_NS_PER_*=number lines, as --calibrate prints)",
                                       v);
            if (st != ZEN_OK)
                return zen_usage_error("simulate", "cannot read --cpu '%s': %s", v,
                                       zen_strerror(st));
            if (!(a->cpu.share > 0))
                a->cpu.share = share;
        } else if (strcmp(o, "--cpu-share") == 0) {
            if (zen_parse_double(v, 0, 1, &a->cpu.share) != 0 || !(a->cpu.share > 0))
                return zen_usage_error("simulate", "bad --cpu-share '%s' (0 < F <= 1)", v);
        } else {
            return zen_usage_error("simulate", "unknown option '%s'", o);
        }
        i += takes;
    }
    return 0;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* count distinct rows spread over [0, span): the affine permutation i -> (a*i + b) mod span with
 * gcd(a, span) = 1 visits each row once, so the first count values are distinct. */
static uint32_t *synthetic_rows(uint64_t span, size_t count, uint64_t seed)
{
    uint32_t *out = malloc((count ? count : 1) * sizeof *out);
    if (!out)
        return NULL;
    uint64_t a = (uint64_t)((double)span * 0.6180339887) | 1;
    while (gcd(a, span) != 1)
        a++;
    uint64_t b = seed % span;
    for (size_t i = 0; i < count; i++)
        out[i] = (uint32_t)((a * (uint64_t)i + b) % span);
    return out;
}

typedef struct imbalance {
    double push;
    double pull;
} imbalance;

static int measure_imbalance(const sim_args *a, const zen_index_sets *sets, int n,
                             const zen_sparsity_profile *p, imbalance *out)
{
    if (sets) {
        double worst = 0;
        size_t total = 0;
        for (int s = 0; s < sets->nsets; s++)
            total += sets->nnz[s];
        uint32_t *all = malloc((total ? total : 1) * sizeof *all);
        if (!all)
            return -1;
        size_t k = 0;
        for (int s = 0; s < sets->nsets; s++) {
            double imb = 0;
            if (zen_sparse_partition_imbalance(sets->indices[s], sets->nnz[s], n, a->seed, &imb) !=
                ZEN_OK) {
                free(all);
                return -1;
            }
            worst = imb > worst ? imb : worst;
            memcpy(all + k, sets->indices[s], sets->nnz[s] * sizeof *all);
            k += sets->nnz[s];
        }
        out->push = worst;
        int st = zen_sparse_partition_imbalance(all, total, n, a->seed, &out->pull);
        free(all);
        return st == ZEN_OK ? 0 : -1;
    }
    uint64_t span = (uint64_t)((double)a->rows * a->skew);
    span = span ? span : 1;
    size_t local = (size_t)(a->density * (double)a->rows);
    size_t summed = (size_t)(p->gamma_n * (double)local);
    local = local > span ? span : local;
    summed = summed > span ? span : summed;
    uint32_t *idx = synthetic_rows(span, summed > local ? summed : local, a->seed + 17);
    if (!idx)
        return -1;
    int st = zen_sparse_partition_imbalance(idx, local, n, a->seed, &out->push);
    if (st == ZEN_OK)
        st = zen_sparse_partition_imbalance(idx, summed, n, a->seed, &out->pull);
    free(idx);
    return st == ZEN_OK ? 0 : -1;
}

static void print_row(FILE *f, const sim_args *a, int n, double gbps, const double *t,
                      const double *cpu, const imbalance *im, const zen_sparsity_profile *p)
{
    zen_sparse_scheme best = ZEN_SPARSE_BALANCED;
    for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        if (t[s] < t[best])
            best = (zen_sparse_scheme)s;
    if (a->json) {
        fprintf(f,
                "{\"ranks\":%d,\"gbps\":%g,\"lat_us\":%g,\"rows\":%llu,\"width\":%u,"
                "\"density\":%g,\"gamma_n\":%.4f,\"skew\":%.3f",
                n, gbps, a->lat_us, (unsigned long long)a->rows, a->width, p->density, p->gamma_n,
                p->skew);
        for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++)
            fprintf(f, ",\"%s_ms\":%.4f", zen_sparse_scheme_name((zen_sparse_scheme)s), t[s] * 1e3);
        for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++)
            fprintf(f, ",\"%s_cpu_ms\":%.4f", zen_sparse_scheme_name((zen_sparse_scheme)s),
                    cpu[s] * 1e3);
        fprintf(f,
                ",\"cpu_share\":%g,\"dense_output\":%s,\"best\":\"%s\",\"best_cpu_frac\":%.4f,"
                "\"imbalance_push\":%.4f,\"imbalance_pull\":%.4f}\n",
                a->cpu.share, a->dense_output ? "true" : "false", zen_sparse_scheme_name(best),
                t[best] > 0 ? cpu[best] / t[best] : 0, im->push, im->pull);
        return;
    }
    fprintf(f, "%6d %6g %8.4f", n, gbps, p->gamma_n);
    for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        fprintf(f, " %12.3f", t[s] * 1e3);
    fprintf(f, "  %-12s %5.0f%% %6.3f %6.3f\n", zen_sparse_scheme_name(best),
            t[best] > 0 ? 100 * cpu[best] / t[best] : 0, im->push, im->pull);
}

static int run(const sim_args *a, const zen_index_sets *sets, FILE *plot_out)
{
    if (!a->json) {
        char machine[256];
        zen_machine_line(machine, sizeof machine);
        printf("# zen simulate: predicted ms per sparse allreduce (cost model), %s\n", machine);
        printf("# tensor %llu x %u f32, %s, latency %g us\n", (unsigned long long)a->rows, a->width,
               sets ? "profile from trace" : "synthetic profile", a->lat_us);
        printf("# compute ns: sort %g hash %g merge %g merge2 %g bitmap %g per index/row; copy %g "
               "reduce %g wire %g per byte; core share %g%s\n",
               a->cpu.sort, a->cpu.hash, a->cpu.merge, a->cpu.merge2, a->cpu.bitmap,
               a->cpu.copy_byte, a->cpu.reduce_byte, a->cpu.wire_byte, a->cpu.share,
               a->dense_output ? ", dense output" : "");
        printf("%6s %6s %8s", "ranks", "gbps", "gamma_n");
        for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++)
            printf(" %12s", zen_sparse_scheme_name((zen_sparse_scheme)s));
        printf("  %-12s %6s %6s %6s\n", "best", "cpu%", "push", "pull");
    }
    for (int r = 0; r < a->nranks; r++) {
        int n = a->ranks[r];
        zen_sparsity_profile p;
        zen_status st = sets ? zen_sparse_profile_from_sets(sets, n, &p)
                             : zen_sparse_profile_synthetic(n, a->density, a->overlap, &p);
        if (st != ZEN_OK) {
            fprintf(stderr, "zen simulate: cannot build a profile for %d ranks: %s\n", n,
                    zen_strerror(st));
            return ZEN_EXIT_FAIL;
        }
        if (!sets && a->skew < 1)
            p.skew = 1.0 / a->skew > n ? n : 1.0 / a->skew;
        imbalance im = { 0, 0 };
        if (measure_imbalance(a, sets, n, &p, &im) != 0) {
            fprintf(stderr, "zen simulate: partitioner failed at %d ranks\n", n);
            return ZEN_EXIT_FAIL;
        }
        for (int g = 0; g < a->ngbps; g++) {
            double t[ZEN_SPARSE_SCHEME_COUNT], cpu[ZEN_SPARSE_SCHEME_COUNT];
            uint64_t rows = sets ? sets->rows : a->rows;
            uint32_t width = a->width; /* the trace's unless --width was given */
            if (zen_sparse_predict_cpu(n, rows, width, &p, a->gbps[g], a->lat_us, &a->cpu,
                                       a->dense_output, t, cpu, ZEN_SPARSE_SCHEME_COUNT) != ZEN_OK)
                return ZEN_EXIT_FAIL;
            /* the options are finite, but the model also reads ZEN_* tunables: a NaN there
             * would print a table of NaN and still name a "best" scheme */
            for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++)
                if (!isfinite(t[s]) || !isfinite(cpu[s])) {
                    fprintf(stderr,
                            "zen simulate: the cost model gave %s a non-finite time at %d ranks, "
                            "%g Gbit/s; check the ZEN_SPARSE_* and ZEN_NET_* values (zen info)\n",
                            zen_sparse_scheme_name((zen_sparse_scheme)s), n, a->gbps[g]);
                    return ZEN_EXIT_FAIL;
                }
            print_row(stdout, a, n, a->gbps[g], t, cpu, &im, &p);
            if (plot_out) {
                sim_args as_json = *a;
                as_json.json = 1;
                print_row(plot_out, &as_json, n, a->gbps[g], t, cpu, &im, &p);
            }
        }
        fflush(stdout);
    }
    return ZEN_EXIT_OK;
}

#define ALLTOALL_REPS 200 /* rounds timed by msg_cpu_us */

typedef struct round_arg {
    double step_s; /* rank 0: seconds per round */
} round_arg;

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rounds of an alltoall of 8 bytes per peer and no other work; the time per round on rank 0,
 * after one warm-up round. */
static zen_status alltoall_rounds(zen_comm *comm, void *arg)
{
    int n = zen_comm_size(comm), me = zen_comm_rank(comm);
    int64_t *out = calloc((size_t)n, sizeof *out), *in = calloc((size_t)n, sizeof *in);
    double t0 = 0;
    zen_status st = out && in ? ZEN_OK : ZEN_ENOMEM;
    for (int rep = -1; rep < ALLTOALL_REPS && st == ZEN_OK; rep++) {
        if (rep == 0 && (st = zen_barrier(comm)) == ZEN_OK)
            t0 = wall_s();
        if (st == ZEN_OK)
            st = zen_alltoall(comm, out, in, 1, ZEN_I64);
    }
    if (st == ZEN_OK && me == 0)
        ((round_arg *)arg)->step_s = (wall_s() - t0) / ALLTOALL_REPS;
    free(out);
    free(in);
    return st;
}

/*
 * ZEN_NET_MSG_CPU_US: the CPU a received message costs when more ranks than cores share the host
 * (cost.c charges it per message, shared over the cores like compute). On 4 x cores inproc ranks
 * every rank receives ranks - 1 messages per round of alltoall, so a round's wall time x cores /
 * (ranks (ranks - 1)). Wall time: the wake-ups are the scheduler's, so this measures the
 * machine as loaded now. 0 when it cannot be measured.
 */
static double msg_cpu_us(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int ranks = (int)(4 * cores);
    round_arg many = { 0 };
    if (cores < 1 || zen_run_inproc(ranks, NULL, alltoall_rounds, &many, NULL) != ZEN_OK)
        return 0;
    return many.step_s * (double)cores / ((double)ranks * (ranks - 1)) * 1e6;
}

/* --calibrate: the constants of this machine, in the format --cpu reads. */
static int calibrate(void)
{
    zen_cpu_model cpu;
    zen_status st = zen_sparse_cpu_calibrate(&cpu);
    if (st != ZEN_OK) {
        fprintf(stderr, "zen simulate: calibration failed: %s\n", zen_strerror(st));
        return ZEN_EXIT_FAIL;
    }
    char machine[256];
    zen_machine_line(machine, sizeof machine);
    printf("# zen simulate --calibrate: compute model constants (ns per index/row or per byte, "
           "thread CPU time, median of 5), %s\n",
           machine);
    printf("# use: zen simulate --cpu FILE, or `set -a; . FILE` for AUTO (ZEN_SPARSE_CPU_SHARE is "
           "the core share per rank, 1 here)\n");
    if (zen_sparse_cpu_model_write(&cpu, stdout) != ZEN_OK)
        return ZEN_EXIT_FAIL;
    /* not a compute constant (--cpu skips it); AUTO reads it from the environment */
    printf("# CPU per received message on an oversubscribed host, wall time\n");
    printf("ZEN_NET_MSG_CPU_US=%.2f\n", msg_cpu_us());
    return ZEN_EXIT_OK;
}

static int draw(const char *json_path, const char *png)
{
    char cmd[4096];
    /* the system python first: a python3 earlier in PATH (a venv) may lack matplotlib */
    const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    snprintf(cmd, sizeof cmd,
             "%s \"$(dirname \"$(readlink -f /proc/%d/exe)\")/../scripts/"
             "plot_simulate.py\" '%s' '%s'",
             py, (int)getpid(), json_path, png);
    if (system(cmd) != 0) {
        fprintf(stderr, "zen simulate: plotting failed (needs python3-matplotlib and "
                        "scripts/plot_simulate.py beside the build directory)\n");
        return ZEN_EXIT_FAIL;
    }
    fprintf(stderr, "zen simulate: wrote %s\n", png);
    return ZEN_EXIT_OK;
}

/* --global-topk: the volume of the union and of global top-k at every rank count. */
static int run_topk(const sim_args *a, const zen_index_sets *sets)
{
    if (!a->json)
        printf("# zen simulate --global-topk %llu | rows %llu width 1 | density %g %s | bytes "
               "one rank sends; values 4 B\n%6s %12s %12s %10s %12s %12s %12s %8s %10s %10s\n",
               (unsigned long long)a->global_topk, (unsigned long long)a->rows, a->density,
               sets ? "(trace)" : a->overlap, "ranks", "union_B", "topk_B", "select_B", "2k(n-1)/n",
               "4k(n-1)/n", "oktopk_6k", "topk/4k", "union_ms", "topk_ms");
    for (int i = 0; i < a->nranks; i++) {
        int n = a->ranks[i];
        zen_sparsity_profile prof;
        zen_status st = sets ? zen_sparse_profile_from_sets(sets, n, &prof)
                             : zen_sparse_profile_synthetic(n, a->density, a->overlap, &prof);
        zen_topk_volume v;
        if (st == ZEN_OK)
            st = zen_sparse_topk_volume(n, a->rows, &prof, a->global_topk, a->gbps[0], a->lat_us,
                                        &v);
        if (st != ZEN_OK) {
            fprintf(stderr, "zen simulate: no prediction for %d ranks: %s\n", n, zen_strerror(st));
            return ZEN_EXIT_FAIL;
        }
        double ratio = v.bound_bytes > 0 ? v.topk_bytes / v.bound_bytes : 0;
        if (a->json)
            printf("{\"ranks\":%d,\"rows\":%llu,\"global_topk\":%llu,\"gbps\":%g,"
                   "\"union_bytes\":%.0f,\"topk_bytes\":%.0f,\"select_bytes\":%.0f,"
                   "\"topk_2k_bytes\":%.0f,\"topk_4k_bytes\":%.0f,\"oktopk_6k_bytes\":%.0f,"
                   "\"topk_over_4k\":%.4f,\"union_ms\":%.4f,\"topk_ms\":%.4f}\n",
                   n, (unsigned long long)a->rows, (unsigned long long)a->global_topk, a->gbps[0],
                   v.union_bytes, v.topk_bytes, v.select_bytes, v.ideal_bytes, v.bound_bytes,
                   v.oktopk_bytes, ratio, v.union_s * 1e3, v.topk_s * 1e3);
        else
            printf("%6d %12.0f %12.0f %10.0f %12.0f %12.0f %12.0f %8.3f %10.3f %10.3f\n", n,
                   v.union_bytes, v.topk_bytes, v.select_bytes, v.ideal_bytes, v.bound_bytes,
                   v.oktopk_bytes, ratio, v.union_s * 1e3, v.topk_s * 1e3);
    }
    return ZEN_EXIT_OK;
}

int zen_cmd_simulate(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (zen_is_help(argv[i])) {
            help();
            return ZEN_EXIT_OK;
        }
    sim_args a = { .nranks = 10,
                   .ngbps = 2,
                   .lat_us = 10,
                   .rows = 1 << 20,
                   .width = 64,
                   .density = 0.01,
                   .overlap = "random",
                   .skew = 1,
                   .seed = 1 };
    const int def_ranks[10] = { 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024 };
    memcpy(a.ranks, def_ranks, sizeof def_ranks);
    a.gbps[0] = 1;
    a.gbps[1] = 10;
    zen_sparse_cpu_model_default(&a.cpu);
    int rc = parse_args(argc, argv, &a);
    if (rc != 0)
        return rc;
    if (a.calibrate)
        return calibrate();
    zen_index_sets sets;
    int have_sets = 0;
    if (a.trace) {
        zen_status st = zen_index_sets_from_trace(a.trace, a.tensor, &sets);
        if (st != ZEN_OK) {
            fprintf(stderr,
                    "zen simulate: cannot read trace '%s': %s (expected *.zgrad files "
                    "from `zen train --dump-grads`)\n",
                    a.trace, zen_strerror(st));
            return ZEN_EXIT_FAIL;
        }
        have_sets = 1;
        a.rows = sets.rows; /* what the predictions use, so the output says it */
        if (!a.width_given)
            a.width = sets.width;
    }
    char json_path[] = "/tmp/zen-simulate-XXXXXX";
    FILE *plot_out = NULL;
    if (a.plot) {
        int fd = mkstemp(json_path);
        plot_out = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!plot_out) {
            fprintf(stderr, "zen simulate: cannot create a temporary file for the plot\n");
            return ZEN_EXIT_FAIL;
        }
    }
    rc = a.global_topk ? run_topk(&a, have_sets ? &sets : NULL)
                       : run(&a, have_sets ? &sets : NULL, plot_out);
    if (plot_out) {
        fclose(plot_out);
        if (rc == ZEN_EXIT_OK)
            rc = draw(json_path, a.plot);
        remove(json_path);
    }
    if (have_sets)
        zen_index_sets_free(&sets);
    return rc;
}
