/*
 * Test data of `zen bench -c`. Inputs are small integers so that every dtype (bf16 included)
 * holds them and their reductions exactly, whatever order the algorithm adds them in; the
 * reference is therefore computed locally, independently of the library, and compared exactly
 * (a few ulps for avg, whose division may be done as a multiplication).
 *
 * Reducing inputs depend on the element index only through i mod REF_PERIOD, so the reference
 * of a whole buffer is a table of REF_PERIOD entries. The period is a prime, so no block offset
 * of a power-of-two size is a multiple of it and a block delivered to the wrong place shows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define REF_PERIOD  1021u
#define COPY_PERIOD 251u

static unsigned scramble(size_t i)
{
    size_t g = i % REF_PERIOD;
    return (unsigned)((g * g * 31u + g * 17u + 5u) % REF_PERIOD);
}

double bench_value(int rank, size_t i, int reducing, zen_op op)
{
    if (!reducing) /* data movement only: values in [-125, 125] that encode rank and index */
        return (double)(((size_t)rank * 37u + (i % COPY_PERIOD) * 7u) % COPY_PERIOD) - 125.0;
    unsigned h = scramble(i);
    if (op == ZEN_PROD) { /* +-1 with an occasional 2, so products stay exact and small */
        unsigned t = ((unsigned)rank * 3u + h) % 11u;
        return t == 0 ? 2.0 : (t == 1 ? -1.0 : 1.0);
    }
    return (double)(((unsigned)rank * 7u + h) % 17u) - 8.0; /* [-8, 8] */
}

void bench_store(void *buf, zen_dtype dt, size_t i, double v)
{
    switch (dt) {
    case ZEN_F32:
        ((float *)buf)[i] = (float)v;
        break;
    case ZEN_F64:
        ((double *)buf)[i] = v;
        break;
    case ZEN_I32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case ZEN_I64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case ZEN_BF16:
        ((uint16_t *)buf)[i] = zen_f32_to_bf16((float)v);
        break;
    default:
        break;
    }
}

double bench_load(const void *buf, zen_dtype dt, size_t i)
{
    switch (dt) {
    case ZEN_F32:
        return ((const float *)buf)[i];
    case ZEN_F64:
        return ((const double *)buf)[i];
    case ZEN_I32:
        return ((const int32_t *)buf)[i];
    case ZEN_I64:
        return (double)((const int64_t *)buf)[i];
    case ZEN_BF16:
        return zen_bf16_to_f32(((const uint16_t *)buf)[i]);
    default:
        return NAN;
    }
}

/* Round v as the dtype stores it. */
static double as_dtype(zen_dtype dt, double v)
{
    switch (dt) {
    case ZEN_F32:
        return (float)v;
    case ZEN_BF16:
        return zen_bf16_to_f32(zen_f32_to_bf16((float)v));
    default:
        return v;
    }
}

int bench_ref_init(bench_ref *ref, int nranks, zen_dtype dt, zen_op op)
{
    ref->period = REF_PERIOD;
    ref->table = malloc(REF_PERIOD * sizeof *ref->table);
    if (!ref->table)
        return -1;
    int integer = dt == ZEN_I32 || dt == ZEN_I64;
    for (size_t k = 0; k < REF_PERIOD; k++) {
        /* inputs of element k depend on k only through k mod REF_PERIOD */
        double acc = bench_value(0, k, 1, op);
        for (int r = 1; r < nranks; r++) {
            double v = bench_value(r, k, 1, op);
            switch (op) {
            case ZEN_PROD:
                acc *= v;
                break;
            case ZEN_MIN:
                acc = v < acc ? v : acc;
                break;
            case ZEN_MAX:
                acc = v > acc ? v : acc;
                break;
            default: /* sum, avg */
                acc += v;
                break;
            }
        }
        if (op == ZEN_AVG)
            acc = integer ? (double)((int64_t)acc / nranks) : acc / nranks;
        ref->table[k] = as_dtype(dt, acc);
    }
    return 0;
}

void bench_ref_free(bench_ref *ref)
{
    free(ref->table);
    ref->table = NULL;
}

double bench_ref_at(const bench_ref *ref, size_t i)
{
    return ref->table[i % ref->period];
}

int bench_equal(zen_dtype dt, double got, double want)
{
    double tol;
    switch (dt) {
    case ZEN_F32:
        tol = 1e-6;
        break;
    case ZEN_F64:
        tol = 1e-12;
        break;
    case ZEN_BF16:
        tol = 1e-2;
        break;
    default:
        return got == want;
    }
    double scale = fabs(want) > 1.0 ? fabs(want) : 1.0;
    return fabs(got - want) <= tol * scale; /* false for NaN */
}
