/*
 * Allgather in ceil(log2 n) rounds (the concatenation algorithm of Bruck, Ho, Kipnis, Upfal and
 * Weathersby, IEEE TPDS 1997), for equal blocks (allgather) and per-rank sizes (allgatherv). The
 * ring needs n - 1 dependent steps, so for a few bytes per rank its time is n - 1 message
 * latencies; this one needs log2 n.
 *
 * Rank r works in a buffer W in rotated order, W[i] = block of rank (r + i) mod n, W[0] its own;
 * pos[i] is the byte offset of W[i] (the prefix sum of the rotated sizes, which every rank knows:
 * the counts are an argument of allgatherv). Round k, with d = 2^k: send W[0, m) to rank
 * (r - d) mod n and receive m blocks from rank (r + d) mod n into W[d, d + m), m = min(d, n - d).
 * The sender's W[0, m) are the blocks of ranks r + d .. r + d + m - 1, which is exactly
 * W[d, d + m) here. After the last round W holds all n blocks.
 *
 *   4 ranks, blocks A B C D; W after each round (rank 0 | 1 | 2 | 3):
 *     start    A       | B       | C       | D
 *     d = 1    A B     | B C     | C D     | D A        (each receives 1 block from r + 1)
 *     d = 2    A B C D | B C D A | C D A B | D A B C    (each receives 2 blocks from r + 2)
 *
 * Bytes each rank sends: the sum over rounds of pos[m]; (n - 1) * b for equal blocks of b bytes,
 * the same as the ring, in ceil(log2 n) messages. Putting W into rank
 * order costs one extra local copy of S bytes, which is why the ring stays the choice for large
 * blocks (zen_allgather/zen_allgatherv pick this one below ZEN_ALLGATHER_BRUCK_MAX_BYTES); a
 * caller that can read the blocks in rotated order (the sparse BALANCED pull) skips that copy with
 * zen__allgatherv_bruck_rotated. Every message's length follows from the counts, so ranks that
 * disagree on them fail with ZEN_EPROTO naming the peer, as in the ring.
 */
#include <string.h>

#include "coll/coll_algos.h"
#include "common/alloc.h"

/* Rotated offsets: pos[i] for i = 0..n; block of rank j is counts[j] * es bytes (NULL: es). */
static void rotated_offsets(int n, int r, const size_t *counts, size_t es, size_t *pos)
{
    pos[0] = 0;
    for (int i = 0; i < n; i++) {
        int j = (r + i) % n;
        pos[i + 1] = pos[i] + (counts ? counts[j] * es : es);
    }
}

zen_status zen__allgatherv_bruck_rotated(zen_comm *comm, const zen_coll *cc, const void *own,
                                         const size_t *counts, size_t es, void *w, size_t *pos)
{
    int n = comm->size, r = comm->rank;
    char *buf = w;
    rotated_offsets(n, r, counts, es, pos);
    if (pos[1])
        memcpy(buf, own, pos[1]);
    zen_status st = ZEN_OK;
    for (int d = 1; d < n && st == ZEN_OK; d *= 2) {
        int m = d < n - d ? d : n - d;
        int to = zen_ring_mod(r - d, n), from = zen_ring_mod(r + d, n);
        /* what `to` expects from us is its W[d, d + m): our W[0, m), sized by our offsets */
        st = zen__coll_sendrecv(comm, cc, to, buf, pos[m], from, buf + pos[d], pos[d + m] - pos[d]);
    }
    return st;
}

/* Run the rounds in scratch, then copy each rank's block to recvbuf + displs[j] * es (displs
 * NULL: blocks back to back in rank order, one copy in two pieces). */
static zen_status bruck_placed(zen_comm *comm, const zen_coll *cc, const void *own,
                               const size_t *counts, const size_t *displs, size_t es, void *recvbuf)
{
    int n = comm->size, r = comm->rank;
    size_t *pos = zen__malloc_array((size_t)n + 1, sizeof *pos);
    if (!pos)
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for %d offsets", cc->op, n);
    rotated_offsets(n, r, counts, es, pos);
    size_t total = pos[n]; /* the caller checked it does not overflow */
    char *w = zen__coll_scratch_get(comm, total ? total : 1);
    if (!w) {
        zen__free(pos);
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for %zu bytes of scratch", cc->op, total);
    }
    zen_status st = zen__allgatherv_bruck_rotated(comm, cc, own, counts, es, w, pos);
    char *out = recvbuf;
    if (st == ZEN_OK && total && !displs) {
        /* W[i] is rank (r + i)'s block: the first n - r go to recvbuf[r..n), the rest to [0..r) */
        size_t head = pos[n - r];
        memcpy(out + (total - head), w, head);
        memcpy(out, w + head, total - head);
    } else if (st == ZEN_OK) {
        for (int i = 0; i < n; i++) {
            int j = (r + i) % n;
            if (pos[i + 1] > pos[i])
                memcpy(out + displs[j] * es, w + pos[i], pos[i + 1] - pos[i]);
        }
    }
    zen__coll_scratch_put(comm, w);
    zen__free(pos);
    return st;
}

zen_status zen__allgather_bruck(zen_comm *comm, const zen_coll *cc, const void *own, size_t block,
                                void *recvbuf)
{
    return bruck_placed(comm, cc, own, NULL, NULL, block, recvbuf);
}

zen_status zen__allgatherv_bruck(zen_comm *comm, const zen_coll *cc, const void *own,
                                 const size_t *counts, const size_t *displs, size_t es,
                                 void *recvbuf)
{
    return bruck_placed(comm, cc, own, counts, displs, es, recvbuf);
}
