/*
 * Tensor-parallel linear layers: creation, parameter access and canonical import/export.
 * The compute paths are in linear_fwd.c (forward and backward); balancing in priority.c and
 * migrate.c.
 */
#include <string.h>

#include "coll/comm_internal.h"
#include "common/alloc.h"
#include "common/checked.h"
#include "tp/tp_internal.h"

static zen_status register_layer(zen_tp_group *g, zen_tp_linear *l)
{
    if (g->nlayers == g->cap_layers) {
        int cap = g->cap_layers ? 2 * g->cap_layers : 8;
        zen_tp_linear **p = zen__realloc(g->layers, (size_t)cap * sizeof *p);
        if (!p)
            return ZEN_ENOMEM;
        g->layers = p;
        g->cap_layers = cap;
    }
    g->layers[g->nlayers++] = l;
    return ZEN_OK;
}

static void unregister_layer(zen_tp_group *g, const zen_tp_linear *l)
{
    for (int i = 0; i < g->nlayers; i++) {
        if (g->layers[i] == l) {
            memmove(&g->layers[i], &g->layers[i + 1],
                    (size_t)(g->nlayers - i - 1) * sizeof *g->layers);
            g->nlayers--;
            return;
        }
    }
}

static zen_status check_shape(zen_tp_group *g, zen_tp_kind kind, int in, int out)
{
    if (kind != ZEN_TP_COLUMN && kind != ZEN_TP_ROW)
        return zen__fail(g->comm, ZEN_EINVAL, "tp linear: unknown kind %d", (int)kind);
    if (in <= 0 || out <= 0)
        return zen__fail(g->comm, ZEN_EINVAL, "tp linear: bad shape in %d out %d", in, out);
    int split = kind == ZEN_TP_COLUMN ? out : in;
    if (split % g->size != 0)
        return zen__fail(g->comm, ZEN_EINVAL,
                         "tp linear: %s features %d not divisible by tp size %d",
                         kind == ZEN_TP_COLUMN ? "out" : "in", split, g->size);
    size_t total;
    if (zen_mul_overflow((size_t)in, (size_t)out, &total) || total > ((size_t)1 << 40))
        return zen__fail(g->comm, ZEN_EINVAL, "tp linear: %d x %d is too large", out, in);
    return ZEN_OK;
}

zen_status zen_tp_linear_create(zen_tp_group *g, zen_tp_kind kind, int in_features,
                                int out_features, int has_bias, zen_tp_linear **out)
{
    if (!out)
        return ZEN_EINVAL;
    *out = NULL;
    if (!g)
        return ZEN_EINVAL;
    zen_status st = check_shape(g, kind, in_features, out_features);
    if (st != ZEN_OK)
        return st;
    zen_tp_linear *l = zen__calloc(1, sizeof *l);
    if (!l)
        return ZEN_ENOMEM;
    l->g = g;
    l->npeers = g->size;
    l->kind = kind;
    l->in = in_features;
    l->out = out_features;
    l->has_bias = has_bias != 0;
    l->wrows = kind == ZEN_TP_COLUMN ? out_features / g->size : out_features;
    l->K = kind == ZEN_TP_COLUMN ? in_features : in_features / g->size;
    l->nbias = l->has_bias ? (kind == ZEN_TP_COLUMN ? l->wrows : out_features) : 0;
    l->n_local = l->K;
    size_t wcount = (size_t)l->wrows * (size_t)l->K;
    l->w = zen__calloc(wcount, sizeof(float));
    l->gw = zen__calloc(wcount, sizeof(float));
    if (!l->w || !l->gw)
        goto fail_nomem;
    if (l->nbias) {
        l->b = zen__calloc((size_t)l->nbias, sizeof(float));
        l->gb = zen__calloc((size_t)l->nbias, sizeof(float));
        if (!l->b || !l->gb)
            goto fail_nomem;
    }
    st = zen__tp_layer_alloc_balance(l);
    if (st != ZEN_OK)
        goto fail;
    st = register_layer(g, l);
    if (st != ZEN_OK)
        goto fail;
    l->id = g->next_layer_id++;
    *out = l;
    return ZEN_OK;
fail_nomem:
    st = ZEN_ENOMEM;
fail:
    zen_tp_linear_destroy(l);
    return st;
}

static void free_peer_arrays(zen_tp_linear *l, int n)
{
    if (l->in_idx)
        for (int s = 0; s < n; s++)
            zen__free(l->in_idx[s]);
    if (l->replica)
        for (int s = 0; s < n; s++)
            zen__free(l->replica[s]);
    zen__free(l->in_idx);
    zen__free(l->replica);
    zen__free(l->mig_off);
    zen__free(l->mig_cnt);
    zen__free(l->in_cnt);
}

void zen_tp_linear_destroy(zen_tp_linear *l)
{
    if (!l)
        return;
    /* a layer that failed creation half way is not registered: unregister is then a no-op;
     * a layer whose group was destroyed first is detached (g NULL) */
    if (l->g)
        unregister_layer(l->g, l);
    free_peer_arrays(l, l->npeers);
    zen__free(l->w);
    zen__free(l->gw);
    zen__free(l->b);
    zen__free(l->gb);
    zen__free(l->perm);
    zen__free(l->pos);
    zen__free(l->score);
    zen__free(l->wref);
    zen__free(l->active);
    zen__free(l->xg);
    zen__free(l->tmp);
    zen__free(l->tmp2);
    zen__free(l->mbuf);
    zen__free(l->mbuf2);
    zen__free(l);
}

zen_status zen_tp_linear_weight(zen_tp_linear *l, zen_tp_param *w)
{
    if (!l || !w)
        return ZEN_EINVAL;
    w->data = l->w;
    w->grad = l->gw;
    w->count = (size_t)l->wrows * (size_t)l->K;
    w->rows = l->wrows;
    w->cols = l->K;
    return ZEN_OK;
}

zen_status zen_tp_linear_bias(zen_tp_linear *l, zen_tp_param *b)
{
    if (!l || !b)
        return ZEN_EINVAL;
    b->data = l->b;
    b->grad = l->gb;
    b->count = (size_t)l->nbias;
    b->rows = l->nbias ? 1 : 0;
    b->cols = l->nbias;
    return ZEN_OK;
}

static void to_canonical(const zen_tp_linear *l, const float *src, float *dst)
{
    size_t total = (size_t)l->wrows * (size_t)l->K;
    if (!l->permuted) {
        memcpy(dst, src, total * sizeof(float));
        return;
    }
    for (int i = 0; i < l->wrows; i++) {
        const float *s = src + (size_t)i * l->K;
        float *d = dst + (size_t)i * l->K;
        for (int p = 0; p < l->K; p++)
            d[l->perm[p]] = s[p];
    }
}

zen_status zen_tp_linear_export_weight(const zen_tp_linear *l, float *dst)
{
    if (!l || !dst)
        return ZEN_EINVAL;
    to_canonical(l, l->w, dst);
    return ZEN_OK;
}

zen_status zen_tp_linear_export_grad(const zen_tp_linear *l, float *dst)
{
    if (!l || !dst)
        return ZEN_EINVAL;
    to_canonical(l, l->gw, dst);
    return ZEN_OK;
}

zen_status zen_tp_linear_import_weight(zen_tp_linear *l, const float *src)
{
    if (!l || !src)
        return ZEN_EINVAL;
    size_t total = (size_t)l->wrows * (size_t)l->K;
    if (!l->permuted) {
        memcpy(l->w, src, total * sizeof(float));
    } else {
        for (int i = 0; i < l->wrows; i++) {
            const float *s = src + (size_t)i * l->K;
            float *d = l->w + (size_t)i * l->K;
            for (int p = 0; p < l->K; p++)
                d[p] = s[l->perm[p]];
        }
    }
    /* the priority reference restarts from the imported weight; helper replicas are refreshed
     * at the next step boundary (call import on all ranks between steps) */
    if (l->wref) {
        memcpy(l->wref, l->w, total * sizeof(float));
        l->wref_valid = 1;
    }
    return ZEN_OK;
}

zen_status zen_tp_linear_attach_state(zen_tp_linear *l, float *companion)
{
    if (!l || !l->g || !companion)
        return ZEN_EINVAL;
    if (l->ncompanions == TP_MAX_COMPANIONS)
        return zen__fail(l->g->comm, ZEN_EINVAL, "tp linear: more than %d companion buffers",
                         TP_MAX_COMPANIONS);
    l->companions[l->ncompanions++] = companion;
    return ZEN_OK;
}

zen_status zen_tp_linear_detach_state(zen_tp_linear *l, const float *companion)
{
    if (!l || !companion)
        return ZEN_EINVAL;
    for (int c = 0; c < l->ncompanions; c++) {
        if (l->companions[c] == companion) {
            memmove(&l->companions[c], &l->companions[c + 1],
                    (size_t)(l->ncompanions - c - 1) * sizeof *l->companions);
            l->ncompanions--;
            return ZEN_OK;
        }
    }
    return l->g ? zen__fail(l->g->comm, ZEN_EINVAL, "tp linear: companion %p is not attached",
                            (const void *)companion)
                : ZEN_EINVAL;
}

zen_status zen_tp_linear_layout(const zen_tp_linear *l, int *perm, int *computed)
{
    if (!l)
        return ZEN_EINVAL;
    for (int p = 0; perm && p < l->K; p++)
        perm[p] = l->permuted ? l->perm[p] : p;
    if (computed)
        *computed = l->n_local;
    return ZEN_OK;
}

void zen__tp_gather_cols(const zen_tp_linear *l, const float *x, int rows, int first, int count,
                         float *dst)
{
    const int *perm = l->perm + first;
    for (int r = 0; r < rows; r++) {
        const float *src = x + (size_t)r * l->K;
        float *d = dst + (size_t)r * count;
        for (int p = 0; p < count; p++)
            d[p] = src[perm[p]];
    }
}
