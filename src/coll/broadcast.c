/*
 * Broadcast from root. Two algorithms, chosen by message size (the same on every rank):
 *
 * Binomial tree (S < ZEN_COLL_LONG_BYTES, or n <= 2): with ranks renumbered v = r - root mod n,
 * rank v receives from v - 2^k where 2^k is its lowest set bit, then sends to v + 2^j for every
 * 2^j below that bit (the root: every 2^j < n), largest first.
 *   4 ranks, root 0:  step 1: r0 -> r2;  step 2: r0 -> r1, r2 -> r3
 *   Bytes: an inner rank sends S per child; the root sends ceil(log2 n) * S; latency
 *   ceil(log2 n) message times.
 *
 * Scatter + ring allgather (long messages, n >= 3): the root sends segment j (an even split
 * into n) to rank j, then the ring allgather (ring_allgather.c) circulates the segments.
 *   4 ranks, root 0, segments A B C D:  scatter: r0 -> r1: B, r0 -> r2: C, r0 -> r3: D
 *   then 3 ring steps as in ring_allgather.c.
 *   Bytes: the root sends 2 (n-1)/n * S, every other rank (n-1)/n * S; latency n message times
 *   plus the pipeline, so only worth it when S dominates.
 */
#include "coll/coll_algos.h"
#include "common/alloc.h"

static zen_status binomial(zen_comm *comm, const zen_coll *cc, char *buf, size_t bytes, int root)
{
    int n = comm->size, v = zen_ring_mod(comm->rank - root, n);
    int mask = 1;
    zen_status st = ZEN_OK;
    while (mask < n) {
        if (v & mask) {
            st = zen__coll_sendrecv(comm, cc, -1, NULL, 0, zen_ring_mod(v - mask + root, n), buf,
                                    bytes);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0 && st == ZEN_OK; mask >>= 1)
        if (v + mask < n)
            st = zen__coll_sendrecv(comm, cc, zen_ring_mod(v + mask + root, n), buf, bytes, -1,
                                    NULL, 0);
    return st;
}

static zen_status scatter_allgather(zen_comm *comm, const zen_coll *cc, char *buf, size_t count,
                                    zen_dtype dtype, int root)
{
    int n = comm->size, r = comm->rank;
    size_t *layout = zen__malloc_array(2 * (size_t)n, sizeof *layout);
    if (!layout)
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for a layout of %d", cc->op, n);
    size_t *counts = layout, *displs = layout + n, es = zen_dtype_size(dtype);
    zen__ring_even_layout(count, n, counts, displs);
    zen_status st =
        zen__ring_root_segments(comm, cc, buf, buf + displs[r] * es, counts, displs, es, root, 0);
    if (st == ZEN_OK) {
        zen_ring ring;
        zen__ring_init(&ring, comm, counts, displs, dtype, ZEN_SUM);
        st = zen__ring_allgather(comm, cc, &ring, buf);
    }
    zen__free(layout);
    return st;
}

zen_status zen_broadcast(zen_comm *comm, void *buf, size_t count, zen_dtype dtype, int root)
{
    zen_coll_desc d = { .op = "broadcast",
                        .checks = ZEN_DESC_DTYPE | ZEN_DESC_ROOT,
                        .dtype = dtype,
                        .root = root,
                        .count = count,
                        .sendbuf = buf,
                        .send_count = count,
                        .send_name = "buf",
                        .slot_path = true };
    zen_coll cc;
    zen_status st = zen__coll_start(comm, &d, &cc);
    if (st != ZEN_OK)
        return st;
    char *b = zen__coll_nonnull(buf);
    if (cc.slots)
        st = zen__broadcast_slots_run(comm, &cc, b, d.bytes, root);
    else if (zen__coll_decide_long(ZEN_COLL_DECIDE_BROADCAST, comm->size, d.bytes, count))
        st = scatter_allgather(comm, &cc, b, count, dtype, root);
    else if (comm->size > 1)
        st = binomial(comm, &cc, b, d.bytes, root);
    return zen__coll_end(comm, &cc, st);
}
