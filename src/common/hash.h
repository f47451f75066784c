/*
 * Seeded 64-bit mixing hash used for data-independent partitioning (sparse owner function h0,
 * slot hashes h1..hk) and for context ids. It is the 64-bit finaliser construction (xor-shift and
 * odd-constant multiply rounds) applied to key ^ seed-derived value; every output bit depends on
 * every input bit, which is what balls-into-bins balance needs.
 */
#ifndef ZEN_COMMON_HASH_H
#define ZEN_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t zen_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* The same construction on 32 bits: a bijection of uint32_t (each round is invertible), so
 * distinct inputs never collide, and its outputs spread over [0, 2^32) whatever the inputs. */
static inline uint32_t zen_mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x9e3779b1u;
    x ^= x >> 15;
    x *= 0x85ebca77u;
    x ^= x >> 13;
    return x;
}

static inline uint64_t zen_hash64(uint64_t key, uint64_t seed)
{
    return zen_mix64(key ^ zen_mix64(seed + 0x9e3779b97f4a7c15ull));
}

/* Map a 64-bit hash to [0, n) without modulo bias worth caring about (Lemire's multiply-shift). */
static inline uint32_t zen_hash_range(uint64_t h, uint32_t n)
{
    return (uint32_t)(((h >> 32) * (uint64_t)n) >> 32);
}

/* FNV-1a over bytes: checksums of small headers and names. */
uint64_t zen__fnv1a(const void *data, size_t len, uint64_t seed);

#endif
