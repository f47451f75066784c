/*
 * The trainer's heap: libc's malloc family with the checks the trainer relies on. Array sizes come
 * from model and corpus dimensions, so a product that overflows size_t must fail (NULL, which the
 * caller turns into ZEN_ENOMEM) instead of allocating a wrapped-around small block; a request for
 * zero elements gets a valid block, so NULL always means failure. Everything is released with
 * free().
 *
 * The trainer does not use libzen's allocator: that one is internal to the library (it keeps
 * large freed blocks for the next collective, see docs/architecture.md, Memory), and the trainer
 * is a program on the public API. Blocks the library hands out (sparse results) are ordinary
 * malloc blocks, released through the library's own _free functions.
 */
#ifndef ZEN_TRAIN_ALLOC_H
#define ZEN_TRAIN_ALLOC_H

#include <stddef.h>

/* malloc(count * size); NULL when the product overflows or memory is short. */
void *zen_train_malloc_array(size_t count, size_t size);

/* calloc(count, size): zeroed; NULL when the product overflows or memory is short. */
void *zen_train_calloc(size_t count, size_t size);

/* realloc(ptr, count * size); NULL (ptr untouched and still owned by the caller) when the product
 * overflows or memory is short. */
void *zen_train_realloc_array(void *ptr, size_t count, size_t size);

#endif
