/*
 * The tp group: options, per-step timing, and the detection/decision round.
 *
 * Per training step every rank accumulates the time of its own tp GEMM work, scaled to the full
 * K (own_ns x K / columns computed), so a resized or migrating rank still reports its intrinsic
 * speed. zen_tp_group_step folds it into an EMA. Every `period` steps all ranks all-gather
 *   [t_norm_ema_ms, bandwidth_Bps, latency_s]
 * on the tp communicator and run the same pure decision function (controller.c) on the same
 * numbers, so the plan -- and hence every message size of migration -- is identical everywhere.
 * Each layer then refreshes its priority scores and re-partitions its columns (priority.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/comm_internal.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/options.h"
#include "common/stats.h"
#include "common/tunables.h"
#include "tp/tp_internal.h"

static zen_status check_options(zen_comm *comm, const zen_tp_options *o)
{
    if ((int)o->balance < 0 || (int)o->balance > 3)
        return zen__fail(comm, ZEN_EINVAL, "tp: unknown balance mode %d", (int)o->balance);
    if ((int)o->priority < 0 || (int)o->priority > 2)
        return zen__fail(comm, ZEN_EINVAL, "tp: unknown priority policy %d", (int)o->priority);
    if (o->period < 1 || !(o->delta >= 0) || !(o->rho_max >= 0 && o->rho_max <= 0.95) ||
        !(o->hysteresis >= 0) || !(o->ema_alpha > 0 && o->ema_alpha <= 1) ||
        !(o->bandwidth_Bps >= 0))
        return zen__fail(comm, ZEN_EINVAL,
                         "tp: bad options (period %d, delta %g, rho_max %g, hysteresis %g, "
                         "ema_alpha %g, bandwidth %g)",
                         o->period, o->delta, o->rho_max, o->hysteresis, o->ema_alpha,
                         o->bandwidth_Bps);
    return ZEN_OK;
}

/* Fields the caller left unset (see zen_tp_options) take ZEN_TP_PERIOD/DELTA/RHO_MAX/PRIORITY
 * (ablations from the command line without a flag for each knob), whose defaults are the
 * documented ones; a malformed value is ignored by the tunables table with a warning. An
 * explicit option always wins. */
static void fill_unset(zen_tp_options *o)
{
    if (o->period == 0)
        o->period = (int)zen__param_long("TP_PERIOD"); /* 1 .. 10^6 */
    if (o->delta < 0)
        o->delta = zen__param_double("TP_DELTA");
    if (o->rho_max < 0)
        o->rho_max = zen__param_double("TP_RHO_MAX");
    if (o->priority == ZEN_TP_PRIORITY_UNSET &&
        zen__tp_parse_priority(zen__param_str("TP_PRIORITY"), &o->priority) != ZEN_OK)
        o->priority = ZEN_TP_PRIORITY_SCORE;
}

static double arrival_weight(void)
{
    return zen__param_double("TP_ARRIVAL_WEIGHT");
}

zen_status zen_tp_group_create(zen_comm *tp_comm, const zen_tp_options *opts, zen_tp_group **out)
{
    if (!out)
        return ZEN_EINVAL;
    *out = NULL;
    if (!tp_comm)
        return ZEN_EINVAL;
    zen_tp_options merged = ZEN_TP_OPTIONS_INIT;
    if (opts)
        merged = *opts;
    if (!ZEN_OPTIONS_SIZE_OK(&merged))
        return zen__fail(tp_comm, ZEN_EINVAL, "tp: zen_tp_options.size %zu is not this zen's (%zu)",
                         merged.size, sizeof merged);
    fill_unset(&merged);
    const zen_tp_options *o = &merged;
    zen_status st = check_options(tp_comm, o);
    if (st != ZEN_OK)
        return st;
    int n = zen_comm_size(tp_comm);
    if (n > TP_MAX_RANKS)
        return zen__fail(tp_comm, ZEN_EUNSUPPORTED, "tp: at most %d ranks per tp group",
                         TP_MAX_RANKS);
    zen_tp_group *g = zen__calloc(1, sizeof *g);
    if (!g)
        return ZEN_ENOMEM;
    g->comm = tp_comm;
    g->rank = zen_comm_rank(tp_comm);
    g->size = n;
    g->opts = *o;
    g->bandwidth_Bps = o->bandwidth_Bps;
    g->latency_s = o->latency_s;
    g->last_arrival_rank = -1;
    g->arrival_weight = arrival_weight();
    zen__tp_detect_init(&g->det);
    g->min_keep = 1.0;
    zen_tp_emulation_init(&g->emu);
    g->slow_factor = 1.0;
    st = zen__tp_plan_init(&g->plan, n);
    if (st != ZEN_OK) {
        zen__free(g);
        return st;
    }
    *out = g;
    return ZEN_OK;
}

void zen_tp_group_destroy(zen_tp_group *g)
{
    if (!g)
        return;
    /* layers still alive are detached: they can only be destroyed from now on */
    for (int i = 0; i < g->nlayers; i++)
        g->layers[i]->g = NULL;
    zen__tp_plan_free(&g->plan);
    zen__free(g->layers);
    zen__free(g->spin_scratch);
    zen__free(g);
}

/* Prefix the transport's own message (which names the cause) with the calibration context. */
static zen_status cal_fail(zen_tp_group *g, zen_status st, int peer)
{
    char detail[sizeof g->comm->last_error];
    snprintf(detail, sizeof detail, "%s", zen_comm_last_error(g->comm));
    return zen__fail(g->comm, st, "tp link calibration: rank %d with peer %d: %s (%s)", g->rank,
                     peer, zen_strerror(st), detail);
}

enum {
    CAL_REPS = 5,
    CAL_BYTES = 1 << 20
};

/* One pair: the leader times CAL_REPS 4-byte round trips and CAL_REPS CAL_BYTES transfers into
 * a receive the follower posted beforehand (ready -> data -> 4-byte ack). */
static zen_status cal_pair(zen_tp_group *g, int peer, int leader, char *big, double *lat,
                           double *bw)
{
    zen_comm *c = g->comm;
    int32_t word = 0;
    double rtt[CAL_REPS], xfer[CAL_REPS];
    zen_status st = ZEN_OK;
    for (int i = 0; i < CAL_REPS && st == ZEN_OK; i++) {
        int64_t t0 = zen_now_ns();
        if (leader) {
            st = zen_send(c, &word, sizeof word, peer, TP_TAG_CALIB);
            if (st == ZEN_OK)
                st = zen_recv(c, &word, sizeof word, peer, TP_TAG_CALIB + 1, NULL);
        } else {
            st = zen_recv(c, &word, sizeof word, peer, TP_TAG_CALIB, NULL);
            if (st == ZEN_OK)
                st = zen_send(c, &word, sizeof word, peer, TP_TAG_CALIB + 1);
        }
        rtt[i] = (double)(zen_now_ns() - t0) * 1e-9;
    }
    for (int i = 0; i < CAL_REPS && st == ZEN_OK; i++) {
        if (leader) {
            st = zen_recv(c, &word, sizeof word, peer, TP_TAG_CALIB + 2, NULL);
            int64_t t0 = zen_now_ns();
            if (st == ZEN_OK)
                st = zen_send(c, big, CAL_BYTES, peer, TP_TAG_CALIB + 3);
            if (st == ZEN_OK)
                st = zen_recv(c, &word, sizeof word, peer, TP_TAG_CALIB + 1, NULL);
            xfer[i] = (double)(zen_now_ns() - t0) * 1e-9;
        } else {
            zen_request *r = NULL;
            st = zen_irecv(c, big, CAL_BYTES, peer, TP_TAG_CALIB + 3, &r);
            if (st == ZEN_OK)
                st = zen_send(c, &word, sizeof word, peer, TP_TAG_CALIB + 2);
            if (r) {
                zen_status w = zen_request_wait(r, -1, NULL);
                st = st == ZEN_OK ? w : st;
                zen_request_destroy(r);
            }
            if (st == ZEN_OK)
                st = zen_send(c, &word, sizeof word, peer, TP_TAG_CALIB + 1);
        }
    }
    if (st != ZEN_OK)
        return cal_fail(g, st, peer);
    if (leader) {
        *lat = zen__median_inplace(rtt, CAL_REPS) / 2;
        *bw = CAL_BYTES / fmax(zen__median_inplace(xfer, CAL_REPS) - *lat, 1e-7);
    }
    return ZEN_OK;
}

/*
 * Link model of the migration cost, measured the way migrate.c uses the link: point to point,
 * with the pairs (0,1), (2,3), ... at the same time (transfers to several helpers share the
 * host). The even rank of a pair measures (cal_pair) and sends {latency, bandwidth} to the odd
 * one; with an odd size rank 0 also sends its values to the last rank. Every rank thus holds a
 * value, and the all-gathered min bandwidth / max latency are meaningful. (The earlier model, a
 * 1-float and a 256 KiB allreduce, timed the ring's latency steps and reduction as transfer.)
 */
static zen_status calibrate_link(zen_tp_group *g)
{
    int r = g->rank, n = g->size;
    int peer = r % 2 ? r - 1 : r + 1 < n ? r + 1 : -1;
    double res[2] = { 0, 0 }; /* latency s, bandwidth B/s */
    zen_status st = ZEN_OK;
    if (peer >= 0) {
        char *big = zen__malloc(CAL_BYTES);
        if (!big)
            return ZEN_ENOMEM;
        memset(big, 0, CAL_BYTES);
        st = cal_pair(g, peer, r % 2 == 0, big, &res[0], &res[1]);
        zen__free(big);
        if (st != ZEN_OK)
            return st;
        st = r % 2 == 0 ? zen_send(g->comm, res, sizeof res, peer, TP_TAG_CALIB + 4)
                        : zen_recv(g->comm, res, sizeof res, peer, TP_TAG_CALIB + 4, NULL);
    }
    int odd_peer = r == 0 ? n - 1 : 0;
    if (st == ZEN_OK && n % 2 && r == 0)
        st = zen_send(g->comm, res, sizeof res, odd_peer, TP_TAG_CALIB + 4);
    else if (st == ZEN_OK && n % 2 && r == n - 1)
        st = zen_recv(g->comm, res, sizeof res, odd_peer, TP_TAG_CALIB + 4, NULL);
    if (st != ZEN_OK)
        return cal_fail(g, st, peer >= 0 ? peer : odd_peer);
    if (g->bandwidth_Bps <= 0)
        g->bandwidth_Bps = res[1];
    if (g->latency_s < 0)
        g->latency_s = res[0];
    return ZEN_OK;
}

/*
 * Migration traffic per step of the registered layers, split the way the cost model
 * (controller.c) needs it. Per layer (rows batch rows, wrows local weight rows, K columns):
 *   COLUMN  out per fraction: W replica + indices     in per fraction: dW slice
 *           out per pair: dY to every helper          in per pair: partial Y from every helper
 *   ROW     out per fraction: W replica + indices + X columns twice (forward and backward)
 *           in per fraction: dW slice + dX columns
 * COLUMN dX and ROW Y contributions ride on the allreduces that run anyway and are not counted.
 * 4 latency rounds per layer: replica sync, forward, backward request, backward reply.
 */
static void mig_cost_terms(const zen_tp_group *g, tp_ctl_input *in)
{
    double rows = g->last_rows > 0 ? g->last_rows : 1;
    double f = sizeof(float);
    in->mig_out_per_frac = in->mig_in_per_frac = 0;
    in->mig_out_per_pair = in->mig_in_per_pair = in->mig_rounds = 0;
    for (int i = 0; i < g->nlayers; i++) {
        const zen_tp_linear *l = g->layers[i];
        double wk = (double)l->wrows * l->K * f;
        in->mig_out_per_frac += wk + (double)l->K * sizeof(int);
        in->mig_in_per_frac += wk;
        if (l->kind == ZEN_TP_COLUMN) {
            in->mig_out_per_pair += rows * l->wrows * f;
            in->mig_in_per_pair += rows * l->wrows * f;
        } else {
            in->mig_out_per_frac += 2 * rows * l->K * f;
            in->mig_in_per_frac += rows * l->K * f;
        }
        in->mig_rounds += 4;
    }
}

static const char *plan_label(const tp_plan *p)
{
    for (int i = 0; i < p->n * p->n; i++)
        if (p->mig[i] > 0)
            return "migrate";
    return zen__tp_plan_is_active(p) ? "resize" : "no change";
}

/* The plan is the same on every rank: tp rank 0 logs it, with the numbers it came from. */
static void log_plan(const zen_tp_group *g, const tp_ctl_input *in)
{
    if (g->rank != 0 || !zen__log_enabled(ZEN_LOG_INFO, "tp"))
        return;
    const double *t = in->t_ms;
    const tp_plan *p = &g->plan;
    ZEN_INFO("tp",
             "%s round %llu: %s, stragglers 0x%llx, t* %.3f ms, migration target %.3f ms + cost "
             "%.3f ms (model %.3f x learned %.3f) vs resized-to-cap %.3f ms (0: no heavy "
             "straggler): predicted saving %.3f ms, %s (link %.3g B/s, %.3g s/round, %.0f "
             "rounds); last step: the others "
             "waited for rank %d, %.3f ms in all",
             zen_tp_balance_name(g->opts.balance), (unsigned long long)g->decisions,
             p->kept ? "previous plan kept" : "new plan", (unsigned long long)p->straggler_mask,
             p->tstar_ms, p->target_ms, p->cost_ms, p->model_ms, in->cost_scale, p->capped_ms,
             p->capped_ms > 0 ? p->capped_ms - fmax(p->target_ms, p->tstar_ms) - p->cost_ms : 0.0,
             p->probe ? (strcmp(plan_label(p), "migrate") ? "PROBE resize" : "PROBE migrate")
                      : plan_label(p),
             in->bandwidth_Bps, in->latency_s, in->mig_rounds, g->last_arrival_rank,
             g->arrival_spread_ms);
    const tp_learn *L = &g->learn;
    if (g->opts.balance >= ZEN_BALANCE_MIGRATE)
        ZEN_INFO("tp",
                 "%s round %llu learning: last period %.3f ms/step, critical GEMM %.3f ms, base "
                 "%.3f ms%s; migration overhead observed %.3f ms vs modelled %.3f ms, scale %.3f "
                 "after %d migrating periods",
                 zen_tp_balance_name(g->opts.balance), (unsigned long long)g->decisions, L->step_ms,
                 L->crit_ms, L->base_ms, L->used ? "" : " (period skipped)", L->obs_ms, L->pred_ms,
                 L->scale, L->scale_n);
    for (int r = 0; r < g->size; r++) {
        double migrated = 0;
        for (int a = 0; a < g->size; a++)
            migrated += g->plan.mig[r * g->size + a];
        ZEN_INFO("tp", "%s round %llu rank %d: t %.3f ms%s -> local %.3f prune %.3f migrate %.3f",
                 zen_tp_balance_name(g->opts.balance), (unsigned long long)g->decisions, r, t[r],
                 (p->straggler_mask >> r) & 1 ? " STRAGGLER" : "", p->local[r], p->prune[r],
                 migrated);
    }
}

static void update_plan_stats(zen_tp_group *g)
{
    g->migrated_cols = 0;
    g->min_keep = 1.0;
    for (int r = 0; r < g->size; r++)
        if (1.0 - g->plan.prune[r] < g->min_keep)
            g->min_keep = 1.0 - g->plan.prune[r];
    for (int i = 0; i < g->nlayers; i++) {
        int cnt[TP_MAX_RANKS];
        tp_counts c = { 0, 0, 0, cnt };
        for (int s = 0; s < g->size && s < TP_MAX_RANKS; s++) {
            zen__tp_plan_counts(&g->plan, s, g->layers[i]->K, &c);
            g->migrated_cols += c.mig_total;
        }
    }
}

/*
 * Who waits for whom, from the communicator's arrival stamps: every rank takes its stamps of the
 * tp collectives of the last step (the count is the same on every rank: they run the same
 * collectives), all-gathers them, and for each collective charges the time between the first and
 * the last arrival to the last one. The rank charged most is the one the group waited for, and
 * its charge is how long the others waited for it in that step.
 */
static zen_status gather_arrivals(zen_tp_group *g)
{
    zen_arrival mine[ZEN_ARRIVAL_HISTORY];
    size_t have = 0;
    zen_status st = zen_comm_arrivals(g->comm, mine, ZEN_ARRIVAL_HISTORY, &have);
    /* the detector averages over up to `period` steps (what the history holds) for a steadier
     * per-step blame; the report keeps the last step */
    size_t per = (size_t)g->colls_last_step;
    size_t nsteps = per > 0 && have > 1 ? (have - 1) / per : 1;
    if (nsteps > (size_t)g->opts.period)
        nsteps = (size_t)g->opts.period;
    if (nsteps < 1)
        nsteps = 1;
    size_t k = nsteps * per + 1 < have ? nsteps * per + 1 : have;
    size_t k_last = per + 1 < k ? per + 1 : k;
    if (st != ZEN_OK || k == 0)
        return st;
    int64_t stamps[ZEN_ARRIVAL_HISTORY];
    int64_t *all = zen__malloc_array(k * (size_t)g->size, sizeof *all);
    if (!all)
        return ZEN_ENOMEM;
    for (size_t i = 0; i < k; i++)
        stamps[i] = mine[have - k + i].arrive_ns;
    if ((st = zen_allgather(g->comm, stamps, all, k, ZEN_I64)) != ZEN_OK) {
        zen__free(all);
        return st;
    }
    double blame[TP_MAX_RANKS] = { 0 }, blame_all[TP_MAX_RANKS] = { 0 };
    for (size_t j = 0; j < k; j++) {
        int last = 0;
        int64_t first = all[j];
        for (int r = 1; r < g->size; r++) {
            if (all[(size_t)r * k + j] > all[(size_t)last * k + j])
                last = r;
            if (all[(size_t)r * k + j] < first)
                first = all[(size_t)r * k + j];
        }
        double spread = (double)(all[(size_t)last * k + j] - first) / 1e6;
        blame_all[last] += spread;
        if (j >= k - k_last)
            blame[last] += spread;
    }
    zen__free(all);
    for (int r = 0; r < g->size; r++)
        g->det.blame_ms[r] = blame_all[r] / (double)nsteps;
    int worst = 0;
    double a = g->opts.ema_alpha;
    for (int r = 0; r < g->size; r++) {
        g->blame_ema_ms[r] = g->decisions ? a * blame[r] + (1 - a) * g->blame_ema_ms[r] : blame[r];
        if (blame[r] > blame[worst])
            worst = r;
    }
    g->last_arrival_rank = worst;
    g->arrival_spread_ms = blame[worst];
    return ZEN_OK;
}

/* Wall time since the previous zen_tp_group_step: one sample of this period's step time. */
static void note_step_time(zen_tp_group *g)
{
    int64_t now = zen_now_ns();
    if (g->last_step_ns > 0 && g->nstep_ms < TP_STEP_SAMPLES)
        g->step_ms[g->nstep_ms++] = (double)(now - g->last_step_ns) / 1e6;
    g->last_step_ns = now;
}

/*
 * Learning the migration cost from what the last period cost. The period's step time is the
 * median of its samples without the first (which holds the previous decision round and the
 * re-layout), the max over ranks. It is all-gathered with each rank's own GEMM time EMA: the
 * critical GEMM time of the plan is computed from those, not from the detection's times, which
 * may carry whole-step slowness that is part of the step time already. Every rank then folds
 * the same numbers, sets the learned scale and SEMI's probes.
 */
static zen_status learn_round(zen_tp_group *g, tp_ctl_input *in)
{
    double v[TP_STEP_SAMPLES];
    int k = 0;
    for (int i = 1; i < g->nstep_ms; i++)
        v[k++] = g->step_ms[i];
    double mine[2] = { k ? zen__median_inplace(v, (size_t)k) : 0,
                       g->ema_valid ? g->t_norm_ema_ms : 0 };
    double all[2 * TP_MAX_RANKS], gemm[TP_MAX_RANKS];
    g->nstep_ms = 0;
    zen_status st = zen_allgather(g->comm, mine, all, 2, ZEN_F64);
    if (st != ZEN_OK)
        return st;
    double step = 0;
    for (int r = 0; r < g->size; r++) {
        step = all[2 * r] > 0 && step >= 0 ? fmax(step, all[2 * r]) : -1;
        gemm[r] = all[2 * r + 1];
    }
    tp_ctl_input raw = *in;
    raw.t_ms = gemm;
    zen__tp_learn_observe(&g->learn, &raw, &g->plan, step);
    zen__tp_learn_apply(&g->learn, in);
    return ZEN_OK;
}

static zen_status decision_round(zen_tp_group *g)
{
    int n = g->size;
    zen_status st;
    if (n == 1) {
        g->decisions++;
        return ZEN_OK;
    }
    int need_link =
        g->opts.balance >= ZEN_BALANCE_MIGRATE && (g->bandwidth_Bps <= 0 || g->latency_s < 0);
    if (need_link && (st = calibrate_link(g)) != ZEN_OK)
        return st;

    enum {
        NG = 3 + TP_DET_FIELDS /* t, bandwidth, latency, then the whole-step medians */
    };

    double mine[NG] = { g->ema_valid ? g->t_norm_ema_ms : 0.0, g->bandwidth_Bps, g->latency_s };
    zen__tp_detect_fill(g, mine + 3);
    double all[NG * TP_MAX_RANKS];
    if ((st = zen_allgather(g->comm, mine, all, NG, ZEN_F64)) != ZEN_OK)
        return st;
    /* Arrival stamps of that allgather: every rank enters it right after its step's work
     * (including emulated slowness), so the last to arrive is the one the others waited for. */
    if ((st = gather_arrivals(g)) != ZEN_OK)
        return st;
    double t[TP_MAX_RANKS];
    tp_ctl_input in = { 0 };
    in.n = n;
    in.t_ms = t;
    in.balance = g->opts.balance;
    in.delta = g->opts.delta;
    in.rho_max = g->opts.rho_max;
    in.hysteresis = g->opts.hysteresis;
    in.bandwidth_Bps = INFINITY;
    in.latency_s = 0;
    for (int r = 0; r < n; r++) {
        /* Slowness from outside (a throttled process) mostly lands outside the timed GEMMs;
         * the time the others waited for this rank, from the arrival stamps, shows it. Opt-in:
         * on a noisy host it also carries scheduling jitter. */
        t[r] = all[NG * r] + g->arrival_weight * g->blame_ema_ms[r];
        in.bandwidth_Bps = fmin(in.bandwidth_Bps, all[NG * r + 1]);
        in.latency_s = fmax(in.latency_s, all[NG * r + 2]);
    }
    /* whole-step slowness (a rank throttled from outside) raises the flagged ranks' times */
    double gemm_t[TP_MAX_RANKS];
    memcpy(gemm_t, t, (size_t)n * sizeof *t);
    zen__tp_detect_round(g, all, NG, 3, t);
    memcpy(g->round_ms, t, (size_t)n * sizeof *t);
    in.gemm_ms = gemm_t;
    mig_cost_terms(g, &in);
    if (g->opts.balance >= ZEN_BALANCE_MIGRATE && (st = learn_round(g, &in)) != ZEN_OK)
        return st;
    tp_plan next;
    if ((st = zen__tp_plan_init(&next, n)) != ZEN_OK)
        return st;
    zen__tp_decide(&in, &g->plan, &next);
    zen__tp_plan_copy(&g->plan, &next);
    zen__tp_plan_free(&next);
    g->decisions++;
    g->plan_active = zen__tp_plan_is_active(&g->plan);
    for (int i = 0; i < g->nlayers; i++) {
        zen__tp_layer_refresh_scores(g->layers[i]);
        if ((st = zen__tp_layer_apply_plan(g->layers[i])) != ZEN_OK)
            return st;
    }
    update_plan_stats(g);
    log_plan(g, &in);
    return ZEN_OK;
}

zen_status zen__tp_group_force_plan(zen_tp_group *g, const tp_plan *p)
{
    if (p->n != g->size)
        return ZEN_EINVAL;
    zen__tp_plan_copy(&g->plan, p);
    g->plan_active = zen__tp_plan_is_active(&g->plan);
    for (int i = 0; i < g->nlayers; i++) {
        zen_status st = zen__tp_layer_apply_plan(g->layers[i]);
        if (st != ZEN_OK)
            return st;
    }
    update_plan_stats(g);
    return ZEN_OK;
}

zen_status zen_tp_group_step(zen_tp_group *g)
{
    if (!g)
        return ZEN_EINVAL;
    note_step_time(g);
    zen__tp_pay_sleep_debt(g);
    if (g->step_timed) {
        double t = zen__tp_step_norm_ns(g) / 1e6;
        if (g->time_override_ms > 0)
            t = g->time_override_ms;
        double a = g->opts.ema_alpha;
        g->t_norm_ema_ms = g->ema_valid ? a * t + (1 - a) * g->t_norm_ema_ms : t;
        g->ema_valid = 1;
        zen__tp_detect_sample(g, t);
    }
    zen_comm_stats cs;
    if (zen_comm_get_stats(g->comm, &cs) == ZEN_OK) {
        g->colls_last_step = cs.collectives - g->colls_before_step;
        g->colls_before_step = cs.collectives;
    }
    g->last_ms_compute = (double)g->step_compute_ns / 1e6;
    g->last_ms_wait = (double)g->step_wait_ns / 1e6;
    g->step_compute_ns = g->step_wait_ns = 0;
    g->step_norm_ns = 0;
    g->step_timed = 0;
    g->nsamples = 0;
    g->steps++;
    g->version++;
    g->slow_factor = zen__tp_slow_factor(&g->emu, g->size, g->rank, g->steps);
    zen_status st = ZEN_OK;
    if (g->steps % (uint64_t)g->opts.period == 0)
        st = decision_round(g);
    zen__tp_detect_mark(g); /* the round's own collectives are not part of the next step */
    return st;
}

zen_status zen_tp_group_canonical_grads(zen_tp_group *g, int canonical)
{
    if (!g)
        return ZEN_EINVAL;
    for (int i = 0; i < g->nlayers; i++) {
        zen_status st = zen__tp_layer_canonical_grad(g->layers[i], canonical);
        if (st != ZEN_OK)
            return st;
    }
    return ZEN_OK;
}

zen_status zen_tp_group_stats(const zen_tp_group *g, zen_tp_stats *out)
{
    if (!g || !out)
        return ZEN_EINVAL;
    memset(out, 0, sizeof *out);
    out->balance = g->opts.balance;
    out->steps = g->steps;
    out->decisions = g->decisions;
    out->straggler_mask = g->plan.straggler_mask;
    for (int r = 0; r < g->size && r < 64; r++)
        out->nstragglers += (int)((g->plan.straggler_mask >> r) & 1);
    out->keep_fraction = g->rank < g->plan.n ? g->plan.local[g->rank] : 1.0;
    out->min_keep_fraction = g->min_keep;
    out->migrated_cols = g->migrated_cols;
    out->ms_wait = g->last_ms_wait;
    out->ms_compute = g->last_ms_compute;
    out->slow_factor = g->slow_factor;
    out->t_norm_ms = g->ema_valid ? g->t_norm_ema_ms : 0.0;
    out->last_arrival_rank = g->last_arrival_rank;
    out->arrival_spread_ms = g->arrival_spread_ms;
    return ZEN_OK;
}

zen_status zen_tp_group_plan(const zen_tp_group *g, zen_tp_rank_plan *out, int n)
{
    if (!g || !out || n < g->size)
        return ZEN_EINVAL;
    const tp_plan *p = &g->plan;
    for (int r = 0; r < g->size; r++) {
        zen_tp_rank_plan *o = &out[r];
        memset(o, 0, sizeof *o);
        o->t_ms = g->round_ms[r];
        o->local = r < p->n ? p->local[r] : 1.0;
        o->pruned = r < p->n ? p->prune[r] : 0.0;
        for (int a = 0; a < p->n; a++) {
            o->migrated += p->mig[r * p->n + a];
            o->helped += p->mig[a * p->n + r];
        }
    }
    return ZEN_OK;
}
