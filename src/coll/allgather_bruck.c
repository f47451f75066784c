/*
 * Small-message allgather in ceil(log2 n) rounds (the concatenation algorithm of Bruck, Ho,
 * Kipnis, Upfal and Weathersby, IEEE TPDS 1997). The ring needs n - 1 dependent steps, so for a few
 * bytes per rank its time is n - 1 message latencies; this one needs log2 n.
 *
 * Rank r works in a buffer W in rotated order, W[i] = block of rank (r + i) mod n, W[0] its own.
 * Round k, with d = 2^k: send W[0, m) to rank (r - d) mod n and receive m blocks from rank
 * (r + d) mod n into W[d, d + m), m = min(d, n - d). The sender's W[0, m) are the blocks of ranks
 * r + d .. r + d + m - 1, which is exactly W[d, d + m) here. After the last round W holds all n
 * blocks; rotating it by r gives recvbuf.
 *
 *   4 ranks, blocks A B C D; W after each round (rank 0 | 1 | 2 | 3):
 *     start    A       | B       | C       | D
 *     d = 1    A B     | B C     | C D     | D A        (each receives 1 block from r + 1)
 *     d = 2    A B C D | B C D A | C D A B | D A B C    (each receives 2 blocks from r + 2)
 *
 * Bytes each rank sends: (n - 1) * b for b bytes per rank, the same as the ring, in ceil(log2 n)
 * messages. The rotation costs one extra local copy of n * b bytes, which is why the ring stays
 * the choice for large blocks (zen_allgather picks this one below ZEN_ALLGATHER_BRUCK_MAX_BYTES).
 * Every message's length follows from the count, so ranks that disagree on it fail with
 * ZEN_EPROTO naming the peer, as in the ring.
 */
#include <string.h>

#include "coll/coll_algos.h"

zen_status zen_allgather_bruck(zen_comm *comm, const zen_coll *cc, const void *own, size_t block,
                               void *recvbuf)
{
    int n = comm->size, r = comm->rank;
    size_t total = (size_t)n * block; /* the caller checked it does not overflow */
    char *w = zen_coll_scratch_get(comm, total ? total : 1);
    if (!w)
        return zen_fail(comm, ZEN_ENOMEM, "allgather: no memory for %zu bytes of scratch", total);
    if (block)
        memcpy(w, own, block);
    zen_status st = ZEN_OK;
    for (int d = 1; d < n && st == ZEN_OK; d *= 2) {
        int m = d < n - d ? d : n - d;
        int to = zen_ring_mod(r - d, n), from = zen_ring_mod(r + d, n);
        st = zen_coll_sendrecv(comm, cc, to, w, (size_t)m * block, from, w + (size_t)d * block,
                               (size_t)m * block);
    }
    if (st == ZEN_OK && block) {
        /* W[i] is rank (r + i)'s block: the first n - r go to recvbuf[r..n), the rest to [0..r) */
        char *out = recvbuf;
        size_t head = (size_t)(n - r) * block;
        memcpy(out + (size_t)r * block, w, head);
        memcpy(out, w + head, total - head);
    }
    zen_coll_scratch_put(comm, w);
    return st;
}
