/* Shared helpers of the tp tests: seeded full matrices and naive (loop, not BLAS) references. */
#ifndef ZEN_TEST_TP_UTIL_H
#define ZEN_TEST_TP_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zen/tp.h>

#include "testutil.h"

static inline float tpt_uniform(uint64_t *s)
{
    return (float)((double)(zt_rand(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline void tpt_fill(float *a, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++)
        a[i] = tpt_uniform(&s);
}

/* y[rows][out] = x[rows][in] w[out][in]^T (+ b) */
static inline void tpt_ref_forward(const float *x, const float *w, const float *b, int rows, int in,
                                   int out, float *y)
{
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int k = 0; k < in; k++)
                acc += (double)x[(size_t)r * in + k] * w[(size_t)o * in + k];
            y[(size_t)r * out + o] = (float)acc;
        }
}

/* dx = dy w ; dw = dy^T x ; db = colsum dy */
static inline void tpt_ref_backward(const float *x, const float *w, const float *dy, int rows,
                                    int in, int out, float *dx, float *dw, float *db)
{
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < in; k++) {
            double acc = 0;
            for (int o = 0; o < out; o++)
                acc += (double)dy[(size_t)r * out + o] * w[(size_t)o * in + k];
            dx[(size_t)r * in + k] = (float)acc;
        }
    for (int o = 0; o < out; o++) {
        for (int k = 0; k < in; k++) {
            double acc = 0;
            for (int r = 0; r < rows; r++)
                acc += (double)dy[(size_t)r * out + o] * x[(size_t)r * in + k];
            dw[(size_t)o * in + k] = (float)acc;
        }
        double acc = 0;
        for (int r = 0; r < rows; r++)
            acc += dy[(size_t)r * out + o];
        if (db)
            db[o] = (float)acc;
    }
}

/* |a - b| <= tol * max(1, |b|) elementwise; a is [rows][lda] from column a0, b [rows][ldb]. */
static inline int tpt_close(const float *a, int lda, const float *b, int ldb, int rows, int cols,
                            double tol)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double x = a[(size_t)r * lda + c], y = b[(size_t)r * ldb + c];
            if (!(fabs(x - y) <= tol * fmax(1.0, fabs(y))))
                return 0;
        }
    return 1;
}

/* Copy the block [r0, r0+rows) x [c0, c0+cols) of a [.][ld] matrix into dst [rows][cols]. */
static inline void tpt_block(const float *src, int ld, int r0, int rows, int c0, int cols,
                             float *dst)
{
    for (int r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * cols, src + (size_t)(r0 + r) * ld + c0,
               (size_t)cols * sizeof(float));
}

#endif
