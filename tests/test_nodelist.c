/*
 * Slurm's compressed lists (src/bootstrap/nodelist.c) against lists written out by hand, and the
 * Slurm step's rendezvous facts (src/bootstrap/env_slurm.c) read as zen_comm_create reads them:
 * explicit variables win over Slurm's, an sbatch script without srun is not a rank.
 */
#include <stdlib.h>
#include <string.h>

#include <zen/comm.h>

#include "bootstrap/env.h"
#include "bootstrap/nodelist.h"
#include "testutil.h"

/* Every host of list, space-separated, as zen__nodelist_host gives them one by one. */
static void expand(const char *list, char *out, size_t cap)
{
    long count = 0;
    char host[ZEN_NODELIST_HOST_MAX + 1], why[160];
    out[0] = '\0';
    assert_int_equal(zen__nodelist_host(list, 0, host, sizeof host, &count, why, sizeof why),
                     ZEN_OK);
    for (long i = 0; i < count; i++) {
        long again = 0;
        assert_int_equal(zen__nodelist_host(list, i, host, sizeof host, &again, why, sizeof why),
                         ZEN_OK);
        assert_int_equal(again, count);
        if (i)
            strncat(out, " ", cap - strlen(out) - 1);
        strncat(out, host, cap - strlen(out) - 1);
    }
}

static void test_forms(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        { "vm", "vm" },
        { "a,b,c", "a b c" },
        { "node[01-03,07],gpu-a[1-2]", "node01 node02 node03 node07 gpu-a1 gpu-a2" },
        { "n[7]", "n7" },
        { "n[8-11]", "n8 n9 n10 n11" },
        { "n[08-11]", "n08 n09 n10 n11" },
        { "r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2" },
        { "[1-2]x", "1x 2x" },
        { "c1-[3,5]-ib.cluster", "c1-3-ib.cluster c1-5-ib.cluster" },
        { "a_b,x[0-0]", "a_b x0" },
    };
    char got[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expand(cases[i][0], got, sizeof got);
        assert_string_equal(got, cases[i][1]);
    }
    long count = 0;
    char host[64], why[160];
    assert_int_equal(zen__nodelist_host("n[1-2]", 5, host, sizeof host, &count, why, sizeof why),
                     ZEN_OK); /* past the end: no host, not an error */
    assert_int_equal(count, 2);
    assert_string_equal(host, "");
    assert_int_equal(
        zen__nodelist_host("n[0-99999],m[1-3]", 0, host, sizeof host, &count, why, sizeof why),
        ZEN_OK);
    assert_int_equal(count, 100003);
}

static void test_malformed(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        { "", "empty" },
        { "a,,b", "empty host name" },
        { "a,", "empty host name" },
        { "n[1-3", "'[' without ']'" },
        { "n1-3]", "']' without '['" },
        { "n[]", "expected a number" },
        { "n[1,]", "expected a number" },
        { "n[3-1]", "runs backwards" },
        { "n[1-]", "without an upper number" },
        { "n[a]", "expected a number" },
        { "n[1[2]]", "in brackets" },
        { "n[1 2]", "in brackets" },
        { "node 1", "not a host name character" },
        { "n\x01", "\\x01" },
        { "n[1234567890]", "1 to 9 digits" },
        { "n[0-999999999]", "more than" },
        { "[1-9][1-9][1-9][1-9][1-9][1-9][1-9][1-9][1-9]", "more than" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long count = 7;
        char host[64] = "x", why[160] = "";
        assert_int_equal(
            zen__nodelist_host(bad[i][0], 0, host, sizeof host, &count, why, sizeof why),
            ZEN_EINVAL);
        if (!strstr(why, bad[i][1]))
            fail_msg("'%s': reason '%s' lacks '%s'", bad[i][0], why, bad[i][1]);
        assert_int_equal(count, 0);
        assert_string_equal(host, "");
    }
    long count = 0;
    char host[8], why[160];
    assert_int_equal(
        zen__nodelist_host("averylongname", 0, host, sizeof host, &count, why, sizeof why),
        ZEN_EINVAL); /* does not fit out */
    assert_non_null(strstr(why, "longer than 7"));
    assert_int_equal(zen__nodelist_host(NULL, 0, host, sizeof host, &count, why, sizeof why),
                     ZEN_EINVAL);
}

static void test_tasks_per_node(void **state)
{
    (void)state;
    long t = -1;
    char why[160];
    const long want[] = { 2, 2, 2, 1, 4 };
    for (long n = 0; n < 5; n++) {
        assert_int_equal(zen__slurm_tasks_on_node("2(x3),1,4", n, &t, why, sizeof why), ZEN_OK);
        assert_int_equal(t, want[n]);
    }
    assert_int_equal(zen__slurm_tasks_on_node("2(x3),1", 4, &t, why, sizeof why), ZEN_EINVAL);
    assert_non_null(strstr(why, "not in the list (4 nodes)"));
    static const char *const bad[] = { "", "2(3)", "2(x3", "2(x)", "x", "2,,1", "2;1", "2," };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        assert_int_equal(zen__slurm_tasks_on_node(bad[i], 0, &t, why, sizeof why), ZEN_EINVAL);
        assert_true(why[0] != '\0');
    }
}

static void test_port_rule(void **state)
{
    (void)state;
    assert_int_equal(zen__slurm_port(1, 0), 20010);
    assert_int_equal(zen__slurm_port(123456, 3), 24563);
    assert_int_equal(zen__slurm_port(999, 19), 29999);
    for (long j = 0; j < 3000; j += 7)
        for (long s = 0; s < 12; s++) {
            int p = zen__slurm_port(j, s);
            assert_true(p >= 20000 && p <= 29999);
        }
}

static const char *const env_vars[] = {
    "ZEN_RANK",
    "RANK",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "ZEN_WORLD_SIZE",
    "WORLD_SIZE",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "ZEN_LOCAL_RANK",
    "LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "ZEN_LOCAL_SIZE",
    "LOCAL_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "ZEN_MASTER_ADDR",
    "MASTER_ADDR",
    "ZEN_MASTER_PORT",
    "MASTER_PORT",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_STEP_NODELIST",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
};

static int clear_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++)
        unsetenv(env_vars[i]);
    return 0;
}

/* Task 5 of `srun -N 3 -n 7` in job 4242, step 2, as srun 22.05 sets it. */
static void set_srun_task5(void)
{
    setenv("SLURM_PROCID", "5", 1);
    setenv("SLURM_NTASKS", "7", 1);
    setenv("SLURM_STEP_NUM_TASKS", "7", 1);
    setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_NODEID", "2", 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", "3(x2),1", 1);
    setenv("SLURM_STEP_NODELIST", "gpu[07-08],cpu3", 1);
    setenv("SLURM_JOB_NODELIST", "gpu[01-08],cpu[1-4]", 1);
    setenv("SLURM_JOB_ID", "4242", 1);
    setenv("SLURM_STEP_ID", "2", 1);
}

static void test_srun_step(void **state)
{
    (void)state;
    set_srun_task5();
    zen_launch_env e = { .size = sizeof e };
    assert_int_equal(zen_comm_env_launch(&e), ZEN_OK);
    assert_int_equal(e.rank, 5);
    assert_int_equal(e.world_size, 7);
    assert_int_equal(e.local_rank, 1);
    assert_int_equal(e.local_size, 1);
    assert_string_equal(e.master_addr, "gpu07"); /* first host of the step, not of the job */
    assert_int_equal(e.master_port, 20000 + 242 * 10 + 2);
    assert_int_equal(e.slurm_step, 1);
    assert_string_equal(e.rank_var, "SLURM_PROCID");
    int rank = -1;
    assert_int_equal(zen_comm_env_rank(&rank), ZEN_OK);
    assert_int_equal(rank, 5);

    /* srun --mpi=pmi2 also sets PMI_RANK/PMI_SIZE: the same rank, and not a reason to pick
     * the mpi transport (an MPI built without Slurm's PMI2 aborts there) */
    setenv("PMI_RANK", "5", 1);
    setenv("PMI_SIZE", "7", 1);
    zen_env_info info;
    assert_int_equal(zen__env_read(&info, NULL), ZEN_OK);
    assert_int_equal(info.rank, 5);
    assert_int_equal(info.launched_by_mpi, 0);
    unsetenv("SLURM_STEP_NUM_TASKS"); /* not a step: PMI_SIZE means an MPI launcher, as before */
    assert_int_equal(zen__env_read(&info, NULL), ZEN_OK);
    assert_int_equal(info.launched_by_mpi, 1);
    setenv("SLURM_STEP_NUM_TASKS", "7", 1);
    unsetenv("PMI_RANK");
    unsetenv("PMI_SIZE");

    setenv("PMIX_RANK", "5", 1); /* srun --mpi=pmix */
    assert_int_equal(zen_comm_env_launch(&e), ZEN_OK);
    assert_string_equal(e.rank_var, "PMIX_RANK");
    assert_int_equal(e.rank, 5);
}

static void test_explicit_wins(void **state)
{
    (void)state;
    set_srun_task5();
    setenv("RANK", "3", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("MASTER_ADDR", "10.0.0.9", 1);
    setenv("MASTER_PORT", "31000", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    zen_launch_env e = { .size = 0 };
    assert_int_equal(zen_comm_env_launch(&e), ZEN_OK);
    assert_int_equal(e.rank, 3);
    assert_int_equal(e.world_size, 4);
    assert_int_equal(e.local_size, 2);
    assert_string_equal(e.master_addr, "10.0.0.9");
    assert_int_equal(e.master_port, 31000);
    assert_string_equal(e.rank_var, "RANK");
    unsetenv("MASTER_PORT"); /* fact by fact: the port falls back to Slurm's rule */
    assert_int_equal(zen_comm_env_launch(&e), ZEN_OK);
    assert_int_equal(e.master_port, 22422);
    assert_string_equal(e.master_addr, "10.0.0.9");
}

static void test_batch_step_is_not_a_rank(void **state)
{
    (void)state;
    /* an sbatch script: SLURM_PROCID=0 and SLURM_NTASKS, but no step of srun */
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_JOB_NODELIST", "n[1-2]", 1);
    setenv("SLURM_JOB_ID", "77", 1);
    zen_launch_env e = { .size = sizeof e };
    assert_int_equal(zen_comm_env_launch(&e), ZEN_OK);
    assert_int_equal(e.rank, -1);
    assert_int_equal(e.world_size, -1);
    assert_int_equal(e.slurm_step, 0);
    assert_string_equal(e.master_addr, "127.0.0.1");
    assert_int_equal(e.master_port, 29500);
}

static void test_malformed_slurm_env(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        { "SLURM_STEP_NODELIST", "gpu[07-" },
        { "SLURM_PROCID", "five" },
        { "SLURM_STEP_NUM_TASKS", "-1" },
        { "SLURM_STEP_TASKS_PER_NODE", "3(x2" },
        { "SLURM_NODEID", "x" },
        { "SLURM_JOB_ID", "12a" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        clear_env(NULL);
        set_srun_task5();
        setenv(bad[i][0], bad[i][1], 1);
        zen_launch_env e = { .size = sizeof e };
        if (zen_comm_env_launch(&e) != ZEN_EINVAL)
            fail_msg("%s='%s' was accepted", bad[i][0], bad[i][1]);
    }
    clear_env(NULL);
    set_srun_task5();
    unsetenv("SLURM_STEP_NODELIST"); /* older srun: the job's list */
    zen_launch_env e = { .size = sizeof e };
    assert_int_equal(zen_comm_env_launch(&e), ZEN_OK);
    assert_string_equal(e.master_addr, "gpu01");
    e.size = sizeof e + 8; /* a newer header's struct */
    assert_int_equal(zen_comm_env_launch(&e), ZEN_EINVAL);
    assert_int_equal(zen_comm_env_launch(NULL), ZEN_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_tasks_per_node),
        cmocka_unit_test(test_port_rule),
        cmocka_unit_test_setup(test_srun_step, clear_env),
        cmocka_unit_test_setup(test_explicit_wins, clear_env),
        cmocka_unit_test_setup(test_batch_step_is_not_a_rank, clear_env),
        cmocka_unit_test_setup(test_malformed_slurm_env, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
