/*
 * Internals of `zen bench` (dense collectives and p2p): options, the rank runner that hides
 * whether ranks are threads (inproc) or processes (tcp, mpi), test-data patterns and timing
 * statistics. Conventions follow nccl-tests (see docs/benchmarks.md): sizes in bytes, GB = 1e9
 * bytes, algbw = S / t, busbw = algbw * (collective-specific factor).
 */
#ifndef ZEN_TOOLS_BENCH_H
#define ZEN_TOOLS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include <zen/comm.h>

typedef enum bench_kind {
    BENCH_ALLREDUCE,
    BENCH_ALLGATHER,
    BENCH_REDUCE_SCATTER,
    BENCH_ALLTOALL,
    BENCH_BROADCAST,
    BENCH_REDUCE,
    BENCH_GATHER,
    BENCH_SCATTER,  /* root's whole array, block r to rank r */
    BENCH_SENDRECV, /* rank r sends to r+1 and receives from r-1 at once */
    BENCH_P2P
} bench_kind;

/* p2p patterns: half a round trip, a one-way stream, or both directions at once. */
enum {
    P2P_PINGPONG = 1,
    P2P_UNI = 2,
    P2P_BIDIR = 4,
    P2P_ALL = 7
};

typedef struct bench_opts {
    bench_kind kind;
    const char *name; /* "allreduce", ... "p2p" */
    size_t min_bytes, max_bytes;
    double factor;
    int warmup, iters;
    int check;
    zen_dtype dtype;
    zen_op op;
    zen_allreduce_algo algo;
    zen_transport_kind transport; /* AUTO: one process per rank from the launcher's env */
    int ranks;                    /* inproc thread count */
    int root;                     /* broadcast, reduce, gather */
    int json;
    int p2p_modes;  /* P2P_* bits */
    int window;     /* p2p uni/bidir: messages in flight (0: automatic) */
    double timeout; /* seconds, 0: library default */
} bench_opts;

/* Parse argv (argv[0] is the collective name) into o; returns 0, or an exit code (help: 0 with
 * *done set; usage error: 2, message printed). */
int bench_parse(int argc, char **argv, bench_kind kind, bench_opts *o, int *done);

/* Print the --help text of a bench subcommand. */
void bench_help(bench_kind kind);

/* Run fn on every rank: --ranks threads for inproc, this one process otherwise. The first real
 * failure's communicator error is printed to stderr. Returns an exit code (0 or 1). */
typedef zen_status (*bench_rank_fn)(zen_comm *comm, const bench_opts *o, void *arg);
int bench_run(const bench_opts *o, bench_rank_fn fn, void *arg);

/* The sizes of the sweep, rounded down to a multiple of unit bytes, duplicates dropped. Returns
 * how many were written (at most max). */
size_t bench_sizes(const bench_opts *o, size_t unit, size_t *out, size_t max);

/* Ranks that share this host's cores: all of them when they are threads (inproc), else the
 * launcher's ranks on this host (all when it does not say). */
int bench_ranks_here(zen_comm *comm);

/* Whether ranks_here ranks outnumber the cores they may use: sched_getaffinity's count, or the
 * host's online cores for process ranks pinned one core each (threads: 1 when the ranks are
 * threads of this process). *cores receives the count compared with. */
int bench_oversubscribed(int ranks_here, int threads, int *cores);

/* Header line "# oversubscribed: R ranks on C cores: times include scheduling", printed only
 * when they are; and the JSON fragment "cores":C,"oversubscribed":true|false, (with the comma). */
void bench_print_oversub(int ranks_here, int threads);
void bench_json_oversub(int ranks_here, int threads);

/* Monotonic time in seconds. */
double bench_now(void);

/* p-th percentile (0..100, nearest rank) of n values; sorts v in place. */
double bench_percentile(double *v, size_t n, double p);

/* Per-iteration maximum over ranks, in place (an allreduce of n doubles with MAX). */
zen_status bench_max_over_ranks(zen_comm *comm, double *v, size_t n);

/* Sum a local count over ranks. */
zen_status bench_sum_over_ranks(zen_comm *comm, int64_t *v);

/* Test data: element i of rank r's input. Small integers, so every dtype holds them and every
 * reduction order gives the exact same answer. reducing: values for sum/prod/min/max/avg. */
double bench_value(int rank, size_t i, int reducing, zen_op op);

/* Store/load element i of a buffer of dtype as a double. */
void bench_store(void *buf, zen_dtype dt, size_t i, double v);
double bench_load(const void *buf, zen_dtype dt, size_t i);

/* Reference reduction of bench_value over nranks ranks at element i, as the dtype holds it. */
typedef struct bench_ref {
    double *table; /* period entries */
    size_t period;
} bench_ref;

int bench_ref_init(bench_ref *ref, int nranks, zen_dtype dt, zen_op op);
void bench_ref_free(bench_ref *ref);
double bench_ref_at(const bench_ref *ref, size_t i);

/* 1 when got matches want for dtype (exact for integers, a few ulps for floating point). */
int bench_equal(zen_dtype dt, double got, double want);

/* Rank 0 prints one "#  Rank r Pid p on host cpus c" line per rank (nccl-tests' placement
 * block); every rank must call it (it gathers). Returns the gather's status. */
zen_status bench_print_placement(zen_comm *comm);

/* zen bench ALLREDUCE... and zen bench p2p. */
int bench_dense_main(const bench_opts *o);
int bench_p2p_main(const bench_opts *o);

#endif
