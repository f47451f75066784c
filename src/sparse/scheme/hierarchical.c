/*
 * HIERARCHICAL: SparCML-style sparse recursive doubling (Hierarchy + Incremental +
 * Centralization, the paper's HC).
 *
 * Let p be the largest power of two <= n. Ranks p..n-1 first fold their tensor into rank r-p
 * (pre-step); the p remaining ranks run log2(p) rounds; at round i a rank exchanges its whole
 * partial sum with partner rank ^ 2^i and merges the two sorted runs (merge2); finally rank r-p
 * sends the result back to rank r (post-step). Four ranks:
 *
 *     round 0:  0 <-> 1    2 <-> 3      each holds the sum of 2 inputs
 *     round 1:  0 <-> 2    1 <-> 3      each holds the sum of all 4
 *
 * Bytes each rank sends at round i: the COO of its partial sum of 2^i inputs,
 * gamma^(2^i) * nnz * (4 + 4w), capped by the dense size rows * w * 4: a partial sum whose COO
 * would be larger than the dense vector switches to the dense representation (SparCML's
 * sparse-to-dense switch); from then on the rounds exchange dense vectors, i.e. the scheme becomes
 * a recursive-doubling allreduce.
 *
 * Wire, per step: a 16-byte header (kind, count), then either the indices and the values as two
 * messages straight from the partial sum's arrays (no packing), or the dense vector. The header
 * comes first so the receiver can size its buffers, and lets partners hold different
 * representations. Receive and merge buffers are reused across rounds (grow-only).
 */
#include <string.h>

#include "common/alloc.h"
#include "common/checked.h"
#include "common/clock.h"
#include "sparse/scheme/registry.h"
#include "sparse/wire/xchg.h"

enum {
    KIND_COO = 0,
    KIND_DENSE = 1
};

typedef struct hc_state {
    zen_sparse_ctx *ctx;
    const zen_coll *cc;
    size_t count;  /* rows * width */
    zen_coo coo;   /* the partial sum while dense == NULL */
    zen_coo rx;    /* a received run */
    zen_coo spare; /* merge output, swapped with coo */
    float *dense;  /* the dense partial sum: the caller's dense_out or owned */
    int dense_owned;
    float *rdense; /* a received dense vector (owned) */
    uint64_t shdr[2], rhdr[2];
} hc_state;

static zen_status oom(hc_state *s, const char *what, size_t n)
{
    return zen__fail(s->ctx->comm, ZEN_ENOMEM, "hierarchical: cannot allocate %s for %zu", what, n);
}

/* Switch the partial sum to the dense representation. */
static zen_status make_dense(hc_state *s)
{
    if (s->ctx->dense_out) {
        s->dense = s->ctx->dense_out;
        s->dense_owned = 0;
    } else {
        s->dense = zen__malloc_array(s->count, sizeof(float));
        if (!s->dense)
            return oom(s, "a dense vector", s->count);
        s->dense_owned = 1;
    }
    memset(s->dense, 0, s->count * sizeof(float));
    size_t w = s->coo.width;
    for (size_t i = 0; i < s->coo.nnz; i++)
        memcpy(s->dense + (size_t)s->coo.idx[i] * w, s->coo.val + i * w, w * sizeof(float));
    s->coo.nnz = 0;
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
 * zen__coo_merge costs several times more per entry for k = 2, and this is the scheme's inner
 * loop). Both partners add the same two operands and IEEE addition is commutative, so they get
 * identical sums.
 */
static zen_status merge2(const zen_coo *a, const zen_coo *b, zen_coo *out)
{
    zen_status st = zen__coo_reserve(out, a->nnz + b->nnz);
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

/* The received indices must be sorted, unique and below rows before they address memory. */
static zen_status check_rx(hc_state *s, int peer)
{
    const zen_coo *c = &s->rx;
    for (size_t i = 0; i < c->nnz; i++)
        if (c->idx[i] >= c->rows || (i > 0 && c->idx[i] <= c->idx[i - 1]))
            return zen__fail(s->ctx->comm, ZEN_EPROTO,
                             "hierarchical: rank %d sent index %u at position %zu, not below %llu "
                             "or not sorted",
                             peer, c->idx[i], i, (unsigned long long)c->rows);
    return ZEN_OK;
}

/* Add what was received (s->rhdr, s->rx or s->rdense) into the partial sum. */
static zen_status absorb(hc_state *s)
{
    zen_status st;
    if (s->rhdr[0] == KIND_DENSE) {
        if (!s->dense && (st = make_dense(s)) != ZEN_OK)
            return st;
        for (size_t i = 0; i < s->count; i++)
            s->dense[i] += s->rdense[i];
        return ZEN_OK;
    }
    if (s->dense) {
        scatter_add(s->dense, &s->rx);
        return ZEN_OK;
    }
    if ((st = merge2(&s->coo, &s->rx, &s->spare)) != ZEN_OK)
        return zen__fail(s->ctx->comm, st, "hierarchical: merge of %zu + %zu rows failed",
                         s->coo.nnz, s->rx.nnz);
    zen_coo t = s->coo;
    s->coo = s->spare;
    s->spare = t;
    /* Switch when the COO form is no smaller than the dense one. */
    if (zen_coo_wire_bytes(s->coo.nnz, s->coo.width) >= s->count * sizeof(float))
        return make_dense(s);
    return ZEN_OK;
}

enum {
    MODE_PAIR,
    MODE_SEND,
    MODE_RECV_ADD,
    MODE_RECV_REPLACE
};

/* Post the payload receives announced by s->rhdr (after checking it) into rx or rdense. */
static zen_status post_recvs(hc_state *s, int peer, zen_treq **req, size_t *expect)
{
    zen_comm *comm = s->ctx->comm;
    const zen_coo *local = s->ctx->local;
    if (s->rhdr[0] == KIND_DENSE) {
        if (s->rhdr[1] != s->count)
            return zen__fail(comm, ZEN_EPROTO,
                             "hierarchical: rank %d announced a dense vector of %llu, not %zu",
                             peer, (unsigned long long)s->rhdr[1], s->count);
        if (!s->rdense && !(s->rdense = zen__malloc_array(s->count ? s->count : 1, 4)))
            return oom(s, "a received dense vector", s->count);
        expect[0] = s->count * sizeof(float);
        return zen__coll_irecv(comm, s->cc, peer, s->rdense, expect[0], &req[0]);
    }
    if (s->rhdr[0] != KIND_COO || s->rhdr[1] > local->rows)
        return zen__fail(comm, ZEN_EPROTO, "hierarchical: rank %d sent a bad header (%llu, %llu)",
                         peer, (unsigned long long)s->rhdr[0], (unsigned long long)s->rhdr[1]);
    size_t nnz = (size_t)s->rhdr[1];
    if (zen__coo_reserve(&s->rx, nnz) != ZEN_OK)
        return oom(s, "received rows", nnz);
    s->rx.nnz = nnz;
    expect[0] = nnz * sizeof(uint32_t);
    expect[1] = nnz * local->width * sizeof(float);
    zen_status st = zen__coll_irecv(comm, s->cc, peer, s->rx.idx, expect[0], &req[0]);
    if (st == ZEN_OK)
        st = zen__coll_irecv(comm, s->cc, peer, s->rx.val, expect[1], &req[1]);
    return st;
}

/* Post the payload sends of the partial sum (header already sent). */
static zen_status post_sends(hc_state *s, int peer, zen_treq **req)
{
    zen_comm *comm = s->ctx->comm;
    if (s->dense)
        return zen__coll_isend(comm, s->cc, peer, s->dense, s->count * sizeof(float), &req[0]);
    zen_status st =
        zen__coll_isend(comm, s->cc, peer, s->coo.idx, s->coo.nnz * sizeof(uint32_t), &req[0]);
    if (st == ZEN_OK)
        st = zen__coll_isend(comm, s->cc, peer, s->coo.val,
                             s->coo.nnz * s->coo.width * sizeof(float), &req[1]);
    return st;
}

/* One step with peer: swap partial sums (PAIR), only send (fold, unfold), or only receive and
 * add it to ours (fold) or take it as the result (unfold). */
static zen_status exchange(hc_state *s, int peer, int mode)
{
    zen_sparse_ctx *ctx = s->ctx;
    zen_comm *comm = ctx->comm;
    int send = mode == MODE_PAIR || mode == MODE_SEND;
    int recv = mode != MODE_SEND;
    zen_treq *rreq[2] = { NULL, NULL }, *sreq[2] = { NULL, NULL };
    size_t expect[2] = { 0, 0 };
    int64_t t0 = zen_now_ns();
    s->shdr[0] = s->dense ? KIND_DENSE : KIND_COO;
    s->shdr[1] = s->dense ? s->count : s->coo.nnz;
    zen_status st = zen__coll_sendrecv(comm, s->cc, send ? peer : -1, s->shdr, sizeof s->shdr,
                                       recv ? peer : -1, s->rhdr, sizeof s->rhdr);
    if (st == ZEN_OK && recv)
        st = post_recvs(s, peer, rreq, expect);
    if (st == ZEN_OK && send)
        st = post_sends(s, peer, sreq);
    for (int i = 0; i < 2; i++) {
        zen_status w = st == ZEN_OK ? zen__coll_wait(comm, s->cc, sreq[i], peer, SIZE_MAX, NULL)
                                    : (zen__coll_req_drop(comm, sreq[i]), st);
        st = st == ZEN_OK ? w : st;
    }
    for (int i = 0; i < 2; i++) {
        zen_status w = st == ZEN_OK ? zen__coll_wait(comm, s->cc, rreq[i], peer, expect[i], NULL)
                                    : (zen__coll_req_drop(comm, rreq[i]), st);
        st = st == ZEN_OK ? w : st;
    }
    int64_t t1 = zen_now_ns();
    ctx->stats->phase_us[ZEN_PHASE_PUSH] += zen_us_between(t0, t1);
    if (st == ZEN_OK && recv && s->rhdr[0] == KIND_COO)
        st = check_rx(s, peer);
    if (st == ZEN_OK && recv) {
        if (mode == MODE_RECV_REPLACE && s->dense)
            memset(s->dense, 0, s->count * sizeof(float));
        if (mode == MODE_RECV_REPLACE)
            s->coo.nnz = 0;
        st = absorb(s);
    }
    ctx->stats->phase_us[ZEN_PHASE_AGGREGATE] += zen_us_between(t1, zen_now_ns());
    return st;
}

static zen_status deliver(hc_state *s)
{
    zen_sparse_ctx *ctx = s->ctx;
    int64_t t0 = zen_now_ns();
    zen_status st = ZEN_OK;
    if (s->dense) {
        if (ctx->dense_out) {
            if (s->dense != ctx->dense_out)
                memcpy(ctx->dense_out, s->dense, s->count * sizeof(float));
            zen__dense_finish(ctx);
        } else {
            zen_coo sum = { 0 };
            st = zen__coo_from_dense(s->dense, ctx->local->rows, ctx->local->width, &sum);
            if (st == ZEN_OK)
                st = zen__sparse_emit(ctx, &sum);
            zen__coo_release(&sum);
        }
    } else {
        st = zen__sparse_emit(ctx, &s->coo);
    }
    ctx->stats->phase_us[ZEN_PHASE_DECODE] += zen_us_between(t0, zen_now_ns());
    return st;
}

zen_status zen__sparse_run_hierarchical(zen_sparse_ctx *ctx)
{
    zen_comm *comm = ctx->comm;
    const zen_coo *local = ctx->local;
    int n = comm->size, me = comm->rank;
    size_t count;
    if (local->rows > SIZE_MAX || zen_mul_overflow((size_t)local->rows, local->width, &count) ||
        count > SIZE_MAX / sizeof(float))
        return zen__fail(comm, ZEN_EINVAL, "hierarchical: %llu x %u is too large",
                         (unsigned long long)local->rows, local->width);
    zen_coll cc;
    zen_status st = zen__coll_begin(comm, "sparse_hierarchical", &cc);
    if (st != ZEN_OK)
        return st;
    hc_state s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.cc = &cc;
    s.count = count;
    s.coo.rows = s.rx.rows = s.spare.rows = local->rows;
    s.coo.width = s.rx.width = s.spare.width = local->width;
    int64_t t0 = zen_now_ns();
    if (zen__coo_reserve(&s.coo, local->nnz) != ZEN_OK) {
        st = oom(&s, "rows", local->nnz);
    } else {
        s.coo.nnz = local->nnz;
        if (local->nnz) {
            memcpy(s.coo.idx, local->idx, local->nnz * sizeof(uint32_t));
            memcpy(s.coo.val, local->val, local->nnz * local->width * sizeof(float));
        }
        if (zen_coo_wire_bytes(s.coo.nnz, s.coo.width) >= count * sizeof(float) && count > 0)
            st = make_dense(&s);
    }
    ctx->stats->phase_us[ZEN_PHASE_PARTITION] += zen_us_between(t0, zen_now_ns());

    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    if (st == ZEN_OK && me >= p) {
        /* Extra rank: fold into me - p, then receive the finished sum from it. */
        st = exchange(&s, me - p, MODE_SEND);
        if (st == ZEN_OK)
            st = exchange(&s, me - p, MODE_RECV_REPLACE);
    } else if (st == ZEN_OK) {
        if (me + p < n)
            st = exchange(&s, me + p, MODE_RECV_ADD);
        for (int mask = 1; mask < p && st == ZEN_OK; mask <<= 1)
            st = exchange(&s, me ^ mask, MODE_PAIR);
        if (st == ZEN_OK && me + p < n)
            st = exchange(&s, me + p, MODE_SEND);
    }
    if (st == ZEN_OK)
        st = deliver(&s);
    zen__coo_release(&s.coo);
    zen__coo_release(&s.rx);
    zen__coo_release(&s.spare);
    if (s.dense_owned)
        zen__free(s.dense);
    zen__free(s.rdense);
    return zen__coll_end(comm, &cc, st);
}

/* Rounds of pairwise exchange (size, payload) whose partial sums grow by gamma^(2^i); once a
 * sum's COO is no smaller than the dense vector the rounds reduce dense (SparCML's switch). */
zen_cost_parts zen__sparse_cost_hierarchical(const zen_cost_terms *t)
{
    const zen_cpu_model *c = &t->net->cpu;
    double N = t->N, nnz = t->nnz, E = t->E, D = t->D, V = t->V, cp = t->cp;
    int levels = 0;
    while ((2L << levels) <= t->n && levels < 62)
        levels++;
    double hbytes = 0, hsteps = 0, hcpu = t->coalesce; /* steps: a message each */
    int went_dense = 0;
    for (int i = 0; i < levels; i++) {
        double run = zen_cost_min2(zen__cost_level_gamma(t->p, i), N) * nnz; /* partial sum */
        hsteps += 2;                                                         /* size, payload */
        hbytes += zen_cost_min2(run * E, D);
        if (run * E >= D) { /* from here on a dense reduce */
            hcpu += (went_dense ? 0 : t->zero + run * V * cp) + D * t->rd;
            went_dense = 1;
        } else {
            hcpu += 2 * run * (c->merge2 + V * cp);
        }
    }
    if ((1L << levels) != t->n) { /* fold and unfold of the ranks beyond the power of two */
        hsteps += 4;
        hbytes += zen_cost_min2(nnz * E, D) + zen_cost_min2(t->nnz_n * E, D);
        hcpu += 2 * nnz * (c->merge2 + V * cp);
    }
    if (t->p->dense_output)
        hcpu += went_dense ? 0 : t->dense_out;
    else if (went_dense)
        hcpu += D * cp + t->nnz_n * V * cp; /* back to COO */
    return (zen_cost_parts){ hsteps * t->a, hbytes, hcpu, hsteps };
}
