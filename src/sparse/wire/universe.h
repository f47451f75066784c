/*
 * Owner universes for the hash bitmap: U_j = {i < rows : h0(i) = j}, sorted, for every owner j
 * of n. They depend only on (rows, n, seed0), so they are built once and kept in a small
 * process-wide cache (in-process ranks of one world share seeds and therefore one entry).
 *
 * Two levels, because the member lists cost 4 bytes per row and only bitmap blobs need them:
 * the sizes |U_j| (n + 1 offsets, one counting pass over the rows) come with every reference;
 * the sorted members are built on first use by zen__universe_members. A very sparse tensor whose
 * pull blobs are all COO never pays for them.
 */
#ifndef ZEN_SPARSE_UNIVERSE_H
#define ZEN_SPARSE_UNIVERSE_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

typedef struct zen_universe {
    uint64_t rows;
    uint32_t n;
    uint64_t seed0;
    size_t *offsets;   /* n + 1: U_j = members[offsets[j] .. offsets[j+1]) */
    uint32_t *members; /* rows entries, each U_j ascending; NULL until zen__universe_members */
} zen_universe;

/* A reference to the universes of (rows, n, seed0), sizes only; release it with
 * zen__universe_put. Thread safe. */
zen_status zen__universe_get(uint64_t rows, uint32_t n, uint64_t seed0, const zen_universe **out);
void zen__universe_put(const zen_universe *u);

/* Make sure u->members is built (once; thread safe). After ZEN_OK the caller may read it. */
zen_status zen__universe_members(const zen_universe *u);

/* Whether u->members is built already, without waiting for the cache lock (an acquire load: a
 * rank thread may be building it at that moment; when this says yes, the members may be read). */
int zen__universe_has_members(const zen_universe *u);

/* Build complete universes (sizes and members) without the cache (tests, fuzzing). Free with
 * zen__universe_free. */
zen_status zen__universe_build(uint64_t rows, uint32_t n, uint64_t seed0, zen_universe **out);
void zen__universe_free(zen_universe *u);

#endif
