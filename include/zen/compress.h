/*
 * compress.h - top-k gradient selection (DGC-style) with error feedback and momentum correction.
 *
 * zen_topk_select picks the entries of largest magnitude of one dense f32 or bf16 vector:
 * a strided sample (jittered with the seed) gives a magnitude threshold from its quantile, one
 * vectorised compare-and-compact pass over the vector collects the entries at or above it, and
 * the threshold is moved and the pass repeated until the count lies in [0.8k, 1.3k] (APPROX), or
 * exactly the k largest are picked among the collected candidates (EXACT). zen_topk_compress adds
 * DGC's error feedback and momentum correction on top, in a state object the caller owns (one per
 * tensor); zen_topk_compress_buffers is the same step on residual and velocity arrays the caller
 * keeps itself (a framework's tensors), with ranges that are sent whole. The selected pairs are
 * what zen_sparse_allreduce (zen/sparse.h) sends as a width-1 sparse tensor. Nothing here touches
 * a communicator.
 *
 * Semantics common to the selecting calls:
 *  - Magnitudes are compared as the bit pattern of |x| (sign cleared), which orders every finite
 *    value and infinity like the numbers do and puts NaN above infinity: a NaN or inf entry is
 *    always selected (first), so a diverging gradient shows up in what is sent instead of hiding
 *    in a residual. Zeros (+0 and -0) are never selected: they carry no mass, so fewer than k
 *    entries come back when the vector has fewer than k non-zeros.
 *  - indices come back sorted ascending, values[i] is the entry at indices[i] as f32 (bf16 input
 *    is widened exactly), with its sign.
 *  - EXACT returns exactly min(k, non-zeros) entries; among equal magnitudes the lower index wins.
 *    APPROX returns a count in [ceil(0.8k), floor(1.3k)] (or all non-zeros when there are fewer
 *    than 0.8k), and its set is every entry at or above a threshold, so it always holds the
 *    largest count magnitudes: it aims at 1.15k so that the exact top-k is (nearly always)
 *    inside it. When the first pass misses the window the call pays another pass; data with many
 *    equal magnitudes at the threshold falls back to an exact threshold (radix histogram).
 *  - n >= 2^32 is ZEN_EUNSUPPORTED (indices are uint32); bad arguments are ZEN_EINVAL with no
 *    effect; ZEN_ENOMEM when scratch memory cannot be had. Scratch is allocated per call.
 *
 * Thread safety: zen_topk_select keeps no state and may run concurrently on any arguments. A
 * zen_topk_state, or one set of zen_topk_buffers, is used by one thread at a time (different ones
 * on different threads are independent). With opts->threads > 1 a call splits the vector over
 * that many POSIX threads it starts and joins before returning.
 */
#ifndef ZEN_COMPRESS_H
#define ZEN_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zen_topk_mode {
    ZEN_TOPK_APPROX = 0, /* DGC: sample -> threshold -> adapt until count in [0.8k, 1.3k] */
    ZEN_TOPK_EXACT = 1   /* exactly k: nth-element among the candidates only; ties -> lower index */
} zen_topk_mode;

/* Options; initialise with zen_topk_options_init(&o) or ZEN_TOPK_OPTIONS_INIT. NULL means the
 * defaults. size: sizeof(zen_topk_options) (0 is this version's; another value is ZEN_EINVAL). */
typedef struct zen_topk_options {
    size_t size;
    zen_topk_mode mode;
    int threads;         /* threads of the compare-and-compact pass; <= 1: the calling thread */
    double sample_ratio; /* share of n sampled for the threshold, in (0, 1], clamped to 1/4 (1:
                            the whole vector); 0: automatic (about 600 sampled keys above the
                            threshold, at most n/4) */
    uint64_t seed;       /* jitter of the strided sample: same seed and input, same result */
} zen_topk_options;

#define ZEN_TOPK_OPTIONS_INIT                                                    \
    {                                                                            \
        .size = sizeof(zen_topk_options), .mode = ZEN_TOPK_APPROX, .threads = 1, \
        .sample_ratio = 0.0, .seed = 0                                           \
    }

/* Fill *o with the defaults (the same as ZEN_TOPK_OPTIONS_INIT). NULL is ignored. Thread safe. */
ZEN_API void zen_topk_options_init(zen_topk_options *o);

/* The most entries zen_topk_select or zen_topk_compress may return for k: ceil(1.3k) (SIZE_MAX
 * when that overflows). Size indices and values with it. Thread safe. */
ZEN_API size_t zen_topk_capacity(size_t k);

/*
 * Select the (about, see opts->mode) k entries of largest magnitude of x[0..n), dtype ZEN_F32 or
 * ZEN_BF16 (other dtypes: ZEN_EINVAL). Writes *count pairs to indices[] and values[] (caller
 * arrays of capacity entries; capacity must be at least min(n, zen_topk_capacity(k)), for EXACT
 * min(n, k) suffices). k = 0 or n = 0 returns 0 entries (x may be NULL when n = 0); k >= n returns
 * every non-zero entry. x is only read. On error *count is 0 (when count is not NULL) and the
 * arrays are unspecified.
 */
ZEN_API zen_status zen_topk_select(const void *x, zen_dtype dtype, size_t n, size_t k,
                                   const zen_topk_options *opts, uint32_t *indices, float *values,
                                   size_t capacity, size_t *count);

/* DGC error feedback and momentum correction for one tensor of n f32 entries (n < 2^32). The
 * state holds the accumulated velocity u and the residual v, both zero at creation. */
typedef struct zen_topk_state zen_topk_state;

/* Create a state for tensors of n entries with momentum m in [0, 1) (0: plain error feedback,
 * no u is kept). ZEN_EINVAL for a NULL out or m outside [0, 1) or not finite, ZEN_EUNSUPPORTED
 * for n >= 2^32, ZEN_ENOMEM. The caller owns *out and frees it with zen_topk_state_destroy. */
ZEN_API zen_status zen_topk_state_create(size_t n, float momentum, zen_topk_state **out);

/* Free a state; NULL is ignored. */
ZEN_API void zen_topk_state_destroy(zen_topk_state *s);

/*
 * One step: u = m*u + grad; v += u (both elementwise in f32, in that order, no fused multiply-add);
 * then select the top-k of v as zen_topk_select does (f32) and take the selected entries out of
 * v and u (set to 0: momentum factor masking), so what is not sent now is sent later. grad has
 * the state's n entries and is only read. indices/values/capacity/count as zen_topk_select; the
 * values are v's entries before they were cleared. The update runs inside the selection's first
 * pass over v (one read of the state, not two); the result is bit for bit the separate update's
 * followed by zen_topk_select. On any error (ZEN_EINVAL, ZEN_EUNSUPPORTED,
 * ZEN_ENOMEM: the scratch is allocated before the step) the state is unchanged.
 */
ZEN_API zen_status zen_topk_compress(zen_topk_state *s, const float *grad, size_t k,
                                     const zen_topk_options *opts, uint32_t *indices, float *values,
                                     size_t capacity, size_t *count);

/* The caller's buffers of one tensor for zen_topk_compress_buffers: the library keeps no pointer
 * to them past the call. grad, residual and velocity are n f32 entries each and must not overlap.
 * size: sizeof(zen_topk_buffers) or 0 (another value is ZEN_EINVAL). */
typedef struct zen_topk_buffers {
    size_t size;
    size_t n;              /* entries of each array, < 2^32 */
    const float *grad;     /* g, only read */
    float *residual;       /* v: what was not sent yet (error feedback), updated in place */
    float *velocity;       /* u: the momentum, updated in place; NULL: no momentum (v += g) */
    float momentum;        /* m in [0, 1); must be 0 when velocity is NULL */
    const uint32_t *whole; /* nwhole [start, end) pairs, start < end <= n, ascending and disjoint
                              (adjacent is fine): entries sent every step whatever their magnitude
                              (e.g. small parameters); NULL when nwhole is 0 */
    size_t nwhole;
} zen_topk_buffers;

/*
 * zen_topk_compress on caller-owned arrays (b), for a framework whose residual and velocity are
 * its own tensors (laid out like a gradient bucket, carried over when buckets are rebuilt):
 *   1. u = m*u + g; v += u (or v += g without velocity), elementwise in f32, no fused
 *      multiply-add, inside the selection's first pass as zen_topk_compress does;
 *   2. select about k entries of largest |v| over all of v, as zen_topk_select (f32) does;
 *   3. merge that selection with every entry of the whole ranges, into indices/values ascending
 *      (a selected entry inside a range is sent once), values v's before clearing;
 *   4. clear the sent entries of v, and of u the selected entries outside the ranges only (DGC's
 *      momentum factor masking applies to the top-k; a whole-sent entry keeps its velocity, like
 *      a dense parameter under momentum SGD).
 * With no ranges the result and the arrays' new contents are bit for bit zen_topk_compress's on a
 * state holding the same v and u (zen_topk_compress is this call on its state's arrays).
 * capacity must be at least min(n, zen_topk_capacity(k)) (EXACT: min(n, k)) plus the total length
 * of the ranges. Errors (*count 0, arrays unchanged: everything is checked and the scratch
 * allocated before they are touched): ZEN_EINVAL (NULL b or count, a NULL array where entries are
 * needed, bad size, momentum, ranges, options or capacity), ZEN_EUNSUPPORTED (n >= 2^32),
 * ZEN_ENOMEM.
 */
ZEN_API zen_status zen_topk_compress_buffers(const zen_topk_buffers *b, size_t k,
                                             const zen_topk_options *opts, uint32_t *indices,
                                             float *values, size_t capacity, size_t *count);

/* Add values[i] to v[indices[i]] for i < count (e.g. what a global top-k dropped, so it is sent
 * later). Every index must be < n, else ZEN_EINVAL and nothing is added. Repeated indices add up.
 */
ZEN_API zen_status zen_topk_state_add(zen_topk_state *s, const uint32_t *indices,
                                      const float *values, size_t count);

/* The state's n, and read-only views of its residual v and velocity u (u is NULL for momentum 0);
 * valid until the next call on s. For tests, checkpoints and diagnostics. */
ZEN_API size_t zen_topk_state_size(const zen_topk_state *s);
ZEN_API const float *zen_topk_state_residual(const zen_topk_state *s);
ZEN_API const float *zen_topk_state_velocity(const zen_topk_state *s);

#ifdef __cplusplus
}
#endif

#endif /* ZEN_COMPRESS_H */
