/*
 * Hash-bitmap encoding of one owner's aggregated partition (ZEN Algorithm 2), with a COO
 * fallback, as sent in the pull phase of BALANCED.
 *
 * Owner j holds a sorted unique sum whose indices all lie in its universe U_j (universe.h).
 * Blob layout (little-endian, every field 4-byte aligned relative to the blob start):
 *
 *   u32 format      ZEN_HB_BITMAP, ZEN_HB_COO, ZEN_HB_PLAIN or ZEN_HB_GAP
 *   u32 count       non-zero rows c in this partition
 *   BITMAP: ceil(|U_j| / 64) u64 words; bit t (word t / 64, bit t % 64, LSB first) is set iff
 *           U_j[t] holds a non-zero row; exactly c bits set, none at t >= |U_j|
 *   COO:    c u32 row indices, strictly increasing, each < rows and owned by j (h0(x) = j)
 *   PLAIN:  ceil(rows / 64) u64 words, bit x set iff row x is non-zero (only rows owned by j):
 *           the plain bitmap the paper's hash bitmap replaces (ablation only, never chosen
 *           by size: summed over owners it costs n rows / 8 bytes)
 *   then    c * width f32 values, rows in ascending index order (= ascending t)
 *   GAP:    (values first) c * width f32 values, then the c indices gap-coded from 0 (gap.h),
 *           each < rows and owned by j, then 0-3 zero bytes to a whole 4-byte word: chosen for
 *           global top-k only (balanced.c), where it is smaller than COO
 *
 * Sizes: bitmap 8 + 8 * ceil(|U_j| / 64) + 4 c w bytes; COO 8 + 4 c + 4 c w bytes; GAP
 * 8 + 4 c w + (1 to 5 bytes per index, rounded up to 4). zen__hb_plan picks the smaller of
 * bitmap and COO, so the bitmap is used once more than about 1 in 32 of U_j is non-zero.
 * Summed over owners the bitmaps cost about rows / 8 bytes whatever n is.
 *
 * Decoders accept only blobs that satisfy every rule above and return ZEN_EPROTO otherwise; they
 * never read outside [blob, blob + len) and write only rows of U_j.
 */
#ifndef ZEN_SPARSE_BITMAP_H
#define ZEN_SPARSE_BITMAP_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

#include "sparse/sparse_internal.h"
#include "sparse/wire/universe.h"

#define ZEN_HB_BITMAP       1u
#define ZEN_HB_COO          2u
#define ZEN_HB_PLAIN        3u
#define ZEN_HB_GAP          4u /* not a zen_sparse_pull_format: stats report it as COO */
#define ZEN_HB_HEADER_BYTES 8u

/* Encoded size (bytes) of c rows of width w over a universe of ulen, in each format. */
size_t zen__hb_bitmap_bytes(size_t ulen, size_t c, uint32_t w);
size_t zen__hb_coo_bytes(size_t c, uint32_t w);
size_t zen__hb_plain_bytes(uint64_t rows, size_t c, uint32_t w);
/* The GAP format's size depends on the indices: sum's (sorted unique). */
size_t zen__hb_gap_bytes(const zen_coo *sum);

/* zen__hb_plan with a forced format (zen_sparse_pull_format; 0: the smaller). rows is the tensor's,
 * for the plain bitmap. */
zen_status zen__hb_plan_format(const zen_coo *sum, size_t ulen, int pull_format, uint32_t *format,
                               size_t *bytes);

/*
 * Encoded size of sum over a universe of ulen rows (the smaller format); *format gets the choice.
 * ZEN_EPROTO when sum has more rows than the universe.
 */
zen_status zen__hb_plan(const zen_coo *sum, size_t ulen, uint32_t *format, size_t *bytes);

/* Encode owner j's sum (sorted unique) over its universe U_j of u into blob (exactly the bytes
 * zen__hb_plan returned for that format). ZEN_EPROTO when an index of sum is not in U_j (a peer
 * pushed an index to the wrong owner). The bitmap format needs u's members (and the decoders
 * need them for bitmap blobs): ZEN_EINVAL without them. */
zen_status zen__hb_encode(const zen_coo *sum, const zen_universe *u, uint32_t j, uint32_t format,
                          void *blob, size_t bytes);

/* Validate a blob of len bytes from owner j of u for width w; *count gets its row count. */
zen_status zen__hb_check(const void *blob, size_t len, const zen_universe *u, uint32_t j,
                         uint32_t w, size_t *count);

/* Decode into dense rows (u->rows x w), dividing values by divisor (1: as they are); rows not
 * in the blob are untouched. The blob is validated first. */
zen_status zen__hb_decode_dense(const void *blob, size_t len, const zen_universe *u, uint32_t j,
                                uint32_t w, float divisor, float *dense);

/* Decode into out (sorted ascending; out->rows is kept), dividing values by divisor. */
zen_status zen__hb_decode_coo(const void *blob, size_t len, const zen_universe *u, uint32_t j,
                              uint32_t w, float divisor, zen_coo *out);

#endif
