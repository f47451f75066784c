/*
 * LSD radix sort with 11-bit digits: at most 3 passes over 32-bit keys, fewer when the key range
 * is small (a 1M-row table needs 2). One read pass builds all digit histograms; each scatter
 * pass then moves (key, pos) pairs between the caller's arrays and a scratch copy. Stability of
 * every pass makes the whole sort stable.
 */
#include "sparse/wire/radix_sort.h"

#include <string.h>

#include "common/alloc.h"

#define DIGIT_BITS 11
#define DIGIT_SIZE (1u << DIGIT_BITS)
#define MAX_PASSES 3

/* Insertion sort for tiny inputs, where histogram set-up would dominate. */
static void insertion_sort(uint32_t *keys, uint32_t *pos, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint32_t k = keys[i], p = pos[i];
        size_t j = i;
        while (j > 0 && keys[j - 1] > k) {
            keys[j] = keys[j - 1];
            pos[j] = pos[j - 1];
            j--;
        }
        keys[j] = k;
        pos[j] = p;
    }
}

zen_status zen__radix_sort_kv(uint32_t *keys, uint32_t *pos, size_t n, uint32_t max_key)
{
    if (n < 64) {
        insertion_sort(keys, pos, n);
        return ZEN_OK;
    }
    int passes = 0;
    while (passes < MAX_PASSES && (passes == 0 || (max_key >> (DIGIT_BITS * passes)) != 0))
        passes++;
    size_t *hist = zen__calloc((size_t)MAX_PASSES * DIGIT_SIZE, sizeof *hist);
    uint32_t *tmp = zen__malloc_array(n, 2 * sizeof *tmp);
    if (!hist || !tmp) {
        zen__free(hist);
        zen__free(tmp);
        return ZEN_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k = keys[i];
        for (int p = 0; p < passes; p++)
            hist[(size_t)p * DIGIT_SIZE + ((k >> (DIGIT_BITS * p)) & (DIGIT_SIZE - 1))]++;
    }
    uint32_t *src_k = keys, *src_p = pos, *dst_k = tmp, *dst_p = tmp + n;
    for (int p = 0; p < passes; p++) {
        size_t *h = hist + (size_t)p * DIGIT_SIZE;
        /* a digit shared by every key leaves the order unchanged: skip the pass */
        if (h[(src_k[0] >> (DIGIT_BITS * p)) & (DIGIT_SIZE - 1)] == n)
            continue;
        size_t sum = 0;
        for (uint32_t d = 0; d < DIGIT_SIZE; d++) {
            size_t c = h[d];
            h[d] = sum;
            sum += c;
        }
        int shift = DIGIT_BITS * p;
        for (size_t i = 0; i < n; i++) {
            uint32_t k = src_k[i];
            size_t at = h[(k >> shift) & (DIGIT_SIZE - 1)]++;
            dst_k[at] = k;
            dst_p[at] = src_p[i];
        }
        uint32_t *t = src_k;
        src_k = dst_k;
        dst_k = t;
        t = src_p;
        src_p = dst_p;
        dst_p = t;
    }
    if (src_k != keys) {
        memcpy(keys, src_k, n * sizeof *keys);
        memcpy(pos, src_p, n * sizeof *pos);
    }
    zen__free(hist);
    zen__free(tmp);
    return ZEN_OK;
}
