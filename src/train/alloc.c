#include "alloc.h"

#include <stdlib.h>

/* count * size in *bytes, at least 1 (malloc(0) may return NULL); 0 when it overflows. */
static int array_bytes(size_t count, size_t size, size_t *bytes)
{
    if (__builtin_mul_overflow(count, size, bytes))
        return 0;
    if (*bytes == 0)
        *bytes = 1;
    return 1;
}

void *zen_train_malloc_array(size_t count, size_t size)
{
    size_t bytes;
    return array_bytes(count, size, &bytes) ? malloc(bytes) : NULL;
}

void *zen_train_calloc(size_t count, size_t size)
{
    size_t bytes;
    return array_bytes(count, size, &bytes) ? calloc(1, bytes) : NULL;
}

void *zen_train_realloc_array(void *ptr, size_t count, size_t size)
{
    size_t bytes;
    return array_bytes(count, size, &bytes) ? realloc(ptr, bytes) : NULL;
}
