/* `zen bench` option parsing and help (nccl-tests option letters where they exist). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "opt_parse.h"

void bench_help(bench_kind kind)
{
    if (kind == BENCH_P2P) {
        printf("usage: zen bench p2p [OPTIONS]\n\n"
               "Point-to-point bandwidth between ranks 0 and 1 of one transport, over a size\n"
               "sweep, so collective bus bandwidth can be read as a fraction of what the\n"
               "transport carries. Other ranks (tcp with more than 2) wait.\n\n"
               "  --mode M            pingpong | uni | bidir | all (default all)\n"
               "                      pingpong: time = half a round trip, bw = bytes / time\n"
               "                      uni: rank 0 streams --window messages to rank 1, then\n"
               "                      waits for a 1-byte ack; bw = window * bytes / time\n"
               "                      bidir: both ranks stream to each other at once; bw is per\n"
               "                      direction\n"
               "  --window W          messages in flight for uni/bidir (default: 64 MiB / bytes,\n"
               "                      between 1 and 16)\n");
    } else {
        printf("usage: zen bench allreduce|allgather|reduce_scatter|alltoall|broadcast [OPTIONS]\n"
               "       zen bench reduce|gather|scatter|sendrecv [OPTIONS]\n"
               "       zen bench p2p [OPTIONS]          (zen bench p2p --help)\n"
               "       zen bench sparse ...             (zen bench sparse --help)\n\n"
               "Time a dense collective over a size sweep with nccl-tests conventions: S is the\n"
               "per-rank buffer for allreduce, broadcast, reduce and sendrecv and the whole\n"
               "array (per-rank count x ranks) for allgather, reduce_scatter, alltoall, gather\n"
               "and scatter; algbw = S / time; busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n\n"
               "(allgather, reduce_scatter, alltoall, gather, scatter) or 1 (broadcast, reduce,\n"
               "sendrecv). sendrecv: every rank r sends to r+1 and receives from r-1 at once.\n"
               "GB = 1e9 bytes. Each iteration is timed on every\n"
               "rank after a barrier and the slowest rank's time counts; p50 and p99 are over\n"
               "iterations. Out-of-place and in-place are both run (broadcast: in place only;\n"
               "sendrecv: out of place only). The table starts with one line per rank: its pid,\n"
               "host and the cpus it may run on.\n\n"
               "  -d, --datatype T    f32 (default), f64, i32, i64, bf16\n"
               "  -o, --op OP         sum (default), prod, min, max, avg\n"
               "  --algo A            allreduce: auto (default), ring, rhd, mpi, slots\n"
               "  --root R            broadcast, reduce, gather, scatter root (default 0)\n");
    }
    printf("  -b, --minbytes N    smallest size in bytes, K/M/G suffixes (default 8)\n"
           "  -e, --maxbytes N    largest size (default 64M)\n"
           "  -f, --stepfactor F  size multiplier between steps, > 1 (default 2)\n"
           "  -w, --warmup N      untimed iterations per size (default 5)\n"
           "  -n, --iters N       timed iterations per size (default 20)\n"
           "  -c, --check         verify every result against a locally computed reference\n"
           "                      and report the number of wrong elements (summed over ranks)\n"
           "  --transport T       " ZEN_OPT_TRANSPORTS " (default auto)\n"
           "                      auto: --ranks threads in this process, unless a launcher\n"
           "                      started it (zen launch -n 4 -- zen bench allreduce): then\n"
           "                      mpi under mpirun, else what zen launch --transport set,\n"
           "                      by default shm inside a host and tcp across (shm+tcp)\n"
           "                      inproc: threads; shm, tcp, shm+tcp, mpi: this process is\n"
           "                      one rank (or set ZEN_RANK, ZEN_WORLD_SIZE,\n"
           "                      ZEN_MASTER_ADDR/PORT); the header and JSON name the one used\n"
           "  --ranks N           inproc rank count (default %d)\n"
           "  --timeout S         deadline in seconds of every blocking wait (0.001..1e6)\n"
           "  --json              one JSON object per result on stdout instead of the table\n"
           "  -h, --help          this text\n\n"
           "Only rank 0 prints. Exit status: 0 ok, 1 a failure (the communicator's error is\n"
           "printed), 2 a usage error.\n",
           kind == BENCH_P2P ? 2 : 4);
    if (kind != BENCH_P2P)
        printf("\nJSON fields: op, ranks, transport, dtype, redop, bytes, count, algo, inplace,\n"
               "iters, time_us_p50, time_us_p99, algbw_gbs, busbw_gbs, wrong (null without -c).\n");
    else
        printf("\nJSON fields: op (\"p2p\"), mode, transport, bytes, window, iters, time_us_p50,\n"
               "time_us_p99, bw_gbs, wrong (null without -c).\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    long v;
    if (zen_parse_long(s, lo, hi, &v) != 0)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_dtype(const char *s, zen_dtype *out)
{
    for (int d = 0; d < ZEN_DTYPE_COUNT; d++) {
        if (strcmp(s, zen_dtype_name((zen_dtype)d)) == 0) {
            *out = (zen_dtype)d;
            return 0;
        }
    }

    /* nccl-tests spellings */
    static const struct {
        const char *name;
        zen_dtype dt;
    } alias[] = { { "float", ZEN_F32 },
                  { "double", ZEN_F64 },
                  { "int32", ZEN_I32 },
                  { "int64", ZEN_I64 },
                  { "bfloat16", ZEN_BF16 } };

    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++) {
        if (strcmp(s, alias[i].name) == 0) {
            *out = alias[i].dt;
            return 0;
        }
    }
    return -1;
}

static int parse_op(const char *s, zen_op *out)
{
    for (int o = 0; o < ZEN_OP_COUNT; o++) {
        if (strcmp(s, zen_op_name((zen_op)o)) == 0) {
            *out = (zen_op)o;
            return 0;
        }
    }
    return -1;
}

static int parse_algo(const char *s, zen_allreduce_algo *out)
{
    static const zen_allreduce_algo all[] = { ZEN_ALLREDUCE_AUTO, ZEN_ALLREDUCE_RING,
                                              ZEN_ALLREDUCE_RHD, ZEN_ALLREDUCE_MPI,
                                              ZEN_ALLREDUCE_SLOTS };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(s, zen_allreduce_algo_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}

static int parse_mode(const char *s, int *out)
{
    if (strcmp(s, "pingpong") == 0)
        *out = P2P_PINGPONG;
    else if (strcmp(s, "uni") == 0)
        *out = P2P_UNI;
    else if (strcmp(s, "bidir") == 0)
        *out = P2P_BIDIR;
    else if (strcmp(s, "all") == 0)
        *out = P2P_ALL;
    else
        return -1;
    return 0;
}

static int is_opt(const char *arg, const char *shortname, const char *longname)
{
    return (shortname && strcmp(arg, shortname) == 0) || strcmp(arg, longname) == 0;
}

/* The value v of option a into o; 1 when it is not a value a accepts (or a does not apply to
 * this kind of benchmark). */
static int parse_value(const char *a, const char *v, bench_opts *o, int *ranks_given)
{
    bench_kind kind = o->kind;
    if (is_opt(a, "-b", "--minbytes"))
        return zen_parse_size(v, &o->min_bytes) != 0;
    if (is_opt(a, "-e", "--maxbytes"))
        return zen_parse_size(v, &o->max_bytes) != 0;
    if (is_opt(a, "-f", "--stepfactor"))
        return zen_parse_double(v, 1.0, 1024.0, &o->factor) || !(o->factor > 1.0);
    if (is_opt(a, "-w", "--warmup"))
        return parse_int(v, 0, 1000000, &o->warmup) != 0;
    if (is_opt(a, "-n", "--iters"))
        return parse_int(v, 1, 1000000, &o->iters) != 0;
    if (is_opt(a, "-d", "--datatype"))
        return parse_dtype(v, &o->dtype) != 0;
    if (is_opt(a, "-o", "--op"))
        return parse_op(v, &o->op) != 0;
    if (strcmp(a, "--algo") == 0)
        return kind != BENCH_ALLREDUCE || parse_algo(v, &o->algo);
    if (strcmp(a, "--root") == 0)
        return (kind != BENCH_BROADCAST && kind != BENCH_REDUCE && kind != BENCH_GATHER &&
                kind != BENCH_SCATTER) ||
               parse_int(v, 0, 1 << 20, &o->root);
    if (strcmp(a, "--transport") == 0)
        return zen_opt_transport(v, &o->transport) != 0;
    if (strcmp(a, "--ranks") == 0) {
        *ranks_given = 1;
        return parse_int(v, 1, 4096, &o->ranks) != 0;
    }
    if (strcmp(a, "--timeout") == 0)
        return zen_parse_double(v, 0.001, 1e6, &o->timeout) != 0;
    if (strcmp(a, "--mode") == 0)
        return kind != BENCH_P2P || parse_mode(v, &o->p2p_modes);
    if (strcmp(a, "--window") == 0)
        return kind != BENCH_P2P || parse_int(v, 1, 1024, &o->window);
    return 1;
}

/* The options together: a size range, a transport that can run here, a root among the ranks. */
static int check_opts(const char *cmd, bench_opts *o, int ranks_given)
{
    if (o->min_bytes > o->max_bytes)
        return zen_usage_error(cmd, "-b (%zu) is larger than -e (%zu)", o->min_bytes, o->max_bytes);
    o->transport = zen_opt_transport_resolve(o->transport);
    if (o->transport != ZEN_TRANSPORT_INPROC) {
        if (ranks_given)
            return zen_usage_error(cmd,
                                   "--ranks is for --transport inproc; with %s the launcher "
                                   "sets the world size",
                                   zen_transport_name(o->transport));
        if (!zen_cli_launched())
            return zen_usage_error(cmd,
                                   "--transport %s runs one rank per process: start it with "
                                   "`zen launch -n N -- zen %s ...` (or set ZEN_RANK, "
                                   "ZEN_WORLD_SIZE, ZEN_MASTER_ADDR, ZEN_MASTER_PORT)",
                                   zen_transport_name(o->transport), cmd);
    }
    if (o->kind == BENCH_P2P && o->transport == ZEN_TRANSPORT_INPROC && o->ranks < 2)
        return zen_usage_error(cmd, "p2p needs at least 2 ranks");
    if (o->transport == ZEN_TRANSPORT_INPROC && o->root >= o->ranks)
        return zen_usage_error(cmd, "--root %d is not a rank of %d", o->root, o->ranks);
    return ZEN_EXIT_OK;
}

static void set_defaults(bench_kind kind, const char *name, bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->name = name;
    o->min_bytes = 8;
    o->max_bytes = 64u << 20;
    o->factor = 2.0;
    o->warmup = 5;
    o->iters = 20;
    o->dtype = ZEN_F32;
    o->op = ZEN_SUM;
    o->algo = ZEN_ALLREDUCE_AUTO;
    o->p2p_modes = P2P_ALL;
    o->transport = ZEN_TRANSPORT_AUTO; /* threads here, the launcher's choice under one */
    o->ranks = kind == BENCH_P2P ? 2 : 4;
}

int bench_parse(int argc, char **argv, bench_kind kind, bench_opts *o, int *done)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "bench %s", argv[0]);
    *done = 0;
    set_defaults(kind, argv[0], o);
    int ranks_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (zen_is_help(a)) {
            bench_help(kind);
            *done = 1;
            return ZEN_EXIT_OK;
        }
        if (is_opt(a, "-c", "--check")) {
            o->check = 1;
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        /* every other option takes a value */
        static const char *const valued[] = {
            "-b",        "--minbytes", "-e",       "--maxbytes", "-f",          "--stepfactor",
            "-w",        "--warmup",   "-n",       "--iters",    "-d",          "--datatype",
            "-o",        "--op",       "--algo",   "--root",     "--transport", "--ranks",
            "--timeout", "--mode",     "--window",
        };
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
            known |= strcmp(a, valued[k]) == 0;
        if (!known)
            return zen_usage_error(cmd, "unknown option '%s'", a);
        if (i + 1 >= argc)
            return zen_usage_error(cmd, "option '%s' needs a value", a);
        const char *v = argv[++i];
        if (parse_value(a, v, o, &ranks_given)) {
            if (strcmp(a, "--transport") == 0)
                return zen_opt_transport_error(cmd, v);
            return zen_usage_error(cmd, "bad value '%s' for %s", v, a);
        }
    }
    return check_opts(cmd, o, ranks_given);
}
