/* The block cache behind zen__malloc/zen__free (src/common/alloc.c): a freed block is handed to
 * the next request it fits, the smallest that fits first, zen__calloc still returns zeros, a
 * growing realloc moves into a kept block with its contents or grows within its rounded block,
 * small requests and requests far smaller than a kept block are not served from it, and the entry
 * limit holds. */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)

#if defined(__SANITIZE_ADDRESS__)
#define SKIP_UNDER_ASAN() skip() /* the cache is off there, so that use-after-free is caught */
#else
#define SKIP_UNDER_ASAN() (void)0
#endif

static void test_large_block_reused(void **state)
{
    (void)state;
    SKIP_UNDER_ASAN();
    zen__alloc_cache_trim();
    char *a = zen__malloc(4 * MiB);
    assert_non_null(a);
    memset(a, 0x5a, 4 * MiB);
    zen__free(a);
    char *b = zen__malloc(3 * MiB); /* fits, wastes less than half */
    assert_ptr_equal(a, b);
    zen__free(b);
    char *c = zen__calloc(3, MiB); /* the same block, zeroed */
    assert_ptr_equal(a, c);
    for (size_t i = 0; i < 3 * MiB; i += 4093)
        assert_int_equal(c[i], 0);
    zen__free(c);
    char *d = zen__malloc(MiB / 2); /* would use an eighth of it: a fresh block */
    assert_ptr_not_equal(a, d);
    zen__free(d);
    zen__alloc_cache_trim();
}

/* Two kept blocks, 2 MiB and 4 MiB (the larger freed last), and requests of 1.5 MiB, which both
 * fit, then 3 MiB: the first takes the 2 MiB block, so the second is served too. Most recently
 * freed first, the 1.5 MiB request took the 4 MiB block and the 3 MiB one went to glibc. */
static void test_smallest_fitting_block_first(void **state)
{
    (void)state;
    SKIP_UNDER_ASAN();
    zen__alloc_cache_trim();
    char *small = zen__malloc(2 * MiB), *large = zen__malloc(4 * MiB);
    assert_non_null(small);
    assert_non_null(large);
    zen__free(small);
    zen__free(large);
    char *a = zen__malloc(3 * MiB / 2), *b = zen__malloc(3 * MiB);
    assert_ptr_equal(a, small);
    assert_ptr_equal(b, large);
    zen__free(a);
    zen__free(b);
    zen__alloc_cache_trim();
}

static void test_small_and_fresh_requests_untouched(void **state)
{
    (void)state;
    SKIP_UNDER_ASAN();
    zen__alloc_cache_trim();
    char *big = zen__malloc(2 * MiB);
    zen__free(big);
    char *small = zen__malloc(1000); /* below the cache's minimum: never from it */
    assert_ptr_not_equal(small, big);
    char *again = zen__realloc(NULL, 2 * MiB); /* realloc(NULL) is a malloc: served */
    assert_ptr_equal(again, big);
    memset(again, 7, 2 * MiB);
    char *other = zen__malloc(6 * MiB);
    zen__free(other);
    again = zen__realloc(again, 5 * MiB); /* growing takes the kept 6 MiB block, contents kept */
    assert_ptr_equal(again, other);
    for (size_t i = 0; i < 2 * MiB; i += 4093)
        assert_int_equal(again[i], 7);
    zen__free(again);
    zen__free(small);
    zen__alloc_cache_trim();
}

/* Allocate `count` blocks of `bytes` and free them all: the blocks and bytes the cache keeps of
 * them; then every one can be allocated and freed again. */
static void kept_after_freeing(int count, size_t bytes, int *blocks, size_t *kept)
{
    zen__alloc_cache_trim();
    void *p[300];
    for (int i = 0; i < count; i++) {
        p[i] = zen__malloc(bytes);
        assert_non_null(p[i]);
        memset(p[i], i, bytes < 4096 ? bytes : 4096);
    }
    for (int i = 0; i < count; i++)
        zen__free(p[i]);
    zen__alloc_cache_stats(blocks, kept);
    for (int i = 0; i < count; i++) {
        p[i] = zen__malloc(bytes);
        assert_non_null(p[i]);
    }
    for (int i = 0; i < count; i++)
        zen__free(p[i]);
    zen__alloc_cache_trim();
}

static void test_cap_and_entry_limit(void **state)
{
    (void)state;
    SKIP_UNDER_ASAN();
    /* The cache keeps at most 256 MiB (ZEN_ALLOC_CACHE_MB) and 256 entries, the rest is released.
     * 40 blocks of 8 MiB: the byte cap binds; 300 blocks of 128 KiB: the entry limit does. */
    int blocks;
    size_t kept;
    kept_after_freeing(40, 8 * MiB, &blocks, &kept);
    assert_true(kept <= 256 * MiB && kept > 256 * MiB - 9 * MiB);
    assert_true(blocks >= 30 && blocks <= 32);
    kept_after_freeing(300, 128 << 10, &blocks, &kept);
    assert_int_equal(blocks, 256);
    kept_after_freeing(100, 2 << 10, &blocks, &kept); /* below the 4 KiB minimum: none */
    assert_int_equal(blocks, 0);
}

/* A block from 64 KiB on is a power of two while the cache is on: a buffer that grows within it
 * (a merge output, round by round) stays where it is, contents and all; and a freed 32 KiB block
 * (above the 4 KiB minimum) serves the next request it fits. */
static void test_growth_in_place(void **state)
{
    (void)state;
    SKIP_UNDER_ASAN();
    zen__alloc_cache_trim();
    char *a = zen__malloc(600 << 10);
    assert_non_null(a);
    memset(a, 3, 600 << 10);
    char *b = zen__realloc(a, 1000 << 10);
    assert_ptr_equal(a, b);
    for (size_t i = 0; i < (600 << 10); i += 4093)
        assert_int_equal(b[i], 3);
    zen__free(b);
    int blocks;
    size_t kept;
    zen__alloc_cache_stats(&blocks, &kept);
    assert_int_equal(blocks, 1);
    assert_true(kept >= MiB); /* the whole power of two */
    zen__alloc_cache_trim();
    char *c = zen__malloc(32 << 10);
    zen__free(c);
    zen__alloc_cache_stats(&blocks, &kept);
    assert_int_equal(blocks, 1);
    assert_ptr_equal(zen__malloc(20 << 10), c);
    zen__free(c);
    zen__alloc_cache_trim();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_block_reused),
        cmocka_unit_test(test_smallest_fitting_block_first),
        cmocka_unit_test(test_small_and_fresh_requests_untouched),
        cmocka_unit_test(test_cap_and_entry_limit),
        cmocka_unit_test(test_growth_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
