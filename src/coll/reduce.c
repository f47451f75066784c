/*
 * Reduce to root (zen_reduce). Two algorithms, chosen by message size (the same on every rank):
 *
 * Binomial tree (S < ZEN_COLL_LONG_BYTES, or n <= 2): with v = r - root mod n, in round k a rank
 * whose bit k is set sends its partial result to v - 2^k and stops; the others receive from
 * v + 2^k (if it exists) and reduce it into their partial result. A leaf sends its sendbuf as is.
 *   4 ranks, root 0:  round 0: r1 -> r0, r3 -> r2;  round 1: r2 -> r0
 *   Bytes: every non-root rank sends S once; the root receives ceil(log2 n) * S; latency
 *   ceil(log2 n) message times.
 *
 * Reduce-scatter + gather (long messages, n >= 3): the ring reduce-scatter (ring_reduce_scatter.c)
 * over an even split leaves rank j with the reduced segment j, then the root gathers the
 * segments into recvbuf (root's own lands there directly).
 *   4 ranks, root 0, segments A B C D: 3 ring steps, then r1 -> r0: B*, r2 -> r0: C*, r3 -> r0: D*
 *   Bytes: every rank sends (n-1)/n * S in the ring, non-roots S/n more; the root receives
 *   2 (n-1)/n * S. The reduction work is spread over all ranks.
 *
 * recvbuf is only used on the root. In place at the root: sendbuf == recvbuf. AVG is divided on
 * the root at the end.
 */
#include <string.h>

#include "coll/coll_algos.h"
#include "coll/reduce_op.h"
#include "common/alloc.h"

static zen_status binomial(zen_comm *comm, const zen_coll *cc, const char *sendbuf, char *recvbuf,
                           size_t count, zen_dtype dtype, zen_op op, int root)
{
    int n = comm->size, r = comm->rank, v = zen_ring_mod(r - root, n);
    size_t bytes = count * zen_dtype_size(dtype);
    char *acc = r == root ? recvbuf : NULL; /* partial result; NULL: still sendbuf */
    char *tmp = NULL, *own = NULL;
    const char *cur = sendbuf;
    zen_status st = ZEN_OK;
    for (int mask = 1; mask < n && st == ZEN_OK; mask <<= 1) {
        if (v & mask) {
            st = zen__coll_sendrecv(comm, cc, zen_ring_mod(v - mask + root, n), cur, bytes, -1,
                                    NULL, 0);
            break;
        }
        if (v + mask >= n)
            continue;
        if (!tmp) {
            tmp = bytes ? zen__malloc_array(2, bytes) : zen__malloc(1);
            if (!tmp) {
                st = zen__fail(comm, ZEN_ENOMEM, "%s: no memory for %zu bytes", cc->op, 2 * bytes);
                break;
            }
            own = tmp + bytes;
            if (!acc)
                acc = own;
        }
        st =
            zen__coll_sendrecv(comm, cc, -1, NULL, 0, zen_ring_mod(v + mask + root, n), tmp, bytes);
        if (st == ZEN_OK) {
            zen__reduce3(acc, cur, tmp, count, dtype, op);
            cur = acc;
        }
    }
    if (st == ZEN_OK && r == root && cur != recvbuf && bytes)
        memmove(recvbuf, cur, bytes); /* n == 1 */
    zen__free(tmp);
    return st;
}

static zen_status rs_gather(zen_comm *comm, const zen_coll *cc, const char *sendbuf, char *recvbuf,
                            size_t count, zen_dtype dtype, zen_op op, int root)
{
    int n = comm->size, r = comm->rank;
    size_t es = zen_dtype_size(dtype);
    size_t *layout = zen__malloc_array(2 * (size_t)n, sizeof *layout);
    if (!layout)
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for a layout of %d", cc->op, n);
    size_t *counts = layout, *displs = layout + n;
    zen__ring_even_layout(count, n, counts, displs);
    char *own = NULL;
    zen_status st = ZEN_OK;
    if (r == root) {
        own = recvbuf + displs[r] * es;
    } else {
        own = zen__malloc(counts[r] ? counts[r] * es : 1);
        if (!own)
            st = zen__fail(comm, ZEN_ENOMEM, "%s: no memory for a segment", cc->op);
    }
    zen_ring ring;
    zen__ring_init(&ring, comm, counts, displs, dtype, op);
    if (st == ZEN_OK)
        st = zen__ring_reduce_scatter(comm, cc, &ring, sendbuf, NULL, own);
    if (st == ZEN_OK)
        st = zen__ring_root_segments(comm, cc, recvbuf, own, counts, displs, es, root, 1);
    if (r != root)
        zen__free(own);
    zen__free(layout);
    return st;
}

zen_status zen_reduce(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                      zen_dtype dtype, zen_op op, int root)
{
    zen_coll_desc d = { .op = "reduce",
                        .checks = ZEN_DESC_REDUCE | ZEN_DESC_ROOT,
                        .dtype = dtype,
                        .rop = op,
                        .root = root,
                        .count = count,
                        .sendbuf = sendbuf,
                        .send_count = count,
                        .recvbuf = recvbuf,
                        .recv_count = count,
                        .recv_at_root = true,
                        .slot_path = true };
    zen_coll cc;
    zen_status st = zen__coll_start(comm, &d, &cc);
    if (st != ZEN_OK)
        return st;
    const char *in = zen__coll_nonnull(sendbuf);
    char *out = comm->rank == root ? zen__coll_nonnull(recvbuf) : NULL;
    if (cc.slots)
        return zen__coll_end(comm, &cc,
                             zen__reduce_slots_run(comm, &cc, in, out, count, dtype, op, root));
    if (zen__coll_decide_long(ZEN_COLL_DECIDE_REDUCE, comm->size, d.bytes, count))
        st = rs_gather(comm, &cc, in, out, count, dtype, op, root);
    else
        st = binomial(comm, &cc, in, out, count, dtype, op, root);
    if (st == ZEN_OK && comm->rank == root)
        zen__reduce_finish_avg(out, count, dtype, op, comm->size);
    return zen__coll_end(comm, &cc, st);
}
