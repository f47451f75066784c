/*
 * The trainer's top-k corrections (src/train/trainer_sync.c, docs/training.md):
 *  - the sparsity warm-up's kept fraction per step is the exponential schedule, checked against
 *    a closed form and against what each rank actually sent (the --dump-grads "topk" tensor);
 *  - a warm-up that starts at 100% makes the first update the dense one: the loss after it
 *    equals the single-rank dense run's, while plain top-k's differs;
 *  - the AdamW second-moment rescale is the dense run when nothing is delayed;
 *  - momentum correction still learns, and bad values are refused before training;
 *  - --topk-dense-from: a warm-up step keeping at least F goes through the dense allreduce (the
 *    dense sync's bytes on the wire) and is the keep-100% step (same losses after it).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zen/sparse.h>

#include "testutil.h"
#include "train/train.h"
#include "train/trainer.h"
#include "train_fixture.h"

static zen_dataset *ds;

static int make_dataset(void **state)
{
    (void)state;
    return zt_verse_dataset(7, 240, &ds) == ZEN_OK ? 0 : -1;
}

static int free_dataset(void **state)
{
    (void)state;
    zen_dataset_destroy(ds);
    return 0;
}

static void remove_dir(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void tiny_options(zen_train_options *o, int dp, long steps)
{
    zen_train_options_default(o);
    o->layers = 2;
    o->d_model = 16;
    o->heads = 2;
    o->d_ff = 32;
    o->ctx = 8;
    o->seq = 8;
    o->steps = steps;
    o->warmup = 2;
    o->lr = 3e-3f;
    o->min_lr = 3e-4f;
    o->dp = dp;
    o->tp = 1;
    o->batch = 4 / dp;
    o->eval_interval = 0;
    o->eval_batches = 1;
    o->log_interval = 0;
    o->sample_tokens = 0;
    o->quiet = 1;
    o->threads = 1;
    o->cache_dir = NULL;
}

static void run(const zen_train_options *o, zen_train_result *r)
{
    memset(r, 0, sizeof *r);
    zen_status st = zen_train_run(o, ds, r);
    if (st != ZEN_OK)
        fprintf(stderr, "zen_train_run: %s\n", r->error);
    assert_int_equal(st, ZEN_OK);
    assert_int_equal(r->steps_done, o->steps);
}

/* The schedule in closed form: start at step 0, the target from step W on, a constant ratio
 * (target/start)^(1/W) between consecutive steps in between; no warm-up or a start below the
 * target is the target throughout; no top-k keeps everything. */
static void test_keep_schedule(void **state)
{
    (void)state;
    zen_train_options o;
    zen_train_options_default(&o);
    assert_true(zen_trainer_topk_keep(&o, 0) == 1.0);
    o.topk = 0.01;
    assert_true(zen_trainer_topk_keep(&o, 0) == 0.01);
    o.topk_warmup = 10;
    o.topk_start = 0.25;
    assert_true(fabs(zen_trainer_topk_keep(&o, 0) - 0.25) < 1e-12);
    double ratio = pow(0.01 / 0.25, 0.1);
    for (long s = 1; s <= 10; s++) {
        double prev = zen_trainer_topk_keep(&o, s - 1), cur = zen_trainer_topk_keep(&o, s);
        assert_true(fabs(cur / prev - ratio) < 1e-9);
    }
    assert_true(zen_trainer_topk_keep(&o, 10) == 0.01);
    assert_true(zen_trainer_topk_keep(&o, 1000) == 0.01);
    assert_true(fabs(zen_trainer_topk_keep(&o, 5) - 0.05) < 1e-12); /* sqrt(0.25 * 0.01) */
    o.topk_start = 0.005;
    assert_true(zen_trainer_topk_keep(&o, 0) == 0.01);
}

/* What each rank sent per step (the dumped "topk" tensor) is ceil(keep(step) x n) entries: the
 * warm-up reaches the wire, not just the schedule function. A few entries may be missing where
 * the residual holds exact zeros (zeros are never sent). */
static void test_warmup_sent_per_step(void **state)
{
    (void)state;
    char dir[] = "/tmp/zen_topkw_XXXXXX";
    assert_non_null(mkdtemp(dir));
    zen_train_options o;
    zen_train_result r;
    tiny_options(&o, 2, 6);
    o.topk = 0.05;
    o.topk_start = 0.5;
    o.topk_warmup = 4;
    o.dump_grads_dir = dir;
    run(&o, &r);
    for (long s = 0; s < o.steps; s++) {
        for (int rank = 0; rank < o.dp; rank++) {
            char path[256];
            assert_int_equal(zen_trace_path(path, sizeof path, dir, (uint32_t)rank, (uint64_t)s),
                             ZEN_OK);
            zen_trace_step ts;
            assert_int_equal(zen_trace_read(path, &ts), ZEN_OK);
            const zen_trace_tensor *t = NULL;
            for (size_t i = 0; i < ts.count; i++)
                if (strcmp(ts.tensors[i].name, "topk") == 0)
                    t = &ts.tensors[i];
            assert_non_null(t);
            size_t k = (size_t)ceil(zen_trainer_topk_keep(&o, s) * (double)t->rows);
            if (rank == 0)
                fprintf(stderr, "step %ld: keep %.4f, k %zu of %llu, sent %llu\n", s,
                        zen_trainer_topk_keep(&o, s), k, (unsigned long long)t->rows,
                        (unsigned long long)t->nnz);
            assert_true(t->nnz <= k);
            assert_true(t->nnz + t->rows / 100 >= k);
            zen_trace_free(&ts);
        }
    }
    zen_train_result_free(&r);
    remove_dir(dir);
}

/* A warm-up from 100% sends everything at step 0, so the loss after that update (step 1's) is
 * the dense run's; plain top-k at 5% moves only 5% of the weights and its step-1 loss differs. */
static void test_warmup_from_dense(void **state)
{
    (void)state;
    zen_train_options o;
    zen_train_result ref, warm, plain;
    tiny_options(&o, 1, 3);
    run(&o, &ref);
    tiny_options(&o, 2, 3);
    o.topk = 0.05;
    run(&o, &plain);
    o.topk_start = 1.0;
    o.topk_warmup = 2;
    run(&o, &warm);
    double dw = fabs((double)warm.losses[1] - (double)ref.losses[1]);
    double dp = fabs((double)plain.losses[1] - (double)ref.losses[1]);
    fprintf(stderr, "step-1 loss: dense %.6f, warm-up from 100%% %.6f, plain top-k %.6f\n",
            (double)ref.losses[1], (double)warm.losses[1], (double)plain.losses[1]);
    assert_true(dw < 1e-4 * (1 + fabs((double)ref.losses[1])));
    assert_true(dp > 1e-3);
    zen_train_result_free(&ref);
    zen_train_result_free(&warm);
    zen_train_result_free(&plain);
}

/* With the embedding synced sparsely, its rows travel in the top-k call (trainer_sync.c,
 * allreduce_joint). Keeping everything, every gradient, the embedding's included, must be the dp
 * average, so each step's loss is the single-rank dense run's; the same with the embedding through
 * the row-wise call of its own (--topk-global keeps the calls apart). */
static void test_joint_embedding(void **state)
{
    (void)state;

    enum {
        STEPS = 4
    };

    zen_train_options o;
    zen_train_result ref, got[2]; /* the joint call, then the separate one */
    tiny_options(&o, 1, STEPS);
    run(&o, &ref);
    for (int global = 0; global < 2; global++) {
        tiny_options(&o, 2, STEPS);
        o.topk = 1.0;
        o.emb_sync = ZEN_EMB_SYNC_SPARSE;
        o.sparse_scheme = ZEN_SPARSE_BALANCED;
        o.topk_global = global;
        run(&o, &got[global]);
        for (int i = 0; i < STEPS; i++)
            assert_true(fabs((double)got[global].losses[i] - (double)ref.losses[i]) <
                        1e-4 * (1 + fabs((double)ref.losses[i])));
        zen_train_result_free(&got[global]);
    }
    zen_train_result_free(&ref);
}

/* --topk-rescale divides g^2 by tau^2, tau the steps a value accumulated: keeping everything,
 * every tau is 1 and the run is the dense one; at 5% it changes the run. */
static void test_rescale(void **state)
{
    (void)state;
    zen_train_options o;
    zen_train_result ref, all, some, plain;
    tiny_options(&o, 1, 4);
    run(&o, &ref);
    tiny_options(&o, 2, 4);
    o.topk = 1.0;
    o.topk_rescale = 1;
    run(&o, &all);
    o.topk = 0.05;
    run(&o, &some);
    o.topk_rescale = 0;
    run(&o, &plain);
    for (int i = 0; i < 4; i++) {
        fprintf(stderr, "step %d: dense %.6f, rescale at 100%% %.6f, at 5%% %.6f, plain %.6f\n", i,
                (double)ref.losses[i], (double)all.losses[i], (double)some.losses[i],
                (double)plain.losses[i]);
        assert_true(fabs((double)all.losses[i] - (double)ref.losses[i]) <
                    1e-4 * (1 + fabs((double)ref.losses[i])));
    }
    assert_true(fabs((double)some.losses[3] - (double)plain.losses[3]) > 1e-4);
    /* the ages are canonical-layout, a tp balance plan permutes AdamW's: refused */
    o.topk_rescale = 1;
    o.tp_opts.balance = ZEN_BALANCE_RESIZE;
    zen_train_result_free(&plain);
    memset(&plain, 0, sizeof plain);
    assert_int_equal(zen_train_run(&o, ds, &plain), ZEN_EINVAL);
    zen_train_result_free(&ref);
    zen_train_result_free(&all);
    zen_train_result_free(&some);
    zen_train_result_free(&plain);
}

/* Momentum correction (with a warm-up) learns; out-of-range values are refused up front. */
static void test_momentum(void **state)
{
    (void)state;
    zen_train_options o;
    zen_train_result r;
    tiny_options(&o, 2, 30);
    o.lr = 1e-2f;
    o.topk = 0.05;
    o.topk_warmup = 10;
    o.topk_momentum = 0.9f;
    run(&o, &r);
    fprintf(stderr, "topk 0.05 momentum 0.9: loss %.3f -> %.3f\n", (double)r.losses[0],
            (double)r.losses[29]);
    assert_true(r.losses[29] < r.losses[0] - 0.5f);
    zen_train_result_free(&r);
    o.topk_momentum = 1.0f;
    memset(&r, 0, sizeof r);
    assert_int_equal(zen_train_run(&o, ds, &r), ZEN_EINVAL);
    assert_non_null(strstr(r.error, "--topk-momentum"));
    zen_train_result_free(&r);
    o.topk_momentum = 0;
    o.topk_start = 0;
    memset(&r, 0, sizeof r);
    assert_int_equal(zen_train_run(&o, ds, &r), ZEN_EINVAL);
    zen_train_result_free(&r);
}

/* bytes_synced of the metrics line of step (1-based) in path; 0 when absent. */
static unsigned long long metrics_bytes(const char *path, long step)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    unsigned long long b = 0;
    char want[32];
    snprintf(want, sizeof want, "{\"step\":%ld,", step);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, want, strlen(want)) == 0) {
            const char *p = strstr(line, "\"bytes_synced\":");
            b = p ? strtoull(p + strlen("\"bytes_synced\":"), NULL, 10) : 0;
        }
    if (f)
        fclose(f);
    return b;
}

/* Step 0 of a warm-up from 100% with --topk-dense-from 1 goes through the dense allreduce: it
 * puts the dense sync's bytes on the wire (not the sparse call's, an index per value: 1.5x at
 * dp 2), and as it sends everything, it is the sparse keep-100% step: every later loss equals the
 * run without the option, so the residual left after it is empty and the embedding was synced.
 * The embedding is synced sparsely (its rows otherwise ride in the top-k call). */
static void test_dense_from(void **state)
{
    (void)state;

    enum {
        STEPS = 6
    };

    char dir[] = "/tmp/zen_topkd_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char mdense[256], mfrom[256], msparse[256];
    snprintf(mdense, sizeof mdense, "%s/dense.jsonl", dir);
    snprintf(mfrom, sizeof mfrom, "%s/from.jsonl", dir);
    snprintf(msparse, sizeof msparse, "%s/sparse.jsonl", dir);
    zen_train_options o;
    zen_train_result dense, from, sparse;
    tiny_options(&o, 2, STEPS);
    o.emb_sync = ZEN_EMB_SYNC_SPARSE;
    o.sparse_scheme = ZEN_SPARSE_BALANCED;
    o.metrics_path = mdense;
    run(&o, &dense);
    o.topk = 0.05;
    o.topk_start = 1.0;
    o.topk_warmup = 3;
    o.metrics_path = msparse;
    run(&o, &sparse);
    o.topk_dense_from = 1.0;
    o.metrics_path = mfrom;
    run(&o, &from);
    assert_true(zen_trainer_topk_dense_step(&o, 0));
    assert_false(zen_trainer_topk_dense_step(&o, 1));
    unsigned long long bd = metrics_bytes(mdense, 1), bf = metrics_bytes(mfrom, 1),
                       bs = metrics_bytes(msparse, 1);
    fprintf(stderr, "step 0 bytes: dense %llu, dense-from %llu, sparse keep 100%% %llu\n", bd, bf,
            bs);
    /* within 5%: the sparse embedding call's control messages vary by a few hundred bytes from
     * run to run (seen: 1.1%); the sparse keep-100% step is 1.5x */
    assert_true(bd > 0 && bf > bd - bd / 20 && bf < bd + bd / 20);
    assert_true(bs > bd + bd / 4);
    unsigned long long b2f = metrics_bytes(mfrom, 2), b2s = metrics_bytes(msparse, 2);
    assert_true(b2f > b2s - b2s / 20 && b2f < b2s + b2s / 20); /* step 1: both sparse, same k */
    for (int i = 0; i < STEPS; i++) {
        fprintf(stderr, "step %d: dense %.6f, dense-from %.6f, sparse %.6f\n", i,
                (double)dense.losses[i], (double)from.losses[i], (double)sparse.losses[i]);
        assert_true(fabs((double)from.losses[i] - (double)sparse.losses[i]) <
                    1e-4 * (1 + fabs((double)sparse.losses[i])));
    }
    assert_true(fabs((double)from.losses[1] - (double)dense.losses[1]) <
                1e-4 * (1 + fabs((double)dense.losses[1])));
    /* past the dense step the run is top-k, not dense */
    assert_true(fabs((double)from.losses[STEPS - 1] - (double)dense.losses[STEPS - 1]) > 1e-4);
    zen_train_result_free(&dense);
    zen_train_result_free(&from);
    zen_train_result_free(&sparse);
    o.topk_dense_from = 1.5;
    memset(&from, 0, sizeof from);
    assert_int_equal(zen_train_run(&o, ds, &from), ZEN_EINVAL);
    zen_train_result_free(&from);
    remove_dir(dir);
}

/* The dense steps are those of the schedule at or above F, only with top-k and F > 0. */
static void test_dense_from_schedule(void **state)
{
    (void)state;
    zen_train_options o;
    zen_train_options_default(&o);
    o.topk_dense_from = 0.3;
    assert_false(zen_trainer_topk_dense_step(&o, 0)); /* no top-k */
    o.topk = 0.05;
    o.topk_start = 1.0;
    o.topk_warmup = 10;
    long dense = 0;
    for (long s = 0; s < 20; s++) {
        int d = zen_trainer_topk_dense_step(&o, s);
        assert_int_equal(d, zen_trainer_topk_keep(&o, s) >= 0.3);
        assert_true(!d || s == dense); /* a prefix */
        dense += d;
    }
    assert_int_equal(dense, 5); /* 0.05^(s/10) >= 0.3 for s <= 4 */
    o.topk_dense_from = 0;
    assert_false(zen_trainer_topk_dense_step(&o, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_schedule),     cmocka_unit_test(test_warmup_sent_per_step),
        cmocka_unit_test(test_warmup_from_dense), cmocka_unit_test(test_rescale),
        cmocka_unit_test(test_momentum),          cmocka_unit_test(test_joint_embedding),
        cmocka_unit_test(test_dense_from),        cmocka_unit_test(test_dense_from_schedule),
    };
    return cmocka_run_group_tests(tests, make_dataset, free_dataset);
}
