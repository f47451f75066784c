/*
 * Phase 1 of the tp runtime: column- and row-parallel linear layers (balance NONE) at tp 1, 2, 4
 * on inproc ranks. Forward Y and backward dX, dW, db of every rank are compared with a naive
 * single-rank reference on the full matrices (double accumulation), tolerance 1e-4 relative.
 */
#include "common/alloc.h"
#include "test_tp_util.h"
#include "tp/tp_internal.h"

#define TOL 1e-4

typedef struct lin_case {
    zen_tp_kind kind;
    int rows, in, out, bias;
} lin_case;

typedef struct full_data {
    float *w, *b, *x, *dy, *y, *dx, *dw, *db;
} full_data;

static int make_full(const lin_case *c, full_data *f)
{
    size_t wn = (size_t)c->out * c->in, xn = (size_t)c->rows * c->in, yn = (size_t)c->rows * c->out;
    f->w = malloc(wn * 4);
    f->b = malloc((size_t)c->out * 4);
    f->x = malloc(xn * 4);
    f->dy = malloc(yn * 4);
    f->y = malloc(yn * 4);
    f->dx = malloc(xn * 4);
    f->dw = malloc(wn * 4);
    f->db = malloc((size_t)c->out * 4);
    if (!f->w || !f->b || !f->x || !f->dy || !f->y || !f->dx || !f->dw || !f->db)
        return -1;
    tpt_fill(f->w, wn, 11);
    tpt_fill(f->b, (size_t)c->out, 12);
    tpt_fill(f->x, xn, 13);
    tpt_fill(f->dy, yn, 14);
    tpt_ref_forward(f->x, f->w, c->bias ? f->b : NULL, c->rows, c->in, c->out, f->y);
    tpt_ref_backward(f->x, f->w, f->dy, c->rows, c->in, c->out, f->dx, f->dw, f->db);
    return 0;
}

static void free_full(full_data *f)
{
    free(f->w);
    free(f->b);
    free(f->x);
    free(f->dy);
    free(f->y);
    free(f->dx);
    free(f->dw);
    free(f->db);
}

/* One rank: slice the full data, run forward + backward twice (grads must accumulate), compare. */
static zen_status check_rank(zen_comm *comm, const lin_case *c, const full_data *f, zen_tp_group *g)
{
    int n = zen_comm_size(comm), r = zen_comm_rank(comm);
    int col = c->kind == ZEN_TP_COLUMN;
    zen_tp_linear *l = NULL;
    ZT_CHECK(comm, zen_tp_linear_create(g, c->kind, c->in, c->out, c->bias, &l) == ZEN_OK);
    zen_tp_param w, b;
    ZT_CHECK(comm, zen_tp_linear_weight(l, &w) == ZEN_OK && zen_tp_linear_bias(l, &b) == ZEN_OK);
    int wr = col ? c->out / n : c->out, wc = col ? c->in : c->in / n;
    int r0 = col ? r * wr : 0, c0 = col ? 0 : r * wc;
    ZT_CHECK(comm, w.rows == wr && w.cols == wc && w.count == (size_t)wr * wc);
    ZT_CHECK(comm, b.count == (size_t)(c->bias ? (col ? wr : c->out) : 0));
    tpt_block(f->w, c->in, r0, wr, c0, wc, w.data);
    if (c->bias)
        memcpy(b.data, f->b + (col ? r0 : 0), b.count * sizeof(float));

    int xin = col ? c->in : wc, yout = col ? wr : c->out;
    float *x = malloc((size_t)c->rows * xin * 4), *y = malloc((size_t)c->rows * yout * 4);
    float *dy = malloc((size_t)c->rows * yout * 4), *dx = malloc((size_t)c->rows * xin * 4);
    float *ref = malloc((size_t)wr * wc * 4);
    ZT_CHECK(comm, x && y && dy && dx && ref);
    tpt_block(f->x, c->in, 0, c->rows, c0, xin, x);
    tpt_block(f->dy, c->out, 0, c->rows, col ? r0 : 0, yout, dy);

    zen_status st = ZEN_OK;
    for (int rep = 1; rep <= 2 && st == ZEN_OK; rep++) {
        ZT_CHECK(comm, zen_tp_linear_forward(l, x, c->rows, y, 1) == ZEN_OK);
        ZT_CHECK(comm, tpt_close(y, yout, f->y + (col ? r0 : 0), c->out, c->rows, yout, TOL));
        ZT_CHECK(comm, zen_tp_linear_backward(l, x, dy, c->rows, dx) == ZEN_OK);
        ZT_CHECK(comm, tpt_close(dx, xin, f->dx + c0, c->in, c->rows, xin, TOL));
        tpt_block(f->dw, c->in, r0, wr, c0, wc, ref);
        for (size_t i = 0; i < (size_t)wr * wc; i++)
            ref[i] *= (float)rep;
        ZT_CHECK(comm, tpt_close(w.grad, wc, ref, wc, wr, wc, TOL));
        for (size_t i = 0; i < b.count; i++)
            ZT_CHECK(comm, fabs(b.grad[i] - rep * f->db[(col ? r0 : 0) + i]) <=
                               TOL * fmax(1.0, fabs(rep * f->db[(col ? r0 : 0) + i])));
        ZT_CHECK(comm, zen_tp_group_step(g) == ZEN_OK);
    }
    /* evaluation pass gives the same output; export is the identity without a plan */
    ZT_CHECK(comm, zen_tp_linear_forward(l, x, c->rows, y, 0) == ZEN_OK);
    ZT_CHECK(comm, tpt_close(y, yout, f->y + (col ? r0 : 0), c->out, c->rows, yout, TOL));
    ZT_CHECK(comm, zen_tp_linear_export_weight(l, ref) == ZEN_OK);
    ZT_CHECK(comm, memcmp(ref, w.data, (size_t)wr * wc * 4) == 0);
    /* backward without dx still takes part in the allreduce */
    ZT_CHECK(comm, zen_tp_linear_backward(l, x, dy, c->rows, NULL) == ZEN_OK);
    free(x);
    free(y);
    free(dy);
    free(dx);
    free(ref);
    zen_tp_linear_destroy(l);
    return st;
}

typedef struct lin_arg {
    lin_case c;
    full_data f;
} lin_arg;

static zen_status lin_rank(zen_comm *comm, void *argp)
{
    lin_arg *a = argp;
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    zen_tp_group *g = NULL;
    ZT_CHECK(comm, zen_tp_group_create(comm, &o, &g) == ZEN_OK);
    zen_status st = check_rank(comm, &a->c, &a->f, g);
    zen_tp_group_destroy(g);
    return st;
}

static void run_case(zen_tp_kind kind, int bias, int rows, int in, int out)
{
    const int sizes[] = { 1, 2, 4 };
    for (size_t i = 0; i < 3; i++) {
        lin_arg a = { { kind, rows, in, out, bias }, { 0 } };
        assert_int_equal(make_full(&a.c, &a.f), 0);
        zt_run_inproc(sizes[i], lin_rank, &a);
        free_full(&a.f);
    }
}

static void test_column(void **state)
{
    (void)state;
    run_case(ZEN_TP_COLUMN, 1, 7, 12, 16);
    run_case(ZEN_TP_COLUMN, 0, 3, 5, 8);
}

static void test_row(void **state)
{
    (void)state;
    run_case(ZEN_TP_ROW, 1, 7, 16, 12);
    run_case(ZEN_TP_ROW, 0, 2, 8, 5);
}

/* A Megatron MLP (column then row) equals the full two-layer computation. */
typedef struct mlp_arg {
    int rows, d, h;
    float *w1, *w2, *x, *y, *dy, *dx;
} mlp_arg;

static zen_status mlp_rank(zen_comm *comm, void *argp)
{
    mlp_arg *a = argp;
    int n = zen_comm_size(comm), r = zen_comm_rank(comm), hl = a->h / n;
    zen_tp_group *g = NULL;
    zen_tp_linear *l1 = NULL, *l2 = NULL;
    ZT_CHECK(comm, zen_tp_group_create(comm, NULL, &g) == ZEN_OK);
    ZT_CHECK(comm, zen_tp_linear_create(g, ZEN_TP_COLUMN, a->d, a->h, 0, &l1) == ZEN_OK);
    ZT_CHECK(comm, zen_tp_linear_create(g, ZEN_TP_ROW, a->h, a->d, 0, &l2) == ZEN_OK);
    zen_tp_param p1, p2;
    zen_tp_linear_weight(l1, &p1);
    zen_tp_linear_weight(l2, &p2);
    tpt_block(a->w1, a->d, r * hl, hl, 0, a->d, p1.data);
    tpt_block(a->w2, a->h, 0, a->d, r * hl, hl, p2.data);
    float *hid = calloc((size_t)a->rows * hl, 4), *y = calloc((size_t)a->rows * a->d, 4);
    float *dh = calloc((size_t)a->rows * hl, 4), *dx = calloc((size_t)a->rows * a->d, 4);
    ZT_CHECK(comm, hid && y && dh && dx);
    ZT_CHECK(comm, zen_tp_linear_forward(l1, a->x, a->rows, hid, 1) == ZEN_OK);
    ZT_CHECK(comm, zen_tp_linear_forward(l2, hid, a->rows, y, 1) == ZEN_OK);
    ZT_CHECK(comm, tpt_close(y, a->d, a->y, a->d, a->rows, a->d, TOL));
    ZT_CHECK(comm, zen_tp_linear_backward(l2, hid, a->dy, a->rows, dh) == ZEN_OK);
    ZT_CHECK(comm, zen_tp_linear_backward(l1, a->x, dh, a->rows, dx) == ZEN_OK);
    ZT_CHECK(comm, tpt_close(dx, a->d, a->dx, a->d, a->rows, a->d, TOL));
    free(hid);
    free(y);
    free(dh);
    free(dx);
    zen_tp_linear_destroy(l1);
    zen_tp_linear_destroy(l2);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_mlp(void **state)
{
    (void)state;
    mlp_arg a = { 6, 8, 16, NULL, NULL, NULL, NULL, NULL, NULL };
    size_t nd = (size_t)a.rows * a.d, nh = (size_t)a.rows * a.h;
    a.w1 = malloc((size_t)a.h * a.d * 4);
    a.w2 = malloc((size_t)a.d * a.h * 4);
    a.x = malloc(nd * 4);
    a.y = malloc(nd * 4);
    a.dy = malloc(nd * 4);
    a.dx = malloc(nd * 4);
    float *hid = malloc(nh * 4), *dh = malloc(nh * 4);
    float *dw1 = malloc((size_t)a.h * a.d * 4), *dw2 = malloc((size_t)a.d * a.h * 4);
    assert_non_null(dw2);
    tpt_fill(a.w1, (size_t)a.h * a.d, 1);
    tpt_fill(a.w2, (size_t)a.d * a.h, 2);
    tpt_fill(a.x, nd, 3);
    tpt_fill(a.dy, nd, 4);
    tpt_ref_forward(a.x, a.w1, NULL, a.rows, a.d, a.h, hid);
    tpt_ref_forward(hid, a.w2, NULL, a.rows, a.h, a.d, a.y);
    tpt_ref_backward(hid, a.w2, a.dy, a.rows, a.h, a.d, dh, dw2, NULL);
    tpt_ref_backward(a.x, a.w1, dh, a.rows, a.d, a.h, a.dx, dw1, NULL);
    for (int n = 1; n <= 4; n *= 2)
        zt_run_inproc(n, mlp_rank, &a);
    free(a.w1);
    free(a.w2);
    free(a.x);
    free(a.y);
    free(a.dy);
    free(a.dx);
    free(hid);
    free(dh);
    free(dw1);
    free(dw2);
}

/* Argument errors are reported, not crashes. */
static zen_status bad_args_rank(zen_comm *comm, void *arg)
{
    (void)arg;
    zen_tp_group *g = NULL;
    zen_tp_linear *l = NULL;
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    o.rho_max = 2.0;
    ZT_CHECK(comm, zen_tp_group_create(comm, &o, &g) == ZEN_EINVAL && g == NULL);
    ZT_CHECK(comm, zen_tp_group_create(comm, NULL, &g) == ZEN_OK);
    ZT_CHECK(comm, zen_tp_linear_create(g, ZEN_TP_COLUMN, 4, 3, 0, &l) == ZEN_EINVAL && !l);
    ZT_CHECK(comm, zen_tp_linear_create(g, ZEN_TP_ROW, 3, 4, 0, &l) == ZEN_EINVAL && !l);
    ZT_CHECK(comm, zen_tp_linear_create(g, ZEN_TP_ROW, 0, 4, 0, &l) == ZEN_EINVAL && !l);
    ZT_CHECK(comm, strstr(zen_comm_last_error(comm), "rank") != NULL);
    /* a layer outliving its group is detached: calls fail cleanly, destroy still works */
    ZT_CHECK(comm, zen_tp_linear_create(g, ZEN_TP_COLUMN, 4, 4, 1, &l) == ZEN_OK);
    zen_tp_group_destroy(g);
    float x[4] = { 0 }, y[4];
    ZT_CHECK(comm, zen_tp_linear_forward(l, x, 1, y, 1) == ZEN_EINVAL);
    zen_tp_linear_destroy(l);
    return ZEN_OK;
}

/* Allocation failures in group and layer creation give ZEN_ENOMEM and leak nothing (ASan). */
static zen_status alloc_fail_rank(zen_comm *comm, void *arg)
{
    (void)arg;
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    o.balance = ZEN_BALANCE_SEMI;
    int succeeded = 0;
    for (long k = 1; k < 200 && !succeeded; k++) {
        zen_tp_group *g = NULL;
        zen_tp_linear *l = NULL;
        zen__alloc_fail_after(k);
        zen_status st = zen_tp_group_create(comm, &o, &g);
        if (st == ZEN_OK)
            st = zen_tp_linear_create(g, ZEN_TP_ROW, 8, 4, 1, &l);
        zen__alloc_fail_after(0);
        ZT_CHECK(comm, st == ZEN_OK || st == ZEN_ENOMEM);
        succeeded = st == ZEN_OK;
        zen_tp_linear_destroy(l);
        zen_tp_group_destroy(g);
    }
    ZT_CHECK(comm, succeeded);
    return ZEN_OK;
}

/* ZEN_TP_* fill the options the caller left unset; an explicit option wins; malformed values
 * are ignored (the default is used). */
static zen_status env_rank(zen_comm *comm, void *arg)
{
    (void)arg;
    zen_tp_group *g = NULL;
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    ZT_CHECK(comm, zen_tp_group_create(comm, &o, &g) == ZEN_OK);
    ZT_CHECK(comm, g->opts.period == 3 && g->opts.priority == ZEN_TP_PRIORITY_RANDOM &&
                       g->opts.rho_max == 0.5 && g->opts.delta == 0.25);
    zen_tp_group_destroy(g);
    o.period = 7; /* explicit: ZEN_TP_PERIOD=3 must not override it */
    o.delta = 0.5;
    o.priority = ZEN_TP_PRIORITY_PREFIX;
    ZT_CHECK(comm, zen_tp_group_create(comm, &o, &g) == ZEN_OK);
    ZT_CHECK(comm, g->opts.period == 7 && g->opts.priority == ZEN_TP_PRIORITY_PREFIX &&
                       g->opts.rho_max == 0.5 && g->opts.delta == 0.5);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_env_overrides(void **state)
{
    (void)state;
    setenv("ZEN_TP_PERIOD", "3", 1);
    setenv("ZEN_TP_PRIORITY", "random", 1);
    setenv("ZEN_TP_RHO_MAX", "2.0", 1); /* out of range: ignored */
    setenv("ZEN_TP_DELTA", "0.25", 1);
    zt_run_inproc(1, env_rank, NULL);
    unsetenv("ZEN_TP_PERIOD");
    unsetenv("ZEN_TP_PRIORITY");
    unsetenv("ZEN_TP_RHO_MAX");
    unsetenv("ZEN_TP_DELTA");
}

static void test_alloc_failures(void **state)
{
    (void)state;
    zt_run_inproc(1, alloc_fail_rank, NULL);
}

static void test_bad_args(void **state)
{
    (void)state;
    zt_run_inproc(2, bad_args_rank, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_column),
        cmocka_unit_test(test_row),
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_env_overrides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
