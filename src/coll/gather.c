/*
 * Gather to root, linear: the root posts one receive per rank straight into its slot of recvbuf
 * and every other rank sends its block once. With the receives posted up front the senders'
 * copies go directly into place and run concurrently.
 *
 *   4 ranks, root 0:  r1 -> r0: B1,  r2 -> r0: B2,  r3 -> r0: B3  (all at once)
 *
 * Bytes each non-root rank sends: S/n (its block); the root receives (n-1)/n * S for
 * S = recvbuf bytes, which is the minimum. Latency: the root takes n-1 messages, so for very
 * many ranks and tiny blocks a binomial tree would be faster (not implemented).
 * In place at the root: sendbuf == recvbuf + root * count (or sendbuf == recvbuf: the block is
 * moved to its slot first).
 */
#include <string.h>

#include "coll/coll_algos.h"
#include "common/alloc.h"

static zen_status root_side(zen_comm *comm, const zen_coll *cc, const char *sendbuf, char *out,
                            size_t bytes)
{
    int n = comm->size, r = comm->rank;
    if (bytes && sendbuf != out + (size_t)r * bytes)
        memmove(out + (size_t)r * bytes, sendbuf, bytes);
    if (n == 1)
        return ZEN_OK;
    zen_treq **reqs = zen__calloc((size_t)n, sizeof *reqs);
    if (!reqs)
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for %d requests", cc->op, n);
    zen_status st = ZEN_OK;
    for (int j = 0; j < n && st == ZEN_OK; j++)
        if (j != r)
            st = zen__coll_irecv(comm, cc, j, out + (size_t)j * bytes, bytes, &reqs[j]);
    for (int j = 0; j < n; j++) {
        if (j == r)
            continue;
        if (st == ZEN_OK)
            st = zen__coll_wait(comm, cc, reqs[j], j, bytes, NULL);
        else
            zen__coll_req_drop(comm, reqs[j]);
    }
    zen__free(reqs);
    return st;
}

zen_status zen_gather(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                      zen_dtype dtype, int root)
{
    zen_coll_desc d = { .op = "gather",
                        .checks = ZEN_DESC_DTYPE | ZEN_DESC_ROOT,
                        .dtype = dtype,
                        .root = root,
                        .count = count,
                        .blocks = comm ? (size_t)comm->size : 1,
                        .sendbuf = sendbuf,
                        .send_count = count,
                        .recvbuf = recvbuf,
                        .recv_count = ZEN_DESC_TOTAL,
                        .recv_at_root = true };
    zen_coll cc;
    zen_status st = zen__coll_start(comm, &d, &cc);
    if (st != ZEN_OK)
        return st;
    size_t bytes = d.bytes;
    if (comm->rank == root)
        st = root_side(comm, &cc, zen__coll_nonnull(sendbuf), zen__coll_nonnull(recvbuf), bytes);
    else
        st = zen__coll_sendrecv(comm, &cc, root, zen__coll_nonnull(sendbuf), bytes, -1, NULL, 0);
    return zen__coll_end(comm, &cc, st);
}
