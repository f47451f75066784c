/*
 * zen_allreduce: argument checks, algorithm choice and dispatch. The algorithms live in
 * allreduce_ring.c (bandwidth optimal, large messages), allreduce_rhd.c (log-latency, small
 * messages) and, on the mpi transport, the transport's native hook.
 *
 * Choice (zen_allreduce_choice, identical on every rank for the same count and dtype; the
 * ZEN_ALLREDUCE_ALGO it obeys is read when the communicator is created):
 *   ZEN_ALLREDUCE_ALGO=ring|rhd forces that algorithm; =mpi forces the native one when the
 *   transport provides it (else falls back to auto); =slots the shm latency path where it can
 *   run (else auto). auto: native when the transport is mpi, it provides the hook and
 *   ZEN_MPI_NATIVE=1; else slots (slots.c) when the communicator has collective slots and the
 *   message is at most their size; else rhd when the message is at most ZEN_RHD_MAX_BYTES or has
 *   fewer elements than ranks (ring segments would be empty); else ring.
 */
#include <string.h>

#include "coll/coll_algos.h"
#include "coll/reduce_op.h"
#include "common/tunables.h"

static int native_available(const zen_comm *comm)
{
    return comm->transport && comm->transport->ops->native_allreduce != NULL;
}

static int slots_fit(const zen_comm *comm, size_t count, zen_dtype dtype)
{
    size_t max = zen__coll_slot_max(comm), es = zen_dtype_size(dtype);
    return max > 0 && es > 0 && count <= max / es;
}

zen_allreduce_algo zen__allreduce_algo_parse(const char *name)
{
    static const char *const NAMES[] = { "auto", "ring", "rhd", "mpi", "slots" };
    for (size_t a = 0; a < sizeof NAMES / sizeof NAMES[0]; a++)
        if (strcmp(name, NAMES[a]) == 0)
            return (zen_allreduce_algo)a;
    return ZEN_ALLREDUCE_AUTO; /* the tunables table admits nothing else */
}

zen_allreduce_algo zen_allreduce_choice(const zen_comm *comm, size_t count, zen_dtype dtype)
{
    if (!comm)
        return ZEN_ALLREDUCE_RING;
    zen_allreduce_algo forced = comm->algo_forced; /* ZEN_ALLREDUCE_ALGO */
    if ((forced == ZEN_ALLREDUCE_AUTO || forced == ZEN_ALLREDUCE_SLOTS) &&
        comm->kind != ZEN_TRANSPORT_MPI && slots_fit(comm, count, dtype))
        return ZEN_ALLREDUCE_SLOTS;
    if (forced == ZEN_ALLREDUCE_RING || forced == ZEN_ALLREDUCE_RHD)
        return forced;
    /* native hooks cover the dtypes MPI has (not bf16: zen reduces it in f32 itself) */
    int native = native_available(comm) && dtype != ZEN_BF16;
    if (forced == ZEN_ALLREDUCE_MPI && native)
        return ZEN_ALLREDUCE_MPI;
    if (native && zen__transport_traits(comm->kind)->native_allreduce &&
        zen__param_long("MPI_NATIVE") == 1)
        return ZEN_ALLREDUCE_MPI;
    size_t es = zen_dtype_size(dtype);
    size_t bytes = es && count > SIZE_MAX / es ? SIZE_MAX : count * es;
    return zen__coll_decide_long(ZEN_COLL_DECIDE_ALLREDUCE, comm->size, bytes, count)
               ? ZEN_ALLREDUCE_RING
               : ZEN_ALLREDUCE_RHD;
}

zen_status zen__allreduce_native_run(zen_comm *comm, const zen_coll *cc, const void *sendbuf,
                                     void *recvbuf, size_t count, zen_dtype dtype, zen_op op)
{
    zen_transport *t = comm->transport;
    if (!native_available(comm))
        return zen__fail(comm, ZEN_EUNSUPPORTED,
                         "%s: the %s transport has no native allreduce (ZEN_ALLREDUCE_MPI needs "
                         "the mpi transport)",
                         cc->op, zen_transport_name(comm->kind));
    zen_status st = t->ops->native_allreduce(t, comm->world_ranks, comm->size, sendbuf, recvbuf,
                                             count, dtype, op == ZEN_AVG ? ZEN_SUM : op);
    if (st != ZEN_OK) {
        char detail[512];
        zen__transport_last_error(t, detail, sizeof detail);
        return zen__fail(comm, st, "%s: native allreduce failed: %s", cc->op,
                         detail[0] ? detail : zen_strerror(st));
    }
    zen__reduce_finish_avg(recvbuf, count, dtype, op, comm->size);
    return ZEN_OK;
}

zen_status zen_allreduce_with(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                              zen_dtype dtype, zen_op op, zen_allreduce_algo algo)
{
    static const char name[] = "allreduce";
    zen_coll_desc d = { .op = name,
                        .checks = ZEN_DESC_REDUCE,
                        .dtype = dtype,
                        .rop = op,
                        .count = count,
                        .sendbuf = sendbuf,
                        .send_count = count,
                        .recvbuf = recvbuf,
                        .recv_count = count };
    zen_status st = zen__coll_check(comm, &d);
    size_t bytes = d.bytes;
    if (st == ZEN_OK && (unsigned)algo > ZEN_ALLREDUCE_SLOTS)
        st = zen__fail(comm, ZEN_EINVAL, "%s: invalid algorithm %d", name, (int)algo);
    if (st != ZEN_OK)
        return st;
    if (algo == ZEN_ALLREDUCE_AUTO)
        algo = zen_allreduce_choice(comm, count, dtype);
    zen_coll cc;
    /* the slot path stamps the call after its post (zen__coll_begin_late) */
    st = algo == ZEN_ALLREDUCE_SLOTS ? zen__coll_begin_late(comm, name, &cc)
                                     : zen__coll_begin(comm, name, &cc);
    if (st != ZEN_OK)
        return st;
    /* slots and rhd carry the descriptor in their own messages, the others agree first
     * (agree.c); on a communicator with slots every algorithm but slots agrees there, so that
     * ranks that chose differently meet (slots.c) */
    zen__coll_agree_fill(comm, &cc, &d, (int)algo);
    int has_slots = zen__coll_slot_max(comm) > 0;
    if (algo == ZEN_ALLREDUCE_SLOTS && !slots_fit(comm, count, dtype))
        st = zen__fail(comm, ZEN_EUNSUPPORTED,
                       "%s: the slots algorithm needs a communicator over a pure shm transport "
                       "(the one zen_comm_create made) and at most %zu bytes",
                       name, zen__coll_slot_max(comm));
    else if (algo != ZEN_ALLREDUCE_SLOTS && (algo != ZEN_ALLREDUCE_RHD || has_slots))
        st = zen__coll_agree(comm, &cc);
    if (algo == ZEN_ALLREDUCE_RHD && has_slots)
        cc.agree.word = 0; /* agreed already */
    if (st != ZEN_OK)
        return zen__coll_end(comm, &cc, st);
    if (algo == ZEN_ALLREDUCE_SLOTS) {
        st = zen__allreduce_slots_run(comm, &cc, sendbuf, recvbuf, count, dtype, op);
    } else if (algo == ZEN_ALLREDUCE_MPI) {
        st = zen__allreduce_native_run(comm, &cc, sendbuf, recvbuf, count, dtype, op);
    } else if (comm->size == 1) {
        if (sendbuf != recvbuf && bytes)
            memmove(recvbuf, sendbuf, bytes);
    } else if (algo == ZEN_ALLREDUCE_RHD) {
        st = zen__allreduce_rhd_run(comm, &cc, sendbuf, recvbuf, count, dtype, op);
    } else {
        st = zen__allreduce_ring_run(comm, &cc, sendbuf, recvbuf, count, dtype, op);
    }
    return zen__coll_end(comm, &cc, st);
}

zen_status zen_allreduce(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                         zen_dtype dtype, zen_op op)
{
    return zen_allreduce_with(comm, sendbuf, recvbuf, count, dtype, op, ZEN_ALLREDUCE_AUTO);
}
