/*
 * Argument agreement: every rank of a dense collective must pass the same kind of collective,
 * reduction op, dtype, count (or per-rank counts, where those must match) and root. Without a
 * check, a rank calling MAX while the others call SUM silently gets SUM (the ranks combine
 * whatever arrives), and a rank calling broadcast while the others allreduce gets wrong data.
 *
 * The descriptor (zen_agree, 16 bytes: magic, kind, op, dtype, algorithm, root, count
 * or a hash of the per-rank counts) travels on the butterfly of recursive halving/doubling, so it costs no
 * message of its own where the collective already runs that butterfly:
 *
 *   fold:  among ranks 0 .. 2rem-1 (rem = n - p, p the largest power of two <= n), each even rank
 *          sends to the odd rank above it, which checks and stands for both;
 *   steps: for d = p/2, p/4, .., 1 each remaining rank swaps with the rank whose new number
 *          differs in bit d and checks what it receives;
 *   unfold: each odd rank below 2rem sends to its even rank, which checks it.
 *
 * A rank sends at step k only after it checked the message of step k-1, so a rank that gets
 * through every step has (transitively) seen every rank's descriptor equal to its own: a rank
 * returns success only when all agree. The first rank that sees a difference fails with
 * ZEN_EMISMATCH, naming itself, the peer and both descriptors, stops sending and aborts the
 * communicator; every other rank is then blocked on a message that depends on it and fails with
 * that text (the transport's abort carries it), within milliseconds, not at ZEN_TIMEOUT_S.
 *
 * Whatever two ranks call, their first messages go to the same partner (fold partner, then bit
 * p/2, ...), so a mismatch is always seen by someone: ranks never wait on each other in a pattern
 * that no descriptor crosses. Receives of a descriptor take up to AGREE_INLINE more bytes and the
 * descriptor is checked before the length, so a peer in another collective is named as such. A
 * message with no descriptor at all (a peer in a sparse collective, a damaged message) is
 * ZEN_EPROTO naming the peer, with the same abort.
 *
 * Why not in the tag: the transports match (peer, tag) exactly, so a descriptor folded into the
 * tag would make a disagreeing message never match, a wait until ZEN_TIMEOUT_S, not an error.
 *
 * Who carries it:
 *  - allreduce by rhd (the small-message latency path): in band. The fold and halving messages of
 *    zen__allreduce_rhd_run carry the descriptor in front of their payload (one message of
 *    16 + S bytes for S <= AGREE_INLINE, else a 16-byte message right before the payload, in
 *    the same pipeline); the doubling and unfold messages carry nothing. Cost: 16 bytes per
 *    message of the fold and the log2 p halving steps, two copies of at most AGREE_INLINE bytes,
 *    no extra round trip.
 *  - every other dense collective (ring allreduce, broadcast, reduce, gather, scatter, allgather(v),
 *    reduce_scatter(v), alltoall(v)): the butterfly above with the descriptor alone, before the
 *    collective's own messages: log2 p (+2 with a fold) messages of 16 bytes per rank, i.e.
 *    log2 p small-message latencies more per call. barrier is that butterfly and nothing else.
 *  - on a communicator with collective slots (the one that owns a pure shm transport; slots.c):
 *    the slots, for every collective. allreduce, broadcast, reduce and barrier of up to
 *    ZEN_SHM_SLOT_MAX_BYTES carry the descriptor with their data in one step; every other call
 *    posts its descriptor alone and reads every other rank's (one step instead of log2 p, and
 *    rhd then carries nothing in band). Every rank compares every other rank's descriptor, so
 *    each one sees a disagreement itself, and ranks that chose different algorithms (a count on
 *    either side of a cut) still meet in the same slot instead of waiting on messages that never
 *    come.
 * Nested calls (sparse schemes calling dense collectives) and single ranks check nothing: the
 * library computes their arguments itself, and sparse calls agree on theirs beforehand.
 */
#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "coll/coll_algos.h"
#include "common/hash.h"

#define AGREE_MAGIC  0xa6eu /* bits 52..63 of the word */
#define AGREE_INLINE ((size_t)512)
#define AGREE_BYTES  sizeof(zen_agree)

enum {
    COUNT_PLAIN = 0,
    COUNT_HASHED = 1,
    COUNT_NONE = 2
};

static const char *const KINDS[] = { "?",         "allreduce",  "reduce_scatter", "reduce_scatterv",
                                     "allgather", "allgatherv", "alltoall",       "alltoallv",
                                     "broadcast", "reduce",     "gather",         "barrier",
                                     "scatter" };
#define NKINDS (sizeof KINDS / sizeof KINDS[0])

/* The word's fields, 4 bits each but the magic and the root: magic 12 | kind | op | dtype |
 * algo | counts | root + 1 (32 bits, 0: no root). 0xf: the collective has no op / dtype. */
typedef struct fields {
    unsigned magic, kind, op, dtype, algo, counts;
    long root; /* -1: none */
} fields;

static uint64_t pack(const fields *f)
{
    return (uint64_t)f->magic << 52 | (uint64_t)(f->kind & 0xf) << 48 |
           (uint64_t)(f->op & 0xf) << 44 | (uint64_t)(f->dtype & 0xf) << 40 |
           (uint64_t)(f->algo & 0xf) << 36 | (uint64_t)(f->counts & 0xf) << 32 |
           (uint64_t)(uint32_t)(f->root + 1);
}

static fields unpack(uint64_t w)
{
    fields f = { (unsigned)(w >> 52),        (unsigned)(w >> 48 & 0xf), (unsigned)(w >> 44 & 0xf),
                 (unsigned)(w >> 40 & 0xf),  (unsigned)(w >> 36 & 0xf), (unsigned)(w >> 32 & 0xf),
                 (long)(w & 0xffffffffu) - 1 };
    return f;
}

/* Every collective call looks its kind up here: the first letter rules out most names before a
 * strcmp (a loop of strcmps cost ~300 instructions per barrier, on the latency path). */
static uint8_t kind_of(const char *name)
{
    for (size_t k = 1; k < NKINDS; k++)
        if (name[0] == KINDS[k][0] && strcmp(name, KINDS[k]) == 0)
            return (uint8_t)k;
    return 0;
}

void zen__coll_agree_fill(const zen_comm *comm, zen_coll *cc, const zen_coll_desc *d, int algo)
{
    memset(&cc->agree, 0, sizeof cc->agree);
    if (!cc->outermost || comm->size < 2 || !comm->check_args)
        return;
    fields f = { AGREE_MAGIC, kind_of(d->op), 0xf, 0xf, (unsigned)algo, COUNT_PLAIN, -1 };
    if (d->checks & ZEN_DESC_REDUCE)
        f.op = (unsigned)d->rop;
    if (d->checks & (ZEN_DESC_REDUCE | ZEN_DESC_DTYPE))
        f.dtype = (unsigned)d->dtype;
    if (d->checks & ZEN_DESC_ROOT)
        f.root = d->root;
    cc->agree.count = d->count;
    if (d->agree_no_count) {
        f.counts = COUNT_NONE;
        cc->agree.count = 0;
    } else if (d->agree_counts) {
        uint64_t h = (uint64_t)comm->size;
        for (int j = 0; j < comm->size; j++)
            h = zen_hash64(d->agree_counts[j], h);
        f.counts = COUNT_HASHED;
        cc->agree.count = h;
    }
    cc->agree.word = pack(&f);
}

static void describe(const zen_agree *a, char *out, size_t size)
{
    fields f = unpack(a->word);
    const char *kind = f.kind < NKINDS ? KINDS[f.kind] : "?";
    int k = snprintf(out, size, "%s(", kind);
    if (f.op != 0xf && k >= 0 && (size_t)k < size)
        k += snprintf(out + k, size - (size_t)k, "op %s, ", zen_op_name((zen_op)f.op));
    if (f.dtype != 0xf && k >= 0 && (size_t)k < size)
        k += snprintf(out + k, size - (size_t)k, "dtype %s, ", zen_dtype_name((zen_dtype)f.dtype));
    if (f.root >= 0 && k >= 0 && (size_t)k < size)
        k += snprintf(out + k, size - (size_t)k, "root %ld, ", f.root);
    if (k < 0 || (size_t)k >= size)
        return;
    if (f.counts == COUNT_PLAIN)
        k += snprintf(out + k, size - (size_t)k, "count %llu", (unsigned long long)a->count);
    else if (f.counts == COUNT_HASHED)
        k += snprintf(out + k, size - (size_t)k, "per-rank counts #%016llx",
                      (unsigned long long)a->count);
    else
        k += snprintf(out + k, size - (size_t)k, "counts not compared");
    if (f.kind == 1 && k >= 0 && (size_t)k < size)
        k += snprintf(out + k, size - (size_t)k, ", algorithm %s",
                      zen_allreduce_algo_name((zen_allreduce_algo)f.algo));
    if (k >= 0 && (size_t)k < size)
        snprintf(out + k, size - (size_t)k, ")");
}

/* Fail and abort the communicator at once (see the top comment): ZEN_EMISMATCH for a descriptor
 * that differs, ZEN_EPROTO for a message that is none (a peer in a sparse collective, damage). */
zen_status zen__coll_agree_mismatch(zen_comm *comm, const zen_coll *cc, int peer, const void *msg,
                                    size_t len)
{
    char mine[160], theirs[160];
    describe(&cc->agree, mine, sizeof mine);
    zen_agree a;
    zen_status st = ZEN_EMISMATCH;
    if (len >= AGREE_BYTES)
        memcpy(&a, msg, AGREE_BYTES);
    if (len < AGREE_BYTES || unpack(a.word).magic != AGREE_MAGIC) {
        st = ZEN_EPROTO;
        zen__fail(comm, st,
                  "%s: rank %d sent %zu bytes that hold no collective descriptor (it runs another "
                  "collective, or the message was damaged); this rank called %s",
                  cc->op, peer, len, mine);
    } else {
        describe(&a, theirs, sizeof theirs);
        zen__fail(comm, st, "collective arguments disagree: this rank called %s, rank %d called %s",
                  mine, peer, theirs);
    }
    if (comm->poisoned == ZEN_OK) {
        comm->poisoned = st;
        if (comm->transport)
            comm->transport->ops->abort(comm->transport, st, comm->last_error);
    }
    return st;
}

static zen_status check(zen_comm *comm, const zen_coll *cc, int peer, const void *msg, size_t len)
{
    if (len >= AGREE_BYTES && memcmp(msg, &cc->agree, AGREE_BYTES) == 0)
        return ZEN_OK;
    return zen__coll_agree_mismatch(comm, cc, peer, msg, len);
}

typedef union agree_buf {
    zen_agree a;
    alignas(16) unsigned char bytes[AGREE_BYTES + AGREE_INLINE];
} agree_buf;

/* Receive a descriptor message from src (with up to AGREE_INLINE payload bytes) and check it. */
static zen_status recv_checked(zen_comm *comm, const zen_coll *cc, zen_treq *req, int src,
                               const agree_buf *rb, size_t *len)
{
    zen_status st = zen__coll_wait(comm, cc, req, src, SIZE_MAX, len);
    return st == ZEN_OK ? check(comm, cc, src, rb->bytes, *len) : st;
}

/*
 * Send sbytes of sbuf to dst and receive rbytes into rbuf from src (either side < 0: skipped),
 * each message preceded by the descriptor: in the same message up to AGREE_INLINE bytes, else as
 * a message of its own just before the payload. rbuf NULL with src >= 0: descriptor only.
 */
static zen_status agreed_exchange(zen_comm *comm, const zen_coll *cc, int dst, const void *sbuf,
                                  size_t sbytes, int src, void *rbuf, size_t rbytes)
{
    agree_buf sb, rb;
    zen_treq *rh = NULL, *rp = NULL, *sh = NULL, *sp = NULL;
    int s_inline = sbytes <= AGREE_INLINE, r_inline = rbytes <= AGREE_INLINE;
    zen_status st = ZEN_OK;
    if (src >= 0)
        st = zen__coll_irecv(comm, cc, src, rb.bytes, sizeof rb.bytes, &rh);
    if (st == ZEN_OK && src >= 0 && !r_inline)
        st = zen__coll_irecv(comm, cc, src, rbuf, rbytes, &rp);
    if (st == ZEN_OK && dst >= 0) {
        sb.a = cc->agree;
        if (s_inline && sbytes)
            memcpy(sb.bytes + AGREE_BYTES, sbuf, sbytes);
        st = zen__coll_isend(comm, cc, dst, sb.bytes, AGREE_BYTES + (s_inline ? sbytes : 0), &sh);
        if (st == ZEN_OK && !s_inline)
            st = zen__coll_isend(comm, cc, dst, sbuf, sbytes, &sp);
    }
    if (st == ZEN_OK)
        st = zen__coll_wait(comm, cc, sh, dst, SIZE_MAX, NULL);
    sh = NULL;
    if (st == ZEN_OK)
        st = zen__coll_wait(comm, cc, sp, dst, SIZE_MAX, NULL);
    sp = NULL;
    size_t len = 0;
    if (st == ZEN_OK && rh) {
        st = recv_checked(comm, cc, rh, src, &rb, &len);
        rh = NULL;
        size_t want = AGREE_BYTES + (r_inline ? rbytes : 0);
        if (st == ZEN_OK && rbuf && len != want)
            st = zen__fail(comm, ZEN_EPROTO, "%s: rank %d sent %zu bytes where %zu were expected",
                           cc->op, src, len, want);
        if (st == ZEN_OK && rbuf && r_inline && rbytes)
            memcpy(rbuf, rb.bytes + AGREE_BYTES, rbytes);
    }
    if (st == ZEN_OK && rp)
        return zen__coll_wait(comm, cc, rp, src, rbytes, NULL);
    zen__coll_req_drop(comm, rh);
    zen__coll_req_drop(comm, rp);
    zen__coll_req_drop(comm, sh);
    zen__coll_req_drop(comm, sp);
    return st;
}

zen_status zen__coll_sendrecv_agreed(zen_comm *comm, const zen_coll *cc, int dst, const void *sbuf,
                                     size_t sbytes, int src, void *rbuf, size_t rbytes)
{
    if (cc->agree.word == 0)
        return zen__coll_sendrecv(comm, cc, dst, sbuf, sbytes, src, rbuf, rbytes);
    return agreed_exchange(comm, cc, dst, sbuf, sbytes, src, zen__coll_nonnull(rbuf), rbytes);
}

/* Communicator rank of butterfly rank nr (the same renumbering as allreduce_rhd.c). */
static int real_rank(int nr, int rem)
{
    return nr < rem ? 2 * nr + 1 : nr + rem;
}

zen_status zen__coll_agree_butterfly(zen_comm *comm, const zen_coll *cc)
{
    int n = comm->size, r = comm->rank, p = 1;
    while (p * 2 <= n)
        p *= 2;
    int rem = n - p, nr = r - rem;
    zen_status st = ZEN_OK;
    if (r < 2 * rem && r % 2 == 0) {
        st = agreed_exchange(comm, cc, r + 1, NULL, 0, -1, NULL, 0);
        return st == ZEN_OK ? agreed_exchange(comm, cc, -1, NULL, 0, r + 1, NULL, 0) : st;
    }
    if (r < 2 * rem) {
        st = agreed_exchange(comm, cc, -1, NULL, 0, r - 1, NULL, 0);
        nr = r / 2;
    }
    for (int d = p / 2; d >= 1 && st == ZEN_OK; d /= 2) {
        int peer = real_rank(nr ^ d, rem);
        st = agreed_exchange(comm, cc, peer, NULL, 0, peer, NULL, 0);
    }
    if (st == ZEN_OK && r < 2 * rem)
        st = agreed_exchange(comm, cc, r - 1, NULL, 0, -1, NULL, 0);
    return st;
}
