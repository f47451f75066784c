/*
 * Barrier by dissemination: in round k (k = 0 .. ceil(log2 n) - 1) rank r sends an empty message
 * to r + 2^k and waits for one from r - 2^k. After round k every rank has (transitively) heard
 * from the 2^(k+1) ranks before it, so after the last round from all n: nobody leaves before
 * everybody has arrived. Works for any n (no power-of-two requirement).
 *
 *   4 ranks: round 0: r0->r1, r1->r2, r2->r3, r3->r0;  round 1: r0->r2, r1->r3, r2->r0, r3->r1
 *
 * Bytes each rank sends: 0, in ceil(log2 n) messages; latency ceil(log2 n) message times.
 * On a communicator with collective slots (slots.c) a barrier is one slot exchange instead: every
 * rank publishes its descriptor and waits until it has seen every other rank's.
 */
#include "coll/coll_algos.h"

zen_status zen_barrier(zen_comm *comm)
{
    zen_coll_desc desc = { .op = "barrier", .slot_path = true };
    zen_coll cc;
    zen_status st = zen__coll_start(comm, &desc, &cc);
    if (st != ZEN_OK)
        return st;
    /* The outermost barrier is the argument agreement's butterfly, run by zen__coll_start (agree.c):
     * no rank gets through it before every rank has arrived. A nested one checks nothing and
     * disseminates. */
    if (cc.slots)
        return zen__coll_end(comm, &cc, zen__coll_slots_exchange(comm, &cc));
    int n = comm->size, r = comm->rank;
    for (int d = 1; d < n && st == ZEN_OK && cc.agree.word == 0; d *= 2)
        st = zen__coll_sendrecv(comm, &cc, zen_ring_mod(r + d, n), NULL, 0, zen_ring_mod(r - d, n),
                                NULL, 0);
    return zen__coll_end(comm, &cc, st);
}
