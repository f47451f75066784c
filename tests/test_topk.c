/*
 * Top-k selection (zen/compress.h) against an independent reference: a full sort of every entry
 * by (magnitude descending, index ascending) gives the exact top-k; EXACT must return exactly
 * that set, APPROX a count in [0.8k, 1.3k] that is every entry at or above a threshold and keeps
 * >= 99% of the exact top-k's magnitude mass. The error-feedback state is checked against a plain
 * loop of the DGC update, bit for bit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zen/compress.h>

#include "testutil.h"

/* magnitude of entry i as the reference sees it: |x| in double, NaN above everything */
static double mag(const void *x, zen_dtype dt, size_t i)
{
    double v = dt == ZEN_BF16 ? zen_bf16_to_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
    return isnan(v) ? INFINITY : fabs(v);
}

typedef struct ref_entry {
    double m;
    int nan;
    size_t i;
} ref_entry;

static int ref_cmp(const void *pa, const void *pb)
{
    const ref_entry *a = pa, *b = pb;
    if (a->nan != b->nan)
        return a->nan ? -1 : 1;
    if (a->m != b->m)
        return a->m > b->m ? -1 : 1;
    return a->i < b->i ? -1 : (a->i > b->i);
}

/* The exact top-k (non-zeros only) as a 0/1 mask over n; returns its size. */
static size_t ref_topk(const void *x, zen_dtype dt, size_t n, size_t k, unsigned char *mask)
{
    ref_entry *e = malloc(n * sizeof *e);
    assert_non_null(e);
    for (size_t i = 0; i < n; i++) {
        double v =
            dt == ZEN_BF16 ? zen_bf16_to_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
        e[i] = (ref_entry){ isnan(v) ? 0 : fabs(v), isnan(v), i };
    }
    qsort(e, n, sizeof *e, ref_cmp);
    memset(mask, 0, n);
    size_t m = 0;
    for (size_t j = 0; j < n && m < k; j++)
        if (e[j].nan || e[j].m > 0) {
            mask[e[j].i] = 1;
            m++;
        }
    free(e);
    return m;
}

static double gauss(uint64_t *s)
{
    double u1 = ((double)(zt_rand(s) >> 11) + 1) / 9007199254740993.0;
    double u2 = (double)(zt_rand(s) >> 11) / 9007199254740992.0;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* gaussian, or heavy-tailed (Student-t with 2 degrees of freedom: gaussian / sqrt(chi2/2)) */
static void fill(void *x, zen_dtype dt, size_t n, int heavy, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        double v = gauss(&s);
        if (heavy) {
            double a = gauss(&s), b = gauss(&s);
            v /= sqrt((a * a + b * b) / 2 + 1e-300);
        }
        zt_dtype_put(x, dt, i, v);
    }
}

static void check_sorted_in_range(const uint32_t *idx, size_t count, size_t n)
{
    for (size_t i = 0; i < count; i++) {
        assert_true(idx[i] < n);
        if (i > 0)
            assert_true(idx[i - 1] < idx[i]);
    }
}

static void check_values(const void *x, zen_dtype dt, const uint32_t *idx, const float *val,
                         size_t count)
{
    for (size_t i = 0; i < count; i++) {
        float want = dt == ZEN_BF16 ? zen_bf16_to_f32(((const uint16_t *)x)[idx[i]])
                                    : ((const float *)x)[idx[i]];
        assert_memory_equal(&want, &val[i], sizeof want);
    }
}

/* one selection checked against the reference; returns the mass recall */
static double check_one(const void *x, zen_dtype dt, size_t n, size_t k, zen_topk_mode mode,
                        int threads)
{
    size_t cap = zen_topk_capacity(k), count = 0;
    uint32_t *idx = malloc((cap + 1) * sizeof *idx);
    float *val = malloc((cap + 1) * sizeof *val);
    unsigned char *ref = malloc(n), *got = calloc(n, 1);
    assert_true(idx && val && ref && got);
    zen_topk_options o = ZEN_TOPK_OPTIONS_INIT;
    o.mode = mode;
    o.threads = threads;
    o.seed = 7;
    assert_int_equal(zen_topk_select(x, dt, n, k, &o, idx, val, cap, &count), ZEN_OK);
    check_sorted_in_range(idx, count, n);
    check_values(x, dt, idx, val, count);
    size_t kk = ref_topk(x, dt, n, k, ref);
    double in = 0, all = 0, min_sel = INFINITY, max_unsel = 0;
    for (size_t i = 0; i < count; i++)
        got[idx[i]] = 1;
    for (size_t i = 0; i < n; i++) {
        double m = mag(x, dt, i);
        if (ref[i])
            all += m, in += got[i] ? m : 0;
        if (got[i])
            min_sel = m < min_sel ? m : min_sel;
        else
            max_unsel = m > max_unsel ? m : max_unsel;
    }
    if (mode == ZEN_TOPK_EXACT) {
        assert_int_equal(count, kk);
        assert_memory_equal(ref, got, n);
    } else {
        if (kk == k) { /* enough non-zeros: the window */
            assert_true(count * 10 >= 8 * k && count * 10 <= 13 * k);
        }
        assert_true(min_sel >= max_unsel); /* a threshold set: the largest count entries */
    }
    free(idx), free(val), free(ref), free(got);
    return all > 0 ? in / all : 1;
}

static void test_exact_matches_sort(void **state)
{
    (void)state;
    size_t n = 1u << 18;
    float *x = malloc(n * sizeof *x);
    uint16_t *h = malloc(n * sizeof *h);
    for (int heavy = 0; heavy < 2; heavy++) {
        fill(x, ZEN_F32, n, heavy, 11 + (uint64_t)heavy);
        fill(h, ZEN_BF16, n, heavy, 21 + (uint64_t)heavy);
        for (int t = 1; t <= 3; t += 2) {
            const size_t ks[] = { 1, 2621, 40000 };
            for (size_t j = 0; j < 3; j++) {
                check_one(x, ZEN_F32, n, ks[j], ZEN_TOPK_EXACT, t);
                check_one(h, ZEN_BF16, n, ks[j], ZEN_TOPK_EXACT, t); /* bf16: many ties */
            }
        }
    }
    free(x), free(h);
}

static void test_approx_window_and_recall(void **state)
{
    (void)state;
    size_t n = 1u << 18;
    float *x = malloc(n * sizeof *x);
    uint16_t *h = malloc(n * sizeof *h);
    for (uint64_t seed = 1; seed <= 2; seed++)
        for (int heavy = 0; heavy < 2; heavy++) {
            fill(x, ZEN_F32, n, heavy, seed * 31 + (uint64_t)heavy);
            fill(h, ZEN_BF16, n, heavy, seed * 37 + (uint64_t)heavy);
            for (int t = 1; t <= 3; t += 2) {
                const size_t ks[] = { 262, 2621, 26214 };
                for (size_t j = 0; j < 3; j++) {
                    assert_true(check_one(x, ZEN_F32, n, ks[j], ZEN_TOPK_APPROX, t) >= 0.99);
                    check_one(h, ZEN_BF16, n, ks[j], ZEN_TOPK_APPROX, t);
                }
            }
        }
    free(x), free(h);
}

/* equal magnitudes everywhere defeat any threshold: both modes still meet their contract */
static void test_ties(void **state)
{
    (void)state;
    size_t n = 200000;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (i % 3 == 0) ? -1.0f : 1.0f;
    check_one(x, ZEN_F32, n, 1000, ZEN_TOPK_EXACT, 1);
    check_one(x, ZEN_F32, n, 1000, ZEN_TOPK_APPROX, 1);
    check_one(x, ZEN_F32, n, 1000, ZEN_TOPK_EXACT, 3);
    uint64_t s = 5;
    for (size_t i = 0; i < n; i++) /* five magnitudes, zeros among them */
        x[i] = (float)((int)(zt_rand(&s) % 5) - 2);
    check_one(x, ZEN_F32, n, 5000, ZEN_TOPK_EXACT, 1);
    check_one(x, ZEN_F32, n, 50000, ZEN_TOPK_APPROX, 1);
    check_one(x, ZEN_F32, 1000, 10, ZEN_TOPK_EXACT, 1);
    free(x);
}

static void test_edges(void **state)
{
    (void)state;
    float x[8] = { 0, -3, 0, 2, -0.0f, 5, 1, 0 };
    uint32_t idx[16];
    float val[16];
    size_t count = 99;
    for (int mode = 0; mode < 2; mode++) {
        zen_topk_options o = ZEN_TOPK_OPTIONS_INIT;
        o.mode = (zen_topk_mode)mode;
        assert_int_equal(zen_topk_select(x, ZEN_F32, 8, 0, &o, idx, val, 0, &count), ZEN_OK);
        assert_int_equal(count, 0);
        assert_int_equal(zen_topk_select(NULL, ZEN_F32, 0, 5, &o, idx, val, 0, &count), ZEN_OK);
        assert_int_equal(count, 0);
        /* k >= n: every non-zero (zeros, -0 included, never), ascending */
        assert_int_equal(zen_topk_select(x, ZEN_F32, 8, 100, &o, idx, val, 8, &count), ZEN_OK);
        assert_int_equal(count, 4);
        const uint32_t want[4] = { 1, 3, 5, 6 };
        assert_memory_equal(idx, want, sizeof want);
        assert_true(val[0] == -3 && val[2] == 5);
        assert_int_equal(zen_topk_select(x + 5, ZEN_F32, 1, 1, &o, idx, val, 1, &count), ZEN_OK);
        assert_int_equal(count, 1);
        assert_true(idx[0] == 0 && val[0] == 5);
        assert_int_equal(zen_topk_select(x, ZEN_F32, 1, 1, &o, idx, val, 1, &count), ZEN_OK);
        assert_int_equal(count, 0); /* n = 1, the entry is zero */
        assert_int_equal(zen_topk_select(x, ZEN_F32, 8, 2, &o, idx, val, 8, &count), ZEN_OK);
        assert_int_equal(count, 2);
        assert_true(idx[0] == 1 && idx[1] == 5);
    }
}

static void test_bad_args(void **state)
{
    (void)state;
    float x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    uint32_t idx[16];
    float val[16];
    size_t count = 99;
    zen_topk_options o = ZEN_TOPK_OPTIONS_INIT;
    assert_int_equal(zen_topk_select(x, ZEN_F64, 8, 2, &o, idx, val, 8, &count), ZEN_EINVAL);
    assert_int_equal(count, 0);
    assert_int_equal(zen_topk_select(x, ZEN_F32, 8, 2, &o, idx, val, 8, NULL), ZEN_EINVAL);
    assert_int_equal(zen_topk_select(NULL, ZEN_F32, 8, 2, &o, idx, val, 8, &count), ZEN_EINVAL);
    assert_int_equal(zen_topk_select(x, ZEN_F32, 8, 2, &o, NULL, val, 8, &count), ZEN_EINVAL);
    /* APPROX needs ceil(1.3k) = 7 for k = 5, EXACT k */
    assert_int_equal(zen_topk_select(x, ZEN_F32, 8, 5, &o, idx, val, 6, &count), ZEN_EINVAL);
    assert_int_equal(zen_topk_select(x, ZEN_F32, 8, 5, &o, idx, val, 7, &count), ZEN_OK);
    o.mode = ZEN_TOPK_EXACT;
    assert_int_equal(zen_topk_select(x, ZEN_F32, 8, 5, &o, idx, val, 5, &count), ZEN_OK);
    assert_int_equal(count, 5);
    o.mode = (zen_topk_mode)7;
    assert_int_equal(zen_topk_select(x, ZEN_F32, 8, 2, &o, idx, val, 8, &count), ZEN_EINVAL);
    zen_topk_options_init(&o);
    o.size = 3;
    assert_int_equal(zen_topk_select(x, ZEN_F32, 8, 2, &o, idx, val, 8, &count), ZEN_EINVAL);
    zen_topk_options_init(&o);
    o.sample_ratio = 1.5;
    assert_int_equal(zen_topk_select(x, ZEN_F32, 8, 2, &o, idx, val, 8, &count), ZEN_EINVAL);
    o.sample_ratio = NAN;
    assert_int_equal(zen_topk_select(x, ZEN_F32, 8, 2, &o, idx, val, 8, &count), ZEN_EINVAL);
    /* n >= 2^32: refused before x is read */
    assert_int_equal(zen_topk_select(x, ZEN_F32, (size_t)1 << 32, 2, NULL, idx, val, 8, &count),
                     ZEN_EUNSUPPORTED);
    assert_int_equal(zen_topk_capacity(0), 0);
    assert_int_equal(zen_topk_capacity(1), 2);
    assert_int_equal(zen_topk_capacity(10), 13);
    assert_int_equal(zen_topk_capacity(SIZE_MAX), SIZE_MAX);
    zen_topk_state *s = NULL;
    assert_int_equal(zen_topk_state_create(8, 1.0f, &s), ZEN_EINVAL);
    assert_int_equal(zen_topk_state_create(8, -0.1f, &s), ZEN_EINVAL);
    assert_int_equal(zen_topk_state_create(8, NAN, &s), ZEN_EINVAL);
    assert_int_equal(zen_topk_state_create((size_t)1 << 32, 0, &s), ZEN_EUNSUPPORTED);
    assert_int_equal(zen_topk_state_create(8, 0.5f, NULL), ZEN_EINVAL);
    assert_null(s);
    zen_topk_state_destroy(NULL);
}

/* NaN ranks above inf, inf above every finite value: both are always selected */
static void test_nan_inf(void **state)
{
    (void)state;
    size_t n = 100000;
    float *x = malloc(n * sizeof *x);
    uint16_t *h = malloc(n * sizeof *h);
    fill(x, ZEN_F32, n, 0, 3);
    x[10] = NAN;
    x[500] = INFINITY;
    x[90000] = -INFINITY;
    for (size_t i = 0; i < n; i++)
        h[i] = zen_f32_to_bf16(x[i]);
    for (int mode = 0; mode < 2; mode++) {
        check_one(x, ZEN_F32, n, 3, (zen_topk_mode)mode, 1);
        check_one(h, ZEN_BF16, n, 3, (zen_topk_mode)mode, 1);
        uint32_t idx[8];
        float val[8];
        size_t count;
        zen_topk_options o = ZEN_TOPK_OPTIONS_INIT;
        o.mode = (zen_topk_mode)mode;
        assert_int_equal(zen_topk_select(x, ZEN_F32, n, 1, &o, idx, val, 8, &count), ZEN_OK);
        assert_int_equal(count, 1);
        assert_int_equal(idx[0], 10);
        assert_true(isnan(val[0]));
    }
    free(x), free(h);
}

/* compress + add against a plain loop: u = m*u + g; v += u; send the top-k of v; clear it in v, u */
static void run_state(float m, zen_topk_mode mode)
{
    size_t n = 5000, k = 50;
    zen_topk_state *s = NULL;
    assert_int_equal(zen_topk_state_create(n, m, &s), ZEN_OK);
    float *g = malloc(n * sizeof *g), *u = calloc(n, sizeof *u), *v = calloc(n, sizeof *v);
    size_t cap = zen_topk_capacity(k);
    uint32_t *idx = malloc(cap * sizeof *idx);
    float *val = malloc(cap * sizeof *val);
    unsigned char *ref = malloc(n);
    zen_topk_options o = ZEN_TOPK_OPTIONS_INIT;
    o.mode = mode;
    for (int step = 0; step < 6; step++) {
        fill(g, ZEN_F32, n, step & 1, 100 + (uint64_t)step);
        for (size_t i = 0; i < n; i++) {
            u[i] = m * u[i] + g[i];
            v[i] += m != 0 ? u[i] : g[i];
        }
        size_t count = 0;
        assert_int_equal(zen_topk_compress(s, g, k, &o, idx, val, cap, &count), ZEN_OK);
        check_sorted_in_range(idx, count, n);
        if (mode == ZEN_TOPK_EXACT) {
            assert_int_equal(count, k);
            ref_topk(v, ZEN_F32, n, k, ref);
            for (size_t i = 0; i < count; i++)
                assert_true(ref[idx[i]]);
        }
        for (size_t i = 0; i < count; i++) {
            assert_memory_equal(&val[i], &v[idx[i]], sizeof(float));
            v[idx[i]] = 0;
            u[idx[i]] = 0;
        }
        /* give a few entries back, as a global top-k would */
        uint32_t back[3] = { idx[0], (uint32_t)(step * 7), idx[0] };
        float bval[3] = { 0.25f, -1.5f, 0.5f };
        assert_int_equal(zen_topk_state_add(s, back, bval, 3), ZEN_OK);
        for (int i = 0; i < 3; i++)
            v[back[i]] += bval[i];
        assert_memory_equal(zen_topk_state_residual(s), v, n * sizeof(float));
        if (m != 0)
            assert_memory_equal(zen_topk_state_velocity(s), u, n * sizeof(float));
        else
            assert_null(zen_topk_state_velocity(s));
    }
    uint32_t bad[2] = { 1, (uint32_t)n };
    float bv[2] = { 1, 1 };
    assert_int_equal(zen_topk_state_add(s, bad, bv, 2), ZEN_EINVAL);
    assert_memory_equal(zen_topk_state_residual(s), v, n * sizeof(float)); /* nothing added */
    size_t count;
    assert_int_equal(zen_topk_compress(s, g, k, &o, idx, val, k / 2, &count), ZEN_EINVAL);
    assert_memory_equal(zen_topk_state_residual(s), v, n * sizeof(float)); /* unchanged */
    assert_int_equal(zen_topk_state_size(s), n);
    zen_topk_state_destroy(s);
    free(g), free(u), free(v), free(idx), free(val), free(ref);
}

static void test_state_matches_loop(void **state)
{
    (void)state;
    run_state(0.9f, ZEN_TOPK_EXACT);
    run_state(0.9f, ZEN_TOPK_APPROX);
    run_state(0.0f, ZEN_TOPK_EXACT);
    run_state(0.0f, ZEN_TOPK_APPROX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_matches_sort),
        cmocka_unit_test(test_approx_window_and_recall),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_nan_inf),
        cmocka_unit_test(test_state_matches_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
