/*
 * BALANCED: ZEN's Balanced Parallelism. Every rank is a worker and the owner (server) of the
 * universe U_j = {i : h0(i) = j}; h0 is the data-independent owner hash, so each owner gets
 * about 1/n of every rank's non-zeros whatever the skew of the input.
 *
 *   partition  hierarchical hashing (hier_hash.c) splits the local coalesced COO by owner
 *   push       one exchange of 8-byte sizes, one of per-owner COO slices (indices then rows)
 *   aggregate  the owner coalesces what it received (radix sort + sum; memory ~ received nnz)
 *   (top-k)    with global_topk, the owners keep only their share of the k largest sums
 *              (global_topk.c: up to 5 allreduces of <= 512 B, and 4 of 1 KB for a tie)
 *   encode     hash bitmap of the owner's sum over U_j, COO, or COO with gap-coded indices
 *              (ZEN_HB_GAP), whichever is smallest (bitmap.c)
 *   pull       allgather of (blob bytes, push imbalance), allgatherv of the blobs: Bruck's
 *              log2 n rounds up to ZEN_SPARSE_PULL_BRUCK_MAX_BYTES in all, else the ring
 *   decode     every rank expands each owner's blob with that owner's universe, into the dense
 *              output or into n sorted runs merged by a scan of their heads (coo.c), or,
 *              with any_order, simply placed one after another
 *
 * 4 ranks, rank 0's view (a = aggregated partition of owner j, b = its blob):
 *
 *      push (alltoallv)                 pull (allgatherv)
 *   r0 -[I_0^1]-> r1              r0 <-[b1]- r1
 *   r0 -[I_0^2]-> r2    sum->a0   r0 <-[b2]- r2     decode b0..b3 -> full sum on every rank
 *   r0 -[I_0^3]-> r3    encode b0 r0 <-[b3]- r3
 *
 * Bytes (d = this rank's nnz after coalescing, w = width, B_j = owner j's blob,
 * B_j = min(8 + 8 ceil(|U_j|/64) + 4 c_j w, 8 + 4 c_j + 4 c_j w, ~8 + 4 c_j w + g c_j) for c_j
 * rows in its sum, g = 1-2 bytes a gap-coded index: the gaps' blob wins below a density of about
 * 1/8 of U_j, e.g. a top-k selection of 5% per rank):
 *   push  sends ~ (n-1)/n * d * (4 + 4w), plus 8-byte sizes to each peer, in two steps
 *   pull  receives sum_{j != self} B_j; Bruck and the ring alike make each rank send about as
 *         much (Bruck in ceil(log2 n) messages, the ring in n - 1 dependent steps). With bitmaps
 *         sum_j B_j ~ rows/8 + 4 w C (C = rows of the global sum): independent of n.
 */
#include <math.h>
#include <string.h>

#include "coll/coll_algos.h"
#include "coll/comm_internal.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/tunables.h"
#include "sparse/scheme/global_topk.h"
#include "sparse/scheme/registry.h"
#include "sparse/sparse_internal.h"
#include "sparse/wire/bitmap.h"
#include "sparse/wire/coo.h"
#include "sparse/wire/hier_hash.h"
#include "sparse/wire/universe.h"
#include "sparse/wire/xchg.h"

typedef struct bal_state {
    zen_sparse_ctx *ctx;
    zen_comm *comm;
    int n, rank;
    uint32_t w;
    zen_hh_result part;
    size_t *sbytes, *rbytes, *roff; /* n each: packed COO bytes to / from each peer */
    const void **sbufs;             /* n: each owner's slice of send */
    uint8_t *send, *recv;           /* packed per-owner COO slices (indices, then values) */
    uint32_t *recv_idx;
    float *recv_val;
    size_t recv_total;
    zen_coo agg;
    const zen_universe *uni;
    unsigned char *blob;
    size_t blob_bytes;
    uint64_t *info; /* 2 per rank: blob bytes, push imbalance (double bits) */
    size_t *bcounts, *bdispls;
    unsigned char *blobs;
    zen_coo *runs;
} bal_state;

static void bal_free(bal_state *s)
{
    zen__hh_result_free(&s->part);
    zen__free(s->sbytes);
    zen__free(s->sbufs);
    zen__free(s->send);
    zen__free(s->recv);
    zen__free(s->recv_idx);
    zen__free(s->recv_val);
    zen__coo_release(&s->agg);
    zen__universe_put(s->uni);
    zen__free(s->blob);
    zen__free(s->info);
    zen__free(s->bcounts);
    zen__free(s->blobs);
    if (s->runs)
        for (int j = 0; j < s->n; j++)
            zen__coo_release(&s->runs[j]);
    zen__free(s->runs);
}

/* The counting partition by h0 on one CPU thread (2.2x the indices/s of Algorithm 1 there,
 * docs/benchmarks.md); Algorithm 1, whose CAS slot claims need no prefix sum, with threads.
 * ZEN_SPARSE_PARTITION=hash|count forces one; both give the same owners. */
static zen_hh_method partition_method(int threads)
{
    const char *m = zen__param_str("SPARSE_PARTITION");
    if (m && strcmp(m, "count") == 0)
        return ZEN_HH_COUNT;
    if (m && strcmp(m, "hash") == 0)
        return ZEN_HH_HASH;
    return threads > 1 ? ZEN_HH_HASH : ZEN_HH_COUNT;
}

/* Partition the local COO by owner and pack each owner's slice as one COO message. */
static zen_status do_partition(bal_state *s)
{
    const zen_coo *in = s->ctx->local;
    const zen_sparse_options *o = s->ctx->opts;
    zen_hh_config cfg = zen__hh_config_default((uint32_t)s->n, zen__comm_seeds(s->comm));
    cfg.threads = o ? o->threads : 1;
    cfg.method = partition_method(cfg.threads);
    if (o && (o->hash_probes > 0 || o->hash_r1 > 0)) { /* ablation of Algorithm 1's k and r1 */
        cfg.method = ZEN_HH_HASH;
        cfg.probes = o->hash_probes;
        if (o->hash_r1 > 0)
            cfg.slots_per_owner = (size_t)(o->hash_r1 * (double)in->nnz / s->n) + 1;
    }
    zen_status st = zen__hh_partition(&cfg, in->idx, in->nnz, &s->part);
    if (st != ZEN_OK)
        return zen__fail(s->comm, st, "sparse balanced: hash partition of %zu rows failed",
                         in->nnz);
    if (cfg.method == ZEN_HH_HASH) {
        s->ctx->stats->partition_serial += s->part.serial_items;
        s->ctx->stats->partition_passes += s->part.passes;
    }
    size_t nnz = in->nnz, w = s->w;
    s->send = zen__malloc(nnz ? zen_coo_wire_bytes(nnz, s->w) : 1);
    if (!s->send)
        return ZEN_ENOMEM;
    double imb = 0;
    for (int j = 0; j < s->n; j++) {
        size_t lo = s->part.offsets[j], c = s->part.offsets[j + 1] - lo;
        uint8_t *slice = s->send + zen_coo_wire_bytes(lo, s->w);
        uint32_t *idx = (uint32_t *)(void *)slice;
        float *val = (float *)(void *)(slice + c * sizeof(uint32_t));
        for (size_t k = 0; k < c; k++) {
            uint32_t p = s->part.pos[lo + k];
            idx[k] = in->idx[p];
            memcpy(val + k * w, in->val + (size_t)p * w, w * sizeof(float));
        }
        s->sbufs[j] = slice;
        s->sbytes[j] = zen_coo_wire_bytes(c, s->w);
        if (nnz > 0 && (double)s->n * (double)c / (double)nnz > imb)
            imb = (double)s->n * (double)c / (double)nnz;
    }
    s->ctx->stats->imbalance_push = imb;
    return ZEN_OK;
}

/* One exchange of sizes and one of the packed slices (zen__xchg_alltoallv), then the received
 * indices and values side by side for the coalesce. */
static zen_status do_push(bal_state *s)
{
    zen_coll cc;
    zen_status st = zen__coll_begin(s->comm, "sparse_balanced_push", &cc);
    if (st != ZEN_OK)
        return st;
    st = zen__xchg_alltoallv(s->comm, &cc, s->sbufs, s->sbytes,
                             zen__coo_wire_max(s->ctx->local->rows, s->w), &s->recv, s->rbytes,
                             s->roff);
    if ((st = zen__coll_end(s->comm, &cc, st)) != ZEN_OK)
        return st;
    size_t entry = zen_coo_wire_bytes(1, s->w), total = 0, w = s->w;
    for (int j = 0; j < s->n; j++) {
        if (s->rbytes[j] % entry != 0)
            return zen__fail(s->comm, ZEN_EPROTO,
                             "sparse balanced: rank %d pushed %zu bytes, not whole entries", j,
                             s->rbytes[j]);
        total += s->rbytes[j] / entry;
    }
    if (total >= UINT32_MAX)
        return zen__fail(s->comm, ZEN_EUNSUPPORTED, "sparse balanced: %zu rows pushed to one owner",
                         total);
    s->recv_total = total;
    s->recv_idx = zen__malloc_array(total ? total : 1, sizeof *s->recv_idx);
    s->recv_val = zen__malloc_array(total ? total * w : 1, sizeof *s->recv_val);
    if (!s->recv_idx || !s->recv_val)
        return ZEN_ENOMEM;
    size_t at = 0;
    for (int j = 0; j < s->n; j++) {
        size_t c = s->rbytes[j] / entry;
        const uint8_t *slice = s->recv + s->roff[j];
        memcpy(s->recv_idx + at, slice, c * sizeof(uint32_t));
        memcpy(s->recv_val + at * w, slice + c * sizeof(uint32_t), c * w * sizeof(float));
        at += c;
    }
    zen__free(s->send);
    zen__free(s->recv);
    s->send = NULL;
    s->recv = NULL;
    return ZEN_OK;
}

static zen_status do_aggregate(bal_state *s)
{
    uint64_t rows = s->ctx->local->rows;
    for (size_t k = 0; k < s->recv_total; k++)
        if (s->recv_idx[k] >= rows)
            return zen__fail(s->comm, ZEN_EPROTO, "sparse balanced: pushed index %u >= rows %llu",
                             s->recv_idx[k], (unsigned long long)rows);
    s->agg.rows = rows;
    s->agg.width = s->w;
    zen_status st = zen__coo_coalesce(s->recv_idx, s->recv_val, ZEN_F32, s->recv_total, s->w,
                                      rows ? (uint32_t)(rows - 1) : 0, &s->agg);
    /* the push buffers are dead now: give their memory back before the pull */
    zen__free(s->recv_idx);
    zen__free(s->recv_val);
    s->recv_idx = NULL;
    s->recv_val = NULL;
    return st;
}

static zen_status do_encode(bal_state *s)
{
    /* global top-k: the owners agree a magnitude threshold and keep only their share of the k
     * largest sums, so the pull below carries at most k rows in all (global_topk.c) */
    size_t k = zen__sparse_topk_k(s->ctx);
    zen_status st = k ? zen__sparse_global_topk(s->ctx, &s->agg, k) : ZEN_OK;
    if (st != ZEN_OK)
        return st;
    st = zen__universe_get(s->ctx->local->rows, (uint32_t)s->n, zen__comm_seeds(s->comm)[0],
                           &s->uni);
    if (st != ZEN_OK)
        return zen__fail(s->comm, st, "sparse balanced: owner universes of %llu rows",
                         (unsigned long long)s->ctx->local->rows);
    size_t ulen = s->uni->offsets[s->rank + 1] - s->uni->offsets[s->rank];
    uint32_t format;
    int forced = s->ctx->opts ? s->ctx->opts->pull_format : ZEN_SPARSE_PULL_AUTO;
    if ((st = zen__hb_plan_format(&s->agg, ulen, forced, &format, &s->blob_bytes)) != ZEN_OK)
        return zen__fail(s->comm, st,
                         st == ZEN_EINVAL ? "sparse balanced: pull_format %d is not a "
                                            "zen_sparse_pull_format"
                                          : "sparse balanced: aggregated rows exceed the universe "
                                            "(pull_format %d)",
                         forced);
    /* a sparse sum (global top-k's k / n rows an owner; a union of top-k selections, ~10% of
     * U_j) has its rows tens to thousands apart: gap-coded indices (1-2 bytes) beat COO's 4
     * bytes and the bitmap's |U_j| / 8 (1.6 bytes a row at 8%: 10% fewer pull bytes a step for
     * the trainer's --topk 0.05 on 4 hosts, docs/compression.md) */
    size_t gap_bytes = forced == ZEN_SPARSE_PULL_AUTO ? zen__hb_gap_bytes(&s->agg) : 0;
    if (gap_bytes && gap_bytes < s->blob_bytes) {
        format = ZEN_HB_GAP;
        s->blob_bytes = gap_bytes;
    }
    if (format == ZEN_HB_BITMAP && (st = zen__universe_members(s->uni)) != ZEN_OK)
        return zen__fail(s->comm, st, "sparse balanced: universe members of %llu rows",
                         (unsigned long long)s->ctx->local->rows);
    _Static_assert(ZEN_HB_BITMAP == ZEN_SPARSE_PULL_HASH_BITMAP &&
                       ZEN_HB_COO == ZEN_SPARSE_PULL_COO &&
                       ZEN_HB_PLAIN == ZEN_SPARSE_PULL_PLAIN_BITMAP,
                   "the blob format codes are the zen_sparse_pull_format values");
    s->ctx->stats->pull_format = format == ZEN_HB_GAP ? ZEN_HB_COO : format; /* a coded COO */
    s->blob = zen__malloc(s->blob_bytes);
    if (!s->blob)
        return ZEN_ENOMEM;
    st = zen__hb_encode(&s->agg, s->uni, (uint32_t)s->rank, format, s->blob, s->blob_bytes);
    if (st != ZEN_OK)
        return zen__fail(s->comm, st,
                         "sparse balanced: a peer pushed an index this rank does "
                         "not own");
    return ZEN_OK;
}

/* The blobs in ceil(log2 n) rounds, left in rotated order (no copy back into rank order): rank
 * j's blob is at the rotated position of j, which becomes its bdispls entry. */
static zen_status pull_bruck(bal_state *s)
{
    size_t *pos = zen__malloc_array((size_t)s->n + 1, sizeof *pos);
    if (!pos)
        return ZEN_ENOMEM;
    zen_coll cc;
    zen_status st = zen__coll_begin(s->comm, "sparse_balanced_pull", &cc);
    if (st == ZEN_OK) {
        st = zen__allgatherv_bruck_rotated(s->comm, &cc, s->blob, s->bcounts, 4, s->blobs, pos);
        st = zen__coll_end(s->comm, &cc, st);
    }
    for (int j = 0; j < s->n && st == ZEN_OK; j++)
        s->bdispls[j] = pos[zen_ring_mod(j - s->rank, s->n)] / 4;
    zen__free(pos);
    return st;
}

static zen_status do_pull(bal_state *s)
{
    uint64_t mine[2];
    double imb = s->ctx->stats->imbalance_push;
    mine[0] = s->blob_bytes;
    memcpy(&mine[1], &imb, sizeof imb);
    zen_status st = zen_allgather(s->comm, mine, s->info, 2, ZEN_I64);
    if (st != ZEN_OK)
        return st;
    size_t total = 0;
    for (int j = 0; j < s->n; j++) {
        uint64_t b = s->info[2 * j];
        /* blobs are whole 4-byte words, no larger than the bigger format of a full universe
         * (so a corrupt size cannot ask for an absurd allocation) */
        size_t ulen = s->uni->offsets[j + 1] - s->uni->offsets[j];
        uint64_t cap = (uint64_t)zen__hb_bitmap_bytes(ulen, ulen, s->w) +
                       (uint64_t)zen__hb_coo_bytes(ulen, s->w) +
                       (uint64_t)zen__hb_plain_bytes(s->ctx->local->rows, 0, 0);
        if (b % 4 != 0 || b < ZEN_HB_HEADER_BYTES || b > cap || b > SIZE_MAX / 4 - total)
            return zen__fail(s->comm, ZEN_EPROTO,
                             "sparse balanced: rank %d announced a %llu-byte blob", j,
                             (unsigned long long)b);
        s->bcounts[j] = (size_t)b / 4;
        s->bdispls[j] = total / 4;
        total += (size_t)b;
        double pj;
        memcpy(&pj, &s->info[2 * j + 1], sizeof pj);
        if (pj > imb)
            imb = pj;
    }
    s->ctx->stats->imbalance_push = imb;
    s->blobs = zen__malloc(total);
    if (!s->blobs)
        return ZEN_ENOMEM;
    if (zen__sparse_pull_uses_bruck(s->n, total))
        return pull_bruck(s);
    return zen_allgatherv(s->comm, s->blob, s->blob_bytes / 4, s->blobs, s->bcounts, s->bdispls,
                          ZEN_I32);
}

/* any_order: the owners' universes are disjoint, so their runs hold distinct rows and one run
 * after another is the whole sum, each row once: copies instead of the k-way merge. total is the
 * rows the decoders counted. */
static zen_status concat_runs(const zen_coo *runs, size_t k, size_t total, zen_coo *out)
{
    zen_status st = zen__coo_reserve(out, total);
    size_t at = 0, w = out->width;
    for (size_t j = 0; j < k && st == ZEN_OK; j++) {
        if (runs[j].nnz > total - at)
            return ZEN_EINTERNAL;
        if (runs[j].nnz == 0)
            continue;
        memcpy(out->idx + at, runs[j].idx, runs[j].nnz * sizeof *out->idx);
        memcpy(out->val + at * w, runs[j].val, runs[j].nnz * w * sizeof *out->val);
        at += runs[j].nnz;
    }
    out->nnz = at;
    return st;
}

static zen_status do_decode(bal_state *s)
{
    zen_sparse_ctx *ctx = s->ctx;
    uint64_t rows = ctx->local->rows;
    float divisor = ctx->opts && ctx->opts->average ? (float)s->n : 1.0f;
    size_t total = 0, maxc = 0;
    zen_status st = ZEN_OK;
    for (int j = 0; j < s->n && !zen__universe_has_members(s->uni);
         j++) { /* bitmaps need members */
        uint32_t format;
        memcpy(&format, s->blobs + 4 * s->bdispls[j], sizeof format);
        if (format == ZEN_HB_BITMAP && (st = zen__universe_members(s->uni)) != ZEN_OK)
            return zen__fail(ctx->comm, st, "sparse balanced: universe members of %llu rows",
                             (unsigned long long)rows);
    }
    if (ctx->dense_out)
        memset(ctx->dense_out, 0, (size_t)rows * s->w * sizeof(float));
    else if (!(s->runs = zen__calloc((size_t)s->n, sizeof *s->runs)))
        return ZEN_ENOMEM;
    for (int j = 0; j < s->n && st == ZEN_OK; j++) {
        const unsigned char *b = s->blobs + 4 * s->bdispls[j];
        size_t len = 4 * s->bcounts[j];
        if (ctx->dense_out) {
            st = zen__hb_decode_dense(b, len, s->uni, (uint32_t)j, s->w, divisor, ctx->dense_out);
        } else {
            s->runs[j].rows = rows;
            s->runs[j].width = s->w;
            st = zen__hb_decode_coo(b, len, s->uni, (uint32_t)j, s->w, 1.0f, &s->runs[j]);
        }
        if (st == ZEN_OK) { /* the decoders validated the blob: its row count is trustworthy */
            uint32_t c;
            memcpy(&c, b + 4, sizeof c);
            total += c;
            maxc = c > maxc ? c : maxc;
        }
    }
    if (st != ZEN_OK)
        return zen__fail(ctx->comm, st, "sparse balanced: malformed pull blob");
    ctx->stats->imbalance_pull = total ? (double)s->n * (double)maxc / (double)total : 0;
    ctx->stats->nnz_out = total;
    if (ctx->dense_out)
        return ZEN_OK;
    zen_coo sum = { rows, s->w, 0, 0, NULL, NULL };
    st = ctx->opts && ctx->opts->any_order ? concat_runs(s->runs, (size_t)s->n, total, &sum)
                                           : zen__coo_merge(s->runs, (size_t)s->n, &sum);
    if (st == ZEN_OK)
        st = zen__sparse_emit(ctx, &sum);
    zen__coo_release(&sum);
    return st;
}

typedef zen_status (*bal_step)(bal_state *s);

zen_status zen__sparse_run_balanced(zen_sparse_ctx *ctx)
{
    static const bal_step steps[ZEN_PHASE_COUNT] = { do_partition, do_push, do_aggregate,
                                                     do_encode,    do_pull, do_decode };
    bal_state s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.comm = ctx->comm;
    s.n = zen_comm_size(ctx->comm);
    s.rank = zen_comm_rank(ctx->comm);
    s.w = ctx->local->width;
    size_t n = (size_t)s.n;
    s.sbytes = zen__calloc(3 * n, sizeof(size_t));
    s.sbufs = zen__calloc(n, sizeof *s.sbufs);
    s.info = zen__calloc(2 * n, sizeof(uint64_t));
    s.bcounts = zen__calloc(2 * n, sizeof(size_t));
    zen_status st = ZEN_OK;
    if (!s.sbytes || !s.sbufs || !s.info || !s.bcounts) {
        st = ZEN_ENOMEM;
    } else {
        s.rbytes = s.sbytes + n;
        s.roff = s.sbytes + 2 * n;
        s.bdispls = s.bcounts + n;
    }
    for (int p = 0; p < ZEN_PHASE_COUNT && st == ZEN_OK; p++) {
        int64_t t0 = zen_now_ns();
        st = steps[p](&s);
        ctx->stats->phase_us[p] += zen_us_between(t0, zen_now_ns());
    }
    if (st == ZEN_ENOMEM)
        zen__fail(ctx->comm, st, "sparse balanced: out of memory");
    bal_free(&s);
    return st;
}

/* One exchange of sizes and one of the packed per-owner COO slices, (global top-k: the select's
 * small collectives, and the sum's rows pulled shrink to t->keep of them) then an allgather of the
 * 16-byte blob sizes and the allgatherv of the blobs, each in Bruck's ceil(log2 n) rounds or the
 * ring's n - 1 steps (whichever run_pull and zen_allgather take for that size); the pull blob of
 * an owner is the smaller of its hash bitmap (+ values) and its COO. */
zen_cost_parts zen__sparse_cost_balanced(const zen_cost_terms *t)
{
    const zen_cpu_model *c = &t->net->cpu;
    double nnz = t->nnz, nnz_n = t->nnz_n * t->keep, E = t->E, V = t->V, cp = t->cp, N = t->N;
    double coo_blob = nnz_n * t->E_pull_bal, bitmap_blob = t->R / 8 + nnz_n * 4 * t->w;
    double pull_bytes = zen_cost_min2(coo_blob, bitmap_blob);
    double blob_work = bitmap_blob < coo_blob ? (nnz_n / N + nnz_n) * c->bitmap : 0;
    double lg = ceil(log2(N)), info_bytes = 16 * N;
    double info_steps =
        t->n > 2 && info_bytes <= (double)zen__param_long("ALLGATHER_BRUCK_MAX_BYTES") ? lg : t->n1;
    double pull_steps = zen__sparse_pull_uses_bruck(t->n, pull_bytes) ? lg : t->n1;
    double merge = t->p->any_order ? 0 : c->merge * t->lgn;
    double out = t->p->dense_output ? t->dense_out : nnz_n * (merge + V * cp);
    return (zen_cost_parts){ 2 * t->conc + (info_steps + pull_steps + t->topk_steps) * t->a,
                             t->frac * (nnz * E + pull_bytes),
                             t->coalesce + nnz * (c->hash + (4 + V) * cp) + nnz * E * cp +
                                 nnz * (c->sort + V * cp) + blob_work +
                                 (nnz_n / N + nnz_n) * E * cp + out,
                             2 * t->n1 + info_steps + pull_steps + t->topk_steps };
}
