/* Liveness settings agreed at setup, and the blame of a timeout (see liveness.h). */
#include "transport/liveness.h"

#include <stdio.h>

#include "common/clock.h"
#include "common/tunables.h"

#define SECOND_NS       ((int64_t)1000000000)
#define WIRE_NONE       0xffffffffu
#define SUSPECT_BEATS   5
#define WINDOW_FLOOR_NS (2 * SECOND_NS)

static uint32_t to_wire(int64_t ns)
{
    if (ns == INT64_MAX || ns / 1000000 >= WIRE_NONE)
        return WIRE_NONE;
    int64_t ms = ns / 1000000 + (ns % 1000000 != 0); /* round up: never below the setting */
    return ms < 1 ? 1 : (uint32_t)ms;
}

static int64_t from_wire(uint32_t ms)
{
    if (ms == WIRE_NONE)
        return INT64_MAX;
    return (ms ? (int64_t)ms : 1) * 1000000;
}

uint64_t zen__liveness_encode(const zen_liveness *l)
{
    return (uint64_t)to_wire(l->hb_ns) << 32 | to_wire(l->timeout_ns);
}

zen_liveness zen__liveness_decode(uint64_t wire)
{
    zen_liveness l;
    l.hb_ns = from_wire((uint32_t)(wire >> 32));
    l.timeout_ns = from_wire((uint32_t)wire);
    l.watch = l.hb_ns != INT64_MAX;
    return l;
}

zen_liveness zen__liveness_mine(double timeout_s)
{
    zen_liveness l;
    l.hb_ns = zen_ns_from_s(zen__param_timeout("HEARTBEAT_S"));
    l.timeout_ns = zen_ns_from_s(timeout_s > 0 ? timeout_s : 300);
    /* through the wire form, so that every rank folds exactly the values the others see */
    return zen__liveness_decode(zen__liveness_encode(&l));
}

void zen__liveness_merge(zen_liveness *agg, const zen_liveness *peer)
{
    if (peer->hb_ns != INT64_MAX && (agg->hb_ns == INT64_MAX || peer->hb_ns > agg->hb_ns))
        agg->hb_ns = peer->hb_ns;
    if (peer->timeout_ns < agg->timeout_ns)
        agg->timeout_ns = peer->timeout_ns;
}

int64_t zen__liveness_beat_ns(const zen_liveness *agg)
{
    int64_t beat = SECOND_NS;
    if (agg->hb_ns != INT64_MAX && agg->hb_ns / 5 < beat)
        beat = agg->hb_ns / 5;
    if (agg->timeout_ns != INT64_MAX && agg->timeout_ns / 10 < beat)
        beat = agg->timeout_ns / 10;
    return beat < 1000000 ? 1000000 : beat;
}

int64_t zen__liveness_window_ns(const zen_liveness *agg)
{
    if (!agg->watch || agg->hb_ns == INT64_MAX)
        return INT64_MAX;
    /* half the timeout, so the watch speaks before the deadlines; not below 2 s, where a loaded
     * host could starve a live peer's beating thread that long (a timeout that short still names
     * the silent rank: the suspect span is 5 beats, a twentieth of it) */
    int64_t w = agg->hb_ns;
    if (agg->timeout_ns != INT64_MAX) {
        int64_t cap = agg->timeout_ns / 2 > WINDOW_FLOOR_NS ? agg->timeout_ns / 2 : WINDOW_FLOOR_NS;
        w = cap < w ? cap : w;
    }
    int64_t least = SUSPECT_BEATS * zen__liveness_beat_ns(agg);
    return w < least ? least : w;
}

int64_t zen__liveness_suspect_ns(const zen_liveness *agg)
{
    return SUSPECT_BEATS * zen__liveness_beat_ns(agg);
}

const char *zen__liveness_blame(char *out, size_t n, int peer, int64_t waited_ns,
                                unsigned long long tag, int silent, int64_t quiet_ns)
{
    double waited = (double)waited_ns / 1e9;
    if (silent >= 0 && silent != peer)
        snprintf(out, n,
                 "rank %d sent nothing, not even a heartbeat, for %.1f s: it is stopped, hung or "
                 "cut off (found when no message from rank %d came for %.1f s, tag 0x%llx)",
                 silent, (double)quiet_ns / 1e9, peer, waited, tag);
    else if (silent == peer)
        snprintf(out, n,
                 "rank %d sent nothing, not even a heartbeat, for %.1f s: it is stopped, hung or "
                 "cut off (no message from it for %.1f s, tag 0x%llx)",
                 silent, (double)quiet_ns / 1e9, waited, tag);
    else
        snprintf(out, n,
                 "no message from rank %d after %.1f s (tag 0x%llx): rank %d is missing, slow or "
                 "stuck",
                 peer, waited, tag, peer);
    return out;
}

const char *zen__liveness_silent_msg(char *out, size_t n, int rank, int64_t quiet_ns,
                                     int64_t window_ns, const char *cause, const char *channel)
{
    snprintf(out, n, "rank %d sent nothing, not even a heartbeat, for %.1f s: %s (%swindow %.1f s)",
             rank, (double)quiet_ns / 1e9, cause, channel, (double)window_ns / 1e9);
    return out;
}
