/*
 * AUTO's online correction (src/sparse/model/auto_tune.c): a wrong model cannot lock AUTO onto a slow
 * scheme, exploration stays within its budget, and every rank makes the same decisions.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sparse/model/auto_tune.h"
#include "testutil.h"

/* Drive the decision against true times: true_s[s] per call (with a +-4% deterministic wobble),
 * the model's pred[s]. Returns the fastest scheme's share of the last `tail` choices; *extra gets
 * the time spent beyond always running the fastest, as a fraction of the total. */
static double drive(const double *true_s, const double *pred, int calls, int tail,
                    const zen_auto_tune_params *tp, double *extra, int *explorations)
{
    zen_auto_tune t;
    zen__auto_tune_init(&t);
    zen_sparse_scheme fastest = ZEN_SPARSE_BALANCED;
    for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        if (true_s[s] < true_s[fastest])
            fastest = (zen_sparse_scheme)s;
    uint64_t rng = 5;
    double total = 0, ideal = 0;
    int hits = 0;
    *explorations = 0;
    for (int call = 0; call < calls; call++) {
        int explored;
        zen_sparse_scheme s = zen__auto_tune_choose(&t, tp, pred, &explored, NULL);
        *explorations += explored;
        double wobble = 0.96 + 0.08 * (double)(zt_rand(&rng) % 1000) / 1000.0;
        double took = true_s[s] * wobble;
        zen__auto_tune_observe(&t, tp, took);
        total += took;
        ideal += true_s[fastest] * wobble;
        if (call >= calls - tail && !explored)
            hits += s == fastest;
    }
    *extra = (total - ideal) / total;
    return (double)hits;
}

static void set_true(double *a, double bal, double hier, double ag, double block, double ps,
                     double dense)
{
    memset(a, 0, ZEN_SPARSE_SCHEME_COUNT * sizeof *a);
    a[ZEN_SPARSE_BALANCED] = bal;
    a[ZEN_SPARSE_HIERARCHICAL] = hier;
    a[ZEN_SPARSE_ALLGATHER] = ag;
    a[ZEN_SPARSE_BLOCK] = block;
    a[ZEN_SPARSE_PS] = ps;
    a[ZEN_SPARSE_DENSE] = dense;
}

/* The model thinks HIERARCHICAL is 8x faster than it is (the 3-9x): one call corrects it.
 */
static void test_optimistic_model_corrected(void **state)
{
    (void)state;
    double t[ZEN_SPARSE_SCHEME_COUNT], m[ZEN_SPARSE_SCHEME_COUNT];
    set_true(t, 7.3, 19.4, 30, 40, 25, 60);
    set_true(m, 7.3, 19.4 / 8, 30, 40, 25, 60);
    zen_auto_tune_params tp = { 0.5, 20, 0.05 };
    double extra;
    int ex;
    double hits = drive(t, m, 200, 100, &tp, &extra, &ex);
    assert_true(hits >= 100 - ex); /* every non-exploring call of the tail ran BALANCED */
    assert_true(extra < 0.05 + 12.1 / (200 * 7.3)); /* the one wrong call plus the budget */
}

/* The model thinks the fastest scheme is 3x slower than it is: only exploration finds it, and it
 * does within the budget. */
static void test_pessimistic_model_explored(void **state)
{
    (void)state;
    double t[ZEN_SPARSE_SCHEME_COUNT], m[ZEN_SPARSE_SCHEME_COUNT];
    set_true(t, 10, 15, 40, 50, 30, 80);
    set_true(m, 30, 15, 40, 50, 30, 80);
    zen_auto_tune_params tp = { 0.5, 20, 0.05 };
    double extra;
    int ex;
    double hits = drive(t, m, 400, 200, &tp, &extra, &ex);
    assert_true(ex >= 1);
    assert_true(hits >= 200 - ex);
    /* without exploration it would stay on HIERARCHICAL, 1.5x the fastest */
    zen_auto_tune_params off = { 0.5, 0, 0.05 };
    double extra_off;
    int ex_off;
    assert_true(drive(t, m, 400, 200, &off, &extra_off, &ex_off) == 0);
    assert_int_equal(ex_off, 0);
    assert_true(extra < extra_off);
}

/* The measured time explorations add never exceeds the budget (plus one exploration's expected
 * extra), even when every runner-up is much slower than the model says. */
static void test_exploration_budget(void **state)
{
    (void)state;
    const double budgets[] = { 0.01, 0.05, 0.2 };
    for (int b = 0; b < 3; b++) {
        zen_auto_tune_params tp = { 0.5, 5, budgets[b] };
        zen_auto_tune t;
        zen__auto_tune_init(&t);
        double pred[ZEN_SPARSE_SCHEME_COUNT] = { 0 };
        for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++)
            pred[s] = 1.0 + 0.01 * s; /* all look alike to the model */
        double total = 0, explore_extra = 0;
        for (int call = 0; call < 1000; call++) {
            int explored;
            double c[ZEN_SPARSE_SCHEME_COUNT];
            zen_sparse_scheme s = zen__auto_tune_choose(&t, &tp, pred, &explored, c);
            double took = s == ZEN_SPARSE_BALANCED ? 1.0 : 4.0; /* the others are 4x */
            if (explored) {
                double best = 1e300;
                for (int k = 1; k < ZEN_SPARSE_SCHEME_COUNT; k++)
                    best = c[k] < best ? c[k] : best;
                explore_extra += took - best;
            }
            zen__auto_tune_observe(&t, &tp, took);
            total += took;
        }
        assert_true(explore_extra <= budgets[b] * total + 4.0);
    }
}

/* ---- on a communicator: a deliberately wrong model constant, identical decisions ---- */

#define ROWS  400000
#define NNZ   400
#define CALLS 12

static zen_status wrong_model_rank(zen_comm *comm, void *arg)
{
    (void)arg;
    int n = zen_comm_size(comm), r = zen_comm_rank(comm);
    uint32_t *idx = malloc(NNZ * sizeof *idx);
    float *val = malloc(NNZ * sizeof *val), *out = malloc(ROWS * sizeof *out);
    int *all = malloc((size_t)n * sizeof *all);
    for (size_t i = 0; i < NNZ; i++) {
        idx[i] = (uint32_t)((i * 997 + (size_t)r * 13) % ROWS);
        val[i] = 1.0f;
    }
    zen_sparse_tensor t = { ROWS, 1, NNZ, ZEN_INDEX_U32, idx, ZEN_F32, val };
    zen_sparse_options opts = ZEN_SPARSE_OPTIONS_INIT;
    opts.key = "auto-tune-wrong-model";
    zen_status st = ZEN_OK;
    for (int call = 0; call < CALLS && st == ZEN_OK; call++) {
        zen_sparse_stats stats;
        st = zen_sparse_allreduce_dense(comm, &t, out, &opts, &stats);
        ZT_CHECK(comm, st == ZEN_OK);
        double sum = 0;
        for (size_t i = 0; i < ROWS; i++)
            sum += out[i];
        ZT_CHECK(comm, sum == (double)n * NNZ); /* every value is 1: the sum is exact */
        int mine = (int)stats.scheme;
        ZT_CHECK(comm, zen_allgather(comm, &mine, all, 1, ZEN_I32) == ZEN_OK);
        for (int k = 0; k < n; k++)
            ZT_CHECK(comm, all[k] == mine); /* every rank made the same decision */
        /* the model says DENSE is 10^4 x cheaper than it is: the first call believes it, the
         * measurement corrects it, and DENSE never runs again */
        if (call == 0)
            ZT_CHECK(comm, stats.scheme == ZEN_SPARSE_DENSE);
        else
            ZT_CHECK(comm, stats.scheme != ZEN_SPARSE_DENSE);
    }
    free(idx);
    free(val);
    free(out);
    free(all);
    return st;
}

static void test_wrong_model_constant(void **state)
{
    (void)state;
    setenv("ZEN_SPARSE_MODEL_BIAS", "dense=0.0001", 1);
    zt_run_inproc(4, wrong_model_rank, NULL);
    zt_run_inproc(3, wrong_model_rank, NULL);
    unsetenv("ZEN_SPARSE_MODEL_BIAS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optimistic_model_corrected),
        cmocka_unit_test(test_pessimistic_model_explored),
        cmocka_unit_test(test_exploration_budget),
        cmocka_unit_test(test_wrong_model_constant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
