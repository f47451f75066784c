/* The large-block cache behind zen__malloc/zen__free (src/common/alloc.c): a freed large block is
 * handed to the next request it fits, zen__calloc still returns zeros, a growing realloc moves into
 * a kept block with its contents, small requests and requests far smaller than a kept block are not
 * served from it, and the entry limit holds. */
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

static void test_cap_and_entry_limit(void **state)
{
    (void)state;
    SKIP_UNDER_ASAN();
    zen__alloc_cache_trim();
    /* 40 blocks of 8 MiB freed: the cache keeps at most 256 MiB and 16 entries, the rest is
     * released; every one of them can still be allocated and freed again. */
    void *p[40];
    for (int i = 0; i < 40; i++) {
        p[i] = zen__malloc(8 * MiB);
        assert_non_null(p[i]);
        memset(p[i], i, 4096);
    }
    for (int i = 0; i < 40; i++)
        zen__free(p[i]);
    int reused = 0;
    for (int i = 0; i < 40; i++) {
        void *q = zen__malloc(8 * MiB);
        assert_non_null(q);
        for (int j = 0; j < 40; j++)
            reused += q == p[j];
        p[i] = q;
    }
    assert_true(reused <= 16);
    for (int i = 0; i < 40; i++)
        zen__free(p[i]);
    zen__alloc_cache_trim();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_block_reused),
        cmocka_unit_test(test_small_and_fresh_requests_untouched),
        cmocka_unit_test(test_cap_and_entry_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
