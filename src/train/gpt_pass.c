/*
 * gpt_pass.c - forward and backward passes of zen_gpt over reusable activation buffers.
 *
 * Forward, per block l (N = B*T rows; tp collectives only inside the tp layers):
 *   r0 = resid[2l]        ln1 = LN(r0)      qkv = qkv_layer(ln1)           [N][3 dl], local heads
 *   att_out = attention(qkv)                 tmp = proj_layer(att_out)      allreduce -> [N][d]
 *   r1 = resid[2l+1] = r0 + tmp              ln2 = LN(r1)      fc1 = fc1_layer(ln2)   [N][ffl]
 *   gelu = GELU(fc1)                         tmp = fc2_layer(gelu)         allreduce -> [N][d]
 *   resid[2l+2] = r1 + tmp
 * then lnf = LN(resid[2L]), logits = lnf head^T, loss = mean xent.
 * Backward runs it in reverse with dresid the gradient of the residual stream: the residual
 * connections are identities, so each LN backward simply accumulates into dresid.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "gpt_internal.h"
#include "ops.h"

void gpt_acts_free(gpt_acts *a)
{
    float **bufs[] = { &a->resid,   &a->ln1,       &a->ln2,     &a->ln1_stat, &a->ln2_stat,
                       &a->qkv,     &a->att,       &a->att_out, &a->fc1,      &a->gelu,
                       &a->lnf,     &a->lnf_stat,  &a->logits,  &a->rsum,     &a->dresid,
                       &a->dln,     &a->tmp,       &a->datt,    &a->dqkv,     &a->dfc,
                       &a->dlogits, &a->scratch_tt };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
    free(a->tokens);
    free(a->targets);
    a->tokens = a->targets = NULL;
    a->rows_cap = a->att_cap = 0;
}

static float *fbuf(size_t n, int *fail)
{
    float *p = zen_train_malloc_array(n ? n : 1, sizeof(float));
    if (!p)
        *fail = 1;
    return p;
}

/* Grow the buffers (never shrink) so B x T fits; a failed growth leaves no buffers at all. */
static zen_status ensure_acts(zen_gpt *m, int B, int T)
{
    size_t rows = (size_t)B * T, att = (size_t)B * T * T;
    gpt_acts *a = &m->a;
    if (rows <= a->rows_cap && att <= a->att_cap && (size_t)T * T <= a->att_cap)
        return ZEN_OK;
    if (rows < a->rows_cap)
        rows = a->rows_cap;
    if (att < a->att_cap)
        att = a->att_cap;
    gpt_acts_free(a);
    size_t L = (size_t)m->cfg.n_layer, d = (size_t)m->cfg.d_model, V = (size_t)m->cfg.vocab;
    size_t dl = (size_t)m->dl, ffl = (size_t)m->ffl, hl = (size_t)m->hl;
    size_t tt = (size_t)T * T;
    int fail = 0;
    a->resid = fbuf((2 * L + 1) * rows * d, &fail);
    a->ln1 = fbuf(L * rows * d, &fail);
    a->ln2 = fbuf(L * rows * d, &fail);
    a->ln1_stat = fbuf(L * rows * 2, &fail);
    a->ln2_stat = fbuf(L * rows * 2, &fail);
    a->qkv = fbuf(L * rows * 3 * dl, &fail);
    a->att = fbuf(L * att * hl, &fail);
    a->att_out = fbuf(L * rows * dl, &fail);
    a->fc1 = fbuf(L * rows * ffl, &fail);
    a->gelu = fbuf(L * rows * ffl, &fail);
    a->lnf = fbuf(rows * d, &fail);
    a->lnf_stat = fbuf(rows * 2, &fail);
    a->logits = fbuf(rows * V, &fail);
    a->rsum = fbuf(rows, &fail);
    a->dresid = fbuf(rows * d, &fail);
    a->dln = fbuf(rows * d, &fail);
    a->tmp = fbuf(rows * d, &fail);
    a->datt = fbuf(rows * dl, &fail);
    a->dqkv = fbuf(rows * 3 * dl, &fail);
    a->dfc = fbuf(rows * ffl, &fail);
    a->dlogits = fbuf(rows * V, &fail);
    a->scratch_tt = fbuf(att > tt ? att : tt, &fail);
    a->tokens = zen_train_malloc_array(rows, sizeof(int32_t));
    a->targets = zen_train_malloc_array(rows, sizeof(int32_t));
    if (fail || !a->tokens || !a->targets) {
        gpt_acts_free(a);
        return ZEN_ENOMEM;
    }
    a->rows_cap = rows;
    a->att_cap = att;
    return ZEN_OK;
}

static int cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

static void mark_touched(zen_gpt *m, const int32_t *tokens, size_t n)
{
    size_t before = m->ntouched;
    for (size_t i = 0; i < n; i++) {
        if (!m->seen[tokens[i]]) {
            m->seen[tokens[i]] = 1;
            m->touched[m->ntouched++] = tokens[i];
        }
    }
    if (m->ntouched != before)
        qsort(m->touched, m->ntouched, sizeof(int32_t), cmp_i32);
}

static zen_status check_ids(const int32_t *ids, size_t n, int vocab, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= vocab) {
            zen_log(ZEN_LOG_ERROR, "train", "gpt: %s[%zu] = %d is outside [0, %d)", what, i,
                    (int)ids[i], vocab);
            return ZEN_EINVAL;
        }
    }
    return ZEN_OK;
}

zen_status zen_gpt_forward(zen_gpt *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                           float *loss)
{
    const zen_gpt_config *c = &m->cfg;
    m->can_backward = 0;
    if (!tokens || B < 1 || T < 1 || T > c->ctx || (size_t)B * T > (size_t)1 << 28)
        return ZEN_EINVAL;
    size_t N = (size_t)B * T;
    zen_status st = check_ids(tokens, N, c->vocab, "token");
    if (st == ZEN_OK && targets)
        st = check_ids(targets, N, c->vocab, "target");
    if (st == ZEN_OK)
        st = ensure_acts(m, B, T);
    if (st != ZEN_OK)
        return st;
    m->fwd_valid = 0;
    gpt_acts *a = &m->a;
    int n = (int)N, d = c->d_model, L = c->n_layer;
    size_t Nd = N * (size_t)d;
    memcpy(a->tokens, tokens, N * sizeof(int32_t));
    if (targets)
        memcpy(a->targets, targets, N * sizeof(int32_t));
    mark_touched(m, tokens, N);

    zen_op_embed_forward(a->resid, m->wte, m->wpe, tokens, B, T, d);
    for (int l = 0; l < L; l++) {
        gpt_block *b = &m->blocks[l];
        float *r0 = a->resid + (size_t)(2 * l) * Nd, *r1 = r0 + Nd, *r2 = r1 + Nd;
        float *ln1 = a->ln1 + (size_t)l * Nd, *ln2 = a->ln2 + (size_t)l * Nd;
        float *s1 = a->ln1_stat + (size_t)l * 2 * N, *s2 = a->ln2_stat + (size_t)l * 2 * N;
        float *qkv = a->qkv + (size_t)l * N * 3 * m->dl;
        float *att = a->att + (size_t)l * a->att_cap * m->hl;
        float *ao = a->att_out + (size_t)l * N * m->dl;
        float *f1 = a->fc1 + (size_t)l * N * m->ffl, *ge = a->gelu + (size_t)l * N * m->ffl;

        zen_op_layernorm_forward(ln1, s1, s1 + N, r0, b->ln1_g, b->ln1_b, n, d);
        if ((st = zen_tp_linear_forward(b->qkv, ln1, n, qkv, m->training)) != ZEN_OK)
            return st;
        zen_op_attention_forward(ao, att, qkv, B, T, m->hl, m->hd);
        if ((st = zen_tp_linear_forward(b->proj, ao, n, a->tmp, m->training)) != ZEN_OK)
            return st;
        zen_op_add(r1, r0, a->tmp, Nd);
        zen_op_layernorm_forward(ln2, s2, s2 + N, r1, b->ln2_g, b->ln2_b, n, d);
        if ((st = zen_tp_linear_forward(b->fc1, ln2, n, f1, m->training)) != ZEN_OK)
            return st;
        zen_op_gelu_forward(ge, f1, N * (size_t)m->ffl);
        if ((st = zen_tp_linear_forward(b->fc2, ge, n, a->tmp, m->training)) != ZEN_OK)
            return st;
        zen_op_add(r2, r1, a->tmp, Nd);
    }
    float *rL = a->resid + (size_t)(2 * L) * Nd;
    zen_op_layernorm_forward(a->lnf, a->lnf_stat, a->lnf_stat + N, rL, m->lnf_g, m->lnf_b, n, d);
    zen_op_linear_forward(a->logits, a->lnf, m->head, NULL, n, d, c->vocab);
    if (targets) {
        float l = zen_op_xent_forward(a->dlogits, a->rsum, a->logits, targets, n, c->vocab);
        if (loss)
            *loss = l;
    }
    m->B = B;
    m->T = T;
    m->fwd_valid = 1;
    m->can_backward = targets != NULL;
    return ZEN_OK;
}

zen_status zen_gpt_backward(zen_gpt *m)
{
    if (!m->fwd_valid || !m->can_backward)
        return ZEN_EINVAL;
    m->can_backward = 0;
    const zen_gpt_config *c = &m->cfg;
    gpt_acts *a = &m->a;
    int B = m->B, T = m->T, d = c->d_model, L = c->n_layer;
    size_t N = (size_t)B * T, Nd = N * (size_t)d;
    int n = (int)N;
    zen_status st;

    /* dlogits holds e^(z - max) from the forward; turned into the gradient in place */
    zen_op_xent_backward(a->dlogits, a->dlogits, a->rsum, a->targets, n, c->vocab, 1.0f / (float)N);
    zen_op_linear_backward(a->dln, m->dhead, NULL, a->dlogits, a->lnf, m->head, n, d, c->vocab);
    memset(a->dresid, 0, Nd * sizeof(float));
    zen_op_layernorm_backward(a->dresid, m->dlnf_g, m->dlnf_b, a->dln,
                              a->resid + (size_t)(2 * L) * Nd, a->lnf_stat, a->lnf_stat + N,
                              m->lnf_g, n, d);
    for (int l = L - 1; l >= 0; l--) {
        gpt_block *b = &m->blocks[l];
        float *r0 = a->resid + (size_t)(2 * l) * Nd, *r1 = r0 + Nd;
        float *ln1 = a->ln1 + (size_t)l * Nd, *ln2 = a->ln2 + (size_t)l * Nd;
        float *s1 = a->ln1_stat + (size_t)l * 2 * N, *s2 = a->ln2_stat + (size_t)l * 2 * N;
        float *qkv = a->qkv + (size_t)l * N * 3 * m->dl;
        float *att = a->att + (size_t)l * a->att_cap * m->hl;
        float *ao = a->att_out + (size_t)l * N * m->dl;
        float *f1 = a->fc1 + (size_t)l * N * m->ffl, *ge = a->gelu + (size_t)l * N * m->ffl;

        if ((st = zen_tp_linear_backward(b->fc2, ge, a->dresid, n, a->dfc)) != ZEN_OK)
            return st;
        zen_op_gelu_backward(a->dfc, f1, a->dfc, N * (size_t)m->ffl);
        if ((st = zen_tp_linear_backward(b->fc1, ln2, a->dfc, n, a->dln)) != ZEN_OK)
            return st;
        zen_op_layernorm_backward(a->dresid, b->dln2_g, b->dln2_b, a->dln, r1, s2, s2 + N, b->ln2_g,
                                  n, d);
        if ((st = zen_tp_linear_backward(b->proj, ao, a->dresid, n, a->datt)) != ZEN_OK)
            return st;
        zen_op_attention_backward(a->dqkv, a->scratch_tt, a->datt, att, qkv, B, T, m->hl, m->hd);
        if ((st = zen_tp_linear_backward(b->qkv, ln1, a->dqkv, n, a->dln)) != ZEN_OK)
            return st;
        zen_op_layernorm_backward(a->dresid, b->dln1_g, b->dln1_b, a->dln, r0, s1, s1 + N, b->ln1_g,
                                  n, d);
    }
    zen_op_embed_backward(m->dwte, m->dwpe, a->dresid, a->tokens, B, T, d);
    return ZEN_OK;
}

zen_status zen_gpt_logits(const zen_gpt *m, int b, int t, float *out)
{
    if (!m->fwd_valid || !out || b < 0 || b >= m->B || t < -1 || t >= m->T)
        return ZEN_EINVAL;
    if (t < 0)
        t = m->T - 1;
    size_t V = (size_t)m->cfg.vocab;
    memcpy(out, m->a.logits + ((size_t)b * m->T + t) * V, V * sizeof(float));
    return ZEN_OK;
}
