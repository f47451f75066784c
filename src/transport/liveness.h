/*
 * Liveness settings agreed by all ranks of a job (tcp.c, shm_heartbeat.c; docs/security.md,
 * "Hung peers").
 *
 * Each rank brings its ZEN_HEARTBEAT_S and its communicator timeout; at setup every rank learns
 * every other rank's pair (tcp: the tag of the first HEARTBEAT frame on each connection; shm:
 * the head of each segment), so all compute the same aggregate:
 *   hb_ns      the largest finite ZEN_HEARTBEAT_S (INT64_MAX when every rank has inf): the most
 *              patient setting wins, so no rank calls a peer hung sooner than that peer's own
 *              setting allows;
 *   timeout_ns the smallest timeout.
 * From it:
 *   beat   every rank beats every min(1 s, hb/5, timeout/10), also a rank that does not watch
 *          (inf): its peers may watch, and a timeout reads the beats (below);
 *   window silence after which a watching rank names a peer: min(hb, max(timeout/2, 2 s)), so
 *          a stopped rank is named before anyone's deadline ends (timeouts from 4 s on); a rank
 *          whose own ZEN_HEARTBEAT_S is inf does not watch;
 *   suspect at a timeout, a peer silent for 5 beats (a live peer misses none) is named instead
 *          of the rank the wait was for (zen__liveness_blame).
 */
#ifndef ZEN_TRANSPORT_LIVENESS_H
#define ZEN_TRANSPORT_LIVENESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct zen_liveness {
    int64_t hb_ns;      /* agreed: largest finite ZEN_HEARTBEAT_S; INT64_MAX: all inf */
    int64_t timeout_ns; /* agreed: smallest timeout; INT64_MAX: none */
    int watch;          /* this rank's own ZEN_HEARTBEAT_S is finite */
} zen_liveness;

/* This rank's own settings: ZEN_HEARTBEAT_S and timeout_s (<= 0: 300 s). */
zen_liveness zen__liveness_mine(double timeout_s);

/* Wire form: ms of each in 32 bits, saturating (0xffffffff: inf or 49 days and more),
 * heartbeat in the high half. Decoding refuses nothing: any value is a valid setting. */
uint64_t zen__liveness_encode(const zen_liveness *l);
zen_liveness zen__liveness_decode(uint64_t wire);

/* Fold a peer's settings into the aggregate (largest finite heartbeat, smallest timeout). */
void zen__liveness_merge(zen_liveness *agg, const zen_liveness *peer);

int64_t zen__liveness_beat_ns(const zen_liveness *agg);
/* INT64_MAX when this rank does not watch. */
int64_t zen__liveness_window_ns(const zen_liveness *agg);
int64_t zen__liveness_suspect_ns(const zen_liveness *agg);

/* The timeout message of a wait for peer that lasted waited_ns: when some other rank has been
 * silent for the suspect span (silent >= 0, quiet_ns its silence), that rank is named first and
 * the wait only quoted; otherwise peer is named as before. Returns out. */
const char *zen__liveness_blame(char *out, size_t n, int peer, int64_t waited_ns,
                                unsigned long long tag, int silent, int64_t quiet_ns);

/* What a watching rank says when it names a silent peer (tcp and shm alike): "rank R sent
 * nothing, not even a heartbeat, for Q s: <cause> (<channel>window W s)". Returns out. */
const char *zen__liveness_silent_msg(char *out, size_t n, int rank, int64_t quiet_ns,
                                     int64_t window_ns, const char *cause, const char *channel);

#endif
