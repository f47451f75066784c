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
 * The decision (hier_host_cost.c) compares the flat prediction of cost.c over all n ranks with
 * intra reduce-scatter + inter sparse sync on `hosts` ranks + intra allgather.
 */
#ifndef ZEN_SPARSE_HIER_HOST_H
#define ZEN_SPARSE_HIER_HOST_H

#include <stdint.h>

#include "sparse/model/cost.h"
#include "sparse/sparse_internal.h"

/* Bits of the options that all ranks must agree on (folded into api.c's agreement record). */
uint64_t zen__sparse_hier_mode(const zen_sparse_options *opts);

/*
 * Decide whether this call runs hierarchically (*use). Collective over ctx->comm when the grouping
 * or the cost model needs communication; every rank gets the same answer. When the decision asked
 * the flat cost model (zen__sparse_choose) and *flat is AUTO, *flat gets the flat scheme it chose,
 * so the caller does not profile twice. Sets stats->hosts and stats->predicted_hier_s.
 */
zen_status zen__sparse_hier_decide(zen_sparse_ctx *ctx, int *use, zen_sparse_scheme *flat);

/* Run the hierarchical form (after zen__sparse_hier_decide said yes on every rank). */
zen_status zen__sparse_run_hier_host(zen_sparse_ctx *ctx);

/* ---- cost model of the hierarchical form (hier_host_cost.c), pure functions ---- */

typedef struct zen_hier_shape {
    int n;         /* ranks */
    int hosts;     /* hosts (>= 1) */
    int max_local; /* ranks on the largest host */
    int shards;    /* row shards = ranks on the smallest host */
    uint64_t rows;
    uint32_t width;
    int sparse_out; /* 1: the caller wants a sparse result */
} zen_hier_shape;

/* The intra-host network: ZEN_NET_INTRA_GBPS / ZEN_NET_INTRA_LAT_US, else 10x the inter-host
 * bandwidth and a fifth of its latency. */
void zen__net_model_intra(const zen_net_model *inter, zen_net_model *intra);

/* gamma^k of profile p (made for p_n ranks): the measured gamma^(2^i) where k is a power of two,
 * else geometric interpolation between gamma^1 = 1 and gamma^(p_n) = p->gamma_n. */
double zen__hier_gamma_at(const zen_sparse_profile *p, int p_n, double k);

/*
 * Predicted seconds of the hierarchical form for the flat profile p over shape->n ranks, with
 * inter_scheme across hosts (AUTO: the cheapest there). *inter_used (may be NULL) gets the scheme
 * the prediction took across hosts.
 */
double zen__sparse_predict_hier(const zen_hier_shape *shape, const zen_sparse_profile *p,
                                const zen_net_model *inter, const zen_net_model *intra,
                                long block_elems, zen_sparse_scheme inter_scheme,
                                zen_sparse_scheme *inter_used);

/* AUTO's rule: hierarchical only with several hosts, several ranks on some host, and a strictly
 * smaller prediction than the flat one. */
int zen__sparse_hier_pays(const zen_hier_shape *shape, double flat_s, double hier_s);

#endif
