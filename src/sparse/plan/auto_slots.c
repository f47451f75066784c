/*
 * AUTO's slots: what a keyed tensor's AUTO keeps between calls in this process (its measured
 * profile, its tuner, the online calibration), in a small table shared by the ranks' threads
 * under one lock, evicted least recently used. The digest of a slot's agreed state lets the
 * ranks skip the record exchange when they all hold the same (zen__sparse_auto_state).
 */
#include <pthread.h>
#include <string.h>

#include "common/hash.h"
#include "sparse/plan/auto.h"
#include "sparse/plan/auto_internal.h"

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

int zen__auto_slot_get(uint64_t key, profile_slot *out)
{
    pthread_mutex_lock(&slot_lock);
    profile_slot *sl = slot_find(key);
    if (sl)
        *out = *sl;
    pthread_mutex_unlock(&slot_lock);
    return sl != NULL;
}

int zen__auto_regime_moved(double x, double ref, double f)
{
    if (!(f > 1) || !(x >= 0) || !(ref >= 0))
        return 0;
    double q = (x + 1) / (ref + 1);
    return q > f || q * f < 1;
}

/* What every call reads before its agreement (zen__sparse_auto_state), without copying the slot:
 * its digest, this rank's time of the last call and its input rows at its last exchange. */
static int slot_peek(uint64_t key, uint64_t *digest, double *pending_s, uint64_t *own_nnz,
                     double *regime_factor)
{
    pthread_mutex_lock(&slot_lock);
    profile_slot *sl = slot_find(key);
    if (sl) {
        *digest = sl->digest;
        *pending_s = sl->pending_s;
        *own_nnz = sl->own_nnz;
        *regime_factor = sl->regime_factor;
    }
    pthread_mutex_unlock(&slot_lock);
    return sl != NULL;
}

/* This rank's time of the call the slot's tuner chose last, reported on the next call. */
void zen__auto_slot_note_time(uint64_t key, double seconds)
{
    pthread_mutex_lock(&slot_lock);
    profile_slot *sl = slot_find(key);
    if (sl && sl->tune.last >= 0)
        sl->pending_s = seconds;
    pthread_mutex_unlock(&slot_lock);
}

/* The slot's fields every rank of the key computes alike, hashed: equal digests on all ranks
 * mean the same agreed state, so the same decision without a message. 0: no slot. */
static uint64_t slot_digest(const profile_slot *sl)
{
    const zen_auto_tune *t = &sl->tune;
    uint64_t h = zen_hash64(sl->version, sl->calls * 31 + sl->since_full);
    double d[(4 + 2 * ZEN_TUNE_WINDOW_MAX) * ZEN_SPARSE_SCHEME_COUNT + 16];
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
                      (double)sl->profile_every,
                      sl->regime_density };
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

/* Insert or update, with the state's digest; evicts the least recently used slot when full. */
void zen__auto_slot_put(const profile_slot *in)
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

uint64_t zen__auto_slot_key(const zen_sparse_ctx *ctx)
{
    const zen_comm *comm = ctx->comm;
    const char *key = ctx->opts->key;
    uint64_t h = zen__fnv1a(key, strlen(key), zen__comm_seeds(comm)[0]);
    h = zen_hash64(h, ((uint64_t)comm->ctx << 32) | (uint32_t)comm->rank);
    h = zen_hash64(h, ctx->local->rows * 131 + ctx->local->width);
    h = zen_hash64(h, (uint64_t)comm->size);
    return h | 1; /* 0 marks a free slot */
}

void zen__sparse_auto_state(const zen_sparse_ctx *ctx, uint64_t *digest, double *last_s)
{
    *digest = 0;
    *last_s = 0;
    uint64_t own_nnz = 0;
    double f = 0;
    if (ctx->opts && ctx->opts->key && ctx->comm->size > 1 &&
        slot_peek(zen__auto_slot_key(ctx), digest, last_s, &own_nnz, &f) &&
        zen__auto_regime_moved((double)ctx->local->nnz, (double)own_nnz, f))
        *digest = 0; /* this rank's input moved: every rank takes the record exchange, which
                      * tells (agreed) whether the mean moved too */
}

void zen__sparse_auto_forget_all(void)
{
    pthread_mutex_lock(&slot_lock);
    memset(slots, 0, sizeof slots);
    pthread_mutex_unlock(&slot_lock);
}
