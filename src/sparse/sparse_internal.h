/*
 * Internal interface of the sparse module: the coalesced local tensor every scheme starts from,
 * the context and function type of a scheme, and what schemes share (output, phase timing).
 *
 * Flow of zen_sparse_allreduce (api.c): validate the input on every rank (an index >= rows is
 * refused with ZEN_EINVAL locally, and the ranks agree on failure before any data moves, so no
 * rank hangs), coalesce it into a zen_coo (sorted unique indices, duplicates summed), make the
 * call's plan once (plan/plan.h: flat or per host, and the scheme; AUTO asks its chooser there),
 * run it, then fill the statistics from the communicator's byte counters.
 */
#ifndef ZEN_SPARSE_INTERNAL_H
#define ZEN_SPARSE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <zen/sparse.h>

#include "common/clock.h"

/* Coalesced COO: nnz sorted unique indices, nnz * width f32 values, row-major. */
typedef struct zen_coo {
    uint64_t rows;
    uint32_t width;
    size_t nnz;
    size_t capacity; /* allocated entries of idx (values: capacity * width) */
    uint32_t *idx;
    float *val;
} zen_coo;

/* Grow to hold at least capacity entries (keeps contents). */
zen_status zen__coo_reserve(zen_coo *coo, size_t capacity);
void zen__coo_release(zen_coo *coo);

/*
 * Coalesce a user tensor: validate indices (< rows), convert bf16 to f32, sort, sum duplicates.
 * *bad_index gets the first offending index on ZEN_EINVAL.
 */
zen_status zen__coo_from_tensor(const zen_sparse_tensor *in, zen_coo *out, uint64_t *bad_index);

/*
 * Merge-add k sorted unique COO runs into out (sorted unique). Used by aggregation on owners and
 * by the hierarchical scheme at each round.
 */
zen_status zen__coo_merge(const zen_coo *runs, size_t k, zen_coo *out);

/* One call of a scheme. */
typedef struct zen_sparse_ctx {
    zen_comm *comm;
    const zen_coo *local; /* this rank's coalesced input */
    float *dense_out;     /* if non-NULL: write the whole rows*width result here */
    zen_coo *coo_out; /* else: the sorted unique result goes here (any order: opts->any_order) */
    const zen_sparse_options *opts;
    zen_sparse_stats *stats; /* never NULL inside schemes (api.c passes a scratch one) */
    int auto_agreed;         /* 1: every rank reported the same AUTO state digest (api.c) */
    double auto_last_s;      /* then: their last keyed call's time (zen__auto_tune_call_time) */
    double auto_last_max_s;  /* and the slowest rank's */
} zen_sparse_ctx;

typedef zen_status (*zen_sparse_scheme_fn)(zen_sparse_ctx *ctx);

/* zen_sparse_options.size of the versions before global_topk and before any_order: accepted,
 * the later fields then their defaults. */
#define ZEN_SPARSE_OPTIONS_V1_SIZE offsetof(zen_sparse_options, global_topk)
#define ZEN_SPARSE_OPTIONS_V2_SIZE offsetof(zen_sparse_options, any_order)

/* 1 for the schemes global_topk runs in: the owner schemes, whose owners hold disjoint reduced
 * partitions before the pull (scheme/global_topk.h), and AUTO, which then picks one of them. */
static inline int zen__sparse_topk_scheme(zen_sparse_scheme s)
{
    return s == ZEN_SPARSE_AUTO || s == ZEN_SPARSE_BALANCED || s == ZEN_SPARSE_PS;
}

/* The schemes themselves (run and cost functions) are listed in scheme/registry.h. */

/* Deliver a finished sorted unique sum to the caller's output (dense scatter or COO copy/move),
 * dividing by the rank count first when opts->average is set, and set stats->nnz_out. Takes
 * ownership of *sum's arrays when moving into coo_out. */
zen_status zen__sparse_emit(zen_sparse_ctx *ctx, zen_coo *sum);

/* Microseconds between two zen_now_ns() stamps. */
static inline double zen_us_between(int64_t start_ns, int64_t end_ns)
{
    return (double)(end_ns - start_ns) / 1e3;
}

/* Close a phase of a scheme: add the time since *lap to stats->phase_us[phase], restart *lap. */
static inline void zen_sparse_lap(zen_sparse_ctx *ctx, zen_sparse_phase phase, int64_t *lap)
{
    int64_t now = zen_now_ns();
    ctx->stats->phase_us[phase] += zen_us_between(*lap, now);
    *lap = now;
}

#endif
