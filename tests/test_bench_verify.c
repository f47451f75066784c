/*
 * `zen bench sparse`'s verifier (tools/sparse_verify.c, issue #13 item 4): a scheme must never
 * be reported "verified" when its output has a NaN where the reference sum has none, a finite
 * value where the reference is NaN, or the wrong infinity. Each case builds the reference from
 * its own inputs here (plain float sums), then breaks one element of a copy of it.
 */
#include <math.h>
#include <string.h>

#include "../tools/sparse_verify.h"
#include "testutil.h"

enum {
    RANKS = 3,
    LEN = 8
};

/* ref and absref of RANKS inputs; in[r][i] = (r + 1) * (i + 1) * scale, with extra[i] added to
 * rank 0's element i (NaN, an infinity, or 0). */
static void reference(float scale, const float *extra, float *ref, float *absref)
{
    for (int i = 0; i < LEN; i++) {
        ref[i] = 0.0f;
        absref[i] = 0.0f;
        for (int r = 0; r < RANKS; r++) {
            float v = (float)((r + 1) * (i + 1)) * scale + (r == 0 ? extra[i] : 0.0f);
            ref[i] += v;
            absref[i] += fabsf(v);
        }
    }
}

/* Both modes (exact, and within the rounding bound) give the same verdict on these cases. */
static int verdict(const float *out, const float *ref, const float *absref)
{
    int exact = bench_sparse_matches_reference(out, ref, NULL, LEN, RANKS);
    int bounded = bench_sparse_matches_reference(out, ref, absref, LEN, RANKS);
    assert_int_equal(exact, bounded);
    return exact;
}

static void test_finite_reference(void **state)
{
    (void)state;
    float extra[LEN] = { 0 }, ref[LEN], absref[LEN], out[LEN];
    reference(1.0f, extra, ref, absref);
    memcpy(out, ref, sizeof out);
    assert_true(verdict(out, ref, absref));
    out[3] = NAN; /* a scheme that produced a NaN from finite inputs */
    assert_false(verdict(out, ref, absref));
    out[3] = INFINITY;
    assert_false(verdict(out, ref, absref));
    out[3] = ref[3] + 1.0f; /* plainly wrong */
    assert_false(verdict(out, ref, absref));
}

static void test_nan_reference(void **state)
{
    (void)state;
    float extra[LEN] = { 0 }, ref[LEN], absref[LEN], out[LEN];
    extra[5] = NAN;
    reference(1.0f, extra, ref, absref);
    assert_true(isnan(ref[5]));
    memcpy(out, ref, sizeof out);
    assert_true(verdict(out, ref, absref));
    out[5] = -NAN; /* another NaN (sign/payload) is still NaN out */
    assert_true(verdict(out, ref, absref));
    out[5] = 0.0f; /* the NaN was lost: e.g. a scheme that dropped or zeroed the row */
    assert_false(verdict(out, ref, absref));
    out[5] = ref[4];
    assert_false(verdict(out, ref, absref));
    out[5] = NAN;
    out[6] = NAN; /* NaN in, but also a NaN where the sum is finite */
    assert_false(verdict(out, ref, absref));
}

static void test_infinite_reference(void **state)
{
    (void)state;
    float extra[LEN] = { 0 }, ref[LEN], absref[LEN], out[LEN];
    extra[1] = INFINITY;
    extra[2] = -INFINITY;
    reference(1.0f, extra, ref, absref);
    memcpy(out, ref, sizeof out);
    assert_true(verdict(out, ref, absref));
    out[1] = -INFINITY;
    assert_false(verdict(out, ref, absref));
    out[1] = NAN;
    assert_false(verdict(out, ref, absref));
    out[1] = 3.0e38f;
    assert_false(verdict(out, ref, absref));
}

/* Recorded-gradient mode: rounding differences within n * 2^-23 * sum|v| pass, more does not;
 * where sum|v| overflowed a finite or infinite result may be right, a NaN never. */
static void test_rounding_bound(void **state)
{
    (void)state;
    float extra[LEN] = { 0 }, ref[LEN], absref[LEN], out[LEN];
    reference(0.1f, extra, ref, absref);
    memcpy(out, ref, sizeof out);
    out[0] = nextafterf(ref[0], 1.0f);
    assert_true(bench_sparse_matches_reference(out, ref, absref, LEN, RANKS));
    assert_false(bench_sparse_matches_reference(out, ref, NULL, LEN, RANKS));
    out[0] = ref[0] * 1.001f;
    assert_false(bench_sparse_matches_reference(out, ref, absref, LEN, RANKS));
    out[0] = ref[0];
    absref[7] = INFINITY;
    out[7] = INFINITY;
    assert_true(bench_sparse_matches_reference(out, ref, absref, LEN, RANKS));
    out[7] = NAN;
    assert_false(bench_sparse_matches_reference(out, ref, absref, LEN, RANKS));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finite_reference),
        cmocka_unit_test(test_nan_reference),
        cmocka_unit_test(test_infinite_reference),
        cmocka_unit_test(test_rounding_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
