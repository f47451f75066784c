/* Checkpoint files: round trip, corruption, truncation, configuration mismatch, non-finite
 * values and stale temporary files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "train/checkpoint.h"

#define NA 1000
#define NB 37

typedef struct fixture {
    char dir[64];
    char path[128];
    float a[NA], b[NB];
} fixture;

static const char *config = "model.d_model=16\nmodel.layers=2\ntrain.lr=0.001\n";

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/zen_ckpt_XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, ZEN_CKPT_FILE);
    uint64_t s = 42;
    for (int i = 0; i < NA; i++)
        f->a[i] = (float)((double)(zt_rand(&s) % 20001) / 1000.0 - 10.0);
    for (int i = 0; i < NB; i++)
        f->b[i] = (float)i * 0.5f - 3.0f;
    zen_ckpt_section sec[2] = { { "weights", f->a, NA }, { "adam.m", f->b, NB } };
    char err[256];
    if (zen_ckpt_save(f->path, config, 123, sec, 2, err, sizeof err) != ZEN_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* Load into fresh buffers filled with a sentinel; returns the status. */
static zen_status load(fixture *f, const char *cfg, float *a, float *b, uint64_t *step, char *err)
{
    for (int i = 0; i < NA; i++)
        a[i] = -777.0f;
    for (int i = 0; i < NB; i++)
        b[i] = -777.0f;
    zen_ckpt_section sec[2] = { { "adam.m", b, NB }, { "weights", a, NA } }; /* any order */
    return zen_ckpt_load(f->path, cfg, step, sec, 2, err, 256);
}

static void assert_untouched(const float *a, const float *b)
{
    for (int i = 0; i < NA; i++)
        assert_true(a[i] == -777.0f);
    for (int i = 0; i < NB; i++)
        assert_true(b[i] == -777.0f);
}

static void test_round_trip(void **state)
{
    fixture *f = *state;
    float a[NA], b[NB];
    uint64_t step = 0;
    char err[256] = "";
    assert_int_equal(load(f, config, a, b, &step, err), ZEN_OK);
    assert_int_equal(step, 123);
    assert_memory_equal(a, f->a, sizeof a);
    assert_memory_equal(b, f->b, sizeof b);
    /* no temporary file is left behind */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp > /dev/null", f->dir);
    assert_int_not_equal(system(cmd), 0);
    /* saving again replaces the file atomically with the new content */
    f->a[0] = 99.0f;
    zen_ckpt_section sec[2] = { { "weights", f->a, NA }, { "adam.m", f->b, NB } };
    assert_int_equal(zen_ckpt_save(f->path, config, 124, sec, 2, err, sizeof err), ZEN_OK);
    assert_int_equal(load(f, NULL, a, b, &step, err), ZEN_OK);
    assert_int_equal(step, 124);
    assert_true(a[0] == 99.0f);
}

static void flip_byte(const char *path, long offset_from_end)
{
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    fseek(fp, -offset_from_end, SEEK_END);
    int c = fgetc(fp);
    fseek(fp, -offset_from_end, SEEK_END);
    fputc(c ^ 0x01, fp);
    fclose(fp);
}

static void test_corrupt_payload(void **state)
{
    fixture *f = *state;
    float a[NA], b[NB];
    uint64_t step = 7;
    char err[256] = "";
    flip_byte(f->path, 10);
    assert_int_equal(load(f, config, a, b, &step, err), ZEN_ECORRUPT);
    assert_non_null(strstr(err, "checksum"));
    assert_untouched(a, b);
    assert_int_equal(step, 7);
}

static void test_corrupt_header(void **state)
{
    fixture *f = *state;
    float a[NA], b[NB];
    uint64_t step = 0;
    char err[256] = "";
    FILE *fp = fopen(f->path, "r+b");
    fseek(fp, 16, SEEK_SET); /* inside the step field */
    fputc(0x55, fp);
    fclose(fp);
    assert_int_equal(load(f, config, a, b, &step, err), ZEN_ECORRUPT);
    assert_untouched(a, b);
}

static void test_truncated(void **state)
{
    fixture *f = *state;
    float a[NA], b[NB];
    uint64_t step = 0;
    char err[256] = "";
    struct stat sb;
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(truncate(f->path, sb.st_size - 4), 0);
    assert_int_equal(load(f, config, a, b, &step, err), ZEN_ECORRUPT);
    assert_non_null(strstr(err, "truncated"));
    assert_untouched(a, b);
    /* not a checkpoint at all */
    FILE *fp = fopen(f->path, "w");
    fputs("hello", fp);
    fclose(fp);
    assert_int_equal(load(f, config, a, b, &step, err), ZEN_ECORRUPT);
    assert_untouched(a, b);
    /* missing */
    unlink(f->path);
    assert_int_equal(load(f, config, a, b, &step, err), ZEN_EIO);
}

static void test_config_mismatch(void **state)
{
    fixture *f = *state;
    float a[NA], b[NB];
    uint64_t step = 0;
    char err[256] = "";
    const char *other = "model.d_model=16\nmodel.layers=3\ntrain.lr=0.001\n";
    assert_int_equal(load(f, other, a, b, &step, err), ZEN_EMISMATCH);
    assert_non_null(strstr(err, "model.layers=2"));
    assert_non_null(strstr(err, "model.layers=3"));
    assert_untouched(a, b);
}

static void test_shape_mismatch(void **state)
{
    fixture *f = *state;
    float a[NA + 1];
    uint64_t step = 0;
    char err[256] = "";
    zen_ckpt_section sec[1] = { { "weights", a, NA + 1 } };
    for (int i = 0; i < NA + 1; i++)
        a[i] = -777.0f;
    assert_int_equal(zen_ckpt_load(f->path, config, &step, sec, 1, err, sizeof err), ZEN_EMISMATCH);
    assert_non_null(strstr(err, "weights"));
    for (int i = 0; i < NA + 1; i++)
        assert_true(a[i] == -777.0f);
    float c[4];
    zen_ckpt_section missing[1] = { { "adam.v", c, 4 } };
    assert_int_equal(zen_ckpt_load(f->path, config, &step, missing, 1, err, sizeof err),
                     ZEN_EMISMATCH);
    assert_non_null(strstr(err, "adam.v"));
}

/* Valid checksums over NaN or Inf weights (a diverged run saved faithfully) are refused, naming
 * the section; nothing is copied. */
static void test_non_finite_refused(void **state)
{
    fixture *f = *state;
    static const float bad[] = { NAN, INFINITY, -INFINITY };
    for (int k = 0; k < 3; k++) {
        float saved = f->b[5];
        f->b[5] = bad[k];
        zen_ckpt_section sec[2] = { { "weights", f->a, NA }, { "adam.m", f->b, NB } };
        char err[256] = "";
        assert_int_equal(zen_ckpt_save(f->path, config, 7, sec, 2, err, sizeof err), ZEN_OK);
        f->b[5] = saved;
        float a[NA], b[NB];
        uint64_t step = 0;
        assert_int_equal(load(f, config, a, b, &step, err), ZEN_ECORRUPT);
        assert_non_null(strstr(err, "adam.m"));
        assert_non_null(strstr(err, "non-finite"));
        assert_untouched(a, b);
    }
}

/* A temporary file of a writer that died is removed; one of a live writer (this process) and
 * unrelated files stay. */
static void test_stale_tmp_removed(void **state)
{
    fixture *f = *state;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(0);
    assert_int_equal(waitpid(child, NULL, 0), child); /* a pid that no longer runs */
    char dead[256], live[256], other[256];
    snprintf(dead, sizeof dead, "%s.tmp.%ld", f->path, (long)child);
    snprintf(live, sizeof live, "%s.tmp.%ld", f->path, (long)getpid());
    snprintf(other, sizeof other, "%s/notes.tmp.%ld", f->dir, (long)child);
    const char *files[] = { dead, live, other };
    for (int i = 0; i < 3; i++) {
        FILE *fp = fopen(files[i], "w");
        assert_non_null(fp);
        fclose(fp);
    }
    zen_ckpt_remove_stale(f->path);
    assert_int_not_equal(access(dead, F_OK), 0);
    assert_int_equal(access(live, F_OK), 0);
    assert_int_equal(access(other, F_OK), 0);
    assert_int_equal(access(f->path, F_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_payload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shape_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_non_finite_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_tmp_removed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
