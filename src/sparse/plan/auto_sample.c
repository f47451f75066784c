/*
 * AUTO's measured profile (the expensive part, on a key's first call and every profile period):
 * densification ratios gamma^(2^i) and gamma^n from hash-sampled index sets, the summed tensor's
 * skew, and its block density and skew from per-rank block bitmaps (see auto_records.c for when).
 */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/hash.h"
#include "common/tunables.h"
#include "sparse/plan/auto_internal.h"

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

double zen__auto_skew(const double *load, int n)
{
    double sum = 0, max = 0;
    for (int j = 0; j < n; j++) {
        sum += load[j];
        if (load[j] > max)
            max = load[j];
    }
    return sum > 0 ? n * max / sum : 1.0;
}

/* The owner range of row x among n even ranges: the last j with lo(j) <= x. */
static int range_of(uint64_t x, const prof_geom *g)
{
    int n = g->n, j = (int)(x * (uint64_t)n / g->rows);
    while (j + 1 < n && zen_range_lo(g->rows, n, j + 1) <= x)
        j++;
    while (j > 0 && zen_range_lo(g->rows, n, j) > x)
        j--;
    return j;
}

/* This rank's indices whose hash falls below a threshold every rank shares, so that about
 * ZEN_SPARSE_PROFILE_SAMPLES of the largest rank's are kept; returns their count. */
static size_t sample_rows(zen_comm *comm, const zen_coo *c, const uint64_t *recs, int n,
                          uint32_t *mine)
{
    size_t stride = REC_WORDS(n);
    uint64_t max_nnz = 0;
    for (int r = 0; r < n; r++)
        if (recs[(size_t)r * stride + 2] > max_nnz)
            max_nnz = recs[(size_t)r * stride + 2];
    long samples = zen__param_long("SPARSE_PROFILE_SAMPLES");
    if (samples < 16)
        samples = 16;
    /* keep idx when hash < limit; limit = 2^64 * min(1, samples / max_nnz) */
    uint64_t limit = UINT64_MAX;
    if (max_nnz > (uint64_t)samples)
        limit = (uint64_t)((double)UINT64_MAX * ((double)samples / (double)max_nnz));
    uint64_t seed = zen__comm_seeds(comm)[3] ^ 0x5a17e5u;
    size_t k = 0;
    for (size_t i = 0; i < c->nnz; i++)
        if (zen_hash64(c->idx[i], seed) <= limit)
            mine[k++] = c->idx[i];
    return k;
}

/* gamma^(2^i) and gamma^n from the allgathered samples (all, bytes, off), and the skew of the
 * union over the row ranges; tmp (room for every sample) is scratch. */
static void sample_ratios(const uint8_t *all, const size_t *bytes, const size_t *off,
                          const prof_geom *g, uint32_t *tmp, double *load, zen_sparse_profile *p)
{
    int n = g->n;
    size_t total = 0;
    for (int r = 0; r < n; r++)
        total += bytes[r] / sizeof(uint32_t);
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
    memset(load, 0, (size_t)n * sizeof *load);
    for (size_t i = 0; i < u; i++)
        load[range_of(tmp[i], g)] += 1;
    p->skew_n = zen__auto_skew(load, n);
}

/* Block density and block skew of the sum, from an allgather of per-rank block bitmaps. */
static zen_status block_ratios(zen_sparse_ctx *ctx, const zen_coll *cc, const prof_geom *g,
                               size_t *bytes, size_t *off, double *load, zen_sparse_profile *p)
{
    zen_comm *comm = ctx->comm;
    const zen_coo *c = ctx->local;
    int n = g->n;
    size_t nbytes = (size_t)(g->nblocks + 7) / 8;
    uint8_t *bits = zen__calloc(nbytes ? nbytes : 1, 1), *allbits = NULL;
    if (!bits)
        return zen__fail(comm, ZEN_ENOMEM, "sparse profile: out of memory");
    for (size_t i = 0; i < c->nnz; i++) {
        uint64_t b = c->idx[i] / g->brows;
        bits[b / 8] |= (uint8_t)(1u << (b % 8));
    }
    zen_status st = zen__xchg_allgatherv(comm, cc, bits, nbytes, nbytes, &allbits, bytes, off);
    for (int r = 0; r < n && st == ZEN_OK; r++)
        if (bytes[r] != nbytes)
            st = zen__fail(comm, ZEN_EPROTO, "sparse profile: rank %d sent a %zu-byte bitmap", r,
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
            ones += set;
            load[j] += set;
        }
        p->block_density_n = ones / (double)g->nblocks;
        p->block_skew_n = zen__auto_skew(load, n);
    }
    zen__free(bits);
    zen__free(allbits);
    return st;
}

/* The measured part (collective): gammas, union skew, union block density and skew. */
zen_status zen__auto_deep_profile(zen_sparse_ctx *ctx, const zen_coll *cc, const prof_geom *g,
                                  const uint64_t *recs, zen_sparse_profile *p)
{
    zen_comm *comm = ctx->comm;
    const zen_coo *c = ctx->local;
    int n = g->n;
    uint32_t *mine = zen__malloc_array(c->nnz ? c->nnz : 1, sizeof *mine);
    size_t *bytes = zen__malloc_array((size_t)n, sizeof *bytes);
    size_t *off = zen__malloc_array((size_t)n, sizeof *off);
    double *load = zen__calloc((size_t)n, sizeof *load);
    uint8_t *all = NULL;
    uint32_t *tmp = NULL;
    zen_status st = ZEN_OK;
    if (!mine || !bytes || !off || !load) {
        st = zen__fail(comm, ZEN_ENOMEM, "sparse profile: out of memory");
        goto out;
    }
    size_t k = sample_rows(comm, c, recs, n, mine);
    st = zen__xchg_allgatherv(comm, cc, mine, k * sizeof *mine, c->rows * sizeof(uint32_t), &all,
                              bytes, off);
    size_t total = 0;
    for (int r = 0; r < n && st == ZEN_OK; r++) {
        if (bytes[r] % sizeof(uint32_t))
            st = zen__fail(comm, ZEN_EPROTO, "sparse profile: rank %d sent %zu sample bytes", r,
                           bytes[r]);
        total += bytes[r] / sizeof(uint32_t);
    }
    if (st == ZEN_OK && !(tmp = zen__malloc_array(total ? total : 1, sizeof *tmp)))
        st = zen__fail(comm, ZEN_ENOMEM, "sparse profile: out of memory for %zu samples", total);
    if (st == ZEN_OK)
        sample_ratios(all, bytes, off, g, tmp, load, p);
    if (st == ZEN_OK && g->nblocks <= MAX_BITMAP_BLOCKS)
        st = block_ratios(ctx, cc, g, bytes, off, load, p);
out:
    zen__free(mine);
    zen__free(bytes);
    zen__free(off);
    zen__free(load);
    zen__free(all);
    zen__free(tmp);
    return st;
}
