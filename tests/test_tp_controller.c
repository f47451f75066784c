/*
 * The balance controller as a pure function on synthetic timings, the per-layer column counts,
 * the straggler list parser and the rotation rule. Expected values are derived in the test from
 * the documented formulas (docs/hetero-tp.md), not copied from the implementation's output.
 */
#include "test_tp_util.h"
#include "tp/tp_internal.h"
#include "tp_emulation.h"

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
    in.mig_out_per_frac = 6e5;
    in.mig_in_per_frac = 4e5;
    in.mig_out_per_pair = 1e3;
    in.mig_in_per_pair = 5e2;
    in.mig_rounds = 10;
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
    assert_int_equal(zen__tp_plan_init(&p, 4), ZEN_OK);
    for (int mode = 0; mode < 4; mode++) {
        tp_ctl_input in = input(4, t, (zen_tp_balance)mode);
        zen__tp_decide(&in, NULL, &p);
        assert_true(p.straggler_mask == 0);
        assert_false(zen__tp_plan_is_active(&p));
    }
    zen__tp_plan_free(&p);
}

static void test_detection_and_none(void **state)
{
    (void)state;
    double t[4] = { 1.0, 3.0, 1.0, 1.0 };
    tp_plan p, prev;
    assert_int_equal(zen__tp_plan_init(&p, 4), ZEN_OK);
    assert_int_equal(zen__tp_plan_init(&prev, 4), ZEN_OK);
    tp_ctl_input in = input(4, t, ZEN_BALANCE_NONE);
    zen__tp_decide(&in, NULL, &p);
    assert_true(p.straggler_mask == 2); /* detected, but NONE never acts */
    assert_false(zen__tp_plan_is_active(&p));
    /* 1.08 x median: below 1 + delta, but above 1 + delta/2 for a rank that already was one */
    double t2[4] = { 1.08, 1.0, 1.0, 1.0 };
    in = input(4, t2, ZEN_BALANCE_RESIZE);
    zen__tp_decide(&in, NULL, &p);
    assert_true(p.straggler_mask == 0);
    prev.straggler_mask = 1;
    zen__tp_decide(&in, &prev, &p);
    assert_true(p.straggler_mask == 1);
    /* a rank without a measurement yet: the previous plan is kept as is */
    double t3[4] = { 0.0, 5.0, 1.0, 1.0 };
    prev.local[1] = 0.7;
    prev.prune[1] = 0.3;
    in = input(4, t3, ZEN_BALANCE_RESIZE);
    zen__tp_decide(&in, &prev, &p);
    assert_true(p.straggler_mask == 1 && p.local[1] == 0.7 && p.prune[1] == 0.3);
    zen__tp_plan_free(&p);
    zen__tp_plan_free(&prev);
}

static void test_resize(void **state)
{
    (void)state;
    tp_plan p;
    assert_int_equal(zen__tp_plan_init(&p, 4), ZEN_OK);
    const double slow[] = { 1.5, 2.0, 4.0, 8.0 };
    for (size_t i = 0; i < 4; i++) {
        double t[4] = { 1.0, 1.0, slow[i], 0.9 };
        tp_ctl_input in = input(4, t, ZEN_BALANCE_RESIZE);
        zen__tp_decide(&in, NULL, &p);
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
            zen__tp_plan_counts(&p, 2, K, &c);
            int keep = (int)ceil(K * tstar / slow[i] - 1e-9);
            int floor_keep = (int)ceil(K * 0.5 - 1e-9);
            keep = keep < floor_keep ? floor_keep : keep > K ? K : keep;
            assert_int_equal(c.local, keep);
            assert_int_equal(c.prune, K - keep);
            assert_int_equal(c.mig_total, 0);
            zen__tp_plan_counts(&p, 0, K, &c);
            assert_int_equal(c.local, K);
        }
    }
    zen__tp_plan_free(&p);
}

/* Lossless migration balances every participating rank at the same time T = n / sum(1/t). */
static void check_balanced_migration(const double *t, int n, uint64_t want_mask)
{
    tp_plan p;
    assert_int_equal(zen__tp_plan_init(&p, n), ZEN_OK);
    tp_ctl_input in = input(n, t, ZEN_BALANCE_MIGRATE);
    zen__tp_decide(&in, NULL, &p);
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
    zen__tp_plan_free(&p);
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
    assert_int_equal(zen__tp_plan_init(&p, 4), ZEN_OK);
    /* light straggler: resizing alone balances, no migration */
    double light[4] = { 1.6, 1, 1, 1 };
    tp_ctl_input in = input(4, light, ZEN_BALANCE_SEMI);
    zen__tp_decide(&in, NULL, &p);
    assert_float_equal(p.prune[0], 1 - 1 / 1.6, 1e-12);
    assert_float_equal(migrated(&p, 0), 0.0, 0.0);
    /* heavy straggler, free network: prune the cap, migrate the rest, balanced at
     * T = ((1 - rho) + 3) / (1/8 + 3) */
    double heavy[4] = { 8, 1, 1, 1 };
    in = input(4, heavy, ZEN_BALANCE_SEMI);
    zen__tp_decide(&in, NULL, &p);
    double T = (0.5 + 3.0) / (1.0 / 8 + 3.0);
    assert_float_equal(p.prune[0], 0.5, 1e-12);
    assert_float_equal(p.local[0] * 8, T, 1e-9);
    assert_float_equal(p.local[0] + migrated(&p, 0) + p.prune[0], 1.0, 1e-12);
    for (int a = 1; a < 4; a++)
        assert_float_equal(rank_time(&p, heavy, a), T, 1e-9);
    /* cost model: migrating pays iff max(T, t*) + cost < t_s (1 - rho) = 4 */
    double cost_ok = zen__tp_migration_cost_ms(&in, &p);
    assert_true(cost_ok == 0.0);
    in.bandwidth_Bps = 1e6; /* source sends 0.36 x 6e5 + 3e3 bytes: ~219 ms, far too slow */
    zen__tp_decide(&in, NULL, &p);
    assert_float_equal(p.prune[0], 0.5, 1e-12);
    assert_float_equal(migrated(&p, 0), 0.0, 0.0);
    /* a cost just below the saving still migrates: saving 4 - T; latency is paid per round */
    in.bandwidth_Bps = INFINITY;
    in.latency_s = (4.0 - T) * 0.9 / 1e3 / in.mig_rounds;
    zen__tp_decide(&in, NULL, &p);
    assert_true(migrated(&p, 0) > 0);
    in.latency_s = (4.0 - T) * 1.1 / 1e3 / in.mig_rounds;
    zen__tp_decide(&in, NULL, &p);
    assert_float_equal(migrated(&p, 0), 0.0, 0.0);
    zen__tp_plan_free(&p);
}

/* A straggler slow from outside (its time raised by the whole-step detector, its own GEMM times
 * under 2 t*, so that they alone would be balanced by resizing) is resized to the cap by SEMI and
 * never migrates; the same raised time with GEMM times that slow migrates. */
static void test_semi_outside_resizes_only(void **state)
{
    (void)state;
    double raised[4] = { 8, 1, 1, 0.98 };
    double gemm_outside[4] = { 1.8, 1, 1, 0.98 }, gemm_slow[4] = { 8, 1, 1, 0.98 };
    tp_plan p;
    assert_int_equal(zen__tp_plan_init(&p, 4), ZEN_OK);
    tp_ctl_input in = input(4, raised, ZEN_BALANCE_SEMI);
    in.gemm_ms = gemm_slow;
    zen__tp_decide(&in, NULL, &p);
    assert_true(migrated(&p, 0) > 0); /* free network: a GEMM straggler migrates */
    in.gemm_ms = gemm_outside;
    zen__tp_decide(&in, NULL, &p);
    assert_float_equal(migrated(&p, 0), 0.0, 0.0);
    assert_float_equal(p.prune[0], 0.5, 1e-12); /* at the cap: the raised time needs more */
    assert_int_equal(p.straggler_mask, 1);
    zen__tp_plan_free(&p);
}

static void test_hysteresis(void **state)
{
    (void)state;
    tp_plan p, prev;
    assert_int_equal(zen__tp_plan_init(&p, 4), ZEN_OK);
    assert_int_equal(zen__tp_plan_init(&prev, 4), ZEN_OK);
    double t[4] = { 1.5, 1, 1, 1 };
    tp_ctl_input in = input(4, t, ZEN_BALANCE_RESIZE);
    zen__tp_decide(&in, NULL, &prev);
    double t2[4] = { 1.55, 1, 1, 1 }; /* prune 0.333 -> 0.355: within 0.05, keep */
    in.t_ms = t2;
    zen__tp_decide(&in, &prev, &p);
    assert_true(p.prune[0] == prev.prune[0]);
    double t3[4] = { 2.0, 1, 1, 1 }; /* prune 0.5: moves */
    in.t_ms = t3;
    zen__tp_decide(&in, &prev, &p);
    assert_float_equal(p.prune[0], 0.5, 1e-12);
    zen__tp_plan_free(&p);
    zen__tp_plan_free(&prev);
}

static void test_counts_split(void **state)
{
    (void)state;
    tp_plan p;
    assert_int_equal(zen__tp_plan_init(&p, 4), ZEN_OK);
    p.local[0] = 0.2;
    p.prune[0] = 0.1;
    p.mig[1] = 0.5;
    p.mig[2] = 0.1;
    p.mig[3] = 0.1;
    for (int K = 1; K <= 50; K++) {
        int cnt[4];
        tp_counts c = { 0, 0, 0, cnt };
        zen__tp_plan_counts(&p, 0, K, &c);
        assert_int_equal(c.local + c.prune + c.mig_total, K);
        assert_int_equal(cnt[1] + cnt[2] + cnt[3], c.mig_total);
        assert_int_equal(cnt[0], 0);
        assert_int_equal(c.prune, K - (int)ceil(K * 0.9 - 1e-9));
        int want_mig = (int)floor(K * 0.7 + 0.5);
        assert_int_equal(c.mig_total, want_mig < K - c.prune ? want_mig : K - c.prune);
        assert_true(fabs(cnt[1] - 0.5 / 0.7 * c.mig_total) < 1.0);
    }
    zen__tp_plan_free(&p);
}

static void test_parse_slow(void **state)
{
    (void)state;
    zen_tp_emulation o = ZEN_TP_EMULATION_INIT;
    assert_int_equal(zen_cli_tp_parse_slow("1:4,3:2.5", 4, &o), ZEN_OK);
    assert_int_equal(o.nslow, 2);
    assert_int_equal(o.slow[0].rank, 1);
    assert_float_equal(o.slow[0].factor, 4.0, 0);
    assert_int_equal(o.slow[1].rank, 3);
    assert_float_equal(o.slow[1].factor, 2.5, 0);
    assert_int_equal(zen_cli_tp_parse_slow("profile:8,6,4,2,1,1,1,1", 4, &o), ZEN_OK);
    assert_int_equal(o.nslow, 2);
    assert_true(o.slow[0].rank == 0 && o.slow[0].factor == 8 && o.slow[1].rank == 1 &&
                o.slow[1].factor == 4);
    assert_int_equal(zen_cli_tp_parse_slow("profile:8,6,4,2,1,1,1,1", 8, &o), ZEN_OK);
    assert_int_equal(o.nslow, 4);
    assert_true(o.slow[3].rank == 3 && o.slow[3].factor == 2);
    assert_int_equal(zen_cli_tp_parse_slow("profile:8,6,4,2,1,1,1,1", 2, &o), ZEN_OK);
    assert_int_equal(o.nslow, 1);
    const char *bad[] = { "4:2", "1:0.5",   "1-2",      "1:2,",        ":2",  "1:",
                          "x:2", "1:2;2:3", "profile:", "profile:1,a", "-1:2" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.nslow = 1;
        o.slow[0].rank = 2;
        assert_int_equal(zen_cli_tp_parse_slow(bad[i], 4, &o), ZEN_EINVAL);
        assert_int_equal(o.nslow, 1); /* unchanged */
    }
    assert_int_equal(zen_cli_tp_parse_slow("none", 4, &o), ZEN_OK);
    assert_int_equal(o.nslow, 0);
    zen_tp_balance b;
    zen_tp_priority pr;
    zen_tp_slow_mode m;
    assert_int_equal(zen_cli_tp_parse_balance("semi", &b), ZEN_OK);
    assert_int_equal(b, ZEN_BALANCE_SEMI);
    assert_int_equal(zen_cli_tp_parse_balance("fast", &b), ZEN_EINVAL);
    assert_int_equal(zen__tp_parse_priority("prefix", &pr), ZEN_OK);
    assert_int_equal(pr, ZEN_TP_PRIORITY_PREFIX);
    assert_int_equal(zen_cli_tp_parse_slow_mode("spin", &m), ZEN_OK);
    assert_int_equal(m, ZEN_TP_SLOW_SPIN);
    assert_string_equal(zen_tp_balance_name(ZEN_BALANCE_MIGRATE), "migrate");
}

static void test_rotation(void **state)
{
    (void)state;
    zen_tp_emulation o = ZEN_TP_EMULATION_INIT;
    assert_int_equal(zen_cli_tp_parse_slow("1:4", 4, &o), ZEN_OK);
    o.rotate = 3;
    for (uint64_t step = 0; step < 30; step++) {
        int who = (int)((1 + step / 3) % 4);
        for (int r = 0; r < 4; r++)
            assert_float_equal(zen__tp_slow_factor(&o, 4, r, step), r == who ? 4.0 : 1.0, 0);
    }
    o.rotate = 0;
    assert_float_equal(zen__tp_slow_factor(&o, 4, 1, 1000), 4.0, 0);
}

/* ---- migration cost model: concurrency, SEMI's choice, learning the cost ---- */

/* cmocka's assert_float_equal compares in single precision (and casts only the first term of
 * an expression): these tests compare doubles. */
#define assert_near(a, b, tol) assert_true(fabs((double)(a) - (double)(b)) <= (tol))

/* Link model of the tests below (bytes, B/s, s). */
#define OF  6e5 /* out per fraction */
#define IF  4e5 /* in per fraction */
#define OP  1e3 /* out per pair */
#define IP  5e2 /* in per pair */
#define RND 10  /* latency rounds */

/* Transfers to different helpers run at once: the cost is one latency per round plus the
 * busiest rank's bytes (a source's link carries all its pairs), not a sum over pairs. */
static void test_cost_concurrency(void **state)
{
    (void)state;
    double t[4] = { 4, 1, 1, 1 };
    tp_ctl_input in = input(4, t, ZEN_BALANCE_MIGRATE);
    in.bandwidth_Bps = 1e8;
    in.latency_s = 1e-4;
    tp_plan one, three, disjoint, shared;
    assert_int_equal(zen__tp_plan_init(&one, 4), ZEN_OK);
    assert_int_equal(zen__tp_plan_init(&three, 4), ZEN_OK);
    assert_int_equal(zen__tp_plan_init(&disjoint, 4), ZEN_OK);
    assert_int_equal(zen__tp_plan_init(&shared, 4), ZEN_OK);
    one.mig[0 * 4 + 1] = 0.6; /* 0.6 of rank 0's K to one helper */
    for (int a = 1; a < 4; a++)
        three.mig[0 * 4 + a] = 0.2;                          /* the same 0.6 over three helpers */
    disjoint.mig[0 * 4 + 2] = disjoint.mig[1 * 4 + 3] = 0.3; /* two sources, own helpers */
    shared.mig[0 * 4 + 2] = shared.mig[1 * 4 + 2] = 0.3;     /* two sources, one helper */
    double lat_ms = 1e3 * RND * 1e-4;
    /* one helper: the source sends 0.6 OF + OP, receives 0.6 IF + IP; it sends more */
    double c1 = 1e3 * (0.6 * OF + OP) / 1e8 + lat_ms;
    assert_near(zen__tp_migration_cost_ms(&in, &one), c1, 1e-9);
    /* three helpers: the source's link carries 3 pairs; only the per-pair bytes grow */
    double c3 = 1e3 * (0.6 * OF + 3 * OP) / 1e8 + lat_ms;
    assert_near(zen__tp_migration_cost_ms(&in, &three), c3, 1e-9);
    assert_near(c3 - c1, 1e3 * 2 * OP / 1e8, 1e-9);
    /* disjoint pairs run in parallel: as one pair with 0.3 */
    double cd = 1e3 * (0.3 * OF + OP) / 1e8 + lat_ms;
    assert_near(zen__tp_migration_cost_ms(&in, &disjoint), cd, 1e-9);
    /* a shared helper receives from both: its link is the busiest */
    double cs = 1e3 * 2 * (0.3 * OF + OP) / 1e8 + lat_ms;
    assert_near(zen__tp_migration_cost_ms(&in, &shared), cs, 1e-9);
    /* when replies dominate, the source's incoming bytes set the time */
    in.mig_in_per_pair = 4e5;
    assert_near(zen__tp_migration_cost_ms(&in, &three), 1e3 * (0.6 * IF + 3 * 4e5) / 1e8 + lat_ms,
                1e-9);
    in.mig_in_per_pair = IP;
    /* latency alone does not depend on the number of helpers */
    in.bandwidth_Bps = INFINITY;
    assert_near(zen__tp_migration_cost_ms(&in, &one), lat_ms, 1e-12);
    assert_near(zen__tp_migration_cost_ms(&in, &three), lat_ms, 1e-12);
    /* no migration, no cost */
    zen__tp_plan_reset(&one);
    assert_near(zen__tp_migration_cost_ms(&in, &one), 0.0, 0.0);
    zen__tp_plan_free(&one);
    zen__tp_plan_free(&three);
    zen__tp_plan_free(&disjoint);
    zen__tp_plan_free(&shared);
}

/* SEMI's migration trial for one heavy straggler s = 0 over helpers 1..3 that all have spare
 * time, computed here from the documented formulas: T, the shares and the model cost. */
typedef struct semi_expect {
    double T, m, mig[4], model;
} semi_expect;

static semi_expect semi_expected(const double *t, double bw, double lat)
{
    semi_expect e;
    memset(&e, 0, sizeof e);
    e.T = (0.5 + 3.0) / (1 / t[0] + 1 / t[1] + 1 / t[2] + 1 / t[3]);
    e.m = 0.5 - e.T / t[0];
    double xsum = 0;
    for (int a = 1; a < 4; a++)
        xsum += e.T / t[a] - 1;
    for (int a = 1; a < 4; a++)
        e.mig[a] = e.m * (e.T / t[a] - 1) / xsum;
    double out = e.m * OF + 3 * OP, inb = e.m * IF + 3 * IP; /* the source's link */
    e.model = 1e3 * ((out > inb ? out : inb) / bw + RND * lat);
    return e;
}

static void test_semi_choice(void **state)
{
    (void)state;
    /* a 4x straggler with helpers near 1 (tp-4 bench shape, ms) */
    double t[4] = { 38.6, 9.65, 9.7, 9.6 };
    double capped = 38.6 * 0.5;
    tp_plan p;
    assert_int_equal(zen__tp_plan_init(&p, 4), ZEN_OK);
    tp_ctl_input in = input(4, t, ZEN_BALANCE_SEMI);
    /* fast link: migration must win */
    in.bandwidth_Bps = 4e7;
    in.latency_s = 5e-5;
    semi_expect e = semi_expected(t, 4e7, 5e-5);
    assert_true(e.T + e.model < capped); /* the premise of this case */
    zen__tp_decide(&in, NULL, &p);
    assert_near(p.target_ms, e.T, 1e-9);
    assert_near(p.model_ms, e.model, 1e-9);
    assert_near(p.cost_ms, e.model, 1e-9);
    assert_near(p.capped_ms, capped, 1e-12);
    assert_near(p.prune[0], 0.5, 1e-12);
    for (int a = 1; a < 4; a++)
        assert_near(p.mig[a], e.mig[a], 1e-12);
    assert_false(p.probe);
    /* slow link: resize must win (prune the cap, migrate nothing), and the trial is reported */
    in.bandwidth_Bps = 2e6;
    in.latency_s = 3e-4;
    e = semi_expected(t, 2e6, 3e-4);
    assert_true(e.T + e.model > capped);
    zen__tp_decide(&in, NULL, &p);
    assert_near(p.model_ms, e.model, 1e-9);
    assert_near(p.prune[0], 0.5, 1e-12);
    assert_near(p.local[0], 0.5, 1e-12);
    assert_near(migrated(&p, 0), 0.0, 0.0);
    /* the learned scale multiplies the model: migrate exactly when T + scale x model < capped */
    double pays_at = (capped - e.T) / e.model; /* the scale at which both plans tie */
    in.cost_scale = pays_at * 0.95;
    zen__tp_decide(&in, NULL, &p);
    assert_true(migrated(&p, 0) > 0);
    assert_near(p.cost_ms, pays_at * 0.95 * e.model, 1e-9);
    in.cost_scale = pays_at * 1.05;
    zen__tp_decide(&in, NULL, &p);
    assert_near(migrated(&p, 0), 0.0, 0.0);
    /* probe: with nothing learned SEMI tries migration once if it pays at a quarter of the model */
    in.cost_scale = 0;
    in.probe = 1;
    zen__tp_decide(&in, NULL, &p);
    int want_probe = e.T + 0.25 * e.model < capped;
    assert_int_equal(p.probe, want_probe);
    assert_int_equal(migrated(&p, 0) > 0, want_probe);
    in.latency_s = 1e-2; /* hopeless even at a quarter: no probe */
    e = semi_expected(t, 2e6, 1e-2);
    assert_true(e.T + 0.25 * e.model > capped);
    zen__tp_decide(&in, NULL, &p);
    assert_false(p.probe);
    assert_near(migrated(&p, 0), 0.0, 0.0);
    /* just above the cap (2.08x): migration could save under 5% of the capped time, not worth
     * a probe period; it is still chosen when it pays by the model */
    double tb[4] = { 20.2, 9.65, 9.7, 9.6 };
    in = input(4, tb, ZEN_BALANCE_SEMI);
    in.bandwidth_Bps = 2e7;
    in.latency_s = 3e-5;
    in.probe = 1;
    e = semi_expected(tb, 2e7, 3e-5);
    double capb = 20.2 * 0.5, gain = capb - (e.T > 9.7 ? e.T : 9.7);
    assert_true(gain > 0 && gain < 0.05 * capb && e.model > gain && 0.25 * e.model < gain);
    zen__tp_decide(&in, NULL, &p);
    assert_false(p.probe);
    assert_near(migrated(&p, 0), 0.0, 0.0);
    in.bandwidth_Bps = INFINITY;
    in.latency_s = 0;
    zen__tp_decide(&in, NULL, &p);
    assert_true(migrated(&p, 0) > 0 && !p.probe);
    /* 2x: resizing alone balances, whatever the link */
    double t2[4] = { 19.3, 9.65, 9.7, 9.6 };
    in = input(4, t2, ZEN_BALANCE_SEMI);
    in.probe = 1;
    zen__tp_decide(&in, NULL, &p);
    assert_near(p.prune[0], 1 - 9.7 / 19.3, 1e-12);
    assert_near(migrated(&p, 0), 0.0, 0.0);
    zen__tp_plan_free(&p);
}

/* Step time of a period under plan p on a host whose non-tp work takes base ms and whose
 * migration really costs ratio x model (+ noise). */
static double period_ms(const tp_plan *p, const double *t, double base, double extra)
{
    double crit = 0;
    for (int r = 0; r < p->n; r++)
        crit = fmax(crit, rank_time(p, t, r));
    return base + crit + extra;
}

static void test_learn_scale(void **state)
{
    (void)state;
    double t[4] = { 38.6, 9.65, 9.7, 9.6 };
    const double base = 24.0, alpha = 0.5, true_ratio = 0.3;
    tp_ctl_input in = input(4, t, ZEN_BALANCE_SEMI);
    in.bandwidth_Bps = 1e7;
    in.latency_s = 3e-4;
    semi_expect e = semi_expected(t, 1e7, 3e-4);
    /* premise: the model alone resizes, the true cost would have paid */
    assert_true(e.T + e.model > 38.6 * 0.5 && e.T + true_ratio * e.model < 38.6 * 0.5);
    tp_learn L;
    memset(&L, 0, sizeof L);
    zen__tp_learn_apply(&L, &in); /* nothing learned: model as is, no probe without a base */
    assert_true(in.cost_scale == 1.0 && !in.probe && !in.probe_resize);
    tp_plan none, mig, res;
    assert_int_equal(zen__tp_plan_init(&none, 4), ZEN_OK);
    assert_int_equal(zen__tp_plan_init(&mig, 4), ZEN_OK);
    assert_int_equal(zen__tp_plan_init(&res, 4), ZEN_OK);
    /* first period, no plan yet: base = step - max t */
    zen__tp_learn_observe(&L, &in, &none, base + 38.6);
    assert_true(L.used && L.base_valid && L.scale_n == 0);
    assert_near(L.base_ms, base, 1e-9);
    assert_near(L.crit_ms, 38.6, 1e-12);
    /* the model says resize; with a base and no scale SEMI probes migration once */
    zen__tp_decide(&in, NULL, &res);
    zen__tp_learn_apply(&L, &in);
    assert_true(in.probe && !in.probe_resize && in.cost_scale == 1.0);
    zen__tp_decide(&in, NULL, &mig);
    in.probe = 0;
    assert_true(mig.probe && !res.probe);
    assert_true(migrated(&mig, 0) > 0 && migrated(&res, 0) == 0);
    double model = zen__tp_migration_cost_ms(&in, &mig);
    assert_near(model, e.model, 1e-9);
    /* migration periods whose real overhead is 0.3 x model, with +-10% noise: the scale is the
     * EMA of observed / model, first value taken as is */
    double want = 0;
    for (int k = 0; k < 12; k++) {
        double noise = (k % 2 ? -0.1 : 0.1) * true_ratio * model;
        double step = period_ms(&mig, t, base, true_ratio * model + noise);
        zen__tp_learn_observe(&L, &in, &mig, step);
        double ratio = (step - base - period_ms(&mig, t, 0, 0)) / model;
        want = k == 0 ? ratio : alpha * ratio + (1 - alpha) * want;
        assert_true(L.used);
        assert_int_equal(L.scale_n, k + 1);
        assert_near(L.scale, want, 1e-9);
        assert_near(L.obs_ms, step - base - period_ms(&mig, t, 0, 0), 1e-9);
        assert_near(L.pred_ms, model, 1e-12);
    }
    assert_true(fabs(L.scale - true_ratio) < 0.05 * true_ratio); /* converged to the truth */
    assert_int_equal(L.scale_age, 0);
    assert_int_equal(L.base_age, 12);
    /* with the learned scale, SEMI now migrates where the raw model resized... */
    L.base_age = 9;
    zen__tp_learn_apply(&L, &in);
    assert_true(in.cost_scale == L.scale && !in.probe && !in.probe_resize);
    tp_plan p;
    assert_int_equal(zen__tp_plan_init(&p, 4), ZEN_OK);
    zen__tp_decide(&in, NULL, &p);
    assert_true(38.6 * 0.5 > p.target_ms + L.scale * model);
    assert_true(migrated(&p, 0) > 0 && !p.probe);
    /* ...except for one resized period once the base is TP_REFRESH_ROUNDS (10) rounds old */
    L.base_age = 10;
    zen__tp_learn_apply(&L, &in);
    assert_true(!in.probe && in.probe_resize);
    zen__tp_decide(&in, NULL, &p);
    assert_true(p.probe && migrated(&p, 0) == 0.0 && p.prune[0] == 0.5);
    in.probe_resize = 0;
    /* the straggler moved: the timings no longer describe the period, nothing is learned */
    double moved[4] = { 9.65, 38.6, 9.7, 9.6 };
    tp_ctl_input in2 = in;
    in2.t_ms = moved;
    double before = L.scale;
    zen__tp_learn_observe(&L, &in2, &mig, 50.0);
    assert_false(L.used);
    assert_true(L.scale == before && L.scale_n == 12);
    /* a period that only resized updates the base (EMA); a migration that cost less than
     * nothing is clamped to the smallest ratio instead of making migration free */
    zen__tp_learn_observe(&L, &in, &res, 26.0 + 38.6 * 0.5);
    assert_true(L.used && L.base_age == 0);
    assert_near(L.base_ms, alpha * 26.0 + (1 - alpha) * base, 1e-9);
    /* resizing for 10 rounds makes the scale stale: migration is probed again */
    L.scale_age = 9;
    zen__tp_learn_apply(&L, &in);
    assert_false(in.probe);
    L.scale_age = 10;
    zen__tp_learn_apply(&L, &in);
    assert_true(in.probe && !in.probe_resize);
    zen__tp_learn_observe(&L, &in, &mig, 1.0);
    assert_near(L.scale, alpha * 0.05 + (1 - alpha) * before, 1e-9);
    /* no step time: nothing happens */
    zen__tp_learn_observe(&L, &in, &mig, -1);
    assert_false(L.used);
    zen__tp_plan_free(&p);
    zen__tp_plan_free(&none);
    zen__tp_plan_free(&mig);
    zen__tp_plan_free(&res);
}

/* ---- link calibration: every rank of every size ends with a measured link, the same within
 * a pair (with an odd size the last rank gets rank 0's); given values are left alone ---- */

static zen_status calibration_rank(zen_comm *c, void *argp)
{
    const int *given = argp;
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    o.balance = ZEN_BALANCE_SEMI;
    o.period = 1;
    if (*given) {
        o.bandwidth_Bps = 123e6;
        o.latency_s = 7e-5;
    }
    zen_tp_group *g = NULL;
    ZT_CHECK(c, zen_tp_group_create(c, &o, &g) == ZEN_OK);
    ZT_CHECK(c, zen_tp_group_step(g) == ZEN_OK); /* first round: calibration */
    double mine[2] = { g->bandwidth_Bps, g->latency_s }, all[2 * 8];
    int n = zen_comm_size(c), r = zen_comm_rank(c);
    ZT_CHECK(c, zen_allgather(c, mine, all, 2, ZEN_F64) == ZEN_OK);
    if (*given) {
        ZT_CHECK(c, mine[0] == 123e6 && mine[1] == 7e-5);
    } else {
        ZT_CHECK(c, mine[0] > 0 && isfinite(mine[0]) && mine[1] >= 0 && mine[1] < 1.0);
        int leader = n % 2 && r == n - 1 ? 0 : r - r % 2;
        ZT_CHECK(c, all[2 * leader] == mine[0] && all[2 * leader + 1] == mine[1]);
    }
    ZT_CHECK(c, zen_tp_group_step(g) == ZEN_OK); /* later rounds do not calibrate again */
    ZT_CHECK(c, g->bandwidth_Bps == mine[0] && g->latency_s == mine[1]);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_link_calibration(void **state)
{
    (void)state;
    int given = 0;
    for (int n = 2; n <= 5; n++)
        zt_run_inproc(n, calibration_rank, &given);
    given = 1;
    zt_run_inproc(3, calibration_rank, &given);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_straggler),
        cmocka_unit_test(test_detection_and_none),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_migrate),
        cmocka_unit_test(test_semi),
        cmocka_unit_test(test_semi_outside_resizes_only),
        cmocka_unit_test(test_hysteresis),
        cmocka_unit_test(test_counts_split),
        cmocka_unit_test(test_parse_slow),
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_cost_concurrency),
        cmocka_unit_test(test_semi_choice),
        cmocka_unit_test(test_learn_scale),
        cmocka_unit_test(test_link_calibration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
