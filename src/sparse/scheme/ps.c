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
 * (global_topk.c), so the pull moves at most k rows in all.
 * With skewed indices (paper C3) one owner receives and sends most of the traffic.
 */
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "sparse/model/imbalance.h"
#include "sparse/scheme/global_topk.h"
#include "sparse/scheme/registry.h"
#include "sparse/wire/xchg.h"

/* The buffers of one call. */
typedef struct ps_call {
    size_t *cut;    /* n + 1 cut points of the local COO at the range bounds */
    size_t *sbytes; /* bytes to each owner */
    const void **sptr;
    size_t *rbytes, *roff; /* received blocks */
    zen_coo *runs;         /* views of the received blocks */
    uint8_t *sbuf, *rbuf, *pbuf, *gbuf;
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
    *pbytes = zen_coo_wire_bytes(c->agg.nnz, c->agg.width);
    if (st == ZEN_OK && !(c->pbuf = zen__malloc(*pbytes ? *pbytes : 1)))
        st = zen__fail(comm, ZEN_ENOMEM, "ps: cannot allocate %zu bytes", *pbytes);
    if (st == ZEN_OK)
        zen__coo_pack(&c->agg, 0, c->agg.nnz, c->pbuf);
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
        st = zen__xchg_allgatherv(comm, &cc, c.pbuf, pbytes,
                                  zen__coo_wire_max(local->rows, local->width), &c.gbuf, c.rbytes,
                                  c.roff);
        zen_sparse_lap(ctx, ZEN_PHASE_PULL, &lap);
    }
    for (int p = 0; p < n && st == ZEN_OK; p++) {
        st = zen__coo_view(comm, p, c.gbuf + c.roff[p], c.rbytes[p], local->rows, local->width,
                           zen_range_lo(local->rows, n, p), zen_range_lo(local->rows, n, p + 1),
                           &c.runs[p]);
        nnz_all += c.runs[p].nnz;
    }
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
    return (zen_cost_parts){ 4 * t->conc + t->topk_steps * t->a, t->n1 * (t->hot + hot_n) * t->E,
                             t->coalesce + t->nnz * t->E * t->cp +
                                 t->N * t->hot * (c->merge * t->lgn + t->V * t->cp) +
                                 hot_n * t->E * t->cp + out,
                             4 * t->n1 + t->topk_steps };
}
