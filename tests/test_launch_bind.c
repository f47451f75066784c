/*
 * `zen launch --bind`: where the ranks may run. Each test launches this executable itself as the
 * ranks (`--report-affinity DIR`: write the CPUs sched_getaffinity gives the child to DIR/RANK)
 * and checks every rank's mask against one computed from this process's own mask, which the
 * launcher inherits: auto pins rank r to the r-th usable CPU when the ranks fit, and leaves every
 * rank the whole mask when they do not; core always pins (r mod C); none never does.
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

/* Child mode: one line "cpu cpu ..." of this process's affinity mask. */
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
    fputc('\n', f);
    return fclose(f) != 0;
}

static char self_exe[PATH_MAX];

/* Run `zen launch -n n [--bind bind] -- self --report-affinity DIR` and read each rank's mask. */
static void launch_and_read(int n, const char *bind, cpu_set_t *masks)
{
    char dir[] = "/tmp/zen-bind-XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *zen = getenv("ZEN_BIN");
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "'%s' launch -n %d %s%s -- '%s' --report-affinity %s",
             zen && *zen ? zen : "zen", n, bind ? "--bind " : "", bind ? bind : "", self_exe, dir);
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
        fclose(f);
        unlink(path);
    }
    rmdir(dir);
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

static void assert_pinned(const cpu_set_t *masks, int n)
{
    for (int r = 0; r < n; r++) {
        assert_int_equal(CPU_COUNT(&masks[r]), 1);
        assert_true(CPU_ISSET(nth_cpu(r % own_count), &masks[r]));
    }
}

static void assert_unbound(const cpu_set_t *masks, int n)
{
    for (int r = 0; r < n; r++)
        assert_true(CPU_EQUAL(&masks[r], &own));
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

static void test_auto_leaves_oversubscribed_unbound(void **state)
{
    (void)state;
    if (own_count + 1 > 16)
        skip(); /* too many processes for a unit test */
    cpu_set_t masks[17];
    launch_and_read(own_count + 1, NULL, masks);
    assert_unbound(masks, own_count + 1);
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
        cmocka_unit_test(test_auto_leaves_oversubscribed_unbound),
        cmocka_unit_test(test_bind_none_and_core_override),
        cmocka_unit_test(test_bind_usage_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
