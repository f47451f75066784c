/*
 * Exact pieces of top-k selection: the k-th largest of a small array (quickselect), the exact
 * cut of a candidate list to k (composite keys make ties go to the lower index), and the radix
 * fallback for data whose magnitudes defeat a sampled threshold (many equal values).
 */
#include <stdlib.h>

#include "topk_internal.h"

/* Three-way quickselect for the k-th largest (0-based): equal runs cannot make it quadratic; the
 * pivot is the median of three. */
#define NTH_BODY(T)                                                                                \
    size_t lo = 0, hi = n; /* the answer is in a[lo..hi) */                                        \
    while (hi - lo > 1) {                                                                          \
        T p0 = a[lo], p1 = a[lo + (hi - lo) / 2], p2 = a[hi - 1];                                  \
        T pivot =                                                                                  \
            p0 < p1 ? (p1 < p2 ? p1 : (p0 < p2 ? p2 : p0)) : (p0 < p2 ? p0 : (p1 < p2 ? p2 : p1)); \
        size_t lt = lo, i = lo, gt = hi; /* >pivot | ==pivot | ? | <pivot */                       \
        while (i < gt) {                                                                           \
            T v = a[i];                                                                            \
            if (v > pivot) {                                                                       \
                a[i++] = a[lt];                                                                    \
                a[lt++] = v;                                                                       \
            } else if (v < pivot) {                                                                \
                a[i] = a[--gt];                                                                    \
                a[gt] = v;                                                                         \
            } else {                                                                               \
                i++;                                                                               \
            }                                                                                      \
        }                                                                                          \
        if (k < lt)                                                                                \
            hi = lt;                                                                               \
        else if (k >= gt)                                                                          \
            lo = gt;                                                                               \
        else                                                                                       \
            return pivot;                                                                          \
    }                                                                                              \
    return a[lo];

uint32_t zen__topk_nth_u32(uint32_t *a, size_t n, size_t k)
{
    NTH_BODY(uint32_t)
}

static uint64_t nth_u64(uint64_t *a, size_t n, size_t k)
{
    NTH_BODY(uint64_t)
}

/* key in the high half, the complement of the index in the low: distinct, larger key first,
 * lower index first among equal keys */
static inline uint64_t composite(uint32_t key, uint32_t idx)
{
    return ((uint64_t)key << 32) | (uint64_t)(UINT32_MAX - idx);
}

size_t zen__topk_cut(const void *x, zen_dtype dtype, uint32_t *cand, size_t c, size_t k,
                     uint64_t *comp)
{
    if (k == 0)
        return 0;
    for (size_t i = 0; i < c; i++)
        comp[i] = composite(zen__topk_key(x, dtype, cand[i]), cand[i]);
    uint64_t kth = nth_u64(comp, c, k - 1);
    size_t m = 0;
    for (size_t i = 0; i < c; i++) {
        cand[m] = cand[i];
        m += composite(zen__topk_key(x, dtype, cand[i]), cand[i]) >= kth;
    }
    return m;
}

/* Narrow the k-th largest key's prefix by one radix digit: among keys whose bits above shift+width
 * equal *prefix, histogram the digit at shift, pick the digit that holds the k-th largest and
 * return how many keys of the prefix lie above that digit. */
static size_t radix_digit(const void *x, zen_dtype dtype, size_t n, unsigned shift, unsigned width,
                          uint32_t *prefix, size_t k, size_t *hist)
{
    size_t bins = (size_t)1 << width;
    unsigned top = shift + width;
    memset(hist, 0, bins * sizeof *hist);
    for (size_t i = 0; i < n; i++) {
        uint32_t key = zen__topk_key(x, dtype, i);
        if (top >= 32 || (key >> top) == *prefix)
            hist[(key >> shift) & (bins - 1)]++;
    }
    size_t above = 0, d = bins;
    while (d-- > 0) {
        if (above + hist[d] > k)
            break;
        above += hist[d];
    }
    *prefix = (top >= 32 ? 0 : *prefix << width) | (uint32_t)d;
    return above;
}

size_t zen__topk_radix(const void *x, zen_dtype dtype, size_t n, size_t k, uint32_t *out)
{
    static const unsigned widths[3] = { 11, 11, 10 }; /* bits 31..21, 20..10, 9..0 */
    size_t hist[1u << 11];
    uint32_t prefix = 0;
    size_t above = 0; /* keys above the prefix found so far, all in the top k */
    unsigned shift = 32;
    for (int level = 0; level < 3; level++) {
        shift -= widths[level];
        above += radix_digit(x, dtype, n, shift, widths[level], &prefix, k - 1 - above, hist);
    }
    uint32_t thr = prefix; /* the k-th largest key */
    size_t ties = k - above, m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t key = zen__topk_key(x, dtype, i);
        if (key == 0)
            continue;
        if (key > thr || (key == thr && ties > 0)) {
            ties -= key == thr;
            out[m++] = (uint32_t)i;
        }
    }
    return m;
}
