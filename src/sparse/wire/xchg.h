/*
 * Variable-size byte exchanges used by the baseline sparse schemes (allgather, block, ps) and
 * the sparsity profile, plus the COO wire helpers the baselines share. The exchanges run inside
 * a collective the caller opened with zen__coll_begin, talk to peers with the zen_coll_*
 * primitives, and pack each peer's payload into one message, so a COO slice (indices then
 * values) costs one message instead of two.
 *
 * Every exchange is two steps: first the 8-byte sizes (so receivers can allocate exactly), then
 * the payloads. Received sizes are checked against a caller-given bound before anything is
 * allocated, so a corrupt or disagreeing peer yields ZEN_EPROTO, not a huge allocation.
 */
#ifndef ZEN_SPARSE_XCHG_H
#define ZEN_SPARSE_XCHG_H

#include <stddef.h>
#include <stdint.h>

#include "coll/comm_internal.h"
#include "sparse/sparse_internal.h"

/*
 * All-to-all with per-peer sizes: rank r sends sbytes[p] bytes at sbuf[p] to every p (its own
 * block is copied locally). *rbuf gets one zen__malloc'd buffer (free with zen__free) holding the
 * blocks in rank order; rbytes[p] and roff[p] their sizes and offsets. Each offset is a multiple
 * of 8 (blocks are padded) so typed views stay aligned. max_bytes bounds any one block.
 */
zen_status zen__xchg_alltoallv(zen_comm *comm, const zen_coll *cc, const void *const *sbuf,
                               const size_t *sbytes, size_t max_bytes, uint8_t **rbuf,
                               size_t *rbytes, size_t *roff);

/* All-gather with per-rank sizes: every rank's sbytes at sbuf ends up in *rbuf (layout as above).
 */
zen_status zen__xchg_allgatherv(zen_comm *comm, const zen_coll *cc, const void *sbuf, size_t sbytes,
                                size_t max_bytes, uint8_t **rbuf, size_t *rbytes, size_t *roff);

/*
 * COO wire format: nnz u32 indices followed by nnz * width f32 values; bytes = nnz * (4 + 4w).
 * zen__coo_pack writes coo entries [lo, hi) into out (which holds zen_coo_wire_bytes(hi-lo, w)).
 */
static inline size_t zen_coo_wire_bytes(size_t nnz, uint32_t width)
{
    return nnz * (4 + 4 * (size_t)width);
}

void zen__coo_pack(const zen_coo *coo, size_t lo, size_t hi, void *out);

/*
 * View a received COO block as a zen_coo (no copy; capacity 0 marks it as borrowed). Checks that
 * the size is a whole number of entries and the indices are sorted, unique and inside
 * [lo_row, hi_row); ZEN_EPROTO naming peer otherwise.
 */
zen_status zen__coo_view(zen_comm *comm, int peer, const uint8_t *buf, size_t bytes, uint64_t rows,
                         uint32_t width, uint64_t lo_row, uint64_t hi_row, zen_coo *view);

/* Byte bound for one COO message of up to rows entries (SIZE_MAX on overflow). */
size_t zen__coo_wire_max(uint64_t rows, uint32_t width);

/* Even range partition of [0, rows) into n parts: part j is [lo(j), lo(j+1)). */
static inline uint64_t zen_range_lo(uint64_t rows, int n, int j)
{
    return rows * (uint64_t)j / (uint64_t)n; /* rows < 2^32, so no overflow */
}

/* First position in the sorted idx[0..nnz) whose value is >= bound. */
size_t zen__lower_bound_u32(const uint32_t *idx, size_t nnz, uint64_t bound);

/* Collect the non-zero rows of a dense rows x width buffer into a fresh COO. */
zen_status zen__coo_from_dense(const float *dense, uint64_t rows, uint32_t width, zen_coo *out);

/*
 * A scheme that wrote ctx->dense_out itself (not through zen__sparse_emit) finishes with this:
 * divides by the rank count when opts->average is set and sets stats->nnz_out to the number of
 * non-zero rows, as zen__sparse_emit does.
 */
void zen__dense_finish(zen_sparse_ctx *ctx);

/* The two halves of zen__dense_finish, for a scheme that knows which rows it wrote (the others
 * are zero) and counts only those: opts->average's division, and the non-zero rows of
 * dense[lo..hi) (rows of width floats). */
void zen__dense_average(zen_sparse_ctx *ctx);
size_t zen__dense_count_rows(const float *dense, uint32_t width, uint64_t lo, uint64_t hi);

/* The non-zero rows of dense among the rows listed in runs[0..n) (the only rows a scheme wrote). */
size_t zen__dense_count_runs(const float *dense, uint64_t rows, uint32_t width, const zen_coo *runs,
                             int n);

#endif
