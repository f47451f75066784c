/* AUTO's decision converging on measurement (see auto_tune.h). */
#include "sparse/plan/auto_tune.h"

#include <stdlib.h>
#include <string.h>

#include "common/stats.h"
#include "common/tunables.h"
#include "sparse/model/cost.h"
#include "sparse/plan/predict.h"

#define NS ZEN_SPARSE_SCHEME_COUNT

/* Paired evidence a rival needs before the running scheme yields to it (paired_choice): a full
 * window, at least MIN_PAIRS. One call's time on the 2-core VM varies by +-30%, so with 3 pairs
 * AUTO left the fastest scheme for one 1.2x slower in 2 of 4 runs of a cell. */
#define MIN_PAIRS 3

static int pairs_needed(const zen_auto_tune_params *p)
{
    return p->window > MIN_PAIRS ? (int)p->window : MIN_PAIRS;
}

/* ZEN_SPARSE_TUNE_WINDOW clamped to what the rings hold. */
static int window_len(long window)
{
    return window < 1 ? 1 : window > ZEN_TUNE_WINDOW_MAX ? ZEN_TUNE_WINDOW_MAX : (int)window;
}

/* The longest gap between rechecks: backoff periods. */
static uint64_t longest_gap(const zen_auto_tune_params *p)
{
    return (uint64_t)p->period * (uint64_t)(p->backoff > 1 ? p->backoff : 1);
}

void zen__auto_tune_params_default(zen_auto_tune_params *p)
{
    p->window = zen__param_long("SPARSE_TUNE_WINDOW");
    p->period = zen__param_long("SPARSE_EXPLORE_PERIOD");
    p->budget = zen__param_double("SPARSE_EXPLORE_BUDGET"); /* each within the table's bounds */
    p->warm = zen__param_long("SPARSE_TUNE_WARM");
    p->top = zen__param_long("SPARSE_TUNE_TOP");
    p->prune = zen__param_double("SPARSE_TUNE_PRUNE");
    p->drop = zen__param_double("SPARSE_TUNE_DROP");
    p->backoff = zen__param_long("SPARSE_EXPLORE_BACKOFF");
    p->margin = zen__param_double("SPARSE_TUNE_SWITCH");
}

void zen__auto_tune_init(zen_auto_tune *t)
{
    memset(t, 0, sizeof *t);
    for (int s = 0; s < NS; s++)
        t->corr[s] = 1.0;
    t->last = -1;
    t->prev = -1;
    t->again = -1;
    t->settled = -1;
    t->challenger = -1;
}

/* A scheme's measured / predicted ratios: its first (cold: allocations, first touches) stands
 * alone until a second arrives and replaces it; from then on the window holds the last w after
 * the first, and corr is their median. */
static void record_ratio(zen_auto_tune *t, int s, long window, double ratio)
{
    int w = window_len(window);
    uint32_t m = ++t->measured[s];
    if (m == 1) {
        t->win[s][0] = ratio;
        t->corr[s] = ratio;
        return;
    }
    t->win[s][(m - 2) % (uint32_t)w] = ratio;
    int k = m - 1 < (uint32_t)w ? (int)(m - 1) : w;
    double v[ZEN_TUNE_WINDOW_MAX];
    memcpy(v, t->win[s], (size_t)k * sizeof *v);
    t->corr[s] = zen__median_inplace(v, (size_t)k);
    if (m >= 3 && (t->best_corr[s] == 0 || t->corr[s] < t->best_corr[s]))
        t->best_corr[s] = t->corr[s];
}

/* A rival's measured / predicted over the running scheme's on the call before: the last w, in a
 * ring (predicted: both normalised by the size of their work, so pairs from calls on different
 * data compare). */
static void record_pair(zen_auto_tune *t, int s, long window, double q)
{
    t->pair[s][t->npair[s] % (uint32_t)window_len(window)] = q;
    t->npair[s]++;
}

/* The median of the challenger's pairs since its challenge began (the last of them when more
 * than the ring holds). */
static double fresh_median(const zen_auto_tune *t, int s, long window)
{
    uint32_t w = (uint32_t)window_len(window), k = t->fresh < w ? t->fresh : w;
    double v[ZEN_TUNE_WINDOW_MAX];
    for (uint32_t i = 0; i < k; i++)
        v[i] = t->pair[s][(t->npair[s] - 1 - i) % w];
    return zen__median_inplace(v, k);
}

static void end_challenge(zen_auto_tune *t)
{
    t->challenger = -1;
    t->fresh = 0;
    t->next_check = t->calls + t->gap;
}

/*
 * A recheck of rival s took rel (its pair ratio q) of the running scheme's last compared call. One
 * that beat the running scheme by more than the margin starts a challenge: s runs again (two calls)
 * after two calls of the running scheme, until it has a full window of fresh pairs (pairs_needed)
 * and paired_choice decides. Its pairs start over with this one, so a change of the ranking shows
 * after one window rather than after old pairs age out. A challenger whose first MIN_PAIRS fresh
 * pairs have a median time ratio of 1 or more has lost early: on this VM's +-30% per-call noise a
 * single recheck of a 1.2x slower rival beat the running scheme often enough that full challenges
 * took a tenth of a run's calls (1, not 1 - margin: three pairs of a rival truly 0.7x had a median
 * of 0.97 on the 4-rank trace). The recheck gap is not reset by a challenge, only by a new running
 * scheme, so a rival that keeps losing is looked at less often.
 */
static void challenge_step(zen_auto_tune *t, const zen_auto_tune_params *p, int s, double rel,
                           double q)
{
    if (s != t->challenger) {
        if (!(rel < 1 - p->margin))
            return;
        t->challenger = s;
        t->npair[s] = 0;
        t->fresh = 0;
        record_pair(t, s, p->window, q);
    }
    t->fresh++;
    /* rel / q: the two calls' predictions' ratio, which turns pair ratios into time ratios */
    if (t->fresh >= MIN_PAIRS && !(fresh_median(t, s, p->window) * rel / q < 1))
        end_challenge(t);
    else
        t->next_check = t->calls + 2; /* one call of the running scheme after itself first */
}

static void clear_pending(zen_auto_tune *t)
{
    t->last = -1;
    t->last_kind = ZEN_TUNE_EXPLOIT;
    t->last_pred = 0;
    t->last_base = 0;
}

void zen__auto_tune_observe(zen_auto_tune *t, const zen_auto_tune_params *p, double seconds)
{
    int s = t->last;
    if (s < 1 || s >= NS) { /* none pending */
        clear_pending(t);
        return;
    }
    if (!(seconds > 0)) { /* 0: the call did not run it (hier-host) */
        clear_pending(t);
        t->prev = -1;
        return;
    }
    /* a call right after another scheme's is timed but not compared: see the header, switch */
    int after_itself = s == t->prev;
    t->prev = s;
    t->seen[s] = t->calls;
    double rel = 0, q = 0; /* this call's time, and ratio, over the running scheme's before */
    double ratio = t->last_pred > 0 ? seconds / t->last_pred : 0;
    if (ratio > 0 && (after_itself || !t->measured[s])) /* a first call is the cold one anyway */
        record_ratio(t, s, p->window, ratio);
    if (ratio > 0 && after_itself) {
        if (s == t->settled && t->last_kind == ZEN_TUNE_EXPLOIT) {
            t->settled_ratio = ratio;
            t->settled_s = seconds;
        } else if (t->settled > 0 && s != t->settled && t->settled_ratio > 0) {
            q = ratio / t->settled_ratio;
            rel = seconds / t->settled_s;
            record_pair(t, s, p->window, q);
        }
    }
    t->total_s += seconds;
    /* only rechecks draw on the budget: the warm-up is a one-off cost of a key's first calls */
    if (t->last_kind == ZEN_TUNE_RECHECK && t->last_base > 0 && seconds > t->last_base)
        t->extra_s += seconds - t->last_base;
    if (t->last_kind == ZEN_TUNE_RECHECK && p->period > 0 && rel > 0)
        challenge_step(t, p, s, rel, q);
    clear_pending(t);
}

void zen__auto_tune_drop(zen_auto_tune *t)
{
    t->prev = t->last; /* it ran, untimed: the next call of another scheme is not compared */
    clear_pending(t);
}

static int usable(double x)
{
    return x >= 0 && x < 1e300;
}

/* The scheme with the smallest v[s] among those with mask[s] (ties as zen__sparse_cheapest);
 * -1 when none is usable. */
static int argmin_masked(const double *v, const int *mask)
{
    double c[NS];
    int any = 0;
    for (int s = 0; s < NS; s++) {
        c[s] = s > 0 && mask[s] && usable(v[s]) ? v[s] : 1e301;
        any |= c[s] < 1e301;
    }
    return any ? (int)zen__sparse_cheapest(c) : -1;
}

/* est[s]: pred[s] x corr[s] once measured past its cold call, else pred[s] x g, g the smallest
 * corr measured so far (1: none). A first call alone cannot make a scheme look worse than one
 * not measured: cold (allocations, first touches) it took up to 4x its time on the grid, and
 * judged by it ALLGATHER, the fastest scheme of the cell, was never measured again. */
static void estimate(const zen_auto_tune *t, const double *pred, double *est)
{
    double g = 0;
    for (int s = 1; s < NS; s++)
        if (t->measured[s] && (g == 0 || t->corr[s] < g))
            g = t->corr[s];
    if (!(g > 0))
        g = 1;
    est[0] = 0;
    for (int s = 1; s < NS; s++)
        est[s] = usable(pred[s]) ? pred[s] * (t->measured[s] >= 2 ? t->corr[s] : g) : 1e301;
}

/* The next warm-up try, or -1: a candidate (the model's first p->top, or within p->prune of the
 * best estimate) measured fewer than p->warm times and not beyond p->prune of the best measured;
 * the scheme of the call before while it still is one, else fewest measurements first, the
 * highest estimate among them first. A process's first calls are slower than its later ones (on
 * the shm grid a scheme's calls in iterations 1, 2, 3, 5 and 7 took a median 1.56, 1.27, 1.22,
 * 1.14 and 1.09 times its steady median, 144 recorded cells), so the candidate measured first is
 * measured at its worst: the model's favourite, the likeliest winner, goes last. Replayed on 108
 * recorded shm cells not used to choose it (bench/tune_replay), within 10% of the fastest by p50
 * in 81% of them against 78% lowest-first, paired 87% against 81%. */
static int warm_pick(const zen_auto_tune *t, const zen_auto_tune_params *p, const double *pred,
                     const double *est, int best_all, int best_meas)
{
    int top[NS] = { 0 }, all[NS], mask[NS];
    double rank[NS];
    memcpy(rank, pred, sizeof rank);
    for (int s = 0; s < NS; s++)
        all[s] = 1;
    for (long i = 0; i < p->top && i < NS - 1; i++) {
        int b = argmin_masked(rank, all);
        if (b < 0)
            break;
        top[b] = 1;
        rank[b] = 1e301;
    }
    uint32_t fewest = UINT32_MAX;
    for (int s = 1; s < NS; s++) {
        int cand = top[s] || (best_all > 0 && est[s] <= p->prune * est[best_all]);
        /* dropped on two warm calls past the cold one, not one: on the 2-core VM one call of
         * ALLGATHER took 4.6x its usual time, and the fastest scheme of the 4-rank trace was
         * dropped for 270 calls on it */
        int dropped = t->measured[s] > 2 && best_meas > 0 && est[s] > p->prune * est[best_meas];
        mask[s] = usable(pred[s]) && cand && !dropped && t->measured[s] < (uint32_t)p->warm;
        if (mask[s] && t->measured[s] < fewest)
            fewest = t->measured[s];
    }
    mask[0] = 0;
    if (t->prev > 0 && mask[t->prev]) /* its calls back to back: see the header, switch */
        return t->prev;
    int r = -1; /* the highest estimate first: see above */
    for (int s = 1; s < NS; s++)
        if (mask[s] && t->measured[s] == fewest && (r < 0 || est[s] > est[r]))
            r = s;
    return r;
}

/* The scheme to re-measure on a recheck call: the challenger (a rival whose recheck beat the
 * running scheme) while there is one; else the rival with the lowest estimate if that is below
 * (1 - margin) x the running scheme's; else the least recently measured (ties: lowest estimate)
 * of: the survivors (est, or pred x best_corr, within p->drop of the pick's est; one never
 * measured too, as when the model kept it out of the warm-up and measurement has since moved the
 * estimates), and the dropped schemes whose estimate still rests on fewer than p->window
 * measurements after the cold one, once per longest gap (a warm-up on a busy host can make a
 * scheme look twice as slow as it is, and a drop on that evidence alone would be for good); -1:
 * none. Survival is judged on the
 * scheme's best window, not its last: a scheme's window stops moving when AUTO leaves it, and AUTO
 * leaves a scheme when its calls look slow, so the last window is biased high. On the 4-rank trace
 * a burst of load (calls at 2-6x) made AUTO leave ALLGATHER for HIERARCHICAL (1.3x slower in
 * steady state); ALLGATHER's window held the burst, beyond p->drop, and it was never measured
 * again in the 450 calls left. Host load only slows calls down, so the best window is the one
 * nearer the scheme's own speed. */
static int recheck_pick(const zen_auto_tune *t, const zen_auto_tune_params *p, const double *est,
                        const double *pred, int pick)
{
    uint64_t most = longest_gap(p);
    if (t->challenger > 0 && t->challenger != pick && t->measured[t->challenger])
        return t->challenger;
    /* a rival whose estimate is clearly lower: measure it next to the running scheme */
    int r = -1;
    for (int s = 1; s < NS; s++)
        if (s != pick && t->measured[s] && est[s] < (1 - p->margin) * est[pick] &&
            (r < 0 || est[s] < est[r]))
            r = s;
    if (r > 0)
        return r;
    for (int s = 1; s < NS; s++) {
        double bar = p->drop * est[pick];
        int survivor = est[s] <= bar || (t->best_corr[s] > 0 && pred[s] * t->best_corr[s] <= bar);
        int unsure = t->measured[s] <= (uint32_t)p->window && t->seen[s] + most <= t->calls;
        if (s == pick || !usable(est[s]) || !(survivor || (unsure && t->measured[s])))
            continue;
        if (r < 0 || t->seen[s] < t->seen[r] || (t->seen[s] == t->seen[r] && est[s] < est[r]))
            r = s;
    }
    return r;
}

/* The exploiting choice. Without a running scheme (or with the warm-up off), the argmin `first`
 * of the estimates. With one, it stays unless a rival measured next to it pairs_needed() times
 * is faster by median pair ratio than (1 - p->margin): the running scheme's estimate
 * follows every call and its rivals' were taken at other times, so a burst of load on the host
 * (steal time, a neighbour) would otherwise make it look slower than rivals that are slower in
 * steady state; a rival's time over the running scheme's call just before it saw the same load. */
static int paired_choice(const zen_auto_tune *t, const zen_auto_tune_params *p, const double *pred,
                         int first)
{
    int cur = t->settled;
    if (cur <= 0 || !t->measured[cur] || p->warm <= 0 || !(pred[cur] > 0))
        return first;
    int w = window_len(p->window), need = pairs_needed(p), best = cur;
    double best_rel = 1 - p->margin;
    for (int s = 1; s < NS; s++) {
        if (s == cur || t->npair[s] < (uint32_t)need || !usable(pred[s]))
            continue;
        int k = t->npair[s] < (uint32_t)w ? (int)t->npair[s] : w;
        double v[ZEN_TUNE_WINDOW_MAX];
        memcpy(v, t->pair[s], (size_t)k * sizeof *v);
        /* the median pair's time ratio on the work of this call */
        double m = zen__median_inplace(v, (size_t)k) * pred[s] / pred[cur];
        if (m < best_rel) {
            best_rel = m;
            best = s;
        }
    }
    return best;
}

/* A new running scheme: the recheck clock restarts at one period, and the pair ratios, taken
 * against the old one, start over. */
static void settle(zen_auto_tune *t, const zen_auto_tune_params *p, int pick)
{
    t->settled = pick;
    t->gap = (uint64_t)(p->period > 0 ? p->period : 0);
    t->next_check = t->calls + t->gap;
    t->settled_ratio = 0;
    t->settled_s = 0;
    t->challenger = -1;
    t->fresh = 0;
    memset(t->npair, 0, sizeof t->npair);
}

/* Start a challenge of rival r at once: two calls of it after every two of the running scheme's,
 * until its pairs decide. */
static void challenge_now(zen_auto_tune *t, const zen_auto_tune_params *p, int r)
{
    if (r <= 0 || p->period <= 0)
        return;
    t->challenger = r;
    t->npair[r] = 0;
    t->fresh = 0;
    t->next_check = t->calls + 2; /* this call and one more of the running scheme first */
}

/* Warm-up estimates rest on two calls each: when the runner-up is within CLOSE_CALL of the
 * first running scheme, it is challenged at once (challenge_now) rather than at the first
 * recheck. On the grid's 4-rank cells, where calls take 0.4-1 ms and two or three schemes lie
 * within 20%, AUTO otherwise kept a 1.2-1.3x scheme for the whole run. */
#define CLOSE_CALL 1.3

static void confirm_close_call(zen_auto_tune *t, const zen_auto_tune_params *p, const double *est,
                               int pick)
{
    int r = -1;
    for (int s = 1; s < NS; s++)
        if (s != pick && t->measured[s] >= 2 && usable(est[s]) && (r < 0 || est[s] < est[r]))
            r = s;
    if (r > 0 && est[r] <= CLOSE_CALL * est[pick])
        challenge_now(t, p, r);
}

/* On an exploiting call of the running scheme: at a due call the survivor to re-measure, within
 * the budget, and the gap doubles up to backoff periods. */
static int recheck_due(zen_auto_tune *t, const zen_auto_tune_params *p, const double *est,
                       const double *pred, int pick, zen_auto_tune_kind *k)
{
    if (t->calls < t->next_check)
        return pick;
    uint64_t most = longest_gap(p);
    int r = recheck_pick(t, p, est, pred, pick);
    /* two calls: the first, right after the running scheme's, is not compared (header, switch) */
    if (r > 0 && t->extra_s + 2 * (est[r] - est[pick]) <= p->budget * (t->total_s + 2 * est[r])) {
        *k = ZEN_TUNE_RECHECK;
        t->again = r;
        t->next_check = t->calls + t->gap;
        if (r != t->challenger) /* a challenge's calls are not rechecks that confirmed the choice */
            t->gap = t->gap * 2 < most ? t->gap * 2 : most;
        return r;
    }
    t->next_check = t->calls + t->gap;
    return pick;
}

zen_sparse_scheme zen__auto_tune_choose(zen_auto_tune *t, const zen_auto_tune_params *p,
                                        const double pred[ZEN_SPARSE_SCHEME_COUNT],
                                        zen_auto_tune_kind *kind,
                                        double est_out[ZEN_SPARSE_SCHEME_COUNT])
{
    double est[NS];
    int all[NS], meas[NS];
    estimate(t, pred, est);
    for (int s = 0; s < NS; s++) {
        all[s] = 1;
        meas[s] = t->measured[s] > 0;
    }
    int best_all = argmin_masked(est, all), best_meas = argmin_masked(est, meas);
    /* the warm-up is the key's first calls only: a scheme that becomes a candidate later (the
     * estimates moved) is measured by the budgeted rechecks */
    int pick = t->settled < 0 ? warm_pick(t, p, pred, est, best_all, best_meas) : -1;
    zen_auto_tune_kind k = ZEN_TUNE_WARM;
    if (pick < 0 && t->again > 0) { /* a recheck's second call */
        pick = t->again;
        k = ZEN_TUNE_RECHECK;
        t->again = -1;
    } else if (pick < 0) {
        k = ZEN_TUNE_EXPLOIT;
        pick = best_meas > 0 && p->warm > 0 ? best_meas : best_all;
        if (pick < 0)
            pick = ZEN_SPARSE_BALANCED; /* nothing usable: the model's default */
        pick = paired_choice(t, p, pred, pick);
        int c = t->challenger;
        if (c > 0 && pick != c && t->fresh >= (uint32_t)pairs_needed(p)) /* lost */
            end_challenge(t);
        if (pick != t->settled) {
            int before = t->settled;
            settle(t, p, pick);
            if (before < 0)
                confirm_close_call(t, p, est, pick);
            else /* the scheme just left challenges back at once: see the header, exploit */
                challenge_now(t, p, before);
        } else if (p->period > 0)
            pick = recheck_due(t, p, est, pred, pick, &k);
    }
    t->warm_tries += k == ZEN_TUNE_WARM;
    t->rechecks += k == ZEN_TUNE_RECHECK;
    t->calls++;
    t->last = pick;
    t->last_kind = k;
    t->last_pred = pred[pick];
    t->last_base = best_meas > 0 ? est[best_meas] : 0;
    if (kind)
        *kind = k;
    if (est_out)
        memcpy(est_out, est, sizeof est);
    return (zen_sparse_scheme)pick;
}

double zen__auto_tune_call_time(double *v, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] > 0 && v[i] < 1e300)
            v[k++] = v[i];
    return k ? zen__median_inplace(v, k) : 0;
}

double zen__auto_tune_scale(const zen_auto_tune *t)
{
    double r[NS];
    int k = 0;
    for (int s = 1; s < NS; s++)
        if (t->measured[s] >= 2 && t->corr[s] > 0)
            r[k++] = t->corr[s];
    return k < 2 ? 0 : zen__median_inplace(r, (size_t)k);
}

void zen__auto_tune_bias(double pred[ZEN_SPARSE_SCHEME_COUNT])
{
    /* checked by the tunables table: NAME=FACTOR items, known names, finite factors in bounds */
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
