/*
 * mpi_allreduce: the MPI library's own MPI_Allreduce timed with the conventions of
 * `zen bench allreduce` (nccl-tests): the same size sweep options, per-iteration times after an
 * MPI_Barrier, the slowest rank's time per iteration (MPI_MAX over ranks), p50/p99 over
 * iterations, algbw = S / t and busbw = algbw x 2(n-1)/n with GB = 1e9 bytes, out-of-place and
 * in-place (MPI_IN_PLACE) results, the same JSON fields with transport "mpi-native".
 *
 *   mpirun -n 4 ./mpi_allreduce -b 64M -e 64M [-f 2] [-w 5] [-n 20] [-c] [--json] [--label L]
 *
 * --label sets the JSON "transport" (e.g. "mpi-tcp" for a run with --mca btl self,tcp).
 *
 * Only f32 sum: this is the baseline for the dense comparison in bench/run_dense.sh.
 * -c checks the result (inputs are small integers, so the sum is exact in any order).
 */
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct opts {
    size_t min_bytes, max_bytes;
    double factor;
    int warmup, iters, check, json;
    const char *label; /* JSON "transport" */
} opts;

/* 64, 4K, 64M, 1G (powers of 1024). */
static int parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -1;
    unsigned long long mult = 1;
    if (*end == 'K' || *end == 'k')
        mult = 1ull << 10;
    else if (*end == 'M' || *end == 'm')
        mult = 1ull << 20;
    else if (*end == 'G' || *end == 'g')
        mult = 1ull << 30;
    if (mult != 1)
        end++;
    if (*end != '\0' || v > SIZE_MAX / mult)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > 1000000)
        return -1;
    *out = (int)v;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: mpirun -n N mpi_allreduce [-b MIN] [-e MAX] [-f FACTOR] [-w WARMUP] "
               "[-n ITERS] [-c] [--json] [--label NAME]\n"
               "MPI_Allreduce (f32, sum) timed like `zen bench allreduce`; sizes take K/M/G.\n");
}

/* 0 ok, 1 help printed, 2 usage error. */
static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){ 8, 64u << 20, 2.0, 5, 20, 0, 0, "mpi-native" };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(a, "-c") == 0 || strcmp(a, "--check") == 0) {
            o->check = 1;
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mpi_allreduce: unknown option or missing value: %s\n", a);
            return 2;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (strcmp(a, "-b") == 0) {
            bad = parse_size(v, &o->min_bytes);
        } else if (strcmp(a, "-e") == 0) {
            bad = parse_size(v, &o->max_bytes);
        } else if (strcmp(a, "-f") == 0) {
            char *end = NULL;
            o->factor = strtod(v, &end);
            bad = end == v || *end != '\0' || !(o->factor > 1.0);
        } else if (strcmp(a, "-w") == 0) {
            bad = parse_int(v, 0, &o->warmup);
        } else if (strcmp(a, "-n") == 0) {
            bad = parse_int(v, 1, &o->iters);
        } else if (strcmp(a, "--label") == 0) {
            o->label = v;
            bad = strchr(v, '"') != NULL || strchr(v, '\\') != NULL;
        } else {
            fprintf(stderr, "mpi_allreduce: unknown option %s\n", a);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "mpi_allreduce: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (o->min_bytes > o->max_bytes) {
        fprintf(stderr, "mpi_allreduce: -b is larger than -e\n");
        return 2;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile; sorts v. */
static double percentile(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int k = (int)ceil(p / 100.0 * n);
    k = k < 1 ? 1 : (k > n ? n : k);
    return v[k - 1];
}

/* Rank r's input at element i: a small integer, so every summation order is exact. */
static float input_value(int r, size_t i)
{
    return (float)((int)((r * 7u + (i % 1021u) * 13u) % 17u) - 8);
}

static void run_size(const opts *o, int rank, int n, size_t count, float *send, float *recv,
                     double *times, int inplace, double *p50, double *p99, long long *wrong)
{
    for (int it = -o->warmup; it < o->iters; it++) {
        if (inplace)
            memcpy(recv, send, count * sizeof *send);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(inplace ? MPI_IN_PLACE : send, recv, (int)count, MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
        if (it >= 0)
            times[it] = MPI_Wtime() - t0;
    }
    MPI_Allreduce(MPI_IN_PLACE, times, o->iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    *p50 = percentile(times, o->iters, 50.0);
    *p99 = percentile(times, o->iters, 99.0);
    *wrong = -1;
    if (!o->check)
        return;
    for (size_t i = 0; i < count; i++)
        recv[i] = -999.0f;
    if (inplace)
        memcpy(recv, send, count * sizeof *send);
    MPI_Allreduce(inplace ? MPI_IN_PLACE : send, recv, (int)count, MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    long long w = 0;
    for (size_t i = 0; i < count; i++) {
        float want = 0.0f;
        for (int r = 0; r < n; r++)
            want += input_value(r, i);
        w += recv[i] != want;
    }
    MPI_Allreduce(MPI_IN_PLACE, &w, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    *wrong = w;
    (void)rank;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    opts o;
    int pr = parse(argc, argv, &o);
    if (pr != 0) {
        MPI_Finalize();
        return pr == 1 ? 0 : 2;
    }
    size_t sizes[256], nsizes = 0;
    for (double s = (double)o.min_bytes; s <= (double)o.max_bytes && nsizes < 256;) {
        size_t b = (size_t)s / sizeof(float) * sizeof(float);
        if ((b > 0 || o.min_bytes == 0) && (nsizes == 0 || sizes[nsizes - 1] != b))
            sizes[nsizes++] = b;
        s = s * o.factor < s + 1.0 ? s + 1.0 : s * o.factor;
    }
    size_t maxc = nsizes ? sizes[nsizes - 1] / sizeof(float) : 0;
    if (maxc > (size_t)INT32_MAX) {
        if (rank == 0)
            fprintf(stderr, "mpi_allreduce: %zu elements exceed MPI's int count\n", maxc);
        MPI_Finalize();
        return 2;
    }
    float *send = malloc((maxc + 1) * sizeof *send);
    float *recv = malloc((maxc + 1) * sizeof *recv);
    double *times = malloc((size_t)o.iters * sizeof *times);
    if (!send || !recv || !times) {
        fprintf(stderr, "mpi_allreduce: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < maxc; i++)
        send[i] = input_value(rank, i);
    memset(recv, 0, (maxc + 1) * sizeof *recv);
    double factor = 2.0 * (n - 1) / n, busbw_sum = 0.0;
    long long wrong_total = 0;
    int results = 0;
    if (rank == 0 && !o.json) {
        int vlen = 0;
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        MPI_Get_library_version(version, &vlen);
        version[strcspn(version, "\n,")] = '\0';
        printf("# mpi_allreduce (MPI_Allreduce, %s)\n# ranks %d, f32 sum, warmup %d, iters %d, "
               "check %s; busbw = algbw x 2(n-1)/n = %.4f\n",
               version, n, o.warmup, o.iters, o.check ? "on" : "off", factor);
        printf("# %12s %12s   %10s %10s %7s %7s %6s   %10s %10s %7s %7s %6s\n", "size(B)", "count",
               "p50(us)", "p99(us)", "algbw", "busbw", "#wrong", "p50(us)", "p99(us)", "algbw",
               "busbw", "#wrong");
    }
    for (size_t s = 0; s < nsizes; s++) {
        size_t count = sizes[s] / sizeof(float);
        if (rank == 0 && !o.json)
            printf("  %12zu %12zu", sizes[s], count);
        for (int inplace = 0; inplace < 2; inplace++) {
            double p50, p99;
            long long wrong;
            run_size(&o, rank, n, count, send, recv, times, inplace, &p50, &p99, &wrong);
            double algbw = p50 > 0 ? (double)sizes[s] / p50 / 1e9 : 0.0, busbw = algbw * factor;
            busbw_sum += busbw;
            results++;
            if (wrong > 0)
                wrong_total += wrong;
            if (rank != 0)
                continue;
            char w[24];
            snprintf(w, sizeof w, wrong < 0 ? "null" : "%lld", wrong);
            if (o.json)
                printf("{\"op\":\"allreduce\",\"ranks\":%d,\"transport\":\"%s\","
                       "\"dtype\":\"f32\",\"redop\":\"sum\",\"bytes\":%zu,\"count\":%zu,"
                       "\"algo\":\"mpi\",\"inplace\":%d,\"iters\":%d,\"time_us_p50\":%.3f,"
                       "\"time_us_p99\":%.3f,\"algbw_gbs\":%.4f,\"busbw_gbs\":%.4f,"
                       "\"wrong\":%s}\n",
                       n, o.label, sizes[s], count, inplace, o.iters, p50 * 1e6, p99 * 1e6, algbw,
                       busbw, w);
            else
                printf("   %10.2f %10.2f %7.3f %7.3f %6s", p50 * 1e6, p99 * 1e6, algbw, busbw,
                       wrong < 0 ? "N/A" : w);
        }
        if (rank == 0 && !o.json)
            printf("\n");
        fflush(stdout);
    }
    if (rank == 0 && !o.json)
        printf("# Avg bus bandwidth    : %.4f GB/s\n", results ? busbw_sum / results : 0.0);
    free(send);
    free(recv);
    free(times);
    MPI_Finalize();
    return wrong_total > 0 ? 1 : 0;
}
