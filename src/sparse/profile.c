/*
 * AUTO: the sparsity profile and the choice of a scheme (zen_sparse_choose).
 *
 * Every AUTO call on n > 1 ranks allgathers a small record per rank (2n + 3 words): its profile
 * version for this tensor, whether it wants a re-measure, its non-zero rows and their counts over
 * the n even row ranges and over the n even block ranges. That alone gives the exact density and
 * skew. When the call names a recurring tensor (opts->key) the ranks keep a profile for it in a
 * small process-wide table, and on the first call, every ZEN_SPARSE_PROFILE_PERIOD calls, or
 * whenever the ranks' versions disagree (a rank lost its entry), they measure the rest:
 *  - densification ratios gamma^(2^i), i = 0..log2 n, and gamma^n, from hash-sampled index sets:
 *    every rank keeps the indices whose hash falls below a common threshold (about
 *    ZEN_SPARSE_PROFILE_SAMPLES per rank), allgathers them, and unions them over the aligned
 *    groups of 2, 4, ... ranks. Sampling by a hash shared by all ranks keeps the same rows on
 *    every rank, so |union of samples| / |sample| estimates |union| / |set|.
 *  - the summed tensor's skew (from the union sample) and its block density and block skew (from
 *    an allgather of per-rank block bitmaps, when there are at most 2^20 blocks).
 * Without a key the ratios come from the random-overlap model, the paper's pessimistic case.
 * Every input of the decision is identical on all ranks, so all ranks choose the same scheme.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/hash.h"
#include "common/tunables.h"
#include "sparse/cost.h"
#include "sparse/xchg.h"

#define PROFILE_SLOTS     256
#define MAX_BITMAP_BLOCKS (1u << 20)

typedef struct profile_slot {
    uint64_t key; /* 0: free */
    uint64_t version;
    uint64_t calls;
    uint64_t tick;
    zen_sparse_profile prof;
} profile_slot;

static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static profile_slot slots[PROFILE_SLOTS];
static uint64_t slot_tick;

static int slot_get(uint64_t key, profile_slot *out)
{
    int found = 0;
    pthread_mutex_lock(&slot_lock);
    for (int i = 0; i < PROFILE_SLOTS; i++)
        if (slots[i].key == key) {
            slots[i].tick = ++slot_tick;
            *out = slots[i];
            found = 1;
            break;
        }
    pthread_mutex_unlock(&slot_lock);
    return found;
}

/* Insert or update; evicts the least recently used slot when full. */
static void slot_put(const profile_slot *in)
{
    pthread_mutex_lock(&slot_lock);
    int victim = 0;
    for (int i = 0; i < PROFILE_SLOTS; i++) {
        if (slots[i].key == in->key) {
            victim = i;
            break;
        }
        if (slots[i].tick < slots[victim].tick)
            victim = i;
    }
    slots[victim] = *in;
    slots[victim].tick = ++slot_tick;
    pthread_mutex_unlock(&slot_lock);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Distinct values among the concatenated sorted runs of ranks [r0, r1) (scratch: tmp). */
static size_t union_size(const uint8_t *buf, const size_t *bytes, const size_t *off, int r0, int r1,
                         uint32_t *tmp)
{
    size_t k = 0;
    for (int r = r0; r < r1; r++) {
        memcpy(tmp + k, buf + off[r], bytes[r]);
        k += bytes[r] / sizeof(uint32_t);
    }
    qsort(tmp, k, sizeof *tmp, cmp_u32);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (i == 0 || tmp[i] != tmp[i - 1])
            tmp[u++] = tmp[i];
    return u;
}

typedef struct prof_geom {
    uint64_t rows;
    uint64_t brows, nblocks;
    int n;
} prof_geom;

/* The record this rank contributes: version, flags (bit 0: re-measure, bit 1: keyed), nnz, n range
 * counts, n block-range counts. */
static void local_record(const zen_coo *c, const prof_geom *g, uint64_t version, uint64_t need,
                         uint64_t *rec)
{
    int n = g->n;
    rec[0] = version;
    rec[1] = need;
    rec[2] = c->nnz;
    for (int j = 0; j < n; j++) {
        size_t lo = zen_lower_bound_u32(c->idx, c->nnz, zen_range_lo(g->rows, n, j));
        size_t hi = zen_lower_bound_u32(c->idx, c->nnz, zen_range_lo(g->rows, n, j + 1));
        rec[3 + j] = hi - lo;
        uint64_t blo = zen_range_lo(g->nblocks, n, j) * g->brows;
        uint64_t bhi = zen_range_lo(g->nblocks, n, j + 1) * g->brows;
        size_t a = zen_lower_bound_u32(c->idx, c->nnz, blo);
        size_t b = zen_lower_bound_u32(c->idx, c->nnz, bhi);
        uint64_t m = 0, last = UINT64_MAX;
        for (size_t i = a; i < b; i++)
            if (c->idx[i] / g->brows != last) {
                last = c->idx[i] / g->brows;
                m++;
            }
        rec[3 + n + j] = m;
    }
}

static double skew_of(const double *load, int n)
{
    double sum = 0, max = 0;
    for (int j = 0; j < n; j++) {
        sum += load[j];
        if (load[j] > max)
            max = load[j];
    }
    return sum > 0 ? n * max / sum : 1.0;
}

/* The measured part (collective): gammas, union skew, union block density and skew. */
static zen_status deep_profile(zen_sparse_ctx *ctx, const zen_coll *cc, const prof_geom *g,
                               const uint64_t *recs, zen_sparse_profile *p)
{
    zen_comm *comm = ctx->comm;
    const zen_coo *c = ctx->local;
    int n = g->n, stride = 2 * n + 3;
    uint64_t max_nnz = 0;
    for (int r = 0; r < n; r++)
        if (recs[(size_t)r * stride + 2] > max_nnz)
            max_nnz = recs[(size_t)r * stride + 2];
    long samples = zen_param_long("SPARSE_PROFILE_SAMPLES");
    if (samples < 16)
        samples = 16;
    /* keep idx when hash < limit; limit = 2^64 * min(1, samples / max_nnz) */
    uint64_t limit = UINT64_MAX;
    if (max_nnz > (uint64_t)samples)
        limit = (uint64_t)((double)UINT64_MAX * ((double)samples / (double)max_nnz));
    uint64_t seed = zen_comm_seeds(comm)[3] ^ 0x5a17e5u;
    zen_status st = ZEN_OK;
    uint32_t *mine = zen_malloc_array(c->nnz ? c->nnz : 1, sizeof *mine);
    size_t *bytes = zen_malloc_array((size_t)n, sizeof *bytes);
    size_t *off = zen_malloc_array((size_t)n, sizeof *off);
    uint8_t *all = NULL, *bits = NULL, *allbits = NULL;
    uint32_t *tmp = NULL;
    if (!mine || !bytes || !off) {
        st = zen_fail(comm, ZEN_ENOMEM, "sparse profile: out of memory");
        goto out;
    }
    size_t k = 0;
    for (size_t i = 0; i < c->nnz; i++)
        if (zen_hash64(c->idx[i], seed) <= limit)
            mine[k++] = c->idx[i];
    st = zen_xchg_allgatherv(comm, cc, mine, k * sizeof *mine, c->rows * sizeof(uint32_t), &all,
                             bytes, off);
    if (st != ZEN_OK)
        goto out;
    size_t total = 0;
    for (int r = 0; r < n; r++) {
        if (bytes[r] % sizeof(uint32_t)) {
            st = zen_fail(comm, ZEN_EPROTO, "sparse profile: rank %d sent %zu sample bytes", r,
                          bytes[r]);
            goto out;
        }
        total += bytes[r] / sizeof(uint32_t);
    }
    if (!(tmp = zen_malloc_array(total ? total : 1, sizeof *tmp))) {
        st = zen_fail(comm, ZEN_ENOMEM, "sparse profile: out of memory for %zu samples", total);
        goto out;
    }
    double single = (double)total / n;
    p->levels = 0;
    for (int i = 0; i < ZEN_COST_MAX_LEVELS && (1L << i) <= n; i++) {
        int kk = 1 << i, groups = n / kk;
        double sum = 0;
        for (int gi = 0; gi < groups; gi++)
            sum += (double)union_size(all, bytes, off, gi * kk, gi * kk + kk, tmp);
        p->gamma[p->levels++] = single > 0 && i > 0 ? (sum / groups) / single : 1.0;
    }
    size_t u = union_size(all, bytes, off, 0, n, tmp);
    p->gamma_n = single > 0 ? (double)u / single : 1.0;
    double *load = zen_calloc((size_t)n, sizeof *load);
    if (!load) {
        st = zen_fail(comm, ZEN_ENOMEM, "sparse profile: out of memory");
        goto out;
    }
    for (size_t i = 0; i < u; i++) {
        /* owner range of row tmp[i]: the last j with lo(j) <= row */
        int j = (int)((uint64_t)tmp[i] * (uint64_t)n / g->rows);
        while (j + 1 < n && zen_range_lo(g->rows, n, j + 1) <= tmp[i])
            j++;
        while (j > 0 && zen_range_lo(g->rows, n, j) > tmp[i])
            j--;
        load[j] += 1;
    }
    p->skew_n = skew_of(load, n);

    if (g->nblocks <= MAX_BITMAP_BLOCKS) {
        size_t nbytes = (size_t)(g->nblocks + 7) / 8;
        bits = zen_calloc(nbytes ? nbytes : 1, 1);
        if (!bits) {
            zen_free(load);
            st = zen_fail(comm, ZEN_ENOMEM, "sparse profile: out of memory");
            goto out;
        }
        for (size_t i = 0; i < c->nnz; i++) {
            uint64_t b = c->idx[i] / g->brows;
            bits[b / 8] |= (uint8_t)(1u << (b % 8));
        }
        st = zen_xchg_allgatherv(comm, cc, bits, nbytes, nbytes, &allbits, bytes, off);
        for (int r = 0; r < n && st == ZEN_OK; r++)
            if (bytes[r] != nbytes)
                st = zen_fail(comm, ZEN_EPROTO, "sparse profile: rank %d sent a %zu-byte bitmap", r,
                              bytes[r]);
        if (st == ZEN_OK) {
            memset(load, 0, (size_t)n * sizeof *load);
            double ones = 0;
            int j = 0;
            for (uint64_t b = 0; b < g->nblocks; b++) {
                int set = 0;
                for (int r = 0; r < n && !set; r++)
                    set = (allbits[off[r] + b / 8] >> (b % 8)) & 1;
                while (j + 1 < n && zen_range_lo(g->nblocks, n, j + 1) <= b)
                    j++;
                if (set) {
                    ones += 1;
                    load[j] += 1;
                }
            }
            p->block_density_n = ones / (double)g->nblocks;
            p->block_skew_n = skew_of(load, n);
        }
    }
    zen_free(load);
out:
    zen_free(mine);
    zen_free(bytes);
    zen_free(off);
    zen_free(all);
    zen_free(bits);
    zen_free(allbits);
    zen_free(tmp);
    return st;
}

static uint64_t slot_key(const zen_sparse_ctx *ctx)
{
    const zen_comm *comm = ctx->comm;
    const char *key = ctx->opts->key;
    uint64_t h = zen_fnv1a(key, strlen(key), zen_comm_seeds(comm)[0]);
    h = zen_hash64(h, ((uint64_t)comm->ctx << 32) | (uint32_t)comm->rank);
    h = zen_hash64(h, ctx->local->rows * 131 + ctx->local->width);
    h = zen_hash64(h, (uint64_t)comm->size);
    return h | 1; /* 0 marks a free slot */
}

/*
 * Every rank's fixed-size record to every rank in one round of direct messages: the records are
 * a few hundred bytes, so one latency beats a ring's n-1 (this runs on every AUTO call).
 * zen_coll_wait checks each record's exact length, so a disagreeing peer is ZEN_EPROTO.
 */
static zen_status exchange_records(zen_comm *comm, const zen_coll *cc, const uint64_t *rec,
                                   uint64_t *recs, size_t rb)
{
    int n = comm->size, me = comm->rank;
    zen_treq **reqs = zen_calloc(2 * (size_t)n, sizeof *reqs);
    if (!reqs)
        return zen_fail(comm, ZEN_ENOMEM, "sparse profile: out of memory for %d peers", n);
    memcpy((char *)recs + (size_t)me * rb, rec, rb);
    zen_status st = ZEN_OK;
    for (int p = 0; p < n && st == ZEN_OK; p++)
        if (p != me)
            st = zen_coll_irecv(comm, cc, p, (char *)recs + (size_t)p * rb, rb, &reqs[p]);
    for (int d = 1; d < n && st == ZEN_OK; d++) {
        int p = (me + d) % n;
        st = zen_coll_isend(comm, cc, p, rec, rb, &reqs[n + p]);
    }
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        zen_status s1 = ZEN_OK, s2 = ZEN_OK;
        if (st == ZEN_OK) {
            s1 = zen_coll_wait(comm, cc, reqs[n + p], p, SIZE_MAX, NULL);
            s2 = zen_coll_wait(comm, cc, reqs[p], p, rb, NULL);
        } else {
            zen_coll_req_drop(comm, reqs[n + p]);
            zen_coll_req_drop(comm, reqs[p]);
        }
        if (st == ZEN_OK)
            st = s1 != ZEN_OK ? s1 : s2;
    }
    zen_free(reqs);
    return st;
}

zen_status zen_sparse_choose(zen_sparse_ctx *ctx, zen_sparse_scheme *scheme)
{
    zen_comm *comm = ctx->comm;
    const zen_coo *c = ctx->local;
    int n = comm->size;
    prof_geom g;
    g.n = n;
    g.rows = c->rows;
    g.brows = zen_cost_block_rows(c->width, zen_param_long("SPARSE_BLOCK_SIZE"));
    if (g.brows > c->rows && c->rows > 0)
        g.brows = c->rows;
    g.nblocks = (c->rows + g.brows - 1) / g.brows;
    int keyed = ctx->opts && ctx->opts->key && n > 1;
    profile_slot slot;
    memset(&slot, 0, sizeof slot);
    int have = keyed && slot_get(slot_key(ctx), &slot);
    long period = zen_param_long("SPARSE_PROFILE_PERIOD");
    if (period < 1)
        period = 1;
    uint64_t need = keyed && (!have || slot.calls >= (uint64_t)period);
    uint64_t flags = need | (uint64_t)keyed << 1;

    int stride = 2 * n + 3;
    uint64_t *recs = zen_malloc_array((size_t)stride * (size_t)n, sizeof *recs);
    uint64_t *rec = zen_malloc_array((size_t)stride, sizeof *rec);
    double *load = zen_malloc_array((size_t)n, sizeof *load);
    zen_status st = ZEN_OK;
    if (!recs || !rec || !load) {
        st = zen_fail(comm, ZEN_ENOMEM, "sparse profile: out of memory for %d ranks", n);
        goto out;
    }
    local_record(c, &g, have ? slot.version : 0, flags, rec);
    if (n == 1) {
        memcpy(recs, rec, (size_t)stride * sizeof *rec);
    } else {
        zen_coll cc;
        if ((st = zen_coll_begin(comm, "sparse_profile", &cc)) != ZEN_OK)
            goto out;
        st = exchange_records(comm, &cc, rec, recs, (size_t)stride * sizeof *rec);
        /* Re-measure when any rank asks or the ranks' versions differ, and only if every rank
         * passed a key (a key on some ranks only must not make some of them measure alone). */
        int deep = 0, all_keyed = 1;
        uint64_t vmax = 0;
        for (int r = 0; r < n && st == ZEN_OK; r++) {
            const uint64_t *x = recs + (size_t)r * stride;
            deep |= (x[1] & 1) != 0 || x[0] != recs[0];
            all_keyed &= (x[1] & 2) != 0;
            if (x[0] > vmax)
                vmax = x[0];
        }
        if (!all_keyed) {
            deep = 0;
            have = 0; /* and decide from this call's records alone, like every other rank */
        }
        zen_sparse_profile deep_p;
        if (st == ZEN_OK && deep) {
            zen_sparse_profile_model(&deep_p, n, 0, ZEN_OVERLAP_RANDOM);
            st = deep_profile(ctx, &cc, &g, recs, &deep_p);
            if (st == ZEN_OK) {
                slot.key = slot_key(ctx);
                slot.version = vmax + 1;
                slot.calls = 0;
                slot.prof = deep_p;
                have = 1;
            }
        }
        st = zen_coll_end(comm, &cc, st);
        if (st != ZEN_OK)
            goto out;
    }

    /* Density, skew and local block statistics: exact, from this call's records. */
    zen_sparse_profile p;
    double nnz_total = 0, blocks_total = 0;
    for (int j = 0; j < n; j++)
        load[j] = 0;
    for (int r = 0; r < n; r++)
        nnz_total += (double)recs[(size_t)r * stride + 2];
    double density = c->rows ? nnz_total / n / (double)c->rows : 0;
    if (have)
        p = slot.prof;
    else
        zen_sparse_profile_model(&p, n, density, ZEN_OVERLAP_RANDOM);
    p.density = density;
    for (int r = 0; r < n; r++)
        for (int j = 0; j < n; j++)
            load[j] += (double)recs[(size_t)r * stride + 3 + j];
    p.skew = skew_of(load, n);
    if (!have)
        p.skew_n = p.skew;
    for (int j = 0; j < n; j++)
        load[j] = 0;
    for (int r = 0; r < n; r++)
        for (int j = 0; j < n; j++) {
            load[j] += (double)recs[(size_t)r * stride + 3 + n + j];
            blocks_total += (double)recs[(size_t)r * stride + 3 + n + j];
        }
    p.block_density = g.nblocks ? blocks_total / n / (double)g.nblocks : 0;
    p.block_skew = skew_of(load, n);
    if (n == 1) {
        p.levels = 1;
        p.gamma[0] = 1;
        p.gamma_n = 1;
    }
    if (keyed && have) {
        slot.calls++;
        slot_put(&slot);
    }

    zen_net_model net;
    zen_net_model_for_ranks(zen_comm_transport(comm), n, &net);
    double pred[ZEN_SPARSE_SCHEME_COUNT];
    /* p.dense_output stays 0: with the dense-result work counted, the model prefers ALLGATHER's
     * direct scatter on inproc, measured 2.5-3x slower than HIERARCHICAL there (docs/benchmarks.md,
     * "AUTO and the output kind"); until the model explains that, AUTO predicts a sparse result. */
    zen_sparse_predict(n, c->rows, c->width, &p, &net, zen_param_long("SPARSE_BLOCK_SIZE"), pred);
    *scheme = zen_sparse_cheapest(pred);
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        ctx->stats->predicted_s[s] = pred[s];
    ctx->stats->density = p.density;
    ctx->stats->gamma_n = p.gamma_n;
    ctx->stats->skew = p.skew;
out:
    zen_free(recs);
    zen_free(rec);
    zen_free(load);
    return st;
}
