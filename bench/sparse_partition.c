/*
 * sparse_partition: single-node throughput of BALANCED's local steps, in indices per second.
 *
 *   partition  hierarchical hashing (Algorithm 1) of nnz unique sorted indices into n owners,
 *              one thread and T threads, and the counting partition for comparison
 *   encode     hash-bitmap/COO encoding of every owner's share (the pull-side encoding of
 *              the same indices, as if each owner had aggregated exactly them)
 *   decode     dense decode of all owners' blobs
 *
 * Usage: sparse_partition nnz [density] [owners] [threads] [reps] [only]
 *   (no arguments prints this usage and exits 2); defaults 0.01 16 2 5; rows = nnz / density. Reports the best of reps runs.
 *   only = "hash" runs just the one-thread hash partition and the encode (what BALANCED's local
 *   work costs), so that instruction counts can be taken with
 *   valgrind --tool=callgrind --toggle-collect=zen__hh_partition --toggle-collect=zen__hb_encode
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "sparse/wire/bitmap.h"
#include "sparse/wire/coo.h"
#include "sparse/wire/hier_hash.h"
#include "sparse/wire/universe.h"

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double best_partition(const zen_hh_config *cfg, const uint32_t *idx, size_t nnz, int reps,
                             size_t *serial)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        zen_hh_result res;
        int64_t t0 = zen_now_ns();
        if (zen__hh_partition(cfg, idx, nnz, &res) != ZEN_OK) {
            fprintf(stderr, "partition failed\n");
            exit(1);
        }
        double s = (double)(zen_now_ns() - t0) / 1e9;
        *serial = res.serial_items;
        zen__hh_result_free(&res);
        best = s < best ? s : best;
    }
    return best;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sparse_partition NNZ [DENSITY [OWNERS [THREADS [REPS [hash]]]]]\n"
               "  hierarchical-hash partition, bitmap encode and decode throughput of NNZ unique\n"
               "  indices over NNZ/DENSITY rows; defaults 0.01 16 2 5; 'hash' runs only the\n"
               "  one-thread partition and encode (for callgrind).\n"
               "  e.g. sparse_partition 1000000 0.01 16 2 5\n");
}

/* strtod/strtoull with the whole string consumed: "1e6x" or "" is a usage error, not 0 */
static int parse_num(const char *s, double *out)
{
    char *end = NULL;
    *out = strtod(s, &end);
    return end != s && *end == '\0';
}

int main(int argc, char **argv)
{
    /* no arguments is a question, not a request for a 100M-row run */
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    double v[5] = { 0, 0.01, 16, 2, 5 };
    for (int i = 1; i < argc && i <= 5; i++)
        if (!parse_num(argv[i], &v[i - 1])) {
            fprintf(stderr, "sparse_partition: '%s' is not a number\n", argv[i]);
            usage(stderr);
            return 2;
        }
    if (argc > 7 || (argc > 6 && strcmp(argv[6], "hash") != 0)) {
        usage(stderr);
        return 2;
    }
    size_t nnz = v[0] >= 1 && v[0] < 4e9 ? (size_t)v[0] : 0;
    double density = v[1];
    uint32_t n = v[2] >= 1 && v[2] < 1e6 ? (uint32_t)v[2] : 0;
    int threads = v[3] >= 1 && v[3] <= 1024 ? (int)v[3] : 0;
    int reps = v[4] >= 1 && v[4] <= 1e6 ? (int)v[4] : 0;
    int only_hash = argc > 6;
    uint64_t rows = density > 0 && density <= 1 ? (uint64_t)((double)nnz / density) : 0;
    if (nnz == 0 || n == 0 || threads == 0 || rows >= ((uint64_t)1 << 32) || rows < nnz ||
        reps < 1) {
        fprintf(stderr, "sparse_partition: bad arguments (NNZ >= 1, 0 < DENSITY <= 1, "
                        "NNZ/DENSITY < 2^32, OWNERS, THREADS, REPS >= 1)\n");
        return 2;
    }
    /* nnz unique sorted indices: a random subset of [0, rows) */
    uint32_t *idx = malloc(nnz * sizeof *idx);
    uint64_t s = 42;
    size_t m = 0;
    for (uint64_t i = 0; i < rows && m < nnz; i++)
        if ((double)(rng_next(&s) >> 11) / 9007199254740992.0 * (double)(rows - i) <
            (double)(nnz - m))
            idx[m++] = (uint32_t)i;
    nnz = m;
    uint64_t seeds[4] = { 0x51ed, 0x2701, 3, 4 };
    zen_hh_config cfg = zen__hh_config_default(n, seeds);
    size_t serial = 0;
    printf("nnz %zu rows %llu owners %u\n", nnz, (unsigned long long)rows, n);
    double t_hash = best_partition(&cfg, idx, nnz, reps, &serial);
    printf("partition hash   1 thread : %8.1f M idx/s  (%.2f%% serial)\n", nnz / t_hash / 1e6,
           100.0 * (double)serial / (double)nnz);
    double t_count = 0;
    if (!only_hash) {
        cfg.threads = threads;
        double t_mt = best_partition(&cfg, idx, nnz, reps, &serial);
        printf("partition hash %2d threads: %8.1f M idx/s\n", threads, nnz / t_mt / 1e6);
        cfg.threads = 1;
        cfg.method = ZEN_HH_COUNT;
        t_count = best_partition(&cfg, idx, nnz, reps, &serial);
        printf("partition count  1 thread : %8.1f M idx/s\n", nnz / t_count / 1e6);
    }

    /* encode: every owner's share, as one aggregated sorted run each */
    zen_universe *u;
    int64_t tu = zen_now_ns();
    if (zen__universe_build(rows, n, seeds[0], &u) != ZEN_OK)
        return 1;
    printf("universe build (once)     : %8.1f ms\n", (double)(zen_now_ns() - tu) / 1e6);
    zen_coo *own = calloc(n, sizeof *own);
    for (uint32_t j = 0; j < n; j++) {
        own[j].rows = rows;
        own[j].width = 1;
        zen__coo_reserve(&own[j], nnz / n * 2 + 16);
    }
    for (size_t i = 0; i < nnz; i++) {
        zen_coo *o = &own[zen_hh_owner(idx[i], seeds[0], n)];
        if (o->nnz < o->capacity) {
            o->idx[o->nnz] = idx[i];
            o->val[o->nnz++] = 1.0f;
        }
    }
    void **blob = calloc(n, sizeof *blob);
    size_t *bytes = calloc(n, sizeof *bytes);
    uint32_t *format = calloc(n, sizeof *format);
    double t_enc = 1e30, t_dec = 1e30;
    float *dense = calloc(rows, sizeof *dense);
    for (int r = 0; r < reps; r++) {
        int64_t t0 = zen_now_ns();
        for (uint32_t j = 0; j < n; j++) {
            size_t ulen = u->offsets[j + 1] - u->offsets[j];
            zen__hb_plan(&own[j], ulen, &format[j], &bytes[j]);
            if (!blob[j])
                blob[j] = malloc(bytes[j]);
            if (zen__hb_encode(&own[j], u, j, format[j], blob[j], bytes[j]) != ZEN_OK)
                return 1;
        }
        double t = (double)(zen_now_ns() - t0) / 1e9;
        t_enc = t < t_enc ? t : t_enc;
        if (only_hash)
            continue;
        t0 = zen_now_ns();
        for (uint32_t j = 0; j < n; j++) {
            if (zen__hb_decode_dense(blob[j], bytes[j], u, j, 1, 1.0f, dense) != ZEN_OK)
                return 1;
        }
        t = (double)(zen_now_ns() - t0) / 1e9;
        t_dec = t < t_dec ? t : t_dec;
    }
    size_t total_bytes = 0;
    for (uint32_t j = 0; j < n; j++)
        total_bytes += bytes[j];
    printf("encode (all owners)       : %8.1f M idx/s  (%s, %zu bytes = %.2f x COO)\n",
           nnz / t_enc / 1e6, format[0] == ZEN_HB_BITMAP ? "bitmap" : "coo", total_bytes,
           (double)total_bytes / (8.0 * (double)nnz));
    if (!only_hash)
        printf("decode dense (all owners) : %8.1f M idx/s\n", nnz / t_dec / 1e6);
    printf("partition(hash, 1 thread) + encode: %8.1f M idx/s\n", nnz / (t_hash + t_enc) / 1e6);
    if (!only_hash)
        printf("partition(count) + encode         : %8.1f M idx/s\n",
               nnz / (t_count + t_enc) / 1e6);
    for (uint32_t j = 0; j < n; j++) {
        zen__coo_release(&own[j]);
        free(blob[j]);
    }
    free(own);
    free(blob);
    free(bytes);
    free(format);
    free(dense);
    free(idx);
    zen__universe_free(u);
    return 0;
}
