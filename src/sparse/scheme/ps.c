/*
 * PS: range-partitioned sparse parameter server (Point-to-point + Incremental + Parallelism,
 * Imbalanced). Rank j owns the even row range [rows*j/n, rows*(j+1)/n).
 *
 * Steps: (1) partition: the sorted local COO is cut at the range bounds (binary search),
 * (2) push: alltoallv of the slices to their owners, (3) aggregate: each owner merges the n
 * sorted runs of its range, (4) pull: allgatherv of the owners' results, which are disjoint and
 * ascending, so their concatenation is already the sorted global sum. Four ranks:
 *
 *     push:  every rank --slice j--> owner j       pull: owner j --sum of range j--> everyone
 *
 * Bytes rank j sends: push sum_{k != j} |I_j^k| (4 + 4w), pull (n-1) |sum of range j| (4 + 4w).
 * With global_topk the owners keep only their share of the k largest sums before the pull
 * (global_topk.c), so the pull moves at most k rows in all, and an owner's pull message is
 * [u32 c][c w f32 values][c indices gap-coded from its range's first row (gap.h)]: the kept rows
 * lie about rows / k apart, so most gaps take one byte instead of an index's 4.
 * With skewed indices (paper C3) one owner receives and sends most of the traffic.
 */
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "sparse/model/imbalance.h"
#include "sparse/scheme/global_topk.h"
#include "sparse/scheme/registry.h"
#include "sparse/wire/gap.h"
#include "sparse/wire/xchg.h"

/* The buffers of one call. */
typedef struct ps_call {
    size_t *cut;    /* n + 1 cut points of the local COO at the range bounds */
    size_t *sbytes; /* bytes to each owner */
    const void **sptr;
    size_t *rbytes, *roff; /* received blocks */
    zen_coo *runs;         /* views of the received blocks */
    uint8_t *sbuf, *rbuf, *pbuf, *gbuf;
    uint32_t *pidx; /* global top-k: the pulled indices, decoded (runs view them) */
    zen_coo agg, sum;
} ps_call;

/* (1) partition by even ranges, packing slice j at its offset in sbuf, and (2) push. */
static zen_status push(zen_sparse_ctx *ctx, zen_coll *cc, ps_call *c, int64_t *lap)
{
    const zen_coo *local = ctx->local;
    int n = ctx->comm->size;
    for (int j = 0; j <= n; j++)
        c->cut[j] =
            j == n ? local->nnz
                   : zen__lower_bound_u32(local->idx, local->nnz, zen_range_lo(local->rows, n, j));
    size_t off = 0;
    for (int j = 0; j < n; j++) {
        c->sbytes[j] = zen_coo_wire_bytes(c->cut[j + 1] - c->cut[j], local->width);
        c->sptr[j] = c->sbuf + off;
        zen__coo_pack(local, c->cut[j], c->cut[j + 1], c->sbuf + off);
        off += c->sbytes[j];
    }
    for (int j = 0; j < n; j++)
        c->rbytes[j] = c->cut[j + 1] - c->cut[j]; /* entries per owner, reused as receive sizes */
    ctx->stats->imbalance_push = zen_imbalance(c->rbytes, n);
    zen_sparse_lap(ctx, ZEN_PHASE_PARTITION, lap);
    zen_status st = zen__xchg_alltoallv(ctx->comm, cc, c->sptr, c->sbytes,
                                        zen__coo_wire_max(local->rows, local->width), &c->rbuf,
                                        c->rbytes, c->roff);
    zen_sparse_lap(ctx, ZEN_PHASE_PUSH, lap);
    return st;
}

/* (3) aggregate this rank's range into c->agg and pack it into c->pbuf; *pbytes its size. */
static zen_status aggregate(zen_sparse_ctx *ctx, ps_call *c, size_t *pbytes)
{
    zen_comm *comm = ctx->comm;
    const zen_coo *local = ctx->local;
    int n = comm->size, me = comm->rank;
    uint64_t lo = zen_range_lo(local->rows, n, me), hi = zen_range_lo(local->rows, n, me + 1);
    zen_status st = ZEN_OK;
    for (int p = 0; p < n && st == ZEN_OK; p++)
        st = zen__coo_view(comm, p, c->rbuf + c->roff[p], c->rbytes[p], local->rows, local->width,
                           lo, hi, &c->runs[p]);
    if (st == ZEN_OK)
        st = zen__coo_merge(c->runs, (size_t)n, &c->agg);
    /* global top-k: only this owner's share of the k largest sums is pulled (global_topk.c) */
    if (st == ZEN_OK && zen__sparse_topk_k(ctx))
        st = zen__sparse_global_topk(ctx, &c->agg, zen__sparse_topk_k(ctx));
    size_t nnz = c->agg.nnz, vbytes = 4 * nnz * local->width;
    int gap = zen__sparse_topk_k(ctx) != 0;
    *pbytes = gap ? 4 + vbytes + zen__gap_bytes(c->agg.idx, nnz, (uint32_t)lo)
                  : zen_coo_wire_bytes(nnz, c->agg.width);
    if (st == ZEN_OK && !(c->pbuf = zen__malloc(*pbytes ? *pbytes : 1)))
        st = zen__fail(comm, ZEN_ENOMEM, "ps: cannot allocate %zu bytes", *pbytes);
    if (st == ZEN_OK && !gap)
        zen__coo_pack(&c->agg, 0, nnz, c->pbuf);
    if (st == ZEN_OK && gap) { /* nnz <= the range's rows < 2^32 */
        uint32_t c32 = (uint32_t)nnz;
        memcpy(c->pbuf, &c32, sizeof c32);
        if (nnz)
            memcpy(c->pbuf + 4, c->agg.val, vbytes);
        zen__gap_encode(c->agg.idx, nnz, (uint32_t)lo, c->pbuf + 4 + vbytes);
    }
    return st;
}

/* View owner p's gap-coded pull message (aggregate) as a zen_coo: the values in place, the
 * indices decoded into idx. Checks the count against the range, every index inside
 * [lo_row, hi_row) and the size exactly; ZEN_EPROTO naming p otherwise. */
static zen_status gap_view(zen_comm *comm, int p, const uint8_t *buf, size_t bytes, uint64_t lo_row,
                           uint64_t hi_row, uint32_t *idx, zen_coo *view)
{
    uint32_t c32 = 0;
    if (bytes >= 4)
        memcpy(&c32, buf, sizeof c32);
    size_t nnz = c32, vbytes = 4 * nnz * view->width, used = 0;
    zen_status st =
        bytes >= 4 && nnz <= hi_row - lo_row && vbytes <= bytes - 4 ? ZEN_OK : ZEN_EPROTO;
    if (st == ZEN_OK)
        st = zen__gap_decode(buf + 4 + vbytes, bytes - 4 - vbytes, nnz, (uint32_t)lo_row, hi_row,
                             idx, &used);
    if (st != ZEN_OK || used != bytes - 4 - vbytes)
        return zen__fail(comm, ZEN_EPROTO,
                         "ps: rank %d sent a malformed %zu-byte top-k pull message for rows "
                         "[%llu, %llu)",
                         p, bytes, (unsigned long long)lo_row, (unsigned long long)hi_row);
    view->nnz = nnz;
    view->idx = idx;
    view->val = (float *)(uintptr_t)(buf + 4);
    return ZEN_OK;
}

/* The pulled owners' messages as c->runs (views), plain COO or (global top-k) gap-coded. */
static zen_status view_pulled(zen_sparse_ctx *ctx, ps_call *c, size_t *nnz_all)
{
    const zen_coo *local = ctx->local;
    int n = ctx->comm->size, gap = zen__sparse_topk_k(ctx) != 0;
    size_t room = 0;
    for (int p = 0; p < n && gap; p++) /* a bound on the indices: the messages' sizes / 4 */
        room += c->rbytes[p] / 4;
    if (gap && !(c->pidx = zen__malloc_array(room ? room : 1, sizeof *c->pidx)))
        return zen__fail(ctx->comm, ZEN_ENOMEM, "ps: cannot allocate %zu indices", room);
    zen_status st = ZEN_OK;
    *nnz_all = 0;
    for (int p = 0; p < n && st == ZEN_OK; p++) {
        uint64_t lo = zen_range_lo(local->rows, n, p), hi = zen_range_lo(local->rows, n, p + 1);
        const uint8_t *buf = c->gbuf + c->roff[p];
        if (gap) {
            c->runs[p].rows = local->rows;
            c->runs[p].width = local->width;
            st = gap_view(ctx->comm, p, buf, c->rbytes[p], lo, hi, c->pidx + *nnz_all, &c->runs[p]);
        } else {
            st = zen__coo_view(ctx->comm, p, buf, c->rbytes[p], local->rows, local->width, lo, hi,
                               &c->runs[p]);
        }
        *nnz_all += c->runs[p].nnz;
    }
    return st;
}

/* After (4): the owners' sums are disjoint and ascending, so their concatenation is the sorted
 * global sum; deliver it (dense scatter or COO). c->runs view the pulled blocks. */
static zen_status deliver(zen_sparse_ctx *ctx, ps_call *c, size_t nnz_all)
{
    const zen_coo *local = ctx->local;
    int n = ctx->comm->size;
    size_t w = local->width;
    for (int p = 0; p < n; p++)
        c->roff[p] = c->runs[p].nnz; /* entries per owner; roff is no longer needed */
    ctx->stats->imbalance_pull = zen_imbalance(c->roff, n);
    if (ctx->dense_out) {
        memset(ctx->dense_out, 0, (size_t)local->rows * w * sizeof(float));
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < c->runs[p].nnz; i++)
                memcpy(ctx->dense_out + (size_t)c->runs[p].idx[i] * w, c->runs[p].val + i * w,
                       w * sizeof(float));
        zen__dense_average(ctx);
        ctx->stats->nnz_out =
            zen__dense_count_runs(ctx->dense_out, local->rows, local->width, c->runs, n);
        return ZEN_OK;
    }
    zen_coo *sum = &c->sum;
    zen_status st = zen__coo_reserve(sum, nnz_all);
    for (int p = 0; p < n && st == ZEN_OK; p++) {
        if (c->runs[p].nnz == 0)
            continue;
        memcpy(sum->idx + sum->nnz, c->runs[p].idx, c->runs[p].nnz * sizeof(uint32_t));
        memcpy(sum->val + sum->nnz * w, c->runs[p].val, c->runs[p].nnz * w * sizeof(float));
        sum->nnz += c->runs[p].nnz;
    }
    return st == ZEN_OK ? zen__sparse_emit(ctx, sum) : st;
}

static void release(ps_call *c)
{
    zen__coo_release(&c->agg);
    zen__coo_release(&c->sum);
    zen__free(c->cut);
    zen__free(c->sbytes);
    zen__free(c->sptr);
    zen__free(c->rbytes);
    zen__free(c->roff);
    zen__free(c->runs);
    zen__free(c->sbuf);
    zen__free(c->rbuf);
    zen__free(c->pbuf);
    zen__free(c->gbuf);
    zen__free(c->pidx);
}

zen_status zen__sparse_run_ps(zen_sparse_ctx *ctx)
{
    zen_comm *comm = ctx->comm;
    const zen_coo *local = ctx->local;
    int n = comm->size;
    zen_coll cc;
    zen_status st = zen__coll_begin(comm, "sparse_ps", &cc);
    if (st != ZEN_OK)
        return st;
    ps_call c;
    memset(&c, 0, sizeof c);
    c.cut = zen__malloc_array((size_t)n + 1, sizeof *c.cut);
    c.sbytes = zen__malloc_array((size_t)n, sizeof *c.sbytes);
    c.sptr = zen__malloc_array((size_t)n, sizeof *c.sptr);
    c.rbytes = zen__malloc_array((size_t)n, sizeof *c.rbytes);
    c.roff = zen__malloc_array((size_t)n, sizeof *c.roff);
    c.runs = zen__calloc((size_t)n, sizeof *c.runs);
    c.agg.rows = c.sum.rows = local->rows;
    c.agg.width = c.sum.width = local->width;
    size_t total = zen_coo_wire_bytes(local->nnz, local->width);
    int64_t lap = zen_now_ns();
    c.sbuf = zen__malloc(total ? total : 1);
    size_t pbytes = 0, nnz_all = 0;
    if (!c.cut || !c.sbytes || !c.sptr || !c.rbytes || !c.roff || !c.runs || !c.sbuf)
        st = zen__fail(comm, ZEN_ENOMEM, "ps: out of memory");
    if (st == ZEN_OK)
        st = push(ctx, &cc, &c, &lap);
    if (st == ZEN_OK && (st = aggregate(ctx, &c, &pbytes)) == ZEN_OK)
        zen_sparse_lap(ctx, ZEN_PHASE_AGGREGATE, &lap);
    if (st == ZEN_OK) { /* (4) pull */
        /* gap-coded (top-k): up to 5 bytes an index, one more than COO's 4, and the count */
        size_t max = zen__coo_wire_max(local->rows, local->width);
        max = max > SIZE_MAX - local->rows - 4 ? SIZE_MAX : max + local->rows + 4;
        st = zen__xchg_allgatherv(comm, &cc, c.pbuf, pbytes, max, &c.gbuf, c.rbytes, c.roff);
        zen_sparse_lap(ctx, ZEN_PHASE_PULL, &lap);
    }
    if (st == ZEN_OK)
        st = view_pulled(ctx, &c, &nnz_all);
    if (st == ZEN_OK && (st = deliver(ctx, &c, nnz_all)) == ZEN_OK)
        zen_sparse_lap(ctx, ZEN_PHASE_DECODE, &lap);
    release(&c);
    return zen__coll_end(comm, &cc, st);
}

/* Sizes and slices to the owners, sizes and sums back; the busiest owner merges n runs of its
 * hot range and sends its sum to everyone. */
zen_cost_parts zen__sparse_cost_ps(const zen_cost_terms *t)
{
    const zen_cpu_model *c = &t->net->cpu;
    double hot_n = t->hot_n * t->keep; /* global top-k: the owners pull their kept share */
    double out = t->p->dense_output ? t->dense_out : t->keep * t->nnz_n * t->E * t->cp;
    return (zen_cost_parts){ 4 * t->conc + t->topk_steps * t->a,
                             t->n1 * (t->hot * t->E + hot_n * t->E_pull_ps),
                             t->coalesce + t->nnz * t->E * t->cp +
                                 t->N * t->hot * (c->merge * t->lgn + t->V * t->cp) +
                                 hot_n * t->E * t->cp + out,
                             4 * t->n1 + t->topk_steps };
}
