/*
 * AUTO's decision for one recurring tensor (a key) converges on measurement, as autotuners do
 * (Open MPI's tuned/ADAPT decision tables, NCCL's tuner plugins): the cost model is the prior that
 * ranks and prunes the schemes, the measured times decide.
 *
 *   estimate  est[s] = pred[s] * corr[s] for a scheme measured at least twice, where corr[s] is
 *             the median of its last ZEN_SPARSE_TUNE_WINDOW measured / predicted ratios after
 *             the first (a cold call: allocations, first touches). A median because a shared
 *             host's noise comes in bursts: one lucky or unlucky call must not decide. For a
 *             scheme measured once or not at all pred[s] * g, g the smallest corr measured so
 *             far (1 before any): the machine-wide scale the model missed, taken optimistically
 *             (a cold call, up to 4x the scheme's time on the grid, would otherwise drop the
 *             scheme before a warm call is seen).
 *   warm-up   the candidates are the ZEN_SPARSE_TUNE_TOP schemes the raw model ranks first plus
 *             every scheme whose estimate is within ZEN_SPARSE_TUNE_PRUNE times the best estimate
 *             (the model prunes the rest). Each candidate is run ZEN_SPARSE_TUNE_WARM times,
 *             back to back (then the next: fewest measurements first, then the highest
 *             estimate, so the model's favourite is measured last, when the process is warmest),
 *             unless its estimate from two warm calls past the cold one is already
 *             more than PRUNE times the best measured one. The warm-up is the key's first calls
 *             only: once a scheme runs, a scheme that becomes a candidate later is measured by the
 *             budgeted rechecks. So at most WARM x 6 calls of a key's life are warm-up tries,
 *             each expected within PRUNE x the best.
 *   switch    a call right after another scheme's call is timed (it counts in the budget) but
 *             not compared: it is a scheme's first call (then the cold one) or enters no window
 *             and no pair. Part of a call's work shows in the next call's time (on 4 inproc
 *             ranks replaying the 4-rank trace, ALLGATHER took 0.56 of its prediction after
 *             itself and 0.92 after HIERARCHICAL, HIERARCHICAL 0.98 after itself and 0.64 after
 *             ALLGATHER; mostly the allocator's churn, since removed in src/common/alloc.c,
 *             but a call can always leave work behind), so a scheme is measured after itself,
 *             as it would run: the warm-up runs each candidate's calls back to back, a recheck
 *             is two calls of the rival, and the running scheme's call that a pair compares with
 *             is one after itself.
 *   exploit   then the measured argmin of est becomes the running scheme, and it stays until paired
 *             evidence says otherwise: every compared call of a rival is paired with the running
 *             scheme's last compared call, a few calls before (its ratio over that call's, both
 *             under nearly the same load), and the running scheme yields to a rival whose
 *             median over a full window of WINDOW pairs (at least 3) is below
 *             1 - ZEN_SPARSE_TUNE_SWITCH. Estimates alone are
 *             not compared: the running scheme's follows every call, its rivals' were taken at
 *             other times, so a burst of load on the host raised the first alone, and AUTO flipped
 *             to a scheme slower in steady state (on 8 inproc ranks, 10 of 60 calls on BALANCED at
 *             1.19x HIERARCHICAL's time) and back three calls later. When the runner-up is within
 *             1.3x of the first running scheme, it is challenged at once; so is the scheme AUTO
 *             has just left, which wins back quickly when the switch was noise.
 *   recheck   ZEN_SPARSE_EXPLORE_PERIOD calls after the running scheme last changed, and then at
 *             gaps that double after each recheck up to ZEN_SPARSE_EXPLORE_BACKOFF periods, a rival
 *             runs instead: the challenger while there is one; else the rival with the lowest
 *             estimate if that is below (1 - SWITCH) x the running scheme's; else the least
 *             recently measured survivor (est, or the lowest est it has had past its warm calls,
 *             within ZEN_SPARSE_TUNE_DROP x the running scheme's, measured or not: AUTO leaves a
 *             scheme when its calls look slow, so its last window is biased high) or a dropped
 *             scheme whose estimate rests on fewer than WINDOW measurements (once per longest
 *             gap: a drop on warm-up evidence alone is not final). Only if the measured extra time
 *             of the rechecks so far plus this one's expected extra stays within
 *             ZEN_SPARSE_EXPLORE_BUDGET of the measured time of all calls; the extra of a try is
 *             its time minus the best's estimate at the time, so a recheck much slower than
 *             expected uses the budget up. A recheck faster than (1 - SWITCH) x the running
 *             scheme's last compared call makes its scheme the challenger, run two calls after
 *             every two of the running scheme until it has a full window of fresh pairs and the
 *             exploit rule decides, or until its first 3 fresh pairs have a median time ratio of
 *             1 or more (lost early: one lucky call).
 *             Every recheck that confirms the choice lengthens the gap, so a settled key spends
 *             less on exploration; only a new choice restores the period. The warm-up does not
 *             draw on the budget (it is a one-off cost, bounded by WARM x 6 calls): a slow cold try
 *             there must not stop the rechecks that correct a choice made on few measurements.
 *
 * Pure state, no communication: every rank feeds the same agreed times (the maximum over ranks)
 * and predictions, so every rank makes the same choice (the caller guarantees identical inputs).
 */
#ifndef ZEN_SPARSE_AUTO_TUNE_H
#define ZEN_SPARSE_AUTO_TUNE_H

#include <stdint.h>

#include <zen/sparse.h>

/* What a call was, for accounting. */
typedef enum zen_auto_tune_kind {
    ZEN_TUNE_EXPLOIT = 0, /* the measured argmin (or the model's, before any measurement) */
    ZEN_TUNE_WARM = 1,    /* a warm-up try of a candidate */
    ZEN_TUNE_RECHECK = 2  /* a budgeted re-measure of a survivor */
} zen_auto_tune_kind;

#define ZEN_TUNE_WINDOW_MAX 8 /* largest ZEN_SPARSE_TUNE_WINDOW */

typedef struct zen_auto_tune {
    double corr[ZEN_SPARSE_SCHEME_COUNT]; /* the estimate's ratio, valid when measured[s] > 0 */
    double best_corr[ZEN_SPARSE_SCHEME_COUNT]; /* lowest corr since measured >= 3; 0: none yet */
    double win[ZEN_SPARSE_SCHEME_COUNT][ZEN_TUNE_WINDOW_MAX]; /* recent measured / predicted */
    uint32_t measured[ZEN_SPARSE_SCHEME_COUNT];
    uint64_t seen[ZEN_SPARSE_SCHEME_COUNT]; /* call number of the last measurement */
    uint64_t calls;
    double total_s;       /* measured time of every observed call */
    double extra_s;       /* measured time of rechecks beyond the best's estimate */
    uint32_t warm_tries;  /* warm-up calls so far */
    uint32_t rechecks;    /* recheck calls so far */
    int settled;          /* the scheme the exploiting calls run; -1: none yet */
    double settled_ratio; /* its last exploiting call's measured / predicted (0: none yet) */
    double settled_s;     /* and that call's seconds */
    double pair[ZEN_SPARSE_SCHEME_COUNT][ZEN_TUNE_WINDOW_MAX]; /* a rival's ratio over it */
    uint32_t npair[ZEN_SPARSE_SCHEME_COUNT];                   /* pairs recorded */
    int challenger;      /* a rival whose last recheck beat the running scheme; -1: none */
    uint32_t fresh;      /* the challenger's pairs since its challenge began */
    uint64_t gap;        /* calls from one recheck to the next (period, doubled up to backoff) */
    uint64_t next_check; /* the call number of the next recheck */
    int prev;            /* scheme of the last observed call; -1: none */
    int again;           /* a recheck's second call is next: its scheme; -1: none */
    int last;            /* scheme of the call not yet observed; -1: none */
    int last_kind;       /* its zen_auto_tune_kind */
    double last_pred;    /* its raw prediction */
    double last_base;    /* the best measured estimate when it was chosen (0: none) */
} zen_auto_tune;

/* Tunables as the decision reads them (tests set them directly). */
typedef struct zen_auto_tune_params {
    long window;   /* measurements whose median is a scheme's estimate, 1..ZEN_TUNE_WINDOW_MAX */
    long period;   /* first recheck period calls after a new choice; <= 0: never */
    double budget; /* fraction of the measured time warm-up and rechecks may add */
    long warm;     /* measurements of each candidate before exploiting; 0: trust the model */
    long top;      /* the model's first `top` schemes are always candidates */
    double prune;  /* candidates: estimate within prune x the best estimate */
    double drop;   /* a measured scheme beyond drop x the best measured is not tried again */
    long backoff;  /* the gap between rechecks grows to at most backoff x period (<= 1: fixed) */
    double margin; /* the running scheme yields to a rival at most (1 - margin) x its time */
} zen_auto_tune_params;

/* ZEN_SPARSE_TUNE_WINDOW, _EXPLORE_PERIOD, _EXPLORE_BUDGET, _TUNE_WARM, _TUNE_TOP, _TUNE_PRUNE,
 * _TUNE_DROP, _EXPLORE_BACKOFF, _TUNE_SWITCH. */
void zen__auto_tune_params_default(zen_auto_tune_params *p);

void zen__auto_tune_init(zen_auto_tune *t);

/*
 * The time of a call that the tuner is told, from every rank's own time of it (0 from a rank
 * that did not run the scheme): the median over the ranks that ran it, 0 when none did. Sorts v
 * in place. The slowest rank's time is what the call costs the job, but the ranks of a collective
 * finish within a few of its messages of each other, so each rank's time carries the call's cost
 * and the slowest adds the one rank the host held up most. Replayed on 216 recorded grid cells
 * that AUTO had not been tuned on (bench/tune_replay --signal; docs/benchmarks.md, "Replaying the
 * tuner on recorded calls"), the tuner told the median chose better, scored on the slowest rank's
 * times: within 10% of the fastest scheme by p50 in 88% of the cells against 83%. What it gives
 * up: a scheme that always leaves one rank behind the others costs the job that rank's time and
 * moves the median little. Over 369 recorded cells, the scheme with the lowest median over all 40
 * timed calls was within 10% of the fastest by the slowest rank's times in 366, and 1.11-1.23x in
 * 3 (ALLGATHER at 16 ranks, where ranks wait on one another least).
 */
double zen__auto_tune_call_time(double *v, size_t n);

/* Fold the agreed time of the last chosen call (no-op when none is pending; a time <= 0, a call
 * that ran something else, only forgets it). */
void zen__auto_tune_observe(zen_auto_tune *t, const zen_auto_tune_params *p, double seconds);

/* Forget the pending call's time (the ranks did not agree on it); it ran, so the next call comes
 * after it. */
void zen__auto_tune_drop(zen_auto_tune *t);

/*
 * Choose from the model's raw predictions (pred[ZEN_SPARSE_AUTO] is ignored); *kind (may be NULL)
 * gets what the call is. est (may be NULL) gets the estimates.
 */
zen_sparse_scheme zen__auto_tune_choose(zen_auto_tune *t, const zen_auto_tune_params *p,
                                        const double pred[ZEN_SPARSE_SCHEME_COUNT],
                                        zen_auto_tune_kind *kind,
                                        double est[ZEN_SPARSE_SCHEME_COUNT]);

/*
 * The key's machine-wide scale: the median, over the schemes measured at least twice (so past
 * their cold call), of measured / predicted; 0 when fewer than two are. One number for every
 * scheme: what the configured constants miss on this machine now (a shared host's steal time,
 * the memory bandwidth all cores share), learned from the key's own calls. The model that
 * stats.predicted_s reports is the prediction times this scale; the per-scheme differences that
 * remain are the model's own error.
 */
double zen__auto_tune_scale(const zen_auto_tune *t);

/* Multiply predictions by ZEN_SPARSE_MODEL_BIAS, "scheme=factor[,scheme=factor...]": a
 * deliberately wrong model, to test and demonstrate the correction. Bad entries are skipped. */
void zen__auto_tune_bias(double pred[ZEN_SPARSE_SCHEME_COUNT]);

#endif
