/*
 * The planner's predictions: every registered scheme's cost for one call's shape and profile
 * (scheme/registry.h rows, summed with model/cost.c's shared terms). Above model/ and scheme/,
 * so that the pure cost model never calls up into the registry.
 */
#ifndef ZEN_SPARSE_PLAN_PREDICT_H
#define ZEN_SPARSE_PLAN_PREDICT_H

#include "sparse/model/cost.h"

/*
 * Every registered scheme at once (walks the registry). Predicted seconds of every scheme (out[ZEN_SPARSE_AUTO] = the
 * minimum) for n ranks, a rows x width tensor, profile p, network net and block size block_elems
 * (<= 0: 256).
 */
void zen__sparse_predict(int n, uint64_t rows, uint32_t width, const zen_sparse_profile *p,
                         const zen_net_model *net, long block_elems,
                         double out[ZEN_SPARSE_SCHEME_COUNT]);

/* Same, and cpu_s[s] = the compute part of out[s] (kernels / share plus the transport CPU beyond
 * the wire time), so out[s] - cpu_s[s] is the network-only prediction. cpu_s may be NULL. */
void zen__sparse_predict_split(int n, uint64_t rows, uint32_t width, const zen_sparse_profile *p,
                               const zen_net_model *net, long block_elems,
                               double out[ZEN_SPARSE_SCHEME_COUNT],
                               double cpu_s[ZEN_SPARSE_SCHEME_COUNT]);

/* The scheme with the smallest prediction (ties: the registry's preference order, BALANCED,
 * HIERARCHICAL, DENSE, ALLGATHER, PS, BLOCK). */
zen_sparse_scheme zen__sparse_cheapest(const double pred[ZEN_SPARSE_SCHEME_COUNT]);

#endif
