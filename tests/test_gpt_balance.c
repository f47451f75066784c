/*
 * The GPT under a tp balance plan (include/zen/tp.h): with ZERO-resizing active the tp layers
 * physically permute their weights, gradients and attached Adam moments along K. The model's
 * canonical export must not see that: exporting copies of the physical weights through
 * zen_gpt_export_tensors (the path the Adam moments take, via the layer's gradient export) must
 * give exactly zen_gpt_export (the layer's weight export), and both must be identical on every
 * tp rank. A straggler is emulated on tp rank 1 (4x slower GEMMs) so that a plan is made.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tp_emulation.h"
#include "train/adamw.h"
#include "train/gpt.h"

#define B_ 2
#define T_ 6

static const zen_gpt_config cfg = { 13, 6, 16, 2, 4, 32, 11 };

static zen_status resize_rank(zen_comm *c, void *arg)
{
    (void)arg;
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    o.balance = ZEN_BALANCE_RESIZE;
    o.period = 1;
    zen_tp_emulation e = ZEN_TP_EMULATION_INIT;
    ZT_CHECK(c, zen_cli_tp_parse_slow("1:4", zen_comm_size(c), &e) == ZEN_OK);
    zen_tp_group *g = NULL;
    zen_gpt *m = NULL;
    zen_adamw *opt = NULL;
    ZT_CHECK(c, zen_tp_group_create(c, &o, &g) == ZEN_OK);
    ZT_CHECK(c, zen_tp_group_set_emulation(g, &e) == ZEN_OK);
    ZT_CHECK(c, zen_gpt_create(&cfg, c, g, &m) == ZEN_OK);
    zen_adamw_config ac;
    zen_adamw_config_default(&ac);
    ac.lr = 1e-2f;
    ac.warmup_steps = 1;
    ZT_CHECK(c, zen_adamw_create(m, &ac, &opt) == ZEN_OK);
    size_t n = zen_gpt_full_param_count(&cfg), np = zen_gpt_param_count(m);
    const zen_gpt_param *p = zen_gpt_params(m);
    float *w1 = malloc(n * sizeof(float)), *w2 = malloc(n * sizeof(float));
    float *copies[64];
    ZT_CHECK(c, w1 && w2 && np <= 64);
    int planned = 0;
    uint64_t s = 5;
    for (int step = 0; step < 8; step++) {
        int32_t tok[B_ * T_], tgt[B_ * T_];
        for (int i = 0; i < B_ * T_; i++) {
            tok[i] = (int32_t)(zt_rand(&s) % (uint64_t)cfg.vocab);
            tgt[i] = (int32_t)(zt_rand(&s) % (uint64_t)cfg.vocab);
        }
        zen_gpt_zero_grad(m);
        ZT_CHECK(c, zen_gpt_forward(m, tok, tgt, B_, T_, NULL) == ZEN_OK);
        ZT_CHECK(c, zen_gpt_backward(m) == ZEN_OK);
        ZT_CHECK(c, zen_adamw_step(opt, NULL, NULL) == ZEN_OK);
        zen_tp_stats st;
        ZT_CHECK(c, zen_tp_group_stats(g, &st) == ZEN_OK);
        planned |= st.min_keep_fraction < 1.0;

        ZT_CHECK(c, zen_gpt_export(m, w1) == ZEN_OK);
        for (size_t i = 0; i < np; i++) {
            copies[i] = malloc(p[i].count * sizeof(float));
            ZT_CHECK(c, copies[i] != NULL);
            memcpy(copies[i], p[i].data, p[i].count * sizeof(float));
        }
        ZT_CHECK(c, zen_gpt_export_tensors(m, (const float *const *)copies, w2) == ZEN_OK);
        for (size_t i = 0; i < np; i++)
            free(copies[i]);
        ZT_CHECK(c, memcmp(w1, w2, n * sizeof(float)) == 0);
        float *hi = w2; /* reuse: replicas agree */
        ZT_CHECK(c, zen_allreduce(c, w1, hi, n, ZEN_F32, ZEN_MAX) == ZEN_OK);
        ZT_CHECK(c, memcmp(w1, hi, n * sizeof(float)) == 0);
    }
    ZT_CHECK(c, planned);
    free(w1);
    free(w2);
    zen_adamw_destroy(opt);
    zen_gpt_destroy(m);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_resize_export(void **state)
{
    (void)state;
    zt_run_inproc(2, resize_rank, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resize_export),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
