/*
 * Hierarchical sparse sync across hosts (ZEN section 7.1, the structure the paper implies).
 *
 * With H hosts of L ranks, S = the smallest host's rank count row shards (shard j = rows
 * [lo(j), lo(j+1)) of an even split), M = rows * width:
 *   1. every rank densifies its tensor (rows x width floats) and the host reduce-scatters it:
 *      local rank j < S gets the host's sum of shard j; ranks j >= S (uneven hosts) get nothing;
 *   2. the ranks holding shard j on every host (the inter-host communicator of index j, H ranks)
 *      run the plan's scheme across hosts (opts->scheme; AUTO: the plan's pick, made before the
 *      push) on the shard's non-zero rows: the planner's step (plan/plan.c), between
 *      zen__sparse_hier_push and _pull here (validation and agreement ran once, in
 *      zen_sparse_allreduce, for the whole call);
 *   3. the host allgathers the S shard sums: first their non-zero counts, then either the COO
 *      entries or the dense shards, whichever is fewer bytes (the same choice on every rank).
 *
 *   4 ranks as 2 hosts x 2 (A0 A1 | B0 B1), rows split into shards s0 s1:
 *     1. A0 <-s1/s0-> A1 ; B0 <-s1/s0-> B1       A0 holds A's s0, A1 A's s1, ...
 *     2. A0 <--sparse s0--> B0 ; A1 <--sparse s1--> B1
 *     3. A0 <--s0/s1--> A1 ; B0 <--s0/s1--> B1   every rank holds s0 and s1 of the sum
 *
 * Bytes each rank sends: (L-1)/L * 4M (ring reduce-scatter) + the inner scheme's bytes on H ranks
 * over M/S elements + (L-1)/L of min(4M, result COO) (allgather). Memory: rows x width floats
 * (the caller's dense output when it has one) plus one shard.
 *
 * The host grouping is the communicator's (zen__comm_hosts: the transport's host table, the
 * launcher's, or emulated hosts of ranks_per_host). The sub-communicators are split at the first
 * hierarchical call and cached on the parent; a different grouping (another ranks_per_host)
 * splits again. Splits are collective over the
 * parent: every rank derives the same grouping, so they all split in the same call.
 */
#include "sparse/scheme/hier_host.h"

#include <string.h>

#include "coll/comm_internal.h"
#include "common/alloc.h"
#include "common/checked.h"
#include "common/clock.h"
#include "common/tunables.h"
#include "sparse/wire/xchg.h"

typedef struct hier_cache {
    uint64_t split_sig; /* grouping the children were split for (0: none) */
    zen_comm *intra;
    zen_comm *inter;  /* NULL on a rank whose index is >= the shard count */
    zen_comm_hosts g; /* grouping of the current call (set by zen__sparse_hier_group) */
} hier_cache;

static void cache_free(void *p)
{
    hier_cache *hc = p;
    if (!hc)
        return;
    zen_comm_destroy(hc->inter);
    zen_comm_destroy(hc->intra);
    zen__free(hc);
}

static hier_cache *cache_of(zen_comm *comm)
{
    hier_cache *hc = zen__comm_attr_get(comm, ZEN_ATTR_SPARSE_HIER);
    if (!hc) {
        hc = zen__calloc(1, sizeof *hc);
        if (hc)
            zen__comm_attr_set(comm, ZEN_ATTR_SPARSE_HIER, hc, cache_free);
    }
    return hc;
}

static int ranks_per_host(const zen_sparse_options *opts)
{
    long rph =
        opts->ranks_per_host > 0 ? opts->ranks_per_host : zen__param_long("SPARSE_RANKS_PER_HOST");
    return rph > 0 ? (rph > 0xffff ? 0xffff : (int)rph) : 0;
}

uint64_t zen__sparse_hier_mode(const zen_sparse_options *opts)
{
    return ((uint64_t)opts->hierarchy & 3) | (uint64_t)ranks_per_host(opts) << 2;
}

zen_status zen__sparse_hier_group(zen_sparse_ctx *ctx, const zen_comm_hosts **g)
{
    zen_comm *comm = ctx->comm;
    hier_cache *hc = cache_of(comm);
    if (!hc)
        return zen__fail(comm, ZEN_ENOMEM, "sparse hier: out of memory");
    /* the communicator's grouping (collective at its first use), or emulated hosts */
    zen_status st = zen__comm_hosts(comm, ranks_per_host(ctx->opts), &hc->g);
    if (st != ZEN_OK)
        return st;
    *g = &hc->g;
    ctx->stats->hosts = hc->g.hosts;
    return ZEN_OK;
}

/* Split (or reuse) the intra- and inter-host communicators for hc->g. Collective over comm. */
static zen_status ensure_children(zen_comm *comm, hier_cache *hc)
{
    if (hc->split_sig == hc->g.sig && hc->intra)
        return ZEN_OK;
    zen_comm_destroy(hc->inter);
    zen_comm_destroy(hc->intra);
    hc->inter = hc->intra = NULL;
    hc->split_sig = 0;
    zen_status st = zen_comm_split(comm, hc->g.host, comm->rank, &hc->intra);
    if (st == ZEN_OK) {
        int color = hc->g.local < hc->g.min_local ? hc->g.local : ZEN_SPLIT_NONE;
        st = zen_comm_split(comm, color, hc->g.host, &hc->inter);
    }
    if (st != ZEN_OK)
        return zen__fail(comm, st, "sparse hier: splitting into %d hosts failed: %s", hc->g.hosts,
                         zen_comm_last_error(hc->intra ? hc->intra : comm));
    hc->split_sig = hc->g.sig;
    return ZEN_OK;
}

static void add_counters(zen_sparse_stats *s, const zen_comm_stats *a, const zen_comm_stats *b)
{
    s->bytes_sent += b->bytes_sent - a->bytes_sent;
    s->bytes_recv += b->bytes_recv - a->bytes_recv;
    s->msgs_sent += b->msgs_sent - a->msgs_sent;
    s->msgs_recv += b->msgs_recv - a->msgs_recv;
}

/* Step 3: allgather the shard sums inside the host and deliver the result. full is a rows x w
 * buffer (the caller's dense output when there is one). */
static zen_status intra_gather(zen_sparse_ctx *ctx, zen_comm *intra, int shards, zen_coo *res,
                               float *full)
{
    zen_comm *comm = ctx->comm;
    uint64_t rows = ctx->local->rows;
    uint32_t w = ctx->local->width;
    int L = intra->size, me = intra->rank;
    uint64_t *cnt = zen__malloc_array((size_t)L, sizeof *cnt);
    size_t *rc = zen__malloc_array((size_t)L, sizeof *rc);
    size_t *rd = zen__malloc_array((size_t)L, sizeof *rd);
    zen_coo sum = { 0 };
    zen_status st = ZEN_OK;
    if (!cnt || !rc || !rd) {
        st = zen__fail(comm, ZEN_ENOMEM, "sparse hier: out of memory for %d host ranks", L);
        goto out;
    }
    uint64_t mine = res->nnz, total = 0;
    if ((st = zen_allgather(intra, &mine, cnt, 1, ZEN_I64)) != ZEN_OK)
        goto out;
    for (int i = 0; i < L; i++) {
        if (cnt[i] > rows) {
            st = zen__fail(comm, ZEN_EPROTO, "sparse hier: host rank %d reports %llu rows", i,
                           (unsigned long long)cnt[i]);
            goto out;
        }
        total += cnt[i];
    }
    if (zen_coo_wire_bytes(total, w) < rows * w * sizeof(float)) {
        /* COO: indices, then values; shards are in host-rank order, so the result is sorted */
        sum.rows = rows;
        sum.width = w;
        if ((st = zen__coo_reserve(&sum, total ? total : 1)) != ZEN_OK) {
            st = zen__fail(comm, st, "sparse hier: cannot allocate %llu result rows",
                           (unsigned long long)total);
            goto out;
        }
        sum.nnz = total;
        uint64_t lo = me < shards ? zen_range_lo(rows, shards, me) : rows;
        for (size_t i = 0; i < res->nnz; i++)
            res->idx[i] += (uint32_t)lo;
        size_t at = 0;
        for (int i = 0; i < L; i++) {
            rc[i] = cnt[i];
            rd[i] = at;
            at += cnt[i];
        }
        st = zen_allgatherv(intra, res->idx, res->nnz, sum.idx, rc, rd, ZEN_I32);
        for (int i = 0; i < L; i++) {
            rc[i] *= w;
            rd[i] *= w;
        }
        if (st == ZEN_OK)
            st = zen_allgatherv(intra, res->val, res->nnz * w, sum.val, rc, rd, ZEN_F32);
        for (size_t i = 1; i < total && st == ZEN_OK; i++)
            if (sum.idx[i] <= sum.idx[i - 1] || sum.idx[i] >= rows)
                st = zen__fail(comm, ZEN_EPROTO, "sparse hier: host allgather gave row %u after %u",
                               sum.idx[i], sum.idx[i - 1]);
        if (st == ZEN_OK)
            st = zen__sparse_emit(ctx, &sum);
        goto out;
    }
    /* dense: my shard's rows of full, then an in-place allgatherv of the shards */
    for (int i = 0; i < L; i++) {
        uint64_t a = i < shards ? zen_range_lo(rows, shards, i) : rows;
        uint64_t b = i < shards ? zen_range_lo(rows, shards, i + 1) : rows;
        rd[i] = (size_t)a * w;
        rc[i] = (size_t)(b - a) * w;
    }
    memset(full + rd[me], 0, rc[me] * sizeof(float));
    for (size_t i = 0; i < res->nnz; i++)
        memcpy(full + rd[me] + (size_t)res->idx[i] * w, res->val + i * w, w * sizeof(float));
    if ((st = zen_allgatherv(intra, full + rd[me], rc[me], full, rc, rd, ZEN_F32)) != ZEN_OK)
        goto out;
    if (ctx->dense_out) {
        zen__dense_finish(ctx);
    } else if ((st = zen__coo_from_dense(full, rows, w, &sum)) == ZEN_OK) {
        st = zen__sparse_emit(ctx, &sum);
    } else {
        st = zen__fail(comm, st, "sparse hier: out of memory extracting the result");
    }
out:
    zen__coo_release(&sum);
    zen__free(cnt);
    zen__free(rc);
    zen__free(rd);
    return st;
}

zen_status zen__sparse_hier_push(zen_sparse_ctx *ctx, zen_hier_call *h)
{
    zen_comm *comm = ctx->comm;
    const zen_coo *local = ctx->local;
    memset(h, 0, sizeof *h);
    hier_cache *hc = zen__comm_attr_get(comm, ZEN_ATTR_SPARSE_HIER);
    if (!hc)
        return zen__fail(comm, ZEN_EINTERNAL, "sparse hier: no grouping (group not called)");
    zen_status st = ensure_children(comm, hc);
    if (st != ZEN_OK)
        return st;
    h->inter = hc->inter;
    uint64_t rows = local->rows;
    size_t w = local->width, cells;
    h->res.rows = 0;
    h->res.width = (uint32_t)w;
    if (zen_mul_overflow((size_t)rows, w, &cells) || cells > SIZE_MAX / sizeof(float))
        return zen__fail(comm, ZEN_EINVAL, "sparse hier: %llu x %zu is too large to densify",
                         (unsigned long long)rows, w);
    int S = hc->g.min_local, me = hc->intra->rank, L = hc->intra->size;
    uint64_t lo = me < S ? zen_range_lo(rows, S, me) : rows;
    h->shard_rows = (me < S ? zen_range_lo(rows, S, me + 1) : rows) - lo;
    h->res.rows = h->shard_rows;
    zen_comm_get_stats(hc->intra, &h->intra0);
    if (hc->inter)
        zen_comm_get_stats(hc->inter, &h->inter0);
    h->cache = hc; /* from here on _pull counts the traffic and releases */

    h->full = ctx->dense_out ? ctx->dense_out : zen__malloc_array(cells ? cells : 1, sizeof(float));
    size_t shard_cells = (size_t)h->shard_rows * w;
    h->shard = h->shard_buf = zen__malloc_array(shard_cells > 0 ? shard_cells : 1, sizeof(float));
    h->rc = zen__malloc_array((size_t)L, sizeof *h->rc);
    if (!h->full || !h->shard_buf || !h->rc)
        return zen__fail(comm, ZEN_ENOMEM, "sparse hier: cannot densify %llu x %zu",
                         (unsigned long long)rows, w);
    int64_t t0 = zen_now_ns();
    memset(h->full, 0, cells * sizeof(float));
    for (size_t i = 0; i < local->nnz; i++)
        memcpy(h->full + (size_t)local->idx[i] * w, local->val + i * w, w * sizeof(float));
    for (int i = 0; i < L; i++)
        h->rc[i] =
            i < S ? (size_t)(zen_range_lo(rows, S, i + 1) - zen_range_lo(rows, S, i)) * w : 0;
    st = zen_reduce_scatterv(hc->intra, h->full, h->shard_buf, h->rc, ZEN_F32, ZEN_SUM);
    ctx->stats->phase_us[ZEN_PHASE_PUSH] += zen_us_between(t0, zen_now_ns());
    if (st != ZEN_OK)
        return zen__fail(comm, st, "sparse hier: host reduce-scatter failed: %s",
                         zen_comm_last_error(hc->intra));
    return ZEN_OK;
}

zen_status zen__sparse_hier_pull(zen_sparse_ctx *ctx, zen_hier_call *h, zen_status st)
{
    hier_cache *hc = h->cache;
    if (!hc)
        return st; /* push failed before it held anything */
    if (st == ZEN_OK && h->full && h->shard_buf && h->rc) {
        int64_t t2 = zen_now_ns();
        st = intra_gather(ctx, hc->intra, hc->g.min_local, &h->res, h->full);
        ctx->stats->phase_us[ZEN_PHASE_PULL] += zen_us_between(t2, zen_now_ns());
        if (!hc->inter && ctx->opts->scheme != ZEN_SPARSE_AUTO)
            ctx->stats->scheme = ctx->opts->scheme;
        ctx->stats->hierarchical = 1;
    }
    zen_comm_stats ib, eb;
    zen_comm_get_stats(hc->intra, &ib);
    add_counters(ctx->stats, &h->intra0, &ib);
    if (hc->inter) {
        zen_comm_get_stats(hc->inter, &eb);
        add_counters(ctx->stats, &h->inter0, &eb);
        ctx->stats->inter_bytes_sent = eb.bytes_sent - h->inter0.bytes_sent;
        ctx->stats->inter_bytes_recv = eb.bytes_recv - h->inter0.bytes_recv;
    }
    if (h->full != ctx->dense_out)
        zen__free(h->full);
    zen__free(h->shard_buf);
    zen__free(h->rc);
    zen__coo_release(&h->res);
    memset(h, 0, sizeof *h);
    return st;
}
