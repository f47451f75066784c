/*
 * zen bench: dispatch to the dense collective benchmarks (bench_dense.c), the point-to-point
 * yardstick (bench_p2p.c), the sparse benchmarks (zen_cmd_bench_sparse, its own file) and top-k
 * selection (zen_cmd_bench_topk, cmd_bench_topk.c).
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static const struct {
    const char *name;
    bench_kind kind;
} kinds[] = {
    { "allreduce", BENCH_ALLREDUCE },
    { "allgather", BENCH_ALLGATHER },
    { "reduce_scatter", BENCH_REDUCE_SCATTER },
    { "alltoall", BENCH_ALLTOALL },
    { "broadcast", BENCH_BROADCAST },
    { "reduce", BENCH_REDUCE },
    { "gather", BENCH_GATHER },
    { "sendrecv", BENCH_SENDRECV },
    { "p2p", BENCH_P2P },
};

int zen_cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        return zen_usage_error("bench", "which benchmark? allreduce, allgather, reduce_scatter, "
                                        "alltoall, broadcast, reduce, gather, sendrecv, p2p, "
                                        "sparse or topk");
    }
    if (zen_is_help(argv[1])) {
        bench_help(BENCH_ALLREDUCE);
        return ZEN_EXIT_OK;
    }
    if (strcmp(argv[1], "sparse") == 0)
        return zen_cmd_bench_sparse(argc - 1, argv + 1);
    if (strcmp(argv[1], "topk") == 0)
        return zen_cmd_bench_topk(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(argv[1], kinds[i].name) != 0)
            continue;
        bench_opts o;
        int done = 0;
        int code = bench_parse(argc - 1, argv + 1, kinds[i].kind, &o, &done);
        if (code != ZEN_EXIT_OK || done)
            return code;
        return kinds[i].kind == BENCH_P2P ? bench_p2p_main(&o) : bench_dense_main(&o);
    }
    return zen_usage_error("bench", "unknown benchmark '%s'", argv[1]);
}
