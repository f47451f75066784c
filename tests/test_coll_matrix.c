/*
 * The dense-collective matrix (coll_matrix.c) on the inproc transport: ranks {1,2,3,4,5,7,8},
 * every collective, dtype, op, count {0, 1, n-1, 1031, 4096}, in place and out of place, both
 * allreduce algorithms forced, with 1 KiB ring chunks so short vectors are pipelined; plus a
 * ~1M-element f32 sum allreduce at 2 and 4 ranks.
 */
#include "coll_matrix.h"
#include "testutil.h"

static void run_n(int n, unsigned parts)
{
    zt_coll_matrix_env();
    zt_coll_matrix(zt_run_inproc, n, parts);
}

#define MATRIX_TEST(n)                        \
    static void test_matrix_##n(void **state) \
    {                                         \
        (void)state;                          \
        run_n(n, ZT_COLL_ALL);                \
    }

MATRIX_TEST(1)
MATRIX_TEST(2)
MATRIX_TEST(3)
MATRIX_TEST(4)
MATRIX_TEST(5)
MATRIX_TEST(7)
MATRIX_TEST(8)

static void test_large_2(void **state)
{
    (void)state;
    run_n(2, ZT_COLL_LARGE);
}

static void test_large_4(void **state)
{
    (void)state;
    run_n(4, ZT_COLL_LARGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix_1), cmocka_unit_test(test_matrix_2),
        cmocka_unit_test(test_matrix_3), cmocka_unit_test(test_matrix_4),
        cmocka_unit_test(test_matrix_5), cmocka_unit_test(test_matrix_7),
        cmocka_unit_test(test_matrix_8), cmocka_unit_test(test_large_2),
        cmocka_unit_test(test_large_4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
