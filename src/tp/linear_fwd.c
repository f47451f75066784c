/*
 * Forward and backward of the tp linear layers (Megatron 1D).
 *
 *   COLUMN (K = in):   Y_r = X W_r^T + b_r                 no communication
 *                      dX  = allreduce_r(dY_r W_r)          one allreduce of rows x in floats
 *                      dW_r += dY_r^T X,  db_r += colsum(dY_r)
 *   ROW (K = in/tp):   Y   = allreduce_r(X_r W_r^T) + b     one allreduce of rows x out floats
 *                      dX_r = dY W_r
 *                      dW_r += dY^T X_r,  db += colsum(dY)
 *
 * Resizing: while this rank's layer is permuted, only the physical prefix [0, n_local) of K
 * takes part in a training pass: X columns perm[0..n_local) are gathered into a packed copy
 * (one activation copy per call; W is never copied), dX is scattered back to canonical columns
 * with zeros at the columns not computed here, dW is accumulated on the prefix only. Shapes
 * seen by the caller and by the collectives never change. Evaluation passes use all K columns.
 *
 * Migration (migrate.c) adds the helpers' share: COLUMN forward partial outputs come back by
 * point-to-point, COLUMN backward dX contributions ride on the dX allreduce; ROW forward
 * contributions ride on the Y allreduce, ROW backward dX/dW come back by point-to-point.
 */
#include <string.h>

#include "coll/comm_internal.h"
#include "common/alloc.h"
#include "tp/tp_internal.h"

static zen_status check_call(zen_tp_linear *l, const void *x, const void *y, int rows,
                             const char *what)
{
    if (!l || !l->g)
        return ZEN_EINVAL;
    if (!x || !y || rows < 0)
        return zen__fail(l->g->comm, ZEN_EINVAL, "tp %s: NULL buffer or rows %d < 0", what, rows);
    if (l->grad_canonical)
        return zen__fail(l->g->comm, ZEN_EINVAL,
                         "tp %s on rank %d: gradients are in canonical order "
                         "(call zen_tp_group_canonical_grads(g, 0) first)",
                         what, l->g->rank);
    return ZEN_OK;
}

/*
 * Columns of K this rank computes in this pass and where their inputs are: the physical prefix
 * [0, cnt). With the identity layout that prefix is X itself (leading dimension K); otherwise
 * the columns perm[0, cnt) are gathered into a packed copy.
 */
static zen_status select_input(zen_tp_linear *l, const float *x, int rows, int training,
                               const float **xs, int *ldx, int *cnt)
{
    int c = training ? l->n_local : l->K;
    *cnt = c;
    if (!l->permuted) {
        *xs = x;
        *ldx = l->K;
        return ZEN_OK;
    }
    zen_status st = zen__tp_scratch(&l->xg, &l->xg_cap, (size_t)rows * (size_t)(c ? c : 1));
    if (st != ZEN_OK)
        return st;
    zen__tp_gather_cols(l, x, rows, 0, c, l->xg);
    *xs = l->xg;
    *ldx = c ? c : 1;
    return ZEN_OK;
}

/* own part: out[rows][wrows] (+)= X_sel W_sel^T */
static zen_status own_forward(zen_tp_linear *l, const float *x, int rows, float *out, int training)
{
    const float *xs;
    int cnt, ldx;
    zen_status st = select_input(l, x, rows, training, &xs, &ldx, &cnt);
    if (st != ZEN_OK)
        return st;
    double scale = cnt ? (double)l->K / cnt : 1.0;
    zen__tp_gemm(l->g, training, 1, scale, 0, 1, rows, l->wrows, cnt, xs, ldx, l->w, l->K, 0.0f,
                 out, l->wrows);
    return ZEN_OK;
}

zen_status zen_tp_linear_forward(zen_tp_linear *l, const float *x, int rows, float *y, int training)
{
    zen_status st = check_call(l, x, y, rows, "forward");
    if (st != ZEN_OK)
        return st;
    zen_tp_group *g = l->g;
    int mig = training && zen__tp_layer_migrating(l);
    if (training) {
        g->last_rows = rows;
        if (l->wref && !l->wref_valid) {
            memcpy(l->wref, l->w, (size_t)l->wrows * (size_t)l->K * sizeof(float));
            l->wref_valid = 1;
        }
    }
    if (mig) {
        st = zen__tp_sync_replicas(l);
        if (st != ZEN_OK)
            return st;
    }
    if (l->kind == ZEN_TP_COLUMN) {
        if (mig && (st = zen__tp_col_forward_mig(l, x, rows, NULL)) != ZEN_OK)
            return st;
        if ((st = own_forward(l, x, rows, y, training)) != ZEN_OK)
            return st;
        if (mig && (st = zen__tp_col_forward_mig(l, x, rows, y)) != ZEN_OK)
            return st;
    } else {
        if ((st = own_forward(l, x, rows, y, training)) != ZEN_OK)
            return st;
        if (mig && (st = zen__tp_row_forward_mig(l, x, rows, y)) != ZEN_OK)
            return st;
        if ((st = zen__tp_allreduce(g, y, (size_t)rows * (size_t)l->out)) != ZEN_OK)
            return st;
    }
    for (int r = 0; r < rows && l->nbias; r++) {
        float *yr = y + (size_t)r * l->wrows;
        for (int j = 0; j < l->nbias; j++)
            yr[j] += l->b[j];
    }
    return ZEN_OK;
}

/* own part: dx = canonical scatter of dY W_sel (zeros elsewhere); gw[:, sel] += dY^T X_sel */
static zen_status own_backward(zen_tp_linear *l, const float *x, const float *dy, int rows,
                               float *dx)
{
    const float *xs;
    int cnt, ldx;
    zen_status st = select_input(l, x, rows, 1, &xs, &ldx, &cnt);
    if (st != ZEN_OK)
        return st;
    double scale = cnt ? (double)l->K / cnt : 1.0;
    int K = l->K;
    if (cnt == K && !l->permuted) {
        zen__tp_gemm(l->g, 1, 1, scale, 0, 0, rows, K, l->wrows, dy, l->wrows, l->w, K, 0.0f, dx,
                     K);
        zen__tp_gemm(l->g, 1, 1, scale, 1, 0, l->wrows, K, rows, dy, l->wrows, x, K, 1.0f, l->gw,
                     K);
        return ZEN_OK;
    }
    st = zen__tp_scratch(&l->tmp, &l->tmp_cap, (size_t)rows * (size_t)(cnt ? cnt : 1));
    if (st != ZEN_OK)
        return st;
    zen__tp_gemm(l->g, 1, 1, scale, 0, 0, rows, cnt, l->wrows, dy, l->wrows, l->w, K, 0.0f, l->tmp,
                 cnt);
    memset(dx, 0, (size_t)rows * (size_t)K * sizeof(float));
    for (int r = 0; r < rows; r++) {
        const float *t = l->tmp + (size_t)r * cnt;
        float *d = dx + (size_t)r * K;
        for (int p = 0; p < cnt; p++)
            d[l->perm[p]] = t[p];
    }
    zen__tp_gemm(l->g, 1, 1, scale, 1, 0, l->wrows, cnt, rows, dy, l->wrows, xs, ldx, 1.0f, l->gw,
                 K);
    return ZEN_OK;
}

static void bias_grad(zen_tp_linear *l, const float *dy, int rows)
{
    for (int r = 0; r < rows && l->nbias; r++) {
        const float *d = dy + (size_t)r * l->wrows;
        for (int j = 0; j < l->nbias; j++)
            l->gb[j] += d[j];
    }
}

zen_status zen_tp_linear_backward(zen_tp_linear *l, const float *x, const float *dy, int rows,
                                  float *dx)
{
    zen_status st = check_call(l, x, dy, rows, "backward");
    if (st != ZEN_OK)
        return st;
    zen_tp_group *g = l->g;
    if (!dx) {
        st = zen__tp_scratch(&l->tmp2, &l->tmp2_cap, (size_t)rows * (size_t)l->K);
        if (st != ZEN_OK)
            return st;
        dx = l->tmp2;
    }
    int mig = zen__tp_layer_migrating(l);
    if (mig && (st = zen__tp_sync_replicas(l)) != ZEN_OK)
        return st;
    if ((st = own_backward(l, x, dy, rows, dx)) != ZEN_OK)
        return st;
    bias_grad(l, dy, rows);
    if (l->kind == ZEN_TP_COLUMN) {
        if (mig && (st = zen__tp_col_backward_mig(l, x, dy, rows, dx)) != ZEN_OK)
            return st;
        return zen__tp_allreduce(g, dx, (size_t)rows * (size_t)l->in);
    }
    if (mig && (st = zen__tp_row_backward_mig(l, x, dy, rows, dx)) != ZEN_OK)
        return st;
    return ZEN_OK;
}
