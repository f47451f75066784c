/*
 * ops_simd.h - the vectorised elementwise kernels of ops.c, written once over a GCC vector type
 * and included by ops.c once per instruction set (the SSE2 baseline, and AVX2 for CPUs that
 * have it). Before including define VEC (a float vector type), VECI (the int32 vector of the
 * same size), VEC_N (its lanes) and VFN(name) (name with an instruction-set suffix); ops.c
 * provides the scalar fexp used for the tails. No include guard: included more than once.
 *
 * e^x, branch-free so that it vectorises: clamp x to [EXP_LO, EXP_HI] (no overflow, no
 * denormals), n = round(x / ln2) by adding and subtracting 1.5*2^23, r = x - n ln2 with ln2 split
 * in two for accuracy (|r| <= ln2/2), e^r by its degree-6 Taylor polynomial (truncation below
 * 1.3e-7 relative), then 2^n by writing n + 127 into the exponent bits.
 */

static inline VEC VFN(splat)(float x)
{
    VEC z = { 0 };
    return z + x;
}

static inline VEC VFN(load)(const float *p)
{
    VEC v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void VFN(store)(float *p, VEC v)
{
    memcpy(p, &v, sizeof v);
}

static inline VEC VFN(select)(VECI mask, VEC a, VEC b)
{
    return (VEC)((mask & (VECI)a) | (~mask & (VECI)b));
}

static inline VEC VFN(exp)(VEC x)
{
    VEC lo = VFN(splat)(EXP_LO), hi = VFN(splat)(EXP_HI);
    x = VFN(select)(x < lo, lo, x);
    x = VFN(select)(x > hi, hi, x);
    VEC n = (x * LOG2E + ROUNDER) - ROUNDER;
    VEC r = (x - n * LN2_HI) - n * LN2_LO;
    VEC p =
        1.0f +
        r * (1.0f +
             r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    VECI e = (__builtin_convertvector(n, VECI) + 127) << 23;
    return p * (VEC)e;
}

/* tanh(u) = 1 - 2 / (1 + e^(2u)): exact limits +-1 from the clamped exp, abs error ~1e-7. */
static inline VEC VFN(tanh)(VEC u)
{
    return 1.0f - 2.0f / (1.0f + VFN(exp)(u + u));
}

static float VFN(max_of)(const float *x, int n)
{
    float mx = x[0];
    int i = 0;
    if (n >= VEC_N) {
        VEC m = VFN(load)(x);
        for (i = VEC_N; i + VEC_N <= n; i += VEC_N) {
            VEC v = VFN(load)(x + i);
            m = VFN(select)(v > m, v, m);
        }
        for (int k = 0; k < VEC_N; k++)
            mx = m[k] > mx ? m[k] : mx;
    }
    for (; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    return mx;
}

static float VFN(exp_shift_sum)(float *y, const float *x, int n, float shift)
{
    VEC acc = VFN(splat)(0.0f), sh = VFN(splat)(shift);
    int i = 0;
    for (; i + VEC_N <= n; i += VEC_N) {
        VEC e = VFN(exp)(VFN(load)(x + i) - sh);
        VFN(store)(y + i, e);
        acc += e;
    }
    float sum = 0.0f;
    for (int k = 0; k < VEC_N; k++)
        sum += acc[k];
    for (; i < n; i++) {
        y[i] = fexp(x[i] - shift);
        sum += y[i];
    }
    return sum;
}

static void VFN(gelu_fwd)(float *out, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + VEC_N <= n; i += VEC_N) {
        VEC v = VFN(load)(x + i);
        VEC th = VFN(tanh)(GELU_K * (v + GELU_C * v * v * v));
        VFN(store)(out + i, 0.5f * v * (1.0f + th));
    }
    for (; i < n; i++) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + ftanh(GELU_K * (v + GELU_C * v * v * v)));
    }
}

static void VFN(gelu_bwd)(float *dx, const float *x, const float *dout, size_t n)
{
    size_t i = 0;
    for (; i + VEC_N <= n; i += VEC_N) {
        VEC v = VFN(load)(x + i);
        VEC th = VFN(tanh)(GELU_K * (v + GELU_C * v * v * v));
        VEC du = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        VEC g = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du;
        VFN(store)(dx + i, VFN(load)(dout + i) * g);
    }
    for (; i < n; i++) {
        float v = x[i];
        float th = ftanh(GELU_K * (v + GELU_C * v * v * v));
        float du = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        dx[i] = dout[i] * (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du);
    }
}
