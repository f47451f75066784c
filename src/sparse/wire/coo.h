/*
 * COO helpers beyond the zen_coo interface of sparse_internal.h: coalescing raw (index, value)
 * arrays, used both for user input (coo.c) and for aggregation of pushed runs on an owner
 * (balanced.c).
 */
#ifndef ZEN_SPARSE_COO_H
#define ZEN_SPARSE_COO_H

#include "sparse/sparse_internal.h"

/* Empty out (nnz 0) for a tensor of rows x width, keeping its storage when the width matches. */
void zen__coo_reset(zen_coo *coo, uint64_t rows, uint32_t width);

/*
 * Coalesce n (index, value-row) pairs into out (sorted unique, duplicates summed in input
 * order). keys are modified (sorted) in place; vals holds n * width entries of value_type
 * (ZEN_F32 or ZEN_BF16). Every key must be <= max_key (the caller has validated them). n must be
 * below UINT32_MAX.
 */
zen_status zen__coo_coalesce(uint32_t *keys, const void *vals, zen_dtype value_type, size_t n,
                             uint32_t width, uint32_t max_key, zen_coo *out);

#endif
