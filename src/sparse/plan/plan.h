/*
 * One sparse call's plan: chosen once, then run, then observed.
 *
 *   make   flat or per host (scheme/hier_host.c), the scheme, and with the per-host form the scheme
 *          across hosts. AUTO's chooser (auto.h) is asked once per call: for the flat scheme, or,
 *          when the per-host form is possible (hierarchy AUTO on several hosts with several ranks
 *          on some, or hierarchy ON with scheme AUTO), for the profile from which hier_cost.c
 *          predicts both forms and the scheme across hosts, from the predicted density of a
 *          host's sum (that input itself exists only after the push).
 *   run    the scheme's run function from its registry row (flat), or the per-host steps: push
 *          inside the host, the sparse sync of the shard across hosts with the plan's scheme for
 *          it, and pull.
 *   observe  after a flat AUTO call, its time goes back to AUTO (auto.h).
 *
 * No validation and no agreement here: ctx->local is coalesced and every rank of ctx->comm calls
 * with the same shape, scheme and options (zen_sparse_allreduce agreed on them). Both steps are
 * collective over ctx->comm.
 */
#ifndef ZEN_SPARSE_PLAN_H
#define ZEN_SPARSE_PLAN_H

#include "sparse/sparse_internal.h"

typedef struct zen_sparse_plan {
    int per_host;                   /* 1: the hierarchical form across hosts */
    zen_sparse_scheme scheme;       /* flat: the scheme to run (AUTO resolved) */
    zen_sparse_scheme inter_scheme; /* per host: the scheme across hosts (AUTO resolved) */
} zen_sparse_plan;

/* Choose. Every rank gets the same plan. Sets stats->hosts, predicted_* and AUTO's profile
 * statistics. */
zen_status zen__sparse_plan_make(zen_sparse_ctx *ctx, zen_sparse_plan *plan);

/* Run the plan and observe it. ZEN_EUNSUPPORTED (on every rank, before any message) for a flat
 * scheme that has no registry row. */
zen_status zen__sparse_plan_run(zen_sparse_ctx *ctx, const zen_sparse_plan *plan);

#endif
