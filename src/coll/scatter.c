/*
 * Scatter from root, linear: the root posts one send per rank straight from that rank's slot of
 * sendbuf, all at once, and every other rank receives its block once; the root's own block is a
 * local copy. The mirror of gather.c.
 *
 *   4 ranks, root 0:  r0 -> r1: B1,  r0 -> r2: B2,  r0 -> r3: B3  (all at once)
 *
 * Bytes the root sends: (n-1)/n * S for S = sendbuf bytes, which is the minimum; every other rank
 * receives S/n (its block). Latency: the root issues n-1 messages, so for very many ranks and
 * tiny blocks a binomial tree would be faster (not implemented).
 * In place at the root: recvbuf == sendbuf + root * count (nothing to copy).
 */
#include <string.h>

#include "coll/coll_algos.h"

static zen_status root_side(zen_comm *comm, const zen_coll *cc, const char *in, char *recvbuf,
                            size_t bytes)
{
    int r = comm->rank;
    if (bytes && recvbuf != in + (size_t)r * bytes)
        memmove(recvbuf, in + (size_t)r * bytes, bytes);
    return zen__coll_root_fan(comm, cc, in, NULL, bytes);
}

zen_status zen_scatter(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                       zen_dtype dtype, int root)
{
    zen_coll_desc d = { .op = "scatter",
                        .checks = ZEN_DESC_DTYPE | ZEN_DESC_ROOT,
                        .dtype = dtype,
                        .root = root,
                        .count = count,
                        .blocks = comm ? (size_t)comm->size : 1,
                        .sendbuf = sendbuf,
                        .send_count = ZEN_DESC_TOTAL,
                        .send_at_root = true,
                        .recvbuf = recvbuf,
                        .recv_count = count };
    zen_coll cc;
    zen_status st = zen__coll_start(comm, &d, &cc);
    if (st != ZEN_OK)
        return st;
    size_t bytes = d.bytes;
    if (comm->rank == root)
        st = root_side(comm, &cc, zen__coll_nonnull(sendbuf), zen__coll_nonnull(recvbuf), bytes);
    else
        st = zen__coll_sendrecv(comm, &cc, -1, NULL, 0, root, zen__coll_nonnull(recvbuf), bytes);
    return zen__coll_end(comm, &cc, st);
}
