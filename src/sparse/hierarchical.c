/*
 * HIERARCHICAL: SparCML-style sparse recursive doubling (Hierarchy + Incremental +
 * Centralization, the paper's HC).
 *
 * Let p be the largest power of two <= n. Ranks p..n-1 first fold their tensor into rank r-p
 * (pre-step); the p remaining ranks run log2(p) rounds; at round i a rank exchanges its whole
 * partial sum with partner rank ^ 2^i and merges the two sorted runs (merge2); finally
 * rank r-p sends the result back to rank r (post-step). Four ranks:
 *
 *     round 0:  0 <-> 1    2 <-> 3      each holds the sum of 2 inputs
 *     round 1:  0 <-> 2    1 <-> 3      each holds the sum of all 4
 *
 * Bytes each rank sends at round i: the COO of its partial sum of 2^i inputs,
 * gamma^(2^i) * nnz * (4 + 4w), capped by the dense size rows * w * 4: a partial sum whose COO
 * would be larger than the dense vector switches to the dense representation (SparCML's
 * sparse-to-dense switch); from then on the rounds exchange dense vectors, i.e. the scheme becomes
 * a recursive-doubling allreduce. Every message carries a header (kind, length) so the partners
 * need not agree on representations in advance.
 */
#include <string.h>

#include "common/alloc.h"
#include "common/checked.h"
#include "common/clock.h"
#include "sparse/xchg.h"

enum {
    KIND_COO = 0,
    KIND_DENSE = 1
};

/* A partial sum in one of two representations. */
typedef struct partial {
    zen_coo coo;  /* when dense == NULL */
    float *dense; /* rows * width, owned unless it is the caller's dense_out */
    int dense_owned;
} partial;

static zen_status make_dense(zen_sparse_ctx *ctx, partial *ps, size_t count)
{
    if (ctx->dense_out) {
        ps->dense = ctx->dense_out;
        ps->dense_owned = 0;
    } else {
        ps->dense = zen_malloc_array(count, sizeof(float));
        if (!ps->dense)
            return zen_fail(ctx->comm, ZEN_ENOMEM, "hierarchical: cannot allocate %zu floats",
                            count);
        ps->dense_owned = 1;
    }
    memset(ps->dense, 0, count * sizeof(float));
    size_t w = ps->coo.width;
    for (size_t i = 0; i < ps->coo.nnz; i++)
        memcpy(ps->dense + (size_t)ps->coo.idx[i] * w, ps->coo.val + i * w, w * sizeof(float));
    zen_coo_release(&ps->coo);
    return ZEN_OK;
}

static void scatter_add(float *dense, const zen_coo *c)
{
    size_t w = c->width;
    for (size_t i = 0; i < c->nnz; i++) {
        float *row = dense + (size_t)c->idx[i] * w;
        const float *v = c->val + i * w;
        for (size_t k = 0; k < w; k++)
            row[k] += v[k];
    }
}

/*
 * out = a + b for two sorted unique runs: a linear two-way merge (the k-way heap merge of
 * zen_coo_merge costs several times more per entry for k = 2, and this is the scheme's inner
 * loop). Both partners add the same two operands and IEEE addition is commutative, so they get
 * identical sums.
 */
static zen_status merge2(const zen_coo *a, const zen_coo *b, zen_coo *out)
{
    zen_status st = zen_coo_reserve(out, a->nnz + b->nnz);
    if (st != ZEN_OK)
        return st;
    size_t w = a->width, i = 0, j = 0, k = 0;
    while (i < a->nnz || j < b->nnz) {
        if (j == b->nnz || (i < a->nnz && a->idx[i] < b->idx[j])) {
            out->idx[k] = a->idx[i];
            memcpy(out->val + k * w, a->val + i * w, w * sizeof(float));
            i++;
        } else if (i == a->nnz || b->idx[j] < a->idx[i]) {
            out->idx[k] = b->idx[j];
            memcpy(out->val + k * w, b->val + j * w, w * sizeof(float));
            j++;
        } else {
            out->idx[k] = a->idx[i];
            for (size_t c = 0; c < w; c++)
                out->val[k * w + c] = a->val[i * w + c] + b->val[j * w + c];
            i++;
            j++;
        }
        k++;
    }
    out->nnz = k;
    return ZEN_OK;
}

/* Add a received message (kind, buf, bytes) from peer into ps. */
static zen_status absorb(zen_sparse_ctx *ctx, partial *ps, int peer, uint64_t kind,
                         const uint8_t *buf, size_t bytes, size_t count)
{
    const zen_coo *local = ctx->local;
    zen_status st = ZEN_OK;
    if (kind == KIND_DENSE) {
        if (bytes != count * sizeof(float))
            return zen_fail(ctx->comm, ZEN_EPROTO,
                            "hierarchical: rank %d sent a dense vector of %zu bytes, expected %zu",
                            peer, bytes, count * sizeof(float));
        if (!ps->dense && (st = make_dense(ctx, ps, count)) != ZEN_OK)
            return st;
        const float *v = (const float *)(const void *)buf;
        for (size_t i = 0; i < count; i++)
            ps->dense[i] += v[i];
        return ZEN_OK;
    }
    if (kind != KIND_COO)
        return zen_fail(ctx->comm, ZEN_EPROTO, "hierarchical: rank %d sent unknown kind %llu", peer,
                        (unsigned long long)kind);
    zen_coo view;
    st =
        zen_coo_view(ctx->comm, peer, buf, bytes, local->rows, local->width, 0, local->rows, &view);
    if (st != ZEN_OK)
        return st;
    if (ps->dense) {
        scatter_add(ps->dense, &view);
        return ZEN_OK;
    }
    zen_coo merged = { 0 };
    merged.rows = local->rows;
    merged.width = local->width;
    if ((st = merge2(&ps->coo, &view, &merged)) != ZEN_OK) {
        zen_coo_release(&merged);
        return zen_fail(ctx->comm, st, "hierarchical: merge with rank %d failed", peer);
    }
    zen_coo_release(&ps->coo);
    ps->coo = merged;
    /* Switch when the COO form is no smaller than the dense one. */
    if (zen_coo_wire_bytes(ps->coo.nnz, ps->coo.width) >= count * sizeof(float))
        st = make_dense(ctx, ps, count);
    return st;
}

/* Send ps to peer as one message (packing a COO into a temporary wire buffer). */
static zen_status wire_of(zen_sparse_ctx *ctx, const partial *ps, size_t count, uint64_t *kind,
                          const void **buf, size_t *bytes, uint8_t **tmp)
{
    *tmp = NULL;
    if (ps->dense) {
        *kind = KIND_DENSE;
        *buf = ps->dense;
        *bytes = count * sizeof(float);
        return ZEN_OK;
    }
    *kind = KIND_COO;
    *bytes = zen_coo_wire_bytes(ps->coo.nnz, ps->coo.width);
    *tmp = zen_malloc(*bytes ? *bytes : 1);
    if (!*tmp)
        return zen_fail(ctx->comm, ZEN_ENOMEM, "hierarchical: cannot allocate %zu bytes", *bytes);
    zen_coo_pack(&ps->coo, 0, ps->coo.nnz, *tmp);
    *buf = *tmp;
    return ZEN_OK;
}

enum {
    MODE_PAIR,
    MODE_SEND,
    MODE_RECV_ADD,
    MODE_RECV_REPLACE
};

/* One step with peer: swap partial sums (PAIR), only send (fold, unfold), or only receive and
 * add it to ours (fold) or take it as the result (unfold). */
static zen_status exchange(zen_sparse_ctx *ctx, const zen_coll *cc, partial *ps, int peer, int mode,
                           size_t count, size_t max_bytes)
{
    int send = mode == MODE_PAIR || mode == MODE_SEND;
    int recv = mode != MODE_SEND;
    uint64_t kind = 0, rkind = 0;
    const void *buf = NULL;
    size_t bytes = 0, rbytes = 0;
    uint8_t *tmp = NULL, *rbuf = NULL;
    zen_status st = ZEN_OK;
    int64_t t0 = zen_now_ns();
    if (send && (st = wire_of(ctx, ps, count, &kind, &buf, &bytes, &tmp)) != ZEN_OK)
        return st;
    if (send && recv)
        st =
            zen_xchg_pair(ctx->comm, cc, peer, kind, buf, bytes, max_bytes, &rkind, &rbuf, &rbytes);
    else if (send)
        st = zen_xchg_send(ctx->comm, cc, peer, kind, buf, bytes);
    else
        st = zen_xchg_recv(ctx->comm, cc, peer, max_bytes, &rkind, &rbuf, &rbytes);
    zen_free(tmp);
    int64_t t1 = zen_now_ns();
    ctx->stats->phase_us[ZEN_PHASE_PUSH] += zen_us_between(t0, t1);
    if (st == ZEN_OK && recv) {
        if (mode == MODE_RECV_REPLACE && ps->dense == NULL)
            ps->coo.nnz = 0;
        if (mode == MODE_RECV_REPLACE && ps->dense)
            memset(ps->dense, 0, count * sizeof(float));
        st = absorb(ctx, ps, peer, rkind, rbuf, rbytes, count);
    }
    zen_free(rbuf);
    ctx->stats->phase_us[ZEN_PHASE_AGGREGATE] += zen_us_between(t1, zen_now_ns());
    return st;
}

static zen_status deliver(zen_sparse_ctx *ctx, partial *ps)
{
    int64_t t0 = zen_now_ns();
    zen_status st = ZEN_OK;
    if (ps->dense) {
        if (ctx->dense_out) {
            if (ps->dense != ctx->dense_out)
                memcpy(ctx->dense_out, ps->dense,
                       (size_t)ctx->local->rows * ctx->local->width * sizeof(float));
            zen_dense_finish(ctx);
        } else {
            zen_coo sum = { 0 };
            st = zen_coo_from_dense(ps->dense, ctx->local->rows, ctx->local->width, &sum);
            if (st == ZEN_OK)
                st = zen_sparse_emit(ctx, &sum);
            zen_coo_release(&sum);
        }
    } else {
        st = zen_sparse_emit(ctx, &ps->coo);
    }
    ctx->stats->phase_us[ZEN_PHASE_DECODE] += zen_us_between(t0, zen_now_ns());
    return st;
}

zen_status zen_sparse_run_hierarchical(zen_sparse_ctx *ctx)
{
    zen_comm *comm = ctx->comm;
    const zen_coo *local = ctx->local;
    int n = comm->size, me = comm->rank;
    size_t count;
    if (local->rows > SIZE_MAX || zen_mul_overflow((size_t)local->rows, local->width, &count) ||
        count > SIZE_MAX / sizeof(float))
        return zen_fail(comm, ZEN_EINVAL, "hierarchical: %llu x %u is too large",
                        (unsigned long long)local->rows, local->width);
    size_t max_bytes = zen_coo_wire_max(local->rows, local->width);
    if (max_bytes < count * sizeof(float))
        max_bytes = count * sizeof(float);

    zen_coll cc;
    zen_status st = zen_coll_begin(comm, "sparse_hierarchical", &cc);
    if (st != ZEN_OK)
        return st;
    partial ps;
    memset(&ps, 0, sizeof ps);
    ps.coo.rows = local->rows;
    ps.coo.width = local->width;
    int64_t t0 = zen_now_ns();
    st = zen_coo_reserve(&ps.coo, local->nnz);
    if (st == ZEN_OK) {
        ps.coo.nnz = local->nnz;
        if (local->nnz) {
            memcpy(ps.coo.idx, local->idx, local->nnz * sizeof(uint32_t));
            memcpy(ps.coo.val, local->val, local->nnz * local->width * sizeof(float));
        }
        if (zen_coo_wire_bytes(ps.coo.nnz, ps.coo.width) >= count * sizeof(float) && count > 0)
            st = make_dense(ctx, &ps, count);
    }
    ctx->stats->phase_us[ZEN_PHASE_PARTITION] += zen_us_between(t0, zen_now_ns());

    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    if (st == ZEN_OK && me >= p) {
        /* Extra rank: fold into me - p, then receive the finished sum from it. */
        st = exchange(ctx, &cc, &ps, me - p, MODE_SEND, count, max_bytes);
        if (st == ZEN_OK)
            st = exchange(ctx, &cc, &ps, me - p, MODE_RECV_REPLACE, count, max_bytes);
    } else if (st == ZEN_OK) {
        if (me + p < n)
            st = exchange(ctx, &cc, &ps, me + p, MODE_RECV_ADD, count, max_bytes);
        for (int mask = 1; mask < p && st == ZEN_OK; mask <<= 1)
            st = exchange(ctx, &cc, &ps, me ^ mask, MODE_PAIR, count, max_bytes);
        if (st == ZEN_OK && me + p < n)
            st = exchange(ctx, &cc, &ps, me + p, MODE_SEND, count, max_bytes);
    }
    if (st == ZEN_OK)
        st = deliver(ctx, &ps);
    zen_coo_release(&ps.coo);
    if (ps.dense_owned)
        zen_free(ps.dense);
    return zen_coll_end(comm, &cc, st);
}
