/*
 * allreduce.c - the smallest complete zen program: four in-process ranks (threads) run a dense
 * allreduce and a sparse allreduce, and every rank checks both results against the sum it can
 * compute by itself. Built against an installed zen in the `install_example` test, once with
 * pkg-config and once with CMake's find_package(zen):
 *
 *   cc allreduce.c $(pkg-config --cflags --libs zen) -o allreduce && ./allreduce
 *
 * Exit status 0 when both results are right on every rank, 1 otherwise.
 */
#include <stdint.h>
#include <stdio.h>

#include <zen/sparse.h>

#define RANKS 4
#define COUNT 1000 /* dense elements per rank */
#define ROWS  64   /* rows of the sparse tensor */
#define WIDTH 3    /* values per row */

/* Rank r contributes r + 1 + i to dense element i: the sum over ranks is n(n+1)/2 + n i. */
static zen_status dense_check(zen_comm *comm)
{
    int rank = zen_comm_rank(comm), n = zen_comm_size(comm);
    float in[COUNT], out[COUNT];
    for (int i = 0; i < COUNT; i++)
        in[i] = (float)(rank + 1 + i);
    zen_status st = zen_allreduce(comm, in, out, COUNT, ZEN_F32, ZEN_SUM);
    if (st != ZEN_OK)
        return st;
    for (int i = 0; i < COUNT; i++) {
        float want = (float)(n * (n + 1) / 2 + n * i);
        if (out[i] != want) {
            fprintf(stderr, "rank %d: dense element %d is %g, want %g\n", rank, i, out[i], want);
            return ZEN_EINTERNAL;
        }
    }
    return ZEN_OK;
}

/* Rank r holds the rows that are multiples of r + 1, value (row, column) = 1: so the sum of row
 * i is the number of divisors of i among 1..n, and row 0 holds n in every column. */
static zen_status sparse_check(zen_comm *comm)
{
    int rank = zen_comm_rank(comm), n = zen_comm_size(comm);
    uint32_t idx[ROWS];
    float val[ROWS * WIDTH];
    size_t nnz = 0;
    for (uint32_t i = 0; i < ROWS; i += (uint32_t)rank + 1)
        idx[nnz++] = i;
    for (size_t k = 0; k < nnz * WIDTH; k++)
        val[k] = 1.0f;

    zen_sparse_tensor in = { .rows = ROWS,
                             .width = WIDTH,
                             .nnz = nnz,
                             .index_type = ZEN_INDEX_U32,
                             .indices = idx,
                             .value_type = ZEN_F32,
                             .values = val };
    float out[ROWS * WIDTH];
    zen_status st = zen_sparse_allreduce_dense(comm, &in, out, NULL, NULL);
    if (st != ZEN_OK)
        return st;
    for (int i = 0; i < ROWS; i++) {
        int want = 0;
        for (int d = 1; d <= n; d++)
            want += i % d == 0;
        for (int c = 0; c < WIDTH; c++) {
            if (out[i * WIDTH + c] != (float)want) {
                fprintf(stderr, "rank %d: sparse row %d column %d is %g, want %d\n", rank, i, c,
                        out[i * WIDTH + c], want);
                return ZEN_EINTERNAL;
            }
        }
    }
    return ZEN_OK;
}

static zen_status rank_main(zen_comm *comm, void *arg)
{
    (void)arg;
    zen_status st = dense_check(comm);
    if (st == ZEN_OK)
        st = sparse_check(comm);
    if (st != ZEN_OK)
        fprintf(stderr, "rank %d: %s (%s)\n", zen_comm_rank(comm), zen_strerror(st),
                zen_comm_last_error(comm));
    return st;
}

int main(void)
{
    zen_status st = zen_run_inproc(RANKS, NULL, rank_main, NULL, NULL);
    if (st != ZEN_OK) {
        fprintf(stderr, "allreduce example: %s\n", zen_strerror(st));
        return 1;
    }
    printf("zen %s: dense and sparse allreduce over %d ranks: ok\n", ZEN_VERSION_STRING, RANKS);
    return 0;
}
