/*
 * tcp rendezvous: turn (rank, size, master address) into a full mesh of connected sockets.
 *
 * Outline (docs/wire-format.md has the byte layouts):
 *   1. Every rank opens a listening socket on an ephemeral port of its own address
 *      (ZEN_SOCKET_IFADDR, else the local address of its connection to the master).
 *   2. Rank 0 listens on master_port; every other rank connects there (retrying until the
 *      deadline: rank 0 may start later) and registers (rank, size, address, port).
 *   3. Once all size-1 registrations arrived, rank 0 sends everyone the full address table.
 *   4. Rank i connects to every j < i and accepts from every j > i; both sides of each
 *      connection exchange a HELLO carrying magic, version, rank and world size, and refuse
 *      mismatches.
 * Every step has the one deadline timeout_s; a timeout names the ranks that are missing.
 */
#ifndef ZEN_BOOTSTRAP_RENDEZVOUS_H
#define ZEN_BOOTSTRAP_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

#define ZEN_RDV_MAGIC   0x5244455au /* "ZEDR" read as little-endian bytes */
#define ZEN_RDV_VERSION 1u

/*
 * fds (size entries) receives one connected non-blocking socket per peer, -1 at fds[rank].
 * On failure every socket is closed, the fds are -1 and err holds a message naming the missing
 * or misbehaving ranks (also logged).
 */
zen_status zen_rendezvous(int rank, int size, const char *master_addr, int master_port,
                          double timeout_s, int *fds, char *err, size_t err_size);

/*
 * Step 4 alone, for rendezvous that learnt the address table elsewhere (bootstrap/store.c):
 * addrs (network order) and ports hold every rank's data listener, listen_fd is this rank's
 * (left open: the caller closes it). Same fds, err and failure contract as zen_rendezvous.
 */
zen_status zen_rendezvous_mesh(int rank, int size, int listen_fd, const uint32_t *addrs,
                               const uint16_t *ports, double timeout_s, int *fds, char *err,
                               size_t err_size);

#endif
