/*
 * The delay line of zen_netswitch (bench/netswitch_line.c): release times against hand-computed
 * values and against an independent reference for a paced line (the closed form of the FIFO
 * queue, finish_k = max over j <= k of arrival_j + sum_{i=j..k} tx_i, instead of the recursion the
 * line uses), the bounds that make it drop, the FIFO order across ring wrap-around, and routing by
 * destination address. Times are given, never measured.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netswitch_line.h"
#include "testutil.h"

static ns_model model(int64_t delay_ns, uint64_t rate_bps)
{
    return (ns_model){ .delay_ns = delay_ns,
                       .rate_bps = rate_bps,
                       .max_wait_ns = 0,
                       .max_pkts = 1024,
                       .max_bytes = UINT64_MAX / 2 };
}

static ns_pkt pkt(uint32_t len, int dst)
{
    return (ns_pkt){ .buf = NULL, .len = len, .dst = dst };
}

static void test_tx_time(void **state)
{
    (void)state;
    assert_int_equal(ns_tx_ns(1000000000ull, 1500), 12000); /* 12000 bits at 1 Gbit/s */
    assert_int_equal(ns_tx_ns(10000000000ull, 65000), 52000);
    assert_int_equal(ns_tx_ns(3, 1), 2666666667ll); /* 8/3 s, rounded up */
    assert_int_equal(ns_tx_ns(0, 65000), 0);        /* unpaced */
}

/* Without a rate every packet is due exactly `delay` after it was read, in read order. */
static void test_unpaced_delay(void **state)
{
    (void)state;
    ns_model m = model(2000000, 0);
    ns_line l;
    assert_int_equal(ns_line_init(&l, &m), 0);
    const int64_t reads[] = { 100, 100, 5000, 7000000 };
    for (int i = 0; i < 4; i++)
        assert_int_equal(ns_line_push(&l, &m, reads[i], pkt(60000, i)), NS_ADMIT_OK);
    assert_int_equal(l.bytes, 4 * 60000);
    for (int i = 0; i < 4; i++) {
        const ns_pkt *h = ns_line_head(&l);
        assert_non_null(h);
        assert_int_equal(h->release_ns, reads[i] + 2000000);
        assert_int_equal(h->dst, i);
        ns_line_pop(&l);
    }
    assert_null(ns_line_head(&l));
    assert_int_equal(l.bytes, 0);
    ns_line_free(&l);
}

/* Back-to-back packets at 1 Gbit/s leave 8 ns per byte apart; after an idle gap the line starts
 * from the read time again. */
static void test_paced_by_hand(void **state)
{
    (void)state;
    ns_model m = model(50000, 1000000000ull);
    ns_line l;
    assert_int_equal(ns_line_init(&l, &m), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ns_line_push(&l, &m, 0, pkt(1000, 1)), NS_ADMIT_OK);
    assert_int_equal(ns_line_push(&l, &m, 1000000, pkt(500, 1)), NS_ADMIT_OK);
    const int64_t want[] = { 8000 + 50000, 16000 + 50000, 24000 + 50000, 1000000 + 4000 + 50000 };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ns_line_head(&l)->release_ns, want[i]);
        ns_line_pop(&l);
    }
    ns_line_free(&l);
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A random mix of bursts and gaps against the closed form of the single-server FIFO queue. */
static void test_paced_reference(void **state)
{
    (void)state;

    enum {
        N = 400
    };

    const uint64_t rate = 2500000000ull; /* 2.5 Gbit/s: 3.2 ns per byte */
    const int64_t delay = 123456;
    ns_model m = model(delay, rate);
    m.max_pkts = N;
    ns_line l;
    assert_int_equal(ns_line_init(&l, &m), 0);
    int64_t arrival[N], tx[N];
    uint32_t len[N];
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int64_t t = 1000;
    for (int k = 0; k < N; k++) {
        t += (rng(&seed) % 4 == 0) ? (int64_t)(rng(&seed) % 400000) : 0; /* bursts and gaps */
        arrival[k] = t;
        len[k] = 40 + (uint32_t)(rng(&seed) % 65000);
        /* serialization time from the rate in floating point, rounded up like the line */
        double exact = (double)len[k] * 8.0 * 1e9 / (double)rate;
        tx[k] = (int64_t)exact + ((double)(int64_t)exact < exact ? 1 : 0);
        assert_int_equal(ns_line_push(&l, &m, arrival[k], pkt(len[k], 0)), NS_ADMIT_OK);
    }
    for (int k = 0; k < N; k++) {
        int64_t finish = 0, work = 0;
        for (int j = k; j >= 0; j--) {
            work += tx[j];
            if (arrival[j] + work > finish)
                finish = arrival[j] + work;
        }
        const ns_pkt *h = ns_line_head(&l);
        assert_non_null(h);
        assert_int_equal(h->release_ns, finish + delay);
        assert_int_equal(h->len, len[k]);
        ns_line_pop(&l);
    }
    ns_line_free(&l);
}

/* Packet count, byte count and waiting time each refuse a packet, leaving the line as it was. */
static void test_bounds(void **state)
{
    (void)state;
    ns_model m = model(0, 0);
    m.max_pkts = 2;
    ns_line l;
    assert_int_equal(ns_line_init(&l, &m), 0);
    assert_int_equal(ns_line_push(&l, &m, 0, pkt(10, 0)), NS_ADMIT_OK);
    assert_int_equal(ns_line_push(&l, &m, 0, pkt(10, 0)), NS_ADMIT_OK);
    assert_int_equal(ns_line_push(&l, &m, 0, pkt(10, 0)), NS_ADMIT_FULL);
    assert_int_equal(l.count, 2);
    ns_line_free(&l);

    m = model(0, 0);
    m.max_bytes = 25;
    assert_int_equal(ns_line_init(&l, &m), 0);
    assert_int_equal(ns_line_push(&l, &m, 0, pkt(20, 0)), NS_ADMIT_OK);
    assert_int_equal(ns_line_push(&l, &m, 0, pkt(6, 0)), NS_ADMIT_FULL);
    assert_int_equal(ns_line_push(&l, &m, 0, pkt(5, 0)), NS_ADMIT_OK);
    assert_int_equal(l.bytes, 25);
    ns_line_free(&l);

    /* 1000 bytes = 8 us at 1 Gbit/s; at most 20 us of queueing before departure */
    m = model(0, 1000000000ull);
    m.max_wait_ns = 20000;
    assert_int_equal(ns_line_init(&l, &m), 0);
    for (int i = 0; i < 3; i++) /* start at 0, 8, 16 us */
        assert_int_equal(ns_line_push(&l, &m, 0, pkt(1000, 0)), NS_ADMIT_OK);
    assert_int_equal(ns_line_push(&l, &m, 0, pkt(1000, 0)), NS_ADMIT_BACKLOG); /* would be 24 */
    assert_int_equal(l.free_ns, 24000); /* the refused packet took no line time */
    assert_int_equal(ns_line_push(&l, &m, 10000, pkt(1000, 0)), NS_ADMIT_OK); /* waits 14 us */
    for (int i = 0; i < 3; i++)
        ns_line_pop(&l);
    assert_int_equal(ns_line_head(&l)->release_ns, 32000);
    ns_line_free(&l);
}

/* FIFO order survives the ring wrapping many times; the next event is the earliest head. */
static void test_wrap_and_next(void **state)
{
    (void)state;
    ns_model m = model(1000, 0);
    m.max_pkts = 3;
    ns_line lines[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(ns_line_init(&lines[i], &m), 0);
    assert_int_equal(ns_lines_next(lines, 3), -1);
    int64_t next_pop = 0, now = 0;
    for (int round = 0; round < 50; round++) {
        while (lines[1].count < 3)
            assert_int_equal(ns_line_push(&lines[1], &m, now++, pkt(1, 1)), NS_ADMIT_OK);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(ns_line_head(&lines[1])->release_ns, next_pop + 1000);
            next_pop++;
            ns_line_pop(&lines[1]);
        }
    }
    assert_int_equal(ns_lines_next(lines, 3), next_pop + 1000);
    assert_int_equal(ns_line_push(&lines[2], &m, 5, pkt(1, 2)), NS_ADMIT_OK);
    assert_int_equal(ns_lines_next(lines, 3), 1005);
    for (int i = 0; i < 3; i++)
        ns_line_free(&lines[i]);
}

static void ipv4(unsigned char *p, const char *dst)
{
    memset(p, 0, 20);
    p[0] = 0x45;
    unsigned a, b, c, d;
    assert_int_equal(sscanf(dst, "%u.%u.%u.%u", &a, &b, &c, &d), 4);
    p[16] = (unsigned char)a;
    p[17] = (unsigned char)b;
    p[18] = (unsigned char)c;
    p[19] = (unsigned char)d;
}

static void test_route(void **state)
{
    (void)state;
    const uint32_t subnet = 198u << 24 | 18u << 16; /* 198.18.0.0 */
    unsigned char p[40];
    ipv4(p, "198.18.0.1");
    assert_int_equal(ns_route(p, sizeof(p), subnet, 4), 0);
    ipv4(p, "198.18.0.4");
    assert_int_equal(ns_route(p, sizeof(p), subnet, 4), 3);
    assert_int_equal(ns_route(p, 19, subnet, 4), -1); /* truncated header */
    ipv4(p, "198.18.0.5");
    assert_int_equal(ns_route(p, sizeof(p), subnet, 4), -1); /* no such host */
    ipv4(p, "198.18.0.0");
    assert_int_equal(ns_route(p, sizeof(p), subnet, 4), -1);
    ipv4(p, "198.18.0.255");
    assert_int_equal(ns_route(p, sizeof(p), subnet, 250), -1); /* broadcast */
    ipv4(p, "198.18.1.1");
    assert_int_equal(ns_route(p, sizeof(p), subnet, 4), -1); /* other /24 */
    ipv4(p, "10.0.0.1");
    assert_int_equal(ns_route(p, sizeof(p), subnet, 4), -1);
    ipv4(p, "198.18.0.2");
    p[0] = 0x60; /* IPv6 */
    assert_int_equal(ns_route(p, sizeof(p), subnet, 4), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tx_time),       cmocka_unit_test(test_unpaced_delay),
        cmocka_unit_test(test_paced_by_hand), cmocka_unit_test(test_paced_reference),
        cmocka_unit_test(test_bounds),        cmocka_unit_test(test_wrap_and_next),
        cmocka_unit_test(test_route),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
