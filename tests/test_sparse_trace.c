/* Gradient trace files (src/sparse/trace/trace.c): round trip, and every corruption is detected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zen/sparse.h>

#include "testutil.h"

static void make_step(zen_trace_step *s, zen_trace_tensor *t, uint64_t *rng)
{
    memset(s, 0, sizeof *s);
    s->rank = 3;
    s->world_size = 8;
    s->step = 42;
    s->count = 2;
    s->tensors = t;
    for (int k = 0; k < 2; k++) {
        memset(&t[k], 0, sizeof t[k]);
        snprintf(t[k].name, sizeof t[k].name, k == 0 ? "wte" : "lm_head.topk");
        t[k].rows = k == 0 ? 5000 : 77;
        t[k].width = k == 0 ? 16 : 1;
        t[k].nnz = k == 0 ? 300 : 0;
        t[k].indices = malloc((t[k].nnz + 1) * sizeof(uint32_t));
        t[k].values = malloc((t[k].nnz * t[k].width + 1) * sizeof(float));
        for (uint64_t i = 0; i < t[k].nnz; i++)
            t[k].indices[i] = (uint32_t)(zt_rand(rng) % t[k].rows);
        for (uint64_t i = 0; i < t[k].nnz * t[k].width; i++)
            t[k].values[i] = (float)(zt_rand(rng) % 1000) / 7.0f - 50.0f;
    }
}

static void free_step(zen_trace_step *s)
{
    for (size_t k = 0; k < s->count; k++) {
        free(s->tensors[k].indices);
        free(s->tensors[k].values);
    }
}

static void test_round_trip_and_corruption(void **state)
{
    (void)state;
    char dir[] = "/tmp/zen-trace-XXXXXX";
    assert_non_null(mkdtemp(dir));
    uint64_t rng = 9;
    zen_trace_tensor t[2];
    zen_trace_step s;
    make_step(&s, t, &rng);
    char path[512];
    assert_int_equal(zen_trace_path(path, sizeof path, dir, 3, 42), ZEN_OK);
    assert_non_null(strstr(path, "rank3-step000042.zgrad"));
    assert_int_equal(zen_trace_write(path, &s), ZEN_OK);

    zen_trace_step got;
    assert_int_equal(zen_trace_read(path, &got), ZEN_OK);
    assert_int_equal(got.rank, 3);
    assert_int_equal(got.world_size, 8);
    assert_int_equal(got.step, 42);
    assert_int_equal(got.count, 2);
    for (int k = 0; k < 2; k++) {
        assert_string_equal(got.tensors[k].name, t[k].name);
        assert_int_equal(got.tensors[k].rows, t[k].rows);
        assert_int_equal(got.tensors[k].width, t[k].width);
        assert_int_equal(got.tensors[k].nnz, t[k].nnz);
        if (t[k].nnz) {
            assert_memory_equal(got.tensors[k].indices, t[k].indices, t[k].nnz * 4);
            assert_memory_equal(got.tensors[k].values, t[k].values, t[k].nnz * t[k].width * 4);
        }
    }
    zen_trace_free(&got);

    /* flip every 97th byte in turn, and truncate at several lengths: always ZEN_ECORRUPT */
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static uint8_t data[1 << 16];
    size_t len = fread(data, 1, sizeof data, f);
    fclose(f);
    assert_true(len > 100 && len < sizeof data);
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad.zgrad", dir);
    for (size_t pos = 0; pos < len; pos += 97) {
        data[pos] ^= 0x20;
        f = fopen(bad, "wb");
        fwrite(data, 1, len, f);
        fclose(f);
        assert_int_equal(zen_trace_read(bad, &got), ZEN_ECORRUPT);
        data[pos] ^= 0x20;
    }
    for (size_t cut = 0; cut < len; cut += len / 7 + 1) {
        f = fopen(bad, "wb");
        fwrite(data, 1, cut, f);
        fclose(f);
        assert_int_equal(zen_trace_read(bad, &got), ZEN_ECORRUPT);
    }
    remove(bad);
    /* an index outside rows is refused by the writer */
    t[0].indices[5] = (uint32_t)t[0].rows;
    assert_int_equal(zen_trace_write(bad, &s), ZEN_EINVAL);
    snprintf(bad, sizeof bad, "%s/missing.zgrad", dir);
    assert_int_equal(zen_trace_read(bad, &got), ZEN_EIO);
    remove(path);
    rmdir(dir);
    free_step(&s);
}

/* Many smallest tensors (empty name, no entries: 26 bytes each) still read back: the reader's
 * bound on the tensor count must not be tighter than the format. */
static void test_many_empty_tensors(void **state)
{
    (void)state;
    char dir[] = "/tmp/zen-trace-XXXXXX";
    assert_non_null(mkdtemp(dir));

    enum {
        N = 40
    };

    zen_trace_tensor t[N];
    memset(t, 0, sizeof t);
    for (int k = 0; k < N; k++) {
        t[k].rows = (uint64_t)k + 1;
        t[k].width = 1;
    }
    zen_trace_step s = { 1, 2, 3, N, t };
    char path[512];
    assert_int_equal(zen_trace_path(path, sizeof path, dir, 1, 3), ZEN_OK);
    assert_int_equal(zen_trace_write(path, &s), ZEN_OK);
    zen_trace_step got;
    assert_int_equal(zen_trace_read(path, &got), ZEN_OK);
    assert_int_equal(got.count, N);
    for (int k = 0; k < N; k++) {
        assert_string_equal(got.tensors[k].name, "");
        assert_int_equal(got.tensors[k].rows, (uint64_t)k + 1);
        assert_int_equal(got.tensors[k].nnz, 0);
    }
    zen_trace_free(&got);
    remove(path);
    rmdir(dir);
}

/* Run `zen bench sparse ARGS --json` and check every scheme line says verified; returns lines. */
static int bench_lines_verified(const char *args)
{
    const char *bin = getenv("ZEN_BIN");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s bench sparse %s --json", bin, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[4096];
    int lines = 0;
    while (fgets(line, sizeof line, p)) {
        if (line[0] != '{')
            continue;
        lines++;
        if (!strstr(line, "\"verified\":true"))
            fail_msg("not verified: %s", line);
        assert_non_null(strstr(line, "\"max_bytes_sent\":"));
        assert_non_null(strstr(line, "\"ideal_bytes\":"));
    }
    assert_int_equal(pclose(p), 0);
    return lines;
}

/* A recorded trace of 3 ranks x 2 steps x 2 tensors replays through every scheme, verified. */
static void test_bench_replays_trace(void **state)
{
    (void)state;
    if (!getenv("ZEN_BIN"))
        skip();
    char dir[] = "/tmp/zen-trace-XXXXXX";
    assert_non_null(mkdtemp(dir));
    uint64_t rng = 5;
    for (uint32_t r = 0; r < 3; r++)
        for (uint64_t step = 7; step < 9; step++) {
            zen_trace_tensor t[2];
            zen_trace_step s;
            make_step(&s, t, &rng);
            s.rank = r;
            s.world_size = 3;
            s.step = step;
            for (uint64_t i = 0; i < t[0].nnz * t[0].width; i++)
                t[0].values[i] = (float)((int)(zt_rand(&rng) % 7) - 3); /* exact sums */
            char path[512];
            assert_int_equal(zen_trace_path(path, sizeof path, dir, r, step), ZEN_OK);
            assert_int_equal(zen_trace_write(path, &s), ZEN_OK);
            free_step(&s);
        }
    char args[256];
    snprintf(args, sizeof args, "--trace %s --ranks 3 --iters 2 --warmup 0", dir);
    assert_int_equal(bench_lines_verified(args), 7);
    /* synthetic data with every overlap model, a skew and width > 1 */
    assert_int_equal(bench_lines_verified("--ranks 5 --rows 3000 --density 0.05 --skew 0.1 "
                                          "--iters 1 --warmup 0 --schemes ps,block,auto"),
                     3);
    assert_int_equal(bench_lines_verified("--ranks 4 --rows 2000 --width 4 --overlap zipf "
                                          "--iters 1 --warmup 0 --schemes all"),
                     7);
    assert_int_equal(bench_lines_verified("--ranks 2 --rows 2000 --overlap disjoint --iters 1 "
                                          "--warmup 0 --schemes hierarchical,dense"),
                     2);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_and_corruption),
        cmocka_unit_test(test_many_empty_tensors),
        cmocka_unit_test(test_bench_replays_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
