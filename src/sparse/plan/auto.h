/*
 * AUTO's runtime (auto_*.c, sharing auto_internal.h): the process-wide slots of keyed tensors,
 * the record exchange, the sampled profile, the online calibration and the decision through
 * auto_tune.h. Only the planner (plan.c) asks it for a scheme; api.c reads its state digest for
 * the agreement.
 */
#ifndef ZEN_SPARSE_AUTO_H
#define ZEN_SPARSE_AUTO_H

#include <stdint.h>

#include "sparse/sparse_internal.h"

/*
 * AUTO: choose the scheme for this call from the cost model and the sparsity profile kept under
 * opts->key (auto_decide.c, predict.c). Collective when it needs to measure (all ranks must call it);
 * fills stats->predicted_s, density, gamma_n, skew.
 */
zen_status zen__sparse_choose(zen_sparse_ctx *ctx, zen_sparse_scheme *scheme);

/* After a scheme AUTO chose ran: this rank's seconds for it. Kept with the tensor's profile and
 * reported on the next AUTO call of the same key, where the ranks take the maximum and correct
 * that scheme's prediction (auto_tune.h). No-op without a key. */
void zen__sparse_auto_observe(const zen_sparse_ctx *ctx, double seconds);

/* Before the agreement (api.c): a digest of this rank's agreed AUTO state for ctx's key (0: none)
 * and its time of the last call. When every rank reports the same non-zero digest, AUTO may
 * decide without its own record exchange (auto_decide.c, ZEN_SPARSE_AUTO_RECHECK). */
void zen__sparse_auto_state(const zen_sparse_ctx *ctx, uint64_t *digest, double *last_s);

/* Tests only: replace the measured seconds AUTO learns from (rank, scheme that ran, measured) with
 * fn's value, so a test can inject deterministic timings; NULL restores the clock.
 * Process-wide; set it while no AUTO call runs. */
typedef double (*zen_sparse_auto_time_fn)(int rank, zen_sparse_scheme scheme, double seconds);
void zen__sparse_auto_time_hook(zen_sparse_auto_time_fn fn);

/* Tests only: forget every key's AUTO state in this process (as an eviction would), so a test can
 * make one process of a job lose its state while the others keep theirs. */
void zen__sparse_auto_forget_all(void);

/* Tests only: how many times this thread (an inproc rank) asked zen__sparse_choose. */
uint64_t zen__sparse_auto_consults(void);

#endif
