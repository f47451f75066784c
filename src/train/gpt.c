/*
 * gpt.c - the GPT's parameters: configuration, creation over the tp layers and the parameter
 * registry (canonical order, kinds, decay flags). Initialisation and full-model export/import
 * are in gpt_weights.c, the passes in gpt_pass.c.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "gpt_internal.h"

void zen_gpt_config_default(zen_gpt_config *cfg)
{
    cfg->vocab = 8000;
    cfg->ctx = 64;
    cfg->d_model = 128;
    cfg->n_layer = 4;
    cfg->n_head = 4;
    cfg->d_ff = 512;
    cfg->seed = 1;
}

zen_status zen_gpt_config_check(const zen_gpt_config *cfg, int tp_size)
{
    if (!cfg || tp_size < 1 || cfg->vocab < 1 || cfg->ctx < 1 || cfg->d_model < 1 ||
        cfg->n_layer < 1 || cfg->n_head < 1 || cfg->d_ff < 1)
        return ZEN_EINVAL;
    if (cfg->d_model % cfg->n_head != 0 || cfg->n_head % tp_size != 0 || cfg->d_ff % tp_size != 0)
        return ZEN_EINVAL;
    /* keep every [rows][width] buffer index within int for cblas */
    if ((long long)cfg->vocab * cfg->d_model > (1LL << 30) ||
        (long long)cfg->d_ff * cfg->d_model > (1LL << 30) || cfg->ctx > (1 << 16))
        return ZEN_EINVAL;
    return ZEN_OK;
}

static size_t block_full_count(const zen_gpt_config *c)
{
    size_t d = (size_t)c->d_model, f = (size_t)c->d_ff;
    return 4 * d               /* ln1, ln2 */
           + 3 * d * d + 3 * d /* qkv */
           + d * d + d         /* proj */
           + f * d + f         /* fc1 */
           + d * f + d;        /* fc2 */
}

size_t zen_gpt_full_param_count(const zen_gpt_config *c)
{
    size_t d = (size_t)c->d_model;
    return 2 * (size_t)c->vocab * d + (size_t)c->ctx * d + 2 * d +
           (size_t)c->n_layer * block_full_count(c);
}

void zen_train_set_blas_threads(int n)
{
    openblas_set_num_threads(n < 1 ? 1 : n);
}

const zen_gpt_config *zen_gpt_get_config(const zen_gpt *m)
{
    return &m->cfg;
}

zen_comm *zen_gpt_tp_comm(const zen_gpt *m)
{
    return m->comm;
}

zen_tp_group *zen_gpt_tp_group(const zen_gpt *m)
{
    return m->group;
}

size_t zen_gpt_param_count(const zen_gpt *m)
{
    return m->nparams;
}

const zen_gpt_param *zen_gpt_params(const zen_gpt *m)
{
    return m->params;
}

void zen_gpt_touched_rows(const zen_gpt *m, const int32_t **rows, size_t *count)
{
    *rows = m->touched;
    *count = m->ntouched;
}

void zen_gpt_set_training(zen_gpt *m, int training)
{
    m->training = training != 0;
}

/* ---- registry construction ---- */

static void add_param(zen_gpt *m, const char *name, float *data, float *grad, int rows, int cols,
                      zen_gpt_param_kind kind, int decay, zen_tp_linear *layer, int is_weight,
                      gpt_pinfo info)
{
    size_t i = m->nparams++;
    zen_gpt_param *p = &m->params[i];
    snprintf(m->names[i], sizeof m->names[i], "%s", name);
    p->name = m->names[i];
    p->data = data;
    p->grad = grad;
    p->rows = rows;
    p->cols = cols;
    p->full_count = (size_t)rows * cols;
    p->count = info.split == GPT_SPLIT_NONE ? p->full_count : p->full_count / (size_t)m->tp;
    p->kind = kind;
    p->decay = decay;
    p->layer = layer;
    p->is_tp_weight = is_weight;
    m->pinfo[i] = info;
}

static gpt_pinfo pi_const(float v)
{
    gpt_pinfo p = { GPT_SPLIT_NONE, 1, 0.0f, v };
    return p;
}

static gpt_pinfo pi_normal(gpt_split split, int parts, float std)
{
    gpt_pinfo p = { split, parts, std, 0.0f };
    return p;
}

static zen_status add_tp_layer(zen_gpt *m, const char *prefix, zen_tp_linear *l, zen_tp_kind kind,
                               int parts, float std)
{
    zen_tp_param w, b;
    zen_status st = zen_tp_linear_weight(l, &w);
    if (st == ZEN_OK)
        st = zen_tp_linear_bias(l, &b);
    if (st != ZEN_OK)
        return st;
    /* A COLUMN shard has the full in-width as cols; a ROW shard the full out-height as rows. */
    int full_rows, full_cols;
    gpt_split split, bias_split;
    zen_gpt_param_kind bias_kind;
    if (kind == ZEN_TP_COLUMN) {
        full_rows = w.rows * m->tp;
        full_cols = w.cols;
        split = GPT_SPLIT_ROWS;
        bias_kind = ZEN_GPT_PARAM_TP_SHARD;
        bias_split = GPT_SPLIT_ROWS;
    } else {
        full_rows = w.rows;
        full_cols = w.cols * m->tp;
        split = GPT_SPLIT_COLS;
        bias_kind = ZEN_GPT_PARAM_DENSE; /* row-parallel bias is replicated */
        bias_split = GPT_SPLIT_NONE;
    }
    char name[32];
    snprintf(name, sizeof name, "%s.w", prefix);
    add_param(m, name, w.data, w.grad, full_rows, full_cols, ZEN_GPT_PARAM_TP_SHARD, 1, l, 1,
              pi_normal(split, parts, std));
    snprintf(name, sizeof name, "%s.b", prefix);
    gpt_pinfo bi = { bias_split, parts, 0.0f, 0.0f };
    add_param(m, name, b.data, b.grad, 1, full_rows, bias_kind, 0, l, 0, bi);
    return ZEN_OK;
}

/* ---- create / destroy ---- */

/*
 * Every tp rank must build the same model. The ranks exchange their configuration and whether
 * it was valid locally before anything else, so that a bad or mismatched config fails on every
 * rank (instead of leaving the others waiting in the first tp collective).
 */
static zen_status agree_on_config(zen_comm *comm, const zen_gpt_config *cfg)
{
    int tp = zen_comm_size(comm);
    int valid = zen_gpt_config_check(cfg, tp) == ZEN_OK;
    if (tp == 1)
        return valid ? ZEN_OK : ZEN_EINVAL;
    int64_t mine[8] = { 0 };
    if (valid) {
        int64_t v[8] = { 1,           cfg->vocab, cfg->ctx,          cfg->d_model, cfg->n_layer,
                         cfg->n_head, cfg->d_ff,  (int64_t)cfg->seed };
        memcpy(mine, v, sizeof mine);
    }
    int64_t *all = zen_train_malloc_array((size_t)tp * 8, sizeof(int64_t));
    if (!all)
        return ZEN_ENOMEM;
    zen_status st = zen_allgather(comm, mine, all, 8, ZEN_I64);
    for (int r = 0; st == ZEN_OK && r < tp; r++) {
        if (all[(size_t)r * 8] != 1) {
            zen_log(ZEN_LOG_ERROR, "train", "gpt: tp rank %d has an invalid model config", r);
            st = ZEN_EINVAL;
        } else if (memcmp(all, all + (size_t)r * 8, sizeof mine) != 0) {
            zen_log(ZEN_LOG_ERROR, "train",
                    "gpt: tp rank %d has a different model config than tp rank 0", r);
            st = ZEN_EMISMATCH;
        }
    }
    free(all);
    return st;
}

static zen_status create_layers(zen_gpt *m)
{
    int d = m->cfg.d_model, f = m->cfg.d_ff;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        gpt_block *b = &m->blocks[l];
        zen_status st = zen_tp_linear_create(m->group, ZEN_TP_COLUMN, d, 3 * d, 1, &b->qkv);
        if (st == ZEN_OK)
            st = zen_tp_linear_create(m->group, ZEN_TP_ROW, d, d, 1, &b->proj);
        if (st == ZEN_OK)
            st = zen_tp_linear_create(m->group, ZEN_TP_COLUMN, d, f, 1, &b->fc1);
        if (st == ZEN_OK)
            st = zen_tp_linear_create(m->group, ZEN_TP_ROW, f, d, 1, &b->fc2);
        if (st != ZEN_OK)
            return st;
    }
    return ZEN_OK;
}

/* Lay out the non-tp parameters in one block and register everything in canonical order. */
static zen_status build_registry(zen_gpt *m)
{
    const zen_gpt_config *c = &m->cfg;
    size_t d = (size_t)c->d_model, V = (size_t)c->vocab, L = (size_t)c->n_layer;
    size_t own = 2 * V * d + (size_t)c->ctx * d + 2 * d + L * 4 * d;
    m->own = zen_train_calloc(own, sizeof(float));
    m->own_grad = zen_train_calloc(own, sizeof(float));
    size_t np = 2 + 12 * L + 3;
    m->params = zen_train_calloc(np, sizeof(zen_gpt_param));
    m->pinfo = zen_train_calloc(np, sizeof(gpt_pinfo));
    m->names = zen_train_calloc(np, sizeof(*m->names));
    if (!m->own || !m->own_grad || !m->params || !m->pinfo || !m->names)
        return ZEN_ENOMEM;

    float *p = m->own, *g = m->own_grad;
#define TAKE(ptr, gptr, n) \
    do {                   \
        ptr = p;           \
        gptr = g;          \
        p += (n);          \
        g += (n);          \
    } while (0)
    TAKE(m->wte, m->dwte, V * d);
    TAKE(m->wpe, m->dwpe, (size_t)c->ctx * d);
    TAKE(m->lnf_g, m->dlnf_g, d);
    TAKE(m->lnf_b, m->dlnf_b, d);
    TAKE(m->head, m->dhead, V * d);
    for (size_t l = 0; l < L; l++) {
        gpt_block *b = &m->blocks[l];
        TAKE(b->ln1_g, b->dln1_g, d);
        TAKE(b->ln1_b, b->dln1_b, d);
        TAKE(b->ln2_g, b->dln2_g, d);
        TAKE(b->ln2_b, b->dln2_b, d);
    }
#undef TAKE

    float std = 0.02f, rstd = 0.02f / sqrtf(2.0f * (float)L);
    add_param(m, "wte", m->wte, m->dwte, c->vocab, c->d_model, ZEN_GPT_PARAM_EMBEDDING, 0, NULL, 0,
              pi_normal(GPT_SPLIT_NONE, 1, std));
    add_param(m, "wpe", m->wpe, m->dwpe, c->ctx, c->d_model, ZEN_GPT_PARAM_DENSE, 0, NULL, 0,
              pi_normal(GPT_SPLIT_NONE, 1, std));
    for (size_t l = 0; l < L; l++) {
        gpt_block *b = &m->blocks[l];
        char name[32];
        zen_status st;
#define LN(field, suffix, value)                                                                  \
    do {                                                                                          \
        snprintf(name, sizeof name, "h.%zu.%s", l, suffix);                                       \
        add_param(m, name, b->field, b->d##field, 1, c->d_model, ZEN_GPT_PARAM_DENSE, 0, NULL, 0, \
                  pi_const(value));                                                               \
    } while (0)
        LN(ln1_g, "ln1.g", 1.0f);
        LN(ln1_b, "ln1.b", 0.0f);
        snprintf(name, sizeof name, "h.%zu.attn.qkv", l);
        if ((st = add_tp_layer(m, name, b->qkv, ZEN_TP_COLUMN, 3, std)) != ZEN_OK)
            return st;
        snprintf(name, sizeof name, "h.%zu.attn.proj", l);
        if ((st = add_tp_layer(m, name, b->proj, ZEN_TP_ROW, 1, rstd)) != ZEN_OK)
            return st;
        LN(ln2_g, "ln2.g", 1.0f);
        LN(ln2_b, "ln2.b", 0.0f);
        snprintf(name, sizeof name, "h.%zu.mlp.fc1", l);
        if ((st = add_tp_layer(m, name, b->fc1, ZEN_TP_COLUMN, 1, std)) != ZEN_OK)
            return st;
        snprintf(name, sizeof name, "h.%zu.mlp.fc2", l);
        if ((st = add_tp_layer(m, name, b->fc2, ZEN_TP_ROW, 1, rstd)) != ZEN_OK)
            return st;
#undef LN
    }
    add_param(m, "lnf.g", m->lnf_g, m->dlnf_g, 1, c->d_model, ZEN_GPT_PARAM_DENSE, 0, NULL, 0,
              pi_const(1.0f));
    add_param(m, "lnf.b", m->lnf_b, m->dlnf_b, 1, c->d_model, ZEN_GPT_PARAM_DENSE, 0, NULL, 0,
              pi_const(0.0f));
    add_param(m, "head.w", m->head, m->dhead, c->vocab, c->d_model, ZEN_GPT_PARAM_DENSE, 1, NULL, 0,
              pi_normal(GPT_SPLIT_NONE, 1, std));
    return m->nparams == np ? ZEN_OK : ZEN_EINTERNAL;
}

zen_status zen_gpt_create(const zen_gpt_config *cfg, zen_comm *tp_comm, zen_tp_group *g,
                          zen_gpt **out)
{
    if (!out)
        return ZEN_EINVAL;
    *out = NULL;
    if (!tp_comm || !g || !cfg)
        return ZEN_EINVAL;
    zen_status st = agree_on_config(tp_comm, cfg);
    if (st != ZEN_OK)
        return st;
    zen_gpt *m = zen_train_calloc(1, sizeof *m);
    if (!m)
        return ZEN_ENOMEM;
    m->cfg = *cfg;
    m->comm = tp_comm;
    m->group = g;
    m->tp = zen_comm_size(tp_comm);
    m->rank = zen_comm_rank(tp_comm);
    m->hd = cfg->d_model / cfg->n_head;
    m->hl = cfg->n_head / m->tp;
    m->dl = m->hl * m->hd;
    m->ffl = cfg->d_ff / m->tp;
    m->training = 1;
    m->blocks = zen_train_calloc((size_t)cfg->n_layer, sizeof(gpt_block));
    m->seen = zen_train_calloc((size_t)cfg->vocab, 1);
    m->touched = zen_train_calloc((size_t)cfg->vocab, sizeof(int32_t));
    st = m->blocks && m->seen && m->touched ? ZEN_OK : ZEN_ENOMEM;
    if (st == ZEN_OK)
        st = create_layers(m);
    if (st == ZEN_OK)
        st = build_registry(m);
    if (st == ZEN_OK)
        st = gpt_init_weights(m);
    if (st != ZEN_OK) {
        zen_gpt_destroy(m);
        return st;
    }
    *out = m;
    return ZEN_OK;
}

void zen_gpt_destroy(zen_gpt *m)
{
    if (!m)
        return;
    for (int l = 0; m->blocks && l < m->cfg.n_layer; l++) {
        zen_tp_linear_destroy(m->blocks[l].qkv);
        zen_tp_linear_destroy(m->blocks[l].proj);
        zen_tp_linear_destroy(m->blocks[l].fc1);
        zen_tp_linear_destroy(m->blocks[l].fc2);
    }
    gpt_acts_free(&m->a);
    free(m->blocks);
    free(m->own);
    free(m->own_grad);
    free(m->params);
    free(m->pinfo);
    free(m->names);
    free(m->seen);
    free(m->touched);
    free(m);
}

void zen_gpt_zero_grad(zen_gpt *m)
{
    for (size_t i = 0; i < m->nparams; i++)
        memset(m->params[i].grad, 0, m->params[i].count * sizeof(float));
    for (size_t i = 0; i < m->ntouched; i++)
        m->seen[m->touched[i]] = 0;
    m->ntouched = 0;
}
