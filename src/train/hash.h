/*
 * The trainer's hashes: a 64-bit mixer for the batch order and the sampler, FNV-1a 64 for the
 * checksums of its files. Their values are part of what the trainer promises: the token cache
 * and checkpoints carry FNV-1a sums (docs/training.md), and a seed names one batch order, so a
 * run repeats exactly. They are the trainer's own (it uses libzen's public API only); the
 * library keeps its hashes internal because they partition its wire data, not a user's files.
 */
#ifndef ZEN_TRAIN_HASH_H
#define ZEN_TRAIN_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The output function of splitmix64 (Steele, Lea, Flood, OOPSLA 2014): every output bit depends
 * on every input bit. */
static inline uint64_t zen_train_mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* key hashed under seed: mix(key ^ mix(seed + golden ratio)). */
static inline uint64_t zen_train_hash64(uint64_t key, uint64_t seed)
{
    return zen_train_mix64(key ^ zen_train_mix64(seed + 0x9e3779b97f4a7c15ull));
}

#define ZEN_TRAIN_FNV_BASIS 0xcbf29ce484222325ull /* FNV-1a 64 offset basis */

/* FNV-1a 64 continued from state h over len bytes: a sum written in pieces starts from
 * ZEN_TRAIN_FNV_BASIS and passes each piece through. */
static inline uint64_t zen_train_fnv1a_update(uint64_t h, const void *data, size_t len)
{
    const unsigned char *byte = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ byte[i]) * 0x100000001b3ull; /* FNV-1a 64 prime */
    return h;
}

/* FNV-1a 64 of len bytes with the basis xor-ed with seed (a different sum per kind of record). */
static inline uint64_t zen_train_fnv1a(const void *data, size_t len, uint64_t seed)
{
    return zen_train_fnv1a_update(ZEN_TRAIN_FNV_BASIS ^ seed, data, len);
}

#endif
