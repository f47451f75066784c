/*
 * msgcount.c - messages and bytes each rank sends in one zen_sparse_allreduce_dense call, per
 * scheme and rank count (stats.msgs_sent, stats.bytes_sent: the communicator's counters before
 * and after the call), for docs/reproduction.md's message-count lines. Inproc ranks; each rank
 * holds NNZ random rows of a ROWS x WIDTH tensor (fixed seed per rank). The first call of a key
 * and a later one are both printed, since AUTO's agreement traffic depends on the key's state.
 *
 *   cc -O2 -Iinclude bench/results/reproduction/msgcount.c -Lbuild -lzen -Wl,-rpath,$PWD/build \
 *      -o build/msgcount && build/msgcount "2 4 8 16 32" > bench/results/reproduction/msgcount.txt
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zen/comm.h"
#include "zen/sparse.h"

enum {
    ROWS = 100000,
    WIDTH = 4,
    NNZ = 1000,
    CALLS = 3
};

typedef struct arg {
    int scheme;
    unsigned long long msgs[64][CALLS], bytes[64][CALLS];
} arg;

static zen_status rank_fn(zen_comm *comm, void *p)
{
    arg *a = p;
    int me = zen_comm_rank(comm);
    uint32_t *idx = malloc(NNZ * sizeof *idx);
    float *val = malloc((size_t)NNZ * WIDTH * sizeof *val);
    float *out = malloc((size_t)ROWS * WIDTH * sizeof *out);
    unsigned s = 12345u + (unsigned)me * 7919u;
    for (int i = 0; i < NNZ; i++) {
        s = s * 1103515245u + 12345u;
        idx[i] = (s >> 8) % ROWS;
        for (int k = 0; k < WIDTH; k++)
            val[i * WIDTH + k] = 1.0f;
    }
    zen_sparse_tensor in = { ROWS, WIDTH, NNZ, ZEN_INDEX_U32, idx, ZEN_F32, val };
    zen_sparse_options o = ZEN_SPARSE_OPTIONS_INIT;
    o.scheme = (zen_sparse_scheme)a->scheme;
    o.key = "msgcount";
    zen_status st = ZEN_OK;
    for (int c = 0; c < CALLS && st == ZEN_OK; c++) {
        zen_sparse_stats stats;
        memset(&stats, 0, sizeof stats);
        st = zen_sparse_allreduce_dense(comm, &in, out, &o, &stats);
        a->msgs[me][c] = stats.msgs_sent;
        a->bytes[me][c] = stats.bytes_sent;
    }
    free(idx);
    free(val);
    free(out);
    return st;
}

int main(int argc, char **argv)
{
    const char *ns = argc > 1 ? argv[1] : "2 4 8 16";
    static const int schemes[] = { ZEN_SPARSE_BALANCED,  ZEN_SPARSE_HIERARCHICAL,
                                   ZEN_SPARSE_ALLGATHER, ZEN_SPARSE_PS,
                                   ZEN_SPARSE_BLOCK,     ZEN_SPARSE_DENSE };
    printf("# scheme ranks call msgs_sent_min msgs_sent_max bytes_sent_max (rows %d width %d "
           "nnz %d per rank)\n",
           ROWS, WIDTH, NNZ);
    char *copy = strdup(ns), *save = NULL;
    for (char *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        int n = atoi(t);
        if (n < 2 || n > 64)
            continue;
        for (size_t k = 0; k < sizeof schemes / sizeof schemes[0]; k++) {
            static arg a;
            memset(&a, 0, sizeof a);
            a.scheme = schemes[k];
            zen_status st = zen_run_inproc(n, NULL, rank_fn, &a, NULL);
            if (st != ZEN_OK) {
                fprintf(stderr, "msgcount: %s at %d ranks failed (%d)\n",
                        zen_sparse_scheme_name((zen_sparse_scheme)schemes[k]), n, (int)st);
                return 1;
            }
            for (int c = 0; c < CALLS; c++) {
                unsigned long long lo = a.msgs[0][c], hi = lo, b = 0;
                for (int r = 0; r < n; r++) {
                    lo = a.msgs[r][c] < lo ? a.msgs[r][c] : lo;
                    hi = a.msgs[r][c] > hi ? a.msgs[r][c] : hi;
                    b = a.bytes[r][c] > b ? a.bytes[r][c] : b;
                }
                printf("%s %d %d %llu %llu %llu\n",
                       zen_sparse_scheme_name((zen_sparse_scheme)schemes[k]), n, c + 1, lo, hi, b);
            }
        }
    }
    free(copy);
    return 0;
}
