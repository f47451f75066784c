/* The fault-injecting transport wrapper (see faulty.h). */
#include "transport/faulty.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/tunables.h"
#include "transport/registry.h"
#include "transport/tcp_internal.h"

typedef struct faulty {
    zen_transport base; /* first: a zen_transport * is a faulty * */
    zen_transport *inner;
    zen_fault_config cfg;
    atomic_long sends; /* sends counted so far */
    atomic_int killed;
} faulty;

/* Our request wraps the inner one; inner NULL is a send that was dropped (already complete). */
typedef struct freq {
    zen_treq base;
    zen_treq *inner;
} freq;

/* Errors are recorded by the inner transport: copy its detail into ours for the caller. */
static zen_status relay(faulty *f, zen_status st)
{
    if (st == ZEN_OK || st == ZEN_EINPROGRESS)
        return st;
    char detail[sizeof f->base.err];
    zen__transport_last_error(f->inner, detail, sizeof detail);
    pthread_mutex_lock(&f->base.err_lock);
    snprintf(f->base.err, sizeof f->base.err, "%s", detail);
    pthread_mutex_unlock(&f->base.err_lock);
    return st;
}

static zen_status dead(faulty *f, const char *what, int peer)
{
    return zen__transport_fail(&f->base, ZEN_EABORTED,
                               "%s rank %d refused: this rank was killed by fault injection", what,
                               peer);
}

static void kill_now(faulty *f)
{
    if (atomic_exchange(&f->killed, 1))
        return;
    ZEN_WARN("transport", "fault injection: rank %d dies now", f->base.rank);
    if (zen__transport_is_tcp(f->inner))
        zen__transport_tcp_kill(f->inner);
    else
        f->inner->ops->abort(f->inner, ZEN_EABORTED, "killed by fault injection");
}

static zen_status wrap_req(zen_treq *inner, int is_send, zen_treq **out)
{
    freq *r = zen__calloc(1, sizeof *r);
    if (!r)
        return ZEN_ENOMEM;
    r->base.is_send = is_send;
    r->inner = inner;
    *out = &r->base;
    return ZEN_OK;
}

static zen_status forward_send(faulty *f, int peer, uint64_t tag, const void *buf, size_t len,
                               zen_treq **req)
{
    zen_treq *in = NULL;
    zen_status st = relay(f, f->inner->ops->isend(f->inner, peer, tag, buf, len, &in));
    if (st != ZEN_OK)
        return st;
    if ((st = wrap_req(in, 1, req)) != ZEN_OK)
        f->inner->ops->req_free(f->inner, in);
    return st;
}

static zen_status faulty_isend(zen_transport *t, int peer, uint64_t tag, const void *buf,
                               size_t len, zen_treq **req)
{
    faulty *f = (faulty *)t;
    *req = NULL;
    if (atomic_load(&f->killed))
        return dead(f, "send to", peer);
    if (f->cfg.peer >= 0 && peer != f->cfg.peer)
        return forward_send(f, peer, tag, buf, len, req);
    long n = atomic_fetch_add(&f->sends, 1);
    int hit = n >= f->cfg.after && (f->cfg.count == 0 || n < f->cfg.after + f->cfg.count);
    if (!hit)
        return forward_send(f, peer, tag, buf, len, req);
    ZEN_INFO("transport", "fault injection: send %ld to rank %d (%zu bytes)", n, peer, len);
    switch (f->cfg.action) {
    case ZEN_FAULT_DELAY:
        zen__sleep_ns((int64_t)f->cfg.ms * 1000000);
        return forward_send(f, peer, tag, buf, len, req);
    case ZEN_FAULT_DROP:
        return wrap_req(NULL, 1, req);
    case ZEN_FAULT_TRUNCATE:
        return forward_send(f, peer, tag, buf, len / 2, req);
    case ZEN_FAULT_CORRUPT: {
        unsigned char *copy = zen__malloc(len ? len : 1);
        if (!copy)
            return ZEN_ENOMEM;
        if (len)
            memcpy(copy, buf, len);
        for (size_t i = 0; i < len; i += 7)
            copy[i] ^= 0x5a;
        /* inproc and tcp finish a send before isend returns, so the copy may go right away. */
        zen_status st = forward_send(f, peer, tag, copy, len, req);
        zen__free(copy);
        return st;
    }
    case ZEN_FAULT_GARBAGE: {
        if (!f->inner->ops->send_raw)
            return zen__transport_fail(t, ZEN_EUNSUPPORTED, "garbage fault: %s has no send_raw",
                                       f->inner->ops->name);
        static const char junk[32] = "this is not a zen frame header!";
        zen_status st = relay(f, f->inner->ops->send_raw(f->inner, peer, junk, sizeof junk));
        return st == ZEN_OK ? wrap_req(NULL, 1, req) : st;
    }
    case ZEN_FAULT_KILL:
        kill_now(f);
        return dead(f, "send to", peer);
    }
    return forward_send(f, peer, tag, buf, len, req);
}

static zen_status faulty_irecv(zen_transport *t, int peer, uint64_t tag, void *buf, size_t cap,
                               zen_treq **req)
{
    faulty *f = (faulty *)t;
    *req = NULL;
    if (atomic_load(&f->killed))
        return dead(f, "receive from", peer);
    zen_treq *in = NULL;
    zen_status st = relay(f, f->inner->ops->irecv(f->inner, peer, tag, buf, cap, &in));
    if (st != ZEN_OK)
        return st;
    if ((st = wrap_req(in, 0, req)) != ZEN_OK)
        f->inner->ops->req_free(f->inner, in);
    return st;
}

static zen_status faulty_wait(zen_transport *t, zen_treq *req, int64_t deadline_ns, size_t *len)
{
    faulty *f = (faulty *)t;
    freq *r = (freq *)req;
    if (!r->inner) {
        if (len)
            *len = 0;
        return ZEN_OK;
    }
    return relay(f, f->inner->ops->wait(f->inner, r->inner, deadline_ns, len));
}

static zen_status faulty_test(zen_transport *t, zen_treq *req, int *done, size_t *len)
{
    faulty *f = (faulty *)t;
    freq *r = (freq *)req;
    if (!r->inner) {
        *done = 1;
        if (len)
            *len = 0;
        return ZEN_OK;
    }
    return relay(f, f->inner->ops->test(f->inner, r->inner, done, len));
}

static void faulty_req_free(zen_transport *t, zen_treq *req)
{
    faulty *f = (faulty *)t;
    if (!req)
        return;
    freq *r = (freq *)req;
    if (r->inner)
        f->inner->ops->req_free(f->inner, r->inner);
    zen__free(r);
}

static void faulty_abort(zen_transport *t, zen_status status, const char *reason)
{
    faulty *f = (faulty *)t;
    if (atomic_load(&f->killed))
        return; /* a dead process tells nobody anything */
    f->inner->ops->abort(f->inner, status, reason);
}

static void faulty_destroy(zen_transport *t)
{
    faulty *f = (faulty *)t;
    f->inner->ops->destroy(f->inner);
    zen__transport_base_release(&f->base);
    zen__free(f);
}

static zen_status faulty_send_raw(zen_transport *t, int peer, const void *bytes, size_t len)
{
    faulty *f = (faulty *)t;
    if (atomic_load(&f->killed))
        return dead(f, "send to", peer);
    if (!f->inner->ops->send_raw)
        return zen__transport_fail(t, ZEN_EUNSUPPORTED, "%s has no send_raw", f->inner->ops->name);
    return relay(f, f->inner->ops->send_raw(f->inner, peer, bytes, len));
}

/*
 * Collective slots (transport.h): forwarded to the inner transport, so that the faulty rank takes
 * the same path as its healthy peers (without them it would send messages to ranks waiting on
 * its slot). A post counts as a send for the fault's position; a killed rank posts nothing, a
 * dropped post is never published (its peers time out naming this rank), a delayed one waits.
 * The byte-level faults (truncate, corrupt, garbage) have no meaning for a slot: posted as is.
 */
static size_t faulty_slot_cap(zen_transport *t)
{
    faulty *f = (faulty *)t;
    return f->inner->ops->slot_cap ? f->inner->ops->slot_cap(f->inner) : 0;
}

static void *faulty_slot_data(zen_transport *t, int r, uint64_t seq)
{
    faulty *f = (faulty *)t;
    return f->inner->ops->slot_data(f->inner, r, seq);
}

static void faulty_slot_post(zen_transport *t, uint64_t seq, const zen_slot_desc *d)
{
    faulty *f = (faulty *)t;
    if (atomic_load(&f->killed))
        return;
    long n = f->cfg.peer >= 0 ? -1 : atomic_fetch_add(&f->sends, 1);
    int hit = n >= f->cfg.after && (f->cfg.count == 0 || n < f->cfg.after + f->cfg.count);
    if (hit) {
        ZEN_INFO("transport", "fault injection: slot post %ld (call %llu)", n,
                 (unsigned long long)seq);
        if (f->cfg.action == ZEN_FAULT_KILL) {
            kill_now(f);
            return;
        }
        if (f->cfg.action == ZEN_FAULT_DROP)
            return;
        if (f->cfg.action == ZEN_FAULT_DELAY)
            zen__sleep_ns((int64_t)f->cfg.ms * 1000000);
    }
    f->inner->ops->slot_post(f->inner, seq, d);
}

static zen_status faulty_slot_wait(zen_transport *t, int r, uint64_t seq, int64_t deadline_ns,
                                   zen_slot_desc *d)
{
    faulty *f = (faulty *)t;
    if (atomic_load(&f->killed))
        return dead(f, "slot of", r);
    return relay(f, f->inner->ops->slot_wait(f->inner, r, seq, deadline_ns, d));
}

static void faulty_slot_wake(zen_transport *t)
{
    faulty *f = (faulty *)t;
    if (!atomic_load(&f->killed))
        f->inner->ops->slot_wake(f->inner);
}

static const zen_transport_ops faulty_ops = {
    .name = "faulty",
    .isend = faulty_isend,
    .irecv = faulty_irecv,
    .wait = faulty_wait,
    .test = faulty_test,
    .req_free = faulty_req_free,
    .abort = faulty_abort,
    .destroy = faulty_destroy,
    .send_raw = faulty_send_raw,
    .slot_cap = faulty_slot_cap,
    .slot_data = faulty_slot_data,
    .slot_post = faulty_slot_post,
    .slot_wait = faulty_slot_wait,
    .slot_wake = faulty_slot_wake,
};

zen_status zen__transport_faulty_wrap(zen_transport *inner, const zen_fault_config *cfg,
                                      zen_transport **out)
{
    *out = NULL;
    if (!inner || !cfg)
        return ZEN_EINVAL;
    faulty *f = zen__calloc(1, sizeof *f);
    if (!f)
        return ZEN_ENOMEM;
    zen__transport_base_init(&f->base, &faulty_ops, f, inner->rank, inner->size);
    f->base.local_rank = inner->local_rank;
    f->base.local_size = inner->local_size;
    f->inner = inner;
    f->cfg = *cfg;
    *out = &f->base;
    return ZEN_OK;
}

zen_status zen__fault_parse(const char *spec, zen_fault_config *cfg)
{
    char why[300];
    if (zen__fault_spec_parse(spec, cfg, why, sizeof why) != 0) {
        ZEN_ERROR("init", "ZEN_FAULT '%s': %s", spec ? spec : "", why);
        return ZEN_EINVAL;
    }
    return ZEN_OK;
}

zen_status zen__fault_maybe_wrap(zen_transport **t)
{
    /* strict: a test that asked for a fault must not run healthy because of a typo */
    const char *spec = NULL;
    char why[300];
    int set = zen__param_strict("FAULT", &spec, why, sizeof why);
    if (set == 0)
        return ZEN_OK;
    zen_fault_config cfg;
    zen_status st = set < 0 ? ZEN_EINVAL : zen__fault_parse(spec, &cfg);
    if (set < 0)
        ZEN_ERROR("init", "%s", why);
    if (st == ZEN_OK && cfg.rank != (*t)->rank)
        return ZEN_OK;
    zen_transport *w = NULL;
    if (st == ZEN_OK)
        st = zen__transport_faulty_wrap(*t, &cfg, &w);
    if (st != ZEN_OK) {
        (*t)->ops->destroy(*t);
        *t = NULL;
        return st;
    }
    ZEN_INFO("init", "fault injection on rank %d: %s", cfg.rank, spec);
    *t = w;
    return ZEN_OK;
}

/* A wrapper, not an endpoint: tests set ZEN_FAULT and every transport gets it. */
const zen_transport_desc zen__transport_faulty_desc = {
    .name = "faulty",
    .kind = ZEN_TRANSPORT_AUTO,
    .wrap = zen__fault_maybe_wrap,
};
