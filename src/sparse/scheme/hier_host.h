/*
 * Hierarchical sparse sync across hosts (ZEN section 7.1): when several ranks share a host, sum
 * inside the host with dense collectives on the fast local links and run the sparse scheme only
 * across hosts, among the ranks that hold the same shard of rows.
 *
 * Host grouping: opts->ranks_per_host, else ZEN_SPARSE_RANKS_PER_HOST (emulated hosts of
 * consecutive ranks), else the communicator's own (zen__comm_hosts, coll/topology.c: the
 * transport's host table, or the launcher's ZEN_LOCAL_RANK/ZEN_LOCAL_SIZE, cached). The intra-host communicator
 * (color = host, key = rank) and the inter-host one (color = index in the host, key = host) are
 * split once and cached on the parent communicator.
 *
 * Whether a call takes this form is the planner's decision (plan/plan.c, with the cost of the
 * form in plan/hier_cost.c).
 */
#ifndef ZEN_SPARSE_HIER_HOST_H
#define ZEN_SPARSE_HIER_HOST_H

#include <stdint.h>

#include "coll/comm_internal.h"
#include "sparse/sparse_internal.h"

/* Bits of the options that all ranks must agree on (folded into api.c's agreement record). */
uint64_t zen__sparse_hier_mode(const zen_sparse_options *opts);

/* The host grouping of this call (collective over ctx->comm at its first use there): the
 * communicator's, or emulated hosts of opts->ranks_per_host. Sets stats->hosts. */
zen_status zen__sparse_hier_group(zen_sparse_ctx *ctx, const zen_comm_hosts **g);

/*
 * One call of the hierarchical form, in the three steps of hier_host.c, which the planner
 * (plan/plan.c) runs in order after zen__sparse_hier_group:
 *   zen__sparse_hier_push   step 1: densify, reduce-scatter in the host -> shard
 *   (the planner)           step 2: the sparse sync of shard on inter -> res
 *   zen__sparse_hier_pull   step 3: allgather in the host, deliver, count; releases the call
 */
typedef struct zen_hier_call {
    zen_comm *inter;    /* step 2's communicator; NULL: this rank holds no shard */
    const float *shard; /* step 1's result: shard_rows x width, this rank's host sum */
    uint64_t shard_rows;
    zen_coo res; /* step 2's result: the shard's sum over hosts (shard-relative rows) */
    /* hier_host.c's own */
    void *cache;
    float *full, *shard_buf;
    size_t *rc;
    zen_comm_stats intra0, inter0;
} zen_hier_call;

/* Step 1. On failure the call still must be passed to zen__sparse_hier_pull (which releases). */
zen_status zen__sparse_hier_push(zen_sparse_ctx *ctx, zen_hier_call *h);

/* Step 3 when st (the status so far) is ZEN_OK, then the statistics and the release; returns
 * the call's status. */
zen_status zen__sparse_hier_pull(zen_sparse_ctx *ctx, zen_hier_call *h, zen_status st);

#endif
