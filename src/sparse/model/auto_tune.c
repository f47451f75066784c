/* Online correction and bounded exploration of AUTO (see auto_tune.h). */
#include "sparse/model/auto_tune.h"

#include <stdlib.h>
#include <string.h>

#include "common/tunables.h"
#include "sparse/model/cost.h"

void zen__auto_tune_params_default(zen_auto_tune_params *p)
{
    p->alpha = zen__param_double("SPARSE_TUNE_ALPHA");
    if (!(p->alpha > 0) || p->alpha > 1)
        p->alpha = 0.5;
    p->period = zen__param_long("SPARSE_EXPLORE_PERIOD");
    p->budget = zen__param_double("SPARSE_EXPLORE_BUDGET");
    if (!(p->budget >= 0))
        p->budget = 0;
}

void zen__auto_tune_init(zen_auto_tune *t)
{
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
        t->corr[s] = 1.0;
        t->measured[s] = 0;
    }
    t->calls = 0;
    t->total_s = 0;
    t->explore_extra_s = 0;
    t->last = -1;
    t->last_pred = 0;
    t->last_base = 0;
}

void zen__auto_tune_observe(zen_auto_tune *t, const zen_auto_tune_params *p, double seconds)
{
    int s = t->last;
    if (s < 0 || s >= ZEN_SPARSE_SCHEME_COUNT || !(seconds >= 0))
        return;
    if (t->last_pred > 0) {
        double ratio = seconds / t->last_pred;
        t->corr[s] = t->measured[s] ? (1 - p->alpha) * t->corr[s] + p->alpha * ratio : ratio;
        t->measured[s]++;
    }
    t->total_s += seconds;
    if (t->last_base > 0 && seconds > t->last_base)
        t->explore_extra_s += seconds - t->last_base;
    zen__auto_tune_drop(t);
}

void zen__auto_tune_drop(zen_auto_tune *t)
{
    t->last = -1;
    t->last_pred = 0;
    t->last_base = 0;
}

zen_sparse_scheme zen__auto_tune_choose(zen_auto_tune *t, const zen_auto_tune_params *p,
                                        const double pred[ZEN_SPARSE_SCHEME_COUNT], int *explored,
                                        double corrected[ZEN_SPARSE_SCHEME_COUNT])
{
    double c[ZEN_SPARSE_SCHEME_COUNT];
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        c[s] = pred[s] * t->corr[s];
    c[ZEN_SPARSE_AUTO] = 0;
    zen_sparse_scheme best = zen__sparse_cheapest(c), pick = best;
    /* the runner-up: the cheapest once the best is priced out */
    double saved = c[best];
    c[best] = 1e300;
    zen_sparse_scheme runner = zen__sparse_cheapest(c);
    c[best] = saved;
    *explored = 0;
    t->last_base = 0;
    if (p->period > 0 && t->calls % (uint64_t)p->period == (uint64_t)p->period - 1 &&
        runner != best && c[runner] < 1e300) {
        double extra = c[runner] - c[best];
        if (t->explore_extra_s + extra <= p->budget * (t->total_s + c[runner])) {
            pick = runner;
            *explored = 1;
            t->last_base = c[best];
        }
    }
    t->calls++;
    t->last = (int)pick;
    t->last_pred = pred[pick];
    if (corrected)
        for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++)
            corrected[s] = c[s];
    return pick;
}

void zen__auto_tune_bias(double pred[ZEN_SPARSE_SCHEME_COUNT])
{
    const char *spec = zen__param_str("SPARSE_MODEL_BIAS");
    while (spec && *spec) {
        const char *eq = strchr(spec, '='), *end = strchr(spec, ',');
        if (!end)
            end = spec + strlen(spec);
        char name[32];
        zen_sparse_scheme s;
        if (eq && eq < end && (size_t)(eq - spec) < sizeof name) {
            memcpy(name, spec, (size_t)(eq - spec));
            name[eq - spec] = '\0';
            double f = strtod(eq + 1, NULL);
            if (zen_sparse_scheme_parse(name, &s) == ZEN_OK && f > 0)
                pred[s] *= f;
        }
        spec = *end ? end + 1 : end;
    }
}
