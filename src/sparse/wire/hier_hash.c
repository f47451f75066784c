/*
 * Hierarchical hashing (ZEN Algorithm 1), lossless and safe for concurrent writers.
 *
 * Memory, per owner j of n (sizes for nnz items at the default load factor 0.5):
 *
 *   slots  [j * r1 .. j * r1 + r1)   parallel memory, r1 = ceil(2 nnz / n) slots
 *   serial [j * r2 .. j * r2 + r2)   serial memory,   r2 = max(r1 / 10, 16), bump counter c[j]
 *
 * A slot holds the input position p of the item it stores (p identifies both the index and its
 * value row). The empty marker is UINT32_MAX, which is never a position because nnz < UINT32_MAX
 * is enforced, so index 0 / position 0 is an ordinary item (the public research code used 0 as
 * "empty" and silently dropped row 0).
 *
 * Insert item p with index x:
 *   h = zen_hash64(x, seed0); j = range(high32(h), n)         level 1: owner, data independent
 *   probes: h1 = range(low32(h), r1), then (only after a collision) g = zen_hash64(x, seed1),
 *           h2 = range(high32(g), r1), h3 = range(low32(g), r1)   level 2: inside owner j only
 *   claim the first empty probe with compare-and-swap (one thread: a plain check and store);
 *   if all three are taken: q = c[j]++ (atomic); q < r2 ? serial[j][q] = p : overflow.
 * A CAS has no window between the emptiness check and the write, so two racing writers can never
 * both believe they own a slot (the paper's read-after-write re-check still had one).
 *
 * Overflow of a serial memory never loses data: the pass is redone with the serial capacity
 * doubled (it stops growing at nnz, where no overflow is possible), and the result reports the
 * number of passes. With k = 3 and load 0.5 about 3% of the items go serial, so r2 = r1/10 leaves
 * a wide margin and re-passes are rare.
 *
 * Insertion runs as a software pipeline over blocks of items so that no probe waits for memory
 * (see insert_range). Extraction scans each owner's r1 slots and its c[j] serial items and writes
 * the stored positions into the owner's segment of the output; segment sizes come from per-thread
 * owner counts taken during insertion.
 * With threads > 1, insertion splits the input into equal ranges (one per thread) and extraction
 * splits the owners; the set of items per owner is the same as single-threaded, only the order
 * inside an owner differs.
 */
#include "sparse/wire/hier_hash.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common/alloc.h"
#include "common/checked.h"

#define EMPTY_SLOT   UINT32_MAX
#define MAX_THREADS  64
#define SERIAL_FLOOR 16

zen_hh_config zen__hh_config_default(uint32_t nowners, const uint64_t *seeds)
{
    zen_hh_config c;
    memset(&c, 0, sizeof c);
    c.nowners = nowners;
    c.seed0 = seeds[0];
    c.seed1 = seeds[1];
    c.method = ZEN_HH_HASH;
    c.threads = 1;
    return c;
}

void zen__hh_result_free(zen_hh_result *r)
{
    if (!r)
        return;
    zen__free(r->offsets);
    zen__free(r->pos);
    r->offsets = NULL;
    r->pos = NULL;
}

/* Multiply-shift of a 32-bit hash into [0, r). */
static inline size_t range32(uint32_t h, size_t r)
{
    return (size_t)(((uint64_t)h * r) >> 32);
}

typedef struct hh_table {
    uint32_t n;
    size_t r1, r2;
    int probes; /* k: 1..3 */
    _Atomic uint32_t *slots;
    _Atomic uint32_t *serial;
    _Atomic size_t *serial_count;
    atomic_int overflow;
} hh_table;

typedef struct hh_worker {
    hh_table *t;
    const zen_hh_config *cfg;
    const uint32_t *idx;
    size_t begin, end;
    int concurrent;
    size_t *counts;     /* n owner counts of this worker's items */
    zen_hh_result *out; /* extraction: owners [begin, end) */
    size_t bad;         /* extraction: owners whose extracted count disagreed */
} hh_worker;

static int claim(_Atomic uint32_t *slot, uint32_t p, int concurrent)
{
    uint32_t expected = EMPTY_SLOT;
    if (concurrent)
        return atomic_compare_exchange_strong_explicit(slot, &expected, p, memory_order_relaxed,
                                                       memory_order_relaxed);
    if (atomic_load_explicit(slot, memory_order_relaxed) != EMPTY_SLOT)
        return 0;
    atomic_store_explicit(slot, p, memory_order_relaxed);
    return 1;
}

/* Claim the first empty one of the item's second and third probes (as many as k allows), else its
 * owner's serial memory. g is the item's level-2 hash: h2 = its high half, h3 = its low half. */
static void insert_late(hh_table *t, _Atomic uint32_t *base, uint32_t j, uint64_t g, uint32_t p,
                        int concurrent)
{
    if ((t->probes >= 2 && claim(base + range32((uint32_t)(g >> 32), t->r1), p, concurrent)) ||
        (t->probes >= 3 && claim(base + range32((uint32_t)g, t->r1), p, concurrent)))
        return;
    size_t q = atomic_fetch_add_explicit(&t->serial_count[j], 1, memory_order_relaxed);
    if (q < t->r2)
        atomic_store_explicit(&t->serial[(size_t)j * t->r2 + q], p, memory_order_relaxed);
    else
        atomic_store_explicit(&t->overflow, 1, memory_order_relaxed);
}

/*
 * Insertion is a software pipeline over blocks of BLOCK items, because the tables outgrow the
 * caches from ~1M items on and every probe is a random access. For block b:
 *
 *   stage 1 (one block ahead): h0 hash, owner, first-probe slot address, prefetch it
 *   stage 2: claim the first probe (prefetched a block earlier); the ~25% that collide are listed
 *   stage 3: for the listed items, the level-2 hash and a prefetch of both later probes
 *   stage 1 of block b + 1 runs here, while those prefetches are in flight
 *   stage 4: the listed items claim their second or third probe, else serial memory
 *
 * Each item's hashes are computed once, and no probe waits for memory. The outcome per item is
 * that of Algorithm 1 (first empty of h1, h2, h3, else serial); only the order in which items of
 * one block meet each other's claims differs from a one-by-one loop, as it does between threads.
 */
#define BLOCK 64

typedef struct hh_stage {
    _Atomic uint32_t *first[BLOCK]; /* first-probe slot of each item */
    uint32_t owner[BLOCK];
} hh_stage;

static void stage_hash(hh_worker *w, hh_stage *st, size_t from, size_t count)
{
    hh_table *t = w->t;
    const uint64_t seed0 = w->cfg->seed0;
    const uint32_t n = t->n;
    const size_t r1 = t->r1;
    size_t *counts = w->counts;
    for (size_t k = 0; k < count; k++) {
        uint64_t h = zen_hash64(w->idx[from + k], seed0);
        uint32_t j = zen_hash_range(h, n);
        _Atomic uint32_t *a = t->slots + (size_t)j * r1 + range32((uint32_t)h, r1);
        __builtin_prefetch(a, 1);
        st->first[k] = a;
        st->owner[k] = j;
        counts[j]++;
    }
}

static void insert_range(hh_worker *w)
{
    hh_table *t = w->t;
    const uint64_t seed1 = w->cfg->seed1;
    const size_t r1 = t->r1;
    const int concurrent = w->concurrent;
    hh_stage stage[2];
    uint32_t late[BLOCK];
    uint64_t late_g[BLOCK];
    size_t p = w->begin, cur = 0;
    size_t count = w->end - p < BLOCK ? w->end - p : BLOCK;
    stage_hash(w, &stage[cur], p, count);
    while (count > 0) {
        hh_stage *st = &stage[cur];
        size_t nl = 0;
        if (concurrent) {
            for (size_t k = 0; k < count; k++) {
                late[nl] = (uint32_t)k;
                nl += !claim(st->first[k], (uint32_t)(p + k), 1);
            }
        } else {
            /* branch-free: a collision (unpredictable, ~25%) stores into a dummy instead */
            _Atomic uint32_t sink;
            for (size_t k = 0; k < count; k++) {
                int taken = atomic_load_explicit(st->first[k], memory_order_relaxed) != EMPTY_SLOT;
                atomic_store_explicit(taken ? &sink : st->first[k], (uint32_t)(p + k),
                                      memory_order_relaxed);
                late[nl] = (uint32_t)k;
                nl += (size_t)taken;
            }
        }
        for (size_t m = 0; m < nl; m++) {
            uint64_t g = zen_hash64(w->idx[p + late[m]], seed1);
            _Atomic uint32_t *base = t->slots + (size_t)st->owner[late[m]] * r1;
            __builtin_prefetch(base + range32((uint32_t)(g >> 32), r1), 1);
            __builtin_prefetch(base + range32((uint32_t)g, r1), 1);
            late_g[m] = g;
        }
        size_t next = p + count;
        size_t next_count = w->end - next < BLOCK ? w->end - next : BLOCK;
        if (next_count > 0)
            stage_hash(w, &stage[cur ^ 1], next, next_count);
        for (size_t m = 0; m < nl; m++) {
            uint32_t j = st->owner[late[m]];
            insert_late(t, t->slots + (size_t)j * r1, j, late_g[m], (uint32_t)(p + late[m]),
                        concurrent);
        }
        p = next;
        count = next_count;
        cur ^= 1;
    }
}

static void extract_owners(hh_worker *w)
{
    hh_table *t = w->t;
    /* Branch-free scan straight into the owner's output segment: at load 0.5 an "is it empty"
     * branch mispredicts half the time, so every slot is stored at the next output place (an
     * empty one is overwritten by the next item) until the count taken at insertion is reached;
     * the rest of the row must then be empty. Any other count is reported as a bug. */
    const size_t r1 = t->r1, r2 = t->r2;
    for (size_t j = w->begin; j < w->end; j++) {
        uint32_t *dst = w->out->pos + w->out->offsets[j];
        size_t want = w->out->offsets[j + 1] - w->out->offsets[j];
        size_t ns = atomic_load_explicit(&t->serial_count[j], memory_order_relaxed);
        size_t room = want >= ns ? want - ns : 0, found = 0, q = 0, extra = 0;
        const _Atomic uint32_t *s = t->slots + j * r1;
        for (; q < r1 && found < room; q++) {
            uint32_t v = atomic_load_explicit(&s[q], memory_order_relaxed);
            dst[found] = v;
            found += v != EMPTY_SLOT;
        }
        for (; q < r1; q++)
            extra += atomic_load_explicit(&s[q], memory_order_relaxed) != EMPTY_SLOT;
        if (found + ns != want || extra != 0 || ns > r2) {
            w->bad++;
            continue;
        }
        const _Atomic uint32_t *sr = t->serial + j * r2;
        for (size_t k = 0; k < ns; k++)
            dst[found + k] = atomic_load_explicit(&sr[k], memory_order_relaxed);
    }
}

static void *insert_main(void *arg)
{
    insert_range(arg);
    return NULL;
}

static void *extract_main(void *arg)
{
    extract_owners(arg);
    return NULL;
}

/* Run fn on workers[0..nt): workers 1.. on new threads, worker 0 on the caller. */
static zen_status run_workers(void *(*fn)(void *), hh_worker *workers, int nt)
{
    pthread_t tid[MAX_THREADS];
    int started = 0;
    zen_status st = ZEN_OK;
    for (int i = 1; i < nt; i++) {
        if (pthread_create(&tid[i], NULL, fn, &workers[i]) != 0) {
            /* run the rest inline: slower, same result */
            for (int k = i; k < nt; k++)
                fn(&workers[k]);
            break;
        }
        started = i;
    }
    fn(&workers[0]);
    for (int i = 1; i <= started; i++)
        pthread_join(tid[i], NULL);
    return st;
}

static void table_free(hh_table *t)
{
    zen__free((void *)t->slots);
    zen__free((void *)t->serial);
    zen__free((void *)t->serial_count);
    memset(t, 0, sizeof *t);
}

static zen_status table_alloc(hh_table *t, uint32_t n, size_t r1, size_t r2)
{
    size_t ns, nr;
    memset(t, 0, sizeof *t);
    if (zen_mul_overflow(n, r1, &ns) || zen_mul_overflow(n, r2, &nr))
        return ZEN_ENOMEM;
    t->n = n;
    t->r1 = r1;
    t->r2 = r2;
    t->slots = zen__malloc_array(ns, sizeof *t->slots);
    t->serial = zen__malloc_array(nr, sizeof *t->serial);
    t->serial_count = zen__malloc_array(n, sizeof *t->serial_count);
    if (!t->slots || !t->serial || !t->serial_count) {
        table_free(t);
        return ZEN_ENOMEM;
    }
    /* all-ones bytes are EMPTY_SLOT; lock-free atomics share the plain representation */
    memset((void *)t->slots, 0xff, ns * sizeof *t->slots);
    for (uint32_t j = 0; j < n; j++)
        atomic_init(&t->serial_count[j], 0);
    atomic_init(&t->overflow, 0);
    return ZEN_OK;
}

static zen_status partition_count(const zen_hh_config *cfg, const uint32_t *idx, size_t nnz,
                                  zen_hh_result *out)
{
    uint32_t n = cfg->nowners;
    uint32_t *owner = zen__malloc_array(nnz, sizeof *owner);
    if (!owner)
        return ZEN_ENOMEM;
    for (size_t p = 0; p < nnz; p++) {
        owner[p] = zen_hh_owner(idx[p], cfg->seed0, n);
        out->offsets[owner[p] + 1]++;
    }
    for (uint32_t j = 0; j < n; j++)
        out->offsets[j + 1] += out->offsets[j];
    size_t *next = zen__malloc_array(n, sizeof *next);
    if (!next) {
        zen__free(owner);
        return ZEN_ENOMEM;
    }
    memcpy(next, out->offsets, n * sizeof *next);
    for (size_t p = 0; p < nnz; p++)
        out->pos[next[owner[p]]++] = (uint32_t)p;
    zen__free(next);
    zen__free(owner);
    out->passes = 1;
    return ZEN_OK;
}

static zen_status partition_hash(const zen_hh_config *cfg, const uint32_t *idx, size_t nnz,
                                 zen_hh_result *out)
{
    uint32_t n = cfg->nowners;
    int nt = cfg->threads > 1 ? cfg->threads : 1;
    if (nt > MAX_THREADS)
        nt = MAX_THREADS;
    if ((size_t)nt > nnz / 1024 + 1) /* tiny inputs: threads cost more than they save */
        nt = (int)(nnz / 1024 + 1);
    size_t r1 = cfg->slots_per_owner ? cfg->slots_per_owner : (2 * nnz + n - 1) / n;
    size_t r2 = cfg->serial_per_owner ? cfg->serial_per_owner : r1 / 10;
    if (r1 < 1)
        r1 = 1;
    if (!cfg->serial_per_owner && r2 < SERIAL_FLOOR)
        r2 = SERIAL_FLOOR;
    if (r2 < 1)
        r2 = 1;
    if (r1 >= UINT32_MAX)
        return ZEN_EUNSUPPORTED;
    hh_worker workers[MAX_THREADS];
    size_t *counts = zen__calloc((size_t)nt * n, sizeof *counts);
    if (!counts)
        return ZEN_ENOMEM;
    hh_table t;
    zen_status st;
    for (out->passes = 1;; out->passes++) {
        if ((st = table_alloc(&t, n, r1, r2)) != ZEN_OK)
            break;
        t.probes = cfg->probes >= 1 && cfg->probes <= 3 ? cfg->probes : 3;
        memset(counts, 0, (size_t)nt * n * sizeof *counts);
        for (int i = 0; i < nt; i++) {
            workers[i] = (hh_worker){ &t,
                                      cfg,
                                      idx,
                                      nnz * (size_t)i / (size_t)nt,
                                      nnz * (size_t)(i + 1) / (size_t)nt,
                                      nt > 1,
                                      counts + (size_t)i * n,
                                      out,
                                      0 };
        }
        run_workers(insert_main, workers, nt);
        if (!atomic_load(&t.overflow))
            break;
        /* a serial memory overflowed: nothing was lost yet, the pass is redone bigger */
        table_free(&t);
        r2 = r2 >= nnz ? nnz : (r2 * 2 < nnz ? r2 * 2 : nnz);
    }
    if (st == ZEN_OK) {
        memset(out->offsets, 0, (size_t)(n + 1) * sizeof *out->offsets);
        for (int i = 0; i < nt; i++)
            for (uint32_t j = 0; j < n; j++)
                out->offsets[j + 1] += counts[(size_t)i * n + j];
        for (uint32_t j = 0; j < n; j++)
            out->offsets[j + 1] += out->offsets[j];
        out->serial_items = 0;
        for (uint32_t j = 0; j < n; j++)
            out->serial_items += atomic_load(&t.serial_count[j]);
        int ne = nt < (int)n ? nt : (int)n;
        for (int i = 0; i < ne; i++) {
            workers[i] = (hh_worker){ &t,
                                      cfg,
                                      idx,
                                      (size_t)n * (size_t)i / (size_t)ne,
                                      (size_t)n * (size_t)(i + 1) / (size_t)ne,
                                      0,
                                      NULL,
                                      out,
                                      0 };
        }
        run_workers(extract_main, workers, ne);
        for (int i = 0; i < ne; i++)
            if (workers[i].bad) /* a lost or duplicated item (a bug) */
                st = ZEN_EINTERNAL;
        table_free(&t);
    }
    zen__free(counts);
    return st;
}

zen_status zen__hh_partition(const zen_hh_config *cfg, const uint32_t *idx, size_t nnz,
                             zen_hh_result *out)
{
    if (!cfg || !out || cfg->nowners == 0 || (nnz > 0 && !idx))
        return ZEN_EINVAL;
    if (nnz >= UINT32_MAX)
        return ZEN_EUNSUPPORTED;
    memset(out, 0, sizeof *out);
    out->nowners = cfg->nowners;
    out->offsets = zen__calloc((size_t)cfg->nowners + 1, sizeof *out->offsets);
    out->pos = zen__malloc_array(nnz ? nnz : 1, sizeof *out->pos);
    if (!out->offsets || !out->pos) {
        zen__hh_result_free(out);
        return ZEN_ENOMEM;
    }
    out->passes = 1;
    if (nnz == 0)
        return ZEN_OK;
    zen_status st = cfg->method == ZEN_HH_COUNT ? partition_count(cfg, idx, nnz, out)
                                                : partition_hash(cfg, idx, nnz, out);
    if (st != ZEN_OK)
        zen__hh_result_free(out);
    return st;
}
