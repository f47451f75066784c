/*
 * AUTO: the sparsity profile and the choice of a scheme (zen__sparse_choose, auto.h).
 *
 * Every AUTO call on n > 1 ranks allgathers a small record per rank (2n + 3 words): its profile
 * version for this tensor, whether it wants a re-measure, its non-zero rows and their counts over
 * the n even row ranges and over the n even block ranges. That alone gives the exact density and
 * skew. When the call names a recurring tensor (opts->key) the ranks keep a profile for it in a
 * small process-wide table, and on the first call, every ZEN_SPARSE_PROFILE_PERIOD calls (or
 * more: bookkeeping_period), or whenever the ranks' versions disagree (a rank lost its entry),
 * they measure the rest:
 *  - densification ratios gamma^(2^i), i = 0..log2 n, and gamma^n, from hash-sampled index sets:
 *    every rank keeps the indices whose hash falls below a common threshold (about
 *    ZEN_SPARSE_PROFILE_SAMPLES per rank), allgathers them, and unions them over the aligned
 *    groups of 2, 4, ... ranks. Sampling by a hash shared by all ranks keeps the same rows on
 *    every rank, so |union of samples| / |sample| estimates |union| / |set|.
 *  - the summed tensor's skew (from the union sample) and its block density and block skew (from
 *    an allgather of per-rank block bitmaps, when there are at most 2^20 blocks).
 * Without a key the ratios come from the random-overlap model, the paper's pessimistic case.
 * Every input of the decision is identical on all ranks, so all ranks choose the same scheme.
 *
 * This file: the records and their exchange; auto_sample.c measures, auto_decide.c decides.
 */
#include <string.h>

#include "common/alloc.h"
#include "common/tunables.h"
#include "sparse/plan/auto_internal.h"

/* The record this rank contributes: version, flags (bit 0: re-measure, bit 1: keyed), nnz, n range
 * counts, n block-range counts (the last two words: report_last). */
static void local_record(const zen_coo *c, const prof_geom *g, uint64_t version, uint64_t need,
                         uint64_t *rec)
{
    int n = g->n;
    rec[0] = version;
    rec[1] = need;
    rec[2] = c->nnz;
    for (int j = 0; j < n; j++) {
        size_t lo = zen__lower_bound_u32(c->idx, c->nnz, zen_range_lo(g->rows, n, j));
        size_t hi = zen__lower_bound_u32(c->idx, c->nnz, zen_range_lo(g->rows, n, j + 1));
        rec[3 + j] = hi - lo;
        uint64_t blo = zen_range_lo(g->nblocks, n, j) * g->brows;
        uint64_t bhi = zen_range_lo(g->nblocks, n, j + 1) * g->brows;
        size_t a = zen__lower_bound_u32(c->idx, c->nnz, blo);
        size_t b = zen__lower_bound_u32(c->idx, c->nnz, bhi);
        uint64_t m = 0, last = UINT64_MAX;
        for (size_t i = a; i < b; i++)
            if (c->idx[i] / g->brows != last) {
                last = c->idx[i] / g->brows;
                m++;
            }
        rec[3 + n + j] = m;
    }
}

/*
 * Every rank's fixed-size record to every rank in one round of direct messages: the records are
 * a few hundred bytes, so one latency beats a ring's n-1 (this runs on every AUTO call).
 * zen__coll_wait checks each record's exact length, so a disagreeing peer is ZEN_EPROTO.
 */
static zen_status exchange_records(zen_comm *comm, const zen_coll *cc, const uint64_t *rec,
                                   uint64_t *recs, size_t rb)
{
    int n = comm->size, me = comm->rank;
    zen_treq **reqs = zen__calloc(2 * (size_t)n, sizeof *reqs);
    if (!reqs)
        return zen__fail(comm, ZEN_ENOMEM, "sparse profile: out of memory for %d peers", n);
    memcpy((char *)recs + (size_t)me * rb, rec, rb);
    zen_status st = ZEN_OK;
    for (int p = 0; p < n && st == ZEN_OK; p++)
        if (p != me)
            st = zen__coll_irecv(comm, cc, p, (char *)recs + (size_t)p * rb, rb, &reqs[p]);
    for (int d = 1; d < n && st == ZEN_OK; d++) {
        int p = (me + d) % n;
        st = zen__coll_isend(comm, cc, p, rec, rb, &reqs[n + p]);
    }
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        zen_status s1 = ZEN_OK, s2 = ZEN_OK;
        if (st == ZEN_OK) {
            s1 = zen__coll_wait(comm, cc, reqs[n + p], p, SIZE_MAX, NULL);
            s2 = zen__coll_wait(comm, cc, reqs[p], p, rb, NULL);
        } else {
            zen__coll_req_drop(comm, reqs[n + p]);
            zen__coll_req_drop(comm, reqs[p]);
        }
        if (st == ZEN_OK)
            st = s1 != ZEN_OK ? s1 : s2;
    }
    zen__free(reqs);
    return st;
}

void zen__auto_geometry(const zen_coo *c, int n, prof_geom *g)
{
    g->n = n;
    g->rows = c->rows;
    g->brows = zen__cost_block_rows(c->width, zen__param_long("SPARSE_BLOCK_SIZE"));
    if (g->brows > c->rows && c->rows > 0)
        g->brows = c->rows;
    g->nblocks = (c->rows + g->brows - 1) / g->brows;
}

/* This rank's record, with the last keyed call's scheme and time for the online correction. */
void zen__auto_own_record(const zen_sparse_ctx *ctx, choice *ch, uint64_t *rec)
{
    long period = ch->have && ch->slot.profile_every > 0 ? ch->slot.profile_every
                                                         : zen__param_long("SPARSE_PROFILE_PERIOD");
    if (period < 1)
        period = 1;
    uint64_t need = ch->keyed && (!ch->have || ch->slot.calls >= (uint64_t)period);
    local_record(ctx->local, &ch->g, ch->have ? ch->slot.version : 0,
                 need | (uint64_t)ch->keyed << 1, rec);
    int last = ch->have ? ch->slot.tune.last : -1;
    double coal = ctx->stats->phase_us[ZEN_PHASE_PARTITION] * 1e-6; /* api.c timed it */
    uint64_t *tail = rec + ch->stride - REC_TAIL;
    tail[0] = (uint64_t)(last + 1);
    memcpy(&tail[1], &ch->slot.pending_s, sizeof(double));
    memcpy(&tail[2], &ch->slot.xchg_s, sizeof(double));
    memcpy(&tail[3], &coal, sizeof(double));
    memcpy(&tail[4], &ch->slot.own_full_s, sizeof(double));
    memcpy(&tail[5], &ch->slot.own_deep_s, sizeof(double));
}

static double max_double_word(double m, const uint64_t *word)
{
    double t;
    memcpy(&t, word, sizeof t);
    return t > m ? t : m;
}

/* What the records say about the last call and whether the ranks' profiles still agree. */
static void read_records(choice *ch, int n, int *deep, int *all_keyed, uint64_t *vmax)
{
    *deep = 0;
    *all_keyed = 1;
    *vmax = 0;
    ch->fresh = !ch->have;
    ch->last_agreed = 1;
    ch->last_s = ch->last_max = ch->xchg_s = ch->full_s = ch->deep_s = ch->coal_s = ch->nnz_max = 0;
    double *last = zen__malloc_array((size_t)n, sizeof *last);
    for (int r = 0; r < n; r++) {
        const uint64_t *x = ch->recs + (size_t)r * ch->stride;
        *deep |= (x[1] & 1) != 0 || x[0] != ch->recs[0];
        ch->fresh |= x[0] != ch->recs[0];
        *all_keyed &= (x[1] & 2) != 0;
        *vmax = x[0] > *vmax ? x[0] : *vmax;
        const uint64_t *tail = x + ch->stride - REC_TAIL, *tail0 = ch->recs + ch->stride - REC_TAIL;
        ch->last_agreed &= tail[0] != 0 && tail[0] == tail0[0];
        if (last)
            memcpy(&last[r], &tail[1], sizeof *last);
        ch->last_max = max_double_word(ch->last_max, &tail[1]);
        ch->xchg_s = max_double_word(ch->xchg_s, &tail[2]);
        ch->full_s = max_double_word(ch->full_s, &tail[4]);
        ch->deep_s = max_double_word(ch->deep_s, &tail[5]);
        ch->coal_s = max_double_word(ch->coal_s, &tail[3]);
        ch->nnz_max = (double)x[2] > ch->nnz_max ? (double)x[2] : ch->nnz_max;
    }
    /* out of memory: the slowest rank's time */
    ch->last_s = last ? zen__auto_tune_call_time(last, (size_t)n) : ch->last_max;
    zen__free(last);
}

/*
 * The collective part: every rank's record to every rank, then, when a rank asks or the ranks'
 * versions differ, the measured profile. Re-measure only if every rank passed a key (a key on
 * some ranks only must not make some of them measure alone).
 */
zen_status zen__auto_gather_profile(zen_sparse_ctx *ctx, choice *ch, const uint64_t *rec)
{
    zen_comm *comm = ctx->comm;
    int n = comm->size, deep, all_keyed;
    uint64_t vmax;
    zen_coll cc;
    zen_status st = zen__coll_begin(comm, "sparse_profile", &cc);
    if (st != ZEN_OK)
        return st;
    int64_t t0 = zen_now_ns();
    st = exchange_records(comm, &cc, rec, ch->recs, ch->stride * sizeof *rec);
    ch->slot.xchg_s = zen_us_between(t0, zen_now_ns()) * 1e-6; /* reported on the next call */
    if (st == ZEN_OK)
        read_records(ch, n, &deep, &all_keyed, &vmax);
    if (st == ZEN_OK && !all_keyed) {
        deep = 0;
        ch->have = 0; /* and decide from this call's records alone, like every other rank */
    }
    /* the mean input rows over the ranks (agreed) against the regime's (agreed): a new regime
     * measures its profile now, not a profile period later */
    if (st == ZEN_OK && ch->have && !ch->fresh && ch->slot.regime_density > 0) {
        double total = 0;
        for (int r = 0; r < n; r++)
            total += (double)ch->recs[(size_t)r * ch->stride + 2];
        ch->regime = zen__auto_regime_moved(total / n, ch->slot.regime_density * (double)ch->g.rows,
                                            zen__param_double("SPARSE_AUTO_REGIME"));
        deep |= ch->regime;
    }
    if (st == ZEN_OK && deep) {
        zen_sparse_profile deep_p;
        zen__sparse_profile_model(&deep_p, n, 0, ZEN_OVERLAP_RANDOM);
        int64_t t1 = zen_now_ns();
        st = zen__auto_deep_profile(ctx, &cc, &ch->g, ch->recs, &deep_p);
        ch->deep_now_s = zen_us_between(t1, zen_now_ns()) * 1e-6;
        /* a key's first call is slow in every part (first touches), so not a measure */
        ch->slot.own_deep_s = ch->have ? ch->deep_now_s : 0;
        if (st == ZEN_OK) {
            ch->slot.key = zen__auto_slot_key(ctx);
            ch->slot.version = vmax + 1;
            ch->slot.calls = 0;
            ch->slot.prof = deep_p;
            ch->have = 1;
        }
    }
    return zen__coll_end(comm, &cc, st);
}

/* Density, skew and local block statistics: exact, from this call's records; the measured
 * ratios from the slot, else the random-overlap model. */
void zen__auto_summarize(const choice *ch, int n, double *load, zen_sparse_profile *p)
{
    double nnz_total = 0, blocks_total = 0;
    for (int r = 0; r < n; r++)
        nnz_total += (double)ch->recs[(size_t)r * ch->stride + 2];
    double density = ch->g.rows ? nnz_total / n / (double)ch->g.rows : 0;
    if (ch->have)
        *p = ch->slot.prof;
    else
        zen__sparse_profile_model(p, n, density, ZEN_OVERLAP_RANDOM);
    p->density = density;
    for (int part = 0; part < 2; part++) { /* row ranges, then block ranges */
        for (int j = 0; j < n; j++)
            load[j] = 0;
        for (int r = 0; r < n; r++)
            for (int j = 0; j < n; j++)
                load[j] += (double)ch->recs[(size_t)r * ch->stride + 3 + (size_t)part * n + j];
        if (part == 0) {
            p->skew = zen__auto_skew(load, n);
            continue;
        }
        for (int j = 0; j < n; j++)
            blocks_total += load[j];
        p->block_density = ch->g.nblocks ? blocks_total / n / (double)ch->g.nblocks : 0;
        p->block_skew = zen__auto_skew(load, n);
    }
    if (!ch->have)
        p->skew_n = p->skew;
    if (n == 1) {
        p->levels = 1;
        p->gamma[0] = 1;
        p->gamma_n = 1;
    }
}
