/*
 * tcp rendezvous: turn (rank, size, master address) into a full mesh of connected sockets.
 *
 * Outline (docs/wire-format.md has the byte layouts):
 *   1. Every rank opens a listening socket on an ephemeral port of its own address
 *      (ZEN_SOCKET_IFADDR, else the local address of its connection to the master).
 *   2. Rank 0 listens on master_port; every other rank connects there (retrying until the
 *      deadline: rank 0 may start later) and registers (rank, size, address, port).
 *   3. Once all size-1 registrations arrived, rank 0 sends everyone the full address table.
 *   4. Rank i connects to every j < i and accepts from every j > i.
 * Every connection (2 and 4) opens with a mutual challenge-response: REGISTER/HELLO with the
 * client's nonce, CHALLENGE with the server's nonce and HMAC proof, PROOF from the client
 * (bootstrap/auth.h; without a job secret the proofs are empty). A connection that fails it, or
 * a stranger's wrong size / rank / version, is dropped and logged, never fatal; a rank that
 * proved the secret and disagrees on the world is. Handshakes run concurrently (poll) with
 * 5 s each, so idle connections cannot stall the job; when the table of unfinished handshakes
 * is full the oldest gives way (bootstrap/rdv_admit.h), and a rank whose connection is closed
 * before the challenge connects again, so connections held by a stranger cannot lock it out.
 * Every step has the one deadline timeout_s; a timeout names the ranks that are missing.
 */
#ifndef ZEN_BOOTSTRAP_RENDEZVOUS_H
#define ZEN_BOOTSTRAP_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

#include "bootstrap/auth.h"

/*
 * fds (size entries) receives one connected non-blocking socket per peer, -1 at fds[rank].
 * On failure every socket is closed, the fds are -1 and err holds a message naming the missing
 * or misbehaving ranks (also logged).
 */
zen_status zen__rendezvous(int rank, int size, const char *master_addr, int master_port,
                           double timeout_s, int *fds, char *err, size_t err_size);

/* The same with the job key given (zen__rendezvous reads it with zen__job_key_from_env). */
zen_status zen__rendezvous_keyed(int rank, int size, const char *master_addr, int master_port,
                                 double timeout_s, const zen_job_key *key, int *fds, char *err,
                                 size_t err_size);

/*
 * Step 4 alone, for rendezvous paths that exchange the address table another way (a c10d
 * store): addrs_be/ports hold every rank's data listener, listen_fd is this rank's (not closed
 * here), key may be NULL (no secret). Same fds/err contract as zen__rendezvous.
 */
zen_status zen__rendezvous_mesh(int rank, int size, const uint32_t *addrs_be, const uint16_t *ports,
                                int listen_fd, const zen_job_key *key, double timeout_s, int *fds,
                                char *err, size_t err_size);

#endif
