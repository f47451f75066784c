/* zen__median_inplace / zen__lower_median_inplace against hand-computed order statistics. */
#include "common/stats.h"
#include "testutil.h"

static void test_medians(void **state)
{
    (void)state;
    double odd[5] = { 9, 1, 7, 3, 5 };
    assert_float_equal(zen__median_inplace(odd, 5), 5.0, 0.0);
    for (int i = 1; i < 5; i++)
        assert_true(odd[i - 1] <= odd[i]); /* sorted in place */
    double even[4] = { 4, 10, 2, 8 };
    assert_float_equal(zen__median_inplace(even, 4), 6.0, 0.0); /* (4 + 8) / 2 */
    double even2[4] = { 4, 10, 2, 8 };
    assert_float_equal(zen__lower_median_inplace(even2, 4), 4.0, 0.0);
    double two[2] = { 30, 12 };
    assert_float_equal(zen__lower_median_inplace(two, 2), 12.0, 0.0); /* the faster of two */
    double one = 3;
    assert_float_equal(zen__median_inplace(&one, 1), 3.0, 0.0);
    assert_float_equal(zen__median_inplace(NULL, 0), 0.0, 0.0);
    assert_float_equal(zen__lower_median_inplace(NULL, 0), 0.0, 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_medians) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
