/*
 * All heap allocation in src/ goes through these, so that allocation failures can be injected in
 * tests (zen__alloc_fail_after) and every failure becomes ZEN_ENOMEM instead of a crash.
 */
#ifndef ZEN_COMMON_ALLOC_H
#define ZEN_COMMON_ALLOC_H

#include <stddef.h>

void *zen__malloc(size_t bytes);
void *zen__calloc(size_t count, size_t size);
void *zen__realloc(void *ptr, size_t bytes);
void zen__free(void *ptr);

/* Like zen__malloc(count * size) but fails (NULL) when the product overflows. */
void *zen__malloc_array(size_t count, size_t size);

/* Duplicate a string (NULL for NULL or on failure). */
char *zen__strdup(const char *s);

/* Free the large blocks that zen__free keeps for reuse (see alloc.c; ZEN_ALLOC_CACHE_MB). */
void zen__alloc_cache_trim(void);

/* Tests: the blocks the cache holds now and their bytes. */
void zen__alloc_cache_stats(int *blocks, size_t *bytes);

/* Tests: make the k-th allocation from now fail (k >= 1); 0 disables. Process-wide. */
void zen__alloc_fail_after(long k);

#endif
