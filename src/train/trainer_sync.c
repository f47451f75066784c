/*
 * Data-parallel gradient synchronisation: every replica ends with the dp average of every
 * gradient.
 *
 * Dense gradients (DENSE and TP_SHARD params; the embedding too with --sync-scheme dense) are
 * viewed as one virtual concatenation in registry order and averaged in buckets of
 * bucket_bytes: each bucket is packed into a staging buffer, allreduced (ZEN_AVG) and unpacked.
 * Fewer, larger messages amortise per-collective latency; a bounded bucket keeps the staging
 * buffer small.
 *
 *     params  [ wpe | ln | qkv.w ........ | qkv.b | proj.w ... | head.w ......... ]
 *     buckets [   bucket 0    |   bucket 1    |   bucket 2    |  ...  | last    ]
 *
 * The token embedding gradient is row-sparse (only rows of tokens in this rank's batch are
 * nonzero): its touched rows go through zen_sparse_allreduce (width d_model) and the union of
 * rows is scattered back, so the bytes scale with the rows touched, not the vocabulary.
 *
 * Top-k (--topk P, DGC-style): instead of the buckets, each rank adds the dense gradient to its
 * residual, keeps the k = ceil(P*n) largest magnitudes, sends them as a width-1 sparse tensor
 * through zen_sparse_allreduce and keeps the rest as the next residual (error feedback), so
 * nothing is lost, only delayed. The selection and the residual are libzen's (zen/compress.h:
 * zen_topk_compress with momentum 0, EXACT mode: exactly k, ties to the lower index, zeros never
 * sent), the same choice the trainer's own quickselect made, so a run's losses are unchanged.
 * DGC's two corrections for what a sparse update loses are options:
 *  - sparsity warm-up (--topk-warmup W): k follows zen_trainer_topk_keep, decaying exponentially
 *    from --topk-start (25%) of n to P x n over the first W steps, so the early steps, where the
 *    gradient changes direction fastest and a delayed coordinate hurts most, are nearly dense;
 *  - momentum correction (--topk-momentum M): the state accumulates the velocity
 *    u = M u + g (zen_topk_compress with momentum M, factor masking on the sent entries) instead
 *    of the raw gradient, and AdamW runs with beta1 = 0, so the momentum is applied once, before
 *    the selection, as DGC does for SGD with momentum. Without it (M = 0) the residual holds raw
 *    gradients and AdamW keeps its own first moment.
 * --topk-rescale corrects what error feedback does to AdamW's second moment: a coordinate that
 * was last sent tau steps ago arrives as the sum of tau steps of gradient, so its square over-states
 * the per-step v about tau^2-fold (for a steady gradient) and AdamW's normalised step shrinks.
 * Each scalar's age (steps since the synced gradient was last non-zero there, the same on every
 * replica because it is read from the synced result) gives tau, and AdamW adds g^2 / tau^2
 * (zen_adamw_set_moment_scales): a coordinate sent every step is updated exactly as in the dense
 * run, one sent every tau steps takes about tau dense steps at once.
 * With the embedding synced sparsely (and no --topk-global), its touched rows travel in the top-k
 * call as width-1 entries past the dense concatenation (allreduce_joint): one sparse allreduce a
 * step instead of two. Each phase of the sync is timed into zen_sync_stats.ms_phase (--metrics).
 * --topk-dense-from F: a step whose kept fraction is at least F (the first warm-up steps) sends
 * the whole residual through the dense allreduce instead (sync_topk_dense): the same update, at
 * the dense sync's cost rather than a sparse call's above its break-even density.
 * --topk-global: every rank receives only the k largest of the sum
 * (zen_sparse_options.global_topk) and the sent values the sum dropped go back into the residual
 * (zen_sparse_topk_dropped).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zen/compress.h>
#include <zen/sparse.h>

#include "alloc.h"
#include "trainer.h"

struct zen_trainer_sync {
    zen_gpt *model;
    zen_comm *dp;
    const zen_train_options *opts;
    size_t *dense; /* registry indices in the dense concatenation */
    size_t ndense;
    size_t total;  /* scalars in the concatenation */
    size_t nlocal; /* scalars of every local param (bytes_dense) */
    int emb;       /* registry index of the embedding synced sparsely, -1: none */
    int emb_param; /* registry index of the embedding, -1: none */
    float *stage;  /* bucket staging (bucket floats), or top-k work (total floats) */
    size_t stage_count;
    /* top-k */
    zen_topk_state *topk; /* the residual (error feedback) */
    float *topk_out;
    uint32_t *topk_idx;
    float *topk_val;
    /* sparse embedding */
    uint32_t *emb_idx; /* this step's local touched rows and their gradient rows */
    float *emb_val;
    size_t emb_cap, emb_n;
    size_t topk_nnz; /* this step's top-k selection (topk_idx, topk_val) */
    int dense_step;  /* this step went through the dense allreduce (--topk-dense-from) */
    /* top-k with the embedding's rows in the same call (allreduce_joint) */
    int joint;
    uint32_t *joint_idx;
    float *joint_val;
    size_t joint_cap;
    uint64_t *emb_seen; /* bit per embedding row: in this step's union (the result comes in any
                           order, so its distinct rows are counted by marking) */
    /* --topk-rescale */
    uint32_t *last; /* per scalar of the concatenation: 1 + the step it was last synced non-zero
                       (0: never) */
    float *vscale;  /* 1 / tau^2, tau = steps since then (this one included): AdamW's g^2 factor;
                       only read where this step's gradient is non-zero, only written there */
    uint32_t now;   /* 1 + this step */
    int marked;     /* this step's non-zeros already went through rescale_mark */
};

/* The dense sync's bucket in floats (--bucket-bytes, at least 1024): sync_buckets' staging size,
 * also the chunk of a --topk-dense-from step. */
static size_t bucket_elems(const zen_train_options *o)
{
    size_t b = o->bucket_bytes / sizeof(float);
    return b < 1024 ? 1024 : b;
}

zen_status zen_trainer_sync_create(zen_gpt *m, zen_comm *dp, const zen_train_options *o,
                                   zen_trainer_sync **out)
{
    *out = NULL;
    zen_trainer_sync *s = zen_train_calloc(1, sizeof *s);
    if (!s)
        return ZEN_ENOMEM;
    s->model = m;
    s->dp = dp;
    s->opts = o;
    s->emb = -1;
    s->emb_param = -1;
    size_t np = zen_gpt_param_count(m);
    const zen_gpt_param *p = zen_gpt_params(m);
    s->dense = zen_train_malloc_array(np, sizeof *s->dense);
    if (!s->dense)
        goto nomem;
    for (size_t i = 0; i < np; i++) {
        s->nlocal += p[i].count;
        if (p[i].kind == ZEN_GPT_PARAM_EMBEDDING)
            s->emb_param = (int)i;
        if (p[i].kind == ZEN_GPT_PARAM_EMBEDDING && o->emb_sync == ZEN_EMB_SYNC_SPARSE) {
            s->emb = (int)i;
            continue;
        }
        s->dense[s->ndense++] = i;
        s->total += p[i].count;
    }
    if (o->topk > 0) {
        s->stage_count = s->total;
        s->joint = s->emb >= 0 && !o->topk_global && s->total > 0 &&
                   (uint64_t)s->total + p[s->emb].count <= (uint64_t)UINT32_MAX;
        zen_status st = zen_topk_state_create(s->total, o->topk_momentum, &s->topk);
        if (st != ZEN_OK) {
            zen_trainer_sync_destroy(s);
            return st;
        }
        s->topk_out = zen_train_malloc_array(s->total, sizeof(float));
        s->topk_idx = zen_train_malloc_array(s->total, sizeof(uint32_t));
        s->topk_val = zen_train_malloc_array(s->total, sizeof(float));
        if (!s->topk_out || !s->topk_idx || !s->topk_val)
            goto nomem;
        if (s->joint && !(s->emb_seen = zen_train_calloc(((size_t)p[s->emb].rows + 63) / 64,
                                                         sizeof *s->emb_seen)))
            goto nomem;
        if (o->topk_rescale) {
            s->last = zen_train_calloc(s->total, sizeof *s->last);
            s->vscale = zen_train_malloc_array(s->total, sizeof *s->vscale);
            if (!s->last || !s->vscale)
                goto nomem;
            for (size_t i = 0; i < s->total; i++)
                s->vscale[i] = 1.0f;
        }
    } else {
        s->stage_count = bucket_elems(o);
    }
    s->stage = zen_train_malloc_array(s->stage_count, sizeof(float));
    if (!s->stage)
        goto nomem;
    *out = s;
    return ZEN_OK;
nomem:
    zen_trainer_sync_destroy(s);
    return ZEN_ENOMEM;
}

void zen_trainer_sync_destroy(zen_trainer_sync *s)
{
    if (!s)
        return;
    free(s->dense);
    free(s->stage);
    zen_topk_state_destroy(s->topk);
    free(s->topk_out);
    free(s->topk_idx);
    free(s->topk_val);
    free(s->last);
    free(s->vscale);
    free(s->emb_idx);
    free(s->emb_val);
    free(s->joint_idx);
    free(s->joint_val);
    free(s->emb_seen);
    free(s);
}

/* Copy [off, off+n) of the virtual concatenation of dense grads to buf (dir 0) or back (dir 1). */
static void move_range(zen_trainer_sync *s, size_t off, size_t n, float *buf, int dir)
{
    const zen_gpt_param *p = zen_gpt_params(s->model);
    size_t base = 0;
    for (size_t k = 0; k < s->ndense && n > 0; k++) {
        const zen_gpt_param *q = &p[s->dense[k]];
        if (off >= base + q->count) {
            base += q->count;
            continue;
        }
        size_t from = off - base;
        size_t len = q->count - from < n ? q->count - from : n;
        if (dir == 0)
            memcpy(buf, q->grad + from, len * sizeof(float));
        else
            memcpy(q->grad + from, buf, len * sizeof(float));
        buf += len;
        off += len;
        n -= len;
        base += q->count;
    }
}

static zen_status sync_buckets(zen_trainer_sync *s)
{
    for (size_t off = 0; off < s->total; off += s->stage_count) {
        size_t n = s->total - off < s->stage_count ? s->total - off : s->stage_count;
        move_range(s, off, n, s->stage, 0);
        zen_status st = zen_allreduce(s->dp, s->stage, s->stage, n, ZEN_F32, ZEN_AVG);
        if (st != ZEN_OK)
            return st;
        move_range(s, off, n, s->stage, 1);
    }
    return ZEN_OK;
}

int zen_trainer_topk_dense_step(const zen_train_options *o, long step)
{
    return o->topk > 0 && o->topk_dense_from > 0 &&
           zen_trainer_topk_keep(o, step) >= o->topk_dense_from;
}

double zen_trainer_topk_keep(const zen_train_options *o, long step)
{
    if (!(o->topk > 0))
        return 1.0;
    if (o->topk_warmup <= 0 || step >= o->topk_warmup || o->topk_start <= o->topk)
        return o->topk;
    double t = step < 0 ? 0.0 : (double)step / (double)o->topk_warmup;
    return o->topk_start * pow(o->topk / o->topk_start, t);
}

/* Add the ms since *t to st's phase ph and restart *t. */
static void phase_done(zen_sync_stats *st, zen_sync_phase ph, int64_t *t)
{
    int64_t now = zen_trainer_now_ns();
    st->ms_phase[ph] += (double)(now - *t) / 1e6;
    *t = now;
}

/* --topk-rescale: scalar i of the concatenation is non-zero in this step's synced gradient. tau
 * counts the steps since it last was (1: also in the previous step; a first sync counts from step
 * -1, as if sent just before training). Touching only the non-zeros (the union, a few times k)
 * instead of ageing all n scalars every step keeps the bookkeeping off the step time; a zero
 * gradient adds nothing to AdamW's v whatever its factor. */
static inline void rescale_mark(zen_trainer_sync *s, size_t i)
{
    float tau = (float)(s->now - s->last[i]);
    s->vscale[i] = 1.0f / (tau * tau);
    s->last[i] = s->now;
}

/* The selection plus the embedding's touched rows as width-1 entries past the concatenation
 * (index total + row * d + col) in joint_idx/joint_val; returns the count, 0 without memory. */
static size_t joint_tensor(zen_trainer_sync *s, size_t nnz, size_t d)
{
    size_t all = nnz + s->emb_n * d;
    if (all > s->joint_cap) {
        free(s->joint_idx);
        free(s->joint_val);
        s->joint_idx = zen_train_malloc_array(all, sizeof *s->joint_idx);
        s->joint_val = zen_train_malloc_array(all, sizeof *s->joint_val);
        s->joint_cap = s->joint_idx && s->joint_val ? all : 0;
        if (!s->joint_cap)
            return 0;
    }
    memcpy(s->joint_idx, s->topk_idx, nnz * sizeof *s->joint_idx);
    memcpy(s->joint_val, s->topk_val, nnz * sizeof *s->joint_val);
    for (size_t i = 0, at = nnz; i < s->emb_n; i++)
        for (size_t c = 0; c < d; c++, at++)
            s->joint_idx[at] = (uint32_t)(s->total + (size_t)s->emb_idx[i] * d + c);
    memcpy(s->joint_val + nnz, s->emb_val, s->emb_n * d * sizeof *s->joint_val);
    return all;
}

/* Scatter the joint result: entries below total into topk_out (zeroed first), the rest into the
 * embedding gradient, whose local touched rows are zeroed first (an entry whose sum is zero may
 * be left out of the result). The result comes in any order (any_order: no k-way merge of the
 * owners' runs), each entry once, so every write and --topk-rescale mark is per entry and the
 * union's embedding rows are counted with a bit per row. */
static zen_status joint_scatter(zen_trainer_sync *s, const zen_sparse_result *r, size_t d,
                                zen_sync_stats *st)
{
    const zen_gpt_param *p = &zen_gpt_params(s->model)[s->emb];
    size_t n = s->total, cells = (size_t)p->rows * d, rows = 0;
    memset(s->topk_out, 0, n * sizeof *s->topk_out);
    for (size_t j = 0; j < s->emb_n; j++)
        memset(p->grad + (size_t)s->emb_idx[j] * d, 0, d * sizeof(float));
    memset(s->emb_seen, 0, ((size_t)p->rows + 63) / 64 * sizeof *s->emb_seen);
    for (size_t i = 0; i < r->nnz; i++) {
        size_t at = r->indices[i];
        if (at < n) {
            s->topk_out[at] = r->values[i];
            if (s->last && r->values[i] != 0.0f)
                rescale_mark(s, at);
            continue;
        }
        size_t e = at - n, row = e / d;
        if (e >= cells)
            return ZEN_EPROTO;
        p->grad[e] = r->values[i];
        uint64_t bit = (uint64_t)1 << (row % 64);
        rows += !(s->emb_seen[row / 64] & bit);
        s->emb_seen[row / 64] |= bit;
    }
    s->marked = 1;
    st->emb_rows_union = rows;
    return ZEN_OK;
}

/*
 * With the embedding synced sparsely, its touched rows ride in the top-k call (joint_tensor): one
 * sparse allreduce per step instead of two. The rows are a few thousand values, so the second
 * call's cost was nearly all its fixed rounds (argument agreement, size exchanges, the pull),
 * about 6 ms a step on 4 emulated hosts at 1 Gbit/s. Each entry is still the average of the
 * replicas' values, summed by its owner in rank order as the row-wise call sums a row.
 */
static zen_status allreduce_joint(zen_trainer_sync *s, size_t nnz, const zen_sparse_options *so,
                                  zen_sync_stats *st)
{
    const zen_gpt_param *p = &zen_gpt_params(s->model)[s->emb];
    size_t d = (size_t)p->cols, all = joint_tensor(s, nnz, d);
    if (all == 0 && nnz + s->emb_n > 0)
        return ZEN_ENOMEM;
    zen_sparse_tensor t = {
        (uint64_t)s->total + p->count, 1, all, ZEN_INDEX_U32, s->joint_idx, ZEN_F32, s->joint_val
    };
    zen_sparse_result r;
    zen_sparse_stats ss;
    memset(&r, 0, sizeof r);
    zen_status rc = zen_sparse_allreduce(s->dp, &t, &r, so, &ss);
    if (rc == ZEN_OK)
        rc = joint_scatter(s, &r, d, st);
    zen_sparse_result_free(&r);
    if (rc != ZEN_OK)
        return rc;
    memcpy(st->topk_phase_us, ss.phase_us, sizeof st->topk_phase_us);
    st->emb_rows = s->emb_n;
    st->emb_scheme = ss.scheme;
    st->emb_density = ss.density;
    st->emb_gamma = ss.gamma_n;
    st->emb_skew = ss.skew;
    return ZEN_OK;
}

/* --topk-global: every rank receives only the k largest magnitudes of the sum; what this rank
 * sent and the sum dropped goes back into its residual. The rule is zen_sparse_topk_dropped's
 * (an index absent from the result was dropped; summed over the ranks, each adding back only its
 * own value, exactly the dropped part of the sum, in gradient units before the average), applied
 * by one walk of the two ascending index lists (the selection's and the result's) instead of
 * through a dense scratch of all n scalars: kept entries add 0. topk_idx/topk_val stay as sent
 * (--dump-grads records them). The scatter marks --topk-rescale's ages as it goes, so the
 * unpack does not scan all n. */
static zen_status allreduce_global(zen_trainer_sync *s, const zen_sparse_tensor *t,
                                   const zen_sparse_options *so, zen_sync_stats *st)
{
    zen_sparse_result r;
    zen_sparse_stats ss;
    zen_status rc = zen_sparse_allreduce(s->dp, t, &r, so, &ss);
    if (rc != ZEN_OK)
        return rc;
    memcpy(st->topk_phase_us, ss.phase_us, sizeof st->topk_phase_us);
    memset(s->topk_out, 0, s->total * sizeof *s->topk_out);
    for (size_t i = 0; i < r.nnz; i++) {
        if (r.indices[i] >= s->total) {
            zen_sparse_result_free(&r);
            return ZEN_EPROTO;
        }
        s->topk_out[r.indices[i]] = r.values[i];
        if (s->last && r.values[i] != 0.0f)
            rescale_mark(s, r.indices[i]);
    }
    s->marked = 1;
    for (size_t i = 0, j = 0; i < t->nnz; i++) {
        uint32_t idx = s->topk_idx[i];
        while (j < r.nnz && r.indices[j] < idx)
            j++;
        s->stage[i] = j < r.nnz && r.indices[j] == idx ? 0.0f : s->topk_val[i];
    }
    zen_sparse_result_free(&r);
    return zen_topk_state_add(s->topk, s->topk_idx, s->stage, t->nnz);
}

/* The synced result (topk_out) back into the gradients, with --topk-rescale's marks where the
 * call did not make them (the dense result paths). */
static zen_status topk_unpack(zen_trainer_sync *s, zen_sync_stats *st, int64_t *t)
{
    size_t n = s->total;
    move_range(s, 0, n, s->topk_out, 1);
    for (size_t i = 0; s->last && !s->marked && i < n; i++)
        if (s->topk_out[i] != 0.0f)
            rescale_mark(s, i);
    st->keep_fraction = (double)s->topk_nnz / (double)n;
    phase_done(st, ZEN_SYNC_UNPACK, t);
    return ZEN_OK;
}

/*
 * --topk-dense-from: a warm-up step that keeps a large share sends everything instead. Past a
 * break-even density a sparse allreduce costs more than the dense one (an index per value, and the
 * union of P selections to pull back), so such a step takes the whole residual out of the state
 * (zen_topk_compress with k = n: the same update of u and v as any step, then every non-zero
 * leaves) and averages it through the bucketed dense allreduce, as the dense sync would. The
 * result is the keep-100% step's, at the dense step's cost; the embedding goes through its own
 * row-wise call (sync_grads, s->dense_step).
 */
static zen_status sync_topk_dense(zen_trainer_sync *s, zen_sync_stats *st, int64_t *t)
{
    size_t n = s->total, nnz = 0;
    zen_topk_options to = ZEN_TOPK_OPTIONS_INIT;
    to.mode = ZEN_TOPK_EXACT;
    zen_status rc = zen_topk_compress(s->topk, s->stage, n, &to, s->topk_idx, s->topk_val, n, &nnz);
    if (rc != ZEN_OK)
        return rc;
    memset(s->topk_out, 0, n * sizeof *s->topk_out);
    for (size_t i = 0; i < nnz; i++)
        s->topk_out[s->topk_idx[i]] = s->topk_val[i];
    s->topk_nnz = nnz;
    phase_done(st, ZEN_SYNC_SELECT, t);
    size_t b = bucket_elems(s->opts);
    for (size_t off = 0; off < n; off += b) {
        size_t len = n - off < b ? n - off : b;
        rc = zen_allreduce(s->dp, s->topk_out + off, s->topk_out + off, len, ZEN_F32, ZEN_AVG);
        if (rc != ZEN_OK)
            return rc;
    }
    phase_done(st, ZEN_SYNC_BUCKETS, t);
    return ZEN_OK;
}

static zen_status sync_topk(zen_trainer_sync *s, long step, zen_sync_stats *st)
{
    size_t n = s->total;
    if (n == 0)
        return ZEN_OK;
    int64_t t = zen_trainer_now_ns();
    move_range(s, 0, n, s->stage, 0);
    phase_done(st, ZEN_SYNC_PACK, &t);
    s->now = step < 0 ? 1 : (uint32_t)step + 1;
    s->marked = 0;
    s->dense_step = zen_trainer_topk_dense_step(s->opts, step);
    if (s->dense_step) {
        zen_status rc = sync_topk_dense(s, st, &t);
        return rc != ZEN_OK ? rc : topk_unpack(s, st, &t);
    }
    size_t k = (size_t)ceil(zen_trainer_topk_keep(s->opts, step) * (double)n);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    zen_topk_options to = ZEN_TOPK_OPTIONS_INIT;
    to.mode = ZEN_TOPK_EXACT;
    size_t nnz = 0; /* residual += grad; the k largest leave it */
    zen_status rc = zen_topk_compress(s->topk, s->stage, k, &to, s->topk_idx, s->topk_val, n, &nnz);
    if (rc != ZEN_OK)
        return rc;
    phase_done(st, ZEN_SYNC_SELECT, &t);
    zen_sparse_tensor sel = { n, 1, nnz, ZEN_INDEX_U32, s->topk_idx, ZEN_F32, s->topk_val };
    zen_sparse_options so = ZEN_SPARSE_OPTIONS_INIT;
    so.scheme = s->opts->sparse_scheme;
    so.average = 1;
    so.key = "topk";
    so.global_topk = s->opts->topk_global ? k : 0;
    so.any_order = s->joint; /* joint_scatter needs no order; the global walk does */
    s->topk_nnz = nnz;
    zen_sparse_stats ss;
    if (s->joint)
        rc = allreduce_joint(s, nnz, &so, st);
    else if (so.global_topk)
        rc = allreduce_global(s, &sel, &so, st);
    else if ((rc = zen_sparse_allreduce_dense(s->dp, &sel, s->topk_out, &so, &ss)) == ZEN_OK)
        memcpy(st->topk_phase_us, ss.phase_us, sizeof st->topk_phase_us);
    if (rc != ZEN_OK)
        return rc;
    phase_done(st, ZEN_SYNC_REDUCE, &t);
    return topk_unpack(s, st, &t);
}

void zen_trainer_sync_attach_moment_scales(zen_trainer_sync *s, zen_adamw *opt)
{
    const zen_gpt_param *p = zen_gpt_params(s->model);
    size_t off = 0;
    for (size_t k = 0; s->vscale && k < s->ndense; k++) {
        zen_adamw_set_moment_scales(opt, s->dense[k], s->vscale + off);
        off += p[s->dense[k]].count;
    }
}

/* Copy this rank's touched embedding rows and their gradients (the row-sparse tensor). */
static zen_status capture_embedding(zen_trainer_sync *s)
{
    const zen_gpt_param *p = &zen_gpt_params(s->model)[s->emb_param];
    const int32_t *rows;
    size_t nrows;
    zen_gpt_touched_rows(s->model, &rows, &nrows);
    size_t d = (size_t)p->cols;
    if (nrows > s->emb_cap) {
        free(s->emb_idx);
        free(s->emb_val);
        s->emb_idx = zen_train_malloc_array(nrows, sizeof *s->emb_idx);
        s->emb_val = zen_train_malloc_array(nrows * d, sizeof *s->emb_val);
        s->emb_cap = (s->emb_idx && s->emb_val) ? nrows : 0;
        if (!s->emb_cap)
            return ZEN_ENOMEM;
    }
    for (size_t i = 0; i < nrows; i++) {
        s->emb_idx[i] = (uint32_t)rows[i];
        memcpy(s->emb_val + i * d, p->grad + (size_t)rows[i] * d, d * sizeof(float));
    }
    s->emb_n = nrows;
    return ZEN_OK;
}

static zen_status sync_embedding(zen_trainer_sync *s, zen_sync_stats *st)
{
    const zen_gpt_param *p = &zen_gpt_params(s->model)[s->emb];
    size_t d = (size_t)p->cols, nrows = s->emb_n;
    const uint32_t *rows = s->emb_idx;
    zen_sparse_tensor t = { (uint64_t)p->rows, (uint32_t)d, nrows,     ZEN_INDEX_U32,
                            s->emb_idx,        ZEN_F32,     s->emb_val };
    zen_sparse_options so = ZEN_SPARSE_OPTIONS_INIT;
    so.scheme = s->opts->sparse_scheme;
    so.average = 1;
    so.key = "wte";
    zen_sparse_stats ss;
    zen_sparse_result res;
    memset(&ss, 0, sizeof ss);
    memset(&res, 0, sizeof res);
    zen_status rc = zen_sparse_allreduce(s->dp, &t, &res, &so, &ss);
    if (rc != ZEN_OK)
        return rc;
    if (res.width != d || res.rows != (uint64_t)p->rows) {
        zen_sparse_result_free(&res);
        return ZEN_EINTERNAL;
    }
    for (size_t i = 0; i < nrows; i++)
        memset(p->grad + (size_t)rows[i] * d, 0, d * sizeof(float));
    for (size_t i = 0; i < res.nnz; i++) {
        if (res.indices[i] >= (uint32_t)p->rows) {
            zen_sparse_result_free(&res);
            return ZEN_EPROTO;
        }
        memcpy(p->grad + (size_t)res.indices[i] * d, res.values + i * d, d * sizeof(float));
    }
    st->emb_rows = nrows;
    st->emb_rows_union = res.nnz;
    st->emb_scheme = ss.scheme;
    st->emb_density = ss.density;
    st->emb_gamma = ss.gamma_n;
    st->emb_skew = ss.skew;
    zen_sparse_result_free(&res);
    return ZEN_OK;
}

zen_status zen_trainer_sync_grads(zen_trainer_sync *s, long step, zen_sync_stats *st)
{
    memset(st, 0, sizeof *st);
    st->keep_fraction = 1.0;
    st->emb_scheme = ZEN_SPARSE_DENSE;
    s->emb_n = 0;
    s->topk_nnz = 0;
    s->dense_step = 0;
    int n = zen_comm_size(s->dp);
    int64_t t = zen_trainer_now_ns();
    if (s->emb_param >= 0 && (s->emb >= 0 || s->opts->dump_grads_dir)) {
        zen_status rc = capture_embedding(s);
        if (rc != ZEN_OK)
            return rc;
        st->emb_rows = s->emb_n;
    }
    phase_done(st, ZEN_SYNC_EMB, &t);
    if (n <= 1)
        return ZEN_OK;
    zen_comm_stats a, b;
    zen_comm_get_stats(s->dp, &a);
    st->bytes_dense = (uint64_t)(2.0 * (n - 1) / n * (double)s->nlocal * sizeof(float));
    zen_status rc = s->opts->topk > 0 ? sync_topk(s, step, st) : sync_buckets(s);
    if (s->opts->topk <= 0)
        phase_done(st, ZEN_SYNC_BUCKETS, &t);
    t = zen_trainer_now_ns();
    if (rc == ZEN_OK && s->emb >= 0 && (!s->joint || s->dense_step))
        rc = sync_embedding(s, st);
    phase_done(st, ZEN_SYNC_EMB, &t);
    zen_comm_get_stats(s->dp, &b);
    st->bytes_sent = b.bytes_sent - a.bytes_sent;
    return rc;
}

void zen_trainer_sync_local(const zen_trainer_sync *s, zen_sync_local *out)
{
    memset(out, 0, sizeof *out);
    if (s->emb_param >= 0) {
        const zen_gpt_param *p = &zen_gpt_params(s->model)[s->emb_param];
        out->emb_rows = (uint64_t)p->rows;
        out->emb_width = (uint32_t)p->cols;
        out->emb_nnz = s->emb_n;
        out->emb_idx = s->emb_idx;
        out->emb_val = s->emb_val;
    }
    out->topk_rows = s->opts->topk > 0 ? s->total : 0;
    out->topk_nnz = s->topk_nnz;
    out->topk_idx = s->topk_idx;
    out->topk_val = s->topk_val;
}
