/*
 * zen bench sparse: every sparse-allreduce scheme on the same data, verified against a dense sum
 * that each rank computes locally, with time, bytes on the wire and balance.
 *
 * Data: synthetic (rows x width, local density, an overlap model and an optional skew) or a
 * recorded gradient trace (--trace DIR, docs/trace-format.md). Every rank can regenerate or read
 * every rank's input, so every rank checks its own output of every call (warm-up included)
 * against the full reference; a scheme is "verified" when no rank saw a difference.
 *
 * Per scheme it reports: time p50 over iterations of the slowest rank, the largest bytes sent and
 * received by any rank in one call, the ideal volume, push/pull imbalance (paper Def. 8) and the
 * speedup over DENSE and ALLGATHER. The ideal volume is what a perfectly balanced push/pull (BP)
 * with COO on the wire sends per rank:
 *     ideal = (n-1)/n * (nnz_avg + nnz_sum) * (4 + 4w) bytes
 * with nnz_avg the mean local non-zero rows after coalescing and nnz_sum the rows of the sum.
 *
 * Ranks: threads of this process (--ranks, inproc), or one rank per process when started by a
 * launcher (zen launch, mpirun), with the communicator created from the environment.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zen/sparse.h>

#include "bench.h"
#include "cli.h"
#include "opt_parse.h"
#include "sparse_verify.h"

enum {
    OV_RANDOM,
    OV_IDENTICAL,
    OV_DISJOINT,
    OV_ZIPF
};

static const char *const overlap_names[] = { "random", "identical", "disjoint", "zipf" };

typedef struct sb_cfg {
    int ranks;
    zen_transport_kind transport;
    uint64_t rows;
    uint32_t width;
    double density, zipf_s, skew;
    int overlap;
    int schemes[ZEN_SPARSE_SCHEME_COUNT + 1];
    int nschemes;
    int iters, warmup;
    uint64_t seed;
    const char *trace;
    int json;
    int call_times; /* --call-times: every iteration's time to stderr */
    int sequential; /* --sequential: each scheme's calls in one block, not interleaved */
    int twins;      /* --twins: a second, independent copy of every scheme but AUTO (a control) */
    double timeout;
    int hash_k, pull_format; /* BALANCED ablations (zen_sparse_options), 0: defaults */
    double hash_r1;
    double max_mem_gib;   /* --max-mem: the bound of a trace replay's memory, 0: half of RAM */
    uint64_t global_topk; /* --global-topk: zen_sparse_options.global_topk, 0: off */
    int schemes_given;
} sb_cfg;

static const char *const pull_format_names[] = { "auto", "hash-bitmap", "coo", "plain-bitmap" };

/* Runs per iteration: every scheme, and with --twins a twin of each but AUTO. */
#define SB_MAX_RUNS (2 * ZEN_SPARSE_SCHEME_COUNT)

/* One allreduce of the workload: every rank's input and the dense sum. */
typedef struct sb_case {
    uint64_t rows;
    uint32_t width;
    int n;
    size_t *nnz;             /* per rank */
    uint32_t **idx;          /* per rank */
    float **val;             /* per rank */
    float *ref;              /* rows * width */
    float *absref;           /* rows * width sums of |value| (trace data), else NULL */
    size_t nonfinite;        /* NaN or infinite elements of ref (a trace may hold them) */
    size_t nnz_unique_total; /* sum over ranks of coalesced local nnz */
    size_t nnz_sum;          /* non-zero rows of the sum */
} sb_case;

#define SB_AGG_BAL 6 /* serial, passes, pull formats 0..3 */

typedef struct sb_result {
    int scheme;
    int twin;   /* the second copy of scheme (--twins) */
    int chosen; /* AUTO: the scheme it ran most often in the timed calls */
    int verified;
    double p50_us;
    double run_us; /* every call of the run, warm-up included (slowest rank per iteration) */
    double max_sent, max_recv;
    double imb_push, imb_pull;
    double predicted_us[ZEN_SPARSE_SCHEME_COUNT]; /* AUTO's cost model, per scheme (0: none) */
    double phase_us[ZEN_PHASE_COUNT]; /* last iteration, slowest rank per phase, summed tensors */
    double paired[ZEN_SPARSE_SCHEME_COUNT]; /* AUTO: its time over each scheme's (paired_ratios) */
    double twin_paired;              /* a twin: its time over its original's, paired by iteration */
    double part_serial, part_passes; /* BALANCED's hash partition, the most of any rank */
    int pull_formats;                /* bit f: some rank's pull blob had zen_sparse_pull_format f */
} sb_result;

typedef struct sb_shared {
    const sb_cfg *cfg;
    sb_case *cases;
    size_t ncases;
    sb_result results[SB_MAX_RUNS];
    int nresults;
    int report;              /* print the report from this process */
    zen_transport_kind kind; /* transport actually used */
    int ranks_here;          /* ranks sharing this host's cores (oversubscription note) */
} sb_shared;

/* ---- data ---- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* k distinct values of {base + stride * t : t < m}, in random order (selection sampling). */
static size_t pick_distinct(uint64_t *rng, uint64_t m, uint64_t base, uint64_t stride, size_t k,
                            uint32_t *out)
{
    size_t got = 0;
    if (k > m)
        k = (size_t)m;
    for (uint64_t t = 0; t < m && got < k; t++)
        if (rng_next(rng) % (m - t) < k - got)
            out[got++] = (uint32_t)(base + stride * t);
    for (size_t i = got; i > 1; i--) {
        size_t j = (size_t)(rng_next(rng) % i);
        uint32_t x = out[i - 1];
        out[i - 1] = out[j];
        out[j] = x;
    }
    return got;
}

static void free_case(sb_case *c)
{
    for (int r = 0; c->idx && r < c->n; r++) {
        free(c->idx[r]);
        free(c->val[r]);
    }
    free(c->idx);
    free(c->val);
    free(c->nnz);
    free(c->ref);
    free(c->absref);
    memset(c, 0, sizeof *c);
}

static int alloc_case(sb_case *c, int n, uint64_t rows, uint32_t width)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->rows = rows;
    c->width = width;
    c->nnz = calloc((size_t)n, sizeof *c->nnz);
    c->idx = calloc((size_t)n, sizeof *c->idx);
    c->val = calloc((size_t)n, sizeof *c->val);
    c->ref = calloc((size_t)rows * width, sizeof *c->ref);
    return c->nnz && c->idx && c->val && c->ref ? 0 : -1;
}

/* Fill ref, nnz_sum and nnz_unique_total from the inputs. */
static int finish_case(sb_case *c)
{
    size_t w = c->width;
    unsigned char *seen = malloc((size_t)c->rows);
    if (!seen)
        return -1;
    c->nnz_unique_total = 0;
    for (int r = 0; r < c->n; r++) {
        memset(seen, 0, (size_t)c->rows);
        for (size_t i = 0; i < c->nnz[r]; i++) {
            uint32_t x = c->idx[r][i];
            c->nnz_unique_total += !seen[x];
            seen[x] = 1;
            for (size_t k = 0; k < w; k++) {
                c->ref[(size_t)x * w + k] += c->val[r][i * w + k];
                if (c->absref)
                    c->absref[(size_t)x * w + k] += fabsf(c->val[r][i * w + k]);
            }
        }
    }
    free(seen);
    c->nnz_sum = 0;
    c->nonfinite = 0;
    for (uint64_t x = 0; x < c->rows; x++) {
        int nonzero = 0;
        for (size_t k = 0; k < w; k++) {
            nonzero |= c->ref[x * w + k] != 0.0f;
            c->nonfinite += !isfinite(c->ref[x * w + k]);
        }
        c->nnz_sum += nonzero;
    }
    return 0;
}

/* The scheme's output against the dense sum (sparse_verify.h has the rules, NaN/Inf included). */
static int matches_reference(const sb_case *c, const float *out)
{
    return bench_sparse_matches_reference(out, c->ref, c->absref, (size_t)c->rows * c->width, c->n);
}

/* --global-topk: exactly min(k, non-zeros of the sum) rows kept, each the reference's sum, and
 * no dropped magnitude above a kept one (up to the rounding of recorded values' sums). */
static int matches_topk(const sb_case *c, const float *out, uint64_t k)
{
    size_t len = (size_t)c->rows * c->width, kept = 0, nonzero = 0;
    float min_kept = INFINITY, max_dropped = 0;
    for (size_t i = 0; i < len; i++) {
        nonzero += c->ref[i] != 0;
        if (out[i] != 0) {
            kept++;
            if (!bench_sparse_matches_reference(out + i, c->ref + i,
                                                c->absref ? c->absref + i : NULL, 1, c->n))
                return 0;
            min_kept = fminf(min_kept, fabsf(out[i]));
        } else if (fabsf(c->ref[i]) > max_dropped) {
            max_dropped = fabsf(c->ref[i]);
        }
    }
    float slack = c->absref ? 1 - 1e-5f * (float)c->n : 1;
    return kept == (k < nonzero ? k : nonzero) && (kept == 0 || min_kept >= max_dropped * slack);
}

/* Synthetic workload: see --help for the models. */
static int gen_synthetic(const sb_cfg *cfg, int n, sb_case *c)
{
    if (alloc_case(c, n, cfg->rows, cfg->width))
        return -1;
    uint64_t universe = cfg->skew > 0 ? (uint64_t)ceil(cfg->skew * (double)cfg->rows) : cfg->rows;
    if (universe < 1)
        universe = 1;
    if (universe > cfg->rows)
        universe = cfg->rows;
    size_t k = (size_t)llround(cfg->density * (double)cfg->rows);
    double *cdf = NULL;
    if (cfg->overlap == OV_ZIPF) {
        cdf = malloc((size_t)universe * sizeof *cdf);
        if (!cdf)
            return -1;
        double acc = 0;
        for (uint64_t x = 0; x < universe; x++)
            cdf[x] = acc += pow((double)(x + 1), -cfg->zipf_s);
        for (uint64_t x = 0; x < universe; x++)
            cdf[x] /= acc;
    }
    for (int r = 0; r < n; r++) {
        uint64_t rng = cfg->seed * 0x100000001b3ull + (uint64_t)r * 7919 + 17;
        uint64_t shared = cfg->seed * 0x100000001b3ull + 99991;
        c->idx[r] = malloc((k + 1) * sizeof(uint32_t));
        c->val[r] = malloc((k * cfg->width + 1) * sizeof(float));
        if (!c->idx[r] || !c->val[r]) {
            free(cdf);
            return -1;
        }
        size_t got;
        switch (cfg->overlap) {
        case OV_IDENTICAL:
            got = pick_distinct(&shared, universe, 0, 1, k, c->idx[r]);
            break;
        case OV_DISJOINT: {
            uint64_t m = universe / (uint64_t)n + ((uint64_t)r < universe % (uint64_t)n);
            got = pick_distinct(&rng, m, (uint64_t)r, (uint64_t)n, k, c->idx[r]);
            break;
        }
        case OV_ZIPF:
            /* k draws with replacement: hot rows repeat, as embedding lookups do */
            for (got = 0; got < k; got++) {
                double u = rng_unit(&rng);
                size_t lo = 0, hi = (size_t)universe - 1;
                while (lo < hi) {
                    size_t mid = (lo + hi) / 2;
                    if (cdf[mid] < u)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                c->idx[r][got] = (uint32_t)lo;
            }
            break;
        default:
            got = pick_distinct(&rng, universe, 0, 1, k, c->idx[r]);
            break;
        }
        c->nnz[r] = got;
        for (size_t i = 0; i < got * cfg->width; i++)
            c->val[r][i] = (float)(1 + (rng_next(&rng) % 4)); /* small positive integers */
    }
    free(cdf);
    return finish_case(c);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/*
 * What a trace replay holds at once, against its bound (--max-mem, else half of this machine's
 * memory): for the whole run, every case's inputs and its dense sum and sum of magnitudes
 * (rows * width * 8 bytes); during a call, one dense output per rank (rows * width * 4 bytes)
 * and a byte per row. A process per rank holds its own copy of the workload, so on a host of k
 * such ranks it counts k times. A corrupt or hostile rows field (up to 2^32 - 1), or a trace of
 * many steps whose tensors each fit, must end in this message, not in an allocation of tens of
 * GiB or the OOM killer.
 */
typedef struct replay_mem {
    double limit;     /* bytes */
    double held;      /* bytes of one copy of the cases so far */
    double peak;      /* bytes of the largest case's per-call part, all copies */
    int copies;       /* copies of the workload on this host */
    int outputs;      /* dense outputs at a time on this host */
    size_t ncases;    /* cases so far */
    const char *what; /* where the limit comes from */
} replay_mem;

static void replay_mem_init(const sb_cfg *cfg, int copies, int outputs, replay_mem *m)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double have = pages > 0 && page > 0 ? (double)pages * (double)page : 1e300;
    memset(m, 0, sizeof *m);
    m->copies = copies;
    m->outputs = outputs;
    m->limit = cfg->max_mem_gib > 0 ? cfg->max_mem_gib * 1073741824.0 : have / 2;
    m->what = cfg->max_mem_gib > 0 ? "--max-mem" : "half of this machine's memory";
}

/* Adds held bytes (per copy) and a case's per-call part; 0 while the replay fits its bound,
 * else a message naming the bound and what to do, and -1. */
static int replay_charge(const sb_cfg *cfg, replay_mem *m, double held, double peak,
                         const char *tensor, uint64_t step)
{
    m->held += held;
    m->peak = peak > m->peak ? peak : m->peak;
    double need = m->held * m->copies + m->peak;
    if (need <= m->limit)
        return 0;
    /* MiB below a GiB: a small bound (tests, --max-mem 0.001) would read "0.00 GiB" */
    int gib = m->limit >= 1073741824.0;
    double unit = gib ? 1073741824.0 : 1048576.0;
    const char *name = gib ? "GiB" : "MiB";
    fprintf(stderr,
            "zen bench sparse: replaying %s needs %.2f %s at once by tensor %s of step %llu "
            "(%zu tensors before it: inputs, dense sums and %d dense outputs), more than its "
            "bound of %.2f %s (%s); replay fewer steps (move rank*-step* files out of the "
            "directory) or fewer ranks, or set the bound with --max-mem GIB\n",
            cfg->trace, need / unit, name, tensor, (unsigned long long)step, m->ncases, m->outputs,
            m->limit / unit, name, m->what);
    return -1;
}

/* The steps of the trace directory that rank 0 recorded, ascending (*steps: malloc'd). */
static int list_trace_steps(const sb_cfg *cfg, uint64_t **out, size_t *count)
{
    DIR *d = opendir(cfg->trace);
    if (!d) {
        fprintf(stderr, "zen bench sparse: cannot open trace directory %s: %s\n", cfg->trace,
                strerror(errno));
        return -1;
    }
    uint64_t *steps = NULL;
    size_t nsteps = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        unsigned long long s;
        char tail[8];
        if (sscanf(e->d_name, "rank0-step%llu.zgra%1s", &s, tail) == 2 && tail[0] == 'd' &&
            strstr(e->d_name, ".tmp") == NULL) {
            if (nsteps == cap) {
                cap = cap ? cap * 2 : 64;
                uint64_t *q = realloc(steps, cap * sizeof *q);
                if (!q) {
                    free(steps);
                    closedir(d);
                    return -1;
                }
                steps = q;
            }
            steps[nsteps++] = s;
        }
    }
    closedir(d);
    if (nsteps == 0) {
        fprintf(stderr,
                "zen bench sparse: %s holds no trace files (rank0-step<N>.zgrad); record one with "
                "zen_trace_write or see docs/trace-format.md\n",
                cfg->trace);
        free(steps);
        return -1;
    }
    qsort(steps, nsteps, sizeof *steps, cmp_u64);
    *out = steps;
    *count = nsteps;
    return 0;
}

/*
 * A file's header against its name and this run: rank r's file of a step must say rank r and
 * that step, the ranks of a step must agree on the world size, and a replay can use at most the
 * ranks that recorded the trace. A file that says otherwise was renamed or mixed in from another
 * run, and replaying it would verify a workload nobody recorded.
 */
static int check_header(const char *path, const zen_trace_step *s, int r, uint64_t step, int n,
                        const zen_trace_step *first)
{
    if (s->rank != (uint32_t)r || s->step != step) {
        fprintf(stderr,
                "zen bench sparse: %s holds rank %u's step %llu (its header), not rank %d's step "
                "%llu (its name)\n",
                path, s->rank, (unsigned long long)s->step, r, (unsigned long long)step);
        return -1;
    }
    if (s->world_size != first->world_size) {
        fprintf(stderr,
                "zen bench sparse: %s was recorded at world size %u, rank 0's file of step %llu "
                "at %u\n",
                path, s->world_size, (unsigned long long)step, first->world_size);
        return -1;
    }
    if ((uint32_t)n > s->world_size) {
        fprintf(stderr,
                "zen bench sparse: %s was recorded by %u ranks: a replay can use at most that "
                "many (--ranks, or the launcher's -n), not %d\n",
                path, s->world_size, n);
        return -1;
    }
    return 0;
}

/* Reads rank r's file of a step into *s, charging its inputs to m. 1: read; 0: skip the step (no
 * file, or a corrupt one); -1: stop the replay. */
static int read_rank(const sb_cfg *cfg, int n, int r, uint64_t step, zen_trace_step *s,
                     const zen_trace_step *first, replay_mem *m)
{
    char path[4096];
    zen_status st = zen_trace_path(path, sizeof path, cfg->trace, (uint32_t)r, step);
    if (st == ZEN_OK)
        st = zen_trace_read(path, s);
    if (st != ZEN_OK) {
        if (st == ZEN_EIO)
            return 0; /* no file: the step is incomplete */
        fprintf(stderr, "zen bench sparse: %s: %s\n", path, zen_strerror(st));
        return st == ZEN_ECORRUPT ? 0 : -1;
    }
    if (check_header(path, s, r, step, n, first) != 0)
        return -1;
    for (size_t t = 0; t < s->count; t++) {
        const zen_trace_tensor *x = &s->tensors[t];
        if (replay_charge(cfg, m, (double)x->nnz * (4.0 + 4.0 * x->width), 0, x->name, step))
            return -1;
    }
    return 1;
}

/* Reads every rank's file of one step into st[0..n). 1: the step is complete and usable;
 * 0: skip it (a rank has no file, or the ranks' tensors differ); -1: stop the replay. */
static int read_step(const sb_cfg *cfg, int n, uint64_t step, zen_trace_step *st, replay_mem *m)
{
    double held = m->held; /* a skipped step's inputs are freed: uncharged again */
    int ok = 1;
    for (int r = 0; r < n && ok > 0; r++) {
        ok = read_rank(cfg, n, r, step, &st[r], &st[0], m);
        if (ok > 0 && st[r].count != st[0].count) {
            fprintf(stderr, "zen bench sparse: step %llu: ranks have different tensors\n",
                    (unsigned long long)step);
            ok = 0;
        }
    }
    if (ok == 0)
        m->held = held;
    return ok;
}

/* One case per tensor of a step read by read_step, taking its inputs over; -1 on failure. */
static int add_step_cases(const sb_cfg *cfg, int n, uint64_t step, zen_trace_step *st,
                          replay_mem *m, sb_case **cases, size_t *ncases)
{
    for (size_t t = 0; t < st[0].count; t++) {
        const zen_trace_tensor *t0 = &st[0].tensors[t];
        int same = 1;
        for (int r = 1; r < n; r++)
            same &= st[r].tensors[t].rows == t0->rows && st[r].tensors[t].width == t0->width;
        if (!same) {
            fprintf(stderr, "zen bench sparse: tensor %s differs in shape across ranks\n",
                    t0->name);
            continue;
        }
        double elems = (double)t0->rows * t0->width;
        if (replay_charge(cfg, m, elems * 8.0, elems * 4.0 * m->outputs + (double)t0->rows,
                          t0->name, step))
            return -1;
        sb_case *q = realloc(*cases, (*ncases + 1) * sizeof *q);
        if (!q) {
            fprintf(stderr, "zen bench sparse: out of memory for the cases of the replay\n");
            return -1;
        }
        *cases = q;
        sb_case *c = &q[(*ncases)++];
        m->ncases++;
        if (alloc_case(c, n, t0->rows, t0->width) ||
            !(c->absref = calloc((size_t)t0->rows * t0->width, sizeof *c->absref))) {
            fprintf(stderr,
                    "zen bench sparse: out of memory for the dense sums of tensor %s of step %llu "
                    "(%.2f GiB)\n",
                    t0->name, (unsigned long long)step, elems * 8.0 / 1073741824.0);
            return -1;
        }
        for (int r = 0; r < n; r++) {
            zen_trace_tensor *x = &st[r].tensors[t];
            c->nnz[r] = (size_t)x->nnz;
            c->idx[r] = x->indices; /* take ownership */
            c->val[r] = x->values;
            x->indices = NULL;
            x->values = NULL;
        }
        if (finish_case(c)) {
            fprintf(stderr, "zen bench sparse: out of memory checking tensor %s\n", t0->name);
            return -1;
        }
    }
    return 0;
}

/* Trace workload: one case per (step, tensor) for which every rank has a file. copies and
 * outputs: see replay_mem. */
static int load_trace(const sb_cfg *cfg, int n, int copies, int outputs, sb_case **out,
                      size_t *count)
{
    *out = NULL;
    *count = 0;
    uint64_t *steps = NULL;
    size_t nsteps = 0;
    if (list_trace_steps(cfg, &steps, &nsteps) != 0)
        return -1;
    replay_mem m;
    replay_mem_init(cfg, copies, outputs, &m);
    sb_case *cases = NULL;
    size_t ncases = 0;
    int rc = 0;
    for (size_t si = 0; si < nsteps && rc == 0; si++) {
        zen_trace_step *st = calloc((size_t)n, sizeof *st);
        int ok = st ? read_step(cfg, n, steps[si], st, &m) : -1;
        if (ok < 0)
            rc = -1;
        else if (ok > 0)
            rc = add_step_cases(cfg, n, steps[si], st, &m, &cases, &ncases);
        for (int r = 0; st && r < n; r++)
            zen_trace_free(&st[r]);
        free(st);
    }
    free(steps);
    if (rc == 0 && ncases == 0) {
        fprintf(stderr, "zen bench sparse: no complete step for %d ranks in %s\n", n, cfg->trace);
        rc = -1;
    }
    size_t nonfinite = 0;
    for (size_t i = 0; rc == 0 && i < ncases; i++)
        nonfinite += cases[i].nonfinite;
    if (nonfinite)
        fprintf(stderr,
                "zen bench sparse: note: the trace's sums hold %zu NaN/Inf elements; a scheme is "
                "verified only if it returns NaN exactly there and the same infinities\n",
                nonfinite);
    if (rc != 0) {
        for (size_t i = 0; i < ncases; i++)
            free_case(&cases[i]);
        free(cases);
        return -1;
    }
    *out = cases;
    *count = ncases;
    return 0;
}

/* ---- the measurement ---- */

/*
 * One scheme's run in progress. By default the schemes take turns, one call each per iteration
 * (--sequential: all of one scheme's calls, then the next's), so that a change in the machine's
 * load during the run lands on every scheme alike and the ratios between them stay fair.
 */
typedef struct sb_run {
    int scheme;
    int twin;      /* --twins: the second copy of scheme */
    double *times; /* per iteration, this rank's seconds (the slowest rank's after finish) */
    int *ran;      /* per iteration, the scheme the call ran (AUTO's choice) */
    /* bad, sent, recv, push, pull, then the cost model's predictions (AUTO only; summed over the
     * tensors of a trace), then the phases, then BALANCED's partition (serial items, passes) and
     * pull formats (one flag per zen_sparse_pull_format a blob had) */
    double agg[5 + ZEN_SPARSE_SCHEME_COUNT + ZEN_PHASE_COUNT + SB_AGG_BAL];
} sb_run;

static zen_status run_call(zen_comm *comm, sb_shared *sh, sb_run *r, int it, float *out)
{
    const sb_cfg *cfg = sh->cfg;
    int me = zen_comm_rank(comm), last = it == cfg->warmup + cfg->iters - 1;
    zen_sparse_options opts = ZEN_SPARSE_OPTIONS_INIT;
    opts.scheme = (zen_sparse_scheme)r->scheme;
    opts.hash_probes = cfg->hash_k;
    opts.hash_r1 = cfg->hash_r1;
    opts.pull_format = cfg->pull_format;
    opts.global_topk = (size_t)cfg->global_topk;
    /* one key: a trace's steps are successive calls for the same tensors (a key's profile is
     * per shape too), as in training; only AUTO keeps state under it */
    opts.key = "bench";
    zen_status st = ZEN_OK;
    double t = 0;
    for (size_t ci = 0; ci < sh->ncases && st == ZEN_OK; ci++) {
        const sb_case *c = &sh->cases[ci];
        zen_sparse_tensor in = { c->rows,    c->width, c->nnz[me], ZEN_INDEX_U32,
                                 c->idx[me], ZEN_F32,  c->val[me] };
        zen_sparse_stats stats;
        if ((st = zen_barrier(comm)) != ZEN_OK)
            break;
        double t0 = bench_now();
        st = zen_sparse_allreduce_dense(comm, &in, out, &opts, &stats);
        t += bench_now() - t0;
        /* No rank verifies while another is still in its call: on shared cores the check's CPU
         * (slow when the sum's rounding differs from the reference's) would land in the other
         * ranks' timed region. On a trace, 4 inproc ranks on 2 cores, HIERARCHICAL took 12.8 ms
         * per iteration without this wait and 7.5 ms with it (DENSE 17.3 and 12.1). */
        if (st != ZEN_OK || (st = zen_barrier(comm)) != ZEN_OK)
            break;
        if (cfg->global_topk ? !matches_topk(c, out, cfg->global_topk) : !matches_reference(c, out))
            r->agg[0] = 1;
        r->ran[it] = stats.scheme;
        if (last) { /* bytes of all tensors, as the ideal and the model */
            r->agg[1] += (double)stats.bytes_sent;
            r->agg[2] += (double)stats.bytes_recv;
            if (stats.imbalance_push > r->agg[3])
                r->agg[3] = stats.imbalance_push;
            if (stats.imbalance_pull > r->agg[4])
                r->agg[4] = stats.imbalance_pull;
            for (int k = 0; k < ZEN_SPARSE_SCHEME_COUNT; k++)
                r->agg[5 + k] += stats.predicted_s[k];
            double *bal = r->agg + 5 + ZEN_SPARSE_SCHEME_COUNT + ZEN_PHASE_COUNT;
            for (int k = 0; k < ZEN_PHASE_COUNT; k++)
                r->agg[5 + ZEN_SPARSE_SCHEME_COUNT + k] += stats.phase_us[k];
            bal[0] += (double)stats.partition_serial;
            bal[1] += (double)stats.partition_passes;
            if (stats.pull_format < 4)
                bal[2 + stats.pull_format] = 1;
        }
    }
    r->times[it] = t;
    return st;
}

/* The scheme AUTO ran most often in the timed calls (the last call's on a tie). */
static int most_run(const int *ran, int from, int to)
{
    int count[ZEN_SPARSE_SCHEME_COUNT] = { 0 }, best = ran[to - 1];
    for (int it = from; it < to; it++)
        if (ran[it] >= 0 && ran[it] < ZEN_SPARSE_SCHEME_COUNT)
            count[ran[it]]++;
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        if (count[s] > count[best])
            best = s;
    return best;
}

/* --call-times: every rank's time of every call, `# rank-call SCHEME ITERATION US...` (rank
 * order), so that a statistic over the ranks other than the slowest can be studied offline. */
static zen_status print_rank_calls(zen_comm *comm, const sb_cfg *cfg, const sb_run *r)
{
    int me = zen_comm_rank(comm), n = zen_comm_size(comm), total = cfg->warmup + cfg->iters;
    double *all = malloc((size_t)n * (size_t)total * sizeof *all);
    zen_status st = all ? zen_allgather(comm, r->times, all, (size_t)total, ZEN_F64) : ZEN_ENOMEM;
    for (int it = 0; st == ZEN_OK && me == 0 && it < total; it++) {
        fprintf(stderr, "# rank-call %s%s %d", zen_sparse_scheme_name((zen_sparse_scheme)r->scheme),
                r->twin ? "~twin" : "", it);
        for (int k = 0; k < n; k++)
            fprintf(stderr, " %.1f", all[(size_t)k * (size_t)total + (size_t)it] * 1e6);
        fputc('\n', stderr);
    }
    free(all);
    return st;
}

static zen_status finish_run(zen_comm *comm, const sb_cfg *cfg, sb_run *r, sb_result *res)
{
    int me = zen_comm_rank(comm), total = cfg->warmup + cfg->iters;
    zen_status st = cfg->call_times ? print_rank_calls(comm, cfg, r) : ZEN_OK;
    if (st == ZEN_OK)
        st = bench_max_over_ranks(comm, r->times, (size_t)total);
    if (st == ZEN_OK)
        st = bench_max_over_ranks(comm, r->agg, sizeof r->agg / sizeof r->agg[0]);
    if (st != ZEN_OK)
        return st;
    res->scheme = r->scheme;
    res->twin = r->twin;
    res->verified = r->agg[0] == 0;
    for (int it = 0; cfg->call_times && me == 0 && it < total; it++)
        fprintf(stderr, "# call %s%s %d %.1f %s\n",
                zen_sparse_scheme_name((zen_sparse_scheme)r->scheme), r->twin ? "~twin" : "", it,
                r->times[it] * 1e6, zen_sparse_scheme_name((zen_sparse_scheme)r->ran[it]));
    double *sorted = malloc((size_t)cfg->iters * sizeof *sorted); /* times stay in call order */
    if (!sorted)
        return ZEN_ENOMEM;
    memcpy(sorted, r->times + cfg->warmup, (size_t)cfg->iters * sizeof *sorted);
    res->p50_us = bench_percentile(sorted, (size_t)cfg->iters, 50) * 1e6;
    free(sorted);
    res->run_us = 0;
    for (int it = 0; it < total; it++)
        res->run_us += r->times[it] * 1e6;
    res->max_sent = r->agg[1];
    res->max_recv = r->agg[2];
    res->imb_push = r->agg[3];
    res->imb_pull = r->agg[4];
    res->chosen = most_run(r->ran, cfg->warmup, total);
    for (int k = 0; k < ZEN_SPARSE_SCHEME_COUNT; k++)
        res->predicted_us[k] = r->agg[5 + k] * 1e6;
    for (int k = 0; k < ZEN_PHASE_COUNT; k++)
        res->phase_us[k] = r->agg[5 + ZEN_SPARSE_SCHEME_COUNT + k];
    const double *bal = r->agg + 5 + ZEN_SPARSE_SCHEME_COUNT + ZEN_PHASE_COUNT;
    res->part_serial = bal[0];
    res->part_passes = bal[1];
    res->pull_formats = 0;
    for (int f = 1; f < 4; f++)
        res->pull_formats |= bal[2 + f] > 0 ? 1 << f : 0;
    return ZEN_OK;
}

/* The schemes' order in interleaved iteration it: a permutation drawn from it alone (so the same
 * on every rank), because a call's time depends on what ran just before it (the caches it left,
 * how far apart it left the ranks) and a fixed order would give each scheme the same neighbour. */
static void shuffled_order(int *order, int ns, uint64_t it)
{
    uint64_t x = it * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < ns; i++)
        order[i] = i;
    for (int i = ns - 1; i > 0; i--) {
        x ^= x << 13; /* xorshift64 */
        x ^= x >> 7;
        x ^= x << 17;
        int j = (int)(x % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/*
 * One run's time over another's, paired by iteration: the median over the timed iterations of
 * a's call over b's call of the same iteration (interleaved, so both saw the same load). On the
 * shared 2-core VM a scheme's p50 over 40 calls moves by 10-30% from run to run,
 * and the ratio of two such p50s with it; the paired median is the steadier estimate of how far
 * AUTO is from a scheme. Slowest rank's times, as the p50s; q holds cfg->iters.
 */
static double paired_median(const sb_cfg *cfg, const sb_run *a, const sb_run *b, double *q)
{
    size_t k = 0;
    for (int it = cfg->warmup; it < cfg->warmup + cfg->iters; it++)
        if (b->times[it] > 0)
            q[k++] = a->times[it] / b->times[it];
    return k ? bench_percentile(q, k, 50) : 0;
}

/* AUTO's over every scheme's, and each twin's over its original's (the control: how far two
 * copies of one scheme land apart on this host, paired). */
static zen_status paired_ratios(const sb_cfg *cfg, const sb_run *runs, int ns, sb_result *results)
{
    double *q = malloc((size_t)cfg->iters * sizeof *q);
    if (!q)
        return ZEN_ENOMEM;
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < ns; j++) {
            if (runs[i].scheme == ZEN_SPARSE_AUTO && !runs[j].twin)
                results[i].paired[runs[j].scheme] = paired_median(cfg, &runs[i], &runs[j], q);
            if (runs[i].twin && !runs[j].twin && runs[j].scheme == runs[i].scheme)
                results[i].twin_paired = paired_median(cfg, &runs[i], &runs[j], q);
        }
    free(q);
    return ZEN_OK;
}

/* Every scheme's calls, interleaved or one scheme after another (cfg->sequential). */
static zen_status run_all(zen_comm *comm, sb_shared *sh, sb_result *results, int *nruns)
{
    const sb_cfg *cfg = sh->cfg;
    int ns = cfg->nschemes, total = cfg->warmup + cfg->iters;
    size_t maxcount = 0;
    for (size_t ci = 0; ci < sh->ncases; ci++) {
        size_t cnt = (size_t)sh->cases[ci].rows * sh->cases[ci].width;
        if (cnt > maxcount)
            maxcount = cnt;
    }
    sb_run runs[SB_MAX_RUNS];
    memset(runs, 0, sizeof runs);
    float *out = malloc((maxcount ? maxcount : 1) * sizeof *out);
    zen_status st = out ? ZEN_OK : ZEN_ENOMEM;
    for (int i = 0; i < cfg->nschemes; i++)
        runs[i].scheme = cfg->schemes[i];
    for (int i = 0; cfg->twins && i < cfg->nschemes; i++)
        if (cfg->schemes[i] != ZEN_SPARSE_AUTO)
            runs[ns++] = (sb_run){ .scheme = cfg->schemes[i], .twin = 1 };
    for (int i = 0; i < ns && st == ZEN_OK; i++) {
        runs[i].times = calloc((size_t)total + 1, sizeof *runs[i].times);
        runs[i].ran = calloc((size_t)total + 1, sizeof *runs[i].ran);
        if (!runs[i].times || !runs[i].ran)
            st = ZEN_ENOMEM;
    }
    int outer = cfg->sequential ? ns : total, inner = cfg->sequential ? total : ns;
    for (int a = 0; a < outer && st == ZEN_OK; a++) {
        int order[SB_MAX_RUNS];
        shuffled_order(order, ns, (uint64_t)a);
        for (int b = 0; b < inner && st == ZEN_OK; b++)
            st = cfg->sequential ? run_call(comm, sh, &runs[a], b, out)
                                 : run_call(comm, sh, &runs[order[b]], a, out);
    }
    for (int i = 0; i < ns && st == ZEN_OK; i++)
        st = finish_run(comm, cfg, &runs[i], &results[i]);
    if (st == ZEN_OK && !cfg->sequential)
        st = paired_ratios(cfg, runs, ns, results);
    for (int i = 0; i < ns; i++) {
        free(runs[i].times);
        free(runs[i].ran);
    }
    free(out);
    *nruns = ns;
    return st;
}

static zen_status bench_rank(zen_comm *comm, const bench_opts *o, void *arg)
{
    (void)o;
    sb_shared *sh = arg;
    const sb_cfg *cfg = sh->cfg;
    int me = zen_comm_rank(comm);
    if (!sh->cases) {
        /* one rank per process (launcher): build the workload for the launcher's world size */
        int n = zen_comm_size(comm);
        if (cfg->trace) {
            int here = zen_comm_local_size(comm);
            if (load_trace(cfg, n, here, here, &sh->cases, &sh->ncases))
                return ZEN_EIO;
        } else {
            sh->cases = calloc(1, sizeof *sh->cases);
            sh->ncases = 1;
            if (!sh->cases || gen_synthetic(cfg, n, sh->cases))
                return ZEN_ENOMEM;
        }
        sh->report = me == 0;
    }
    zen_status st = ZEN_OK;
    sb_result results[SB_MAX_RUNS];
    memset(results, 0, sizeof results);
    int nruns = 0;
    st = run_all(comm, sh, results, &nruns);
    /* inproc: rank 0's thread publishes; a process publishes its own copy (all are equal) */
    if (st == ZEN_OK && (me == 0 || cfg->transport != ZEN_TRANSPORT_INPROC)) {
        sh->kind = zen_comm_transport(comm);
        sh->ranks_here = bench_ranks_here(comm);
        memcpy(sh->results, results, sizeof results);
        sh->nresults = nruns;
    }
    return st;
}

/* ---- report ---- */

/* What every row of the report shares: the data's shape, the ideal volume, the dense and
 * allgather times the speedups are relative to, and the model's predictions when AUTO ran. */
typedef struct sb_summary {
    int n;
    double nnz_avg, nnz_sum, density, ideal, t_dense, t_ag;
    uint64_t rows;
    uint32_t width;
    const double *pred;
    const char *overlap;
} sb_summary;

static void summarize(const sb_cfg *cfg, const sb_shared *sh, int n, sb_summary *m)
{
    memset(m, 0, sizeof *m);
    m->n = n;
    m->rows = sh->cases[0].rows;
    m->width = sh->cases[0].width;
    for (size_t i = 0; i < sh->ncases; i++) {
        const sb_case *c = &sh->cases[i];
        double avg = (double)c->nnz_unique_total / n;
        m->nnz_avg += avg;
        m->nnz_sum += (double)c->nnz_sum;
        m->density += avg / (double)c->rows;
        m->ideal += (double)(n - 1) / n * (avg + (double)c->nnz_sum) * (4.0 + 4.0 * c->width);
    }
    m->density /= (double)sh->ncases;
    for (int i = 0; i < sh->nresults; i++) {
        if (sh->results[i].twin)
            continue;
        if (sh->results[i].scheme == ZEN_SPARSE_DENSE)
            m->t_dense = sh->results[i].p50_us;
        if (sh->results[i].scheme == ZEN_SPARSE_ALLGATHER)
            m->t_ag = sh->results[i].p50_us;
        if (sh->results[i].scheme == ZEN_SPARSE_AUTO && n > 1)
            m->pred = sh->results[i].predicted_us;
    }
    m->overlap = cfg->trace ? "trace" : overlap_names[cfg->overlap];
}

static void print_header(const sb_cfg *cfg, const sb_shared *sh, const sb_summary *m)
{
    char machine[256];
    zen_machine_line(machine, sizeof machine);
    printf("# zen bench sparse | %s\n", machine);
    printf("# ranks %d (%s) | %s%s | rows %llu width %u | density %.4g | overlap %s", m->n,
           zen_transport_name(sh->kind), cfg->trace ? "trace " : "synthetic",
           cfg->trace ? cfg->trace : "", (unsigned long long)m->rows, m->width, m->density,
           m->overlap);
    if (!cfg->trace && cfg->overlap == OV_ZIPF)
        printf(" s=%.3g", cfg->zipf_s);
    if (!cfg->trace && cfg->skew > 0)
        printf(" | skew: all in first %.3g%%", cfg->skew * 100);
    if (cfg->hash_k || cfg->hash_r1 > 0 || cfg->pull_format)
        printf(" | ablation: hash k %d r1 %.3g, pull %s", cfg->hash_k ? cfg->hash_k : 3,
               cfg->hash_r1 > 0 ? cfg->hash_r1 : 2.0, pull_format_names[cfg->pull_format]);
    printf("\n");
    bench_print_oversub(sh->ranks_here, sh->kind == ZEN_TRANSPORT_INPROC);
    printf("# per call: nnz/rank %.0f, nnz of sum %.0f, %zu tensor(s) | iters %d warmup %d "
           "| ideal = (n-1)/n (nnz/rank + nnz sum)(4+4w) bytes = %.0f\n",
           m->nnz_avg, m->nnz_sum, sh->ncases, cfg->iters, cfg->warmup, m->ideal);
    if (cfg->global_topk) {
        double k4 = 4.0 * (double)cfg->global_topk, f = (double)(m->n - 1) / m->n;
        printf("# global top-k %llu: bytes of 4-byte values 2k(n-1)/n = %.0f, 4k(n-1)/n = %.0f, "
               "Ok-Topk 6k = %.0f\n",
               (unsigned long long)cfg->global_topk, 2 * f * k4, 4 * f * k4, 6 * k4);
    }
    printf("%-22s %8s %12s %11s %14s %14s %9s %8s %8s %9s %9s\n", "scheme", "verified", "p50_us",
           "model_us", "max_sent_B", "max_recv_B", "sent/ideal", "imb_push", "imb_pull", "vs_dense",
           "vs_allgth");
}

/* A JSON number, or null when v is not positive (not measured). */
static void print_json_num(const char *key, double v)
{
    if (v > 0)
        printf("\"%s\":%.4f,", key, v);
    else
        printf("\"%s\":null,", key);
}

static void print_json_row(const sb_cfg *cfg, const sb_shared *sh, const sb_summary *m,
                           const sb_result *r, double model)
{
    printf("{\"scheme\":\"%s\",\"chosen\":\"%s\",\"ranks\":%d,\"rows\":%llu,\"width\":%u,"
           "\"density\":%.6g,\"overlap\":\"%s\",\"zipf_s\":%.4g,\"skew\":%.4g,"
           "\"tensors\":%zu,\"transport\":\"%s\",\"verified\":%s,\"time_us_p50\":%.3f,"
           "\"max_bytes_sent\":%.0f,\"max_bytes_recv\":%.0f,\"ideal_bytes\":%.0f,"
           "\"imbalance_push\":%.4f,\"imbalance_pull\":%.4f,\"run_us\":%.1f,%s",
           zen_sparse_scheme_name((zen_sparse_scheme)r->scheme),
           zen_sparse_scheme_name((zen_sparse_scheme)r->chosen), m->n, (unsigned long long)m->rows,
           m->width, m->density, m->overlap, cfg->zipf_s, cfg->skew, sh->ncases,
           zen_transport_name(sh->kind), r->verified ? "true" : "false", r->p50_us, r->max_sent,
           r->max_recv, m->ideal, r->imb_push, r->imb_pull, r->run_us,
           r->twin ? "\"twin\":true," : "");
    bench_json_oversub(sh->ranks_here, sh->kind == ZEN_TRANSPORT_INPROC);
    if (cfg->global_topk) { /* the bounds in bytes of 4-byte values (docs/compression.md) */
        double k4 = 4.0 * (double)cfg->global_topk, f = (double)(m->n - 1) / m->n;
        printf("\"global_topk\":%llu,\"topk_2k_bytes\":%.0f,\"topk_4k_bytes\":%.0f,"
               "\"oktopk_6k_bytes\":%.0f,",
               (unsigned long long)cfg->global_topk, 2 * f * k4, 4 * f * k4, 6 * k4);
    }
    if (r->twin_paired > 0)
        printf("\"twin_over_paired\":%.4f,", r->twin_paired);
    print_json_num("speedup_vs_dense",
                   m->t_dense > 0 && r->p50_us > 0 ? m->t_dense / r->p50_us : 0);
    print_json_num("speedup_vs_allgather", m->t_ag > 0 && r->p50_us > 0 ? m->t_ag / r->p50_us : 0);
    printf("\"phase_us\":[%.1f,%.1f,%.1f,%.1f,%.1f,%.1f],", r->phase_us[0], r->phase_us[1],
           r->phase_us[2], r->phase_us[3], r->phase_us[4], r->phase_us[5]);
    printf("\"partition_serial\":%.0f,\"partition_passes\":%.0f,\"pull_formats\":[", r->part_serial,
           r->part_passes);
    for (int f = 1, sep = 0; f < 4; f++)
        if (r->pull_formats & (1 << f)) {
            printf("%s\"%s\"", sep ? "," : "", pull_format_names[f]);
            sep = 1;
        }
    printf("],");
    if (r->scheme == ZEN_SPARSE_AUTO && r->paired[ZEN_SPARSE_AUTO] > 0) {
        const char *sep = "";
        printf("\"auto_over_paired\":{");
        for (int k = 1; k < ZEN_SPARSE_SCHEME_COUNT; k++)
            if (r->paired[k] > 0) {
                printf("%s\"%s\":%.4f", sep, zen_sparse_scheme_name((zen_sparse_scheme)k),
                       r->paired[k]);
                sep = ",";
            }
        printf("},");
    }
    if (model > 0)
        printf("\"model_us\":%.3f}\n", model);
    else
        printf("\"model_us\":null}\n");
}

static void print_table_row(const sb_summary *m, const sb_result *r, double model)
{
    const char *name = zen_sparse_scheme_name((zen_sparse_scheme)r->scheme);
    double vd = m->t_dense > 0 && r->p50_us > 0 ? m->t_dense / r->p50_us : 0;
    double va = m->t_ag > 0 && r->p50_us > 0 ? m->t_ag / r->p50_us : 0;
    char label[40], vds[16] = "-", vas[16] = "-", ms[24] = "-";
    if (r->scheme == ZEN_SPARSE_AUTO)
        snprintf(label, sizeof label, "auto->%s",
                 zen_sparse_scheme_name((zen_sparse_scheme)r->chosen));
    else if (r->twin)
        snprintf(label, sizeof label, "%s~twin", name);
    else
        snprintf(label, sizeof label, "%s", name);
    if (vd > 0)
        snprintf(vds, sizeof vds, "%.2fx", vd);
    if (va > 0)
        snprintf(vas, sizeof vas, "%.2fx", va);
    if (model > 0)
        snprintf(ms, sizeof ms, "%.1f", model);
    printf("%-22s %8s %12.1f %11s %14.0f %14.0f %9.2f %8.3f %8.3f %9s %9s\n", label,
           r->verified ? "yes" : "NO", r->p50_us, ms, r->max_sent, r->max_recv,
           m->ideal > 0 ? r->max_sent / m->ideal : 0, r->imb_push, r->imb_pull, vds, vas);
}

static void report(const sb_cfg *cfg, const sb_shared *sh, int n)
{
    sb_summary m;
    summarize(cfg, sh, n, &m);
    if (!cfg->json)
        print_header(cfg, sh, &m);
    for (int i = 0; i < sh->nresults; i++) {
        const sb_result *r = &sh->results[i];
        double model = m.pred ? m.pred[r->scheme == ZEN_SPARSE_AUTO ? r->chosen : r->scheme] : 0;
        if (cfg->json)
            print_json_row(cfg, sh, &m, r, model);
        else
            print_table_row(&m, r, model);
    }
    fflush(stdout);
}

/* ---- options ---- */

static void help(void)
{
    printf(
        "usage: zen bench sparse [options]\n\n"
        "Runs every sparse-allreduce scheme on the same data and verifies each result\n"
        "against a dense sum computed locally on every rank.\n\n"
        "  --ranks N          inproc ranks (threads), default 4; under a launcher (zen launch,\n"
        "                     mpirun) each process is one rank and N is not used\n"
        "  --transport T      auto, inproc, shm, tcp, shm+tcp or mpi (default auto: --ranks\n"
        "                     threads, or the launcher's transport when one started this\n"
        "                     process; the others need a launcher, except inproc)\n"
        "  --rows R           rows of the tensor (default 1000000)\n"
        "  --width W          values per row (1: element sparsity; default 1)\n"
        "  --density D        fraction of rows non-zero on each rank (default 0.01)\n"
        "  --overlap M        random: independent rows per rank; identical: the same rows on\n"
        "                     all ranks; disjoint: no row on two ranks; zipf: rows drawn with\n"
        "                     probability ~ 1/(row+1)^s, with repeats (default random)\n"
        "  --zipf-s S         zipf exponent (default 1.1)\n"
        "  --skew F           put every non-zero in the first F fraction of the rows, e.g.\n"
        "                     0.01 = the first 1%% (default 0: whole range)\n"
        "  --schemes LIST     all, or a comma list of balanced,hierarchical,allgather,block,\n"
        "                     ps,dense,auto (default all)\n"
        "  --iters N          timed iterations (default 20)\n"
        "  --warmup N         untimed iterations first (default 3)\n"
        "  --seed S           data seed (default 1)\n"
        "  --trace DIR        replay recorded gradients (docs/trace-format.md): one iteration\n"
        "                     = every tensor of every step with a file for each rank\n"
        "  --max-mem GIB      bound on what a trace replay holds at once on this host (inputs,\n"
        "                     dense sums, one output per rank; default half of the memory)\n"
        "  --timeout S        communicator timeout in seconds (0.001..1e6)\n"
        "  --hash-k K         BALANCED ablation: probes per item of Algorithm 1, 1..3 (default 3;\n"
        "                     setting it or --hash-r1 partitions with Algorithm 1)\n"
        "  --hash-r1 R        BALANCED ablation: parallel-memory slots per item, e.g. 1, 2, 4\n"
        "                     (default 2)\n"
        "  --pull-format F    BALANCED ablation: auto (smaller of hash bitmap and COO),\n"
        "                     hash-bitmap, coo or plain-bitmap (a bitmap over all rows)\n"
        "  --global-topk K    every rank receives only the K largest magnitudes of the sum\n"
        "                     (zen_sparse_options.global_topk; width 1; schemes balanced, ps,\n"
        "                     auto: the default list then); verified: exactly min(K, nnz of\n"
        "                     sum) rows, each the sum, none dropped above a kept one\n"
        "  --json             one JSON object per scheme instead of the table\n"
        "  --call-times       also print every iteration's time (slowest rank, warm-up\n"
        "                     included) to stderr: `# call SCHEME ITERATION US RAN` lines,\n"
        "                     and every rank's: `# rank-call SCHEME ITERATION US...`\n"
        "  --sequential       run each scheme's calls in one block; by default the schemes\n"
        "                     take turns, one call each per iteration in a shuffled order,\n"
        "                     so that a change of the machine's load during the run reaches\n"
        "                     every scheme alike; the ranks wait for each other after every\n"
        "                     call, so no rank's result check runs inside another's call\n"
        "  --twins            a control: also run a second copy (SCHEME~twin) of every\n"
        "                     scheme but auto, as if a chooser always ran that scheme at\n"
        "                     no cost; how far a twin lands from its original shows how\n"
        "                     finely this host can compare two schemes (twin_over_paired)\n\n"
        "Time: p50 over iterations of the slowest rank's time. Bytes: largest sent/received\n"
        "by any rank in one iteration (including the call's small control messages). ideal: a\n"
        "perfectly balanced push/pull with COO, (n-1)/n (nnz/rank + nnz of sum)(4+4w) bytes.\n"
        "With --trace an iteration replays every step of the trace (one key, as in training)\n"
        "and times, bytes, ideal and model_us are per iteration, summed over its steps.\n"
        "imb_push/imb_pull: paper Def. 8 (1 = perfect; 0 = not applicable to the scheme).\n"
        "model_us: the cost model's prediction (network and CPU kernels, src/sparse/model/cost.c,\n"
        "before AUTO's online correction) as AUTO saw it on its last call, shown when auto is\n"
        "among the schemes; ZEN_NET_GBPS, ZEN_NET_LAT_US and ZEN_SPARSE_NS_PER_* set what it\n"
        "assumes. bench/sparse_grid.sh runs the issue #14 grid and tabulates AUTO and the model.\n"
        "\nJSON fields: scheme, chosen, ranks, rows, width, density, overlap, zipf_s, skew,\n"
        "tensors, transport, verified, time_us_p50, max_bytes_sent, max_bytes_recv, ideal_bytes,\n"
        "imbalance_push, imbalance_pull, speedup_vs_dense, speedup_vs_allgather, phase_us (the\n"
        "last iteration's partition, push, aggregate, encode, pull, decode, slowest rank each),\n"
        "partition_serial, partition_passes (BALANCED's hash partition in the last iteration,\n"
        "the most of any rank; 0 after the counting partition, the default on one thread),\n"
        "pull_formats (the formats BALANCED's pull blobs had on any rank),\n"
        "model_us, run_us (every call of the run, warm-up included: AUTO's warm-up and\n"
        "rechecks cost shows here), auto_over_paired (AUTO only, interleaved runs: per\n"
        "scheme, the median over the timed iterations of AUTO's time over that scheme's in\n"
        "the same iteration; steadier than the ratio of two p50s on a noisy host), twin\n"
        "(true on a --twins copy) and twin_over_paired (the same median, of the twin's time\n"
        "over its original's).\n");
}

/* Index of s in names[0..n), -1 when it is none of them. */
static int name_index(const char *s, const char *const *names, int n)
{
    for (int m = 0; m < n; m++)
        if (strcmp(s, names[m]) == 0)
            return m;
    return -1;
}

static int parse_num(const char *cmd, const char *opt, const char *s, double lo, double hi,
                     double *out)
{
    if (zen_parse_double(s, lo, hi, out) != 0) {
        zen_usage_error(cmd, "%s: '%s' is not a number in [%g, %g]", opt, s, lo, hi);
        return -1;
    }
    return 0;
}

/* A count (ranks, iterations, a seed): a whole number, so that 2.5 ranks is not taken as 2. */
static int parse_count(const char *cmd, const char *opt, const char *s, double lo, double hi,
                       double *out)
{
    long v;
    if (zen_parse_long(s, (long)lo, (long)hi, &v) != 0) {
        zen_usage_error(cmd, "%s: '%s' is not a whole number in [%g, %g]", opt, s, lo, hi);
        return -1;
    }
    *out = (double)v;
    return 0;
}

static int parse_schemes(const char *s, sb_cfg *cfg)
{
    cfg->nschemes = 0;
    if (strcmp(s, "all") == 0) {
        static const int all[] = { ZEN_SPARSE_DENSE, ZEN_SPARSE_ALLGATHER,    ZEN_SPARSE_PS,
                                   ZEN_SPARSE_BLOCK, ZEN_SPARSE_HIERARCHICAL, ZEN_SPARSE_BALANCED,
                                   ZEN_SPARSE_AUTO };
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            cfg->schemes[cfg->nschemes++] = all[i];
        return 0;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        zen_sparse_scheme sc;
        if (zen_sparse_scheme_parse(tok, &sc) != ZEN_OK) {
            zen_usage_error("bench sparse", "unknown scheme '%s'", tok);
            return -1;
        }
        if (cfg->nschemes >= ZEN_SPARSE_SCHEME_COUNT) {
            zen_usage_error("bench sparse", "too many schemes");
            return -1;
        }
        cfg->schemes[cfg->nschemes++] = sc;
    }
    if (cfg->nschemes == 0) {
        zen_usage_error("bench sparse", "--schemes: empty list");
        return -1;
    }
    return 0;
}

/* The value v of the option a; ZEN_EXIT_USAGE (the reason printed) when it is not one a accepts,
 * -1 when a is no option of this command. */
static int parse_value(const char *cmd, const char *a, const char *v, sb_cfg *cfg, int *ranks_given)
{
    double x;
    if (strcmp(a, "--ranks") == 0) {
        if (parse_count(cmd, a, v, 1, 4096, &x))
            return ZEN_EXIT_USAGE;
        cfg->ranks = (int)x;
        *ranks_given = 1;
    } else if (strcmp(a, "--rows") == 0) {
        size_t sz;
        if (zen_parse_size(v, &sz) != 0 || sz == 0 || sz > UINT32_MAX)
            return zen_usage_error(cmd, "--rows: '%s' must be in [1, 2^32)", v);
        cfg->rows = sz;
    } else if (strcmp(a, "--width") == 0) {
        if (parse_count(cmd, a, v, 1, 1 << 20, &x))
            return ZEN_EXIT_USAGE;
        cfg->width = (uint32_t)x;
    } else if (strcmp(a, "--density") == 0) {
        if (parse_num(cmd, a, v, 0, 1, &cfg->density))
            return ZEN_EXIT_USAGE;
    } else if (strcmp(a, "--overlap") == 0) {
        int k = name_index(v, overlap_names, 4);
        if (k < 0)
            return zen_usage_error(cmd, "--overlap: random, identical, disjoint or zipf");
        cfg->overlap = k;
    } else if (strcmp(a, "--zipf-s") == 0) {
        if (parse_num(cmd, a, v, 0, 100, &cfg->zipf_s))
            return ZEN_EXIT_USAGE;
    } else if (strcmp(a, "--skew") == 0) {
        if (parse_num(cmd, a, v, 0, 1, &cfg->skew))
            return ZEN_EXIT_USAGE;
    } else if (strcmp(a, "--schemes") == 0) {
        cfg->schemes_given = 1;
        if (parse_schemes(v, cfg))
            return ZEN_EXIT_USAGE;
    } else if (strcmp(a, "--iters") == 0) {
        if (parse_count(cmd, a, v, 1, 1e7, &x))
            return ZEN_EXIT_USAGE;
        cfg->iters = (int)x;
    } else if (strcmp(a, "--warmup") == 0) {
        if (parse_count(cmd, a, v, 0, 1e7, &x))
            return ZEN_EXIT_USAGE;
        cfg->warmup = (int)x;
    } else if (strcmp(a, "--seed") == 0) {
        if (parse_count(cmd, a, v, 0, 1e18, &x))
            return ZEN_EXIT_USAGE;
        cfg->seed = (uint64_t)x;
    } else if (strcmp(a, "--hash-k") == 0) {
        if (parse_count(cmd, a, v, 1, 3, &x))
            return ZEN_EXIT_USAGE;
        cfg->hash_k = (int)x;
    } else if (strcmp(a, "--hash-r1") == 0) {
        if (parse_num(cmd, a, v, 0.1, 64, &cfg->hash_r1))
            return ZEN_EXIT_USAGE;
    } else if (strcmp(a, "--pull-format") == 0) {
        int k = name_index(v, pull_format_names, 4);
        if (k < 0)
            return zen_usage_error(cmd, "--pull-format: auto, hash-bitmap, coo or plain-bitmap");
        cfg->pull_format = k;
    } else if (strcmp(a, "--global-topk") == 0) {
        if (parse_count(cmd, a, v, 1, 4294967295.0, &x))
            return ZEN_EXIT_USAGE;
        cfg->global_topk = (uint64_t)x;
    } else if (strcmp(a, "--trace") == 0) {
        cfg->trace = v;
    } else if (strcmp(a, "--timeout") == 0) {
        if (parse_num(cmd, a, v, 0.001, 1e6, &cfg->timeout))
            return ZEN_EXIT_USAGE;
    } else if (strcmp(a, "--max-mem") == 0) {
        if (parse_num(cmd, a, v, 1e-6, 1e6, &cfg->max_mem_gib))
            return ZEN_EXIT_USAGE;
    } else if (strcmp(a, "--transport") == 0) {
        if (zen_opt_transport(v, &cfg->transport) != 0)
            return zen_opt_transport_error(cmd, v);
    } else {
        return -1;
    }
    return ZEN_EXIT_OK;
}

static void set_defaults(sb_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->ranks = 4;
    cfg->rows = 1000000;
    cfg->width = 1;
    cfg->density = 0.01;
    cfg->zipf_s = 1.1;
    cfg->iters = 20;
    cfg->warmup = 3;
    cfg->seed = 1;
    cfg->transport = ZEN_TRANSPORT_AUTO; /* threads here, the launcher's choice under one */
    parse_schemes("all", cfg);
}

static int parse_args(int argc, char **argv, sb_cfg *cfg, int *done)
{
    const char *cmd = "bench sparse";
    *done = 0;
    set_defaults(cfg);
    int ranks_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (zen_is_help(a)) {
            help();
            *done = 1;
            return ZEN_EXIT_OK;
        }
        int *flag = strcmp(a, "--json") == 0         ? &cfg->json
                    : strcmp(a, "--call-times") == 0 ? &cfg->call_times
                    : strcmp(a, "--sequential") == 0 ? &cfg->sequential
                    : strcmp(a, "--twins") == 0      ? &cfg->twins
                                                     : NULL;
        if (flag) {
            *flag = 1;
            continue;
        }
        if (i + 1 >= argc)
            return zen_usage_error(cmd, "unknown option or missing value: %s", a);
        int rc = parse_value(cmd, a, argv[i + 1], cfg, &ranks_given);
        if (rc < 0)
            return zen_usage_error(cmd, "unknown option: %s", a);
        if (rc != ZEN_EXIT_OK)
            return rc;
        i++;
    }
    cfg->transport = zen_opt_transport_resolve(cfg->transport);
    if (cfg->transport != ZEN_TRANSPORT_INPROC && !zen_cli_launched())
        return zen_usage_error(cmd,
                               "--transport %s runs one rank per process: start it with `zen "
                               "launch -n N -- zen bench sparse ...`",
                               zen_transport_name(cfg->transport));
    if (cfg->transport != ZEN_TRANSPORT_INPROC && ranks_given)
        fprintf(stderr, "zen bench sparse: --ranks ignored: the launcher decides the ranks\n");
    if (cfg->global_topk && !cfg->schemes_given) { /* the schemes it runs in */
        cfg->nschemes = 0;
        cfg->schemes[cfg->nschemes++] = ZEN_SPARSE_PS;
        cfg->schemes[cfg->nschemes++] = ZEN_SPARSE_BALANCED;
        cfg->schemes[cfg->nschemes++] = ZEN_SPARSE_AUTO;
    }
    for (int i = 0; cfg->global_topk && i < cfg->nschemes; i++)
        if (cfg->schemes[i] != ZEN_SPARSE_BALANCED && cfg->schemes[i] != ZEN_SPARSE_PS &&
            cfg->schemes[i] != ZEN_SPARSE_AUTO)
            return zen_usage_error(cmd, "--global-topk runs in balanced, ps and auto, not %s",
                                   zen_sparse_scheme_name((zen_sparse_scheme)cfg->schemes[i]));
    if (cfg->global_topk && cfg->width != 1)
        return zen_usage_error(cmd, "--global-topk needs --width 1 (element sparsity)");
    /* the dense reference needs rows * width floats per process */
    if ((double)cfg->rows * cfg->width > 1e9)
        return zen_usage_error(cmd, "rows x width above 1e9 elements");
    return ZEN_EXIT_OK;
}

int zen_cmd_bench_sparse(int argc, char **argv)
{
    sb_cfg cfg;
    int done;
    int code = parse_args(argc, argv, &cfg, &done);
    if (code != ZEN_EXIT_OK || done)
        return code;
    sb_shared sh;
    memset(&sh, 0, sizeof sh);
    sh.cfg = &cfg;
    sh.report = 1;
    int n = cfg.ranks;
    if (cfg.transport == ZEN_TRANSPORT_INPROC) {
        /* one copy of the workload for all threads */
        if (cfg.trace) {
            if (load_trace(&cfg, n, 1, n, &sh.cases, &sh.ncases))
                return ZEN_EXIT_FAIL;
        } else {
            sh.cases = calloc(1, sizeof *sh.cases);
            sh.ncases = 1;
            if (!sh.cases || gen_synthetic(&cfg, n, sh.cases)) {
                fprintf(stderr, "zen bench sparse: out of memory for the workload\n");
                return ZEN_EXIT_FAIL;
            }
        }
    }
    bench_opts o;
    memset(&o, 0, sizeof o);
    o.name = "sparse";
    o.transport = cfg.transport;
    o.ranks = n;
    o.timeout = cfg.timeout;
    code = bench_run(&o, bench_rank, &sh);
    if (code == ZEN_EXIT_OK && sh.nresults > 0 && sh.cases) {
        if (cfg.transport != ZEN_TRANSPORT_INPROC)
            n = sh.cases[0].n;
        if (sh.report)
            report(&cfg, &sh, n);
        for (int i = 0; i < sh.nresults; i++)
            if (!sh.results[i].verified)
                code = ZEN_EXIT_FAIL;
    }
    for (size_t i = 0; i < sh.ncases; i++)
        free_case(&sh.cases[i]);
    free(sh.cases);
    return code;
}
