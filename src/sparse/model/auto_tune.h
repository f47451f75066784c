/*
 * Online correction of AUTO's choice for one recurring tensor (a key): the cost model's
 * prediction of each scheme is multiplied by a correction factor learnt from what ran, and now
 * and then the runner-up is tried, so a wrong model constant cannot lock AUTO onto a slow scheme.
 *
 *   correct   after a call of scheme s that took t seconds (the maximum over ranks, which every
 *             rank learns on the next call, see profile.c), corr[s] <- t / predicted[s] on the
 *             first measurement, else an EMA with weight ZEN_SPARSE_TUNE_ALPHA.
 *   choose    the scheme with the smallest predicted[s] * corr[s] (ties as zen__sparse_cheapest).
 *   explore   on every ZEN_SPARSE_EXPLORE_PERIOD-th call, run the runner-up instead, if the
 *             expected extra time (its corrected prediction minus the best's) keeps the measured
 *             extra time of all explorations so far within ZEN_SPARSE_EXPLORE_BUDGET of the
 *             measured time of all calls. The extra of an exploration is counted as measured
 *             (its time minus the best's corrected prediction then), so a runner-up that was far
 *             slower than predicted uses up the budget and is not retried until it is earned.
 *
 * Pure state, no communication: every rank feeds the same agreed times and predictions, so every
 * rank makes the same choice (the caller guarantees the inputs are identical).
 */
#ifndef ZEN_SPARSE_AUTO_TUNE_H
#define ZEN_SPARSE_AUTO_TUNE_H

#include <stdint.h>

#include <zen/sparse.h>

typedef struct zen_auto_tune {
    double corr[ZEN_SPARSE_SCHEME_COUNT]; /* measured / predicted, 1 until measured */
    uint32_t measured[ZEN_SPARSE_SCHEME_COUNT];
    uint64_t calls;
    double total_s;         /* measured time of every observed call */
    double explore_extra_s; /* measured time explorations cost beyond the best's prediction */
    int last;               /* scheme of the call not yet observed; -1: none */
    double last_pred;       /* its raw prediction */
    double last_base;       /* > 0: it was an exploration; the best's corrected prediction then */
} zen_auto_tune;

/* Tunables as the decision reads them (tests set them directly). */
typedef struct zen_auto_tune_params {
    double alpha;  /* EMA weight of a new measurement, (0, 1] */
    long period;   /* explore on every period-th call; <= 0: never */
    double budget; /* fraction of the measured time explorations may add */
} zen_auto_tune_params;

/* ZEN_SPARSE_TUNE_ALPHA, ZEN_SPARSE_EXPLORE_PERIOD, ZEN_SPARSE_EXPLORE_BUDGET. */
void zen__auto_tune_params_default(zen_auto_tune_params *p);

void zen__auto_tune_init(zen_auto_tune *t);

/* Fold the agreed time of the last chosen call (no-op when none is pending). */
void zen__auto_tune_observe(zen_auto_tune *t, const zen_auto_tune_params *p, double seconds);

/* Forget the pending call (the ranks did not agree on it). */
void zen__auto_tune_drop(zen_auto_tune *t);

/*
 * Choose from the model's raw predictions (pred[ZEN_SPARSE_AUTO] is ignored); *explored = 1 when
 * the choice is an exploration. corrected (may be NULL) gets pred[s] * corr[s].
 */
zen_sparse_scheme zen__auto_tune_choose(zen_auto_tune *t, const zen_auto_tune_params *p,
                                        const double pred[ZEN_SPARSE_SCHEME_COUNT], int *explored,
                                        double corrected[ZEN_SPARSE_SCHEME_COUNT]);

/* Multiply predictions by ZEN_SPARSE_MODEL_BIAS, "scheme=factor[,scheme=factor...]": a
 * deliberately wrong model, to test and demonstrate the correction. Bad entries are skipped. */
void zen__auto_tune_bias(double pred[ZEN_SPARSE_SCHEME_COUNT]);

#endif
