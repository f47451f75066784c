/*
 * Ring set-up shared by the ring engines: chunk size, even segment layouts, moving segments
 * between the root and their owners (broadcast's scatter, reduce's gather) and the neighbour
 * signature check that makes a count disagreement fail fast when a segment spans several chunks
 * (then the number of messages depends on the count, and a per-message length check alone could
 * leave one rank waiting for a message that its neighbour never sends).
 */
#include <string.h>

#include "coll/coll_algos.h"
#include "common/hash.h"

#define SIGNATURE_MAGIC 0x7a656e72696e6731ull /* "zenring1" */

void zen__ring_init(zen_ring *ring, const zen_comm *comm, const size_t *counts,
                    const size_t *displs, zen_dtype dtype, zen_op op)
{
    ring->n = comm->size;
    ring->rank = comm->rank;
    ring->esize = zen_dtype_size(dtype);
    size_t ce = zen__coll_ring_chunk_bytes() / ring->esize;
    ring->chunk_elems = ce ? ce : 1;
    ring->counts = counts;
    ring->displs = displs;
    ring->dtype = dtype;
    ring->op = op;
}

void zen__ring_even_layout(size_t count, int n, size_t *counts, size_t *displs)
{
    size_t base = count / (size_t)n, extra = count % (size_t)n, off = 0;
    for (int j = 0; j < n; j++) {
        counts[j] = base + ((size_t)j < extra ? 1 : 0);
        displs[j] = off;
        off += counts[j];
    }
}

zen_status zen__ring_root_segments(zen_comm *comm, const zen_coll *cc, char *root_buf, char *own,
                                   const size_t *counts, const size_t *displs, size_t esize,
                                   int root, int to_root)
{
    int r = comm->rank;
    if (r != root)
        return to_root ? zen__coll_sendrecv(comm, cc, root, own, counts[r] * esize, -1, NULL, 0)
                       : zen__coll_sendrecv(comm, cc, -1, NULL, 0, root, own, counts[r] * esize);
    zen_status st = ZEN_OK;
    for (int j = 0; j < comm->size && st == ZEN_OK; j++) {
        if (j == root)
            continue;
        char *seg = root_buf + displs[j] * esize;
        size_t bytes = counts[j] * esize;
        st = to_root ? zen__coll_sendrecv(comm, cc, -1, NULL, 0, j, seg, bytes)
                     : zen__coll_sendrecv(comm, cc, j, seg, bytes, -1, NULL, 0);
    }
    return st;
}

size_t zen__ring_max_chunks(const zen_ring *ring)
{
    size_t m = 1;
    for (int j = 0; j < ring->n; j++) {
        size_t c = zen_ring_nchunks(ring, j);
        if (c > m)
            m = c;
    }
    return m;
}

zen_status zen__ring_check_signature(zen_comm *comm, const zen_coll *cc, const zen_ring *ring,
                                     uint64_t kind)
{
    if (ring->n < 2 || zen__ring_max_chunks(ring) == 1)
        return ZEN_OK;
    uint64_t h = zen_hash64(kind, ring->chunk_elems);
    h = zen_hash64(h, ((uint64_t)ring->dtype << 8) | (uint64_t)ring->op);
    for (int j = 0; j < ring->n; j++)
        h = zen_hash64(h, ring->counts[j]);
    uint64_t mine[2] = { SIGNATURE_MAGIC, h }, theirs[2] = { 0, 0 };
    int next = zen_ring_mod(ring->rank + 1, ring->n), prev = zen_ring_mod(ring->rank - 1, ring->n);
    zen_status st =
        zen__coll_sendrecv(comm, cc, next, mine, sizeof mine, prev, theirs, sizeof theirs);
    if (st != ZEN_OK)
        return st;
    if (theirs[0] != SIGNATURE_MAGIC || theirs[1] != h)
        return zen__fail(comm, ZEN_EPROTO,
                         "%s: rank %d disagrees on the counts, dtype, op or ZEN_RING_CHUNK_BYTES "
                         "(layout signature %016llx, ours %016llx)",
                         cc->op, ring->n > 1 ? prev : 0, (unsigned long long)theirs[1],
                         (unsigned long long)h);
    return ZEN_OK;
}
