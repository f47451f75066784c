/*
 * The sparse scheme registry (src/sparse/scheme/registry.c): every value of zen_sparse_scheme but
 * AUTO has one row with a run and a cost function, names round-trip through the public parser,
 * ties are broken in one order, and no registered scheme is free: for a tensor that has to move,
 * each row's cost function charges it bytes or latency and a positive time. A scheme whose file
 * lacks its cost function does not even link (registry.h); this test catches a row whose cost
 * was wired to NULL or to a function that charges nothing.
 */
#include <math.h>
#include <string.h>

#include <zen/sparse.h>

#include "sparse/plan/predict.h"
#include "sparse/scheme/registry.h"
#include "testutil.h"

static void test_every_row_complete(void **state)
{
    (void)state;
    int prefer_seen[ZEN_SPARSE_SCHEME_COUNT] = { 0 };
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
        const zen_sparse_scheme_desc *row = &zen__sparse_schemes[s];
        assert_int_equal(row->id, s);
        assert_non_null(row->name);
        if (s == ZEN_SPARSE_AUTO) {
            assert_null(zen__sparse_scheme_row(ZEN_SPARSE_AUTO));
            continue;
        }
        if (!row->run || !row->cost)
            fail_msg("scheme %s (%d) has no %s function in the registry", row->name, s,
                     row->run ? "cost" : "run");
        assert_ptr_equal(zen__sparse_scheme_row((zen_sparse_scheme)s), row);
        assert_in_range(row->prefer, 0, ZEN_SPARSE_SCHEME_COUNT - 2);
        assert_int_equal(prefer_seen[row->prefer]++, 0); /* one order for ties */
        zen_sparse_scheme back = ZEN_SPARSE_AUTO;
        assert_int_equal(zen_sparse_scheme_parse(row->name, &back), ZEN_OK);
        assert_int_equal(back, s);
        assert_string_equal(zen_sparse_scheme_name((zen_sparse_scheme)s), row->name);
    }
    assert_null(zen__sparse_scheme_row(ZEN_SPARSE_SCHEME_COUNT));
    assert_string_equal(zen_sparse_scheme_name(ZEN_SPARSE_SCHEME_COUNT), "?");
}

/* Each row's cost for 8 ranks, 1M rows of width 16 at 1% density, dense and sparse output. */
static void test_every_cost_charges(void **state)
{
    (void)state;
    zen_net_model net = { .bytes_per_s = 1e9, .latency_s = 1e-5 };
    zen_sparse_cpu_model_default(&net.cpu);
    for (int dense = 0; dense <= 1; dense++) {
        zen_sparse_profile p;
        zen__sparse_profile_model(&p, 8, 0.01, ZEN_OVERLAP_RANDOM);
        p.dense_output = dense;
        zen_cost_terms t;
        assert_int_equal(zen__cost_terms_init(&t, 8, 1 << 20, 16, &p, &net, 256), 1);
        double pred[ZEN_SPARSE_SCHEME_COUNT];
        zen__sparse_predict(8, 1 << 20, 16, &p, &net, 256, pred);
        for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
            const zen_sparse_scheme_desc *row = zen__sparse_scheme_row((zen_sparse_scheme)s);
            if (!row || !row->cost)
                continue; /* AUTO; a missing cost fails the test above */
            zen_cost_parts part = row->cost(&t);
            if (!(part.bytes > 0 && part.lat_s > 0 && part.msgs > 0 && part.cpu_ns >= 0))
                fail_msg("scheme %s: cost parts lat %g bytes %g cpu %g msgs %g", row->name,
                         part.lat_s, part.bytes, part.cpu_ns, part.msgs);
            double secs = zen__cost_seconds(&part, &t, NULL);
            assert_true(secs > 0 && isfinite(secs));
            assert_true(pred[s] == secs); /* the planner sums exactly the row's parts */
        }
        assert_true(pred[ZEN_SPARSE_AUTO] == pred[zen__sparse_cheapest(pred)]);
    }
}

/* Ties go to the lower prefer: BALANCED before everything, DENSE before ALLGATHER. */
static void test_ties(void **state)
{
    (void)state;
    double pred[ZEN_SPARSE_SCHEME_COUNT];
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        pred[s] = 1.0;
    assert_int_equal(zen__sparse_cheapest(pred), ZEN_SPARSE_BALANCED);
    pred[ZEN_SPARSE_BALANCED] = pred[ZEN_SPARSE_HIERARCHICAL] = 2.0;
    assert_int_equal(zen__sparse_cheapest(pred), ZEN_SPARSE_DENSE);
    pred[ZEN_SPARSE_BLOCK] = 0.5;
    assert_int_equal(zen__sparse_cheapest(pred), ZEN_SPARSE_BLOCK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_row_complete),
        cmocka_unit_test(test_every_cost_charges),
        cmocka_unit_test(test_ties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
