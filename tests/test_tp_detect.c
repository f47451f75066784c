/*
 * Whole-step slowness detection (src/tp/detect.c) on synthetic gathered timings: the noise
 * threshold and the majority rule decide who is flagged, the flagged rank's time makes the
 * controller's resize close the whole-step gap, and a tp group with injected step times reaches
 * the same decision on every rank. Expectations come from the rules in docs/hetero-tp.md,
 * recomputed here (blame counts, the whole-step model), not from the implementation's output.
 */
#include "test_tp_util.h"
#include "tp/tp_internal.h"

#define MARGIN 0.4
#define WINDOW 5
#define STEP   20.0 /* the median rank's busy time per step, ms */

static tp_detect_in det_input(int n, const double *gemm, const double *gap)
{
    tp_detect_in in;
    memset(&in, 0, sizeof in);
    in.n = n;
    in.gemm_ms = gemm;
    in.gap_ms = gap;
    in.gap_avg_ms = gap;
    in.step_ms = STEP;
    in.margin = MARGIN;
    in.min_gap_ms = 1.0;
    in.window = WINDOW;
    return in;
}

static tp_ctl_input resize_input(int n, const double *t)
{
    tp_ctl_input in;
    memset(&in, 0, sizeof in);
    in.n = n;
    in.t_ms = t;
    in.balance = ZEN_BALANCE_RESIZE;
    in.delta = 0.1;
    in.rho_max = 0.5;
    in.hysteresis = 0.05;
    in.bandwidth_Bps = INFINITY;
    return in;
}

/* Uniform in [-1, 1) from the tp tests' generator. */
static double jitter(uint64_t *s)
{
    return (double)tpt_uniform(s);
}

/* How many of the last WINDOW rounds (up to `round`) have blamed[k] set: the majority rule,
 * counted independently of the bit history. */
static int recent(const int *blamed, int round)
{
    int c = 0;
    for (int k = round; k > round - WINDOW && k >= 0; k--)
        c += blamed[k];
    return c;
}

/* Every rank waited for by up to 38% of the median busy time in every round (some rank always
 * arrives last on a shared host) stays under a 40% margin, and so does a host where everybody is
 * waited for a lot: nothing is flagged, the controller sees the GEMM times unchanged. */
static void test_jitter_not_flagged(void **state)
{
    (void)state;
    uint32_t hist[4] = { 0 };
    uint64_t seed = 7;
    for (int round = 0; round < 300; round++) {
        double gemm[4], gap[4], t[4];
        for (int r = 0; r < 4; r++) {
            gemm[r] = 10.0 * (1 + 0.05 * jitter(&seed));
            gap[r] = STEP * 0.19 * (1 + jitter(&seed));
            if (round >= 150)
                gap[r] += 2 * STEP; /* all waited for long: nobody stands out */
        }
        tp_detect_in in = det_input(4, gemm, gap);
        assert_true(zen__tp_detect_decide(&in, hist, t) == 0);
        for (int r = 0; r < 4; r++)
            assert_true(t[r] == gemm[r]);
    }
}

/* Gaps far above the margin that hit each rank in only one round of four (a preempted period on
 * a shared host) are never a majority of five rounds. */
static void test_isolated_spikes_not_flagged(void **state)
{
    (void)state;
    uint32_t hist[4] = { 0 };
    uint64_t mask = 0;
    static int blamed[4][400];
    for (int round = 0; round < 400; round++) {
        double gemm[4] = { 10, 10, 10, 10 }, gap[4] = { 0.5, 2, 0, 1 }, t[4];
        int spiked = (round * 3) % 4; /* rounds 0, 1, 2, 3 spike ranks 0, 3, 2, 1 */
        gap[spiked] = 0.8 * STEP;
        blamed[spiked][round] = 1;
        tp_detect_in in = det_input(4, gemm, gap);
        in.prev_mask = mask;
        mask = zen__tp_detect_decide(&in, hist, t);
        for (int r = 0; r < 4; r++) {
            assert_true(recent(blamed[r], round) <= 2);
            assert_int_equal((int)((mask >> r) & 1), recent(blamed[r], round) > WINDOW / 2);
        }
    }
}

/* A rank blamed in 3 of the last 5 rounds is flagged, in 2 of 5 it is not; a rank throttled
 * every round is flagged from the third round on and released three clean rounds after. */
static void test_majority_rule(void **state)
{
    (void)state;
    const int pattern[] = { 1, 0, 1, 0, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0 };
    const int rounds = (int)(sizeof pattern / sizeof pattern[0]);
    uint32_t hist[3] = { 0 };
    uint64_t mask = 0;
    for (int round = 0; round < rounds; round++) {
        double gemm[3] = { 10, 10, 10 }, gap[3] = { 1, pattern[round] ? 15 : 2, 0 }, t[3];
        tp_detect_in in = det_input(3, gemm, gap);
        in.prev_mask = mask;
        mask = zen__tp_detect_decide(&in, hist, t);
        assert_int_equal(mask, recent(pattern, round) >= 3 ? 2u : 0u);
    }
    /* hysteresis: once flagged, rank 1 stays blamed at an excess of 0.3 x STEP (between half
     * the margin and the margin); rank 2, never flagged, is not blamed at the same excess */
    uint32_t h4[4] = { 0 };
    mask = 0;
    for (int round = 0; round < 20; round++) {
        double gemm[4] = { 10, 10, 10, 10 }, t[4];
        double gap[4] = { 1, round < 5 ? 15 : 1 + 0.3 * STEP, round < 5 ? 0 : 1 + 0.3 * STEP, 0 };
        tp_detect_in in = det_input(4, gemm, gap);
        in.prev_mask = mask;
        mask = zen__tp_detect_decide(&in, h4, t);
        assert_int_equal(mask, round >= 2 ? 2u : 0u);
    }
    /* below the absolute floor a gap is noise even when large relative to a short step */
    uint32_t h2[2] = { 0 };
    for (int round = 0; round < 10; round++) {
        double gemm[2] = { 0.1, 0.1 }, gap[2] = { 0, 0.9 }, t[2];
        tp_detect_in in = det_input(2, gemm, gap);
        in.step_ms = 2.0;
        assert_true(zen__tp_detect_decide(&in, h2, t) == 0);
    }
    /* a round where some rank has no GEMM timing yet blames nobody and flags nobody; it counts
     * as a clean round in the window */
    uint32_t h3[2] = { 0 };
    mask = 0;
    int measured_blame[10] = { 0 };
    for (int round = 0; round < 10; round++) {
        int measured = round % 2 == 0;
        measured_blame[round] = measured;
        double gemm[2] = { 10, measured ? 10 : 0 }, gap[2] = { 0, 30 }, t[2];
        tp_detect_in in = det_input(2, gemm, gap);
        in.prev_mask = mask;
        mask = zen__tp_detect_decide(&in, h3, t);
        assert_int_equal(mask, measured && recent(measured_blame, round) >= 3 ? 2u : 0u);
    }
}

/* Whole-step model of a rank: a base step (any constant), plus the time the others wait for it,
 * minus the GEMM time that resizing removes (the only part of its work that shrinks). */
static double whole_step(double gap, double gemm, double keep)
{
    return STEP + gap - (1 - keep) * gemm;
}

/* The time handed to the controller for a flagged rank makes RESIZE shrink its GEMMs by exactly
 * its gap over the unflagged ranks' (up to rho_max); a GEMM-only straggler keeps its GEMM time. */
static void test_resize_covers_whole_step(void **state)
{
    (void)state;

    struct {
        double gemm[4], gap[4];
        double expect_keep; /* from the whole-step model, rho_max 0.5 */
    } cases[] = {
        /* throttled from outside: GEMM timing sees nothing, the others wait 9 ms for it */
        { { 20, 20, 20, 20 }, { 0, 0, 0, 9 }, 1 - 9.0 / 20 },
        /* GEMM timing sees part of it (22 vs 20); the others' noise level is 1 ms */
        { { 20, 19, 20, 22 }, { 1, 0.5, 0, 10 }, 1 - 9.0 / 22 },
        /* a gap beyond what the GEMMs hold: capped at rho_max */
        { { 10, 10, 10, 10 }, { 0, 0, 0, 30 }, 0.5 },
        /* an emulated 1.6x GEMM straggler: its gap is its GEMM excess, same as GEMM timing */
        { { 20, 20, 20, 32 }, { 0, 0, 0, 12 }, 20.0 / 32 },
    };

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t hist[4] = { 0 };
        double t[4];
        for (int round = 0; round < WINDOW; round++) {
            tp_detect_in in = det_input(4, cases[c].gemm, cases[c].gap);
            uint64_t mask = zen__tp_detect_decide(&in, hist, t);
            assert_int_equal(mask, round >= 2 ? 8u : 0u);
        }
        for (int r = 0; r < 3; r++)
            assert_true(t[r] == cases[c].gemm[r]);
        tp_plan p;
        assert_int_equal(zen__tp_plan_init(&p, 4), ZEN_OK);
        tp_ctl_input in = resize_input(4, t);
        zen__tp_decide(&in, NULL, &p);
        assert_int_equal(p.straggler_mask, 8u);
        assert_float_equal(p.local[3], cases[c].expect_keep, 1e-9);
        if (cases[c].expect_keep > 0.5) {
            /* resized, its step is the slowest unflagged rank's */
            double ref = 0;
            for (int r = 0; r < 3; r++)
                ref = fmax(ref, whole_step(cases[c].gap[r], cases[c].gemm[r], 1));
            assert_float_equal(whole_step(cases[c].gap[3], cases[c].gemm[3], p.local[3]), ref,
                               1e-9);
        }
        zen__tp_plan_free(&p);
    }
    /* the effective time never undercuts the GEMM time and is the GEMM time without excess */
    assert_float_equal(zen__tp_detect_effective_ms(30, -5, 20), 30, 0);
    assert_float_equal(zen__tp_detect_effective_ms(30, 15, 20), 20 / (1 - 15.0 / 30), 1e-12);
}

/* ---- a tp group: injected step times, the same flags and plan on every rank ---- */

typedef struct {
    int slow; /* rank with the long steps, -1: none */
} group_arg;

static zen_status detect_rank(zen_comm *c, void *argp)
{
    const group_arg *a = argp;
    int n = zen_comm_size(c), me = zen_comm_rank(c);
    zen_tp_options o = ZEN_TP_OPTIONS_INIT;
    o.balance = ZEN_BALANCE_RESIZE;
    o.period = 2;
    o.ema_alpha = 1.0;
    zen_tp_group *g = NULL;
    zen_tp_linear *l = NULL;
    ZT_CHECK(c, zen_tp_group_create(c, &o, &g) == ZEN_OK);
    ZT_CHECK(c, g->det.enabled && g->det.window == WINDOW);
    ZT_CHECK(c, zen_tp_linear_create(g, ZEN_TP_ROW, 16, 8, 1, &l) == ZEN_OK);
    float x[4 * 16], y[4 * 8], dy[4 * 8];
    tpt_fill(x, sizeof x / sizeof x[0], 1);
    tpt_fill(dy, sizeof dy / sizeof dy[0], 2);
    uint64_t seed = 100 + (uint64_t)me;
    int rounds = 0;
    for (int step = 0; step < 24; step++) {
        ZT_CHECK(c, zen_tp_linear_forward(l, x, 4, y, 1) == ZEN_OK);
        ZT_CHECK(c, zen_tp_linear_backward(l, x, dy, 4, NULL) == ZEN_OK);
        /* the GEMMs look equal; the gaps differ by rank-local jitter (0-2 ms) or a throttle */
        g->time_override_ms = 10.0;
        g->det.step_override_ms = 40.0;
        g->det.shed_override_ms = me == a->slow ? 20.0 : 1 + jitter(&seed);
        ZT_CHECK(c, zen_tp_group_step(g) == ZEN_OK);
        if ((step + 1) % o.period)
            continue;
        rounds++;
        double mine[2 + 2 * 8], all[8 * (2 + 2 * 8)];
        int k = 0;
        mine[k++] = (double)g->det.mask;
        mine[k++] = (double)g->plan.straggler_mask;
        for (int r = 0; r < 8; r++)
            mine[k++] = r < n ? g->plan.local[r] : 0;
        for (int r = 0; r < 8; r++)
            mine[k++] = r < n ? g->plan.prune[r] : 0;
        ZT_CHECK(c, zen_allgather(c, mine, all, (size_t)k, ZEN_F64) == ZEN_OK);
        for (int r = 1; r < n; r++)
            ZT_CHECK(c, memcmp(all, all + k * r, sizeof mine) == 0);
        uint64_t expect = a->slow >= 0 && rounds >= 3 ? 1ull << a->slow : 0;
        ZT_CHECK(c, g->det.mask == expect);
        ZT_CHECK(c, g->plan.straggler_mask == expect);
        /* a 20 ms gap with 10 ms of GEMM: more than the cap can remove */
        ZT_CHECK(c, !expect || fabs(g->plan.local[a->slow] - 0.5) < 1e-12);
    }
    zen_tp_linear_destroy(l);
    zen_tp_group_destroy(g);
    return ZEN_OK;
}

static void test_group_decides_alike(void **state)
{
    (void)state;
    group_arg a = { -1 };
    zt_run_inproc(4, detect_rank, &a);
    a.slow = 2;
    zt_run_inproc(4, detect_rank, &a);
    a.slow = 0;
    zt_run_inproc(2, detect_rank, &a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jitter_not_flagged),
        cmocka_unit_test(test_isolated_spikes_not_flagged),
        cmocka_unit_test(test_majority_rule),
        cmocka_unit_test(test_resize_covers_whole_step),
        cmocka_unit_test(test_group_decides_alike),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
