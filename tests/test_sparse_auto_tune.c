/*
 * AUTO converges on measurement (src/sparse/plan/auto_tune.c, auto_decide.c): with a wrong model it
 * ends on the measured-fastest scheme, warm-up and rechecks stay within their bounds, every rank
 * makes the same decision (also between record exchanges), and the result is the dense sum
 * whichever scheme runs.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "sparse/plan/auto.h"
#include "sparse/plan/auto_tune.h"
#include "testutil.h"

static const zen_auto_tune_params params = { 5, 20, 0.05, 2, 2, 3, 2, 1, 0 };

/* params with the defaults' recheck schedule and switch margin: a recheck 10 calls after a new
 * choice, gaps doubling to 80, and a 5% margin */
static zen_auto_tune_params backoff_params(void)
{
    zen_auto_tune_params tp = params;
    tp.period = 10;
    tp.margin = 0.05;
    tp.backoff = 8;
    return tp;
}

typedef struct run_log {
    int fastest_tail;  /* exploiting calls of the tail that ran the fastest */
    int exploit_tail;  /* exploiting calls of the tail */
    int first_settled; /* first call from which every exploiting call ran the fastest */
    int warm, rechecks;
    double extra;     /* time beyond always running the fastest, fraction of the total */
    double try_extra; /* time of warm-up and recheck calls beyond the fastest's */
    double total;
} run_log;

/* Drive the tuner against true times true_s[s] (times a deterministic +-4% wobble; the first call
 * of scheme `cold` takes 3x as long, a cold start; 0: none) and the model's pred[s]. */
static void drive(const double *true_s, const double *pred, int calls, int tail, int cold,
                  const zen_auto_tune_params *tp, run_log *log)
{
    zen_auto_tune t;
    zen__auto_tune_init(&t);
    int fastest = 1, runs[ZEN_SPARSE_SCHEME_COUNT] = { 0 };
    for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        if (true_s[s] < true_s[fastest])
            fastest = s;
    uint64_t rng = 5;
    double ideal = 0;
    memset(log, 0, sizeof *log);
    log->first_settled = -1;
    for (int call = 0; call < calls; call++) {
        zen_auto_tune_kind kind;
        int s = (int)zen__auto_tune_choose(&t, tp, pred, &kind, NULL);
        double wobble = 0.96 + 0.08 * (double)(zt_rand(&rng) % 1000) / 1000.0;
        double took = true_s[s] * wobble * (s == cold && runs[s]++ == 0 ? 3.0 : 1.0);
        zen__auto_tune_observe(&t, tp, took);
        log->total += took;
        ideal += true_s[fastest] * wobble;
        log->warm += kind == ZEN_TUNE_WARM;
        log->rechecks += kind == ZEN_TUNE_RECHECK;
        if (kind != ZEN_TUNE_EXPLOIT)
            log->try_extra += took - true_s[fastest] * wobble;
        if (kind == ZEN_TUNE_EXPLOIT && s != fastest)
            log->first_settled = -1;
        else if (kind == ZEN_TUNE_EXPLOIT && log->first_settled < 0)
            log->first_settled = call;
        if (call >= calls - tail && kind == ZEN_TUNE_EXPLOIT) {
            log->exploit_tail++;
            log->fastest_tail += s == fastest;
        }
    }
    log->extra = (log->total - ideal) / log->total;
}

static void set_times(double *a, double bal, double hier, double ag, double block, double ps,
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

/* The model thinks HIERARCHICAL is 8x faster than it is (the 3-9x): the warm-up measures
 * it twice and BALANCED twice, and AUTO settles on BALANCED after those 4 calls. */
static void test_optimistic_model(void **state)
{
    (void)state;
    double t[ZEN_SPARSE_SCHEME_COUNT], m[ZEN_SPARSE_SCHEME_COUNT];
    set_times(t, 7.3, 19.4, 30, 40, 25, 60);
    set_times(m, 7.3, 19.4 / 8, 30, 40, 25, 60);
    run_log log;
    drive(t, m, 200, 100, 0, &params, &log);
    assert_int_equal(log.fastest_tail, log.exploit_tail);
    assert_true(log.first_settled >= 0 && log.first_settled <= 4);
    assert_int_equal(log.warm, 4); /* 2 candidates x 2 (19.4 < 3 x 7.3); the rest pruned */
    /* the 2 HIERARCHICAL tries cost 2 x 12.1; the rechecks stay within the budget */
    assert_true(log.extra <= 0.05 + 2 * 12.1 * 1.04 / log.total);
}

/* The model thinks the fastest scheme (BALANCED) is 3x slower than it is: not its first choice,
 * but in its first two, so measured in the warm-up and chosen; no recheck is needed. */
static void test_pessimistic_model(void **state)
{
    (void)state;
    double t[ZEN_SPARSE_SCHEME_COUNT], m[ZEN_SPARSE_SCHEME_COUNT];
    set_times(t, 10, 15, 40, 50, 30, 80);
    set_times(m, 30, 15, 40, 50, 32, 80);
    zen_auto_tune_params no_recheck = params;
    no_recheck.period = 0;
    run_log log;
    drive(t, m, 100, 90, 0, &no_recheck, &log);
    assert_int_equal(log.fastest_tail, log.exploit_tail);
    assert_int_equal(log.rechecks, 0);
    /* with the warm-up off, the model's choice sticks: 1.5x the fastest */
    zen_auto_tune_params trust = no_recheck;
    trust.warm = 0;
    drive(t, m, 100, 90, 0, &trust, &log);
    assert_int_equal(log.fastest_tail, 0);
}

/* A process's first calls are slower than its later ones (allocator, first touches, caches):
 * here every call takes 1 + 0.8 exp(-call / 3) times its scheme's steady time, 1.8x at call 0,
 * 1.29x at call 3. The model ranks HIERARCHICAL (10) first and BALANCED (11.5) second, both
 * right. Measured first, HIERARCHICAL would look 14.9 on calls 1-2 against BALANCED's 13.6 on
 * calls 4-5, and without rechecks AUTO would keep BALANCED; the warm-up measures the model's
 * favourite last, so AUTO runs HIERARCHICAL from its first exploiting call. */
static void test_warm_up_favourite_last(void **state)
{
    (void)state;
    double t[ZEN_SPARSE_SCHEME_COUNT], m[ZEN_SPARSE_SCHEME_COUNT];
    set_times(t, 11.5, 10, 40, 50, 45, 80);
    memcpy(m, t, sizeof m);
    zen_auto_tune_params tp = params;
    tp.warm = 3;
    tp.period = 0; /* no rechecks: the warm-up alone decides */
    zen_auto_tune tune;
    zen__auto_tune_init(&tune);
    int order[6], exploit_fastest = 0, exploits = 0;
    for (int call = 0; call < 40; call++) {
        zen_auto_tune_kind kind;
        int s = (int)zen__auto_tune_choose(&tune, &tp, m, &kind, NULL);
        if (call < 6) {
            assert_int_equal(kind, ZEN_TUNE_WARM);
            order[call] = s;
        }
        exploits += kind == ZEN_TUNE_EXPLOIT;
        exploit_fastest += kind == ZEN_TUNE_EXPLOIT && s == ZEN_SPARSE_HIERARCHICAL;
        zen__auto_tune_observe(&tune, &tp, t[s] * (1 + 0.8 * exp(-call / 3.0)));
    }
    for (int call = 0; call < 6; call++) /* two candidates, three calls each, favourite last */
        assert_int_equal(order[call], call < 3 ? ZEN_SPARSE_BALANCED : ZEN_SPARSE_HIERARCHICAL);
    assert_int_equal(exploits, 34);
    assert_int_equal(exploit_fastest, exploits);
}

/* A run with few calls still ends right, also when the fastest scheme's first call is slow (a
 * cold start): the second warm-up measurement is what it is judged by. */
static void test_few_calls_cold_start(void **state)
{
    (void)state;
    double t[ZEN_SPARSE_SCHEME_COUNT], m[ZEN_SPARSE_SCHEME_COUNT];
    set_times(t, 5, 6, 30, 40, 25, 60);
    set_times(m, 5, 4, 30, 40, 25, 60);
    run_log log;
    drive(t, m, 8, 4, ZEN_SPARSE_BALANCED, &params, &log); /* its first call takes 3x */
    assert_true(log.warm <= 4);
    /* HIERARCHICAL, 1.2x, is a close call: challenged every other call after the warm-up */
    assert_true(log.exploit_tail >= 2);
    assert_int_equal(log.fastest_tail, log.exploit_tail);
    /* one measurement per candidate would have judged BALANCED by its cold call: 15 > 6 */
    zen_auto_tune_params once = params;
    once.warm = 1;
    drive(t, m, 8, 4, ZEN_SPARSE_BALANCED, &once, &log);
    assert_int_equal(log.fastest_tail, 0);
}

/* Warm-up tries are bounded by warm x schemes, whatever the timings; the rechecks' measured extra
 * stays within the budget of the total (plus one try), even when every other scheme is slower
 * than the model says. */
static void test_budget(void **state)
{
    (void)state;
    const double budgets[] = { 0.01, 0.05, 0.2 };
    const double slower[] = { 1.5, 4.0 };
    double pred[ZEN_SPARSE_SCHEME_COUNT] = { 0 }, t[ZEN_SPARSE_SCHEME_COUNT] = { 0 };
    for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        pred[s] = 1.0 + 0.01 * s; /* all look alike to the model */
    for (int b = 0; b < 3; b++)
        for (int k = 0; k < 2; k++) {
            zen_auto_tune_params tp = params;
            tp.period = 5;
            tp.budget = budgets[b];
            for (int s = 1; s < ZEN_SPARSE_SCHEME_COUNT; s++)
                t[s] = s == ZEN_SPARSE_BALANCED ? 1.0 : slower[k];
            run_log log;
            drive(t, pred, 1000, 500, 0, &tp, &log);
            assert_true(log.warm <= 2 * (ZEN_SPARSE_SCHEME_COUNT - 1));
            assert_true(log.try_extra <= budgets[b] * log.total + 2 * log.warm * slower[k] + 2);
            assert_int_equal(log.fastest_tail, log.exploit_tail);
            /* 4x: dropped after one or two warm-up tries; re-measured (two calls a time) only
             * until its estimate rests on a full window, then never again */
            if (k == 1)
                assert_true(log.rechecks <= 2 * tp.window * (ZEN_SPARSE_SCHEME_COUNT - 2));
            else /* 1.5x: a survivor, rechecked within the budget */
                assert_true(log.rechecks > 0);
        }
}

/* Rechecks back off while they confirm the choice (gaps of 10, 20, 40, 80 calls, not every 10th),
 * yet never stop: when the runner-up becomes the faster scheme mid-run, AUTO moves to it within a
 * few of the longest gaps. */
static void test_recheck_backoff(void **state)
{
    (void)state;
    double pred[ZEN_SPARSE_SCHEME_COUNT], t[ZEN_SPARSE_SCHEME_COUNT];
    set_times(pred, 1, 1, 9, 9, 9, 9);
    zen_auto_tune_params fixed = params, backoff = params;
    fixed.period = backoff.period = 10;
    backoff.backoff = 8;
    int rechecks[2] = { 0, 0 }, switched_at = -1, late_rechecks = 0;
    for (int v = 0; v < 2; v++) {
        const zen_auto_tune_params *tp = v ? &backoff : &fixed;
        zen_auto_tune tune;
        zen__auto_tune_init(&tune);
        for (int call = 0; call < 3000; call++) {
            /* HIERARCHICAL is 1.3x BALANCED, then from call 2000 on 0.6x */
            set_times(t, 1.0, call < 2000 ? 1.3 : 0.6, 9, 9, 9, 9);
            zen_auto_tune_kind kind;
            int s = (int)zen__auto_tune_choose(&tune, tp, pred, &kind, NULL);
            zen__auto_tune_observe(&tune, tp, t[s]);
            rechecks[v] += kind == ZEN_TUNE_RECHECK && call < 2000;
            if (v == 1 && kind == ZEN_TUNE_RECHECK && call >= 1000 && call < 2000)
                late_rechecks++;
            if (v == 1 && switched_at < 0 && call >= 2000 && kind == ZEN_TUNE_EXPLOIT &&
                s == ZEN_SPARSE_HIERARCHICAL)
                switched_at = call;
            if (call < 2000 && call > 100 && kind == ZEN_TUNE_EXPLOIT)
                assert_int_equal(s, ZEN_SPARSE_BALANCED);
        }
    }
    assert_true(rechecks[0] >= 150);             /* every 10th call, within the budget */
    assert_true(rechecks[1] <= rechecks[0] / 4); /* the gaps grew to 80 calls */
    assert_true(late_rechecks >= 1000 / 80 - 1); /* and stayed there: they never stop */
    assert_true(switched_at >= 2000 && switched_at <= 2000 + 2 * 80 + 3 * 10);
}

/* How often the exploiting calls (*exploits of them) changed scheme over `calls` calls against
 * true times t that a burst of host load stretches by 1.4x for 6 calls in every 25. */
static int exploit_switches(const double *t, const zen_auto_tune_params *tp, int calls,
                            int *on_fastest, int *exploits)
{
    double pred[ZEN_SPARSE_SCHEME_COUNT];
    set_times(pred, 1, 1, 9, 9, 9, 9);
    zen_auto_tune tune;
    zen__auto_tune_init(&tune);
    int switches = 0, last = -1;
    *on_fastest = *exploits = 0;
    for (int call = 0; call < calls; call++) {
        zen_auto_tune_kind kind;
        int s = (int)zen__auto_tune_choose(&tune, tp, pred, &kind, NULL);
        zen__auto_tune_observe(&tune, tp, t[s] * (call % 25 < 6 ? 1.4 : 1.0));
        if (kind != ZEN_TUNE_EXPLOIT)
            continue;
        switches += last >= 0 && s != last;
        ++*exploits;
        *on_fastest += s == (t[1] <= t[2] ? 1 : 2);
        last = s;
    }
    return switches;
}

/* Load bursts: with BALANCED 1.1x HIERARCHICAL, the running scheme's estimate rises in every burst
 * while its rival's stays where a recheck left it. Compared by estimates (the tuner before pairs)
 * AUTO flipped 40 times in 1000 calls; by pairs it stays on HIERARCHICAL. A rival 0.8x the running
 * scheme's time takes over; one within the margin (0.97x) does not. */
static void test_switch_on_pairs(void **state)
{
    (void)state;
    double t[ZEN_SPARSE_SCHEME_COUNT];
    zen_auto_tune_params tp = backoff_params();
    int on_fastest, exploits;
    set_times(t, 1.1, 1.0, 9, 9, 9, 9);
    assert_true(exploit_switches(t, &tp, 1000, &on_fastest, &exploits) <= 1);
    assert_true(exploits > 900 && on_fastest >= exploits - 30);
    set_times(t, 0.8, 1.0, 9, 9, 9, 9);
    exploit_switches(t, &tp, 1000, &on_fastest, &exploits);
    assert_true(exploits > 900 && on_fastest >= exploits - 30);
    set_times(t, 1.0, 1.0, 9, 9, 9, 9);
    /* BALANCED looks 1.1x in the warm-up, then runs at 0.97x: within the margin AUTO stays on
     * HIERARCHICAL, without one it moves */
    for (int v = 0; v < 2; v++) {
        tp.margin = v ? 0.05 : 0;
        zen_auto_tune tune;
        zen__auto_tune_init(&tune);
        int final = -1;
        for (int call = 0; call < 1000; call++) {
            zen_auto_tune_kind kind;
            int s = (int)zen__auto_tune_choose(&tune, &tp, t, &kind, NULL);
            double bal = call < 20 ? 1.1 : 0.97;
            zen__auto_tune_observe(&tune, &tp, s == ZEN_SPARSE_BALANCED ? bal : t[s]);
            if (kind == ZEN_TUNE_EXPLOIT)
                final = s;
        }
        assert_int_equal(final, v ? ZEN_SPARSE_HIERARCHICAL : ZEN_SPARSE_BALANCED);
    }
}

#define LUCKY_CALLS 600

/* HIERARCHICAL runs at 1.2x BALANCED, but its first `lucky` compared recheck calls from call 300
 * on take 0.7x, as calls in a burst of noise can (a recheck's first call, after BALANCED's, is not
 * compared). scheme[] and kind[] get every call's; returns the first lucky call. */
static int lucky_rechecks(int lucky, int *scheme, zen_auto_tune_kind *kind, zen_auto_tune *tune)
{
    double pred[ZEN_SPARSE_SCHEME_COUNT];
    set_times(pred, 1, 1, 9, 9, 9, 9);
    zen_auto_tune_params tp = backoff_params();
    zen__auto_tune_init(tune);
    int first = -1;
    for (int call = 0; call < LUCKY_CALLS; call++) {
        int s = scheme[call] = (int)zen__auto_tune_choose(tune, &tp, pred, &kind[call], NULL);
        int hier = s == ZEN_SPARSE_HIERARCHICAL;
        double took = hier ? 1.2 : 1.0;
        if (hier && call >= 300 && lucky > 0 && kind[call] == ZEN_TUNE_RECHECK &&
            scheme[call - 1] == s) {
            lucky--;
            took = 0.7;
            first = first < 0 ? call : first;
        }
        zen__auto_tune_observe(tune, &tp, took);
    }
    return first;
}

/* One lucky recheck starts a challenge, whose first three pairs (0.7, 1.2, 1.2) have a median
 * time ratio of 1.2: the challenge ends there, not after a full window of five, and AUTO stays on
 * BALANCED. */
static void test_lucky_recheck_loses_early(void **state)
{
    (void)state;
    int scheme[LUCKY_CALLS], after = 0;
    zen_auto_tune_kind kind[LUCKY_CALLS];
    zen_auto_tune tune;
    int lucky_at = lucky_rechecks(1, scheme, kind, &tune);
    for (int call = 101; call < LUCKY_CALLS; call++)
        if (kind[call] == ZEN_TUNE_EXPLOIT)
            assert_int_equal(scheme[call], ZEN_SPARSE_BALANCED);
    assert_true(lucky_at >= 300);
    for (int call = lucky_at; call < lucky_at + 40; call++)
        after += scheme[call] == ZEN_SPARSE_HIERARCHICAL;
    /* the lucky call and two more compared ones, each after a first call of the pair; the gap
     * stays at 80 calls */
    assert_int_equal(after, 5);
}

/* The warm-up is a key's first calls only. At call 200 the model's predictions change (a record
 * exchange saw a denser tensor) and PS, never measured, becomes a candidate: it is measured by a
 * budgeted recheck, not by a warm-up call, and as it runs at half BALANCED's time AUTO moves to
 * it. */
static void test_no_warmup_after_settling(void **state)
{
    (void)state;
    double pred[ZEN_SPARSE_SCHEME_COUNT], t[ZEN_SPARSE_SCHEME_COUNT];
    set_times(t, 1.0, 1.3, 9, 9, 0.5, 9);
    zen_auto_tune_params tp = backoff_params();
    zen_auto_tune tune;
    zen__auto_tune_init(&tune);
    int first_exploit = -1, ps_at = -1, settled_ps = -1;
    for (int call = 0; call < 600; call++) {
        set_times(pred, 1, 1, 9, 9, call < 200 ? 9 : 1.5, 9);
        zen_auto_tune_kind kind;
        int s = (int)zen__auto_tune_choose(&tune, &tp, pred, &kind, NULL);
        zen__auto_tune_observe(&tune, &tp, t[s]);
        if (kind == ZEN_TUNE_EXPLOIT && first_exploit < 0)
            first_exploit = call;
        if (first_exploit >= 0)
            assert_int_not_equal(kind, ZEN_TUNE_WARM);
        if (s == ZEN_SPARSE_PS && ps_at < 0)
            ps_at = call;
        if (s == ZEN_SPARSE_PS && kind == ZEN_TUNE_EXPLOIT && settled_ps < 0)
            settled_ps = call;
    }
    assert_true(ps_at >= 200 && ps_at <= 200 + 80); /* at the next recheck */
    assert_true(settled_ps > ps_at && settled_ps <= ps_at + 3 * 80);
}

/* Back after a burst: ALLGATHER runs at 0.8x HIERARCHICAL, but from call 200 to 350 a burst of
 * load stretches ALLGATHER's calls 3x (HIERARCHICAL's rechecks miss it), and AUTO moves to
 * HIERARCHICAL. ALLGATHER's last window holds the burst, 3x beyond the drop, yet its best window
 * keeps it a survivor: a recheck after the burst finds it faster again and AUTO moves back. (The
 * tuner that judged survival on the last window stayed on HIERARCHICAL to the end.) */
static void test_back_after_burst(void **state)
{
    (void)state;
    double pred[ZEN_SPARSE_SCHEME_COUNT], t[ZEN_SPARSE_SCHEME_COUNT];
    set_times(pred, 9, 1, 1, 9, 9, 9);
    set_times(t, 9, 1.0, 0.8, 9, 9, 9);
    zen_auto_tune_params tp = backoff_params();
    zen_auto_tune tune;
    zen__auto_tune_init(&tune);
    int left_ag = -1, on_ag_late = 0, exploit_late = 0;
    for (int call = 0; call < 1000; call++) {
        zen_auto_tune_kind kind;
        int s = (int)zen__auto_tune_choose(&tune, &tp, pred, &kind, NULL);
        int burst = call >= 200 && call < 350 && s == ZEN_SPARSE_ALLGATHER;
        zen__auto_tune_observe(&tune, &tp, t[s] * (burst ? 3.0 : 1.0));
        if (kind == ZEN_TUNE_EXPLOIT && s == ZEN_SPARSE_HIERARCHICAL && call >= 200 && left_ag < 0)
            left_ag = call;
        if (call >= 600 && kind == ZEN_TUNE_EXPLOIT) {
            exploit_late++;
            on_ag_late += s == ZEN_SPARSE_ALLGATHER;
        }
    }
    assert_true(left_ag >= 200 && left_ag < 350); /* the burst did move it */
    assert_true(exploit_late > 350);
    assert_int_equal(on_ag_late, exploit_late);
}

/* Part of a call's work shows in the next call's time (as on the 4-rank trace): HIERARCHICAL
 * takes 0.45 and leaves 0.2 to the call after it, ALLGATHER takes 0.4 and leaves nothing. After
 * itself HIERARCHICAL takes 0.65 and ALLGATHER 0.4, but in alternation HIERARCHICAL's calls take
 * 0.45 and ALLGATHER's 0.6. Measured after themselves, ALLGATHER wins; the tuner that compared
 * calls right after another scheme's settled on HIERARCHICAL and stayed there. */
static void test_measured_after_itself(void **state)
{
    (void)state;
    double pred[ZEN_SPARSE_SCHEME_COUNT], own[ZEN_SPARSE_SCHEME_COUNT],
        tail[ZEN_SPARSE_SCHEME_COUNT];
    set_times(pred, 9, 1, 1, 9, 9, 9);
    set_times(own, 9, 0.45, 0.4, 9, 9, 9);
    set_times(tail, 0, 0.2, 0, 0, 0, 0);
    zen_auto_tune_params tp = backoff_params();
    zen_auto_tune tune;
    zen__auto_tune_init(&tune);
    int prev = 0, on_ag = 0, exploits = 0;
    double total = 0;
    for (int call = 0; call < 1000; call++) {
        zen_auto_tune_kind kind;
        int s = (int)zen__auto_tune_choose(&tune, &tp, pred, &kind, NULL);
        double took = own[s] + tail[prev];
        zen__auto_tune_observe(&tune, &tp, took);
        total += took;
        prev = s;
        if (call >= 100 && kind == ZEN_TUNE_EXPLOIT) {
            exploits++;
            on_ag += s == ZEN_SPARSE_ALLGATHER;
        }
    }
    assert_int_equal(on_ag, exploits);
    assert_true(total <= 1.05 * 0.4 * 1000); /* warm-up and rechecks included */
}

/* A switch that was noise is undone at once: five lucky compared calls of HIERARCHICAL in a row
 * (a whole challenge) move AUTO to it. BALANCED, the scheme just left, challenges back at once
 * and AUTO is on it again within a few calls, not at the first recheck ten calls later. */
static void test_noise_switch_undone(void **state)
{
    (void)state;
    int scheme[LUCKY_CALLS], moved_at = -1, back_at = -1;
    zen_auto_tune_kind kind[LUCKY_CALLS];
    zen_auto_tune tune;
    assert_true(lucky_rechecks(5, scheme, kind, &tune) >= 300);
    for (int call = 0; call < LUCKY_CALLS; call++) {
        int hier = scheme[call] == ZEN_SPARSE_HIERARCHICAL;
        if (kind[call] == ZEN_TUNE_EXPLOIT && hier && moved_at < 0)
            moved_at = call;
        if (kind[call] == ZEN_TUNE_EXPLOIT && !hier && moved_at >= 0 && back_at < 0)
            back_at = call;
    }
    assert_true(moved_at > 300);
    /* BALANCED's five compared calls, each after a first one, and HIERARCHICAL's between */
    assert_true(back_at > moved_at && back_at <= moved_at + 5 * 4 + 2);
    assert_int_equal(tune.settled, ZEN_SPARSE_BALANCED);
}

/* The machine-wide scale is the median measured / predicted of the schemes measured twice: a
 * model 2x too fast for every scheme but one (which it gets right) is scaled by 2. */
static void test_machine_scale(void **state)
{
    (void)state;
    zen_auto_tune t;
    zen__auto_tune_init(&t);
    double pred[ZEN_SPARSE_SCHEME_COUNT] = { 0, 1, 1, 1, 1, 1, 1 };
    double took[ZEN_SPARSE_SCHEME_COUNT] = { 0, 2, 2, 1, 2, 2, 2 };
    zen_auto_tune_params all = params;
    all.top = ZEN_SPARSE_SCHEME_COUNT; /* every scheme a candidate */
    all.prune = 100;
    assert_true(zen__auto_tune_scale(&t) == 0); /* nothing measured */
    for (int call = 0; call < 3 * (ZEN_SPARSE_SCHEME_COUNT - 1); call++) {
        int s = (int)zen__auto_tune_choose(&t, &all, pred, NULL, NULL);
        zen__auto_tune_observe(&t, &all, took[s]);
    }
    assert_float_equal(zen__auto_tune_scale(&t), 2.0, 1e-12);
}

/* A call that did not run the chosen scheme (hier-host ran its own sync) reports 0 seconds: it
 * must not count as a measurement (a corr of 0 would make that scheme look free forever). */
static void test_zero_time_ignored(void **state)
{
    (void)state;
    zen_auto_tune t;
    zen__auto_tune_init(&t);
    double pred[ZEN_SPARSE_SCHEME_COUNT] = { 0, 1, 2, 9, 9, 9, 9 };
    zen_sparse_scheme s = zen__auto_tune_choose(&t, &params, pred, NULL, NULL);
    zen__auto_tune_observe(&t, &params, 0);
    assert_int_equal(t.measured[s], 0);
    assert_int_equal(t.last, -1);
    assert_true(t.total_s == 0);
    assert_int_equal(t.prev, -1); /* the next call is not after the scheme it ran */
    /* a call the ranks did not agree on ran all the same: the next call comes after it */
    s = zen__auto_tune_choose(&t, &params, pred, NULL, NULL);
    zen__auto_tune_drop(&t);
    assert_int_equal(t.prev, s);
    zen__auto_tune_observe(&t, &params, 1.0); /* nothing pending: a no-op */
    assert_int_equal(t.prev, s);
    assert_int_equal(t.measured[s], 0);
}

/* The call's time from the ranks' own: the median of those that ran it (0: did not). */
static void test_call_time_over_ranks(void **state)
{
    (void)state;
    double odd[] = { 5, 1, 100, 2, 3 }, even[] = { 4, 0, 1, 0, 9, 2 }, none[] = { 0, 0 };
    assert_true(zen__auto_tune_call_time(odd, 5) == 3);  /* one slow rank does not move it */
    assert_true(zen__auto_tune_call_time(even, 6) == 3); /* (2 + 4) / 2 over 1, 2, 4, 9 */
    assert_true(zen__auto_tune_call_time(none, 2) == 0);
    double one[] = { 0, 7 };
    assert_true(zen__auto_tune_call_time(one, 2) == 7);
}

/* ---- on a communicator: injected timings, a wrong model, identical decisions ---- */

#define ROWS  20000
#define NNZ   300
#define CALLS 60

/* Deterministic "measured" times: PS fastest, BALANCED 1.5x, the rest 10x; rank r is 1% x r
 * slower, so the ranks' own times differ and every rank must learn the same one from them. */
static double fake_time(int rank, zen_sparse_scheme s, double measured)
{
    (void)measured;
    double base = s == ZEN_SPARSE_PS ? 1e-3 : s == ZEN_SPARSE_BALANCED ? 1.5e-3 : 10e-3;
    return base * (1.0 + 0.01 * rank);
}

typedef struct conv_arg {
    int seq[CALLS]; /* rank 0: the scheme of every call */
} conv_arg;

static void fill(int r, uint32_t *idx, float *val)
{
    for (size_t i = 0; i < NNZ; i++) {
        idx[i] = (uint32_t)((i * 997 + (size_t)r * 13) % ROWS);
        val[i] = (float)(1 + r);
    }
}

/* ref = the dense sum of every rank's rows; idx, val = this rank's. */
static void inputs(int n, int r, uint32_t *idx, float *val, float *ref)
{
    for (int q = 0; q < n; q++) {
        fill(q, idx, val);
        for (size_t i = 0; i < NNZ; i++)
            ref[idx[i]] += val[i];
    }
    fill(r, idx, val);
}

/* One AUTO call: the result equals the dense reference and every rank ran the same scheme. */
static zen_status agreed_call(zen_comm *comm, const zen_sparse_tensor *t, const char *key,
                              float *out, const float *ref, int *scheme)
{
    int n = zen_comm_size(comm), all[8];
    zen_sparse_options opts = ZEN_SPARSE_OPTIONS_INIT;
    opts.key = key;
    zen_sparse_stats stats;
    ZT_CHECK(comm, n <= 8);
    ZT_CHECK(comm, zen_sparse_allreduce_dense(comm, t, out, &opts, &stats) == ZEN_OK);
    ZT_CHECK(comm, memcmp(out, ref, ROWS * sizeof *out) == 0); /* small integers: exact */
    *scheme = (int)stats.scheme;
    ZT_CHECK(comm, zen_allgather(comm, scheme, all, 1, ZEN_I32) == ZEN_OK);
    for (int k = 0; k < n; k++)
        ZT_CHECK(comm, all[k] == *scheme); /* every rank made the same decision */
    return ZEN_OK;
}

static zen_status converge_rank(zen_comm *comm, void *arg)
{
    conv_arg *ca = arg;
    int n = zen_comm_size(comm), r = zen_comm_rank(comm), off_ps = 0, mine = -1;
    uint32_t idx[NNZ];
    float val[NNZ], *out = malloc(ROWS * sizeof *out), *ref = calloc(ROWS, sizeof *ref);
    inputs(n, r, idx, val, ref);
    zen_sparse_tensor t = { ROWS, 1, NNZ, ZEN_INDEX_U32, idx, ZEN_F32, val };
    zen_status st = ZEN_OK;
    for (int call = 0; call < CALLS && st == ZEN_OK; call++) {
        st = agreed_call(comm, &t, "auto-tune-converge", out, ref, &mine);
        if (r == 0)
            ca->seq[call] = mine;
        /* the model (biased) ranks BALANCED first, PS second, the rest far behind: the warm-up
         * measures those two 3 times each (ZEN_SPARSE_TUNE_WARM), then AUTO runs PS but for
         * budgeted rechecks */
        if (call < 6)
            ZT_CHECK(comm, mine == ZEN_SPARSE_BALANCED || mine == ZEN_SPARSE_PS);
        else
            off_ps += mine != ZEN_SPARSE_PS;
    }
    ZT_CHECK(comm, off_ps <= CALLS / 10); /* ZEN_SPARSE_EXPLORE_PERIOD 10 */
    free(out);
    free(ref);
    return st;
}

/* One process of a job loses its AUTO state (an eviction) while the others keep theirs: the
 * digests in the agreement differ, every rank takes the record exchange and starts the key over,
 * and the decisions stay identical, the results right. */
static zen_status forget_rank(zen_comm *comm, void *arg)
{
    (void)arg;
    int n = zen_comm_size(comm), r = zen_comm_rank(comm), mine = -1;
    uint32_t idx[NNZ];
    float val[NNZ], *out = malloc(ROWS * sizeof *out), *ref = calloc(ROWS, sizeof *ref);
    inputs(n, r, idx, val, ref);
    zen__sparse_auto_time_hook(fake_time); /* a forked process: its own hook */
    zen_sparse_tensor t = { ROWS, 1, NNZ, ZEN_INDEX_U32, idx, ZEN_F32, val };
    zen_status st = ZEN_OK;
    for (int call = 0; call < 24 && st == ZEN_OK; call++) {
        if (call == 10 && r == 1)
            zen__sparse_auto_forget_all();
        st = agreed_call(comm, &t, "auto-tune-forget", out, ref, &mine);
        if (call == 9 || call == 23) /* settled before the loss, and again after its warm-up */
            ZT_CHECK(comm, mine == ZEN_SPARSE_PS);
    }
    free(out);
    free(ref);
    return st;
}

static void test_rank_loses_state(void **state)
{
    (void)state;
    setenv("ZEN_SPARSE_MODEL_BIAS", "balanced=1e-7,ps=1e-5", 1);
    setenv("ZEN_SPARSE_EXPLORE_PERIOD", "0", 1); /* no recheck at the checked calls */
    zt_run_forked(ZEN_TRANSPORT_SHM, 3, NULL, NULL, forget_rank, NULL, 120);
    unsetenv("ZEN_SPARSE_EXPLORE_PERIOD");
    unsetenv("ZEN_SPARSE_MODEL_BIAS");
}

/* The same decisions whether the ranks exchange their records on every call or decide from the
 * agreed state in between (ZEN_SPARSE_AUTO_RECHECK), on 4 and 3 ranks. */
/* PS takes 1 ms and BALANCED 1.3 ms on every rank, but in every call one rank, a different one
 * each time, is held up by 0-10 ms (a host that descheduled it after the collective's last
 * message): the slowest rank's time is mostly that delay, the ranks' median is not. */
static _Thread_local unsigned held_calls;

static double held_up_time(int rank, zen_sparse_scheme s, double measured)
{
    (void)measured;
    double t = s == ZEN_SPARSE_PS ? 1e-3 : s == ZEN_SPARSE_BALANCED ? 1.3e-3 : 10e-3;
    uint64_t h = zen_hash64(held_calls++, 12345);
    if ((int)(h % 5) == rank) /* 5 ranks */
        t += (double)((h >> 16) % 10000) * 1e-6;
    return t;
}

static zen_status held_up_rank(zen_comm *comm, void *arg)
{
    int *off_ps = arg, n = zen_comm_size(comm), r = zen_comm_rank(comm), mine = -1;
    uint32_t idx[NNZ];
    float val[NNZ], *out = malloc(ROWS * sizeof *out), *ref = calloc(ROWS, sizeof *ref);
    inputs(n, r, idx, val, ref);
    held_calls = 0;
    zen_sparse_tensor t = { ROWS, 1, NNZ, ZEN_INDEX_U32, idx, ZEN_F32, val };
    zen_status st = ZEN_OK;
    for (int call = 0; call < CALLS && st == ZEN_OK; call++) {
        st = agreed_call(comm, &t, "auto-tune-held-up", out, ref, &mine);
        if (r == 0 && call >= 20)
            *off_ps += mine != ZEN_SPARSE_PS;
    }
    free(out);
    free(ref);
    return st;
}

static void test_one_rank_held_up(void **state)
{
    (void)state;
    setenv("ZEN_SPARSE_MODEL_BIAS", "balanced=1e-7,ps=1e-5",
           1); /* the model ranks BALANCED first */
    zen__sparse_auto_time_hook(held_up_time);
    int off_ps = 0;
    zt_run_inproc(5, held_up_rank, &off_ps);
    /* PS but for the rechecks of BALANCED (two calls each, 4 in these 40 calls); told the slowest
     * rank's time instead, AUTO ran BALANCED in 34 of them */
    assert_true(off_ps <= (CALLS - 20) / 5);
    zen__sparse_auto_time_hook(NULL);
    unsetenv("ZEN_SPARSE_MODEL_BIAS");
}

/* PS 1 ms and BALANCED 1.5 ms on every rank, and rank 0 takes `slow` times as long on every call:
 * the ranks' median stays, the slowest rank's time (what a call costs the job) moves. */
static double slow_rank0 = 1;

static double rank0_slow_time(int rank, zen_sparse_scheme s, double measured)
{
    return fake_time(0, s, measured) * (rank == 0 ? slow_rank0 : 1);
}

typedef struct spread_arg {
    int seq[40];
    double predicted_ps; /* rank 0: stats.predicted_s[PS] of the last call */
} spread_arg;

static zen_status spread_rank(zen_comm *comm, void *arg)
{
    spread_arg *sa = arg;
    int n = zen_comm_size(comm), r = zen_comm_rank(comm);
    uint32_t idx[NNZ];
    float val[NNZ], *out = malloc(ROWS * sizeof *out), *ref = calloc(ROWS, sizeof *ref);
    inputs(n, r, idx, val, ref);
    zen_sparse_tensor t = { ROWS, 1, NNZ, ZEN_INDEX_U32, idx, ZEN_F32, val };
    zen_sparse_options opts = ZEN_SPARSE_OPTIONS_INIT;
    opts.key = "auto-tune-spread";
    zen_status st = ZEN_OK;
    for (int call = 0; call < 40 && st == ZEN_OK; call++) {
        zen_sparse_stats stats;
        st = zen_sparse_allreduce_dense(comm, &t, out, &opts, &stats);
        if (r == 0) {
            sa->seq[call] = (int)stats.scheme;
            sa->predicted_ps = stats.predicted_s[ZEN_SPARSE_PS];
        }
    }
    free(out);
    free(ref);
    return st;
}

/* The tuner is told the ranks' median, but the model it reports (stats.predicted_s, scaled by
 * what the key's calls measured) predicts the slowest rank's time: with rank 0 1.5x slower on
 * every call the decisions are the same and the reported model is 1.5x higher. */
static void test_reported_model_is_slowest_rank(void **state)
{
    (void)state;
    zen__sparse_auto_time_hook(rank0_slow_time);
    spread_arg even, slow;
    slow_rank0 = 1;
    zt_run_inproc(3, spread_rank, &even);
    slow_rank0 = 1.5;
    zt_run_inproc(3, spread_rank, &slow);
    zen__sparse_auto_time_hook(NULL);
    assert_memory_equal(even.seq, slow.seq, sizeof even.seq);
    double ratio = slow.predicted_ps / even.predicted_ps;
    assert_true(ratio > 1.4 && ratio < 1.6);
}

/* AUTO's bookkeeping is spaced by the calls' time (ZEN_SPARSE_AUTO_OVERHEAD): told that every
 * call takes 0.1 us, the ranks exchange their records and re-measure the profile 8x less often
 * than ZEN_SPARSE_AUTO_RECHECK and ZEN_SPARSE_PROFILE_PERIOD ask (both 2 here), no less; told 10 s,
 * or with the share 0, at those periods. A call that exchanges sends more messages than a quiet
 * one, a profile re-measure more again; the data turn disjoint at call SPACED_CHANGE, which the
 * ranks see at the next re-measure (gamma_n from 1 to n). */
#define SPACED_CALLS  120
#define SPACED_CHANGE 80

static double spaced_call_s;

static double spaced_time(int rank, zen_sparse_scheme s, double measured)
{
    (void)rank;
    (void)s;
    (void)measured;
    return spaced_call_s;
}

typedef struct spaced_arg {
    uint64_t msgs[SPACED_CALLS]; /* rank 0: messages sent by each call */
    double gamma[SPACED_CALLS];  /* rank 0: stats.gamma_n of each call */
} spaced_arg;

static zen_status spaced_rank(zen_comm *comm, void *arg)
{
    spaced_arg *sa = arg;
    int n = zen_comm_size(comm), r = zen_comm_rank(comm), all[8];
    uint32_t idx[NNZ];
    float val[NNZ], *out = malloc(ROWS * sizeof *out);
    zen_sparse_tensor t = { ROWS, 1, NNZ, ZEN_INDEX_U32, idx, ZEN_F32, val };
    zen_sparse_options opts = ZEN_SPARSE_OPTIONS_INIT;
    opts.key = "auto-tune-spaced";
    ZT_CHECK(comm, n <= 8);
    zen_status st = ZEN_OK;
    for (int call = 0; call < SPACED_CALLS && st == ZEN_OK; call++) {
        int disjoint = call >= SPACED_CHANGE;
        for (size_t i = 0; i < NNZ; i++) {
            idx[i] = disjoint ? (uint32_t)((i * (size_t)n + (size_t)r) * 5) : (uint32_t)(i * 11);
            val[i] = 2.0f;
        }
        zen_sparse_stats stats;
        st = zen_sparse_allreduce_dense(comm, &t, out, &opts, &stats);
        ZT_CHECK(comm, st == ZEN_OK);
        for (size_t i = 0; i < NNZ; i++)
            ZT_CHECK(comm, out[idx[i]] == (disjoint ? 2.0f : 2.0f * (float)n));
        int mine = (int)stats.scheme;
        ZT_CHECK(comm, zen_allgather(comm, &mine, all, 1, ZEN_I32) == ZEN_OK);
        for (int k = 0; k < n; k++)
            ZT_CHECK(comm, all[k] == mine);
        if (r == 0) {
            sa->msgs[call] = stats.msgs_sent;
            sa->gamma[call] = stats.gamma_n;
        }
    }
    free(out);
    return st;
}

/* Calls in [from, to) that sent more messages than the quietest call of that range. */
static int busy_calls(const spaced_arg *sa, int from, int to)
{
    uint64_t quiet = UINT64_MAX;
    for (int c = from; c < to; c++)
        quiet = sa->msgs[c] < quiet ? sa->msgs[c] : quiet;
    int busy = 0;
    for (int c = from; c < to; c++)
        busy += sa->msgs[c] > quiet;
    return busy;
}

static int first_disjoint_gamma(const spaced_arg *sa, int n)
{
    for (int c = SPACED_CHANGE; c < SPACED_CALLS; c++)
        if (fabs(sa->gamma[c] - n) < 1e-9)
            return c;
    return SPACED_CALLS;
}

/* Runs told tiny calls, long calls, and tiny calls with the share 0; profile: the re-measure
 * period (the exchange period is 2). */
static void spaced_runs(const char *profile, int n, spaced_arg *tiny, spaced_arg *slow,
                        spaced_arg *fixed)
{
    setenv("ZEN_SPARSE_PROFILE_PERIOD", profile, 1);
    spaced_call_s = 1e-7;
    zt_run_inproc(n, spaced_rank, tiny);
    spaced_call_s = 10;
    zt_run_inproc(n, spaced_rank, slow);
    setenv("ZEN_SPARSE_AUTO_OVERHEAD", "0", 1);
    spaced_call_s = 1e-7;
    zt_run_inproc(n, spaced_rank, fixed);
    unsetenv("ZEN_SPARSE_AUTO_OVERHEAD");
    unsetenv("ZEN_SPARSE_PROFILE_PERIOD");
}

static void test_bookkeeping_spaced(void **state)
{
    (void)state;
    const int n = 4, from = 8, span = SPACED_CHANGE - from; /* past the key's first exchanges */
    setenv("ZEN_SPARSE_MODEL_BIAS", "ps=1e-5", 1);
    setenv("ZEN_SPARSE_TUNE_WARM", "0", 1);
    setenv("ZEN_SPARSE_EXPLORE_PERIOD", "0", 1); /* PS on every call: its messages are constant */
    setenv("ZEN_SPARSE_AUTO_RECHECK", "2", 1);
    zen__sparse_auto_time_hook(spaced_time);
    spaced_arg *run = calloc(3, sizeof *run);
    /* exchanges alone (no re-measure within the run but the first), then with re-measures */
    spaced_runs("100000", n, &run[0], &run[1], &run[2]);
    assert_true(busy_calls(&run[0], from, SPACED_CHANGE) <= span / 16 + 1);
    assert_true(busy_calls(&run[0], from, SPACED_CHANGE) >= span / 16 - 1);
    assert_true(busy_calls(&run[1], from, SPACED_CHANGE) >= span / 2 - 1);
    assert_true(busy_calls(&run[2], from, SPACED_CHANGE) >= span / 2 - 1);
    spaced_runs("2", n, &run[0], &run[1], &run[2]);
    assert_true(busy_calls(&run[0], from, SPACED_CHANGE) <= span / 16 + 1);
    assert_true(busy_calls(&run[1], from, SPACED_CHANGE) >= span / 2 - 1);
    /* the change is seen within 8 periods when spaced, within one otherwise */
    int seen_tiny = first_disjoint_gamma(&run[0], n), seen_slow = first_disjoint_gamma(&run[1], n),
        seen_fixed = first_disjoint_gamma(&run[2], n);
    assert_true(seen_tiny <= SPACED_CHANGE + 16);
    assert_true(seen_slow <= SPACED_CHANGE + 2 && seen_fixed <= SPACED_CHANGE + 2);
    zen__sparse_auto_time_hook(NULL);
    unsetenv("ZEN_SPARSE_AUTO_RECHECK");
    unsetenv("ZEN_SPARSE_EXPLORE_PERIOD");
    unsetenv("ZEN_SPARSE_TUNE_WARM");
    unsetenv("ZEN_SPARSE_MODEL_BIAS");
    free(run);
}

static void test_converges_on_measurement(void **state)
{
    (void)state;
    setenv("ZEN_SPARSE_MODEL_BIAS", "balanced=1e-7,ps=1e-5", 1);
    zen__sparse_auto_time_hook(fake_time);
    setenv("ZEN_SPARSE_AUTO_OVERHEAD", "0", 1); /* exchanges at exactly those periods */
    for (int n = 3; n <= 4; n++) {
        conv_arg every, quiet;
        setenv("ZEN_SPARSE_AUTO_RECHECK", "1", 1);
        zt_run_inproc(n, converge_rank, &every);
        setenv("ZEN_SPARSE_AUTO_RECHECK", "7", 1);
        zt_run_inproc(n, converge_rank, &quiet);
        assert_memory_equal(every.seq, quiet.seq, sizeof every.seq);
    }
    zen__sparse_auto_time_hook(NULL);
    unsetenv("ZEN_SPARSE_AUTO_OVERHEAD");
    unsetenv("ZEN_SPARSE_AUTO_RECHECK");
    unsetenv("ZEN_SPARSE_MODEL_BIAS");
}

/* A keyed tensor whose density drops 8x after REGIME_SWITCH calls (a top-k hook's ratio warm-up
 * ends), with times that rank the schemes differently before and after: at NNZ_A rows per rank
 * BLOCK takes 1 ms and ALLGATHER 2 ms, at NNZ_B (8x fewer) ALLGATHER 1 ms and BLOCK 4 ms, every
 * other scheme 10 ms. The biased model ranks BLOCK then ALLGATHER first at both densities, so the
 * warm-up measures those two. The tuner settled on BLOCK must not be carried into the new regime:
 * the density change restarts it (ZEN_SPARSE_AUTO_REGIME), its warm-up measures both again, and
 * the calls after that warm-up run ALLGATHER. Without the restart BLOCK keeps running until a
 * budgeted recheck and a window of paired calls overturn it (about half the calls of the checked
 * stretch run BLOCK). */
#define NNZ_A         2400
#define NNZ_B         300
#define REGIME_SWITCH 30
#define REGIME_CALLS  60

static _Thread_local int regime_dense; /* this rank's calls are at NNZ_A */

static double regime_time(int rank, zen_sparse_scheme s, double measured)
{
    (void)measured;
    double fast = 1e-3, slow = 10e-3;
    double block = regime_dense ? fast : 4 * fast, ag = regime_dense ? 2 * fast : fast;
    double base = s == ZEN_SPARSE_BLOCK ? block : s == ZEN_SPARSE_ALLGATHER ? ag : slow;
    return base * (1.0 + 0.01 * rank);
}

typedef struct regime_arg {
    int seq[REGIME_CALLS]; /* rank 0: the scheme of every call */
} regime_arg;

static void regime_fill(int r, size_t nnz, uint32_t *idx, float *val)
{
    for (size_t i = 0; i < nnz; i++) {
        idx[i] = (uint32_t)((i * 997 + (size_t)r * 13) % ROWS);
        val[i] = (float)(1 + r);
    }
}

static zen_status regime_rank(zen_comm *comm, void *arg)
{
    regime_arg *ra = arg;
    int n = zen_comm_size(comm), r = zen_comm_rank(comm), mine = -1;
    uint32_t *idx = malloc(NNZ_A * sizeof *idx);
    float *val = malloc(NNZ_A * sizeof *val), *out = malloc(ROWS * sizeof *out);
    float *ref = malloc(ROWS * sizeof *ref);
    ZT_CHECK(comm, idx && val && out && ref);
    zen_status st = ZEN_OK;
    for (int call = 0; call < REGIME_CALLS && st == ZEN_OK; call++) {
        size_t nnz = call < REGIME_SWITCH ? NNZ_A : NNZ_B;
        regime_dense = call < REGIME_SWITCH;
        memset(ref, 0, ROWS * sizeof *ref);
        for (int q = 0; q < n; q++) {
            regime_fill(q, nnz, idx, val);
            for (size_t i = 0; i < nnz; i++)
                ref[idx[i]] += val[i];
        }
        regime_fill(r, nnz, idx, val);
        zen_sparse_tensor t = { ROWS, 1, nnz, ZEN_INDEX_U32, idx, ZEN_F32, val };
        st = agreed_call(comm, &t, "auto-tune-regime", out, ref, &mine);
        if (r == 0)
            ra->seq[call] = mine;
    }
    free(idx);
    free(val);
    free(out);
    free(ref);
    return st;
}

static int count_runs(const int *seq, int from, int to, int scheme)
{
    int k = 0;
    for (int i = from; i < to; i++)
        k += seq[i] == scheme;
    return k;
}

static void test_density_regime_restarts_tuner(void **state)
{
    (void)state;
    setenv("ZEN_SPARSE_MODEL_BIAS", "block=1e-7,allgather=1e-5", 1);
    setenv("ZEN_SPARSE_AUTO_OVERHEAD", "0", 1); /* exchanges at exactly those periods */
    zen__sparse_auto_time_hook(regime_time);
    regime_arg every, quiet, off;
    setenv("ZEN_SPARSE_AUTO_RECHECK", "1", 1);
    zt_run_inproc(4, regime_rank, &every);
    /* between record exchanges too: the ranks whose input moved ask for one at once */
    setenv("ZEN_SPARSE_AUTO_RECHECK", "7", 1);
    zt_run_inproc(4, regime_rank, &quiet);
    assert_memory_equal(every.seq, quiet.seq, sizeof every.seq);
    /* settled on BLOCK in the first regime (past its 6-call warm-up) */
    assert_true(count_runs(every.seq, 6, REGIME_SWITCH, ZEN_SPARSE_BLOCK) >= 20);
    /* the second regime's warm-up measures both again (3 calls each), then ALLGATHER */
    int after = REGIME_SWITCH + 6;
    assert_int_equal(count_runs(every.seq, REGIME_SWITCH, after, ZEN_SPARSE_BLOCK), 3);
    assert_true(count_runs(every.seq, after, REGIME_CALLS, ZEN_SPARSE_ALLGATHER) >=
                REGIME_CALLS - after - 2);
    /* the control: with the restart off, BLOCK runs on in the second regime */
    setenv("ZEN_SPARSE_AUTO_REGIME", "0", 1);
    setenv("ZEN_SPARSE_AUTO_RECHECK", "1", 1);
    zt_run_inproc(4, regime_rank, &off);
    assert_true(count_runs(off.seq, after, REGIME_CALLS, ZEN_SPARSE_BLOCK) >= 6);
    unsetenv("ZEN_SPARSE_AUTO_REGIME");
    zen__sparse_auto_time_hook(NULL);
    unsetenv("ZEN_SPARSE_AUTO_RECHECK");
    unsetenv("ZEN_SPARSE_AUTO_OVERHEAD");
    unsetenv("ZEN_SPARSE_MODEL_BIAS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optimistic_model),
        cmocka_unit_test(test_pessimistic_model),
        cmocka_unit_test(test_few_calls_cold_start),
        cmocka_unit_test(test_warm_up_favourite_last),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_zero_time_ignored),
        cmocka_unit_test(test_machine_scale),
        cmocka_unit_test(test_recheck_backoff),
        cmocka_unit_test(test_switch_on_pairs),
        cmocka_unit_test(test_lucky_recheck_loses_early),
        cmocka_unit_test(test_no_warmup_after_settling),
        cmocka_unit_test(test_back_after_burst),
        cmocka_unit_test(test_measured_after_itself),
        cmocka_unit_test(test_noise_switch_undone),
        cmocka_unit_test(test_converges_on_measurement),
        cmocka_unit_test(test_bookkeeping_spaced),
        cmocka_unit_test(test_call_time_over_ranks),
        cmocka_unit_test(test_one_rank_held_up),
        cmocka_unit_test(test_reported_model_is_slowest_rank),
        cmocka_unit_test(test_rank_loses_state),
        cmocka_unit_test(test_density_regime_restarts_tuner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
