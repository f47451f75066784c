/*
 * zen_sparse_peer: zen_sparse_allreduce (sorted sparse result, like torch's sparse all_reduce)
 * timed exactly as bench/peers/torch_gloo.py times torch.distributed, on the same workloads, so
 * the two sit side by side in bench/peers/run_peers.sh.
 *
 * Why not `zen bench sparse`: it calls zen_sparse_allreduce_dense, which writes the whole
 * rows x width dense output every call (64 MiB per rank in the documented run); torch's sparse
 * all_reduce returns a sparse tensor. Comparing like with like needs the sparse-result entry.
 *
 * One process per rank (tcp from the environment as set by `zen launch` or scripts/cluster.sh
 * run; mpi under mpirun). Workloads, one JSON line per (workload, scheme) on rank 0:
 *   --cases D:OV,...   synthetic, rows x width: random = round(D rows) distinct uniform rows per
 *                      rank; zipf = round(D rows) draws with replacement, P(row) ~ 1/(row+1)^s;
 *                      values are small integers, so every summation order is exact
 *   --trace DIR        the gradients of `zen train --dump-grads DIR`; one iteration = every
 *                      tensor of every step that all ranks have (as zen bench sparse --trace)
 * Timing: per iteration a barrier, then the calls (result freed inside the timed region, as
 * torch frees its output); the slowest rank's time counts; p50 over --iters after --warmup.
 * Verification: one more call per scheme after the timing, checked on every rank against a
 * dense sum of all ranks' inputs computed locally (exact for the synthetic cases, relative
 * 1e-5 for the float trace); "verified" is false if any rank saw a wrong or missing row.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zen/comm.h>
#include <zen/sparse.h>
#include <zen/zen.h>

typedef struct workload {
    char name[64]; /* "0.01:random" or "trace" */
    double density;
    size_t tensors;
    uint64_t *rows;  /* per tensor */
    uint32_t *width; /* per tensor */
    size_t *nnz;     /* per tensor: this rank's */
    uint32_t **idx;  /* per tensor: this rank's */
    float **val;     /* per tensor: this rank's */
    float **ref;     /* per tensor: dense sum over ranks */
    int exact;
} workload;

typedef struct cfg {
    uint64_t rows;
    uint32_t width;
    const char *cases, *trace, *schemes;
    double zipf_s, timeout_s;
    int iters, warmup;
    uint64_t seed;
} cfg;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "zen_sparse_peer: out of memory\n");
        exit(1);
    }
    return p;
}

static void alloc_workload(workload *w, size_t tensors)
{
    w->tensors = tensors;
    w->rows = xcalloc(tensors, sizeof *w->rows);
    w->width = xcalloc(tensors, sizeof *w->width);
    w->nnz = xcalloc(tensors, sizeof *w->nnz);
    w->idx = xcalloc(tensors, sizeof *w->idx);
    w->val = xcalloc(tensors, sizeof *w->val);
    w->ref = xcalloc(tensors, sizeof *w->ref);
}

static void free_workload(workload *w)
{
    for (size_t k = 0; k < w->tensors; k++)
        free(w->idx[k]), free(w->val[k]), free(w->ref[k]);
    free(w->rows), free(w->width), free(w->nnz), free(w->idx), free(w->val), free(w->ref);
    memset(w, 0, sizeof *w);
}

/* Rank r's synthetic rows: k distinct uniform rows (partial Fisher-Yates over perm), or k zipf
 * draws (binary search in cdf). */
static void synth_rows(const cfg *c, int zipf, const double *cdf, uint32_t *perm, int r, size_t k,
                       uint32_t *out)
{
    uint64_t s = c->seed * 0x100000001b3ull + (uint64_t)r * 7919u + 17u;
    if (zipf) {
        for (size_t i = 0; i < k; i++) {
            double u = (double)(rng_next(&s) >> 11) * 0x1p-53;
            size_t lo = 0, hi = (size_t)c->rows - 1;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (cdf[mid] < u)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            out[i] = (uint32_t)lo;
        }
        return;
    }
    for (uint64_t i = 0; i < c->rows; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = 0; i < k; i++) {
        size_t j = i + (size_t)(rng_next(&s) % (c->rows - i));
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        out[i] = perm[i];
    }
}

/* Every rank generates all n ranks' inputs (same seeds), keeps its own and sums all into ref. */
static int make_synthetic(const cfg *c, const char *spec, int me, int n, workload *w)
{
    char overlap[32];
    if (sscanf(spec, "%lf:%31s", &w->density, overlap) != 2 || !(w->density > 0) ||
        w->density > 1 || (strcmp(overlap, "random") != 0 && strcmp(overlap, "zipf") != 0)) {
        fprintf(stderr, "zen_sparse_peer: bad case '%s' (want DENSITY:random|zipf)\n", spec);
        return -1;
    }
    snprintf(w->name, sizeof w->name, "%s", spec);
    int zipf = strcmp(overlap, "zipf") == 0;
    alloc_workload(w, 1);
    w->exact = 1;
    w->rows[0] = c->rows;
    w->width[0] = c->width;
    size_t k = (size_t)llround(w->density * (double)c->rows), wd = c->width;
    double *cdf = NULL;
    if (zipf) {
        cdf = xcalloc(c->rows, sizeof *cdf);
        double acc = 0;
        for (uint64_t x = 0; x < c->rows; x++)
            cdf[x] = acc += pow((double)(x + 1), -c->zipf_s);
        for (uint64_t x = 0; x < c->rows; x++)
            cdf[x] /= acc;
    }
    uint32_t *perm = xcalloc(c->rows, sizeof *perm), *rows = xcalloc(k, sizeof *rows);
    float *vals = xcalloc(k * wd, sizeof *vals);
    w->ref[0] = xcalloc(c->rows * wd, sizeof(float));
    for (int r = 0; r < n; r++) {
        synth_rows(c, zipf, cdf, perm, r, k, rows);
        uint64_t s = c->seed * 31u + (uint64_t)r;
        for (size_t i = 0; i < k * wd; i++)
            vals[i] = (float)(1 + rng_next(&s) % 4);
        for (size_t i = 0; i < k; i++)
            for (size_t j = 0; j < wd; j++)
                w->ref[0][(size_t)rows[i] * wd + j] += vals[i * wd + j];
        if (r == me) {
            w->nnz[0] = k;
            w->idx[0] = xcalloc(k, sizeof(uint32_t));
            w->val[0] = xcalloc(k * wd, sizeof(float));
            memcpy(w->idx[0], rows, k * sizeof(uint32_t));
            memcpy(w->val[0], vals, k * wd * sizeof(float));
        }
    }
    free(cdf);
    free(perm);
    free(rows);
    free(vals);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Steps of rank 0 in DIR, ascending (at most cap). */
static size_t list_steps(const char *dir, uint64_t *steps, size_t cap)
{
    DIR *d = opendir(dir);
    size_t ns = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && ns < cap) {
        unsigned long long s;
        char tail[8];
        if (sscanf(e->d_name, "rank0-step%llu.zgra%1s", &s, tail) == 2 && tail[0] == 'd' &&
            !strstr(e->d_name, ".tmp"))
            steps[ns++] = s;
    }
    if (d)
        closedir(d);
    qsort(steps, ns, sizeof *steps, cmp_u64);
    return ns;
}

/* Steps every rank 0..n-1 has; every rank reads all files to build the reference sums. */
static int make_trace(const char *dir, int me, int n, workload *w)
{
    static uint64_t steps[65536];
    size_t ns = list_steps(dir, steps, sizeof steps / sizeof *steps), t = 0, cap = 0;
    zen_trace_step *st = xcalloc((size_t)n, sizeof *st);
    for (size_t si = 0; si < ns; si++) {
        int complete = 1;
        for (int r = 0; r < n && complete; r++) {
            char p[4096];
            zen_status s = zen_trace_path(p, sizeof p, dir, (uint32_t)r, steps[si]);
            if (s == ZEN_OK)
                s = zen_trace_read(p, &st[r]);
            if (s == ZEN_EIO) {
                complete = 0; /* a step not every rank has: skipped, as zen bench sparse does */
            } else if (s != ZEN_OK || st[r].count != st[0].count) {
                fprintf(stderr, "zen_sparse_peer: %s: %s\n", p, zen_strerror(s));
                return -1;
            }
        }
        if (!complete) {
            for (int r = 0; r < n; r++)
                zen_trace_free(&st[r]);
            continue;
        }
        if (t + st[0].count > cap) { /* grow the per-tensor arrays */
            size_t ncap = 2 * (t + st[0].count) + 8;
            workload g = { 0 };
            alloc_workload(&g, ncap);
            memcpy(g.rows, w->rows, t * sizeof *g.rows);
            memcpy(g.width, w->width, t * sizeof *g.width);
            memcpy(g.nnz, w->nnz, t * sizeof *g.nnz);
            memcpy(g.idx, w->idx, t * sizeof *g.idx);
            memcpy(g.val, w->val, t * sizeof *g.val);
            memcpy(g.ref, w->ref, t * sizeof *g.ref);
            if (cap) {
                free(w->rows), free(w->width), free(w->nnz);
                free(w->idx), free(w->val), free(w->ref);
            }
            *w = g;
            cap = ncap;
        }
        for (size_t k = 0; k < st[0].count; k++, t++) {
            zen_trace_tensor *mine = &st[me].tensors[k];
            size_t wd = mine->width;
            w->rows[t] = mine->rows;
            w->width[t] = mine->width;
            w->nnz[t] = (size_t)mine->nnz;
            w->idx[t] = xcalloc(mine->nnz, sizeof(uint32_t));
            w->val[t] = xcalloc(mine->nnz * wd, sizeof(float));
            memcpy(w->idx[t], mine->indices, mine->nnz * sizeof(uint32_t));
            memcpy(w->val[t], mine->values, mine->nnz * wd * sizeof(float));
            w->ref[t] = xcalloc(mine->rows * wd, sizeof(float));
            for (int r = 0; r < n; r++) {
                zen_trace_tensor *x = &st[r].tensors[k];
                if (x->rows != mine->rows || x->width != mine->width) {
                    fprintf(stderr, "zen_sparse_peer: tensor %s differs across ranks\n", x->name);
                    return -1;
                }
                for (uint64_t i = 0; i < x->nnz; i++)
                    for (size_t j = 0; j < wd; j++)
                        w->ref[t][(size_t)x->indices[i] * wd + j] += x->values[i * wd + j];
            }
        }
        for (int r = 0; r < n; r++)
            zen_trace_free(&st[r]);
    }
    free(st);
    if (t == 0) {
        fprintf(stderr, "zen_sparse_peer: no complete step for %d ranks in %s\n", n, dir);
        return -1;
    }
    w->tensors = t;
    w->exact = 0;
    snprintf(w->name, sizeof w->name, "trace");
    return 0;
}

/* 1 when res equals ref: every result row matches, every non-zero reference row is present. */
static int check(const zen_sparse_result *res, const float *ref, uint64_t rows, size_t wd,
                 int exact)
{
    size_t nonzero = 0, matched = 0;
    for (uint64_t x = 0; x < rows; x++)
        for (size_t j = 0; j < wd; j++)
            if (ref[x * wd + j] != 0.0f) {
                nonzero++;
                break;
            }
    for (size_t i = 0; i < res->nnz; i++) {
        if (res->indices[i] >= rows)
            return 0;
        const float *a = res->values + i * wd, *b = ref + (size_t)res->indices[i] * wd;
        int any = 0;
        for (size_t j = 0; j < wd; j++) {
            float tol = exact ? 0.0f : 1e-5f * (fabsf(b[j]) + 1e-3f);
            if (fabsf(a[j] - b[j]) > tol)
                return 0;
            any |= b[j] != 0.0f;
        }
        matched += any;
    }
    /* a float sum that cancels to exactly zero may be absent; integers never cancel here */
    return exact ? matched == nonzero : matched <= nonzero;
}

static int run(zen_comm *comm, const cfg *c, const workload *w, zen_sparse_scheme scheme)
{
    int me = zen_comm_rank(comm), n = zen_comm_size(comm);
    double *times = xcalloc((size_t)c->iters, sizeof *times);
    double agg[5] = { 0 }; /* bad, sent, recv, nnz_out, chosen */
    zen_sparse_options opts = ZEN_SPARSE_OPTIONS_INIT;
    opts.scheme = scheme;
    zen_status st = ZEN_OK;
    for (int it = 0; it < c->warmup + c->iters + 1 && st == ZEN_OK; it++) {
        int verify = it == c->warmup + c->iters;
        double t = 0;
        if ((st = zen_barrier(comm)) != ZEN_OK)
            break;
        double t0 = now_s();
        for (size_t k = 0; k < w->tensors && st == ZEN_OK; k++) {
            char key[32];
            snprintf(key, sizeof key, "peer-%zu", k);
            opts.key = key;
            zen_sparse_tensor in = { w->rows[k], w->width[k], w->nnz[k], ZEN_INDEX_U32,
                                     w->idx[k],  ZEN_F32,     w->val[k] };
            zen_sparse_result res = { 0 };
            zen_sparse_stats stats;
            st = zen_sparse_allreduce(comm, &in, &res, &opts, &stats);
            if (st == ZEN_OK && verify) {
                agg[0] += !check(&res, w->ref[k], w->rows[k], w->width[k], w->exact);
                agg[1] = fmax(agg[1], (double)stats.bytes_sent);
                agg[2] = fmax(agg[2], (double)stats.bytes_recv);
                agg[3] += (double)res.nnz;
                agg[4] = stats.scheme;
            }
            zen_sparse_result_free(&res);
        }
        t = now_s() - t0;
        if (it >= c->warmup && !verify)
            times[it - c->warmup] = t;
    }
    if (st == ZEN_OK)
        st = zen_allreduce(comm, times, times, (size_t)c->iters, ZEN_F64, ZEN_MAX);
    if (st == ZEN_OK)
        st = zen_allreduce(comm, agg, agg, 5, ZEN_F64, ZEN_MAX);
    if (st != ZEN_OK) {
        fprintf(stderr, "zen_sparse_peer: %s on %s: %s (%s)\n", zen_sparse_scheme_name(scheme),
                w->name, zen_strerror(st), zen_comm_last_error(comm));
        free(times);
        return -1;
    }
    /* nearest-rank median, as zen bench */
    for (int i = 1; i < c->iters; i++)
        for (int j = i; j > 0 && times[j - 1] > times[j]; j--) {
            double x = times[j];
            times[j] = times[j - 1];
            times[j - 1] = x;
        }
    double p50 = times[(c->iters + 1) / 2 - 1];
    if (me == 0)
        printf("{\"scheme\":\"%s\",\"chosen\":\"%s\",\"ranks\":%d,\"rows\":%llu,\"width\":%u,"
               "\"case\":\"%s\",\"tensors\":%zu,\"output\":\"sparse\",\"verified\":%s,"
               "\"time_us_p50\":%.3f,\"max_bytes_sent\":%.0f,\"max_bytes_recv\":%.0f,"
               "\"nnz_out\":%.0f}\n",
               zen_sparse_scheme_name(scheme), zen_sparse_scheme_name((zen_sparse_scheme)agg[4]), n,
               (unsigned long long)w->rows[0], w->width[0], w->name, w->tensors,
               agg[0] == 0 ? "true" : "false", p50 * 1e6, agg[1], agg[2], agg[3]);
    fflush(stdout);
    free(times);
    return agg[0] == 0 ? 0 : -1;
}

static void usage(void)
{
    fprintf(stderr, "usage: zen_sparse_peer [--rows R] [--width W] [--cases D:random|zipf,...]\n"
                    "  [--zipf-s S] [--trace DIR] [--schemes LIST] [--iters N] [--warmup N]\n"
                    "  [--seed S] [--timeout S]   (one process per rank; see the file's top)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    cfg c = { 524288,
              32,
              "0.01:random",
              NULL,
              "balanced,hierarchical,allgather,block,ps,auto",
              1.1,
              0,
              10,
              2,
              1 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (!strcmp(a, "--rows"))
            c.rows = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--width"))
            c.width = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--cases"))
            c.cases = *v ? v : NULL;
        else if (!strcmp(a, "--zipf-s"))
            c.zipf_s = atof(v);
        else if (!strcmp(a, "--trace"))
            c.trace = v;
        else if (!strcmp(a, "--schemes"))
            c.schemes = v;
        else if (!strcmp(a, "--iters"))
            c.iters = atoi(v);
        else if (!strcmp(a, "--warmup"))
            c.warmup = atoi(v);
        else if (!strcmp(a, "--seed"))
            c.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--timeout"))
            c.timeout_s = atof(v);
        else
            usage();
        i++;
    }
    if (c.rows < 1 || c.rows >= (1ull << 32) || c.width < 1 || c.iters < 1 || c.warmup < 0)
        usage();
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.timeout_s = c.timeout_s;
    zen_comm *comm = NULL;
    zen_status st = zen_comm_create(&o, &comm);
    if (st != ZEN_OK) {
        fprintf(stderr, "zen_sparse_peer: zen_comm_create: %s\n", zen_strerror(st));
        return 1;
    }
    int me = zen_comm_rank(comm), n = zen_comm_size(comm), rc = 0;
    char list[1024];
    snprintf(list, sizeof list, "%s%s%s", c.cases ? c.cases : "", c.cases && c.trace ? "," : "",
             c.trace ? "trace" : "");
    for (char *save = NULL, *spec = strtok_r(list, ",", &save); spec;
         spec = strtok_r(NULL, ",", &save)) {
        workload w = { 0 };
        if (strcmp(spec, "trace") == 0 ? make_trace(c.trace, me, n, &w)
                                       : make_synthetic(&c, spec, me, n, &w)) {
            rc = 1;
            break; /* every rank reads the same inputs, so every rank stops here */
        }
        char schemes[256];
        snprintf(schemes, sizeof schemes, "%s", c.schemes);
        for (char *s2 = NULL, *name = strtok_r(schemes, ",", &s2); name;
             name = strtok_r(NULL, ",", &s2)) {
            zen_sparse_scheme sc;
            if (zen_sparse_scheme_parse(name, &sc) != ZEN_OK)
                usage();
            rc |= run(comm, &c, &w, sc) ? 1 : 0;
        }
        free_workload(&w);
    }
    if (rc == 0)
        zen_comm_finalize(comm);
    zen_comm_destroy(comm);
    return rc;
}
