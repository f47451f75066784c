/*
 * allgather and allgatherv: this rank's block is placed in recvbuf (no copy when in place) and
 * the ring allgather engine (ring_allgather.c) circulates the others, chunked and pipelined,
 * receiving straight into recvbuf. An allgather or allgatherv of at most
 * ZEN_ALLGATHER_BRUCK_MAX_BYTES in all on more than 2 ranks takes log2 n rounds instead
 * (allgather_bruck.c): there latency, not bandwidth, is the cost.
 *
 *   4 ranks, rank k contributes Bk; see ring_allgather.c for the step diagram.
 *
 * Bytes each rank sends: S - |B_{r+1}| for S = recvbuf bytes, i.e. (n-1)/n * S for equal blocks.
 * In place: allgather: sendbuf == recvbuf + rank * sendcount elements; allgatherv: sendbuf ==
 * recvbuf + displs[rank].
 * Limitations: allgatherv blocks must not overlap in recvbuf.
 */
#include <string.h>

#include "coll/coll_algos.h"
#include "common/alloc.h"

static zen_status run(zen_comm *comm, const char *name, const void *sendbuf, size_t sendcount,
                      void *recvbuf, const size_t *counts, const size_t *displs, zen_dtype dtype,
                      int equal_blocks)
{
    int r = comm->rank;
    size_t es = zen_dtype_size(dtype), extent = 0;
    for (int j = 0; j < comm->size; j++) {
        if (displs[j] > SIZE_MAX - counts[j])
            return zen__fail(comm, ZEN_EINVAL, "%s: block %d overflows size_t", name, j);
        if (displs[j] + counts[j] > extent)
            extent = displs[j] + counts[j];
    }
    if (sendcount != counts[r])
        return zen__fail(comm, ZEN_EINVAL, "%s: sendcount %zu but recvcounts[%d] is %zu", name,
                         sendcount, r, counts[r]);
    zen_coll_desc d = { .op = name,
                        .dtype = dtype,
                        .count = extent,
                        .sendbuf = sendbuf,
                        .send_count = sendcount,
                        .recvbuf = recvbuf,
                        .recv_count = extent,
                        .agree_counts = counts };
    zen_coll cc;
    zen_status st = zen__coll_start(comm, &d, &cc);
    if (st != ZEN_OK)
        return st;
    size_t bytes = d.bytes;
    char *out = zen__coll_nonnull(recvbuf);
    if (!zen__coll_decide_long(ZEN_COLL_DECIDE_ALLGATHER, comm->size, bytes, 0)) {
        const void *own = zen__coll_nonnull(sendbuf);
        st = equal_blocks ? zen__allgather_bruck(comm, &cc, own, sendcount * es, out)
                          : zen__allgatherv_bruck(comm, &cc, own, counts, displs, es, out);
        return zen__coll_end(comm, &cc, st);
    }
    char *own = out + displs[r] * es;
    if (sendcount && (const char *)sendbuf != own)
        memmove(own, sendbuf, sendcount * es);
    zen_ring ring;
    zen__ring_init(&ring, comm, counts, displs, dtype, ZEN_SUM);
    st = zen__ring_allgather(comm, &cc, &ring, out);
    return zen__coll_end(comm, &cc, st);
}

static zen_status check(zen_comm *comm, const char *name, zen_dtype dtype)
{
    zen_coll_desc d = { .op = name, .checks = ZEN_DESC_DTYPE, .dtype = dtype };
    return zen__coll_check(comm, &d);
}

zen_status zen_allgatherv(zen_comm *comm, const void *sendbuf, size_t sendcount, void *recvbuf,
                          const size_t *recvcounts, const size_t *displs, zen_dtype dtype)
{
    static const char name[] = "allgatherv";
    zen_status st = check(comm, name, dtype);
    if (st != ZEN_OK)
        return st;
    if (!recvcounts || !displs)
        return zen__fail(comm, ZEN_EINVAL, "%s: recvcounts or displs is NULL", name);
    return run(comm, name, sendbuf, sendcount, recvbuf, recvcounts, displs, dtype, 0);
}

zen_status zen_allgather(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                         zen_dtype dtype)
{
    static const char name[] = "allgather";
    zen_status st = check(comm, name, dtype);
    if (st != ZEN_OK)
        return st;
    if (sendcount && (size_t)comm->size > SIZE_MAX / sendcount)
        return zen__fail(comm, ZEN_EINVAL, "%s: %d x %zu elements overflow size_t", name,
                         comm->size, sendcount);
    size_t *layout = zen__malloc_array(2 * (size_t)comm->size, sizeof *layout);
    if (!layout)
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for a layout of %d", name, comm->size);
    for (int j = 0; j < comm->size; j++) {
        layout[j] = sendcount;
        layout[comm->size + j] = (size_t)j * sendcount;
    }
    st = run(comm, name, sendbuf, sendcount, recvbuf, layout, layout + comm->size, dtype, 1);
    zen__free(layout);
    return st;
}
