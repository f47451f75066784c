/*
 * zen_topk_select: DGC-style threshold selection.
 *
 *   1. sample: s keys in runs of 16 at a jittered stride (one run at a seeded random place in each
 *      of s/16 equal strata), s sized for about 600 keys above the threshold (auto, at most n/4)
 *      or sample_ratio * n;
 *   2. threshold: the key of rank r = 1.15 * k * s / n in the sample (quickselect), aiming the
 *      count a bit above k so that the exact top-k is inside the selected set;
 *   3. one compare-and-compact pass over x (topk_scan.c), split over threads: each thread fills
 *      its own candidate region and stops once it holds more than it may;
 *   4. adapt: a count below the window lowers the threshold (rank scaled by target / count), an
 *      overflow raises it (by the estimated full count); a count above the window but held in
 *      full, and every EXACT count >= k, is cut to exactly k among the candidates only
 *      (topk_exact.c). After 6 passes the radix fallback finds the exact threshold.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "common/hash.h"
#include "topk_internal.h"

#define MAX_PASSES     6
#define MIN_PER_THREAD 65536
#define AIM            1.15
#define MAX_THREADS    256
#define HITS           600 /* sample keys expected above the threshold (auto size) */
#define RUN            16  /* consecutive keys per sample run: one cache line of f32 */

void zen_topk_options_init(zen_topk_options *o)
{
    if (!o)
        return;
    zen_topk_options d = ZEN_TOPK_OPTIONS_INIT;
    *o = d;
}

size_t zen_topk_capacity(size_t k)
{
    if (k > (SIZE_MAX - 9) / 13)
        return SIZE_MAX;
    return (13 * k + 9) / 10;
}

/* Sample size in keys: auto aims at HITS keys above the threshold (count's relative error about
 * 1/sqrt(HITS)), at most n/4; the whole vector when it is small. */
static size_t sample_size(size_t n, size_t k, double ratio)
{
    double s;
    if (ratio > 0) {
        s = ceil(ratio * (double)n);
    } else {
        if (n <= 65536)
            return n;
        s = HITS * (double)n / (AIM * (double)k);
    }
    if (s >= (double)n / 4)
        return ratio > 0 && s >= (double)n ? n : (n / 4 / RUN) * RUN;
    s = ceil(s / RUN) * RUN;
    return s < RUN ? RUN : (size_t)s;
}

zen_status zen__topk_prepare(zen__topk_ctx *c, zen_dtype dtype, size_t n, size_t k,
                             const zen_topk_options *opts, size_t capacity)
{
    memset(c, 0, sizeof *c);
    zen_topk_options_init(&c->o);
    if (opts) {
        if (opts->size != 0 && opts->size != sizeof *opts)
            return ZEN_EINVAL;
        c->o = *opts;
    }
    if ((dtype != ZEN_F32 && dtype != ZEN_BF16) ||
        (c->o.mode != ZEN_TOPK_APPROX && c->o.mode != ZEN_TOPK_EXACT) ||
        !(c->o.sample_ratio >= 0 && c->o.sample_ratio <= 1))
        return ZEN_EINVAL;
    if (n > UINT32_MAX)
        return ZEN_EUNSUPPORTED;
    size_t want = c->o.mode == ZEN_TOPK_EXACT ? k : zen_topk_capacity(k);
    if (capacity < (want < n ? want : n))
        return ZEN_EINVAL;
    c->dtype = dtype;
    c->n = n;
    c->k = k < n ? k : n;
    if (c->k == 0)
        return ZEN_OK;
    size_t t = c->o.threads > 1 ? (size_t)c->o.threads : 1;
    if (t > MAX_THREADS)
        t = MAX_THREADS;
    if (t > n / MIN_PER_THREAD)
        t = n / MIN_PER_THREAD > 0 ? n / MIN_PER_THREAD : 1;
    c->threads = (int)t;
    size_t per = (n + t - 1) / t, hold = 3 * zen_topk_capacity(c->k) + 1024;
    c->cap_t = c->k >= n || hold > per ? per : hold;
    c->cand = zen__malloc_array(t, (c->cap_t + ZEN_TOPK_SCAN_SLACK) * sizeof(uint32_t));
    if (c->k < n) {
        c->comp = zen__malloc_array(t * c->cap_t, sizeof(uint64_t));
        c->nsample = sample_size(n, c->k, c->o.sample_ratio);
        c->sample = zen__malloc_array(c->nsample, sizeof(uint32_t));
    }
    if (!c->cand || (c->k < n && (!c->comp || !c->sample))) {
        zen__topk_release(c);
        return ZEN_ENOMEM;
    }
    return ZEN_OK;
}

void zen__topk_release(zen__topk_ctx *c)
{
    zen__free(c->cand);
    zen__free(c->comp);
    zen__free(c->sample);
    c->cand = NULL;
    c->comp = NULL;
    c->sample = NULL;
}

/* The key of x[i], or with an accumulation pending, of its accumulated value. */
static uint32_t sample_key(const zen__topk_ctx *c, const void *x, size_t i)
{
    if (!c->acc)
        return zen__topk_key(x, c->dtype, i);
    float v = zen__topk_accum_value(c->acc, i);
    return zen__topk_key(&v, ZEN_F32, 0);
}

/* Runs of RUN consecutive keys, one at a seeded random place in each of s / RUN equal strata:
 * a run costs one or two cache lines where single keys would cost one each. */
static void take_sample(zen__topk_ctx *c, const void *x)
{
    size_t n = c->n, s = c->nsample;
    if (s == n) {
        for (size_t i = 0; i < n; i++)
            c->sample[i] = sample_key(c, x, i);
        return;
    }
    size_t runs = s / RUN; /* s <= n/4, so every stratum holds a run */
    uint64_t r = zen_mix64(c->o.seed ^ 0x746f706bull) | 1;
    for (size_t j = 0; j < runs; j++) {
        size_t lo = (size_t)((uint64_t)j * n / runs), hi = (size_t)((uint64_t)(j + 1) * n / runs);
        r ^= r >> 12; /* xorshift64* */
        r ^= r << 25;
        r ^= r >> 27;
        size_t at = lo + zen_hash_range(r * 0x2545f4914f6cdd1dull, (uint32_t)(hi - lo - RUN + 1));
        for (size_t i = 0; i < RUN; i++)
            c->sample[j * RUN + i] = sample_key(c, x, at + i);
    }
}

/* one thread's part of a pass */
typedef struct scan_job {
    const zen__topk_ctx *c;
    const void *x;
    const zen__topk_accum *acc;
    size_t begin, end, count, stop;
    uint32_t thr, *out;
} scan_job;

static void *scan_thread(void *arg)
{
    scan_job *j = arg;
    if (j->acc)
        j->count =
            zen__topk_scan_accum(j->acc, j->begin, j->end, j->thr, j->out, j->c->cap_t, &j->stop);
    else
        j->count = zen__topk_scan(j->x, j->c->dtype, j->begin, j->end, j->thr, j->out, j->c->cap_t,
                                  &j->stop);
    return NULL;
}

/* One pass at threshold thr (the first one also applies a pending accumulation). Returns the
 * count, the candidates ascending at c->cand; *est is the estimated full count when a thread
 * overflowed (then the candidates are not usable), else 0. */
static size_t scan_pass(zen__topk_ctx *c, const void *x, uint32_t thr, double *est)
{
    scan_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS];
    size_t t = (size_t)c->threads, per = (c->n + t - 1) / t;
    for (size_t i = 0; i < t; i++) {
        size_t b = i * per < c->n ? i * per : c->n, e = b + per < c->n ? b + per : c->n;
        jobs[i] = (scan_job){ .c = c,
                              .x = x,
                              .acc = c->acc,
                              .begin = b,
                              .end = e,
                              .thr = thr,
                              .out = c->cand + i * (c->cap_t + ZEN_TOPK_SCAN_SLACK) };
        started[i] = i > 0 && pthread_create(&tid[i], NULL, scan_thread, &jobs[i]) == 0;
    }
    for (size_t i = 0; i < t; i++)
        if (!started[i]) /* the caller's own share, or a thread that could not start */
            scan_thread(&jobs[i]);
    for (size_t i = 1; i < t; i++)
        if (started[i])
            pthread_join(tid[i], NULL);
    c->acc = NULL; /* applied */
    size_t total = 0;
    *est = 0;
    for (size_t i = 0; i < t; i++)
        if (jobs[i].count > c->cap_t)
            *est = 1;
    if (*est) {
        for (size_t i = 0; i < t; i++) {
            double seen = (double)(jobs[i].stop - jobs[i].begin);
            *est +=
                seen > 0 ? (double)jobs[i].count * (double)(jobs[i].end - jobs[i].begin) / seen : 0;
        }
        return SIZE_MAX;
    }
    for (size_t i = 0; i < t; i++) {
        memmove(c->cand + total, jobs[i].out, jobs[i].count * sizeof(uint32_t));
        total += jobs[i].count;
    }
    return total;
}

/* The sample's key of (1-based) rank r, r clamped to the sample; never below 1. */
static uint32_t rank_key(zen__topk_ctx *c, double r)
{
    if (r < 1)
        r = 1;
    if (r > (double)c->nsample)
        return 1;
    uint32_t key = zen__topk_nth_u32(c->sample, c->nsample, (size_t)r - 1);
    return key > 0 ? key : 1;
}

/* The pass loop; returns the number of candidates left at c->cand (ascending). */
static size_t adapt(zen__topk_ctx *c, const void *x)
{
    size_t k = c->k, lo = (8 * k + 9) / 10, hi = 13 * k / 10;
    int exact = c->o.mode == ZEN_TOPK_EXACT;
    if (exact)
        lo = k;
    double aim = AIM * (double)k, r = ceil(aim * (double)c->nsample / (double)c->n);
    take_sample(c, x);
    uint32_t thr = rank_key(c, r);
    for (int pass = 0; pass < MAX_PASSES; pass++) {
        double est;
        size_t got = scan_pass(c, x, thr, &est);
        if (got != SIZE_MAX && (got >= lo || thr == 1)) {
            if (got > (exact ? k : hi))
                got = zen__topk_cut(x, c->dtype, c->cand, got, k, c->comp);
            return got;
        }
        double seen = got == SIZE_MAX ? est : (double)got;
        r = seen > 0 ? r * aim / seen : r * 16;
        uint32_t next = rank_key(c, r);
        if (got == SIZE_MAX && next <= thr)
            next = thr < 0x7fffffffu ? thr + 1 : thr; /* raise at least one step */
        else if (got != SIZE_MAX && next >= thr)
            next = thr - 1; /* lower at least one step (thr > 1 here) */
        thr = next;
    }
    return zen__topk_radix(x, c->dtype, c->n, k, c->cand);
}

size_t zen__topk_run(zen__topk_ctx *c, const void *x)
{
    if (c->k == 0) {
        size_t stop;
        if (c->acc && c->n > 0) /* nothing to select: a pass at a threshold above every key */
            zen__topk_scan_accum(c->acc, 0, c->n, 0x80000000u, NULL, 0, &stop);
        c->acc = NULL;
        return 0;
    }
    size_t got;
    if (c->k >= c->n) {
        double est;
        got = scan_pass(c, x, 1, &est); /* every non-zero; regions hold all of theirs */
    } else {
        got = adapt(c, x);
    }
    return got;
}

zen_status zen_topk_select(const void *x, zen_dtype dtype, size_t n, size_t k,
                           const zen_topk_options *opts, uint32_t *indices, float *values,
                           size_t capacity, size_t *count)
{
    if (count)
        *count = 0;
    if (!count || (n > 0 && !x) || (k > 0 && n > 0 && (!indices || !values)))
        return ZEN_EINVAL;
    zen__topk_ctx c;
    zen_status st = zen__topk_prepare(&c, dtype, n, k, opts, capacity);
    if (st != ZEN_OK)
        return st;
    size_t got = zen__topk_run(&c, x);
    for (size_t i = 0; i < got; i++) {
        indices[i] = c.cand[i];
        values[i] = zen__topk_value(x, dtype, c.cand[i]);
    }
    *count = got;
    zen__topk_release(&c);
    return ZEN_OK;
}
