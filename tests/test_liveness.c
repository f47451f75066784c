/*
 * Deadlines and blame that do not depend on the knobs (docs/security.md, "Hung peers"):
 *  - ZEN_TIMEOUT_S=inf: 16 MiB allreduces, far above the shm ring, over shm and over tcp, every
 *    element checked (before: the shm stall limit overflowed to a negative number and every
 *    message that needed more than one ring's worth failed at once, blaming a healthy rank);
 *  - ZEN_HEARTBEAT_S differing between ranks (0.5 on one, 10 on the others; inf on one, 1 on the
 *    others), over tcp, shm and mixed: a healthy job with idle pauses longer than the smallest setting finishes (before:
 *    the rank with the small setting named a healthy peer as hung, and nobody heard from the
 *    rank with inf);
 *  - ZEN_TIMEOUT_S=8 with the default 10 s heartbeat: a SIGSTOPped rank 2 of 4 is named by every
 *    survivor (before: the first rank to time out blamed the rank it waited for, a live one,
 *    and the others repeated that verdict);
 *  - heartbeat watching off everywhere (inf), timeout 4 s: the rank that times out names the
 *    silent rank from the heartbeats it no longer gets, not the rank it waited for.
 * Ranks are forked processes on 127.0.0.1.
 */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zen/zen.h>

#include "../tools/free_port.h"
#include "common/clock.h"
#include "shm_jobs.h"
#include "testutil.h"
#include "transport/liveness.h"

enum {
    N = 4,
    VICTIM = 2,
    LOOP_ELEMS = 1 << 14,
    BIG_ELEMS = 4 << 20 /* 16 MiB of floats */
};

typedef struct lv_run {
    zen_transport_kind kind;
    int n;
    const char *timeout_env;  /* ZEN_TIMEOUT_S of every rank (the options leave it to the env) */
    const char *heartbeat[N]; /* ZEN_HEARTBEAT_S per rank; NULL: unset (the default) */
    size_t elems;             /* healthy job: elements per allreduce */
    int rounds;               /* healthy job: allreduces, with idle_s of sleep after each */
    double idle_s;
    int stop; /* 1: the victim stops itself 1 s into an allreduce loop (no rounds) */
} lv_run;

/* Rounds of allreduce of (rank + 1) * (i % 7 + 1), each element checked against the sum. */
static zen_status healthy_rounds(const lv_run *run, zen_comm *c, int rank)
{
    float *x = malloc(run->elems * sizeof *x);
    if (!x)
        return ZEN_ENOMEM;
    float ranks_sum = (float)(run->n * (run->n + 1) / 2);
    zen_status st = ZEN_OK;
    for (int round = 0; round < run->rounds && st == ZEN_OK; round++) {
        for (size_t i = 0; i < run->elems; i++)
            x[i] = (float)(rank + 1) * (float)(i % 7 + 1);
        st = zen_allreduce(c, x, x, run->elems, ZEN_F32, ZEN_SUM);
        for (size_t i = 0; i < run->elems && st == ZEN_OK; i++)
            if (x[i] != ranks_sum * (float)(i % 7 + 1))
                st = ZEN_EINTERNAL;
        if (st == ZEN_OK && run->idle_s > 0)
            zen__sleep_ns(zen_ns_from_s(run->idle_s));
    }
    free(x);
    return st;
}

/* Allreduce in a loop until an error; the victim stops itself after 1 s. */
static zen_status stop_loop(const lv_run *run, zen_comm *c, int rank)
{
    static float x[LOOP_ELEMS];
    zen_status st = ZEN_OK;
    int64_t t0 = zen_now_ns();
    while (st == ZEN_OK) {
        if (rank == VICTIM && zen_now_ns() - t0 > 1000000000)
            raise(SIGSTOP);
        for (int i = 0; i < LOOP_ELEMS; i++)
            x[i] = 1.0f;
        st = zen_allreduce(c, x, x, LOOP_ELEMS, ZEN_F32, ZEN_SUM);
        if (st == ZEN_OK && x[LOOP_ELEMS - 1] != (float)run->n)
            st = ZEN_EINTERNAL;
    }
    return st;
}

/* A rank: its last error (or "ok") goes to its file; exit status 0 only when all went well. */
static void lv_rank(const lv_run *run, int rank, int port)
{
    int per_host = 2; /* mixed: ranks 0 and 1 share a host, ranks 2 and 3 another */
    if (run->kind == ZEN_TRANSPORT_MIXED)
        zt_set_host_id(rank, &per_host);
    setenv("ZEN_TIMEOUT_S", run->timeout_env, 1);
    if (run->heartbeat[rank])
        setenv("ZEN_HEARTBEAT_S", run->heartbeat[rank], 1);
    else
        unsetenv("ZEN_HEARTBEAT_S");
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.transport = run->kind;
    o.rank = rank;
    o.world_size = run->n;
    o.master_addr = "127.0.0.1";
    o.master_port = port;
    zen_comm *c = NULL;
    zen_status st = zen_comm_create(&o, &c);
    if (st == ZEN_OK)
        st = run->stop ? stop_loop(run, c, rank) : healthy_rounds(run, c, rank);
    zt_put_result("liveness", rank,
                  st == ZEN_OK ? "ok"
                  : c          ? zen_comm_last_error(c)
                               : "create failed");
    if (c) {
        if (st != ZEN_OK)
            zen_comm_abort(c);
        zen_comm_destroy(c);
    }
    _exit(st == ZEN_OK ? 0 : 1);
}

/* Run the job; lines[r] gets each rank's last error, status[r] its wait status, took[r] the
 * seconds from the start (or from the victim's stop) to its exit. Gives up after 60 s. */
static void run_job(const lv_run *run, char lines[N][512], int status[N], double took[N])
{
    int port = zen_free_port();
    pid_t pid[N];
    fflush(NULL);
    for (int r = 0; r < run->n; r++) {
        pid[r] = fork();
        assert_true(pid[r] >= 0);
        if (pid[r] == 0)
            lv_rank(run, r, port);
    }
    int64_t t0 = zen_now_ns();
    if (run->stop) {
        int st = 0;
        assert_int_equal(waitpid(pid[VICTIM], &st, WUNTRACED), pid[VICTIM]);
        assert_true(WIFSTOPPED(st));
        t0 = zen_now_ns();
    }
    for (int r = 0; r < run->n; r++) {
        status[r] = -1;
        took[r] = -1;
        if (run->stop && r == VICTIM)
            continue;
        while (waitpid(pid[r], &status[r], WNOHANG) == 0 && zen_now_ns() - t0 < 60e9)
            zen__sleep_ns(10000000);
        took[r] = (double)(zen_now_ns() - t0) / 1e9;
    }
    for (int r = 0; r < run->n; r++) {
        kill(pid[r], SIGKILL);
        waitpid(pid[r], NULL, 0);
        zt_take_result("liveness", r, lines[r], sizeof lines[r]);
        if (took[r] >= 0)
            fprintf(stderr, "rank %d after %.2f s: %s", r, took[r], lines[r]);
    }
}

static void expect_healthy(const lv_run *run)
{
    char lines[N][512];
    int status[N];
    double took[N];
    run_job(run, lines, status, took);
    for (int r = 0; r < run->n; r++) {
        assert_string_equal(lines[r], "ok\n");
        assert_true(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0);
    }
}

/* Every survivor names the victim as silent and no other rank as silent, within max_s. */
static void expect_victim_named(const lv_run *run, double max_s)
{
    char lines[N][512];
    int status[N];
    double took[N];
    run_job(run, lines, status, took);
    for (int r = 0; r < run->n; r++) {
        if (r == VICTIM)
            continue;
        assert_true(WIFEXITED(status[r]));
        assert_non_null(strstr(lines[r], "rank 2 sent nothing, not even a heartbeat"));
        for (int other = 0; other < run->n; other++) {
            char blame[64];
            snprintf(blame, sizeof blame, "rank %d sent nothing", other);
            assert_true(other == VICTIM || strstr(lines[r], blame) == NULL);
        }
        assert_true(took[r] < max_s);
    }
}

static void inf_timeout_big(zen_transport_kind kind)
{
    lv_run run = { .kind = kind, .n = 3, .timeout_env = "inf", .elems = BIG_ELEMS, .rounds = 2 };
    expect_healthy(&run);
}

static void test_inf_timeout_big_shm(void **state)
{
    (void)state;
    inf_timeout_big(ZEN_TRANSPORT_SHM);
}

static void test_inf_timeout_big_tcp(void **state)
{
    (void)state;
    inf_timeout_big(ZEN_TRANSPORT_TCP);
}

/* One rank far more sensitive than the others, whose beats come every 1 s: the setting is
 * agreed (the largest wins), so nobody is named during 2.5 s pauses. */
static void mismatched_small(zen_transport_kind kind)
{
    lv_run run = { .kind = kind,
                   .n = N,
                   .timeout_env = "60",
                   .heartbeat = { "0.5", "10", "10", "10" },
                   .elems = LOOP_ELEMS,
                   .rounds = 2,
                   .idle_s = 2.5 };
    expect_healthy(&run);
}

/* One rank with heartbeats off (inf) among ranks watching with 1 s: it still beats. */
static void mismatched_inf(zen_transport_kind kind)
{
    lv_run run = { .kind = kind,
                   .n = N,
                   .timeout_env = "60",
                   .heartbeat = { "1", "1", "inf", "1" },
                   .elems = LOOP_ELEMS,
                   .rounds = 2,
                   .idle_s = 2.5 };
    expect_healthy(&run);
}

static void test_mismatched_heartbeat_tcp(void **state)
{
    (void)state;
    mismatched_small(ZEN_TRANSPORT_TCP);
    mismatched_inf(ZEN_TRANSPORT_TCP);
}

static void test_mismatched_heartbeat_shm(void **state)
{
    (void)state;
    mismatched_small(ZEN_TRANSPORT_SHM);
    mismatched_inf(ZEN_TRANSPORT_SHM);
}

/* Mixed (two emulated hosts of two ranks): each rank learns its host peer's settings from the
 * segment head and the other host's over tcp; all must come to the same. */
static void test_mismatched_heartbeat_mixed(void **state)
{
    (void)state;
    mismatched_small(ZEN_TRANSPORT_MIXED);
    mismatched_inf(ZEN_TRANSPORT_MIXED);
}

/* ZEN_TIMEOUT_S=8 under the default 10 s heartbeat: the window follows the timeout (4 s). */
static void test_short_timeout_sigstop_tcp(void **state)
{
    (void)state;
    lv_run run = { .kind = ZEN_TRANSPORT_TCP, .n = N, .timeout_env = "8", .stop = 1 };
    expect_victim_named(&run, 8);
}

static void test_short_timeout_sigstop_shm(void **state)
{
    (void)state;
    lv_run run = { .kind = ZEN_TRANSPORT_SHM, .n = N, .timeout_env = "8", .stop = 1 };
    expect_victim_named(&run, 8);
}

/* Nobody watches (inf everywhere): the first rank to time out names the rank whose heartbeats
 * stopped, and the abort carries that verdict to the others. */
static void test_timeout_names_silent_rank_tcp(void **state)
{
    (void)state;
    lv_run run = { .kind = ZEN_TRANSPORT_TCP,
                   .n = N,
                   .timeout_env = "4",
                   .heartbeat = { "inf", "inf", "inf", "inf" },
                   .stop = 1 };
    expect_victim_named(&run, 10);
}

static zen_liveness settings(double hb_s, double timeout_s)
{
    zen_liveness l = { zen_ns_from_s(hb_s), zen_ns_from_s(timeout_s), hb_s < 1e9 };
    return zen__liveness_decode(zen__liveness_encode(&l));
}

/* The agreement rules of liveness.h, computed by hand: the largest finite heartbeat, the
 * smallest timeout, inf through the wire, the window cut to half the timeout but not below 2 s. */
static void test_settings_rules(void **state)
{
    (void)state;
    const int64_t s = 1000000000;
    zen_liveness agg = settings(0.5, 300);
    zen_liveness b = settings(10, 60), c = settings(INFINITY, INFINITY);
    zen__liveness_merge(&agg, &b);
    zen__liveness_merge(&agg, &c);
    assert_true(agg.hb_ns == 10 * s && agg.timeout_ns == 60 * s && agg.watch);
    assert_true(zen__liveness_beat_ns(&agg) == s);
    assert_true(zen__liveness_window_ns(&agg) == 10 * s);
    assert_true(zen__liveness_suspect_ns(&agg) == 5 * s);
    assert_true(c.hb_ns == INT64_MAX && c.timeout_ns == INT64_MAX && !c.watch);
    assert_true(zen__liveness_window_ns(&c) == INT64_MAX);
    assert_true(zen__liveness_beat_ns(&c) == s); /* beats also with everything off */
    zen_liveness t8 = settings(10, 8);           /* the case: 4 s window, 0.8 s beat */
    assert_true(zen__liveness_window_ns(&t8) == 4 * s && zen__liveness_beat_ns(&t8) == 8 * s / 10);
    zen_liveness t1 = settings(10, 1); /* 2 s floor, 0.1 s beat, 0.5 s suspect span */
    assert_true(zen__liveness_window_ns(&t1) == 2 * s && zen__liveness_suspect_ns(&t1) == s / 2);
    zen_liveness h1 = settings(1, 1); /* an explicit 1 s heartbeat is kept */
    assert_true(zen__liveness_window_ns(&h1) == s);
    zen_liveness huge = settings(1e8, 1e300); /* beyond 49.7 days in ms: inf on the wire */
    assert_true(huge.hb_ns == INT64_MAX && huge.timeout_ns == INT64_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settings_rules),
        cmocka_unit_test(test_inf_timeout_big_shm),
        cmocka_unit_test(test_inf_timeout_big_tcp),
        cmocka_unit_test(test_mismatched_heartbeat_tcp),
        cmocka_unit_test(test_mismatched_heartbeat_shm),
        cmocka_unit_test(test_mismatched_heartbeat_mixed),
        cmocka_unit_test(test_short_timeout_sigstop_tcp),
        cmocka_unit_test(test_short_timeout_sigstop_shm),
        cmocka_unit_test(test_timeout_names_silent_rank_tcp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
