/*
 * ops.c - forward and backward of the GPT's ops. Every matrix product goes through
 * cblas_sgemm (attention included: strided views of the fused qkv rows avoid any copy); the
 * elementwise parts are single loops over contiguous rows.
 */
#include "ops.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/*
 * Exponentials (softmax, cross-entropy, tanh of GELU) were a third of a training step with
 * libm: the library is built with -O2 for baseline x86-64, where gcc vectorises neither libm
 * calls nor clamps. So the hot elementwise loops are in ops_simd.h, written with GCC vector
 * extensions and a branch-free exp, and compiled twice: 4 lanes (SSE2 baseline; lowered to
 * scalar code on other targets) and 8 lanes with AVX2, picked at run time by the CPU.
 * fexp is the same exp for one value (the loop tails), so a result does not depend on where
 * an element sits in its row.
 */
#define EXP_LO  -87.0f
#define EXP_HI  88.0f
#define LOG2E   1.44269504f
#define ROUNDER 12582912.0f /* 1.5 * 2^23 */
#define LN2_HI  0.693359375f
#define LN2_LO  -2.12194440e-4f
#define GELU_K  0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C  0.044715f

static inline float fexp(float x)
{
    if (x != x)
        return x; /* NaN: the int conversion below would be undefined */
    x = x < EXP_LO ? EXP_LO : x;
    x = x > EXP_HI ? EXP_HI : x;
    float n = (x * LOG2E + ROUNDER) - ROUNDER;
    float r = (x - n * LN2_HI) - n * LN2_LO;
    float p =
        1.0f +
        r * (1.0f +
             r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    int32_t e = ((int32_t)n + 127) * (1 << 23);
    float s;
    memcpy(&s, &e, sizeof s);
    return p * s;
}

static inline float ftanh(float u)
{
    return 1.0f - 2.0f / (1.0f + fexp(u + u));
}

typedef float vf4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));
#define VEC       vf4
#define VECI      vi4
#define VEC_N     4
#define VFN(name) name##_4
#include "ops_simd.h"
#undef VEC
#undef VECI
#undef VEC_N
#undef VFN

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define ZEN_OPS_AVX2
#pragma GCC push_options
#pragma GCC target("avx2")
typedef float vf8 __attribute__((vector_size(32)));
typedef int32_t vi8 __attribute__((vector_size(32)));
#define VEC       vf8
#define VECI      vi8
#define VEC_N     8
#define VFN(name) name##_8
#include "ops_simd.h"
#undef VEC
#undef VECI
#undef VEC_N
#undef VFN
#pragma GCC pop_options
#endif

static int force_baseline; /* tests: run the 4-lane kernels even on an AVX2 CPU */

void zen_op_force_baseline(int on)
{
    force_baseline = on;
}

static int use_avx2(void)
{
#ifdef ZEN_OPS_AVX2
    return !force_baseline && __builtin_cpu_supports("avx2");
#else
    return 0;
#endif
}

#ifdef ZEN_OPS_AVX2
#define DISPATCH(name, ...) (use_avx2() ? name##_8(__VA_ARGS__) : name##_4(__VA_ARGS__))
#else
#define DISPATCH(name, ...) name##_4(__VA_ARGS__)
#endif

static float max_of(const float *x, int n)
{
    return DISPATCH(max_of, x, n);
}

/* y[i] = e^(x[i] - shift) for i < n (y may alias x); returns the sum of the y. */
static float exp_shift_sum(float *y, const float *x, int n, float shift)
{
    return DISPATCH(exp_shift_sum, y, x, n, shift);
}

void zen_op_embed_forward(float *out, const float *wte, const float *wpe, const int32_t *tokens,
                          int B, int T, int d)
{
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            size_t row = (size_t)b * T + t;
            const float *e = wte + (size_t)tokens[row] * d;
            const float *p = wpe + (size_t)t * d;
            float *o = out + row * d;
            for (int i = 0; i < d; i++)
                o[i] = e[i] + p[i];
        }
    }
}

void zen_op_embed_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                           int B, int T, int d)
{
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            size_t row = (size_t)b * T + t;
            const float *g = dout + row * d;
            float *e = dwte + (size_t)tokens[row] * d;
            float *p = dwpe + (size_t)t * d;
            for (int i = 0; i < d; i++) {
                e[i] += g[i];
                p[i] += g[i];
            }
        }
    }
}

void zen_op_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *g,
                              const float *b, int n, int d)
{
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        float *o = out + (size_t)r * d;
        float m = 0.0f;
        for (int i = 0; i < d; i++)
            m += xr[i];
        m /= (float)d;
        /* Two passes (mean, then centred squares) keep the variance accurate when |mean| >> std. */
        float v = 0.0f;
        for (int i = 0; i < d; i++) {
            float c = xr[i] - m;
            v += c * c;
        }
        v /= (float)d;
        float s = 1.0f / sqrtf(v + ZEN_LN_EPS);
        for (int i = 0; i < d; i++)
            o[i] = (xr[i] - m) * s * g[i] + b[i];
        mean[r] = m;
        rstd[r] = s;
    }
}

/*
 * With xhat = (x - mean) * rstd and y = g * xhat + b, the input gradient is
 *   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dxhat = dy * g.
 */
void zen_op_layernorm_backward(float *dx, float *dg, float *db, const float *dout, const float *x,
                               const float *mean, const float *rstd, const float *g, int n, int d)
{
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        const float *dy = dout + (size_t)r * d;
        float *dxr = dx + (size_t)r * d;
        float m = mean[r], s = rstd[r];
        float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
        for (int i = 0; i < d; i++) {
            float xhat = (xr[i] - m) * s;
            float dxhat = dy[i] * g[i];
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * xhat;
            dg[i] += dy[i] * xhat;
            db[i] += dy[i];
        }
        sum_dxhat /= (float)d;
        sum_dxhat_xhat /= (float)d;
        for (int i = 0; i < d; i++) {
            float xhat = (xr[i] - m) * s;
            dxr[i] += s * (dy[i] * g[i] - sum_dxhat - xhat * sum_dxhat_xhat);
        }
    }
}

void zen_op_gelu_forward(float *out, const float *x, size_t n)
{
    DISPATCH(gelu_fwd, out, x, n);
}

/* d/dx [0.5 x (1 + tanh(u))] = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u',  u' = k (1 + 3c x^2). */
void zen_op_gelu_backward(float *dx, const float *x, const float *dout, size_t n)
{
    DISPATCH(gelu_bwd, dx, x, dout, n);
}

void zen_op_add(float *y, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

void zen_op_linear_forward(float *y, const float *x, const float *w, const float *bias, int n,
                           int in, int out)
{
    float beta = 0.0f;
    if (bias) {
        for (int r = 0; r < n; r++)
            memcpy(y + (size_t)r * out, bias, (size_t)out * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, beta, y,
                out);
}

void zen_op_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int n, int in, int out)
{
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in,
                    0.0f, dx, in);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw,
                in);
    if (db) {
        for (int r = 0; r < n; r++) {
            const float *g = dy + (size_t)r * out;
            for (int j = 0; j < out; j++)
                db[j] += g[j];
        }
    }
}

/*
 * Per (sequence b, head j) the Q, K and V blocks are [T][hd] views into the fused qkv rows with
 * leading dimension 3*h*hd, and the output block is a [T][hd] view with leading dimension h*hd:
 *   S = scale Q K^T (sgemm), P = causal_softmax(S) (in place, saved), O = P V (sgemm).
 * The full T x T product is computed and the upper triangle discarded: at the small T of this
 * model one sgemm beats T short triangular ones.
 */
void zen_op_attention_forward(float *out, float *att, const float *qkv, int B, int T, int h, int hd)
{
    int D = h * hd;
    int ld = 3 * D;
    float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < h; j++) {
            const float *q = qkv + (size_t)b * T * ld + (size_t)j * hd;
            const float *k = q + D;
            const float *v = q + 2 * D;
            float *p = att + ((size_t)b * h + j) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, scale, q, ld, k, ld,
                        0.0f, p, T);
            for (int t = 0; t < T; t++) {
                float *row = p + (size_t)t * T;
                float inv = 1.0f / exp_shift_sum(row, row, t + 1, max_of(row, t + 1));
                for (int s = 0; s <= t; s++)
                    row[s] *= inv;
                for (int s = t + 1; s < T; s++)
                    row[s] = 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, p, T, v, ld,
                        0.0f, out + (size_t)b * T * D + (size_t)j * hd, D);
        }
    }
}

/*
 * Per (b, j), with dO the [T][hd] view of dout:
 *   dP = dO V^T, dV = P^T dO, dS = P .* (dP - rowsum(P .* dP)) (softmax backward; zero where
 *   masked because P is), dQ = scale dS K, dK = scale dS^T Q.
 */
void zen_op_attention_backward(float *dqkv, float *scratch, const float *dout, const float *att,
                               const float *qkv, int B, int T, int h, int hd)
{
    int D = h * hd;
    int ld = 3 * D;
    float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < h; j++) {
            size_t off = (size_t)b * T * ld + (size_t)j * hd;
            const float *q = qkv + off, *k = q + D, *v = q + 2 * D;
            float *dq = dqkv + off, *dk = dq + D, *dv = dq + 2 * D;
            const float *p = att + ((size_t)b * h + j) * T * T;
            const float *dO = dout + (size_t)b * T * D + (size_t)j * hd;
            float *ds = scratch;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, dO, D, v, ld, 0.0f,
                        ds, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, p, T, dO, D, 0.0f,
                        dv, ld);
            for (int t = 0; t < T; t++) {
                const float *pr = p + (size_t)t * T;
                float *dr = ds + (size_t)t * T;
                float dot = 0.0f;
                for (int s = 0; s <= t; s++)
                    dot += pr[s] * dr[s];
                for (int s = 0; s <= t; s++)
                    dr[s] = pr[s] * (dr[s] - dot);
                for (int s = t + 1; s < T; s++)
                    dr[s] = 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, scale, ds, T, k, ld,
                        0.0f, dq, ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, scale, ds, T, q, ld,
                        0.0f, dk, ld);
        }
    }
}

/*
 * The exponentials are computed once: the forward keeps e^(z - max) per row and 1/sum, and the
 * backward only scales them: d z_i = scale * (e_i / sum - [i == target]).
 */
float zen_op_xent_forward(float *expz, float *rsum, const float *logits, const int32_t *targets,
                          int n, int v)
{
    double total = 0.0;
    for (int r = 0; r < n; r++) {
        const float *z = logits + (size_t)r * v;
        float mx = max_of(z, v);
        float sum = exp_shift_sum(expz + (size_t)r * v, z, v, mx);
        rsum[r] = 1.0f / sum;
        total += (double)(mx + logf(sum) - z[targets[r]]);
    }
    return (float)(total / n);
}

void zen_op_xent_backward(float *dlogits, const float *expz, const float *rsum,
                          const int32_t *targets, int n, int v, float scale)
{
    for (int r = 0; r < n; r++) {
        const float *e = expz + (size_t)r * v;
        float *dz = dlogits + (size_t)r * v;
        float k = scale * rsum[r];
        for (int i = 0; i < v; i++)
            dz[i] = k * e[i];
        dz[targets[r]] -= scale;
    }
}
