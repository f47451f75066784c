/*
 * shm heartbeats: hung-peer attribution among the processes of one host, with tcp's semantics
 * and knob (ZEN_HEARTBEAT_S, default 10 s, inf = this rank does not watch; tcp.c does the same
 * over the sockets). The settings are agreed at setup (liveness.h): each process's segment head
 * carries its own, and the window is the same on every rank.
 *
 * A stopped process (SIGSTOP, a debugger) keeps its liveness socket open, so end of stream
 * never comes and its peers would wait the full ZEN_TIMEOUT_S, each blaming whom it waits for.
 * Instead every process's monitor thread bumps a 64-bit word in the head of its own segment
 * every beat (liveness.h: at most 1 s, also when it does not watch) and, on the same wake-up,
 * reads the word of every local peer. A peer whose word has not moved for the window (the agreed
 * ZEN_HEARTBEAT_S, at most half the timeout) is named; this process aborts with
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
 * A stopped peer is thus named after the window plus at most one period. A wait that times out
 * first reads the same record (zen__shm_silent_peer) to name the silent rank.
 */
#include <stdio.h>

#include "common/clock.h"
#include "common/log.h"
#include "transport/shm_internal.h"
#include "transport/tcp_internal.h"

void zen__shm_liveness_local(shm_state *s)
{
    s->live = zen__liveness_decode(s->live_wire);
    for (int p = 0; p < s->base.size; p++) {
        shm_peer *pe = &s->peers[p];
        if (pe->lidx >= 0 && p != s->base.rank && pe->seg) {
            zen_liveness theirs = zen__liveness_decode(((zen_shm_seg_head *)pe->seg)->liveness);
            zen__liveness_merge(&s->live, &theirs);
        }
    }
}

void zen__shm_heartbeat_setup(shm_state *s)
{
    s->silence_ns = zen__liveness_window_ns(&s->live);
    s->beat_ns = zen__liveness_beat_ns(&s->live);
    s->suspect_ns = zen__liveness_suspect_ns(&s->live);
    s->last_tick_ns = zen_now_ns();
    if (s->head)
        atomic_fetch_add(&s->head->heartbeat, 1);
    for (int p = 0; p < s->base.size; p++) {
        shm_peer *pe = &s->peers[p];
        if (pe->lidx >= 0 && p != s->base.rank && pe->seg) {
            pe->hb_seen = atomic_load(&((zen_shm_seg_head *)pe->seg)->heartbeat);
            atomic_store(&pe->hb_quiet_ns, 0);
            pe->hb_moved = 0;
        }
    }
}

int zen__shm_heartbeat_poll_ms(const shm_state *s)
{
    if (s->nlocal < 2)
        return -1; /* nobody to beat for: the monitor sleeps until a socket speaks */
    int64_t left = s->last_tick_ns + s->beat_ns - zen_now_ns();
    return left > 0 ? (int)((left + 999999) / 1000000) : 0;
}

/* Name pe and abort: every receive fails with the reason, and the peers learn it. */
static void name_silent_peer(shm_state *s, shm_peer *pe, int64_t quiet)
{
    char msg[300];
    zen__liveness_silent_msg(msg, sizeof msg, pe->rank, quiet, s->silence_ns,
                             "it is stopped, hung or overloaded", "shared-memory heartbeat, ");
    ZEN_ERROR("transport", "%s", msg);
    zen__shm_peer_down(s, pe, ZEN_ETIMEDOUT, 0, msg);
    s->base.ops->abort(&s->base, ZEN_ETIMEDOUT, msg);
}

void zen__shm_heartbeat_tick(shm_state *s)
{
    if (s->nlocal < 2)
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
            atomic_store(&pe->hb_quiet_ns, 0);
            pe->hb_moved = 1;
            continue;
        }
        int64_t quiet = atomic_load(&pe->hb_quiet_ns) + watched;
        atomic_store(&pe->hb_quiet_ns, quiet); /* counted also when not watching: for timeouts */
        if (s->silence_ns != INT64_MAX &&
            quiet >= (pe->hb_moved ? s->silence_ns : 2 * s->silence_ns)) {
            name_silent_peer(s, pe, quiet);
            return;
        }
    }
}

int zen__shm_silent_peer(shm_state *s, int64_t *quiet_ns)
{
    int who = -1;
    int64_t most = 0;
    for (int p = 0; p < s->base.size && s->nlocal > 1; p++) {
        shm_peer *pe = &s->peers[p];
        if (pe->lidx < 0 || p == s->base.rank || !pe->seg || atomic_load(&pe->down))
            continue;
        int64_t quiet = atomic_load(&pe->hb_quiet_ns);
        if (quiet >= s->suspect_ns && quiet > most) {
            who = p;
            most = quiet;
        }
    }
    int64_t remote_quiet = 0;
    int remote = s->tcp ? zen__tcp_silent_peer(s->tcp, &remote_quiet) : -1;
    if (remote >= 0 && remote_quiet > most) {
        who = remote;
        most = remote_quiet;
    }
    *quiet_ns = most;
    return who;
}
