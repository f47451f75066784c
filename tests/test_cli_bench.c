/*
 * `zen bench` from the outside: runs $ZEN_BIN and checks what it prints and its exit status.
 * The correctness of the collectives themselves is the library's tests' business; here -c must
 * report zero wrong elements, every JSON line must carry the documented fields, and the
 * bandwidth columns must follow from bytes and time with the nccl-tests factors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define MAX_LINES 256

typedef struct cmd_out {
    char *lines[MAX_LINES];
    int nlines;
    int exit_code;
    char *text; /* everything on stdout */
} cmd_out;

static const char *zen_bin(void)
{
    const char *b = getenv("ZEN_BIN");
    return b && *b ? b : "zen";
}

/* Run `$ZEN_BIN args` (stderr to the file err) and collect stdout and the exit status. */
static void run_zen_to(const char *args, cmd_out *out, const char *err)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>'%s'", zen_bin(), args, err);
    memset(out, 0, sizeof *out);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t cap = 1 << 16, len = 0;
    out->text = malloc(cap);
    assert_non_null(out->text);
    size_t got;
    while ((got = fread(out->text + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 1024) {
            cap *= 2;
            out->text = realloc(out->text, cap);
            assert_non_null(out->text);
        }
    }
    out->text[len] = '\0';
    int status = pclose(f);
    out->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    char *save = NULL;
    char *copy = strdup(out->text);
    assert_non_null(copy);
    for (char *l = strtok_r(copy, "\n", &save); l && out->nlines < MAX_LINES;
         l = strtok_r(NULL, "\n", &save))
        out->lines[out->nlines++] = strdup(l);
    free(copy);
}

static void run_zen(const char *args, cmd_out *out)
{
    run_zen_to(args, out, "/dev/null");
}

static void free_out(cmd_out *out)
{
    for (int i = 0; i < out->nlines; i++)
        free(out->lines[i]);
    free(out->text);
}

/* The value of "key": in a one-line JSON object; returns a pointer just after the colon. */
static const char *json_field(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    return p ? p + strlen(pat) : NULL;
}

static double json_num(const char *line, const char *key)
{
    const char *v = json_field(line, key);
    if (!v)
        fail_msg("field %s missing in: %s", key, line);
    char *end = NULL;
    double d = strtod(v, &end);
    if (end == v)
        fail_msg("field %s is not a number in: %s", key, line);
    return d;
}

static void expect_str(const char *line, const char *key, const char *want)
{
    const char *v = json_field(line, key);
    if (!v)
        fail_msg("field %s missing in: %s", key, line);
    char buf[64];
    snprintf(buf, sizeof buf, "\"%s\"", want);
    if (strncmp(v, buf, strlen(buf)) != 0)
        fail_msg("field %s is not %s in: %s", key, buf, line);
}

static int close_to(double a, double b)
{
    return fabs(a - b) <= 1e-3 * fabs(b) + 2e-4; /* printed with 4 decimals */
}

/*
 * Check a dense --json run: nresults lines, required fields, wrong == 0, and algbw/busbw as
 * nccl-tests defines them from the printed bytes and p50 time.
 */
static void check_dense_on(const char *args, const char *transport, const char *op, int ranks,
                           double factor, int nresults)
{
    cmd_out out;
    run_zen(args, &out);
    if (out.exit_code != 0)
        fail_msg("`zen %s` exited %d", args, out.exit_code);
    assert_int_equal(out.nlines, nresults);
    for (int i = 0; i < out.nlines; i++) {
        const char *l = out.lines[i];
        assert_true(l[0] == '{' && l[strlen(l) - 1] == '}');
        expect_str(l, "op", op);
        expect_str(l, "transport", transport);
        assert_int_equal((int)json_num(l, "ranks"), ranks);
        assert_non_null(json_field(l, "algo"));
        double bytes = json_num(l, "bytes");
        double p50 = json_num(l, "time_us_p50"), p99 = json_num(l, "time_us_p99");
        double inplace = json_num(l, "inplace");
        assert_true(inplace == 0.0 || inplace == 1.0);
        assert_true(p50 > 0 && p99 >= p50);
        double algbw = json_num(l, "algbw_gbs"), busbw = json_num(l, "busbw_gbs");
        if (!close_to(algbw, bytes / p50 / 1e3))
            fail_msg("algbw %g != bytes/time %g: %s", algbw, bytes / p50 / 1e3, l);
        if (!close_to(busbw, algbw * factor))
            fail_msg("busbw %g != algbw x %g: %s", busbw, factor, l);
        if (json_num(l, "wrong") != 0.0)
            fail_msg("wrong elements: %s", l);
    }
    free_out(&out);
}

static void check_dense(const char *args, const char *op, int ranks, double factor, int nresults)
{
    check_dense_on(args, "inproc", op, ranks, factor, nresults);
}

static void test_allreduce_json_check(void **state)
{
    (void)state;
    /* 1K..64K by 2: 7 sizes, out-of-place and in-place */
    check_dense("bench allreduce --ranks 4 -c -b 1K -e 64K --json", "allreduce", 4, 1.5, 14);
}

static void test_allreduce_algos_dtypes(void **state)
{
    (void)state;
    check_dense("bench allreduce --ranks 3 -c -b 4K -e 256K -f 8 -w 1 -n 2 --algo ring -d f64 "
                "-o max --json",
                "allreduce", 3, 4.0 / 3.0, 6);
    check_dense("bench allreduce --ranks 5 -c -b 4K -e 256K -f 8 -w 1 -n 2 --algo rhd -d bf16 "
                "-o avg --json",
                "allreduce", 5, 1.6, 6);
    check_dense("bench allreduce --ranks 2 -c -b 4K -e 4K -w 0 -n 1 -d i32 -o prod --json",
                "allreduce", 2, 1.0, 2);
}

static void test_other_collectives(void **state)
{
    (void)state;
    /* S is the whole array for these three, so sizes are multiples of 3 ranks x 4 bytes */
    check_dense("bench allgather --ranks 3 -c -b 1K -e 64K -f 8 -w 1 -n 2 --json", "allgather", 3,
                2.0 / 3.0, 6);
    check_dense("bench reduce_scatter --ranks 3 -c -b 1K -e 64K -f 8 -w 1 -n 2 --json",
                "reduce_scatter", 3, 2.0 / 3.0, 6);
    check_dense("bench alltoall --ranks 4 -c -b 1K -e 64K -f 8 -w 1 -n 2 -d i64 --json", "alltoall",
                4, 0.75, 6);
    /* broadcast is in place only */
    check_dense("bench broadcast --ranks 3 --root 2 -c -b 1K -e 64K -f 8 -w 1 -n 2 --json",
                "broadcast", 3, 1.0, 3);
}

/* The nccl-tests ops zen bench lacked: reduce (busbw = algbw), gather ((n-1)/n), sendrecv (1;
 * out of place only, rank r receives rank r-1's input), checked element by element at 2 and 4
 * ranks, with a root that is not rank 0 at 4. */
static void test_reduce_gather_sendrecv(void **state)
{
    (void)state;
    check_dense("bench reduce --ranks 2 -c -b 1K -e 64K -f 8 -w 1 -n 2 --json", "reduce", 2, 1.0,
                6);
    check_dense("bench reduce --ranks 4 --root 3 -c -b 1K -e 64K -f 8 -w 1 -n 2 -o max --json",
                "reduce", 4, 1.0, 6);
    check_dense("bench gather --ranks 2 -c -b 1K -e 64K -f 8 -w 1 -n 2 --json", "gather", 2, 0.5,
                6);
    check_dense("bench gather --ranks 4 --root 2 -c -b 1K -e 64K -f 8 -w 1 -n 2 -d f64 --json",
                "gather", 4, 0.75, 6);
    check_dense("bench sendrecv --ranks 2 -c -b 1K -e 64K -f 8 -w 1 -n 2 --json", "sendrecv", 2,
                1.0, 3);
    check_dense("bench sendrecv --ranks 4 -c -b 1K -e 64K -f 8 -w 1 -n 2 -d i64 --json", "sendrecv",
                4, 1.0, 3);
}

/* The same three with one process per rank over shm, started by `zen launch`. */
static void test_reduce_gather_sendrecv_shm(void **state)
{
    (void)state;

    static const struct {
        const char *op;
        double factor;
        int results;
    } ops[] = { { "reduce", 1.0, 4 }, { "gather", 2.0 / 3.0, 4 }, { "sendrecv", 1.0, 2 } };

    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char args[1024];
        snprintf(args, sizeof args,
                 "launch -n 3 --transport shm -- '%s' bench %s --transport shm -c -b 3K -e 96K "
                 "-f 32 -w 1 -n 2 --json",
                 zen_bin(), ops[i].op);
        check_dense_on(args, "shm", ops[i].op, 3, ops[i].factor, ops[i].results);
    }
}

/* One process per rank over tcp, started by `zen launch`. */
static void test_tcp_launch(void **state)
{
    (void)state;
    char args[1024];
    snprintf(args, sizeof args,
             "launch -n 3 -- '%s' bench allreduce --transport tcp -c -b 1K -e 1M -f 32 -w 1 -n 2 "
             "--json",
             zen_bin());
    check_dense_on(args, "tcp", "allreduce", 3, 4.0 / 3.0, 6);
    snprintf(args, sizeof args,
             "launch -n 2 -- '%s' bench p2p --transport tcp -c -b 64K -e 64K -w 1 -n 2 --json",
             zen_bin());
    cmd_out out;
    run_zen(args, &out);
    assert_int_equal(out.exit_code, 0);
    assert_int_equal(out.nlines, 3); /* rank 0 prints pingpong, uni, bidir */
    for (int i = 0; i < out.nlines; i++) {
        expect_str(out.lines[i], "transport", "tcp");
        assert_true(json_num(out.lines[i], "wrong") == 0.0);
    }
    free_out(&out);
}

static void test_p2p_json(void **state)
{
    (void)state;
    cmd_out out;
    run_zen("bench p2p -c -b 1K -e 1M -f 32 -w 1 -n 3 --json", &out);
    assert_int_equal(out.exit_code, 0);
    assert_int_equal(out.nlines, 9); /* 3 sizes x pingpong, uni, bidir */
    for (int i = 0; i < out.nlines; i++) {
        const char *l = out.lines[i];
        expect_str(l, "transport", "inproc");
        assert_non_null(json_field(l, "mode"));
        double bytes = json_num(l, "bytes"), p50 = json_num(l, "time_us_p50");
        assert_true(p50 > 0);
        if (!close_to(json_num(l, "bw_gbs"), bytes / p50 / 1e3))
            fail_msg("bw != bytes/time: %s", l);
        assert_true(json_num(l, "wrong") == 0.0);
    }
    free_out(&out);
}

static void test_human_output(void **state)
{
    (void)state;
    cmd_out out;
    run_zen("bench allreduce --ranks 2 -c -b 1K -e 4K -w 0 -n 2", &out);
    assert_int_equal(out.exit_code, 0);
    assert_non_null(strstr(out.text, "# machine: "));
    assert_non_null(strstr(out.text, "out-of-place"));
    assert_non_null(strstr(out.text, "# Avg bus bandwidth"));
    assert_non_null(strstr(out.text, "Out of bounds values : 0 OK"));
    int rows = 0;
    for (int i = 0; i < out.nlines; i++)
        rows += out.lines[i][0] != '#';
    assert_int_equal(rows, 3); /* 1K, 2K, 4K: one row per size, printed by rank 0 only */
    /* the placement block: one line per rank, in rank order, with its pid and cpus */
    const char *p = strstr(out.text, "#  Rank   0 Pid ");
    assert_non_null(p);
    assert_non_null(strstr(p, " cpus "));
    assert_non_null(strstr(p, "#  Rank   1 Pid "));
    free_out(&out);
}

static void expect_exit(const char *args, int code)
{
    cmd_out out;
    run_zen(args, &out);
    if (out.exit_code != code)
        fail_msg("`zen %s` exited %d, expected %d", args, out.exit_code, code);
    free_out(&out);
}

static void test_help_and_usage_errors(void **state)
{
    (void)state;
    cmd_out out;
    run_zen("bench --help", &out);
    assert_int_equal(out.exit_code, 0);
    assert_non_null(strstr(out.text, "usage: zen bench"));
    free_out(&out);
    expect_exit("bench allreduce --help", 0);
    expect_exit("bench p2p --help", 0);
    expect_exit("bench", 2);
    expect_exit("bench allreduce --bogus", 2);
    expect_exit("bench allreduce -b 1X", 2);
    expect_exit("bench allreduce -b 64K -e 1K", 2);
    expect_exit("bench allreduce -f 1", 2);
    expect_exit("bench allreduce -d f16", 2);
    expect_exit("bench allreduce -o xor", 2);
    expect_exit("bench allreduce --algo fast", 2);
    expect_exit("bench allreduce -n", 2);
    expect_exit("bench allgather --algo ring", 2);
    expect_exit("bench broadcast --ranks 2 --root 2", 2);
    expect_exit("bench nosuch", 2);
    /* tcp needs a launcher; without one it is a usage error, not a hang */
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "env -u ZEN_RANK -u RANK -u OMPI_COMM_WORLD_RANK -u PMI_RANK '%s' bench allreduce "
             "--transport tcp -b 1K -e 1K >/dev/null 2>&1",
             zen_bin());
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}

/* A world whose other rank never shows up: the communicator fails, zen bench exits 1. */
static void test_failure_exit_code(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "ZEN_RANK=0 ZEN_WORLD_SIZE=2 ZEN_MASTER_ADDR=127.0.0.1 ZEN_MASTER_PORT=%d "
             "'%s' bench allreduce --transport tcp --timeout 1 -b 1K -e 1K >/dev/null 2>&1",
             20000 + (int)(getpid() % 20000), zen_bin());
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median over the timed iterations of a[it] / b[it]. */
static double paired_median(const double *a, const double *b, int warmup, int iters)
{
    double q[64];
    assert_true(iters <= 64);
    for (int i = 0; i < iters; i++) {
        assert_true(a[warmup + i] > 0 && b[warmup + i] > 0);
        q[i] = a[warmup + i] / b[warmup + i];
    }
    qsort(q, (size_t)iters, sizeof *q, cmp_double);
    return q[(iters + 1) / 2 - 1];
}

/* `zen bench sparse`'s auto_over_paired is, per scheme, the median over the timed iterations of
 * AUTO's time over that scheme's in the same iteration, and a twin's twin_over_paired (--twins)
 * the same of the twin over its original: recomputed here from the per-iteration times
 * --call-times prints (`# call SCHEME ITERATION US RAN`, slowest rank). */
static void test_sparse_paired_ratio(void **state)
{
    (void)state;

    enum {
        WARMUP = 2,
        ITERS = 9
    };

    char err[] = "/tmp/zen_test_call_times_XXXXXX";
    int fd = mkstemp(err);
    assert_true(fd >= 0);
    close(fd);
    cmd_out out;
    run_zen_to("bench sparse --ranks 2 --rows 4000 --density 0.02 --schemes auto,allgather,ps "
               "--iters 9 --warmup 2 --json --call-times --twins",
               &out, err);
    assert_int_equal(out.exit_code, 0);
    const char *line = NULL, *twin = NULL;
    int nrows = 0;
    for (int i = 0; i < out.nlines; i++) {
        nrows += out.lines[i][0] == '{';
        if (strstr(out.lines[i], "\"scheme\":\"auto\""))
            line = out.lines[i];
        if (strstr(out.lines[i], "\"scheme\":\"ps\"") && strstr(out.lines[i], "\"twin\":true"))
            twin = out.lines[i];
    }
    assert_int_equal(nrows, 5); /* auto, allgather, ps and the twins of the last two */
    assert_non_null(line);
    assert_non_null(twin);
    assert_non_null(json_field(line, "auto_over_paired"));
    static const char *const names[4] = { "auto", "allgather", "ps", "ps~twin" };
    double t[4][WARMUP + ITERS] = { { 0 } };
    FILE *f = fopen(err, "r");
    assert_non_null(f);
    char buf[256], scheme[32], ran[32];
    int it;
    double us;
    while (fgets(buf, sizeof buf, f))
        if (sscanf(buf, "# call %31s %d %lf %31s", scheme, &it, &us, ran) == 4)
            for (int k = 0; k < 4; k++)
                if (strcmp(scheme, names[k]) == 0 && it >= 0 && it < WARMUP + ITERS)
                    t[k][it] = us;
    fclose(f);
    unlink(err);
    /* the call times are printed to 0.1 us, the ratios to 4 decimals */
    for (int k = 1; k < 3; k++) {
        double want = paired_median(t[0], t[k], WARMUP, ITERS), got = json_num(line, names[k]);
        if (fabs(got - want) > 2e-3 * want)
            fail_msg("%s: auto_over_paired %g, from the call times %g", names[k], got, want);
    }
    double want = paired_median(t[3], t[2], WARMUP, ITERS);
    double got = json_num(twin, "twin_over_paired");
    if (fabs(got - want) > 2e-3 * want)
        fail_msg("ps~twin: twin_over_paired %g, from the call times %g", got, want);
    free_out(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_json_check),
        cmocka_unit_test(test_allreduce_algos_dtypes),
        cmocka_unit_test(test_other_collectives),
        cmocka_unit_test(test_p2p_json),
        cmocka_unit_test(test_reduce_gather_sendrecv),
        cmocka_unit_test(test_reduce_gather_sendrecv_shm),
        cmocka_unit_test(test_tcp_launch),
        cmocka_unit_test(test_human_output),
        cmocka_unit_test(test_help_and_usage_errors),
        cmocka_unit_test(test_failure_exit_code),
        cmocka_unit_test(test_sparse_paired_ratio),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
