/*
 * gpt_weights.c - deterministic tp-independent initialisation and full-model export/import in
 * the canonical layout.
 *
 * Slicing: a canonical full tensor is cut for tp rank r by its gpt_pinfo.split:
 *   ROWS, parts P: the full [P*R][C] is P row blocks (Q, K, V for qkv); rank r keeps rows
 *         r*R/tp .. (r+1)*R/tp-1 of EACH block, stacked, so its local Q|K|V rows are those of
 *         its own heads (heads are contiguous row ranges inside each block).
 *   COLS: the full [R][C] gives rank r columns r*C/tp .. (r+1)*C/tp-1.
 *   NONE: replicated.
 * Export runs the inverse per rank after an allgather of the local tensors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "gpt_internal.h"

/* ---- deterministic init ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Box-Muller pairs from a per-tensor stream: the values depend only on (seed, tensor index). */
static void fill_normal(float *x, size_t n, float std, uint64_t seed, size_t tensor)
{
    uint64_t s = seed ^ (0xd1b54a32d192ed03ull * (tensor + 1));
    for (size_t i = 0; i < n; i += 2) {
        double u1 = ((splitmix(&s) >> 11) + 1.0) * (1.0 / 9007199254740993.0); /* (0, 1] */
        double u2 = (splitmix(&s) >> 11) * (1.0 / 9007199254740992.0);
        double r = sqrt(-2.0 * log(u1));
        x[i] = (float)(std * r * cos(2.0 * M_PI * u2));
        if (i + 1 < n)
            x[i + 1] = (float)(std * r * sin(2.0 * M_PI * u2));
    }
}

/* Copy between a full tensor and rank r's slice; to_local selects the direction. */
static void slice_copy(const zen_gpt_param *p, const gpt_pinfo *pi, int tp, int r, float *full,
                       float *local, int to_local)
{
    size_t rows = (size_t)p->rows, cols = (size_t)p->cols;
    if (pi->split == GPT_SPLIT_NONE) {
        if (to_local)
            memcpy(local, full, rows * cols * sizeof(float));
        else
            memcpy(full, local, rows * cols * sizeof(float));
        return;
    }
    if (pi->split == GPT_SPLIT_ROWS && rows == 1) { /* a column-parallel bias: split "cols" */
        rows = cols;
        cols = 1;
    }
    if (pi->split == GPT_SPLIT_ROWS) {
        size_t R = rows / (size_t)pi->parts, lr = R / (size_t)tp;
        for (int k = 0; k < pi->parts; k++) {
            float *f = full + ((size_t)k * R + (size_t)r * lr) * cols;
            float *l = local + (size_t)k * lr * cols;
            if (to_local)
                memcpy(l, f, lr * cols * sizeof(float));
            else
                memcpy(f, l, lr * cols * sizeof(float));
        }
        return;
    }
    size_t lc = cols / (size_t)tp;
    for (size_t i = 0; i < rows; i++) {
        float *f = full + i * cols + (size_t)r * lc;
        float *l = local + i * lc;
        if (to_local)
            memcpy(l, f, lc * sizeof(float));
        else
            memcpy(f, l, lc * sizeof(float));
    }
}

/* Write a local tensor into param i (through the tp layer for weights: canonical order). */
static zen_status store_local(zen_gpt *m, size_t i, const float *local)
{
    const zen_gpt_param *p = &m->params[i];
    if (p->is_tp_weight)
        return zen_tp_linear_import_weight(p->layer, local);
    memcpy(p->data, local, p->count * sizeof(float));
    return ZEN_OK;
}

static size_t max_full_count(const zen_gpt *m)
{
    size_t mx = 0;
    for (size_t i = 0; i < m->nparams; i++)
        mx = m->params[i].full_count > mx ? m->params[i].full_count : mx;
    return mx;
}

zen_status gpt_init_weights(zen_gpt *m)
{
    size_t mx = max_full_count(m);
    float *full = zen_train_malloc_array(mx, sizeof(float));
    float *local = zen_train_malloc_array(mx, sizeof(float));
    zen_status st = full && local ? ZEN_OK : ZEN_ENOMEM;
    for (size_t i = 0; st == ZEN_OK && i < m->nparams; i++) {
        const zen_gpt_param *p = &m->params[i];
        const gpt_pinfo *pi = &m->pinfo[i];
        if (pi->init_std > 0.0f) {
            fill_normal(full, p->full_count, pi->init_std, m->cfg.seed, i);
        } else {
            for (size_t j = 0; j < p->full_count; j++)
                full[j] = pi->init_const;
        }
        slice_copy(p, pi, m->tp, m->rank, full, local, 1);
        st = store_local(m, i, local);
    }
    free(full);
    free(local);
    return st;
}

/* ---- export / import ---- */

zen_status zen_gpt_import_tensors(zen_gpt *m, float *const *local, const float *src)
{
    size_t off = 0;
    for (size_t i = 0; i < m->nparams; i++) {
        slice_copy(&m->params[i], &m->pinfo[i], m->tp, m->rank, (float *)(uintptr_t)(src + off),
                   local[i], 1);
        off += m->params[i].full_count;
    }
    return ZEN_OK;
}

/*
 * Canonical (unpermuted) copy of a tp weight-shaped local array: a balance plan may have
 * permuted the weight, its gradient and the attached companions alike along K. The layer only
 * exports the weight and the gradient in canonical order, so any other array (an Adam moment)
 * is passed through the gradient buffer, which is restored afterwards.
 */
static zen_status tp_canonical(const zen_gpt_param *p, const float *local, float *dst, float *spare)
{
    if (local == p->data)
        return zen_tp_linear_export_weight(p->layer, dst);
    if (local == p->grad)
        return zen_tp_linear_export_grad(p->layer, dst);
    memcpy(spare, p->grad, p->count * sizeof(float));
    memcpy(p->grad, local, p->count * sizeof(float));
    zen_status st = zen_tp_linear_export_grad(p->layer, dst);
    memcpy(p->grad, spare, p->count * sizeof(float));
    return st;
}

zen_status zen_gpt_export_tensors(zen_gpt *m, const float *const *local, float *dst)
{
    size_t mx = 0;
    for (size_t i = 0; i < m->nparams; i++)
        mx = m->params[i].count > mx ? m->params[i].count : mx;
    /* all: the tp ranks' local tensors side by side; canon/spare: one local tensor each */
    float *all = zen_train_malloc_array(mx * (size_t)(m->tp + 2), sizeof(float));
    if (!all)
        return ZEN_ENOMEM;
    float *canon = all + mx * (size_t)m->tp, *spare = canon + mx;
    zen_status st = ZEN_OK;
    size_t off = 0;
    for (size_t i = 0; st == ZEN_OK && i < m->nparams; i++) {
        const zen_gpt_param *p = &m->params[i];
        const gpt_pinfo *pi = &m->pinfo[i];
        const float *src = local[i];
        if (p->is_tp_weight) {
            st = tp_canonical(p, src, canon, spare);
            src = canon;
        }
        if (st != ZEN_OK)
            break;
        if (pi->split == GPT_SPLIT_NONE || m->tp == 1) {
            slice_copy(p, pi, 1, 0, dst + off, (float *)(uintptr_t)src, 0);
        } else {
            st = zen_allgather(m->comm, src, all, p->count, ZEN_F32);
            for (int r = 0; st == ZEN_OK && r < m->tp; r++)
                slice_copy(p, pi, m->tp, r, dst + off, all + (size_t)r * p->count, 0);
        }
        off += p->full_count;
    }
    free(all);
    return st;
}

zen_status zen_gpt_export(zen_gpt *m, float *dst)
{
    const float **local = zen_train_calloc(m->nparams, sizeof(*local));
    if (!local)
        return ZEN_ENOMEM;
    for (size_t i = 0; i < m->nparams; i++)
        local[i] = m->params[i].data;
    zen_status st = zen_gpt_export_tensors(m, local, dst);
    free((void *)local);
    return st;
}

zen_status zen_gpt_import(zen_gpt *m, const float *src)
{
    float *local = zen_train_malloc_array(max_full_count(m), sizeof(float));
    if (!local)
        return ZEN_ENOMEM;
    zen_status st = ZEN_OK;
    size_t off = 0;
    for (size_t i = 0; st == ZEN_OK && i < m->nparams; i++) {
        slice_copy(&m->params[i], &m->pinfo[i], m->tp, m->rank, (float *)(uintptr_t)(src + off),
                   local, 1);
        st = store_local(m, i, local);
        off += m->params[i].full_count;
    }
    free(local);
    return st;
}
