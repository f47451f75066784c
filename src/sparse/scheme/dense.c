/*
 * DENSE: densify the local tensor and run a ring allreduce over all rows * width elements. The
 * reference point every sparse scheme must beat: each rank sends and receives 2(n-1)/n * M * 4
 * bytes regardless of sparsity (M = rows * width). With a dense output the caller's buffer is
 * reduced in place; otherwise a scratch buffer is reduced and its non-zero rows extracted.
 */
#include <string.h>

#include "common/alloc.h"
#include "common/checked.h"
#include "common/clock.h"
#include "sparse/scheme/registry.h"
#include "sparse/wire/xchg.h"

zen_status zen__sparse_run_dense(zen_sparse_ctx *ctx)
{
    zen_comm *comm = ctx->comm;
    const zen_coo *local = ctx->local;
    size_t w = local->width, count;
    if (local->rows > SIZE_MAX || zen_mul_overflow((size_t)local->rows, w, &count) ||
        count > SIZE_MAX / sizeof(float))
        return zen__fail(comm, ZEN_EINVAL, "dense: %llu x %zu is too large",
                         (unsigned long long)local->rows, w);
    int64_t lap = zen_now_ns();
    float *buf = ctx->dense_out;
    if (!buf && !(buf = zen__malloc_array(count ? count : 1, sizeof(float))))
        return zen__fail(comm, ZEN_ENOMEM, "dense: cannot allocate %zu floats", count);
    memset(buf, 0, count * sizeof(float));
    for (size_t i = 0; i < local->nnz; i++)
        memcpy(buf + (size_t)local->idx[i] * w, local->val + i * w, w * sizeof(float));
    zen_sparse_lap(ctx, ZEN_PHASE_PARTITION, &lap);
    zen_status st = zen_allreduce_with(comm, buf, buf, count, ZEN_F32, ZEN_SUM, ZEN_ALLREDUCE_RING);
    zen_sparse_lap(ctx, ZEN_PHASE_PUSH, &lap);
    if (st == ZEN_OK && ctx->dense_out)
        zen__dense_finish(ctx);
    if (st == ZEN_OK && !ctx->dense_out) {
        zen_coo sum = { 0 };
        st = zen__coo_from_dense(buf, local->rows, local->width, &sum);
        if (st == ZEN_OK)
            st = zen__sparse_emit(ctx, &sum);
        zen__coo_release(&sum);
    }
    zen_sparse_lap(ctx, ZEN_PHASE_DECODE, &lap);
    if (buf != ctx->dense_out)
        zen__free(buf);
    return st;
}

/* 2(n-1) ring steps; densify, reduce (n-1)/n of the vector, and for a sparse result scan it back
 * into COO. */
zen_cost_parts zen__sparse_cost_dense(const zen_cost_terms *t)
{
    double extract = t->p->dense_output ? 0 : t->D * t->cp + t->nnz_n * t->V * t->cp;
    return (zen_cost_parts){ 2 * t->n1 * t->a, 2 * t->frac * t->D,
                             t->coalesce + t->zero + t->nnz * t->V * t->cp +
                                 t->frac * t->D * t->rd + extract,
                             2 * t->n1 };
}
