/*
 * Tensor-parallel equivalence of the GPT: the same model (same seed) at tp = 1, 2 and 4 on
 * inproc ranks (the whole world is the tp communicator) must have
 *  - bit-identical initial full weights (initialisation is drawn full, then sliced),
 *  - the same loss and full gradients (exported in canonical order) for one batch,
 *  - the same gradient norms and weights after 3 AdamW steps with clipping active,
 *  - shards of 1/tp of each tp tensor, and replicated params equal on every tp rank at the end.
 * Only the summation order of the tp allreduces differs, so the tolerances are fp32 rounding
 * sized: loss 1e-5 relative, gradients 2e-6 + 1e-4 |g|, weights after 3 steps 5e-6 (the updates
 * are ~lr = 1e-3 each; Adam's sign-like first steps magnify gradient rounding only for
 * gradients near zero, which the larger eps below keeps bounded).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "train/adamw.h"
#include "train/gpt.h"

#define B_     2
#define T_     6
#define NSTEPS 3

static const zen_gpt_config cfg = { 13, 6, 16, 2, 4, 32, 11 };

typedef struct result {
    float loss;
    float norms[NSTEPS];
    float *init, *grad, *final;
} result;

static void batch(int32_t *tok, int32_t *tgt, uint64_t seed)
{
    for (int i = 0; i < B_ * T_; i++) {
        tok[i] = (int32_t)(zt_rand(&seed) % (uint64_t)cfg.vocab);
        tgt[i] = (int32_t)(zt_rand(&seed) % (uint64_t)cfg.vocab);
    }
}

static zen_status tp_rank(zen_comm *c, void *arg)
{
    result *res = arg;
    int root = zen_comm_rank(c) == 0;
    size_t n = zen_gpt_full_param_count(&cfg);
    zen_tp_options opts = ZEN_TP_OPTIONS_INIT;
    zen_tp_group *g = NULL;
    zen_gpt *m = NULL;
    zen_adamw *o = NULL;
    ZT_CHECK(c, zen_tp_group_create(c, &opts, &g) == ZEN_OK);
    ZT_CHECK(c, zen_gpt_create(&cfg, c, g, &m) == ZEN_OK);
    float *w = malloc(n * sizeof(float));
    ZT_CHECK(c, w != NULL);
    ZT_CHECK(c, zen_gpt_export(m, w) == ZEN_OK);
    if (root)
        memcpy(res->init, w, n * sizeof(float));
    /* larger weights than the init, for gradients well above rounding */
    uint64_t s = 77;
    for (size_t i = 0; i < n; i++)
        w[i] += 0.2f * (float)((int64_t)(zt_rand(&s) >> 40) - (1 << 23)) / (float)(1 << 23);
    ZT_CHECK(c, zen_gpt_import(m, w) == ZEN_OK);

    int32_t tok[B_ * T_], tgt[B_ * T_];
    batch(tok, tgt, 1);
    float loss = 0;
    zen_gpt_zero_grad(m);
    ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, &loss) == ZEN_OK);
    ZT_CHECK(c, zen_gpt_backward(m) == ZEN_OK);
    size_t np = zen_gpt_param_count(m);
    const zen_gpt_param *p = zen_gpt_params(m);
    const float *grads[64];
    ZT_CHECK(c, np <= 64);
    int tp = zen_comm_size(c);
    for (size_t i = 0; i < np; i++) /* shards are 1/tp of the tensor, the rest replicated */
        ZT_CHECK(c, p[i].kind == ZEN_GPT_PARAM_TP_SHARD ? p[i].count * (size_t)tp == p[i].full_count
                                                        : p[i].count == p[i].full_count);
    for (size_t i = 0; i < np; i++)
        grads[i] = p[i].grad;
    ZT_CHECK(c, zen_gpt_export_tensors(m, grads, w) == ZEN_OK);
    if (root) {
        res->loss = loss;
        memcpy(res->grad, w, n * sizeof(float));
    }

    zen_adamw_config ac;
    zen_adamw_config_default(&ac);
    ac.lr = 1e-3f;
    ac.eps = 1e-6f;
    ac.warmup_steps = 1;
    ac.total_steps = 10;
    ac.grad_clip = 0.5f;
    ZT_CHECK(c, zen_adamw_create(m, &ac, &o) == ZEN_OK);
    for (int step = 0; step < NSTEPS; step++) {
        batch(tok, tgt, 100 + (uint64_t)step);
        zen_gpt_zero_grad(m);
        ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, NULL) == ZEN_OK);
        ZT_CHECK(c, zen_gpt_backward(m) == ZEN_OK);
        float norm = 0;
        ZT_CHECK(c, zen_adamw_step(o, &norm, NULL) == ZEN_OK);
        if (root)
            res->norms[step] = norm;
    }
    ZT_CHECK(c, zen_gpt_export(m, w) == ZEN_OK);
    if (root)
        memcpy(res->final, w, n * sizeof(float));
    /* replicas of the replicated params must not drift apart: every rank exported the same */
    float *hi = malloc(n * sizeof(float)), *lo = malloc(n * sizeof(float));
    ZT_CHECK(c, hi && lo);
    ZT_CHECK(c, zen_allreduce(c, w, hi, n, ZEN_F32, ZEN_MAX) == ZEN_OK);
    ZT_CHECK(c, zen_allreduce(c, w, lo, n, ZEN_F32, ZEN_MIN) == ZEN_OK);
    for (size_t i = 0; i < n; i++)
        ZT_CHECK(c, hi[i] - lo[i] <= 1e-6f * fabsf(hi[i]));
    free(hi);
    free(lo);
    free(w);
    zen_adamw_destroy(o);
    zen_gpt_destroy(m);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void alloc_result(result *r, size_t n)
{
    memset(r, 0, sizeof *r);
    r->init = calloc(n, sizeof(float));
    r->grad = calloc(n, sizeof(float));
    r->final = calloc(n, sizeof(float));
    assert_true(r->init && r->grad && r->final);
}

static void free_result(result *r)
{
    free(r->init);
    free(r->grad);
    free(r->final);
}

static void test_tp_equivalence(void **state)
{
    (void)state;
    size_t n = zen_gpt_full_param_count(&cfg);
    result ref, r;
    alloc_result(&ref, n);
    zt_run_inproc(1, tp_rank, &ref);
    assert_true(isfinite(ref.loss) && ref.loss > 0);
    for (int tp = 2; tp <= 4; tp *= 2) {
        alloc_result(&r, n);
        zt_run_inproc(tp, tp_rank, &r);
        assert_memory_equal(r.init, ref.init, n * sizeof(float));
        assert_true(fabsf(r.loss - ref.loss) <= 1e-5f * ref.loss);
        double gworst = 0, wworst = 0;
        for (size_t i = 0; i < n; i++) {
            gworst =
                fmax(gworst, fabs(r.grad[i] - ref.grad[i]) / (2e-6 + 1e-4 * fabs(ref.grad[i])));
            wworst = fmax(wworst, fabs(r.final[i] - ref.final[i]));
        }
        for (int s = 0; s < NSTEPS; s++)
            assert_true(fabsf(r.norms[s] - ref.norms[s]) <= 1e-5f * ref.norms[s]);
        fprintf(stderr, "tp %d: grad error %.3g of tolerance, weight max diff %.3g\n", tp, gworst,
                wworst);
        assert_true(gworst <= 1.0);
        assert_true(wworst <= 5e-6);
        free_result(&r);
    }
    free_result(&ref);
}

/* A config that differs on one rank (or is invalid there) fails on every rank, no hang. */
static zen_status mismatch_rank(zen_comm *c, void *arg)
{
    (void)arg;
    zen_tp_group *g = NULL;
    zen_gpt *m = NULL;
    ZT_CHECK(c, zen_tp_group_create(c, NULL, &g) == ZEN_OK);
    zen_gpt_config other = cfg;
    if (zen_comm_rank(c) == 1)
        other.seed++;
    ZT_CHECK(c, zen_gpt_create(&other, c, g, &m) == ZEN_EMISMATCH && m == NULL);
    if (zen_comm_rank(c) == 1)
        other.n_head = 3; /* does not divide d_model */
    ZT_CHECK(c, zen_gpt_create(&other, c, g, &m) == ZEN_EINVAL && m == NULL);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_config_mismatch(void **state)
{
    (void)state;
    zt_run_inproc(2, mismatch_rank, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tp_equivalence),
        cmocka_unit_test(test_config_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
