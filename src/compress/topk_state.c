/*
 * DGC's error feedback and momentum correction around top-k selection (Lin et al., ICLR'18):
 * the velocity u accumulates momentum locally (u = m*u + g), the residual v accumulates u, and
 * only v's top-k is sent; the sent entries leave v (error feedback: the rest is sent later) and
 * u (momentum factor masking: a sent coordinate's stale momentum would otherwise push it again).
 * The state owns u and v; the step itself is zen_topk_compress_buffers (topk_step.c) on them.
 */
#include <math.h>

#include "common/alloc.h"
#include "topk_internal.h"

struct zen_topk_state {
    size_t n;
    float m;
    float *u; /* NULL for m = 0: then u = g every step and v += g */
    float *v;
};

zen_status zen_topk_state_create(size_t n, float momentum, zen_topk_state **out)
{
    if (!out)
        return ZEN_EINVAL;
    *out = NULL;
    if (!(momentum >= 0.0f && momentum < 1.0f))
        return ZEN_EINVAL;
    if (n > UINT32_MAX)
        return ZEN_EUNSUPPORTED;
    zen_topk_state *s = zen__calloc(1, sizeof *s);
    if (!s)
        return ZEN_ENOMEM;
    s->n = n;
    s->m = momentum;
    s->v = zen__calloc(n > 0 ? n : 1, sizeof(float));
    if (momentum != 0.0f)
        s->u = zen__calloc(n > 0 ? n : 1, sizeof(float));
    if (!s->v || (momentum != 0.0f && !s->u)) {
        zen_topk_state_destroy(s);
        return ZEN_ENOMEM;
    }
    *out = s;
    return ZEN_OK;
}

void zen_topk_state_destroy(zen_topk_state *s)
{
    if (!s)
        return;
    zen__free(s->u);
    zen__free(s->v);
    zen__free(s);
}

size_t zen_topk_state_size(const zen_topk_state *s)
{
    return s ? s->n : 0;
}

const float *zen_topk_state_residual(const zen_topk_state *s)
{
    return s ? s->v : NULL;
}

const float *zen_topk_state_velocity(const zen_topk_state *s)
{
    return s ? s->u : NULL;
}

zen_status zen_topk_compress(zen_topk_state *s, const float *grad, size_t k,
                             const zen_topk_options *opts, uint32_t *indices, float *values,
                             size_t capacity, size_t *count)
{
    if (count)
        *count = 0;
    if (!s)
        return ZEN_EINVAL;
    zen_topk_buffers b = { .size = sizeof b,
                           .n = s->n,
                           .grad = grad,
                           .residual = s->v,
                           .velocity = s->u,
                           .momentum = s->u ? s->m : 0.0f };
    return zen_topk_compress_buffers(&b, k, opts, indices, values, capacity, count);
}

zen_status zen_topk_state_add(zen_topk_state *s, const uint32_t *indices, const float *values,
                              size_t count)
{
    if (!s || (count > 0 && (!indices || !values)))
        return ZEN_EINVAL;
    for (size_t i = 0; i < count; i++)
        if (indices[i] >= s->n)
            return ZEN_EINVAL;
    for (size_t i = 0; i < count; i++)
        s->v[indices[i]] += values[i];
    return ZEN_OK;
}
