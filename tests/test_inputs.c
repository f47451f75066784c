/*
 * Hostile or careless inputs to the CLI end in a clear message and exit status, never in a
 * crash, an endless read or wait, or a false "verified": a directory without traces, a trace
 * whose rows field would need tens of GiB, NaN/Inf in a trace, a corpus that is a device, a
 * --cpu file that holds no constants, a named pipe (FIFO) given as any input, a NaN or infinite
 * option value, a full disk under --metrics, a trace replay larger than its memory bound, and a
 * trace file whose header contradicts its name or its peers.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zen/sparse.h>

#include "common/hash.h"
#include "testutil.h"

/* Run `$ZEN_BIN args` with stderr merged into out, ended after limit_s seconds (exit 124); returns
 * the exit status (-1 if signalled). */
static int run_zen_within(const char *args, char *out, size_t cap, int limit_s)
{
    const char *bin = getenv("ZEN_BIN");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout %d '%s' %s 2>&1 </dev/null", limit_s, bin, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t len = fread(out, 1, cap - 1, p);
    out[len] = '\0';
    while (fgetc(p) != EOF) {
    }
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int run_zen(const char *args, char *out, size_t cap)
{
    return run_zen_within(args, out, cap, 60);
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
    assert_non_null(strstr(out, "(half of this machine's memory)"));
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A directory of scratch files for one test: a FIFO "fifo" (nobody writes or reads it), a small
 * corpus "corpus.txt" and a cache directory. */
typedef struct scratch {
    char dir[64];
    char fifo[128], corpus[128], train[1024];
} scratch;

static void scratch_make(scratch *s)
{
    snprintf(s->dir, sizeof s->dir, "/tmp/zen-inputs-XXXXXX");
    assert_non_null(mkdtemp(s->dir));
    snprintf(s->fifo, sizeof s->fifo, "%s/fifo", s->dir);
    assert_int_equal(mkfifo(s->fifo, 0600), 0);
    snprintf(s->corpus, sizeof s->corpus, "%s/corpus.txt", s->dir);
    FILE *f = fopen(s->corpus, "w");
    assert_non_null(f);
    for (int i = 0; i < 200; i++)
        fprintf(f, "the cat %d saw the dog %d and said %d .\n", i % 7, i % 5, i % 3);
    assert_int_equal(fclose(f), 0);
    /* a tiny model on the corpus: the run reaches its files within a second */
    snprintf(s->train, sizeof s->train,
             "train --data %s --cache-dir %s/cache --layers 1 --d-model 8 --heads 1 --d-ff 8 "
             "--ctx 8 --seq 8 --batch 1 --dp 1 --tp 1 --steps 2 --sample-tokens 0 --threads 1 "
             "--quiet",
             s->corpus, s->dir);
}

static void scratch_remove(scratch *s)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s->dir);
    assert_int_equal(system(cmd), 0);
}

/* Runs `zen args`, which must exit with status want and print needle. Before the fix it waited
 * on the FIFO until the 10 s `timeout` ended it with 124, which fails here; no wall-clock limit
 * beyond that (a loaded machine must not fail a correct program). */
static void expect_quick_failure(const char *args, int want, const char *needle)
{
    char out[16384];
    double t0 = now_s();
    int rc = run_zen_within(args, out, sizeof out, 10); /* a hang costs 10 s, not the ctest */
    double took = now_s() - t0;
    if (rc != want || !strstr(out, needle))
        fail_msg("zen %s: exit %d after %.2f s (want %d, saying '%s'):\n%s", args, rc, took, want,
                 needle, out);
}

/* The library's open helpers, directly: a FIFO, a device and a directory are refused at once
 * (before, the open of a FIFO blocked), a symlink to a regular file is read, a FIFO is written
 * only while someone reads it. alarm(): a helper that blocks fails the test, it cannot hang it. */
static void test_open_helpers(void **state)
{
    (void)state;
    alarm(20);
    scratch s;
    scratch_make(&s);
    FILE *f = (FILE *)1;
    uint64_t size = 7;
    char why[512], link[160];
    assert_int_equal(zen_file_open_input(s.fifo, UINT64_MAX, &f, &size, why, sizeof why),
                     ZEN_EINVAL);
    assert_null(f);
    assert_non_null(strstr(why, "named pipe (FIFO)"));
    assert_non_null(strstr(why, s.fifo));
    assert_int_equal(zen_file_open_input("/dev/zero", UINT64_MAX, &f, &size, why, sizeof why),
                     ZEN_EINVAL);
    assert_non_null(strstr(why, "character device"));
    assert_int_equal(zen_file_open_input(s.dir, UINT64_MAX, &f, &size, why, sizeof why),
                     ZEN_EINVAL);
    assert_int_equal(zen_file_open_input("/nonexistent/x", UINT64_MAX, &f, &size, why, sizeof why),
                     ZEN_EIO);
    assert_int_equal(errno, ENOENT);
    snprintf(link, sizeof link, "%s/link", s.dir);
    assert_int_equal(symlink(s.corpus, link), 0);
    struct stat sb;
    assert_int_equal(stat(s.corpus, &sb), 0);
    assert_int_equal(zen_file_open_input(link, UINT64_MAX, &f, &size, why, sizeof why), ZEN_OK);
    assert_int_equal(size, (uint64_t)sb.st_size);
    char first[8] = { 0 };
    assert_int_equal(fread(first, 1, 7, f), 7);
    assert_string_equal(first, "the cat");
    fclose(f);
    assert_int_equal(zen_file_open_input(link, 10, &f, &size, why, sizeof why), ZEN_EINVAL);
    assert_int_equal(errno, EFBIG);
    /* output: no reader, refused at once; with a reader, written through */
    assert_int_equal(zen_file_open_output(s.fifo, &f, why, sizeof why), ZEN_EINVAL);
    assert_int_equal(errno, ENXIO);
    assert_non_null(strstr(why, "no process is reading"));
    int rd = open(s.fifo, O_RDONLY | O_NONBLOCK);
    assert_true(rd >= 0);
    assert_int_equal(zen_file_open_output(s.fifo, &f, why, sizeof why), ZEN_OK);
    fputs("ok\n", f);
    assert_int_equal(fclose(f), 0);
    char got[4] = { 0 };
    assert_int_equal(read(rd, got, 3), 3);
    assert_string_equal(got, "ok\n");
    close(rd);
    scratch_remove(&s);
    alarm(0);
}

/* Every input a user names, given a FIFO: the command fails within a second, naming it. */
static void test_fifo_inputs_fail_fast(void **state)
{
    (void)state;
    scratch s;
    scratch_make(&s);
    char args[2048], tdir[160], path[256];
    const char *fifo_msg = "is not a regular file but a named pipe (FIFO)";
    snprintf(args, sizeof args, "train --data %s --steps 1 --dp 1 --tp 1 --cache-dir %s/cache",
             s.fifo, s.dir);
    expect_quick_failure(args, 1, fifo_msg);
    snprintf(args, sizeof args, "%s --resume %s", s.train, s.fifo);
    expect_quick_failure(args, 1, fifo_msg);
    snprintf(args, sizeof args, "%s --metrics %s", s.train, s.fifo);
    expect_quick_failure(args, 1, "is a named pipe (FIFO) that no process is reading");
    snprintf(args, sizeof args, "simulate --cpu %s", s.fifo);
    expect_quick_failure(args, 2, fifo_msg);
    /* a trace directory whose files are FIFOs, and a FIFO where the directory belongs */
    snprintf(tdir, sizeof tdir, "%s/trace", s.dir);
    assert_int_equal(mkdir(tdir, 0700), 0);
    for (uint32_t r = 0; r < 2; r++) {
        assert_int_equal(zen_trace_path(path, sizeof path, tdir, r, 1), ZEN_OK);
        assert_int_equal(mkfifo(path, 0600), 0);
    }
    snprintf(args, sizeof args, "bench sparse --trace %s --ranks 2 --iters 1 --warmup 0", tdir);
    expect_quick_failure(args, 1, fifo_msg);
    snprintf(args, sizeof args, "simulate --trace %s", tdir);
    expect_quick_failure(args, 1, fifo_msg);
    snprintf(args, sizeof args, "bench sparse --trace %s --ranks 2", s.fifo);
    expect_quick_failure(args, 1, "Not a directory");
    /* the job secret (the launcher passes the variable on instead of drawing a secret): every
     * rank refuses before the rendezvous */
    assert_int_equal(setenv("ZEN_JOB_SECRET_FILE", s.fifo, 1), 0);
    snprintf(args, sizeof args,
             "launch -n 2 -- env ZEN_TRANSPORT=tcp %s bench allreduce -b 1K -e 1K -n 1 -w 0",
             getenv("ZEN_BIN"));
    expect_quick_failure(args, 1, "ZEN_JOB_SECRET_FILE: ");
    unsetenv("ZEN_JOB_SECRET_FILE");
    scratch_remove(&s);
}

/* Numeric options: NaN, infinities, overflow and trailing garbage are usage errors (exit 2)
 * wherever they mean nothing (before: `simulate --lat-us nan` printed a table of NaN and named
 * a winner, `--gbps inf` and `bench --timeout inf` were taken, `--ranks 2.5` ran 2 ranks). */
static void test_numeric_options_refuse_nan_and_inf(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "simulate --lat-us nan",
        "simulate --lat-us inf",
        "simulate --lat-us 1e999",
        "simulate --lat-us 5us",
        "simulate --gbps 1,inf",
        "simulate --gbps nan",
        "simulate --ranks 2,inf",
        "simulate --ranks 2.5",
        "simulate --rows nan",
        "simulate --rows inf",
        "simulate --width nan",
        "simulate --density nan",
        "simulate --skew inf",
        "simulate --seed -1",
        "simulate --seed 99999999999999999999",
        "simulate --cpu-share nan",
        "bench allreduce --timeout inf",
        "bench allreduce --timeout nan",
        "bench allreduce -f nan",
        "bench sparse --timeout inf",
        "bench sparse --ranks 2.5",
        "bench sparse --density nan",
        "bench sparse --max-mem inf",
        "launch --grace inf -n 1 -- true",
        "launch --grace nan -n 1 -- true",
        "train --lr nan",
        "train --topk inf",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char out[16384];
        int rc = run_zen(bad[i], out, sizeof out);
        if (rc != 2)
            fail_msg("zen %s: exit %d, want 2 (usage error):\n%.2000s", bad[i], rc, out);
    }
    /* the finite forms still run */
    char out[16384];
    assert_int_equal(run_zen("simulate --lat-us 0 --ranks 2,4 --gbps 1e-3,1e3 --seed "
                             "18446744073709551615 --rows 4e4 --width 8",
                             out, sizeof out),
                     0);
    assert_non_null(strstr(out, "latency 0 us"));
}

/* A metrics file that cannot be written (/dev/full: ENOSPC) fails the run naming the file
 * (before: the lines were dropped and the run exited 0). */
static void test_metrics_write_failure(void **state)
{
    (void)state;
    scratch s;
    scratch_make(&s);
    char args[2048], out[16384];
    snprintf(args, sizeof args, "%s --metrics /dev/full", s.train);
    assert_int_equal(run_zen(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "cannot write --metrics /dev/full"));
    assert_non_null(strstr(out, strerror(ENOSPC)));
    snprintf(args, sizeof args, "%s --metrics %s/m.jsonl", s.train, s.dir);
    assert_int_equal(run_zen(args, out, sizeof out), 0);
    scratch_remove(&s);
}

/* Writes DIR/rank<file_rank>-step<step>.zgrad holding a header of (rank, world, step) and one
 * tensor of rows x 1 with a single 1 at row 0. */
static void write_trace_as(const char *dir, uint32_t file_rank, uint32_t rank, uint32_t world,
                           uint64_t step, uint64_t rows)
{
    uint32_t idx[1] = { 0 };
    float v[1] = { 1 };
    zen_trace_tensor t = { .rows = rows, .width = 1, .nnz = 1, .indices = idx, .values = v };
    snprintf(t.name, sizeof t.name, "emb");
    zen_trace_step s = {
        .rank = rank, .world_size = world, .step = step, .count = 1, .tensors = &t
    };
    char path[512];
    assert_int_equal(zen_trace_path(path, sizeof path, dir, file_rank, step), ZEN_OK);
    assert_int_equal(zen_trace_write(path, &s), ZEN_OK);
}

/*
 * The replay's memory is bounded as a whole: at 2 ranks a step of one 65536-row tensor holds
 * 0.5 MiB for the run (sum and magnitudes) and 0.5625 MiB during a call (two outputs, row
 * marks), so one step (1.06 MiB) fits a 1.25 MiB bound and two (1.56 MiB) do not, although each
 * tensor does (before: only a single tensor was checked, and against half the machine's memory,
 * and a failed allocation printed nothing).
 */
static void test_trace_replay_bound(void **state)
{
    (void)state;
    char dir[] = "/tmp/zen-inputs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    for (uint32_t r = 0; r < 2; r++)
        write_trace_as(dir, r, r, 2, 1, 65536);
    char args[512], out[16384];
    snprintf(args, sizeof args,
             "bench sparse --trace %s --ranks 2 --iters 1 --warmup 0 --max-mem 0.001220703125",
             dir);
    assert_int_equal(run_zen(args, out, sizeof out), 0);
    for (uint32_t r = 0; r < 2; r++)
        write_trace_as(dir, r, r, 2, 2, 65536);
    assert_int_equal(run_zen(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "needs 1.56 MiB at once by tensor emb of step 2 (1 tensors"));
    assert_non_null(strstr(out, "more than its bound of 1.25 MiB (--max-mem)"));
    assert_non_null(strstr(out, "fewer steps"));
    snprintf(args, sizeof args, "rm -rf %s", dir);
    assert_int_equal(system(args), 0);
}

/* Runs `bench sparse` at n ranks on a trace directory and expects exit 1 with needle. */
static void expect_replay_refused(const char *dir, int n, const char *needle)
{
    char args[512], out[16384];
    snprintf(args, sizeof args, "bench sparse --trace %s --ranks %d --iters 1 --warmup 0", dir, n);
    int rc = run_zen(args, out, sizeof out);
    if (rc != 1 || !strstr(out, needle))
        fail_msg("zen %s: exit %d, want 1 saying '%s':\n%s", args, rc, needle, out);
}

/* A trace header's rank, world size and step are checked against the file's name, the other
 * ranks' files and the replay (before: never read, so a renamed or mixed-in file replayed). */
static void test_trace_header_checked(void **state)
{
    (void)state;
    char dir[] = "/tmp/zen-inputs-XXXXXX", cmd[128];
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "rm -f %s/*.zgrad", dir);
    write_trace_as(dir, 0, 0, 2, 1, 100); /* rank 1's file holds rank 0's gradients */
    write_trace_as(dir, 1, 0, 2, 1, 100);
    expect_replay_refused(dir, 2, "holds rank 0's step 1 (its header), not rank 1's step 1");
    assert_int_equal(system(cmd), 0);
    write_trace_as(dir, 0, 0, 2, 1, 100); /* a file named step 1 holding step 5 */
    write_trace_as(dir, 1, 1, 2, 5, 100);
    char from[600], to[600];
    snprintf(from, sizeof from, "%s/rank1-step000005.zgrad", dir);
    snprintf(to, sizeof to, "%s/rank1-step000001.zgrad", dir);
    assert_int_equal(rename(from, to), 0);
    expect_replay_refused(dir, 2, "holds rank 1's step 5 (its header), not rank 1's step 1");
    assert_int_equal(system(cmd), 0);
    write_trace_as(dir, 0, 0, 2, 1, 100); /* the ranks of a step disagree on the world */
    write_trace_as(dir, 1, 1, 3, 1, 100);
    expect_replay_refused(dir, 2, "was recorded at world size 3, rank 0's file of step 1 at 2");
    char out[16384], args[512];
    snprintf(args, sizeof args, "simulate --trace %s --ranks 2", dir);
    assert_int_equal(run_zen(args, out, sizeof out), 1);
    assert_non_null(strstr(out, "was recorded at world size"));
    assert_int_equal(system(cmd), 0);
    write_trace_as(dir, 0, 0, 1, 1, 100); /* recorded by one rank, replayed by two */
    write_trace_as(dir, 1, 1, 2, 1, 100);
    expect_replay_refused(dir, 2, "was recorded by 1 ranks: a replay can use at most that many");
    assert_int_equal(system(cmd), 0);
    rmdir(dir);
}

/* The reader refuses a rank at or above the world size (a file the writer no longer makes):
 * a valid file with its world field patched to 1 and the checksum redone. */
static void test_trace_rank_outside_world(void **state)
{
    (void)state;
    char dir[] = "/tmp/zen-inputs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    uint32_t idx[1] = { 0 };
    float v[1] = { 1 };
    zen_trace_tensor t = { .rows = 4, .width = 1, .nnz = 1, .indices = idx, .values = v };
    zen_trace_step s = { .rank = 1, .world_size = 1, .step = 1, .count = 1, .tensors = &t };
    char path[512];
    assert_int_equal(zen_trace_path(path, sizeof path, dir, 1, 1), ZEN_OK);
    assert_int_equal(zen_trace_write(path, &s), ZEN_EINVAL);
    s.world_size = 2;
    assert_int_equal(zen_trace_write(path, &s), ZEN_OK);
    zen_trace_step got;
    assert_int_equal(zen_trace_read(path, &got), ZEN_OK);
    assert_int_equal(got.world_size, 2);
    zen_trace_free(&got);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    unsigned char buf[4096];
    size_t len = fread(buf, 1, sizeof buf, f);
    assert_true(len > 40 && len < sizeof buf);
    buf[12] = 1; /* world size, little-endian at offset 12 */
    uint64_t sum = zen__fnv1a(buf, len - 8, 0x7a656e7472616365ull);
    for (int i = 0; i < 8; i++)
        buf[len - 8 + (size_t)i] = (unsigned char)(sum >> (8 * i));
    rewind(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(zen_trace_read(path, &got), ZEN_ECORRUPT);
    buf[12] = 2; /* the same bytes with the world restored read again: only the field differs */
    sum = zen__fnv1a(buf, len - 8, 0x7a656e7472616365ull);
    for (int i = 0; i < 8; i++)
        buf[len - 8 + (size_t)i] = (unsigned char)(sum >> (8 * i));
    f = fopen(path, "wb");
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(zen_trace_read(path, &got), ZEN_OK);
    zen_trace_free(&got);
    remove(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest lib[] = {
        cmocka_unit_test(test_open_helpers),
        cmocka_unit_test(test_trace_rank_outside_world),
    };
    int failed = cmocka_run_group_tests_name("library", lib, NULL, NULL);
    if (!getenv("ZEN_BIN"))
        return failed;
    const struct CMUnitTest cli[] = {
        cmocka_unit_test(test_trace_dir_without_traces),
        cmocka_unit_test(test_trace_with_absurd_rows),
        cmocka_unit_test(test_trace_with_nan_and_inf),
        cmocka_unit_test(test_corpus_must_be_a_regular_file),
        cmocka_unit_test(test_simulate_cpu_file),
        cmocka_unit_test(test_fifo_inputs_fail_fast),
        cmocka_unit_test(test_numeric_options_refuse_nan_and_inf),
        cmocka_unit_test(test_metrics_write_failure),
        cmocka_unit_test(test_trace_replay_bound),
        cmocka_unit_test(test_trace_header_checked),
    };
    return failed | cmocka_run_group_tests_name("cli", cli, NULL, NULL);
}
