/*
 * LSD radix sort of u32 keys carrying a u32 payload (the key's original position), used to
 * coalesce sparse tensors. Stable, so duplicate keys keep their input order and their values are
 * summed in a deterministic order.
 */
#ifndef ZEN_SPARSE_RADIX_SORT_H
#define ZEN_SPARSE_RADIX_SORT_H

#include <stddef.h>
#include <stdint.h>

#include <zen/zen.h>

/*
 * Sort keys[0..n) ascending, permuting pos alongside. max_key bounds the keys (passes whose digit
 * is constant are skipped, so small key ranges need fewer passes). On return keys/pos are sorted
 * in place. Needs 8 * n bytes of scratch; ZEN_ENOMEM when that allocation fails.
 */
zen_status zen__radix_sort_kv(uint32_t *keys, uint32_t *pos, size_t n, uint32_t max_key);

#endif
