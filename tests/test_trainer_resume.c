/*
 * Resuming is exact: N+M steps in one run equal N steps, a checkpoint, and M resumed steps,
 * bit for bit (losses and parameters), at dp 2 x tp 2. Refused checkpoints (corrupt, other
 * configuration) and an existing checkpoint in a fresh run's directory stop the run with a
 * clear message and leave the file as it was.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "train/checkpoint.h"
#include "train/train.h"

#define N 4
#define M 3

static zen_dataset *ds;
static char dir[64];

static int setup(void **state)
{
    (void)state;
    static const char *w[] = { "light", "darkness", "waters", "earth", "heaven", "and",  "the",
                               "god",   "said",     "was",    "good",  "day",    "night" };
    size_t n = 200;
    char **lines = calloc(n, sizeof *lines);
    uint64_t s = 5;
    for (size_t i = 0; i < n; i++) {
        char buf[256] = "";
        int len = 3 + (int)(zt_rand(&s) % 8);
        for (int k = 0; k < len; k++) {
            strcat(buf, w[zt_rand(&s) % 13]);
            strcat(buf, k + 1 < len ? " " : ".");
        }
        lines[i] = strdup(buf);
    }
    zen_data_options o = ZEN_DATA_OPTIONS_INIT;
    o.min_count = 1;
    zen_status st = zen_dataset_from_lines((const char *const *)lines, n, &o, &ds);
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    snprintf(dir, sizeof dir, "/tmp/zen_resume_XXXXXX");
    return st == ZEN_OK && mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    zen_dataset_destroy(ds);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void options(zen_train_options *o)
{
    zen_train_options_default(o);
    o->layers = 1;
    o->d_model = 16;
    o->heads = 2;
    o->d_ff = 32;
    o->ctx = 8;
    o->seq = 8;
    o->steps = N + M;
    o->warmup = 2;
    o->lr = 3e-3f;
    o->dp = 2;
    o->tp = 2;
    o->batch = 2;
    o->eval_interval = 0;
    o->eval_batches = 1;
    o->log_interval = 0;
    o->sample_tokens = 0;
    o->quiet = 1;
    o->threads = 1;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(*len + 1);
    if (fread(b, 1, *len, f) != *len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static void test_resume_bit_identical(void **state)
{
    (void)state;
    zen_train_options o;
    zen_train_result full, part, rest;
    options(&o);
    memset(&full, 0, sizeof full);
    full.want_params = 1;
    assert_int_equal(zen_train_run(&o, ds, &full), ZEN_OK);

    options(&o);
    o.stop_at = N;
    o.checkpoint_dir = dir;
    memset(&part, 0, sizeof part);
    assert_int_equal(zen_train_run(&o, ds, &part), ZEN_OK);
    assert_int_equal(part.steps_done, N);
    assert_memory_equal(part.losses, full.losses, N * sizeof(float));

    options(&o);
    o.checkpoint_dir = dir;
    o.resume = dir;
    memset(&rest, 0, sizeof rest);
    rest.want_params = 1;
    zen_status st = zen_train_run(&o, ds, &rest);
    if (st != ZEN_OK)
        fprintf(stderr, "resume: %s\n", rest.error);
    assert_int_equal(st, ZEN_OK);
    assert_int_equal(rest.first_step, N);
    assert_int_equal(rest.steps_done, N + M);
    assert_memory_equal(rest.losses, full.losses + N, M * sizeof(float));
    assert_int_equal(rest.nparams, full.nparams);
    assert_memory_equal(rest.params, full.params, full.nparams * sizeof(float));
    zen_train_result_free(&full);
    zen_train_result_free(&part);
    zen_train_result_free(&rest);
}

static void test_refusals_leave_file(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, ZEN_CKPT_FILE);
    size_t len0, len1;
    char *before = slurp(path, &len0);
    assert_non_null(before); /* written by the previous test */
    zen_train_options o;
    zen_train_result r;

    /* a fresh run into a directory that holds a checkpoint */
    options(&o);
    o.checkpoint_dir = dir;
    memset(&r, 0, sizeof r);
    assert_int_equal(zen_train_run(&o, ds, &r), ZEN_EBUSY);
    assert_non_null(strstr(r.error, "--resume"));

    /* another configuration */
    options(&o);
    o.lr = 1e-3f;
    o.resume = dir;
    o.checkpoint_dir = dir;
    memset(&r, 0, sizeof r);
    assert_int_equal(zen_train_run(&o, ds, &r), ZEN_EMISMATCH);
    assert_non_null(strstr(r.error, "train.lr"));
    zen_train_result_free(&r);

    char *after = slurp(path, &len1);
    assert_int_equal(len0, len1);
    assert_memory_equal(before, after, len0);
    free(after);

    /* a corrupt copy is refused by a resume that writes elsewhere */
    char bad[160];
    snprintf(bad, sizeof bad, "%s/corrupt.zck", dir);
    before[len0 / 2] ^= 0x10;
    FILE *f = fopen(bad, "wb");
    fwrite(before, 1, len0, f);
    fclose(f);
    options(&o);
    o.resume = bad;
    memset(&r, 0, sizeof r);
    assert_int_equal(zen_train_run(&o, ds, &r), ZEN_ECORRUPT);
    assert_non_null(strstr(r.error, "corrupt"));
    zen_train_result_free(&r);
    free(before);
}

/* A checkpoint is independent of the layout: dp 2 x tp 2 can be resumed at dp 1 x tp 1 with
 * the same global batch and continues like the uninterrupted run (up to summation order). */
static void test_resume_other_layout(void **state)
{
    (void)state;
    char sub[128];
    snprintf(sub, sizeof sub, "%s/layout", dir);
    zen_train_options o;
    zen_train_result full, part, rest;
    options(&o);
    memset(&full, 0, sizeof full);
    assert_int_equal(zen_train_run(&o, ds, &full), ZEN_OK);
    options(&o);
    o.stop_at = N;
    o.checkpoint_dir = sub;
    memset(&part, 0, sizeof part);
    assert_int_equal(zen_train_run(&o, ds, &part), ZEN_OK);
    options(&o);
    o.dp = 1;
    o.tp = 1;
    o.batch = 4; /* same global batch as dp 2 x batch 2 */
    o.resume = sub;
    memset(&rest, 0, sizeof rest);
    zen_status st = zen_train_run(&o, ds, &rest);
    if (st != ZEN_OK)
        fprintf(stderr, "resume at dp 1 x tp 1: %s\n", rest.error);
    assert_int_equal(st, ZEN_OK);
    assert_int_equal(rest.first_step, N);
    for (int i = 0; i < M; i++) {
        float a = full.losses[N + i], b = rest.losses[i];
        assert_true(fabsf(a - b) <= 1e-4f * (1.0f + fabsf(a)));
    }
    zen_train_result_free(&full);
    zen_train_result_free(&part);
    zen_train_result_free(&rest);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_bit_identical),
        cmocka_unit_test(test_refusals_leave_file),
        cmocka_unit_test(test_resume_other_layout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
