/*
 * Detection of whole-step slowness (a rank throttled from outside: cgroup CPU quota, SIGSTOP duty
 * cycling, a noisy neighbour), next to the GEMM timing of gemm.c.
 *
 * A throttled process is slow at everything it does -- its GEMMs, the rest of its compute, and
 * its own part of every collective -- so the GEMM timer sees a fraction of the slowdown, and so
 * does its local busy time (wall minus time inside collectives: a stop that lands inside a
 * collective stalls the others there too). What the others lose is the time they wait at the
 * entry of each collective for the last rank to arrive: the communicator's arrival stamps give it
 * (the *blame* of the rank, per step, identical on all ranks after an all-gather). A rank's
 * intrinsic gap is its blame plus the GEMM time its current plan sheds (so that resizing it does
 * not make it look fast, the same normalisation the GEMM timer uses). zen__tp_detect_decide, a pure
 * function of all-gathered numbers, finds the ranks whose gap stands out in most recent rounds
 * and raises the time the controller sees for them so that the GEMM shrink it chooses covers the
 * gap.
 */
#ifndef ZEN_TP_DETECT_H
#define ZEN_TP_DETECT_H

#include <stdint.h>

#include <zen/tp.h>

#define TP_DETECT_STEPS      64 /* per-step samples kept for a round's medians */
#define TP_DETECT_MAX_WINDOW 16 /* rounds of blame history */
#define TP_DETECT_MIN_GAP_MS 1.0

/* Per-step measurements (medians over a period), in the order they are all-gathered. */
enum {
    TP_DET_STEP, /* busy - all GEMM time + full-K own GEMM time (local view, diagnostic) */
    TP_DET_BUSY, /* wall between step boundaries minus tp waits */
    TP_DET_GEMM, /* all GEMM time (own and helper work, incl. emulated slowness) */
    TP_DET_WAIT, /* time in tp collectives and migration waits */
    TP_DET_CPU,  /* CPU time of the rank's thread (diagnostic: busy - cpu = off-CPU time) */
    TP_DET_SHED, /* own GEMM time shed by the plan: full-K time - time actually spent */
    TP_DET_FIELDS
};

typedef struct tp_detect {
    int enabled;     /* ZEN_TP_DETECT_MARGIN > 0 */
    double margin;   /* blamed when gap - median gap > margin x median busy (and > 1 ms) */
    int window;      /* flagged when blamed in a majority of the last `window` rounds */
    int started;     /* a step boundary was marked */
    int64_t mark_ns; /* monotonic time of the last step boundary */
    int64_t cpu_ns;  /* thread CPU time at that boundary */
    uint64_t seq;    /* tp collectives completed at that boundary (arrival stamp seq) */
    int nsamples;    /* samples since the last round (the newest TP_DETECT_STEPS are kept) */
    double sample[TP_DET_FIELDS][TP_DETECT_STEPS];
    double blame_ms[64];   /* per rank: the others' wait for it per step, last round (group.c) */
    double gap_ema_ms[64]; /* per rank: EMA of blame + shed, the gap the resize must close */
    uint32_t blamed[64];   /* per rank: bit i set = blamed i rounds ago */
    uint64_t mask;         /* ranks found slow from outside in the last round */
    /* tests: report this wall step time (all busy) and this shed time, and ignore the stamps
     * (every rank of the group must set it) */
    double step_override_ms;
    double shed_override_ms;
} tp_detect;

/* Inputs of one detection round (identical on all ranks: all-gathered). */
typedef struct tp_detect_in {
    int n;
    const double *gemm_ms;    /* [n] full-K GEMM time per step, as the controller would see it */
    const double *gap_ms;     /* [n] this round's gap: blame + shed per step (flags) */
    const double *gap_avg_ms; /* [n] the gap the resize must close: min(this round's, EMA) */
    double step_ms;           /* the median rank's busy time per step (the threshold's unit) */
    double margin;            /* relative noise threshold */
    uint64_t prev_mask;       /* flagged in the previous round: blamed down to margin / 2 */
    double min_gap_ms;        /* absolute one: below it a gap is timer and wake-up noise */
    int window;
} tp_detect_in;

/*
 * Push this round's blame into hist[n] and return the mask of ranks blamed in a majority of the
 * last `window` rounds. t_out[n] gets the times to hand to the controller: gemm_ms, except for a
 * flagged rank s, which gets the GEMM time for which the controller's resize fraction
 * 1 - t* / t_s equals the shrink that closes its gap: (gap_avg_s - gap_ref) / gemm_s, gap_ref
 * and t* being the largest gap and GEMM time of the unflagged ranks.
 */
uint64_t zen__tp_detect_decide(const tp_detect_in *in, uint32_t *hist, double *t_out);

/* The GEMM time a flagged rank must report so that resizing it removes `excess` ms of its step:
 * gemm_ref / (1 - excess / gemm_s), the shrink capped at 0.95, never below gemm_s. */
double zen__tp_detect_effective_ms(double gemm_s, double excess, double gemm_ref);

/* Read ZEN_TP_DETECT_MARGIN / ZEN_TP_DETECT_WINDOW (margin 0 turns detection off). */
void zen__tp_detect_init(tp_detect *d);
/* At a step boundary, before the step counters are reset: record the step's sample. */
void zen__tp_detect_sample(zen_tp_group *g, double gemm_full_ms);
/* After the boundary's own work (the decision round): the next step starts now. */
void zen__tp_detect_mark(zen_tp_group *g);
/* This rank's TP_DET_FIELDS medians over the period's steps (0 when none); starts a new period. */
void zen__tp_detect_fill(zen_tp_group *g, double *out);
/* With the gathered vectors (rank r's fields at all[stride r + off]): flag ranks slow from
 * outside and raise their entries of t (the controller's input, GEMM times on entry). */
void zen__tp_detect_round(zen_tp_group *g, const double *all, int stride, int off, double *t);

#endif
