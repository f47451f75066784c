/* Delivery of a finished sum to the caller's output buffer (see zen__sparse_emit). */
#include <string.h>

#include "sparse/sparse_internal.h"

zen_status zen__sparse_emit(zen_sparse_ctx *ctx, zen_coo *sum)
{
    uint32_t w = sum->width;
    if (ctx->opts && ctx->opts->average) {
        float n = (float)zen_comm_size(ctx->comm);
        size_t count = sum->nnz * w;
        for (size_t i = 0; i < count; i++)
            sum->val[i] /= n;
    }
    if (ctx->stats)
        ctx->stats->nnz_out = sum->nnz;
    if (ctx->dense_out) {
        memset(ctx->dense_out, 0, (size_t)sum->rows * w * sizeof(float));
        for (size_t i = 0; i < sum->nnz; i++)
            memcpy(ctx->dense_out + (size_t)sum->idx[i] * w, sum->val + i * w,
                   (size_t)w * sizeof(float));
        return ZEN_OK;
    }
    zen__coo_release(ctx->coo_out);
    *ctx->coo_out = *sum;
    sum->idx = NULL;
    sum->val = NULL;
    sum->capacity = 0;
    sum->nnz = 0;
    return ZEN_OK;
}
