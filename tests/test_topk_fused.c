/*
 * zen_topk_compress accumulates inside the selection's first pass (src/compress/topk_scan.c).
 * Reference: the unfused step done by hand, a plain loop u = m*u + g; v += u followed by
 * zen_topk_select on v with the same options, then the selected entries cleared. Every output
 * (count, indices, values) and the state (residual, velocity) must be equal bit for bit, over
 * several steps, for sizes with a ragged tail, k = 0, k >= n, one and several threads, both modes,
 * and data whose equal magnitudes overflow the first pass (the accumulation must still run over
 * the whole vector) and end in the radix fallback.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zen/compress.h>

#include "testutil.h"

typedef struct fused_case {
    size_t n, k;
    float m;
    zen_topk_mode mode;
    int threads;
    int ties; /* gradients of +-1 only: every residual entry has the same magnitude */
} fused_case;

static void run_case(const fused_case *fc)
{
    size_t n = fc->n, k = fc->k;
    zen_topk_state *s = NULL;
    assert_int_equal(zen_topk_state_create(n, fc->m, &s), ZEN_OK);
    float *g = malloc(n * sizeof *g), *u = calloc(n, sizeof *u), *v = calloc(n, sizeof *v);
    size_t cap = zen_topk_capacity(k) < n ? zen_topk_capacity(k) : n;
    uint32_t *idx = malloc((cap + 1) * sizeof *idx), *ridx = malloc((cap + 1) * sizeof *ridx);
    float *val = malloc((cap + 1) * sizeof *val), *rval = malloc((cap + 1) * sizeof *rval);
    assert_true(g && u && v && idx && ridx && val && rval);
    zen_topk_options o = ZEN_TOPK_OPTIONS_INIT;
    o.mode = fc->mode;
    o.threads = fc->threads;
    for (int step = 0; step < 4; step++) {
        o.seed = (uint64_t)step;
        zt_fill_grad(g, n, fc->ties, 7 + (uint64_t)step * 1000 + n);
        for (size_t i = 0; i < n; i++) { /* the unfused update */
            u[i] = fc->m * u[i] + g[i];
            v[i] += fc->m != 0 ? u[i] : g[i];
        }
        size_t want = 0, got = 0;
        assert_int_equal(zen_topk_select(v, ZEN_F32, n, k, &o, ridx, rval, cap, &want), ZEN_OK);
        for (size_t i = 0; i < want; i++)
            v[ridx[i]] = u[ridx[i]] = 0.0f;
        assert_int_equal(zen_topk_compress(s, g, k, &o, idx, val, cap, &got), ZEN_OK);
        assert_int_equal(got, want);
        if (got > 0) {
            assert_memory_equal(idx, ridx, got * sizeof *idx);
            assert_memory_equal(val, rval, got * sizeof *val);
        }
        assert_memory_equal(zen_topk_state_residual(s), v, n * sizeof *v);
        if (fc->m != 0)
            assert_memory_equal(zen_topk_state_velocity(s), u, n * sizeof *u);
    }
    zen_topk_state_destroy(s);
    free(g), free(u), free(v), free(idx), free(ridx), free(val), free(rval);
}

static void test_fused_matches_unfused(void **state)
{
    (void)state;
    /* 300007: strided sample (n > 65536), a tail shorter than a scan block */
    static const size_t ns[] = { 300007, 1000 };
    static const float ms[] = { 0.0f, 0.9f };
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++) {
        size_t n = ns[a];
        size_t ks[] = { 0, 1, n / 100, n / 20, n, n + 5 };
        for (size_t b = 0; b < sizeof ks / sizeof *ks; b++)
            for (size_t c = 0; c < 2; c++)
                for (int mode = 0; mode < 2; mode++)
                    for (int threads = 1; threads <= 3; threads += 2) {
                        fused_case fc = { n, ks[b], ms[c], (zen_topk_mode)mode, threads, 0 };
                        run_case(&fc);
                    }
    }
}

static void test_fused_overflow_and_ties(void **state)
{
    (void)state;
    /* every |v| equal: the first pass overflows its candidate space, later passes fall back
     * to the radix selection; the accumulation must cover the whole vector regardless */
    for (int mode = 0; mode < 2; mode++)
        for (int threads = 1; threads <= 3; threads += 2) {
            fused_case plain = { 300007, 1000, 0.0f, (zen_topk_mode)mode, threads, 1 };
            fused_case mom = { 300007, 1000, 0.5f, (zen_topk_mode)mode, threads, 1 };
            run_case(&plain);
            run_case(&mom);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_matches_unfused),
        cmocka_unit_test(test_fused_overflow_and_ties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
