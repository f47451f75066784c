/*
 * Collective slots of the shm transport (the slot_* entries of transport.h; the layout is in
 * shm_seg.h, the protocol that makes reuse safe in src/coll/slots.c).
 *
 * A slot lives in its owner's segment: the owner writes payload and descriptor into its own
 * memory, then publishes the slot by storing the sequence number with release order; a reader
 * polls that word in the owner's segment with acquire order and then reads the payload in
 * place. A small message thus costs the reader one or two cache-line transfers and nothing
 * else: no record, no mailbox match, no request, no copy out of a ring.
 *
 * Waiting: the spin-then-sleep of zen__shm_wait_until, which also keeps draining the rings (so
 * messages of other communicators progress) and turns dead peers into failures; a poster rings
 * the doorbell of every local peer that sleeps (shm_seg.h: a bell costs a fence and a load when
 * nobody sleeps) once it has read the peers' slots, or before it sleeps itself
 * (zen__shm_slot_wake). A wait ends early when any local peer is down, not only the one waited for: in a
 * collective every rank waits for every other, and a peer's abort carries the reason (a
 * disagreement found by that peer) that every rank must report.
 */
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/wait_report.h"
#include "transport/shm_internal.h"

#define FAST_POLLS 256
/* Payload lines the fast poll keeps fetching besides the header's (the first 224 bytes). */
#define POLL_LINES 4

static zen_shm_slot *slot_of(shm_state *s, int r, uint64_t seq)
{
    char *seg = r == s->base.rank ? s->seg : s->peers[r].seg;
    return (zen_shm_slot *)(seg + zen_shm_slot_off(s->nlocal, s->ring_bytes, (int)(seq & 1)));
}

size_t zen__shm_slot_cap(zen_transport *t)
{
    shm_state *s = (shm_state *)t;
    return s->tcp == NULL && s->nlocal >= 2 && s->nlocal == t->size ? ZEN_SHM_SLOT_BYTES : 0;
}

void *zen__shm_slot_data(zen_transport *t, int r, uint64_t seq)
{
    return (char *)slot_of((shm_state *)t, r, seq) + ZEN_SHM_SLOT_HDR;
}

void zen__shm_slot_post(zen_transport *t, uint64_t seq, const zen_slot_desc *d)
{
    shm_state *s = (shm_state *)t;
    zen_shm_slot *slot = slot_of(s, t->rank, seq);
    memcpy(slot->desc, d->w, sizeof slot->desc);
    atomic_store_explicit(&slot->seq, seq, memory_order_release);
    s->slot_bells_due = 1; /* rung by zen__shm_slot_wake or before this rank sleeps */
}

/* A doorbell's ring starts with a full fence, which waits until the slot's store is visible,
 * i.e. for the cache line's ownership to come over (a cross-core round trip, 0.2-0.4 us on the
 * 2-core VM of docs/dense-vs-mpi.md). Rung right after the post it sat in front of this rank's
 * reads of the peers' slots; rung after them, the two transfers overlap. A peer that sleeps
 * (it spun for ZEN_SHM_SPIN_US first) wakes that much later, by at most one small reduction. */
void zen__shm_slot_wake(zen_transport *t)
{
    shm_state *s = (shm_state *)t;
    if (!s->slot_bells_due)
        return;
    s->slot_bells_due = 0;
    for (int p = 0; p < t->size; p++)
        if (p != t->rank)
            zen__shm_ring_bell(s->peers[p].bell);
}

/* The peer to blame for a failed wait on r: r itself when down, else a peer that aborted (its
 * reason explains everything), else any peer that is down; NULL when none is. */
static shm_peer *down_peer(shm_state *s, int r)
{
    shm_peer *any = NULL;
    if (atomic_load(&s->peers[r].down))
        return &s->peers[r];
    for (int p = 0; p < s->base.size; p++) {
        shm_peer *pe = &s->peers[p];
        if (p == s->base.rank || !atomic_load_explicit(&pe->down, memory_order_relaxed))
            continue;
        if (atomic_load(&pe->down) && pe->down_abort)
            return pe;
        any = any ? any : pe;
    }
    return any;
}

typedef struct slot_wait {
    shm_state *s;
    const zen_shm_slot *slot;
    uint64_t seq;
    int r;
} slot_wait;

static int slot_ready(const slot_wait *w)
{
    return atomic_load_explicit(&w->slot->seq, memory_order_acquire) == w->seq;
}

static int slot_done(void *arg)
{
    slot_wait *w = arg;
    return slot_ready(w) || atomic_load(&w->s->aborted) || down_peer(w->s, w->r) != NULL;
}

static zen_status slot_failed(shm_state *s, int r, uint64_t seq, int64_t start)
{
    if (atomic_load(&s->aborted))
        return zen__transport_fail(&s->base, ZEN_EABORTED, "%s",
                                   atomic_load(&s->abort_why_set) ? s->abort_why
                                                                  : "this rank aborted");
    shm_peer *pe = down_peer(s, r);
    if (pe) {
        char why[sizeof pe->why];
        pthread_mutex_lock(&s->drain_lock);
        snprintf(why, sizeof why, "%s", pe->why);
        zen_status st = pe->down_status != ZEN_OK ? pe->down_status : ZEN_EPEER;
        pthread_mutex_unlock(&s->drain_lock);
        return zen__transport_fail(&s->base, st, "%s", why);
    }
    int64_t quiet = 0;
    int silent = zen__shm_silent_peer(s, &quiet);
    char msg[400];
    return zen__transport_fail(
        &s->base, ZEN_ETIMEDOUT, "%s (collective slot %llu)",
        zen__liveness_blame(msg, sizeof msg, r, zen_now_ns() - start, 0, silent, quiet),
        (unsigned long long)seq);
}

zen_status zen__shm_slot_wait(zen_transport *t, int r, uint64_t seq, int64_t deadline_ns,
                              zen_slot_desc *d)
{
    shm_state *s = (shm_state *)t;
    slot_wait w = { s, slot_of(s, r, seq), seq, r };
    /* A peer that is already on its way usually publishes within a few hundred ns: poll the
     * word alone first, without the clock reads and ring checks of zen__shm_wait_until. Each
     * poll also prefetches the payload's first lines: the owner writes them before the header's
     * line, so when the header turns up they have come over with it instead of one cross-core
     * transfer later (a 64-224 byte payload then costs what an 8-byte one does). Lines the owner
     * did not write stay cached here and cost nothing. */
    const char *lines = (const char *)w.slot;
    for (int i = 0; i < FAST_POLLS && !slot_ready(&w); i++)
        for (int k = 1; k <= POLL_LINES; k++)
            __builtin_prefetch(lines + k * ZEN_SHM_LINE);
    if (!slot_ready(&w)) {
        zen__shm_slot_wake(t); /* before this rank may sleep: its peers may sleep on its post */
        int64_t start = zen_now_ns();
        zen_wait_report wr;
        zen__wait_report_start_at(&wr, start, s->report_ns);
        /* in slices that end at each progress report (ZEN_WAIT_REPORT_S), as a receive does */
        while (!zen__shm_wait_until(s, slot_done, &w, zen__wait_report_slice(&wr, deadline_ns)) &&
               zen_now_ns() < deadline_ns)
            if (zen__wait_report_due(&wr))
                zen__wait_report_say(&wr, deadline_ns, t->rank, r);
        if (!slot_ready(&w))
            return slot_failed(s, r, seq, start);
    }
    memcpy(d->w, w.slot->desc, sizeof d->w);
    return ZEN_OK;
}
