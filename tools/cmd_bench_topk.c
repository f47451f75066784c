/*
 * zen bench topk: the speed and quality of libzen's top-k selection (zen/compress.h) on one
 * process, nccl-tests style: a machine/config header, then one row (or with --json one object)
 * per vector size.
 *
 * Per size: synthetic data (gaussian, or Student-t with 2 degrees of freedom for heavy tails),
 * warm-up calls, then timed calls; elements_per_s = n / median time. Quality against a reference
 * computed here, independent of the library: the exact top-k mass (sum of the k largest
 * magnitudes, by quickselect) and mass_recall = the largest min(count, k) selected magnitudes
 * over it. A count outside the mode's contract ([0.8k, 1.3k] for approx, k for exact, fewer only
 * when the data has fewer non-zeros) fails the run (exit 1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zen/compress.h>

#include "bench.h"
#include "cli.h"
#include "opt_parse.h"

#define MAX_SIZES 64

typedef struct topk_cfg {
    size_t sizes[MAX_SIZES];
    int nsizes;
    size_t min_n, max_n; /* -b/-e sweep when no --size */
    double factor, ratio;
    int threads, iters, warmup, json, heavy;
    zen_topk_mode mode;
    zen_dtype dtype;
    uint64_t seed;
} topk_cfg;

static void help(void)
{
    printf("usage: zen bench topk [options]\n\n"
           "Times libzen's top-k selection (zen_topk_select, include/zen/compress.h) on one\n"
           "process and checks its count and mass recall against an exact reference.\n\n"
           "  --size N[,N...]    vector sizes in elements, K/M/G suffixes (powers of 1024);\n"
           "                     may be repeated (default 16M = 2^24)\n"
           "  -b, --min N        smallest size of a sweep instead of --size\n"
           "  -e, --max N        largest size of the sweep\n"
           "  -f, --factor F     size multiplier of the sweep (default 2)\n"
           "  --ratio R          k = ceil(R * n), 0 < R <= 1 (default 0.01)\n"
           "  --threads T        threads of the selection (default 1)\n"
           "  --mode M           approx (DGC threshold, count in [0.8k, 1.3k]) or exact\n"
           "                     (exactly k) (default approx)\n"
           "  --dtype D          f32 or bf16 (default f32)\n"
           "  --data D           gaussian or heavy (Student-t, 2 degrees of freedom)\n"
           "                     (default gaussian)\n"
           "  --iters N          timed calls per size (default 10)\n"
           "  --warmup N         untimed calls first (default 2)\n"
           "  --seed S           data and sample seed (default 1)\n"
           "  --json             one JSON object per size instead of the table\n\n"
           "Time: median (p50) and minimum over the timed calls. elements_per_s = n / p50.\n"
           "mass_recall: the largest min(count, k) selected magnitudes over the k largest of\n"
           "the vector (1 = the exact top-k's mass). bench/topk_vs_torch.py compares with\n"
           "torch.topk in the same run.\n\n"
           "JSON fields: bench, size, k, count, ratio, mode, dtype, data, threads, iters,\n"
           "time_us_p50, time_us_min, elements_per_s, mass_recall, in_contract.\n"
           "Exit status: 0 ok, 1 a selection failed or broke its count contract, 2 usage.\n");
}

static int parse_sizes(topk_cfg *c, const char *s)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        size_t v;
        if (zen_parse_size(tok, &v) != 0 || v == 0 || v > UINT32_MAX || c->nsizes >= MAX_SIZES)
            return -1;
        c->sizes[c->nsizes++] = v;
    }
    return 0;
}

static int parse_value(topk_cfg *c, const char *a, const char *v)
{
    long l;
    if (!strcmp(a, "--size"))
        return parse_sizes(c, v);
    if (!strcmp(a, "-b") || !strcmp(a, "--min"))
        return zen_parse_size(v, &c->min_n) == 0 && c->min_n > 0 ? 0 : -1;
    if (!strcmp(a, "-e") || !strcmp(a, "--max"))
        return zen_parse_size(v, &c->max_n) == 0 && c->max_n <= UINT32_MAX ? 0 : -1;
    if (!strcmp(a, "-f") || !strcmp(a, "--factor"))
        return zen_parse_double(v, 1.0001, 1024, &c->factor);
    if (!strcmp(a, "--ratio"))
        return zen_parse_double(v, 1e-9, 1, &c->ratio) == 0 && c->ratio > 0 ? 0 : -1;
    if (!strcmp(a, "--threads"))
        return zen_parse_long(v, 1, 256, &l) == 0 ? (c->threads = (int)l, 0) : -1;
    if (!strcmp(a, "--iters"))
        return zen_parse_long(v, 1, 1000000, &l) == 0 ? (c->iters = (int)l, 0) : -1;
    if (!strcmp(a, "--warmup"))
        return zen_parse_long(v, 0, 1000000, &l) == 0 ? (c->warmup = (int)l, 0) : -1;
    if (!strcmp(a, "--seed"))
        return zen_parse_u64(v, &c->seed);
    if (!strcmp(a, "--mode")) {
        c->mode = !strcmp(v, "exact") ? ZEN_TOPK_EXACT : ZEN_TOPK_APPROX;
        return !strcmp(v, "exact") || !strcmp(v, "approx") ? 0 : -1;
    }
    if (!strcmp(a, "--dtype")) {
        c->dtype = !strcmp(v, "bf16") ? ZEN_BF16 : ZEN_F32;
        return !strcmp(v, "bf16") || !strcmp(v, "f32") ? 0 : -1;
    }
    if (!strcmp(a, "--data")) {
        c->heavy = !strcmp(v, "heavy");
        return !strcmp(v, "heavy") || !strcmp(v, "gaussian") ? 0 : -1;
    }
    return -2; /* not an option with a value */
}

/* 0, or an exit code; *done for --help */
static int parse(int argc, char **argv, topk_cfg *c, int *done)
{
    memset(c, 0, sizeof *c);
    c->factor = 2;
    c->ratio = 0.01;
    c->threads = 1;
    c->iters = 10;
    c->warmup = 2;
    c->seed = 1;
    c->mode = ZEN_TOPK_APPROX;
    c->dtype = ZEN_F32;
    *done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (zen_is_help(a)) {
            help();
            *done = 1;
            return ZEN_EXIT_OK;
        }
        if (!strcmp(a, "--json")) {
            c->json = 1;
            continue;
        }
        if (i + 1 >= argc)
            return zen_usage_error("bench topk", "unknown option or missing value: '%s'", a);
        int r = parse_value(c, a, argv[i + 1]);
        if (r == -2)
            return zen_usage_error("bench topk", "unknown option '%s' (see --help)", a);
        if (r != 0)
            return zen_usage_error("bench topk", "bad value '%s' for %s (see --help)", argv[i + 1],
                                   a);
        i++;
    }
    if (c->nsizes == 0 && (c->min_n || c->max_n)) {
        size_t lo = c->min_n ? c->min_n : 1024, hi = c->max_n ? c->max_n : lo;
        if (lo > hi)
            return zen_usage_error("bench topk", "-b (%zu) is larger than -e (%zu)", lo, hi);
        for (double s = (double)lo; s <= (double)hi * 1.0000001 && c->nsizes < MAX_SIZES;
             s *= c->factor)
            c->sizes[c->nsizes++] = (size_t)s;
    }
    if (c->nsizes == 0)
        c->sizes[c->nsizes++] = (size_t)1 << 24;
    return ZEN_EXIT_OK;
}

static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double gauss(uint64_t *s)
{
    double u1 = ((double)(next_rand(s) >> 11) + 1) / 9007199254740993.0;
    double u2 = (double)(next_rand(s) >> 11) / 9007199254740992.0;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static void fill(const topk_cfg *c, void *x, size_t n)
{
    uint64_t s = c->seed;
    for (size_t i = 0; i < n; i++) {
        double v = gauss(&s);
        if (c->heavy) {
            double a = gauss(&s), b = gauss(&s);
            v /= sqrt((a * a + b * b) / 2 + 1e-300);
        }
        if (c->dtype == ZEN_BF16)
            ((uint16_t *)x)[i] = zen_f32_to_bf16((float)v);
        else
            ((float *)x)[i] = (float)v;
    }
}

/* sum of the k largest of a[0..n) (non-negative), reordering a: quickselect */
static double top_mass(float *a, size_t n, size_t k)
{
    if (k >= n) {
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += a[i];
        return s;
    }
    size_t lo = 0, hi = n; /* the k largest end up in a[0..k) */
    while (hi - lo > 1) {
        float p = a[lo + (hi - lo) / 2];
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            float v = a[i];
            if (v > p) {
                a[i++] = a[lt];
                a[lt++] = v;
            } else if (v < p) {
                a[i] = a[--gt];
                a[gt] = v;
            } else {
                i++;
            }
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            break;
    }
    double s = 0;
    for (size_t i = 0; i < k; i++)
        s += a[i];
    return s;
}

typedef struct topk_row {
    size_t n, k, count;
    double p50_us, min_us, recall;
    int ok;
} topk_row;

static void print_row(const topk_cfg *c, const topk_row *r)
{
    const char *mode = c->mode == ZEN_TOPK_EXACT ? "exact" : "approx";
    double eps = (double)r->n / (r->p50_us * 1e-6);
    if (!c->json) {
        printf("%12zu %10zu %10zu %7.3f %12.1f %12.1f %10.1f %11.4f %6s\n", r->n, r->k, r->count,
               r->k ? (double)r->count / (double)r->k : 0, r->p50_us, r->min_us, eps / 1e6,
               r->recall, r->ok ? "ok" : "FAIL");
        return;
    }
    printf("{\"bench\":\"topk\",\"size\":%zu,\"k\":%zu,\"count\":%zu,\"ratio\":%.6g,"
           "\"mode\":\"%s\",\"dtype\":\"%s\",\"data\":\"%s\",\"threads\":%d,\"iters\":%d,"
           "\"time_us_p50\":%.2f,\"time_us_min\":%.2f,\"elements_per_s\":%.6g,"
           "\"mass_recall\":%.6f,\"in_contract\":%s}\n",
           r->n, r->k, r->count, c->ratio, mode, zen_dtype_name(c->dtype),
           c->heavy ? "heavy" : "gaussian", c->threads, c->iters, r->p50_us, r->min_us, eps,
           r->recall, r->ok ? "true" : "false");
}

/* the reference: the exact top-k mass, and the mass of the largest min(count, k) selected */
static double recall_of(const topk_cfg *c, const void *x, size_t n, size_t k, const float *val,
                        size_t count, float *work)
{
    for (size_t i = 0; i < n; i++)
        work[i] = fabsf(c->dtype == ZEN_BF16 ? zen_bf16_to_f32(((const uint16_t *)x)[i])
                                             : ((const float *)x)[i]);
    double all = top_mass(work, n, k);
    for (size_t i = 0; i < count; i++)
        work[i] = fabsf(val[i]);
    double got = top_mass(work, count, count < k ? count : k);
    return all > 0 ? got / all : 1;
}

static int run_size(const topk_cfg *c, size_t n, void *x, float *work, uint32_t *idx, float *val,
                    topk_row *r)
{
    fill(c, x, n);
    size_t k = (size_t)ceil(c->ratio * (double)n), cap = zen_topk_capacity(k);
    zen_topk_options o = ZEN_TOPK_OPTIONS_INIT;
    o.mode = c->mode;
    o.threads = c->threads;
    o.seed = c->seed;
    double t[1000];
    int nt = c->iters < 1000 ? c->iters : 1000;
    size_t count = 0;
    for (int it = 0; it < c->warmup + c->iters; it++) {
        double t0 = bench_now();
        zen_status st = zen_topk_select(x, c->dtype, n, k, &o, idx, val, cap, &count);
        double dt = bench_now() - t0;
        if (st != ZEN_OK) {
            fprintf(stderr, "zen bench topk: zen_topk_select(n=%zu, k=%zu) failed: %s\n", n, k,
                    zen_strerror(st));
            return ZEN_EXIT_FAIL;
        }
        if (it >= c->warmup && it - c->warmup < nt)
            t[it - c->warmup] = dt * 1e6;
    }
    r->n = n;
    r->k = k;
    r->count = count;
    r->p50_us = bench_percentile(t, (size_t)nt, 50);
    r->min_us = t[0];
    r->recall = recall_of(c, x, n, k, val, count, work);
    size_t lo = c->mode == ZEN_TOPK_EXACT ? k : (8 * k + 9) / 10;
    size_t hi = c->mode == ZEN_TOPK_EXACT ? k : 13 * k / 10;
    r->ok = (count >= lo && count <= hi) || (count < lo && r->recall >= 0.999999);
    return ZEN_EXIT_OK;
}

int zen_cmd_bench_topk(int argc, char **argv)
{
    topk_cfg c;
    int done;
    int code = parse(argc, argv, &c, &done);
    if (code != ZEN_EXIT_OK || done)
        return code;
    size_t maxn = 0;
    for (int i = 0; i < c.nsizes; i++)
        maxn = c.sizes[i] > maxn ? c.sizes[i] : maxn;
    size_t maxk = (size_t)ceil(c.ratio * (double)maxn);
    void *x = malloc(maxn * sizeof(float));
    float *work = malloc(maxn * sizeof(float));
    uint32_t *idx = malloc(zen_topk_capacity(maxk) * sizeof *idx + 1);
    float *val = malloc(zen_topk_capacity(maxk) * sizeof *val + 1);
    if (!x || !work || !idx || !val) {
        fprintf(stderr, "zen bench topk: out of memory for %zu elements (try a smaller --size)\n",
                maxn);
        code = ZEN_EXIT_FAIL;
        goto out;
    }
    if (!c.json) {
        char machine[256];
        zen_machine_line(machine, sizeof machine);
        printf("# zen bench topk | %s\n", machine);
        printf("# mode %s | dtype %s | data %s seed %llu | ratio %.6g | threads %d | iters %d "
               "warmup %d\n",
               c.mode == ZEN_TOPK_EXACT ? "exact" : "approx", zen_dtype_name(c.dtype),
               c.heavy ? "heavy" : "gaussian", (unsigned long long)c.seed, c.ratio, c.threads,
               c.iters, c.warmup);
        printf("%12s %10s %10s %7s %12s %12s %10s %11s %6s\n", "size", "k", "count", "count/k",
               "p50_us", "min_us", "Melem/s", "mass_recall", "check");
    }
    for (int i = 0; i < c.nsizes && code == ZEN_EXIT_OK; i++) {
        topk_row r;
        code = run_size(&c, c.sizes[i], x, work, idx, val, &r);
        if (code == ZEN_EXIT_OK) {
            print_row(&c, &r);
            fflush(stdout);
            if (!r.ok) {
                fprintf(stderr, "zen bench topk: n=%zu k=%zu: count %zu breaks the %s contract\n",
                        r.n, r.k, r.count, c.mode == ZEN_TOPK_EXACT ? "exact" : "approx");
                code = ZEN_EXIT_FAIL;
            }
        }
    }
out:
    free(x);
    free(work);
    free(idx);
    free(val);
    return code;
}
