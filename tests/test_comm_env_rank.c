/*
 * zen_comm_env_rank: the rank a launcher gave this process, read as zen_comm_create reads it
 * (zen train and zen bench decide from it whether to run their ranks as threads).
 */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

static const char *const launcher_vars[] = {
    "ZEN_RANK",       "RANK",       "OMPI_COMM_WORLD_RANK", "PMI_RANK",
    "ZEN_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"
};

static int clear_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
        unsetenv(launcher_vars[i]);
    return 0;
}

static void test_not_launched(void **state)
{
    (void)state;
    int rank = 7;
    assert_int_equal(zen_comm_env_rank(&rank), ZEN_OK);
    assert_int_equal(rank, -1);
    setenv("ZEN_RANK", "", 1); /* set but empty: not a rank */
    assert_int_equal(zen_comm_env_rank(&rank), ZEN_OK);
    assert_int_equal(rank, -1);
    assert_int_equal(zen_comm_env_rank(NULL), ZEN_EINVAL);
}

static void test_each_launcher(void **state)
{
    (void)state;
    for (int i = 0; i < 4; i++) {
        clear_env(NULL);
        char value[8];
        snprintf(value, sizeof value, "%d", 3 + i);
        setenv(launcher_vars[i], value, 1);
        int rank = -1;
        assert_int_equal(zen_comm_env_rank(&rank), ZEN_OK);
        assert_int_equal(rank, 3 + i);
    }
}

static void test_first_set_wins_and_malformed(void **state)
{
    (void)state;
    int rank = -1;
    setenv("PMI_RANK", "5", 1);
    setenv("RANK", "2", 1);
    assert_int_equal(zen_comm_env_rank(&rank), ZEN_OK);
    assert_int_equal(rank, 2); /* torchrun's RANK comes before PMI's */
    setenv("ZEN_RANK", "1", 1);
    assert_int_equal(zen_comm_env_rank(&rank), ZEN_OK);
    assert_int_equal(rank, 1); /* zen's own comes first */

    setenv("ZEN_RANK", "one", 1);
    assert_int_equal(zen_comm_env_rank(&rank), ZEN_EINVAL);
    assert_int_equal(rank, -1);
    setenv("ZEN_RANK", "4", 1);
    setenv("ZEN_WORLD_SIZE", "4", 1); /* a rank outside its world is malformed too */
    assert_int_equal(zen_comm_env_rank(&rank), ZEN_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_not_launched, clear_env),
        cmocka_unit_test_setup(test_each_launcher, clear_env),
        cmocka_unit_test_setup(test_first_set_wins_and_malformed, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
