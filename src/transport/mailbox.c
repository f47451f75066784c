#include "transport/mailbox.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/wait_report.h"
#include "transport/liveness.h"

enum req_state {
    REQ_POSTED,
    REQ_RECEIVING,
    REQ_DONE
};

typedef struct mb_msg mb_msg;

typedef struct mb_req {
    zen_treq base;
    struct mb_req *next; /* posted list */
    int peer;
    uint64_t tag;
    void *buf;
    size_t cap;
    size_t len;
    zen_combine_fn combine; /* NULL: copy the message; else buf = combine(other, message) */
    const void *other;
    void *combine_ctx;
    /* Written under the lock; REQ_DONE is stored last with release order, so the owner may poll
     * it without the lock (a completed request is no carrier's any more, see finish). */
    _Atomic int state; /* enum req_state */
    zen_status status;
    char errmsg[256];
} mb_req;

struct mb_msg {
    mb_msg *next; /* unexpected list */
    int src;
    uint64_t tag;
    size_t len;
    void *data;
    int complete;  /* the carrier has finished writing data */
    mb_req *taker; /* a receive that matched it before it was complete */
};

/* A rank has a few receives out at a time (a message and a collective's around it). */
#define SPARE_REQS 4

struct zen_mailbox {
    zen_transport *owner;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    mb_req *posted_head;
    mb_req *posted_tail;
    mb_msg *unexp_head;
    mb_msg *unexp_tail;
    int nranks;
    zen_status *peer_status; /* ZEN_OK while the peer is usable */
    char (*peer_msg)[256];
    void (*notify)(void *); /* zen__mailbox_set_notify */
    void *notify_arg;
    int (*silent)(void *, int64_t *); /* zen__mailbox_set_silent */
    void *silent_arg;
    _Atomic(mb_req *) spare[SPARE_REQS]; /* freed receives kept for the next (req_new) */
    int64_t report_ns; /* ZEN_WAIT_REPORT_S, read once here: waits are a hot path */
};

/* Wake the condition variable's waiters and the notify hook's. Lock held. */
static void wake_all(zen_mailbox *mb)
{
    pthread_cond_broadcast(&mb->cond);
    if (mb->notify)
        mb->notify(mb->notify_arg);
}

zen_status zen__mailbox_create(zen_transport *owner, int nranks, zen_mailbox **out)
{
    *out = NULL;
    zen_mailbox *mb = zen__calloc(1, sizeof *mb);
    if (!mb)
        return ZEN_ENOMEM;
    mb->owner = owner;
    mb->nranks = nranks;
    mb->report_ns = zen__wait_report_interval_ns();
    mb->peer_status = zen__calloc((size_t)nranks, sizeof *mb->peer_status);
    mb->peer_msg = zen__calloc((size_t)nranks, sizeof *mb->peer_msg);
    if (!mb->peer_status || !mb->peer_msg) {
        zen__free(mb->peer_status);
        zen__free(mb->peer_msg);
        zen__free(mb);
        return ZEN_ENOMEM;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&mb->cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&mb->lock, NULL);
    *out = mb;
    return ZEN_OK;
}

void zen__mailbox_destroy(zen_mailbox *mb)
{
    if (!mb)
        return;
    for (int i = 0; i < SPARE_REQS; i++)
        zen__free(atomic_load(&mb->spare[i]));
    for (mb_msg *m = mb->unexp_head, *next; m; m = next) {
        next = m->next;
        zen__free(m->data);
        zen__free(m);
    }
    pthread_mutex_destroy(&mb->lock);
    pthread_cond_destroy(&mb->cond);
    zen__free(mb->peer_status);
    zen__free(mb->peer_msg);
    zen__free(mb);
}

/* The last write to r by anyone but its owner: the owner may free it once it reads REQ_DONE. */
static void finish(mb_req *r, zen_status status, size_t len, const char *msg)
{
    r->status = status;
    r->len = len;
    if (msg)
        snprintf(r->errmsg, sizeof r->errmsg, "%s", msg);
    atomic_store_explicit(&r->state, REQ_DONE, memory_order_release);
}

static int is_done(mb_req *r)
{
    return atomic_load_explicit(&r->state, memory_order_acquire) == REQ_DONE;
}

static void finish_too_long(zen_mailbox *mb, mb_req *r, int src, size_t len)
{
    char msg[256];
    snprintf(msg, sizeof msg, "message of %zu bytes from rank %d exceeds the %zu bytes expected",
             len, src, r->cap);
    (void)mb;
    finish(r, ZEN_EPROTO, 0, msg);
}

/* Land a whole message in r's buffer: a copy, or the receive's combine function. */
static void store(mb_req *r, const void *data, size_t len)
{
    if (r->combine)
        r->combine(r->buf, r->other, data, len, r->combine_ctx);
    else if (len)
        memcpy(r->buf, data, len);
}

/* Copy a complete unexpected message into r and release it. Lock held. */
static void consume(zen_mailbox *mb, mb_req *r, mb_msg *m)
{
    if (m->len > r->cap) {
        finish_too_long(mb, r, m->src, m->len);
    } else {
        store(r, m->data, m->len);
        finish(r, ZEN_OK, m->len, NULL);
    }
    zen__free(m->data);
    zen__free(m);
}

/*
 * A few freed receive requests are kept and reused by the next posts: a small message then costs
 * no malloc/free pair (~180 instructions, as many as matching and landing an 8-byte message).
 * Exchanged atomically: tcp and inproc may post and free from several threads. Not under
 * AddressSanitizer, where a kept block would hide a use after free.
 */
static mb_req *req_new(zen_mailbox *mb)
{
    mb_req *r = NULL;
    for (int i = 0; i < SPARE_REQS && !r; i++)
        if (atomic_load_explicit(&mb->spare[i], memory_order_relaxed))
            r = atomic_exchange(&mb->spare[i], NULL);
    /* malloc, not calloc: glibc's calloc skips the per-thread cache (one per message here) */
    return r ? r : zen__malloc(sizeof *r);
}

static void req_release(zen_mailbox *mb, mb_req *r)
{
#if !defined(__SANITIZE_ADDRESS__)
    for (int i = 0; i < SPARE_REQS && r; i++)
        if (!atomic_load_explicit(&mb->spare[i], memory_order_relaxed))
            r = atomic_exchange(&mb->spare[i], r);
#else
    (void)mb;
#endif
    zen__free(r);
}

static zen_status post_recv(zen_mailbox *mb, int peer, uint64_t tag, void *buf, size_t cap,
                            const zen_combine *combine, zen_treq **out)
{
    *out = NULL;
    if (peer < 0 || peer >= mb->nranks)
        return ZEN_EINVAL;
    mb_req *r = req_new(mb);
    if (!r)
        return ZEN_ENOMEM;
    *r = (mb_req){ .peer = peer, .tag = tag, .buf = buf, .cap = cap, .state = REQ_POSTED };
    if (combine) {
        r->combine = combine->fn;
        r->other = combine->other;
        r->combine_ctx = combine->ctx;
    }
    pthread_mutex_lock(&mb->lock);
    mb_msg *prev = NULL, *m = mb->unexp_head;
    while (m && !(m->src == peer && m->tag == tag)) {
        prev = m;
        m = m->next;
    }
    if (m) {
        if (prev)
            prev->next = m->next;
        else
            mb->unexp_head = m->next;
        if (mb->unexp_tail == m)
            mb->unexp_tail = prev;
        if (m->complete) {
            consume(mb, r, m);
        } else {
            m->taker = r;
            r->state = REQ_RECEIVING;
        }
    } else if (mb->peer_status[peer] != ZEN_OK) {
        finish(r, mb->peer_status[peer], 0, mb->peer_msg[peer]);
    } else {
        r->state = REQ_POSTED;
        if (mb->posted_tail)
            mb->posted_tail->next = r;
        else
            mb->posted_head = r;
        mb->posted_tail = r;
    }
    pthread_mutex_unlock(&mb->lock);
    *out = &r->base;
    return ZEN_OK;
}

zen_status zen__mailbox_irecv(zen_mailbox *mb, int peer, uint64_t tag, void *buf, size_t cap,
                              zen_treq **out)
{
    return post_recv(mb, peer, tag, buf, cap, NULL, out);
}

zen_status zen__mailbox_irecv_combine(zen_mailbox *mb, int peer, uint64_t tag, void *buf,
                                      size_t cap, const zen_combine *combine, zen_treq **out)
{
    return post_recv(mb, peer, tag, buf, cap, combine, out);
}

static zen_status completed(zen_mailbox *mb, mb_req *r, size_t *len)
{
    if (len)
        *len = r->len;
    if (r->status != ZEN_OK)
        zen__transport_fail(mb->owner, r->status, "%s", r->errmsg);
    return r->status;
}

zen_status zen__mailbox_wait(zen_mailbox *mb, zen_treq *req, int64_t deadline_ns, size_t *len)
{
    if (req->is_send) {
        if (len)
            *len = 0;
        return ZEN_OK;
    }
    mb_req *r = (mb_req *)req;
    int64_t start = zen_now_ns();
    zen_wait_report wr;
    zen__wait_report_start_at(&wr, start, mb->report_ns);
    struct timespec ts = zen_deadline_timespec(zen__wait_report_slice(&wr, deadline_ns));
    pthread_mutex_lock(&mb->lock);
    while (!is_done(r)) {
        if (zen__wait_report_due(&wr)) { /* not under the lock: the carriers need it */
            pthread_mutex_unlock(&mb->lock);
            zen__wait_report_say(&wr, deadline_ns, mb->owner->rank, r->peer);
            pthread_mutex_lock(&mb->lock);
            ts = zen_deadline_timespec(zen__wait_report_slice(&wr, deadline_ns));
        }
        if (zen_now_ns() >= deadline_ns) {
            pthread_mutex_unlock(&mb->lock);
            int64_t quiet = 0;
            int silent = mb->silent ? mb->silent(mb->silent_arg, &quiet) : -1;
            char msg[400];
            return zen__transport_fail(
                mb->owner, ZEN_ETIMEDOUT, "%s",
                zen__liveness_blame(msg, sizeof msg, r->peer, zen_now_ns() - start,
                                    (unsigned long long)r->tag, silent, quiet));
        }
        pthread_cond_timedwait(&mb->cond, &mb->lock, &ts);
    }
    pthread_mutex_unlock(&mb->lock);
    return completed(mb, r, len);
}

zen_status zen__mailbox_test(zen_mailbox *mb, zen_treq *req, int *done, size_t *len)
{
    if (req->is_send) {
        *done = 1;
        if (len)
            *len = 0;
        return ZEN_OK;
    }
    mb_req *r = (mb_req *)req;
    *done = is_done(r);
    return *done ? completed(mb, r, len) : ZEN_OK;
}

static void unlink_posted(zen_mailbox *mb, mb_req *r)
{
    mb_req *prev = NULL;
    for (mb_req *p = mb->posted_head; p; prev = p, p = p->next) {
        if (p != r)
            continue;
        if (prev)
            prev->next = p->next;
        else
            mb->posted_head = p->next;
        if (mb->posted_tail == p)
            mb->posted_tail = prev;
        p->next = NULL;
        return;
    }
}

void zen__mailbox_req_free(zen_mailbox *mb, zen_treq *req)
{
    if (!req)
        return;
    if (req->is_send)
        return; /* the shared completed send */
    mb_req *r = (mb_req *)req;
    if (is_done(r)) {
        req_release(mb, r); /* unlinked, and no carrier holds it any more */
        return;
    }
    pthread_mutex_lock(&mb->lock);
    if (r->state == REQ_POSTED)
        unlink_posted(mb, r);
    /* A carrier is writing into r->buf: wait for it, it always finishes or fails the delivery. */
    while (r->state == REQ_RECEIVING)
        pthread_cond_wait(&mb->cond, &mb->lock);
    pthread_mutex_unlock(&mb->lock);
    req_release(mb, r);
}

zen_status zen__mailbox_send_done(zen_treq **out)
{
    /* Every completed send looks the same and nothing writes to it: one shared, never freed
     * request instead of an allocation per message. */
    static zen_treq done_send = { 1 };
    *out = &done_send;
    return ZEN_OK;
}

static void fail_peer_locked(zen_mailbox *mb, int peer, zen_status status, const char *msg);

/* have_data: the carrier holds the whole message (inproc), so a combining receive is fed
 * directly by zen__mailbox_deliver instead of through a temporary buffer; PIECES: the carrier
 * feeds it piece by piece through zen__mailbox_deliver_piece. */
#define PIECES 2

/* The oldest posted receive from src with tag, unlinked; NULL when none. Lock held. */
static mb_req *take_posted(zen_mailbox *mb, int src, uint64_t tag)
{
    mb_req *r = mb->posted_head;
    while (r && !(r->peer == src && r->tag == tag))
        r = r->next;
    if (r)
        unlink_posted(mb, r);
    return r;
}

static void begin(zen_mailbox *mb, int src, uint64_t tag, size_t len, zen_delivery *d,
                  int have_data)
{
    d->dest = NULL;
    d->entry = NULL;
    d->is_posted = 0;
    d->tmp = NULL;
    d->pieces = 0;
    pthread_mutex_lock(&mb->lock);
    if (mb->peer_status[src] != ZEN_OK) {
        /* An earlier message from src was lost (or src failed): a later one must not complete a
         * receive that was meant for the lost one, so everything from src is refused. */
        pthread_mutex_unlock(&mb->lock);
        return;
    }
    mb_req *r = take_posted(mb, src, tag);
    if (r) {
        if (len > r->cap) {
            finish_too_long(mb, r, src, len);
            wake_all(mb);
        } else {
            r->state = REQ_RECEIVING;
            r->len = len;
            d->dest = r->buf;
            d->entry = r;
            d->is_posted = 1;
            if (r->combine && !have_data) {
                /* the bytes arrive piecewise: gather them, combine at deliver_end */
                d->tmp = zen__malloc(len);
                d->dest = d->tmp;
                if (!d->tmp) {
                    finish(r, ZEN_ENOMEM, 0, "out of memory staging a combined receive");
                    d->entry = NULL;
                    wake_all(mb);
                }
            } else if (r->combine) {
                d->dest = NULL; /* zen__mailbox_deliver combines straight from the sender */
                d->pieces = have_data == PIECES;
            }
        }
        pthread_mutex_unlock(&mb->lock);
        return;
    }
    mb_msg *m = zen__calloc(1, sizeof *m);
    void *data = m ? zen__malloc(len) : NULL;
    if (!m || !data) {
        zen__free(m);
        char msg[128];
        snprintf(msg, sizeof msg, "out of memory buffering a %zu-byte message from rank %d", len,
                 src);
        fail_peer_locked(mb, src, ZEN_ENOMEM, msg); /* and every receive already posted from src */
        wake_all(mb);
        pthread_mutex_unlock(&mb->lock);
        return;
    }
    m->src = src;
    m->tag = tag;
    m->len = len;
    m->data = data;
    if (mb->unexp_tail)
        mb->unexp_tail->next = m;
    else
        mb->unexp_head = m;
    mb->unexp_tail = m;
    d->dest = data;
    d->entry = m;
    pthread_mutex_unlock(&mb->lock);
}

void zen__mailbox_deliver_begin(zen_mailbox *mb, int src, uint64_t tag, size_t len, zen_delivery *d)
{
    begin(mb, src, tag, len, d, 0);
}

void zen__mailbox_deliver_begin_pieces(zen_mailbox *mb, int src, uint64_t tag, size_t len,
                                       zen_delivery *d)
{
    begin(mb, src, tag, len, d, PIECES);
}

void zen__mailbox_deliver_piece(zen_delivery *d, size_t off, const void *data, size_t n)
{
    if (d->dest) {
        if (n)
            memcpy((char *)d->dest + off, data, n);
    } else if (d->pieces && n) {
        mb_req *r = d->entry;
        r->combine((char *)r->buf + off, (const char *)r->other + off, data, n, r->combine_ctx);
    }
}

int zen__mailbox_req_done(zen_mailbox *mb, zen_treq *req)
{
    (void)mb;
    return req->is_send || is_done((mb_req *)req);
}

void zen__mailbox_req_info(zen_treq *req, int *peer, uint64_t *tag)
{
    const mb_req *r = (const mb_req *)req;
    *peer = req->is_send ? -1 : r->peer;
    *tag = req->is_send ? 0 : r->tag;
}

int zen__mailbox_req_receiving(zen_mailbox *mb, zen_treq *req)
{
    (void)mb;
    return req && !req->is_send &&
           atomic_load_explicit(&((mb_req *)req)->state, memory_order_acquire) == REQ_RECEIVING;
}

void zen__mailbox_set_silent(zen_mailbox *mb, int (*fn)(void *, int64_t *), void *arg)
{
    mb->silent = fn;
    mb->silent_arg = arg;
}

void zen__mailbox_set_notify(zen_mailbox *mb, void (*fn)(void *), void *arg)
{
    mb->notify = fn;
    mb->notify_arg = arg;
}

void zen__mailbox_deliver_end(zen_mailbox *mb, zen_delivery *d)
{
    if (!d->entry)
        return;
    if (d->tmp) {
        /* r is RECEIVING: no one else touches it until it is finished below */
        mb_req *r = d->entry;
        store(r, d->tmp, r->len);
        zen__free(d->tmp);
        d->tmp = NULL;
    }
    pthread_mutex_lock(&mb->lock);
    if (d->is_posted) {
        mb_req *r = d->entry;
        finish(r, ZEN_OK, r->len, NULL);
    } else {
        mb_msg *m = d->entry;
        m->complete = 1;
        if (m->taker)
            consume(mb, m->taker, m);
    }
    wake_all(mb);
    pthread_mutex_unlock(&mb->lock);
}

void zen__mailbox_deliver_fail(zen_mailbox *mb, zen_delivery *d, zen_status status, const char *msg)
{
    if (!d->entry)
        return;
    zen__free(d->tmp);
    d->tmp = NULL;
    pthread_mutex_lock(&mb->lock);
    if (d->is_posted) {
        finish(d->entry, status, 0, msg);
    } else {
        mb_msg *m = d->entry;
        if (m->taker) {
            finish(m->taker, status, 0, msg);
        } else {
            mb_msg *prev = NULL;
            for (mb_msg *p = mb->unexp_head; p; prev = p, p = p->next) {
                if (p != m)
                    continue;
                if (prev)
                    prev->next = p->next;
                else
                    mb->unexp_head = p->next;
                if (mb->unexp_tail == p)
                    mb->unexp_tail = prev;
                break;
            }
        }
        zen__free(m->data);
        zen__free(m);
    }
    wake_all(mb);
    pthread_mutex_unlock(&mb->lock);
}

/* Small messages: copying under the lock costs less than taking it a second time. */
#define DELIVER_IN_LOCK_BYTES 4096

/* A small message for a posted receive, matched and landed under one lock. Returns 0 when there
 * is no such receive (nothing done). */
static int deliver_posted_small(zen_mailbox *mb, int src, uint64_t tag, const void *data,
                                size_t len)
{
    pthread_mutex_lock(&mb->lock);
    mb_req *r = mb->peer_status[src] == ZEN_OK ? take_posted(mb, src, tag) : NULL;
    if (r) {
        if (len > r->cap) {
            finish_too_long(mb, r, src, len);
        } else {
            store(r, data, len);
            finish(r, ZEN_OK, len, NULL);
        }
        wake_all(mb);
    }
    pthread_mutex_unlock(&mb->lock);
    return r != NULL;
}

void zen__mailbox_deliver(zen_mailbox *mb, int src, uint64_t tag, const void *data, size_t len)
{
    if (len <= DELIVER_IN_LOCK_BYTES && deliver_posted_small(mb, src, tag, data, len))
        return;
    zen_delivery d;
    begin(mb, src, tag, len, &d, 1);
    if (d.dest && len)
        memcpy(d.dest, data, len);
    else if (d.entry && d.is_posted)
        store(d.entry, data, len); /* a combining receive: reduce straight from the sender */
    zen__mailbox_deliver_end(mb, &d);
}

/* Lock held. */
static void fail_peer_locked(zen_mailbox *mb, int peer, zen_status status, const char *msg)
{
    if (mb->peer_status[peer] == ZEN_OK) {
        mb->peer_status[peer] = status;
        snprintf(mb->peer_msg[peer], sizeof mb->peer_msg[peer], "%s", msg);
    }
    mb_req *r = mb->posted_head;
    while (r) {
        mb_req *next = r->next;
        if (r->peer == peer) {
            unlink_posted(mb, r);
            finish(r, mb->peer_status[peer], 0, mb->peer_msg[peer]);
        }
        r = next;
    }
}

zen_status zen__mailbox_peer_failure(zen_mailbox *mb, int peer, char *msg, size_t cap)
{
    pthread_mutex_lock(&mb->lock);
    zen_status st = mb->peer_status[peer];
    if (st != ZEN_OK && cap)
        snprintf(msg, cap, "%s", mb->peer_msg[peer]);
    pthread_mutex_unlock(&mb->lock);
    return st;
}

void zen__mailbox_fail_peer(zen_mailbox *mb, int peer, zen_status status, const char *msg)
{
    if (peer < 0 || peer >= mb->nranks)
        return;
    pthread_mutex_lock(&mb->lock);
    fail_peer_locked(mb, peer, status, msg);
    wake_all(mb);
    pthread_mutex_unlock(&mb->lock);
}

void zen__mailbox_fail_all(zen_mailbox *mb, zen_status status, const char *msg)
{
    pthread_mutex_lock(&mb->lock);
    for (int p = 0; p < mb->nranks; p++)
        fail_peer_locked(mb, p, status, msg);
    wake_all(mb);
    pthread_mutex_unlock(&mb->lock);
}
