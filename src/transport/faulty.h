/*
 * faulty: a transport wrapper that injects failures, for tests. It forwards everything to the
 * wrapped transport through the vtable and, on one rank, alters its sends from the after-th on:
 *
 *   ZEN_FAULT="rank=R,after=K,action=A[,count=C][,ms=M][,peer=P]"
 *
 *   rank    the world rank whose transport is wrapped (other ranks are untouched)
 *   after   number of sends (isend calls, counting from transport creation, the communicator's
 *           own seed broadcast included) that go through unharmed first
 *   count   how many sends are affected (default 1; 0: every send from then on)
 *   peer    only sends to this world rank count and are affected (default: all)
 *   action  delay     sleep ms (default 100) before the send
 *           drop      report success, send nothing (the receiver times out naming this rank)
 *           truncate  send only the first half of the bytes (a length mismatch at the receiver)
 *           corrupt   flip bits of a copy of the payload (silent corruption: tests compare data)
 *           garbage   write bytes that are not a valid frame on the connection (tcp send_raw:
 *                     the receiver fails with ZEN_EPROTO naming this rank)
 *           kill      behave as if the process died: on tcp every connection closes at once
 *                     without an ABORT frame; on other transports the rank aborts; then all
 *                     traffic of this rank is refused
 *
 * It is the registry's wrapper row (registry.h): zen_comm_create applies every wrapper right
 * after making the transport (zen__transport_wrap), so the same
 * variable works for inproc threads and tcp processes.
 */
#ifndef ZEN_TRANSPORT_FAULTY_H
#define ZEN_TRANSPORT_FAULTY_H

#include "common/fault_spec.h"
#include "transport/transport.h"

/* Parse a ZEN_FAULT string. ZEN_EINVAL (and a logged reason) when malformed. */
zen_status zen__fault_parse(const char *spec, zen_fault_config *cfg);

/* Wrap inner; on success *out owns inner (destroying *out destroys inner). */
zen_status zen__transport_faulty_wrap(zen_transport *inner, const zen_fault_config *cfg,
                                      zen_transport **out);

/* If ZEN_FAULT is set and names this rank, replace *t by a wrapper around it. On failure *t is
 * destroyed and set to NULL. */
zen_status zen__fault_maybe_wrap(zen_transport **t);

#endif
