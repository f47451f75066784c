/*
 * Store rendezvous: build the tcp full mesh from addresses exchanged through a caller's
 * key-value store (include/zen/store.h) instead of rank 0's master port.
 *
 * Outline: this rank opens its data listener, publishes "zen/tcp/<rank>" = "a.b.c.d:port" (its
 * arrival), reads every other rank's key (each get waits for what is left of the one deadline),
 * then runs the same HELLO mesh as the env rendezvous (zen__rendezvous_mesh). Store traffic: one
 * set and size-1 gets of about 22 bytes per rank. A rank that waits longer than 0.5 s republishes
 * its key every 0.5 s as "a.b.c.d:port +<ms>", the time it will still wait: a rank that arrives
 * late adopts the earliest such end, so all ranks give up together, and each waits up to 3 s
 * past its deadline for late ranks, so the verdict ("2 of 3 ranks arrived ...; missing: rank 2")
 * names only ranks that never came.
 */
#ifndef ZEN_BOOTSTRAP_STORE_H
#define ZEN_BOOTSTRAP_STORE_H

#include <stddef.h>

#include <zen/store.h>

/*
 * fds (size entries) receives one connected socket per peer, -1 at fds[rank]. master_addr (may be
 * NULL) only picks this rank's interface: the one that routes there. Failure contract as for
 * zen__rendezvous: sockets closed, err names the rank that is missing or misbehaves.
 */
zen_status zen__store_rendezvous(const zen_store *store, int rank, int size,
                                 const char *master_addr, double timeout_s, int *fds, char *err,
                                 size_t err_size);

#endif
