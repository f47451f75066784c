/*
 * GPT ops (src/train/ops.c): every backward is checked against central finite differences of
 * its forward, and the forwards of attention, linear and layernorm against naive double loops.
 *
 * Finite differences: the scalar is L = sum(out .* R) for a fixed random R (so the upstream
 * gradient is R), accumulated in double; step eps = 1e-3 on fp32 inputs of size O(1).
 * Tolerance |analytic - numeric| <= 2e-3 + 1e-2 * |numeric|: the fp32 rounding of the forward
 * (~1e-7 relative per output, divided by 2 eps) is well below it, while a wrong term of any
 * formula is O(1) off.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "train/ops.h"

#define FD_EPS  1e-3f
#define FD_ATOL 2e-3
#define FD_RTOL 1e-2

static uint64_t rng = 12345;

static float urand(void) /* uniform in [-1, 1) */
{
    return (float)((zt_rand(&rng) >> 40) * (1.0 / 16777216.0) * 2.0 - 1.0);
}

static float *rand_vec(size_t n, float scale)
{
    float *v = malloc(n * sizeof(float));
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = scale * urand();
    return v;
}

static float *zero_vec(size_t n)
{
    float *v = calloc(n, sizeof(float));
    assert_non_null(v);
    return v;
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

typedef double (*loss_fn)(void *ctx);

/* Compare analytic[i] with the central difference of loss() in x[i], for every i. */
static void fd_check(const char *what, float *x, const float *analytic, size_t n, loss_fn loss,
                     void *ctx)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float keep = x[i];
        x[i] = keep + FD_EPS;
        double lp = loss(ctx);
        x[i] = keep - FD_EPS;
        double lm = loss(ctx);
        x[i] = keep;
        double num = (lp - lm) / (2.0 * (double)FD_EPS);
        double err = fabs((double)analytic[i] - num);
        if (err > FD_ATOL + FD_RTOL * fabs(num)) {
            if (bad++ < 5)
                fprintf(stderr, "%s[%zu]: analytic %.6g numeric %.6g\n", what, i,
                        (double)analytic[i], num);
        }
    }
    assert_int_equal(bad, 0);
}

/* ---- embedding ---- */

struct embed_ctx {
    float *wte, *wpe, *out, *r;
    int32_t *tok;
    int B, T, d;
};

static double embed_loss(void *p)
{
    struct embed_ctx *c = p;
    zen_op_embed_forward(c->out, c->wte, c->wpe, c->tok, c->B, c->T, c->d);
    return dot(c->out, c->r, (size_t)c->B * c->T * c->d);
}

static void test_embedding(void **state)
{
    (void)state;

    enum {
        V = 7,
        B = 2,
        T = 4,
        D = 5
    };

    int32_t tok[B * T] = { 3, 1, 3, 6, 0, 3, 1, 5 }; /* repeats: scatter-add must accumulate */
    struct embed_ctx c = { rand_vec(V * D, 1),
                           rand_vec(T * D, 1),
                           zero_vec(B * T * D),
                           rand_vec(B * T * D, 1),
                           tok,
                           B,
                           T,
                           D };
    float *dwte = zero_vec(V * D), *dwpe = zero_vec(T * D);
    embed_loss(&c);
    for (int i = 0; i < B * T * D; i++) {
        int row = i / D, col = i % D;
        assert_float_equal(c.out[i], c.wte[tok[row] * D + col] + c.wpe[(row % T) * D + col], 0);
    }
    zen_op_embed_backward(dwte, dwpe, c.r, tok, B, T, D);
    fd_check("dwte", c.wte, dwte, V * D, embed_loss, &c);
    fd_check("dwpe", c.wpe, dwpe, T * D, embed_loss, &c);
    for (int i = 0; i < D; i++) /* token 2 and 4 never occur */
        assert_true(dwte[2 * D + i] == 0.0f && dwte[4 * D + i] == 0.0f);
    free(c.wte), free(c.wpe), free(c.out), free(c.r), free(dwte), free(dwpe);
}

/* ---- layernorm ---- */

struct ln_ctx {
    float *x, *g, *b, *out, *mean, *rstd, *r;
    int n, d;
};

static double ln_loss(void *p)
{
    struct ln_ctx *c = p;
    zen_op_layernorm_forward(c->out, c->mean, c->rstd, c->x, c->g, c->b, c->n, c->d);
    return dot(c->out, c->r, (size_t)c->n * c->d);
}

static void test_layernorm(void **state)
{
    (void)state;

    enum {
        N = 4,
        D = 6
    };
    struct ln_ctx c = { rand_vec(N * D, 2),
                        rand_vec(D, 1),
                        rand_vec(D, 1),
                        zero_vec(N * D),
                        zero_vec(N),
                        zero_vec(N),
                        rand_vec(N * D, 1),
                        N,
                        D };
    for (int i = 0; i < D; i++)
        c.x[i] += 30.0f; /* a large mean in one row */
    ln_loss(&c);
    for (int r = 0; r < N; r++) { /* naive double reference */
        double m = 0, v = 0;
        for (int i = 0; i < D; i++)
            m += c.x[r * D + i];
        m /= D;
        for (int i = 0; i < D; i++)
            v += (c.x[r * D + i] - m) * (c.x[r * D + i] - m);
        v /= D;
        for (int i = 0; i < D; i++) {
            double ref = (c.x[r * D + i] - m) / sqrt(v + 1e-5) * c.g[i] + c.b[i];
            assert_true(fabs(ref - c.out[r * D + i]) < 1e-4);
        }
    }
    /* dx accumulates: start from a known offset and subtract it. */
    float *dx = rand_vec(N * D, 1), *dx0 = malloc(N * D * sizeof(float));
    memcpy(dx0, dx, N * D * sizeof(float));
    float *dg = zero_vec(D), *db = zero_vec(D);
    zen_op_layernorm_backward(dx, dg, db, c.r, c.x, c.mean, c.rstd, c.g, N, D);
    for (int i = 0; i < N * D; i++)
        dx[i] -= dx0[i];
    fd_check("ln dx", c.x, dx, N * D, ln_loss, &c);
    fd_check("ln dg", c.g, dg, D, ln_loss, &c);
    fd_check("ln db", c.b, db, D, ln_loss, &c);
    free(c.x), free(c.g), free(c.b), free(c.out), free(c.mean), free(c.rstd), free(c.r);
    free(dx), free(dx0), free(dg), free(db);
}

/* ---- gelu ---- */

struct gelu_ctx {
    float *x, *out, *r;
    size_t n;
};

static double gelu_loss(void *p)
{
    struct gelu_ctx *c = p;
    zen_op_gelu_forward(c->out, c->x, c->n);
    return dot(c->out, c->r, c->n);
}

static void test_gelu(void **state)
{
    (void)state;

    enum {
        N = 40
    };
    struct gelu_ctx c = { rand_vec(N, 4), zero_vec(N), rand_vec(N, 1), N };
    c.x[0] = 30.0f; /* saturated tails */
    c.x[5] = -30.0f;
    c.x[N - 1] = 0.0f;
    gelu_loss(&c);
    for (int i = 0; i < N; i++) {
        double x = c.x[i];
        double ref = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        assert_true(fabs(ref - c.out[i]) < 1e-5 * (1 + fabs(ref)));
    }
    float *dx = zero_vec(N);
    zen_op_gelu_backward(dx, c.x, c.r, N);
    fd_check("gelu dx", c.x, dx, N, gelu_loss, &c);
    free(c.x), free(c.out), free(c.r), free(dx);
}

/* ---- linear ---- */

struct lin_ctx {
    float *x, *w, *b, *y, *r;
    int n, in, out;
};

static double lin_loss(void *p)
{
    struct lin_ctx *c = p;
    zen_op_linear_forward(c->y, c->x, c->w, c->b, c->n, c->in, c->out);
    return dot(c->y, c->r, (size_t)c->n * c->out);
}

static void test_linear(void **state)
{
    (void)state;

    enum {
        N = 5,
        IN = 4,
        OUT = 3
    };
    struct lin_ctx c = { rand_vec(N * IN, 1),
                         rand_vec(OUT * IN, 1),
                         rand_vec(OUT, 1),
                         zero_vec(N * OUT),
                         rand_vec(N * OUT, 1),
                         N,
                         IN,
                         OUT };
    lin_loss(&c);
    for (int r = 0; r < N; r++)
        for (int o = 0; o < OUT; o++) {
            double ref = c.b[o];
            for (int i = 0; i < IN; i++)
                ref += (double)c.x[r * IN + i] * c.w[o * IN + i];
            assert_true(fabs(ref - c.y[r * OUT + o]) < 1e-5);
        }
    float *dx = rand_vec(N * IN, 1); /* overwritten */
    float *dw = zero_vec(OUT * IN), *db = zero_vec(OUT);
    zen_op_linear_backward(dx, dw, db, c.r, c.x, c.w, N, IN, OUT);
    fd_check("lin dx", c.x, dx, N * IN, lin_loss, &c);
    fd_check("lin dw", c.w, dw, OUT * IN, lin_loss, &c);
    fd_check("lin db", c.b, db, OUT, lin_loss, &c);
    /* a second backward accumulates dW and db */
    float *dw1 = malloc(OUT * IN * sizeof(float));
    memcpy(dw1, dw, OUT * IN * sizeof(float));
    zen_op_linear_backward(NULL, dw, db, c.r, c.x, c.w, N, IN, OUT);
    for (int i = 0; i < OUT * IN; i++)
        assert_true(fabsf(dw[i] - 2 * dw1[i]) <= 1e-5f * (1 + fabsf(dw[i])));
    free(c.x), free(c.w), free(c.b), free(c.y), free(c.r), free(dx), free(dw), free(db), free(dw1);
}

/* ---- attention ---- */

struct att_ctx {
    float *qkv, *out, *att, *r;
    int B, T, h, hd;
};

static double att_loss(void *p)
{
    struct att_ctx *c = p;
    zen_op_attention_forward(c->out, c->att, c->qkv, c->B, c->T, c->h, c->hd);
    return dot(c->out, c->r, (size_t)c->B * c->T * c->h * c->hd);
}

static void test_attention(void **state)
{
    (void)state;

    enum {
        B = 2,
        T = 5,
        H = 2,
        HD = 3,
        D = H * HD
    };
    struct att_ctx c = { rand_vec(B * T * 3 * D, 1.5f),
                         zero_vec(B * T * D),
                         zero_vec(B * H * T * T),
                         rand_vec(B * T * D, 1),
                         B,
                         T,
                         H,
                         HD };
    att_loss(&c);
    /* naive reference: explicit loops, double precision */
    for (int b = 0; b < B; b++)
        for (int j = 0; j < H; j++)
            for (int t = 0; t < T; t++) {
                double s[T], mx = -1e300, sum = 0;
                const float *q = c.qkv + (b * T + t) * 3 * D + j * HD;
                for (int u = 0; u <= t; u++) {
                    const float *k = c.qkv + (b * T + u) * 3 * D + D + j * HD;
                    s[u] = 0;
                    for (int i = 0; i < HD; i++)
                        s[u] += (double)q[i] * k[i];
                    s[u] /= sqrt((double)HD);
                    mx = s[u] > mx ? s[u] : mx;
                }
                for (int u = 0; u <= t; u++)
                    sum += (s[u] = exp(s[u] - mx));
                for (int i = 0; i < HD; i++) {
                    double o = 0;
                    for (int u = 0; u <= t; u++)
                        o += s[u] / sum * c.qkv[(b * T + u) * 3 * D + 2 * D + j * HD + i];
                    assert_true(fabs(o - c.out[(b * T + t) * D + j * HD + i]) < 1e-5);
                }
            }
    float *dqkv = rand_vec(B * T * 3 * D, 1), *scratch = zero_vec(T * T);
    zen_op_attention_backward(dqkv, scratch, c.r, c.att, c.qkv, B, T, H, HD);
    fd_check("att dqkv", c.qkv, dqkv, B * T * 3 * D, att_loss, &c);
    free(c.qkv), free(c.out), free(c.att), free(c.r), free(dqkv), free(scratch);
}

/* ---- cross-entropy ---- */

struct xent_ctx {
    float *z, *e, *rsum;
    int32_t *tgt;
    int n, v;
};

static double xent_loss(void *p)
{
    struct xent_ctx *c = p;
    return zen_op_xent_forward(c->e, c->rsum, c->z, c->tgt, c->n, c->v);
}

static void test_xent(void **state)
{
    (void)state;

    enum {
        N = 4,
        V = 9
    };

    int32_t tgt[N] = { 0, 8, 3, 3 };
    struct xent_ctx c = { rand_vec(N * V, 3), zero_vec(N * V), zero_vec(N), tgt, N, V };
    c.z[V + 2] = 80.0f; /* a large logit: max subtraction keeps it finite */
    double loss = xent_loss(&c), ref = 0;
    for (int r = 0; r < N; r++) {
        double s = 0;
        for (int i = 0; i < V; i++)
            s += exp((double)c.z[r * V + i] - 80.0);
        ref += log(s) + 80.0 - c.z[r * V + tgt[r]];
    }
    ref /= N;
    assert_true(isfinite(loss) && fabs(loss - ref) < 1e-4 * (1 + fabs(ref)));
    float *dz = zero_vec(N * V);
    zen_op_xent_backward(dz, c.e, c.rsum, tgt, N, V, 1.0f / N);
    fd_check("xent dz", c.z, dz, N * V, xent_loss, &c);
    /* in place over the saved exponentials gives the same */
    xent_loss(&c);
    zen_op_xent_backward(c.e, c.e, c.rsum, tgt, N, V, 1.0f / N);
    assert_memory_equal(c.e, dz, N * V * sizeof(float));
    free(c.z), free(c.e), free(c.rsum), free(dz);
}

/* The same elementwise results from the baseline (4-lane) and the AVX2 (8-lane) kernels: equal
 * except for the order of a row sum. Also reruns the gradient checks on the baseline kernels. */
static void test_baseline_kernels(void **state)
{
    enum {
        N = 1003
    }; /* not a multiple of 8: exercises the scalar tails too */

    float *x = rand_vec(N, 6), *a = zero_vec(N), *b = zero_vec(N), *g = rand_vec(N, 1);
    zen_op_force_baseline(0);
    zen_op_gelu_forward(a, x, N);
    zen_op_force_baseline(1);
    zen_op_gelu_forward(b, x, N);
    assert_memory_equal(a, b, N * sizeof(float));
    zen_op_gelu_backward(b, x, g, N);
    zen_op_force_baseline(0);
    zen_op_gelu_backward(a, x, g, N);
    assert_memory_equal(a, b, N * sizeof(float));
    int32_t tgt[1] = { 17 };
    float e1[N], e2[N], r1, r2;
    zen_op_force_baseline(1);
    float l1 = zen_op_xent_forward(e1, &r1, x, tgt, 1, N);
    zen_op_force_baseline(0);
    float l2 = zen_op_xent_forward(e2, &r2, x, tgt, 1, N);
    assert_memory_equal(e1, e2, sizeof e1);
    assert_true(fabsf(l1 - l2) <= 1e-6f * fabsf(l1) && fabsf(r1 - r2) <= 1e-6f * r1);
    free(x), free(a), free(b), free(g);
    zen_op_force_baseline(1);
    test_gelu(state);
    test_attention(state);
    test_xent(state);
    zen_op_force_baseline(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_xent),
        cmocka_unit_test(test_baseline_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
