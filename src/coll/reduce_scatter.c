/*
 * reduce_scatter and reduce_scatterv: the ring reduce-scatter engine (ring_reduce_scatter.c) with
 * the caller's block layout; partial results live in chunk-sized scratch (no full-size buffer).
 *
 *   4 ranks, sendbuf = blocks B0 B1 B2 B3 on every rank; rank r receives sum over ranks of Br.
 *   See ring_reduce_scatter.c for the step diagram.
 *
 * Bytes each rank sends: S - |B_r| for S = sendbuf bytes, i.e. (n-1)/n * S for equal blocks.
 * In place: sendbuf == recvbuf; the result then lands at the start of the buffer (MPI style).
 * recvbuf == sendbuf + offset of block r works too.
 */
#include "coll/coll_algos.h"
#include "coll/reduce_op.h"
#include "common/alloc.h"

static zen_status run(zen_comm *comm, const char *name, const void *sendbuf, void *recvbuf,
                      const size_t *counts, size_t *displs, zen_dtype dtype, zen_op op)
{
    size_t total = 0;
    for (int j = 0; j < comm->size; j++) {
        displs[j] = total;
        if (counts[j] > SIZE_MAX - total)
            return zen__fail(comm, ZEN_EINVAL, "%s: the block counts overflow size_t", name);
        total += counts[j];
    }
    zen_coll_desc d = { .op = name,
                        .checks = ZEN_DESC_REDUCE,
                        .dtype = dtype,
                        .rop = op,
                        .count = total,
                        .sendbuf = sendbuf,
                        .send_count = total,
                        .recvbuf = recvbuf,
                        .recv_count = counts[comm->rank],
                        .agree_counts = counts };
    zen_coll cc;
    zen_status st = zen__coll_start(comm, &d, &cc);
    if (st != ZEN_OK)
        return st;
    zen_ring ring;
    zen__ring_init(&ring, comm, counts, displs, dtype, op);
    st = zen__ring_reduce_scatter(comm, &cc, &ring, zen__coll_nonnull(sendbuf), NULL,
                                  zen__coll_nonnull(recvbuf));
    if (st == ZEN_OK && recvbuf)
        zen__reduce_finish_avg(recvbuf, counts[comm->rank], dtype, op, comm->size);
    return zen__coll_end(comm, &cc, st);
}

static zen_status check(zen_comm *comm, const char *name, zen_dtype dtype, zen_op op)
{
    zen_coll_desc d = { .op = name, .checks = ZEN_DESC_REDUCE, .dtype = dtype, .rop = op };
    return zen__coll_check(comm, &d);
}

zen_status zen_reduce_scatterv(zen_comm *comm, const void *sendbuf, void *recvbuf,
                               const size_t *recvcounts, zen_dtype dtype, zen_op op)
{
    static const char name[] = "reduce_scatterv";
    zen_status st = check(comm, name, dtype, op);
    if (st != ZEN_OK)
        return st;
    if (!recvcounts)
        return zen__fail(comm, ZEN_EINVAL, "%s: recvcounts is NULL", name);
    size_t *displs = zen__malloc_array((size_t)comm->size, sizeof *displs);
    if (!displs)
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for %d displacements", name, comm->size);
    st = run(comm, name, sendbuf, recvbuf, recvcounts, displs, dtype, op);
    zen__free(displs);
    return st;
}

zen_status zen_reduce_scatter(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                              zen_dtype dtype, zen_op op)
{
    static const char name[] = "reduce_scatter";
    zen_status st = check(comm, name, dtype, op);
    if (st != ZEN_OK)
        return st;
    size_t *layout = zen__malloc_array(2 * (size_t)comm->size, sizeof *layout);
    if (!layout)
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for a layout of %d", name, comm->size);
    for (int j = 0; j < comm->size; j++)
        layout[j] = recvcount;
    st = run(comm, name, sendbuf, recvbuf, layout, layout + comm->size, dtype, op);
    zen__free(layout);
    return st;
}
