/*
 * adamw.c - AdamW over the zen_gpt parameter registry.
 *
 * Step t (1-based), per scalar, with g the clipped gradient:
 *   m = b1 m + (1-b1) g            v = b2 v + (1-b2) g^2
 *   p = p - lr wd p [decay params]  - (lr / (1-b1^t)) m / (sqrt(v) / sqrt(1-b2^t) + eps)
 * (the same arithmetic as PyTorch's AdamW, so the two can be compared step for step).
 *
 * Global norm: sum of squares in double; TP_SHARD params are summed over the tp ranks with one
 * allreduce of a single double, replicated params (identical on every tp rank) are added once
 * after it. Every rank thus gets the same norm and the same clipping factor.
 */
#include "adamw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "alloc.h"

/* The update is done 4 lanes at a time with GCC vector extensions (the build's -O2 does not
 * vectorise it: sqrtf may set errno); lanes and the scalar tail do identical arithmetic. */
typedef float v4f __attribute__((vector_size(16)));

static inline v4f v4_sqrt(v4f x)
{
#if defined(__SSE__)
    return (v4f)_mm_sqrt_ps((__m128)x);
#else
    for (int k = 0; k < 4; k++)
        x[k] = sqrtf(x[k]);
    return x;
#endif
}

typedef struct adam_coef {
    float scale, b1, b2, decay, step_size, bc2_sqrt, eps;
} adam_coef;

/* vs: per-scalar factors of g^2 in the second moment (zen_adamw_set_moment_scales), or NULL */
static void adam_update(float *w, float *m1, float *m2, const float *g, const float *vs, size_t n,
                        const adam_coef *c)
{
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        v4f gj, mj, vj, wj, sj = { 1.0f, 1.0f, 1.0f, 1.0f };
        if (vs)
            memcpy(&sj, vs + j, sizeof sj);
        memcpy(&gj, g + j, sizeof gj);
        memcpy(&mj, m1 + j, sizeof mj);
        memcpy(&vj, m2 + j, sizeof vj);
        memcpy(&wj, w + j, sizeof wj);
        gj = gj * c->scale;
        mj = c->b1 * mj + (1.0f - c->b1) * gj;
        vj = c->b2 * vj + (1.0f - c->b2) * sj * gj * gj;
        wj = wj * c->decay - c->step_size * mj / (v4_sqrt(vj) / c->bc2_sqrt + c->eps);
        memcpy(m1 + j, &mj, sizeof mj);
        memcpy(m2 + j, &vj, sizeof vj);
        memcpy(w + j, &wj, sizeof wj);
    }
    for (; j < n; j++) {
        float gj = g[j] * c->scale;
        m1[j] = c->b1 * m1[j] + (1.0f - c->b1) * gj;
        m2[j] = c->b2 * m2[j] + (1.0f - c->b2) * (vs ? vs[j] : 1.0f) * gj * gj;
        w[j] = w[j] * c->decay - c->step_size * m1[j] / (sqrtf(m2[j]) / c->bc2_sqrt + c->eps);
    }
}

struct zen_adamw {
    zen_gpt *model;
    zen_adamw_config cfg;
    long step;
    float *mem;             /* both moments of every param, one block */
    float **m1, **m2;       /* per param views into mem */
    const float **v_scales; /* per param: per-scalar factors of g^2 in v (NULL: 1) */
};

void zen_adamw_config_default(zen_adamw_config *cfg)
{
    cfg->lr = 3e-4f;
    cfg->min_lr = 3e-5f;
    cfg->beta1 = 0.9f;
    cfg->beta2 = 0.95f;
    cfg->eps = 1e-8f;
    cfg->weight_decay = 0.1f;
    cfg->grad_clip = 1.0f;
    cfg->warmup_steps = 100;
    cfg->total_steps = 5000;
}

float zen_adamw_lr(const zen_adamw_config *cfg, long step)
{
    if (step < 0)
        step = 0;
    if (cfg->warmup_steps > 0 && step < cfg->warmup_steps)
        return cfg->lr * (float)(step + 1) / (float)cfg->warmup_steps;
    long span = cfg->total_steps - cfg->warmup_steps;
    if (span <= 0)
        return cfg->lr;
    double progress = (double)(step - cfg->warmup_steps) / (double)span;
    if (progress > 1.0)
        progress = 1.0;
    double cosine = 0.5 * (1.0 + cos(M_PI * progress));
    return (float)(cfg->min_lr + (cfg->lr - cfg->min_lr) * cosine);
}

zen_status zen_adamw_create(zen_gpt *m, const zen_adamw_config *cfg, zen_adamw **out)
{
    if (!out)
        return ZEN_EINVAL;
    *out = NULL;
    if (!m || !cfg || !(cfg->lr >= 0.0f) || !(cfg->beta1 >= 0.0f && cfg->beta1 < 1.0f) ||
        !(cfg->beta2 >= 0.0f && cfg->beta2 < 1.0f) || !(cfg->eps > 0.0f) ||
        !(cfg->weight_decay >= 0.0f))
        return ZEN_EINVAL;
    zen_adamw *o = zen_train_calloc(1, sizeof *o);
    if (!o)
        return ZEN_ENOMEM;
    o->model = m;
    o->cfg = *cfg;
    size_t np = zen_gpt_param_count(m), total = 0;
    const zen_gpt_param *p = zen_gpt_params(m);
    for (size_t i = 0; i < np; i++)
        total += p[i].count;
    o->mem = zen_train_calloc(2 * total, sizeof(float));
    o->m1 = zen_train_calloc(np, sizeof(float *));
    o->m2 = zen_train_calloc(np, sizeof(float *));
    o->v_scales = zen_train_calloc(np, sizeof(float *));
    zen_status st = o->mem && o->m1 && o->m2 && o->v_scales ? ZEN_OK : ZEN_ENOMEM;
    size_t off = 0;
    for (size_t i = 0; st == ZEN_OK && i < np; i++) {
        o->m1[i] = o->mem + off;
        o->m2[i] = o->mem + total + off;
        off += p[i].count;
        if (p[i].is_tp_weight) { /* moments must follow the weight's column permutations */
            st = zen_tp_linear_attach_state(p[i].layer, o->m1[i]);
            if (st == ZEN_OK)
                st = zen_tp_linear_attach_state(p[i].layer, o->m2[i]);
        }
    }
    if (st != ZEN_OK) {
        zen_adamw_destroy(o);
        return st;
    }
    *out = o;
    return ZEN_OK;
}

void zen_adamw_destroy(zen_adamw *o)
{
    if (!o)
        return;
    free(o->mem);
    free(o->m1);
    free(o->m2);
    free(o->v_scales);
    free(o);
}

void zen_adamw_set_moment_scales(zen_adamw *o, size_t param, const float *scales)
{
    if (param < zen_gpt_param_count(o->model))
        o->v_scales[param] = scales;
}

long zen_adamw_steps(const zen_adamw *o)
{
    return o->step;
}

static double sum_squares(const float *g, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)g[i] * g[i];
    return s;
}

static zen_status global_norm(zen_adamw *o, double *norm)
{
    size_t np = zen_gpt_param_count(o->model);
    const zen_gpt_param *p = zen_gpt_params(o->model);
    double shard = 0.0, replicated = 0.0;
    for (size_t i = 0; i < np; i++) {
        double s = sum_squares(p[i].grad, p[i].count);
        if (p[i].kind == ZEN_GPT_PARAM_TP_SHARD)
            shard += s;
        else
            replicated += s;
    }
    zen_comm *tp = zen_gpt_tp_comm(o->model);
    if (zen_comm_size(tp) > 1) {
        zen_status st = zen_allreduce(tp, &shard, &shard, 1, ZEN_F64, ZEN_SUM);
        if (st != ZEN_OK)
            return st;
    }
    *norm = sqrt(shard + replicated);
    return ZEN_OK;
}

zen_status zen_adamw_step(zen_adamw *o, float *grad_norm, float *lr_out)
{
    double norm = 0.0;
    zen_status st = global_norm(o, &norm);
    if (st != ZEN_OK)
        return st;
    const zen_adamw_config *c = &o->cfg;
    float lr = zen_adamw_lr(c, o->step);
    if (grad_norm)
        *grad_norm = (float)norm;
    if (lr_out)
        *lr_out = lr;
    if (!isfinite(norm)) {
        /* Every rank sees the same norm, so every rank skips: replicas stay equal. */
        zen_log(ZEN_LOG_WARN, "train", "adamw: step %ld skipped, gradient norm is not finite",
                o->step);
    } else {
        float scale = 1.0f;
        if (c->grad_clip > 0.0f && norm > c->grad_clip)
            scale = (float)(c->grad_clip / norm);
        double t = (double)(o->step + 1);
        adam_coef k;
        k.scale = scale;
        k.b1 = c->beta1;
        k.b2 = c->beta2;
        k.eps = c->eps;
        k.step_size = lr / (float)(1.0 - pow(c->beta1, t));
        k.bc2_sqrt = (float)sqrt(1.0 - pow(c->beta2, t));
        size_t np = zen_gpt_param_count(o->model);
        const zen_gpt_param *p = zen_gpt_params(o->model);
        for (size_t i = 0; i < np; i++) {
            k.decay = p[i].decay ? 1.0f - lr * c->weight_decay : 1.0f;
            adam_update(p[i].data, o->m1[i], o->m2[i], p[i].grad, o->v_scales[i], p[i].count, &k);
        }
    }
    o->step++;
    return zen_tp_group_step(zen_gpt_tp_group(o->model));
}

zen_status zen_adamw_export_state(zen_adamw *o, float *m1, float *m2, long *step)
{
    zen_status st = zen_gpt_export_tensors(o->model, (const float *const *)o->m1, m1);
    if (st == ZEN_OK)
        st = zen_gpt_export_tensors(o->model, (const float *const *)o->m2, m2);
    if (st == ZEN_OK && step)
        *step = o->step;
    return st;
}

zen_status zen_adamw_import_state(zen_adamw *o, const float *m1, const float *m2, long step)
{
    if (step < 0)
        return ZEN_EINVAL;
    zen_status st = zen_gpt_import_tensors(o->model, o->m1, m1);
    if (st == ZEN_OK)
        st = zen_gpt_import_tensors(o->model, o->m2, m2);
    if (st == ZEN_OK)
        o->step = step;
    return st;
}
