/*
 * The trainer's own allocation and hash helpers (src/train/alloc.h, hash.h), which replaced
 * libzen's internal ones when the trainer moved onto the public API. The hashes must keep the
 * values of libzen's (the token cache, checkpoints and a seed's batch order depend on them), so
 * they are checked against libzen's implementation and against published FNV-1a vectors.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "testutil.h"
#include "train/alloc.h"
#include "train/hash.h"

static void test_fnv1a_vectors(void **state)
{
    (void)state;
    /* FNV-1a 64 of "", "a" and "foobar" (the test vectors of the FNV reference, seed 0) */
    assert_true(zen_train_fnv1a("", 0, 0) == 0xcbf29ce484222325ull);
    assert_true(zen_train_fnv1a("a", 1, 0) == 0xaf63dc4c8601ec8cull);
    assert_true(zen_train_fnv1a("foobar", 6, 0) == 0x85944171f73967e8ull);
    /* a sum written in pieces equals the sum of the whole */
    uint64_t h = zen_train_fnv1a_update(ZEN_TRAIN_FNV_BASIS, "foo", 3);
    assert_true(zen_train_fnv1a_update(h, "bar", 3) == 0x85944171f73967e8ull);
}

static void test_hashes_match_libzen(void **state)
{
    (void)state;
    unsigned char buf[257];
    uint64_t x = 12345;
    for (size_t i = 0; i < sizeof buf; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = (unsigned char)(x >> 56);
    }
    for (size_t len = 0; len <= sizeof buf; len += 16) {
        uint64_t seed = 0x746f6b68ull * len;
        assert_true(zen_train_fnv1a(buf, len, seed) == zen__fnv1a(buf, len, seed));
    }
    for (int i = 0; i < 1000; i++) {
        uint64_t key = (uint64_t)i * 0x9e3779b97f4a7c15ull, seed = (uint64_t)i ^ 0x6261746368ull;
        assert_true(zen_train_mix64(key) == zen_mix64(key));
        assert_true(zen_train_hash64(key, seed) == zen_hash64(key, seed));
    }
}

static void test_alloc_checks(void **state)
{
    (void)state;
    /* a product that overflows size_t fails instead of allocating a wrapped-around block */
    assert_null(zen_train_malloc_array(SIZE_MAX / 2 + 2, 2));
    assert_null(zen_train_calloc(SIZE_MAX / 2 + 2, 2));
    /* zero elements give a valid block, so NULL means failure */
    void *z = zen_train_malloc_array(0, 8), *c = zen_train_calloc(0, 8);
    assert_non_null(z);
    assert_non_null(c);
    free(z);
    free(c);

    int *a = zen_train_calloc(4, sizeof *a);
    assert_non_null(a);
    for (int i = 0; i < 4; i++)
        assert_int_equal(a[i], 0);
    a[3] = 7;
    /* a failed growth leaves the block to the caller, unchanged */
    assert_null(zen_train_realloc_array(a, SIZE_MAX / 2, sizeof *a));
    assert_int_equal(a[3], 7);
    int *b = zen_train_realloc_array(a, 1000, sizeof *b);
    assert_non_null(b);
    assert_int_equal(b[3], 7);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fnv1a_vectors),
        cmocka_unit_test(test_hashes_match_libzen),
        cmocka_unit_test(test_alloc_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
