/*
 * The compare-and-compact pass of top-k selection: one read of the vector, which is all of the
 * selection's cost at 1% density.
 *
 * Blocks of 32 entries: a branch-free OR of (key >= thr) over the block, which gcc vectorises
 * (the masked keys fit in int32, so the compare is a signed vector compare); only a block with a
 * hit (about a third of them at 1.15% density, fewer at 0.1%) runs the scalar compaction, which
 * stores every index and advances the count by the compare, so it has no unpredictable branch.
 * The x86-64 build compiles the kernels twice (target_clones: AVX2 and the SSE2 baseline) and the
 * loader picks one for the CPU it runs on.
 */
#include "topk_internal.h"

#define BLOCK 32

/* Not under ThreadSanitizer: the loader picks a clone through an ifunc resolver, and with TSan's
 * runtime every program linking libzen crashed at load (segfault before main). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute) && \
    !defined(__SANITIZE_THREAD__)
#if __has_attribute(target_clones)
#define ZEN_TOPK_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef ZEN_TOPK_CLONES
#define ZEN_TOPK_CLONES
#endif

/* f32 entries read as their bits: a type that may alias them (no strict-aliasing breach). */
#if defined(__GNUC__)
typedef uint32_t __attribute__((may_alias)) f32_bits;
#else
typedef uint32_t f32_bits;
#endif

/* One block at bits[i..i+BLOCK): the branch-free OR of the compares, and only on a hit the
 * compaction; returns the new count. Inlined into each clone, so it is vectorised for it. */
static inline size_t block_f32(const f32_bits *restrict b, size_t i, int32_t thr,
                               uint32_t *restrict out, size_t c)
{
    int hit = 0;
    for (int j = 0; j < BLOCK; j++)
        hit |= (int32_t)(b[j] & 0x7fffffffu) >= thr;
    if (!hit)
        return c;
    for (int j = 0; j < BLOCK; j++) {
        out[c] = (uint32_t)(i + (size_t)j);
        c += (int32_t)(b[j] & 0x7fffffffu) >= thr;
    }
    return c;
}

ZEN_TOPK_CLONES
static size_t scan_f32(const f32_bits *restrict bits, size_t begin, size_t end, int32_t thr,
                       uint32_t *restrict out, size_t cap, size_t *stop)
{
    size_t c = 0, i = begin;
    for (; i + BLOCK <= end; i += BLOCK) {
        c = block_f32(bits + i, i, thr, out, c);
        if (c > cap) {
            *stop = i + BLOCK;
            return c;
        }
    }
    for (; i < end; i++) {
        out[c] = (uint32_t)i;
        c += (int32_t)(bits[i] & 0x7fffffffu) >= thr;
    }
    *stop = end;
    return c;
}

/* DGC's update of one run of entries (zen__topk_accum), written as the separate loop was. */
static inline void accum_run(const float *restrict g, float *restrict u, float *restrict v, float m,
                             size_t len)
{
    if (!u) {
        for (size_t j = 0; j < len; j++)
            v[j] += g[j];
        return;
    }
    for (size_t j = 0; j < len; j++) {
        u[j] = m * u[j] + g[j];
        v[j] += u[j];
    }
}

/* scan_f32 with the accumulation of each block just before its compare, while it is in cache;
 * once the count passes cap (or from the start when full) only the accumulation goes on. */
ZEN_TOPK_CLONES
static size_t scan_accum_f32(const float *restrict g, float *restrict u, float *restrict v, float m,
                             size_t begin, size_t end, int32_t thr, uint32_t *restrict out,
                             size_t cap, size_t *stop, int full)
{
    size_t c = 0, i = begin;
    *stop = end;
    for (; i + BLOCK <= end; i += BLOCK) {
        accum_run(g + i, u ? u + i : NULL, v + i, m, BLOCK);
        if (full)
            continue;
        c = block_f32((const f32_bits *)(v + i), i, thr, out, c);
        if (c > cap) {
            *stop = i + BLOCK;
            full = 1;
        }
    }
    accum_run(g + i, u ? u + i : NULL, v + i, m, end - i);
    const f32_bits *bits = (const f32_bits *)v;
    for (; !full && i < end; i++) {
        out[c] = (uint32_t)i;
        c += (int32_t)(bits[i] & 0x7fffffffu) >= thr;
    }
    return c;
}

/* bf16: key16 << 16 >= thr exactly when key16 >= ceil(thr / 2^16), a 16-bit compare. */
ZEN_TOPK_CLONES
static size_t scan_bf16(const uint16_t *restrict h, size_t begin, size_t end, int16_t thr,
                        uint32_t *restrict out, size_t cap, size_t *stop)
{
    size_t c = 0, i = begin;
    for (; i + BLOCK <= end; i += BLOCK) {
        const uint16_t *b = h + i;
        int hit = 0;
        for (int j = 0; j < BLOCK; j++)
            hit |= (int16_t)(b[j] & 0x7fffu) >= thr;
        if (!hit)
            continue;
        for (int j = 0; j < BLOCK; j++) {
            out[c] = (uint32_t)(i + (size_t)j);
            c += (int16_t)(b[j] & 0x7fffu) >= thr;
        }
        if (c > cap) {
            *stop = i + BLOCK;
            return c;
        }
    }
    for (; i < end; i++) {
        out[c] = (uint32_t)i;
        c += (int16_t)(h[i] & 0x7fffu) >= thr;
    }
    *stop = end;
    return c;
}

size_t zen__topk_scan(const void *x, zen_dtype dtype, size_t begin, size_t end, uint32_t thr,
                      uint32_t *out, size_t cap, size_t *stop)
{
    if (thr == 0)
        thr = 1; /* zeros are never selected */
    if (dtype == ZEN_BF16) {
        uint32_t t16 = (thr + 0xffffu) >> 16;
        if (t16 > 0x7fffu) { /* above every key */
            *stop = end;
            return 0;
        }
        return scan_bf16(x, begin, end, (int16_t)t16, out, cap, stop);
    }
    if (thr > 0x7fffffffu) {
        *stop = end;
        return 0;
    }
    return scan_f32((const f32_bits *)x, begin, end, (int32_t)thr, out, cap, stop);
}

size_t zen__topk_scan_accum(const zen__topk_accum *a, size_t begin, size_t end, uint32_t thr,
                            uint32_t *out, size_t cap, size_t *stop)
{
    if (thr == 0)
        thr = 1;
    int above_all = thr > 0x7fffffffu; /* nothing to compare: accumulate only */
    return scan_accum_f32(a->g, a->u, a->v, a->m, begin, end, above_all ? 0 : (int32_t)thr, out,
                          cap, stop, above_all);
}
