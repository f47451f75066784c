/*
 * Dense collectives: argument validation, count disagreements between ranks (every rank must
 * fail, promptly, with a message naming a rank), the allreduce algorithm choice, and the
 * reduction kernels against a naive loop (including in-place aliasing).
 */
#include <stdlib.h>
#include <string.h>

#include "coll/reduce_op.h"
#include "testutil.h"

/* ---- argument validation: every rank passes the same bad argument, nothing is sent ---- */
static zen_status bad_args(zen_comm *c, void *arg)
{
    (void)arg;
    float x[4] = { 0 }, y[16] = { 0 };
    ZT_CHECK(c, zen_allreduce(c, NULL, y, 4, ZEN_F32, ZEN_SUM) == ZEN_EINVAL);
    ZT_CHECK(c, strstr(zen_comm_last_error(c), "NULL") != NULL);
    ZT_CHECK(c, zen_allreduce(c, x, NULL, 4, ZEN_F32, ZEN_SUM) == ZEN_EINVAL);
    ZT_CHECK(c, zen_allreduce(c, x, y, 4, (zen_dtype)9, ZEN_SUM) == ZEN_EINVAL);
    ZT_CHECK(c, zen_allreduce(c, x, y, 4, ZEN_F32, (zen_op)-1) == ZEN_EINVAL);
    ZT_CHECK(c,
             zen_allreduce_with(c, x, y, 4, ZEN_F32, ZEN_SUM, (zen_allreduce_algo)7) == ZEN_EINVAL);
    ZT_CHECK(c, zen_broadcast(c, x, 4, ZEN_F32, zen_comm_size(c)) == ZEN_EINVAL);
    ZT_CHECK(c, strstr(zen_comm_last_error(c), "root") != NULL);
    ZT_CHECK(c, zen_reduce(c, x, y, 4, ZEN_F32, ZEN_SUM, -1) == ZEN_EINVAL);
    ZT_CHECK(c, zen_gather(c, x, y, 4, ZEN_F32, 99) == ZEN_EINVAL);
    ZT_CHECK(c, zen_reduce_scatterv(c, x, y, NULL, ZEN_F32, ZEN_SUM) == ZEN_EINVAL);
    ZT_CHECK(c, zen_allgatherv(c, x, 1, y, NULL, NULL, ZEN_F32) == ZEN_EINVAL);
    ZT_CHECK(c, zen_allgather(c, x, NULL, 1, ZEN_F32) == ZEN_EINVAL);
    ZT_CHECK(c, zen_alltoall(c, NULL, y, 1, ZEN_F32) == ZEN_EINVAL);
    size_t cnt[8] = { 1, 1, 1, 1, 1, 1, 1, 1 }, dsp[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
    ZT_CHECK(c, zen_alltoallv(c, y, cnt, dsp, y, cnt, dsp, ZEN_F32) == ZEN_EINVAL); /* in place */
    ZT_CHECK(c, zen_allreduce(NULL, x, y, 4, ZEN_F32, ZEN_SUM) == ZEN_EINVAL);
    /* NULL buffers with count 0 are fine, and the communicator still works */
    ZT_CHECK(c, zen_allreduce(c, NULL, NULL, 0, ZEN_F32, ZEN_SUM) == ZEN_OK);
    ZT_CHECK(c, zen_allgather(c, NULL, NULL, 0, ZEN_I64) == ZEN_OK);
    ZT_CHECK(c, zen_broadcast(c, NULL, 0, ZEN_BF16, 0) == ZEN_OK);
    /* the mpi algorithm needs the mpi transport's native hook */
    ZT_CHECK(c, zen_allreduce_with(c, x, y, 4, ZEN_F32, ZEN_SUM, ZEN_ALLREDUCE_MPI) ==
                    ZEN_EUNSUPPORTED);
    ZT_CHECK(c, zen_barrier(c) == ZEN_OK);
    return ZEN_OK;
}

static void test_bad_args(void **state)
{
    (void)state;
    zt_run_inproc(3, bad_args, NULL);
}

/* ---- count disagreements ---- */
typedef struct mismatch {
    const char *coll;
    size_t base; /* count on every rank but the odd one */
    size_t odd;  /* count on rank `who` */
    int who;
} mismatch;

static zen_status mismatch_rank(zen_comm *c, void *argp)
{
    const mismatch *m = argp;
    int n = zen_comm_size(c), r = zen_comm_rank(c);
    size_t count = r == m->who ? m->odd : m->base;
    size_t big = (m->base > m->odd ? m->base : m->odd) * (size_t)n + 1;
    float *a = calloc(big, sizeof *a), *b = calloc(big, sizeof *b);
    ZT_CHECK(c, a && b);
    zen_status st = ZEN_OK;
    if (strcmp(m->coll, "ring") == 0)
        st = zen_allreduce_with(c, a, b, count, ZEN_F32, ZEN_SUM, ZEN_ALLREDUCE_RING);
    else if (strcmp(m->coll, "rhd") == 0)
        st = zen_allreduce_with(c, a, b, count, ZEN_F32, ZEN_SUM, ZEN_ALLREDUCE_RHD);
    else if (strcmp(m->coll, "auto") == 0)
        st = zen_allreduce(c, a, b, count, ZEN_F32, ZEN_SUM);
    else if (strcmp(m->coll, "allgather") == 0)
        st = zen_allgather(c, a, b, count, ZEN_F32);
    else if (strcmp(m->coll, "reduce_scatter") == 0)
        st = zen_reduce_scatter(c, a, b, count, ZEN_F32, ZEN_SUM);
    else if (strcmp(m->coll, "broadcast") == 0)
        st = zen_broadcast(c, a, count, ZEN_F32, 0);
    else if (strcmp(m->coll, "reduce") == 0)
        st = zen_reduce(c, a, b, count, ZEN_F32, ZEN_SUM, 0);
    else if (strcmp(m->coll, "alltoall") == 0)
        st = zen_alltoall(c, a, b, count, ZEN_F32);
    else if (strcmp(m->coll, "gather") == 0)
        st = zen_gather(c, a, b, count, ZEN_F32, n - 1);
    free(a);
    free(b);
    /* Every rank fails in this very call (the argument agreement, src/coll/agree.c: also a rank
     * that only sends, a broadcast root or a reduce leaf), with a message naming a peer, and not
     * by running into its deadline. */
    ZT_CHECK(c, st != ZEN_OK);
    ZT_CHECK(c, st != ZEN_ETIMEDOUT);
    ZT_CHECK(c, strstr(zen_comm_last_error(c), "rank ") != NULL);
    return ZEN_OK;
}

static void run_mismatch(const char *coll, size_t base, size_t odd, int who, int n)
{
    mismatch m = { coll, base, odd, who };
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT;
    o.timeout_s = 30; /* never reached: failure must propagate by abort */
    zen_status st[8];
    zen_status all = zen_run_inproc(n, &o, mismatch_rank, &m, st);
    for (int r = 0; r < n; r++)
        if (st[r] != ZEN_OK)
            print_error("%s %zu vs %zu (rank %d of %d): rank %d: %s\n", coll, base, odd, who, n, r,
                        zen_status_name(st[r]));
    assert_int_equal(all, ZEN_OK);
}

static void test_count_mismatch(void **state)
{
    (void)state;
    setenv("ZEN_RING_CHUNK_BYTES", "1024", 1);
    setenv("ZEN_COLL_LONG_BYTES", "2048", 1);
    const char *colls[] = { "ring",      "rhd",    "auto",     "allgather", "reduce_scatter",
                            "broadcast", "reduce", "alltoall", "gather" };
    for (size_t i = 0; i < sizeof colls / sizeof colls[0]; i++) {
        run_mismatch(colls[i], 1031, 1032, 1, 4); /* off by one, multi-chunk */
        run_mismatch(colls[i], 5000, 5256, 2, 3); /* differs by a whole chunk */
        run_mismatch(colls[i], 7, 0, 0, 5);       /* one rank has nothing */
        run_mismatch(colls[i], 0, 3, 4, 5);
        run_mismatch(colls[i], 20, 21, 1, 2);
    }
}

/* ---- algorithm choice ---- */
static zen_status choice_rank(zen_comm *c, void *arg)
{
    (void)arg;
    ZT_CHECK(c, zen_allreduce_choice(c, 16, ZEN_F32) == ZEN_ALLREDUCE_RHD);
    ZT_CHECK(c, zen_allreduce_choice(c, 1u << 22, ZEN_F32) == ZEN_ALLREDUCE_RING);
    ZT_CHECK(c, zen_allreduce_choice(c, 2, ZEN_F64) == ZEN_ALLREDUCE_RHD);
    return ZEN_OK;
}

static zen_status forced_ring(zen_comm *c, void *arg)
{
    (void)arg;
    ZT_CHECK(c, zen_allreduce_choice(c, 16, ZEN_F32) == ZEN_ALLREDUCE_RING);
    return ZEN_OK;
}

static void test_choice(void **state)
{
    (void)state;
    unsetenv("ZEN_ALLREDUCE_ALGO");
    unsetenv("ZEN_RHD_MAX_BYTES");
    zt_run_inproc(3, choice_rank, NULL);
    setenv("ZEN_ALLREDUCE_ALGO", "ring", 1);
    zt_run_inproc(2, forced_ring, NULL);
    setenv("ZEN_ALLREDUCE_ALGO", "mpi", 1); /* unavailable on inproc: falls back to auto */
    zt_run_inproc(2, choice_rank, NULL);
    unsetenv("ZEN_ALLREDUCE_ALGO");
    assert_string_equal(zen_allreduce_algo_name(ZEN_ALLREDUCE_RHD), "rhd");
    assert_string_equal(zen_allreduce_algo_name(ZEN_ALLREDUCE_RING), "ring");
    assert_string_equal(zen_allreduce_algo_name(ZEN_ALLREDUCE_MPI), "mpi");
    assert_string_equal(zen_allreduce_algo_name(ZEN_ALLREDUCE_AUTO), "auto");
    assert_string_equal(zen_allreduce_algo_name(ZEN_ALLREDUCE_SLOTS), "slots");
}

/* ---- kernels ---- */
static void test_kernels(void **state)
{
    (void)state;

    enum {
        N = 37
    };

    uint64_t seed = 11;
    float fa[N], fb[N], fd[N];
    int32_t ia[N], ib[N], id[N];
    int64_t la[N], lb[N], ld[N];
    uint16_t ha[N], hb[N], hd[N];
    for (int i = 0; i < N; i++) {
        fa[i] = (float)(zt_rand(&seed) % 1000) / 7.0f - 70.0f;
        fb[i] = (float)(zt_rand(&seed) % 1000) / 3.0f - 150.0f;
        ia[i] = (int32_t)(zt_rand(&seed) | 0x40000000u); /* large: products and sums wrap */
        ib[i] = (int32_t)zt_rand(&seed);
        la[i] = (int64_t)zt_rand(&seed);
        lb[i] = (int64_t)zt_rand(&seed);
        ha[i] = zen_f32_to_bf16(fa[i]);
        hb[i] = zen_f32_to_bf16(fb[i]);
    }
    for (int op = 0; op < ZEN_OP_COUNT; op++) {
        zen__reduce3(fd, fa, fb, N, ZEN_F32, (zen_op)op);
        zen__reduce3(id, ia, ib, N, ZEN_I32, (zen_op)op);
        zen__reduce3(ld, la, lb, N, ZEN_I64, (zen_op)op);
        zen__reduce3(hd, ha, hb, N, ZEN_BF16, (zen_op)op);
        for (int i = 0; i < N; i++) {
            float fe = op == ZEN_PROD  ? fa[i] * fb[i]
                       : op == ZEN_MIN ? (fa[i] < fb[i] ? fa[i] : fb[i])
                       : op == ZEN_MAX ? (fa[i] > fb[i] ? fa[i] : fb[i])
                                       : fa[i] + fb[i];
            assert_true(fd[i] == fe);
            uint32_t ue = op == ZEN_PROD ? (uint32_t)ia[i] * (uint32_t)ib[i]
                                         : (uint32_t)ia[i] + (uint32_t)ib[i];
            int32_t ie = op == ZEN_MIN   ? (ia[i] < ib[i] ? ia[i] : ib[i])
                         : op == ZEN_MAX ? (ia[i] > ib[i] ? ia[i] : ib[i])
                                         : (int32_t)ue;
            assert_int_equal(id[i], ie);
            uint64_t le = op == ZEN_PROD ? (uint64_t)la[i] * (uint64_t)lb[i]
                                         : (uint64_t)la[i] + (uint64_t)lb[i];
            int64_t lex = op == ZEN_MIN   ? (la[i] < lb[i] ? la[i] : lb[i])
                          : op == ZEN_MAX ? (la[i] > lb[i] ? la[i] : lb[i])
                                          : (int64_t)le;
            assert_true(ld[i] == lex);
            float x = zen_bf16_to_f32(ha[i]), y = zen_bf16_to_f32(hb[i]);
            float he = op == ZEN_PROD  ? x * y
                       : op == ZEN_MIN ? (x < y ? x : y)
                       : op == ZEN_MAX ? (x > y ? x : y)
                                       : x + y;
            assert_int_equal(hd[i], zen_f32_to_bf16(he));
        }
    }
    /* in place, either operand aliased */
    float g[N];
    memcpy(g, fa, sizeof g);
    zen_reduce_into(g, fb, N, ZEN_F32, ZEN_SUM);
    for (int i = 0; i < N; i++)
        assert_true(g[i] == fa[i] + fb[i]);
    memcpy(g, fb, sizeof g);
    zen__reduce3(g, fa, g, N, ZEN_F32, ZEN_SUM);
    for (int i = 0; i < N; i++)
        assert_true(g[i] == fa[i] + fb[i]);
    /* avg finish: integers truncate toward zero */
    int32_t v[3] = { -7, 7, 9 };
    zen__reduce_finish_avg(v, 3, ZEN_I32, ZEN_AVG, 2);
    assert_int_equal(v[0], -3);
    assert_int_equal(v[1], 3);
    assert_int_equal(v[2], 4);
    zen__reduce_finish_avg(v, 3, ZEN_I32, ZEN_SUM, 2); /* not avg: untouched */
    assert_int_equal(v[2], 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_choice),
        cmocka_unit_test(test_count_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
