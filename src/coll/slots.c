/*
 * The shm latency path: allreduce, broadcast, reduce and barrier of up to ZEN_SHM_SLOT_MAX_BYTES
 * (64 KiB) per rank in one step through the transport's collective slots (transport.h,
 * shm_slots.c), and the argument agreement of every other collective on the same communicator.
 *
 * Each rank owns two slots in shared memory (selected by the parity of comm->slot_seq, which
 * every slot use advances alike on every rank). A call: copy this rank's payload (allreduce and
 * reduce: its vector; broadcast: the root's buffer; else nothing) into its own slot, publish the
 * slot with the call's descriptor (cc->agree and the payload length), then wait for every other
 * rank's slot of the same call, check its descriptor, and read what it needs in place:
 *   allreduce  every rank reduces all n payloads in rank order (bitwise the same result on every
 *              rank): n - 1 reductions of S bytes, (n - 1) S bytes read from peers' memory.
 *   reduce     the same at the root only.
 *   broadcast  every non-root copies the root's payload (S bytes).
 *   barrier    descriptors only.
 * No message, no queue, no request, no matching; in place and out of place cost the same (the
 * payload is always copied into the slot, from sendbuf or from recvbuf).
 *
 * Reuse without acknowledgements (double buffering): every call waits for every rank's slot, so
 * a rank that finishes call k has seen every rank post k, and a rank posts k only after it has
 * finished k - 1, i.e. read everything of k - 1 it needed. So when any rank posts k + 1 into the
 * slot that held k - 1, every reader is done with k - 1; consecutive calls never wait for a
 * reader to let go of a slot, and call k + 1 of a fast rank can be posted while slow ranks still
 * read call k (the other slot).
 *
 * What a call costs in cache-line transfers (n ranks, payload up to 224 bytes): the post takes
 * ownership of this rank's header line (seq, descriptor and the first 32 payload bytes) and of
 * the payload lines, which every peer holds shared since it read call k - 2 from the same slot:
 * one invalidation per line, overlapped with the reads because the doorbell's fence comes after
 * them (shm_slots.c); each wait reads one peer's header line, and its payload lines are
 * prefetched by the same poll, so the critical path is one transfer per peer, read in rank order.
 * Nothing else is shared: slot_seq and the statistics are this process's own memory, the peers'
 * doorbells are only read (a line that stays shared) unless someone sleeps. Nothing on the path
 * looks up a tunable or reads a clock before the post (zen__coll_begin_late).
 *
 * Agreement: the descriptor every rank waits for is compared with its own, so every rank sees a
 * disagreement itself (ZEN_EMISMATCH naming the peer and both calls; the communicator is aborted
 * so that ranks blocked elsewhere fail with the same text). With ZEN_COLL_AGREE=0 only the
 * payload length is compared. A rank that is down, an abort and the deadline end a wait with an
 * error naming the rank (shm_slots.c).
 */
#include <stdio.h>
#include <string.h>

#include "coll/coll_algos.h"
#include "coll/reduce_op.h"

size_t zen__coll_slot_max(const zen_comm *comm)
{
    const zen_transport *t = comm->transport;
    if (!t || !comm->owns_transport || comm->size < 2 || !t->ops->slot_cap ||
        comm->slot_max_param <= 0)
        return 0;
    size_t cap = t->ops->slot_cap((zen_transport *)t);
    return (size_t)comm->slot_max_param < cap ? (size_t)comm->slot_max_param : cap;
}

static zen_status slot_error(zen_comm *comm, const zen_coll *cc, zen_status st)
{
    char detail[512];
    zen__transport_last_error(comm->transport, detail, sizeof detail);
    snprintf(comm->last_error, sizeof comm->last_error, "%s (in %s)",
             detail[0] ? detail : zen_strerror(st), cc->op);
    return st;
}

/* Copy bytes of src into this rank's slot for seq and publish it. */
static void post(zen_comm *comm, zen_coll *cc, uint64_t seq, const void *src, size_t bytes)
{
    zen_transport *t = comm->transport;
    if (bytes)
        memcpy(t->ops->slot_data(t, t->rank, seq), src, bytes);
    zen_slot_desc d = { { cc->agree.word, cc->agree.count, bytes } };
    t->ops->slot_post(t, seq, &d);
    zen__coll_stamp(comm, cc); /* off the peers' critical path (zen__coll_begin_late) */
    comm->stats.bytes_sent += bytes;
    comm->stats.last_bytes_sent += bytes;
}

/* Wait for rank j's slot of seq, check its descriptor and payload length (want) and return its
 * payload in *data. */
static zen_status wait_rank(zen_comm *comm, const zen_coll *cc, uint64_t seq, int j, size_t want,
                            const char **data)
{
    zen_transport *t = comm->transport;
    zen_slot_desc d;
    zen_status st = t->ops->slot_wait(t, comm->world_ranks[j], seq, cc->deadline_ns, &d);
    if (st != ZEN_OK)
        return slot_error(comm, cc, st);
    if (cc->agree.word && (d.w[0] != cc->agree.word || d.w[1] != cc->agree.count))
        return zen__coll_agree_mismatch(comm, cc, j, d.w, sizeof(zen_agree));
    if (d.w[2] != want)
        return zen__fail(
            comm, ZEN_EPROTO,
            "%s: rank %d put %llu bytes in its slot where %zu were expected: the ranks "
            "disagree on the count or dtype",
            cc->op, j, (unsigned long long)d.w[2], want);
    *data = t->ops->slot_data(t, comm->world_ranks[j], seq);
    comm->stats.bytes_recv += want;
    comm->stats.last_bytes_recv += want;
    return ZEN_OK;
}

/* Wake peers asleep on this rank's post, after the reads (transport.h: slot_wake); returns st. */
static zen_status wake(zen_comm *comm, zen_status st)
{
    comm->transport->ops->slot_wake(comm->transport);
    return st;
}

zen_status zen__coll_slots_exchange(zen_comm *comm, zen_coll *cc)
{
    uint64_t seq = ++comm->slot_seq;
    post(comm, cc, seq, NULL, 0);
    const char *data = NULL;
    zen_status st = ZEN_OK;
    for (int j = 0; j < comm->size && st == ZEN_OK; j++)
        if (j != comm->rank)
            st = wait_rank(comm, cc, seq, j, 0, &data);
    return wake(comm, st);
}

/* Post this rank's vector, then reduce every rank's into out in rank order (out NULL: only
 * wait, for a non-root of reduce). */
static zen_status reduce_all(zen_comm *comm, zen_coll *cc, const void *in, char *out, size_t count,
                             zen_dtype dtype, zen_op op)
{
    size_t bytes = count * zen_dtype_size(dtype);
    uint64_t seq = ++comm->slot_seq;
    post(comm, cc, seq, in, bytes);
    zen_transport *t = comm->transport;
    const char *own = t->ops->slot_data(t, t->rank, seq), *first = own, *cur = own;
    zen_status st = ZEN_OK;
    for (int j = 0; j < comm->size && st == ZEN_OK; j++) {
        if (j == comm->rank)
            cur = own;
        else
            st = wait_rank(comm, cc, seq, j, bytes, &cur);
        if (st != ZEN_OK || !out || !bytes)
            continue;
        if (j == 0)
            first = cur;
        else if (j == 1)
            zen__reduce3(out, first, cur, count, dtype, op);
        else
            zen_reduce_into(out, cur, count, dtype, op);
    }
    if (st == ZEN_OK && out)
        zen__reduce_finish_avg(out, count, dtype, op, comm->size);
    return wake(comm, st);
}

zen_status zen__allreduce_slots_run(zen_comm *comm, zen_coll *cc, const void *sendbuf,
                                    void *recvbuf, size_t count, zen_dtype dtype, zen_op op)
{
    return reduce_all(comm, cc, sendbuf, recvbuf, count, dtype, op);
}

zen_status zen__reduce_slots_run(zen_comm *comm, zen_coll *cc, const void *sendbuf, void *recvbuf,
                                 size_t count, zen_dtype dtype, zen_op op, int root)
{
    return reduce_all(comm, cc, sendbuf, comm->rank == root ? recvbuf : NULL, count, dtype, op);
}

zen_status zen__broadcast_slots_run(zen_comm *comm, zen_coll *cc, void *buf, size_t bytes, int root)
{
    uint64_t seq = ++comm->slot_seq;
    int me = comm->rank;
    post(comm, cc, seq, buf, me == root ? bytes : 0);
    const char *data = NULL;
    zen_status st = ZEN_OK;
    for (int j = 0; j < comm->size && st == ZEN_OK; j++) {
        if (j == me)
            continue;
        st = wait_rank(comm, cc, seq, j, j == root ? bytes : 0, &data);
        if (st == ZEN_OK && j == root && bytes)
            memcpy(buf, data, bytes);
    }
    return wake(comm, st);
}
