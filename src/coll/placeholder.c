/* Placeholder collectives (linear), replaced by src/coll algorithms. */
#include <string.h>

#include "coll/comm_internal.h"

zen_status zen_allgather(zen_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                         zen_dtype dtype)
{
    zen_coll cc;
    zen_status st = zen_coll_begin(comm, "allgather", &cc);
    if (st != ZEN_OK)
        return st;
    size_t bytes = sendcount * zen_dtype_size(dtype);
    char *out = recvbuf;
    if (sendbuf != out + (size_t)comm->rank * bytes)
        memmove(out + (size_t)comm->rank * bytes, sendbuf, bytes);
    for (int d = 1; d < comm->size && st == ZEN_OK; d++) {
        int dst = (comm->rank + d) % comm->size;
        int src = (comm->rank - d + comm->size) % comm->size;
        st = zen_coll_sendrecv(comm, &cc, dst, out + (size_t)comm->rank * bytes, bytes, src,
                               out + (size_t)src * bytes, bytes);
    }
    return zen_coll_end(comm, &cc, st);
}

zen_status zen_barrier(zen_comm *comm)
{
    char dummy[1];
    char *all = NULL;
    (void)dummy;
    (void)all;
    int x = 0;
    int buf[4096];
    if (comm->size > 4096)
        return ZEN_EUNSUPPORTED;
    return zen_allgather(comm, &x, buf, 1, ZEN_I32);
}
