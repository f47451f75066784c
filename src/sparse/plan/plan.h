/*
 * One sparse call's plan: chosen once, then run, then observed.
 *
 *   make   flat or per host (scheme/hier_host.c), and the scheme. With hierarchy AUTO on several
 *          hosts the per-host form is compared with the flat prediction (hier_cost.c), which asks
 *          AUTO's chooser (auto.h) once; a flat AUTO call asks it once otherwise.
 *   run    the scheme's run function from its registry row (flat), or the per-host steps: push
 *          inside the host, the sparse sync of the shard across hosts -- a plan of its own on the
 *          inter-host communicator, whose input exists only after the push -- and pull.
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
    int per_host;             /* 1: the hierarchical form across hosts */
    zen_sparse_scheme scheme; /* flat: the scheme to run (AUTO resolved); per host: the option's
                               * scheme across hosts (AUTO: the inter-host plan chooses) */
} zen_sparse_plan;

/* Choose. Every rank gets the same plan. Sets stats->hosts, predicted_* and AUTO's profile
 * statistics. */
zen_status zen__sparse_plan_make(zen_sparse_ctx *ctx, zen_sparse_plan *plan);

/* Run the plan and observe it. ZEN_EUNSUPPORTED (on every rank, before any message) for a flat
 * scheme that has no registry row. */
zen_status zen__sparse_plan_run(zen_sparse_ctx *ctx, const zen_sparse_plan *plan);

#endif
