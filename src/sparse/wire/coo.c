/*
 * Coalesced COO tensors: storage, conversion of user tensors (validate, bf16 -> f32, sort, sum
 * duplicates) and the k-way merge-add of sorted runs.
 *
 * Coalescing outline: read the indices once into a u32 key array while validating them and
 * noting whether they are already sorted. Strictly increasing input is copied straight through;
 * otherwise the (key, position) pairs are radix sorted (stable) and each run of equal keys is
 * summed in input order, which makes the result deterministic for a given input.
 */
#include "sparse/wire/coo.h"

#include <string.h>

#include "common/alloc.h"
#include "common/checked.h"
#include "sparse/wire/radix_sort.h"

void zen__coo_reset(zen_coo *coo, uint64_t rows, uint32_t width)
{
    if (coo->width != width && coo->capacity > 0)
        zen__coo_release(coo);
    coo->rows = rows;
    coo->width = width;
    coo->nnz = 0;
}

zen_status zen__coo_reserve(zen_coo *coo, size_t capacity)
{
    if (capacity <= coo->capacity)
        return ZEN_OK;
    size_t val_count;
    if (coo->width == 0 || zen_mul_overflow(capacity, coo->width, &val_count) ||
        capacity > SIZE_MAX / sizeof(uint32_t) || val_count > SIZE_MAX / sizeof(float))
        return ZEN_EINVAL;
    uint32_t *idx = zen__realloc(coo->idx, capacity * sizeof *idx);
    if (!idx)
        return ZEN_ENOMEM;
    coo->idx = idx;
    float *val = zen__realloc(coo->val, val_count * sizeof *val);
    if (!val)
        return ZEN_ENOMEM;
    coo->val = val;
    coo->capacity = capacity;
    return ZEN_OK;
}

void zen__coo_release(zen_coo *coo)
{
    if (!coo)
        return;
    zen__free(coo->idx);
    zen__free(coo->val);
    coo->idx = NULL;
    coo->val = NULL;
    coo->capacity = 0;
    coo->nnz = 0;
}

/* dst[0..w) = row p of the values (f32 or bf16). */
static void load_row(float *dst, const void *vals, zen_dtype vt, size_t p, uint32_t w)
{
    if (vt == ZEN_F32) {
        memcpy(dst, (const float *)vals + p * w, (size_t)w * sizeof *dst);
    } else {
        const uint16_t *src = (const uint16_t *)vals + p * w;
        for (uint32_t c = 0; c < w; c++)
            dst[c] = zen_bf16_to_f32(src[c]);
    }
}

/* dst[0..w) += row p of the values. */
static void add_row(float *dst, const void *vals, zen_dtype vt, size_t p, uint32_t w)
{
    if (vt == ZEN_F32) {
        const float *src = (const float *)vals + p * w;
        for (uint32_t c = 0; c < w; c++)
            dst[c] += src[c];
    } else {
        const uint16_t *src = (const uint16_t *)vals + p * w;
        for (uint32_t c = 0; c < w; c++)
            dst[c] += zen_bf16_to_f32(src[c]);
    }
}

zen_status zen__coo_coalesce(uint32_t *keys, const void *vals, zen_dtype value_type, size_t n,
                             uint32_t width, uint32_t max_key, zen_coo *out)
{
    out->nnz = 0;
    if (n == 0)
        return ZEN_OK;
    if (n >= UINT32_MAX)
        return ZEN_EUNSUPPORTED;
    zen_status st = zen__coo_reserve(out, n);
    if (st != ZEN_OK)
        return st;
    int strict = 1, sorted = 1;
    for (size_t i = 1; i < n && sorted; i++) {
        if (keys[i] <= keys[i - 1]) {
            strict = 0;
            sorted = keys[i] == keys[i - 1];
        }
    }
    if (strict) {
        memcpy(out->idx, keys, n * sizeof *keys);
        if (value_type == ZEN_F32) {
            memcpy(out->val, vals, n * width * sizeof(float));
        } else {
            for (size_t i = 0; i < n; i++)
                load_row(out->val + i * width, vals, value_type, i, width);
        }
        out->nnz = n;
        return ZEN_OK;
    }
    uint32_t *pos = zen__malloc_array(n, sizeof *pos);
    if (!pos)
        return ZEN_ENOMEM;
    for (size_t i = 0; i < n; i++)
        pos[i] = (uint32_t)i;
    if (!sorted && (st = zen__radix_sort_kv(keys, pos, n, max_key)) != ZEN_OK) {
        zen__free(pos);
        return st;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && out->idx[m - 1] == keys[i]) {
            add_row(out->val + (m - 1) * width, vals, value_type, pos[i], width);
        } else {
            out->idx[m] = keys[i];
            load_row(out->val + m * width, vals, value_type, pos[i], width);
            m++;
        }
    }
    out->nnz = m;
    zen__free(pos);
    return ZEN_OK;
}

/* Read index i of the user tensor into *key; 0 when it is outside [0, rows). */
static int read_index(const zen_sparse_tensor *in, size_t i, uint32_t *key, uint64_t *raw)
{
    if (in->index_type == ZEN_INDEX_U32) {
        uint32_t v = ((const uint32_t *)in->indices)[i];
        *raw = v;
        *key = v;
        return (uint64_t)v < in->rows;
    }
    int64_t v = ((const int64_t *)in->indices)[i];
    *raw = (uint64_t)v;
    *key = (uint32_t)v;
    return v >= 0 && (uint64_t)v < in->rows;
}

zen_status zen__coo_from_tensor(const zen_sparse_tensor *in, zen_coo *out, uint64_t *bad_index)
{
    if (!in || !out)
        return ZEN_EINVAL;
    if (in->rows >= ((uint64_t)1 << 32))
        return ZEN_EUNSUPPORTED;
    size_t vcount;
    if (in->width == 0 || (in->value_type != ZEN_F32 && in->value_type != ZEN_BF16) ||
        (in->index_type != ZEN_INDEX_U32 && in->index_type != ZEN_INDEX_I64) ||
        zen_mul_overflow(in->nnz, in->width, &vcount) || vcount > SIZE_MAX / sizeof(float))
        return ZEN_EINVAL;
    if (in->nnz > 0 && (!in->indices || !in->values))
        return ZEN_EINVAL;
    if (in->nnz >= UINT32_MAX)
        return ZEN_EUNSUPPORTED;
    zen__coo_reset(out, in->rows, in->width);
    if (in->nnz == 0)
        return ZEN_OK;
    uint32_t *keys = zen__malloc_array(in->nnz, sizeof *keys);
    if (!keys)
        return ZEN_ENOMEM;
    uint32_t max_key = 0;
    for (size_t i = 0; i < in->nnz; i++) {
        uint64_t raw;
        if (!read_index(in, i, &keys[i], &raw)) {
            if (bad_index)
                *bad_index = raw;
            zen__free(keys);
            return ZEN_EINVAL;
        }
        if (keys[i] > max_key)
            max_key = keys[i];
    }
    zen_status st =
        zen__coo_coalesce(keys, in->values, in->value_type, in->nnz, in->width, max_key, out);
    zen__free(keys);
    return st;
}

/* Binary min-heap of run numbers ordered by (current index, run number). */
typedef struct merge_heap {
    const zen_coo *runs;
    size_t *cursor;
    size_t *heap;
    size_t len;
} merge_heap;

static int heap_less(const merge_heap *h, size_t a, size_t b)
{
    uint32_t ka = h->runs[a].idx[h->cursor[a]], kb = h->runs[b].idx[h->cursor[b]];
    return ka < kb || (ka == kb && a < b);
}

static void heap_sift_down(merge_heap *h, size_t at)
{
    for (;;) {
        size_t l = 2 * at + 1, r = l + 1, m = at;
        if (l < h->len && heap_less(h, h->heap[l], h->heap[m]))
            m = l;
        if (r < h->len && heap_less(h, h->heap[r], h->heap[m]))
            m = r;
        if (m == at)
            return;
        size_t t = h->heap[m];
        h->heap[m] = h->heap[at];
        h->heap[at] = t;
        at = m;
    }
}

/* Row (key, src) goes out as a new entry, or is added to the last one when it has the same key
 * (the runs' rows of one index are summed in run order, the lowest run first). */
static size_t merge_put(zen_coo *out, size_t m, uint32_t key, const float *src, uint32_t w)
{
    if (m > 0 && out->idx[m - 1] == key) {
        float *dst = out->val + (m - 1) * w;
        for (uint32_t j = 0; j < w; j++)
            dst[j] += src[j];
        return m;
    }
    out->idx[m] = key;
    if (w == 1)
        out->val[m] = src[0];
    else
        memcpy(out->val + m * w, src, (size_t)w * sizeof *src);
    return m + 1;
}

static zen_status merge_heap_runs(const zen_coo *runs, size_t k, zen_coo *out)
{
    uint32_t w = runs[0].width;
    merge_heap h = { runs, zen__calloc(k, sizeof(size_t)), zen__malloc_array(k, sizeof(size_t)),
                     0 };
    if (!h.cursor || !h.heap) {
        zen__free(h.cursor);
        zen__free(h.heap);
        return ZEN_ENOMEM;
    }
    for (size_t r = 0; r < k; r++)
        if (runs[r].nnz > 0)
            h.heap[h.len++] = r;
    for (size_t i = h.len; i-- > 0;)
        heap_sift_down(&h, i);
    size_t m = 0;
    while (h.len > 0) {
        size_t r = h.heap[0];
        size_t c = h.cursor[r];
        m = merge_put(out, m, runs[r].idx[c], runs[r].val + c * w, w);
        if (++h.cursor[r] == runs[r].nnz)
            h.heap[0] = h.heap[--h.len];
        heap_sift_down(&h, 0);
    }
    out->nnz = m;
    zen__free(h.cursor);
    zen__free(h.heap);
    return ZEN_OK;
}

/*
 * Few runs (the sparse schemes merge one run per rank of a host or a small world): each run's
 * current index is kept in head[], UINT32_MAX once the run is spent, and the smallest is found by
 * a scan of head[]. The scan's compares go to conditional moves and its loads hit one cache line,
 * where the heap's sift-down chases cursors through the runs on every step: several times fewer
 * cycles an entry for k = 4 (docs/algorithms.md). Ties go to the lowest run, as in the heap.
 * An index below rows < 2^32 is never UINT32_MAX, so a spent run is never picked while entries
 * remain; the check below only guards against a run that breaks that.
 */
#define MERGE_SCAN_MAX 8

static zen_status merge_scan_runs(const zen_coo *runs, size_t k, size_t total, zen_coo *out)
{
    uint32_t w = runs[0].width, head[MERGE_SCAN_MAX];
    size_t cur[MERGE_SCAN_MAX];
    for (size_t r = 0; r < k; r++) {
        cur[r] = 0;
        head[r] = runs[r].nnz > 0 ? runs[r].idx[0] : UINT32_MAX;
    }
    size_t m = 0;
    for (size_t left = total; left > 0; left--) {
        size_t best = 0;
        uint32_t key = head[0];
        for (size_t r = 1; r < k; r++) {
            int less = head[r] < key;
            key = less ? head[r] : key;
            best = less ? r : best;
        }
        const zen_coo *run = &runs[best];
        size_t c = cur[best];
        if (c >= run->nnz)
            return ZEN_EINVAL;
        m = merge_put(out, m, key, run->val + c * w, w);
        cur[best] = ++c;
        head[best] = c < run->nnz ? run->idx[c] : UINT32_MAX;
    }
    out->nnz = m;
    return ZEN_OK;
}

zen_status zen__coo_merge(const zen_coo *runs, size_t k, zen_coo *out)
{
    if (!out || (k > 0 && !runs))
        return ZEN_EINVAL;
    if (k == 0) {
        out->nnz = 0;
        return ZEN_OK;
    }
    uint32_t w = runs[0].width;
    size_t total = 0;
    for (size_t r = 0; r < k; r++) {
        if (runs[r].width != w || runs[r].rows != runs[0].rows || &runs[r] == out ||
            zen_add_overflow(total, runs[r].nnz, &total))
            return ZEN_EINVAL;
    }
    zen__coo_reset(out, runs[0].rows, w);
    zen_status st = zen__coo_reserve(out, total);
    if (st != ZEN_OK)
        return st;
    if (k <= MERGE_SCAN_MAX && runs[0].rows <= UINT32_MAX)
        return merge_scan_runs(runs, k, total, out);
    return merge_heap_runs(runs, k, out);
}
