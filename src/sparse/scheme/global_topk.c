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
 *            an allgather of each owner's count of T; owner j keeps its share of the wanted
 *            ones in proportion to its count (tie_quota), by ascending index.
 * Every owner sees the same sums, so all take the same decisions without further messages.
 * Bytes on the wire: 5 allreduces of 512 B then 256 B (i32 bins; i64 when rows >= 2^31), each
 * ~2x its size per rank, and one allgather of 8 bytes per rank: ~3 KB per rank at 8 ranks
 * (measured: tests/test_sparse_global_topk.c), small beside the pull it shrinks from the union
 * (up to n k rows) to k rows of 8 bytes. Smaller digits would trade bytes for rounds (latency).
 * A round ends the select early when its boundary bin fits exactly (always in round 1 when the
 * sum has at most k non-zeros).
 */
#include "sparse/scheme/global_topk.h"

#include <string.h>

#include "coll/comm_internal.h"
#include "common/alloc.h"

#define TOPK_MAX_BINS 128

static uint32_t key_of(float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return b & 0x7fffffffu;
}

/* The rule every owner applies at the end: keep the non-zero keys >= lo, and up to quota keys
 * == tie (lo = tie + 1 then). */
typedef struct topk_rule {
    uint64_t lo;
    uint32_t tie;
    uint64_t quota;
} topk_rule;

/* Sum the owners' bins (count of them, i32 or i64 on the wire) into sum[]. */
static zen_status sum_bins(zen_comm *comm, int wide, const uint64_t *mine, uint64_t *sum, int count)
{
    if (wide)
        return zen_allreduce(comm, mine, sum, (size_t)count, ZEN_I64, ZEN_SUM);
    int32_t a[TOPK_MAX_BINS], b[TOPK_MAX_BINS];
    for (int i = 0; i < count; i++)
        a[i] = (int32_t)mine[i];
    zen_status st = zen_allreduce(comm, a, b, (size_t)count, ZEN_I32, ZEN_SUM);
    for (int i = 0; i < count && st == ZEN_OK; i++)
        sum[i] = (uint32_t)b[i];
    return st;
}

/* Ties: this owner's share of the wanted keys equal to tie. Shares proportional to the owners'
 * counts keep the pull balanced (a prefix over ranks gave rank 0 every tie: pull imbalance 2.1 on
 * small-integer data at 8 ranks): owner j gets floor(want c_j / C), and the remainder goes one
 * each to the first owners in rank order that have a tie left over. */
static zen_status tie_quota(zen_sparse_ctx *ctx, const zen_coo *agg, topk_rule *r, uint64_t want)
{
    zen_comm *comm = ctx->comm;
    int n = comm->size;
    uint64_t mine = 0;
    for (size_t i = 0; i < agg->nnz; i++)
        mine += key_of(agg->val[i]) == r->tie;
    uint64_t *all = zen__malloc_array((size_t)n, sizeof *all);
    if (!all)
        return zen__fail(comm, ZEN_ENOMEM, "sparse global top-k: out of memory for %d counts", n);
    zen_status st = zen_allgather(comm, &mine, all, 1, ZEN_I64);
    uint64_t total = 0, given = 0;
    for (int j = 0; j < n; j++)
        total += all[j];
    if (st == ZEN_OK && total <= want) /* cannot happen: the rounds left more ties than want */
        st = zen__fail(comm, ZEN_EPROTO, "sparse global top-k: %llu ties for %llu places",
                       (unsigned long long)total, (unsigned long long)want);
    /* counts and want are below 2^32 (rows < 2^32), so the products fit */
    for (int j = 0; j < n && st == ZEN_OK; j++)
        given += want * all[j] / total;
    r->quota = st == ZEN_OK ? want * mine / total : 0;
    for (int j = 0; j < n && st == ZEN_OK && given < want; j++)
        if (want * all[j] / total < all[j]) {
            given++;
            r->quota += j == comm->rank;
        }
    zen__free(all);
    return st;
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
    return tie_quota(ctx, agg, r, want);
}

zen_status zen__sparse_global_topk(zen_sparse_ctx *ctx, zen_coo *agg, size_t k)
{
    topk_rule r;
    zen_status st = select_rule(ctx, agg, k, &r);
    if (st != ZEN_OK)
        return st;
    size_t out = 0;
    uint64_t ties = 0;
    for (size_t i = 0; i < agg->nnz; i++) {
        uint32_t key = key_of(agg->val[i]);
        int keep = key != 0 && key >= r.lo;
        if (!keep && key == r.tie && key != 0 && ties < r.quota) {
            keep = 1;
            ties++;
        }
        if (keep) {
            agg->idx[out] = agg->idx[i];
            agg->val[out] = agg->val[i];
            out++;
        }
    }
    agg->nnz = out;
    return ZEN_OK;
}
