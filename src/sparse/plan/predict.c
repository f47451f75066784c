/*
 * The cost of every registered scheme for one call's shape and profile: the planner's view of
 * the registry (each row's cost function, scheme/<name>.c, summed by model/cost.c).
 */
#include "sparse/plan/predict.h"

#include <string.h>

#include "sparse/model/cost.h"
#include "sparse/scheme/registry.h"

void zen__sparse_predict_split(int n, uint64_t rows, uint32_t width, const zen_sparse_profile *p,
                               const zen_net_model *net, long block_elems,
                               double out[ZEN_SPARSE_SCHEME_COUNT],
                               double cpu_s[ZEN_SPARSE_SCHEME_COUNT])
{
    memset(out, 0, ZEN_SPARSE_SCHEME_COUNT * sizeof *out);
    if (cpu_s)
        memset(cpu_s, 0, ZEN_SPARSE_SCHEME_COUNT * sizeof *cpu_s);
    zen_cost_terms t;
    if (!zen__cost_terms_init(&t, n, rows, width, p, net, block_elems))
        return; /* one rank: nothing moves */
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
        const zen_sparse_scheme_desc *row = zen__sparse_scheme_row((zen_sparse_scheme)s);
        if (!row)
            continue;
        zen_cost_parts part = row->cost(&t);
        out[s] = zen__cost_seconds(&part, &t, cpu_s ? &cpu_s[s] : NULL);
    }
    zen_sparse_scheme best = zen__sparse_cheapest(out);
    out[ZEN_SPARSE_AUTO] = out[best];
    if (cpu_s)
        cpu_s[ZEN_SPARSE_AUTO] = cpu_s[best];
}

void zen__sparse_predict(int n, uint64_t rows, uint32_t width, const zen_sparse_profile *p,
                         const zen_net_model *net, long block_elems,
                         double out[ZEN_SPARSE_SCHEME_COUNT])
{
    zen__sparse_predict_split(n, rows, width, p, net, block_elems, out, NULL);
}

zen_sparse_scheme zen__sparse_cheapest(const double pred[ZEN_SPARSE_SCHEME_COUNT])
{
    /* strictly smaller wins; among equals the lower prefer */
    zen_sparse_scheme best = ZEN_SPARSE_AUTO;
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
        const zen_sparse_scheme_desc *row = zen__sparse_scheme_row((zen_sparse_scheme)s);
        if (!row)
            continue;
        if (best == ZEN_SPARSE_AUTO || pred[s] < pred[best] ||
            (pred[s] == pred[best] && row->prefer < zen__sparse_schemes[best].prefer))
            best = (zen_sparse_scheme)s;
    }
    return best;
}
