/*
 * Column priority and the physical column layout of a layer under a plan.
 *
 * Priority (SCORE policy): at every decision round, for each canonical column j that got a
 * gradient in the last period (computed locally or by a helper),
 *     score_j = sum_i |W[i,j] - W_ref[i,j]|        (L1 change since the previous refresh)
 * while pruned columns keep their stale score (they did not move, their change means nothing);
 * then W_ref = W. Scores start at 1, so the first plan keeps an arbitrary (index-ordered) set.
 * RANDOM draws fresh scores from a hash each round; PREFIX prefers low canonical indices.
 *
 * Layout: a source sorts its columns by score (descending, ties by index) and lays them out as
 *     [ local (top) | helper a0 | helper a1 | ... | pruned (bottom) ]
 * each block in ascending canonical order, then permutes W, its gradient, the registered
 * companions and W_ref in place, one row at a time. A rank that is not a source goes back to
 * the identity layout.
 */
#include <stdlib.h>
#include <string.h>

#include "coll/comm_internal.h"
#include "common/alloc.h"
#include "common/hash.h"
#include "tp/tp_internal.h"

zen_status zen__tp_layer_alloc_balance(zen_tp_linear *l)
{
    int n = l->g->size, K = l->K;
    l->perm = zen__malloc_array((size_t)K, sizeof(int));
    l->pos = zen__malloc_array((size_t)K, sizeof(int));
    l->mig_off = zen__calloc((size_t)n, sizeof(int));
    l->mig_cnt = zen__calloc((size_t)n, sizeof(int));
    l->in_cnt = zen__calloc((size_t)n, sizeof(int));
    l->in_idx = zen__calloc((size_t)n, sizeof(int *));
    l->replica = zen__calloc((size_t)n, sizeof(float *));
    if (!l->perm || !l->pos || !l->mig_off || !l->mig_cnt || !l->in_cnt || !l->in_idx ||
        !l->replica)
        return ZEN_ENOMEM;
    for (int p = 0; p < K; p++)
        l->perm[p] = l->pos[p] = p;
    l->synced_version = UINT64_MAX;
    if (l->g->opts.balance == ZEN_BALANCE_NONE)
        return ZEN_OK;
    l->score = zen__malloc_array((size_t)K, sizeof(float));
    l->active = zen__malloc_array((size_t)K, 1);
    l->wref = zen__calloc((size_t)l->wrows * (size_t)K, sizeof(float));
    if (!l->score || !l->active || !l->wref)
        return ZEN_ENOMEM;
    for (int j = 0; j < K; j++) {
        l->score[j] = 1.0f;
        l->active[j] = 1;
    }
    return ZEN_OK;
}

void zen__tp_layer_refresh_scores(zen_tp_linear *l)
{
    if (!l->score)
        return;
    int K = l->K;
    const zen_tp_options *o = &l->g->opts;
    if (o->priority == ZEN_TP_PRIORITY_RANDOM) {
        uint64_t seed = o->seed ^ ((uint64_t)l->g->decisions << 20) ^ ((uint64_t)l->id << 8) ^
                        (uint64_t)l->g->rank;
        for (int j = 0; j < K; j++)
            l->score[j] = (float)(zen_hash64((uint64_t)j, seed) >> 40);
    } else if (o->priority == ZEN_TP_PRIORITY_PREFIX) {
        for (int j = 0; j < K; j++)
            l->score[j] = (float)(K - j);
    } else if (l->wref_valid) {
        for (int p = 0; p < K; p++) {
            int j = l->perm[p];
            if (!l->active[j])
                continue;
            float d = 0;
            for (int i = 0; i < l->wrows; i++) {
                size_t at = (size_t)i * K + p;
                float diff = l->w[at] - l->wref[at];
                d += diff < 0 ? -diff : diff;
            }
            l->score[j] = d;
        }
    }
    memcpy(l->wref, l->w, (size_t)l->wrows * (size_t)K * sizeof(float));
    l->wref_valid = 1;
}

/* qsort has no context argument: sort (score, index) pairs instead. */
typedef struct {
    float score;
    int col;
} scored_col;

static int by_score_desc(const void *a, const void *b)
{
    const scored_col *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->col > y->col) - (x->col < y->col);
}

static int by_index(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void permute_rows(float *buf, int rows, int K, const int *old_pos, const int *new_perm,
                         float *tmp)
{
    for (int i = 0; i < rows; i++) {
        float *row = buf + (size_t)i * K;
        for (int p = 0; p < K; p++)
            tmp[p] = row[old_pos[new_perm[p]]];
        memcpy(row, tmp, (size_t)K * sizeof(float));
    }
}

/* Compute the new physical order into np (a K-array) for a source with counts c. */
static zen_status source_layout(zen_tp_linear *l, const tp_counts *c, int *np)
{
    int K = l->K, n = l->g->size;
    scored_col *sc = zen__malloc_array((size_t)K, sizeof *sc);
    if (!sc)
        return ZEN_ENOMEM;
    for (int j = 0; j < K; j++) {
        sc[j].score = l->score ? l->score[j] : (float)(K - j);
        sc[j].col = j;
    }
    qsort(sc, (size_t)K, sizeof *sc, by_score_desc);
    for (int p = 0; p < K; p++)
        np[p] = sc[p].col;
    zen__free(sc);
    int at = 0;
    qsort(np, (size_t)c->local, sizeof(int), by_index);
    l->n_local = c->local;
    at = c->local;
    for (int a = 0; a < n; a++) {
        l->mig_off[a] = at;
        l->mig_cnt[a] = c->mig[a];
        qsort(np + at, (size_t)c->mig[a], sizeof(int), by_index);
        at += c->mig[a];
    }
    qsort(np + at, (size_t)(K - at), sizeof(int), by_index);
    if (l->active)
        for (int p = 0; p < K; p++)
            l->active[np[p]] = p < at;
    return ZEN_OK;
}

static zen_status apply_permutation(zen_tp_linear *l, const int *np)
{
    int K = l->K;
    if (memcmp(np, l->perm, (size_t)K * sizeof(int)) == 0)
        return ZEN_OK;
    float *tmp = zen__malloc_array((size_t)K, sizeof(float));
    if (!tmp)
        return ZEN_ENOMEM;
    permute_rows(l->w, l->wrows, K, l->pos, np, tmp);
    permute_rows(l->gw, l->wrows, K, l->pos, np, tmp);
    if (l->wref)
        permute_rows(l->wref, l->wrows, K, l->pos, np, tmp);
    for (int c = 0; c < l->ncompanions; c++)
        permute_rows(l->companions[c], l->wrows, K, l->pos, np, tmp);
    zen__free(tmp);
    memcpy(l->perm, np, (size_t)K * sizeof(int));
    l->permuted = 0;
    for (int p = 0; p < K; p++) {
        l->pos[np[p]] = p;
        if (np[p] != p)
            l->permuted = 1;
    }
    return ZEN_OK;
}

/* Helper side: how many columns of each straggler this rank computes, with buffers. */
static zen_status helper_layout(zen_tp_linear *l)
{
    int n = l->g->size, me = l->g->rank;
    int cnt[TP_MAX_RANKS];
    tp_counts c = { 0, 0, 0, cnt };
    l->n_in = 0;
    for (int s = 0; s < n; s++) {
        int want = 0;
        if (s != me) {
            zen__tp_plan_counts(&l->g->plan, s, l->K, &c);
            want = cnt[me];
        }
        if (want != l->in_cnt[s]) {
            zen__free(l->replica[s]);
            zen__free(l->in_idx[s]);
            l->replica[s] = NULL;
            l->in_idx[s] = NULL;
            l->in_cnt[s] = 0;
            if (want > 0) {
                l->replica[s] = zen__malloc_array((size_t)l->wrows * (size_t)want, sizeof(float));
                l->in_idx[s] = zen__malloc_array((size_t)want, sizeof(int));
                if (!l->replica[s] || !l->in_idx[s])
                    return ZEN_ENOMEM;
            }
            l->in_cnt[s] = want;
        }
        l->n_in += want;
    }
    return ZEN_OK;
}

zen_status zen__tp_layer_apply_plan(zen_tp_linear *l)
{
    int n = l->g->size, K = l->K;
    zen_status st = zen__tp_layer_canonical_grad(l, 0); /* the permutation below acts on physical */
    if (st != ZEN_OK)
        return st;
    int cnt[TP_MAX_RANKS];
    tp_counts c = { 0, 0, 0, cnt };
    zen__tp_plan_counts(&l->g->plan, l->g->rank, K, &c);
    int *np = zen__malloc_array((size_t)K, sizeof(int));
    if (!np)
        return ZEN_ENOMEM;
    if (c.local == K) {
        for (int p = 0; p < K; p++)
            np[p] = p;
        l->n_local = K;
        memset(l->mig_off, 0, (size_t)n * sizeof(int));
        memset(l->mig_cnt, 0, (size_t)n * sizeof(int));
        if (l->active)
            memset(l->active, 1, (size_t)K);
    } else {
        st = source_layout(l, &c, np);
    }
    if (st == ZEN_OK)
        st = apply_permutation(l, np);
    zen__free(np);
    if (st != ZEN_OK)
        return st;
    l->n_out = c.mig_total;
    l->synced_version = UINT64_MAX; /* replicas must be refreshed under the new layout */
    return helper_layout(l);
}

zen_status zen__tp_layer_canonical_grad(zen_tp_linear *l, int canonical)
{
    if (!l->permuted || l->grad_canonical == (canonical != 0))
        return ZEN_OK;
    int K = l->K;
    float *tmp = zen__malloc_array((size_t)K, sizeof(float));
    if (!tmp)
        return ZEN_ENOMEM;
    for (int i = 0; i < l->wrows; i++) {
        float *row = l->gw + (size_t)i * K;
        for (int p = 0; p < K; p++) {
            if (canonical)
                tmp[l->perm[p]] = row[p];
            else
                tmp[p] = row[l->perm[p]];
        }
        memcpy(row, tmp, (size_t)K * sizeof(float));
    }
    zen__free(tmp);
    l->grad_canonical = canonical != 0;
    return ZEN_OK;
}
