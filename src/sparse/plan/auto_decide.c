/*
 * AUTO's decision (zen__sparse_choose): the records (auto_records.c) give the profile; the model
 * (plan/predict.c), calibrated online from the tensor's own calls, predicts every scheme; the
 * tuner (auto_tune.h) converges on measurement for a keyed tensor. Between record exchanges,
 * when every rank holds the same agreed slot, it decides without a message (quiet_decide).
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "common/alloc.h"
#include "common/tunables.h"
#include "sparse/plan/auto.h"
#include "sparse/plan/auto_internal.h"
#include "sparse/plan/net_model.h"
#include "sparse/plan/predict.h"

static double ema(double old, double x)
{
    return old > 0 ? 0.5 * old + 0.5 * x : x;
}

/*
 * Calls between two runs of a bookkeeping step that takes cost_s, on calls of call_s: at least
 * base, and more when the step would otherwise take more than share of the calls' time, up to 8x
 * base (so that AUTO still sees a change of the data within 8 configured periods). On 4 shm
 * processes sharing 2 cores the record exchange with its decision took 60-85 us and a re-measure
 * 0.17-3.7 ms (more with the density), on calls whose scheme took 0.11-0.73 ms: at the fixed
 * periods of 16 and 100 a few percent of the calls' time (docs/algorithms.md).
 */
static long bookkeeping_period(long base, double cost_s, double call_s, double share)
{
    if (base < 1)
        base = 1;
    if (!(share > 0) || !(cost_s > 0) || !(call_s > 0))
        return base;
    double calls = ceil(cost_s / (share * call_s)), most = 8.0 * (double)base;
    return calls <= (double)base ? base : (long)(calls < most ? calls : most);
}

/* Fold one call's agreed time into the key's call time, slowly: it only spaces the bookkeeping. */
static void note_call(profile_slot *sl, double seconds)
{
    if (seconds > 0)
        sl->call_s = sl->call_s > 0 ? 0.8 * sl->call_s + 0.2 * seconds : seconds;
}

/* Fold one call's slowest-rank / median-rank ratio into the key's spread, slowly: the ratio of
 * one call is as noisy as the slowest rank it picks out. */
static void note_spread(profile_slot *sl, double median_s, double max_s)
{
    if (!(median_s > 0) || !(max_s >= median_s))
        return;
    double x = max_s / median_s;
    sl->spread = sl->spread > 0 ? 0.9 * sl->spread + 0.1 * x : x;
}

/*
 * Calibrate the model's machine constants from this tensor's own calls, with values every rank
 * shares (maxima over ranks from the records), unless ZEN_NET_LAT_US / ZEN_SPARSE_CPU_SHARE fix
 * them:
 *   latency  the record exchange is one step of n - 1 messages, modelled as
 *            latency (1 + (n - 2) overhead / latency): its measured time gives the latency
 *   CPU      the coalesce every call runs (api.c) is the sort + copy kernel on the largest input:
 *            measured / predicted (when it is long enough to time) is how much less of a core a
 *            rank gets than the model assumes; inproc copies are the bandwidth, so that scales too
 * Both change every scheme alike; what they miss per scheme the correction in auto_tune.c learns.
 * Neither applies when more ranks than cores share the host (net->msg_cpu_s set): there the
 * model charges each message's CPU and stretches the work by the core share itself.
 */
static void calibrate_net(const zen_sparse_ctx *ctx, choice *ch, zen_net_model *net)
{
    int n = ctx->comm->size;
    if (ch->fresh) {
        ch->slot.lat_s = 0;
        ch->slot.cpu_scale = 0;
    }
    double ovr = net->overhead_s > 0 ? net->overhead_s / net->latency_s : ZEN_COST_MSG_OVERHEAD;
    if (!ch->fresh && ch->xchg_s > 0)
        ch->slot.lat_s = ema(ch->slot.lat_s, ch->xchg_s / (1 + (n - 2) * ovr));
    /* Only across hosts: on one host (inproc, shm) the exchange's time is mostly the ranks'
     * arrival skew and wake-ups, not a latency every step pays (with it, the model predicted the
     * schemes of 2 inproc ranks 1.3-2.6x too slow), and oversubscribed the model charges each
     * message's CPU instead. */
    const zen_transport_traits *tr = zen__transport_traits(zen_comm_transport(ctx->comm));
    int one_host = tr->reach == ZEN_REACH_THREADS || tr->reach == ZEN_REACH_HOST;
    if (ch->slot.lat_s > 0 && !(zen__param_double("NET_LAT_US") > 0) && !one_host) {
        net->latency_s = ch->slot.lat_s;
        net->overhead_s = ovr * ch->slot.lat_s;
    }
    const zen_cpu_model *c = &net->cpu;
    double share = c->share > 0 ? c->share : 1;
    double coal = ch->nnz_max * (c->sort + 4.0 * ctx->local->width * c->copy_byte) * 1e-9 / share;
    if (coal > 20e-6 && ch->coal_s > 0)
        ch->slot.cpu_scale = ema(ch->slot.cpu_scale, ch->coal_s / coal);
    /* oversubscribed, the share already stretches the kernels by ranks / cores, and the largest
     * of n wall-time samples of a preemptible kernel only adds the ranks' time-slicing noise */
    if (ch->slot.cpu_scale > 1 && !(zen__param_double("SPARSE_CPU_SHARE") > 0) &&
        !(net->msg_cpu_s > 0)) {
        net->cpu.share = share / ch->slot.cpu_scale;
        if (tr->wire_copies == 0) /* the bandwidth is the ranks' own memcpy */
            net->bytes_per_s /= ch->slot.cpu_scale;
    }
}

/* The model's predictions for the real output kind with the constants net. */
static void predict(const zen_sparse_ctx *ctx, zen_sparse_profile *p, const zen_net_model *net,
                    double pred[ZEN_SPARSE_SCHEME_COUNT])
{
    const zen_coo *c = ctx->local;
    p->dense_output = ctx->dense_out != NULL;
    p->any_order = ctx->opts->any_order;
    p->global_topk = (double)ctx->opts->global_topk;
    zen__sparse_predict(ctx->comm->size, c->rows, c->width, p, net,
                        zen__param_long("SPARSE_BLOCK_SIZE"), pred);
    zen__auto_tune_bias(pred);
}

/* What stats.predicted_s reports: the prediction times the key's machine-wide scale once two
 * schemes have been measured (zen__auto_tune_scale; online calibration on), else the model with
 * calibrate_net's constants. The scale is learned from the times the tuner is told, the ranks'
 * median (zen__auto_tune_call_time), and a call costs the job its slowest rank's time, so it is
 * taken times the key's usual slowest / median ratio (spread). The decision does not use it. */
static void report_model(zen_sparse_stats *stats, const zen_auto_tune *t, int calibrate_online,
                         double spread, const double *pred, const double *model)
{
    double g = t && calibrate_online ? zen__auto_tune_scale(t) * (spread > 0 ? spread : 1) : 0;
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        stats->predicted_s[s] = g > 0 ? pred[s] * g : model[s];
}

/*
 * The model's prediction (calibrated online, calibrate_net) goes to the statistics; the decision
 * of a keyed tensor converges on measurement (auto_tune.h). The tuner is fed the prediction with
 * the configured constants: it uses it to normalise measured times by the size of the work and as
 * the prior of schemes not measured yet, and a normaliser that moves with the online calibration
 * would make times measured before and after a recalibration incomparable.
 */
static zen_sparse_scheme decide(zen_sparse_ctx *ctx, choice *ch, zen_sparse_profile *p)
{
    zen_net_model net;
    zen__net_model_for_ranks(zen_comm_transport(ctx->comm), ctx->comm->size, &net);
    double pred[ZEN_SPARSE_SCHEME_COUNT], model[ZEN_SPARSE_SCHEME_COUNT];
    profile_slot *sl = &ch->slot;
    sl->calibrate_online = zen__param_long("SPARSE_CALIBRATE_ONLINE") != 0;
    predict(ctx, p, &net, pred);
    memcpy(model, pred, sizeof model);
    if (ch->keyed && ch->have && sl->calibrate_online) {
        calibrate_net(ctx, ch, &net);
        predict(ctx, p, &net, model);
    }
    if (!(ch->keyed && ch->have)) {
        report_model(ctx->stats, NULL, 0, 0, pred, model);
        return zen__sparse_cheapest(model);
    }
    zen__auto_tune_params_default(&sl->tp);
    sl->regime_factor = zen__param_double("SPARSE_AUTO_REGIME");
    /* a new regime (zen__auto_regime_moved) starts the tuner over like a new key; the machine
     * constants calibrate_net learned stay */
    if (ch->fresh || ch->regime) {
        zen__auto_tune_init(&sl->tune);
        sl->spread = sl->call_s = 0;
        sl->regime_density = p->density;
    } else if (ch->last_agreed) {
        zen__auto_tune_observe(&sl->tune, &sl->tp, ch->last_s);
        note_spread(sl, ch->last_s, ch->last_max);
        note_call(sl, ch->last_s);
    } else
        zen__auto_tune_drop(&sl->tune);
    /* every input agreed: the maxima over the ranks' records and the agreed call times */
    double share = zen__param_double("SPARSE_AUTO_OVERHEAD");
    sl->recheck_every =
        bookkeeping_period(zen__param_long("SPARSE_AUTO_RECHECK"), ch->full_s, sl->call_s, share);
    sl->profile_every =
        bookkeeping_period(zen__param_long("SPARSE_PROFILE_PERIOD"), ch->deep_s, sl->call_s, share);
    zen_sparse_scheme s = zen__auto_tune_choose(&sl->tune, &sl->tp, pred, NULL, NULL);
    report_model(ctx->stats, &sl->tune, sl->calibrate_online, sl->spread, pred, model);
    memcpy(ch->slot.pred, pred, sizeof pred);
    memcpy(ch->slot.model, model, sizeof model);
    ch->slot.pending_s = 0;
    ch->slot.calls++;
    ch->slot.since_full = 0;
    return s;
}

/* A keyed call between record exchanges, when every rank holds the same agreed slot (api.c
 * compared the digests in its agreement): the last call's time (maximum over ranks, from the
 * agreement) is folded in and the tuner decides from the stored predictions and tunables (a
 * change of a tunable takes effect at the next exchange). *done = 0 when the slot says a record
 * exchange is due. */
static void quiet_decide(zen_sparse_ctx *ctx, zen_sparse_scheme *scheme, int *done)
{
    profile_slot sl;
    *done = 0;
    if (!ctx->auto_agreed || !ctx->opts->key || !zen__auto_slot_get(zen__auto_slot_key(ctx), &sl) ||
        sl.since_full + 1 >= (uint64_t)(sl.recheck_every > 1 ? sl.recheck_every : 1) ||
        sl.calls >= (uint64_t)(sl.profile_every > 1 ? sl.profile_every : 1))
        return;
    zen__auto_tune_observe(&sl.tune, &sl.tp, ctx->auto_last_s);
    note_spread(&sl, ctx->auto_last_s, ctx->auto_last_max_s);
    note_call(&sl, ctx->auto_last_s);
    *scheme = zen__auto_tune_choose(&sl.tune, &sl.tp, sl.pred, NULL, NULL);
    sl.pending_s = 0;
    sl.calls++;
    sl.since_full++;
    zen__auto_slot_put(&sl);
    report_model(ctx->stats, &sl.tune, sl.calibrate_online, sl.spread, sl.pred, sl.model);
    ctx->stats->density = sl.density;
    ctx->stats->gamma_n = sl.gamma_n;
    ctx->stats->skew = sl.skew;
    *done = 1;
}

static _Thread_local uint64_t consults;

uint64_t zen__sparse_auto_consults(void)
{
    return consults;
}

zen_status zen__sparse_choose(zen_sparse_ctx *ctx, zen_sparse_scheme *scheme)
{
    zen_comm *comm = ctx->comm;
    int n = comm->size, done;
    consults++;
    quiet_decide(ctx, scheme, &done);
    if (done)
        return ZEN_OK;
    int64_t t0 = zen_now_ns();
    choice ch;
    memset(&ch, 0, sizeof ch);
    zen__auto_geometry(ctx->local, n, &ch.g);
    ch.keyed = ctx->opts && ctx->opts->key && n > 1;
    ch.have = ch.keyed && zen__auto_slot_get(zen__auto_slot_key(ctx), &ch.slot);
    int had = ch.have;
    if (!ch.have)
        zen__auto_tune_init(&ch.slot.tune);
    ch.stride = REC_WORDS(n);
    ch.recs = zen__malloc_array(ch.stride * (size_t)n, sizeof *ch.recs);
    uint64_t *rec = zen__malloc_array(ch.stride, sizeof *rec);
    double *load = zen__malloc_array((size_t)n, sizeof *load);
    zen_status st = ZEN_OK;
    if (!ch.recs || !rec || !load) {
        st = zen__fail(comm, ZEN_ENOMEM, "sparse profile: out of memory for %d ranks", n);
    } else {
        zen__auto_own_record(ctx, &ch, rec);
        if (n == 1)
            memcpy(ch.recs, rec, ch.stride * sizeof *rec);
        else
            st = zen__auto_gather_profile(ctx, &ch, rec);
    }
    if (st == ZEN_OK) {
        zen_sparse_profile p;
        zen__auto_summarize(&ch, n, load, &p);
        *scheme = decide(ctx, &ch, &p);
        ctx->stats->density = ch.slot.density = p.density;
        ctx->stats->gamma_n = ch.slot.gamma_n = p.gamma_n;
        ctx->stats->skew = ch.slot.skew = p.skew;
        /* reported at the next exchange; a key's first call is no measure (first touches) */
        double full = zen_us_between(t0, zen_now_ns()) * 1e-6 - ch.deep_now_s;
        ch.slot.own_full_s = had && full > 0 ? full : 0;
        ch.slot.own_nnz = ctx->local->nnz;
        if (ch.keyed && ch.have)
            zen__auto_slot_put(&ch.slot);
    }
    zen__free(ch.recs);
    zen__free(rec);
    zen__free(load);
    return st;
}

static _Atomic(zen_sparse_auto_time_fn) time_hook;

void zen__sparse_auto_time_hook(zen_sparse_auto_time_fn fn)
{
    atomic_store(&time_hook, fn);
}

void zen__sparse_auto_observe(const zen_sparse_ctx *ctx, double seconds)
{
    if (!ctx->opts || !ctx->opts->key || ctx->comm->size <= 1)
        return;
    zen_sparse_auto_time_fn hook = atomic_load(&time_hook);
    if (hook)
        seconds = hook(ctx->comm->rank, ctx->stats->scheme, seconds);
    zen__auto_slot_note_time(zen__auto_slot_key(ctx), seconds);
}
