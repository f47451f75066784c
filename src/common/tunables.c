/*
 * The tunables table: one row per ZEN_* variable, declared with the macro of its kind, so that no
 * row exists without a kind and bounds (tunables_table.h). The checks and typed getters are in
 * tunables_check.c.
 */
#include "common/tunables.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zen/zen.h>

#include "common/hash.h"
#include "common/tunables_table.h"

#define WORDS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define SCHEMES \
    WORDS("auto", "balanced", "hierarchical", "allgather", "block", "ps", "dense", "zen")
#define TIB ((double)((int64_t)1 << 40))

/* clang-format off */
#define P_LONG(name, lo, hi, dflt, desc)         { name, PK_LONG, 0, lo, hi, NULL, NULL, dflt, desc }
#define P_DOUBLE(name, lo, hi, dflt, desc)       { name, PK_DOUBLE, 0, lo, hi, NULL, NULL, dflt, desc }
#define P_TIMEOUT(name, dflt, desc)              { name, PK_TIMEOUT, 0, 0, 0, NULL, NULL, dflt, desc }
#define P_U64(name, dflt, desc)                  { name, PK_U64, 0, 0, 0, NULL, NULL, dflt, desc }
#define P_CHOICE(name, words, dflt, desc)        { name, PK_CHOICE, 0, 0, 0, words, NULL, dflt, desc }
#define P_LIST(name, words, dflt, desc)          { name, PK_LIST, 0, 0, 0, words, NULL, dflt, desc }
#define P_FACTORS(name, words, lo, hi, dflt, desc) \
    { name, PK_FACTORS, 0, lo, hi, words, NULL, dflt, desc }
#define P_STRING(name, check, dflt, desc)        { name, PK_STRING, 0, 0, 0, NULL, check, dflt, desc }
/* strict: a malformed value is refused by its reader (see tunables.h) */
#define P_STRICT_LONG(name, lo, hi, dflt, desc) \
    { name, PK_LONG, PF_STRICT, lo, hi, NULL, NULL, dflt, desc }
#define P_STRICT_STRING(name, check, flags, dflt, desc) \
    { name, PK_STRING, PF_STRICT | (flags), 0, 0, NULL, check, dflt, desc }
/* clang-format on */

#define check_host    zen__param_check_host
#define check_host_id zen__param_check_host_id
#define check_path    zen__param_check_path
#define check_secret  zen__param_check_secret
#define check_fault   zen__param_check_fault
#define check_word    zen__param_check_word

/* Keep sorted by subsystem; add a row for every new ZEN_* variable. Strict rows (identity,
 * secret, addresses) have no usable fallback: their readers refuse a malformed value. */
static const zen_param_row param_table[] = {
    P_CHOICE("ZEN_LOG_LEVEL", WORDS("error", "warn", "info", "debug", "trace"), "warn",
             "log level: error, warn, info, debug, trace"),
    P_LIST("ZEN_LOG_SUBSYS",
           WORDS("all", "init", "bootstrap", "transport", "coll", "sparse", "tp", "train"), "all",
           "comma list of subsystems to log: init,bootstrap,transport,coll,sparse,tp,train"),
    P_U64("ZEN_SEED", "",
          "fixed seed for the sparse hash functions (decimal; default: random, drawn by rank 0)"),
    P_TIMEOUT("ZEN_TIMEOUT_S", "300",
              "default deadline in seconds of every blocking wait (inf: none; 1e9 and more count "
              "as inf, converted saturating); the heartbeat window is at most half the smallest "
              "over the ranks (not below 2 s)"),
    P_TIMEOUT("ZEN_HEARTBEAT_S", "10",
              "tcp and shm: a peer that sends nothing (not even a heartbeat) for the window is "
              "named as hung and the job aborts; the window is the largest value over the ranks, "
              "agreed at setup, cut to half the smallest ZEN_TIMEOUT_S, not below 2 s by that cut "
              "(inf: this rank does not watch, but still beats)"),
    P_TIMEOUT("ZEN_WAIT_REPORT_S", "30",
              "a blocking wait (rendezvous, Store, shm setup, receive) that lasts longer prints "
              "\"still waiting for rank(s) ...\" every this many seconds (inf: never)"),
    P_STRICT_STRING("ZEN_JOB_SECRET", check_secret, PF_SECRET, "",
                    "tcp: per-job secret; ranks prove it to each other (HMAC-SHA256) at rendezvous "
                    "and on every mesh connection (docs/security.md)"),
    P_STRICT_STRING("ZEN_JOB_SECRET_FILE", check_path, 0, "",
                    "tcp: file whose contents are the job secret"),
    P_STRICT_LONG(
        "ZEN_REQUIRE_SECRET", 0, 1, "0",
        "1: refuse to build a mesh of sockets (tcp, shm and shm+tcp jobs, through the environment "
        "or a Store) without a job secret (default: warn on a non-loopback master)"),
    P_LONG("ZEN_ALLOC_CACHE_MB", 0, 1 << 20, "256",
           "freed blocks of 4 KiB and more kept for reuse, at most this many MiB (0: none, and no "
           "rounding of 64 KiB-64 MiB requests to a power of two)"),
    P_STRICT_LONG("ZEN_RANK", 0, 1 << 20, "",
                  "rank of this process (also RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK; "
                  "SLURM_PROCID under srun)"),
    P_STRICT_LONG("ZEN_WORLD_SIZE", 1, 1 << 20, "",
                  "number of ranks (also WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE; "
                  "SLURM_STEP_NUM_TASKS under srun)"),
    P_STRICT_STRING("ZEN_MASTER_ADDR", check_host, 0, "127.0.0.1",
                    "tcp rendezvous host of rank 0 (also MASTER_ADDR; under srun: the step's first "
                    "node)"),
    P_STRICT_LONG("ZEN_MASTER_PORT", 1, 65535, "29500",
                  "tcp rendezvous port of rank 0 (also MASTER_PORT; under srun: 20000 + 10 x "
                  "(SLURM_JOB_ID % 1000) + SLURM_STEP_ID % 10)"),
    P_STRICT_LONG("ZEN_LOCAL_RANK", 0, 1 << 20, "",
                  "rank within this host (also LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK; "
                  "SLURM_LOCALID under srun)"),
    P_STRICT_LONG("ZEN_LOCAL_SIZE", 1, 1 << 20, "",
                  "ranks on this host (also LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE)"),
    P_STRICT_STRING("ZEN_SOCKET_IFADDR", check_host, 0, "",
                    "tcp: address this rank listens on and advertises (default: the one used to "
                    "reach the master)"),
    P_LONG("ZEN_SOCKET_BUF_BYTES", 0, 1 << 30, "4194304",
           "tcp: SO_SNDBUF/SO_RCVBUF of data connections (0, or above net.core.[rw]mem_max: kernel "
           "autotuning)"),
    P_LONG("ZEN_COMM_SLICE_US", 0, 100000, "100",
           "scheduling slice zen's communication threads ask Linux >= 6.12 for (tcp readers, "
           "zen_torch's worker), so they preempt busy compute threads when woken (0: kernel "
           "default)"),
    /* A word here; whether it names a transport is checked by the communicator, which can see
     * the transport registry (src/coll/transport_env.c): a new transport adds no word here. */
    P_STRING("ZEN_TRANSPORT", check_word, "auto",
             "process transport: auto (shm inside a host, tcp across hosts), tcp, shm (all ranks "
             "on one host), shm+tcp, mpi (any process transport of the registry, any case)"),
    P_STRING("ZEN_HOST_ID", check_host_id, "",
             "host identity for shm/auto (default: hostname + boot id); ranks with equal ids share "
             "memory (emulated clusters set one per emulated host)"),
    P_LONG("ZEN_SHM_RING_KB", 64, 65536, "512",
           "shm: bytes of each per-pair ring in KiB (64 .. 65536)"),
    P_LONG("ZEN_SHM_SPIN_US", -1, 1000000, "-1",
           "shm: microseconds a waiter polls before it sleeps on the futex (-1: 50)"),
    P_LONG(
        "ZEN_SHM_SPIN_YIELD", -1, 1, "-1",
        "shm: 1 a polling waiter yields its core (sched_yield) between polls: unpinned ranks that "
        "the scheduler puts on one core still progress; 0 it spins; -1 spin only when this process "
        "is pinned to one core and the host's ranks do not outnumber its cores, else yield"),
    P_LONG("ZEN_SHM_CMA", -1, 1, "-1",
           "shm: 1 lets large messages be read straight from the sender (process_vm_readv), 0: "
           "always copy through the ring, -1: single copy where this host's process_vm_readv is "
           "at least half as fast as memcpy (measured once per process)"),
    P_LONG("ZEN_SHM_CMA_MIN_BYTES", 0, TIB, "65536",
           "shm: single copy (CMA) from this message size on"),
    P_LONG("ZEN_SHM_PREFAULT", -1, 1, "-1",
           "shm: 1 maps and touches the rings' pages at setup, 0 leaves them to the first calls, "
           "-1 prefaults while the host's rings (processes^2 x ring) take at most 512 MiB"),
    P_STRICT_STRING(
        "ZEN_FAULT", check_fault, 0, "",
        "tests: inject a fault, e.g. rank=1,after=3,action=kill (see src/transport/faulty.h)"),
    P_CHOICE("ZEN_ALLREDUCE_ALGO", WORDS("auto", "ring", "rhd", "mpi", "slots"), "auto",
             "dense allreduce algorithm: auto, ring, rhd, mpi, slots (shm latency path)"),
    P_LONG("ZEN_SHM_SLOT_MAX_BYTES", 0, 65536, "65536",
           "shm: allreduce, broadcast, reduce and barrier of up to this many bytes per rank go "
           "through the shared collective slots (one step, no messages), and every collective "
           "agrees on its arguments there; 0: never (read once per communicator)"),
    P_LONG("ZEN_RING_FUSE", 0, 1, "1",
           "1: ring reduce-scatter lets the transport reduce each chunk on delivery (inproc: one "
           "pass); 0: copy then reduce"),
    P_LONG("ZEN_RING_CHUNK_BYTES", 256, 1 << 30, "1048576",
           "ring allreduce pipeline chunk size in bytes"),
    P_LONG("ZEN_RHD_MAX_BYTES", 0, TIB, "262144",
           "auto: use recursive halving/doubling up to this many bytes"),
    P_LONG("ZEN_ALLGATHER_BRUCK_MAX_BYTES", 0, TIB, "65536",
           "allgather: log2(n)-round algorithm up to this many bytes in all (0: always the ring)"),
    P_LONG("ZEN_COLL_LONG_BYTES", 0, TIB, "262144",
           "broadcast/reduce: scatter+allgather / reduce-scatter+gather from this many bytes "
           "(binomial tree below)"),
    P_LONG("ZEN_MPI_NATIVE", 0, 1, "0", "1: dense collectives on the mpi transport call MPI's own"),
    P_LONG("ZEN_COLL_AGREE", 0, 1, "1",
           "1: every dense collective checks that all ranks passed the same kind, op, dtype, count "
           "and root, and fails on every rank if not (small allreduce: in its own messages; the "
           "others: one log2(n)-step exchange of 16 bytes first); 0: no check (set it alike on "
           "every rank; docs/algorithms.md)"),
    P_DOUBLE("ZEN_NET_GBPS", 0, 1e6, "0",
             "sparse cost model: link bandwidth in Gbit/s (0: measured or transport default)"),
    P_DOUBLE("ZEN_NET_LAT_US", 0, 1e7, "0",
             "sparse cost model: per-message latency in microseconds (0: measured or default)"),
    P_DOUBLE("ZEN_NET_INTRA_GBPS", 0, 1e6, "0",
             "sparse cost model: bandwidth inside a host in Gbit/s (0: 10 x the inter-host one)"),
    P_DOUBLE("ZEN_NET_INTRA_LAT_US", 0, 1e7, "0",
             "sparse cost model: per-message latency inside a host in microseconds (0: the "
             "inter-host one / 5)"),
    P_LONG("ZEN_SPARSE_RANKS_PER_HOST", 0, 1 << 20, "0",
           "sparse: emulate hosts of this many consecutive ranks for the hierarchical form (0: the "
           "launcher's grouping)"),
    P_CHOICE(
        "ZEN_SPARSE_PARTITION", WORDS("auto", "hash", "count"), "auto",
        "sparse balanced: owner partition method, auto (count on one thread, hash with threads), "
        "hash (ZEN Algorithm 1) or count (counting partition by h0); the owners are the same"),
    P_LONG("ZEN_SPARSE_PULL_BRUCK_MAX_BYTES", 0, TIB, "67108864",
           "sparse BALANCED: pull blobs of up to this many bytes in all travel in log2(n) Bruck "
           "rounds, more on the ring (n-1 steps); 0: always the ring"),
    P_LONG("ZEN_SPARSE_BLOCK_SIZE", 1, 1 << 24, "256",
           "sparse BLOCK scheme: elements per block (OmniReduce-style)"),
    P_DOUBLE("ZEN_SPARSE_NS_PER_SORT", 0, 1e6, "18",
             "sparse cost model: ns per index to coalesce (radix sort); `zen simulate --calibrate` "
             "measures it and the constants below (defaults: its median of 5 runs on the 2-core CI "
             "VM, docs/benchmarks.md), 0: not counted"),
    P_DOUBLE("ZEN_SPARSE_NS_PER_HASH", 0, 1e6, "7.5",
             "sparse cost model: ns per index of BALANCED's owner partition (the counting "
             "partition on one thread; 0: not counted)"),
    P_DOUBLE("ZEN_SPARSE_NS_PER_MERGE", 0, 1e6, "17",
             "sparse cost model: ns per entry and heap level of a k-way merge (0: not counted)"),
    P_DOUBLE("ZEN_SPARSE_NS_PER_MERGE2", 0, 1e6, "6.2",
             "sparse cost model: ns per entry of HIERARCHICAL's two-way merge (0: not counted)"),
    P_DOUBLE("ZEN_SPARSE_NS_PER_BITMAP", 0, 1e6, "12.6",
             "sparse cost model: ns per row of an owner's sum to encode or decode in a hash bitmap "
             "(0: not counted)"),
    P_DOUBLE(
        "ZEN_SPARSE_NS_PER_COPY_BYTE", 0, 1e6, "0.16",
        "sparse cost model: ns per byte packed, gathered, scattered or zeroed (0: not counted)"),
    P_DOUBLE("ZEN_SPARSE_NS_PER_REDUCE_BYTE", 0, 1e6, "0.26",
             "sparse cost model: ns per byte of an f32 add into a buffer (0: not counted)"),
    P_DOUBLE("ZEN_SPARSE_NS_PER_WIRE_BYTE", 0, 1e6, "0.8",
             "sparse cost model: transport CPU in ns per byte sent or received (tcp/mpi; 0: not "
             "counted)"),
    P_DOUBLE("ZEN_SPARSE_CPU_SHARE", 0, 1024, "0",
             "sparse cost model: fraction of a core each rank gets, e.g. 0.25 for 8 ranks on 2 "
             "cores (0: 1, inproc: cores / ranks)"),
    P_LONG("ZEN_SPARSE_PROFILE_PERIOD", 1, 1 << 30, "100",
           "sparse AUTO: re-measure a keyed tensor's sparsity profile every this many calls"),
    P_LONG(
        "ZEN_SPARSE_TUNE_WINDOW", 1, 8, "5",
        "sparse AUTO: a scheme's estimate is the median of its last this many measurements (1-8)"),
    P_LONG("ZEN_SPARSE_EXPLORE_PERIOD", 0, 1 << 30, "10",
           "sparse AUTO: try the runner-up on every this many calls of a keyed tensor, within the "
           "budget (0: never)"),
    P_LONG("ZEN_SPARSE_EXPLORE_BACKOFF", 1, 1 << 20, "8",
           "sparse AUTO: each recheck that leaves the choice unchanged doubles the gap to the "
           "next, up to this many periods; a new choice restores the period (1: a fixed period)"),
    P_DOUBLE("ZEN_SPARSE_TUNE_SWITCH", 0, 0.5, "0.05",
             "sparse AUTO: the scheme a keyed tensor runs yields only to one faster by more than "
             "this fraction, measured in pairs of calls (each under the same load)"),
    P_DOUBLE("ZEN_SPARSE_EXPLORE_BUDGET", 0, 1e9, "0.05",
             "sparse AUTO: explorations may add at most this fraction to the measured time"),
    P_DOUBLE("ZEN_NET_MSG_CPU_US", 0, 1e7, "7",
             "sparse cost model: CPU a received message costs (wake-up, locks) when more ranks "
             "than cores share a host (inproc, shm), in microseconds (0: not counted)"),
    P_LONG("ZEN_SPARSE_TUNE_WARM", 0, 1000, "3",
           "sparse AUTO: measurements of each candidate scheme of a keyed tensor before AUTO runs "
           "the measured fastest (0: trust the model)"),
    P_LONG("ZEN_SPARSE_TUNE_TOP", 0, 16, "2",
           "sparse AUTO: the model's first this many schemes are always measured in the warm-up"),
    P_DOUBLE("ZEN_SPARSE_TUNE_PRUNE", 1, 1e9, "2",
             "sparse AUTO: warm-up candidates also include every scheme estimated within this "
             "factor of the best"),
    P_DOUBLE(
        "ZEN_SPARSE_TUNE_DROP", 1, 1e9, "2",
        "sparse AUTO: a scheme measured slower than this factor times the best is not tried again"),
    P_LONG(
        "ZEN_SPARSE_AUTO_RECHECK", 1, 1 << 30, "16",
        "sparse AUTO: a keyed tensor's ranks exchange their records (density, skew) on every this "
        "many calls; in between they decide from agreed state without a message (1: every call)"),
    P_DOUBLE("ZEN_SPARSE_AUTO_OVERHEAD", 0, 1, "0.01",
             "sparse AUTO: a keyed tensor's record exchanges and profile re-measures are spaced so "
             "that each takes at most this fraction of the time its calls spend in their scheme "
             "(at least every ZEN_SPARSE_AUTO_RECHECK and ZEN_SPARSE_PROFILE_PERIOD calls, at most "
             "8x that; 0: exactly those periods)"),
    P_DOUBLE("ZEN_SPARSE_AUTO_REGIME", 0, 1e9, "2",
             "sparse AUTO: when a keyed tensor's mean density moves beyond this factor of the "
             "density its tuner started at (a top-k ratio warm-up, a new phase of training), AUTO "
             "re-measures its profile and starts its tuner over (<= 1: never)"),
    P_LONG(
        "ZEN_SPARSE_CALIBRATE_ONLINE", 0, 1, "1",
        "sparse AUTO: 1 calibrates the model's latency and core share from each keyed tensor's own "
        "calls (record exchange and coalesce times) and reports it scaled by the median measured / "
        "predicted of the schemes measured (stats.predicted_s); 0: the configured constants only"),
    P_FACTORS("ZEN_SPARSE_MODEL_BIAS", SCHEMES, 1e-12, 1e12, "",
              "sparse AUTO: multiply the model's predictions, e.g. dense=0.001,balanced=3 (a "
              "deliberately wrong model, for tests of the online correction)"),
    P_LONG("ZEN_SPARSE_PROFILE_SAMPLES", 1, 1 << 30, "4096",
           "sparse AUTO: indices per rank sampled (by hash) to estimate densification ratios"),
    P_DOUBLE("ZEN_TP_ARRIVAL_WEIGHT", 0, 10, "0",
             "tp detection: add this times the time the others waited for a rank (arrival stamps) "
             "to its measured time; 1 catches slowness from outside the GEMMs"),
    P_DOUBLE(
        "ZEN_TP_DETECT_MARGIN", 0, 100, "0.4",
        "tp detection of whole-step slowness (a rank throttled from outside): a rank is blamed in "
        "a round when the others wait for it (arrival stamps) longer than for the median rank by "
        "this fraction of the median rank's busy time per step; 0 turns it off"),
    P_LONG("ZEN_TP_DETECT_WINDOW", 1, 16, "5",
           "tp detection of whole-step slowness: a rank is flagged when blamed in a majority of "
           "this many recent rounds (1-16)"),
    P_LONG("ZEN_TP_PERIOD", 1, 1000000, "10",
           "tp balancing: steps between detection/decision rounds, where zen_tp_options leaves it "
           "unset (an explicit option wins)"),
    P_DOUBLE("ZEN_TP_DELTA", 0, 99.999, "0.1",
             "tp balancing: straggler when slower than (1 + delta) x the median, where "
             "zen_tp_options leaves it unset"),
    P_DOUBLE("ZEN_TP_RHO_MAX", 0, 0.95, "0.5",
             "tp balancing: largest fraction of K a straggler may prune, where zen_tp_options "
             "leaves it unset"),
    P_CHOICE("ZEN_TP_PRIORITY", WORDS("score", "random", "prefix"), "score",
             "tp resizing keep set: score, random or prefix, where zen_tp_options leaves it unset"),
    P_CHOICE(
        "ZEN_TORCH_SPARSE_SCHEME", SCHEMES, "auto",
        "zen_torch: sparse scheme of a new process group (zen_torch.set_sparse_scheme changes it)"),
    P_LONG("ZEN_TORCH_SYNC", 0, 1, "0",
           "zen_torch: 1 completes every collective of a new process group inside its call "
           "(no overlap, for comparison); 0 returns at once and runs it on the group's worker"),
};

#define PARAM_COUNT (sizeof param_table / sizeof param_table[0])

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

const zen_param_row *zen__param_row(const char *name)
{
    pthread_once(&row_index_once, build_row_index);
    for (uint32_t h = name_hash(name) & (INDEX_SLOTS - 1); row_index[h];
         h = (h + 1) & (INDEX_SLOTS - 1))
        if (strcmp(param_table[row_index[h] - 1].name + 4, name) == 0)
            return &param_table[row_index[h] - 1];
    return NULL;
}

size_t zen__param_rows(void)
{
    return PARAM_COUNT;
}

const zen_param_row *zen__param_row_at(size_t index)
{
    return index < PARAM_COUNT ? &param_table[index] : NULL;
}
