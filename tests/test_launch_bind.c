/*
 * `zen launch --bind`: where the ranks may run. Each test launches this executable itself as the
 * ranks (`--report-affinity DIR`: write the CPUs sched_getaffinity gives the child to DIR/RANK)
 * and checks every rank's mask against one computed from this process's own mask, which the
 * launcher inherits: auto and core pin rank r to the (r mod C)-th usable CPU, also when the ranks
 * outnumber the CPUs; none never does. Each rank also reports the OPENBLAS_NUM_THREADS it got:
 * 1 when pinned, max(1, C / n) when not, a user's value untouched.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* Child mode: one line "cpu cpu ..." of this process's affinity mask, then one with its
 * OPENBLAS_NUM_THREADS (-1 when unset). */
static int report_affinity(const char *dir)
{
    const char *rank = getenv("ZEN_RANK");
    cpu_set_t set;
    if (!rank || sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, rank);
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            fprintf(f, "%d ", c);
    const char *blas = getenv("OPENBLAS_NUM_THREADS");
    fprintf(f, "\nblas %s\n", blas ? blas : "-1");
    return fclose(f) != 0;
}

static char self_exe[PATH_MAX];

static int blas_threads[17]; /* each rank's OPENBLAS_NUM_THREADS in the last launch_and_read */

/* Run `[env] zen launch -n n [--bind bind] -- self --report-affinity DIR` and read each rank's
 * mask (and blas_threads). */
static void launch_env_and_read(const char *env, int n, const char *bind, cpu_set_t *masks)
{
    char dir[] = "/tmp/zen-bind-XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *zen = getenv("ZEN_BIN");
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "%s '%s' launch -n %d %s%s -- '%s' --report-affinity %s",
             env ? env : "", zen && *zen ? zen : "zen", n, bind ? "--bind " : "", bind ? bind : "",
             self_exe, dir);
    int status = system(cmd);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int r = 0; r < n; r++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%d", dir, r);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        CPU_ZERO(&masks[r]);
        int c;
        while (fscanf(f, "%d", &c) == 1)
            CPU_SET(c, &masks[r]);
        assert_int_equal(fscanf(f, "blas %d", &blas_threads[r]), 1);
        fclose(f);
        unlink(path);
    }
    rmdir(dir);
}

static void launch_and_read(int n, const char *bind, cpu_set_t *masks)
{
    launch_env_and_read("env -u OPENBLAS_NUM_THREADS", n, bind, masks);
}

static cpu_set_t own;
static int own_count;

/* The k-th CPU of this process's mask. */
static int nth_cpu(int k)
{
    for (int c = 0, seen = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &own) && seen++ == k)
            return c;
    fail_msg("no %d-th CPU in a mask of %d", k, own_count);
    return -1;
}

/* Pinned round robin, one OpenBLAS thread each (launch_and_read unsets the user's value). */
static void assert_pinned(const cpu_set_t *masks, int n)
{
    for (int r = 0; r < n; r++) {
        assert_int_equal(CPU_COUNT(&masks[r]), 1);
        assert_true(CPU_ISSET(nth_cpu(r % own_count), &masks[r]));
        assert_int_equal(blas_threads[r], 1);
    }
}

/* The launcher's whole mask, and an even share of its CPUs for OpenBLAS. */
static void assert_unbound(const cpu_set_t *masks, int n)
{
    int share = own_count / n > 1 ? own_count / n : 1;
    for (int r = 0; r < n; r++) {
        assert_true(CPU_EQUAL(&masks[r], &own));
        assert_int_equal(blas_threads[r], share);
    }
}

static void test_auto_pins_when_ranks_fit(void **state)
{
    (void)state;
    int n = own_count < 4 ? own_count : 4;
    cpu_set_t masks[4];
    launch_and_read(n, NULL, masks); /* the default */
    assert_pinned(masks, n);
    launch_and_read(n, "auto", masks);
    assert_pinned(masks, n);
}

/* More ranks than CPUs: still pinned, rank C shares CPU 0 with rank 0 (docs/multi-host.md) */
static void test_auto_pins_oversubscribed_round_robin(void **state)
{
    (void)state;
    if (own_count + 1 > 16)
        skip(); /* too many processes for a unit test */
    cpu_set_t masks[17];
    launch_and_read(own_count + 1, NULL, masks);
    assert_pinned(masks, own_count + 1);
    launch_and_read(own_count + 1, "auto", masks);
    assert_pinned(masks, own_count + 1);
}

/* A user's OPENBLAS_NUM_THREADS reaches every rank as it was, pinned or not */
static void test_user_blas_threads_kept(void **state)
{
    (void)state;
    cpu_set_t masks[2];
    launch_env_and_read("OPENBLAS_NUM_THREADS=3", 2, NULL, masks);
    assert_int_equal(blas_threads[0], 3);
    assert_int_equal(blas_threads[1], 3);
    launch_env_and_read("OPENBLAS_NUM_THREADS=5", 2, "none", masks);
    assert_int_equal(blas_threads[0], 5);
    assert_int_equal(blas_threads[1], 5);
}

static void test_bind_none_and_core_override(void **state)
{
    (void)state;
    int n = own_count < 4 ? own_count : 4;
    cpu_set_t masks[17];
    launch_and_read(n, "none", masks);
    assert_unbound(masks, n);
    if (own_count + 1 > 16)
        return;
    launch_and_read(own_count + 1, "core", masks); /* oversubscribed: rank C shares CPU 0 */
    assert_pinned(masks, own_count + 1);
}

static void test_bind_usage_error(void **state)
{
    (void)state;
    const char *zen = getenv("ZEN_BIN");
    char cmd[PATH_MAX + 100];
    snprintf(cmd, sizeof cmd, "'%s' launch -n 2 --bind socket -- true 2>/dev/null",
             zen && *zen ? zen : "zen");
    int status = system(cmd);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--report-affinity") == 0)
        return report_affinity(argv[2]);
    ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (len <= 0 || sched_getaffinity(0, sizeof own, &own) != 0)
        return 1;
    self_exe[len] = '\0';
    own_count = CPU_COUNT(&own);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_pins_when_ranks_fit),
        cmocka_unit_test(test_auto_pins_oversubscribed_round_robin),
        cmocka_unit_test(test_user_blas_threads_kept),
        cmocka_unit_test(test_bind_none_and_core_override),
        cmocka_unit_test(test_bind_usage_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
