/*
 * The collective and sparse suites over the mpi transport. Run by CTest under
 * `mpirun -n N` (tests/mpi.cmake); every process is one rank and runs the same cmocka tests,
 * each checking its own results against a reference computed locally from the deterministic
 * inputs of every rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zen/sparse.h>

#include "coll_matrix.h"
#include "testutil.h"

static zen_comm *world;

static int setup(void **state)
{
    (void)state;
    zt_coll_matrix_env(); /* before the communicator exists: small ring chunks */
    zen_comm_options o = ZEN_COMM_OPTIONS_INIT; /* AUTO: picks mpi under mpirun */
    if (zen_comm_create(&o, &world) != ZEN_OK)
        return -1;
    return zen_comm_transport(world) == ZEN_TRANSPORT_MPI ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    zen_comm_destroy(world);
    return 0;
}

static float input_value(int rank, size_t i)
{
    return (float)((rank * 7 + (int)(i % 13)) % 11) - 5.0f;
}

static void test_p2p_ring(void **state)
{
    (void)state;
    int n = zen_comm_size(world), r = zen_comm_rank(world);
    size_t bytes = (size_t)3 << 20; /* large enough to need the payload path */
    char *out = malloc(bytes), *in = malloc(bytes);
    assert_non_null(out);
    assert_non_null(in);
    memset(out, r + 1, bytes);
    zen_request *rq = NULL;
    assert_int_equal(zen_irecv(world, in, bytes, (r - 1 + n) % n, 3, &rq), ZEN_OK);
    assert_int_equal(zen_send(world, out, bytes, (r + 1) % n, 3), ZEN_OK);
    assert_int_equal(zen_request_wait(rq, -1, NULL), ZEN_OK);
    zen_request_destroy(rq);
    assert_int_equal(in[0], (char)((r - 1 + n) % n + 1));
    assert_int_equal(in[bytes - 1], (char)((r - 1 + n) % n + 1));
    free(out);
    free(in);
}

static void check_allreduce(size_t count, zen_allreduce_algo algo)
{
    int n = zen_comm_size(world), r = zen_comm_rank(world);
    float *buf = malloc((count ? count : 1) * sizeof *buf);
    assert_non_null(buf);
    for (size_t i = 0; i < count; i++)
        buf[i] = input_value(r, i);
    assert_int_equal(zen_allreduce_with(world, buf, buf, count, ZEN_F32, ZEN_SUM, algo), ZEN_OK);
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int q = 0; q < n; q++)
            want += input_value(q, i);
        assert_float_equal(buf[i], want, 0);
    }
    free(buf);
}

static void test_allreduce(void **state)
{
    (void)state;
    size_t counts[] = { 0, 1, 7, 1031, 4096, 1 << 20 };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        check_allreduce(counts[i], ZEN_ALLREDUCE_RING);
        check_allreduce(counts[i], ZEN_ALLREDUCE_RHD);
        check_allreduce(counts[i], ZEN_ALLREDUCE_AUTO);
        check_allreduce(counts[i], ZEN_ALLREDUCE_MPI); /* MPI_Allreduce underneath */
    }
}

static void test_alltoallv_allgatherv(void **state)
{
    (void)state;
    int n = zen_comm_size(world), r = zen_comm_rank(world);
    size_t *sc = calloc((size_t)n, sizeof *sc), *sd = calloc((size_t)n, sizeof *sd);
    size_t *rc = calloc((size_t)n, sizeof *rc), *rd = calloc((size_t)n, sizeof *rd);
    size_t stotal = 0, rtotal = 0;
    for (int q = 0; q < n; q++) {
        sc[q] = (size_t)(r + 2 * q) % 5; /* r sends (r + 2q) % 5 ints to q */
        rc[q] = (size_t)(q + 2 * r) % 5;
        sd[q] = stotal;
        rd[q] = rtotal;
        stotal += sc[q];
        rtotal += rc[q];
    }
    int *sb = malloc((stotal + 1) * sizeof *sb), *rb = malloc((rtotal + 1) * sizeof *rb);
    for (int q = 0; q < n; q++)
        for (size_t k = 0; k < sc[q]; k++)
            sb[sd[q] + k] = r * 1000 + q * 10 + (int)k;
    assert_int_equal(zen_alltoallv(world, sb, sc, sd, rb, rc, rd, ZEN_I32), ZEN_OK);
    for (int q = 0; q < n; q++)
        for (size_t k = 0; k < rc[q]; k++)
            assert_int_equal(rb[rd[q] + k], q * 1000 + r * 10 + (int)k);
    /* allgatherv: rank q contributes q + 1 ints */
    size_t total = 0;
    for (int q = 0; q < n; q++) {
        rc[q] = (size_t)q + 1;
        rd[q] = total;
        total += rc[q];
    }
    int *mine = malloc(((size_t)r + 1) * sizeof *mine), *all = malloc(total * sizeof *all);
    for (int k = 0; k <= r; k++)
        mine[k] = r * 100 + k;
    assert_int_equal(zen_allgatherv(world, mine, (size_t)r + 1, all, rc, rd, ZEN_I32), ZEN_OK);
    for (int q = 0; q < n; q++)
        for (int k = 0; k <= q; k++)
            assert_int_equal(all[rd[q] + (size_t)k], q * 100 + k);
    free(sc), free(sd), free(rc), free(rd), free(sb), free(rb), free(mine), free(all);
}

/* The matrix's runner: this process is one rank of the mpirun job, so "run fn on n ranks" means
 * run it here on the world communicator (the matrix asks for exactly the world size). */
static void mpi_runner(int nranks, zen_rank_fn fn, void *arg)
{
    assert_int_equal(nranks, zen_comm_size(world));
    zen_status st = fn(world, arg);
    if (st != ZEN_OK)
        fprintf(stderr, "rank %d: %s\n", zen_comm_rank(world), zen_comm_last_error(world));
    assert_int_equal(st, ZEN_OK);
}

static void test_coll_matrix(void **state)
{
    (void)state;
    zt_coll_matrix(mpi_runner, zen_comm_size(world), ZT_COLL_ALL | ZT_COLL_LARGE);
}

static void test_sparse_every_scheme(void **state)
{
    (void)state;
    int n = zen_comm_size(world), r = zen_comm_rank(world);
    const uint64_t rows = 5000;
    const uint32_t width = 4;
    size_t nnz = r == 1 ? 0 : 300; /* one rank contributes nothing */
    uint32_t *idx = malloc((nnz + 1) * sizeof *idx);
    float *val = malloc((nnz * width + 1) * sizeof *val);
    uint64_t seed = 99 + (uint64_t)r;
    for (size_t i = 0; i < nnz; i++) {
        idx[i] = i == 0 ? 0 : (uint32_t)(zt_rand(&seed) % rows); /* row 0 always present */
        for (uint32_t w = 0; w < width; w++)
            val[i * width + w] = (float)((int)(zt_rand(&seed) % 7) - 3);
    }
    /* the reference: every rank's input regenerated locally */
    float *want = calloc(rows * width, sizeof *want), *got = malloc(rows * width * sizeof *got);
    for (int q = 0; q < n; q++) {
        size_t qn = q == 1 ? 0 : 300;
        uint64_t s = 99 + (uint64_t)q;
        for (size_t i = 0; i < qn; i++) {
            uint32_t row = i == 0 ? 0 : (uint32_t)(zt_rand(&s) % rows);
            for (uint32_t w = 0; w < width; w++)
                want[(size_t)row * width + w] += (float)((int)(zt_rand(&s) % 7) - 3);
        }
    }
    zen_sparse_tensor t = { rows, width, nnz, ZEN_INDEX_U32, idx, ZEN_F32, val };
    for (int sch = 0; sch < ZEN_SPARSE_SCHEME_COUNT; sch++) {
        zen_sparse_options o = ZEN_SPARSE_OPTIONS_INIT;
        o.scheme = (zen_sparse_scheme)sch;
        assert_int_equal(zen_sparse_allreduce_dense(world, &t, got, &o, NULL), ZEN_OK);
        assert_memory_equal(got, want, rows * width * sizeof *got);
    }
    free(idx), free(val), free(want), free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_p2p_ring),
        cmocka_unit_test(test_allreduce),
        cmocka_unit_test(test_alltoallv_allgatherv),
        cmocka_unit_test(test_coll_matrix),
        cmocka_unit_test(test_sparse_every_scheme),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
