/*
 * Exact migration of a straggler's columns to helper ranks.
 *
 * A source rank s (straggler) lays out its K columns as [local | to a0 | to a1 | ... | pruned]
 * (priority.c); helper a computes s's block M_a with a replica of W_s[:, M_a]. Because
 * Y = sum_j X_j W_j^T splits additively over the inner dimension, any split over ranks gives the
 * unbalanced result after a sum, up to floating-point reassociation.
 *
 * Replicas: once per step version (zen_tp_group_step) and after every re-layout, s sends
 * W_s[:, M_a] (wrows x |M_a| floats) and the canonical indices of M_a (|M_a| ints) to a. The
 * helper's dW contribution goes back to s, which owns the optimizer state, so replicas never
 * need an optimizer of their own and stay exact.
 *
 * Messages per (s, a) pair and training step (floats unless said), rows = batch rows:
 *
 *   COLUMN (helpers already hold X):
 *     sync      s -> a   W_s[:, M_a]          wrows x |M_a|    (+ |M_a| ints)
 *     forward   a -> s   X[:, M_a] W^T        rows x wrows     partial output, added by s
 *     backward  s -> a   dY_s                 rows x wrows
 *               a -> s   dY_s^T X[:, M_a]     wrows x |M_a|    dW slice
 *               dY_s W[:, M_a] is added by a into its own dX before the dX allreduce that
 *               exists anyway ("reduce merging"): no extra message for dX.
 *   ROW (helpers do not hold X_s):
 *     sync      s -> a   W_s[:, M_a]          wrows x |M_a|
 *     forward   s -> a   X_s[:, M_a]          rows x |M_a|
 *               X_s[:, M_a] W^T is added by a into its partial Y before the Y allreduce that
 *               exists anyway: no message back.
 *     backward  s -> a   X_s[:, M_a]          rows x |M_a|     (sent again: no stash)
 *               a -> s   dY W[:, M_a]         rows x |M_a|     dX columns
 *               a -> s   dY^T X_s[:, M_a]     wrows x |M_a|    dW slice
 *
 * Deadlock freedom: the controller never makes a rank both source and helper. Sources only
 * wait for helpers' replies after posting everything the helpers need; helpers wait only for
 * what sources post before waiting. Every wait has the communicator's deadline.
 */
#include <stdio.h>
#include <string.h>

#include "coll/comm_internal.h"
#include "common/alloc.h"
#include "tp/tp_internal.h"

enum {
    TAG_W = 0,
    TAG_IDX = 1,
    TAG_FWD = 2,
    TAG_BWD_IN = 3,
    TAG_DW = 4,
    TAG_DX = 5
};

typedef struct tp_reqs {
    zen_request *req[4 * TP_MAX_RANKS];
    size_t expect[4 * TP_MAX_RANKS];
    int peer[4 * TP_MAX_RANKS];
    int n;
} tp_reqs;

static int mig_tag(const zen_tp_linear *l, int kind)
{
    return TP_TAG_BASE + (int)(((unsigned)l->id * 8u + (unsigned)kind) % 0x05000000u);
}

static zen_status post(zen_tp_linear *l, tp_reqs *q, int is_send, const void *buf, size_t bytes,
                       int peer, int kind)
{
    zen_comm *comm = l->g->comm;
    if (q->n == (int)(sizeof q->req / sizeof q->req[0]))
        return zen__fail(comm, ZEN_EINTERNAL, "tp migrate: too many requests");
    zen_request **r = &q->req[q->n];
    zen_status st = is_send ? zen_isend(comm, buf, bytes, peer, mig_tag(l, kind), r)
                            : zen_irecv(comm, (void *)buf, bytes, peer, mig_tag(l, kind), r);
    if (st != ZEN_OK)
        return st;
    q->expect[q->n] = is_send ? SIZE_MAX : bytes;
    q->peer[q->n] = peer;
    q->n++;
    return ZEN_OK;
}

/* Prefix the transport's own message (which names the peer and the cause) with our context. */
static void fail_with_detail(zen_tp_linear *l, zen_status st, const char *what, int peer)
{
    char detail[sizeof l->g->comm->last_error];
    snprintf(detail, sizeof detail, "%s", zen_comm_last_error(l->g->comm));
    zen__fail(l->g->comm, st, "tp migrate %s (layer %d) with peer %d: %s (%s)", what, l->id, peer,
              zen_strerror(st), detail);
}

static zen_status wait_all(zen_tp_linear *l, tp_reqs *q, const char *what)
{
    zen_tp_group *g = l->g;
    zen__tp_pay_sleep_debt(g);
    int64_t t0 = zen_now_ns();
    zen_status st = ZEN_OK;
    for (int i = 0; i < q->n; i++) {
        size_t got = 0;
        if (st == ZEN_OK) {
            st = zen_request_wait(q->req[i], -1, &got);
            if (st == ZEN_OK && q->expect[i] != SIZE_MAX && got != q->expect[i])
                st = zen__fail(g->comm, ZEN_EPROTO,
                               "tp migrate %s (layer %d): %zu bytes from rank %d, expected %zu",
                               what, l->id, got, q->peer[i], q->expect[i]);
            else if (st != ZEN_OK)
                fail_with_detail(l, st, what, q->peer[i]);
        }
        zen_request_destroy(q->req[i]);
    }
    q->n = 0;
    tp_add_wait(g, t0);
    return st;
}

/* wait_all, then the first failure: st when the posting already failed, else the wait's. */
static zen_status wait_first(zen_tp_linear *l, tp_reqs *q, const char *what, zen_status st)
{
    zen_status wst = wait_all(l, q, what);
    return st != ZEN_OK ? st : wst;
}

/* The next peer after a with columns to exchange (cnt[peer] > 0), or n when there is none: the
 * loops below visit only the peers a plan pairs this rank with, in rank order (both sides of a
 * pair walk the same order, so a buffer's blocks line up). */
static int next_peer(const int *cnt, int n, int a)
{
    for (a++; a < n && cnt[a] == 0; a++)
        ;
    return a;
}

/* The helper's gather scratch in mbuf2: rows x the most columns any one source migrated here. */
static zen_status reserve_gather(zen_tp_linear *l, int rows)
{
    int maxc = 0;
    for (int s = 0; s < l->g->size; s++)
        maxc = l->in_cnt[s] > maxc ? l->in_cnt[s] : maxc;
    return zen__tp_scratch(&l->mbuf2, &l->mbuf2_cap, (size_t)rows * maxc + 1);
}

int zen__tp_layer_migrating(const zen_tp_linear *l)
{
    return l->g->plan_active && (l->n_out > 0 || l->n_in > 0);
}

static size_t fsz(size_t count)
{
    return count * sizeof(float);
}

/* Copy columns [first, first+cnt) of a rows x ld matrix into a packed rows x cnt one. */
static void pack_block(const float *src, int rows, int ld, int first, int cnt, float *dst)
{
    for (int r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * cnt, src + (size_t)r * ld + first, fsz((size_t)cnt));
}

/* dst[r][j] = x[r][idx[j]] */
static void gather_idx(const float *x, int rows, int ld, const int *idx, int cnt, float *dst)
{
    for (int r = 0; r < rows; r++) {
        const float *s = x + (size_t)r * ld;
        float *d = dst + (size_t)r * cnt;
        for (int j = 0; j < cnt; j++)
            d[j] = s[idx[j]];
    }
}

/* Scratch in *buf for per_col floats per column exchanged with each peer (cnt: l->mig_cnt, the
 * columns this rank migrates out, or l->in_cnt, those it takes in) plus per_pair per peer; *at
 * points at its start. */
static zen_status reserve(zen_tp_linear *l, const int *cnt, float **buf, size_t *cap,
                          size_t per_col, size_t per_pair, float **at)
{
    size_t total = 0;
    for (int p = 0; p < l->g->size; p++)
        if (cnt[p] > 0)
            total += per_col * (size_t)cnt[p] + per_pair;
    zen_status st = zen__tp_scratch(buf, cap, total + 1);
    *at = *buf;
    return st;
}

zen_status zen__tp_sync_replicas(zen_tp_linear *l)
{
    zen_tp_group *g = l->g;
    if (l->synced_version == g->version)
        return ZEN_OK;
    tp_reqs q = { .n = 0 };
    float *at;
    zen_status st = reserve(l, l->mig_cnt, &l->mbuf, &l->mbuf_cap, (size_t)l->wrows, 0, &at);
    for (int a = -1; (a = next_peer(l->mig_cnt, g->size, a)) < g->size && st == ZEN_OK;) {
        int cnt = l->mig_cnt[a];
        pack_block(l->w, l->wrows, l->K, l->mig_off[a], cnt, at);
        st = post(l, &q, 1, at, fsz((size_t)l->wrows * cnt), a, TAG_W);
        if (st == ZEN_OK)
            st = post(l, &q, 1, l->perm + l->mig_off[a], (size_t)cnt * sizeof(int), a, TAG_IDX);
        at += (size_t)l->wrows * cnt;
    }
    for (int s = -1; (s = next_peer(l->in_cnt, g->size, s)) < g->size && st == ZEN_OK;) {
        int cnt = l->in_cnt[s];
        st = post(l, &q, 0, l->replica[s], fsz((size_t)l->wrows * cnt), s, TAG_W);
        if (st == ZEN_OK)
            st = post(l, &q, 0, l->in_idx[s], (size_t)cnt * sizeof(int), s, TAG_IDX);
    }
    st = wait_first(l, &q, "replica sync", st);
    if (st == ZEN_OK)
        l->synced_version = g->version;
    return st;
}

/* y == NULL: helper phase (before the own GEMM); else source phase: add helpers' partials. */
zen_status zen__tp_col_forward_mig(zen_tp_linear *l, const float *x, int rows, float *y)
{
    zen_tp_group *g = l->g;
    tp_reqs q = { .n = 0 };
    zen_status st = ZEN_OK;
    size_t part = (size_t)rows * (size_t)l->wrows;
    if (!y) {
        if (l->n_in == 0)
            return ZEN_OK;
        float *at;
        if ((st = reserve(l, l->in_cnt, &l->mbuf, &l->mbuf_cap, 0, part, &at)) != ZEN_OK ||
            (st = reserve_gather(l, rows)) != ZEN_OK)
            return st;
        for (int s = -1; (s = next_peer(l->in_cnt, g->size, s)) < g->size && st == ZEN_OK;) {
            int cnt = l->in_cnt[s];
            gather_idx(x, rows, l->K, l->in_idx[s], cnt, l->mbuf2);
            zen__tp_gemm(g, 1, 0, 1.0, 0, 1, rows, l->wrows, cnt, l->mbuf2, cnt, l->replica[s], cnt,
                         0.0f, at, l->wrows);
            st = post(l, &q, 1, at, fsz(part), s, TAG_FWD);
            at += part;
        }
        return wait_first(l, &q, "column forward (helper)", st);
    }
    if (l->n_out == 0)
        return ZEN_OK;
    float *at;
    st = reserve(l, l->mig_cnt, &l->mbuf, &l->mbuf_cap, 0, part, &at);
    for (int a = -1; (a = next_peer(l->mig_cnt, g->size, a)) < g->size && st == ZEN_OK;) {
        st = post(l, &q, 0, at, fsz(part), a, TAG_FWD);
        at += part;
    }
    if ((st = wait_first(l, &q, "column forward (source)", st)) != ZEN_OK)
        return st;
    for (const float *p = l->mbuf; p < at; p += part)
        for (size_t i = 0; i < part; i++)
            y[i] += p[i];
    return ZEN_OK;
}

/* Source side of a backward: add the helpers' dW slices (and dX columns for ROW). */
static void add_dw(zen_tp_linear *l, int a, const float *dw)
{
    int cnt = l->mig_cnt[a], off = l->mig_off[a];
    for (int i = 0; i < l->wrows; i++) {
        float *g = l->gw + (size_t)i * l->K + off;
        const float *d = dw + (size_t)i * cnt;
        for (int j = 0; j < cnt; j++)
            g[j] += d[j];
    }
}

static zen_status col_backward_source(zen_tp_linear *l, const float *dy, int rows)
{
    zen_tp_group *g = l->g;
    tp_reqs q = { .n = 0 };
    float *at;
    zen_status st = reserve(l, l->mig_cnt, &l->mbuf, &l->mbuf_cap, (size_t)l->wrows, 0, &at);
    for (int a = -1; (a = next_peer(l->mig_cnt, g->size, a)) < g->size && st == ZEN_OK;) {
        int cnt = l->mig_cnt[a];
        st = post(l, &q, 1, dy, fsz((size_t)rows * l->wrows), a, TAG_BWD_IN);
        if (st == ZEN_OK)
            st = post(l, &q, 0, at, fsz((size_t)l->wrows * cnt), a, TAG_DW);
        at += (size_t)l->wrows * cnt;
    }
    if ((st = wait_first(l, &q, "column backward (source)", st)) != ZEN_OK)
        return st;
    at = l->mbuf;
    for (int a = -1; (a = next_peer(l->mig_cnt, g->size, a)) < g->size;) {
        add_dw(l, a, at);
        at += (size_t)l->wrows * l->mig_cnt[a];
    }
    return ZEN_OK;
}

static zen_status col_backward_helper(zen_tp_linear *l, const float *x, int rows, float *dx)
{
    zen_tp_group *g = l->g;
    tp_reqs q = { .n = 0 };
    size_t part = (size_t)rows * (size_t)l->wrows;
    float *at;
    zen_status st;
    if ((st = reserve(l, l->in_cnt, &l->mbuf, &l->mbuf_cap, (size_t)l->wrows, part, &at)) !=
            ZEN_OK ||
        (st = reserve_gather(l, rows)) != ZEN_OK)
        return st;
    for (int s = -1; (s = next_peer(l->in_cnt, g->size, s)) < g->size && st == ZEN_OK;) {
        st = post(l, &q, 0, at, fsz(part), s, TAG_BWD_IN);
        at += part + (size_t)l->wrows * l->in_cnt[s];
    }
    if ((st = wait_first(l, &q, "column backward (helper dY)", st)) != ZEN_OK)
        return st;
    at = l->mbuf;
    for (int s = -1; (s = next_peer(l->in_cnt, g->size, s)) < g->size && st == ZEN_OK;) {
        int cnt = l->in_cnt[s];
        const float *dys = at;
        float *dw = at + part;
        const int *idx = l->in_idx[s];
        zen__tp_gemm(g, 1, 0, 1.0, 0, 0, rows, cnt, l->wrows, dys, l->wrows, l->replica[s], cnt,
                     0.0f, l->mbuf2, cnt);
        for (int r = 0; r < rows; r++) {
            const float *t = l->mbuf2 + (size_t)r * cnt;
            float *d = dx + (size_t)r * l->K;
            for (int j = 0; j < cnt; j++)
                d[idx[j]] += t[j];
        }
        gather_idx(x, rows, l->K, idx, cnt, l->mbuf2);
        zen__tp_gemm(g, 1, 0, 1.0, 1, 0, l->wrows, cnt, rows, dys, l->wrows, l->mbuf2, cnt, 0.0f,
                     dw, cnt);
        st = post(l, &q, 1, dw, fsz((size_t)l->wrows * cnt), s, TAG_DW);
        at += part + (size_t)l->wrows * cnt;
    }
    return wait_first(l, &q, "column backward (helper dW)", st);
}

zen_status zen__tp_col_backward_mig(zen_tp_linear *l, const float *x, const float *dy, int rows,
                                    float *dx)
{
    zen_status st = ZEN_OK;
    if (l->n_out > 0)
        st = col_backward_source(l, dy, rows);
    if (st == ZEN_OK && l->n_in > 0)
        st = col_backward_helper(l, x, rows, dx);
    return st;
}

/* Source: send X_s[:, M_a] to every helper (forward and backward both need it). */
static zen_status row_send_inputs(zen_tp_linear *l, tp_reqs *q, const float *x, int rows, int kind)
{
    float *at;
    zen_status st = reserve(l, l->mig_cnt, &l->mbuf, &l->mbuf_cap, (size_t)rows, 0, &at);
    for (int a = -1; (a = next_peer(l->mig_cnt, l->g->size, a)) < l->g->size && st == ZEN_OK;) {
        int cnt = l->mig_cnt[a];
        zen__tp_gather_cols(l, x, rows, l->mig_off[a], cnt, at);
        st = post(l, q, 1, at, fsz((size_t)rows * cnt), a, kind);
        at += (size_t)rows * cnt;
    }
    return st;
}

/* Helper: receive every source's X block into mbuf (rows x in_cnt[s] each, source order). */
static zen_status row_recv_inputs(zen_tp_linear *l, int rows, int kind)
{
    tp_reqs q = { .n = 0 };
    float *at;
    zen_status st = reserve(l, l->in_cnt, &l->mbuf, &l->mbuf_cap, (size_t)rows, 0, &at);
    for (int s = -1; (s = next_peer(l->in_cnt, l->g->size, s)) < l->g->size && st == ZEN_OK;) {
        int cnt = l->in_cnt[s];
        st = post(l, &q, 0, at, fsz((size_t)rows * cnt), s, kind);
        at += (size_t)rows * cnt;
    }
    return wait_first(l, &q, "row inputs (helper)", st);
}

zen_status zen__tp_row_forward_mig(zen_tp_linear *l, const float *x, int rows, float *ypart)
{
    zen_tp_group *g = l->g;
    zen_status st = ZEN_OK;
    if (l->n_out > 0) {
        tp_reqs q = { .n = 0 };
        st = row_send_inputs(l, &q, x, rows, TAG_FWD);
        st = wait_first(l, &q, "row forward (source)", st);
    }
    if (st != ZEN_OK || l->n_in == 0)
        return st;
    if ((st = row_recv_inputs(l, rows, TAG_FWD)) != ZEN_OK)
        return st;
    const float *at = l->mbuf;
    for (int s = -1; (s = next_peer(l->in_cnt, g->size, s)) < g->size;) {
        int cnt = l->in_cnt[s];
        zen__tp_gemm(g, 1, 0, 1.0, 0, 1, rows, l->wrows, cnt, at, cnt, l->replica[s], cnt, 1.0f,
                     ypart, l->wrows);
        at += (size_t)rows * cnt;
    }
    return ZEN_OK;
}

static zen_status row_backward_source(zen_tp_linear *l, const float *x, int rows, float *dx)
{
    zen_tp_group *g = l->g;
    tp_reqs q = { .n = 0 };
    float *at;
    zen_status st =
        reserve(l, l->mig_cnt, &l->mbuf2, &l->mbuf2_cap, (size_t)rows + (size_t)l->wrows, 0, &at);
    if (st == ZEN_OK)
        st = row_send_inputs(l, &q, x, rows, TAG_BWD_IN);
    for (int a = -1; (a = next_peer(l->mig_cnt, g->size, a)) < g->size && st == ZEN_OK;) {
        int cnt = l->mig_cnt[a];
        st = post(l, &q, 0, at, fsz((size_t)rows * cnt), a, TAG_DX);
        if (st == ZEN_OK)
            st = post(l, &q, 0, at + (size_t)rows * cnt, fsz((size_t)l->wrows * cnt), a, TAG_DW);
        at += (size_t)(rows + l->wrows) * cnt;
    }
    if ((st = wait_first(l, &q, "row backward (source)", st)) != ZEN_OK)
        return st;
    at = l->mbuf2;
    for (int a = -1; (a = next_peer(l->mig_cnt, g->size, a)) < g->size;) {
        int cnt = l->mig_cnt[a], off = l->mig_off[a];
        for (int r = 0; r < rows; r++) {
            const float *t = at + (size_t)r * cnt;
            float *d = dx + (size_t)r * l->K;
            for (int j = 0; j < cnt; j++)
                d[l->perm[off + j]] += t[j];
        }
        add_dw(l, a, at + (size_t)rows * cnt);
        at += (size_t)(rows + l->wrows) * cnt;
    }
    return ZEN_OK;
}

static zen_status row_backward_helper(zen_tp_linear *l, const float *dy, int rows)
{
    zen_tp_group *g = l->g;
    zen_status st = row_recv_inputs(l, rows, TAG_BWD_IN);
    if (st != ZEN_OK)
        return st;
    float *at;
    if ((st = reserve(l, l->in_cnt, &l->mbuf2, &l->mbuf2_cap, (size_t)rows + (size_t)l->wrows, 0,
                      &at)) != ZEN_OK)
        return st;
    tp_reqs q = { .n = 0 };
    const float *xin = l->mbuf;
    for (int s = -1; (s = next_peer(l->in_cnt, g->size, s)) < g->size && st == ZEN_OK;) {
        int cnt = l->in_cnt[s];
        float *dxs = at, *dws = at + (size_t)rows * cnt;
        zen__tp_gemm(g, 1, 0, 1.0, 0, 0, rows, cnt, l->wrows, dy, l->wrows, l->replica[s], cnt,
                     0.0f, dxs, cnt);
        zen__tp_gemm(g, 1, 0, 1.0, 1, 0, l->wrows, cnt, rows, dy, l->wrows, xin, cnt, 0.0f, dws,
                     cnt);
        st = post(l, &q, 1, dxs, fsz((size_t)rows * cnt), s, TAG_DX);
        if (st == ZEN_OK)
            st = post(l, &q, 1, dws, fsz((size_t)l->wrows * cnt), s, TAG_DW);
        xin += (size_t)rows * cnt;
        at += (size_t)(rows + l->wrows) * cnt;
    }
    return wait_first(l, &q, "row backward (helper)", st);
}

zen_status zen__tp_row_backward_mig(zen_tp_linear *l, const float *x, const float *dy, int rows,
                                    float *dx)
{
    zen_status st = ZEN_OK;
    if (l->n_out > 0)
        st = row_backward_source(l, x, rows, dx);
    if (st == ZEN_OK && l->n_in > 0)
        st = row_backward_helper(l, dy, rows);
    return st;
}
