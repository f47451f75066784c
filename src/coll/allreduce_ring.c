/*
 * Ring allreduce: ring reduce-scatter followed by ring allgather over an even split of the
 * vector into n segments (segment j: count/n elements, one more for j < count % n).
 *
 * Steps:
 *  1. reduce-scatter (ring_reduce_scatter.c): n-1 steps; rank r ends with the full reduction of
 *     segment r. Partial results are written straight into recvbuf (which needs them anyway),
 *     reducing from the received chunk and the caller's sendbuf, so out of place costs no copy.
 *  2. AVG: rank r divides its own segment only (count/n work per rank).
 *  3. allgather (ring_allgather.c): n-1 steps; segments travel on into recvbuf in place.
 *
 *   4 ranks, vector = segments A B C D
 *   after 1:  r0: A*  r1: B*  r2: C*  r3: D*      (* = reduced over all ranks)
 *   after 3:  every rank: A* B* C* D*
 *
 * Both phases are chunked (ZEN_RING_CHUNK_BYTES) and pipelined; see the engines.
 * Bytes each rank sends: 2 (n-1)/n * S for S = count * dtype size (bandwidth optimal), in
 * 2 (n-1) * chunks messages; latency grows as 2 (n-1) message times, hence rhd for small S.
 * Limitations: with count < n some segments are empty (correct, but rhd is then better).
 */
#include "coll/coll_algos.h"
#include "coll/reduce_op.h"
#include "common/alloc.h"

zen_status zen__allreduce_ring_run(zen_comm *comm, const zen_coll *cc, const void *sendbuf,
                                   void *recvbuf, size_t count, zen_dtype dtype, zen_op op)
{
    int n = comm->size, r = comm->rank;
    size_t *layout = zen__malloc_array(2 * (size_t)n, sizeof *layout);
    if (!layout)
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for a ring layout of %d ranks", cc->op,
                         n);
    size_t *counts = layout, *displs = layout + n;
    zen__ring_even_layout(count, n, counts, displs);
    zen_ring ring;
    zen__ring_init(&ring, comm, counts, displs, dtype, op);
    char *own = (char *)recvbuf + displs[r] * ring.esize;
    zen_status st = zen__ring_reduce_scatter(comm, cc, &ring, sendbuf, recvbuf, own);
    if (st == ZEN_OK) {
        zen__reduce_finish_avg(own, counts[r], dtype, op, n);
        st = zen__ring_allgather(comm, cc, &ring, recvbuf);
    }
    zen__free(layout);
    return st;
}
