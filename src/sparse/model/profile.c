/*
 * AUTO: the sparsity profile and the choice of a scheme (zen__sparse_choose).
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
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/hash.h"
#include "common/tunables.h"
#include "sparse/model/auto_tune.h"
#include "sparse/model/cost.h"
#include "sparse/wire/xchg.h"

#define PROFILE_SLOTS     256
#define MAX_BITMAP_BLOCKS (1u << 20)

typedef struct profile_slot {
    uint64_t key; /* 0: free */
    uint64_t version;
    uint64_t calls;
    uint64_t tick;
    uint64_t digest; /* slot_digest of the agreed state, set by slot_put */
    zen_sparse_profile prof;
    zen_auto_tune tune;  /* online correction of the choice (auto_tune.h) */
    double pending_s;    /* this rank's time of tune.last, reported on the next call */
    double xchg_s;       /* this rank's time of the last record exchange */
    double lat_s;        /* measured step latency (EMA, agreed), 0: not yet */
    double cpu_scale;    /* measured / predicted coalesce time (EMA, agreed), 0: not yet */
    double spread;       /* a call's slowest-rank / median-rank time (EMA, agreed), 0: not yet */
    uint64_t since_full; /* calls decided without a record exchange since the last one */
    /* this rank's seconds of its last record exchange and decision (a re-measure apart) and of
     * its last profile re-measure, reported at the next exchange, and the key's calls' seconds
     * (a moving average of the agreed times): what spaces the two (bookkeeping_period) */
    double own_full_s, own_deep_s, call_s;
    double pred[ZEN_SPARSE_SCHEME_COUNT];  /* the tuner's predictions at the last exchange */
    double model[ZEN_SPARSE_SCHEME_COUNT]; /* the calibrated model's, for the statistics */
    double density, gamma_n, skew;         /* the statistics of the last exchange */
    /* the tunables the calls between exchanges decide with, read at the last exchange: a read
     * is a getenv and a parse, and the calls between exchanges read a dozen each */
    zen_auto_tune_params tp;
    /* calls between record exchanges and between profile re-measures (>= 1): at least
     * ZEN_SPARSE_AUTO_RECHECK and ZEN_SPARSE_PROFILE_PERIOD, spaced by bookkeeping_period */
    long recheck_every, profile_every;
    int calibrate_online; /* ZEN_SPARSE_CALIBRATE_ONLINE != 0 */
} profile_slot;

static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static profile_slot slots[PROFILE_SLOTS];
static uint64_t slot_tick;

/* The slot of key, or NULL; the caller holds slot_lock. */
static profile_slot *slot_find(uint64_t key)
{
    for (int i = 0; i < PROFILE_SLOTS; i++)
        if (slots[i].key == key) {
            slots[i].tick = ++slot_tick;
            return &slots[i];
        }
    return NULL;
}

static int slot_get(uint64_t key, profile_slot *out)
{
    pthread_mutex_lock(&slot_lock);
    profile_slot *sl = slot_find(key);
    if (sl)
        *out = *sl;
    pthread_mutex_unlock(&slot_lock);
    return sl != NULL;
}

/* What every call reads before its agreement (zen__sparse_auto_state), without copying the slot:
 * its digest and this rank's time of the last call. */
static int slot_peek(uint64_t key, uint64_t *digest, double *pending_s)
{
    pthread_mutex_lock(&slot_lock);
    profile_slot *sl = slot_find(key);
    if (sl) {
        *digest = sl->digest;
        *pending_s = sl->pending_s;
    }
    pthread_mutex_unlock(&slot_lock);
    return sl != NULL;
}

/* This rank's time of the call the slot's tuner chose last, reported on the next call. */
static void slot_note_time(uint64_t key, double seconds)
{
    pthread_mutex_lock(&slot_lock);
    profile_slot *sl = slot_find(key);
    if (sl && sl->tune.last >= 0)
        sl->pending_s = seconds;
    pthread_mutex_unlock(&slot_lock);
}

static uint64_t slot_digest(const profile_slot *sl);

/* Insert or update, with the state's digest; evicts the least recently used slot when full. */
static void slot_put(const profile_slot *in)
{
    uint64_t digest = slot_digest(in); /* outside the lock: the other ranks' threads share it */
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
    slots[victim].digest = digest;
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

/* Words of a rank's record: version, flags, nnz, n range counts, n block-range counts, then the
 * REC_TAIL words of the online calibration: the scheme of its last keyed call + 1 (0: none), that
 * call's seconds, the seconds of its last record exchange and of this call's coalesce, and the
 * seconds of its last exchange with the decision and of its last profile re-measure (doubles). */
#define REC_TAIL     6
#define REC_WORDS(n) (2 * (size_t)(n) + 3 + REC_TAIL)

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
    p->skew_n = skew_of(load, n);
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
        p->block_skew_n = skew_of(load, n);
    }
    zen__free(bits);
    zen__free(allbits);
    return st;
}

/* The measured part (collective): gammas, union skew, union block density and skew. */
static zen_status deep_profile(zen_sparse_ctx *ctx, const zen_coll *cc, const prof_geom *g,
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

static uint64_t slot_key(const zen_sparse_ctx *ctx)
{
    const zen_comm *comm = ctx->comm;
    const char *key = ctx->opts->key;
    uint64_t h = zen__fnv1a(key, strlen(key), zen__comm_seeds(comm)[0]);
    h = zen_hash64(h, ((uint64_t)comm->ctx << 32) | (uint32_t)comm->rank);
    h = zen_hash64(h, ctx->local->rows * 131 + ctx->local->width);
    h = zen_hash64(h, (uint64_t)comm->size);
    return h | 1; /* 0 marks a free slot */
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

/* One AUTO decision in progress. */
typedef struct choice {
    prof_geom g;
    int keyed; /* this call names a recurring tensor (and n > 1) */
    int have;  /* slot holds a measured profile every rank shares */
    int fresh; /* the slot is new on some rank: corrections start over */
    profile_slot slot;
    size_t stride;     /* REC_WORDS(n) */
    uint64_t *recs;    /* n records */
    int last_agreed;   /* every rank reports the same last scheme */
    double last_s;     /* and its time over the ranks (zen__auto_tune_call_time) */
    double last_max;   /* and the slowest rank's */
    double xchg_s;     /* the last record exchange, the maximum over ranks */
    double full_s;     /* the last exchange with its decision, the maximum over ranks */
    double deep_s;     /* the last profile re-measure, the maximum over ranks */
    double coal_s;     /* this call's coalesce, the maximum over ranks */
    double nnz_max;    /* the largest coalesced input */
    double deep_now_s; /* this call's profile re-measure on this rank, 0: none */
} choice;

static void geometry(const zen_coo *c, int n, prof_geom *g)
{
    g->n = n;
    g->rows = c->rows;
    g->brows = zen__cost_block_rows(c->width, zen__param_long("SPARSE_BLOCK_SIZE"));
    if (g->brows > c->rows && c->rows > 0)
        g->brows = c->rows;
    g->nblocks = (c->rows + g->brows - 1) / g->brows;
}

/* This rank's record, with the last keyed call's scheme and time for the online correction. */
static void own_record(const zen_sparse_ctx *ctx, choice *ch, uint64_t *rec)
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
static zen_status gather_profile(zen_sparse_ctx *ctx, choice *ch, const uint64_t *rec)
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
    if (st == ZEN_OK && deep) {
        zen_sparse_profile deep_p;
        zen__sparse_profile_model(&deep_p, n, 0, ZEN_OVERLAP_RANDOM);
        int64_t t1 = zen_now_ns();
        st = deep_profile(ctx, &cc, &ch->g, ch->recs, &deep_p);
        ch->deep_now_s = zen_us_between(t1, zen_now_ns()) * 1e-6;
        /* a key's first call is slow in every part (first touches), so not a measure */
        ch->slot.own_deep_s = ch->have ? ch->deep_now_s : 0;
        if (st == ZEN_OK) {
            ch->slot.key = slot_key(ctx);
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
static void summarize(const choice *ch, int n, double *load, zen_sparse_profile *p)
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
            p->skew = skew_of(load, n);
            continue;
        }
        for (int j = 0; j < n; j++)
            blocks_total += load[j];
        p->block_density = ch->g.nblocks ? blocks_total / n / (double)ch->g.nblocks : 0;
        p->block_skew = skew_of(load, n);
    }
    if (!ch->have)
        p->skew_n = p->skew;
    if (n == 1) {
        p->levels = 1;
        p->gamma[0] = 1;
        p->gamma_n = 1;
    }
}

static double ema(double old, double x)
{
    return old > 0 ? 0.5 * old + 0.5 * x : x;
}

/*
 * Calls between two runs of a bookkeeping step that takes cost_s, on calls of call_s: at least
 * base, and more when the step would otherwise take more than share of the calls' time, up to 8x
 * base (so that AUTO still sees a change of the data within 8 configured periods). On 4 shm
 * processes sharing 2 cores the record exchange with its decision took 60-85 us and a re-measure
 * 0.17-3.7 ms (more with the density), on calls whose scheme took 0.11-0.73 ms: at the fixed
 * periods of 16 and 100 a few percent of the calls' time (docs/algorithms.md).
 */
static long bookkeeping_period(long base, double cost_s, double call_s, double share)
{
    if (base < 1)
        base = 1;
    if (!(share > 0) || !(cost_s > 0) || !(call_s > 0))
        return base;
    double calls = ceil(cost_s / (share * call_s)), most = 8.0 * (double)base;
    return calls <= (double)base ? base : (long)(calls < most ? calls : most);
}

/* Fold one call's agreed time into the key's call time, slowly: it only spaces the bookkeeping. */
static void note_call(profile_slot *sl, double seconds)
{
    if (seconds > 0)
        sl->call_s = sl->call_s > 0 ? 0.8 * sl->call_s + 0.2 * seconds : seconds;
}

/* Fold one call's slowest-rank / median-rank ratio into the key's spread, slowly: the ratio of
 * one call is as noisy as the slowest rank it picks out. */
static void note_spread(profile_slot *sl, double median_s, double max_s)
{
    if (!(median_s > 0) || !(max_s >= median_s))
        return;
    double x = max_s / median_s;
    sl->spread = sl->spread > 0 ? 0.9 * sl->spread + 0.1 * x : x;
}

/*
 * Calibrate the model's machine constants from this tensor's own calls, with values every rank
 * shares (maxima over ranks from the records), unless ZEN_NET_LAT_US / ZEN_SPARSE_CPU_SHARE fix
 * them:
 *   latency  the record exchange is one step of n - 1 messages, modelled as
 *            latency (1 + (n - 2) overhead / latency): its measured time gives the latency
 *   CPU      the coalesce every call runs (api.c) is the sort + copy kernel on the largest input:
 *            measured / predicted (when it is long enough to time) is how much less of a core a
 *            rank gets than the model assumes; inproc copies are the bandwidth, so that scales too
 * Both change every scheme alike; what they miss per scheme the correction in auto_tune.c learns.
 * Neither applies when more ranks than cores share the host (net->msg_cpu_s set): there the
 * model charges each message's CPU and stretches the work by the core share itself.
 */
static void calibrate_net(const zen_sparse_ctx *ctx, choice *ch, zen_net_model *net)
{
    int n = ctx->comm->size;
    if (ch->fresh) {
        ch->slot.lat_s = 0;
        ch->slot.cpu_scale = 0;
    }
    double ovr = net->overhead_s > 0 ? net->overhead_s / net->latency_s : ZEN_COST_MSG_OVERHEAD;
    if (!ch->fresh && ch->xchg_s > 0)
        ch->slot.lat_s = ema(ch->slot.lat_s, ch->xchg_s / (1 + (n - 2) * ovr));
    /* Only across hosts: on one host (inproc, shm) the exchange's time is mostly the ranks'
     * arrival skew and wake-ups, not a latency every step pays (with it, the model predicted the
     * schemes of 2 inproc ranks 1.3-2.6x too slow), and oversubscribed the model charges each
     * message's CPU instead. */
    const zen_transport_traits *tr = zen__transport_traits(zen_comm_transport(ctx->comm));
    int one_host = tr->reach == ZEN_REACH_THREADS || tr->reach == ZEN_REACH_HOST;
    if (ch->slot.lat_s > 0 && !(zen__param_double("NET_LAT_US") > 0) && !one_host) {
        net->latency_s = ch->slot.lat_s;
        net->overhead_s = ovr * ch->slot.lat_s;
    }
    const zen_cpu_model *c = &net->cpu;
    double share = c->share > 0 ? c->share : 1;
    double coal = ch->nnz_max * (c->sort + 4.0 * ctx->local->width * c->copy_byte) * 1e-9 / share;
    if (coal > 20e-6 && ch->coal_s > 0)
        ch->slot.cpu_scale = ema(ch->slot.cpu_scale, ch->coal_s / coal);
    /* oversubscribed, the share already stretches the kernels by ranks / cores, and the largest
     * of n wall-time samples of a preemptible kernel only adds the ranks' time-slicing noise */
    if (ch->slot.cpu_scale > 1 && !(zen__param_double("SPARSE_CPU_SHARE") > 0) &&
        !(net->msg_cpu_s > 0)) {
        net->cpu.share = share / ch->slot.cpu_scale;
        if (tr->wire_copies == 0) /* the bandwidth is the ranks' own memcpy */
            net->bytes_per_s /= ch->slot.cpu_scale;
    }
}

/* The model's predictions for the real output kind with the constants net. */
static void predict(const zen_sparse_ctx *ctx, zen_sparse_profile *p, const zen_net_model *net,
                    double pred[ZEN_SPARSE_SCHEME_COUNT])
{
    const zen_coo *c = ctx->local;
    p->dense_output = ctx->dense_out != NULL;
    zen__sparse_predict(ctx->comm->size, c->rows, c->width, p, net,
                        zen__param_long("SPARSE_BLOCK_SIZE"), pred);
    zen__auto_tune_bias(pred);
}

/* What stats.predicted_s reports: the prediction times the key's machine-wide scale once two
 * schemes have been measured (zen__auto_tune_scale; online calibration on), else the model with
 * calibrate_net's constants. The scale is learned from the times the tuner is told, the ranks'
 * median (zen__auto_tune_call_time), and a call costs the job its slowest rank's time, so it is
 * taken times the key's usual slowest / median ratio (spread). The decision does not use it. */
static void report_model(zen_sparse_stats *stats, const zen_auto_tune *t, int calibrate_online,
                         double spread, const double *pred, const double *model)
{
    double g = t && calibrate_online ? zen__auto_tune_scale(t) * (spread > 0 ? spread : 1) : 0;
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++)
        stats->predicted_s[s] = g > 0 ? pred[s] * g : model[s];
}

/*
 * The model's prediction (calibrated online, calibrate_net) goes to the statistics; the decision
 * of a keyed tensor converges on measurement (auto_tune.h). The tuner is fed the prediction with
 * the configured constants: it uses it to normalise measured times by the size of the work and as
 * the prior of schemes not measured yet, and a normaliser that moves with the online calibration
 * would make times measured before and after a recalibration incomparable.
 */
static zen_sparse_scheme decide(zen_sparse_ctx *ctx, choice *ch, zen_sparse_profile *p)
{
    zen_net_model net;
    zen__net_model_for_ranks(zen_comm_transport(ctx->comm), ctx->comm->size, &net);
    double pred[ZEN_SPARSE_SCHEME_COUNT], model[ZEN_SPARSE_SCHEME_COUNT];
    profile_slot *sl = &ch->slot;
    sl->calibrate_online = zen__param_long("SPARSE_CALIBRATE_ONLINE") != 0;
    predict(ctx, p, &net, pred);
    memcpy(model, pred, sizeof model);
    if (ch->keyed && ch->have && sl->calibrate_online) {
        calibrate_net(ctx, ch, &net);
        predict(ctx, p, &net, model);
    }
    if (!(ch->keyed && ch->have)) {
        report_model(ctx->stats, NULL, 0, 0, pred, model);
        return zen__sparse_cheapest(model);
    }
    zen__auto_tune_params_default(&sl->tp);
    if (ch->fresh) {
        zen__auto_tune_init(&sl->tune);
        sl->spread = sl->call_s = 0;
    } else if (ch->last_agreed) {
        zen__auto_tune_observe(&sl->tune, &sl->tp, ch->last_s);
        note_spread(sl, ch->last_s, ch->last_max);
        note_call(sl, ch->last_s);
    } else
        zen__auto_tune_drop(&sl->tune);
    /* every input agreed: the maxima over the ranks' records and the agreed call times */
    double share = zen__param_double("SPARSE_AUTO_OVERHEAD");
    sl->recheck_every =
        bookkeeping_period(zen__param_long("SPARSE_AUTO_RECHECK"), ch->full_s, sl->call_s, share);
    sl->profile_every =
        bookkeeping_period(zen__param_long("SPARSE_PROFILE_PERIOD"), ch->deep_s, sl->call_s, share);
    zen_sparse_scheme s = zen__auto_tune_choose(&sl->tune, &sl->tp, pred, NULL, NULL);
    report_model(ctx->stats, &sl->tune, sl->calibrate_online, sl->spread, pred, model);
    memcpy(ch->slot.pred, pred, sizeof pred);
    memcpy(ch->slot.model, model, sizeof model);
    ch->slot.pending_s = 0;
    ch->slot.calls++;
    ch->slot.since_full = 0;
    return s;
}

/* The slot's fields every rank of the key computes alike, hashed: equal digests on all ranks
 * mean the same agreed state, so the same decision without a message. 0: no slot. */
static uint64_t slot_digest(const profile_slot *sl)
{
    const zen_auto_tune *t = &sl->tune;
    uint64_t h = zen_hash64(sl->version, sl->calls * 31 + sl->since_full);
    double d[(4 + 2 * ZEN_TUNE_WINDOW_MAX) * ZEN_SPARSE_SCHEME_COUNT + 15];
    size_t k = 0;
    for (int s = 0; s < ZEN_SPARSE_SCHEME_COUNT; s++) {
        for (int i = 0; i < ZEN_TUNE_WINDOW_MAX; i++) {
            d[k++] = t->win[s][i];
            d[k++] = t->pair[s][i];
        }
        h = zen_hash64(h, t->npair[s]);
        d[k++] = t->corr[s];
        d[k++] = t->best_corr[s];
        d[k++] = sl->pred[s];
        d[k++] = sl->model[s];
        h = zen_hash64(h, ((uint64_t)t->measured[s] << 40) ^ t->seen[s]);
    }
    double tail[] = { t->total_s,
                      t->extra_s,
                      t->last_pred,
                      t->last_base,
                      sl->density,
                      sl->gamma_n,
                      sl->skew,
                      sl->lat_s,
                      sl->cpu_scale,
                      t->settled_ratio,
                      t->settled_s,
                      sl->spread,
                      sl->call_s,
                      (double)sl->recheck_every,
                      (double)sl->profile_every };
    memcpy(d + k, tail, sizeof tail);
    k += sizeof tail / sizeof tail[0];
    h = zen_hash64(h, (uint64_t)(uint32_t)(t->prev + 1) << 8 | (uint64_t)(uint32_t)(t->again + 1));
    h = zen_hash64(h, t->calls ^ ((uint64_t)(uint32_t)(t->last + 1) << 48) ^
                          ((uint64_t)t->last_kind << 56) ^ ((uint64_t)t->warm_tries << 20) ^
                          t->rechecks);
    h = zen_hash64(
        h, t->next_check ^ (t->gap << 24) ^ ((uint64_t)(uint32_t)(t->settled + 1) << 56) ^
               ((uint64_t)(uint32_t)(t->challenger + 1) << 48) ^ ((uint64_t)t->fresh << 32));
    /* by words, in four independent chains: FNV-1a's byte loop was a tenth of AUTO's CPU, and
     * one chain of dependent mixes 0.7 us of every call on the 2-core VM */
    uint64_t lane[4] = { h, h ^ 0x9e3779b97f4a7c15ull, h ^ 0xbf58476d1ce4e5b9ull,
                         h ^ 0x94d049bb133111ebull };
    for (size_t i = 0; i < k; i++) {
        uint64_t w;
        memcpy(&w, &d[i], sizeof w);
        lane[i % 4] = zen_mix64(lane[i % 4] + w);
    }
    h = zen_hash64(zen_hash64(lane[0], lane[1]), zen_hash64(lane[2], lane[3]));
    return h | 1;
}

void zen__sparse_auto_state(const zen_sparse_ctx *ctx, uint64_t *digest, double *last_s)
{
    *digest = 0;
    *last_s = 0;
    if (ctx->opts && ctx->opts->key && ctx->comm->size > 1)
        slot_peek(slot_key(ctx), digest, last_s);
}

/* A keyed call between record exchanges, when every rank holds the same agreed slot (api.c
 * compared the digests in its agreement): the last call's time (maximum over ranks, from the
 * agreement) is folded in and the tuner decides from the stored predictions and tunables (a
 * change of a tunable takes effect at the next exchange). *done = 0 when the slot says a record
 * exchange is due. */
static void quiet_decide(zen_sparse_ctx *ctx, zen_sparse_scheme *scheme, int *done)
{
    profile_slot sl;
    *done = 0;
    if (!ctx->auto_agreed || !ctx->opts->key || !slot_get(slot_key(ctx), &sl) ||
        sl.since_full + 1 >= (uint64_t)(sl.recheck_every > 1 ? sl.recheck_every : 1) ||
        sl.calls >= (uint64_t)(sl.profile_every > 1 ? sl.profile_every : 1))
        return;
    zen__auto_tune_observe(&sl.tune, &sl.tp, ctx->auto_last_s);
    note_spread(&sl, ctx->auto_last_s, ctx->auto_last_max_s);
    note_call(&sl, ctx->auto_last_s);
    *scheme = zen__auto_tune_choose(&sl.tune, &sl.tp, sl.pred, NULL, NULL);
    sl.pending_s = 0;
    sl.calls++;
    sl.since_full++;
    slot_put(&sl);
    report_model(ctx->stats, &sl.tune, sl.calibrate_online, sl.spread, sl.pred, sl.model);
    ctx->stats->density = sl.density;
    ctx->stats->gamma_n = sl.gamma_n;
    ctx->stats->skew = sl.skew;
    *done = 1;
}

zen_status zen__sparse_choose(zen_sparse_ctx *ctx, zen_sparse_scheme *scheme)
{
    zen_comm *comm = ctx->comm;
    int n = comm->size, done;
    quiet_decide(ctx, scheme, &done);
    if (done)
        return ZEN_OK;
    int64_t t0 = zen_now_ns();
    choice ch;
    memset(&ch, 0, sizeof ch);
    geometry(ctx->local, n, &ch.g);
    ch.keyed = ctx->opts && ctx->opts->key && n > 1;
    ch.have = ch.keyed && slot_get(slot_key(ctx), &ch.slot);
    int had = ch.have;
    if (!ch.have)
        zen__auto_tune_init(&ch.slot.tune);
    ch.stride = REC_WORDS(n);
    ch.recs = zen__malloc_array(ch.stride * (size_t)n, sizeof *ch.recs);
    uint64_t *rec = zen__malloc_array(ch.stride, sizeof *rec);
    double *load = zen__malloc_array((size_t)n, sizeof *load);
    zen_status st = ZEN_OK;
    if (!ch.recs || !rec || !load) {
        st = zen__fail(comm, ZEN_ENOMEM, "sparse profile: out of memory for %d ranks", n);
    } else {
        own_record(ctx, &ch, rec);
        if (n == 1)
            memcpy(ch.recs, rec, ch.stride * sizeof *rec);
        else
            st = gather_profile(ctx, &ch, rec);
    }
    if (st == ZEN_OK) {
        zen_sparse_profile p;
        summarize(&ch, n, load, &p);
        *scheme = decide(ctx, &ch, &p);
        ctx->stats->density = ch.slot.density = p.density;
        ctx->stats->gamma_n = ch.slot.gamma_n = p.gamma_n;
        ctx->stats->skew = ch.slot.skew = p.skew;
        /* reported at the next exchange; a key's first call is no measure (first touches) */
        double full = zen_us_between(t0, zen_now_ns()) * 1e-6 - ch.deep_now_s;
        ch.slot.own_full_s = had && full > 0 ? full : 0;
        if (ch.keyed && ch.have)
            slot_put(&ch.slot);
    }
    zen__free(ch.recs);
    zen__free(rec);
    zen__free(load);
    return st;
}

void zen__sparse_auto_forget_all(void)
{
    pthread_mutex_lock(&slot_lock);
    memset(slots, 0, sizeof slots);
    pthread_mutex_unlock(&slot_lock);
}

static _Atomic(zen_sparse_auto_time_fn) time_hook;

void zen__sparse_auto_time_hook(zen_sparse_auto_time_fn fn)
{
    atomic_store(&time_hook, fn);
}

void zen__sparse_auto_observe(const zen_sparse_ctx *ctx, double seconds)
{
    if (!ctx->opts || !ctx->opts->key || ctx->comm->size <= 1)
        return;
    zen_sparse_auto_time_fn hook = atomic_load(&time_hook);
    if (hook)
        seconds = hook(ctx->comm->rank, ctx->stats->scheme, seconds);
    slot_note_time(slot_key(ctx), seconds);
}
