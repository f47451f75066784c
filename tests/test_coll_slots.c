/*
 * The shm latency path (src/coll/slots.c, src/transport/shm_slots.c): allreduce, broadcast,
 * reduce and barrier through the collective slots, against a dense reference computed here from
 * every rank's known input, at 2-5 processes: every dtype and op, in place and out of place,
 * consecutive calls of different sizes (either side of the 64 KiB cut, so the slot sequence and
 * the message path alternate), one rank running ahead; then disagreement (detected on every rank,
 * also between a rank on the slots and one on rhd, and with ZEN_COLL_AGREE=0 by the length) and a
 * peer that leaves (a prompt error naming it, not a timeout).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shm_jobs.h"
#include "testutil.h"

#define CUT ((size_t)64 << 10) /* ZEN_SHM_SLOT_MAX_BYTES default */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Rank r's element i in call k: a small integer, exact in every dtype, products included. */
static int val(int r, size_t i, int k)
{
    return 1 + (int)(((size_t)r * 7 + i * 3 + (size_t)k) % 3);
}

/* The reduction of element i of call k over n ranks, as the dtype holds it. */
static double expect(int n, size_t i, int k, zen_dtype t, zen_op op)
{
    double acc = val(0, i, k);
    for (int r = 1; r < n; r++) {
        double v = val(r, i, k);
        acc = op == ZEN_PROD  ? acc * v
              : op == ZEN_MIN ? fmin(acc, v)
              : op == ZEN_MAX ? fmax(acc, v)
                              : acc + v;
    }
    if (op == ZEN_AVG)
        acc = (t == ZEN_I32 || t == ZEN_I64) ? floor(acc / n) : acc / n;
    return acc;
}

static int close_to(double got, double want, zen_dtype t)
{
    double tol = t == ZEN_BF16 ? 1e-2 : 1e-6;
    return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

/* Payloads of 1-5 cache lines (13, 50: the lines the fast poll prefetches, shm_slots.c), larger
 * ones and both sides of the cut. */
static size_t counts_for(zen_dtype t, size_t out[8])
{
    size_t es = zen_dtype_size(t);
    size_t c[8] = { 1, 7, 13, 50, 256, 4099, CUT / es, CUT / es + 1 };
    memcpy(out, c, sizeof c);
    return 8;
}

/* One allreduce of call k checked element by element; in place or not. */
static zen_status one_allreduce(zen_comm *c, char *a, char *b, size_t cnt, zen_dtype t, zen_op op,
                                int k, int inplace)
{
    int n = zen_comm_size(c), r = zen_comm_rank(c);
    for (size_t i = 0; i < cnt; i++)
        zt_dtype_put(a, t, i, val(r, i, k));
    memset(b, 0xab, cnt * zen_dtype_size(t));
    char *out = inplace ? a : b;
    ZT_CHECK(c, zen_allreduce(c, a, out, cnt, t, op) == ZEN_OK);
    for (size_t i = 0; i < cnt; i++)
        if (!close_to(zt_dtype_get(out, t, i), expect(n, i, k, t, op), t)) {
            fprintf(stderr, "rank %d: %s %s count %zu inplace %d: [%zu] = %g, expected %g\n", r,
                    zen_dtype_name(t), zen_op_name(op), cnt, inplace, i, zt_dtype_get(out, t, i),
                    expect(n, i, k, t, op));
            ZT_CHECK(c, 0);
        }
    return ZEN_OK;
}

/* The slot path takes its arrival stamp after its post (zen__coll_begin_late): every recent
 * call still has one, and left after it arrived. */
static zen_status arrivals_stamped(zen_comm *c)
{
    zen_arrival a[8];
    size_t got = 0;
    int64_t before = 0;
    ZT_CHECK(c, zen_comm_arrivals(c, a, 8, &got) == ZEN_OK && got == 8);
    for (size_t i = 0; i < got; i++) {
        ZT_CHECK(c, a[i].arrive_ns > 0 && a[i].arrive_ns >= before);
        ZT_CHECK(c, a[i].leave_ns >= a[i].arrive_ns);
        before = a[i].leave_ns;
    }
    return ZEN_OK;
}

static zen_status allreduce_rank(zen_comm *c, void *arg)
{
    (void)arg;
    char *a = malloc(CUT + 64), *b = malloc(CUT + 64);
    ZT_CHECK(c, a && b);
    ZT_CHECK(c, zen_allreduce_choice(c, CUT / 4, ZEN_F32) == ZEN_ALLREDUCE_SLOTS);
    ZT_CHECK(c, zen_allreduce_choice(c, CUT / 4 + 1, ZEN_F32) != ZEN_ALLREDUCE_SLOTS);
    int k = 0;
    for (int t = 0; t < ZEN_DTYPE_COUNT; t++)
        for (int op = 0; op < ZEN_OP_COUNT; op++) {
            size_t cnt[8];
            size_t m = counts_for((zen_dtype)t, cnt);
            for (size_t j = 0; j < m; j++, k++) {
                /* rank 0 runs ahead now and then: the other slot must be free for it */
                if (zen_comm_rank(c) != 0 && k % 17 == 0)
                    usleep(2000);
                zen_status st = one_allreduce(c, a, b, cnt[j], (zen_dtype)t, (zen_op)op, k,
                                              (int)((j + (size_t)op) % 2));
                ZT_CHECK(c, st == ZEN_OK);
            }
        }
    free(a);
    free(b);
    return arrivals_stamped(c);
}

/* broadcast and reduce from every root, sizes either side of the cut, barriers between */
static zen_status rooted_rank(zen_comm *c, void *arg)
{
    (void)arg;
    int n = zen_comm_size(c), r = zen_comm_rank(c), k = 0;
    size_t counts[3] = { 3, CUT / 4, CUT / 4 + 5 };
    float *a = malloc(CUT + 64), *b = malloc(CUT + 64);
    ZT_CHECK(c, a && b);
    for (int root = 0; root < n; root++)
        for (int j = 0; j < 3; j++, k++) {
            size_t cnt = counts[j];
            for (size_t i = 0; i < cnt; i++)
                a[i] = r == root ? (float)val(r, i, k) : -1.0f;
            ZT_CHECK(c, zen_broadcast(c, a, cnt, ZEN_F32, root) == ZEN_OK);
            for (size_t i = 0; i < cnt; i++)
                ZT_CHECK(c, a[i] == (float)val(root, i, k));
            for (size_t i = 0; i < cnt; i++)
                a[i] = (float)val(r, i, k);
            memset(b, 0, cnt * sizeof *b);
            zen_op op = j == 1 ? ZEN_MAX : ZEN_SUM;
            ZT_CHECK(c, zen_reduce(c, a, r == root ? b : NULL, cnt, ZEN_F32, op, root) == ZEN_OK);
            for (size_t i = 0; r == root && i < cnt; i++)
                ZT_CHECK(c, b[i] == (float)expect(n, i, k, ZEN_F32, op));
            ZT_CHECK(c, zen_barrier(c) == ZEN_OK);
        }
    free(a);
    free(b);
    return ZEN_OK;
}

static void run(int n, zen_rank_fn fn, void *arg, const char *env)
{
    zt_job j = { ZEN_TRANSPORT_SHM, n, 0, 30, env };
    int status[8];
    zt_job_run(&j, fn, arg, status);
    if (!zt_job_all_ok(&j, status))
        print_error("%d processes\n", n);
    assert_true(zt_job_all_ok(&j, status));
}

static void test_reference(void **state)
{
    (void)state;
    for (int n = 2; n <= 5; n++) {
        run(n, allreduce_rank, NULL, NULL);
        run(n, rooted_rank, NULL, NULL);
    }
}

typedef enum bad {
    BAD_COUNT_CUT, /* odd rank: one element over the cut (rhd), the others on the slots */
    BAD_OP,        /* odd rank: MAX, the others SUM, both on the slots */
    BAD_LENGTH,    /* ZEN_COLL_AGREE=0: odd rank one element more, both on the slots */
    BAD_GONE       /* odd rank leaves before the call */
} bad;

static zen_status bad_rank(zen_comm *c, void *arg)
{
    bad v = *(const bad *)arg;
    int odd = zen_comm_rank(c) == zen_comm_size(c) - 1;
    size_t cnt = CUT / 4;
    float *a = calloc(cnt + 1, sizeof *a), *b = calloc(cnt + 1, sizeof *b);
    ZT_CHECK(c, a && b);
    ZT_CHECK(c, zen_allreduce(c, a, b, 5, ZEN_F32, ZEN_SUM) == ZEN_OK); /* a good call first */
    if (v == BAD_GONE && odd)
        _exit(0);
    double t0 = now_s();
    zen_status st;
    if (v == BAD_COUNT_CUT)
        st = zen_allreduce(c, a, b, odd ? cnt + 1 : cnt, ZEN_F32, ZEN_SUM);
    else if (v == BAD_OP)
        st = zen_allreduce(c, a, b, 4, ZEN_F32, odd ? ZEN_MAX : ZEN_SUM);
    else if (v == BAD_LENGTH)
        st = zen_allreduce(c, a, b, odd ? 3 : 2, ZEN_F32, ZEN_SUM);
    else
        st = zen_allreduce(c, a, b, 4, ZEN_F32, ZEN_SUM);
    double dt = now_s() - t0;
    struct timespec linger = { 0, 300 * 1000 * 1000 }; /* as in test_coll_agree.c */
    nanosleep(&linger, NULL);
    free(a);
    free(b);
    const char *want = v == BAD_GONE     ? "rank "
                       : v == BAD_LENGTH ? "disagree on the count"
                                         : "disagree";
    if (st == ZEN_OK || strstr(zen_comm_last_error(c), want) == NULL)
        fprintf(stderr, "case %d: rank %d got %s: %s\n", (int)v, zen_comm_rank(c),
                zen_status_name(st), zen_comm_last_error(c));
    ZT_CHECK(c, st != ZEN_OK && st != ZEN_ETIMEDOUT);
    ZT_CHECK(c, dt < 10.0);
    ZT_CHECK(c, strstr(zen_comm_last_error(c), want) != NULL);
    if (v == BAD_GONE) {
        char name[16];
        snprintf(name, sizeof name, "rank %d", zen_comm_size(c) - 1);
        ZT_CHECK(c, strstr(zen_comm_last_error(c), name) != NULL);
    }
    return ZEN_OK;
}

static void test_failures(void **state)
{
    (void)state;
    static const bad cases[] = { BAD_COUNT_CUT, BAD_OP, BAD_LENGTH, BAD_GONE };
    for (int n = 2; n <= 4; n++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run(n, bad_rank, (void *)&cases[i], cases[i] == BAD_LENGTH ? "ZEN_COLL_AGREE=0" : NULL);
}

/* ZEN_SHM_SLOT_MAX_BYTES=0 turns the path off: the choice is rhd again and results stay right */
static zen_status off_rank(zen_comm *c, void *arg)
{
    (void)arg;
    ZT_CHECK(c, zen_allreduce_choice(c, 2, ZEN_F32) == ZEN_ALLREDUCE_RHD);
    char a[64], b[64];
    return one_allreduce(c, a, b, 8, ZEN_I64, ZEN_SUM, 1, 0);
}

static void test_switch_off(void **state)
{
    (void)state;
    run(3, off_rank, NULL, "ZEN_SHM_SLOT_MAX_BYTES=0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_failures),
        cmocka_unit_test(test_switch_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
