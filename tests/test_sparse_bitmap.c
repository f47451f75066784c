/* Hash-bitmap / COO / gap-coded pull encoding: round trips, format choice, and rejection of
 * malformed blobs and gap streams. */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "sparse/wire/bitmap.h"
#include "sparse/wire/coo.h"
#include "sparse/wire/gap.h"
#include "sparse/wire/universe.h"
#include "testutil.h"

static const uint64_t seed0 = 0xabcdef12345ull;

/* Owner j's sum: every member of U_j kept with probability 1/every, values (t + 1, -(t + 1)). */
static void make_sum(const uint32_t *U, size_t ulen, size_t every, uint32_t w, zen_coo *sum,
                     uint64_t *rng)
{
    zen__coo_reset(sum, sum->rows, w);
    assert_int_equal(zen__coo_reserve(sum, ulen ? ulen : 1), ZEN_OK);
    size_t m = 0;
    for (size_t t = 0; t < ulen; t++) {
        if (zt_rand(rng) % every != 0)
            continue;
        sum->idx[m] = U[t];
        for (uint32_t c = 0; c < w; c++)
            sum->val[m * w + c] = (float)(c % 2 ? -(double)(t + 1) : (double)(t + 1));
        m++;
    }
    sum->nnz = m;
}

static void roundtrip(const zen_universe *u, uint32_t j, size_t every, uint32_t w, uint64_t *rng)
{
    const uint32_t *U = u->members + u->offsets[j];
    size_t ulen = u->offsets[j + 1] - u->offsets[j];
    zen_coo sum = { u->rows, w, 0, 0, NULL, NULL }, back = { u->rows, w, 0, 0, NULL, NULL };
    make_sum(U, ulen, every, w, &sum, rng);
    uint32_t format;
    size_t bytes;
    assert_int_equal(zen__hb_plan(&sum, ulen, &format, &bytes), ZEN_OK);
    size_t bm = zen__hb_bitmap_bytes(ulen, sum.nnz, w), co = zen__hb_coo_bytes(sum.nnz, w);
    assert_int_equal(bytes, bm < co ? bm : co);
    assert_int_equal(format, co < bm ? ZEN_HB_COO : ZEN_HB_BITMAP);
    const uint32_t formats[] = { ZEN_HB_BITMAP, ZEN_HB_COO, ZEN_HB_GAP };
    for (int fi = 0; fi < 3; fi++) { /* every format decodes the same */
        uint32_t f = formats[fi];
        size_t b = f == ZEN_HB_COO ? co : f == ZEN_HB_GAP ? zen__hb_gap_bytes(&sum) : bm;
        assert_true(b % 4 == 0);
        void *blob = malloc(b);
        assert_int_equal(zen__hb_encode(&sum, u, j, f, blob, b), ZEN_OK);
        assert_int_equal(zen__hb_decode_coo(blob, b, u, j, w, 1.0f, &back), ZEN_OK);
        assert_int_equal(back.nnz, sum.nnz);
        assert_memory_equal(back.idx, sum.idx, sum.nnz * 4 + 0);
        assert_memory_equal(back.val, sum.val, sum.nnz * w * 4 + 0);
        float *dense = calloc(u->rows * w + 1, 4);
        assert_int_equal(zen__hb_decode_dense(blob, b, u, j, w, 2.0f, dense), ZEN_OK);
        size_t k = 0;
        for (uint64_t i = 0; i < u->rows; i++)
            for (uint32_t c = 0; c < w; c++) {
                float want = 0;
                if (k < sum.nnz && sum.idx[k] == i)
                    want = sum.val[k * w + c] / 2.0f;
                assert_true(dense[i * w + c] == want);
                if (k < sum.nnz && sum.idx[k] == i && c == w - 1)
                    k++;
            }
        free(dense);
        free(blob);
    }
    zen__coo_release(&sum);
    zen__coo_release(&back);
}

static void test_roundtrip(void **state)
{
    (void)state;
    uint64_t rng = 4;
    uint64_t rows_list[] = { 1, 63, 64, 65, 1000, 40000 };
    for (size_t a = 0; a < 6; a++)
        for (uint32_t n = 1; n <= 5; n += 2) {
            zen_universe *u;
            assert_int_equal(zen__universe_build(rows_list[a], n, seed0, &u), ZEN_OK);
            for (uint32_t j = 0; j < n; j++)
                for (size_t every = 1; every <= 1000; every *= 10) {
                    roundtrip(u, j, every, 1, &rng);
                    roundtrip(u, j, every, 8, &rng);
                }
            zen__universe_free(u);
        }
}

static void test_index_not_owned(void **state)
{
    (void)state;
    zen_universe *u;
    assert_int_equal(zen__universe_build(100, 3, seed0, &u), ZEN_OK);
    uint32_t foreign = u->members[u->offsets[1]]; /* owned by 1, encoded by 0 */
    zen_coo sum = { 100, 1, 1, 1, &foreign, (float[]){ 1.0f } };
    size_t ulen = u->offsets[1];
    uint32_t format;
    size_t bytes;
    assert_int_equal(zen__hb_plan(&sum, ulen, &format, &bytes), ZEN_OK);
    unsigned char blob[64];
    assert_int_equal(
        zen__hb_encode(&sum, u, 0, ZEN_HB_BITMAP, blob, zen__hb_bitmap_bytes(ulen, 1, 1)),
        ZEN_EPROTO);
    assert_int_equal(zen__hb_encode(&sum, u, 0, ZEN_HB_COO, blob, zen__hb_coo_bytes(1, 1)),
                     ZEN_EPROTO);
    /* the owner's own index encodes */
    uint32_t own = u->members[0];
    sum.idx = &own;
    assert_int_equal(zen__hb_encode(&sum, u, 0, ZEN_HB_COO, blob, zen__hb_coo_bytes(1, 1)), ZEN_OK);
    zen__universe_free(u);
}

static void put32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static void test_malformed(void **state)
{
    (void)state;
    zen_universe *u;
    assert_int_equal(zen__universe_build(300, 2, seed0, &u), ZEN_OK);
    const uint32_t *U = u->members;
    size_t ulen = u->offsets[1]; /* owner 0 */
    assert_true(ulen > 70 && ulen % 64 != 0);
    size_t words = (ulen + 63) / 64;
    unsigned char b[2048];
    size_t count;
    float *dense = calloc(300, 4);
    zen_coo out = { 300, 1, 0, 0, NULL, NULL };
    /* a valid bitmap blob with bits 0 and ulen - 1 */
    memset(b, 0, sizeof b);
    put32(b, ZEN_HB_BITMAP);
    put32(b + 4, 2);
    b[8] = 1;
    b[8 + (ulen - 1) / 8] |= (unsigned char)(1u << ((ulen - 1) % 8));
    size_t good = 8 + 8 * words + 8;
    assert_int_equal(zen__hb_check(b, good, u, 0, 1, &count), ZEN_OK);
    assert_int_equal(count, 2);
    assert_int_equal(zen__hb_decode_coo(b, good, u, 0, 1, 1.0f, &out), ZEN_OK);
    assert_int_equal(out.idx[0], U[0]);
    assert_int_equal(out.idx[1], U[ulen - 1]);
    /* wrong lengths, a truncated header, a wrong width, a wrong owner, no universe */
    assert_int_equal(zen__hb_check(b, good - 4, u, 0, 1, &count), ZEN_EPROTO);
    assert_int_equal(zen__hb_check(b, good + 4, u, 0, 1, &count), ZEN_EPROTO);
    assert_int_equal(zen__hb_check(b, 7, u, 0, 1, &count), ZEN_EPROTO);
    assert_int_equal(zen__hb_check(b, good, u, 0, 2, &count), ZEN_EPROTO);
    assert_int_equal(zen__hb_check(b, good, u, 2, 1, &count), ZEN_EPROTO);
    assert_int_equal(zen__hb_check(b, good, NULL, 0, 1, &count), ZEN_EPROTO);
    assert_int_equal(zen__hb_check(NULL, 0, u, 0, 1, &count), ZEN_EPROTO);
    /* popcount disagreeing with count */
    put32(b + 4, 3);
    assert_int_equal(zen__hb_check(b, good + 4, u, 0, 1, &count), ZEN_EPROTO);
    put32(b + 4, 2);
    /* a bit past the universe */
    b[8] = 0;
    b[8 + ulen / 8] |= (unsigned char)(1u << (ulen % 8));
    assert_int_equal(zen__hb_check(b, good, u, 0, 1, &count), ZEN_EPROTO);
    assert_int_equal(zen__hb_decode_dense(b, good, u, 0, 1, 1.0f, dense), ZEN_EPROTO);
    /* unknown format, count above the universe */
    put32(b, 7);
    assert_int_equal(zen__hb_check(b, good, u, 0, 1, &count), ZEN_EPROTO);
    put32(b, ZEN_HB_COO);
    put32(b + 4, (uint32_t)ulen + 1);
    assert_int_equal(zen__hb_check(b, 8 + (ulen + 1) * 8, u, 0, 1, &count), ZEN_EPROTO);
    /* COO rows: valid, then repeated, decreasing, out of range, owned by someone else */
    put32(b + 4, 3);
    put32(b + 8, U[0]);
    put32(b + 12, U[5]);
    put32(b + 16, U[ulen - 1]);
    assert_int_equal(zen__hb_check(b, 32, u, 0, 1, &count), ZEN_OK);
    assert_int_equal(zen__hb_decode_coo(b, 32, u, 0, 1, 1.0f, &out), ZEN_OK);
    assert_int_equal(out.nnz, 3);
    assert_int_equal(out.idx[2], U[ulen - 1]);
    put32(b + 12, U[0]);
    assert_int_equal(zen__hb_check(b, 32, u, 0, 1, &count), ZEN_EPROTO);
    put32(b + 12, U[5]);
    put32(b + 16, U[4]);
    assert_int_equal(zen__hb_check(b, 32, u, 0, 1, &count), ZEN_EPROTO);
    put32(b + 16, 300);
    assert_int_equal(zen__hb_check(b, 32, u, 0, 1, &count), ZEN_EPROTO);
    put32(b + 16, u->members[u->offsets[2] - 1]); /* owner 1's last row */
    assert_true(u->members[u->offsets[2] - 1] > U[5]);
    assert_int_equal(zen__hb_check(b, 32, u, 0, 1, &count), ZEN_EPROTO);
    assert_int_equal(zen__hb_decode_dense(b, 32, u, 0, 1, 1.0f, dense), ZEN_EPROTO);
    /* a huge count with a width that would overflow the size computation */
    put32(b + 4, (uint32_t)ulen);
    assert_int_equal(zen__hb_check(b, 32, u, 0, UINT32_MAX, &count), ZEN_EPROTO);
    for (int i = 0; i < 300; i++)
        assert_true(dense[i] == 0.0f); /* failed decodes wrote nothing */
    zen__coo_release(&out);
    free(dense);
    zen__universe_free(u);
}

/* The gap codec: a round trip over gaps of every varint length, then streams it refuses. */
static void test_gap_codec(void **state)
{
    (void)state;
    const uint32_t idx[] = { 5, 6, 133, 16517, 2113669, 270549125, 0xfffffffeu };
    unsigned char s[64];
    size_t c = sizeof idx / sizeof idx[0], used;
    /* gaps from 5: 0, 0, 126, 16383, 2097151, 2^28 - 1 + ..., one of each length */
    assert_int_equal(zen__gap_bytes(idx, c, 5), 1 + 1 + 1 + 2 + 3 + 4 + 5);
    assert_int_equal(zen__gap_encode(idx, c, 5, s), 17);
    uint32_t back[8];
    assert_int_equal(zen__gap_decode(s, 17, c, 5, 0xffffffffu, back, &used), ZEN_OK);
    assert_int_equal(used, 17);
    assert_memory_equal(back, idx, sizeof idx);
    /* truncated; an index reaching the bound; a bound past 2^32 does not let it wrap */
    assert_int_equal(zen__gap_decode(s, 16, c, 5, 0xffffffffu, back, &used), ZEN_EPROTO);
    assert_int_equal(zen__gap_decode(s, 17, c, 5, 0xfffffffeu, back, &used), ZEN_EPROTO);
    assert_int_equal(zen__gap_decode(s, 17, c, 7, (uint64_t)1 << 40, back, &used), ZEN_EPROTO);
    /* a sixth continuation byte, and a 5-byte varint above 2^32 */
    unsigned char over[6] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 };
    assert_int_equal(zen__gap_decode(over, 6, 1, 0, (uint64_t)1 << 40, back, &used), ZEN_EPROTO);
    unsigned char big[5] = { 0xff, 0xff, 0xff, 0xff, 0x1f };
    assert_int_equal(zen__gap_decode(big, 5, 1, 0, (uint64_t)1 << 40, back, &used), ZEN_EPROTO);
    assert_int_equal(zen__gap_decode(big, 5, 0, 0, 1, back, &used), ZEN_OK);
    assert_int_equal(used, 0);
}

/* GAP blobs: a valid one, then padding, length, ownership and stream errors. */
static void test_gap_malformed(void **state)
{
    (void)state;
    zen_universe *u;
    assert_int_equal(zen__universe_build(300, 2, seed0, &u), ZEN_OK);
    const uint32_t *U = u->members;
    size_t ulen = u->offsets[1], count;
    uint32_t rows3[3] = { U[0], U[5], U[ulen - 1] };
    float vals[3] = { 1, -2, 3 };
    zen_coo sum = { 300, 1, 3, 3, rows3, vals }, out = { 300, 1, 0, 0, NULL, NULL };
    size_t len = zen__hb_gap_bytes(&sum);
    unsigned char b[64];
    assert_true(len <= sizeof b && len == 8 + 12 + ((zen__gap_bytes(rows3, 3, 0) + 3) & ~3u));
    assert_int_equal(zen__hb_encode(&sum, u, 0, ZEN_HB_GAP, b, len), ZEN_OK);
    assert_int_equal(zen__hb_check(b, len, u, 0, 1, &count), ZEN_OK);
    assert_int_equal(zen__hb_decode_coo(b, len, u, 0, 1, 1.0f, &out), ZEN_OK);
    assert_memory_equal(out.idx, rows3, sizeof rows3);
    assert_memory_equal(out.val, vals, sizeof vals);
    size_t stream = zen__gap_bytes(rows3, 3, 0);
    /* the wrong length either way; the wrong owner; the wrong encode size */
    assert_int_equal(zen__hb_check(b, len - 4, u, 0, 1, &count), ZEN_EPROTO);
    assert_int_equal(zen__hb_check(b, len + 4, u, 0, 1, &count), ZEN_EPROTO);
    assert_int_equal(zen__hb_check(b, len, u, 1, 1, &count), ZEN_EPROTO);
    assert_int_equal(zen__hb_encode(&sum, u, 0, ZEN_HB_GAP, b, len + 4), ZEN_EINVAL);
    if (stream % 4 != 0) { /* padding that is not zero */
        b[8 + 12 + stream] = 1;
        assert_int_equal(zen__hb_check(b, len, u, 0, 1, &count), ZEN_EPROTO);
        b[8 + 12 + stream] = 0;
    }
    /* a gap that lands on a row owner 0 does not own, or past the rows */
    uint32_t foreign[3] = { U[0], U[5], u->members[u->offsets[2] - 1] };
    sum.idx = foreign;
    assert_int_equal(zen__hb_encode(&sum, u, 0, ZEN_HB_GAP, b, zen__hb_gap_bytes(&sum)),
                     ZEN_EPROTO);
    put32(b, ZEN_HB_GAP); /* hand-made: the foreign row's gap after U[5] */
    put32(b + 4, 3);
    size_t at = 20 + zen__gap_encode(foreign, 3, 0, b + 20);
    memset(b + at, 0, 4);
    size_t flen = (at + 3) & ~(size_t)3;
    assert_int_equal(zen__hb_check(b, flen, u, 0, 1, &count), ZEN_EPROTO);
    foreign[2] = 300;
    at = 20 + zen__gap_encode(foreign, 3, 0, b + 20);
    memset(b + at, 0, 4);
    assert_int_equal(zen__hb_check(b, (at + 3) & ~(size_t)3, u, 0, 1, &count), ZEN_EPROTO);
    zen__coo_release(&out);
    zen__universe_free(u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),     cmocka_unit_test(test_index_not_owned),
        cmocka_unit_test(test_malformed),     cmocka_unit_test(test_gap_codec),
        cmocka_unit_test(test_gap_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
