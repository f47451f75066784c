/* tcp transport internals shared with the fault injector (faulty.c) and tests. */
#ifndef ZEN_TRANSPORT_TCP_INTERNAL_H
#define ZEN_TRANSPORT_TCP_INTERNAL_H

#include <stdint.h>

#include "transport/liveness.h"
#include "transport/transport.h"

/* Frame header: magic, version, kind, tag, payload length (docs/wire-format.md). */
#define ZEN_TCP_MAGIC        0x464e455au /* "ZENF" as little-endian bytes */
#define ZEN_TCP_VERSION      1u
#define ZEN_TCP_HEADER_BYTES 24
#define ZEN_TCP_KIND_DATA    1u
#define ZEN_TCP_KIND_ABORT   2u
/* No payload: "this process runs". Sent when nothing else went to that peer for a while, so a
 * stopped process (SIGSTOP, a hang) is told apart from a busy one by its silence. */
#define ZEN_TCP_KIND_HEARTBEAT 3u
/* Longest payload a frame may announce; a larger length is a corrupt stream. */
#define ZEN_TCP_MAX_PAYLOAD ((uint64_t)1 << 38)
/* Longest abort reason. */
#define ZEN_TCP_MAX_REASON 1024u

/* Check a received frame header (pure: tests/fuzz/fuzz_frame.c). 0 valid, with the fields
 * stored; -1 wrong magic or version; -2 unknown kind, a DATA length above ZEN_TCP_MAX_PAYLOAD,
 * an ABORT reason above ZEN_TCP_MAX_REASON or a HEARTBEAT with a payload. */
int zen__tcp_parse_header(const unsigned char h[ZEN_TCP_HEADER_BYTES], uint32_t *kind,
                          uint64_t *tag, uint64_t *len);

/* Behave as if this process died: close every connection at once without an ABORT frame, fail
 * this rank's own requests and refuse all further traffic. t must be a tcp transport. */
void zen__transport_tcp_kill(zen_transport *t);

int zen__transport_is_tcp(const zen_transport *t);

/* zen__transport_tcp_create delivering into mb, which the caller owns and keeps alive until after
 * destroy (shm's mixed mode: one mailbox for the ranks on this host and those on others). Peers
 * with fds[p] == -1 get no reader thread; the caller must not send to them through this
 * transport. local: the liveness settings agreed with the ranks of this host (this rank's
 * included), folded into those of the peers reached here. */
typedef struct zen_mailbox zen_mailbox;
zen_status zen__transport_tcp_create_shared(int rank, int size, int *fds, double timeout_s,
                                            zen_mailbox *mb, const zen_liveness *local,
                                            zen_transport **out);

/* The liveness settings agreed at setup (all ranks reached by t, and the local ones). */
zen_liveness zen__tcp_liveness(const zen_transport *t);

/* The peer that has sent nothing, heartbeats included, for the longest time, at least the
 * suspect span of liveness.h (its silence in *quiet_ns), or -1. Thread safe. */
int zen__tcp_silent_peer(zen_transport *t, int64_t *quiet_ns);

#endif
