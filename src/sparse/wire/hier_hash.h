/*
 * Hierarchical hashing (ZEN Algorithm 1): split a sparse tensor's non-zeros by destination owner
 * without any data-dependent balancing.
 *
 * Level 1, the owner function h0(idx) = zen_hash_range(zen_hash64(idx, seed0), n), depends only
 * on (index, seed0, n): every rank sends a given index to the same owner, and an owner's universe
 * U_j = {i < rows : h0(i) = j} is fixed, which is what the hash bitmap relies on. Level 2, inside
 * the owner's slot range, up to k = 3 probe hashes h1..h3 find a free slot of the owner's parallel
 * memory; an item whose 3 probes all collide is appended to the owner's serial memory with a bump
 * counter. Extraction scans only the tables (about 2.2 x nnz slots), never the dense tensor.
 */
#ifndef ZEN_SPARSE_HIER_HASH_H
#define ZEN_SPARSE_HIER_HASH_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

#include "common/hash.h"

/* The owner of index idx among n owners. The one definition every rank and module uses. */
static inline uint32_t zen_hh_owner(uint32_t idx, uint64_t seed0, uint32_t n)
{
    return zen_hash_range(zen_hash64(idx, seed0), n);
}

typedef enum zen_hh_method {
    ZEN_HH_HASH = 0, /* Algorithm 1 (hash tables with parallel and serial memory) */
    ZEN_HH_COUNT = 1 /* counting partition by h0 (count, prefix sum, scatter); same owners */
} zen_hh_method;

typedef struct zen_hh_config {
    uint32_t nowners;
    uint64_t seed0; /* h0: owner */
    uint64_t seed1; /* h2, h3 (h1 comes from the low half of the h0 hash) */
    zen_hh_method method;
    int threads;             /* <= 1: single-threaded; else pthreads with CAS slot claims */
    int probes;              /* k: slot probes per item, 1..3 (0: 3); ablation (ZEN Fig. 16) */
    size_t slots_per_owner;  /* 0: ceil(2 * nnz / nowners), load factor 0.5 (test hook) */
    size_t serial_per_owner; /* 0: max(slots / 10, 16) (test hook: tiny to force overflow) */
} zen_hh_config;

/* Default config for n owners with the communicator's seeds. */
zen_hh_config zen__hh_config_default(uint32_t nowners, const uint64_t *seeds);

typedef struct zen_hh_result {
    uint32_t nowners;
    size_t *offsets;     /* nowners + 1: owner j's items are pos[offsets[j] .. offsets[j+1]) */
    uint32_t *pos;       /* input positions grouped by owner; order inside an owner arbitrary */
    size_t serial_items; /* items that went to serial memory (last pass) */
    unsigned passes;     /* 1, plus one re-pass per serial-memory overflow */
} zen_hh_result;

/*
 * Partition idx[0..nnz) (nnz < UINT32_MAX; indices may repeat) by owner. Lossless: every position
 * appears exactly once in out->pos. Free the result with zen__hh_result_free.
 */
zen_status zen__hh_partition(const zen_hh_config *cfg, const uint32_t *idx, size_t nnz,
                             zen_hh_result *out);

void zen__hh_result_free(zen_hh_result *r);

#endif
