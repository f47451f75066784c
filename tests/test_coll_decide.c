/*
 * The dense decision table (src/coll/decide.c) against the rules it replaced, written out here
 * independently: for a grid of rank counts, sizes around each cut and element counts around the
 * rank count, with the cuts moved by their environment variables.
 */
#include <stdlib.h>

#include "coll/coll_algos.h"
#include "testutil.h"

static void check_grid(size_t rhd, size_t lng, size_t bruck)
{
    const size_t sizes[] = { 0,   1,       8,         rhd - 1, rhd,       rhd + 1,        lng - 1,
                             lng, lng + 1, bruck - 1, bruck,   bruck + 1, (size_t)1 << 30 };
    for (int n = 1; n <= 9; n++) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t b = sizes[i];
            for (size_t count = (size_t)n - 1; count <= (size_t)n + 1; count++) {
                bool ar = !(b <= rhd || count < (size_t)n);        /* ring, else rhd */
                bool bc = n > 2 && b >= lng && count >= (size_t)n; /* scatter+allgather */
                bool ag = !(n > 2 && b <= bruck);                  /* ring, else bruck */
                assert_int_equal(zen__coll_decide_long(ZEN_COLL_DECIDE_ALLREDUCE, n, b, count), ar);
                assert_int_equal(zen__coll_decide_long(ZEN_COLL_DECIDE_BROADCAST, n, b, count), bc);
                assert_int_equal(zen__coll_decide_long(ZEN_COLL_DECIDE_REDUCE, n, b, count), bc);
                assert_int_equal(zen__coll_decide_long(ZEN_COLL_DECIDE_ALLGATHER, n, b, count), ag);
            }
        }
    }
}

static void test_default_cuts(void **state)
{
    (void)state;
    check_grid(zen__coll_rhd_max_bytes(), zen__coll_long_bytes(),
               zen__coll_allgather_bruck_max_bytes());
}

static void test_moved_cuts(void **state)
{
    (void)state;
    setenv("ZEN_RHD_MAX_BYTES", "4096", 1);
    setenv("ZEN_COLL_LONG_BYTES", "100", 1);
    setenv("ZEN_ALLGATHER_BRUCK_MAX_BYTES", "777", 1);
    assert_int_equal(zen__coll_rhd_max_bytes(), 4096);
    check_grid(4096, 100, 777);
    unsetenv("ZEN_RHD_MAX_BYTES");
    unsetenv("ZEN_COLL_LONG_BYTES");
    unsetenv("ZEN_ALLGATHER_BRUCK_MAX_BYTES");
    assert_false(zen__coll_decide_long(ZEN_COLL_DECIDE_COUNT, 4, 1 << 20, 1 << 20));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_cuts),
        cmocka_unit_test(test_moved_cuts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
