/*
 * shm: one process per rank, the ranks of one host talk through shared memory, the others (when
 * there are any: the "mixed" mode) through the tcp transport. docs/architecture.md has the
 * overview; shm_seg.h the segment layout; this header the setup interface used by the bootstrap.
 *
 * Setup, after the tcp rendezvous has built the full mesh of sockets:
 *   1. zen__shm_boot_begin: listen on an abstract Unix socket with a random name (abstract: no
 *      file to leave behind) and describe this process in a blob (pid, socket name, the address
 *      of a cookie for the single-copy probe).
 *   2. The bootstrap exchanges (host identity, blob) over the mesh (bootstrap/hosts.c).
 *   3. zen__transport_shm_create: create this process's segment (memfd), probe single copy
 *      (process_vm_readv of each local peer's cookie), hand the segment to every local peer over
 *      the Unix socket with SCM_RIGHTS (checking the peer's pid with SO_PEERCRED), map theirs,
 *      and close every descriptor of the segments: only the mappings remain, so when the last
 *      process of the job dies, even by kill -9, the kernel frees the memory and nothing stays
 *      in /dev/shm or the file system.
 * The tcp sockets to local peers stay open as the liveness channel: end of stream = the peer is
 * gone (closed, or killed: the kernel closes its sockets), bytes = an abort notice with reason.
 */
#ifndef ZEN_TRANSPORT_SHM_H
#define ZEN_TRANSPORT_SHM_H

#include <stdint.h>

#include "transport/transport.h"

/* What a process tells its peers for the shm setup (fixed size, host byte order: only processes
 * of the same host, hence the same byte order, ever use it). */
typedef struct zen_shm_blob {
    uint32_t pid;
    uint32_t version;
    uint64_t cookie_addr; /* address of a known 8-byte value, for the single-copy probe */
    char sock_name[48];   /* abstract Unix socket name, without the leading NUL */
} zen_shm_blob;

typedef struct zen_shm_boot zen_shm_boot;

/* Step 1: listen and fill *mine. On success the caller owns *out (consumed by create, or released
 * with zen__shm_boot_cancel). */
zen_status zen__shm_boot_begin(zen_shm_boot **out, zen_shm_blob *mine);
void zen__shm_boot_cancel(zen_shm_boot *b);

/*
 * Step 3: the transport. host_of[p] is the host index of world rank p (equal: same host) and
 * blobs[p] what rank p sent in step 2. fds are the mesh sockets (as for tcp): the ones to local
 * peers become liveness channels, the others go to an inner tcp transport (mixed mode, one
 * mailbox for both). Takes ownership of fds (also on failure) and of b. err gets a message
 * naming the peer on failure.
 */
zen_status zen__transport_shm_create(int rank, int size, int *fds, const int *host_of,
                                     const zen_shm_blob *blobs, zen_shm_boot *b, double timeout_s,
                                     zen_transport **out, char *err, size_t err_size);

/* 1 when t is an shm transport whose peers are all on this host, 0 otherwise (mixed or other). */
int zen__transport_is_pure_shm(const zen_transport *t);

#endif
