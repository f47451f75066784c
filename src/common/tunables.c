#include "common/tunables.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zen/zen.h>

#include "common/hash.h"
#include "common/log.h"

struct param_row {
    const char *name; /* the full variable name, ZEN_... */
    const char *default_value;
    const char *description;
};

/* Keep sorted by subsystem; add a row for every new ZEN_* variable. */
static const struct param_row param_table[] = {
    { "ZEN_LOG_LEVEL", "warn", "log level: error, warn, info, debug, trace" },
    { "ZEN_LOG_SUBSYS", "all",
      "comma list of subsystems to log: init,bootstrap,transport,coll,sparse,tp,train" },
    { "ZEN_SEED", "",
      "fixed seed for the sparse hash functions (decimal; default: random, drawn by rank 0)" },
    { "ZEN_TIMEOUT_S", "300",
      "default deadline in seconds of every blocking wait (inf: none; 1e9 and more count as inf, "
      "converted saturating); the heartbeat window is at most half the smallest over the ranks "
      "(not below 2 s)" },
    { "ZEN_HEARTBEAT_S", "10",
      "tcp and shm: a peer that sends nothing (not even a heartbeat) for the window is named as "
      "hung and the job aborts; the window is the largest value over the ranks, agreed at setup, "
      "cut to half the smallest ZEN_TIMEOUT_S, not below 2 s by that cut (inf: this rank does not "
      "watch, but still beats)" },
    { "ZEN_JOB_SECRET", "",
      "tcp: per-job secret; ranks prove it to each other (HMAC-SHA256) at rendezvous and on every "
      "mesh connection (docs/security.md)" },
    { "ZEN_JOB_SECRET_FILE", "", "tcp: file whose contents are the job secret" },
    { "ZEN_REQUIRE_SECRET", "0",
      "1: refuse to start a tcp job without a job secret (default: warn on non-loopback)" },
    { "ZEN_ALLOC_CACHE_MB", "256",
      "freed blocks of 4 KiB and more kept for reuse, at most this many MiB (0: none, and no "
      "rounding of 64 KiB-64 MiB requests to a power of two)" },
    { "ZEN_RANK", "", "rank of this process (also RANK, OMPI_COMM_WORLD_RANK, PMI_RANK)" },
    { "ZEN_WORLD_SIZE", "", "number of ranks (also WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE)" },
    { "ZEN_MASTER_ADDR", "127.0.0.1", "tcp rendezvous host of rank 0 (also MASTER_ADDR)" },
    { "ZEN_MASTER_PORT", "29500", "tcp rendezvous port of rank 0 (also MASTER_PORT)" },
    { "ZEN_LOCAL_RANK", "", "rank within this host (also LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK)" },
    { "ZEN_LOCAL_SIZE", "",
      "ranks on this host (also LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE)" },
    { "ZEN_SOCKET_IFADDR", "",
      "tcp: address this rank listens on and advertises (default: the one used to reach the "
      "master)" },
    { "ZEN_SOCKET_BUF_BYTES", "4194304",
      "tcp: SO_SNDBUF/SO_RCVBUF of data connections (0, or above net.core.[rw]mem_max: kernel "
      "autotuning)" },
    { "ZEN_TRANSPORT", "auto",
      "process transport: auto (shm inside a host, tcp across hosts), tcp, shm (all ranks on one "
      "host), mpi" },
    { "ZEN_HOST_ID", "",
      "host identity for shm/auto (default: hostname + boot id); ranks with equal ids share "
      "memory (emulated clusters set one per emulated host)" },
    { "ZEN_SHM_RING_KB", "512", "shm: bytes of each per-pair ring in KiB (64 .. 65536)" },
    { "ZEN_SHM_SPIN_US", "-1",
      "shm: microseconds a waiter polls before it sleeps on the futex (-1: 50)" },
    { "ZEN_SHM_SPIN_YIELD", "-1",
      "shm: 1 a polling waiter yields its core (sched_yield) between polls: unpinned ranks that "
      "the scheduler puts on one core still progress; 0 it spins; -1 spin only when this process "
      "is pinned to one core and the host's ranks do not outnumber its cores, else yield" },
    { "ZEN_SHM_CMA", "1",
      "shm: 1 lets large messages be read straight from the sender (process_vm_readv), 0: always "
      "copy through the ring" },
    { "ZEN_SHM_CMA_MIN_BYTES", "65536", "shm: single copy (CMA) from this message size on" },
    { "ZEN_SHM_PREFAULT", "-1",
      "shm: 1 maps and touches the rings' pages at setup, 0 leaves them to the first calls, -1 "
      "prefaults while the host's rings (processes^2 x ring) take at most 512 MiB" },
    { "ZEN_FAULT", "",
      "tests: inject a fault, e.g. rank=1,after=3,action=kill (see src/transport/faulty.h)" },
    { "ZEN_ALLREDUCE_ALGO", "auto", "dense allreduce algorithm: auto, ring, rhd, mpi" },
    { "ZEN_RING_FUSE", "1",
      "1: ring reduce-scatter lets the transport reduce each chunk on delivery (inproc: one pass); "
      "0: copy then reduce" },
    { "ZEN_RING_CHUNK_BYTES", "1048576", "ring allreduce pipeline chunk size in bytes" },
    { "ZEN_RHD_MAX_BYTES", "262144", "auto: use recursive halving/doubling up to this many bytes" },
    { "ZEN_ALLGATHER_BRUCK_MAX_BYTES", "65536",
      "allgather: log2(n)-round algorithm up to this many bytes in all (0: always the ring)" },
    { "ZEN_COLL_LONG_BYTES", "262144",
      "broadcast/reduce: scatter+allgather / reduce-scatter+gather from this many bytes (binomial "
      "tree below)" },
    { "ZEN_MPI_NATIVE", "0", "1: dense collectives on the mpi transport call MPI's own" },
    { "ZEN_NET_GBPS", "0",
      "sparse cost model: link bandwidth in Gbit/s (0: measured or transport default)" },
    { "ZEN_NET_LAT_US", "0",
      "sparse cost model: per-message latency in microseconds (0: measured or default)" },
    { "ZEN_NET_INTRA_GBPS", "0",
      "sparse cost model: bandwidth inside a host in Gbit/s (0: 10 x the inter-host one)" },
    { "ZEN_NET_INTRA_LAT_US", "0",
      "sparse cost model: per-message latency inside a host in microseconds (0: the inter-host one "
      "/ 5)" },
    { "ZEN_SPARSE_RANKS_PER_HOST", "0",
      "sparse: emulate hosts of this many consecutive ranks for the hierarchical form (0: the "
      "launcher's grouping)" },
    { "ZEN_SPARSE_PARTITION", "auto",
      "sparse balanced: owner partition method, auto (count on one thread, hash with threads), "
      "hash (ZEN Algorithm 1) or count (counting partition by h0); the owners are the same" },
    { "ZEN_SPARSE_PULL_BRUCK_MAX_BYTES", "67108864",
      "sparse BALANCED: pull blobs of up to this many bytes in all travel in log2(n) Bruck rounds, "
      "more on the ring (n-1 steps); 0: always the ring" },
    { "ZEN_SPARSE_BLOCK_SIZE", "256",
      "sparse BLOCK scheme: elements per block (OmniReduce-style)" },
    { "ZEN_SPARSE_NS_PER_SORT", "18",
      "sparse cost model: ns per index to coalesce (radix sort); `zen simulate --calibrate` "
      "measures it and the constants below (defaults: its median of 5 runs on the 2-core CI "
      "VM, docs/benchmarks.md), 0: not counted" },
    { "ZEN_SPARSE_NS_PER_HASH", "7.5",
      "sparse cost model: ns per index of BALANCED's owner partition (the counting partition on "
      "one thread; 0: not counted)" },
    { "ZEN_SPARSE_NS_PER_MERGE", "17",
      "sparse cost model: ns per entry and heap level of a k-way merge (0: not counted)" },
    { "ZEN_SPARSE_NS_PER_MERGE2", "6.2",
      "sparse cost model: ns per entry of HIERARCHICAL's two-way merge (0: not counted)" },
    { "ZEN_SPARSE_NS_PER_BITMAP", "12.6",
      "sparse cost model: ns per row of an owner's sum to encode or decode in a hash bitmap (0: "
      "not counted)" },
    { "ZEN_SPARSE_NS_PER_COPY_BYTE", "0.16",
      "sparse cost model: ns per byte packed, gathered, scattered or zeroed (0: not counted)" },
    { "ZEN_SPARSE_NS_PER_REDUCE_BYTE", "0.26",
      "sparse cost model: ns per byte of an f32 add into a buffer (0: not counted)" },
    { "ZEN_SPARSE_NS_PER_WIRE_BYTE", "0.8",
      "sparse cost model: transport CPU in ns per byte sent or received (tcp/mpi; 0: not "
      "counted)" },
    { "ZEN_SPARSE_CPU_SHARE", "0",
      "sparse cost model: fraction of a core each rank gets, e.g. 0.25 for 8 ranks on 2 cores "
      "(0: 1, inproc: cores / ranks)" },
    { "ZEN_SPARSE_PROFILE_PERIOD", "100",
      "sparse AUTO: re-measure a keyed tensor's sparsity profile every this many calls" },
    { "ZEN_SPARSE_TUNE_WINDOW", "5",
      "sparse AUTO: a scheme's estimate is the median of its last this many measurements (1-8)" },
    { "ZEN_SPARSE_EXPLORE_PERIOD", "10",
      "sparse AUTO: try the runner-up on every this many calls of a keyed tensor, within the "
      "budget (0: never)" },
    { "ZEN_SPARSE_EXPLORE_BACKOFF", "8",
      "sparse AUTO: each recheck that leaves the choice unchanged doubles the gap to the next, up "
      "to this many periods; a new choice restores the period (1: a fixed period)" },
    { "ZEN_SPARSE_TUNE_SWITCH", "0.05",
      "sparse AUTO: the scheme a keyed tensor runs yields only to one faster by more than this "
      "fraction, measured in pairs of calls (each under the same load)" },
    { "ZEN_SPARSE_EXPLORE_BUDGET", "0.05",
      "sparse AUTO: explorations may add at most this fraction to the measured time" },
    { "ZEN_NET_MSG_CPU_US", "7",
      "sparse cost model: CPU a received message costs (wake-up, locks) when more ranks than "
      "cores share a host (inproc, shm), in microseconds (0: not counted)" },
    { "ZEN_SPARSE_TUNE_WARM", "3",
      "sparse AUTO: measurements of each candidate scheme of a keyed tensor before AUTO runs the "
      "measured fastest (0: trust the model)" },
    { "ZEN_SPARSE_TUNE_TOP", "2",
      "sparse AUTO: the model's first this many schemes are always measured in the warm-up" },
    { "ZEN_SPARSE_TUNE_PRUNE", "2",
      "sparse AUTO: warm-up candidates also include every scheme estimated within this factor of "
      "the best" },
    { "ZEN_SPARSE_TUNE_DROP", "2",
      "sparse AUTO: a scheme measured slower than this factor times the best is not tried again" },
    { "ZEN_SPARSE_AUTO_RECHECK", "16",
      "sparse AUTO: a keyed tensor's ranks exchange their records (density, skew) on every this "
      "many calls; in between they decide from agreed state without a message (1: every call)" },
    { "ZEN_SPARSE_AUTO_OVERHEAD", "0.01",
      "sparse AUTO: a keyed tensor's record exchanges and profile re-measures are spaced so that "
      "each takes at most this fraction of the time its calls spend in their scheme (at least "
      "every ZEN_SPARSE_AUTO_RECHECK and ZEN_SPARSE_PROFILE_PERIOD calls, at most 8x that; 0: "
      "exactly those periods)" },
    { "ZEN_SPARSE_CALIBRATE_ONLINE", "1",
      "sparse AUTO: 1 calibrates the model's latency and core share from each keyed tensor's own "
      "calls (record exchange and coalesce times) and reports it scaled by the median measured / "
      "predicted of the schemes measured (stats.predicted_s); 0: the configured constants only" },
    { "ZEN_SPARSE_MODEL_BIAS", "",
      "sparse AUTO: multiply the model's predictions, e.g. dense=0.001,balanced=3 (a deliberately "
      "wrong model, for tests of the online correction)" },
    { "ZEN_SPARSE_PROFILE_SAMPLES", "4096",
      "sparse AUTO: indices per rank sampled (by hash) to estimate densification ratios" },
    { "ZEN_TP_ARRIVAL_WEIGHT", "0",
      "tp detection: add this times the time the others waited for a rank (arrival stamps) to its "
      "measured time; 1 catches slowness from outside the GEMMs" },
    { "ZEN_TP_DETECT_MARGIN", "0.4",
      "tp detection of whole-step slowness (a rank throttled from outside): a rank is blamed in a "
      "round when the others wait for it (arrival stamps) longer than for the median rank by this "
      "fraction of the median rank's busy time per step; 0 turns it off" },
    { "ZEN_TP_DETECT_WINDOW", "5",
      "tp detection of whole-step slowness: a rank is flagged when blamed in a majority of this "
      "many recent rounds (1-16)" },
    { "ZEN_TP_PERIOD", "",
      "tp balancing: steps between detection/decision rounds (empty: the options, default 10)" },
    { "ZEN_TP_DELTA", "",
      "tp balancing: straggler when slower than (1 + delta) x the median (empty: the options, "
      "default 0.1)" },
    { "ZEN_TP_RHO_MAX", "",
      "tp balancing: largest fraction of K a straggler may prune (empty: the options, default "
      "0.5)" },
    { "ZEN_TP_PRIORITY", "",
      "tp resizing keep set: score, random or prefix (empty: the options, default score)" },
};

#define PARAM_COUNT (sizeof param_table / sizeof param_table[0])

/* How a value is checked. A name without a row here is a free-form string (addresses, fault
 * specs) or is parsed and checked by its reader (ZEN_RANK & co. in bootstrap/env.c). */
typedef enum {
    CHECK_LONG,
    CHECK_DOUBLE,
    CHECK_TIMEOUT,
    CHECK_U64,
    CHECK_CHOICE
} check_kind;

struct param_check {
    const char *name; /* without ZEN_ */
    check_kind kind;
    double lo, hi;       /* inclusive bounds of LONG and DOUBLE */
    const char *choices; /* CHOICE: the accepted words, separated by '|' */
};

#define TIB ((double)((int64_t)1 << 40))

static const struct param_check param_checks[] = {
    { "LOG_LEVEL", CHECK_CHOICE, 0, 0, "error|warn|info|debug|trace" },
    { "SEED", CHECK_U64, 0, 0, NULL },
    { "TIMEOUT_S", CHECK_TIMEOUT, 0, 0, NULL },
    { "ALLOC_CACHE_MB", CHECK_LONG, 0, 1 << 20, NULL },
    { "SOCKET_BUF_BYTES", CHECK_LONG, 0, 1 << 30, NULL },
    { "ALLREDUCE_ALGO", CHECK_CHOICE, 0, 0, "auto|ring|rhd|mpi" },
    { "RING_FUSE", CHECK_LONG, 0, 1, NULL },
    /* Below a few hundred bytes a chunk costs more in per-message overhead than it moves. */
    { "RING_CHUNK_BYTES", CHECK_LONG, 256, 1 << 30, NULL },
    { "RHD_MAX_BYTES", CHECK_LONG, 0, TIB, NULL },
    { "ALLGATHER_BRUCK_MAX_BYTES", CHECK_LONG, 0, TIB, NULL },
    { "COLL_LONG_BYTES", CHECK_LONG, 0, TIB, NULL },
    { "MPI_NATIVE", CHECK_LONG, 0, 1, NULL },
    { "SHM_PREFAULT", CHECK_LONG, -1, 1, NULL },
    { "NET_GBPS", CHECK_DOUBLE, 0, 1e6, NULL },
    { "NET_LAT_US", CHECK_DOUBLE, 0, 1e7, NULL },
    { "NET_INTRA_GBPS", CHECK_DOUBLE, 0, 1e6, NULL },
    { "NET_INTRA_LAT_US", CHECK_DOUBLE, 0, 1e7, NULL },
    { "SPARSE_RANKS_PER_HOST", CHECK_LONG, 0, 1 << 20, NULL },
    { "SPARSE_PARTITION", CHECK_CHOICE, 0, 0, "auto|hash|count" },
    { "SPARSE_BLOCK_SIZE", CHECK_LONG, 1, 1 << 24, NULL },
    { "SPARSE_NS_PER_SORT", CHECK_DOUBLE, 0, 1e6, NULL },
    { "SPARSE_NS_PER_HASH", CHECK_DOUBLE, 0, 1e6, NULL },
    { "SPARSE_NS_PER_MERGE", CHECK_DOUBLE, 0, 1e6, NULL },
    { "SPARSE_NS_PER_MERGE2", CHECK_DOUBLE, 0, 1e6, NULL },
    { "SPARSE_NS_PER_BITMAP", CHECK_DOUBLE, 0, 1e6, NULL },
    { "SPARSE_NS_PER_COPY_BYTE", CHECK_DOUBLE, 0, 1e6, NULL },
    { "SPARSE_NS_PER_REDUCE_BYTE", CHECK_DOUBLE, 0, 1e6, NULL },
    { "SPARSE_NS_PER_WIRE_BYTE", CHECK_DOUBLE, 0, 1e6, NULL },
    { "SPARSE_CPU_SHARE", CHECK_DOUBLE, 0, 1024, NULL },
    { "SPARSE_PROFILE_PERIOD", CHECK_LONG, 1, 1 << 30, NULL },
    { "SPARSE_PROFILE_SAMPLES", CHECK_LONG, 1, 1 << 30, NULL },
    { "NET_MSG_CPU_US", CHECK_DOUBLE, 0, 1e7, NULL },
    { "SPARSE_TUNE_WARM", CHECK_LONG, 0, 1000, NULL },
    { "SPARSE_TUNE_WINDOW", CHECK_LONG, 1, 8, NULL },
    { "SPARSE_TUNE_TOP", CHECK_LONG, 0, 16, NULL },
    { "SPARSE_TUNE_PRUNE", CHECK_DOUBLE, 1, 1e9, NULL },
    { "SPARSE_TUNE_DROP", CHECK_DOUBLE, 1, 1e9, NULL },
    { "SPARSE_EXPLORE_BACKOFF", CHECK_LONG, 1, 1 << 20, NULL },
    { "SPARSE_TUNE_SWITCH", CHECK_DOUBLE, 0, 0.5, NULL },
    { "SPARSE_AUTO_RECHECK", CHECK_LONG, 1, 1 << 30, NULL },
    { "SPARSE_AUTO_OVERHEAD", CHECK_DOUBLE, 0, 1, NULL },
    { "TP_ARRIVAL_WEIGHT", CHECK_DOUBLE, 0, 10, NULL },
    { "TP_DETECT_MARGIN", CHECK_DOUBLE, 0, 100, NULL },
    { "TP_DETECT_WINDOW", CHECK_LONG, 1, 16, NULL },
    { "TP_PERIOD", CHECK_LONG, 1, 1000000, NULL },
    { "TP_DELTA", CHECK_DOUBLE, 0, 99.999, NULL },
    { "TP_RHO_MAX", CHECK_DOUBLE, 0, 0.95, NULL },
    { "TP_PRIORITY", CHECK_CHOICE, 0, 0, "score|random|prefix" },
    { "REQUIRE_SECRET", CHECK_LONG, 0, 1, NULL },
    { "HEARTBEAT_S", CHECK_TIMEOUT, 0, 0, NULL },
};

#define CHECK_COUNT (sizeof param_checks / sizeof param_checks[0])

/*
 * Name -> row, an open-addressing table built once. The readers look their tunables up on every
 * call (a sparse AUTO call reads about a dozen), and a scan of the table with strcmp plus an
 * snprintf of the variable's name cost about 3% of a 0.5 ms call on 4 inproc ranks (perf).
 */
#define INDEX_SLOTS 512 /* a power of two, over 2 x PARAM_COUNT */
_Static_assert(PARAM_COUNT * 2 < INDEX_SLOTS, "grow INDEX_SLOTS");

static uint16_t row_index[INDEX_SLOTS]; /* row + 1; 0: empty */
static pthread_once_t row_index_once = PTHREAD_ONCE_INIT;

static uint32_t name_hash(const char *name)
{
    return (uint32_t)zen__fnv1a(name, strlen(name), 0);
}

static void build_row_index(void)
{
    for (size_t i = 0; i < PARAM_COUNT; i++) {
        uint32_t h = name_hash(param_table[i].name + 4) & (INDEX_SLOTS - 1);
        while (row_index[h])
            h = (h + 1) & (INDEX_SLOTS - 1);
        row_index[h] = (uint16_t)(i + 1);
    }
}

static const struct param_row *find_row(const char *name)
{
    pthread_once(&row_index_once, build_row_index);
    for (uint32_t h = name_hash(name) & (INDEX_SLOTS - 1); row_index[h];
         h = (h + 1) & (INDEX_SLOTS - 1))
        if (strcmp(param_table[row_index[h] - 1].name + 4, name) == 0)
            return &param_table[row_index[h] - 1];
    return NULL;
}

static const struct param_check *find_check(const char *name)
{
    for (size_t i = 0; i < CHECK_COUNT; i++)
        if (strcmp(param_checks[i].name, name) == 0)
            return &param_checks[i];
    return NULL;
}

static int is_choice(const char *v, const char *choices)
{
    size_t n = strlen(v);
    for (const char *c = choices; *c;) {
        size_t len = strcspn(c, "|");
        if (len == n && strncasecmp(c, v, n) == 0)
            return 1;
        c += len + (c[len] == '|');
    }
    return 0;
}

int zen__param_parse_timeout(const char *v, double *seconds)
{
    if (strcasecmp(v, "inf") == 0 || strcasecmp(v, "infinity") == 0 || strcasecmp(v, "none") == 0) {
        *seconds = INFINITY;
        return 0;
    }
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end != '\0' || errno == ERANGE || !(d > 0) || isnan(d))
        return -1;
    *seconds = d >= ZEN_TIMEOUT_NONE_S ? INFINITY : d;
    return 0;
}

/* NULL when value v is acceptable for the check; else why not (static text). */
static const char *check_value(const struct param_check *c, const char *v, char *why, size_t n)
{
    char *end;
    errno = 0;
    switch (c->kind) {
    case CHECK_LONG: {
        long x = strtol(v, &end, 10);
        if (end == v || *end != '\0' || errno == ERANGE)
            return "not an integer";
        if ((double)x < c->lo || (double)x > c->hi) {
            snprintf(why, n, "outside [%.0f, %.0f]", c->lo, c->hi);
            return why;
        }
        return NULL;
    }
    case CHECK_DOUBLE: {
        double x = strtod(v, &end);
        if (end == v || *end != '\0' || errno == ERANGE || !isfinite(x))
            return "not a finite number";
        if (x < c->lo || x > c->hi) {
            snprintf(why, n, "outside [%g, %g]", c->lo, c->hi);
            return why;
        }
        return NULL;
    }
    case CHECK_TIMEOUT: {
        double s;
        return zen__param_parse_timeout(v, &s) == 0 ? NULL
                                                    : "not a positive number of seconds or inf";
    }
    case CHECK_U64:
        if (*v == '-' || (strtoull(v, &end, 10), end == v || *end != '\0' || errno == ERANGE))
            return "not a decimal 64-bit number";
        return NULL;
    case CHECK_CHOICE:
        if (!is_choice(v, c->choices)) {
            snprintf(why, n, "not one of %s", c->choices);
            return why;
        }
        return NULL;
    }
    return NULL;
}

static const char *env_value(const char *name)
{
    char key[96];
    snprintf(key, sizeof key, "ZEN_%s", name);
    return getenv(key);
}

/* One warning per variable and process: the readers ask again on every call. */
static atomic_uchar warned[PARAM_COUNT];

const char *zen__param_str(const char *name)
{
    const struct param_row *row = find_row(name);
    const char *env = row ? getenv(row->name) : env_value(name);
    const char *fallback = row ? row->default_value : "";
    if (!env || !*env)
        return fallback;
    const struct param_check *c = find_check(name);
    char why[96];
    const char *bad = c ? check_value(c, env, why, sizeof why) : NULL;
    if (!bad)
        return env;
    if (row && !atomic_exchange(&warned[row - param_table], 1))
        ZEN_WARN("init", "ignoring ZEN_%s=%s (%s); using the default '%s'", name, env, bad,
                 fallback);
    return fallback;
}

long zen__param_long(const char *name)
{
    return strtol(zen__param_str(name), NULL, 10);
}

double zen__param_double(const char *name)
{
    return strtod(zen__param_str(name), NULL);
}

double zen__param_timeout(const char *name)
{
    double s = 0;
    if (zen__param_parse_timeout(zen__param_str(name), &s) != 0)
        return 0;
    return s;
}

size_t zen_param_count(void)
{
    return PARAM_COUNT;
}

zen_status zen_param_get(size_t index, zen_param_info *info)
{
    if (index >= PARAM_COUNT || !info)
        return ZEN_EINVAL;
    const struct param_row *row = &param_table[index];
    const char *env = getenv(row->name);
    const struct param_check *c = find_check(row->name + 4);
    static _Thread_local char why[96];
    const char *bad = (env && *env && c) ? check_value(c, env, why, sizeof why) : NULL;
    info->name = row->name;
    info->default_value = row->default_value;
    info->value = (env && *env && !bad) ? env : row->default_value;
    info->source = bad ? "ignored" : (env && *env) ? "env" : "default";
    if (env && *env && strcmp(row->name, "ZEN_JOB_SECRET") == 0)
        info->value = "(hidden)"; /* `zen info` output gets pasted into bug reports */
    info->description = row->description;
    info->problem = bad;
    info->raw_value = bad ? env : NULL;
    return ZEN_OK;
}
