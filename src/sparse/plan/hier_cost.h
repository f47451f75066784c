/*
 * Cost model of the hierarchical form across hosts (hier_cost.c; the form itself is
 * scheme/hier_host.c). Pure functions; the planner (plan.c) compares them with the flat prediction.
 */
#ifndef ZEN_SPARSE_HIER_COST_H
#define ZEN_SPARSE_HIER_COST_H

#include <stdint.h>

#include "sparse/model/cost.h"

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
