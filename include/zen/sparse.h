/*
 * sparse.h - sparse allreduce (ZEN, OSDI'25) and its baselines.
 *
 * A sparse tensor lives over a dense shape rows x width: nnz row indices and nnz x width values,
 * row-major. width = 1 is element sparsity (top-k compressed gradients); width = d is row
 * sparsity (embedding gradients, one index per row). Input indices may be unsorted and
 * duplicated; duplicates are summed locally before anything is sent. rows must be below 2^32.
 *
 * zen_sparse_allreduce sums the tensors of all ranks. The result equals a dense allreduce of the
 * densified inputs (exactly for integer-valued floats; otherwise up to the order of additions).
 * Each rank may contribute a different nnz, including 0. Collective: all ranks call it with the
 * same rows, width, scheme, average flag and output kind (value and index types may differ).
 *
 * Errors are agreed before any data moves: an index >= rows (or negative) on any rank makes every
 * rank return ZEN_EINVAL (the last error of the offending rank says "index X >= rows R", the
 * others name that rank); rows >= 2^32 gives ZEN_EUNSUPPORTED; width 0 or a value type other
 * than f32/bf16 gives ZEN_EINVAL; ranks that disagree on rows, width or options get
 * ZEN_EMISMATCH. After such an argument error the communicator stays usable. A failure while
 * data is moving (a peer lost, out of memory) aborts the communicator.
 *
 * Thread safety: the allreduce calls follow comm.h (one thread uses a communicator at a time;
 * opts.threads only adds helper threads inside the call). Every other function of this header
 * touches no communicator and may run on any thread, concurrently on distinct arguments.
 * Ownership: inputs are only read during the call; results the library allocates are released
 * with the matching *_free function, which accepts NULL and leaves the struct zeroed.
 */
#ifndef ZEN_SPARSE_H
#define ZEN_SPARSE_H

#include <zen/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zen_index_type {
    ZEN_INDEX_U32 = 0,
    ZEN_INDEX_I64 = 1
} zen_index_type;

/* A caller-owned sparse tensor (input). values are f32 or bf16 (value_type). */
typedef struct zen_sparse_tensor {
    uint64_t rows;
    uint32_t width;
    size_t nnz;
    zen_index_type index_type;
    const void *indices;  /* nnz entries of index_type */
    zen_dtype value_type; /* ZEN_F32 or ZEN_BF16 */
    const void *values;   /* nnz * width entries of value_type */
} zen_sparse_tensor;

/* A library-allocated result: unique u32 indices (ascending unless the call asked for
 * zen_sparse_options.any_order) and f32 values. Free with zen_sparse_result_free. */
typedef struct zen_sparse_result {
    uint64_t rows;
    uint32_t width;
    size_t nnz;
    uint32_t *indices;
    float *values; /* nnz * width */
} zen_sparse_result;

/* Free the arrays of result and zero it; NULL is ok. */
ZEN_API void zen_sparse_result_free(zen_sparse_result *result);

typedef enum zen_sparse_scheme {
    ZEN_SPARSE_AUTO = 0,         /* cheapest predicted by the cost model */
    ZEN_SPARSE_BALANCED = 1,     /* ZEN: hierarchical hashing push + hash-bitmap pull */
    ZEN_SPARSE_HIERARCHICAL = 2, /* SparCML recursive doubling with a sparse-to-dense switch */
    ZEN_SPARSE_ALLGATHER = 3,    /* allgather of COO then local sum (torch/gloo, Horovod) */
    ZEN_SPARSE_BLOCK = 4,        /* OmniReduce-style non-zero blocks over even ranges */
    ZEN_SPARSE_PS = 5,           /* range-partitioned push/pull (sparse parameter server) */
    ZEN_SPARSE_DENSE = 6,        /* densify, then ring allreduce */
    /* The schemes this header knows. Not part of the ABI: it grows when a scheme is added (a
     * minor version), so nothing the library reads or writes is sized by it. A program may loop
     * over 1..COUNT-1 or size its own tables with it, but a newer library may report a scheme at
     * or above the COUNT it was built with (zen_sparse_stats.scheme; zen_sparse_scheme_name
     * names it), so check before indexing. */
    ZEN_SPARSE_SCHEME_COUNT = 7
} zen_sparse_scheme;

/* Static name of a scheme ("balanced"), "?" for an invalid one. Never NULL. */
ZEN_API const char *zen_sparse_scheme_name(zen_sparse_scheme scheme);

/* Parse a scheme name ("balanced", "auto", ...); ZEN_EINVAL for an unknown name. */
ZEN_API zen_status zen_sparse_scheme_parse(const char *name, zen_sparse_scheme *out);

/* Pull-blob format of BALANCED (ablation of the hash bitmap, ZEN Fig. 17). */
typedef enum zen_sparse_pull_format {
    ZEN_SPARSE_PULL_AUTO = 0,        /* hash bitmap or COO, whichever is smaller (the default) */
    ZEN_SPARSE_PULL_HASH_BITMAP = 1, /* hash bitmap over the owner's universe always */
    ZEN_SPARSE_PULL_COO = 2,         /* COO always ("Algorithm 1 alone") */
    ZEN_SPARSE_PULL_PLAIN_BITMAP = 3 /* a bitmap over all rows per owner (n rows / 8 bytes) */
} zen_sparse_pull_format;

/*
 * Hierarchical form (ZEN section 7.1): dense reduce-scatter inside each host, the chosen sparse
 * scheme across hosts among the ranks holding the same shard of rows, dense or sparse allgather
 * inside the host. AUTO takes it when the cost model predicts it faster than the flat scheme; it
 * always stays flat on one host or with one rank per host. Densifies rows x width floats.
 */
typedef enum zen_sparse_hierarchy {
    ZEN_SPARSE_HIER_AUTO = 0,
    ZEN_SPARSE_HIER_OFF = 1,
    ZEN_SPARSE_HIER_ON = 2
} zen_sparse_hierarchy;

/* Options; initialise with zen_sparse_options_init(&o) or ZEN_SPARSE_OPTIONS_INIT. A NULL options
 * pointer means the defaults. size: as in zen_comm_options (sizeof, set by the initialisers; an
 * unknown size is ZEN_EINVAL; 0 is this version's). */
typedef struct zen_sparse_options {
    size_t size;
    zen_sparse_scheme scheme;
    bool average;    /* divide the sum by the rank count (f32 division of the sum) */
    const char *key; /* identifies a recurring tensor for sparsity profiling (AUTO); may be NULL */
    int threads;     /* hierarchical-hashing threads for BALANCED; <= 1: single-threaded */
    /* -- hierarchical sync across hosts (hier-host) -- */
    zen_sparse_hierarchy hierarchy; /* AUTO (cost model), OFF (flat) or ON */
    /* > 0: emulate hosts of this many consecutive ranks (the last host may be smaller);
     * 0: ZEN_SPARSE_RANKS_PER_HOST, else the launcher's grouping */
    int ranks_per_host;
    /* -- ablation switches of BALANCED (ZEN Fig. 16/17); 0 keeps the default. Setting hash_probes
     *    or hash_r1 makes BALANCED partition with Algorithm 1 even on one thread. -- */
    int hash_probes; /* k: slot probes per item of Algorithm 1, 1..3 (0: 3) */
    double hash_r1;  /* parallel-memory slots per item an owner gets, r1 / (nnz / n) (0: 2) */
    zen_sparse_pull_format pull_format; /* format of the pull blobs (AUTO: the smaller per owner) */
    /* -- global top-k (docs/compression.md "Global top-k") --
     * 0: off (every rank gets the union). > 0: element sparsity (width 1) only: every rank
     * receives at most global_topk values, the largest in magnitude of the reduced sum (exactly
     * min(global_topk, non-zero rows of the sum) of them; exact zeros are never kept). Which of
     * the rows tied at the boundary magnitude are kept is the library's choice, the same on
     * every rank and in every run (it depends only on the rows and their sums, not on the
     * scheme's owners or the communicator's hash seed).
     * The owners of BALANCED and PS agree a magnitude threshold after their reduce and pull only
     * what passes it; AUTO then runs one of those two (BALANCED unless it predicts PS cheaper),
     * always flat (hierarchy is ignored). Other schemes, and width > 1, give ZEN_EINVAL on every
     * rank; ranks that disagree on it get ZEN_EMISMATCH. With average, the kept values are
     * divided as usual. What was dropped: zen_sparse_topk_dropped. */
    size_t global_topk;
    /* true: zen_sparse_allreduce may return the result's rows in any order (each row still
     * once), for callers that scatter the result rather than walk it in order. BALANCED then
     * hands back its owners' disjoint sorted runs one after another instead of merging them
     * (a k-way merge over all n runs: most of its decode at 8 ranks); the other schemes, and
     * zen_sparse_allreduce_dense, are unaffected. Local to the rank (ranks may differ). A result
     * in any order is not valid input for zen_sparse_topk_dropped, which needs ascending rows. */
    bool any_order;
} zen_sparse_options;

#define ZEN_SPARSE_OPTIONS_INIT                                                                  \
    {                                                                                            \
        .size = sizeof(zen_sparse_options), .scheme = ZEN_SPARSE_AUTO, .average = false,         \
        .key = NULL, .threads = 1, .hierarchy = ZEN_SPARSE_HIER_AUTO, .ranks_per_host = 0,       \
        .hash_probes = 0, .hash_r1 = 0.0, .pull_format = ZEN_SPARSE_PULL_AUTO, .global_topk = 0, \
        .any_order = false                                                                       \
    }

/* Fill *opts with the defaults (the same as ZEN_SPARSE_OPTIONS_INIT). NULL is ignored. */
ZEN_API void zen_sparse_options_init(zen_sparse_options *opts);

/* Phases timed in the statistics: the steps of a sparse sync, onto which every
 * scheme maps its work. Unlike ZEN_SPARSE_SCHEME_COUNT, ZEN_PHASE_COUNT is part of the ABI (it
 * sizes zen_sparse_stats.phase_us): a new scheme reuses these phases, and a new phase would be a
 * new struct version. */
typedef enum zen_sparse_phase {
    ZEN_PHASE_PARTITION = 0, /* coalesce duplicates and split by destination */
    ZEN_PHASE_PUSH = 1,
    ZEN_PHASE_AGGREGATE = 2,
    ZEN_PHASE_ENCODE = 3,
    ZEN_PHASE_PULL = 4,
    ZEN_PHASE_DECODE = 5,
    ZEN_PHASE_COUNT = 6
} zen_sparse_phase;

/* Capacity of zen_sparse_stats.predicted_s: fixed, so that adding a scheme leaves the struct's
 * size (the ABI) unchanged. The library holds at most this many schemes (a build-time check);
 * going past it would be a new struct version. */
#define ZEN_SPARSE_STATS_SCHEMES 16

/* Per-call statistics, zeroed then filled on every rank; the stats argument may be NULL. Its size
 * does not depend on ZEN_SPARSE_SCHEME_COUNT (tests/test_abi.c holds it). */
typedef struct zen_sparse_stats {
    zen_sparse_scheme scheme; /* scheme actually used */
    double phase_us[ZEN_PHASE_COUNT];
    double total_us;
    uint64_t bytes_sent; /* by this rank */
    uint64_t bytes_recv;
    uint64_t msgs_sent;
    uint64_t msgs_recv;
    double imbalance_push; /* paper Def. 8; 1 is perfect, 0 when not applicable */
    double imbalance_pull;
    size_t nnz_in;  /* local nnz after coalescing */
    size_t nnz_out; /* nnz of the result */
    /* cost model: predicted seconds per scheme (0 = not predicted) and the profile used.
     * predicted_s[s] for s < predicted_count, the library's scheme count (<=
     * ZEN_SPARSE_STATS_SCHEMES, and possibly above the ZEN_SPARSE_SCHEME_COUNT a caller was built
     * with); the entries from predicted_count on are 0. */
    double predicted_s[ZEN_SPARSE_STATS_SCHEMES];
    uint32_t predicted_count;
    double density; /* local density d_G */
    double gamma_n; /* densification ratio gamma^n */
    double skew;    /* skewness ratio over n even ranges */
    /* -- hierarchical sync across hosts: scheme is then the one used across hosts, and the byte
     *    and message counts include the intra- and inter-host sub-communicators -- */
    int hierarchical;          /* 1: the hierarchical form ran */
    int hosts;                 /* hosts seen (0: grouping not looked at) */
    double predicted_hier_s;   /* cost model's time of the hierarchical form (0: not predicted) */
    uint64_t inter_bytes_sent; /* hierarchical: the part of bytes_sent that crossed hosts */
    uint64_t inter_bytes_recv;
    /* -- BALANCED, where its ablation switches act: the hash partition (Algorithm 1, which
     *    hash_probes and hash_r1 tune; both 0 after the counting partition, which the default
     *    takes on one thread) and the format of this rank's pull blob. The switches leave the
     *    owners, so the push bytes, unchanged. -- */
    uint64_t partition_serial; /* items that found no free slot and went to serial memory */
    uint32_t partition_passes; /* 1, plus one re-pass per serial-memory overflow */
    uint32_t pull_format; /* zen_sparse_pull_format of this rank's blob (never AUTO; 0: no pull) */
} zen_sparse_stats;

/*
 * Sum the sparse tensors of all ranks into the dense buffer out_dense (rows * width f32, written
 * whole, zeros where no rank has a non-zero). out_dense must not alias the input. Collective.
 */
ZEN_API zen_status zen_sparse_allreduce_dense(zen_comm *comm, const zen_sparse_tensor *in,
                                              float *out_dense, const zen_sparse_options *opts,
                                              zen_sparse_stats *stats);

/* Same, into a library-allocated sparse result, rows ascending unless opts->any_order (*out
 * filled; free it with zen_sparse_result_free). Rows whose sum cancels to exactly zero may be
 * absent. On failure *out is zeroed and owns nothing. */
ZEN_API zen_status zen_sparse_allreduce(zen_comm *comm, const zen_sparse_tensor *in,
                                        zen_sparse_result *out, const zen_sparse_options *opts,
                                        zen_sparse_stats *stats);

/*
 * Error feedback for global top-k (exact): add this rank's own input values at the indices absent
 * from result into the dense residual (residual[i] += value, for every entry of input, duplicates
 * included, bf16 widened to f32). Why it is exact: an index absent from the result was dropped
 * (or its sum was exactly zero), and the sum over ranks of their input values at that index is
 * the reduced sum there, so summed over ranks the residuals gain exactly (full sum - kept sum),
 * in the input's units (not divided by the rank count when the call averaged), and exactly for
 * integer-valued floats. A rank adds only what it contributed, so no extra message is needed.
 * input: width 1, the tensor passed to the allreduce; result: its result (sorted unique
 * indices, as the allreduce returns them); residual: residual_len >= input->rows floats.
 * ZEN_EINVAL for NULL arguments, width != 1, residual_len < rows, a result of other rows or
 * whose indices are not strictly ascending (any_order), or an index >= rows (negative for i64);
 * residual is then unchanged. Touches no communicator; thread safe on distinct residuals.
 */
ZEN_API zen_status zen_sparse_topk_dropped(const zen_sparse_tensor *input,
                                           const zen_sparse_result *result, float *residual,
                                           uint64_t residual_len);

/* ---- Gradient traces: recorded sparse gradients, one file per rank and training step, written
 * by `zen train --dump-grads DIR` and replayed by `zen bench sparse --trace DIR`. The byte layout
 * is specified in docs/trace-format.md. Predicting the schemes' times from a trace, without
 * communication (`zen simulate`), is zen/simulate.h. ---- */

#define ZEN_TRACE_NAME_MAX 255

/* One sparse tensor of a step: sorted or not, duplicates allowed (they are summed on use). */
typedef struct zen_trace_tensor {
    char name[ZEN_TRACE_NAME_MAX + 1];
    uint64_t rows;
    uint32_t width;
    uint64_t nnz;
    uint32_t *indices; /* nnz */
    float *values;     /* nnz * width */
} zen_trace_tensor;

typedef struct zen_trace_step {
    uint32_t rank;
    uint32_t world_size;
    uint64_t step;
    size_t count;
    zen_trace_tensor *tensors;
} zen_trace_step;

/* DIR/rank<R>-step<S>.zgrad (S zero-padded to 6 digits); ZEN_EINVAL if it does not fit. */
ZEN_API zen_status zen_trace_path(char *out, size_t size, const char *dir, uint32_t rank,
                                  uint64_t step);

/* Write a step to path (atomically: a temporary file path.tmp renamed into place, so two writers
 * of one path race). ZEN_EIO on failure, ZEN_EINVAL for a malformed step (index >= rows, width
 * 0, rows >= 2^32, name too long, rank >= world_size), ZEN_ENOMEM. step is only read. */
ZEN_API zen_status zen_trace_write(const char *path, const zen_trace_step *step);

/* Read a step; ZEN_EIO if the file does not exist, ZEN_EINVAL (logged) if it cannot be opened or
 * is not a regular file (a FIFO is refused at once, not waited on) or holds more than half the
 * available memory, ZEN_ECORRUPT if the magic, version, sizes, an index, a rank not below the
 * world size or the checksum is wrong, ZEN_ENOMEM. On success the caller owns *out's arrays:
 * free them with zen_trace_free. On failure *out owns nothing. */
ZEN_API zen_status zen_trace_read(const char *path, zen_trace_step *out);

/* Free the tensors read by zen_trace_read (not step itself) and zero the count; NULL is ok. */
ZEN_API void zen_trace_free(zen_trace_step *step);

#ifdef __cplusplus
}
#endif

#endif /* ZEN_SPARSE_H */
