/*
 * Straggler balancing on inproc ranks:
 *  - exact migration (column and row layers, forward and backward, several SGD-with-momentum
 *    steps, plans changing between steps) against a naive full-matrix reference of the same
 *    training run: lossless migration must reproduce the unbalanced run;
 *  - ZERO-resizing: kept columns equal the reference restricted to the keep set P, pruned
 *    gradients are zero, shapes and the canonical weight view are unchanged, evaluation passes
 *    are never resized;
 *  - priority refresh (L1 change of kept columns, stale scores for pruned ones) and companion
 *    buffers following the permutation;
 *  - automatic decisions from synthetic per-rank timings with a straggler that moves every few
 *    steps: every rank ends up with the same plan, nothing deadlocks, MIGRATE stays exact.
 */
#include "test_tp_util.h"
#include "tp/tp_internal.h"
#include "tp_emulation.h"

#define TOL 1e-4
#define LR  0.05f
#define MOM 0.9f

/* ---- a two-layer Megatron MLP (column d->h, row h->d, with biases) and its full reference ---- */

enum {
    ROWS = 5,
    D = 8,
    H = 16
};

typedef struct ref_model {
    float w1[H * D], b1[H], w2[D * H], b2[D];
    float m1[H * D], mb1[H], m2[D * H], mb2[D]; /* momentum */
} ref_model;

typedef struct step_data {
    float x[ROWS * D], dy[ROWS * D];
    float y[ROWS * D], dx[ROWS * D];
} step_data;

static void ref_init(ref_model *m)
{
    memset(m, 0, sizeof *m);
    tpt_fill(m->w1, H * D, 101);
    tpt_fill(m->b1, H, 102);
    tpt_fill(m->w2, D * H, 103);
    tpt_fill(m->b2, D, 104);
}

static void sgd(float *w, float *mom, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        mom[i] = MOM * mom[i] + g[i];
        w[i] -= LR * mom[i];
    }
}

/* One reference training step: fills s->y and s->dx from s->x, s->dy, then updates m. */
static void ref_step(ref_model *m, step_data *s)
{
    float hid[ROWS * H], dh[ROWS * H], gw1[H * D], gb1[H], gw2[D * H], gb2[D];
    tpt_ref_forward(s->x, m->w1, m->b1, ROWS, D, H, hid);
    tpt_ref_forward(hid, m->w2, m->b2, ROWS, H, D, s->y);
    tpt_ref_backward(hid, m->w2, s->dy, ROWS, H, D, dh, gw2, gb2);
    tpt_ref_backward(s->x, m->w1, dh, ROWS, D, H, s->dx, gw1, gb1);
    sgd(m->w1, m->m1, gw1, H * D);
    sgd(m->b1, m->mb1, gb1, H);
    sgd(m->w2, m->m2, gw2, D * H);
    sgd(m->b2, m->mb2, gb2, D);
}

typedef struct tp_mlp {
    zen_tp_group *g;
    zen_tp_linear *l1, *l2;
    zen_tp_param w1, b1, w2, b2;
    float *m1, *mb1, *m2, *mb2;
    int n, r, hl;
} tp_mlp;

static zen_status mlp_create(zen_comm *c, const zen_tp_options *o, const ref_model *ref, tp_mlp *t)
{
    memset(t, 0, sizeof *t);
    t->n = zen_comm_size(c);
    t->r = zen_comm_rank(c);
    t->hl = H / t->n;
    ZT_CHECK(c, zen_tp_group_create(c, o, &t->g) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_create(t->g, ZEN_TP_COLUMN, D, H, 1, &t->l1) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_create(t->g, ZEN_TP_ROW, H, D, 1, &t->l2) == ZEN_OK);
    zen_tp_linear_weight(t->l1, &t->w1);
    zen_tp_linear_bias(t->l1, &t->b1);
    zen_tp_linear_weight(t->l2, &t->w2);
    zen_tp_linear_bias(t->l2, &t->b2);
    tpt_block(ref->w1, D, t->r * t->hl, t->hl, 0, D, t->w1.data);
    memcpy(t->b1.data, ref->b1 + t->r * t->hl, (size_t)t->hl * 4);
    tpt_block(ref->w2, H, 0, D, t->r * t->hl, t->hl, t->w2.data);
    memcpy(t->b2.data, ref->b2, D * 4);
    t->m1 = calloc(t->w1.count, 4);
    t->mb1 = calloc(t->b1.count, 4);
    t->m2 = calloc(t->w2.count, 4);
    t->mb2 = calloc(t->b2.count, 4);
    ZT_CHECK(c, t->m1 && t->mb1 && t->m2 && t->mb2);
    ZT_CHECK(c, zen_tp_linear_attach_state(t->l1, t->m1) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_attach_state(t->l2, t->m2) == ZEN_OK);
    return ZEN_OK;
}

static void mlp_destroy(tp_mlp *t)
{
    zen_tp_linear_destroy(t->l1);
    zen_tp_linear_destroy(t->l2);
    zen_tp_group_destroy(t->g);
    free(t->m1);
    free(t->mb1);
    free(t->m2);
    free(t->mb2);
}

/* One tp training step; compares y and dx with the reference step s (already computed). */
static zen_status mlp_step(zen_comm *c, tp_mlp *t, const step_data *s, int check_out)
{
    float hid[ROWS * H], dh[ROWS * H], y[ROWS * D], dx[ROWS * D];
    ZT_CHECK(c, zen_tp_linear_forward(t->l1, s->x, ROWS, hid, 1) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_forward(t->l2, hid, ROWS, y, 1) == ZEN_OK);
    if (check_out)
        ZT_CHECK(c, tpt_close(y, D, s->y, D, ROWS, D, TOL));
    ZT_CHECK(c, zen_tp_linear_backward(t->l2, hid, s->dy, ROWS, dh) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_backward(t->l1, s->x, dh, ROWS, dx) == ZEN_OK);
    if (check_out)
        ZT_CHECK(c, tpt_close(dx, D, s->dx, D, ROWS, D, TOL));
    sgd(t->w1.data, t->m1, t->w1.grad, t->w1.count);
    sgd(t->b1.data, t->mb1, t->b1.grad, t->b1.count);
    sgd(t->w2.data, t->m2, t->w2.grad, t->w2.count);
    sgd(t->b2.data, t->mb2, t->b2.grad, t->b2.count);
    memset(t->w1.grad, 0, t->w1.count * 4);
    memset(t->b1.grad, 0, t->b1.count * 4);
    memset(t->w2.grad, 0, t->w2.count * 4);
    memset(t->b2.grad, 0, t->b2.count * 4);
    return ZEN_OK;
}

/* The canonical shards equal the reference model's slices. */
static zen_status mlp_compare(zen_comm *c, const tp_mlp *t, const ref_model *ref)
{
    float w1[H * D], w2[D * H], want[H * D];
    ZT_CHECK(c, zen_tp_linear_export_weight(t->l1, w1) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_export_weight(t->l2, w2) == ZEN_OK);
    tpt_block(ref->w1, D, t->r * t->hl, t->hl, 0, D, want);
    ZT_CHECK(c, tpt_close(w1, D, want, D, t->hl, D, TOL));
    tpt_block(ref->w2, H, 0, D, t->r * t->hl, t->hl, want);
    ZT_CHECK(c, tpt_close(w2, t->hl, want, t->hl, D, t->hl, TOL));
    ZT_CHECK(c, tpt_close(t->b1.data, t->hl, ref->b1 + t->r * t->hl, t->hl, 1, t->hl, TOL));
    ZT_CHECK(c, tpt_close(t->b2.data, D, ref->b2, D, 1, D, TOL));
    return ZEN_OK;
}

static void make_step(int step, step_data *s)
{
    tpt_fill(s->x, ROWS * D, 1000 + (uint64_t)step);
    tpt_fill(s->dy, ROWS * D, 2000 + (uint64_t)step);
}

/* ---- exact migration under forced plans ---- */

static void set_mig(tp_plan *p, int s, double local, const double *to)
{
    p->local[s] = local;
    for (int a = 0; a < p->n; a++)
        p->mig[s * p->n + a] = to[a];
}

static zen_status forced_plan_for(int step, tp_plan *p)
{
    zen__tp_plan_reset(p);
    switch (step) {
    case 0: {
        double to[4] = { 0, 0.25, 0.25, 0.25 };
        set_mig(p, 0, 0.25, to);
        p->straggler_mask = 1;
        break;
    }
    case 2: {
        double to0[4] = { 0, 0, 0.3, 0.3 }, to1[4] = { 0, 0, 0.2, 0.3 };
        set_mig(p, 0, 0.4, to0);
        set_mig(p, 1, 0.5, to1);
        p->straggler_mask = 3;
        break;
    }
    case 4: {
        double to[4] = { 0.6, 0, 0, 0 };
        set_mig(p, 3, 0.4, to);
        p->straggler_mask = 8;
        break;
    }
    default:
        return ZEN_EINVAL; /* keep the current plan */
    }
    return ZEN_OK;
}

static zen_status migrate_exact_rank(zen_comm *c, void *arg)
{
    (void)arg;
    ref_model ref;
    ref_init(&ref);
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    o.balance = ZEN_BALANCE_MIGRATE;
    o.period = 1000; /* only the forced plans below */
    tp_mlp t;
    ZT_CHECK(c, mlp_create(c, &o, &ref, &t) == ZEN_OK);
    tp_plan p;
    ZT_CHECK(c, zen__tp_plan_init(&p, t.n) == ZEN_OK);
    for (int step = 0; step < 7; step++) {
        if (step == 6) {
            zen__tp_plan_reset(&p);
            ZT_CHECK(c, zen__tp_group_force_plan(t.g, &p) == ZEN_OK);
        } else if (forced_plan_for(step, &p) == ZEN_OK) {
            ZT_CHECK(c, zen__tp_group_force_plan(t.g, &p) == ZEN_OK);
        }
        if (step == 0) /* rank 0 sends columns of both layers, the others help */
            ZT_CHECK(c, t.r == 0 ? t.l1->n_out == 6 && t.l2->n_out == 3
                                 : t.l1->n_in == 2 && t.l2->n_in == 1);
        step_data s;
        make_step(step, &s);
        ref_step(&ref, &s);
        ZT_CHECK(c, mlp_step(c, &t, &s, 1) == ZEN_OK);
        ZT_CHECK(c, zen_tp_group_step(t.g) == ZEN_OK);
        ZT_CHECK(c, mlp_compare(c, &t, &ref) == ZEN_OK);
    }
    zen_tp_stats st;
    ZT_CHECK(c, zen_tp_group_stats(t.g, &st) == ZEN_OK);
    ZT_CHECK(c, st.balance == ZEN_BALANCE_MIGRATE && st.migrated_cols == 0);
    zen__tp_plan_free(&p);
    mlp_destroy(&t);
    return ZEN_OK;
}

static void test_migrate_exact(void **state)
{
    (void)state;
    zt_run_inproc(4, migrate_exact_rank, NULL);
}

/* ---- resizing: only the keep set P of the straggler takes part ---- */

typedef struct rs_arg {
    zen_tp_kind kind;
    int index_order; /* keep the initial (all equal) scores: P is a prefix, identity layout */
} rs_arg;

/* Canonical column j of layer l on this rank is kept iff its physical position < n_local. */
static int kept(const zen_tp_linear *l, int j)
{
    return l->pos[j] < l->n_local;
}

static zen_status resize_rank(zen_comm *c, void *argp)
{
    const rs_arg *a = argp;
    int col = a->kind == ZEN_TP_COLUMN;
    int n = zen_comm_size(c), r = zen_comm_rank(c);
    int in = col ? 10 : 20, out = col ? 6 : 5, rows = 4;
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    o.balance = ZEN_BALANCE_RESIZE;
    o.period = 1000;
    zen_tp_group *g = NULL;
    zen_tp_linear *l = NULL;
    ZT_CHECK(c, zen_tp_group_create(c, &o, &g) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_create(g, a->kind, in, out, 1, &l) == ZEN_OK);
    zen_tp_param w, b;
    zen_tp_linear_weight(l, &w);
    zen_tp_linear_bias(l, &b);
    float *W = malloc((size_t)out * in * 4), *B = malloc((size_t)out * 4);
    float *X = malloc((size_t)rows * in * 4), *DY = malloc((size_t)rows * out * 4);
    float *Wm = malloc((size_t)out * in * 4); /* W with rank 0's pruned columns zeroed */
    ZT_CHECK(c, W && B && X && DY && Wm);
    tpt_fill(W, (size_t)out * in, 7);
    tpt_fill(B, (size_t)out, 8);
    tpt_fill(X, (size_t)rows * in, 9);
    tpt_fill(DY, (size_t)rows * out, 10);
    int wr = w.rows, wc = w.cols, r0 = col ? r * wr : 0, c0 = col ? 0 : r * wc;
    tpt_block(W, in, r0, wr, c0, wc, w.data);
    memcpy(b.data, B + (col ? r0 : 0), b.count * 4);
    /* a non-trivial priority order, then rank 0 keeps 60% */
    for (int j = 0; j < l->K; j++)
        l->score[j] = a->index_order ? (float)(l->K - 1 - j) : (float)((j * 7 + 3) % l->K);
    tp_plan p;
    ZT_CHECK(c, zen__tp_plan_init(&p, n) == ZEN_OK);
    p.local[0] = 0.6;
    p.prune[0] = 0.4;
    p.straggler_mask = 1;
    ZT_CHECK(c, zen__tp_group_force_plan(g, &p) == ZEN_OK);
    int keep = (int)ceil(l->K * 0.6 - 1e-9);
    if (r == 0) {
        ZT_CHECK(c, l->n_local == keep && l->permuted == !a->index_order);
        /* P = the keep highest scores */
        for (int j = 0; j < l->K; j++)
            ZT_CHECK(c, kept(l, j) == (l->score[j] >= (float)(l->K - keep)));
    } else {
        ZT_CHECK(c, l->n_local == l->K && !l->permuted);
    }
    /* the canonical view is unchanged by the permutation */
    float *canon = malloc(w.count * 4);
    ZT_CHECK(c, canon != NULL);
    ZT_CHECK(c, zen_tp_linear_export_weight(l, canon) == ZEN_OK);
    float *slice = malloc(w.count * 4);
    tpt_block(W, in, r0, wr, c0, wc, slice);
    ZT_CHECK(c, memcmp(canon, slice, w.count * 4) == 0);

    /* reference: the full layer with rank 0's pruned columns of its shard zeroed */
    int wr0 = col ? out / n : out, wc0 = col ? in : in / n;
    int keep0[64];
    int is_zero = r == 0;
    for (int j = 0; j < wc0; j++)
        keep0[j] = is_zero ? kept(l, j) : 1;
    /* every rank needs rank 0's keep set: share it */
    int all_keep[4 * 64];
    ZT_CHECK(c, zen_allgather(c, keep0, all_keep, 64, ZEN_I32) == ZEN_OK);
    memcpy(Wm, W, (size_t)out * in * 4);
    for (int i = 0; i < wr0; i++)
        for (int j = 0; j < wc0; j++)
            if (!all_keep[j])
                Wm[(size_t)i * in + j] = 0.0f; /* rank 0: rows [0, wr0), cols [0, wc0) */
    int yout = col ? wr : out, xin = col ? in : wc;
    float *yref = malloc((size_t)rows * out * 4), *dxref = malloc((size_t)rows * in * 4);
    float *dwref = malloc((size_t)out * in * 4), *dbref = malloc((size_t)out * 4);
    float *y = malloc((size_t)rows * yout * 4), *dx = malloc((size_t)rows * xin * 4);
    float *x = malloc((size_t)rows * xin * 4), *dy = malloc((size_t)rows * yout * 4);
    ZT_CHECK(c, yref && dxref && dwref && dbref && y && dx && x && dy);
    tpt_ref_forward(X, Wm, B, rows, in, out, yref);
    tpt_ref_backward(X, Wm, DY, rows, in, out, dxref, dwref, dbref);
    tpt_block(X, in, 0, rows, c0, xin, x);
    tpt_block(DY, out, 0, rows, col ? r0 : 0, yout, dy);
    ZT_CHECK(c, zen_tp_linear_forward(l, x, rows, y, 1) == ZEN_OK);
    ZT_CHECK(c, tpt_close(y, yout, yref + (col ? r0 : 0), out, rows, yout, TOL));
    ZT_CHECK(c, zen_tp_linear_backward(l, x, dy, rows, dx) == ZEN_OK);
    /* dX: COLUMN is allreduced (others' share of pruned columns survives); ROW is local */
    ZT_CHECK(c, tpt_close(dx, xin, dxref + c0, in, rows, xin, TOL));
    ZT_CHECK(c, zen_tp_linear_export_grad(l, canon) == ZEN_OK);
    for (int i = 0; i < wr; i++)
        for (int j = 0; j < wc; j++) {
            float got = canon[(size_t)i * wc + j];
            float want = dwref[(size_t)(r0 + i) * in + c0 + j];
            if (r == 0 && !all_keep[j])
                ZT_CHECK(c, got == 0.0f); /* pruned: exactly zero */
            else
                ZT_CHECK(c, fabs(got - want) <= TOL * fmax(1.0, fabs(want)));
        }
    /* dp replicas sync gradients in canonical order, then go back to the physical layout */
    float *phys = malloc(w.count * 4);
    ZT_CHECK(c, phys != NULL);
    memcpy(phys, w.grad, w.count * 4);
    ZT_CHECK(c, zen_tp_group_canonical_grads(g, 1) == ZEN_OK);
    ZT_CHECK(c, memcmp(w.grad, canon, w.count * 4) == 0);
    if (l->permuted && col) /* not in between (COLUMN forward has no collective to leave hanging) */
        ZT_CHECK(c, zen_tp_linear_forward(l, x, rows, y, 0) == ZEN_EINVAL);
    ZT_CHECK(c, zen_tp_group_canonical_grads(g, 0) == ZEN_OK);
    ZT_CHECK(c, memcmp(w.grad, phys, w.count * 4) == 0);
    free(phys);
    /* evaluation is never resized: the full, unpruned layer */
    tpt_ref_forward(X, W, B, rows, in, out, yref);
    ZT_CHECK(c, zen_tp_linear_forward(l, x, rows, y, 0) == ZEN_OK);
    ZT_CHECK(c, tpt_close(y, yout, yref + (col ? r0 : 0), out, rows, yout, TOL));
    zen_tp_stats st;
    ZT_CHECK(c, zen_tp_group_stats(g, &st) == ZEN_OK);
    ZT_CHECK(c, fabs(st.min_keep_fraction - 0.6) < 1e-12);
    ZT_CHECK(c, fabs(st.keep_fraction - (r == 0 ? 0.6 : 1.0)) < 1e-12);
    free(W);
    free(B);
    free(X);
    free(DY);
    free(Wm);
    free(canon);
    free(slice);
    free(yref);
    free(dxref);
    free(dwref);
    free(dbref);
    free(y);
    free(dx);
    free(x);
    free(dy);
    zen__tp_plan_free(&p);
    zen_tp_linear_destroy(l);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_resize_column(void **state)
{
    (void)state;
    rs_arg a = { ZEN_TP_COLUMN, 0 };
    zt_run_inproc(2, resize_rank, &a);
    a.index_order = 1;
    zt_run_inproc(2, resize_rank, &a);
}

static void test_resize_row(void **state)
{
    (void)state;
    rs_arg a = { ZEN_TP_ROW, 0 };
    zt_run_inproc(2, resize_rank, &a);
    a.index_order = 1;
    zt_run_inproc(2, resize_rank, &a);
}

/* ---- priority refresh and companions (one rank, local calls only) ---- */

static zen_status priority_rank(zen_comm *c, void *arg)
{
    (void)arg;

    enum {
        IN = 10,
        OUT = 3
    };

    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    o.balance = ZEN_BALANCE_RESIZE;
    o.period = 1000;
    zen_tp_group *g = NULL;
    zen_tp_linear *l = NULL;
    ZT_CHECK(c, zen_tp_group_create(c, &o, &g) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_create(g, ZEN_TP_COLUMN, IN, OUT, 0, &l) == ZEN_OK);
    zen_tp_param w;
    zen_tp_linear_weight(l, &w);
    float w0[OUT * IN], comp[OUT * IN], x[IN], y[OUT];
    tpt_fill(w0, OUT * IN, 5);
    memcpy(w.data, w0, sizeof w0);
    memcpy(comp, w0, sizeof w0);
    ZT_CHECK(c, zen_tp_linear_attach_state(l, comp) == ZEN_OK);
    tpt_fill(x, IN, 6);
    ZT_CHECK(c, zen_tp_linear_forward(l, x, 1, y, 1) == ZEN_OK); /* captures W_ref */
    /* column j moves by an L1 amount of (j * 3) % 10 + 1 */
    float change[IN];
    for (int j = 0; j < IN; j++) {
        change[j] = (float)((j * 3) % 10 + 1);
        for (int i = 0; i < OUT; i++)
            w.data[i * IN + j] += (i == 1 ? -1.0f : 1.0f) * change[j] / OUT;
    }
    zen__tp_layer_refresh_scores(l);
    float score1[IN];
    for (int j = 0; j < IN; j++) {
        ZT_CHECK(c, fabs(l->score[j] - change[j]) < 1e-5);
        score1[j] = l->score[j];
    }
    tp_plan p;
    ZT_CHECK(c, zen__tp_plan_init(&p, 1) == ZEN_OK);
    p.local[0] = 0.5;
    p.prune[0] = 0.5;
    float before[OUT * IN];
    ZT_CHECK(c, zen_tp_linear_export_weight(l, before) == ZEN_OK);
    ZT_CHECK(c, zen__tp_group_force_plan(g, &p) == ZEN_OK);
    /* kept = the 5 largest changes (6..10) */
    for (int j = 0; j < IN; j++)
        ZT_CHECK(c, kept(l, j) == (change[j] > 5.5f));
    /* the companion moved with W; the canonical view did not move */
    float after[OUT * IN];
    ZT_CHECK(c, zen_tp_linear_export_weight(l, after) == ZEN_OK);
    ZT_CHECK(c, memcmp(before, after, sizeof after) == 0);
    for (int i = 0; i < OUT; i++)
        for (int pp = 0; pp < IN; pp++) {
            int j = l->perm[pp];
            ZT_CHECK(c, comp[i * IN + pp] == w0[i * IN + j]);
        }
    /* second round: pruned columns change a lot, kept ones a little; pruned scores stay stale */
    for (int pp = 0; pp < IN; pp++)
        for (int i = 0; i < OUT; i++)
            w.data[i * IN + pp] += pp < l->n_local ? 0.1f : 100.0f;
    zen__tp_layer_refresh_scores(l);
    for (int j = 0; j < IN; j++) {
        if (kept(l, j))
            ZT_CHECK(c, fabs(l->score[j] - 0.1f * OUT) < 1e-4);
        else
            ZT_CHECK(c, l->score[j] == score1[j]);
    }
    /* now the stale pruned columns outrank the kept ones and rotate in */
    ZT_CHECK(c, zen__tp_layer_apply_plan(l) == ZEN_OK);
    for (int j = 0; j < IN; j++)
        ZT_CHECK(c, kept(l, j) == (change[j] < 5.5f));
    zen__tp_plan_free(&p);
    zen_tp_linear_destroy(l);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_priority(void **state)
{
    (void)state;
    zt_run_inproc(1, priority_rank, NULL);
}

/* ---- automatic decisions from synthetic timings, straggler moving every 4 steps ---- */

typedef struct dyn_arg {
    zen_tp_balance mode;
    int exact;
} dyn_arg;

static zen_status dynamic_rank(zen_comm *c, void *argp)
{
    const dyn_arg *a = argp;
    ref_model ref;
    ref_init(&ref);
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    o.balance = a->mode;
    o.period = 2;
    o.ema_alpha = 1.0;
    tp_mlp t;
    ZT_CHECK(c, mlp_create(c, &o, &ref, &t) == ZEN_OK);
    int changes = 0, active_rounds = 0;
    for (int step = 0; step < 24; step++) {
        int slow = (step / 4) % t.n;
        t.g->time_override_ms = t.r == slow ? 8.0 : 1.0 + 0.01 * t.r;
        step_data s;
        make_step(step, &s);
        ref_step(&ref, &s);
        ZT_CHECK(c, mlp_step(c, &t, &s, a->exact) == ZEN_OK);
        uint64_t before = t.g->plan.straggler_mask;
        ZT_CHECK(c, zen_tp_group_step(t.g) == ZEN_OK);
        changes += t.g->plan.straggler_mask != before;
        active_rounds += t.g->plan_active;
        /* all ranks hold the same plan */
        double mine[21], all[4 * 21];
        int k = 0;
        mine[k++] = (double)t.g->plan.straggler_mask;
        for (int r = 0; r < 4; r++)
            mine[k++] = r < t.n ? t.g->plan.local[r] : 0;
        for (int r = 0; r < 4; r++)
            mine[k++] = r < t.n ? t.g->plan.prune[r] : 0;
        for (int r = 0; r < 12; r++) /* mig rows of sources 0..2 (enough to differ) */
            mine[k++] = r < t.n * t.n ? t.g->plan.mig[r] : 0;
        ZT_CHECK(c, zen_allgather(c, mine, all, 21, ZEN_F64) == ZEN_OK);
        for (int r = 1; r < t.n; r++)
            ZT_CHECK(c, memcmp(all, all + 21 * r, sizeof mine) == 0);
        if (a->exact)
            ZT_CHECK(c, mlp_compare(c, &t, &ref) == ZEN_OK);
    }
    ZT_CHECK(c, changes >= 3);      /* the straggler did move */
    ZT_CHECK(c, active_rounds > 6); /* and was balanced */
    zen_tp_stats st;
    ZT_CHECK(c, zen_tp_group_stats(t.g, &st) == ZEN_OK);
    ZT_CHECK(c, st.decisions == 12 && st.steps == 24 && st.nstragglers == 1);
    mlp_destroy(&t);
    return ZEN_OK;
}

static void test_dynamic_migrate(void **state)
{
    (void)state;
    dyn_arg a = { ZEN_BALANCE_MIGRATE, 1 };
    zt_run_inproc(4, dynamic_rank, &a);
}

static void test_dynamic_resize_semi(void **state)
{
    (void)state;
    dyn_arg a = { ZEN_BALANCE_RESIZE, 0 };
    zt_run_inproc(4, dynamic_rank, &a);
    a.mode = ZEN_BALANCE_SEMI;
    zt_run_inproc(4, dynamic_rank, &a);
    zt_run_inproc(2, dynamic_rank, &a);
}

/* ---- emulated slowness changes timings, never results ---- */

static zen_status emulation_rank(zen_comm *c, void *argp)
{
    const zen_tp_slow_mode *mode = argp;
    ref_model ref;
    ref_init(&ref);
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    zen_tp_emulation e = ZEN_TP_EMULATION_INIT;
    ZT_CHECK(c, zen_cli_tp_parse_slow("0:2.5", zen_comm_size(c), &e) == ZEN_OK);
    e.mode = *mode;
    e.rotate = 1;
    o.balance = ZEN_BALANCE_RESIZE;
    o.period = 1000;
    tp_mlp t;
    ZT_CHECK(c, mlp_create(c, &o, &ref, &t) == ZEN_OK);
    zen_tp_emulation bad = e;
    bad.slow[0].rank = t.n; /* outside the group: refused, the group keeps no straggler */
    ZT_CHECK(c, zen_tp_group_set_emulation(t.g, &bad) == ZEN_EINVAL);
    bad = e;
    bad.slow[0].factor = 0.5;
    ZT_CHECK(c, zen_tp_group_set_emulation(t.g, &bad) == ZEN_EINVAL);
    ZT_CHECK(c, zen_tp_group_set_emulation(t.g, &e) == ZEN_OK);
    for (int step = 0; step < 4; step++) {
        zen_tp_stats st;
        ZT_CHECK(c, zen_tp_group_stats(t.g, &st) == ZEN_OK);
        ZT_CHECK(c, st.slow_factor == (t.r == step % t.n ? 2.5 : 1.0));
        step_data s;
        make_step(step, &s);
        ref_step(&ref, &s);
        ZT_CHECK(c, mlp_step(c, &t, &s, 1) == ZEN_OK);
        ZT_CHECK(c, zen_tp_group_step(t.g) == ZEN_OK);
        ZT_CHECK(c, mlp_compare(c, &t, &ref) == ZEN_OK);
        ZT_CHECK(c, zen_tp_group_stats(t.g, &st) == ZEN_OK);
        ZT_CHECK(c, st.ms_compute > 0 && st.ms_wait >= 0);
    }
    mlp_destroy(&t);
    return ZEN_OK;
}

static void test_emulation(void **state)
{
    (void)state;
    zen_tp_slow_mode m = ZEN_TP_SLOW_SLEEP;
    zt_run_inproc(2, emulation_rank, &m);
    m = ZEN_TP_SLOW_SPIN;
    zt_run_inproc(2, emulation_rank, &m);
}

/* ---- the arrival stamps name the rank the others wait for, and how long ---- */

static zen_status waits_for_rank(zen_comm *c, void *arg)
{
    const int *weighted = arg; /* ZEN_TP_ARRIVAL_WEIGHT=1: the wait makes rank 1 a straggler */
    ref_model ref;
    ref_init(&ref);
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    o.period = 1; /* a decision round, and so an arrival report, after every step */
    o.balance = *weighted ? ZEN_BALANCE_RESIZE : ZEN_BALANCE_NONE;
    tp_mlp t;
    ZT_CHECK(c, mlp_create(c, &o, &ref, &t) == ZEN_OK);
    for (int step = 0; step < 3; step++) {
        step_data s;
        make_step(step, &s);
        if (t.r == 1) { /* rank 1 comes late to the step's first collective */
            struct timespec late = { 0, 60 * 1000 * 1000 };
            nanosleep(&late, NULL);
        }
        ZT_CHECK(c, mlp_step(c, &t, &s, 0) == ZEN_OK);
        ZT_CHECK(c, zen_tp_group_step(t.g) == ZEN_OK);
        zen_tp_stats st;
        ZT_CHECK(c, zen_tp_group_stats(t.g, &st) == ZEN_OK);
        ZT_CHECK(c, st.last_arrival_rank == 1);
        ZT_CHECK(c, st.arrival_spread_ms >= 40 && st.arrival_spread_ms < 10000);
        /* the late rank's GEMMs are not slower: only the arrival stamps can flag it */
        ZT_CHECK(c, !*weighted || ((st.straggler_mask & 2u) && st.min_keep_fraction < 1));
        ZT_CHECK(c, *weighted || st.min_keep_fraction == 1);
    }
    mlp_destroy(&t);
    return ZEN_OK;
}

static void test_waits_for_late_rank(void **state)
{
    (void)state;
    int weighted = 0;
    zt_run_inproc(4, waits_for_rank, &weighted);
    setenv("ZEN_TP_ARRIVAL_WEIGHT", "1", 1); /* read when a group is created */
    weighted = 1;
    zt_run_inproc(4, waits_for_rank, &weighted);
    unsetenv("ZEN_TP_ARRIVAL_WEIGHT");
}

/* ---- ranks that disagree on the plan fail with an error naming a peer, they do not hang ---- */

static zen_status mismatch_rank(zen_comm *c, void *arg)
{
    (void)arg;
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    o.balance = ZEN_BALANCE_MIGRATE;
    o.period = 1000;
    zen_tp_group *g = NULL;
    zen_tp_linear *l = NULL;
    ZT_CHECK(c, zen_tp_group_create(c, &o, &g) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_create(g, ZEN_TP_COLUMN, 8, 4, 0, &l) == ZEN_OK);
    tp_plan p;
    ZT_CHECK(c, zen__tp_plan_init(&p, 2) == ZEN_OK);
    double share = zen_comm_rank(c) == 0 ? 0.5 : 0.25; /* a deliberate disagreement */
    p.local[0] = 1.0 - share;
    p.mig[1] = share;
    ZT_CHECK(c, zen__tp_group_force_plan(g, &p) == ZEN_OK);
    float x[2 * 8] = { 0 }, y[2 * 2];
    zen_status st = zen_tp_linear_forward(l, x, 2, y, 1);
    if (st != ZEN_OK && st != ZEN_EABORTED)
        ZT_CHECK(c, strstr(zen_comm_last_error(c), "peer") != NULL);
    zen__tp_plan_free(&p);
    zen_tp_linear_destroy(l);
    zen_tp_group_destroy(g);
    return st;
}

static void test_plan_mismatch_fails(void **state)
{
    (void)state;
    zen_status rs[2];
    zen_status st = zen_run_inproc(2, NULL, mismatch_rank, NULL, rs);
    assert_int_not_equal(st, ZEN_OK);
    assert_true(rs[0] == ZEN_EPROTO || rs[1] == ZEN_EPROTO);
}

/* ---- the step time estimate caps scheduler spikes at 3x the median time per flop ---- */

static zen_status spikes_rank(zen_comm *c, void *arg)
{
    (void)arg;
    zen_tp_group *g = NULL;
    ZT_CHECK(c, zen_tp_group_create(c, NULL, &g) == ZEN_OK);
    for (int i = 0; i < 11; i++) {
        g->samples[i].flops = 1000.0 * (i + 1);
        g->samples[i].ns = g->samples[i].flops * (i == 4 ? 100.0 : 1.0); /* one spike */
        g->samples[i].scale = 2.0;
        g->step_norm_ns += g->samples[i].ns * 2.0;
    }
    g->nsamples = 11;
    double want = 0;
    for (int i = 0; i < 11; i++)
        want += 2.0 * 1000.0 * (i + 1) * (i == 4 ? 3.0 : 1.0);
    ZT_CHECK(c, fabs(zen__tp_step_norm_ns(g) - want) < 1e-6 * want);
    g->samples[4].ns = g->samples[4].flops * 2.5; /* moderate slowness is kept as measured */
    ZT_CHECK(c, fabs(zen__tp_step_norm_ns(g) - (want - 2.0 * 5000 * 0.5)) < 1e-6 * want);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_spike_filter(void **state)
{
    (void)state;
    zt_run_inproc(1, spikes_rank, NULL);
}

/* ---- zen_tp_linear_layout, zen_tp_linear_detach_state, zen_tp_group_plan (one rank) ---- */

static zen_status layout_rank(zen_comm *c, void *arg)
{
    (void)arg;

    enum {
        IN = 8,
        OUT = 2
    };

    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    o.balance = ZEN_BALANCE_RESIZE;
    o.period = 1000;
    zen_tp_group *g = NULL;
    zen_tp_linear *l = NULL;
    ZT_CHECK(c, zen_tp_group_create(c, &o, &g) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_create(g, ZEN_TP_COLUMN, IN, OUT, 0, &l) == ZEN_OK);
    int perm[IN], computed = -1;
    ZT_CHECK(c, zen_tp_linear_layout(l, perm, &computed) == ZEN_OK && computed == IN);
    for (int p = 0; p < IN; p++)
        ZT_CHECK(c, perm[p] == p);
    zen_tp_rank_plan rp;
    ZT_CHECK(c, zen_tp_group_plan(g, &rp, 1) == ZEN_OK);
    ZT_CHECK(c, rp.local == 1.0 && rp.pruned == 0.0 && rp.migrated == 0.0 && rp.t_ms == 0.0);
    ZT_CHECK(c, zen_tp_group_plan(g, &rp, 0) == ZEN_EINVAL);

    zen_tp_param w;
    zen_tp_linear_weight(l, &w);
    float w0[OUT * IN], on[OUT * IN], off[OUT * IN], x[IN], y[OUT];
    tpt_fill(w0, OUT * IN, 7);
    memcpy(w.data, w0, sizeof w0);
    memcpy(on, w0, sizeof w0);
    memcpy(off, w0, sizeof w0);
    ZT_CHECK(c, zen_tp_linear_attach_state(l, on) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_attach_state(l, off) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_detach_state(l, off) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_detach_state(l, off) == ZEN_EINVAL); /* not attached any more */
    tpt_fill(x, IN, 8);
    ZT_CHECK(c, zen_tp_linear_forward(l, x, 1, y, 1) == ZEN_OK); /* captures W_ref */
    /* the odd columns change most: a score-kept half that is not the prefix */
    for (int j = 1; j < IN; j += 2)
        for (int i = 0; i < OUT; i++)
            w.data[i * IN + j] += 1.0f;
    zen__tp_layer_refresh_scores(l);
    tp_plan p;
    ZT_CHECK(c, zen__tp_plan_init(&p, 1) == ZEN_OK);
    p.local[0] = 0.5;
    p.prune[0] = 0.5;
    ZT_CHECK(c, zen__tp_group_force_plan(g, &p) == ZEN_OK);
    ZT_CHECK(c, zen_tp_linear_layout(l, perm, &computed) == ZEN_OK && computed == IN / 2);
    for (int q = 0; q < IN; q++) {
        ZT_CHECK(c, perm[q] == l->perm[q]);
        ZT_CHECK(c, (q < computed) == (perm[q] % 2 == 1)); /* the odd columns are computed */
        for (int i = 0; i < OUT; i++) {
            ZT_CHECK(c, on[i * IN + q] == w0[i * IN + perm[q]]); /* attached: moved */
            ZT_CHECK(c, off[i * IN + q] == w0[i * IN + q]);      /* detached: untouched */
        }
    }
    ZT_CHECK(c, zen_tp_linear_layout(l, NULL, NULL) == ZEN_OK);
    ZT_CHECK(c, zen_tp_group_plan(g, &rp, 1) == ZEN_OK);
    ZT_CHECK(c, rp.local == 0.5 && rp.pruned == 0.5 && rp.migrated == 0.0 && rp.helped == 0.0);
    zen__tp_plan_free(&p);
    zen_tp_linear_destroy(l);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_layout_and_companions(void **state)
{
    (void)state;
    zt_run_inproc(1, layout_rank, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migrate_exact),
        cmocka_unit_test(test_resize_column),
        cmocka_unit_test(test_resize_row),
        cmocka_unit_test(test_priority),
        cmocka_unit_test(test_dynamic_migrate),
        cmocka_unit_test(test_dynamic_resize_semi),
        cmocka_unit_test(test_emulation),
        cmocka_unit_test(test_waits_for_late_rank),
        cmocka_unit_test(test_plan_mismatch_fails),
        cmocka_unit_test(test_spike_filter),
        cmocka_unit_test(test_layout_and_companions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
