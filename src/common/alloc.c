#include "common/alloc.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/tunables.h"

static atomic_long fail_countdown;

void zen__alloc_fail_after(long k)
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

/*
 * A cache of freed blocks. Collectives allocate megabytes per call (receive buffers, merge
 * outputs, results handed to the caller) and free them soon after; glibc serves such sizes with
 * mmap or trims them off the heap top on free, so every call faulted in fresh zeroed pages. On the
 * 8-host sparse benchmark (docs/benchmarks.md) page faults, brk and munmap were over half of a
 * rank's CPU time. Freed blocks of at least BIG_MIN bytes are kept here (ZEN_ALLOC_CACHE_MB in
 * all, BIG_ENTRIES of them; 0 disables it) and handed back to a later request they fit at most
 * four times over: the smallest such block, most recently freed first among equals. They are
 * ordinary malloc blocks, so whoever gets one may free or realloc it as usual.
 *
 * The smallest, not the most recently freed as it was: then a small request took the block that
 * a larger one later in the same call needed, the larger one went to glibc for a new block, and
 * the cache filled one block per call. On 8 shm processes running HIERARCHICAL alone (200,000 x 4
 * rows at 10%) every rank took 20-120 page faults in each of calls 1-5 and those calls took
 * 2.2-4.5x the time of calls 6 on; smallest first, the faults end after call 2 and the slow calls
 * after call 3 (docs/benchmarks.md).
 *
 * BIG_MIN is 4 KiB, not the 64 KiB it was: a per-thread glibc arena trims its top by madvise
 * whenever a free leaves more than 128 KiB there, and the sparse schemes' smaller arrays (a
 * COO's indices, per-peer tables) did that on almost every call. While the cache is on, malloc
 * and realloc requests from ROUND_MIN to ROUND_MAX are rounded up to a power of two (calloc
 * keeps glibc's zeroed pages), so kept blocks come in few sizes and fit later requests, and a
 * buffer that grows round by round (HIERARCHICAL's merge output) stays in its block instead of
 * glibc moving it with mremap. On 4 inproc ranks replaying a width-128 trace (60 iterations of 5
 * calls, one scheme): page faults 20,000-26,000 before, about 9,000 after; per call ALLGATHER
 * 0.56-0.59 of its prediction before, 0.41-0.42 after, HIERARCHICAL 0.63-0.68 and 0.41-0.51 (two
 * runs each).
 */
#define BIG_MIN     ((size_t)4 << 10)
#define ROUND_MIN   ((size_t)64 << 10)
#define ROUND_MAX   ((size_t)64 << 20) /* beyond, a doubled block would waste too much */
#define BIG_ENTRIES 256

static struct {
    pthread_mutex_t lock;
    void *block[BIG_ENTRIES];
    size_t size[BIG_ENTRIES];
    int count;
    size_t bytes;
} big = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t big_once = PTHREAD_ONCE_INIT;
static size_t big_cap;

static void big_init(void)
{
    long mb = zen__param_long("ALLOC_CACHE_MB");
    big_cap = mb > 0 ? (size_t)mb << 20 : 0;
#if defined(__SANITIZE_ADDRESS__)
    big_cap = 0; /* a kept block would hide a use after free from AddressSanitizer */
#endif
}

static int cache_on(void)
{
    pthread_once(&big_once, big_init);
    return big_cap > 0;
}

static void *big_take(size_t bytes)
{
    if (bytes < BIG_MIN || !cache_on())
        return NULL;
    void *p = NULL;
    pthread_mutex_lock(&big.lock);
    int best = -1;
    for (int i = big.count - 1; i >= 0; i--) {
        if (big.size[i] < bytes || big.size[i] / 4 > bytes ||
            (best >= 0 && big.size[i] >= big.size[best]))
            continue;
        best = i;
        if (big.size[i] / 2 < bytes) /* within 2x: as close as power-of-two blocks come */
            break;
    }
    if (best >= 0) {
        p = big.block[best];
        big.bytes -= big.size[best];
        big.block[best] = big.block[big.count - 1];
        big.size[best] = big.size[big.count - 1];
        big.count--;
    }
    pthread_mutex_unlock(&big.lock);
    return p;
}

/* 1 when the cache kept ptr; evicts the oldest entries to make room. */
static int big_keep(void *ptr)
{
    size_t size = malloc_usable_size(ptr);
    if (size < BIG_MIN)
        return 0;
    pthread_once(&big_once, big_init);
    if (size > big_cap)
        return 0;
    void *evicted[BIG_ENTRIES];
    int nevicted = 0;
    pthread_mutex_lock(&big.lock);
    while (big.count > 0 && (big.count == BIG_ENTRIES || big.bytes + size > big_cap)) {
        evicted[nevicted++] = big.block[0];
        big.bytes -= big.size[0];
        memmove(big.block, big.block + 1, (size_t)(big.count - 1) * sizeof big.block[0]);
        memmove(big.size, big.size + 1, (size_t)(big.count - 1) * sizeof big.size[0]);
        big.count--;
    }
    big.block[big.count] = ptr;
    big.size[big.count] = size;
    big.count++;
    big.bytes += size;
    pthread_mutex_unlock(&big.lock);
    for (int i = 0; i < nevicted; i++)
        free(evicted[i]);
    return 1;
}

void zen__alloc_cache_trim(void)
{
    pthread_mutex_lock(&big.lock);
    int n = big.count;
    void *blocks[BIG_ENTRIES];
    memcpy(blocks, big.block, (size_t)n * sizeof blocks[0]);
    big.count = 0;
    big.bytes = 0;
    pthread_mutex_unlock(&big.lock);
    for (int i = 0; i < n; i++)
        free(blocks[i]);
}

void zen__alloc_cache_stats(int *blocks, size_t *bytes)
{
    pthread_mutex_lock(&big.lock);
    *blocks = big.count;
    *bytes = big.bytes;
    pthread_mutex_unlock(&big.lock);
}

/* What to ask glibc for: from ROUND_MIN to ROUND_MAX, a power of two while the cache is on. */
static size_t big_request(size_t bytes)
{
    if (bytes < ROUND_MIN || bytes > ROUND_MAX || !cache_on())
        return bytes ? bytes : 1;
    size_t r = ROUND_MIN;
    while (r < bytes)
        r <<= 1;
    return r;
}

void *zen__malloc(size_t bytes)
{
    if (injected_failure())
        return NULL;
    void *p = big_take(bytes);
    return p ? p : malloc(big_request(bytes));
}

void *zen__calloc(size_t count, size_t size)
{
    if (injected_failure())
        return NULL;
    if (count == 0 || size == 0)
        return calloc(1, 1);
    size_t bytes;
    void *p = __builtin_mul_overflow(count, size, &bytes) ? NULL : big_take(bytes);
    if (p)
        return memset(p, 0, bytes);
    return calloc(count, size);
}

void *zen__realloc(void *ptr, size_t bytes)
{
    if (injected_failure())
        return NULL;
    if (!ptr) {
        void *p = big_take(bytes);
        if (p)
            return p;
    } else if (bytes >= BIG_MIN) {
        /* Growing: a kept block has resident pages, which glibc's mremap growth would fault in
         * afresh; copying the old contents over is cheaper than those faults. */
        size_t have = malloc_usable_size(ptr);
        if (bytes <= have && cache_on()) /* off (ASan): glibc shrinks it, so overflows show */
            return ptr;
        void *p = big_take(bytes);
        if (p) {
            memcpy(p, ptr, have);
            zen__free(ptr);
            return p;
        }
    }
    return realloc(ptr, big_request(bytes));
}

void zen__free(void *ptr)
{
    if (ptr && big_keep(ptr))
        return;
    free(ptr);
}

void *zen__malloc_array(size_t count, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes))
        return NULL;
    return zen__malloc(bytes);
}

char *zen__strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t len = strlen(s) + 1;
    char *copy = zen__malloc(len);
    if (copy)
        memcpy(copy, s, len);
    return copy;
}
