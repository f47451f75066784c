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
 * With skewed indices (paper C3) one owner receives and sends most of the traffic.
 */
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "sparse/model/imbalance.h"
#include "sparse/scheme/registry.h"
#include "sparse/wire/xchg.h"

zen_status zen__sparse_run_ps(zen_sparse_ctx *ctx)
{
    zen_comm *comm = ctx->comm;
    const zen_coo *local = ctx->local;
    int n = comm->size, me = comm->rank;
    size_t w = local->width;
    zen_coll cc;
    zen_status st = zen__coll_begin(comm, "sparse_ps", &cc);
    if (st != ZEN_OK)
        return st;
    size_t *cut = zen__malloc_array((size_t)n + 1, sizeof *cut);
    size_t *sbytes = zen__malloc_array((size_t)n, sizeof *sbytes);
    const void **sptr = zen__malloc_array((size_t)n, sizeof *sptr);
    size_t *rbytes = zen__malloc_array((size_t)n, sizeof *rbytes);
    size_t *roff = zen__malloc_array((size_t)n, sizeof *roff);
    zen_coo *runs = zen__calloc((size_t)n, sizeof *runs);
    uint8_t *sbuf = NULL, *rbuf = NULL, *pbuf = NULL, *gbuf = NULL;
    zen_coo agg = { 0 }, sum = { 0 };
    agg.rows = sum.rows = local->rows;
    agg.width = sum.width = local->width;
    size_t wire_max = zen__coo_wire_max(local->rows, local->width);
    size_t total = zen_coo_wire_bytes(local->nnz, local->width);
    int64_t lap = zen_now_ns();
    sbuf = zen__malloc(total ? total : 1);
    if (!cut || !sbytes || !sptr || !rbytes || !roff || !runs || !sbuf) {
        st = zen__fail(comm, ZEN_ENOMEM, "ps: out of memory");
        goto out;
    }
    /* (1) partition by even ranges; pack slice j at its offset in sbuf. */
    for (int j = 0; j <= n; j++)
        cut[j] =
            j == n ? local->nnz
                   : zen__lower_bound_u32(local->idx, local->nnz, zen_range_lo(local->rows, n, j));
    size_t off = 0;
    for (int j = 0; j < n; j++) {
        sbytes[j] = zen_coo_wire_bytes(cut[j + 1] - cut[j], local->width);
        sptr[j] = sbuf + off;
        zen__coo_pack(local, cut[j], cut[j + 1], sbuf + off);
        off += sbytes[j];
    }
    for (int j = 0; j < n; j++)
        rbytes[j] = cut[j + 1] - cut[j]; /* entries per owner, reused below as receive sizes */
    ctx->stats->imbalance_push = zen_imbalance(rbytes, n);
    zen_sparse_lap(ctx, ZEN_PHASE_PARTITION, &lap);

    /* (2) push */
    st = zen__xchg_alltoallv(comm, &cc, sptr, sbytes, wire_max, &rbuf, rbytes, roff);
    zen_sparse_lap(ctx, ZEN_PHASE_PUSH, &lap);
    if (st != ZEN_OK)
        goto out;

    /* (3) aggregate this rank's range */
    uint64_t lo = zen_range_lo(local->rows, n, me), hi = zen_range_lo(local->rows, n, me + 1);
    for (int p = 0; p < n && st == ZEN_OK; p++)
        st = zen__coo_view(comm, p, rbuf + roff[p], rbytes[p], local->rows, local->width, lo, hi,
                           &runs[p]);
    if (st == ZEN_OK)
        st = zen__coo_merge(runs, (size_t)n, &agg);
    size_t pbytes = zen_coo_wire_bytes(agg.nnz, agg.width);
    if (st == ZEN_OK && !(pbuf = zen__malloc(pbytes ? pbytes : 1)))
        st = zen__fail(comm, ZEN_ENOMEM, "ps: cannot allocate %zu bytes", pbytes);
    if (st != ZEN_OK)
        goto out;
    zen__coo_pack(&agg, 0, agg.nnz, pbuf);
    zen_sparse_lap(ctx, ZEN_PHASE_AGGREGATE, &lap);

    /* (4) pull */
    st = zen__xchg_allgatherv(comm, &cc, pbuf, pbytes, wire_max, &gbuf, rbytes, roff);
    zen_sparse_lap(ctx, ZEN_PHASE_PULL, &lap);
    if (st != ZEN_OK)
        goto out;
    size_t nnz_all = 0;
    for (int p = 0; p < n && st == ZEN_OK; p++) {
        st = zen__coo_view(comm, p, gbuf + roff[p], rbytes[p], local->rows, local->width,
                           zen_range_lo(local->rows, n, p), zen_range_lo(local->rows, n, p + 1),
                           &runs[p]);
        nnz_all += runs[p].nnz;
    }
    if (st != ZEN_OK)
        goto out;
    for (int p = 0; p < n; p++)
        roff[p] = runs[p].nnz; /* entries per owner; roff is no longer needed */
    ctx->stats->imbalance_pull = zen_imbalance(roff, n);
    if (ctx->dense_out) {
        memset(ctx->dense_out, 0, (size_t)local->rows * w * sizeof(float));
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < runs[p].nnz; i++)
                memcpy(ctx->dense_out + (size_t)runs[p].idx[i] * w, runs[p].val + i * w,
                       w * sizeof(float));
        zen__dense_average(ctx);
        ctx->stats->nnz_out =
            zen__dense_count_runs(ctx->dense_out, local->rows, local->width, runs, n);
    } else {
        st = zen__coo_reserve(&sum, nnz_all);
        for (int p = 0; p < n && st == ZEN_OK; p++) {
            if (runs[p].nnz == 0)
                continue;
            memcpy(sum.idx + sum.nnz, runs[p].idx, runs[p].nnz * sizeof(uint32_t));
            memcpy(sum.val + sum.nnz * w, runs[p].val, runs[p].nnz * w * sizeof(float));
            sum.nnz += runs[p].nnz;
        }
        if (st == ZEN_OK)
            st = zen__sparse_emit(ctx, &sum);
    }
    zen_sparse_lap(ctx, ZEN_PHASE_DECODE, &lap);
out:
    zen__coo_release(&agg);
    zen__coo_release(&sum);
    zen__free(cut);
    zen__free(sbytes);
    zen__free(sptr);
    zen__free(rbytes);
    zen__free(roff);
    zen__free(runs);
    zen__free(sbuf);
    zen__free(rbuf);
    zen__free(pbuf);
    zen__free(gbuf);
    return zen__coll_end(comm, &cc, st);
}

/* Sizes and slices to the owners, sizes and sums back; the busiest owner merges n runs of its
 * hot range and sends its sum to everyone. */
zen_cost_parts zen__sparse_cost_ps(const zen_cost_terms *t)
{
    const zen_cpu_model *c = &t->net->cpu;
    double out = t->p->dense_output ? t->dense_out : t->nnz_n * t->E * t->cp;
    return (zen_cost_parts){ 4 * t->conc, t->n1 * (t->hot + t->hot_n) * t->E,
                             t->coalesce + t->nnz * t->E * t->cp +
                                 t->N * t->hot * (c->merge * t->lgn + t->V * t->cp) +
                                 t->hot_n * t->E * t->cp + out,
                             4 * t->n1 };
}
