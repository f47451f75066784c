/*
 * alltoall and alltoallv by pairwise exchange.
 *
 * Steps: copy the block for itself locally; post the n-1 receives (straight into recvbuf); then at
 * step k = 1 .. n-1 send the block for rank r+k while rank r-k sends to us, so in every step each
 * rank sends to exactly one rank and receives from exactly one (no hot spot); finally wait for
 * the receives. Posting all receives first lets a fast sender run ahead without an extra copy.
 *
 *   4 ranks, Bij = block rank i sends to rank j
 *   step 1: r0->r1 B01, r1->r2 B12, r2->r3 B23, r3->r0 B30
 *   step 2: r0->r2 B02, r1->r3 B13, r2->r0 B20, r3->r1 B31
 *   step 3: r0->r3 B03, r1->r0 B10, r2->r1 B21, r3->r2 B32
 *
 * Bytes each rank sends: (n-1)/n * S for S = sendbuf bytes (alltoall), the sum of its
 * sendcounts except its own for alltoallv; n-1 messages (empty blocks still travel, so count
 * disagreements are caught).
 * In place (alltoall only, sendbuf == recvbuf): the input is first copied to a scratch buffer of
 * S bytes. alltoallv is never in place.
 */
#include <string.h>

#include "coll/coll_algos.h"
#include "common/alloc.h"

static zen_status exchange(zen_comm *comm, const zen_coll *cc, const char *src, char *dst,
                           const size_t *scounts, const size_t *sdispls, const size_t *rcounts,
                           const size_t *rdispls, size_t es)
{
    int n = comm->size, r = comm->rank;
    if (scounts[r] != rcounts[r])
        return zen__fail(comm, ZEN_EINVAL,
                         "%s: sendcounts[%d] = %zu but recvcounts[%d] = %zu for this rank itself",
                         cc->op, r, scounts[r], r, rcounts[r]);
    if (rcounts[r])
        memmove(dst + rdispls[r] * es, src + sdispls[r] * es, rcounts[r] * es);
    if (n == 1)
        return ZEN_OK;
    zen_treq **reqs = zen__calloc((size_t)n, sizeof *reqs);
    if (!reqs)
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for %d requests", cc->op, n);
    zen_status st = ZEN_OK;
    for (int k = 1; k < n && st == ZEN_OK; k++) {
        int from = zen_ring_mod(r - k, n);
        st = zen__coll_irecv(comm, cc, from, dst + rdispls[from] * es, rcounts[from] * es,
                             &reqs[from]);
    }
    for (int k = 1; k < n && st == ZEN_OK; k++) {
        int to = zen_ring_mod(r + k, n);
        zen_treq *sreq = NULL;
        st = zen__coll_isend(comm, cc, to, src + sdispls[to] * es, scounts[to] * es, &sreq);
        if (st == ZEN_OK)
            st = zen__coll_wait(comm, cc, sreq, to, SIZE_MAX, NULL);
    }
    for (int k = 1; k < n; k++) {
        int from = zen_ring_mod(r - k, n);
        if (st == ZEN_OK)
            st = zen__coll_wait(comm, cc, reqs[from], from, rcounts[from] * es, NULL);
        else
            zen__coll_req_drop(comm, reqs[from]);
        reqs[from] = NULL;
    }
    zen__free(reqs);
    return st;
}

/* Largest displs[j] + counts[j], checking overflow (its bytes: zen__coll_check). */
static zen_status extent_of(zen_comm *comm, const char *name, const size_t *counts,
                            const size_t *displs, size_t *extent)
{
    size_t e = 0;
    for (int j = 0; j < comm->size; j++) {
        if (displs[j] > SIZE_MAX - counts[j])
            return zen__fail(comm, ZEN_EINVAL, "%s: block %d overflows size_t", name, j);
        if (displs[j] + counts[j] > e)
            e = displs[j] + counts[j];
    }
    *extent = e;
    return ZEN_OK;
}

zen_status zen_alltoallv(zen_comm *comm, const void *sendbuf, const size_t *sendcounts,
                         const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                         const size_t *rdispls, zen_dtype dtype)
{
    static const char name[] = "alltoallv";
    zen_coll_desc d = {
        .op = name, .checks = ZEN_DESC_DTYPE, .dtype = dtype, .agree_no_count = true
    };
    zen_status st = zen__coll_check(comm, &d);
    if (st != ZEN_OK)
        return st;
    if (!sendcounts || !sdispls || !recvcounts || !rdispls)
        return zen__fail(comm, ZEN_EINVAL, "%s: a count or displacement array is NULL", name);
    size_t sext = 0, rext = 0;
    st = extent_of(comm, name, sendcounts, sdispls, &sext);
    if (st == ZEN_OK)
        st = extent_of(comm, name, recvcounts, rdispls, &rext);
    if (st != ZEN_OK)
        return st;
    if (sendbuf && sendbuf == recvbuf)
        return zen__fail(comm, ZEN_EINVAL, "%s: in place is not supported", name);
    /* the larger extent's bytes must fit: both buffers then do */
    d.count = sext > rext ? sext : rext;
    d.sendbuf = sendbuf;
    d.send_count = sext;
    d.recvbuf = recvbuf;
    d.recv_count = rext;
    zen_coll cc;
    if ((st = zen__coll_start(comm, &d, &cc)) != ZEN_OK)
        return st;
    st = exchange(comm, &cc, zen__coll_nonnull(sendbuf), zen__coll_nonnull(recvbuf), sendcounts,
                  sdispls, recvcounts, rdispls, zen_dtype_size(dtype));
    return zen__coll_end(comm, &cc, st);
}

zen_status zen_alltoall(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                        zen_dtype dtype)
{
    static const char name[] = "alltoall";
    zen_coll_desc d = { .op = name,
                        .checks = ZEN_DESC_DTYPE,
                        .dtype = dtype,
                        .count = count,
                        .blocks = comm ? (size_t)comm->size : 1,
                        .sendbuf = sendbuf,
                        .send_count = ZEN_DESC_TOTAL,
                        .recvbuf = recvbuf,
                        .recv_count = ZEN_DESC_TOTAL };
    zen_status st = zen__coll_check(comm, &d);
    if (st != ZEN_OK)
        return st;
    size_t bytes = d.total_bytes;
    size_t *layout = zen__malloc_array(2 * (size_t)comm->size, sizeof *layout);
    char *copy = NULL;
    if (layout && sendbuf == recvbuf && bytes)
        copy = zen__malloc(bytes);
    if (!layout || (sendbuf == recvbuf && bytes && !copy)) {
        zen__free(layout);
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for the layout or in-place copy", name);
    }
    for (int j = 0; j < comm->size; j++) {
        layout[j] = count;
        layout[comm->size + j] = (size_t)j * count;
    }
    zen_coll cc;
    st = zen__coll_begin(comm, name, &cc);
    if (st == ZEN_OK) {
        zen__coll_agree_fill(comm, &cc, &d, 0);
        st = zen__coll_agree(comm, &cc);
        if (st == ZEN_OK && copy)
            memcpy(copy, sendbuf, bytes);
        if (st == ZEN_OK)
            st = exchange(comm, &cc, copy ? copy : zen__coll_nonnull(sendbuf),
                          zen__coll_nonnull(recvbuf), layout, layout + comm->size, layout,
                          layout + comm->size, zen_dtype_size(dtype));
        st = zen__coll_end(comm, &cc, st);
    }
    zen__free(copy);
    zen__free(layout);
    return st;
}
