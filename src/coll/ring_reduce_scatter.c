/*
 * Pipelined ring reduce-scatter over an arbitrary segment layout (used by reduce_scatter(v),
 * ring allreduce and long-message reduce).
 *
 * Steps: n-1 steps; at step s rank r sends segment (r-s-1) mod n to r+1 and receives segment
 * (r-s-2) mod n from r-1, which it reduces with its own input of that segment. What it sends at
 * step s is what it reduced at step s-1 (at step 0, its own input), so after n-1 steps segment r
 * has passed through every rank and rank r holds its full reduction.
 *
 *   4 ranks, segments A B C D; "a0" = rank 0's input of A, "abc.." = partial sums
 *   step 0:  r0 -> r1: D0   r1 -> r2: A1   r2 -> r3: B2   r3 -> r0: C3
 *   step 1:  r0 -> r1: C03  r1 -> r2: D01  r2 -> r3: A12  r3 -> r0: B23
 *   step 2:  r0 -> r1: B023 r1 -> r2: C013 r2 -> r3: D012 r3 -> r0: A123
 *   result:  r0 has A, r1 has B, r2 has C, r3 has D (each summed over all four ranks)
 *
 * Pipelining: every segment is cut into chunks of ZEN_RING_CHUNK_BYTES and the loop runs chunk-
 * major (for each chunk index, the n-1 steps), so chunk c moves on to the next rank as soon as it
 * is reduced while the following chunk is still arriving. RS_WINDOW receives stay posted ahead
 * (the window is refilled before the current chunk is reduced), so the sender copies straight
 * into a posted buffer (no unexpected-message copy) while we compute. Received chunks land in
 * RS_WINDOW + 1 rotating chunk buffers and are reduced from there directly into their
 * destination: the caller's work buffer (allreduce: its output, which it needs anyway) or, when
 * there is none, two alternating scratch chunks. The chunk buffers come from the communicator's
 * cached scratch, so a large allreduce does not fault in fresh pages on every call.
 * Fused receives: when the transport has combining receives (inproc, mpi) and the destination is
 * written by that position alone, the receive is posted with "own input (op) message" as its
 * combine, so the message is reduced on delivery straight into its destination (inproc: by the
 * sending thread, one pass over the data instead of a copy plus a reduce). ZEN_RING_FUSE=0 turns
 * it off.
 *
 * Bytes each rank sends: every segment except its own once, i.e. (n-1)/n * S for an even layout
 * of S bytes (bandwidth optimal), in (n-1) * chunks messages; it receives as much.
 * Memory: RS_WINDOW + 4 chunks. Limitations: one message per chunk per step; an empty segment
 * still costs one empty message; the reduction is serial per rank (no helper threads).
 */
#include <string.h>

#include "coll/coll_algos.h"
#include "coll/reduce_op.h"
#include "common/alloc.h"
#include "common/tunables.h"

#define RS_SIGNATURE_KIND 1
#define RS_WINDOW         4 /* receives posted ahead (each needs its own chunk buffer) */
#define SEND_LAG          1 /* step s sends segment rank - s - 1 */
#define RECV_LAG          2 /* and receives segment rank - s - 2 */

typedef struct posted {
    zen_treq *req;
    char *buf;
    size_t bytes;
    int fused; /* the transport reduces the message into its destination itself */
} posted;

typedef struct rs_state {
    const zen_ring *ring;
    const char *in;
    char *work;
    char *own_out;
    char *tmp[RS_WINDOW + 1]; /* receive chunks: RS_WINDOW posted, one being reduced */
    posted win[RS_WINDOW];    /* posted receives, oldest at head */
    size_t head, count;
    size_t bufseq;
    char *scratch[3]; /* partial results without work buffer; [2]: aliased final step */
    size_t steps;
    int fuse;        /* try combining receives (cleared when the transport has none) */
    size_t in_bytes; /* extent of the input */
} rs_state;

static int has_recv(const rs_state *x, size_t p)
{
    return (size_t)p / x->steps <
           zen_ring_nchunks(x->ring, zen_ring_seg(x->ring, p % x->steps, RECV_LAG));
}

static size_t next_recv(const rs_state *x, size_t p, size_t total)
{
    while (p < total && !has_recv(x, p))
        p++;
    return p;
}

/* Where the reduction of (step s, segment seg, chunk c) goes. */
static char *dest_of(const rs_state *x, size_t s, int seg, size_t c)
{
    const zen_ring *ring = x->ring;
    size_t off = c * ring->chunk_elems * ring->esize;
    if (s + 1 == x->steps)
        return x->own_out + off;
    if (x->work)
        return x->work + ring->displs[seg] * ring->esize + off;
    return x->scratch[s & 1];
}

static int overlap(const char *a, const char *b, size_t len)
{
    return a != b && a < b + len && b < a + len;
}

static void reduce_combine(void *buf, const void *other, const void *message, size_t bytes,
                           void *ctx)
{
    const zen_ring *ring = ctx;
    zen__reduce3(buf, other, message, bytes / ring->esize, ring->dtype, ring->op);
}

/*
 * Fused receive: the transport stores "own input (op) message" straight into the chunk's
 * destination (inproc: the sender's thread does it, reading its buffer once), saving the copy into
 * a receive chunk and the separate pass over it. Only where the destination is written by this
 * position alone: the caller's work buffer or the final output, not the alternating scratch.
 * Returns ZEN_EUNSUPPORTED when the position cannot be fused.
 */
static zen_status post_fused(zen_comm *comm, const zen_coll *cc, rs_state *x, size_t q, int prev,
                             posted *w)
{
    const zen_ring *ring = x->ring;
    size_t s = q % x->steps, c = q / x->steps;
    int rseg = zen_ring_seg(ring, s, RECV_LAG);
    if (!x->fuse || !(x->work || s + 1 == x->steps))
        return ZEN_EUNSUPPORTED;
    char *dst = dest_of(x, s, rseg, c);
    const char *a = x->in + zen_ring_chunk_off(ring, rseg, c);
    /* The peer writes dst whenever it gets there, so dst may share bytes with the input only
     * where it is this very chunk (in place); elsewhere it could overwrite input not yet read
     * (MPI-style in-place reduce_scatter puts the result at the start of the input). */
    if (dst != a && dst < x->in + x->in_bytes && x->in < dst + w->bytes)
        return ZEN_EUNSUPPORTED;
    zen_combine cb = { reduce_combine, a, (void *)ring };
    zen_status st = zen__coll_irecv_combine(comm, cc, prev, dst, w->bytes, &cb, &w->req);
    if (st == ZEN_EUNSUPPORTED)
        x->fuse = 0;
    if (st == ZEN_OK) {
        w->buf = dst;
        w->fused = 1;
    }
    return st;
}

/* Post the receive of position q into the next free receive buffer. */
static zen_status post(zen_comm *comm, const zen_coll *cc, rs_state *x, size_t q, int prev)
{
    const zen_ring *ring = x->ring;
    posted *w = &x->win[(x->head + x->count) % RS_WINDOW];
    w->fused = 0;
    w->bytes = zen_ring_chunk_len(ring, zen_ring_seg(ring, q % x->steps, RECV_LAG), q / x->steps) *
               ring->esize;
    zen_status fst = post_fused(comm, cc, x, q, prev, w);
    if (fst != ZEN_EUNSUPPORTED) {
        if (fst == ZEN_OK)
            x->count++;
        return fst;
    }
    /* buffers rotate over RS_WINDOW + 1, so the one still being reduced is never reposted */
    w->buf = x->tmp[x->bufseq++ % (RS_WINDOW + 1)];
    zen_status st = zen__coll_irecv(comm, cc, prev, w->buf, w->bytes, &w->req);
    if (st == ZEN_OK)
        x->count++;
    return st;
}

static zen_status run(zen_comm *comm, const zen_coll *cc, rs_state *x)
{
    const zen_ring *ring = x->ring;
    size_t es = ring->esize, total = zen__ring_max_chunks(ring) * x->steps;
    int next = zen_ring_mod(ring->rank + 1, ring->n), prev = zen_ring_mod(ring->rank - 1, ring->n);
    size_t q = 0; /* next position whose receive is not posted yet */
    zen_status st = ZEN_OK;
    for (size_t p = 0; p < total && st == ZEN_OK; p++) {
        /* keep RS_WINDOW - 1 receives posted beyond the one being reduced */
        while (st == ZEN_OK && x->count < RS_WINDOW && (q = next_recv(x, q, total)) < total) {
            st = post(comm, cc, x, q, prev);
            q++;
        }
        if (st != ZEN_OK)
            break;
        size_t c = p / x->steps, s = p % x->steps;
        int sseg = zen_ring_seg(ring, s, SEND_LAG), rseg = zen_ring_seg(ring, s, RECV_LAG);
        zen_treq *sreq = NULL;
        if (c < zen_ring_nchunks(ring, sseg)) {
            size_t len = zen_ring_chunk_len(ring, sseg, c);
            const char *src =
                s == 0 ? x->in + zen_ring_chunk_off(ring, sseg, c) : dest_of(x, s - 1, sseg, c);
            st = zen__coll_isend(comm, cc, next, src, len * es, &sreq);
            if (st != ZEN_OK)
                break;
        }
        if (c < zen_ring_nchunks(ring, rseg)) {
            size_t len = zen_ring_chunk_len(ring, rseg, c);
            posted *w = &x->win[x->head];
            st = zen__coll_wait(comm, cc, w->req, prev, len * es, NULL);
            char *cur = w->buf;
            int fused = w->fused;
            x->head = (x->head + 1) % RS_WINDOW;
            x->count--;
            /* refill the window before reducing, so the sender never finds it empty */
            if (st == ZEN_OK && (q = next_recv(x, q, total)) < total) {
                st = post(comm, cc, x, q, prev);
                q++;
            }
            if (st == ZEN_OK && !fused) {
                const char *a = x->in + zen_ring_chunk_off(ring, rseg, c);
                char *dst = dest_of(x, s, rseg, c);
                if (overlap(dst, a, len * es)) {
                    zen__reduce3(x->scratch[2], a, cur, len, ring->dtype, ring->op);
                    memmove(dst, x->scratch[2], len * es);
                } else {
                    zen__reduce3(dst, a, cur, len, ring->dtype, ring->op);
                }
            }
        }
        zen_status sst = zen__coll_wait(comm, cc, sreq, next, SIZE_MAX, NULL);
        if (st == ZEN_OK)
            st = sst;
    }
    for (; x->count > 0; x->count--, x->head = (x->head + 1) % RS_WINDOW)
        zen__coll_req_drop(comm, x->win[x->head].req);
    return st;
}

zen_status zen__ring_reduce_scatter(zen_comm *comm, const zen_coll *cc, const zen_ring *ring,
                                    const void *in, void *work, void *own_out)
{
    size_t es = ring->esize;
    if (ring->n == 1) {
        const char *src = (const char *)in + ring->displs[0] * es;
        if (src != (char *)own_out && ring->counts[0])
            memmove(own_out, src, ring->counts[0] * es);
        return ZEN_OK;
    }
    zen_status st = zen__ring_check_signature(comm, cc, ring, RS_SIGNATURE_KIND);
    if (st != ZEN_OK)
        return st;
    size_t maxcount = 0;
    for (int j = 0; j < ring->n; j++)
        if (ring->counts[j] > maxcount)
            maxcount = ring->counts[j];
    size_t cbytes = (maxcount < ring->chunk_elems ? maxcount : ring->chunk_elems) * es;
    if (cbytes == 0)
        cbytes = es;
    size_t nbuf = RS_WINDOW + 1 + 3;
    if (cbytes > SIZE_MAX / nbuf)
        return zen__fail(comm, ZEN_EINVAL, "%s: ring chunk of %zu bytes too large", cc->op, cbytes);
    char *mem = zen__coll_scratch_get(comm, nbuf * cbytes);
    if (!mem)
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for %zu ring chunks of %zu bytes", cc->op,
                         nbuf, cbytes);
    rs_state x = {
        .ring = ring,
        .in = in,
        .work = work,
        .own_out = own_out,
        .steps = (size_t)ring->n - 1,
        .fuse = zen__param_long("RING_FUSE") != 0,
    };
    for (int j = 0; j < ring->n; j++)
        if ((ring->displs[j] + ring->counts[j]) * es > x.in_bytes)
            x.in_bytes = (ring->displs[j] + ring->counts[j]) * es;
    for (size_t i = 0; i <= RS_WINDOW; i++)
        x.tmp[i] = mem + i * cbytes;
    for (size_t i = 0; i < 3; i++)
        x.scratch[i] = mem + (RS_WINDOW + 1 + i) * cbytes;
    st = run(comm, cc, &x);
    zen__coll_scratch_put(comm, mem);
    return st;
}
