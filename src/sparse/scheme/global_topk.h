/*
 * Global top-k: the step the owner schemes (BALANCED, PS) run between their reduce and their
 * pull when zen_sparse_options.global_topk is set, so that the pull carries at most k rows.
 */
#ifndef ZEN_SPARSE_GLOBAL_TOPK_H
#define ZEN_SPARSE_GLOBAL_TOPK_H

#include "sparse/sparse_internal.h"

/* k of the call: opts->global_topk, 0 when off. */
static inline size_t zen__sparse_topk_k(const zen_sparse_ctx *ctx)
{
    return ctx->opts ? ctx->opts->global_topk : 0;
}

/*
 * Collective over ctx->comm (every rank calls it, once per call, with its own partition): keep in
 * *agg, this owner's reduced partition (sorted unique rows, width 1; the owners' partitions are
 * disjoint), only its share of the k largest magnitudes of the union of all partitions. Exact
 * zeros are dropped. After the call the partitions together hold exactly min(k, non-zeros) rows,
 * and every kept magnitude is >= every dropped one. Of the rows tied at the boundary magnitude,
 * those of smallest tie order (a fixed bijective mix of the row index) are kept: the same rows
 * whichever owners hold them, so the result does not depend on the communicator's hash seed.
 */
zen_status zen__sparse_global_topk(zen_sparse_ctx *ctx, zen_coo *agg, size_t k);

#endif
