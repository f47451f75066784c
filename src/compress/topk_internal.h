/*
 * Internals of top-k selection (zen/compress.h): the magnitude key, the compare-and-compact scan
 * and the selection on a prepared scratch context, which the DGC step (topk_step.c) shares so
 * that it can allocate before it touches the caller's arrays.
 */
#ifndef ZEN_COMPRESS_TOPK_INTERNAL_H
#define ZEN_COMPRESS_TOPK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <zen/compress.h>

/* The scan writes branch-free, up to this many indices past the last kept one. */
#define ZEN_TOPK_SCAN_SLACK 64

/* The magnitude key of x[i]: the bits of |x| as f32 (bf16 widened). Orders like the magnitudes,
 * NaN above inf, 0 for +-0. */
static inline uint32_t zen__topk_key(const void *x, zen_dtype dtype, size_t i)
{
    if (dtype == ZEN_BF16)
        return (uint32_t)(((const uint16_t *)x)[i] & 0x7fffu) << 16;
    uint32_t b;
    memcpy(&b, (const float *)x + i, sizeof b);
    return b & 0x7fffffffu;
}

static inline float zen__topk_value(const void *x, zen_dtype dtype, size_t i)
{
    if (dtype == ZEN_BF16)
        return zen_bf16_to_f32(((const uint16_t *)x)[i]);
    return ((const float *)x)[i];
}

/*
 * Append to out[] the indices i in [begin, end) with key >= thr (thr >= 1), ascending. out has
 * room for cap + ZEN_TOPK_SCAN_SLACK entries. Returns the count; once it passes cap the scan stops
 * and *stop is where (else end), so the caller can estimate the full count.
 */
size_t zen__topk_scan(const void *x, zen_dtype dtype, size_t begin, size_t end, uint32_t thr,
                      uint32_t *out, size_t cap, size_t *stop);

/* DGC's accumulation, fused into the first compare-and-compact pass of the DGC step so that
 * the residual is read once per step, not twice: before entry i is compared,
 * u[i] = m * u[i] + g[i]; v[i] += u[i] (u NULL: v[i] += g[i]), the same f32 operations in the same
 * order as a separate loop, so the state and the selection are bit for bit those of
 * accumulate-then-select. */
typedef struct zen__topk_accum {
    const float *g;
    float *u, *v;
    float m;
} zen__topk_accum;

/* v[i] as it will be after the accumulation, without writing it (the threshold's sample). */
static inline float zen__topk_accum_value(const zen__topk_accum *a, size_t i)
{
    if (!a->u)
        return a->v[i] + a->g[i];
    float u = a->m * a->u[i] + a->g[i];
    return a->v[i] + u;
}

/* Accumulate all of [begin, end) and, like zen__topk_scan, append the indices with key >= thr of
 * the accumulated v to out until the count passes cap (*stop: where the count stopped; the
 * accumulation always runs to end). */
size_t zen__topk_scan_accum(const zen__topk_accum *a, size_t begin, size_t end, uint32_t thr,
                            uint32_t *out, size_t cap, size_t *stop);

/* Scratch for one selection, sized at prepare time so that running it cannot fail. */
typedef struct zen__topk_ctx {
    zen_dtype dtype;
    size_t n, k;
    zen_topk_options o;
    int threads;
    uint32_t *cand; /* threads regions of cap_t + slack indices */
    size_t cap_t;   /* candidates one thread may hold before it stops */
    uint64_t *comp; /* composite keys for the exact cut (cap_t * threads), NULL when k >= n */
    uint32_t *sample;
    size_t nsample;
    const zen__topk_accum *acc; /* pending: applied by the first pass (NULL: none) */
} zen__topk_ctx;

/* Check the arguments and allocate the scratch: ZEN_EINVAL, ZEN_EUNSUPPORTED, ZEN_ENOMEM. */
zen_status zen__topk_prepare(zen__topk_ctx *c, zen_dtype dtype, size_t n, size_t k,
                             const zen_topk_options *opts, size_t capacity);
/* Select on x (dtype and n of prepare); cannot fail. Returns the count, the selected indices
 * ascending at c->cand. With c->acc set, x is acc->v (f32) and the accumulation is applied by the
 * first pass (also for k = 0). */
size_t zen__topk_run(zen__topk_ctx *c, const void *x);
void zen__topk_release(zen__topk_ctx *c);

/* Exact selection helpers (topk_exact.c). */
/* Keep exactly k of the ascending candidates cand[0..c) (c > k): the k largest keys, ties to the
 * lower index; comp has room for c entries. Returns k; cand is compacted in place, ascending. */
size_t zen__topk_cut(const void *x, zen_dtype dtype, uint32_t *cand, size_t c, size_t k,
                     uint64_t *comp);
/* The exact top-k of all of x (k < n) by a radix histogram of the keys, written ascending to
 * out (room for k): the fallback when thresholds from the sample keep missing. Returns the count
 * (fewer than k when x has fewer non-zeros). */
size_t zen__topk_radix(const void *x, zen_dtype dtype, size_t n, size_t k, uint32_t *out);
/* k-th largest (0-based) of a[0..n), reordering a. */
uint32_t zen__topk_nth_u32(uint32_t *a, size_t n, size_t k);

#endif
