/*
 * Hierarchical hashing (Algorithm 1) and owner universes: lossless partition, owners equal to
 * h0, balance on uniform and skewed inputs, serial-memory overflow, multi-threaded equivalence.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sparse/wire/hier_hash.h"
#include "sparse/wire/universe.h"
#include "testutil.h"

static const uint64_t seeds[4] = { 0x1234567890abcdefull, 0x0fedcba987654321ull, 3, 4 };

/* Every position appears exactly once, in the segment of its owner h0(idx). */
static void check_partition(const zen_hh_result *r, const uint32_t *idx, size_t nnz, uint32_t n)
{
    assert_int_equal(r->offsets[0], 0);
    assert_int_equal(r->offsets[n], nnz);
    unsigned char *seen = calloc(nnz + 1, 1);
    for (uint32_t j = 0; j < n; j++) {
        assert_true(r->offsets[j] <= r->offsets[j + 1]);
        for (size_t k = r->offsets[j]; k < r->offsets[j + 1]; k++) {
            uint32_t p = r->pos[k];
            assert_true(p < nnz);
            assert_int_equal(seen[p], 0);
            seen[p] = 1;
            assert_int_equal(zen_hh_owner(idx[p], seeds[0], n), j);
        }
    }
    free(seen);
}

static double imbalance(const zen_hh_result *r, uint32_t n)
{
    size_t max = 0, total = r->offsets[n];
    for (uint32_t j = 0; j < n; j++)
        if (r->offsets[j + 1] - r->offsets[j] > max)
            max = r->offsets[j + 1] - r->offsets[j];
    return (double)n * (double)max / (double)total;
}

static void partition(zen_hh_config *cfg, const uint32_t *idx, size_t nnz, zen_hh_result *r)
{
    assert_int_equal(zen__hh_partition(cfg, idx, nnz, r), ZEN_OK);
    check_partition(r, idx, nnz, cfg->nowners);
}

/* Unique sorted indices: uniform over rows, or all in the first 1% of rows, or Zipf-hot rows. */
static size_t make_indices(uint32_t *idx, size_t want, uint64_t rows, int kind, uint64_t *rng)
{
    size_t m = 0;
    if (kind == 1) { /* skew: the first 1% of the rows, densely */
        for (uint32_t i = 0; i < rows / 100 && m < want; i++)
            idx[m++] = i;
        return m;
    }
    unsigned char *used = calloc(rows, 1);
    while (m < want) {
        uint64_t x;
        if (kind == 0) {
            x = zt_rand(rng) % rows;
        } else { /* Zipf(1)-like: row ~ rows^u - 1 puts most picks on low rows */
            double u = (double)(zt_rand(rng) >> 11) / 9007199254740992.0;
            x = (uint64_t)(pow((double)rows, u)) - 1;
        }
        if (x < rows && !used[x]) {
            used[x] = 1;
            idx[m++] = (uint32_t)x;
        }
    }
    m = 0;
    for (uint64_t i = 0; i < rows; i++) /* sorted, as after coalescing */
        if (used[i])
            idx[m++] = (uint32_t)i;
    free(used);
    return m;
}

static void test_small_and_edges(void **state)
{
    (void)state;
    uint32_t idx[] = { 0, 1, 2, 3, 5, 8, 13, UINT32_MAX - 1 };
    for (uint32_t n = 1; n <= 17; n += 4) {
        zen_hh_config cfg = zen__hh_config_default(n, seeds);
        zen_hh_result r;
        for (size_t nnz = 0; nnz <= 8; nnz++) {
            partition(&cfg, idx, nnz, &r);
            zen__hh_result_free(&r);
        }
    }
    zen_hh_config bad = zen__hh_config_default(0, seeds);
    zen_hh_result r;
    assert_int_equal(zen__hh_partition(&bad, idx, 8, &r), ZEN_EINVAL);
}

static void test_balance(void **state)
{
    (void)state;
    const uint64_t rows = 20000000;
    const size_t nnz = 150000;
    uint32_t *idx = malloc(nnz * sizeof *idx);
    uint64_t rng = 77;
    for (int kind = 0; kind < 3; kind++) {
        size_t m =
            make_indices(idx, kind == 1 ? nnz : nnz, kind == 1 ? nnz * 100 : rows, kind, &rng);
        assert_true(m >= 100000);
        for (uint32_t n = 8; n <= 16; n *= 2) {
            zen_hh_config cfg = zen__hh_config_default(n, seeds);
            zen_hh_result r;
            partition(&cfg, idx, m, &r);
            double imb = imbalance(&r, n);
            print_message("kind %d n %u nnz %zu: imbalance %.4f, serial %zu (%.2f%%)\n", kind, n, m,
                          imb, r.serial_items, 100.0 * (double)r.serial_items / (double)m);
            assert_true(imb < 1.1);
            assert_true(r.serial_items < m / 10); /* k = 3 at load 0.5: about 3% */
            assert_int_equal(r.passes, 1);
            zen__hh_result_free(&r);
        }
    }
    free(idx);
}

/* Contrast: an even-range partition of the skewed input is badly imbalanced, h0 is not. */
static void test_skew_needs_hashing(void **state)
{
    (void)state;
    const size_t nnz = 100000;
    uint32_t *idx = malloc(nnz * sizeof *idx);
    uint64_t rng = 3;
    size_t m = make_indices(idx, nnz, nnz * 100, 1, &rng);
    size_t first = 0;
    for (size_t i = 0; i < m; i++)
        first += idx[i] < (nnz * 100) / 8;
    assert_true(first == m); /* all of it in the first of 8 even ranges */
    zen_hh_config cfg = zen__hh_config_default(8, seeds);
    zen_hh_result r;
    partition(&cfg, idx, m, &r);
    assert_true(imbalance(&r, 8) < 1.1);
    zen__hh_result_free(&r);
    free(idx);
}

static void test_serial_overflow(void **state)
{
    (void)state;
    const size_t nnz = 5000;
    uint32_t *idx = malloc(nnz * sizeof *idx);
    for (size_t i = 0; i < nnz; i++)
        idx[i] = (uint32_t)(i * 7);
    zen_hh_config cfg = zen__hh_config_default(4, seeds);
    cfg.slots_per_owner = 16; /* 64 slots for 5000 items: nearly all go serial */
    cfg.serial_per_owner = 2; /* and serial memory overflows many times */
    for (int threads = 1; threads <= 4; threads *= 4) {
        cfg.threads = threads;
        zen_hh_result r;
        partition(&cfg, idx, nnz, &r);
        assert_true(r.passes > 1);
        assert_true(r.serial_items >= nnz - 64);
        zen__hh_result_free(&r);
    }
    free(idx);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void test_threads_and_count_same_partition(void **state)
{
    (void)state;
    const size_t nnz = 200000;
    uint32_t *idx = malloc(nnz * sizeof *idx);
    uint64_t rng = 1;
    size_t m = make_indices(idx, nnz, 50000000, 0, &rng);
    zen_hh_config cfg = zen__hh_config_default(16, seeds);
    zen_hh_result ref;
    partition(&cfg, idx, m, &ref);
    for (size_t j = 0; j < 16; j++)
        qsort(ref.pos + ref.offsets[j], ref.offsets[j + 1] - ref.offsets[j], 4, cmp_u32);
    for (int variant = 0; variant < 3; variant++) {
        zen_hh_config c2 = cfg;
        c2.threads = variant == 0 ? 2 : variant == 1 ? 7 : 1;
        c2.method = variant == 2 ? ZEN_HH_COUNT : ZEN_HH_HASH;
        zen_hh_result r;
        partition(&c2, idx, m, &r);
        assert_memory_equal(r.offsets, ref.offsets, 17 * sizeof *r.offsets);
        for (size_t j = 0; j < 16; j++)
            qsort(r.pos + r.offsets[j], r.offsets[j + 1] - r.offsets[j], 4, cmp_u32);
        assert_memory_equal(r.pos, ref.pos, m * sizeof *r.pos);
        zen__hh_result_free(&r);
    }
    zen__hh_result_free(&ref);
    free(idx);
}

/* The counting partition (the CPU default) and Algorithm 1 (threads, the accelerator path) give
 * every position the same owner on many inputs: uniform, skewed and Zipf indices, repeated
 * indices, 1 to 33 owners, other slot seeds, and a tiny serial memory that forces Algorithm 1 to
 * re-pass. Compared as sets per owner, since the order inside an owner is the method's own. */
static void test_count_and_hash_same_owners_many(void **state)
{
    (void)state;
    const uint32_t owners[] = { 1, 2, 3, 5, 8, 16, 33 };
    const size_t sizes[] = { 0, 1, 17, 1000, 30000 };
    uint64_t rng = 77;
    for (int t = 0; t < 60; t++) {
        size_t want = sizes[t % 5];
        uint32_t n = owners[(size_t)t % 7];
        uint32_t *idx = malloc((want + 1) * sizeof *idx);
        size_t m = make_indices(idx, want, 4 * want + 1000, t % 3, &rng);
        if (t % 4 == 3) /* repeated indices: every other one copies its neighbour */
            for (size_t i = 1; i < m; i += 2)
                idx[i] = idx[i - 1];
        uint64_t sd[2] = { seeds[0], seeds[1] + (uint64_t)t }; /* check_partition uses seeds[0] */
        zen_hh_config hash = zen__hh_config_default(n, sd), count = hash;
        hash.serial_per_owner = t % 5 == 4 ? 1 : 0;
        count.method = ZEN_HH_COUNT;
        zen_hh_result a, b;
        partition(&hash, idx, m, &a);
        partition(&count, idx, m, &b);
        assert_memory_equal(a.offsets, b.offsets, (n + 1) * sizeof *a.offsets);
        for (uint32_t j = 0; j < n; j++) {
            qsort(a.pos + a.offsets[j], a.offsets[j + 1] - a.offsets[j], 4, cmp_u32);
            qsort(b.pos + b.offsets[j], b.offsets[j + 1] - b.offsets[j], 4, cmp_u32);
            for (size_t k = b.offsets[j]; k < b.offsets[j + 1]; k++)
                assert_int_equal(zen_hh_owner(idx[b.pos[k]], sd[0], n), j);
        }
        if (m)
            assert_memory_equal(a.pos, b.pos, m * sizeof *a.pos);
        zen__hh_result_free(&a);
        zen__hh_result_free(&b);
        free(idx);
    }
}

static void test_universe(void **state)
{
    (void)state;
    uint64_t rows_list[] = { 0, 1, 5, 1000, 100003 };
    for (size_t a = 0; a < 5; a++)
        for (uint32_t n = 1; n <= 16; n += 5) {
            uint64_t rows = rows_list[a];
            zen_universe *u;
            assert_int_equal(zen__universe_build(rows, n, seeds[0], &u), ZEN_OK);
            assert_int_equal(u->offsets[n], rows);
            unsigned char *seen = calloc(rows + 1, 1);
            for (uint32_t j = 0; j < n; j++)
                for (size_t t = u->offsets[j]; t < u->offsets[j + 1]; t++) {
                    uint32_t i = u->members[t];
                    assert_true(i < rows && !seen[i]);
                    seen[i] = 1;
                    assert_int_equal(zen_hh_owner(i, seeds[0], n), j);
                    if (t > u->offsets[j])
                        assert_true(u->members[t - 1] < i);
                }
            free(seen);
            zen__universe_free(u);
        }
    /* the cache hands out one shared entry per key and distinct ones for distinct keys */
    const zen_universe *a, *b, *c;
    assert_int_equal(zen__universe_get(5000, 4, seeds[0], &a), ZEN_OK);
    assert_int_equal(zen__universe_get(5000, 4, seeds[0], &b), ZEN_OK);
    assert_int_equal(zen__universe_get(5000, 5, seeds[0], &c), ZEN_OK);
    assert_ptr_equal(a, b);
    assert_ptr_not_equal(a, c);
    assert_int_equal(c->n, 5);
    /* members are built on demand, once, and match a complete build */
    assert_null(a->members);
    assert_int_equal(zen__universe_members(a), ZEN_OK);
    assert_non_null(a->members);
    const uint32_t *first = a->members;
    assert_int_equal(zen__universe_members(b), ZEN_OK);
    assert_ptr_equal(b->members, first);
    zen_universe *full;
    assert_int_equal(zen__universe_build(5000, 4, seeds[0], &full), ZEN_OK);
    assert_memory_equal(full->offsets, a->offsets, 5 * sizeof *a->offsets);
    assert_memory_equal(full->members, a->members, 5000 * sizeof *a->members);
    zen__universe_free(full);
    /* more distinct keys than cache slots while all are held: private copies, still correct */
    const zen_universe *many[8];
    for (int i = 0; i < 8; i++) {
        assert_int_equal(zen__universe_get(100 + (uint64_t)i, 3, seeds[0], &many[i]), ZEN_OK);
        assert_int_equal(many[i]->rows, 100 + (uint64_t)i);
    }
    for (int i = 0; i < 8; i++)
        zen__universe_put(many[i]);
    zen__universe_put(a);
    zen__universe_put(b);
    zen__universe_put(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_and_edges),
        cmocka_unit_test(test_balance),
        cmocka_unit_test(test_skew_needs_hashing),
        cmocka_unit_test(test_serial_overflow),
        cmocka_unit_test(test_threads_and_count_same_partition),
        cmocka_unit_test(test_count_and_hash_same_owners_many),
        cmocka_unit_test(test_universe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
