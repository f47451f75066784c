/*
 * The dense-collective matrix (see coll_matrix.h). Inputs are a pure function of (seed, rank,
 * global index), so each rank builds its own input and computes every expected output element by
 * reducing the n ranks' inputs itself, in rank order:
 *  - integers: exact, with the same two's-complement wrap-around the library promises;
 *  - f32/f64: |got - want| <= 1e-5 (f64: 1e-12) * sum |x_r| (prod: * n * |want|), since the
 *    algorithms reduce in a different order than the reference;
 *  - bf16: inputs are exact in bf16 (k/8 or {0.5 .. 1.5}); each reduction step rounds to 8 bits,
 *    so the bound is n * 2^-7 * sum |x_r| (prod: n * 2^-7 * |want|);
 *  - min and max are exact for every dtype.
 * A failing element is printed with its case and the rank returns an error, which fails the test.
 */
#include "coll_matrix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define ALLTOALLV_STRIDE (1u << 20) /* key space of one destination block */

typedef struct mcase {
    const char *coll;
    zen_dtype dt;
    zen_op op;
    size_t count;
    int inplace;
    int root;
    uint64_t seed;
} mcase;

typedef struct want {
    double f;
    double tol;
    int64_t i;
} want;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    return x ^ (x >> 33);
}

static uint64_t key(uint64_t seed, int rank, size_t i)
{
    return mix(seed ^ mix(((uint64_t)rank << 40) ^ (uint64_t)i));
}

static int is_int(zen_dtype dt)
{
    return dt == ZEN_I32 || dt == ZEN_I64;
}

static double fval(zen_dtype dt, zen_op op, uint64_t k)
{
    if (op == ZEN_PROD)
        return 0.5 + 0.25 * (double)(k % 5);
    if (dt == ZEN_BF16)
        return ((double)(k % 129) - 64.0) / 8.0;
    double v = 2.0 * ((double)(k >> 11) / 9007199254740992.0) - 1.0;
    return dt == ZEN_F32 ? (double)(float)v : v;
}

static int64_t ival(uint64_t k)
{
    return (int64_t)(k % 2001) - 1000;
}

static void put(void *buf, size_t i, zen_dtype dt, zen_op op, uint64_t k)
{
    switch (dt) {
    case ZEN_F32:
        ((float *)buf)[i] = (float)fval(dt, op, k);
        break;
    case ZEN_F64:
        ((double *)buf)[i] = fval(dt, op, k);
        break;
    case ZEN_I32:
        ((int32_t *)buf)[i] = (int32_t)ival(k);
        break;
    case ZEN_I64:
        ((int64_t *)buf)[i] = ival(k);
        break;
    default:
        ((uint16_t *)buf)[i] = zen_f32_to_bf16((float)fval(dt, op, k));
        break;
    }
}

static int64_t geti(const void *buf, size_t i, zen_dtype dt)
{
    return dt == ZEN_I32 ? ((const int32_t *)buf)[i] : ((const int64_t *)buf)[i];
}

/* Expected reduction over all n ranks of global element g. */
static want reference(const mcase *c, int n, size_t g)
{
    want w = { 0, 0, 0 };
    if (is_int(c->dt)) {
        uint64_t acc = c->op == ZEN_PROD ? 1 : 0;
        int64_t m = 0;
        for (int r = 0; r < n; r++) {
            int64_t v = ival(key(c->seed, r, g));
            if (c->op == ZEN_PROD)
                acc *= (uint64_t)v;
            else
                acc += (uint64_t)v;
            if (r == 0 || (c->op == ZEN_MIN ? v < m : v > m))
                m = v;
        }
        int64_t s = c->dt == ZEN_I32 ? (int64_t)(int32_t)(uint32_t)acc : (int64_t)acc;
        w.i = (c->op == ZEN_MIN || c->op == ZEN_MAX) ? m : c->op == ZEN_AVG ? s / n : s;
        return w;
    }
    double acc = c->op == ZEN_PROD ? 1.0 : 0.0, mag = 0.0, m = 0.0;
    for (int r = 0; r < n; r++) {
        double v = fval(c->dt, c->op, key(c->seed, r, g));
        if (c->dt == ZEN_BF16)
            v = zen_bf16_to_f32(zen_f32_to_bf16((float)v));
        acc = c->op == ZEN_PROD ? acc * v : acc + v;
        mag += fabs(v);
        if (r == 0 || (c->op == ZEN_MIN ? v < m : v > m))
            m = v;
    }
    double rel = c->dt == ZEN_F64 ? 1e-12 : c->dt == ZEN_F32 ? 1e-5 : n / 128.0;
    if (c->op == ZEN_MIN || c->op == ZEN_MAX) {
        w.f = m;
    } else if (c->op == ZEN_PROD) {
        w.f = acc;
        w.tol = rel * n * fabs(acc);
    } else {
        w.f = c->op == ZEN_AVG ? acc / n : acc;
        w.tol = rel * (c->op == ZEN_AVG ? mag / n : mag) + 1e-30;
    }
    return w;
}

static void describe(zen_comm *comm, const mcase *c, size_t i, const char *what)
{
    fprintf(stderr,
            "rank %d of %d: %s %s/%s count %zu %s root %d: element %zu: %s (last error: %s)\n",
            zen_comm_rank(comm), zen_comm_size(comm), c->coll, zen_dtype_name(c->dt),
            zen_op_name(c->op), c->count, c->inplace ? "in place" : "out of place", c->root, i,
            what, zen_comm_last_error(comm));
}

/* Check len reduced elements of buf against global elements g0 .. g0+len-1. */
static int check_reduced(zen_comm *comm, const mcase *c, const void *buf, size_t len, size_t g0)
{
    int n = zen_comm_size(comm);
    for (size_t i = 0; i < len; i++) {
        want w = reference(c, n, g0 + i);
        char msg[160];
        if (is_int(c->dt)) {
            int64_t got = geti(buf, i, c->dt);
            if (got == w.i)
                continue;
            snprintf(msg, sizeof msg, "got %lld want %lld", (long long)got, (long long)w.i);
        } else {
            double got = zt_dtype_get(buf, c->dt, i);
            if (fabs(got - w.f) <= w.tol)
                continue;
            snprintf(msg, sizeof msg, "got %.9g want %.9g (tol %.3g)", got, w.f, w.tol);
        }
        describe(comm, c, i, msg);
        return 0;
    }
    return 1;
}

/* Check len copied elements of buf against rank src's input keys k0 .. k0+len-1. */
static int check_copied(zen_comm *comm, const mcase *c, const void *buf, size_t len, int src,
                        size_t k0)
{
    size_t es = zen_dtype_size(c->dt);
    unsigned char tmp[8];
    for (size_t i = 0; i < len; i++) {
        put(tmp, 0, c->dt, c->op, key(c->seed, src, k0 + i));
        if (memcmp(tmp, (const unsigned char *)buf + i * es, es) != 0) {
            char msg[96];
            snprintf(msg, sizeof msg, "does not hold rank %d's element %zu", src, k0 + i);
            describe(comm, c, i, msg);
            return 0;
        }
    }
    return 1;
}

static void fill(void *buf, const mcase *c, int rank, size_t k0, size_t len)
{
    for (size_t i = 0; i < len; i++)
        put(buf, i, c->dt, c->op, key(c->seed, rank, k0 + i));
}

static void *xalloc(size_t elems, zen_dtype dt)
{
    size_t bytes = elems * zen_dtype_size(dt);
    void *p = malloc(bytes ? bytes : 1);
    if (p)
        memset(p, 0xa5, bytes);
    return p;
}

#define MCHECK(comm, cond) \
    do {                   \
        if (!(cond)) {     \
            ok = 0;        \
            goto out;      \
        }                  \
    } while (0)

#define CALL(comm, c, expr)                             \
    do {                                                \
        zen_status st_ = (expr);                        \
        if (st_ != ZEN_OK) {                            \
            describe(comm, c, 0, zen_status_name(st_)); \
            ok = 0;                                     \
            goto out;                                   \
        }                                               \
    } while (0)

static int run_allreduce(zen_comm *comm, const mcase *c, zen_allreduce_algo algo)
{
    int r = zen_comm_rank(comm), ok = 1;
    void *in = xalloc(c->count, c->dt), *out = c->inplace ? in : xalloc(c->count, c->dt);
    MCHECK(comm, in && out);
    fill(in, c, r, 0, c->count);
    CALL(comm, c, zen_allreduce_with(comm, in, out, c->count, c->dt, c->op, algo));
    MCHECK(comm, check_reduced(comm, c, out, c->count, 0));
    if (!c->inplace)
        MCHECK(comm, check_copied(comm, c, in, c->count, r, 0)); /* input untouched */
out:
    if (out != in)
        free(out);
    free(in);
    return ok;
}

/* reduce_scatterv with block j of counts[j] elements; equal counts use zen_reduce_scatter. */
static int run_reduce_scatter(zen_comm *comm, const mcase *c, const size_t *counts, int equal)
{
    int n = zen_comm_size(comm), r = zen_comm_rank(comm), ok = 1;
    size_t total = 0, mine = 0;
    for (int j = 0; j < n; j++) {
        if (j == r)
            mine = total;
        total += counts[j];
    }
    void *in = xalloc(total, c->dt), *out = c->inplace ? in : xalloc(counts[r], c->dt);
    MCHECK(comm, in && out);
    fill(in, c, r, 0, total);
    if (equal)
        CALL(comm, c, zen_reduce_scatter(comm, in, out, counts[0], c->dt, c->op));
    else
        CALL(comm, c, zen_reduce_scatterv(comm, in, out, counts, c->dt, c->op));
    MCHECK(comm, check_reduced(comm, c, out, counts[r], mine));
out:
    if (out != in)
        free(out);
    free(in);
    return ok;
}

static int run_reduce(zen_comm *comm, const mcase *c)
{
    int r = zen_comm_rank(comm), ok = 1, root = c->root;
    void *in = xalloc(c->count, c->dt);
    void *out = r != root ? NULL : c->inplace ? in : xalloc(c->count, c->dt);
    MCHECK(comm, in && (r != root || out));
    fill(in, c, r, 0, c->count);
    CALL(comm, c, zen_reduce(comm, in, out, c->count, c->dt, c->op, root));
    if (r == root)
        MCHECK(comm, check_reduced(comm, c, out, c->count, 0));
out:
    if (out != in)
        free(out);
    free(in);
    return ok;
}

static int run_allgather(zen_comm *comm, const mcase *c)
{
    int n = zen_comm_size(comm), r = zen_comm_rank(comm), ok = 1;
    size_t cnt = c->count;
    char *out = xalloc((size_t)n * cnt, c->dt), *in = NULL;
    size_t es = zen_dtype_size(c->dt);
    MCHECK(comm, out);
    in = c->inplace ? out + (size_t)r * cnt * es : xalloc(cnt, c->dt);
    MCHECK(comm, in);
    fill(in, c, r, 0, cnt);
    CALL(comm, c, zen_allgather(comm, in, out, cnt, c->dt));
    for (int j = 0; j < n; j++)
        MCHECK(comm, check_copied(comm, c, out + (size_t)j * cnt * es, cnt, j, 0));
out:
    if (!c->inplace)
        free(in);
    free(out);
    return ok;
}

/* allgatherv: rank j contributes (count + j) / (j % 3 + 1) elements (rank 1: none when n > 2),
 * blocks in reverse rank order with a one-element gap that must stay untouched. */
static int run_allgatherv(zen_comm *comm, const mcase *c)
{
    int n = zen_comm_size(comm), r = zen_comm_rank(comm), ok = 1;
    size_t es = zen_dtype_size(c->dt), counts[64], displs[64], off = 0;
    for (int j = n - 1; j >= 0; j--) {
        counts[j] = (n > 2 && j == 1) ? 0 : (c->count + (size_t)j) / (size_t)(j % 3 + 1);
        displs[j] = off;
        off += counts[j] + 1;
    }
    char *out = xalloc(off, c->dt), *in = NULL;
    MCHECK(comm, out);
    in = c->inplace ? out + displs[r] * es : xalloc(counts[r], c->dt);
    MCHECK(comm, in);
    fill(in, c, r, 0, counts[r]);
    CALL(comm, c, zen_allgatherv(comm, in, counts[r], out, counts, displs, c->dt));
    for (int j = 0; j < n; j++) {
        MCHECK(comm, check_copied(comm, c, out + displs[j] * es, counts[j], j, 0));
        const unsigned char *gap = (unsigned char *)out + (displs[j] + counts[j]) * es;
        for (size_t b = 0; b < es; b++)
            MCHECK(comm, gap[b] == 0xa5);
    }
out:
    if (!c->inplace)
        free(in);
    free(out);
    return ok;
}

static int run_broadcast(zen_comm *comm, const mcase *c)
{
    int r = zen_comm_rank(comm), ok = 1;
    void *buf = xalloc(c->count, c->dt);
    MCHECK(comm, buf);
    if (r == c->root)
        fill(buf, c, r, 0, c->count);
    CALL(comm, c, zen_broadcast(comm, buf, c->count, c->dt, c->root));
    MCHECK(comm, check_copied(comm, c, buf, c->count, c->root, 0));
out:
    free(buf);
    return ok;
}

static int run_gather(zen_comm *comm, const mcase *c)
{
    int n = zen_comm_size(comm), r = zen_comm_rank(comm), ok = 1;
    size_t es = zen_dtype_size(c->dt), cnt = c->count;
    char *out = r == c->root ? xalloc((size_t)n * cnt, c->dt) : NULL, *in = NULL;
    MCHECK(comm, r != c->root || out);
    in = (r == c->root && c->inplace) ? out + (size_t)r * cnt * es : xalloc(cnt, c->dt);
    MCHECK(comm, in);
    fill(in, c, r, 0, cnt);
    CALL(comm, c, zen_gather(comm, in, out, cnt, c->dt, c->root));
    if (r == c->root)
        for (int j = 0; j < n; j++)
            MCHECK(comm, check_copied(comm, c, out + (size_t)j * cnt * es, cnt, j, 0));
out:
    if (!(r == c->root && c->inplace))
        free(in);
    free(out);
    return ok;
}

/* scatter: the root's array holds its keys 0 .. n*count; rank j gets keys j*count .. (in place
 * at the root its block stays in its slot). sendbuf is NULL off the root. */
static int run_scatter(zen_comm *comm, const mcase *c)
{
    int n = zen_comm_size(comm), r = zen_comm_rank(comm), ok = 1;
    size_t es = zen_dtype_size(c->dt), cnt = c->count;
    char *in = r == c->root ? xalloc((size_t)n * cnt, c->dt) : NULL, *out = NULL;
    MCHECK(comm, r != c->root || in);
    if (in)
        fill(in, c, r, 0, (size_t)n * cnt);
    out = (r == c->root && c->inplace) ? in + (size_t)r * cnt * es : xalloc(cnt, c->dt);
    MCHECK(comm, out);
    CALL(comm, c, zen_scatter(comm, in, out, cnt, c->dt, c->root));
    MCHECK(comm, check_copied(comm, c, out, cnt, c->root, (size_t)r * cnt));
out:
    if (!(r == c->root && c->inplace))
        free(out);
    free(in);
    return ok;
}

/* alltoall: the block rank i sends to rank j holds keys j*count .. of rank i. */
static int run_alltoall(zen_comm *comm, const mcase *c)
{
    int n = zen_comm_size(comm), r = zen_comm_rank(comm), ok = 1;
    size_t es = zen_dtype_size(c->dt), cnt = c->count;
    char *in = xalloc((size_t)n * cnt, c->dt),
         *out = c->inplace ? in : xalloc((size_t)n * cnt, c->dt);
    MCHECK(comm, in && out);
    fill(in, c, r, 0, (size_t)n * cnt);
    CALL(comm, c, zen_alltoall(comm, in, out, cnt, c->dt));
    for (int j = 0; j < n; j++)
        MCHECK(comm, check_copied(comm, c, out + (size_t)j * cnt * es, cnt, j, (size_t)r * cnt));
out:
    if (out != in)
        free(out);
    free(in);
    return ok;
}

static size_t a2av_count(const mcase *c, int from, int to)
{
    return (c->count * (size_t)((from + 2 * to) % 3)) / 2;
}

static int run_alltoallv(zen_comm *comm, const mcase *c)
{
    int n = zen_comm_size(comm), r = zen_comm_rank(comm), ok = 1;
    size_t es = zen_dtype_size(c->dt), sc[64], sd[64], rc[64], rd[64], stot = 0, rtot = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = a2av_count(c, r, j);
        sd[j] = stot;
        stot += sc[j];
        rc[j] = a2av_count(c, j, r);
        rd[j] = rtot;
        rtot += rc[j];
    }
    char *in = xalloc(stot, c->dt), *out = xalloc(rtot, c->dt);
    MCHECK(comm, in && out);
    for (int j = 0; j < n; j++)
        for (size_t e = 0; e < sc[j]; e++)
            put(in, sd[j] + e, c->dt, c->op, key(c->seed, r, (size_t)j * ALLTOALLV_STRIDE + e));
    CALL(comm, c, zen_alltoallv(comm, in, sc, sd, out, rc, rd, c->dt));
    for (int j = 0; j < n; j++)
        MCHECK(comm,
               check_copied(comm, c, out + rd[j] * es, rc[j], j, (size_t)r * ALLTOALLV_STRIDE));
out:
    free(in);
    free(out);
    return ok;
}

typedef struct matrix_arg {
    unsigned parts;
} matrix_arg;

static const zen_dtype all_dtypes[] = { ZEN_F32, ZEN_F64, ZEN_I32, ZEN_I64, ZEN_BF16 };
static const zen_op all_ops[] = { ZEN_SUM, ZEN_PROD, ZEN_MIN, ZEN_MAX, ZEN_AVG };

static zen_status matrix_rank(zen_comm *comm, void *argp)
{
    const matrix_arg *arg = argp;
    int n = zen_comm_size(comm);
    size_t counts[5] = { 0, 1, (size_t)n - 1, 1031, 4096 };
    uint64_t serial = 0;
    if (n > 64)
        return ZEN_EINVAL;
    for (int ci = 0; ci < 5; ci++) {
        if (ci == 2 && n <= 2)
            continue; /* n - 1 is 0 or 1: already covered */
        for (int di = 0; di < 5; di++) {
            for (int oi = 0; oi < 5; oi++) {
                for (int inplace = 0; inplace < 2; inplace++) {
                    mcase c = { "",           all_dtypes[di],
                                all_ops[oi],  counts[ci],
                                inplace,      (int)((counts[ci] + (size_t)oi) % (size_t)n),
                                mix(++serial) };
                    if (arg->parts & ZT_COLL_ALLREDUCE) {
                        static const zen_allreduce_algo algos[] = { ZEN_ALLREDUCE_RING,
                                                                    ZEN_ALLREDUCE_RHD,
                                                                    ZEN_ALLREDUCE_AUTO };
                        static const char *const names[] = { "allreduce/ring", "allreduce/rhd",
                                                             "allreduce/auto" };
                        for (int a = 0; a < 3; a++) {
                            c.coll = names[a];
                            if (!run_allreduce(comm, &c, algos[a]))
                                return ZEN_EINTERNAL;
                        }
                    }
                    if (arg->parts & ZT_COLL_REDUCE_SCATTER) {
                        size_t blocks[64];
                        for (int j = 0; j < n; j++)
                            blocks[j] = c.count;
                        c.coll = "reduce_scatter";
                        if (!run_reduce_scatter(comm, &c, blocks, 1))
                            return ZEN_EINTERNAL;
                        for (int j = 0; j < n; j++)
                            blocks[j] = (j % 3 == 1) ? 0 : (c.count + (size_t)j) / (size_t)(j + 1);
                        c.coll = "reduce_scatterv";
                        if (!run_reduce_scatter(comm, &c, blocks, 0))
                            return ZEN_EINTERNAL;
                    }
                    if (arg->parts & ZT_COLL_REDUCE) {
                        c.coll = "reduce";
                        if (!run_reduce(comm, &c))
                            return ZEN_EINTERNAL;
                    }
                    /* data movement: every dtype, one op (it only picks the input values) */
                    if ((arg->parts & ZT_COLL_GATHERS) && oi == 0) {
                        c.coll = "allgather";
                        if (!run_allgather(comm, &c))
                            return ZEN_EINTERNAL;
                        c.coll = "allgatherv";
                        if (!run_allgatherv(comm, &c))
                            return ZEN_EINTERNAL;
                        c.coll = "gather";
                        if (!run_gather(comm, &c))
                            return ZEN_EINTERNAL;
                        c.coll = "scatter";
                        if (!run_scatter(comm, &c))
                            return ZEN_EINTERNAL;
                        c.coll = "alltoall";
                        if (!run_alltoall(comm, &c))
                            return ZEN_EINTERNAL;
                        if (!inplace) {
                            c.coll = "broadcast";
                            if (!run_broadcast(comm, &c))
                                return ZEN_EINTERNAL;
                            c.coll = "alltoallv";
                            if (!run_alltoallv(comm, &c))
                                return ZEN_EINTERNAL;
                            ZT_CHECK(comm, zen_barrier(comm) == ZEN_OK);
                        }
                    }
                }
            }
        }
    }
    if (arg->parts & ZT_COLL_LARGE) {
        mcase c = { "allreduce/ring large", ZEN_F32, ZEN_SUM, (1u << 20) + 3, 1, 0, mix(++serial) };
        if (!run_allreduce(comm, &c, ZEN_ALLREDUCE_RING))
            return ZEN_EINTERNAL;
        c.coll = "allreduce/rhd large";
        c.inplace = 0;
        c.seed = mix(++serial);
        if (!run_allreduce(comm, &c, ZEN_ALLREDUCE_RHD))
            return ZEN_EINTERNAL;
    }
    return ZEN_OK;
}

void zt_coll_matrix_env(void)
{
    setenv("ZEN_RING_CHUNK_BYTES", "1024", 1);
    setenv("ZEN_COLL_LONG_BYTES", "2048", 1);
}

void zt_coll_matrix(zt_runner runner, int nranks, unsigned parts)
{
    matrix_arg arg = { parts };
    runner(nranks, matrix_rank, &arg);
}
