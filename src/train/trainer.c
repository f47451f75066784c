/*
 * The training loop of `zen train`.
 *
 * zen_train_run loads the dataset once, then runs rank_main on every rank: dp x tp threads of
 * this process (inproc, the default) or this process alone when it was started as one rank of
 * a tcp/mpi world (zen launch, mpirun).
 *
 * One step on one rank:
 *   1. zero grads; take sequences [dp_rank*B, (dp_rank+1)*B) of the step's global batch
 *   2. forward + backward (tp collectives inside the tp layers)        -> compute (+ tp comm)
 *   3. barrier over dp                                                -> wait (slowest replica)
 *   4. dp gradient sync (trainer_sync.c)                              -> comm
 *   5. AdamW step (global-norm clip over tp, cosine schedule)
 *   6. average the loss over dp; log; evaluate; checkpoint
 * Because the batch of a step is a pure function of (seed, step) and the dp average of per-rank
 * mean gradients equals the gradient of the global mean, every (dp, tp) at the same global batch
 * trains the same model up to floating-point summation order.
 */
#include "trainer.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "checkpoint.h"
#include "hash.h"

void zen_train_options_default(zen_train_options *o)
{
    memset(o, 0, sizeof *o);
    o->layers = 2;
    o->d_model = 128;
    o->heads = 4;
    o->d_ff = 512;
    o->ctx = 64;
    o->steps = 600;
    o->batch = 8;
    o->seq = 32;
    o->lr = 2e-3f;
    o->min_lr = 2e-4f;
    o->weight_decay = 0.1f;
    o->grad_clip = 1.0f;
    o->warmup = 50;
    o->seed = 1;
    o->dp = 2;
    o->tp = 2;
    o->transport = ZEN_TRANSPORT_AUTO;
    o->threads = 0;
    o->emb_sync = ZEN_EMB_SYNC_SPARSE;
    o->sparse_scheme = ZEN_SPARSE_AUTO;
    o->topk = 0;
    o->topk_global = 0;
    o->topk_warmup = 0;
    o->topk_start = 0.25;
    o->topk_dense_from = 0;
    o->topk_momentum = 0;
    o->topk_rescale = 0;
    o->bucket_bytes = 1 << 20;
    zen_tp_options tpo = ZEN_TP_OPTIONS_INIT;
    o->tp_opts = tpo;
    zen_tp_emulation_init(&o->tp_emulation);
    o->data_path = NULL;
    o->cache_dir = "data";
    o->vocab_max = 4096;
    o->min_count = 2;
    o->eval_interval = 100;
    o->eval_batches = 8;
    o->log_interval = 20;
    o->sample_tokens = 40;
    o->prompt = "and god said";
    o->checkpoint_interval = 0;
}

void zen_train_result_free(zen_train_result *r)
{
    if (!r)
        return;
    free(r->losses);
    free(r->params);
    r->losses = NULL;
    r->params = NULL;
}

/* ---- shared run state ---- */

typedef struct run_ctx {
    const zen_train_options *o;
    const zen_dataset *ds;
    zen_train_result *res;
    char config[2048];
    char resume_path[1024];
    char ckpt_path[1024];
    double unigram;
    FILE *metrics;
    int ranks_here; /* ranks in this process */
    /* the failure reason of each rank in this process; the run reports the first one that is
     * not a consequence of another rank's abort */
    char (*rank_err)[512];
    zen_status *rank_st;
} run_ctx;

/* Per-rank state. */
typedef struct rank_state {
    run_ctx *c;
    const zen_train_options *o;
    zen_comm *world, *tpc, *dpc;
    int wrank, dp_rank, tp_rank;
    zen_tp_group *group;
    zen_gpt *model;
    zen_adamw *opt;
    zen_trainer_sync *sync;
    int32_t *x, *y;
    long first_step;
    char err[512];
} rank_state;

static void rank_fail(rank_state *r, zen_status st, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* the failing call may have run on the tp or dp communicator: its error names the culprit
     * rank ("rank 3 aborted: ..."), the world's may be empty */
    const char *detail = "";
    zen_comm *comms[3] = { r->tpc, r->dpc, r->world };
    for (int i = 0; i < 3 && !*detail; i++)
        if (comms[i] && zen_comm_last_error(comms[i]))
            detail = zen_comm_last_error(comms[i]);
    snprintf(r->err, sizeof r->err, "rank %d: %s: %s%s%s", r->wrank, msg, zen_strerror(st),
             *detail ? " -- " : "", detail);
}

static void build_config(run_ctx *c, const zen_gpt_config *g)
{
    const zen_train_options *o = c->o;
    snprintf(c->config, sizeof c->config,
             "model.vocab=%d\nmodel.ctx=%d\nmodel.d_model=%d\nmodel.layers=%d\nmodel.heads=%d\n"
             "model.d_ff=%d\nmodel.seed=%llu\ndata.name=%s\ndata.vocab_digest=%016llx\n"
             "data.tokens=%zu\ntrain.seq=%d\ntrain.global_batch=%d\ntrain.lr=%.9g\n"
             "train.min_lr=%.9g\ntrain.weight_decay=%.9g\ntrain.grad_clip=%.9g\n"
             "train.warmup=%ld\ntrain.steps=%ld\ntrain.seed=%llu\ntrain.topk=%.9g\n",
             g->vocab, g->ctx, g->d_model, g->n_layer, g->n_head, g->d_ff,
             (unsigned long long)g->seed, c->ds->name,
             (unsigned long long)zen_vocab_digest(c->ds->vocab), c->ds->ntokens, o->seq,
             o->batch * o->dp, (double)o->lr, (double)o->min_lr, (double)o->weight_decay,
             (double)o->grad_clip, o->warmup, o->steps, (unsigned long long)o->seed, o->topk);
    /* only when set, so that checkpoints of runs without them still resume */
    size_t len = strlen(c->config);
    if (o->topk > 0 && (o->topk_warmup > 0 || o->topk_momentum > 0 || o->topk_rescale))
        snprintf(c->config + len, sizeof c->config - len,
                 "train.topk_warmup=%ld\ntrain.topk_start=%.9g\ntrain.topk_momentum=%.9g\n"
                 "train.topk_rescale=%d\n",
                 o->topk_warmup, o->topk_start, (double)o->topk_momentum, o->topk_rescale);
    len = strlen(c->config);
    if (o->topk > 0 && o->topk_dense_from > 0)
        snprintf(c->config + len, sizeof c->config - len, "train.topk_dense_from=%.9g\n",
                 o->topk_dense_from);
}

static void model_config(const run_ctx *c, zen_gpt_config *g)
{
    zen_gpt_config_default(g);
    g->vocab = (int)zen_vocab_size(c->ds->vocab);
    g->ctx = c->o->ctx;
    g->d_model = c->o->d_model;
    g->n_layer = c->o->layers;
    g->n_head = c->o->heads;
    g->d_ff = c->o->d_ff;
    g->seed = c->o->seed;
}

/* ---- evaluation ---- */

/* Mean validation loss over eval_batches x (dp x batch) fixed sequences. Collective (world). */
static zen_status evaluate(rank_state *r, float *out)
{
    const zen_train_options *o = r->o;
    size_t per = (size_t)o->batch;
    size_t nval = (size_t)o->eval_batches * (size_t)o->dp * per;
    size_t first = (size_t)r->dp_rank * (size_t)o->eval_batches * per;
    double sum = 0;
    zen_status st = ZEN_OK;
    zen_gpt_set_training(r->model, 0);
    for (int b = 0; b < o->eval_batches && st == ZEN_OK; b++) {
        st = zen_data_val_batch(r->c->ds, nval, first + (size_t)b * per, per, (size_t)o->seq, r->x,
                                r->y);
        float loss = 0;
        if (st == ZEN_OK)
            st = zen_gpt_forward(r->model, r->x, r->y, (int)per, o->seq, &loss);
        sum += (double)loss * (double)per;
    }
    zen_gpt_set_training(r->model, 1);
    if (st != ZEN_OK)
        return st;
    if (o->dp > 1)
        st = zen_allreduce(r->dpc, &sum, &sum, 1, ZEN_F64, ZEN_SUM);
    *out = (float)(sum / (double)nval);
    return st;
}

/* ---- checkpoints ---- */

static zen_status save_checkpoint(rank_state *r, long next_step)
{
    run_ctx *c = r->c;
    size_t n = zen_gpt_full_param_count(zen_gpt_get_config(r->model));
    zen_status st = ZEN_OK;
    int32_t ok = 1;
    float *w = NULL, *m1 = NULL, *m2 = NULL;
    if (r->dp_rank == 0) {
        w = zen_train_malloc_array(n, sizeof *w);
        m1 = zen_train_malloc_array(n, sizeof *m1);
        m2 = zen_train_malloc_array(n, sizeof *m2);
        long step = 0;
        st = (w && m1 && m2) ? ZEN_OK : ZEN_ENOMEM;
        /* every tp rank of replica 0 joins the gathers; world rank 0 writes */
        if (st == ZEN_OK)
            st = zen_gpt_export(r->model, w);
        if (st == ZEN_OK)
            st = zen_adamw_export_state(r->opt, m1, m2, &step);
        if (st != ZEN_OK)
            rank_fail(r, st, "gathering the checkpoint");
        if (st == ZEN_OK && r->wrank == 0) {
            zen_ckpt_section sec[3] = { { "weights", w, n },
                                        { "adam.m", m1, n },
                                        { "adam.v", m2, n } };
            char err[512];
            st = zen_ckpt_save(c->ckpt_path, c->config, (uint64_t)next_step, sec, 3, err,
                               sizeof err);
            if (st != ZEN_OK)
                snprintf(r->err, sizeof r->err, "%s", err);
        }
        ok = st == ZEN_OK;
    }
    free(w);
    free(m1);
    free(m2);
    /* everyone learns whether the write worked, so a failure stops all ranks */
    zen_status bst = zen_broadcast(r->world, &ok, 1, ZEN_I32, 0);
    if (bst != ZEN_OK)
        return bst;
    return ok ? ZEN_OK : (st != ZEN_OK ? st : ZEN_EIO);
}

static zen_status load_checkpoint(rank_state *r, uint64_t *checksum)
{
    run_ctx *c = r->c;
    size_t n = zen_gpt_full_param_count(zen_gpt_get_config(r->model));
    float *w = zen_train_malloc_array(n, sizeof *w);
    float *m1 = zen_train_malloc_array(n, sizeof *m1);
    float *m2 = zen_train_malloc_array(n, sizeof *m2);
    zen_status st = (w && m1 && m2) ? ZEN_OK : ZEN_ENOMEM;
    uint64_t step = 0;
    if (st == ZEN_OK) {
        zen_ckpt_section sec[3] = { { "weights", w, n }, { "adam.m", m1, n }, { "adam.v", m2, n } };
        char err[512];
        st = zen_ckpt_load(c->resume_path, c->config, &step, sec, 3, err, sizeof err);
        if (st != ZEN_OK)
            snprintf(r->err, sizeof r->err, "%s", err);
        else
            *checksum = zen_train_fnv1a(w, n * sizeof *w, step);
    }
    if (st == ZEN_OK && step > (uint64_t)r->o->steps) {
        snprintf(r->err, sizeof r->err, "checkpoint %s is at step %llu, beyond --steps %ld",
                 c->resume_path, (unsigned long long)step, r->o->steps);
        st = ZEN_EMISMATCH;
    }
    if (st == ZEN_OK && (st = zen_gpt_import(r->model, w)) != ZEN_OK)
        rank_fail(r, st, "importing checkpoint weights");
    if (st == ZEN_OK && (st = zen_adamw_import_state(r->opt, m1, m2, (long)step)) != ZEN_OK)
        rank_fail(r, st, "importing optimizer state");
    if (st == ZEN_OK)
        r->first_step = (long)step;
    free(w);
    free(m1);
    free(m2);
    return st;
}

/* ---- the loop ---- */

typedef struct interval_acc {
    double ms_step, ms_compute, ms_comm, ms_wait;
    uint64_t bytes, dense;
    long n;
} interval_acc;

/* What one optimizer step produced: the numbers the report and the result are made of. */
typedef struct step_out {
    float loss, grad_norm, lr;
    zen_sync_stats sync;
    zen_tp_stats tp;
    double ms_step, ms_compute, ms_comm, ms_wait, tp_ms;
    double ms_opt; /* the optimizer step (part of ms_compute) */
} step_out;

/* The loop's running sums: the interval since the last progress line, and the timed steps. */
typedef struct loop_acc {
    interval_acc interval;
    double total_ms;
    long timed_steps;
    float last_val;
    double tp_gemm_ms; /* timed steps: this rank's tp GEMM time (zen_tp_stats.ms_compute) */
    double slow_max;   /* largest emulated slowdown of this rank (zen_tp_stats.slow_factor) */
} loop_acc;

/* Forward and backward on this rank's batch; wait for the dp replicas (the wait is timed apart
 * from the sync so stragglers show as wait, not communication); sync the gradients; optional
 * dump; optimizer step; the global batch's loss. t[0..4] are the boundaries of those phases. */
static zen_status run_step(rank_state *r, long step, step_out *out, int64_t t[5])
{
    const zen_train_options *o = r->o;
    zen_status st;
    t[0] = zen_trainer_now_ns();
    zen_gpt_zero_grad(r->model);
    zen_data_train_batch(r->c->ds, o->seed, (uint64_t)step, (size_t)r->dp_rank * o->batch,
                         (size_t)o->batch, (size_t)o->seq, r->x, r->y);
    if ((st = zen_gpt_forward(r->model, r->x, r->y, o->batch, o->seq, &out->loss)) != ZEN_OK) {
        rank_fail(r, st, "forward at step %ld", step);
        return st;
    }
    if ((st = zen_gpt_backward(r->model)) != ZEN_OK) {
        rank_fail(r, st, "backward at step %ld", step);
        return st;
    }
    t[1] = zen_trainer_now_ns();
    if (o->dp > 1 && (st = zen_barrier(r->dpc)) != ZEN_OK) {
        rank_fail(r, st, "dp barrier at step %ld", step);
        return st;
    }
    t[2] = zen_trainer_now_ns();
    /* tp balancing may permute a layer's columns differently in each replica (tp helper) */
    st = o->dp > 1 ? zen_tp_group_canonical_grads(r->group, 1) : ZEN_OK;
    if (st == ZEN_OK)
        st = zen_trainer_sync_grads(r->sync, step, &out->sync);
    if (st == ZEN_OK && o->dp > 1)
        st = zen_tp_group_canonical_grads(r->group, 0);
    if (st != ZEN_OK) {
        rank_fail(r, st, "gradient sync at step %ld", step);
        return st;
    }
    t[3] = zen_trainer_now_ns();
    if (o->dump_grads_dir && r->tp_rank == 0 &&
        (st = zen_trainer_dump_grads(o->dump_grads_dir, r->dp_rank, o->dp, step, r->sync)) !=
            ZEN_OK) {
        rank_fail(r, st, "writing gradients to %s", o->dump_grads_dir);
        return st;
    }
    int64_t t_opt = zen_trainer_now_ns();
    st = zen_adamw_step(r->opt, &out->grad_norm, &out->lr);
    out->ms_opt = (double)(zen_trainer_now_ns() - t_opt) / 1e6;
    if (st != ZEN_OK) {
        rank_fail(r, st, "optimizer step %ld", step);
        return st;
    }
    /* loss of the global batch: mean of the replicas' means (equal batch sizes) */
    if (o->dp > 1 &&
        (st = zen_allreduce(r->dpc, &out->loss, &out->loss, 1, ZEN_F32, ZEN_AVG)) != ZEN_OK) {
        rank_fail(r, st, "loss allreduce at step %ld", step);
        return st;
    }
    t[4] = zen_trainer_now_ns();
    return ZEN_OK;
}

/* Split the step's time into compute, communication (gradient sync plus tp's own waits) and
 * waiting for the dp replicas. */
static void step_times(rank_state *r, const int64_t t[5], step_out *out)
{
    memset(&out->tp, 0, sizeof out->tp);
    out->tp.keep_fraction = 1;
    zen_tp_group_stats(r->group, &out->tp);
    out->tp_ms = r->o->tp > 1 ? out->tp.ms_wait : 0;
    out->ms_step = (double)(t[4] - t[0]) / 1e6;
    out->ms_wait = (double)(t[2] - t[1]) / 1e6;
    out->ms_comm = (double)(t[3] - t[2]) / 1e6 + out->tp_ms;
    out->ms_compute = out->ms_step - out->ms_wait - out->ms_comm;
    if (out->ms_compute < 0)
        out->ms_compute = 0;
}

static void accumulate(loop_acc *a, const step_out *s, int timed)
{
    if (timed) {
        a->total_ms += s->ms_step;
        a->timed_steps++;
        a->tp_gemm_ms += s->tp.ms_compute;
        if (s->tp.slow_factor > a->slow_max)
            a->slow_max = s->tp.slow_factor;
    }
    a->interval.ms_step += s->ms_step;
    a->interval.ms_compute += s->ms_compute;
    a->interval.ms_comm += s->ms_comm;
    a->interval.ms_wait += s->ms_wait;
    a->interval.bytes += s->sync.bytes_sent;
    a->interval.dense += s->sync.bytes_dense;
    a->interval.n++;
}

/* Rank 0: the step's metrics line, and the progress line with the interval's averages. A metrics
 * line that cannot be written (a full disk) fails the run: its record would be silently cut. */
static zen_status report_step(rank_state *r, long step, long stop, const step_out *s, float val,
                              const loop_acc *a)
{
    const zen_train_options *o = r->o;
    double tokens_per_step = (double)o->dp * o->batch * o->seq;
    zen_step_report rep;
    memset(&rep, 0, sizeof rep);
    rep.step = step;
    rep.steps = o->steps;
    rep.loss = s->loss;
    rep.val_loss = val;
    rep.lr = s->lr;
    rep.grad_norm = s->grad_norm;
    rep.ms_step = s->ms_step;
    rep.ms_compute = s->ms_compute;
    rep.ms_comm = s->ms_comm;
    rep.ms_wait = s->ms_wait;
    rep.ms_opt = s->ms_opt;
    memcpy(rep.ms_sync_phase, s->sync.ms_phase, sizeof rep.ms_sync_phase);
    memcpy(rep.topk_phase_us, s->sync.topk_phase_us, sizeof rep.topk_phase_us);
    rep.tokens_per_s = tokens_per_step / (s->ms_step / 1e3);
    rep.bytes_synced = s->sync.bytes_sent;
    rep.bytes_dense = s->sync.bytes_dense;
    rep.keep_fraction = s->sync.keep_fraction;
    rep.emb_scheme = o->dp > 1 ? zen_sparse_scheme_name(s->sync.emb_scheme) : "none";
    rep.emb_rows = s->sync.emb_rows;
    rep.balance = zen_tp_balance_name(o->tp_opts.balance);
    rep.stragglers = s->tp.nstragglers;
    rep.tp_keep_fraction = s->tp.min_keep_fraction > 0 ? s->tp.min_keep_fraction : 1.0;
    rep.migrated_cols = s->tp.migrated_cols;
    rep.tp_ms_wait = s->tp_ms;
    rep.late_rank = o->tp > 1 ? s->tp.last_arrival_rank : -1;
    rep.late_ms = s->tp.arrival_spread_ms;
    double avg = a->timed_steps ? a->total_ms / (double)a->timed_steps : s->ms_step;
    rep.eta_s = avg * (double)(stop - step - 1) / 1e3;
    if (r->c->metrics && zen_report_metrics(r->c->metrics, &rep) != 0) {
        snprintf(r->err, sizeof r->err, "rank %d: cannot write --metrics %s: %s", r->wrank,
                 o->metrics_path, strerror(errno));
        return ZEN_EIO;
    }
    int last = step + 1 == stop;
    int log_now = (o->log_interval > 0 && (step + 1) % o->log_interval == 0) ||
                  step == r->first_step || last || !isnan(val);
    const interval_acc *acc = &a->interval;
    if (!o->quiet && log_now && acc->n > 0) {
        /* the line shows the interval's averages, so one slow step does not mislead */
        rep.ms_step = acc->ms_step / (double)acc->n;
        rep.ms_compute = acc->ms_compute / (double)acc->n;
        rep.ms_comm = acc->ms_comm / (double)acc->n;
        rep.ms_wait = acc->ms_wait / (double)acc->n;
        rep.bytes_synced = acc->bytes / (uint64_t)acc->n;
        rep.bytes_dense = acc->dense / (uint64_t)acc->n;
        rep.tokens_per_s = tokens_per_step / (rep.ms_step / 1e3);
        zen_report_progress(stdout, &rep);
    }
    return ZEN_OK;
}

/* Validation every eval_interval steps and after the last one: *val and *last_val get the loss;
 * *val is NAN when not evaluated. */
static zen_status maybe_evaluate(rank_state *r, long step, long stop, float *val, float *last_val)
{
    const zen_train_options *o = r->o;
    *val = NAN;
    if (!((o->eval_interval > 0 && (step + 1) % o->eval_interval == 0) || step + 1 == stop))
        return ZEN_OK;
    zen_status st = evaluate(r, val);
    if (st != ZEN_OK)
        rank_fail(r, st, "evaluation at step %ld", step);
    *last_val = *val;
    return st;
}

/* The straggler figures of the summary (docs/training.md, "Straggler cost"): F, the largest
 * emulated slowdown of any rank, and r, the slowest rank's mean tp GEMM time per step over the
 * fastest rank's. The emulation multiplies a straggler's GEMM time by its factor, so without
 * balancing r is about F; balancing that prunes or moves the straggler's work brings r towards 1,
 * and (F - r) / (F - 1) is the share of the gap it recovered. One allreduce (MAX) over the world
 * of {mean, -mean, F}, on every rank. */
static zen_status straggler_figures(rank_state *r, const loop_acc *a)
{
    zen_train_result *res = r->c->res;
    if (r->o->tp < 2 || a->timed_steps == 0)
        return ZEN_OK;
    double mean = a->tp_gemm_ms / (double)a->timed_steps;
    double v[3] = { mean, -mean, a->slow_max };
    zen_status st = zen_allreduce(r->world, v, v, 3, ZEN_F64, ZEN_MAX);
    if (st != ZEN_OK) {
        rank_fail(r, st, "straggler figures at the end of the run");
        return st;
    }
    if (r->wrank == 0 && res && v[2] > 1.0 && -v[1] > 0) {
        res->straggler_factor = v[2];
        res->straggler_gemm_ratio = v[0] / -v[1];
    }
    return ZEN_OK;
}

/* The training loop: each step runs, is timed and accounted, evaluated when due, reported by
 * rank 0 and checkpointed at the interval; a final checkpoint and the result close the run. */
static zen_status train_loop(rank_state *r)
{
    const zen_train_options *o = r->o;
    zen_train_result *res = r->c->res;
    long stop = o->stop_at > 0 && o->stop_at < o->steps ? o->stop_at : o->steps;
    long nrec = stop - r->first_step;
    int lead = r->wrank == 0;
    zen_status st = ZEN_OK;
    if (lead && res) {
        res->first_step = r->first_step;
        res->losses = zen_train_calloc(nrec > 0 ? (size_t)nrec : 1, sizeof(float));
        if (!res->losses)
            return ZEN_ENOMEM;
    }
    loop_acc acc;
    memset(&acc, 0, sizeof acc);
    acc.last_val = NAN;
    for (long step = r->first_step; step < stop; step++) {
        step_out s;
        int64_t t[5];
        if ((st = run_step(r, step, &s, t)) != ZEN_OK)
            return st;
        step_times(r, t, &s);
        /* step 1 warms caches: it is timed only when it is the only one */
        accumulate(&acc, &s, step > r->first_step || stop - r->first_step == 1);
        if (lead && res)
            res->losses[step - r->first_step] = s.loss;
        float val;
        if ((st = maybe_evaluate(r, step, stop, &val, &acc.last_val)) != ZEN_OK)
            return st;
        int last = step + 1 == stop;
        if (lead && (st = report_step(r, step, stop, &s, val, &acc)) != ZEN_OK)
            return st;
        if (o->log_interval <= 0 || (step + 1) % o->log_interval == 0 || last)
            memset(&acc.interval, 0, sizeof acc.interval);
        if (o->checkpoint_dir && o->checkpoint_interval > 0 &&
            (step + 1) % o->checkpoint_interval == 0 && !last) {
            if ((st = save_checkpoint(r, step + 1)) != ZEN_OK)
                return st;
        }
    }
    if (o->checkpoint_dir && stop > r->first_step && (st = save_checkpoint(r, stop)) != ZEN_OK)
        return st;
    if ((st = straggler_figures(r, &acc)) != ZEN_OK)
        return st;
    if (lead && res) {
        double tokens_per_step = (double)o->dp * o->batch * o->seq;
        res->steps_done = stop;
        res->final_val_loss = acc.last_val;
        res->tokens_per_s =
            acc.timed_steps ? tokens_per_step / (acc.total_ms / (double)acc.timed_steps / 1e3) : 0;
    }
    return ZEN_OK;
}

/* Share of the straggler's GEMM gap that balancing recovered: (F - r) / (F - 1). */
static double straggler_recovered(const zen_train_result *res)
{
    double f = res->straggler_factor;
    return (f - res->straggler_gemm_ratio) / (f - 1);
}

static void print_summary(rank_state *r, const char *sample)
{
    run_ctx *c = r->c;
    const zen_train_options *o = r->o;
    zen_train_result *res = c->res;
    const zen_gpt_config *g = zen_gpt_get_config(r->model);
    size_t np = zen_gpt_full_param_count(g);
    float first = res->losses && res->steps_done > res->first_step ? res->losses[0] : NAN;
    float lastl = res->losses && res->steps_done > res->first_step
                      ? res->losses[res->steps_done - res->first_step - 1]
                      : NAN;
    if (o->json) {
        printf("{\"steps\":%ld,\"dp\":%d,\"tp\":%d,\"params\":%zu,\"vocab\":%d", res->steps_done,
               o->dp, o->tp, np, g->vocab);
        zen_json_number(stdout, "first_loss", first);
        zen_json_number(stdout, "final_loss", lastl);
        zen_json_number(stdout, "val_loss", res->final_val_loss);
        zen_json_number(stdout, "unigram_loss", c->unigram);
        zen_json_number(stdout, "tokens_per_s", res->tokens_per_s);
        printf(",\"blas_core\":\"%s\"", zen_train_blas_core());
        if (res->straggler_factor > 1) {
            zen_json_number(stdout, "straggler_factor", res->straggler_factor);
            zen_json_number(stdout, "straggler_gemm_ratio", res->straggler_gemm_ratio);
            zen_json_number(stdout, "straggler_recovered", straggler_recovered(res));
        }
        printf(",\"sample\":");
        /* minimal JSON string escaping for the sample text */
        putchar('"');
        for (const char *p = sample; p && *p; p++) {
            if (*p == '"' || *p == '\\')
                printf("\\%c", *p);
            else if (*p == '\n')
                printf("\\n");
            else if ((unsigned char)*p < 0x20)
                printf("\\u%04x", *p);
            else
                putchar(*p);
        }
        printf("\"}\n");
        return;
    }
    printf("\nsummary: %ld steps, dp %d x tp %d, %.2fM parameters, vocab %d\n", res->steps_done,
           o->dp, o->tp, (double)np / 1e6, g->vocab);
    printf("  train loss  %.3f -> %.3f\n", first, lastl);
    printf("  val loss    %.3f   (unigram baseline %.3f: %s)\n", res->final_val_loss, c->unigram,
           res->final_val_loss < c->unigram ? "the model beats it" : "not beaten yet");
    printf("  throughput  %.0f tokens/s (OpenBLAS kernels: %s)\n", res->tokens_per_s,
           zen_train_blas_core());
    if (res->straggler_factor > 1)
        printf("  straggler   slowest rank's tp GEMM time %.2fx the fastest's (emulated slowdown "
               "%.2fx); balancing (%s) recovered %.0f%% of the gap\n",
               res->straggler_gemm_ratio, res->straggler_factor,
               zen_tp_balance_name(o->tp_opts.balance), 100 * straggler_recovered(res));
    if (sample && *sample) {
        printf("\nsample (prompt \"%s\"; one verse per line):\n  ", o->prompt ? o->prompt : "");
        for (const char *p = sample; *p; p++) {
            putchar(*p);
            if (*p == '\n' && p[1])
                printf("  ");
        }
        putchar('\n');
    }
    fflush(stdout);
}

/* Every rank states what it starts from (a checkpoint's step and checksum, or scratch), so none
 * trains on a replica the others lack. */
static zen_status agree_on_start(rank_state *r, const zen_gpt_config *g)
{
    uint64_t start_sum = 0;
    zen_status load_st = r->c->resume_path[0] ? load_checkpoint(r, &start_sum) : ZEN_OK;
    char agree_err[512] = "";
    zen_status st =
        zen_trainer_agree_start(r->world, load_st, (uint64_t)r->first_step, start_sum,
                                zen_gpt_full_param_count(g), agree_err, sizeof agree_err);
    if (st != ZEN_OK) {
        if (agree_err[0])
            snprintf(r->err, sizeof r->err, "rank %d: %s", r->wrank, agree_err);
        else if (!r->err[0])
            rank_fail(r, st, "agreeing on the starting checkpoint");
    }
    return st;
}

static void print_banner(const rank_state *r, const zen_gpt_config *g)
{
    const run_ctx *c = r->c;
    const zen_train_options *o = r->o;
    printf("zen train: %s, %zu train / %zu val tokens, vocab %d | model %d layers, d_model "
           "%d, %d heads, d_ff %d, %.2fM params | dp %d x tp %d (%s), global batch %d x %d "
           "tokens\n",
           c->ds->name, c->ds->ntrain, c->ds->ntokens - c->ds->ntrain, g->vocab, g->n_layer,
           g->d_model, g->n_head, g->d_ff, (double)zen_gpt_full_param_count(g) / 1e6, o->dp, o->tp,
           zen_transport_name(zen_comm_transport(r->world)), o->dp * o->batch, o->seq);
    printf("zen train: OpenBLAS kernels %s%s\n", zen_train_blas_core(),
           getenv("OPENBLAS_CORETYPE") ? " (from OPENBLAS_CORETYPE)" : "");
    if (r->first_step > 0)
        printf("zen train: resumed from %s at step %ld\n", c->resume_path, r->first_step);
    fflush(stdout);
}

/* The rank's communicators (tp inside dp), tp group, model, optimizer, gradient sync and batch
 * buffers; on failure r->err says which step failed. */
static zen_status setup_rank(rank_state *r, zen_gpt_config *g)
{
    const zen_train_options *o = r->o;
    zen_status st;
    if (zen_comm_size(r->world) != o->dp * o->tp) {
        snprintf(r->err, sizeof r->err, "the world has %d ranks but --dp %d x --tp %d = %d",
                 zen_comm_size(r->world), o->dp, o->tp, o->dp * o->tp);
        return ZEN_EMISMATCH;
    }
    r->tp_rank = r->wrank % o->tp;
    r->dp_rank = r->wrank / o->tp;
    if ((st = zen_comm_split(r->world, r->dp_rank, r->wrank, &r->tpc)) != ZEN_OK ||
        (st = zen_comm_split(r->world, r->tp_rank, r->wrank, &r->dpc)) != ZEN_OK) {
        rank_fail(r, st, "splitting the world into tp and dp communicators");
        return st;
    }
    if ((st = zen_tp_group_create(r->tpc, &o->tp_opts, &r->group)) != ZEN_OK ||
        (st = zen_tp_group_set_emulation(r->group, &o->tp_emulation)) != ZEN_OK) {
        rank_fail(r, st, "creating the tp group");
        return st;
    }
    model_config(r->c, g);
    if ((st = zen_gpt_create(g, r->tpc, r->group, &r->model)) != ZEN_OK) {
        rank_fail(r, st, "creating the model");
        return st;
    }
    zen_adamw_config ac;
    zen_adamw_config_default(&ac);
    ac.lr = o->lr;
    ac.min_lr = o->min_lr;
    ac.weight_decay = o->weight_decay;
    ac.grad_clip = o->grad_clip;
    ac.warmup_steps = o->warmup;
    if (o->topk > 0 && o->topk_momentum > 0 && o->dp > 1)
        ac.beta1 = 0; /* the compressor's velocity is the first moment (momentum correction) */
    ac.total_steps = o->steps;
    if ((st = zen_adamw_create(r->model, &ac, &r->opt)) != ZEN_OK ||
        (st = zen_trainer_sync_create(r->model, r->dpc, o, &r->sync)) != ZEN_OK) {
        rank_fail(r, st, "creating the optimizer");
        return st;
    }
    zen_trainer_sync_attach_moment_scales(r->sync, r->opt);
    size_t nxy = (size_t)o->batch * (size_t)o->seq;
    r->x = zen_train_malloc_array(nxy, sizeof *r->x);
    r->y = zen_train_malloc_array(nxy, sizeof *r->y);
    if (!r->x || !r->y) {
        rank_fail(r, ZEN_ENOMEM, "allocating batches");
        return ZEN_ENOMEM;
    }
    return ZEN_OK;
}

/* The trained parameters for the caller (zen_train_result.params): every dp-rank-0 rank exports
 * its tp shard's view (a collective over tp), world rank 0 keeps the copy. */
static zen_status export_params(rank_state *r, const zen_gpt_config *g)
{
    run_ctx *c = r->c;
    size_t n = zen_gpt_full_param_count(g);
    float *p = zen_train_malloc_array(n, sizeof *p);
    zen_status st = p ? zen_gpt_export(r->model, p) : ZEN_ENOMEM;
    if (st == ZEN_OK && r->wrank == 0) {
        c->res->params = p;
        c->res->nparams = n;
        p = NULL;
    }
    free(p);
    if (st != ZEN_OK)
        rank_fail(r, st, "exporting parameters");
    return st;
}

/* Record a failed rank's status and reason where zen_train_run finds them, and free the rank. */
static void finish_rank(rank_state *r, zen_status st)
{
    run_ctx *c = r->c;
    if (st != ZEN_OK) {
        if (!r->err[0])
            rank_fail(r, st, "training failed");
        int slot = c->ranks_here == 1 ? 0 : r->wrank;
        snprintf(c->rank_err[slot], sizeof c->rank_err[slot], "%s", r->err);
        c->rank_st[slot] = st;
    }
    free(r->x);
    free(r->y);
    zen_trainer_sync_destroy(r->sync);
    zen_adamw_destroy(r->opt);
    zen_gpt_destroy(r->model);
    zen_tp_group_destroy(r->group);
    zen_comm_destroy(r->dpc);
    zen_comm_destroy(r->tpc);
}

static zen_status rank_main(zen_comm *world, void *arg)
{
    run_ctx *c = arg;
    const zen_train_options *o = c->o;
    rank_state rs;
    memset(&rs, 0, sizeof rs);
    rank_state *r = &rs;
    r->c = c;
    r->o = o;
    r->world = world;
    r->wrank = zen_comm_rank(world);
    char sample[4096] = "";
    zen_gpt_config g;
    zen_status st = setup_rank(r, &g);
    if (st == ZEN_OK)
        st = agree_on_start(r, &g);
    if (st == ZEN_OK && r->wrank == 0 && !o->quiet && !o->json)
        print_banner(r, &g);
    if (st == ZEN_OK)
        st = train_loop(r);
    if (st == ZEN_OK && o->sample_tokens > 0 && r->dp_rank == 0) {
        st = zen_trainer_sample(r->model, c->ds->vocab, o->prompt, o->sample_tokens, o->seed,
                                sample, sizeof sample);
        if (st != ZEN_OK)
            rank_fail(r, st, "sampling");
    }
    if (st == ZEN_OK && c->res && c->res->want_params && r->dp_rank == 0)
        st = export_params(r, &g);
    if (st == ZEN_OK && r->wrank == 0 && c->res && (!o->quiet || o->json))
        print_summary(r, sample);
    finish_rank(r, st);
    return st;
}

/* ---- entry ---- */

/* A malformed launcher variable counts as started, so that zen_comm_create names it. */
static int started_as_process_rank(void)
{
    int rank;
    return zen_comm_env_rank(&rank) != ZEN_OK || rank >= 0;
}

static zen_status check_options(const zen_train_options *o, char *err, size_t errlen)
{
    if (o->dp < 1 || o->tp < 1 || o->dp * o->tp > 1024) {
        snprintf(err, errlen, "--dp and --tp must be >= 1 (and dp x tp <= 1024)");
        return ZEN_EINVAL;
    }
    if (o->batch < 1 || o->seq < 1 || o->seq > o->ctx || o->steps < 1) {
        snprintf(err, errlen, "need --batch >= 1, --steps >= 1 and 1 <= --seq <= --ctx (%d)",
                 o->ctx);
        return ZEN_EINVAL;
    }
    if (o->eval_batches < 1) {
        snprintf(err, errlen, "--eval-batches must be >= 1");
        return ZEN_EINVAL;
    }
    if (o->topk < 0 || o->topk > 1) {
        snprintf(err, errlen, "--topk must be a fraction in (0, 1]");
        return ZEN_EINVAL;
    }
    if (o->topk_start <= 0 || o->topk_start > 1 || o->topk_warmup < 0 ||
        !(o->topk_momentum >= 0 && o->topk_momentum < 1) ||
        !(o->topk_dense_from >= 0 && o->topk_dense_from <= 1)) {
        snprintf(err, errlen,
                 "need 0 < --topk-start <= 1, --topk-warmup >= 0, "
                 "0 <= --topk-momentum < 1 and 0 <= --topk-dense-from <= 1");
        return ZEN_EINVAL;
    }
    if (o->topk_rescale && o->tp_opts.balance != ZEN_BALANCE_NONE) {
        /* the ages are kept in the canonical layout, AdamW runs in the balanced one */
        snprintf(err, errlen, "--topk-rescale runs with --balance none");
        return ZEN_EINVAL;
    }
    if (o->topk_global && !(o->topk > 0)) {
        snprintf(err, errlen, "--topk-global needs --topk P");
        return ZEN_EINVAL;
    }
    if (o->topk_global && o->sparse_scheme != ZEN_SPARSE_AUTO &&
        o->sparse_scheme != ZEN_SPARSE_BALANCED && o->sparse_scheme != ZEN_SPARSE_PS) {
        snprintf(err, errlen, "--topk-global runs with --sync-scheme auto, balanced or ps, not %s",
                 zen_sparse_scheme_name(o->sparse_scheme));
        return ZEN_EINVAL;
    }
    return ZEN_OK;
}

/* The run's files: the checkpoint directory (refusing to replace a checkpoint this run did not
 * start from), the metrics file (rank 0) and the gradient dump directory. */
static zen_status prepare_outputs(run_ctx *c, int wrank, char *err, size_t errsize)
{
    const zen_train_options *o = c->o;
    if (o->checkpoint_dir) {
        if (zen_train_mkdir_p(o->checkpoint_dir) != 0) {
            snprintf(err, errsize, "cannot create --checkpoint-dir %s: %s", o->checkpoint_dir,
                     strerror(errno));
            return ZEN_EIO;
        }
        snprintf(c->ckpt_path, sizeof c->ckpt_path, "%s/%s", o->checkpoint_dir, ZEN_CKPT_FILE);
        zen_ckpt_remove_stale(c->ckpt_path); /* a kill during a save leaves a full-size one */
        /* never silently replace a checkpoint that this run did not start from */
        if (access(c->ckpt_path, F_OK) == 0 && strcmp(c->ckpt_path, c->resume_path) != 0) {
            snprintf(err, errsize,
                     "%s already exists: pass --resume %s to continue it, or choose another "
                     "--checkpoint-dir",
                     c->ckpt_path, o->checkpoint_dir);
            return ZEN_EBUSY;
        }
    }
    if (o->metrics_path && wrank == 0) {
        char why[512];
        if (zen_file_open_output(o->metrics_path, &c->metrics, why, sizeof why) != ZEN_OK) {
            snprintf(err, errsize, "--metrics: %s", why);
            return ZEN_EIO;
        }
    }
    if (o->dump_grads_dir && zen_train_mkdir_p(o->dump_grads_dir) != 0) {
        snprintf(err, errsize, "cannot create --dump-grads %s: %s", o->dump_grads_dir,
                 strerror(errno));
        return ZEN_EIO;
    }
    return ZEN_OK;
}

/* Share the cores among the ranks of this host: threads of this process, or the processes the
 * launcher placed here. */
static void share_cores(const run_ctx *c, zen_comm *world)
{
    const zen_train_options *o = c->o;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int here = world ? zen_comm_local_size(world) : c->ranks_here;
    int threads = o->threads > 0 ? o->threads : (int)(cores / (here > 0 ? here : 1));
    zen_train_set_blas_threads(threads < 1 ? 1 : threads);
}

/* The error to report for a failed run: the first rank that failed on its own, else the first
 * that failed at all (aborted by another); st when no rank recorded one. */
static zen_status first_rank_error(const run_ctx *c, zen_status st, char *err, size_t errsize)
{
    int pick = -1;
    for (int i = 0; i < c->ranks_here && pick < 0; i++)
        if (c->rank_st[i] != ZEN_OK && c->rank_st[i] != ZEN_EABORTED)
            pick = i;
    for (int i = 0; i < c->ranks_here && pick < 0; i++)
        if (c->rank_st[i] != ZEN_OK)
            pick = i;
    if (pick < 0)
        return st;
    snprintf(err, errsize, "%s", c->rank_err[pick]);
    return c->rank_st[pick];
}

/* The dataset from --data: rank 0 builds the token cache first so the other processes only read
 * it (they wait at a barrier until it is written). */
static zen_status load_dataset(const zen_train_options *o, zen_comm *world, zen_dataset **out,
                               char *err, size_t errsize)
{
    int wrank = world ? zen_comm_rank(world) : 0;
    zen_data_options dopt = ZEN_DATA_OPTIONS_INIT;
    dopt.text_path = o->data_path;
    dopt.cache_dir = o->cache_dir;
    dopt.vocab_max = o->vocab_max;
    dopt.min_count = o->min_count;
    dopt.quiet = o->quiet || wrank != 0;
    zen_status st;
    if (world && wrank != 0 && (st = zen_barrier(world)) != ZEN_OK)
        return st;
    st = zen_dataset_load(&dopt, out, err, errsize);
    if (world && wrank == 0) {
        zen_status bst = zen_barrier(world);
        if (st == ZEN_OK)
            st = bst;
    }
    return st;
}

/* The text is long enough for --seq and the model's shape splits over --tp; records the unigram
 * baseline and the run's configuration line. */
static zen_status check_model(run_ctx *c, char *err, size_t errsize)
{
    const zen_train_options *o = c->o;
    const zen_dataset *ds = c->ds;
    if (ds->ntokens - ds->ntrain < (size_t)o->seq + 1 || ds->ntrain < (size_t)o->seq + 1) {
        snprintf(err, errsize, "the text is too short for --seq %d", o->seq);
        return ZEN_EINVAL;
    }
    c->unigram = zen_data_unigram_loss(ds);
    if (c->res)
        c->res->unigram_loss = c->unigram;
    zen_gpt_config g;
    model_config(c, &g);
    if (zen_gpt_config_check(&g, o->tp) != ZEN_OK) {
        snprintf(err, errsize,
                 "model shape not usable with --tp %d: need d_model %% heads == 0, heads %% tp "
                 "== 0 and d_ff %% tp == 0 (d_model %d, heads %d, d_ff %d, ctx %d)",
                 o->tp, g.d_model, g.n_head, g.d_ff, g.ctx);
        return ZEN_EINVAL;
    }
    build_config(c, &g);
    return ZEN_OK;
}

zen_status zen_train_run(const zen_train_options *o, const zen_dataset *ds, zen_train_result *res)
{
    run_ctx c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.res = res;
    char err[512] = "";
    zen_dataset *owned = NULL;
    zen_comm *world = NULL;
    /* every transport but inproc (threads) runs one process per rank */
    int process = o->transport == ZEN_TRANSPORT_AUTO ? started_as_process_rank()
                                                     : o->transport != ZEN_TRANSPORT_INPROC;
    zen_status st = check_options(o, err, sizeof err);
    if (st != ZEN_OK)
        goto done;

    if (process) {
        zen_comm_options co = ZEN_COMM_OPTIONS_INIT;
        co.transport = o->transport;
        if ((st = zen_comm_create(&co, &world)) != ZEN_OK) {
            snprintf(err, sizeof err, "cannot join the %s world: %s",
                     zen_transport_name(o->transport), zen_strerror(st));
            goto done;
        }
    }
    int wrank = world ? zen_comm_rank(world) : 0;
    if (!ds) {
        if ((st = load_dataset(o, world, &owned, err, sizeof err)) != ZEN_OK)
            goto done;
        ds = owned;
    }
    c.ds = ds;
    if ((st = check_model(&c, err, sizeof err)) != ZEN_OK)
        goto done;
    if (o->resume)
        zen_ckpt_resolve(o->resume, c.resume_path, sizeof c.resume_path);
    if ((st = prepare_outputs(&c, wrank, err, sizeof err)) != ZEN_OK)
        goto done;
    c.ranks_here = world ? 1 : o->dp * o->tp;
    c.rank_err = zen_train_calloc((size_t)c.ranks_here, sizeof *c.rank_err);
    c.rank_st = zen_train_calloc((size_t)c.ranks_here, sizeof *c.rank_st);
    if (!c.rank_err || !c.rank_st) {
        st = ZEN_ENOMEM;
        goto done;
    }
    share_cores(&c, world);
    if (world) {
        st = rank_main(world, &c);
    } else {
        zen_comm_options base = ZEN_COMM_OPTIONS_INIT;
        st = zen_run_inproc(o->dp * o->tp, &base, rank_main, &c, NULL);
    }
    if (st != ZEN_OK)
        st = first_rank_error(&c, st, err, sizeof err);
done:
    free(c.rank_err);
    free(c.rank_st);
    /* the last lines reach the disk only now: a failed close loses them, so it fails the run */
    if (c.metrics && fclose(c.metrics) != 0 && st == ZEN_OK) {
        snprintf(err, sizeof err, "cannot write --metrics %s: %s", o->metrics_path,
                 strerror(errno));
        st = ZEN_EIO;
    }
    if (world) {
        /* a rank lost at the very end still fails the run: its last steps may not be saved */
        if (st == ZEN_OK && (st = zen_comm_finalize(world)) != ZEN_OK)
            snprintf(err, sizeof err, "finalize: %s", zen_comm_last_error(world));
        zen_comm_destroy(world);
    }
    zen_dataset_destroy(owned);
    if (st != ZEN_OK && err[0]) {
        if (res)
            snprintf(res->error, sizeof res->error, "%s", err);
        else
            fprintf(stderr, "zen train: %s\n", err);
    }
    return st;
}
