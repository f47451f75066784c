/*
 * Reduction kernels (see reduce_op.h). Each (dtype, op) pair has two plain loops over restrict
 * pointers: dst op= src (in place) and dst = a op b (three distinct buffers). Restrict plus the
 * loop optimisation level below lets gcc vectorise them; the f32 sum, which dominates training
 * traffic, then runs at memory bandwidth. The dispatcher picks the in-place loop when dst aliases
 * an operand (every op is commutative, so dst == b is handled as dst op= a).
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include "coll/reduce_op.h"

#include <stdint.h>

#define OP_SUM(x, y)  ((x) + (y))
#define OP_PROD(x, y) ((x) * (y))
#define OP_MIN(x, y)  ((y) < (x) ? (y) : (x))
#define OP_MAX(x, y)  ((y) > (x) ? (y) : (x))

/*
 * Kernel bodies. The functions take void pointers (one table type for every dtype) and cast them
 * to restrict-qualified typed pointers, which is what lets the compiler vectorise. L converts an
 * element to the type the op is computed in and S converts back.
 */
#define KERNELS(name, T, L, S, F)                                            \
    static void name##_in(void *dv, const void *sv, size_t n)                \
    {                                                                        \
        T *restrict d = dv;                                                  \
        const T *restrict s = sv;                                            \
        for (size_t i = 0; i < n; i++)                                       \
            d[i] = S(F(L(d[i]), L(s[i])));                                   \
    }                                                                        \
    static void name##_3(void *dv, const void *av, const void *bv, size_t n) \
    {                                                                        \
        T *restrict d = dv;                                                  \
        const T *restrict a = av;                                            \
        const T *restrict b = bv;                                            \
        for (size_t i = 0; i < n; i++)                                       \
            d[i] = S(F(L(a[i]), L(b[i])));                                   \
    }

#define SAME(x)   (x)
#define TO_U32(x) ((uint32_t)(x))
#define TO_I32(x) ((int32_t)(x))
#define TO_U64(x) ((uint64_t)(x))
#define TO_I64(x) ((int64_t)(x))

/* Floats and integer min/max compute in their own type. */
#define FLOAT_KERNELS(name, T, F)   KERNELS(name, T, SAME, SAME, F)
#define INT_CMP_KERNELS(name, T, F) KERNELS(name, T, SAME, SAME, F)
/* Integer sum and product compute in the unsigned type so that overflow wraps (defined). */
#define I32_KERNELS(name, F) KERNELS(name, int32_t, TO_U32, TO_I32, F)
#define I64_KERNELS(name, F) KERNELS(name, int64_t, TO_U64, TO_I64, F)
/* bf16: widen, combine in f32, round back with the library's conversions so rounding matches. */
#define BF16_KERNELS(name, F) KERNELS(name, uint16_t, zen_bf16_to_f32, zen_f32_to_bf16, F)

FLOAT_KERNELS(f32_sum, float, OP_SUM)
FLOAT_KERNELS(f32_prod, float, OP_PROD)
FLOAT_KERNELS(f32_min, float, OP_MIN)
FLOAT_KERNELS(f32_max, float, OP_MAX)
FLOAT_KERNELS(f64_sum, double, OP_SUM)
FLOAT_KERNELS(f64_prod, double, OP_PROD)
FLOAT_KERNELS(f64_min, double, OP_MIN)
FLOAT_KERNELS(f64_max, double, OP_MAX)
I32_KERNELS(i32_sum, OP_SUM)
I32_KERNELS(i32_prod, OP_PROD)
INT_CMP_KERNELS(i32_min, int32_t, OP_MIN)
INT_CMP_KERNELS(i32_max, int32_t, OP_MAX)
I64_KERNELS(i64_sum, OP_SUM)
I64_KERNELS(i64_prod, OP_PROD)
INT_CMP_KERNELS(i64_min, int64_t, OP_MIN)
INT_CMP_KERNELS(i64_max, int64_t, OP_MAX)
BF16_KERNELS(bf16_sum, OP_SUM)
BF16_KERNELS(bf16_prod, OP_PROD)
BF16_KERNELS(bf16_min, OP_MIN)
BF16_KERNELS(bf16_max, OP_MAX)

typedef void (*kernel_in)(void *, const void *, size_t);
typedef void (*kernel_3)(void *, const void *, const void *, size_t);

typedef struct kernel_pair {
    kernel_in in;
    kernel_3 three;
} kernel_pair;

#define PAIR(name)          \
    {                       \
        name##_in, name##_3 \
    }

/* [dtype][op]; AVG uses the SUM kernels. */
static const kernel_pair kernels[ZEN_DTYPE_COUNT][ZEN_OP_COUNT] = {
    [ZEN_F32] = { PAIR(f32_sum), PAIR(f32_prod), PAIR(f32_min), PAIR(f32_max), PAIR(f32_sum) },
    [ZEN_F64] = { PAIR(f64_sum), PAIR(f64_prod), PAIR(f64_min), PAIR(f64_max), PAIR(f64_sum) },
    [ZEN_I32] = { PAIR(i32_sum), PAIR(i32_prod), PAIR(i32_min), PAIR(i32_max), PAIR(i32_sum) },
    [ZEN_I64] = { PAIR(i64_sum), PAIR(i64_prod), PAIR(i64_min), PAIR(i64_max), PAIR(i64_sum) },
    [ZEN_BF16] = { PAIR(bf16_sum), PAIR(bf16_prod), PAIR(bf16_min), PAIR(bf16_max),
                   PAIR(bf16_sum) },
};

int zen__reduce_valid(zen_dtype dtype, zen_op op)
{
    return (unsigned)dtype < ZEN_DTYPE_COUNT && (unsigned)op < ZEN_OP_COUNT;
}

void zen__reduce3(void *dst, const void *a, const void *b, size_t count, zen_dtype dtype, zen_op op)
{
    if (count == 0 || !zen__reduce_valid(dtype, op))
        return;
    const kernel_pair *k = &kernels[dtype][op];
    if (dst == a)
        k->in(dst, b, count);
    else if (dst == b)
        k->in(dst, a, count);
    else
        k->three(dst, a, b, count);
}

void zen__reduce_finish_avg(void *buf, size_t count, zen_dtype dtype, zen_op op, int n)
{
    if (op != ZEN_AVG || n <= 1)
        return;
    switch (dtype) {
    case ZEN_F32: {
        float *p = buf;
        for (size_t i = 0; i < count; i++)
            p[i] /= (float)n;
        break;
    }
    case ZEN_F64: {
        double *p = buf;
        for (size_t i = 0; i < count; i++)
            p[i] /= (double)n;
        break;
    }
    case ZEN_I32: {
        int32_t *p = buf;
        for (size_t i = 0; i < count; i++)
            p[i] /= n;
        break;
    }
    case ZEN_I64: {
        int64_t *p = buf;
        for (size_t i = 0; i < count; i++)
            p[i] /= n;
        break;
    }
    case ZEN_BF16: {
        uint16_t *p = buf;
        for (size_t i = 0; i < count; i++)
            p[i] = zen_f32_to_bf16(zen_bf16_to_f32(p[i]) / (float)n);
        break;
    }
    default:
        break;
    }
}
