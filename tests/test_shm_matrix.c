/*
 * The dense-collective matrix (coll_matrix.h) over the shm transport (one process per rank, one
 * host) and over mixed communicators (emulated hosts through ZEN_HOST_ID: shm inside, tcp
 * across), including hosts of one rank and uneven hosts.
 */
#include "coll_matrix.h"
#include "shm_jobs.h"
#include "testutil.h"

static int per_host; /* ranks per emulated host of the mixed runner */

static void shm_runner(int n, zen_rank_fn fn, void *arg)
{
    zt_run_forked(ZEN_TRANSPORT_SHM, n, NULL, NULL, fn, arg, 240);
}

static void mixed_runner(int n, zen_rank_fn fn, void *arg)
{
    zt_run_forked(ZEN_TRANSPORT_MIXED, n, zt_set_host_id, &per_host, fn, arg, 240);
}

static void test_coll_matrix_shm(void **state)
{
    (void)state;
    static const int sizes[] = { 1, 2, 3, 4, 8 };
    zt_coll_matrix_env();
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        zt_coll_matrix(shm_runner, sizes[i], ZT_COLL_ALL);
    zt_coll_matrix(shm_runner, 3, ZT_COLL_LARGE);
}

static void test_coll_matrix_mixed(void **state)
{
    (void)state;
    zt_coll_matrix_env();
    per_host = 2; /* 2 + 2, then 2 + 2 + 1 */
    zt_coll_matrix(mixed_runner, 4, ZT_COLL_ALL);
    zt_coll_matrix(mixed_runner, 5, ZT_COLL_ALL);
    per_host = 3; /* 3 + 1 */
    zt_coll_matrix(mixed_runner, 4, ZT_COLL_ALL | ZT_COLL_LARGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coll_matrix_shm),
        cmocka_unit_test(test_coll_matrix_mixed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
