/*
 * Hash-bitmap encode/decode (format in bitmap.h).
 *
 * Bitmap encoding maps every aggregated index x to its position t in the sorted universe U_j.
 * Both the sum and U_j are ascending and the bitmap is only chosen when at least ~1/32 of U_j is
 * non-zero, so the position is found by searching forward from the previous one within a short
 * window (branch-free, see seek), with a galloping search for the rare long gap. COO blobs carry
 * the indices themselves: encoding them needs no universe lookup at all (which matters for huge,
 * very sparse tensors whose universes do not fit any cache), only the cheap ownership check
 * h0(x) = j.
 * Decoding walks the set bits word by word (count-trailing-zeros) and maps t back to U_j[t].
 */
#include "sparse/wire/bitmap.h"

#include <string.h>

#include "common/checked.h"
#include "sparse/wire/coo.h"
#include "sparse/wire/gap.h"
#include "sparse/wire/hier_hash.h"
#include "sparse/wire/xchg.h"

#define MAX_WINDOW_BLOCKS 8
#define LINEAR_STEPS      8

size_t zen__hb_bitmap_bytes(size_t ulen, size_t c, uint32_t w)
{
    return ZEN_HB_HEADER_BYTES + 8 * ((ulen + 63) / 64) + 4 * c * (size_t)w;
}

size_t zen__hb_coo_bytes(size_t c, uint32_t w)
{
    return ZEN_HB_HEADER_BYTES + 4 * c + 4 * c * (size_t)w;
}

size_t zen__hb_plain_bytes(uint64_t rows, size_t c, uint32_t w)
{
    return ZEN_HB_HEADER_BYTES + 8 * (size_t)((rows + 63) / 64) + 4 * c * (size_t)w;
}

static size_t round4(size_t bytes)
{
    return (bytes + 3) & ~(size_t)3;
}

size_t zen__hb_gap_bytes(const zen_coo *sum)
{
    return ZEN_HB_HEADER_BYTES + 4 * sum->nnz * (size_t)sum->width +
           round4(zen__gap_bytes(sum->idx, sum->nnz, 0));
}

static uint32_t load_u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t load_u64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Smallest t >= from with U[t] >= x (ulen when none). U is sorted, and the caller sizes a window
 * of `blocks` blocks of 8 members to a few times the mean gap between the sum's indices, so the
 * common case has no data-dependent branch: the last members of the window's blocks say how
 * many whole blocks lie below x, and three halving steps find x in its block. A longer gap (or
 * the end of U) takes a few linear steps and then a galloping search. */
static size_t seek(const uint32_t *U, size_t ulen, size_t from, uint32_t x, size_t blocks)
{
    size_t t = from;
    if (t + 8 * blocks <= ulen) {
        size_t skip = 0;
        for (size_t b = 0; b < blocks; b++)
            skip += U[t + 8 * b + 7] < x;
        if (skip < blocks) {
            t += 8 * skip;
            t += (size_t)(U[t + 3] < x) << 2;
            t += (size_t)(U[t + 1] < x) << 1;
            return t + (U[t] < x);
        }
        t += 8 * blocks;
    }
    for (int k = 0; k < LINEAR_STEPS && t < ulen && U[t] < x; k++)
        t++;
    if (t == ulen || U[t] >= x)
        return t;
    size_t lo = t + 1, hi = t + 1, step = 1;
    while (hi < ulen && U[hi] < x) {
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    if (hi > ulen)
        hi = ulen;
    return lo + zen__lower_bound_u32(U + lo, hi - lo, x);
}

static size_t universe_len(const zen_universe *u, uint32_t j)
{
    return u->offsets[j + 1] - u->offsets[j];
}

zen_status zen__hb_plan(const zen_coo *sum, size_t ulen, uint32_t *format, size_t *bytes)
{
    if (ulen >= UINT32_MAX || sum->nnz > ulen)
        return ZEN_EPROTO;
    size_t b = zen__hb_bitmap_bytes(ulen, sum->nnz, sum->width);
    size_t c = zen__hb_coo_bytes(sum->nnz, sum->width);
    *format = c < b ? ZEN_HB_COO : ZEN_HB_BITMAP;
    *bytes = c < b ? c : b;
    return ZEN_OK;
}

zen_status zen__hb_plan_format(const zen_coo *sum, size_t ulen, int pull_format, uint32_t *format,
                               size_t *bytes)
{
    zen_status st = zen__hb_plan(sum, ulen, format, bytes);
    if (st != ZEN_OK || pull_format == ZEN_SPARSE_PULL_AUTO)
        return st;
    if (pull_format == ZEN_SPARSE_PULL_HASH_BITMAP) {
        *format = ZEN_HB_BITMAP;
        *bytes = zen__hb_bitmap_bytes(ulen, sum->nnz, sum->width);
    } else if (pull_format == ZEN_SPARSE_PULL_COO) {
        *format = ZEN_HB_COO;
        *bytes = zen__hb_coo_bytes(sum->nnz, sum->width);
    } else if (pull_format == ZEN_SPARSE_PULL_PLAIN_BITMAP) {
        *format = ZEN_HB_PLAIN;
        *bytes = zen__hb_plain_bytes(sum->rows, sum->nnz, sum->width);
    } else {
        return ZEN_EINVAL;
    }
    return ZEN_OK;
}

/* Every index of sum is a row of the tensor owned by j. One hash per index; the verdicts are
 * or-ed so the loop has no data-dependent exit. */
static int all_owned(const zen_coo *sum, const zen_universe *u, uint32_t j)
{
    const uint32_t *xs = sum->idx, n = u->n;
    const uint64_t rows = u->rows, seed0 = u->seed0;
    uint32_t bad = 0;
    for (size_t i = 0; i < sum->nnz; i++)
        bad |= (uint32_t)(xs[i] >= rows) | (zen_hh_owner(xs[i], seed0, n) ^ j);
    return bad == 0;
}

zen_status zen__hb_encode(const zen_coo *sum, const zen_universe *u, uint32_t j, uint32_t format,
                          void *blob, size_t bytes)
{
    size_t c = sum->nnz;
    uint32_t w = sum->width;
    if (j >= u->n)
        return ZEN_EINVAL;
    size_t ulen = universe_len(u, j);
    size_t want = format == ZEN_HB_COO     ? zen__hb_coo_bytes(c, w)
                  : format == ZEN_HB_PLAIN ? zen__hb_plain_bytes(u->rows, c, w)
                  : format == ZEN_HB_GAP   ? zen__hb_gap_bytes(sum)
                                           : zen__hb_bitmap_bytes(ulen, c, w);
    if (bytes != want ||
        (format != ZEN_HB_COO && format != ZEN_HB_BITMAP && format != ZEN_HB_PLAIN &&
         format != ZEN_HB_GAP) ||
        (format == ZEN_HB_BITMAP && !zen__universe_has_members(u)))
        return ZEN_EINVAL;
    unsigned char *p = blob;
    uint32_t hdr[2] = { format, (uint32_t)c };
    memcpy(p, hdr, sizeof hdr);
    p += sizeof hdr;
    if (format == ZEN_HB_GAP) { /* values first, then the indices' gaps and zero padding */
        if (!all_owned(sum, u, j))
            return ZEN_EPROTO;
        if (c > 0)
            memcpy(p, sum->val, c * w * sizeof(float));
        p += 4 * c * (size_t)w;
        size_t used = zen__gap_encode(sum->idx, c, 0, p);
        memset(p + used, 0, round4(used) - used);
        return ZEN_OK;
    }
    if (format == ZEN_HB_COO) {
        if (!all_owned(sum, u, j))
            return ZEN_EPROTO;
        if (c > 0)
            memcpy(p, sum->idx, 4 * c);
        p += 4 * c;
    } else if (format == ZEN_HB_PLAIN) {
        if (!all_owned(sum, u, j))
            return ZEN_EPROTO;
        size_t words = (size_t)((u->rows + 63) / 64);
        memset(p, 0, 8 * words);
        for (size_t i = 0; i < c; i++)
            p[sum->idx[i] / 8] |= (unsigned char)(1u << (sum->idx[i] % 8));
        p += 8 * words;
    } else {
        const uint32_t *U = u->members + u->offsets[j];
        size_t words = (ulen + 63) / 64, t = 0;
        /* a window of about four mean gaps: few seeks fall outside it, few compares are spent */
        size_t blocks = c ? (4 * ulen / c + 7) / 8 : 1;
        blocks = blocks < 1 ? 1 : blocks > MAX_WINDOW_BLOCKS ? MAX_WINDOW_BLOCKS : blocks;
        memset(p, 0, 8 * words);
        for (size_t i = 0; i < c; i++) {
            t = seek(U, ulen, t, sum->idx[i], blocks);
            if (t == ulen || U[t] != sum->idx[i])
                return ZEN_EPROTO;
            p[t / 8] |= (unsigned char)(1u << (t % 8)); /* LSB-first bytes = LSB-first words */
            t++;
        }
        p += 8 * words;
    }
    if (c > 0)
        memcpy(p, sum->val, c * w * sizeof(float));
    return ZEN_OK;
}

/* A plain bitmap (after the header at p): the right length, c bits set, each a row < rows that
 * j owns. */
static zen_status check_plain(const unsigned char *p, size_t len, const zen_universe *u, uint32_t j,
                              uint32_t c, size_t vbytes)
{
    size_t words = (size_t)((u->rows + 63) / 64), set = 0;
    if (len != ZEN_HB_HEADER_BYTES + 8 * words + vbytes)
        return ZEN_EPROTO;
    for (size_t q = 0; q < words; q++) {
        uint64_t v = load_u64(p + 8 * q);
        while (v) {
            uint64_t x = q * 64 + (uint64_t)__builtin_ctzll(v);
            if (x >= u->rows || zen_hh_owner((uint32_t)x, u->seed0, u->n) != j || ++set > c)
                return ZEN_EPROTO;
            v &= v - 1;
        }
    }
    return set == c ? ZEN_OK : ZEN_EPROTO;
}

/* A GAP blob (after the header at p): c varints after the values, each a row < rows that j
 * owns (ascending by construction), then zero padding to the blob's whole 4-byte length. */
static zen_status check_gap(const unsigned char *p, size_t len, const zen_universe *u, uint32_t j,
                            uint32_t c, size_t vbytes)
{
    if (len < ZEN_HB_HEADER_BYTES + vbytes)
        return ZEN_EPROTO;
    const unsigned char *gaps = p + vbytes;
    size_t glen = len - ZEN_HB_HEADER_BYTES - vbytes, at = 0;
    uint64_t next = 0;
    for (uint32_t i = 0; i < c; i++) {
        uint32_t x;
        if (zen__gap_next(gaps, glen, &at, &next, u->rows, &x) != ZEN_OK ||
            zen_hh_owner(x, u->seed0, u->n) != j)
            return ZEN_EPROTO;
    }
    if (round4(at) != glen)
        return ZEN_EPROTO;
    for (; at < glen; at++)
        if (gaps[at] != 0)
            return ZEN_EPROTO;
    return ZEN_OK;
}

zen_status zen__hb_check(const void *blob, size_t len, const zen_universe *u, uint32_t j,
                         uint32_t w, size_t *count)
{
    const unsigned char *p = blob;
    if (!blob || !u || j >= u->n || len < ZEN_HB_HEADER_BYTES || w == 0)
        return ZEN_EPROTO;
    size_t ulen = universe_len(u, j);
    uint32_t format = load_u32(p), c = load_u32(p + 4);
    if (c > ulen)
        return ZEN_EPROTO;
    size_t vbytes;
    if (zen_mul_overflow((size_t)c * 4, w, &vbytes) || vbytes > len)
        return ZEN_EPROTO;
    p += ZEN_HB_HEADER_BYTES;
    if (format == ZEN_HB_BITMAP) {
        size_t words = (ulen + 63) / 64;
        if (len != ZEN_HB_HEADER_BYTES + 8 * words + vbytes)
            return ZEN_EPROTO;
        size_t set = 0;
        for (size_t k = 0; k < words; k++) {
            uint64_t v = load_u64(p + 8 * k);
            if (k == words - 1 && (ulen % 64) != 0 && (v >> (ulen % 64)) != 0)
                return ZEN_EPROTO; /* a bit past the end of the universe */
            set += (size_t)__builtin_popcountll(v);
        }
        if (set != c)
            return ZEN_EPROTO;
    } else if (format == ZEN_HB_PLAIN) {
        if (check_plain(p, len, u, j, c, vbytes) != ZEN_OK)
            return ZEN_EPROTO;
    } else if (format == ZEN_HB_GAP) {
        if (check_gap(p, len, u, j, c, vbytes) != ZEN_OK)
            return ZEN_EPROTO;
    } else if (format == ZEN_HB_COO) {
        if (len != ZEN_HB_HEADER_BYTES + 4 * (size_t)c + vbytes)
            return ZEN_EPROTO;
        for (size_t i = 0; i < c; i++) {
            uint32_t x = load_u32(p + 4 * i);
            if (x >= u->rows || (i > 0 && x <= load_u32(p + 4 * (i - 1))) ||
                zen_hh_owner(x, u->seed0, u->n) != j)
                return ZEN_EPROTO;
        }
    } else {
        return ZEN_EPROTO;
    }
    *count = c;
    return ZEN_OK;
}

/* Call visit(k, row index, value row) for each row of a checked blob, in ascending order. */
typedef void (*row_visit)(void *ctx, size_t k, uint32_t x, const unsigned char *vals);

static void walk(const unsigned char *p, size_t len, const zen_universe *u, uint32_t j, uint32_t w,
                 row_visit visit, void *ctx)
{
    uint32_t format = load_u32(p), c = load_u32(p + 4);
    p += ZEN_HB_HEADER_BYTES;
    size_t row_bytes = 4 * (size_t)w, k = 0;
    if (format == ZEN_HB_BITMAP || format == ZEN_HB_PLAIN) {
        /* hash bitmap: bit t is member t of U_j; plain: bit x is row x */
        const uint32_t *U = format == ZEN_HB_BITMAP ? u->members + u->offsets[j] : NULL;
        size_t words = format == ZEN_HB_BITMAP ? (universe_len(u, j) + 63) / 64
                                               : (size_t)((u->rows + 63) / 64);
        const unsigned char *vals = p + 8 * words;
        for (size_t q = 0; q < words; q++) {
            uint64_t v = load_u64(p + 8 * q);
            while (v) {
                size_t t = q * 64 + (size_t)__builtin_ctzll(v);
                visit(ctx, k, U ? U[t] : (uint32_t)t, vals + k * row_bytes);
                k++;
                v &= v - 1;
            }
        }
    } else if (format == ZEN_HB_GAP) { /* checked: every varint decodes */
        const unsigned char *gaps = p + (size_t)c * row_bytes;
        size_t at = 0;
        uint64_t next = 0;
        for (k = 0; k < c; k++) {
            uint32_t x = 0;
            (void)zen__gap_next(gaps, len - ZEN_HB_HEADER_BYTES - (size_t)c * row_bytes, &at, &next,
                                u->rows, &x);
            visit(ctx, k, x, p + k * row_bytes);
        }
    } else {
        const unsigned char *vals = p + 4 * (size_t)c;
        for (k = 0; k < c; k++)
            visit(ctx, k, load_u32(p + 4 * k), vals + k * row_bytes);
    }
}

typedef struct dense_sink {
    uint32_t w;
    float divisor;
    float *dense;
} dense_sink;

/* One decoded row: its values, divided for AVG. */
static void store_row(float *dst, const unsigned char *vals, uint32_t w, float divisor)
{
    memcpy(dst, vals, 4 * (size_t)w);
    if (divisor != 1.0f)
        for (uint32_t c = 0; c < w; c++)
            dst[c] /= divisor;
}

/* What both decoders require: a well-formed blob, and the owner's members for a bitmap. */
static zen_status check_decodable(const void *blob, size_t len, const zen_universe *u, uint32_t j,
                                  uint32_t w, size_t *count)
{
    zen_status st = zen__hb_check(blob, len, u, j, w, count);
    if (st == ZEN_OK && load_u32(blob) == ZEN_HB_BITMAP && !zen__universe_has_members(u))
        return ZEN_EINVAL; /* the caller must call zen__universe_members first */
    return st;
}

static void visit_dense(void *ctx, size_t k, uint32_t x, const unsigned char *vals)
{
    (void)k;
    dense_sink *s = ctx;
    store_row(s->dense + (size_t)x * s->w, vals, s->w, s->divisor);
}

zen_status zen__hb_decode_dense(const void *blob, size_t len, const zen_universe *u, uint32_t j,
                                uint32_t w, float divisor, float *dense)
{
    size_t c;
    zen_status st = check_decodable(blob, len, u, j, w, &c);
    if (st != ZEN_OK)
        return st;
    dense_sink s = { w, divisor, dense };
    walk(blob, len, u, j, w, visit_dense, &s);
    return ZEN_OK;
}

typedef struct coo_sink {
    float divisor;
    zen_coo *out;
} coo_sink;

static void visit_coo(void *ctx, size_t k, uint32_t x, const unsigned char *vals)
{
    coo_sink *s = ctx;
    s->out->idx[k] = x;
    store_row(s->out->val + k * s->out->width, vals, s->out->width, s->divisor);
}

zen_status zen__hb_decode_coo(const void *blob, size_t len, const zen_universe *u, uint32_t j,
                              uint32_t w, float divisor, zen_coo *out)
{
    size_t c;
    zen_status st = check_decodable(blob, len, u, j, w, &c);
    if (st != ZEN_OK)
        return st;
    zen__coo_reset(out, out->rows, w);
    if ((st = zen__coo_reserve(out, c)) != ZEN_OK)
        return st;
    coo_sink s = { divisor, out };
    walk(blob, len, u, j, w, visit_coo, &s);
    out->nnz = c;
    return ZEN_OK;
}
