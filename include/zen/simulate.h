/*
 * simulate.h - the sparse cost model without communication: what `zen simulate` runs.
 *
 * Predicts the time of every sparse scheme of zen/sparse.h at any rank count on one machine from
 * a sparsity profile (synthetic, or measured on a gradient trace), a network (bandwidth and
 * latency per link) and optionally a compute model of the schemes' local work. Nothing here
 * touches a communicator: a program that only syncs gradients needs zen/sparse.h alone.
 *
 * This header is apart from zen/sparse.h because it is a planning tool, not part of a training
 * step: its structs describe the model's inputs (zen_cpu_model gains a field when a scheme gets a
 * new kind of kernel), so they may change between minor versions while the sync API does not.
 * Per-scheme outputs are caller arrays with an explicit count, never sized by
 * ZEN_SPARSE_SCHEME_COUNT, so a program built against fewer schemes than the library has still
 * gets a correct, shorter answer.
 *
 * Thread safety: no function here keeps state between calls; each may run on any thread,
 * concurrently with any other zen call, on distinct arguments (zen_sparse_cpu_calibrate measures
 * the machine, so concurrent work skews its numbers, not its safety). Ownership: inputs are only
 * read during the call; what the library allocates (zen_index_sets) is released with
 * zen_index_sets_free.
 */
#ifndef ZEN_SIMULATE_H
#define ZEN_SIMULATE_H

#include <stdio.h>

#include <zen/sparse.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A sparsity profile: what the cost model needs to know about a recurring sparse tensor. */
typedef struct zen_sparsity_profile {
    double density;   /* d_G: mean local fraction of non-zero rows */
    int levels;       /* gamma[0..levels) are valid */
    double gamma[32]; /* gamma[i] = gamma^(2^i): density of a sum over 2^i ranks / d_G */
    double gamma_n;   /* gamma^n for the rank count the profile was made for */
    double skew;      /* n * max over n even row ranges of the non-zeros in it / all; >= 1 */
} zen_sparsity_profile;

/* Index sets (one per rank and step) of a sparse tensor, e.g. loaded from a gradient trace. */
typedef struct zen_index_sets {
    int nsets;
    uint64_t rows;
    uint32_t width;
    uint32_t **indices; /* nsets arrays */
    size_t *nnz;        /* nsets counts */
} zen_index_sets;

/* Load every rank's and step's indices of the tensor named tensor (NULL: the first one of each
 * file) from a trace directory (docs/trace-format.md), files in name order. The caller owns *out:
 * free it with zen_index_sets_free. Errors: ZEN_EIO (directory or a file unreadable),
 * ZEN_ECORRUPT (a bad file), ZEN_EMISMATCH (the tensor's shape or the world size changes between
 * files), ZEN_EINVAL (no file holds the tensor, or a file is not a regular file), ZEN_ENOMEM (the
 * indices would take more than half the available memory; logged); on failure *out owns
 * nothing. Only reads the directory. */
ZEN_API zen_status zen_index_sets_from_trace(const char *dir, const char *tensor,
                                             zen_index_sets *out);

/* Free the arrays zen_index_sets_from_trace put into sets and zero it; NULL is ok. */
ZEN_API void zen_index_sets_free(zen_index_sets *sets);

/* Profile for nranks ranks from a synthetic overlap model: "random" (rows non-zero
 * independently), "identical" (all ranks the same rows) or "disjoint". ZEN_EINVAL for nranks < 1,
 * density outside (0, 1], an unknown model or a NULL argument. *out is written whole. */
ZEN_API zen_status zen_sparse_profile_synthetic(int nranks, double density, const char *overlap,
                                                zen_sparsity_profile *out);

/*
 * Profile for nranks ranks measured on index sets: gamma^k from unions of k sets (sets are pooled
 * across ranks and steps, so a trace of R ranks x S steps measures k up to R*S; beyond that the
 * union is extrapolated as if further sets were independent), skew over nranks even ranges.
 * ZEN_EINVAL for nranks < 1, no sets, rows 0 or >= 2^32, or sets without any index; ZEN_ENOMEM.
 * sets is only read.
 */
ZEN_API zen_status zen_sparse_profile_from_sets(const zen_index_sets *sets, int nranks,
                                                zen_sparsity_profile *out);

/*
 * Predicted seconds of every scheme on nranks ranks for a rows x width f32 tensor, at gbps
 * Gbit/s per link and lat_us per message, network only (no compute term).
 *
 * seconds has count entries (the caller's capacity, normally ZEN_SPARSE_SCHEME_COUNT): entry s
 * is scheme s's time for s below both count and the library's scheme count, entries beyond the
 * library's count are set to 0, and seconds[ZEN_SPARSE_AUTO] is the cheapest time over every
 * scheme the library knows (which may be one past count). count 0 is ZEN_EINVAL. Other errors:
 * ZEN_EINVAL for nranks < 1, rows or width 0, gbps <= 0, lat_us < 0, profile->levels outside
 * 0..32 or a NULL pointer.
 */
ZEN_API zen_status zen_sparse_predict(int nranks, uint64_t rows, uint32_t width,
                                      const zen_sparsity_profile *profile, double gbps,
                                      double lat_us, double *seconds, size_t count);

/* Compute model of the schemes' local work, in nanoseconds per unit of each kernel (the formulas
 * are in src/sparse/model/cost.h). All zero: the network-only model. May gain fields in a minor
 * version (see the top of this header): fill it with zen_sparse_cpu_model_default or
 * zen_sparse_cpu_model_read rather than field by field. */
typedef struct zen_cpu_model {
    double sort;        /* ns per index: coalesce (radix sort + duplicate sum), without values */
    double hash;        /* ns per index: hierarchical hash partition (BALANCED) */
    double merge;       /* ns per entry and heap level: k-way merge of sorted runs */
    double merge2;      /* ns per input entry: two-way linear merge (HIERARCHICAL) */
    double bitmap;      /* ns per row of an owner's sum: hash bitmap encode or decode */
    double copy_byte;   /* ns per byte: pack, gather, scatter, memset */
    double reduce_byte; /* ns per byte: f32 add of a buffer into another */
    double wire_byte;   /* ns per byte sent or received: transport CPU (TCP: kernel copies) */
    double share;       /* fraction of a core per rank (<= 0: 1) */
} zen_cpu_model;

/* Fill *cpu with the constants AUTO uses: the ZEN_SPARSE_NS_PER_* tunables (share from
 * ZEN_SPARSE_CPU_SHARE), read from the environment at each call. cpu must not be NULL. */
ZEN_API void zen_sparse_cpu_model_default(zen_cpu_model *cpu);

/* Time the real kernels on this machine (about a second, one thread, plus a loopback TCP peer
 * thread that ends before the return): coalesce, hash partition, k-way and two-way merge, bitmap
 * encode/decode, copy, reduce, and TCP over loopback (CPU time of both ends per byte). share is
 * left at 1. ZEN_ENOMEM or ZEN_ESYS when a kernel cannot run. */
ZEN_API zen_status zen_sparse_cpu_calibrate(zen_cpu_model *cpu);

/* Write the constants to f as ZEN_SPARSE_NS_PER_*=value lines (an env file; `set -a; . FILE`
 * hands them to AUTO) and flush it. f stays the caller's (not closed). ZEN_EIO if a write fails,
 * ZEN_EINVAL for a NULL argument. */
ZEN_API zen_status zen_sparse_cpu_model_write(const zen_cpu_model *cpu, FILE *f);

/* Read such a file back into *cpu: unknown lines and '#' comments are skipped, missing keys keep
 * the value *cpu had. ZEN_EIO if the file cannot be opened (or is not a regular file of at most
 * 1 MiB), ZEN_ECORRUPT for a bad number or a file without a single known constant (*cpu may then
 * hold the constants read before the error), ZEN_EINVAL for a NULL argument. */
ZEN_API zen_status zen_sparse_cpu_model_read(const char *path, zen_cpu_model *cpu);

/* zen_sparse_predict with a compute model (cpu NULL: network only) and the output kind
 * (dense_output non-zero: the caller wants a dense result). cpu_s (NULL, or count entries like
 * seconds) gets each scheme's compute part, so seconds[s] - cpu_s[s] is the network-only
 * prediction. Errors as zen_sparse_predict. */
ZEN_API zen_status zen_sparse_predict_cpu(int nranks, uint64_t rows, uint32_t width,
                                          const zen_sparsity_profile *profile, double gbps,
                                          double lat_us, const zen_cpu_model *cpu, int dense_output,
                                          double *seconds, double *cpu_s, size_t count);

/* Bytes one rank sends in a sparse allreduce of element-sparse gradients (width 1), with and
 * without global top-k (zen_sparse_options.global_topk), from the cost model: values are 4 bytes,
 * a COO entry 8. See docs/compression.md "Global top-k". */
typedef struct zen_topk_volume {
    double union_bytes;  /* BALANCED, every rank gets the union: push + pull */
    double topk_bytes;   /* BALANCED with global_topk k: push + pull of min(k, union) + select */
    double select_bytes; /* the select's part of topk_bytes (bin allreduces, tie allgather) */
    double ideal_bytes;  /* 2k(n-1)/n values: the lower bound of a global top-k */
    double bound_bytes;  /* 4k(n-1)/n values: zen's target */
    double oktopk_bytes; /* 6k values: Ok-Topk's (PPoPP'22) upper bound */
    double union_s;      /* predicted seconds (network only) of the union ... */
    double topk_s;       /* ... and of the global top-k, at gbps and lat_us */
} zen_topk_volume;

/* The volumes of a width-1 tensor of rows rows on nranks ranks, each rank sending its local
 * density * rows values (profile: its overlap) and receiving the k largest of the sum. ZEN_EINVAL
 * for nranks < 1, rows 0 or >= 2^32, k 0, gbps <= 0, lat_us < 0 or a NULL pointer. */
ZEN_API zen_status zen_sparse_topk_volume(int nranks, uint64_t rows,
                                          const zen_sparsity_profile *profile, uint64_t k,
                                          double gbps, double lat_us, zen_topk_volume *out);

/* Run the real hierarchical-hash partitioner (BALANCED's push) on indices for nranks owners and
 * return the imbalance ratio n * max owner load / nnz (1 = perfect; 1 for nnz 0). Duplicates
 * count each time. ZEN_EINVAL for nranks < 1, nnz >= 2^32, a NULL imbalance or NULL indices with
 * nnz > 0; ZEN_ENOMEM. */
ZEN_API zen_status zen_sparse_partition_imbalance(const uint32_t *indices, size_t nnz, int nranks,
                                                  uint64_t seed, double *imbalance);

#ifdef __cplusplus
}
#endif

#endif /* ZEN_SIMULATE_H */
