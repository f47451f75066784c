/*
 * The balance controller as a pure function on synthetic timings, the per-layer column counts,
 * the straggler list parser and the rotation rule. Expected values are derived in the test from
 * the documented formulas (docs/hetero-tp.md), not copied from the implementation's output.
 */
#include "test_tp_util.h"
#include "tp/tp_internal.h"

static tp_ctl_input input(int n, const double *t, zen_tp_balance mode)
{
    tp_ctl_input in;
    memset(&in, 0, sizeof in);
    in.n = n;
    in.t_ms = t;
    in.balance = mode;
    in.delta = 0.1;
    in.rho_max = 0.5;
    in.hysteresis = 0.05;
    in.bandwidth_Bps = INFINITY;
    in.latency_s = 0;
    in.mig_bytes_per_frac = 1e6;
    in.mig_bytes_per_pair = 1e3;
    in.mig_msgs_per_pair = 10;
    return in;
}

static double migrated(const tp_plan *p, int s)
{
    double m = 0;
    for (int a = 0; a < p->n; a++)
        m += p->mig[s * p->n + a];
    return m;
}

static double received(const tp_plan *p, int a)
{
    double m = 0;
    for (int s = 0; s < p->n; s++)
        m += p->mig[s * p->n + a];
    return m;
}

/* Step time of rank r under plan p: its own local share plus what it computes for others. */
static double rank_time(const tp_plan *p, const double *t, int r)
{
    return t[r] * (p->local[r] + received(p, r));
}

static void test_no_straggler(void **state)
{
    (void)state;
    double t[4] = { 1.0, 1.05, 0.97, 1.02 };
    tp_plan p;
    assert_int_equal(tp_plan_init(&p, 4), ZEN_OK);
    for (int mode = 0; mode < 4; mode++) {
        tp_ctl_input in = input(4, t, (zen_tp_balance)mode);
        tp_decide(&in, NULL, &p);
        assert_true(p.straggler_mask == 0);
        assert_false(tp_plan_is_active(&p));
    }
    tp_plan_free(&p);
}

static void test_detection_and_none(void **state)
{
    (void)state;
    double t[4] = { 1.0, 3.0, 1.0, 1.0 };
    tp_plan p, prev;
    assert_int_equal(tp_plan_init(&p, 4), ZEN_OK);
    assert_int_equal(tp_plan_init(&prev, 4), ZEN_OK);
    tp_ctl_input in = input(4, t, ZEN_BALANCE_NONE);
    tp_decide(&in, NULL, &p);
    assert_true(p.straggler_mask == 2); /* detected, but NONE never acts */
    assert_false(tp_plan_is_active(&p));
    /* 1.08 x median: below 1 + delta, but above 1 + delta/2 for a rank that already was one */
    double t2[4] = { 1.08, 1.0, 1.0, 1.0 };
    in = input(4, t2, ZEN_BALANCE_RESIZE);
    tp_decide(&in, NULL, &p);
    assert_true(p.straggler_mask == 0);
    prev.straggler_mask = 1;
    tp_decide(&in, &prev, &p);
    assert_true(p.straggler_mask == 1);
    /* a rank without a measurement yet: the previous plan is kept as is */
    double t3[4] = { 0.0, 5.0, 1.0, 1.0 };
    prev.local[1] = 0.7;
    prev.prune[1] = 0.3;
    in = input(4, t3, ZEN_BALANCE_RESIZE);
    tp_decide(&in, &prev, &p);
    assert_true(p.straggler_mask == 1 && p.local[1] == 0.7 && p.prune[1] == 0.3);
    tp_plan_free(&p);
    tp_plan_free(&prev);
}

static void test_resize(void **state)
{
    (void)state;
    tp_plan p;
    assert_int_equal(tp_plan_init(&p, 4), ZEN_OK);
    const double slow[] = { 1.5, 2.0, 4.0, 8.0 };
    for (size_t i = 0; i < 4; i++) {
        double t[4] = { 1.0, 1.0, slow[i], 0.9 };
        tp_ctl_input in = input(4, t, ZEN_BALANCE_RESIZE);
        tp_decide(&in, NULL, &p);
        assert_true(p.straggler_mask == 4);
        double tstar = 1.0; /* slowest non-straggler */
        double f = 1.0 - tstar / slow[i];
        double want = f < 0.5 ? f : 0.5;
        assert_float_equal(p.prune[2], want, 1e-12);
        assert_float_equal(p.local[2], 1.0 - want, 1e-12);
        assert_float_equal(migrated(&p, 2), 0.0, 0.0);
        /* per layer: keep = clamp(ceil(K t* / t_s), ceil(K (1 - rho_max)), K) */
        const int Ks[] = { 1, 7, 10, 64, 1000 };
        for (size_t k = 0; k < 5; k++) {
            int K = Ks[k], cnt[4];
            tp_counts c = { 0, 0, 0, cnt };
            tp_plan_counts(&p, 2, K, &c);
            int keep = (int)ceil(K * tstar / slow[i] - 1e-9);
            int floor_keep = (int)ceil(K * 0.5 - 1e-9);
            keep = keep < floor_keep ? floor_keep : keep > K ? K : keep;
            assert_int_equal(c.local, keep);
            assert_int_equal(c.prune, K - keep);
            assert_int_equal(c.mig_total, 0);
            tp_plan_counts(&p, 0, K, &c);
            assert_int_equal(c.local, K);
        }
    }
    tp_plan_free(&p);
}

/* Lossless migration balances every participating rank at the same time T = n / sum(1/t). */
static void check_balanced_migration(const double *t, int n, uint64_t want_mask)
{
    tp_plan p;
    assert_int_equal(tp_plan_init(&p, n), ZEN_OK);
    tp_ctl_input in = input(n, t, ZEN_BALANCE_MIGRATE);
    tp_decide(&in, NULL, &p);
    assert_true(p.straggler_mask == want_mask);
    double speed = 0;
    for (int r = 0; r < n; r++)
        speed += 1.0 / t[r];
    double T = n / speed;
    double total = 0;
    for (int r = 0; r < n; r++) {
        assert_float_equal(p.prune[r], 0.0, 0.0);
        assert_float_equal(rank_time(&p, t, r), T, 1e-9);
        total += p.local[r] + received(&p, r);
        if ((want_mask >> r) & 1)
            assert_float_equal(p.local[r] + migrated(&p, r), 1.0, 1e-12);
        else
            assert_float_equal(migrated(&p, r), 0.0, 0.0);
    }
    assert_float_equal(total, n, 1e-9); /* no work lost */
    tp_plan_free(&p);
}

static void test_migrate(void **state)
{
    (void)state;
    double a[4] = { 8, 1, 1, 1 };
    check_balanced_migration(a, 4, 1);
    double b[4] = { 8, 4, 1, 1 };
    check_balanced_migration(b, 4, 3);
    double c[2] = { 1, 4 };
    check_balanced_migration(c, 2, 2);
    double d[8] = { 1, 1, 1, 1, 1.2, 1, 1, 6 }; /* unequal helpers: shares by spare speed */
    check_balanced_migration(d, 8, 0x90);
}

static void test_semi(void **state)
{
    (void)state;
    tp_plan p;
    assert_int_equal(tp_plan_init(&p, 4), ZEN_OK);
    /* light straggler: resizing alone balances, no migration */
    double light[4] = { 1.6, 1, 1, 1 };
    tp_ctl_input in = input(4, light, ZEN_BALANCE_SEMI);
    tp_decide(&in, NULL, &p);
    assert_float_equal(p.prune[0], 1 - 1 / 1.6, 1e-12);
    assert_float_equal(migrated(&p, 0), 0.0, 0.0);
    /* heavy straggler, free network: prune the cap, migrate the rest, balanced at
     * T = ((1 - rho) + 3) / (1/8 + 3) */
    double heavy[4] = { 8, 1, 1, 1 };
    in = input(4, heavy, ZEN_BALANCE_SEMI);
    tp_decide(&in, NULL, &p);
    double T = (0.5 + 3.0) / (1.0 / 8 + 3.0);
    assert_float_equal(p.prune[0], 0.5, 1e-12);
    assert_float_equal(p.local[0] * 8, T, 1e-9);
    assert_float_equal(p.local[0] + migrated(&p, 0) + p.prune[0], 1.0, 1e-12);
    for (int a = 1; a < 4; a++)
        assert_float_equal(rank_time(&p, heavy, a), T, 1e-9);
    /* cost model: migrating pays iff max(T, t*) + cost < t_s (1 - rho) = 4 */
    double cost_ok = tp_migration_cost_ms(&in, &p);
    assert_true(cost_ok == 0.0);
    in.bandwidth_Bps = 1e6; /* bytes 0.375e6 + 3e3 -> ~378 ms: far too slow */
    tp_decide(&in, NULL, &p);
    assert_float_equal(p.prune[0], 0.5, 1e-12);
    assert_float_equal(migrated(&p, 0), 0.0, 0.0);
    /* a cost just below the saving still migrates: saving 4 - T; choose latency accordingly */
    in.bandwidth_Bps = INFINITY;
    in.latency_s = (4.0 - T) * 0.9 / 1e3 / (3 * in.mig_msgs_per_pair);
    tp_decide(&in, NULL, &p);
    assert_true(migrated(&p, 0) > 0);
    in.latency_s = (4.0 - T) * 1.1 / 1e3 / (3 * in.mig_msgs_per_pair);
    tp_decide(&in, NULL, &p);
    assert_float_equal(migrated(&p, 0), 0.0, 0.0);
    tp_plan_free(&p);
}

static void test_hysteresis(void **state)
{
    (void)state;
    tp_plan p, prev;
    assert_int_equal(tp_plan_init(&p, 4), ZEN_OK);
    assert_int_equal(tp_plan_init(&prev, 4), ZEN_OK);
    double t[4] = { 1.5, 1, 1, 1 };
    tp_ctl_input in = input(4, t, ZEN_BALANCE_RESIZE);
    tp_decide(&in, NULL, &prev);
    double t2[4] = { 1.55, 1, 1, 1 }; /* prune 0.333 -> 0.355: within 0.05, keep */
    in.t_ms = t2;
    tp_decide(&in, &prev, &p);
    assert_true(p.prune[0] == prev.prune[0]);
    double t3[4] = { 2.0, 1, 1, 1 }; /* prune 0.5: moves */
    in.t_ms = t3;
    tp_decide(&in, &prev, &p);
    assert_float_equal(p.prune[0], 0.5, 1e-12);
    tp_plan_free(&p);
    tp_plan_free(&prev);
}

static void test_counts_split(void **state)
{
    (void)state;
    tp_plan p;
    assert_int_equal(tp_plan_init(&p, 4), ZEN_OK);
    p.local[0] = 0.2;
    p.prune[0] = 0.1;
    p.mig[1] = 0.5;
    p.mig[2] = 0.1;
    p.mig[3] = 0.1;
    for (int K = 1; K <= 50; K++) {
        int cnt[4];
        tp_counts c = { 0, 0, 0, cnt };
        tp_plan_counts(&p, 0, K, &c);
        assert_int_equal(c.local + c.prune + c.mig_total, K);
        assert_int_equal(cnt[1] + cnt[2] + cnt[3], c.mig_total);
        assert_int_equal(cnt[0], 0);
        assert_int_equal(c.prune, K - (int)ceil(K * 0.9 - 1e-9));
        int want_mig = (int)floor(K * 0.7 + 0.5);
        assert_int_equal(c.mig_total, want_mig < K - c.prune ? want_mig : K - c.prune);
        assert_true(fabs(cnt[1] - 0.5 / 0.7 * c.mig_total) < 1.0);
    }
    tp_plan_free(&p);
}

static void test_parse_slow(void **state)
{
    (void)state;
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    assert_int_equal(zen_tp_parse_slow("1:4,3:2.5", 4, &o), ZEN_OK);
    assert_int_equal(o.nslow, 2);
    assert_int_equal(o.slow[0].rank, 1);
    assert_float_equal(o.slow[0].factor, 4.0, 0);
    assert_int_equal(o.slow[1].rank, 3);
    assert_float_equal(o.slow[1].factor, 2.5, 0);
    assert_int_equal(zen_tp_parse_slow("profile:8,6,4,2,1,1,1,1", 4, &o), ZEN_OK);
    assert_int_equal(o.nslow, 2);
    assert_true(o.slow[0].rank == 0 && o.slow[0].factor == 8 && o.slow[1].rank == 1 &&
                o.slow[1].factor == 4);
    assert_int_equal(zen_tp_parse_slow("profile:8,6,4,2,1,1,1,1", 8, &o), ZEN_OK);
    assert_int_equal(o.nslow, 4);
    assert_true(o.slow[3].rank == 3 && o.slow[3].factor == 2);
    assert_int_equal(zen_tp_parse_slow("profile:8,6,4,2,1,1,1,1", 2, &o), ZEN_OK);
    assert_int_equal(o.nslow, 1);
    const char *bad[] = { "4:2", "1:0.5",   "1-2",      "1:2,",        ":2",  "1:",
                          "x:2", "1:2;2:3", "profile:", "profile:1,a", "-1:2" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.nslow = 1;
        o.slow[0].rank = 2;
        assert_int_equal(zen_tp_parse_slow(bad[i], 4, &o), ZEN_EINVAL);
        assert_int_equal(o.nslow, 1); /* unchanged */
    }
    assert_int_equal(zen_tp_parse_slow("none", 4, &o), ZEN_OK);
    assert_int_equal(o.nslow, 0);
    zen_tp_balance b;
    zen_tp_priority pr;
    zen_tp_slow_mode m;
    assert_int_equal(zen_tp_parse_balance("semi", &b), ZEN_OK);
    assert_int_equal(b, ZEN_BALANCE_SEMI);
    assert_int_equal(zen_tp_parse_balance("fast", &b), ZEN_EINVAL);
    assert_int_equal(zen_tp_parse_priority("prefix", &pr), ZEN_OK);
    assert_int_equal(pr, ZEN_TP_PRIORITY_PREFIX);
    assert_int_equal(zen_tp_parse_slow_mode("spin", &m), ZEN_OK);
    assert_int_equal(m, ZEN_TP_SLOW_SPIN);
    assert_string_equal(zen_tp_balance_name(ZEN_BALANCE_MIGRATE), "migrate");
}

static void test_rotation(void **state)
{
    (void)state;
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    assert_int_equal(zen_tp_parse_slow("1:4", 4, &o), ZEN_OK);
    o.slow_rotate = 3;
    for (uint64_t step = 0; step < 30; step++) {
        int who = (int)((1 + step / 3) % 4);
        for (int r = 0; r < 4; r++)
            assert_float_equal(tp_slow_factor(&o, 4, r, step), r == who ? 4.0 : 1.0, 0);
    }
    o.slow_rotate = 0;
    assert_float_equal(tp_slow_factor(&o, 4, 1, 1000), 4.0, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_straggler), cmocka_unit_test(test_detection_and_none),
        cmocka_unit_test(test_resize),       cmocka_unit_test(test_migrate),
        cmocka_unit_test(test_semi),         cmocka_unit_test(test_hysteresis),
        cmocka_unit_test(test_counts_split), cmocka_unit_test(test_parse_slow),
        cmocka_unit_test(test_rotation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
