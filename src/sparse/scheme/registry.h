/*
 * The sparse scheme registry: one row per scheme, the only list of schemes in the module.
 *
 * A row names the scheme (its zen_sparse_scheme value and its name in options, the CLI and the
 * statistics), its preference among equal predictions, and through the name two functions the
 * scheme's own file defines:
 *   zen_status     zen__sparse_run_<name>(zen_sparse_ctx *ctx)         the algorithm
 *   zen_cost_parts zen__sparse_cost_<name>(const zen_cost_terms *t)    its cost (model/cost.h)
 * Both are declared from the row below and referenced by the table (registry.c), so a scheme
 * whose file lacks its cost function does not link: AUTO can never miss a scheme's cost.
 *
 * Adding a scheme: its value in zen_sparse_scheme (include/zen/sparse.h), its file
 * scheme/<name>.c with the two functions, one row here, its test (docs/architecture.md).
 */
#ifndef ZEN_SPARSE_REGISTRY_H
#define ZEN_SPARSE_REGISTRY_H

#include "sparse/model/cost.h"
#include "sparse/sparse_internal.h"

/* X(ENUM suffix, name, prefer): prefer orders equal predictions, 0 first (BALANCED, the paper's
 * scheme, wins a tie; then the schemes whose cost depends least on skew). */
#define ZEN_SPARSE_SCHEMES(X)        \
    X(BALANCED, balanced, 0)         \
    X(HIERARCHICAL, hierarchical, 1) \
    X(ALLGATHER, allgather, 3)       \
    X(BLOCK, block, 5)               \
    X(PS, ps, 4)                     \
    X(DENSE, dense, 2)

#define ZEN_SPARSE_SCHEME_DECLARE(ID, name, prefer)         \
    zen_status zen__sparse_run_##name(zen_sparse_ctx *ctx); \
    zen_cost_parts zen__sparse_cost_##name(const zen_cost_terms *t);
ZEN_SPARSE_SCHEMES(ZEN_SPARSE_SCHEME_DECLARE)

typedef struct zen_sparse_scheme_desc {
    const char *name;
    zen_sparse_scheme id;
    zen_sparse_scheme_fn run; /* NULL for AUTO only */
    zen_sparse_cost_fn cost;  /* NULL for AUTO only */
    int prefer;               /* order among equal predictions, 0 first; -1 for AUTO */
} zen_sparse_scheme_desc;

/* Indexed by zen_sparse_scheme, ZEN_SPARSE_SCHEME_COUNT rows; row ZEN_SPARSE_AUTO names the
 * chooser and has neither run nor cost. */
extern const zen_sparse_scheme_desc zen__sparse_schemes[];

/* The row of s, NULL when s is out of range or AUTO. */
const zen_sparse_scheme_desc *zen__sparse_scheme_row(zen_sparse_scheme s);

#endif
