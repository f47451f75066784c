/*
 * Hostile or careless inputs to the CLI end in a clear message and exit status, never in a
 * crash, an endless read or a false "verified": a directory without traces, a trace whose rows
 * field would need tens of GiB, NaN/Inf in a trace, a corpus that is a device, a --cpu file
 * that holds no constants.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zen/sparse.h>

#include "testutil.h"

/* Run `$ZEN_BIN args` with stderr merged into out; returns the exit status (-1 if signalled). */
static int run_zen(const char *args, char *out, size_t cap)
{
    const char *bin = getenv("ZEN_BIN");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t len = fread(out, 1, cap - 1, p);
    out[len] = '\0';
    while (fgetc(p) != EOF) {
    }
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void write_trace(const char *dir, uint32_t rank, uint32_t world, uint64_t rows,
                        const float *vals, uint64_t nnz)
{
    uint32_t idx[4] = { 0, 1, 2, 3 };
    float v[4];
    memcpy(v, vals, nnz * sizeof *v);
    zen_trace_tensor t = { .rows = rows, .width = 1, .nnz = nnz, .indices = idx, .values = v };
    snprintf(t.name, sizeof t.name, "emb");
    zen_trace_step s = { .rank = rank, .world_size = world, .step = 1, .count = 1, .tensors = &t };
    char path[512];
    assert_int_equal(zen_trace_path(path, sizeof path, dir, rank, 1), ZEN_OK);
    assert_int_equal(zen_trace_write(path, &s), ZEN_OK);
}

static void test_trace_dir_without_traces(void **state)
{
    (void)state;
    char out[8192];
    assert_int_equal(run_zen("bench sparse --trace /etc --ranks 2", out, sizeof out), 1);
    assert_non_null(strstr(out, "holds no trace files"));
}

static void test_trace_with_absurd_rows(void **state)
{
    (void)state;
    char dir[] = "/tmp/zen-inputs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    float v[1] = { 1 };
    write_trace(dir, 0, 1, 0xffffffffull, v, 1); /* a tiny file that asks for 2^32 - 1 rows */
    char args[256], out[8192];
    snprintf(args, sizeof args, "bench sparse --trace %s --ranks 1 --iters 1 --warmup 0", dir);
    assert_int_equal(run_zen(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "GiB"));
    assert_non_null(strstr(out, "more than half of this machine's"));
    snprintf(args, sizeof args, "rm -rf %s", dir);
    assert_int_equal(system(args), 0);
}

/* NaN in = NaN out: every scheme must return NaN at the NaN row, Inf at the Inf row, and the
 * run says so; the finite rows are still checked. */
static void test_trace_with_nan_and_inf(void **state)
{
    (void)state;
    char dir[] = "/tmp/zen-inputs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    float r0[4] = { NAN, 1, INFINITY, 2 }, r1[4] = { 3, 4, 5, 6 };
    write_trace(dir, 0, 2, 1000, r0, 4);
    write_trace(dir, 1, 2, 1000, r1, 4);
    char args[256], out[16384];
    snprintf(args, sizeof args,
             "bench sparse --trace %s --ranks 2 --iters 1 --warmup 0 --schemes all --json", dir);
    assert_int_equal(run_zen(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "2 NaN/Inf elements"));
    assert_null(strstr(out, "\"verified\":false"));
    assert_non_null(strstr(out, "\"verified\":true"));
    snprintf(args, sizeof args, "rm -rf %s", dir);
    assert_int_equal(system(args), 0);
}

static void test_corpus_must_be_a_regular_file(void **state)
{
    (void)state;
    char out[8192];
    assert_int_equal(run_zen("train --data /dev/zero --steps 1 --dp 1 --tp 1 --cache-dir "
                             "/tmp/zen-inputs-cache",
                             out, sizeof out),
                     1);
    assert_non_null(strstr(out, "/dev/zero is not a regular file"));
    assert_int_equal(run_zen("train --data /tmp --steps 1 --dp 1 --tp 1", out, sizeof out), 1);
    assert_non_null(strstr(out, "not a regular file"));
}

static void test_simulate_cpu_file(void **state)
{
    (void)state;
    char out[8192];
    assert_int_equal(run_zen("simulate --cpu /etc/passwd", out, sizeof out), 2);
    assert_non_null(strstr(out, "not a constants file"));
    assert_int_equal(run_zen("simulate --cpu /dev/zero", out, sizeof out), 2);
}

int main(void)
{
    if (!getenv("ZEN_BIN"))
        return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_dir_without_traces),
        cmocka_unit_test(test_trace_with_absurd_rows),
        cmocka_unit_test(test_trace_with_nan_and_inf),
        cmocka_unit_test(test_corpus_must_be_a_regular_file),
        cmocka_unit_test(test_simulate_cpu_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
