/*
 * Variable-size exchanges for the baseline sparse schemes (see xchg.h).
 *
 * alltoallv outline (rank r, n ranks): post n-1 receives of 8-byte sizes, send its n-1 sizes,
 * wait; allocate one buffer for all incoming blocks; post n-1 payload receives, send n-1
 * payloads, wait. Rank r sends sum_p sbytes[p] (p != r) + 8(n-1) bytes. Sends complete without a
 * matching receive (transport contract), so posting everything at once cannot deadlock.
 * Four ranks, rank 0's view (Bij = block rank i sends to rank j):
 *
 *     step 1 (sizes):     r0 -> r1 |B01|, r2 |B02|, r3 |B03|    r0 <- |B10|, |B20|, |B30|
 *     step 2 (payloads):  r0 -> r1 B01,   r2 B02,   r3 B03      r0 <- B10, B20, B30
 *
 * allgatherv is the same with Bij = Bi for every j: each rank sends its block n-1 times.
 */
#include "sparse/wire/xchg.h"

#include <string.h>

#include "common/alloc.h"
#include "common/checked.h"

static size_t pad8(size_t bytes)
{
    return (bytes + 7) & ~(size_t)7;
}

/* Wait for every request in reqs (n entries, NULL skipped); the first error wins, all are freed. */
static zen_status wait_all(zen_comm *comm, const zen_coll *cc, zen_treq **reqs,
                           const size_t *expect, int n)
{
    zen_status first = ZEN_OK;
    for (int p = 0; p < n; p++) {
        if (!reqs[p])
            continue;
        if (first != ZEN_OK) {
            zen__coll_req_drop(comm, reqs[p]);
        } else {
            zen_status st =
                zen__coll_wait(comm, cc, reqs[p], p, expect ? expect[p] : SIZE_MAX, NULL);
            if (st != ZEN_OK)
                first = st;
        }
        reqs[p] = NULL;
    }
    return first;
}

zen_status zen__xchg_alltoallv(zen_comm *comm, const zen_coll *cc, const void *const *sbuf,
                               const size_t *sbytes, size_t max_bytes, uint8_t **rbuf,
                               size_t *rbytes, size_t *roff)
{
    int n = zen_comm_size(comm), me = zen_comm_rank(comm);
    *rbuf = NULL;
    uint64_t *ssize = zen__malloc_array((size_t)n, sizeof *ssize);
    uint64_t *rsize = zen__malloc_array((size_t)n, sizeof *rsize);
    zen_treq **rreq = zen__calloc((size_t)n, sizeof *rreq);
    zen_treq **sreq = zen__calloc((size_t)n, sizeof *sreq);
    size_t *eight = zen__malloc_array((size_t)n, sizeof *eight);
    zen_status st = ZEN_OK;
    if (!ssize || !rsize || !rreq || !sreq || !eight) {
        st = zen__fail(comm, ZEN_ENOMEM, "%s: out of memory for %d peers", cc->op, n);
        goto out;
    }
    for (int p = 0; p < n; p++) {
        ssize[p] = sbytes[p];
        eight[p] = sizeof(uint64_t);
    }
    rsize[me] = ssize[me];
    for (int p = 0; p < n && st == ZEN_OK; p++)
        if (p != me)
            st = zen__coll_irecv(comm, cc, p, &rsize[p], sizeof rsize[p], &rreq[p]);
    for (int d = 1; d < n && st == ZEN_OK; d++) {
        int p = (me + d) % n;
        st = zen__coll_isend(comm, cc, p, &ssize[p], sizeof ssize[p], &sreq[p]);
    }
    zen_status st2 = wait_all(comm, cc, sreq, NULL, n);
    zen_status st3 = wait_all(comm, cc, rreq, eight, n);
    if (st == ZEN_OK)
        st = st2 != ZEN_OK ? st2 : st3;
    if (st != ZEN_OK)
        goto out;

    size_t total = 0;
    for (int p = 0; p < n; p++) {
        if (rsize[p] > max_bytes) {
            st = zen__fail(comm, ZEN_EPROTO,
                           "%s: rank %d announced %llu bytes, more than the %zu possible", cc->op,
                           p, (unsigned long long)rsize[p], max_bytes);
            goto out;
        }
        rbytes[p] = (size_t)rsize[p];
        roff[p] = total;
        if (zen_add_overflow(total, pad8(rbytes[p]), &total)) {
            st = zen__fail(comm, ZEN_ENOMEM, "%s: receive size overflows", cc->op);
            goto out;
        }
    }
    *rbuf = zen__malloc(total ? total : 8);
    if (!*rbuf) {
        st = zen__fail(comm, ZEN_ENOMEM, "%s: cannot allocate %zu receive bytes", cc->op, total);
        goto out;
    }
    if (rbytes[me])
        memcpy(*rbuf + roff[me], sbuf[me], rbytes[me]);
    for (int p = 0; p < n && st == ZEN_OK; p++)
        if (p != me)
            st = zen__coll_irecv(comm, cc, p, *rbuf + roff[p], rbytes[p], &rreq[p]);
    for (int d = 1; d < n && st == ZEN_OK; d++) {
        int p = (me + d) % n;
        st = zen__coll_isend(comm, cc, p, sbuf[p], sbytes[p], &sreq[p]);
    }
    st2 = wait_all(comm, cc, sreq, NULL, n);
    st3 = wait_all(comm, cc, rreq, rbytes, n);
    if (st == ZEN_OK)
        st = st2 != ZEN_OK ? st2 : st3;
out:
    if (st != ZEN_OK) {
        zen__free(*rbuf);
        *rbuf = NULL;
    }
    zen__free(ssize);
    zen__free(rsize);
    zen__free(rreq);
    zen__free(sreq);
    zen__free(eight);
    return st;
}

zen_status zen__xchg_allgatherv(zen_comm *comm, const zen_coll *cc, const void *sbuf, size_t sbytes,
                                size_t max_bytes, uint8_t **rbuf, size_t *rbytes, size_t *roff)
{
    int n = zen_comm_size(comm);
    const void **bufs = zen__malloc_array((size_t)n, sizeof *bufs);
    size_t *sizes = zen__malloc_array((size_t)n, sizeof *sizes);
    zen_status st;
    if (!bufs || !sizes) {
        st = zen__fail(comm, ZEN_ENOMEM, "%s: out of memory for %d peers", cc->op, n);
    } else {
        for (int p = 0; p < n; p++) {
            bufs[p] = sbuf;
            sizes[p] = sbytes;
        }
        st = zen__xchg_alltoallv(comm, cc, bufs, sizes, max_bytes, rbuf, rbytes, roff);
    }
    zen__free(bufs);
    zen__free(sizes);
    return st;
}

void zen__coo_pack(const zen_coo *coo, size_t lo, size_t hi, void *out)
{
    size_t k = hi - lo, w = coo->width;
    uint8_t *o = out;
    if (k == 0)
        return;
    memcpy(o, coo->idx + lo, k * sizeof(uint32_t));
    memcpy(o + k * sizeof(uint32_t), coo->val + lo * w, k * w * sizeof(float));
}

zen_status zen__coo_view(zen_comm *comm, int peer, const uint8_t *buf, size_t bytes, uint64_t rows,
                         uint32_t width, uint64_t lo_row, uint64_t hi_row, zen_coo *view)
{
    size_t entry = zen_coo_wire_bytes(1, width);
    memset(view, 0, sizeof *view);
    view->rows = rows;
    view->width = width;
    if (bytes % entry != 0)
        return zen__fail(comm, ZEN_EPROTO,
                         "sparse: rank %d sent %zu bytes, not a whole number of %zu-byte entries",
                         peer, bytes, entry);
    size_t nnz = bytes / entry;
    view->nnz = nnz;
    view->idx = (uint32_t *)(uintptr_t)buf;
    view->val = (float *)(uintptr_t)(buf + nnz * sizeof(uint32_t));
    for (size_t i = 0; i < nnz; i++) {
        uint32_t x = view->idx[i];
        if (x < lo_row || x >= hi_row || (i > 0 && x <= view->idx[i - 1]))
            return zen__fail(comm, ZEN_EPROTO,
                             "sparse: rank %d sent index %u at position %zu, outside [%llu, %llu) "
                             "or not sorted",
                             peer, x, i, (unsigned long long)lo_row, (unsigned long long)hi_row);
    }
    return ZEN_OK;
}

size_t zen__coo_wire_max(uint64_t rows, uint32_t width)
{
    size_t out;
    if (rows > SIZE_MAX || zen_mul_overflow((size_t)rows, zen_coo_wire_bytes(1, width), &out))
        return SIZE_MAX;
    return out;
}

size_t zen__lower_bound_u32(const uint32_t *idx, size_t nnz, uint64_t bound)
{
    size_t lo = 0, hi = nnz;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (idx[mid] < bound)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

zen_status zen__coo_from_dense(const float *dense, uint64_t rows, uint32_t width, zen_coo *out)
{
    size_t count = 0, w = width;
    for (uint64_t r = 0; r < rows; r++)
        for (size_t c = 0; c < w; c++)
            if (dense[r * w + c] != 0.0f) {
                count++;
                break;
            }
    out->rows = rows;
    out->width = width;
    zen_status st = zen__coo_reserve(out, count);
    if (st != ZEN_OK)
        return st;
    size_t k = 0;
    for (uint64_t r = 0; r < rows; r++) {
        const float *row = dense + r * w;
        size_t c = 0;
        while (c < w && row[c] == 0.0f)
            c++;
        if (c == w)
            continue;
        out->idx[k] = (uint32_t)r;
        memcpy(out->val + k * w, row, w * sizeof(float));
        k++;
    }
    out->nnz = k;
    return ZEN_OK;
}

void zen__dense_average(zen_sparse_ctx *ctx)
{
    if (!ctx->opts || !ctx->opts->average)
        return;
    size_t count = (size_t)ctx->local->rows * ctx->local->width;
    float n = (float)zen_comm_size(ctx->comm);
    for (size_t i = 0; i < count; i++)
        ctx->dense_out[i] /= n;
}

size_t zen__dense_count_rows(const float *dense, uint32_t width, uint64_t lo, uint64_t hi)
{
    /* On the bit patterns, branch-free: a row is zero when every value is +0 or -0, i.e. the OR
     * of its words shifted past the sign bit is 0 (NaN counts as non-zero, as != 0.0f does). A
     * float compare per value with an early exit per row cost more than the rest of a
     * low-density ALLGATHER. */
    size_t nnz = 0, w = width;
    const unsigned char *bytes = (const unsigned char *)dense;
    for (uint64_t r = lo; r < hi; r++) {
        uint32_t any = 0;
        for (size_t c = 0; c < w; c++) {
            uint32_t word;
            memcpy(&word, bytes + (r * w + c) * sizeof(float), sizeof word);
            any |= word;
        }
        nnz += (any << 1) != 0;
    }
    return nnz;
}

/* A row in several runs is counted once (a bitmap of the rows seen); without memory for the
 * bitmap, the whole-vector scan. */
size_t zen__dense_count_runs(const float *dense, uint64_t rows, uint32_t width, const zen_coo *runs,
                             int n)
{
    uint64_t *seen = zen__calloc((size_t)(rows / 64 + 1), sizeof *seen);
    if (!seen)
        return zen__dense_count_rows(dense, width, 0, rows);
    size_t nnz = 0;
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < runs[p].nnz; i++) {
            uint32_t r = runs[p].idx[i];
            uint64_t bit = 1ull << (r % 64);
            if (seen[r / 64] & bit)
                continue;
            seen[r / 64] |= bit;
            nnz += zen__dense_count_rows(dense, width, r, (uint64_t)r + 1);
        }
    zen__free(seen);
    return nnz;
}

void zen__dense_finish(zen_sparse_ctx *ctx)
{
    zen__dense_average(ctx);
    ctx->stats->nnz_out =
        zen__dense_count_rows(ctx->dense_out, ctx->local->width, 0, ctx->local->rows);
}
