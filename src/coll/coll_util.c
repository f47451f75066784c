/* Bookkeeping and peer messaging shared by every collective (see comm_internal.h). */
#include <stdio.h>
#include <string.h>

#include "coll/coll_algos.h"
#include "coll/comm_internal.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

#define INTERNAL_TAG_BIT 0x80000000u

static int is_fatal(zen_status st)
{
    return st == ZEN_ETIMEDOUT || st == ZEN_EPEER || st == ZEN_EPROTO || st == ZEN_EABORTED ||
           st == ZEN_ESYS;
}

uint64_t zen__comm_user_tag(const zen_comm *comm, int tag)
{
    return ((uint64_t)comm->ctx << 32) | (uint32_t)tag;
}

const uint64_t *zen__comm_seeds(const zen_comm *comm)
{
    return comm->seeds;
}

zen_status zen__coll_begin_late(zen_comm *comm, const char *op, zen_coll *cc)
{
    memset(cc, 0, sizeof *cc);
    cc->op = op;
    if (comm->poisoned != ZEN_OK)
        return zen__fail(comm, comm->poisoned,
                         "%s on a communicator poisoned by an earlier %s; destroy it", op,
                         zen_status_name(comm->poisoned));
    uint64_t seq = comm->coll_seq++;
    cc->tag = ((uint64_t)comm->ctx << 32) | INTERNAL_TAG_BIT | (uint32_t)(seq & 0x7fffffffu);
    cc->outermost = comm->depth++ == 0;
    if (cc->outermost) {
        comm->stats.last_bytes_sent = 0;
        comm->stats.last_bytes_recv = 0;
        comm->stats.last_msgs_sent = 0;
        comm->stats.last_msgs_recv = 0;
        cc->arrival_slot = (size_t)(comm->arrival_count % ZEN_ARRIVAL_HISTORY);
        zen_arrival *a = &comm->arrivals[cc->arrival_slot];
        a->seq = seq;
        a->op = op;
        a->arrive_ns = 0;
        a->leave_ns = 0;
    }
    return ZEN_OK;
}

void zen__coll_stamp(zen_comm *comm, zen_coll *cc)
{
    if (cc->stamped)
        return;
    cc->stamped = 1;
    cc->deadline_ns = zen_deadline_after(comm->timeout_s);
    if (cc->outermost)
        comm->arrivals[cc->arrival_slot].arrive_ns = zen_wall_ns();
}

zen_status zen__coll_begin(zen_comm *comm, const char *op, zen_coll *cc)
{
    zen_status st = zen__coll_begin_late(comm, op, cc);
    if (st == ZEN_OK)
        zen__coll_stamp(comm, cc);
    return st;
}

zen_status zen__coll_end(zen_comm *comm, zen_coll *cc, zen_status status)
{
    comm->depth--;
    zen__coll_stamp(comm, cc); /* a call that failed before its late stamp */
    if (cc->outermost) {
        comm->arrivals[cc->arrival_slot].leave_ns = zen_wall_ns();
        comm->arrival_count++;
        comm->stats.collectives++;
    }
    if (status != ZEN_OK && is_fatal(status) && comm->poisoned == ZEN_OK) {
        comm->poisoned = status;
        ZEN_WARN("coll", "%s failed, communicator poisoned: %s", cc->op, comm->last_error);
        if (comm->transport)
            comm->transport->ops->abort(comm->transport, status, comm->last_error);
    }
    return status;
}

/* Copy the transport's detail into the communicator's last error, with the collective's name. */
static zen_status transport_error(zen_comm *comm, const zen_coll *cc, zen_status st)
{
    char detail[512];
    zen__transport_last_error(comm->transport, detail, sizeof detail);
    snprintf(comm->last_error, sizeof comm->last_error, "%s (in %s)",
             detail[0] ? detail : zen_strerror(st), cc ? cc->op : "p2p");
    return st;
}

zen_status zen__coll_isend(zen_comm *comm, const zen_coll *cc, int peer, const void *buf,
                           size_t bytes, zen_treq **req)
{
    zen_transport *t = comm->transport;
    zen_status st = t->ops->isend(t, comm->world_ranks[peer], cc->tag, buf, bytes, req);
    if (st != ZEN_OK)
        return transport_error(comm, cc, st);
    comm->stats.bytes_sent += bytes;
    comm->stats.msgs_sent++;
    comm->stats.last_bytes_sent += bytes;
    comm->stats.last_msgs_sent++;
    return ZEN_OK;
}

zen_status zen__coll_irecv(zen_comm *comm, const zen_coll *cc, int peer, void *buf, size_t bytes,
                           zen_treq **req)
{
    zen_transport *t = comm->transport;
    zen_status st = t->ops->irecv(t, comm->world_ranks[peer], cc->tag, buf, bytes, req);
    return st == ZEN_OK ? ZEN_OK : transport_error(comm, cc, st);
}

zen_status zen__coll_irecv_combine(zen_comm *comm, const zen_coll *cc, int peer, void *buf,
                                   size_t bytes, const zen_combine *combine, zen_treq **req)
{
    zen_transport *t = comm->transport;
    *req = NULL;
    if (!t->ops->irecv_combine)
        return ZEN_EUNSUPPORTED;
    zen_status st =
        t->ops->irecv_combine(t, comm->world_ranks[peer], cc->tag, buf, bytes, combine, req);
    return st == ZEN_OK ? ZEN_OK : transport_error(comm, cc, st);
}

void zen__coll_req_drop(zen_comm *comm, zen_treq *req)
{
    if (req)
        comm->transport->ops->req_free(comm->transport, req);
}

zen_status zen__coll_wait(zen_comm *comm, const zen_coll *cc, zen_treq *req, int peer,
                          size_t expect, size_t *got)
{
    if (!req)
        return ZEN_OK;
    zen_transport *t = comm->transport;
    size_t len = 0;
    int is_send = req->is_send;
    zen_status st = t->ops->wait(t, req, cc->deadline_ns, &len);
    t->ops->req_free(t, req);
    if (st != ZEN_OK)
        return transport_error(comm, cc, st);
    if (is_send)
        return ZEN_OK;
    comm->stats.bytes_recv += len;
    comm->stats.msgs_recv++;
    comm->stats.last_bytes_recv += len;
    comm->stats.last_msgs_recv++;
    if (got)
        *got = len;
    if (expect != SIZE_MAX && len != expect)
        return zen__fail(comm, ZEN_EPROTO,
                         "%s: rank %d sent %zu bytes where %zu were expected: the ranks disagree "
                         "on the count or dtype",
                         cc->op, peer, len, expect);
    return ZEN_OK;
}

zen_status zen__coll_sendrecv(zen_comm *comm, const zen_coll *cc, int dst, const void *sbuf,
                              size_t sbytes, int src, void *rbuf, size_t rbytes)
{
    zen_treq *rreq = NULL, *sreq = NULL;
    zen_status st = ZEN_OK;
    if (src >= 0)
        st = zen__coll_irecv(comm, cc, src, rbuf, rbytes, &rreq);
    if (st == ZEN_OK && dst >= 0)
        st = zen__coll_isend(comm, cc, dst, sbuf, sbytes, &sreq);
    if (st != ZEN_OK) {
        zen__coll_req_drop(comm, rreq);
        return st;
    }
    st = zen__coll_wait(comm, cc, sreq, dst, SIZE_MAX, NULL);
    if (st != ZEN_OK) {
        zen__coll_req_drop(comm, rreq);
        return st;
    }
    return zen__coll_wait(comm, cc, rreq, src, rbytes, NULL);
}

void *zen__coll_nonnull(const void *p)
{
    static _Alignas(16) char empty[16];
    return p ? (void *)p : empty;
}

zen_status zen__coll_root_fan(zen_comm *comm, const zen_coll *cc, const void *send_blocks,
                              void *recv_blocks, size_t bytes)
{
    int n = comm->size, r = comm->rank, send = send_blocks != NULL;
    const char *in = send_blocks;
    char *out = recv_blocks;
    if (n == 1)
        return ZEN_OK;
    zen_treq **reqs = zen__calloc((size_t)n, sizeof *reqs);
    if (!reqs)
        return zen__fail(comm, ZEN_ENOMEM, "%s: no memory for %d requests", cc->op, n);
    zen_status st = ZEN_OK;
    for (int j = 0; j < n && st == ZEN_OK; j++)
        if (j != r)
            st = send ? zen__coll_isend(comm, cc, j, in + (size_t)j * bytes, bytes, &reqs[j])
                      : zen__coll_irecv(comm, cc, j, out + (size_t)j * bytes, bytes, &reqs[j]);
    for (int j = 0; j < n; j++) {
        if (j == r)
            continue;
        if (st == ZEN_OK)
            st = zen__coll_wait(comm, cc, reqs[j], j, send ? SIZE_MAX : bytes, NULL);
        else
            zen__coll_req_drop(comm, reqs[j]);
    }
    zen__free(reqs);
    return st;
}
