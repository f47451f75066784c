/*
 * inproc: ranks are threads of one process. A send copies the bytes straight into the receiver's
 * posted buffer when one is waiting (one copy, done by the sending thread, so the copies of
 * different ranks run in parallel), else into a buffer on the receiver's unexpected list.
 *
 * The world owns every endpoint and mailbox, so a rank that leaves or dies never frees memory
 * another rank may still be delivering into; everything is freed by
 * zen__transport_inproc_world_destroy.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "transport/mailbox.h"
#include "transport/registry.h"
#include "transport/transport.h"

struct zen_inproc_world {
    int nranks;
    zen_transport *endpoints; /* nranks endpoints */
    zen_mailbox **mailboxes;
    atomic_int *claimed; /* endpoint handed to a rank */
    atomic_int *closed;  /* OPEN, LEAVING (announcing its departure) or GONE */
};

enum {
    OPEN,
    LEAVING,
    GONE
};

#define WORLD(t) ((zen_inproc_world *)(t)->impl)

static zen_status inproc_isend(zen_transport *t, int peer, uint64_t tag, const void *buf,
                               size_t len, zen_treq **req)
{
    zen_inproc_world *w = WORLD(t);
    *req = NULL;
    if (peer < 0 || peer >= w->nranks)
        return zen__transport_fail(t, ZEN_EINVAL, "send to rank %d of %d", peer, w->nranks);
    if (atomic_load(&w->closed[t->rank]))
        return zen__transport_fail(t, ZEN_EABORTED, "send to rank %d after this rank aborted",
                                   peer);
    if (atomic_load(&w->closed[peer]) == GONE) {
        /* name the root cause the peer announced when it left (it may have aborted because of
         * a third rank), not only the peer */
        char why[256];
        if (zen__mailbox_peer_failure(w->mailboxes[t->rank], peer, why, sizeof why) != ZEN_OK)
            return zen__transport_fail(t, ZEN_EPEER, "send to rank %d failed: %s", peer, why);
        return zen__transport_fail(t, ZEN_EPEER, "send to rank %d, which has left or died", peer);
    }
    zen__mailbox_deliver(w->mailboxes[peer], t->rank, tag, buf, len);
    return zen__mailbox_send_done(req);
}

static zen_status inproc_irecv(zen_transport *t, int peer, uint64_t tag, void *buf, size_t cap,
                               zen_treq **req)
{
    return zen__mailbox_irecv(WORLD(t)->mailboxes[t->rank], peer, tag, buf, cap, req);
}

static zen_status inproc_irecv_combine(zen_transport *t, int peer, uint64_t tag, void *buf,
                                       size_t cap, const zen_combine *combine, zen_treq **req)
{
    return zen__mailbox_irecv_combine(WORLD(t)->mailboxes[t->rank], peer, tag, buf, cap, combine,
                                      req);
}

static zen_status inproc_wait(zen_transport *t, zen_treq *req, int64_t deadline_ns, size_t *len)
{
    return zen__mailbox_wait(WORLD(t)->mailboxes[t->rank], req, deadline_ns, len);
}

static zen_status inproc_test(zen_transport *t, zen_treq *req, int *done, size_t *len)
{
    return zen__mailbox_test(WORLD(t)->mailboxes[t->rank], req, done, len);
}

static void inproc_req_free(zen_transport *t, zen_treq *req)
{
    zen__mailbox_req_free(WORLD(t)->mailboxes[t->rank], req);
}

/* Tell every other rank that this one is gone, so their waits on it end now, not at timeout. */
static void announce_departure(zen_transport *t, zen_status status, const char *reason)
{
    zen_inproc_world *w = WORLD(t);
    int open = OPEN;
    if (!atomic_compare_exchange_strong(&w->closed[t->rank], &open, LEAVING))
        return;
    for (int p = 0; p < w->nranks; p++)
        if (p != t->rank)
            zen__mailbox_fail_peer(w->mailboxes[p], t->rank, status, reason);
    /* GONE only now: a sender that sees it finds the reason in its own mailbox already */
    atomic_store(&w->closed[t->rank], GONE);
}

static void inproc_abort(zen_transport *t, zen_status status, const char *reason)
{
    char msg[400];
    snprintf(msg, sizeof msg, "rank %d aborted: %s", t->rank, reason ? reason : "abort");
    zen__mailbox_fail_all(WORLD(t)->mailboxes[t->rank], status == ZEN_OK ? ZEN_EABORTED : status,
                          reason ? reason : "aborted");
    announce_departure(t, ZEN_EPEER, msg);
}

static void inproc_destroy(zen_transport *t)
{
    char msg[128];
    snprintf(msg, sizeof msg, "rank %d closed its communicator", t->rank);
    announce_departure(t, ZEN_EPEER, msg);
}

static const zen_transport_ops inproc_ops = {
    .name = "inproc",
    .isend = inproc_isend,
    .irecv = inproc_irecv,
    .irecv_combine = inproc_irecv_combine,
    .wait = inproc_wait,
    .test = inproc_test,
    .req_free = inproc_req_free,
    .abort = inproc_abort,
    .destroy = inproc_destroy,
    .send_raw = NULL,
};

zen_status zen__transport_inproc_world_create(int nranks, zen_inproc_world **out)
{
    if (!out)
        return ZEN_EINVAL;
    *out = NULL;
    if (nranks < 1 || nranks > 4096)
        return ZEN_EINVAL;
    zen_inproc_world *w = zen__calloc(1, sizeof *w);
    if (!w)
        return ZEN_ENOMEM;
    w->nranks = nranks;
    w->endpoints = zen__calloc((size_t)nranks, sizeof *w->endpoints);
    w->mailboxes = zen__calloc((size_t)nranks, sizeof *w->mailboxes);
    w->claimed = zen__calloc((size_t)nranks, sizeof *w->claimed);
    w->closed = zen__calloc((size_t)nranks, sizeof *w->closed);
    if (!w->endpoints || !w->mailboxes || !w->claimed || !w->closed) {
        zen__transport_inproc_world_destroy(w);
        return ZEN_ENOMEM;
    }
    for (int r = 0; r < nranks; r++) {
        zen__transport_base_init(&w->endpoints[r], &inproc_ops, w, r, nranks);
        if (zen__mailbox_create(&w->endpoints[r], nranks, &w->mailboxes[r]) != ZEN_OK) {
            zen__transport_inproc_world_destroy(w);
            return ZEN_ENOMEM;
        }
    }
    *out = w;
    return ZEN_OK;
}

void zen__transport_inproc_world_destroy(zen_inproc_world *w)
{
    if (!w)
        return;
    for (int r = 0; r < w->nranks; r++) {
        if (w->mailboxes && w->mailboxes[r]) {
            zen__mailbox_destroy(w->mailboxes[r]);
            zen__transport_base_release(&w->endpoints[r]);
        }
    }
    zen__free(w->endpoints);
    zen__free(w->mailboxes);
    zen__free(w->claimed);
    zen__free(w->closed);
    zen__free(w);
}

zen_status zen__transport_inproc_create(zen_inproc_world *w, int rank, zen_transport **out)
{
    *out = NULL;
    if (!w || rank < 0 || rank >= w->nranks)
        return ZEN_EINVAL;
    if (atomic_exchange(&w->claimed[rank], 1))
        return ZEN_EBUSY; /* two threads asked for the same rank */
    *out = &w->endpoints[rank];
    return ZEN_OK;
}

static zen_status inproc_open(const zen_transport_open_args *a, zen_transport **out,
                              zen_transport_kind *kind)
{
    (void)kind;
    if (!a->world || a->rank < 0) {
        ZEN_ERROR("init", "inproc transport needs opts.inproc_world and opts.rank");
        return ZEN_EINVAL;
    }
    return zen__transport_inproc_create(a->world, a->rank, out);
}

/* Threads: the sending thread copies straight into the posted buffer (one copy), so the
 * bandwidth is a memcpy's and the latency a wake-up's. */
const zen_transport_desc zen__transport_inproc_desc = {
    .name = "inproc",
    .kind = ZEN_TRANSPORT_INPROC,
    .open = inproc_open,
    .traits = { .reach = ZEN_REACH_THREADS,
                .latency_us = 5,
                .gbps = 40,
                .wire_copies = 0,
                .single_copy = true },
};
