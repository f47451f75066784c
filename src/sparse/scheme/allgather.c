/*
 * ALLGATHER: what torch.distributed (gloo) and Horovod do for sparse gradients (AGsparse:
 * One-shot + Centralization). Every rank receives every other rank's COO and sums locally.
 *
 * Steps: (1) exchange nnz counts (8-byte sizes), (2) exchange the packed COO (indices then
 * values) with every peer, (3) sum: scatter-add into the dense output, or merge the n sorted runs.
 * Four ranks, rank 0's view:
 *
 *     r0 --COO0--> r1, r2, r3        r0 <--COO1, COO2, COO3-- everyone
 *
 * Bytes each rank sends: (n-1) * nnz_local * (4 + 4w); receives sum over peers of theirs. The
 * volume grows linearly with n and overlaps are received n-1 times (paper Table 3).
 */
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "sparse/scheme/registry.h"
#include "sparse/wire/xchg.h"

zen_status zen__sparse_run_allgather(zen_sparse_ctx *ctx)
{
    zen_comm *comm = ctx->comm;
    const zen_coo *local = ctx->local;
    int n = comm->size;
    size_t w = local->width;
    zen_coll cc;
    zen_status st = zen__coll_begin(comm, "sparse_allgather", &cc);
    if (st != ZEN_OK)
        return st;
    uint8_t *sbuf = NULL, *rbuf = NULL;
    size_t *rbytes = zen__malloc_array((size_t)n, sizeof *rbytes);
    size_t *roff = zen__malloc_array((size_t)n, sizeof *roff);
    zen_coo *runs = zen__calloc((size_t)n, sizeof *runs);
    zen_coo sum = { 0 };
    size_t sbytes = zen_coo_wire_bytes(local->nnz, local->width);
    int64_t lap = zen_now_ns();
    sbuf = zen__malloc(sbytes ? sbytes : 1);
    if (!rbytes || !roff || !runs || !sbuf) {
        st = zen__fail(comm, ZEN_ENOMEM, "allgather: out of memory");
        goto out;
    }
    zen__coo_pack(local, 0, local->nnz, sbuf);
    zen_sparse_lap(ctx, ZEN_PHASE_ENCODE, &lap);
    st = zen__xchg_allgatherv(comm, &cc, sbuf, sbytes, zen__coo_wire_max(local->rows, local->width),
                              &rbuf, rbytes, roff);
    zen_sparse_lap(ctx, ZEN_PHASE_PULL, &lap);
    for (int p = 0; p < n && st == ZEN_OK; p++)
        st = zen__coo_view(comm, p, rbuf + roff[p], rbytes[p], local->rows, local->width, 0,
                           local->rows, &runs[p]);
    if (st != ZEN_OK)
        goto out;
    if (ctx->dense_out) {
        /* Scatter-add in rank order, so every rank adds in the same order. */
        memset(ctx->dense_out, 0, (size_t)local->rows * w * sizeof(float));
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < runs[p].nnz; i++) {
                float *row = ctx->dense_out + (size_t)runs[p].idx[i] * w;
                const float *v = runs[p].val + i * w;
                for (size_t k = 0; k < w; k++)
                    row[k] += v[k];
            }
        zen__dense_average(ctx);
        ctx->stats->nnz_out =
            zen__dense_count_runs(ctx->dense_out, local->rows, local->width, runs, n);
    } else {
        sum.rows = local->rows;
        sum.width = local->width;
        st = zen__coo_merge(runs, (size_t)n, &sum);
        if (st == ZEN_OK)
            st = zen__sparse_emit(ctx, &sum);
    }
    zen_sparse_lap(ctx, ZEN_PHASE_DECODE, &lap);
out:
    zen__coo_release(&sum);
    zen__free(sbuf);
    zen__free(rbuf);
    zen__free(rbytes);
    zen__free(roff);
    zen__free(runs);
    return zen__coll_end(comm, &cc, st);
}

/* Sizes, then payloads; every rank merges all n runs (or adds them into a dense result). */
zen_cost_parts zen__sparse_cost_allgather(const zen_cost_terms *t)
{
    const zen_cpu_model *c = &t->net->cpu;
    double merge = t->p->dense_output ? t->zero + t->N * t->nnz * t->V * t->rd
                                      : t->N * t->nnz * (c->merge * t->lgn + t->V * t->cp);
    return (zen_cost_parts){ 2 * t->conc, t->n1 * t->nnz * t->E,
                             t->coalesce + t->nnz * t->E * t->cp + merge, 2 * t->n1 };
}
