/*
 * mpi_pingpong: the MPI baseline of `zen bench p2p`'s pingpong mode. Ranks 0 and 1 bounce a
 * message of -b bytes; each round trip is timed on rank 0 (a preposted MPI_Irecv, then the send,
 * as zen bench p2p posts its receive before the clock starts). Prints the median, min and 99th
 * percentile round trip in microseconds, as text or one JSON object (--json). With --barrier
 * every round starts after an MPI_Barrier, with the receive posted before it, exactly as `zen
 * bench p2p` times its rounds.
 *   mpirun -n 2 mpi_pingpong [-b BYTES] [-n ITERS] [-w WARMUP] [--barrier] [--json]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t bytes = 8;
    int iters = 10000, warmup = 1000, json = 0, barrier = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-b") == 0 && i + 1 < argc)
            bytes = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "-w") == 0 && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--barrier") == 0)
            barrier = 1;
        else {
            fprintf(stderr,
                    "usage: mpi_pingpong [-b BYTES] [-n ITERS] [-w WARMUP] [--barrier] [--json]\n");
            return 2;
        }
    }
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || iters < 1) {
        if (rank == 0)
            fprintf(stderr, "mpi_pingpong: needs 2 ranks and -n >= 1\n");
        MPI_Finalize();
        return 2;
    }
    char *sbuf = calloc(1, bytes ? bytes : 1), *rbuf = calloc(1, bytes ? bytes : 1);
    double *t = calloc((size_t)iters, sizeof *t);
    int peer = 1 - rank;
    for (int it = -warmup; it < iters && rank < 2; it++) {
        MPI_Request r;
        MPI_Irecv(rbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &r);
        if (barrier)
            MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            double t0 = MPI_Wtime();
            MPI_Send(sbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            if (it >= 0)
                t[it] = (MPI_Wtime() - t0) * 1e6;
        } else {
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        }
    }
    if (rank == 0) {
        qsort(t, (size_t)iters, sizeof *t, cmp);
        double p50 = t[iters / 2], p99 = t[(size_t)iters * 99 / 100], mn = t[0];
        if (json)
            printf(
                "{\"op\":\"pingpong\",\"impl\":\"mpi\",\"bytes\":%zu,\"iters\":%d,\"barrier\":%d,"
                "\"rtt_us_p50\":%.3f,\"rtt_us_min\":%.3f,\"rtt_us_p99\":%.3f}\n",
                bytes, iters, barrier, p50, mn, p99);
        else
            printf("mpi pingpong %zu B: round trip p50 %.2f us, min %.2f, p99 %.2f (%d iters)\n",
                   bytes, p50, mn, p99, iters);
    }
    free(sbuf);
    free(rbuf);
    free(t);
    MPI_Finalize();
    return 0;
}
