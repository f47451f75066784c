/*
 * The fault injector over inproc ranks (the tcp process tests in test_tcp.c use it too):
 * ZEN_FAULT parsing, and each action's observable effect: delay keeps results right, drop makes
 * the receiver time out naming the sender, truncate and corrupt alter exactly what they say, kill
 * makes every survivor fail with an error naming the dead rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "transport/faulty.h"

#define MAX_RANKS 8

struct outcome {
    zen_status st[MAX_RANKS];
    char err[MAX_RANKS][640];
};

/* Run fn on n ranks with ZEN_FAULT=spec and a short timeout; record each rank's result. */
static void run_faulty(int n, const char *spec, double timeout_s, zen_rank_fn fn,
                       struct outcome *out)
{
    memset(out, 0, sizeof *out);
    setenv("ZEN_FAULT", spec, 1);
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.timeout_s = timeout_s;
    zen_status status[MAX_RANKS];
    (void)zen_run_inproc(n, &o, fn, out, status);
    unsetenv("ZEN_FAULT");
}

static void record(zen_comm *c, struct outcome *out, zen_status st)
{
    int r = zen_comm_rank(c);
    out->st[r] = st;
    snprintf(out->err[r], sizeof out->err[r], "%s", zen_comm_last_error(c));
}

static void test_parse(void **state)
{
    (void)state;
    zen_fault_config cfg;
    assert_int_equal(zen__fault_parse("rank=3,after=7,action=delay,ms=25,count=0,peer=1", &cfg),
                     ZEN_OK);
    assert_int_equal(cfg.rank, 3);
    assert_int_equal(cfg.after, 7);
    assert_int_equal(cfg.action, ZEN_FAULT_DELAY);
    assert_int_equal(cfg.ms, 25);
    assert_int_equal(cfg.count, 0);
    assert_int_equal(cfg.peer, 1);
    assert_int_equal(zen__fault_parse("action=kill,rank=0", &cfg), ZEN_OK);
    assert_int_equal(cfg.after, 0);
    assert_int_equal(cfg.count, 1);
    assert_int_equal(cfg.peer, -1);
    assert_int_equal(zen__fault_parse("rank=1", &cfg), ZEN_EINVAL);
    assert_int_equal(zen__fault_parse("action=drop", &cfg), ZEN_EINVAL);
    assert_int_equal(zen__fault_parse("rank=1,action=explode", &cfg), ZEN_EINVAL);
    assert_int_equal(zen__fault_parse("rank=x,action=drop", &cfg), ZEN_EINVAL);
    assert_int_equal(zen__fault_parse("rank=1,action=drop,after=-2", &cfg), ZEN_EINVAL);
    assert_int_equal(zen__fault_parse("rank=1,action=drop,bogus=1", &cfg), ZEN_EINVAL);
}

static zen_status create_only(zen_comm *c, void *arg)
{
    (void)c;
    (void)arg;
    return ZEN_OK;
}

static void test_malformed_env_fails_create(void **state)
{
    (void)state;
    setenv("ZEN_FAULT", "rank=0,action=nonsense", 1);
    zen_status status[2];
    zen_status st = zen_run_inproc(2, NULL, create_only, NULL, status);
    unsetenv("ZEN_FAULT");
    assert_int_equal(status[0], ZEN_EINVAL);
    assert_int_not_equal(st, ZEN_OK);
}

/* Ring exchange + allgather + allreduce, checked against local references. */
static zen_status ring_and_collectives(zen_comm *c, void *arg)
{
    (void)arg;
    int n = zen_comm_size(c), r = zen_comm_rank(c);
    for (int round = 0; round < 3; round++) {
        int out[4] = { r, round, r * round, 9 }, in[4] = { -1, -1, -1, -1 };
        zen_request *rq = NULL;
        ZT_CHECK(c, zen_irecv(c, in, sizeof in, (r + n - 1) % n, round, &rq) == ZEN_OK);
        ZT_CHECK(c, zen_send(c, out, sizeof out, (r + 1) % n, round) == ZEN_OK);
        ZT_CHECK(c, zen_request_wait(rq, -1, NULL) == ZEN_OK);
        zen_request_destroy(rq);
        int prev = (r + n - 1) % n;
        ZT_CHECK(c, in[0] == prev && in[1] == round && in[2] == prev * round && in[3] == 9);
    }
    int64_t mine[3] = { r, 10 * r, -r }, all[3 * MAX_RANKS];
    ZT_CHECK(c, zen_allgather(c, mine, all, 3, ZEN_I64) == ZEN_OK);
    for (int p = 0; p < n; p++)
        ZT_CHECK(c, all[3 * p] == p && all[3 * p + 1] == 10 * p && all[3 * p + 2] == -p);
    double v[5], s[5];
    for (int i = 0; i < 5; i++)
        v[i] = r + i;
    ZT_CHECK(c, zen_allreduce(c, v, s, 5, ZEN_F64, ZEN_SUM) == ZEN_OK);
    for (int i = 0; i < 5; i++)
        ZT_CHECK(c, s[i] == (double)(n * (n - 1) / 2 + n * i));
    return ZEN_OK;
}

static void test_delay_keeps_results(void **state)
{
    (void)state;
    struct outcome out;
    run_faulty(4, "rank=1,after=0,action=delay,ms=20,count=0", 30, ring_and_collectives, &out);
    for (int r = 0; r < 4; r++)
        assert_int_equal(out.st[r], ZEN_OK);
}

/* Rank 1's message to rank 0 vanishes: rank 0 times out, and the error names rank 1. */
static zen_status drop_one(zen_comm *c, void *arg)
{
    struct outcome *out = arg;
    int v = 5;
    zen_status st = ZEN_OK;
    if (zen_comm_rank(c) == 1) {
        st = zen_send(c, &v, sizeof v, 0, 1);
        record(c, out, st);
        /* Stay until rank 0 is done (leaving would fail its receive with ZEN_EPEER instead),
         * waiting longer than rank 0's own timeout. */
        zen_request *rq = NULL;
        ZT_CHECK(c, zen_irecv(c, &v, sizeof v, 0, 2, &rq) == ZEN_OK);
        zen_status wst = zen_request_wait(rq, 30, NULL);
        zen_request_destroy(rq);
        ZT_CHECK(c, wst == ZEN_OK);
    } else {
        st = zen_recv(c, &v, sizeof v, 1, 1, NULL);
        record(c, out, st);
        ZT_CHECK(c, zen_send(c, &v, sizeof v, 1, 2) == ZEN_OK);
    }
    return ZEN_OK;
}

static void test_drop_times_out_naming_sender(void **state)
{
    (void)state;
    struct outcome out;
    run_faulty(2, "rank=1,after=0,action=drop,count=1", 0.5, drop_one, &out);
    assert_int_equal(out.st[1], ZEN_OK);
    assert_int_equal(out.st[0], ZEN_ETIMEDOUT);
    assert_non_null(strstr(out.err[0], "rank 1"));
}

/* Truncate and corrupt: rank 1 sends 1001 bytes, rank 0 checks exactly what arrived. */
static zen_status send_pattern(zen_comm *c, void *arg)
{
    struct outcome *out = arg;
    unsigned char buf[1001];
    for (int i = 0; i < 1001; i++)
        buf[i] = (unsigned char)(i * 13 + 1);
    zen_status st;
    size_t got = 0;
    if (zen_comm_rank(c) == 1) {
        st = zen_send(c, buf, sizeof buf, 0, 4);
    } else {
        unsigned char in[1001];
        memset(in, 0, sizeof in);
        st = zen_recv(c, in, sizeof in, 1, 4, &got);
        /* Encode what arrived: bit 0: length 500 (truncated), bit 1: length 1001, bit 2:
         * bytes at multiples of 7 differ (by 0x5a), bit 3: all other bytes equal. */
        int flags = 0, others_equal = 1, sevens_flipped = 1;
        for (size_t i = 0; i < got; i++) {
            if (i % 7 == 0)
                sevens_flipped &= in[i] == (buf[i] ^ 0x5a);
            else
                others_equal &= in[i] == buf[i];
        }
        flags |= got == 500 ? 1 : 0;
        flags |= got == 1001 ? 2 : 0;
        flags |= sevens_flipped ? 4 : 0;
        flags |= others_equal ? 8 : 0;
        snprintf(out->err[0], sizeof out->err[0], "%d", flags);
        out->st[0] = st;
        return ZEN_OK;
    }
    record(c, out, st);
    return ZEN_OK;
}

static void test_truncate_and_corrupt(void **state)
{
    (void)state;
    struct outcome out;
    run_faulty(2, "rank=1,after=0,action=truncate", 5, send_pattern, &out);
    assert_int_equal(out.st[0], ZEN_OK);
    assert_int_equal(out.st[1], ZEN_OK);
    assert_int_equal(atoi(out.err[0]) & 1, 1); /* 500 bytes */
    assert_int_equal(atoi(out.err[0]) & 8, 8); /* a prefix of what was sent */
    run_faulty(2, "rank=1,after=0,action=corrupt", 5, send_pattern, &out);
    assert_int_equal(out.st[0], ZEN_OK);
    assert_int_equal(atoi(out.err[0]) & 2, 2);   /* full length */
    assert_int_equal(atoi(out.err[0]) & 12, 12); /* flipped exactly where promised */
    /* Without a fault the same exchange is intact (the check above can fail). */
    run_faulty(2, "rank=5,after=0,action=corrupt", 5, send_pattern, &out);
    assert_int_equal(atoi(out.err[0]) & 14, 10);
}

/* A truncated contribution to a collective: the receiving rank reports a count mismatch naming
 * the sender and nobody hangs. A rank whose own data never passed through the truncated message
 * may finish first (the log2 n allgather needs no message from rank 0 at rank 2 after round one);
 * it must then hold the right result. */
static zen_status allgather_once(zen_comm *c, void *arg)
{
    int64_t mine[2] = { 1, 2 }, all[2 * MAX_RANKS];
    zen_status st = zen_allgather(c, mine, all, 2, ZEN_I64);
    for (int j = 0; j < zen_comm_size(c) && st == ZEN_OK; j++)
        if (all[2 * j] != 1 || all[2 * j + 1] != 2)
            st = ZEN_EINTERNAL; /* finished, but with a wrong block: not allowed */
    record(c, arg, st);
    return ZEN_OK;
}

static void test_truncate_in_collective(void **state)
{
    (void)state;
    struct outcome out;
    run_faulty(3, "rank=1,after=0,action=truncate", 5, allgather_once, &out);
    int named = 0;
    for (int r = 0; r < 3; r++) {
        if (r == 1)
            continue;
        assert_int_not_equal(out.st[r], ZEN_EINTERNAL);
        named += out.st[r] == ZEN_EPROTO && strstr(out.err[r], "rank 1") != NULL;
    }
    assert_true(named >= 1);
}

/* Rank 2 dies mid-way through a series of collectives: every survivor fails naming it. */
static zen_status many_allgathers(zen_comm *c, void *arg)
{
    zen_status st = ZEN_OK;
    for (int it = 0; it < 30 && st == ZEN_OK; it++) {
        int32_t mine = zen_comm_rank(c) + it, all[MAX_RANKS];
        st = zen_allgather(c, &mine, all, 1, ZEN_I32);
        for (int p = 0; st == ZEN_OK && p < zen_comm_size(c); p++)
            ZT_CHECK(c, all[p] == p + it);
    }
    record(c, arg, st);
    return ZEN_OK;
}

static void test_kill(void **state)
{
    (void)state;
    struct outcome out;
    run_faulty(4, "rank=2,after=4,action=kill", 10, many_allgathers, &out);
    assert_int_not_equal(out.st[2], ZEN_OK);
    for (int r = 0; r < 4; r++) {
        if (r == 2)
            continue;
        if (!strstr(out.err[r], "rank 2"))
            fprintf(stderr, "rank %d: %s\n", r, out.err[r]);
        assert_true(out.st[r] == ZEN_EPEER || out.st[r] == ZEN_EABORTED);
        assert_non_null(strstr(out.err[r], "rank 2"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_malformed_env_fails_create),
        cmocka_unit_test(test_delay_keeps_results),
        cmocka_unit_test(test_drop_times_out_naming_sender),
        cmocka_unit_test(test_truncate_and_corrupt),
        cmocka_unit_test(test_truncate_in_collective),
        cmocka_unit_test(test_kill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
