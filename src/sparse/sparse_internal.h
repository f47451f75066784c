/*
 * Internal interface of the sparse module: the coalesced local tensor every scheme starts from,
 * the scheme function type, and the pieces shared by schemes (output, cost model, profile).
 *
 * Flow of zen_sparse_allreduce (api.c): validate the input on every rank (an index >= rows is
 * refused with ZEN_EINVAL locally, and the ranks agree on failure before any data moves, so no
 * rank hangs), coalesce it into a zen_coo (sorted unique indices, duplicates summed), pick the
 * scheme (AUTO: cost.c), run the scheme, then fill the statistics from the communicator's byte
 * counters.
 */
#ifndef ZEN_SPARSE_INTERNAL_H
#define ZEN_SPARSE_INTERNAL_H

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
    zen_coo *coo_out;     /* else: the sorted unique result goes here */
    const zen_sparse_options *opts;
    zen_sparse_stats *stats; /* never NULL inside schemes (api.c passes a scratch one) */
    int auto_agreed;         /* 1: every rank reported the same AUTO state digest (api.c) */
    double auto_last_s;      /* then: their last keyed call's time (zen__auto_tune_call_time) */
    double auto_last_max_s;  /* and the slowest rank's */
} zen_sparse_ctx;

typedef zen_status (*zen_sparse_scheme_fn)(zen_sparse_ctx *ctx);

/* The schemes themselves (run and cost functions) are listed in scheme/registry.h. */

/* Deliver a finished sorted unique sum to the caller's output (dense scatter or COO copy/move),
 * dividing by the rank count first when opts->average is set, and set stats->nnz_out. Takes
 * ownership of *sum's arrays when moving into coo_out. */
zen_status zen__sparse_emit(zen_sparse_ctx *ctx, zen_coo *sum);

/*
 * The flat sparse sync of ctx (api.c): choose when scheme is AUTO (collective), set
 * stats->scheme and nnz_in, run the scheme, feed AUTO's observation. No validation and no
 * agreement: ctx->local must be coalesced (sorted, unique, in range) and every rank of ctx->comm
 * must call it with the same shape, scheme and options -- zen_sparse_allreduce has agreed on
 * them, or the caller (hier_host.c) derived them from agreed arguments. ZEN_EUNSUPPORTED for a
 * scheme not built.
 */
zen_status zen__sparse_run_flat(zen_sparse_ctx *ctx, zen_sparse_scheme scheme);

/* The hash seeds agreed by all ranks at communicator creation (api.c). seeds[0] is seed0 of the
 * owner function h0 (hier_hash.h), seeds[1] seeds the in-owner slot hashes. */
const uint64_t *zen__sparse_seeds(const zen_comm *comm);

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

/*
 * AUTO: choose the scheme for this call from the cost model and the sparsity profile kept under
 * opts->key (cost.c, profile.c). Collective when it needs to measure (all ranks must call it);
 * fills stats->predicted_s, density, gamma_n, skew.
 */
zen_status zen__sparse_choose(zen_sparse_ctx *ctx, zen_sparse_scheme *scheme);

/* After a scheme AUTO chose ran: this rank's seconds for it. Kept with the tensor's profile and
 * reported on the next AUTO call of the same key, where the ranks take the maximum and correct
 * that scheme's prediction (auto_tune.h). No-op without a key. */
void zen__sparse_auto_observe(const zen_sparse_ctx *ctx, double seconds);

/* Before the agreement (api.c): a digest of this rank's agreed AUTO state for ctx's key (0: none)
 * and its time of the last call. When every rank reports the same non-zero digest, AUTO may
 * decide without its own record exchange (profile.c, ZEN_SPARSE_AUTO_RECHECK). */
void zen__sparse_auto_state(const zen_sparse_ctx *ctx, uint64_t *digest, double *last_s);

/* Tests only: replace the measured seconds AUTO learns from (rank, scheme that ran, measured) with
 * fn's value, so a test can inject deterministic timings; NULL restores the clock.
 * Process-wide; set it while no AUTO call runs. */
typedef double (*zen_sparse_auto_time_fn)(int rank, zen_sparse_scheme scheme, double seconds);
void zen__sparse_auto_time_hook(zen_sparse_auto_time_fn fn);

/* Tests only: forget every key's AUTO state in this process (as an eviction would), so a test can
 * make one process of a job lose its state while the others keep theirs. */
void zen__sparse_auto_forget_all(void);

#endif
