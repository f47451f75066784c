/*
 * Calibration of the compute model (cost.h, zen_cpu_model): time the kernels the schemes run, on
 * this machine, and divide by their units.
 *
 * Each kernel runs on data of the size the benchmarks use (a 2^19-row tensor, tens of thousands
 * of non-zero rows; copies and reductions over 64 MiB, beyond the caches, like the dense vector of
 * the benchmarks), once to warm up and then CAL_REPS times; the constant is the median. Times are
 * the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), not wall time: the model divides CPU work by
 * the share of a core a rank gets, so the constants must not already contain the waits of a
 * loaded machine. The index kernels run at width 1, so their constants are per index; the model
 * adds the values as copied bytes. TCP: a loopback connection between two threads of this
 * process, CPU time of the whole process (sender and receiver) per byte moved.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/stats.h"
#include "sparse/model/cost.h"
#include "sparse/wire/bitmap.h"
#include "sparse/wire/hier_hash.h"
#include "sparse/wire/universe.h"

#define CAL_REPS      5
#define CAL_ROWS      (1u << 19)
#define CAL_NNZ       65536u
#define CAL_OWNERS    8u
#define CAL_BIG_BYTES (64u << 20)
#define CAL_TCP_BYTES (64u << 20)
#define CAL_TCP_CHUNK (1u << 20)

static double cpu_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Shared inputs: random indices below CAL_ROWS, unit values, big buffers. */
typedef struct cal_data {
    uint32_t *idx; /* CAL_NNZ random rows */
    float *val;    /* CAL_NNZ ones */
    zen_coo runs[CAL_OWNERS];
    float *big_a, *big_b;
    const zen_universe *uni;
    zen_coo owned; /* every other row of U_0, sorted */
} cal_data;

typedef zen_status (*cal_kernel)(cal_data *d);

static zen_status k_sort(cal_data *d)
{
    zen_sparse_tensor t = { CAL_ROWS, 1, CAL_NNZ, ZEN_INDEX_U32, d->idx, ZEN_F32, d->val };
    zen_coo out = { 0 };
    zen_status st = zen__coo_from_tensor(&t, &out, NULL);
    zen__coo_release(&out);
    return st;
}

static zen_status k_hash(cal_data *d)
{
    static const uint64_t seeds[4] = { 1, 2, 3, 4 };
    zen_hh_config cfg = zen__hh_config_default(CAL_OWNERS, seeds);
    cfg.method = ZEN_HH_COUNT; /* what BALANCED runs on one thread (balanced.c) */
    zen_hh_result r;
    zen_status st = zen__hh_partition(&cfg, d->idx, CAL_NNZ, &r);
    if (st == ZEN_OK)
        zen__hh_result_free(&r);
    return st;
}

static zen_status k_merge(cal_data *d)
{
    zen_coo out = { 0 };
    zen_status st = zen__coo_merge(d->runs, CAL_OWNERS, &out);
    zen__coo_release(&out);
    return st;
}

/* The two-way linear merge of hierarchical.c (same loop, indices and one value per row). */
static zen_status k_merge2(cal_data *d)
{
    const zen_coo *a = &d->runs[0], *b = &d->runs[1];
    zen_coo out = { CAL_ROWS, 1, 0, 0, NULL, NULL };
    zen_status st = zen__coo_reserve(&out, a->nnz + b->nnz);
    size_t i = 0, j = 0, k = 0;
    while (st == ZEN_OK && (i < a->nnz || j < b->nnz)) {
        if (j == b->nnz || (i < a->nnz && a->idx[i] < b->idx[j])) {
            out.idx[k] = a->idx[i];
            out.val[k] = a->val[i++];
        } else if (i == a->nnz || b->idx[j] < a->idx[i]) {
            out.idx[k] = b->idx[j];
            out.val[k] = b->val[j++];
        } else {
            out.idx[k] = a->idx[i];
            out.val[k] = a->val[i++] + b->val[j++];
        }
        k++;
    }
    out.nnz = k;
    zen__coo_release(&out);
    return st;
}

/* Encode owner 0's half-full sum as a bitmap and decode it again. */
static zen_status k_bitmap(cal_data *d)
{
    size_t ulen = d->uni->offsets[1] - d->uni->offsets[0], bytes = 0;
    uint32_t format = 0;
    zen_status st = zen__hb_plan(&d->owned, ulen, &format, &bytes);
    if (st != ZEN_OK || format != ZEN_HB_BITMAP)
        return st != ZEN_OK ? st : ZEN_EINVAL;
    void *blob = zen__malloc(bytes);
    if (!blob)
        return ZEN_ENOMEM;
    zen_coo out = { CAL_ROWS, 1, 0, 0, NULL, NULL };
    st = zen__hb_encode(&d->owned, d->uni, 0, format, blob, bytes);
    if (st == ZEN_OK)
        st = zen__hb_decode_coo(blob, bytes, d->uni, 0, 1, 1.0f, &out);
    zen__coo_release(&out);
    zen__free(blob);
    return st;
}

static zen_status k_copy(cal_data *d)
{
    memcpy(d->big_a, d->big_b, CAL_BIG_BYTES);
    return ZEN_OK;
}

static zen_status k_reduce(cal_data *d)
{
    size_t count = CAL_BIG_BYTES / sizeof(float);
    for (size_t i = 0; i < count; i++)
        d->big_a[i] += d->big_b[i];
    return ZEN_OK;
}

/* Median over CAL_REPS runs (after one warm-up) of the thread CPU time of k, divided by units. */
static zen_status time_kernel(cal_kernel k, cal_data *d, double units, double *ns_per_unit)
{
    double t[CAL_REPS];
    zen_status st = k(d);
    for (int r = 0; r < CAL_REPS && st == ZEN_OK; r++) {
        double t0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
        st = k(d);
        t[r] = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
    }
    if (st == ZEN_OK)
        *ns_per_unit = zen__median_inplace(t, CAL_REPS) / units;
    return st;
}

typedef struct tcp_sink {
    int fd;
    size_t got;
} tcp_sink;

static void *tcp_drain(void *arg)
{
    tcp_sink *s = arg;
    char *buf = zen__malloc(CAL_TCP_CHUNK);
    if (!buf)
        return NULL;
    for (;;) {
        ssize_t r = recv(s->fd, buf, CAL_TCP_CHUNK, 0);
        if (r <= 0)
            break; /* end of stream, or the 10 s receive deadline */
        s->got += (size_t)r;
    }
    zen__free(buf);
    return NULL;
}

/* Connected loopback TCP pair; every blocking call has a 10 s deadline. */
static zen_status tcp_pair(int *tx, int *rx)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    struct timeval deadline = { .tv_sec = 10 };
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    *tx = *rx = -1;
    if (l < 0)
        return ZEN_EIO;
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &len) != 0 ||
        (*tx = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
        setsockopt(*tx, SOL_SOCKET, SO_SNDTIMEO, &deadline, sizeof deadline) != 0 ||
        setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &deadline, sizeof deadline) != 0 ||
        connect(*tx, (struct sockaddr *)&a, sizeof a) != 0 || (*rx = accept(l, NULL, NULL)) < 0 ||
        setsockopt(*rx, SOL_SOCKET, SO_RCVTIMEO, &deadline, sizeof deadline) != 0) {
        close(l);
        if (*tx >= 0)
            close(*tx);
        if (*rx >= 0)
            close(*rx);
        *tx = *rx = -1;
        return ZEN_EIO;
    }
    setsockopt(*tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    close(l);
    return ZEN_OK;
}

/* CPU of both ends per byte through loopback TCP (median of CAL_REPS transfers). */
static zen_status time_tcp(double *ns_per_byte)
{
    char *buf = zen__calloc(CAL_TCP_CHUNK, 1);
    if (!buf)
        return ZEN_ENOMEM;
    double t[CAL_REPS];
    zen_status st = ZEN_OK;
    for (int r = 0; r < CAL_REPS && st == ZEN_OK; r++) {
        int tx, rx;
        if ((st = tcp_pair(&tx, &rx)) != ZEN_OK)
            break;
        tcp_sink sink = { rx, 0 };
        pthread_t th;
        double t0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
        if (pthread_create(&th, NULL, tcp_drain, &sink) != 0) {
            close(tx);
            close(rx);
            st = ZEN_EIO;
            break;
        }
        size_t sent = 0;
        while (sent < CAL_TCP_BYTES) {
            ssize_t w = send(tx, buf, CAL_TCP_CHUNK, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            sent += (size_t)w;
        }
        shutdown(tx, SHUT_WR);
        pthread_join(th, NULL);
        t[r] = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) - t0;
        close(tx);
        close(rx);
        if (sent != CAL_TCP_BYTES || sink.got != CAL_TCP_BYTES)
            st = ZEN_EIO;
    }
    zen__free(buf);
    if (st == ZEN_OK)
        *ns_per_byte = zen__median_inplace(t, CAL_REPS) / CAL_TCP_BYTES;
    return st;
}

static void cal_free(cal_data *d)
{
    zen__free(d->idx);
    zen__free(d->val);
    for (unsigned j = 0; j < CAL_OWNERS; j++)
        zen__coo_release(&d->runs[j]);
    zen__free(d->big_a);
    zen__free(d->big_b);
    zen__coo_release(&d->owned);
    if (d->uni)
        zen__universe_put(d->uni);
}

static zen_status cal_init(cal_data *d)
{
    uint64_t seed = 42;
    d->idx = zen__malloc_array(CAL_NNZ, sizeof *d->idx);
    d->val = zen__malloc_array(CAL_NNZ, sizeof *d->val);
    d->big_a = zen__calloc(CAL_BIG_BYTES, 1);
    d->big_b = zen__calloc(CAL_BIG_BYTES, 1);
    if (!d->idx || !d->val || !d->big_a || !d->big_b)
        return ZEN_ENOMEM;
    for (size_t i = 0; i < CAL_NNZ; i++) {
        d->idx[i] = (uint32_t)(splitmix(&seed) % CAL_ROWS);
        d->val[i] = 1.0f;
    }
    /* real pages: untouched calloc memory reads as the one shared zero page, always cached */
    for (size_t i = 0; i < CAL_BIG_BYTES / sizeof(float); i++) {
        d->big_a[i] = (float)(i & 1023);
        d->big_b[i] = 1.0f;
    }
    /* CAL_OWNERS sorted runs of CAL_NNZ / CAL_OWNERS rows each: the coalesced slices. */
    size_t per = CAL_NNZ / CAL_OWNERS;
    for (unsigned j = 0; j < CAL_OWNERS; j++) {
        zen_sparse_tensor t = {
            CAL_ROWS, 1, per, ZEN_INDEX_U32, d->idx + j * per, ZEN_F32, d->val
        };
        zen_status st = zen__coo_from_tensor(&t, &d->runs[j], NULL);
        if (st != ZEN_OK)
            return st;
    }
    zen_status st = zen__universe_get(CAL_ROWS, CAL_OWNERS, 7, &d->uni);
    if (st == ZEN_OK)
        st = zen__universe_members(d->uni);
    if (st != ZEN_OK)
        return st;
    size_t lo = d->uni->offsets[0], hi = d->uni->offsets[1];
    d->owned.rows = CAL_ROWS;
    d->owned.width = 1;
    if ((st = zen__coo_reserve(&d->owned, (hi - lo + 1) / 2)) != ZEN_OK)
        return st;
    for (size_t i = lo; i < hi; i += 2) {
        d->owned.idx[d->owned.nnz] = d->uni->members[i];
        d->owned.val[d->owned.nnz++] = 1.0f;
    }
    return ZEN_OK;
}

zen_status zen_sparse_cpu_calibrate(zen_cpu_model *cpu)
{
    if (!cpu)
        return ZEN_EINVAL;
    cal_data d;
    memset(&d, 0, sizeof d);
    memset(cpu, 0, sizeof *cpu);
    cpu->share = 1;
    zen_status st = cal_init(&d);
    /* the bitmap's work is per row of the sum (the words between them are 64 rows at once) */
    double sum_rows = (double)d.owned.nnz, heap = 3; /* log2 CAL_OWNERS levels */
    if (st == ZEN_OK)
        st = time_kernel(k_sort, &d, CAL_NNZ, &cpu->sort);
    if (st == ZEN_OK)
        st = time_kernel(k_hash, &d, CAL_NNZ, &cpu->hash);
    if (st == ZEN_OK)
        st = time_kernel(k_merge, &d, CAL_NNZ * heap, &cpu->merge);
    if (st == ZEN_OK)
        st = time_kernel(k_merge2, &d, (double)(d.runs[0].nnz + d.runs[1].nnz), &cpu->merge2);
    if (st == ZEN_OK)
        st = time_kernel(k_bitmap, &d, 2 * sum_rows, &cpu->bitmap); /* encode + decode */
    if (st == ZEN_OK)
        st = time_kernel(k_copy, &d, CAL_BIG_BYTES, &cpu->copy_byte);
    if (st == ZEN_OK)
        st = time_kernel(k_reduce, &d, CAL_BIG_BYTES, &cpu->reduce_byte);
    if (st == ZEN_OK)
        st = time_tcp(&cpu->wire_byte);
    cal_free(&d);
    return st;
}
