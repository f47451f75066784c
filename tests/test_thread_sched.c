/*
 * zen_comm_thread_hint (src/common/thread_sched.c): the calling thread gets the scheduling slice
 * ZEN_COMM_SLICE_US, read back from the kernel's own record (/proc/self/task/TID/sched, se.slice
 * in ns), its nice value stays, and 0 leaves the thread alone. Kernels that do not show se.slice
 * (before EEVDF) skip: there the call is a documented no-op.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <zen/comm.h>

#include "testutil.h"

/* This thread's se.slice in ns, -1 when the kernel does not show it. */
static long long own_slice_ns(void)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%ld/sched", (long)syscall(SYS_gettid));
    FILE *f = fopen(path, "r");
    long long v = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "se.slice", 8) == 0 && colon)
            v = strtoll(colon + 1, NULL, 10);
    }
    fclose(f);
    return v;
}

typedef struct probe {
    int nice_before; /* set on the thread first (raising nice needs no privilege) */
    int took;        /* zen_comm_thread_hint's answer */
    long long before_ns, after_ns;
    int nice_after;
} probe;

static void *probe_main(void *arg)
{
    probe *p = arg;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    (void)setpriority(PRIO_PROCESS, (id_t)tid, p->nice_before);
    p->before_ns = own_slice_ns();
    p->took = zen_comm_thread_hint();
    p->after_ns = own_slice_ns();
    p->nice_after = getpriority(PRIO_PROCESS, (id_t)tid);
    return NULL;
}

static probe run_probe(const char *slice_us, int nice)
{
    setenv("ZEN_COMM_SLICE_US", slice_us, 1);
    probe p = { .nice_before = nice };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, probe_main, &p), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    unsetenv("ZEN_COMM_SLICE_US");
    return p;
}

static void test_slice_taken(void **state)
{
    (void)state;
    int nice = getpriority(PRIO_PROCESS, 0); /* ctest may run at any nice value */
    probe p = run_probe("250", nice);
    if (p.before_ns < 0 || !p.took)
        skip(); /* no per-thread slice on this kernel */
    assert_int_equal(p.after_ns, 250000);
    assert_int_equal(p.nice_after, nice);
}

static void test_nice_kept(void **state)
{
    (void)state;
    int nice = getpriority(PRIO_PROCESS, 0) + 3; /* a rank started under `nice` stays as nice */
    if (nice > 19)
        nice = 19;
    probe p = run_probe("100", nice);
    if (p.before_ns < 0 || !p.took)
        skip();
    assert_int_equal(p.after_ns, 100000);
    assert_int_equal(p.nice_after, nice);
}

static void test_zero_leaves_thread(void **state)
{
    (void)state;
    probe p = run_probe("0", getpriority(PRIO_PROCESS, 0));
    assert_int_equal(p.took, 0);
    assert_true(p.after_ns == p.before_ns);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice_taken),
        cmocka_unit_test(test_nice_kept),
        cmocka_unit_test(test_zero_leaves_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
