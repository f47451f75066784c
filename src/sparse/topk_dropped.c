/* zen_sparse_topk_dropped (zen/sparse.h): the error feedback of global top-k. */
#include "sparse/sparse_internal.h"
#include "sparse/wire/xchg.h"

/* 1 when idx is among the sorted unique kept indices. */
static int kept(const uint32_t *ids, size_t n, uint64_t idx)
{
    size_t at = zen__lower_bound_u32(ids, n, idx);
    return at < n && ids[at] == idx;
}

static uint64_t index_at(const zen_sparse_tensor *in, size_t i)
{
    if (in->index_type == ZEN_INDEX_U32)
        return ((const uint32_t *)in->indices)[i];
    return (uint64_t)((const int64_t *)in->indices)[i]; /* negative: huge, so >= rows */
}

static float value_at(const zen_sparse_tensor *in, size_t i)
{
    if (in->value_type == ZEN_F32)
        return ((const float *)in->values)[i];
    return zen_bf16_to_f32(((const uint16_t *)in->values)[i]);
}

zen_status zen_sparse_topk_dropped(const zen_sparse_tensor *input, const zen_sparse_result *result,
                                   float *residual, uint64_t residual_len)
{
    if (!input || !result || !residual || input->width != 1 || residual_len < input->rows ||
        result->rows != input->rows || (result->nnz && !result->indices) ||
        (input->nnz && (!input->indices || !input->values)) ||
        (input->index_type != ZEN_INDEX_U32 && input->index_type != ZEN_INDEX_I64) ||
        (input->value_type != ZEN_F32 && input->value_type != ZEN_BF16))
        return ZEN_EINVAL;
    for (size_t i = 0; i < input->nnz; i++) /* all checked first: residual unchanged on error */
        if (index_at(input, i) >= input->rows)
            return ZEN_EINVAL;
    for (size_t i = 1; i < result->nnz; i++) /* kept() searches: an any_order result is refused */
        if (result->indices[i] <= result->indices[i - 1])
            return ZEN_EINVAL;
    for (size_t i = 0; i < input->nnz; i++) {
        uint64_t idx = index_at(input, i);
        if (!kept(result->indices, result->nnz, idx))
            residual[idx] += value_at(input, i);
    }
    return ZEN_OK;
}
