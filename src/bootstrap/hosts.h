/*
 * Host-aware bootstrap for one process per rank: after the tcp rendezvous has built the mesh,
 * every rank tells every other its host identity, and the ranks of one host switch to shared
 * memory (src/transport/shm.h) while the others keep tcp.
 *
 * Host identity: ZEN_HOST_ID when set (an emulated cluster gives each emulated host its own),
 * else "<hostname>/<boot id>" (/proc/sys/kernel/random/boot_id: two machines, or two boots of
 * one, never share it, while every process of one running kernel does).
 *
 * The exchange runs after the HELLO handshake, on the authenticated mesh, so the message formats
 * of the rendezvous itself are unchanged; docs/wire-format.md has the HOST message.
 */
#ifndef ZEN_BOOTSTRAP_HOSTS_H
#define ZEN_BOOTSTRAP_HOSTS_H

#include <stddef.h>

#include <zen/store.h>

#include "transport/transport.h"

#define ZEN_HOST_ID_MAX 128

/* This process's host identity (NUL-terminated, at most ZEN_HOST_ID_MAX - 1 characters). */
void zen__host_identity(char *out, size_t cap);

/*
 * Rendezvous, host exchange and transport: shm among the ranks of one host, tcp to the others.
 * want (ZEN_TRANSPORT_MIXED or ZEN_TRANSPORT_SHM; SHM fails with ZEN_EINVAL, naming them, when
 * some ranks are on other hosts). store: the address table comes through it (zen__store_rendezvous)
 * instead of rank 0's master port when not NULL. *kind gets what the job uses, the same on every rank: SHM (one
 * host), TCP (one rank per host) or MIXED. Errors are logged, naming the peer.
 */
zen_status zen__bootstrap_host_transport(zen_transport_kind want, int rank, int size,
                                         const char *master_addr, int master_port,
                                         const zen_store *store, double timeout_s,
                                         zen_transport **out, zen_transport_kind *kind);

#endif
