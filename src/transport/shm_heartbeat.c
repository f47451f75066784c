/*
 * shm heartbeats: hung-peer attribution among the processes of one host, with tcp's semantics
 * and knob (ZEN_HEARTBEAT_S, default 10 s, inf = off; tcp.c does the same over the sockets).
 *
 * A stopped process (SIGSTOP, a debugger) keeps its liveness socket open, so end of stream
 * never comes and its peers would wait the full ZEN_TIMEOUT_S, each blaming whom it waits for.
 * Instead every process's monitor thread bumps a 64-bit word in the head of its own segment
 * every ZEN_HEARTBEAT_S/5 (at most 1 s) and, on the same wake-up, reads the word of every local
 * peer. A peer whose word has not moved for ZEN_HEARTBEAT_S is named; this process aborts with
 * that reason, and the abort cascade (the liveness sockets, tcp's ABORT frames) carries the same
 * name to every survivor. Costs: one wake-up per period and one cache line read per peer; no
 * core is busy while idle.
 *
 * No false alarms under load. Two ways a live peer could look silent:
 *  - its beating thread is not scheduled: it must then miss five beats in a row, i.e. get no
 *    CPU for the whole ZEN_HEARTBEAT_S (10 s by default). The Linux scheduler hands every
 *    runnable thread a slice within a few tens of ms even with many more threads than cores,
 *    so that takes a machine that is not running it at all (which is what a stop is).
 *  - this observer is not scheduled: it would wake up late and see a word that "did not move
 *    for 10 s" because it did not look. So silence is counted in the observer's own time, and
 *    each gap between two of its looks counts for at most two periods: an observer that slept
 *    through 10 s accuses nobody before it has watched the word stand still for a while itself.
 *  - it has not started beating yet (its monitor starts right after the segment exchange, but
 *    a loaded host may be slow to run a new thread): until its word first moves, it gets twice
 *    ZEN_HEARTBEAT_S.
 * A stopped peer is thus named after ZEN_HEARTBEAT_S plus at most one period.
 */
#include <stdio.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/tunables.h"
#include "transport/shm_internal.h"

#define MAX_BEAT_NS ((int64_t)1000000000)

void zen__shm_heartbeat_setup(shm_state *s)
{
    s->silence_ns = zen_ns_from_s(zen__param_timeout("HEARTBEAT_S"));
    s->beat_ns = s->silence_ns / 5 < MAX_BEAT_NS ? s->silence_ns / 5 : MAX_BEAT_NS;
    if (s->beat_ns < 1000000)
        s->beat_ns = 1000000;
    s->last_tick_ns = zen_now_ns();
    if (s->head)
        atomic_fetch_add(&s->head->heartbeat, 1);
    for (int p = 0; p < s->base.size; p++) {
        shm_peer *pe = &s->peers[p];
        if (pe->lidx >= 0 && p != s->base.rank && pe->seg) {
            pe->hb_seen = atomic_load(&((zen_shm_seg_head *)pe->seg)->heartbeat);
            pe->hb_quiet_ns = 0;
            pe->hb_moved = 0;
        }
    }
}

int zen__shm_heartbeat_poll_ms(const shm_state *s)
{
    if (s->silence_ns == INT64_MAX || s->nlocal < 2)
        return -1; /* off: the monitor sleeps until a socket speaks */
    int64_t left = s->last_tick_ns + s->beat_ns - zen_now_ns();
    return left > 0 ? (int)((left + 999999) / 1000000) : 0;
}

/* Name pe and abort: every receive fails with the reason, and the peers learn it. */
static void name_silent_peer(shm_state *s, shm_peer *pe)
{
    char msg[300];
    snprintf(msg, sizeof msg,
             "rank %d sent nothing, not even a heartbeat, for %.1f s: it is stopped, hung or "
             "overloaded (shared-memory heartbeat, ZEN_HEARTBEAT_S=%.0f)",
             pe->rank, (double)pe->hb_quiet_ns / 1e9, (double)s->silence_ns / 1e9);
    ZEN_ERROR("transport", "%s", msg);
    zen__shm_peer_down(s, pe, ZEN_ETIMEDOUT, 0, msg);
    s->base.ops->abort(&s->base, ZEN_ETIMEDOUT, msg);
}

void zen__shm_heartbeat_tick(shm_state *s)
{
    if (s->silence_ns == INT64_MAX || s->nlocal < 2)
        return;
    int64_t now = zen_now_ns();
    if (now - s->last_tick_ns < s->beat_ns)
        return; /* a socket event woke us early: not a look that counts */
    int64_t watched = now - s->last_tick_ns;
    if (watched > 2 * s->beat_ns)
        watched = 2 * s->beat_ns; /* this observer was descheduled: see the top of the file */
    s->last_tick_ns = now;
    atomic_fetch_add(&s->head->heartbeat, 1); /* also after an abort: peers learn that by socket */
    if (atomic_load(&s->aborted))
        return;
    for (int p = 0; p < s->base.size; p++) {
        shm_peer *pe = &s->peers[p];
        if (pe->lidx < 0 || p == s->base.rank || !pe->seg || atomic_load(&pe->down))
            continue; /* gone peers are the socket's business */
        uint64_t beat = atomic_load(&((zen_shm_seg_head *)pe->seg)->heartbeat);
        if (beat != pe->hb_seen) {
            pe->hb_seen = beat;
            pe->hb_quiet_ns = 0;
            pe->hb_moved = 1;
            continue;
        }
        pe->hb_quiet_ns += watched;
        if (pe->hb_quiet_ns >= (pe->hb_moved ? s->silence_ns : 2 * s->silence_ns)) {
            name_silent_peer(s, pe);
            return;
        }
    }
}
