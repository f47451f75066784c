/*
 * Internal interface between the dense collectives of src/coll: argument checks, the tunables
 * they read, the two ring engines (pipelined reduce-scatter and allgather over arbitrary segment
 * layouts) that reduce_scatter(v), allgather(v), ring allreduce, broadcast and reduce share, and
 * the allreduce algorithms themselves.
 *
 * Agreement on counts. Every algorithm exchanges at least one message per step even when a
 * segment is empty, so a rank whose count differs from its neighbour's sees a message of the
 * wrong length (ZEN_EPROTO naming the peer from zen__coll_wait); zen__coll_end then aborts the
 * transport and every other rank fails fast instead of waiting for its deadline. When a ring
 * segment spans several chunks the number of messages itself depends on the count, so the ring
 * engines first swap a signature (hash of the layout, dtype and op) with their neighbours.
 */
#ifndef ZEN_COLL_COLL_ALGOS_H
#define ZEN_COLL_COLL_ALGOS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/comm_internal.h"

/*
 * The collective descriptor: one call's arguments, checked in one place (zen__coll_check) by
 * every dense collective before zen__coll_begin, so each public entry states what it takes
 * instead of repeating a chain of checks. In this order: the communicator; the dtype (with
 * ZEN_DESC_DTYPE) or the dtype and reduction (ZEN_DESC_REDUCE); the root (ZEN_DESC_ROOT);
 * blocks x count and its bytes against overflow; each buffer against NULL with a non-zero count
 * (the send buffer only at the root with send_at_root, the receive buffer only at the root with
 * recv_at_root). A failure records the reason on comm
 * and returns ZEN_EINVAL; the call then has no effect on this rank.
 */
enum {
    ZEN_DESC_DTYPE = 1u << 0,
    ZEN_DESC_REDUCE = 1u << 1,
    ZEN_DESC_ROOT = 1u << 2
};

/* A buffer count meaning "blocks x count elements" (gather's and alltoall's full buffers). */
#define ZEN_DESC_TOTAL SIZE_MAX

typedef struct zen_coll_desc {
    const char *op;  /* the collective's name, for messages */
    unsigned checks; /* ZEN_DESC_* */
    zen_dtype dtype;
    zen_op rop;
    int root;
    size_t count;  /* elements of one block */
    size_t blocks; /* blocks in a full buffer (0 or 1: one) */
    const void *sendbuf;
    size_t send_count;     /* elements sendbuf must hold, or ZEN_DESC_TOTAL */
    const char *send_name; /* its name in messages (NULL: "sendbuf") */
    bool send_at_root;     /* sendbuf matters at the root only */
    const void *recvbuf;
    size_t recv_count; /* elements recvbuf must hold, or ZEN_DESC_TOTAL */
    bool recv_at_root; /* recvbuf matters at the root only */
    /* agreement (agree.c): per-rank counts that every rank passes alike (n entries; NULL: count
     * is compared), or no count at all (alltoallv: counts differ by rank by design) */
    const size_t *agree_counts;
    bool agree_no_count;
    bool slot_path; /* the collective has a latency-path form (slots.c) for small messages */
    /* out */
    size_t total;       /* blocks x count */
    size_t bytes;       /* count x dtype size */
    size_t total_bytes; /* total x dtype size */
} zen_coll_desc;

zen_status zen__coll_check(zen_comm *comm, zen_coll_desc *d);

/*
 * Argument agreement (agree.c; the algorithm and its cost are described there). zen__coll_start
 * runs it for every collective that goes through it; allreduce carries it inside its rhd
 * messages or runs it before its other algorithms.
 *
 * zen__coll_agree_fill: this rank's descriptor into cc->agree from d (algo: allreduce's
 * algorithm, else 0). Leaves cc->agree.word 0 (nothing checked) for a nested collective or a
 * single rank.
 * zen__coll_agree: the exchange of cc->agree (a no-op when cc->agree.word is 0): through the
 * collective slots where comm has them, else the butterfly (agree_path.c chooses, so that agree.c
 * and slots.c need not call each other). zen__coll_agree_butterfly: the recursive-doubling
 * exchange. On a mismatch the detecting rank fails with ZEN_EMISMATCH naming itself, the peer
 * and both descriptors and aborts the communicator, so every other rank's call fails with that
 * text too.
 * zen__coll_sendrecv_agreed: zen__coll_sendrecv whose messages carry cc->agree in front.
 */
void zen__coll_agree_fill(const zen_comm *comm, zen_coll *cc, const zen_coll_desc *d, int algo);
zen_status zen__coll_agree(zen_comm *comm, zen_coll *cc);
zen_status zen__coll_agree_butterfly(zen_comm *comm, const zen_coll *cc);
zen_status zen__coll_sendrecv_agreed(zen_comm *comm, const zen_coll *cc, int dst, const void *sbuf,
                                     size_t sbytes, int src, void *rbuf, size_t rbytes);

/* Report a descriptor msg (len bytes) from peer that differs from cc->agree: ZEN_EMISMATCH (or
 * ZEN_EPROTO when msg is no descriptor) naming both, the communicator poisoned and aborted. */
zen_status zen__coll_agree_mismatch(zen_comm *comm, const zen_coll *cc, int peer, const void *msg,
                                    size_t len);

/*
 * The shm latency path (slots.c): the transport's collective slots, one shared flag-and-slot
 * area per rank, for the communicator that owns a pure shm transport.
 * zen__coll_slot_max: the largest per-rank payload it carries on comm (0: comm has no slots;
 * then nothing below may be called). Where it is > 0 every outermost collective agrees on its
 * arguments through the slots (zen__coll_agree calls zen__coll_slots_exchange), so ranks that
 * picked different paths still meet there and see the disagreement.
 * zen__coll_slots_exchange: every rank posts cc->agree and waits for every other rank's (the
 * argument agreement, and a barrier).
 * The collectives, inside an open collective, agreement included (cc->agree travels in the slot
 * with the data; count * dtype size <= zen__coll_slot_max):
 */
size_t zen__coll_slot_max(const zen_comm *comm);
zen_status zen__coll_slots_exchange(zen_comm *comm, zen_coll *cc);
zen_status zen__allreduce_slots_run(zen_comm *comm, zen_coll *cc, const void *sendbuf,
                                    void *recvbuf, size_t count, zen_dtype dtype, zen_op op);
zen_status zen__broadcast_slots_run(zen_comm *comm, zen_coll *cc, void *buf, size_t bytes,
                                    int root);
zen_status zen__reduce_slots_run(zen_comm *comm, zen_coll *cc, const void *sendbuf, void *recvbuf,
                                 size_t count, zen_dtype dtype, zen_op op, int root);

/* zen__coll_check, zen__coll_begin(comm, d->op, cc), then the agreement (on its failure the
 * collective is already ended: the caller returns the status without zen__coll_end). */
zen_status zen__coll_start(zen_comm *comm, zen_coll_desc *d, zen_coll *cc);

/* p, or a static dummy when p is NULL (a NULL buffer is only accepted with count 0; pointer
 * arithmetic on NULL, even adding 0, is undefined). Nothing is ever written through the dummy. */
void *zen__coll_nonnull(const void *p);

/*
 * Scratch memory for one collective call: up to ZEN_COLL_SCRATCH_CACHE bytes come from a buffer
 * cached on the communicator (so the ring's chunk buffers are not mapped and faulted in on every
 * call), larger requests from the heap. Release with zen__coll_scratch_put. One user at a time.
 */
#define ZEN_COLL_SCRATCH_CACHE ((size_t)16 << 20)
void *zen__coll_scratch_get(zen_comm *comm, size_t bytes);
void zen__coll_scratch_put(zen_comm *comm, void *p);

/* ---- tunables (read per call; every rank must use the same values) ---- */
size_t zen__coll_ring_chunk_bytes(void); /* ZEN_RING_CHUNK_BYTES, at least 1 */
size_t zen__coll_rhd_max_bytes(void);    /* ZEN_RHD_MAX_BYTES */
size_t zen__coll_long_bytes(void);       /* ZEN_COLL_LONG_BYTES: bcast/reduce long-message cut */
size_t zen__coll_allgather_bruck_max_bytes(void); /* ZEN_ALLGATHER_BRUCK_MAX_BYTES */

/* ---- the decision table (decide.c): short (latency-bound) or long (bandwidth-bound) ---- */
typedef enum zen_coll_decide_kind {
    ZEN_COLL_DECIDE_ALLREDUCE = 0, /* short: rhd, long: ring */
    ZEN_COLL_DECIDE_BROADCAST = 1, /* short: binomial, long: scatter + allgather */
    ZEN_COLL_DECIDE_REDUCE = 2,    /* short: binomial, long: reduce-scatter + gather */
    ZEN_COLL_DECIDE_ALLGATHER = 3, /* short: bruck, long: ring */
    ZEN_COLL_DECIDE_COUNT = 4
} zen_coll_decide_kind;

/* True when the collective should run its long algorithm for bytes (the whole message) and count
 * elements on nranks ranks. The same on every rank for the same arguments and tunables. */
bool zen__coll_decide_long(zen_coll_decide_kind kind, int nranks, size_t bytes, size_t count);

/* Allgather of equal blocks of block bytes in ceil(log2 n) rounds (allgather_bruck.c): own is this
 * rank's block (may lie inside recvbuf), recvbuf gets n blocks in rank order. */
zen_status zen__allgather_bruck(zen_comm *comm, const zen_coll *cc, const void *own, size_t block,
                                void *recvbuf);

/* The same with counts[j] elements of es bytes from rank j, placed at recvbuf + displs[j] * es. */
zen_status zen__allgatherv_bruck(zen_comm *comm, const zen_coll *cc, const void *own,
                                 const size_t *counts, const size_t *displs, size_t es,
                                 void *recvbuf);

/*
 * The rounds alone, into the caller's buffer w (sum of counts[j] * es bytes; counts NULL: every
 * block is es bytes) in rotated order: pos (n + 1 entries, filled here) gives the byte offset of
 * rank (rank + i) mod n's block as pos[i], pos[n] the total. No final copy: for a caller that can
 * read the blocks where they are.
 */
zen_status zen__allgatherv_bruck_rotated(zen_comm *comm, const zen_coll *cc, const void *own,
                                         const size_t *counts, size_t es, void *w, size_t *pos);

/* Ring position modulo n (k may be negative). */
static inline int zen_ring_mod(int k, int n)
{
    int m = k % n;
    return m < 0 ? m + n : m;
}

/*
 * A ring over the communicator's ranks (next = rank+1, prev = rank-1) and a segment layout:
 * segment j holds counts[j] elements at element offset displs[j] of a full-layout buffer.
 * Messages are cut into chunks of chunk_elems elements; an empty segment still travels as one
 * empty message.
 */
typedef struct zen_ring {
    int n;
    int rank;
    size_t esize;
    size_t chunk_elems;
    const size_t *counts;
    const size_t *displs;
    zen_dtype dtype;
    zen_op op;
} zen_ring;

/* Messages segment seg travels as: its chunks, and one (empty) message for an empty segment. */
static inline size_t zen_ring_nchunks(const zen_ring *ring, int seg)
{
    size_t c = ring->counts[seg];
    return c == 0 ? 1 : (c - 1) / ring->chunk_elems + 1;
}

/* Elements in chunk c of segment seg: chunk_elems, fewer in its last chunk, 0 past its end. */
static inline size_t zen_ring_chunk_len(const zen_ring *ring, int seg, size_t c)
{
    size_t off = c * ring->chunk_elems, cnt = ring->counts[seg];
    if (off >= cnt)
        return 0;
    return cnt - off < ring->chunk_elems ? cnt - off : ring->chunk_elems;
}

/* Byte offset of chunk c of segment seg in a full-layout buffer. */
static inline size_t zen_ring_chunk_off(const zen_ring *ring, int seg, size_t c)
{
    return (ring->displs[seg] + c * ring->chunk_elems) * ring->esize;
}

/* The segment this rank moves at step s when step 0 moves segment rank - lag: the allgather
 * sends lag 0 and receives lag 1, the reduce-scatter sends lag 1 and receives lag 2. */
static inline int zen_ring_seg(const zen_ring *ring, size_t s, int lag)
{
    return zen_ring_mod(ring->rank - (int)s - lag, ring->n);
}

/* Largest zen_ring_nchunks over the segments. */
size_t zen__ring_max_chunks(const zen_ring *ring);

/* Fill ring for comm with the ZEN_RING_CHUNK_BYTES chunk size. */
void zen__ring_init(zen_ring *ring, const zen_comm *comm, const size_t *counts,
                    const size_t *displs, zen_dtype dtype, zen_op op);

/*
 * Split count elements into n near-equal segments (the first count % n get one more); counts and
 * displs need n entries.
 */
void zen__ring_even_layout(size_t count, int n, size_t *counts, size_t *displs);

/*
 * One message per segment between the root and the segment's owner, in rank order at the root:
 * to_root == 0 (scatter, broadcast): the root sends segment j of root_buf to rank j, which
 * receives it into own; to_root == 1 (gather, reduce): rank j sends own (its segment j) and the
 * root receives it at segment j of root_buf. The root's own segment does not move; root_buf is
 * only used on the root, own only on the others.
 */
zen_status zen__ring_root_segments(zen_comm *comm, const zen_coll *cc, char *root_buf, char *own,
                                   const size_t *counts, const size_t *displs, size_t esize,
                                   int root, int to_root);

/*
 * Ring reduce-scatter (ring_reduce_scatter.c). in holds every segment; on return own_out holds
 * the reduction of segment ring->rank over all ranks (not yet divided for AVG). work, when not
 * NULL, is a full-layout buffer that receives the partial results of the segments passing
 * through (allreduce keeps them: it is its output buffer; it may equal in); when NULL the partial
 * results live in chunk-sized scratch. own_out may alias in anywhere.
 */
zen_status zen__ring_reduce_scatter(zen_comm *comm, const zen_coll *cc, const zen_ring *ring,
                                    const void *in, void *work, void *own_out);

/*
 * Ring allgather (ring_allgather.c). buf is a full-layout buffer whose segment ring->rank holds
 * this rank's data; on return it holds every segment. Receives land directly in buf.
 */
zen_status zen__ring_allgather(zen_comm *comm, const zen_coll *cc, const zen_ring *ring, void *buf);

/* Exchange a layout signature with both neighbours when the ring pipeline is multi-chunk. */
zen_status zen__ring_check_signature(zen_comm *comm, const zen_coll *cc, const zen_ring *ring,
                                     uint64_t kind);

/* ---- allreduce algorithms (inside an open collective; the result is divided for AVG) ---- */
zen_status zen__allreduce_ring_run(zen_comm *comm, const zen_coll *cc, const void *sendbuf,
                                   void *recvbuf, size_t count, zen_dtype dtype, zen_op op);
zen_status zen__allreduce_rhd_run(zen_comm *comm, const zen_coll *cc, const void *sendbuf,
                                  void *recvbuf, size_t count, zen_dtype dtype, zen_op op);
zen_status zen__allreduce_native_run(zen_comm *comm, const zen_coll *cc, const void *sendbuf,
                                     void *recvbuf, size_t count, zen_dtype dtype, zen_op op);

#endif
