/*
 * Whole-step slowness detection (see detect.h for the why).
 *
 * Per step (zen__tp_detect_sample, at the step boundary), local clocks only:
 *   wait  = max(tp wait counters, Σ (leave - arrive) over the step's tp collective stamps)
 *   busy  = wall since the last boundary - wait
 *   shed  = full-K own GEMM time - own GEMM time actually spent (what the plan removed)
 * Per round (every `period` steps): the medians of the period's samples are all-gathered with
 * the GEMM times, group.c adds each rank's blame from the all-gathered arrival stamps, and every
 * rank runs zen__tp_detect_decide on the same numbers:
 *   1. gap_r = blame_r + shed_r; blamed this round when gap_r exceeds the lower median of the
 *      gaps by more than margin x the median busy time and by more than 1 ms (noise thresholds:
 *      on a shared host every rank is the last to arrive now and then). The reference is the
 *      median rank's own work, not the step, which the throttled rank itself stretches;
 *   2. flagged: blamed in a majority of the last `window` rounds (scheduling jitter blames a rank
 *      now and then, throttling blames it every round); a flagged rank is blamed down to half
 *      the margin (hysteresis, as the controller's delta / 2);
 *   3. a flagged rank s reports the GEMM time for which the controller's resize fraction
 *      1 - t* / t_s equals (gap_s - gap_ref) / gemm_s: the GEMM time removed then equals the time
 *      the others wait for it beyond the noise level of the unflagged ranks (gap_ref).
 * The amount uses the smaller of the round's gap and its EMA (the controller's alpha); the flags
 * use the round's gap.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/comm_internal.h"
#include "common/log.h"
#include "common/stats.h"
#include "common/tunables.h"
#include "tp/tp_internal.h"

void zen__tp_detect_init(tp_detect *d)
{
    memset(d, 0, sizeof *d);
    double m = zen__param_double("TP_DETECT_MARGIN"); /* 0 .. 100 */
    long w = zen__param_long("TP_DETECT_WINDOW");     /* 1 .. 16 */
    if (w > TP_DETECT_MAX_WINDOW)
        w = TP_DETECT_MAX_WINDOW;
    d->margin = m;
    d->enabled = m > 0;
    d->window = (int)w;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Time this rank spent inside tp collectives since the last boundary, from its arrival stamps
 * (collectives outside the tp layers, e.g. the optimizer's norm allreduce, included). */
static int64_t stamped_wait_ns(const zen_tp_group *g, uint64_t *last_seq)
{
    zen_arrival a[ZEN_ARRIVAL_HISTORY];
    size_t have = 0;
    *last_seq = 0;
    if (zen_comm_arrivals(g->comm, a, ZEN_ARRIVAL_HISTORY, &have) != ZEN_OK || have == 0)
        return 0;
    *last_seq = a[have - 1].seq;
    int64_t sum = 0;
    for (size_t i = 0; i < have; i++)
        if (a[i].seq > g->det.seq && a[i].leave_ns > a[i].arrive_ns)
            sum += a[i].leave_ns - a[i].arrive_ns;
    return sum;
}

void zen__tp_detect_mark(zen_tp_group *g)
{
    tp_detect *d = &g->det;
    uint64_t seq = 0;
    (void)stamped_wait_ns(g, &seq);
    d->seq = seq;
    d->mark_ns = zen_now_ns();
    d->cpu_ns = thread_cpu_ns();
    d->started = 1;
}

void zen__tp_detect_sample(zen_tp_group *g, double gemm_full_ms)
{
    tp_detect *d = &g->det;
    /* no boundary yet, a step without training GEMMs (nothing to normalise), or a test that
     * dictates the GEMM time (the busy time would not follow it) */
    if (!d->started || !g->step_timed || (g->time_override_ms > 0 && !(d->step_override_ms > 0)))
        return;
    uint64_t seq;
    double wall = (double)(zen_now_ns() - d->mark_ns) / 1e6;
    double stamped = (double)stamped_wait_ns(g, &seq) / 1e6;
    double counted = (double)g->step_wait_ns / 1e6;
    double wait = fmin(fmax(stamped, counted), wall);
    double busy = wall - wait;
    double gemm = (double)g->step_compute_ns / 1e6;
    double own = 0;
    for (int i = 0; i < g->nsamples; i++)
        own += g->samples[i].ns / 1e6;
    double shed = g->nsamples < TP_MAX_SAMPLES ? fmax(gemm_full_ms - own, 0.0) : 0.0;
    double step = fmax(busy - gemm, 0.0) + gemm_full_ms;
    if (d->step_override_ms > 0) {
        busy = step = d->step_override_ms;
        wait = 0;
        shed = d->shed_override_ms;
    }
    int i = d->nsamples % TP_DETECT_STEPS;
    d->sample[TP_DET_STEP][i] = step;
    d->sample[TP_DET_BUSY][i] = busy;
    d->sample[TP_DET_GEMM][i] = gemm;
    d->sample[TP_DET_WAIT][i] = wait;
    d->sample[TP_DET_SHED][i] = shed;
    d->sample[TP_DET_CPU][i] = (double)(thread_cpu_ns() - d->cpu_ns) / 1e6;
    d->nsamples++;
}

/* Lower median: for two ranks the faster one, so a slow one is measured against the other. */
static double lower_median(const double *v, int n)
{
    double s[64];
    memcpy(s, v, (size_t)n * sizeof *s);
    return zen__lower_median_inplace(s, (size_t)n);
}

void zen__tp_detect_fill(zen_tp_group *g, double *out)
{
    tp_detect *d = &g->det;
    int n = d->nsamples < TP_DETECT_STEPS ? d->nsamples : TP_DETECT_STEPS;
    for (int f = 0; f < TP_DET_FIELDS; f++) {
        out[f] = 0;
        if (n > 0) {
            double s[TP_DETECT_STEPS];
            memcpy(s, d->sample[f], (size_t)n * sizeof *s);
            out[f] = zen__median_inplace(s, (size_t)n);
        }
    }
    d->nsamples = 0;
}

double zen__tp_detect_effective_ms(double gemm_s, double excess, double gemm_ref)
{
    if (!(excess > 0) || !(gemm_ref > 0))
        return gemm_s;
    double shrink = gemm_s > 0 ? excess / gemm_s : 1.0;
    if (shrink > 0.95)
        shrink = 0.95; /* the controller caps the prune at rho_max anyway */
    double t = gemm_ref / (1.0 - shrink);
    return t > gemm_s ? t : gemm_s;
}

static int popcount32(uint32_t x)
{
    int c = 0;
    for (; x; x &= x - 1)
        c++;
    return c;
}

uint64_t zen__tp_detect_decide(const tp_detect_in *in, uint32_t *hist, double *t_out)
{
    int n = in->n;
    int w = in->window < 1                      ? 1
            : in->window > TP_DETECT_MAX_WINDOW ? TP_DETECT_MAX_WINDOW
                                                : in->window;
    uint32_t keep = (1u << w) - 1;
    int measured = n > 1 && in->step_ms > 0;
    for (int r = 0; r < n; r++) {
        t_out[r] = in->gemm_ms[r];
        if (!(in->gemm_ms[r] > 0))
            measured = 0; /* a rank without timings yet: nobody is blamed this round */
    }
    /* on a shared host every rank is waited for a little (the last to arrive varies): measure
     * each gap against the typical one */
    double typical = n > 0 ? lower_median(in->gap_ms, n) : 0;
    uint64_t mask = 0;
    for (int r = 0; r < n; r++) {
        double excess = in->gap_ms[r] - typical;
        /* hysteresis: a flagged rank stays blamed down to half the margin */
        double margin = (in->prev_mask >> r) & 1 ? 0.5 * in->margin : in->margin;
        int blamed = measured && excess > margin * in->step_ms && excess > in->min_gap_ms;
        hist[r] = ((hist[r] << 1) | (uint32_t)blamed) & keep;
        if (measured && popcount32(hist[r]) > w / 2)
            mask |= 1ull << r;
    }
    uint64_t everyone = n >= 64 ? UINT64_MAX : (1ull << n) - 1;
    if (!mask || mask == everyone)
        return mask; /* nobody, or nobody to compare with: the GEMM times stand */
    double gap_ref = 0, gemm_ref = 0;
    for (int r = 0; r < n; r++)
        if (!((mask >> r) & 1)) {
            gap_ref = fmax(gap_ref, in->gap_avg_ms[r]);
            gemm_ref = fmax(gemm_ref, in->gemm_ms[r]);
        }
    for (int r = 0; r < n; r++)
        if ((mask >> r) & 1)
            t_out[r] =
                zen__tp_detect_effective_ms(in->gemm_ms[r], in->gap_avg_ms[r] - gap_ref, gemm_ref);
    return mask;
}

void zen__tp_detect_round(zen_tp_group *g, const double *all, int stride, int off, double *t)
{
    tp_detect *d = &g->det;
    int n = g->size;
    int test = d->step_override_ms > 0;
    double gemm[TP_MAX_RANKS], gap[TP_MAX_RANKS], amount[TP_MAX_RANKS], busy[TP_MAX_RANKS];
    double a = g->opts.ema_alpha;
    for (int r = 0; r < n; r++) {
        const double *v = all + stride * r + off;
        gemm[r] = t[r];
        gap[r] = (test ? 0.0 : d->blame_ms[r]) + v[TP_DET_SHED];
        d->gap_ema_ms[r] = g->decisions ? a * gap[r] + (1 - a) * d->gap_ema_ms[r] : gap[r];
        /* the smaller of this round's gap and its EMA: a transient (a re-layout, a migration
         * round trip) must not inflate the resize, and one quiet round must not undo it */
        amount[r] = fmin(gap[r], d->gap_ema_ms[r]);
        busy[r] = v[TP_DET_BUSY];
    }
    if (d->enabled) {
        tp_detect_in in = { n,
                            gemm,
                            gap,
                            amount,
                            lower_median(busy, n),
                            d->margin,
                            d->mask,
                            TP_DETECT_MIN_GAP_MS,
                            d->window };
        d->mask = zen__tp_detect_decide(&in, d->blamed, t);
    }
    if (g->rank != 0 || !zen__log_enabled(ZEN_LOG_INFO, "tp"))
        return;
    for (int r = 0; r < n; r++) {
        const double *v = all + stride * r + off;
        ZEN_INFO("tp",
                 "detect round %llu rank %d: busy %.2f ms (GEMM %.2f, other %.2f, off-CPU %.2f) "
                 "+ wait %.2f; others wait for it %.2f ms + shed %.2f = gap %.2f (avg %.2f), "
                 "blamed %d of %d rounds%s, t %.3f -> %.3f",
                 (unsigned long long)g->decisions, r, v[TP_DET_BUSY], v[TP_DET_GEMM],
                 v[TP_DET_BUSY] - v[TP_DET_GEMM], fmax(v[TP_DET_BUSY] - v[TP_DET_CPU], 0.0),
                 v[TP_DET_WAIT], test ? 0.0 : d->blame_ms[r], v[TP_DET_SHED], gap[r],
                 d->gap_ema_ms[r], popcount32(d->blamed[r]), d->window,
                 (d->mask >> r) & 1 ? " SLOW FROM OUTSIDE" : "", gemm[r], t[r]);
    }
}
