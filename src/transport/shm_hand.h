/*
 * The shm hand-over message (shm_boot.c): what each of two local ranks sends the other over the
 * setup socket, together with its segment's descriptor (SCM_RIGHTS). 16 bytes in host byte order
 * (only processes of one host exchange it):
 *   0  u32 magic (ZEN_SHM_MAGIC)
 *   4  u32 the sender's world rank
 *   8  u64 the size of the sender's segment in bytes
 * The parser is a pure function of the bytes so that it can be fuzzed (tests/fuzz/fuzz_shmboot.c).
 */
#ifndef ZEN_TRANSPORT_SHM_HAND_H
#define ZEN_TRANSPORT_SHM_HAND_H

#include <stddef.h>
#include <stdint.h>

#define ZEN_SHM_HAND_BYTES 16
/* want_rank that accepts any sender rank: the other end is a process that holds several local
 * ranks as threads (in-process tests), so its pid does not tell which rank it is. */
#define ZEN_SHM_HAND_ANY_RANK UINT32_MAX

typedef struct zen_shm_hand {
    uint32_t rank;
    uint64_t seg_bytes;
} zen_shm_hand;

void zen__shm_hand_encode(unsigned char out[ZEN_SHM_HAND_BYTES], uint32_t rank, uint64_t seg_bytes);

/*
 * Check the n bytes received so far on a connection whose other end is known (from SO_PEERCRED)
 * to be rank want_rank (or ZEN_SHM_HAND_ANY_RANK). Returns 1 while the message is incomplete
 * (n < ZEN_SHM_HAND_BYTES and nothing seen so far is wrong), 0 when it is complete and valid
 * (*out filled), -1 when it is wrong: more bytes than a message, another magic, or another rank
 * than want_rank.
 */
int zen__shm_hand_parse(const unsigned char *buf, size_t n, uint32_t want_rank, zen_shm_hand *out);

#endif
