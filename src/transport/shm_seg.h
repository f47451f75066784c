/*
 * The shared-memory segment of the shm transport: layout, rings and the doorbell.
 *
 * Every process owns one segment (an anonymous memfd, mapped by each process of its host) that
 * holds its INBOUND side: a doorbell and one ring per local peer, ring i carrying the messages
 * from the peer of local index i. A receiver thus waits on a word of its own segment, and a
 * sender writes only into the ring it alone produces for (single producer, single consumer).
 *
 * Ring: a byte ring with free-running 64-bit head (consumer) and tail (producer) counters, each
 * on its own cache line. Records start on 64-byte boundaries and never wrap: a record that does
 * not fit before the end is preceded by a PAD record.
 *
 * A record is published by its own first word, the stamp (its stream position + 1), which the
 * producer writes last with release order; the consumer polls the stamp of the record slot at
 * head with acquire order, so a record it sees is complete (a producer killed in the middle
 * leaves nothing visible), and a small message costs the consumer one cache line, header and
 * payload together, instead of the tail's line and then the record's. A slot holds either 0 or
 * the stamp of the record written there in this lap, never stale bytes of an earlier lap: before
 * it publishes a record the producer zeroes the stamp of the slot that follows it (it keeps a
 * line of free space for this), so the slot the consumer looks at next has been cleared in this
 * lap before the record that leads there became visible. The producer caches head and re-reads
 * it only when the cached value says the ring is full, so the consumer's head line stays in the
 * consumer's cache. tail is the producer's own position (it is no longer read by the consumer).
 *
 * Doorbell (futex): seq is bumped and FUTEX_WAKE called only when sleepers > 0. A sleeper
 * increments sleepers, reads seq, re-checks for work and then FUTEX_WAITs on seq; a waker
 * publishes its data, then (full fence) reads sleepers. Either the waker sees the sleeper, or
 * the sleeper's re-check sees the data (both sides order a store before a load with seq_cst),
 * so no wake-up is lost and an idle process costs no CPU.
 *
 * Collective slots (after the rings; shm_slots.c): two slots, by the parity of the collective
 * slot sequence number, each a 32-byte header (the sequence number that publishes it, written
 * last with release order, and a 24-byte descriptor) followed by ZEN_SHM_SLOT_BYTES of payload.
 * Only the owner writes them; every local peer reads them (src/coll/slots.c has the protocol).
 */
#ifndef ZEN_TRANSPORT_SHM_SEG_H
#define ZEN_TRANSPORT_SHM_SEG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define ZEN_SHM_MAGIC   0x4d48535au /* "ZSHM" */
#define ZEN_SHM_LINE    64
#define ZEN_SHM_REC_HDR 40

enum zen_shm_kind {
    ZEN_SHM_PAD = 1,   /* skip to the end of the ring */
    ZEN_SHM_FIRST = 2, /* first (maybe only) piece of a message: total = message length */
    ZEN_SHM_MORE = 3,  /* a following piece of the same message */
    ZEN_SHM_RTS = 4    /* single copy: read total bytes at addr from the sender's memory */
};

/* A record header (40 bytes: with an 8-byte payload a message is one cache line); payload
 * follows. */
typedef struct zen_shm_rec {
    _Atomic uint64_t stamp; /* stream position of the record + 1; 0: nothing here yet */
    uint32_t kind;
    uint32_t bytes; /* payload bytes in this record */
    uint64_t tag;
    uint64_t total; /* message length (FIRST, RTS) */
    uint64_t addr;  /* RTS: address in the sender; FIRST/MORE: offset of the payload */
} zen_shm_rec;

typedef struct zen_shm_ring {
    _Alignas(ZEN_SHM_LINE) _Atomic uint64_t tail; /* producer */
    _Alignas(ZEN_SHM_LINE) _Atomic uint64_t head; /* consumer */
    _Atomic uint64_t acked;                       /* consumer: RTS records read so far */
    _Alignas(ZEN_SHM_LINE) _Atomic uint32_t producer_waiting; /* producer sleeps for space/ack */
    uint32_t cma_ok; /* set by the consumer at setup: it can read the producer's memory */
} zen_shm_ring;

typedef struct zen_shm_doorbell {
    _Alignas(ZEN_SHM_LINE) _Atomic uint32_t seq;
    _Atomic uint32_t sleepers;
} zen_shm_doorbell;

typedef struct zen_shm_seg_head {
    uint32_t magic;
    uint32_t nlocal;
    uint64_t ring_bytes;
    /* the owner's ZEN_HEARTBEAT_S and timeout (liveness.h wire form), written before the
     * segment is handed over: the ranks of a host agree on them at setup */
    uint64_t liveness;
    zen_shm_doorbell bell;
    /* Bumped by the owner's monitor thread every ZEN_HEARTBEAT_S/5 and watched by the others: a
     * word that stops moving names a stopped or hung process (shm_heartbeat.c). */
    _Alignas(ZEN_SHM_LINE) _Atomic uint64_t heartbeat;
} zen_shm_seg_head;

/* Byte offsets of the parts of a segment for nlocal processes and rings of ring_bytes. */
static inline size_t zen_shm_ring_ctl_off(int i)
{
    size_t head = (sizeof(zen_shm_seg_head) + ZEN_SHM_LINE - 1) / ZEN_SHM_LINE * ZEN_SHM_LINE;
    return head + (size_t)i * sizeof(zen_shm_ring);
}

static inline size_t zen_shm_ring_data_off(int nlocal, size_t ring_bytes, int i)
{
    size_t ctl = zen_shm_ring_ctl_off(nlocal);
    ctl = (ctl + 4095) / 4096 * 4096;
    return ctl + (size_t)i * ring_bytes;
}

#define ZEN_SHM_SLOT_BYTES  ((size_t)64 << 10)
#define ZEN_SHM_SLOT_STRIDE (ZEN_SHM_SLOT_BYTES + 4096) /* header, payload, page aligned */

typedef struct zen_shm_slot {
    _Alignas(ZEN_SHM_LINE) _Atomic uint64_t seq; /* 0: never written */
    uint64_t desc[3];
    /* payload follows at offset 32: an 8-byte payload shares the header's cache line */
} zen_shm_slot;

#define ZEN_SHM_SLOT_HDR 32

/* Offset of slot k (0 or 1). */
static inline size_t zen_shm_slot_off(int nlocal, size_t ring_bytes, int k)
{
    return zen_shm_ring_data_off(nlocal, ring_bytes, nlocal) + (size_t)k * ZEN_SHM_SLOT_STRIDE;
}

static inline size_t zen_shm_seg_bytes(int nlocal, size_t ring_bytes)
{
    return zen_shm_slot_off(nlocal, ring_bytes, 2);
}

#endif
