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

static zen_status root_side(zen_comm *comm, const zen_coll *cc, const char *sendbuf, char *out,
                            size_t bytes)
{
    int r = comm->rank;
    if (bytes && sendbuf != out + (size_t)r * bytes)
        memmove(out + (size_t)r * bytes, sendbuf, bytes);
    return zen__coll_root_fan(comm, cc, NULL, out, bytes);
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
