/*
 * Recursive halving/doubling allreduce (Rabenseifner): a reduce-scatter by recursive halving
 * followed by an allgather by recursive doubling, over the largest power of two p <= n.
 *
 * Steps (rem = n - p):
 *  0. fold: among ranks 0 .. 2rem-1, each even rank sends its whole vector to the odd rank above
 *     it, which reduces it into its own and stands for both; the even ranks then wait. The p
 *     remaining ranks are renumbered 0 .. p-1.
 *  1. halving: for d = p/2, p/4, .., 1 the rank swaps halves of its current range with the rank
 *     whose new number differs in bit d: it keeps the lower half if that bit is 0, sends the
 *     other half and reduces the received copy of the kept half into its own. After log2 p steps
 *     it owns 1/p of the vector, fully reduced (AVG: divided here).
 *  2. doubling: the same pairs in reverse order (d = 1, 2, .., p/2) swap their owned ranges, which
 *     doubles the owned range each time, until every rank holds the whole result.
 *  3. unfold: each odd rank below 2rem sends the result to the even rank it stood for.
 *
 *   4 ranks (p = 4), vector = quarters A B C D
 *   halving d=2: r0<->r2, r1<->r3; r0,r1 keep AB, r2,r3 keep CD
 *   halving d=1: r0<->r1 (r0 keeps A, r1 keeps B), r2<->r3 (r2 keeps C, r3 keeps D)
 *   doubling d=1: r0<->r1 -> AB, r2<->r3 -> CD;  doubling d=2: r0<->r2, r1<->r3 -> ABCD
 *
 * Bytes each rank sends (S = vector bytes): 2 (p-1)/p * S in 2 log2 p messages, plus S for the
 * fold and S for the unfold on the 2rem folded pairs. Latency: 2 log2 p (+2) message times, which
 * is why auto picks it for small vectors.
 * Argument agreement (agree.c): the fold and halving messages carry the collective's descriptor
 * (24 bytes in front of the payload), which visits every edge of the butterfly once; the doubling
 * and unfold messages carry nothing.
 * Memory: recvbuf is the working buffer (out of place costs one copy of S) plus S bytes of scratch.
 */
#include <string.h>

#include "coll/coll_algos.h"
#include "coll/reduce_op.h"

#define MAX_LEVELS 32

/* Communicator rank of new rank nr. */
static int real_rank(int nr, int rem)
{
    return nr < rem ? 2 * nr + 1 : nr + rem;
}

typedef struct range {
    size_t lo, hi;
} range;

static zen_status halving_doubling(zen_comm *comm, const zen_coll *cc, char *buf, char *tmp,
                                   size_t count, zen_dtype dtype, zen_op op, int nr, int p, int rem)
{
    size_t es = zen_dtype_size(dtype);
    range stack[MAX_LEVELS];
    range cur = { 0, count };
    int levels = 0;
    zen_status st = ZEN_OK;
    for (int d = p / 2; d >= 1 && st == ZEN_OK; d /= 2) {
        int peer = real_rank(nr ^ d, rem);
        size_t mid = cur.lo + (cur.hi - cur.lo) / 2;
        range keep = (nr & d) ? (range){ mid, cur.hi } : (range){ cur.lo, mid };
        range give = (nr & d) ? (range){ cur.lo, mid } : (range){ mid, cur.hi };
        stack[levels++] = cur;
        size_t klen = keep.hi - keep.lo;
        st = zen__coll_sendrecv_agreed(comm, cc, peer, buf + give.lo * es, (give.hi - give.lo) * es,
                                       peer, tmp, klen * es);
        if (st == ZEN_OK)
            zen_reduce_into(buf + keep.lo * es, tmp, klen, dtype, op);
        cur = keep;
    }
    if (st != ZEN_OK)
        return st;
    zen__reduce_finish_avg(buf + cur.lo * es, cur.hi - cur.lo, dtype, op, comm->size);
    for (int d = 1; d < p && st == ZEN_OK; d *= 2) {
        int peer = real_rank(nr ^ d, rem);
        range parent = stack[--levels];
        range other =
            cur.lo == parent.lo ? (range){ cur.hi, parent.hi } : (range){ parent.lo, cur.lo };
        st = zen__coll_sendrecv(comm, cc, peer, buf + cur.lo * es, (cur.hi - cur.lo) * es, peer,
                                buf + other.lo * es, (other.hi - other.lo) * es);
        cur = parent;
    }
    return st;
}

zen_status zen__allreduce_rhd_run(zen_comm *comm, const zen_coll *cc, const void *sendbuf,
                                  void *recvbuf, size_t count, zen_dtype dtype, zen_op op)
{
    int n = comm->size, r = comm->rank;
    size_t es = zen_dtype_size(dtype), bytes = count * es;
    char *buf = recvbuf;
    if (sendbuf != recvbuf && bytes)
        memcpy(buf, sendbuf, bytes);
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    int rem = n - p;
    char *tmp = zen__coll_scratch_get(comm, bytes);
    if (!tmp)
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for %zu bytes of scratch", cc->op, bytes);
    zen_status st = ZEN_OK;
    int nr; /* new rank among the p, or -1 for a folded-away rank */
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            st = zen__coll_sendrecv_agreed(comm, cc, r + 1, buf, bytes, -1, NULL, 0);
            nr = -1;
        } else {
            st = zen__coll_sendrecv_agreed(comm, cc, -1, NULL, 0, r - 1, tmp, bytes);
            if (st == ZEN_OK)
                zen_reduce_into(buf, tmp, count, dtype, op);
            nr = r / 2;
        }
    } else {
        nr = r - rem;
    }
    if (st == ZEN_OK && nr >= 0)
        st = halving_doubling(comm, cc, buf, tmp, count, dtype, op, nr, p, rem);
    if (st == ZEN_OK && r < 2 * rem) {
        if (r % 2 == 1)
            st = zen__coll_sendrecv(comm, cc, r - 1, buf, bytes, -1, NULL, 0);
        else
            st = zen__coll_sendrecv(comm, cc, -1, NULL, 0, r + 1, buf, bytes);
    }
    zen__coll_scratch_put(comm, tmp);
    return st;
}
