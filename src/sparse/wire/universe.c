/*
 * Universe construction and cache. Construction is a counting sort of [0, rows) by owner: one
 * pass counts per owner and a prefix sum gives each owner's segment (the sizes); a second pass,
 * run only when members are first needed, appends every row to its owner's segment in
 * ascending order (so each U_j comes out sorted with no sort).
 *
 * The cache holds a few entries keyed by (rows, n, seed0) with reference counts; an entry is
 * evicted (least recently used first) only when no caller holds it. When every slot is in use a
 * private, uncached copy is built and freed on release.
 */
#include "sparse/wire/universe.h"

#include <pthread.h>
#include <string.h>

#include "common/alloc.h"
#include "sparse/wire/hier_hash.h"

#define CACHE_SLOTS 4

typedef struct cache_entry {
    zen_universe *u;
    int refs;
    uint64_t last_use;
} cache_entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cache_entry cache[CACHE_SLOTS];
static uint64_t cache_clock;

void zen__universe_free(zen_universe *u)
{
    if (!u)
        return;
    zen__free(u->offsets);
    zen__free(u->members);
    zen__free(u);
}

/* Sizes only: count the rows of each owner. */
static zen_status build_offsets(uint64_t rows, uint32_t n, uint64_t seed0, zen_universe **out)
{
    *out = NULL;
    if (n == 0 || rows >= ((uint64_t)1 << 32) || rows > SIZE_MAX / sizeof(uint32_t))
        return ZEN_EINVAL;
    zen_universe *u = zen__calloc(1, sizeof *u);
    if (!u)
        return ZEN_ENOMEM;
    u->rows = rows;
    u->n = n;
    u->seed0 = seed0;
    u->offsets = zen__calloc((size_t)n + 1, sizeof *u->offsets);
    if (!u->offsets) {
        zen__universe_free(u);
        return ZEN_ENOMEM;
    }
    for (uint64_t i = 0; i < rows; i++)
        u->offsets[zen_hh_owner((uint32_t)i, seed0, n) + 1]++;
    for (uint32_t j = 0; j < n; j++)
        u->offsets[j + 1] += u->offsets[j];
    *out = u;
    return ZEN_OK;
}

/* Members: append every row to its owner's segment, in ascending order. */
static zen_status build_members(zen_universe *u)
{
    uint32_t *members = zen__malloc_array(u->rows ? (size_t)u->rows : 1, sizeof *members);
    size_t *next = zen__malloc_array(u->n, sizeof *next);
    if (!members || !next) {
        zen__free(members);
        zen__free(next);
        return ZEN_ENOMEM;
    }
    memcpy(next, u->offsets, u->n * sizeof *next);
    /* locals: the stores through next could alias u's fields, which would force a reload and a
     * re-mix of the seed on every row */
    const uint64_t rows = u->rows, seed0 = u->seed0;
    const uint32_t n = u->n;
    for (uint64_t i = 0; i < rows; i++)
        members[next[zen_hh_owner((uint32_t)i, seed0, n)]++] = (uint32_t)i;
    zen__free(next);
    /* release: pairs with zen__universe_has_members, which other rank threads call unlocked */
    __atomic_store_n(&u->members, members, __ATOMIC_RELEASE);
    return ZEN_OK;
}

zen_status zen__universe_build(uint64_t rows, uint32_t n, uint64_t seed0, zen_universe **out)
{
    zen_status st = build_offsets(rows, n, seed0, out);
    if (st == ZEN_OK && (st = build_members(*out)) != ZEN_OK) {
        zen__universe_free(*out);
        *out = NULL;
    }
    return st;
}

zen_status zen__universe_members(const zen_universe *cu)
{
    /* the cache lock also orders the one-time build before every reader's use */
    pthread_mutex_lock(&cache_lock);
    zen_universe *u = (zen_universe *)cu;
    zen_status st = u->members ? ZEN_OK : build_members(u);
    pthread_mutex_unlock(&cache_lock);
    return st;
}

int zen__universe_has_members(const zen_universe *u)
{
    return __atomic_load_n(&u->members, __ATOMIC_ACQUIRE) != NULL;
}

zen_status zen__universe_get(uint64_t rows, uint32_t n, uint64_t seed0, const zen_universe **out)
{
    *out = NULL;
    pthread_mutex_lock(&cache_lock);
    int free_slot = -1;
    for (int s = 0; s < CACHE_SLOTS; s++) {
        zen_universe *u = cache[s].u;
        if (u && u->rows == rows && u->n == n && u->seed0 == seed0) {
            cache[s].refs++;
            cache[s].last_use = ++cache_clock;
            pthread_mutex_unlock(&cache_lock);
            *out = u;
            return ZEN_OK;
        }
        if (!u && free_slot < 0)
            free_slot = s;
    }
    if (free_slot < 0) {
        for (int s = 0; s < CACHE_SLOTS; s++)
            if (cache[s].refs == 0 &&
                (free_slot < 0 || cache[s].last_use < cache[free_slot].last_use))
                free_slot = s;
        if (free_slot >= 0) {
            zen__universe_free(cache[free_slot].u);
            cache[free_slot].u = NULL;
        }
    }
    /* built under the lock: ranks of one world asking for the same entry wait for one build */
    zen_universe *u = NULL;
    zen_status st = build_offsets(rows, n, seed0, &u);
    if (st == ZEN_OK && free_slot >= 0) {
        cache[free_slot].u = u;
        cache[free_slot].refs = 1;
        cache[free_slot].last_use = ++cache_clock;
    }
    pthread_mutex_unlock(&cache_lock);
    *out = u;
    return st;
}

void zen__universe_put(const zen_universe *u)
{
    if (!u)
        return;
    pthread_mutex_lock(&cache_lock);
    for (int s = 0; s < CACHE_SLOTS; s++) {
        if (cache[s].u == u) {
            cache[s].refs--;
            pthread_mutex_unlock(&cache_lock);
            return;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    zen__universe_free((zen_universe *)u); /* an uncached private copy */
}
