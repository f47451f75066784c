/*
 * The sparse-allreduce cost model: predicted communication time of every scheme from the rank
 * count, the tensor shape, a sparsity profile and a network model (bandwidth and per-message
 * latency). Pure functions with no communicator, so `zen simulate` can evaluate them at any scale.
 *
 * Model (paper section 4.2 and Appendix B.1, extended with latency and the real wire formats):
 *   wire = latency * (sequential steps) + issue overhead * (extra messages posted in the same
 *          step) + (bytes the busiest rank sends or receives) / bandwidth.
 * The local computation of each scheme is a separate term (zen_cpu_model below, after the wire
 * formulas). A COO entry is E = 4 + 4w bytes (u32 row index, w f32 values); M = rows * width.
 *   DENSE         ring: 2(n-1) steps, 2(n-1)/n * 4M bytes
 *   ALLGATHER     (n-1) * nnz * (4 + 4w)   (paper: 2(n-1) d M)
 *   PS            push (n-1)/n * s * nnz * E, pull (n-1)/n * s_n * gamma_n * nnz * E
 *   BALANCED      push (n-1)/n * nnz * E, pull (n-1)/n * min(COO, hash bitmap) of the sum (Eq. 1)
 *                 (global top-k: the pull carries min(k, rows of the sum); PS likewise)
 *   HIERARCHICAL  sum over rounds i < log2 n of min(gamma^(2^i) * nnz * E, 4M)  (Eq. 2), plus a
 *                 fold and an unfold step when n is not a power of two
 *   BLOCK         as PS, counting non-zero blocks of B elements (4 + 4B bytes each)
 * nnz = d * rows is the mean local count of non-zero rows, gamma^k the densification ratio of a
 * sum over k ranks, s the skew over n even ranges (paper Def. 5).
 */
#ifndef ZEN_SPARSE_COST_H
#define ZEN_SPARSE_COST_H

#include <stdint.h>
#include <stdio.h>

#include <zen/simulate.h>
#include <zen/sparse.h>

#define ZEN_COST_MAX_LEVELS 32

/* Default issue overhead of each extra message posted in the same step, as a fraction of the
 * latency (when zen_net_model.overhead_s is 0). */
#define ZEN_COST_MSG_OVERHEAD 0.1

typedef struct zen_sparse_profile {
    double density;                    /* d_G: mean over ranks of local non-zero rows / rows */
    int levels;                        /* gamma[0..levels) are valid */
    double gamma[ZEN_COST_MAX_LEVELS]; /* gamma[i] = gamma^(2^i); gamma[0] = 1 */
    double gamma_n;                    /* gamma^n: density of the sum over all n ranks / d_G */
    double skew;            /* n * max_j (non-zeros in range j, all ranks) / all non-zeros; >= 1 */
    double skew_n;          /* same for the summed tensor (0: use skew) */
    double block_density;   /* fraction of B-element blocks non-zero on a rank (< 0: from d) */
    double block_density_n; /* same for the sum (< 0: from gamma_n * d) */
    double block_skew;      /* skew of the non-zero blocks over the n ranges (0: use skew) */
    double block_skew_n;    /* same for the sum (0: use skew_n) */
    int dense_output;       /* 1: the caller wants the dense rows x width result (compute) */
    int any_order;          /* 1: a COO result may come in any order (BALANCED skips its merge) */
    double global_topk;     /* > 0: the owner schemes pull at most this many rows of the sum */
} zen_sparse_profile;

typedef struct zen_net_model {
    double bytes_per_s; /* per-link bandwidth */
    double latency_s;   /* per sequential step (a message and its wait) */
    double overhead_s;  /* per extra message posted in the same step; 0: 0.1 * latency_s */
    double msg_cpu_s;   /* CPU a received message costs (wake-up, locks), charged like compute:
                         * set when more ranks than cores share a host, 0 otherwise */
    zen_cpu_model cpu;  /* all zero: network only */
} zen_net_model;

/*
 * Compute model (zen_cpu_model, zen/simulate.h): the CPU work of the busiest rank, as nanoseconds
 * per unit of each kernel the schemes run. The work of a scheme (B = bytes of f32 values,
 * V = 4w per row, nnz/nnz_n/hot as in the wire formulas, lg k = log2 max(k, 2)):
 *   every scheme  coalesce the input: nnz (sort + V copy)
 *   ALLGATHER     pack nnz E; merge n runs: n nnz (merge lg n + V copy)
 *   PS            pack nnz E; owner merges n runs: n hot (merge lg n + V copy), packs hot_n E;
 *                 concatenate the pulled ranges: nnz_n E copy
 *   BALANCED      partition nnz (hash) + gather nnz (4 + V) copy; unpack what arrived: nnz E
 *                 copy; owner coalesces it: nnz (sort + V copy); bitmap: encode the owner's
 *                 nnz_n/n rows + decode all nnz_n, bitmap each (the words between set bits go
 *                 64 rows at a time), nnz_n/n + nnz_n V copy (COO blobs: copies instead); merge
 *                 the n decoded runs: nnz_n (merge lg n + V), with any_order nnz_n V copy
 *   HIERARCHICAL  round i merges two runs of g_i nnz: 2 g_i nnz (merge2 + V copy), or reduces D
 *                 bytes once the partial sum went dense (plus one densify, D copy)
 *   DENSE         densify: D + nnz V copy; reduce-scatter: (n-1)/n D reduce; extract: D copy
 *   BLOCK         densify local blocks (copy), owner sums n hot blocks (reduce) and packs them
 *   dense output  (profile.dense_output) memset D + scatter nnz_n V copy, except DENSE (in place)
 *   transport CPU (kernel copies of TCP): wire_byte per byte the busiest rank sends or receives
 *
 * Overlap: time = latency terms + max(bytes / bandwidth, bytes * wire_byte / share) + compute /
 * share. The transport's copies stream with the transfer (the kernel copies one segment while
 * the next is on the link), so they overlap the wire; the scheme kernels need the data of the
 * previous phase (partition before push, merge after it, encode before pull, decode after), so
 * they add. share is the fraction of a core each rank gets (8 ranks on 2 cores: 0.25): every
 * rank computes at the same time in these symmetric schemes, so CPU work stretches by 1 / share.
 */

/* Synthetic overlap models for profiles (simulation, tests). */
typedef enum zen_overlap_model {
    ZEN_OVERLAP_RANDOM = 0,    /* each row non-zero independently: gamma^k = (1-(1-d)^k)/d */
    ZEN_OVERLAP_IDENTICAL = 1, /* all ranks the same rows: gamma^k = 1 */
    ZEN_OVERLAP_DISJOINT = 2   /* no shared rows: gamma^k = min(k, 1/d) */
} zen_overlap_model;

/* Densification ratio gamma^k of a model at density d. */
double zen__cost_gamma_model(zen_overlap_model model, double d, double k);

/* Fill a profile for n ranks from a model (skew 1, block densities derived from d). */
void zen__sparse_profile_model(zen_sparse_profile *p, int n, double density,
                               zen_overlap_model model);

/* The paper's closed forms in units of 2 d M / b (COO, no latency, n a power of two). */
double zen__cost_eq1_factor(int n, double gamma_n);              /* ((n-1)/n)(gamma_n + 1) */
double zen__cost_eq2_factor(int n, const zen_sparse_profile *p); /* sum_{2^i<n} gamma^(2^i) */

/* Elements per BLOCK block: ZEN_SPARSE_BLOCK_SIZE rows of width... as block.c uses them. */
uint64_t zen__cost_block_rows(uint32_t width, long block_elems);

/*
 * One scheme's cost is a pure function of zen_cost_terms (the quantities every formula above is
 * written in, derived once per prediction) giving its zen_cost_parts. Each scheme defines its own
 * next to its algorithm (scheme/<name>.c) and names it in its registry row (scheme/registry.c);
 * plan/predict.c sums the parts of every registered scheme into seconds.
 */
typedef struct zen_cost_terms {
    const zen_sparse_profile *p;
    const zen_net_model *net;
    int n;
    uint32_t width;
    long block_elems;
    double a;         /* latency of a step */
    double conc;      /* a step posting n - 1 messages at once: latency + issue overheads */
    double N, n1;     /* n, n - 1 */
    double frac;      /* (n - 1) / n */
    double R, w;      /* rows, width */
    double E, V, D;   /* COO bytes per entry, value bytes per row, dense bytes */
    double d;         /* density clamped to [0, 1] */
    double nnz;       /* mean local non-zero rows */
    double nnz_n;     /* rows of the global sum */
    double s, sn;     /* skew of the input and of the sum */
    double hot;       /* rows in the busiest even range of the input */
    double hot_n;     /* same for the sum */
    double cp, rd;    /* ns per copied / reduced byte */
    double lgn;       /* heap levels of an n-way merge */
    double coalesce;  /* ns to coalesce the input (every scheme) */
    double zero;      /* ns to zero a dense result */
    double dense_out; /* ns to zero and scatter a dense result (0 for a sparse one) */
    /* global top-k (p->global_topk > 0; BALANCED and PS): the share of the sum's rows the pull
     * carries, min(1, k / nnz_n), and the select's steps (up to 5 allreduces of <= 512 B,
     * ceil(log2 n) steps each; a tie at the boundary adds 4 of 1 KB, seldom, left out); 1 and 0
     * without it */
    double keep;
    double topk_steps;
    /* bytes per pulled entry: E, or with global top-k 4w + the expected gap-coded index
     * (scheme/global_topk.h; zen__cost_gap_bytes) over the owners' hashed rows (BALANCED) or
     * ranges (PS) */
    double E_pull_bal, E_pull_ps;
} zen_cost_terms;

/* Expected bytes of one LEB128 varint gap (wire/gap.h) between rows kept independently with mean
 * gap g: 1 + the chance that the gap needs a 2nd, 3rd... byte, exp(-2^(7m) / g) each. */
double zen__cost_gap_bytes(double g);

/* One scheme's prediction in parts: latency terms, wire bytes of the busiest rank, compute
 * nanoseconds at a full core, and the messages a rank receives. */
typedef struct zen_cost_parts {
    double lat_s;
    double bytes;
    double cpu_ns;
    double msgs;
} zen_cost_parts;

typedef zen_cost_parts (*zen_sparse_cost_fn)(const zen_cost_terms *t);

/* Derive the terms; 0 when nothing moves (one rank, an empty tensor: every scheme costs 0). */
int zen__cost_terms_init(zen_cost_terms *t, int n, uint64_t rows, uint32_t width,
                         const zen_sparse_profile *p, const zen_net_model *net, long block_elems);

/* Seconds of one scheme from its parts: latency (the agreement's steps included), then the wire
 * or the transport CPU (whichever is longer), then compute at the rank's core share. *cpu_s (may
 * be NULL) gets the compute part. */
double zen__cost_seconds(const zen_cost_parts *part, const zen_cost_terms *t, double *cpu_s);

/* gamma^(2^i) from the profile, or the random model where the profile has no entry. */
double zen__cost_level_gamma(const zen_sparse_profile *p, int i);

static inline double zen_cost_min2(double a, double b)
{
    return a < b ? a : b;
}

/* 1 when BALANCED's pull of total_bytes blob bytes on n ranks takes Bruck's ceil(log2 n) rounds
 * (n > 2, total at most ZEN_SPARSE_PULL_BRUCK_MAX_BYTES), 0 for the ring. balanced.c and its cost
 * ask the same question, so the model charges the latency the pull really has. */
int zen__sparse_pull_uses_bruck(int n, double total_bytes);

#endif
