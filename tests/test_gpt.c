/*
 * The whole GPT (src/train/gpt.c, gpt_pass.c) at tp = 1: backward against central finite
 * differences of the loss for a sample of scalars in EVERY parameter tensor, the touched-row
 * set of the embedding, logits, export/import round trips, and AdamW (src/train/adamw.c)
 * against a naive double-precision reference for two steps with clipping active.
 *
 * Finite differences: the weights are first replaced by N(0, 0.3) draws (GPT-2's 0.02 makes
 * most gradients tiny), eps = 1e-2, and the fp32 loss (about 2.4) has rounding noise ~1e-7, so
 * the numeric derivative is good to ~1e-5 plus the O(eps^2) truncation term. Tolerance:
 * |analytic - numeric| <= 5e-4 + 2e-2 |numeric|.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "train/adamw.h"
#include "train/gpt.h"

#define B_ 2
#define T_ 5

static const zen_gpt_config tiny = { 11, 5, 8, 2, 2, 16, 7 };

static void batch(int32_t *tok, int32_t *tgt, int n, int vocab, uint64_t seed)
{
    /* ids drawn from a subset so that some embedding rows stay untouched */
    for (int i = 0; i < n; i++) {
        tok[i] = (int32_t)(zt_rand(&seed) % (uint64_t)(vocab - 3));
        tgt[i] = (int32_t)(zt_rand(&seed) % (uint64_t)vocab);
    }
}

static float gauss(uint64_t *s)
{
    double u1 = ((zt_rand(s) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (zt_rand(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
}

/* Replace every weight by w + 0.3 N(0,1) through export/import. */
static zen_status perturb(zen_gpt *m, uint64_t seed)
{
    size_t n = zen_gpt_full_param_count(zen_gpt_get_config(m));
    float *w = malloc(n * sizeof(float));
    if (!w)
        return ZEN_ENOMEM;
    zen_status st = zen_gpt_export(m, w);
    for (size_t i = 0; i < n; i++)
        w[i] += 0.3f * gauss(&seed);
    if (st == ZEN_OK)
        st = zen_gpt_import(m, w);
    free(w);
    return st;
}

static zen_status make(zen_comm *c, const zen_gpt_config *cfg, zen_tp_group **g, zen_gpt **m)
{
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    zen_status st = zen_tp_group_create(c, &o, g);
    if (st == ZEN_OK)
        st = zen_gpt_create(cfg, c, *g, m);
    return st;
}

/* ---- finite-difference check of every tensor ---- */

static zen_status gradcheck_rank(zen_comm *c, void *arg)
{
    (void)arg;
    zen_tp_group *g = NULL;
    zen_gpt *m = NULL;
    ZT_CHECK(c, make(c, &tiny, &g, &m) == ZEN_OK);
    ZT_CHECK(c, perturb(m, 99) == ZEN_OK);
    int32_t tok[B_ * T_], tgt[B_ * T_];
    batch(tok, tgt, B_ * T_, tiny.vocab, 5);
    float loss = 0;
    zen_gpt_zero_grad(m);
    ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, &loss) == ZEN_OK && isfinite(loss));
    ZT_CHECK(c, zen_gpt_backward(m) == ZEN_OK);
    ZT_CHECK(c, zen_gpt_backward(m) == ZEN_EINVAL); /* one backward per forward */

    /* touched rows = sorted unique tokens; the other embedding rows have zero gradient */
    const int32_t *rows;
    size_t nrows;
    zen_gpt_touched_rows(m, &rows, &nrows);
    int seen[16] = { 0 };
    for (int i = 0; i < B_ * T_; i++)
        seen[tok[i]] = 1;
    size_t k = 0;
    for (int v = 0; v < tiny.vocab; v++)
        if (seen[v]) {
            ZT_CHECK(c, k < nrows && rows[k] == v);
            k++;
        }
    ZT_CHECK(c, k == nrows);

    size_t np = zen_gpt_param_count(m);
    const zen_gpt_param *p = zen_gpt_params(m);
    ZT_CHECK(c, np == 2 + 12 * (size_t)tiny.n_layer + 3);
    size_t total = 0;
    int bad = 0, checked = 0;
    uint64_t pick = 3;
    for (size_t i = 0; i < np; i++) {
        total += p[i].full_count;
        ZT_CHECK(c, p[i].count == p[i].full_count); /* tp = 1 */
        if (p[i].kind == ZEN_GPT_PARAM_EMBEDDING) {
            for (int v = 0; v < tiny.vocab; v++)
                if (!seen[v])
                    for (int j = 0; j < tiny.d_model; j++)
                        ZT_CHECK(c, p[i].grad[v * tiny.d_model + j] == 0.0f);
        }
        size_t ns = p[i].count < 6 ? p[i].count : 6;
        for (size_t s = 0; s < ns; s++) {
            size_t j = p[i].count <= 6 ? s : (size_t)(zt_rand(&pick) % p[i].count);
            float keep = p[i].data[j], lp = 0, lm = 0;
            p[i].data[j] = keep + 1e-2f;
            ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, &lp) == ZEN_OK);
            p[i].data[j] = keep - 1e-2f;
            ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, &lm) == ZEN_OK);
            p[i].data[j] = keep;
            double num = ((double)lp - lm) / 2e-2, ana = p[i].grad[j];
            checked++;
            if (fabs(ana - num) > 5e-4 + 2e-2 * fabs(num)) {
                if (bad++ < 10)
                    fprintf(stderr, "%s[%zu]: analytic %.6g numeric %.6g\n", p[i].name, j, ana,
                            num);
            }
        }
    }
    ZT_CHECK(c, bad == 0 && checked > 100);
    ZT_CHECK(c, total == zen_gpt_full_param_count(&tiny));
    zen_gpt_destroy(m);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_gradcheck(void **state)
{
    (void)state;
    zt_run_inproc(1, gradcheck_rank, NULL);
}

/* ---- logits, bad input, export/import, accumulation ---- */

static zen_status api_rank(zen_comm *c, void *arg)
{
    (void)arg;
    zen_tp_group *g = NULL;
    zen_gpt *m = NULL;
    ZT_CHECK(c, make(c, &tiny, &g, &m) == ZEN_OK);
    int32_t tok[B_ * T_], tgt[B_ * T_];
    batch(tok, tgt, B_ * T_, tiny.vocab, 8);
    float loss = 0, l2 = 0;
    ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, &loss) == ZEN_OK);
    /* the mean cross-entropy recomputed from zen_gpt_logits */
    double ref = 0;
    float z[16];
    for (int b = 0; b < B_; b++)
        for (int t = 0; t < T_; t++) {
            ZT_CHECK(c, zen_gpt_logits(m, b, t, z) == ZEN_OK);
            double s = 0;
            for (int v = 0; v < tiny.vocab; v++)
                s += exp(z[v]);
            ref += log(s) - z[tgt[b * T_ + t]];
        }
    ref /= B_ * T_;
    ZT_CHECK(c, fabs(ref - loss) < 1e-5);
    /* a causal model: logits at t do not depend on tokens after t */
    float before[16], after[16];
    ZT_CHECK(c, zen_gpt_logits(m, 1, 2, before) == ZEN_OK);
    tok[1 * T_ + 3] = (tok[1 * T_ + 3] + 1) % tiny.vocab;
    ZT_CHECK(c, zen_gpt_forward(m, tok, NULL, B_, T_, NULL) == ZEN_OK);
    ZT_CHECK(c, zen_gpt_logits(m, 1, 2, after) == ZEN_OK);
    ZT_CHECK(c, memcmp(before, after, sizeof before[0] * tiny.vocab) == 0);
    ZT_CHECK(c, zen_gpt_backward(m) == ZEN_EINVAL); /* no targets */
    ZT_CHECK(c, zen_gpt_logits(m, 2, 0, z) == ZEN_EINVAL);

    /* bad input is rejected */
    int32_t badtok[B_ * T_];
    memcpy(badtok, tok, sizeof badtok);
    badtok[3] = tiny.vocab;
    ZT_CHECK(c, zen_gpt_forward(m, badtok, NULL, B_, T_, NULL) == ZEN_EINVAL);
    ZT_CHECK(c, zen_gpt_forward(m, tok, badtok, B_, T_, NULL) == ZEN_EINVAL);
    ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, 1, tiny.ctx + 1, NULL) == ZEN_EINVAL);

    /* gradients accumulate over two backward passes */
    const zen_gpt_param *p = zen_gpt_params(m);
    size_t np = zen_gpt_param_count(m);
    zen_gpt_zero_grad(m);
    ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, &loss) == ZEN_OK);
    ZT_CHECK(c, zen_gpt_backward(m) == ZEN_OK);
    float g1 = p[np - 1].grad[5], g2 = p[3].grad[1];
    ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, &l2) == ZEN_OK && l2 == loss);
    ZT_CHECK(c, zen_gpt_backward(m) == ZEN_OK);
    /* not bitwise: the second pass adds its row sums onto a nonzero start */
    ZT_CHECK(c, g1 != 0.0f && g2 != 0.0f);
    ZT_CHECK(c, fabsf(p[np - 1].grad[5] - 2 * g1) <= 1e-5f * fabsf(g1));
    ZT_CHECK(c, fabsf(p[3].grad[1] - 2 * g2) <= 1e-5f * fabsf(g2));
    zen_gpt_zero_grad(m);
    for (size_t i = 0; i < np; i++)
        for (size_t j = 0; j < p[i].count; j++)
            ZT_CHECK(c, p[i].grad[j] == 0.0f);

    /* export -> import of other weights -> import back: the loss returns exactly */
    size_t n = zen_gpt_full_param_count(&tiny);
    float *w = malloc(n * sizeof(float)), *w2 = malloc(n * sizeof(float));
    ZT_CHECK(c, w && w2);
    ZT_CHECK(c, zen_gpt_export(m, w) == ZEN_OK);
    ZT_CHECK(c, perturb(m, 4) == ZEN_OK);
    ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, &l2) == ZEN_OK && l2 != loss);
    ZT_CHECK(c, zen_gpt_import(m, w) == ZEN_OK);
    ZT_CHECK(c, zen_gpt_export(m, w2) == ZEN_OK && memcmp(w, w2, n * sizeof(float)) == 0);
    ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, &l2) == ZEN_OK && l2 == loss);
    /* the initialisation: LayerNorm gains 1, biases 0, the rest N(0, 0.02)-sized */
    ZT_CHECK(c, w[tiny.vocab * tiny.d_model + tiny.ctx * tiny.d_model] == 1.0f);
    free(w);
    free(w2);
    zen_gpt_destroy(m);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_api(void **state)
{
    (void)state;
    zt_run_inproc(1, api_rank, NULL);
}

/* ---- AdamW against a naive reference ---- */

static zen_status adamw_rank(zen_comm *c, void *arg)
{
    (void)arg;
    zen_tp_group *g = NULL;
    zen_gpt *m = NULL;
    ZT_CHECK(c, make(c, &tiny, &g, &m) == ZEN_OK);
    zen_adamw_config ac;
    zen_adamw_config_default(&ac);
    ac.lr = 1e-2f;
    ac.warmup_steps = 2;
    ac.total_steps = 10;
    ac.grad_clip = 0.05f; /* below the initial norm: clipping is active */
    zen_adamw *o = NULL;
    ZT_CHECK(c, zen_adamw_create(m, &ac, &o) == ZEN_OK);
    size_t np = zen_gpt_param_count(m);
    const zen_gpt_param *p = zen_gpt_params(m);
    size_t n = zen_gpt_full_param_count(&tiny);
    double *w = calloc(n, sizeof(double)), *m1 = calloc(n, sizeof(double));
    double *m2 = calloc(n, sizeof(double));
    float *tmp = malloc(n * sizeof(float));
    ZT_CHECK(c, w && m1 && m2 && tmp);
    ZT_CHECK(c, zen_gpt_export(m, tmp) == ZEN_OK);
    for (size_t i = 0; i < n; i++)
        w[i] = tmp[i];
    /* every third scalar's squared gradient enters its second moment times 1/4 (top-k rescale) in
     * every other param; the others keep 1 */
    float *vs = malloc(n * sizeof(float));
    ZT_CHECK(c, vs != NULL);
    for (size_t i = 0; i < n; i++)
        vs[i] = i % 3 == 0 ? 0.25f : 1.0f;
    for (size_t i = 1; i < np; i += 2)
        zen_adamw_set_moment_scales(o, i, vs);
    int32_t tok[B_ * T_], tgt[B_ * T_];
    for (int step = 0; step < 2; step++) {
        batch(tok, tgt, B_ * T_, tiny.vocab, 20 + (uint64_t)step);
        zen_gpt_zero_grad(m);
        ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, NULL) == ZEN_OK);
        ZT_CHECK(c, zen_gpt_backward(m) == ZEN_OK);
        /* reference: gradients in canonical order, norm, clip, Adam, decoupled decay */
        const float *grads[64];
        for (size_t i = 0; i < np; i++)
            grads[i] = p[i].grad;
        ZT_CHECK(c, zen_gpt_export_tensors(m, grads, tmp) == ZEN_OK);
        double norm = 0;
        for (size_t i = 0; i < n; i++)
            norm += (double)tmp[i] * tmp[i];
        norm = sqrt(norm);
        double scale = norm > ac.grad_clip ? ac.grad_clip / norm : 1.0;
        ZT_CHECK(c, scale < 1.0);
        double lr = ac.lr * (step + 1) / 2.0, t = step + 1;
        size_t off = 0;
        for (size_t i = 0; i < np; i++) {
            for (size_t j = 0; j < p[i].full_count; j++) {
                size_t q = off + j;
                double gq = tmp[q] * scale;
                m1[q] = 0.9 * m1[q] + 0.1 * gq;
                m2[q] = 0.95 * m2[q] + 0.05 * (i % 2 ? vs[j] : 1.0) * gq * gq;
                double upd =
                    (m1[q] / (1 - pow(0.9, t))) / (sqrt(m2[q] / (1 - pow(0.95, t))) + 1e-8);
                w[q] = w[q] * (p[i].decay ? 1 - lr * ac.weight_decay : 1.0) - lr * upd;
            }
            off += p[i].full_count;
        }
        float gn = 0, used = 0;
        ZT_CHECK(c, zen_adamw_step(o, &gn, &used) == ZEN_OK);
        ZT_CHECK(c, fabs(gn - norm) <= 1e-5 * norm && fabs(used - lr) < 1e-9);
        ZT_CHECK(c, zen_adamw_steps(o) == step + 1);
        ZT_CHECK(c, zen_gpt_export(m, tmp) == ZEN_OK);
        double worst = 0;
        for (size_t i = 0; i < n; i++)
            worst = fmax(worst, fabs(tmp[i] - w[i]));
        /* updates are ~lr = 1e-2; fp32 arithmetic on them is good to ~1e-8 */
        ZT_CHECK(c, worst < 2e-6);
    }
    /* moments export in canonical order and import back */
    float *e1 = malloc(n * sizeof(float)), *e2 = malloc(n * sizeof(float));
    long steps = 0;
    ZT_CHECK(c, e1 && e2 && zen_adamw_export_state(o, e1, e2, &steps) == ZEN_OK && steps == 2);
    for (size_t i = 0; i < n; i++)
        ZT_CHECK(c, fabs(e1[i] - m1[i]) < 1e-6 && fabs(e2[i] - m2[i]) < 1e-7);
    ZT_CHECK(c, zen_adamw_import_state(o, e1, e2, 7) == ZEN_OK && zen_adamw_steps(o) == 7);
    free(e1), free(e2), free(w), free(m1), free(m2), free(tmp), free(vs);
    zen_adamw_destroy(o);
    zen_gpt_destroy(m);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_adamw(void **state)
{
    (void)state;
    zt_run_inproc(1, adamw_rank, NULL);
}

/* ---- end to end: the model learns (memorises one batch) ---- */

static zen_status overfit_rank(zen_comm *c, void *arg)
{
    (void)arg;
    zen_tp_group *g = NULL;
    zen_gpt *m = NULL;
    ZT_CHECK(c, make(c, &tiny, &g, &m) == ZEN_OK);
    zen_adamw_config ac;
    zen_adamw_config_default(&ac);
    ac.lr = 2e-2f;
    ac.min_lr = 2e-3f;
    ac.warmup_steps = 5;
    ac.total_steps = 80;
    zen_adamw *o = NULL;
    ZT_CHECK(c, zen_adamw_create(m, &ac, &o) == ZEN_OK);
    int32_t tok[B_ * T_], tgt[B_ * T_];
    batch(tok, tgt, B_ * T_, tiny.vocab, 31);
    float first = 0, loss = 0;
    for (int step = 0; step < 80; step++) {
        zen_gpt_zero_grad(m);
        ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, &loss) == ZEN_OK);
        ZT_CHECK(c, zen_gpt_backward(m) == ZEN_OK);
        ZT_CHECK(c, zen_adamw_step(o, NULL, NULL) == ZEN_OK);
        if (step == 0)
            first = loss;
    }
    fprintf(stderr, "overfit: loss %.4f -> %.4f after 80 steps\n", first, loss);
    /* the initial loss is about log(11) = 2.4; 10 random targets can be memorised */
    ZT_CHECK(c, first > 2.0f && loss < 0.25f * first);
    zen_adamw_destroy(o);
    zen_gpt_destroy(m);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_overfit(void **state)
{
    (void)state;
    zt_run_inproc(1, overfit_rank, NULL);
}

static void test_schedule(void **state)
{
    (void)state;
    zen_adamw_config c;
    zen_adamw_config_default(&c);
    c.lr = 1.0f;
    c.min_lr = 0.1f;
    c.warmup_steps = 4;
    c.total_steps = 14;
    assert_float_equal(zen_adamw_lr(&c, 0), 0.25f, 1e-7);
    assert_float_equal(zen_adamw_lr(&c, 3), 1.0f, 1e-7);
    assert_float_equal(zen_adamw_lr(&c, 4), 1.0f, 1e-7);
    assert_float_equal(zen_adamw_lr(&c, 9), 0.55f, 1e-6); /* half way down the cosine */
    assert_float_equal(zen_adamw_lr(&c, 14), 0.1f, 1e-7);
    assert_float_equal(zen_adamw_lr(&c, 100), 0.1f, 1e-7);
    for (long s = 5; s < 14; s++)
        assert_true(zen_adamw_lr(&c, s) < zen_adamw_lr(&c, s - 1));
    zen_gpt_config g = tiny;
    assert_int_equal(zen_gpt_config_check(&g, 2), ZEN_OK);
    assert_int_equal(zen_gpt_config_check(&g, 4), ZEN_EINVAL); /* 2 heads */
    g.d_model = 9;
    assert_int_equal(zen_gpt_config_check(&g, 1), ZEN_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradcheck), cmocka_unit_test(test_api),
        cmocka_unit_test(test_adamw),     cmocka_unit_test(test_overfit),
        cmocka_unit_test(test_schedule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
