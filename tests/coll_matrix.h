/*
 * The dense-collective test matrix (Gloo style), independent of the transport: every collective,
 * in place and out of place, over dtypes x ops x counts {0, 1, n-1, 1031, 4096}, checked against
 * a reference each rank computes locally (every rank generates every rank's input from a seed).
 * A transport test supplies a runner that runs a rank function on n ranks and fails the test
 * unless every rank returns ZEN_OK (zt_run_inproc is one).
 */
#ifndef ZEN_TESTS_COLL_MATRIX_H
#define ZEN_TESTS_COLL_MATRIX_H

#include <zen/comm.h>

typedef void (*zt_runner)(int nranks, zen_rank_fn fn, void *arg);

/* Which parts of the matrix to run (bit set). */
enum {
    ZT_COLL_ALLREDUCE = 1u << 0,      /* ring, rhd and auto */
    ZT_COLL_REDUCE_SCATTER = 1u << 1, /* reduce_scatter and reduce_scatterv */
    ZT_COLL_REDUCE = 1u << 2,
    ZT_COLL_GATHERS = 1u << 3, /* allgather(v), gather, scatter, broadcast, alltoall(v), barrier */
    ZT_COLL_LARGE = 1u << 4,   /* ~1M-element f32 sum allreduce (both algorithms) */
    ZT_COLL_ALL = 0xfu,
};

/*
 * Set the tunables the matrix expects (small ring chunks so short vectors are multi-chunk, a low
 * long-message cut for broadcast/reduce). Call before any rank starts; processes launched for
 * other transports inherit them.
 */
void zt_coll_matrix_env(void);

/* Run the selected parts of the matrix on nranks ranks through runner. */
void zt_coll_matrix(zt_runner runner, int nranks, unsigned parts);

#endif
