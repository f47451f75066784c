/*
 * Global top-k (global_topk.h): a radix select of the magnitude threshold across owners.
 *
 * The key of a value is its float bits without the sign: for non-NaN floats it orders like the
 * magnitude, and 0 means an exact zero (never kept). The 31 key bits are decided from the top in
 * up to 5 rounds (digits of 7, 6, 6, 6, 6 bits):
 *   round    every owner counts its keys that match the prefix decided so far into 2^bits bins by
 *            their next digit; one dense allreduce (sum) of the bins; walking the bins from the
 *            top, the boundary bin is the one where the count above plus the bin reaches the
 *            number still wanted. If it reaches it exactly, everything from that bin up is kept
 *            and the select ends; otherwise the bins above are kept and the next round refines
 *            the boundary bin.
 *   ties     after the last round the boundary is one exact key T with more holders than wanted:
 *            the same select again, over the holders of T, on a fixed bijective mix of the row
 *            index (zen_mix32: 4 rounds of 8-bit digits, smallest first), keeps the wanted number
 *            with the smallest mixed index. Which rows win then depends only on the rows, not
 *            on which owner holds them: BALANCED's owners follow the communicator's random hash
 *            seed, and a rule by owner (the counts' shares this replaced) made two runs of the
 *            same training differ at the first tie (a +x and a -x summed at the boundary,
 *            `zen train --topk-global` at 8 ranks). The mix spreads the winners over the index
 *            space, so PS's range owners share them as evenly as hashed ones.
 * Every owner sees the same sums, so all take the same decisions without further messages.
 * Bytes on the wire: 5 allreduces of 512 B then 256 B (i32 bins; i64 when rows >= 2^31), each
 * ~2x its size per rank, and with a tie 4 more of 1 KB: ~3-11 KB per rank at 8 ranks
 * (measured: tests/test_sparse_global_topk.c), small beside the pull it shrinks from the union
 * (up to n k rows) to k rows of 8 bytes. Smaller digits would trade bytes for rounds (latency).
 * A round ends the select early when its boundary bin fits exactly (always in round 1 when the
 * sum has at most k non-zeros).
 */
#include "sparse/scheme/global_topk.h"

#include <string.h>

#include "coll/comm_internal.h"
#include "common/hash.h"

#define TOPK_MAX_BINS 256

static uint32_t key_of(float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return b & 0x7fffffffu;
}

/* The rule every owner applies at the end: keep the non-zero keys >= lo, and the keys == tie
 * whose zen_mix32(row) <= order_max (lo = tie + 1 then; no tie: tie 0, which is never kept).
 * zen_mix32 is a fixed bijection of 32-bit rows (unseeded: the same in every run), so distinct
 * rows never share an order and the orders spread over [0, 2^32) whatever the rows. */
typedef struct topk_rule {
    uint64_t lo;
    uint32_t tie;
    uint32_t order_max;
} topk_rule;

/* Sum the owners' bins (count of them, i32 or i64 on the wire) into sum[]. */
static zen_status sum_bins(zen_comm *comm, int wide, const uint64_t *mine, uint64_t *sum, int count)
{
    if (wide)
        return zen_allreduce(comm, mine, sum, (size_t)count, ZEN_I64, ZEN_SUM);
    int32_t a[TOPK_MAX_BINS] = { 0 }, b[TOPK_MAX_BINS]; /* zeroed: gcc cannot see count > 0 */
    for (int i = 0; i < count; i++)
        a[i] = (int32_t)mine[i];
    zen_status st = zen_allreduce(comm, a, b, (size_t)count, ZEN_I32, ZEN_SUM);
    for (int i = 0; i < count && st == ZEN_OK; i++)
        sum[i] = (uint32_t)b[i];
    return st;
}

/* Ties: of the rows holding the key r->tie (more than want in all), keep the want of smallest
 * zen_mix32(row), by the same radix select over those orders' 32 bits, smallest digits first. The
 * rows are distinct (each on one owner), so the last round's bins hold one row each and it always
 * ends exact. */
static zen_status tie_rule(zen_sparse_ctx *ctx, const zen_coo *agg, topk_rule *r, uint64_t want)
{
    int wide = agg->rows >= ((uint64_t)1 << 31);
    uint64_t mine[TOPK_MAX_BINS], sum[TOPK_MAX_BINS];
    uint64_t prefix = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        memset(mine, 0, sizeof mine);
        for (size_t i = 0; i < agg->nnz; i++) {
            if (key_of(agg->val[i]) != r->tie)
                continue;
            uint32_t order = zen_mix32(agg->idx[i]);
            if (((uint64_t)order >> (shift + 8)) == prefix)
                mine[(order >> shift) & 255u]++;
        }
        zen_status st = sum_bins(ctx->comm, wide, mine, sum, 256);
        if (st != ZEN_OK)
            return st;
        uint64_t below = 0;
        int b = 0;
        while (b < 255 && below + sum[b] < want)
            below += sum[b++];
        uint64_t edge = (prefix << 8) | (uint64_t)b;
        if (below + sum[b] < want) /* cannot happen: more than want hold the tie */
            return zen__fail(ctx->comm, ZEN_EPROTO, "sparse global top-k: ties ran out");
        if (below + sum[b] == want) {
            r->order_max = (uint32_t)(((edge + 1) << shift) - 1);
            return ZEN_OK;
        }
        if (shift == 0) /* cannot happen: distinct rows, one per last bin */
            return zen__fail(ctx->comm, ZEN_EPROTO,
                             "sparse global top-k: %llu rows share one tie order",
                             (unsigned long long)sum[b]);
        want -= below;
        prefix = edge;
    }
    return zen__fail(ctx->comm, ZEN_EINTERNAL, "sparse global top-k: tie select did not end");
}

/* The radix rounds: fill *r with the rule that keeps exactly min(k, non-zeros) keys in all. */
static zen_status select_rule(zen_sparse_ctx *ctx, const zen_coo *agg, size_t k, topk_rule *r)
{
    static const int digit_bits[] = { 7, 6, 6, 6, 6 };
    int wide = agg->rows >= ((uint64_t)1 << 31);
    uint64_t mine[TOPK_MAX_BINS], sum[TOPK_MAX_BINS], want = k;
    uint32_t prefix = 0; /* key bits decided so far, above shift + bits */
    int shift = 31;
    *r = (topk_rule){ 1, 0, 0 }; /* every non-zero */
    for (int round = 0; round < 5; round++) {
        int bits = digit_bits[round], bins = 1 << bits;
        shift -= bits;
        memset(mine, 0, sizeof mine);
        for (size_t i = 0; i < agg->nnz; i++) {
            uint32_t key = key_of(agg->val[i]);
            if (key != 0 && (key >> (shift + bits)) == prefix)
                mine[(key >> shift) & (uint32_t)(bins - 1)]++;
        }
        zen_status st = sum_bins(ctx->comm, wide, mine, sum, bins);
        if (st != ZEN_OK)
            return st;
        uint64_t above = 0;
        int b = bins - 1;
        while (b >= 0 && above + sum[b] < want)
            above += sum[b--];
        if (b < 0) /* at most k non-zeros in all (only possible in round 0): keep them all */
            return ZEN_OK;
        uint32_t edge = (prefix << bits) | (uint32_t)b;
        if (above + sum[b] == want) { /* the boundary bin fits whole */
            r->lo = (uint64_t)edge << shift;
            return ZEN_OK;
        }
        want -= above;
        prefix = edge;
    }
    /* prefix is one exact key with more holders than the want left */
    r->tie = prefix;
    r->lo = (uint64_t)prefix + 1;
    return tie_rule(ctx, agg, r, want);
}

zen_status zen__sparse_global_topk(zen_sparse_ctx *ctx, zen_coo *agg, size_t k)
{
    topk_rule r;
    zen_status st = select_rule(ctx, agg, k, &r);
    if (st != ZEN_OK)
        return st;
    size_t out = 0;
    for (size_t i = 0; i < agg->nnz; i++) {
        uint32_t key = key_of(agg->val[i]);
        int keep =
            key != 0 && (key >= r.lo || (key == r.tie && zen_mix32(agg->idx[i]) <= r.order_max));
        if (keep) {
            agg->idx[out] = agg->idx[i];
            agg->val[out] = agg->val[i];
            out++;
        }
    }
    agg->nnz = out;
    return ZEN_OK;
}
