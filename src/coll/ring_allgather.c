/*
 * Pipelined ring allgather over an arbitrary segment layout (allgather(v), the second half of
 * ring allreduce, the second half of long-message broadcast).
 *
 * Steps: n-1 steps; at step s rank r sends segment (r-s) mod n to r+1 and receives segment
 * (r-s-1) mod n from r-1 straight into its place in the output; what it sends at step s is what
 * it received at step s-1 (at step 0, its own segment).
 *
 *   4 ranks, rank k starts with segment Sk
 *   step 0:  r0 -> r1: S0   r1 -> r2: S1   r2 -> r3: S2   r3 -> r0: S3
 *   step 1:  r0 -> r1: S3   r1 -> r2: S0   r2 -> r3: S1   r3 -> r0: S2
 *   step 2:  r0 -> r1: S2   r1 -> r2: S3   r2 -> r3: S0   r3 -> r0: S1
 *   every rank now holds S0..S3
 *
 * Pipelining: segments are cut into ZEN_RING_CHUNK_BYTES chunks and the loop runs chunk-major, so
 * a chunk is forwarded as soon as it arrives. Up to WINDOW receives are posted ahead, directly
 * into the output, so the sender's copy is the only copy.
 * Bytes each rank sends: every segment except the one of rank r+1, i.e. (n-1)/n * S for an even
 * layout of S bytes in total; it receives as much. No extra memory.
 */
#include "coll/coll_algos.h"

#define AG_SIGNATURE_KIND 2
#define WINDOW            4
#define SEND_LAG          0 /* step s sends segment rank - s */
#define RECV_LAG          1 /* and receives segment rank - s - 1 */

typedef struct posted {
    zen_treq *req;
    size_t bytes;
} posted;

zen_status zen__ring_allgather(zen_comm *comm, const zen_coll *cc, const zen_ring *ring, void *buf)
{
    if (ring->n == 1)
        return ZEN_OK;
    zen_status st = zen__ring_check_signature(comm, cc, ring, AG_SIGNATURE_KIND);
    if (st != ZEN_OK)
        return st;
    size_t steps = (size_t)ring->n - 1, total = zen__ring_max_chunks(ring) * steps;
    size_t es = ring->esize;
    int next = zen_ring_mod(ring->rank + 1, ring->n), prev = zen_ring_mod(ring->rank - 1, ring->n);
    posted win[WINDOW];
    size_t head = 0, count = 0; /* posted receives, oldest at head */
    size_t q = 0;               /* next position whose receive is not posted yet */
    for (size_t p = 0; p < total && st == ZEN_OK; p++) {
        /* keep up to WINDOW receives posted ahead, in position order */
        while (st == ZEN_OK && count < WINDOW && q < total) {
            size_t qc = q / steps;
            int qseg = zen_ring_seg(ring, q % steps, RECV_LAG);
            if (qc < zen_ring_nchunks(ring, qseg)) {
                posted *w = &win[(head + count) % WINDOW];
                w->bytes = zen_ring_chunk_len(ring, qseg, qc) * es;
                st = zen__coll_irecv(comm, cc, prev,
                                     (char *)buf + zen_ring_chunk_off(ring, qseg, qc), w->bytes,
                                     &w->req);
                if (st == ZEN_OK)
                    count++;
            }
            q++;
        }
        if (st != ZEN_OK)
            break;
        size_t c = p / steps, s = p % steps;
        int sseg = zen_ring_seg(ring, s, SEND_LAG), rseg = zen_ring_seg(ring, s, RECV_LAG);
        zen_treq *sreq = NULL;
        if (c < zen_ring_nchunks(ring, sseg)) {
            st = zen__coll_isend(comm, cc, next, (char *)buf + zen_ring_chunk_off(ring, sseg, c),
                                 zen_ring_chunk_len(ring, sseg, c) * es, &sreq);
            if (st != ZEN_OK)
                break;
        }
        if (c < zen_ring_nchunks(ring, rseg)) {
            posted *w = &win[head];
            st = zen__coll_wait(comm, cc, w->req, prev, w->bytes, NULL);
            head = (head + 1) % WINDOW;
            count--;
        }
        zen_status sst = zen__coll_wait(comm, cc, sreq, next, SIZE_MAX, NULL);
        if (st == ZEN_OK)
            st = sst;
    }
    for (; count > 0; count--, head = (head + 1) % WINDOW)
        zen__coll_req_drop(comm, win[head].req);
    return st;
}
