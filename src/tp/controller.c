/*
 * The balance controller: a pure function from all-gathered timings to a plan. Every rank runs
 * it on the same numbers, so the plan is identical everywhere without a broadcast.
 *
 * Inputs per rank r: t_r, the EMA of its own tp GEMM time per step scaled to the full K.
 *
 *  1. Detection. m = median(t). r is a straggler when t_r > (1 + delta) m; a rank that was one
 *     stays one while t_r > (1 + delta/2) m (hysteresis against flapping). Helpers A = the rest.
 *     t* = max over A of t_a: the time the fast ranks take anyway.
 *  2. Per straggler s the needed offload is f_s = 1 - t* / t_s.
 *     RESIZE:  prune_s = min(f_s, rho_max), local_s = 1 - prune_s
 *              (per layer keep = clamp(ceil(K t* / t_s), ceil(K (1 - rho_max)), K)).
 *     MIGRATE: lossless water-filling. With H the stragglers and A' the helpers that still have
 *              spare time, the balanced time is
 *                  T = (|H| + |A'|) / (sum_H 1/t_s + sum_A' 1/t_a)
 *              (helpers with t_a >= T and stragglers with t_s <= T drop out; repeat). Straggler s
 *              computes T/t_s of its K locally and migrates m_s = 1 - T/t_s; helper a absorbs
 *              x_a = T/t_a - 1, and each m_s is split over A' in proportion to x_a.
 *     SEMI:    stragglers with f_s <= rho_max are resized (resizing alone balances). The heavy
 *              ones prune rho_max and migrate the rest:
 *                  T = (sum_H (1 - rho_max) + |A'|) / (sum_H 1/t_s + sum_A' 1/t_a)
 *              but only when the predicted migration cost C pays off:
 *                  max(T, t*) + C < max_H t_s (1 - rho_max)
 *              (both sides are critical tp GEMM times: the helpers' extra compute is in T).
 *              Otherwise the heavy stragglers are resized to the cap. A straggler is heavy for
 *              migration only by its own GEMM times (in->gemm_ms): one that only the whole-step
 *              detector finds heavy (throttled from outside) is resized only, since it would
 *              have to send its columns and wait for the results, slowly too
 *              (docs/hetero-tp.md).
 *  3. Hysteresis: the previous plan is kept when the straggler set and the set of
 *     (source, helper) pairs are unchanged and no fraction moved by more than `hysteresis`.
 *
 * Migration cost C = scale x model. The model follows how migrate.c moves the data: a source
 * posts its messages to all helpers at once and waits once per phase, so
 *     model = rounds x latency + max_r max(out_r, in_r) / bandwidth
 * where out_r / in_r are all bytes rank r sends / receives per step (a source's link carries the
 * traffic of all its helpers, a helper's only its own pair) and `rounds` counts the waits that
 * follow each other on the critical path (4 per layer: replica sync, forward, backward request
 * and reply), not messages. Results that ride on the existing Y / dX allreduces are not counted.
 * `scale` is learned (zen__tp_learn_observe): after a period that migrated, the observed overhead is
 *     step time - base - critical GEMM time of the plan
 * with base the step time outside the tp GEMMs, measured in periods that did not migrate; scale
 * is an EMA of observed / model. While nothing is learned SEMI may run the migration plan for
 * one period (a probe) when it would pay even at a quarter of the modelled cost and save at
 * least 5% of the capped time; later probes
 * refresh whichever estimate is TP_REFRESH_ROUNDS old (zen__tp_learn_apply).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/stats.h"
#include "tp/tp_internal.h"

#define TP_PROBE_SCALE    0.25 /* a probe is run when migration pays at this fraction of the model */
#define TP_REFRESH_ROUNDS 10   /* rounds after which the other plan is probed again */
#define TP_PROBE_MIN_GAIN 0.05 /* migration is probed only to save this fraction of capped */
#define TP_LEARN_ALPHA    0.5  /* EMA weight of a new observation (base and scale) */
/* Bounds of one observed / modelled ratio: a noisy period must neither make migration free nor
 * forbid it for good. */
#define TP_SCALE_MIN 0.05
#define TP_SCALE_MAX 100.0

zen_status zen__tp_plan_init(tp_plan *p, int n)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    p->local = zen__calloc((size_t)n, sizeof(double));
    p->prune = zen__calloc((size_t)n, sizeof(double));
    p->mig = zen__calloc((size_t)n * (size_t)n, sizeof(double));
    if (!p->local || !p->prune || !p->mig) {
        zen__tp_plan_free(p);
        return ZEN_ENOMEM;
    }
    zen__tp_plan_reset(p);
    return ZEN_OK;
}

void zen__tp_plan_free(tp_plan *p)
{
    zen__free(p->local);
    zen__free(p->prune);
    zen__free(p->mig);
    memset(p, 0, sizeof *p);
}

void zen__tp_plan_reset(tp_plan *p)
{
    p->straggler_mask = 0;
    p->tstar_ms = p->target_ms = p->cost_ms = p->capped_ms = p->model_ms = 0;
    p->kept = p->probe = 0;
    for (int r = 0; r < p->n; r++) {
        p->local[r] = 1.0;
        p->prune[r] = 0.0;
    }
    memset(p->mig, 0, (size_t)p->n * (size_t)p->n * sizeof(double));
}

void zen__tp_plan_copy(tp_plan *dst, const tp_plan *src)
{
    dst->straggler_mask = src->straggler_mask;
    dst->tstar_ms = src->tstar_ms;
    dst->target_ms = src->target_ms;
    dst->cost_ms = src->cost_ms;
    dst->capped_ms = src->capped_ms;
    dst->kept = src->kept;
    dst->model_ms = src->model_ms;
    dst->probe = src->probe;
    memcpy(dst->local, src->local, (size_t)src->n * sizeof(double));
    memcpy(dst->prune, src->prune, (size_t)src->n * sizeof(double));
    memcpy(dst->mig, src->mig, (size_t)src->n * (size_t)src->n * sizeof(double));
}

int zen__tp_plan_is_active(const tp_plan *p)
{
    for (int r = 0; r < p->n; r++)
        if (p->local[r] < 1.0)
            return 1;
    return 0;
}

static double median(const double *t, int n)
{
    double s[TP_MAX_RANKS];
    memcpy(s, t, (size_t)n * sizeof(double));
    return zen__median_inplace(s, (size_t)n);
}

static uint64_t detect(const tp_ctl_input *in, const tp_plan *prev)
{
    double m = median(in->t_ms, in->n);
    uint64_t mask = 0;
    for (int r = 0; r < in->n; r++) {
        int was = prev && ((prev->straggler_mask >> r) & 1);
        double thr = (1.0 + (was ? in->delta / 2 : in->delta)) * m;
        if (in->t_ms[r] > thr)
            mask |= (uint64_t)1 << r;
    }
    return mask;
}

/*
 * Water-filling over sources (bit set in src) that each still hold `load_s` of their K after
 * pruning, and helpers (bit set in help). Returns T and clears the bits of ranks that cannot
 * take part (helpers at or above T, sources at or below T).
 */
static double water_fill(const tp_ctl_input *in, const double *load, uint64_t *src, uint64_t *help)
{
    double T = 0;
    for (int iter = 0; iter < 2 * in->n + 2; iter++) {
        double work = 0, speed = 0;
        for (int r = 0; r < in->n; r++) {
            if ((*src >> r) & 1) {
                work += load[r];
                speed += 1.0 / in->t_ms[r];
            } else if ((*help >> r) & 1) {
                work += 1.0;
                speed += 1.0 / in->t_ms[r];
            }
        }
        T = speed > 0 ? work / speed : 0;
        int changed = 0;
        for (int r = 0; r < in->n; r++) {
            if (((*help >> r) & 1) && in->t_ms[r] >= T) {
                *help &= ~((uint64_t)1 << r);
                changed = 1;
            }
            if (((*src >> r) & 1) && in->t_ms[r] * load[r] <= T) {
                *src &= ~((uint64_t)1 << r);
                changed = 1;
            }
        }
        if (!changed)
            break;
    }
    return T;
}

/* Fill out->local/mig for the sources in src migrating down to time T onto helpers in help. */
static void assign_migration(const tp_ctl_input *in, const double *load, uint64_t src,
                             uint64_t help, double T, tp_plan *out)
{
    int n = in->n;
    double xsum = 0;
    for (int a = 0; a < n; a++)
        if ((help >> a) & 1)
            xsum += T / in->t_ms[a] - 1.0;
    if (!(xsum > 0) || src == 0)
        return;
    for (int s = 0; s < n; s++) {
        if (!((src >> s) & 1))
            continue;
        double local = T / in->t_ms[s];
        double m = load[s] - local;
        if (m <= 0)
            continue;
        out->local[s] = local;
        for (int a = 0; a < n; a++)
            if ((help >> a) & 1)
                out->mig[s * n + a] = m * (T / in->t_ms[a] - 1.0) / xsum;
    }
}

double zen__tp_migration_cost_ms(const tp_ctl_input *in, const tp_plan *p)
{
    int n = in->n;
    double out[TP_MAX_RANKS] = { 0 }, inb[TP_MAX_RANKS] = { 0 };
    int any = 0;
    for (int s = 0; s < n; s++) {
        for (int a = 0; a < n; a++) {
            double f = p->mig[s * n + a];
            if (f <= 0)
                continue;
            double down = f * in->mig_out_per_frac + in->mig_out_per_pair; /* s -> a */
            double up = f * in->mig_in_per_frac + in->mig_in_per_pair;     /* a -> s */
            out[s] += down;
            inb[a] += down;
            out[a] += up;
            inb[s] += up;
            any = 1;
        }
    }
    if (!any)
        return 0;
    double link = 0;
    for (int r = 0; r < n; r++)
        link = fmax(link, fmax(out[r], inb[r]));
    double bw = in->bandwidth_Bps > 0 ? in->bandwidth_Bps : INFINITY;
    return 1e3 * (link / bw + in->mig_rounds * fmax(in->latency_s, 0.0));
}

double zen__tp_plan_critical_ms(const tp_ctl_input *in, const tp_plan *p)
{
    int n = in->n;
    double crit = 0;
    for (int r = 0; r < n; r++) {
        double work = p->local[r];
        for (int s = 0; s < n; s++)
            work += p->mig[s * n + r];
        crit = fmax(crit, in->t_ms[r] * work);
    }
    return crit;
}

static int plan_migrates(const tp_plan *p)
{
    for (int i = 0; i < p->n * p->n; i++)
        if (p->mig[i] > 0)
            return 1;
    return 0;
}

static double cost_scale(const tp_ctl_input *in)
{
    return in->cost_scale > 0 && isfinite(in->cost_scale) ? in->cost_scale : 1.0;
}

static void resize_only(const tp_ctl_input *in, uint64_t who, double tstar, tp_plan *out)
{
    for (int s = 0; s < in->n; s++) {
        if (!((who >> s) & 1))
            continue;
        double f = 1.0 - tstar / in->t_ms[s];
        double p = fmin(fmax(f, 0.0), in->rho_max);
        out->prune[s] = p;
        out->local[s] = 1.0 - p;
    }
}

static void decide_semi(const tp_ctl_input *in, uint64_t strag, uint64_t help, double tstar,
                        tp_plan *out)
{
    uint64_t heavy = 0;
    for (int s = 0; s < in->n; s++) {
        /* a source must be heavy by its own GEMM times: slowness only the whole-step detector
         * sees (throttled from outside) is resized to the cap, never migrated */
        double gemm = in->gemm_ms ? in->gemm_ms[s] : in->t_ms[s];
        if (((strag >> s) & 1) && 1.0 - tstar / in->t_ms[s] > in->rho_max &&
            1.0 - tstar / gemm > in->rho_max)
            heavy |= (uint64_t)1 << s;
    }
    resize_only(in, strag, tstar, out); /* light ones balanced, heavy ones at the cap */
    if (!heavy || !help)
        return;
    double load[TP_MAX_RANKS];
    double capped = 0;
    for (int r = 0; r < in->n; r++) {
        load[r] = 1.0 - in->rho_max;
        if ((heavy >> r) & 1)
            capped = fmax(capped, in->t_ms[r] * load[r]);
    }
    uint64_t src = heavy, h = help;
    double T = water_fill(in, load, &src, &h);
    tp_plan trial = *out;
    double local_buf[TP_MAX_RANKS], mig_buf[TP_MAX_RANKS * TP_MAX_RANKS];
    memcpy(local_buf, out->local, (size_t)in->n * sizeof(double));
    memset(mig_buf, 0, (size_t)in->n * (size_t)in->n * sizeof(double));
    trial.local = local_buf;
    trial.mig = mig_buf;
    assign_migration(in, load, src, h, T, &trial);
    double model = zen__tp_migration_cost_ms(in, &trial);
    double cost = cost_scale(in) * model;
    out->target_ms = T;
    out->model_ms = model;
    out->cost_ms = cost;
    out->capped_ms = capped;
    int pays = fmax(T, tstar) + cost < capped;
    /* Probes (zen__tp_learn_apply): migrate when it would pay at a quarter of the model and could
     * save at least 5% (a straggler just above the cap is not worth a period), or resize
     * although migration pays; either runs one period to measure the other plan. */
    int probe = !pays && in->probe && fmax(T, tstar) + TP_PROBE_SCALE * model < capped &&
                capped - fmax(T, tstar) > TP_PROBE_MIN_GAIN * capped;
    if (pays && in->probe_resize) {
        out->probe = 1;
        return;
    }
    if (pays || probe) {
        memcpy(out->local, local_buf, (size_t)in->n * sizeof(double));
        memcpy(out->mig, mig_buf, (size_t)in->n * (size_t)in->n * sizeof(double));
        out->probe = probe;
    }
}

static int same_shape(const tp_plan *a, const tp_plan *b, double hyst)
{
    int n = a->n;
    if (a->straggler_mask != b->straggler_mask)
        return 0;
    for (int r = 0; r < n; r++) {
        if (fabs(a->local[r] - b->local[r]) > hyst || fabs(a->prune[r] - b->prune[r]) > hyst)
            return 0;
        for (int c = 0; c < n; c++) {
            double x = a->mig[r * n + c], y = b->mig[r * n + c];
            if ((x > 0) != (y > 0) || fabs(x - y) > hyst)
                return 0;
        }
    }
    return 1;
}

void zen__tp_decide(const tp_ctl_input *in, const tp_plan *prev, tp_plan *out)
{
    int n = in->n;
    for (int r = 0; r < n; r++) {
        if (!(in->t_ms[r] > 0) || !isfinite(in->t_ms[r])) {
            /* some rank has no measurement yet: keep what we have */
            if (prev)
                zen__tp_plan_copy(out, prev);
            else
                zen__tp_plan_reset(out);
            out->kept = 1;
            return;
        }
    }
    zen__tp_plan_reset(out);
    uint64_t strag = detect(in, prev);
    out->straggler_mask = strag;
    uint64_t all = n == 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
    uint64_t help = all & ~strag;
    if (!strag || !help || in->balance == ZEN_BALANCE_NONE)
        return;
    double tstar = 0;
    for (int a = 0; a < n; a++)
        if ((help >> a) & 1)
            tstar = fmax(tstar, in->t_ms[a]);
    out->tstar_ms = tstar;
    if (in->balance == ZEN_BALANCE_RESIZE) {
        resize_only(in, strag, tstar, out);
    } else if (in->balance == ZEN_BALANCE_MIGRATE) {
        double load[TP_MAX_RANKS];
        for (int r = 0; r < n; r++)
            load[r] = 1.0;
        uint64_t src = strag, h = help;
        double T = water_fill(in, load, &src, &h);
        assign_migration(in, load, src, h, T, out);
        out->target_ms = T;
        out->model_ms = zen__tp_migration_cost_ms(in, out);
        out->cost_ms = cost_scale(in) * out->model_ms;
    } else {
        decide_semi(in, strag, help, tstar, out);
    }
    if (prev && same_shape(out, prev, in->hysteresis)) {
        /* keep the fractions; the numbers logged stay this round's */
        tp_plan fresh = *out;
        zen__tp_plan_copy(out, prev);
        out->kept = 1;
        out->tstar_ms = fresh.tstar_ms;
        out->target_ms = fresh.target_ms;
        out->cost_ms = fresh.cost_ms;
        out->capped_ms = fresh.capped_ms;
        out->model_ms = fresh.model_ms;
        out->probe = fresh.probe;
    }
}

/*
 * One observation per decision round, of the period that just ran plan `ran`; every input is
 * all-gathered, so L stays the same on every rank.
 *   crit = critical tp GEMM time of `ran` under the current timings (zen__tp_plan_critical_ms)
 *   `ran` migrates nothing:  base  <- EMA(step_ms - crit)
 *   `ran` migrates (base known):  obs = step_ms - base - crit,  scale <- EMA(clamp(obs / model))
 * The period is skipped when the timings no longer describe it: an active plan whose straggler
 * set differs from the one detected now (a straggler moved; an inactive plan costs max t
 * whatever the set). The first value of base and of scale replaces the prior, later ones are
 * averaged with weight TP_LEARN_ALPHA.
 */
void zen__tp_learn_observe(tp_learn *L, const tp_ctl_input *in, const tp_plan *ran, double step_ms)
{
    L->used = 0;
    L->step_ms = step_ms;
    L->crit_ms = 0;
    L->base_age++;
    L->scale_age++;
    if (!(step_ms > 0) || !isfinite(step_ms) || ran->n != in->n)
        return;
    for (int r = 0; r < in->n; r++)
        if (!(in->t_ms[r] > 0) || !isfinite(in->t_ms[r]))
            return;
    if (zen__tp_plan_is_active(ran) && detect(in, ran) != ran->straggler_mask)
        return;
    double crit = zen__tp_plan_critical_ms(in, ran);
    double a = TP_LEARN_ALPHA;
    L->crit_ms = crit;
    if (!plan_migrates(ran)) {
        double b = step_ms - crit;
        L->base_ms = L->base_valid ? a * b + (1 - a) * L->base_ms : b;
        L->base_valid = 1;
        L->base_age = 0;
        L->used = 1;
        return;
    }
    double model = zen__tp_migration_cost_ms(in, ran);
    if (!L->base_valid || !(model > 0))
        return;
    double obs = step_ms - L->base_ms - crit;
    double ratio = fmin(fmax(obs / model, TP_SCALE_MIN), TP_SCALE_MAX);
    L->obs_ms = obs;
    L->pred_ms = model;
    L->scale = L->scale_n ? a * ratio + (1 - a) * L->scale : ratio;
    L->scale_n++;
    L->scale_age = 0;
    L->used = 1;
}

/*
 * The learned scale replaces 1 once a migrating period was observed. Probes keep both estimates
 * current (an early noisy period must not decide for good): SEMI migrates for a period when no
 * migration was observed yet or not for TP_REFRESH_ROUNDS rounds, and resizes for a period
 * when the base is that old (i.e. it has been migrating all along).
 */
void zen__tp_learn_apply(const tp_learn *L, tp_ctl_input *in)
{
    in->cost_scale = L->scale_n ? L->scale : 1.0;
    in->probe = L->base_valid && (L->scale_n == 0 || L->scale_age >= TP_REFRESH_ROUNDS);
    in->probe_resize = L->base_valid && !in->probe && L->base_age >= TP_REFRESH_ROUNDS;
}

void zen__tp_plan_counts(const tp_plan *p, int s, int K, tp_counts *c)
{
    int n = p->n;
    int keep = (int)ceil((double)K * (1.0 - p->prune[s]) - 1e-9);
    keep = keep < 0 ? 0 : keep > K ? K : keep;
    c->prune = K - keep;
    double total = 0;
    for (int a = 0; a < n; a++)
        total += p->mig[s * n + a];
    int mt = (int)floor((double)K * total + 0.5);
    if (mt > keep)
        mt = keep;
    /* largest remainder split of mt over the helpers (ties: lower rank) */
    int given = 0;
    for (int a = 0; a < n; a++) {
        double share = total > 0 ? mt * p->mig[s * n + a] / total : 0;
        c->mig[a] = (int)floor(share);
        given += c->mig[a];
    }
    while (given < mt) {
        int best = -1;
        double best_rem = -1;
        for (int a = 0; a < n; a++) {
            if (p->mig[s * n + a] <= 0)
                continue;
            double share = mt * p->mig[s * n + a] / total;
            double rem = share - c->mig[a];
            if (rem > best_rem) {
                best_rem = rem;
                best = a;
            }
        }
        if (best < 0)
            break;
        c->mig[best]++;
        given++;
    }
    c->mig_total = given;
    c->local = keep - given;
}
