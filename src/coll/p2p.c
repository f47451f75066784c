/* User point-to-point messages and requests on top of the transport. */
#include <stdio.h>

#include "coll/comm_internal.h"
#include "common/alloc.h"
#include "common/clock.h"

struct zen_request {
    zen_comm *comm;
    zen_treq *treq;
    int peer;
    int done;
    zen_status status;
    size_t len;
};

static zen_status check_peer(zen_comm *comm, int peer, int tag, const char *what)
{
    if (peer < 0 || peer >= comm->size)
        return zen__fail(comm, ZEN_EINVAL, "%s: peer %d is not a rank of this communicator of %d",
                         what, peer, comm->size);
    if (tag < 0 || tag > ZEN_TAG_MAX)
        return zen__fail(comm, ZEN_EINVAL, "%s: tag %d outside [0, ZEN_TAG_MAX]", what, tag);
    if (comm->poisoned != ZEN_OK)
        return zen__fail(comm, comm->poisoned, "%s on a poisoned communicator", what);
    return ZEN_OK;
}

/*
 * One destroyed request is kept per communicator and reused by the next start: a small message
 * then costs no malloc/free pair (~180 instructions, a third of starting and releasing an 8-byte
 * send over shm, docs/benchmarks.md). No lock: a communicator and its requests are used by one
 * thread at a time (comm.h). Not under AddressSanitizer, where a kept block would hide a use
 * after free.
 */
static zen_request *request_new(zen_comm *comm)
{
    zen_request *r = comm->spare_request;
    if (r) {
        comm->spare_request = NULL;
        return r;
    }
    return zen__malloc(sizeof *r); /* not calloc: that skips glibc's thread cache */
}

static void request_release(zen_request *r)
{
#if !defined(__SANITIZE_ADDRESS__)
    if (!r->comm->spare_request) {
        r->comm->spare_request = r;
        return;
    }
#endif
    zen__free(r);
}

static zen_status p2p_error(zen_comm *comm, zen_status st, const char *what)
{
    char detail[512];
    zen__transport_last_error(comm->transport, detail, sizeof detail);
    snprintf(comm->last_error, sizeof comm->last_error, "%s (in %s)", detail, what);
    return st;
}

static zen_status start(zen_comm *comm, int is_send, void *buf, size_t bytes, int peer, int tag,
                        zen_request **out)
{
    *out = NULL;
    const char *what = is_send ? "send" : "recv";
    zen_status st = check_peer(comm, peer, tag, what);
    if (st != ZEN_OK)
        return st;
    if (!buf && bytes)
        return zen__fail(comm, ZEN_EINVAL, "%s: NULL buffer of %zu bytes", what, bytes);
    zen_request *r = request_new(comm);
    if (!r)
        return ZEN_ENOMEM;
    *r = (zen_request){ .comm = comm, .peer = peer };
    zen_transport *t = comm->transport;
    uint64_t wtag = zen__comm_user_tag(comm, tag);
    int wpeer = comm->world_ranks[peer];
    st = is_send ? t->ops->isend(t, wpeer, wtag, buf, bytes, &r->treq)
                 : t->ops->irecv(t, wpeer, wtag, buf, bytes, &r->treq);
    if (st != ZEN_OK) {
        request_release(r);
        return p2p_error(comm, st, what);
    }
    if (is_send) {
        comm->stats.bytes_sent += bytes;
        comm->stats.msgs_sent++;
    }
    *out = r;
    return ZEN_OK;
}

zen_status zen_isend(zen_comm *comm, const void *buf, size_t bytes, int peer, int tag,
                     zen_request **req)
{
    if (!comm || !req)
        return ZEN_EINVAL;
    return start(comm, 1, (void *)buf, bytes, peer, tag, req);
}

zen_status zen_irecv(zen_comm *comm, void *buf, size_t capacity, int peer, int tag,
                     zen_request **req)
{
    if (!comm || !req)
        return ZEN_EINVAL;
    return start(comm, 0, buf, capacity, peer, tag, req);
}

static void record_done(zen_request *r, zen_status st, size_t len)
{
    r->done = 1;
    r->status = st;
    r->len = len;
    zen_comm *comm = r->comm;
    zen_transport *t = comm->transport;
    int is_send = r->treq->is_send;
    t->ops->req_free(t, r->treq);
    r->treq = NULL;
    if (st != ZEN_OK) {
        p2p_error(comm, st, is_send ? "send" : "recv");
    } else if (!is_send) {
        comm->stats.bytes_recv += len;
        comm->stats.msgs_recv++;
    }
}

zen_status zen_request_test(zen_request *req, int *done)
{
    if (!req || !done)
        return ZEN_EINVAL;
    if (!req->done) {
        size_t len = 0;
        int fin = 0;
        zen_transport *t = req->comm->transport;
        zen_status st = t->ops->test(t, req->treq, &fin, &len);
        if (fin)
            record_done(req, st, len);
    }
    *done = req->done;
    return req->done ? req->status : ZEN_OK;
}

zen_status zen_request_wait(zen_request *req, double timeout_s, size_t *received)
{
    if (!req)
        return ZEN_EINVAL;
    if (!req->done) {
        zen_transport *t = req->comm->transport;
        double limit = timeout_s < 0 ? req->comm->timeout_s : timeout_s;
        size_t len = 0;
        int fin = 0;
        /* Finished already (every shm, inproc and tcp send is): no deadline, no clock read. */
        zen_status st = t->ops->test(t, req->treq, &fin, &len);
        if (!fin)
            st = t->ops->wait(t, req->treq, zen_deadline_after(limit > 0 ? limit : 1e-9), &len);
        if (st == ZEN_ETIMEDOUT) {
            p2p_error(req->comm, st, "wait");
            return st;
        }
        record_done(req, st, len);
    }
    if (received)
        *received = req->len;
    return req->status;
}

void zen_request_free(zen_request *req)
{
    zen_request_destroy(req);
}

void zen_request_destroy(zen_request *req)
{
    if (!req)
        return;
    if (req->treq)
        req->comm->transport->ops->req_free(req->comm->transport, req->treq);
    request_release(req);
}

zen_status zen_send(zen_comm *comm, const void *buf, size_t bytes, int peer, int tag)
{
    zen_request *r = NULL;
    zen_status st = zen_isend(comm, buf, bytes, peer, tag, &r);
    if (st == ZEN_OK)
        st = zen_request_wait(r, -1, NULL);
    zen_request_destroy(r);
    return st;
}

zen_status zen_recv(zen_comm *comm, void *buf, size_t capacity, int peer, int tag, size_t *received)
{
    zen_request *r = NULL;
    zen_status st = zen_irecv(comm, buf, capacity, peer, tag, &r);
    if (st == ZEN_OK)
        st = zen_request_wait(r, -1, received);
    zen_request_destroy(r);
    return st;
}
