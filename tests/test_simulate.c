/* Prediction without communication: profiles measured on index sets, the public predictor and
 * the partition imbalance (zen simulate's building blocks). */
#include <math.h>
#include <stdlib.h>

#include <zen/simulate.h>
#include <zen/sparse.h>

#include "testutil.h"

/* nsets sets of k rows each over rows; shift = distance between consecutive sets' starts. */
static void make_sets(zen_index_sets *s, int nsets, uint64_t rows, size_t k, size_t shift)
{
    s->nsets = nsets;
    s->rows = rows;
    s->width = 1;
    s->indices = calloc((size_t)nsets, sizeof *s->indices);
    s->nnz = calloc((size_t)nsets, sizeof *s->nnz);
    for (int i = 0; i < nsets; i++) {
        s->indices[i] = malloc(k * sizeof(uint32_t));
        s->nnz[i] = k;
        for (size_t j = 0; j < k; j++)
            s->indices[i][j] = (uint32_t)(((size_t)i * shift + j) % rows);
    }
}

static void free_sets(zen_index_sets *s)
{
    for (int i = 0; i < s->nsets; i++)
        free(s->indices[i]);
    free(s->indices);
    free(s->nnz);
}

static void test_profile_identical_and_disjoint(void **state)
{
    (void)state;
    zen_index_sets same, apart;
    make_sets(&same, 8, 10000, 100, 0);    /* every set the same 100 rows */
    make_sets(&apart, 8, 10000, 100, 100); /* consecutive, non-overlapping blocks */
    zen_sparsity_profile p;
    assert_int_equal(zen_sparse_profile_from_sets(&same, 8, &p), ZEN_OK);
    assert_float_equal(p.density, 0.01, 1e-12);
    assert_int_equal(p.levels, 4); /* gamma^1, ^2, ^4, ^8 */
    for (int i = 0; i < p.levels; i++)
        assert_float_equal(p.gamma[i], 1.0, 1e-12);
    assert_float_equal(p.gamma_n, 1.0, 1e-12);
    assert_int_equal(zen_sparse_profile_from_sets(&apart, 8, &p), ZEN_OK);
    assert_float_equal(p.gamma[1], 2.0, 1e-12);
    assert_float_equal(p.gamma[3], 8.0, 1e-12);
    /* all 800 rows sit in the first of 8 ranges of 1250 rows: skew = 8 * 800 / 800 */
    assert_float_equal(p.skew, 8.0, 1e-12);
    /* beyond the 8 measured sets the union grows as for independent sets */
    assert_int_equal(zen_sparse_profile_from_sets(&apart, 16, &p), ZEN_OK);
    double u8 = 0.08, u16 = 1 - (1 - u8) * (1 - u8);
    assert_float_equal(p.gamma_n, u16 / 0.01, 1e-9);
    free_sets(&same);
    free_sets(&apart);
}

static void test_predict_orders_schemes(void **state)
{
    (void)state;
    zen_sparsity_profile p;
    double t[ZEN_SPARSE_SCHEME_COUNT];
    /* full overlap at 16 ranks: BALANCED beats the allgather of everything (paper section 4.2) */
    assert_int_equal(zen_sparse_profile_synthetic(16, 0.01, "identical", &p), ZEN_OK);
    assert_int_equal(zen_sparse_predict(16, 1 << 20, 32, &p, 10, 10, t, ZEN_SPARSE_SCHEME_COUNT),
                     ZEN_OK);
    assert_true(t[ZEN_SPARSE_BALANCED] < t[ZEN_SPARSE_ALLGATHER]);
    assert_true(t[ZEN_SPARSE_BALANCED] < t[ZEN_SPARSE_DENSE]);
    assert_true(t[ZEN_SPARSE_AUTO] <= t[ZEN_SPARSE_BALANCED]);
    /* halving the bandwidth doubles the bandwidth-bound dense time (latency aside) */
    double slow[ZEN_SPARSE_SCHEME_COUNT];
    assert_int_equal(zen_sparse_predict(16, 1 << 20, 32, &p, 5, 0, slow, ZEN_SPARSE_SCHEME_COUNT),
                     ZEN_OK);
    assert_int_equal(zen_sparse_predict(16, 1 << 20, 32, &p, 10, 0, t, ZEN_SPARSE_SCHEME_COUNT),
                     ZEN_OK);
    assert_float_equal(slow[ZEN_SPARSE_DENSE] / t[ZEN_SPARSE_DENSE], 2.0, 1e-9);
    assert_int_equal(zen_sparse_predict(16, 1 << 20, 32, &p, 0, 0, t, ZEN_SPARSE_SCHEME_COUNT),
                     ZEN_EINVAL);
    assert_int_equal(zen_sparse_profile_synthetic(16, 0.01, "bogus", &p), ZEN_EINVAL);
}

/* The per-scheme arrays carry the caller's count, not ZEN_SPARSE_SCHEME_COUNT: a program built
 * against fewer schemes gets the prefix (AUTO still the cheapest of all), one built against more
 * gets zeros where the library has no scheme, so neither reads nor writes past its array. */
static void test_predict_count(void **state)
{
    (void)state;
    zen_sparsity_profile p;
    assert_int_equal(zen_sparse_profile_synthetic(16, 0.01, "random", &p), ZEN_OK);
    double full[ZEN_SPARSE_SCHEME_COUNT];
    assert_int_equal(zen_sparse_predict(16, 1 << 20, 32, &p, 10, 10, full, ZEN_SPARSE_SCHEME_COUNT),
                     ZEN_OK);
    double cheapest = full[1];
    for (int s = 2; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        cheapest = full[s] < cheapest ? full[s] : cheapest;
    assert_float_equal(full[ZEN_SPARSE_AUTO], cheapest, 0);

    double few[3] = { -1, -1, -1 }, few_cpu[3] = { -1, -1, -1 };
    zen_cpu_model cpu = { .sort = 1, .copy_byte = 0.1, .share = 1 };
    assert_int_equal(zen_sparse_predict(16, 1 << 20, 32, &p, 10, 10, few, 2), ZEN_OK);
    assert_float_equal(few[0], full[0], 0);
    assert_float_equal(few[1], full[1], 0);
    assert_float_equal(few[2], -1, 0); /* beyond count: untouched */

    enum {
        MORE = ZEN_SPARSE_SCHEME_COUNT + 3
    };

    double more[MORE], more_cpu[MORE];
    for (int s = 0; s < MORE; s++)
        more[s] = more_cpu[s] = -1;
    assert_int_equal(
        zen_sparse_predict_cpu(16, 1 << 20, 32, &p, 10, 10, &cpu, 0, more, more_cpu, MORE), ZEN_OK);
    for (int s = 0; s < MORE; s++) {
        if (s < ZEN_SPARSE_SCHEME_COUNT) {
            assert_true(more[s] >= full[s]); /* the compute term only adds */
            assert_true(more_cpu[s] >= 0 && more_cpu[s] <= more[s]);
        } else {
            assert_float_equal(more[s], 0, 0);
            assert_float_equal(more_cpu[s], 0, 0);
        }
    }
    assert_true(more_cpu[ZEN_SPARSE_BALANCED] > 0);
    assert_int_equal(zen_sparse_predict_cpu(16, 1 << 20, 32, &p, 10, 10, &cpu, 0, few, few_cpu, 3),
                     ZEN_OK);
    assert_float_equal(few[2] - few_cpu[2], full[2], 1e-9 * full[2]);
    assert_int_equal(zen_sparse_predict(16, 1 << 20, 32, &p, 10, 10, few, 0), ZEN_EINVAL);
}

static void test_partition_imbalance(void **state)
{
    (void)state;
    size_t n = 200000;
    uint32_t *idx = malloc(n * sizeof *idx);
    for (size_t i = 0; i < n; i++)
        idx[i] = (uint32_t)i; /* the first 200k rows: contiguous, as skewed as it gets */
    double imb = 0;
    assert_int_equal(zen_sparse_partition_imbalance(idx, n, 16, 7, &imb), ZEN_OK);
    assert_true(imb >= 1.0 && imb < 1.1);
    /* one owner gets everything when there is one owner */
    assert_int_equal(zen_sparse_partition_imbalance(idx, n, 1, 7, &imb), ZEN_OK);
    assert_float_equal(imb, 1.0, 1e-12);
    free(idx);
}

/* Global top-k volume (zen_sparse_topk_volume): the pull shrinks to k rows, so a rank sends the
 * push plus about 1.5k(n-1)/n values however large the union grows, between the ideal 2k(n-1)/n
 * and Ok-Topk's 6k; the union's volume grows with n. Also its argument errors. */
static void test_topk_volume(void **state)
{
    (void)state;
    const uint64_t rows = 1 << 22, k = 41943; /* k = 1% of rows, each rank's local count */
    double last_union = 0;
    for (int n = 2; n <= 1024; n *= 2) {
        zen_sparsity_profile p;
        assert_int_equal(zen_sparse_profile_synthetic(n, 0.01, "random", &p), ZEN_OK);
        zen_topk_volume v;
        assert_int_equal(zen_sparse_topk_volume(n, rows, &p, k, 1, 10, &v), ZEN_OK);
        double f = (double)(n - 1) / n;
        assert_float_equal(v.ideal_bytes, 8 * f * k, 1e-6);
        assert_float_equal(v.bound_bytes, 16 * f * k, 1e-6);
        assert_true(v.topk_bytes > v.ideal_bytes && v.topk_bytes < v.oktopk_bytes);
        /* push (n-1)/n k COO entries of 8 bytes + pull (n-1)/n k entries of 5-6 bytes (gap-coded
         * indices) + the select's few KB: under 4k(n-1)/n values' worth, above 5/8 of the COO */
        assert_true(v.topk_bytes < v.bound_bytes);
        assert_true(v.topk_bytes - v.select_bytes > 0.8 * v.bound_bytes);
        assert_true(v.select_bytes > 0 && v.select_bytes < 0.05 * v.bound_bytes);
        assert_true(v.union_bytes >= last_union && v.topk_bytes < v.union_bytes);
        assert_true(v.topk_s > 0 && v.topk_s < v.union_s);
        last_union = v.union_bytes;
    }
    zen_sparsity_profile p;
    zen_topk_volume v;
    assert_int_equal(zen_sparse_profile_synthetic(4, 0.01, "random", &p), ZEN_OK);
    assert_int_equal(zen_sparse_topk_volume(4, rows, &p, 0, 1, 10, &v), ZEN_EINVAL);
    assert_int_equal(zen_sparse_topk_volume(0, rows, &p, k, 1, 10, &v), ZEN_EINVAL);
    assert_int_equal(zen_sparse_topk_volume(4, rows, &p, k, 0, 10, &v), ZEN_EINVAL);
    assert_int_equal(zen_sparse_topk_volume(4, rows, NULL, k, 1, 10, &v), ZEN_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_identical_and_disjoint),
        cmocka_unit_test(test_predict_orders_schemes),
        cmocka_unit_test(test_predict_count),
        cmocka_unit_test(test_partition_imbalance),
        cmocka_unit_test(test_topk_volume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
