/* Coalescing, radix sort and merge of the sparse module, against naive dense references. */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "sparse/wire/coo.h"
#include "sparse/wire/radix_sort.h"
#include "testutil.h"

/* Dense reference: sum of rows of an (index, value) list, computed the obvious way. */
static float *dense_ref(const uint32_t *idx, const float *val, size_t nnz, uint64_t rows,
                        uint32_t w)
{
    float *d = calloc((size_t)rows * w, sizeof *d);
    for (size_t i = 0; i < nnz; i++)
        for (uint32_t c = 0; c < w; c++)
            d[(size_t)idx[i] * w + c] += val[i * w + c];
    return d;
}

/* The COO must be sorted unique and equal the dense reference exactly (on its rows and off them).
 */
static void check_against(const zen_coo *coo, const float *ref, uint64_t rows, uint32_t w)
{
    float *d = calloc((size_t)rows * w, sizeof *d);
    for (size_t i = 0; i < coo->nnz; i++) {
        if (i > 0)
            assert_true(coo->idx[i] > coo->idx[i - 1]);
        assert_true(coo->idx[i] < rows);
        memcpy(d + (size_t)coo->idx[i] * w, coo->val + i * w, w * sizeof(float));
    }
    assert_memory_equal(d, ref, (size_t)rows * w * sizeof(float));
    free(d);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void random_case(uint64_t *rng, size_t nnz, uint64_t rows, uint32_t w, int order)
{
    uint32_t *idx = malloc((nnz + 1) * sizeof *idx);
    float *val = malloc((nnz * w + 1) * sizeof *val);
    for (size_t i = 0; i < nnz; i++) {
        /* order 0: unsorted with duplicates, 1: sorted unique, 2: sorted with duplicates */
        idx[i] = (uint32_t)(zt_rand(rng) % rows);
        for (uint32_t c = 0; c < w; c++)
            val[i * w + c] = (float)((int)(zt_rand(rng) % 17) - 8);
    }
    if (order >= 1) {
        qsort(idx, nnz, sizeof *idx, cmp_u32); /* libc sort: independent of the radix sort */
        if (order == 1) {
            size_t m = 0;
            for (size_t i = 0; i < nnz; i++)
                if (m == 0 || idx[m - 1] != idx[i])
                    idx[m++] = idx[i];
            nnz = m;
        }
    }
    float *ref = dense_ref(idx, val, nnz, rows, w);
    zen_sparse_tensor t = { rows, w, nnz, ZEN_INDEX_U32, idx, ZEN_F32, val };
    zen_coo coo;
    memset(&coo, 0, sizeof coo);
    uint64_t bad = 0;
    assert_int_equal(zen__coo_from_tensor(&t, &coo, &bad), ZEN_OK);
    check_against(&coo, ref, rows, w);
    zen__coo_release(&coo);
    free(ref);
    free(idx);
    free(val);
}

static void test_coalesce_random(void **state)
{
    (void)state;
    uint64_t rng = 11;
    size_t sizes[] = { 0, 1, 2, 63, 64, 65, 1000, 20000 };
    uint64_t rows[] = { 1, 7, 3000, 300000 };
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
        for (size_t b = 0; b < sizeof rows / sizeof *rows; b++)
            for (int order = 0; order < 3; order++) {
                random_case(&rng, sizes[a], rows[b], 1, order);
                random_case(&rng, sizes[a], rows[b], 8, order);
            }
}

static void test_coalesce_types_and_edges(void **state)
{
    (void)state;
    /* i64 indices, bf16 values, row 0 and the last row, duplicates summed in input order */
    int64_t idx[] = { 9, 0, 9, 0, 4 };
    uint16_t val[10];
    float fv[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
    for (int i = 0; i < 10; i++)
        val[i] = zen_f32_to_bf16(fv[i]);
    zen_sparse_tensor t = { 10, 2, 5, ZEN_INDEX_I64, idx, ZEN_BF16, val };
    zen_coo coo;
    memset(&coo, 0, sizeof coo);
    assert_int_equal(zen__coo_from_tensor(&t, &coo, NULL), ZEN_OK);
    assert_int_equal(coo.nnz, 3);
    uint32_t want_idx[] = { 0, 4, 9 };
    float want_val[] = { 3 + 7, 4 + 8, 9, 10, 1 + 5, 2 + 6 };
    assert_memory_equal(coo.idx, want_idx, sizeof want_idx);
    assert_memory_equal(coo.val, want_val, sizeof want_val);

    /* invalid inputs */
    uint64_t bad = 0;
    int64_t neg[] = { 3, -1 };
    zen_sparse_tensor tn = { 10, 2, 2, ZEN_INDEX_I64, neg, ZEN_BF16, val };
    assert_int_equal(zen__coo_from_tensor(&tn, &coo, &bad), ZEN_EINVAL);
    assert_true(bad == UINT64_MAX); /* -1 as u64 */
    uint32_t big[] = { 1, 10 };
    zen_sparse_tensor tb = { 10, 1, 2, ZEN_INDEX_U32, big, ZEN_F32, fv };
    assert_int_equal(zen__coo_from_tensor(&tb, &coo, &bad), ZEN_EINVAL);
    assert_int_equal(bad, 10);
    zen_sparse_tensor tr = { (uint64_t)1 << 32, 1, 0, ZEN_INDEX_U32, NULL, ZEN_F32, NULL };
    assert_int_equal(zen__coo_from_tensor(&tr, &coo, &bad), ZEN_EUNSUPPORTED);
    zen_sparse_tensor tw = { 10, 0, 0, ZEN_INDEX_U32, NULL, ZEN_F32, NULL };
    assert_int_equal(zen__coo_from_tensor(&tw, &coo, &bad), ZEN_EINVAL);
    zen_sparse_tensor td = { 10, 1, 1, ZEN_INDEX_U32, big, ZEN_F64, fv };
    assert_int_equal(zen__coo_from_tensor(&td, &coo, &bad), ZEN_EINVAL);
    zen_sparse_tensor tnull = { 10, 1, 1, ZEN_INDEX_U32, NULL, ZEN_F32, fv };
    assert_int_equal(zen__coo_from_tensor(&tnull, &coo, &bad), ZEN_EINVAL);
    /* the maximal row of a 2^32 - 1 row tensor is valid */
    uint32_t last = UINT32_MAX - 1;
    zen_sparse_tensor tl = { UINT32_MAX, 1, 1, ZEN_INDEX_U32, &last, ZEN_F32, fv };
    assert_int_equal(zen__coo_from_tensor(&tl, &coo, &bad), ZEN_OK);
    assert_int_equal(coo.nnz, 1);
    assert_int_equal(coo.idx[0], UINT32_MAX - 1);
    zen__coo_release(&coo);
}

static int cmp_pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return *x < *y ? -1 : *x > *y;
}

static void test_radix_sort_stable(void **state)
{
    (void)state;
    uint64_t rng = 5;
    size_t sizes[] = { 0, 5, 100, 5000, 100000 };
    uint32_t ranges[] = { 1, 3, 2048, 4194304, UINT32_MAX };
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 5; b++) {
            size_t n = sizes[a];
            uint32_t *k = malloc((n + 1) * 4), *p = malloc((n + 1) * 4);
            uint64_t *ref = malloc((n + 1) * 8);
            for (size_t i = 0; i < n; i++) {
                k[i] = (uint32_t)(zt_rand(&rng) % ((uint64_t)ranges[b] + 1));
                p[i] = (uint32_t)i;
                ref[i] = ((uint64_t)k[i] << 32) | i; /* (key, position): stability order */
            }
            qsort(ref, n, 8, cmp_pair);
            assert_int_equal(zen__radix_sort_kv(k, p, n, ranges[b]), ZEN_OK);
            for (size_t i = 0; i < n; i++) {
                assert_int_equal(k[i], ref[i] >> 32);
                assert_int_equal(p[i], (uint32_t)ref[i]);
            }
            free(k);
            free(p);
            free(ref);
        }
}

/* k = 0..12 covers the scan of the run heads (k <= 8) and the heap above it. The values are not
 * integers, so the sums are exact only in the reference's order: each index's rows added run by
 * run, the lowest run first. */
static void test_merge(void **state)
{
    (void)state;
    uint64_t rng = 9;
    const uint64_t rows = 777;
    for (size_t k = 0; k <= 12; k++) {
        zen_coo runs[12];
        float *ref = calloc(rows * 3, sizeof *ref);
        memset(runs, 0, sizeof runs);
        for (size_t r = 0; r < k; r++) {
            runs[r].rows = rows;
            runs[r].width = 3;
            assert_int_equal(zen__coo_reserve(&runs[r], rows), ZEN_OK);
            size_t m = 0;
            for (uint32_t i = 0; i < rows; i++) {
                if (zt_rand(&rng) % (r + 2) != 0)
                    continue;
                runs[r].idx[m] = i;
                for (int c = 0; c < 3; c++) {
                    float v = (float)(zt_rand(&rng) % 997) * 0.37f + 0.01f;
                    runs[r].val[m * 3 + c] = v;
                    ref[i * 3 + c] += v;
                }
                m++;
            }
            runs[r].nnz = m;
        }
        zen_coo out;
        memset(&out, 0, sizeof out);
        assert_int_equal(zen__coo_merge(runs, k, &out), ZEN_OK);
        if (k > 0)
            check_against(&out, ref, rows, 3);
        else
            assert_int_equal(out.nnz, 0);
        zen__coo_release(&out);
        for (size_t r = 0; r < k; r++)
            zen__coo_release(&runs[r]);
        free(ref);
    }
}

/* Indices up to rows - 1 = 2^32 - 2, next to the scan's UINT32_MAX for a spent run, and width 1
 * (the top-k trainer's): the largest index comes out last, and a run spent early is skipped. */
static void test_merge_top_index(void **state)
{
    (void)state;
    uint32_t i0[] = { 3, UINT32_MAX - 1 }, i1[] = { 1 }, i2[] = { 2, 3, UINT32_MAX - 2 };
    float v0[] = { 0.5f, 1.5f }, v1[] = { 2.5f }, v2[] = { 3.5f, 0.25f, 4.5f };
    zen_coo runs[3] = { { UINT32_MAX, 1, 2, 2, i0, v0 },
                        { UINT32_MAX, 1, 1, 1, i1, v1 },
                        { UINT32_MAX, 1, 3, 3, i2, v2 } };
    zen_coo out;
    memset(&out, 0, sizeof out);
    assert_int_equal(zen__coo_merge(runs, 3, &out), ZEN_OK);
    uint32_t want_i[] = { 1, 2, 3, UINT32_MAX - 2, UINT32_MAX - 1 };
    float want_v[] = { 2.5f, 3.5f, 0.75f, 4.5f, 1.5f };
    assert_int_equal(out.nnz, 5);
    assert_memory_equal(out.idx, want_i, sizeof want_i);
    assert_memory_equal(out.val, want_v, sizeof want_v);
    zen__coo_release(&out);
}

static void test_alloc_failure(void **state)
{
    (void)state;
    uint32_t idx[200];
    float val[200];
    for (int i = 0; i < 200; i++) {
        idx[i] = (uint32_t)(199 - i) % 50;
        val[i] = 1;
    }
    zen_sparse_tensor t = { 50, 1, 200, ZEN_INDEX_U32, idx, ZEN_F32, val };
    for (long k = 1; k <= 8; k++) {
        zen_coo coo;
        memset(&coo, 0, sizeof coo);
        zen__alloc_fail_after(k);
        zen_status st = zen__coo_from_tensor(&t, &coo, NULL);
        zen__alloc_fail_after(0);
        assert_true(st == ZEN_OK || st == ZEN_ENOMEM);
        if (st == ZEN_OK) {
            assert_int_equal(coo.nnz, 50);
            for (size_t i = 0; i < 50; i++)
                assert_true(coo.val[i] == 4.0f);
        }
        zen__coo_release(&coo);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coalesce_random),   cmocka_unit_test(test_coalesce_types_and_edges),
        cmocka_unit_test(test_radix_sort_stable), cmocka_unit_test(test_merge),
        cmocka_unit_test(test_merge_top_index),   cmocka_unit_test(test_alloc_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
