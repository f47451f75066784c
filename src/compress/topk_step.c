/*
 * DGC's local step on arrays the caller owns (zen_topk_compress_buffers, zen/compress.h), the one
 * path behind zen_topk_compress (topk_state.c, on its state's arrays) and a framework's hook (on
 * its own tensors):
 *   1. check everything and allocate the selection's scratch before any array is touched, so an
 *      error leaves them as they were;
 *   2. select with the accumulation pending (zen__topk_accum): the first compare-and-compact pass
 *      updates u and v block by block just before comparing, so a step reads g, u and v once;
 *   3. one merge walk of the selection (ascending) with the whole ranges (ascending) writes the
 *      pairs to send and clears what was sent.
 */
#include <string.h>

#include "topk_internal.h"

/* The ranges' total length, or SIZE_MAX when they are not non-empty pairs inside [0, n),
 * ascending and disjoint. */
static size_t whole_length(const zen_topk_buffers *b)
{
    size_t total = 0, prev = 0;
    for (size_t r = 0; r < b->nwhole; r++) {
        size_t lo = b->whole[2 * r], hi = b->whole[2 * r + 1];
        if (lo < prev || lo >= hi || hi > b->n)
            return SIZE_MAX;
        total += hi - lo;
        prev = hi;
    }
    return total;
}

/* Everything but the options and the capacity (zen__topk_prepare checks those); *whole: the
 * ranges' total length. */
static zen_status check(const zen_topk_buffers *b, size_t k, const uint32_t *indices,
                        const float *values, const size_t *count, size_t *whole)
{
    if (!b || !count || (b->size != 0 && b->size != sizeof *b))
        return ZEN_EINVAL;
    if (b->n > UINT32_MAX)
        return ZEN_EUNSUPPORTED;
    int momentum_ok = b->velocity ? b->momentum >= 0.0f && b->momentum < 1.0f : b->momentum == 0.0f;
    int sends = (k > 0 && b->n > 0) || b->nwhole > 0;
    if (!momentum_ok || (b->n > 0 && (!b->grad || !b->residual)) || (b->nwhole > 0 && !b->whole) ||
        (sends && (!indices || !values)))
        return ZEN_EINVAL;
    *whole = whole_length(b);
    return *whole == SIZE_MAX ? ZEN_EINVAL : ZEN_OK;
}

/* Step 3: sel[0..nsel) merged with the whole ranges into indices/values; a selected entry inside
 * a range goes with the range. v is cleared at every sent entry, u at the selected ones outside
 * the ranges only. Returns the count written. */
static size_t emit(const zen_topk_buffers *b, const uint32_t *sel, size_t nsel, uint32_t *indices,
                   float *values)
{
    float *v = b->residual, *u = b->velocity;
    size_t w = 0, j = 0;
    for (size_t r = 0; r <= b->nwhole; r++) {
        size_t lo = r < b->nwhole ? b->whole[2 * r] : b->n;
        for (; j < nsel && sel[j] < lo; j++, w++) {
            indices[w] = sel[j];
            values[w] = v[sel[j]];
            v[sel[j]] = 0.0f;
            if (u)
                u[sel[j]] = 0.0f;
        }
        if (r == b->nwhole)
            break;
        size_t hi = b->whole[2 * r + 1];
        for (size_t e = lo; e < hi; e++)
            indices[w + (e - lo)] = (uint32_t)e;
        memcpy(values + w, v + lo, (hi - lo) * sizeof *v);
        memset(v + lo, 0, (hi - lo) * sizeof *v); /* all-zero bits: +0.0f */
        w += hi - lo;
        while (j < nsel && sel[j] < hi)
            j++;
    }
    return w;
}

zen_status zen_topk_compress_buffers(const zen_topk_buffers *b, size_t k,
                                     const zen_topk_options *opts, uint32_t *indices, float *values,
                                     size_t capacity, size_t *count)
{
    if (count)
        *count = 0;
    size_t whole = 0;
    zen_status st = check(b, k, indices, values, count, &whole);
    if (st != ZEN_OK)
        return st;
    if (capacity < whole)
        return ZEN_EINVAL;
    zen__topk_ctx c;
    st = zen__topk_prepare(&c, ZEN_F32, b->n, k, opts, capacity - whole);
    if (st != ZEN_OK)
        return st; /* before the arrays are touched: unchanged */
    zen__topk_accum acc = { b->grad, b->velocity, b->residual, b->momentum };
    c.acc = &acc;
    size_t got = zen__topk_run(&c, b->residual);
    *count = emit(b, c.cand, got, indices, values);
    zen__topk_release(&c);
    return ZEN_OK;
}
