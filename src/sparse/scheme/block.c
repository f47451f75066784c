/*
 * BLOCK: OmniReduce-style non-zero blocks (Point-to-point + One-shot + Parallelism with even
 * ranges). The rows are grouped into blocks of B elements (ZEN_SPARSE_BLOCK_SIZE, default 256,
 * i.e. max(1, B / width) rows per block); the blocks are split into n even ranges, range j owned
 * by rank j. No per-element indices travel: a block is sent whole (zeros included) with its id.
 *
 * Steps: (1) find the local non-zero blocks (one scan of the sorted COO) and densify each,
 * (2) push: alltoallv of (block ids, block values) to the range owners, (3) the owner sums the
 * blocks into a dense accumulator for its range and keeps the union of non-zero block ids,
 * (4) pull: allgatherv of each owner's non-zero blocks, scattered into the output. Four ranks:
 *
 *     rows  |--- range 0 ---|--- range 1 ---|--- range 2 ---|--- range 3 ---|
 *     blocks [b0][b1][b2]... each [bk] = B elements; only blocks with a non-zero travel
 *
 * Bytes rank j sends: push sum_{k != j} m_j^k (4 + 4B), pull (n-1) m_j (4 + 4B), where m_j^k
 * is the number of its non-zero blocks in range k and m_j the non-zero blocks of the summed range.
 */
#include <math.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/tunables.h"
#include "sparse/model/imbalance.h"
#include "sparse/scheme/registry.h"
#include "sparse/wire/xchg.h"

typedef struct block_geom {
    uint64_t rows;
    size_t width;
    size_t brows;  /* rows per block */
    size_t belems; /* brows * width */
    size_t entry;  /* wire bytes per block: 4 + 4 * belems */
    uint64_t nblocks;
} block_geom;

static uint64_t range_block_lo(const block_geom *g, int n, int j)
{
    return zen_range_lo(g->nblocks, n, j);
}

/* Number of distinct blocks touched by the sorted idx[lo..hi). */
static size_t count_blocks(const block_geom *g, const uint32_t *idx, size_t lo, size_t hi)
{
    size_t m = 0;
    uint64_t last = UINT64_MAX;
    for (size_t i = lo; i < hi; i++) {
        uint64_t b = idx[i] / g->brows;
        if (b != last) {
            m++;
            last = b;
        }
    }
    return m;
}

/* Pack the blocks touched by COO entries [lo, hi) as m ids then m dense blocks. */
static void pack_blocks(const block_geom *g, const zen_coo *c, size_t lo, size_t hi, size_t m,
                        uint8_t *out)
{
    uint32_t *ids = (uint32_t *)(void *)out;
    float *vals = (float *)(void *)(out + m * sizeof(uint32_t));
    memset(vals, 0, m * g->belems * sizeof(float));
    size_t k = 0;
    uint64_t last = UINT64_MAX;
    for (size_t i = lo; i < hi; i++) {
        uint64_t b = c->idx[i] / g->brows;
        if (b != last) {
            ids[k++] = (uint32_t)b;
            last = b;
        }
        size_t r = c->idx[i] - b * g->brows;
        memcpy(vals + (k - 1) * g->belems + r * g->width, c->val + i * g->width,
               g->width * sizeof(float));
    }
}

/* Validate a received block message (ids sorted, unique, inside [blo, bhi)). */
static zen_status check_blocks(zen_comm *comm, int peer, const block_geom *g, const uint8_t *buf,
                               size_t bytes, uint64_t blo, uint64_t bhi, size_t *m)
{
    if (bytes % g->entry != 0)
        return zen__fail(comm, ZEN_EPROTO, "block: rank %d sent %zu bytes, not whole blocks", peer,
                         bytes);
    *m = bytes / g->entry;
    const uint32_t *ids = (const uint32_t *)(const void *)buf;
    for (size_t i = 0; i < *m; i++)
        if (ids[i] < blo || ids[i] >= bhi || (i > 0 && ids[i] <= ids[i - 1]))
            return zen__fail(comm, ZEN_EPROTO,
                             "block: rank %d sent block id %u outside [%llu, %llu) or unsorted",
                             peer, ids[i], (unsigned long long)blo, (unsigned long long)bhi);
    return ZEN_OK;
}

/* The pulled blocks into the dense output: a block is rows [r0, r0 + brows) there and in the
 * blob alike, so one copy per block; the others stay zero. */
static void emit_blocks_dense(zen_sparse_ctx *ctx, const block_geom *g, const uint8_t *gbuf,
                              const size_t *rbytes, const size_t *roff, int n)
{
    size_t w = g->width, nnz_rows = 0;
    memset(ctx->dense_out, 0, (size_t)g->rows * w * sizeof(float));
    for (int p = 0; p < n; p++) {
        size_t m = rbytes[p] / g->entry;
        const uint32_t *ids = (const uint32_t *)(const void *)(gbuf + roff[p]);
        const float *vals = (const float *)(const void *)(gbuf + roff[p] + m * 4);
        for (size_t k = 0; k < m; k++) {
            uint64_t r0 = (uint64_t)ids[k] * g->brows, r1 = r0 + g->brows;
            if (r1 > g->rows)
                r1 = g->rows;
            memcpy(ctx->dense_out + r0 * w, vals + k * g->belems,
                   (size_t)(r1 - r0) * w * sizeof(float));
        }
    }
    zen__dense_average(ctx);
    for (int p = 0; p < n; p++) { /* non-zero rows: only the pulled blocks (disjoint) hold any */
        size_t m = rbytes[p] / g->entry;
        const uint32_t *ids = (const uint32_t *)(const void *)(gbuf + roff[p]);
        for (size_t k = 0; k < m; k++) {
            uint64_t r0 = (uint64_t)ids[k] * g->brows, r1 = r0 + g->brows;
            nnz_rows +=
                zen__dense_count_rows(ctx->dense_out, (uint32_t)w, r0, r1 < g->rows ? r1 : g->rows);
        }
    }
    ctx->stats->nnz_out = nnz_rows;
}

/* Write the pulled blocks into the caller's output (dense, or COO of the non-zero rows). */
static zen_status emit_blocks(zen_sparse_ctx *ctx, const block_geom *g, const uint8_t *gbuf,
                              const size_t *rbytes, const size_t *roff, int n)
{
    size_t w = g->width;
    if (ctx->dense_out) {
        emit_blocks_dense(ctx, g, gbuf, rbytes, roff, n);
        return ZEN_OK;
    }
    zen_coo sum = { 0 };
    sum.rows = g->rows;
    sum.width = (uint32_t)w;
    for (int pass = 0; pass < 2; pass++) {
        size_t nnz = 0;
        for (int p = 0; p < n; p++) {
            size_t m = rbytes[p] / g->entry;
            const uint32_t *ids = (const uint32_t *)(const void *)(gbuf + roff[p]);
            const float *vals = (const float *)(const void *)(gbuf + roff[p] + m * 4);
            for (size_t k = 0; k < m; k++) {
                uint64_t r0 = (uint64_t)ids[k] * g->brows;
                for (size_t r = 0; r < g->brows && r0 + r < g->rows; r++) {
                    const float *v = vals + k * g->belems + r * w;
                    size_t c = 0;
                    while (c < w && v[c] == 0.0f)
                        c++;
                    if (c == w)
                        continue;
                    if (pass == 1) {
                        sum.idx[nnz] = (uint32_t)(r0 + r);
                        memcpy(sum.val + nnz * w, v, w * sizeof(float));
                    }
                    nnz++;
                }
            }
        }
        if (pass == 0) {
            zen_status st = zen__coo_reserve(&sum, nnz);
            if (st != ZEN_OK) {
                zen__coo_release(&sum);
                return zen__fail(ctx->comm, st, "block: cannot allocate %zu result rows", nnz);
            }
        } else {
            sum.nnz = nnz;
        }
    }
    zen_status st = zen__sparse_emit(ctx, &sum);
    zen__coo_release(&sum);
    return st;
}

/* One BLOCK call's state; the arrays of n entries are one allocation (cut has n + 1). */
typedef struct blk_state {
    zen_sparse_ctx *ctx;
    zen_comm *comm;
    const zen_coll *cc;
    int n, me;
    block_geom g;
    size_t wire_max;
    size_t *cut, *sbytes, *load, *rbytes, *roff;
    const void **sptr;
    uint8_t *sbuf, *rbuf, *pbuf, *gbuf;
    size_t pbytes;
    float *acc;       /* this rank's range, dense */
    uint8_t *touched; /* its blocks that received a non-zero */
} blk_state;

static block_geom make_geom(const zen_coo *local)
{
    block_geom g;
    long bsize = zen__param_long("SPARSE_BLOCK_SIZE");
    if (bsize < 1)
        bsize = 256;
    g.rows = local->rows;
    g.width = local->width;
    g.brows = (size_t)bsize / g.width ? (size_t)bsize / g.width : 1;
    if (g.brows > g.rows) /* a tensor smaller than one block is one block */
        g.brows = (size_t)g.rows;
    g.belems = g.brows * g.width;
    g.entry = 4 + 4 * g.belems;
    g.nblocks = (g.rows + g.brows - 1) / g.brows;
    return g;
}

/* (1) cut the local COO at the owners' first rows, count and pack the blocks per owner */
static zen_status blk_partition(blk_state *s)
{
    const zen_coo *local = s->ctx->local;
    int n = s->n;
    size_t total = 0;
    for (int j = 0; j <= n; j++)
        s->cut[j] = j == n ? local->nnz
                           : zen__lower_bound_u32(local->idx, local->nnz,
                                                  range_block_lo(&s->g, n, j) * s->g.brows);
    for (int j = 0; j < n; j++) {
        s->load[j] = count_blocks(&s->g, local->idx, s->cut[j], s->cut[j + 1]);
        s->sbytes[j] = s->load[j] * s->g.entry;
        total += s->sbytes[j];
    }
    s->ctx->stats->imbalance_push = zen_imbalance(s->load, n);
    if (!(s->sbuf = zen__malloc(total ? total : 1)))
        return zen__fail(s->comm, ZEN_ENOMEM, "block: cannot allocate %zu bytes", total);
    size_t off = 0;
    for (int j = 0; j < n; j++) {
        s->sptr[j] = s->sbuf + off;
        pack_blocks(&s->g, local, s->cut[j], s->cut[j + 1], s->load[j], s->sbuf + off);
        off += s->sbytes[j];
    }
    return ZEN_OK;
}

/* (2) push */
static zen_status blk_push(blk_state *s)
{
    return zen__xchg_alltoallv(s->comm, s->cc, s->sptr, s->sbytes, s->wire_max, &s->rbuf, s->rbytes,
                               s->roff);
}

/* (3) sum the received blocks of this rank's range, then pack its non-zero ones */
static zen_status blk_aggregate(blk_state *s)
{
    const block_geom *g = &s->g;
    uint64_t blo = range_block_lo(g, s->n, s->me), bhi = range_block_lo(g, s->n, s->me + 1);
    size_t nb = (size_t)(bhi - blo);
    s->acc = zen__calloc(nb ? nb * g->belems : 1, sizeof(float));
    s->touched = zen__calloc(nb ? nb : 1, 1);
    if (!s->acc || !s->touched)
        return zen__fail(s->comm, ZEN_ENOMEM,
                         "block: cannot allocate the accumulator of %zu blocks", nb);
    for (int p = 0; p < s->n; p++) {
        size_t m = 0;
        zen_status st =
            check_blocks(s->comm, p, g, s->rbuf + s->roff[p], s->rbytes[p], blo, bhi, &m);
        if (st != ZEN_OK)
            return st;
        const uint32_t *ids = (const uint32_t *)(const void *)(s->rbuf + s->roff[p]);
        const float *vals = (const float *)(const void *)(s->rbuf + s->roff[p] + m * 4);
        for (size_t k = 0; k < m; k++) {
            float *a = s->acc + (size_t)(ids[k] - blo) * g->belems;
            const float *v = vals + k * g->belems;
            for (size_t e = 0; e < g->belems; e++)
                a[e] += v[e];
            s->touched[ids[k] - blo] = 1;
        }
    }
    size_t mine = 0;
    for (size_t b = 0; b < nb; b++)
        mine += s->touched[b];
    s->pbytes = mine * g->entry;
    if (!(s->pbuf = zen__malloc(s->pbytes ? s->pbytes : 1)))
        return zen__fail(s->comm, ZEN_ENOMEM, "block: cannot allocate %zu bytes", s->pbytes);
    uint32_t *pid = (uint32_t *)(void *)s->pbuf;
    float *pval = (float *)(void *)(s->pbuf + mine * 4);
    for (size_t b = 0, k = 0; b < nb; b++)
        if (s->touched[b]) {
            pid[k] = (uint32_t)(blo + b);
            memcpy(pval + k * g->belems, s->acc + b * g->belems, g->belems * sizeof(float));
            k++;
        }
    return ZEN_OK;
}

/* (4) pull every owner's non-zero blocks and check them */
static zen_status blk_pull(blk_state *s)
{
    zen_status st = zen__xchg_allgatherv(s->comm, s->cc, s->pbuf, s->pbytes, s->wire_max, &s->gbuf,
                                         s->rbytes, s->roff);
    for (int p = 0; p < s->n && st == ZEN_OK; p++)
        st = check_blocks(s->comm, p, &s->g, s->gbuf + s->roff[p], s->rbytes[p],
                          range_block_lo(&s->g, s->n, p), range_block_lo(&s->g, s->n, p + 1),
                          &s->load[p]);
    if (st == ZEN_OK)
        s->ctx->stats->imbalance_pull = zen_imbalance(s->load, s->n);
    return st;
}

static zen_status blk_emit(blk_state *s)
{
    return emit_blocks(s->ctx, &s->g, s->gbuf, s->rbytes, s->roff, s->n);
}

static void blk_free(blk_state *s)
{
    zen__free(s->cut);
    zen__free(s->sptr);
    zen__free(s->sbuf);
    zen__free(s->rbuf);
    zen__free(s->pbuf);
    zen__free(s->gbuf);
    zen__free(s->acc);
    zen__free(s->touched);
}

typedef zen_status (*blk_step)(blk_state *s);

zen_status zen__sparse_run_block(zen_sparse_ctx *ctx)
{
    static const struct {
        blk_step fn;
        zen_sparse_phase phase;
    } steps[] = { { blk_partition, ZEN_PHASE_PARTITION },
                  { blk_push, ZEN_PHASE_PUSH },
                  { blk_aggregate, ZEN_PHASE_AGGREGATE },
                  { blk_pull, ZEN_PHASE_PULL },
                  { blk_emit, ZEN_PHASE_DECODE } };

    zen_coll cc;
    zen_status st = zen__coll_begin(ctx->comm, "sparse_block", &cc);
    if (st != ZEN_OK)
        return st;
    blk_state s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.comm = ctx->comm;
    s.cc = &cc;
    s.n = ctx->comm->size;
    s.me = ctx->comm->rank;
    s.g = make_geom(ctx->local);
    s.wire_max = s.g.nblocks > SIZE_MAX / s.g.entry ? SIZE_MAX : (size_t)s.g.nblocks * s.g.entry;
    size_t n = (size_t)s.n;
    s.cut = zen__malloc_array(5 * n + 1, sizeof *s.cut); /* cut, sbytes, load, rbytes, roff */
    s.sptr = zen__malloc_array(n, sizeof *s.sptr);
    if (!s.cut || !s.sptr) {
        st = zen__fail(ctx->comm, ZEN_ENOMEM, "block: out of memory");
    } else {
        s.sbytes = s.cut + n + 1;
        s.load = s.sbytes + n;
        s.rbytes = s.load + n;
        s.roff = s.rbytes + n;
    }
    int64_t lap = zen_now_ns();
    for (size_t i = 0; i < sizeof steps / sizeof steps[0] && st == ZEN_OK; i++) {
        st = steps[i].fn(&s);
        zen_sparse_lap(ctx, steps[i].phase, &lap);
    }
    blk_free(&s);
    return zen__coll_end(ctx->comm, &cc, st);
}

/* As PS over non-zero blocks of B elements (4 + 4B bytes each): densify the local non-zero
 * blocks, owner: zero its range, add n ranks' hot blocks, pack its non-zero ones; everyone:
 * unpack every owner's blocks. */
zen_cost_parts zen__sparse_cost_block(const zen_cost_terms *t)
{
    const zen_sparse_profile *p = t->p;
    double R = t->R, N = t->N, cp = t->cp;
    double brows = zen_cost_min2((double)zen__cost_block_rows(t->width, t->block_elems), R);
    double nblocks = ceil(R / brows), entry = 4 + 4 * brows * t->w;
    double b1 = p->block_density >= 0 ? p->block_density : 1 - pow(1 - t->d, brows);
    double bn = p->block_density_n >= 0 ? p->block_density_n : 1 - pow(1 - t->nnz_n / R, brows);
    double bs = p->block_skew >= 1 ? p->block_skew : t->s;
    double bsn = p->block_skew_n >= 1 ? p->block_skew_n : t->sn;
    double bhot = zen_cost_min2(bs * b1, 1) * nblocks / N;
    double bhot_n = zen_cost_min2(bsn * bn, 1) * nblocks / N;
    return (zen_cost_parts){ 4 * t->conc, t->n1 * (bhot + bhot_n) * entry,
                             t->coalesce + b1 * nblocks * entry * cp + t->zero / N +
                                 N * bhot * entry * t->rd + bhot_n * entry * cp +
                                 bn * nblocks * entry * cp + t->dense_out,
                             4 * t->n1 };
}
