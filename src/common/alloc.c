#include "common/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long fail_countdown;

void zen_alloc_fail_after(long k)
{
    atomic_store(&fail_countdown, k);
}

static int injected_failure(void)
{
    long left = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    if (left <= 0)
        return 0;
    return atomic_fetch_sub(&fail_countdown, 1) == 1;
}

void *zen_malloc(size_t bytes)
{
    if (injected_failure())
        return NULL;
    return malloc(bytes ? bytes : 1);
}

void *zen_calloc(size_t count, size_t size)
{
    if (injected_failure())
        return NULL;
    if (count == 0 || size == 0)
        return calloc(1, 1);
    return calloc(count, size);
}

void *zen_realloc(void *ptr, size_t bytes)
{
    if (injected_failure())
        return NULL;
    return realloc(ptr, bytes ? bytes : 1);
}

void zen_free(void *ptr)
{
    free(ptr);
}

void *zen_malloc_array(size_t count, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes))
        return NULL;
    return zen_malloc(bytes);
}

char *zen_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t len = strlen(s) + 1;
    char *copy = zen_malloc(len);
    if (copy)
        memcpy(copy, s, len);
    return copy;
}
