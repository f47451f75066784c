/*
 * Element-wise reduction kernels of the dense collectives.
 *
 * dst[i] = a[i] op b[i] for every dtype and op. dst may be a or b exactly (in place); any other
 * overlap is not allowed. AVG reduces as SUM; the caller divides once at the end with
 * zen__reduce_finish_avg, so that every partial reduction is a plain sum. Integers add and multiply
 * with two's-complement wrap-around (computed as unsigned, so overflow is defined). bf16 is
 * widened to f32, reduced, and rounded back to nearest even at every step.
 */
#ifndef ZEN_COLL_REDUCE_OP_H
#define ZEN_COLL_REDUCE_OP_H

#include <stddef.h>

#include <zen/zen.h>

/* 1 when dtype and op are valid. */
int zen__reduce_valid(zen_dtype dtype, zen_op op);

/* dst = a op b over count elements (dst may alias a or b exactly). */
void zen__reduce3(void *dst, const void *a, const void *b, size_t count, zen_dtype dtype,
                  zen_op op);

/* dst = dst op src. */
static inline void zen_reduce_into(void *dst, const void *src, size_t count, zen_dtype dtype,
                                   zen_op op)
{
    zen__reduce3(dst, dst, src, count, dtype, op);
}

/* For op AVG: divide count elements by n (integers truncate toward zero). Other ops: no-op. */
void zen__reduce_finish_avg(void *buf, size_t count, zen_dtype dtype, zen_op op, int n);

#endif
