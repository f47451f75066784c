/*
 * tp.h - straggler-tolerant 1D (Megatron) tensor parallelism over a tp communicator.
 *
 * Layout: weights are row-major W[out][in], Y = X W^T (+ b), X is [rows][in] row-major, fp32.
 *
 *  COLUMN layer: rank r holds W[out/tp rows][in] (rows r*out/tp ...). Forward takes the full X
 *      [rows][in] and gives the local output shard Y_local [rows][out/tp] (no communication);
 *      backward takes dY_local and gives the full dX [rows][in] (one allreduce over tp inside),
 *      accumulating dW (and db).
 *  ROW layer: rank r holds W[out][in/tp columns] (columns r*in/tp ...). Forward takes the local
 *      input shard X_local [rows][in/tp] and gives the full Y [rows][out] (one allreduce over tp
 *      inside; the replicated bias is added once, after the reduction); backward takes the full
 *      dY and gives dX_local [rows][in/tp], accumulating dW (and db; db is the full bias
 *      gradient on every rank, so replicas stay equal under identical optimizer steps).
 *
 * Balancing (zen_tp_options.balance), applied only to training passes:
 *  NONE     plain Megatron TP.
 *  RESIZE   ZERO-resizing: a straggler drops the lowest-priority columns of each layer's inner
 *           dimension K (at most rho_max of them); shapes never change, the dropped columns get
 *           zero gradients. Lossy.
 *  MIGRATE  exact migration: a straggler's columns are computed by the fast ranks; results equal
 *           the unbalanced run within floating-point tolerance.
 *  SEMI     per straggler: resize when that alone balances, else resize to the cap and migrate
 *           the rest when the predicted migration cost is below the time it saves.
 * Decisions are taken in zen_tp_group_step every `period` steps from timings all-gathered over
 * the tp communicator, so every rank computes the same plan. See docs/hetero-tp.md.
 *
 * Weights may be physically permuted along K while a balance plan is active (so that kept
 * columns are contiguous). zen_tp_linear_weight exposes the physical buffers (fine for an
 * elementwise optimizer; companions registered with zen_tp_linear_attach_state follow every
 * permutation); use zen_tp_linear_export_weight/import_weight for the canonical order.
 *
 * Every rank of the tp communicator must create the same layers in the same order and call
 * forward/backward/step in the same order (collectives and migration messages pair up by it).
 */
#ifndef ZEN_TP_H
#define ZEN_TP_H

#include <zen/comm.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zen_tp_group zen_tp_group;
typedef struct zen_tp_linear zen_tp_linear;

typedef enum zen_tp_kind {
    ZEN_TP_COLUMN = 0,
    ZEN_TP_ROW = 1
} zen_tp_kind;

typedef enum zen_tp_balance {
    ZEN_BALANCE_NONE = 0,
    ZEN_BALANCE_RESIZE = 1,
    ZEN_BALANCE_MIGRATE = 2,
    ZEN_BALANCE_SEMI = 3
} zen_tp_balance;

/* Which columns a resizing straggler keeps. SCORE: largest L1 change since the last refresh. */
typedef enum zen_tp_priority {
    ZEN_TP_PRIORITY_UNSET = -1, /* options: ZEN_TP_PRIORITY if set, else SCORE */
    ZEN_TP_PRIORITY_SCORE = 0,
    ZEN_TP_PRIORITY_RANDOM = 1,
    ZEN_TP_PRIORITY_PREFIX = 2
} zen_tp_priority;

/*
 * Options of a tp group. Initialise with zen_tp_options_init(&o) or ZEN_TP_OPTIONS_INIT (fields
 * added later get defaults).
 *  balance       the policy above.
 *  priority      keep-set policy of resizing (SCORE, or RANDOM/PREFIX for ablation).
 *  period        steps between detection/decision rounds (>= 1).
 *  delta         straggler threshold: slower than (1 + delta) x the median.
 *  rho_max       cap on the fraction of a layer's K a straggler may prune (0..0.95).
 *                These four start unset (ZEN_TP_PRIORITY_UNSET, 0, -1, -1): an unset field takes
 *                ZEN_TP_PRIORITY / ZEN_TP_PERIOD / ZEN_TP_DELTA / ZEN_TP_RHO_MAX when that is
 *                set, else the default (SCORE, 10, 0.1, 0.5). A field the caller set is used as
 *                is: the environment never overrides an explicit option.
 *  hysteresis    a new plan replaces the old one only when some rank's fractions move by more.
 *  ema_alpha     weight of the newest step in the timing EMA (0..1].
 *  bandwidth_Bps migration cost model: link bandwidth in bytes/s (0: measured at the first round).
 *  latency_s     migration cost model: per-message latency in s (< 0: measured with bandwidth).
 *  seed          seed of the RANDOM priority policy.
 * Emulated stragglers (tests, benchmarks) are not options: see zen_tp_group_set_emulation.
 */
typedef struct zen_tp_options {
    size_t size; /* as in zen_comm_options: sizeof, set by the initialisers; 0: this version's */
    zen_tp_balance balance;
    zen_tp_priority priority;
    int period;
    double delta;
    double rho_max;
    double hysteresis;
    double ema_alpha;
    double bandwidth_Bps;
    double latency_s;
    uint64_t seed;
} zen_tp_options;

#define ZEN_TP_OPTIONS_INIT                                                                      \
    {                                                                                            \
        .size = sizeof(zen_tp_options), .balance = ZEN_BALANCE_NONE,                             \
        .priority = ZEN_TP_PRIORITY_UNSET, .period = 0, .delta = -1.0, .rho_max = -1.0,          \
        .hysteresis = 0.05, .ema_alpha = 0.3, .bandwidth_Bps = 0.0, .latency_s = -1.0, .seed = 1 \
    }

/* Fill *opts with the defaults (the same as ZEN_TP_OPTIONS_INIT). NULL is ignored. */
ZEN_API void zen_tp_options_init(zen_tp_options *opts);

/* "none", "resize", "migrate", "semi"; "?" for a value outside the enum. */
ZEN_API const char *zen_tp_balance_name(zen_tp_balance balance);

/* Create a group over tp_comm (not owned; must outlive the group). Local, no communication. */
ZEN_API zen_status zen_tp_group_create(zen_comm *tp_comm, const zen_tp_options *opts,
                                       zen_tp_group **out);
ZEN_API void zen_tp_group_destroy(zen_tp_group *g);

/*
 * TEST AND BENCHMARK EMULATION -- not for production runs.
 *
 * Makes chosen ranks of a tp group behave like slower devices so the balancing policies can be
 * exercised on identical hardware: rank r's tp GEMM work takes `factor` (>= 1) times as long.
 *  mode    Either way each tp GEMM takes factor x its measured wall time. SLEEP: sleep the
 *          (factor-1) x extra (accumulated, slept before the next wait on peers; the core is
 *          free). SPIN: hold the core for it, repeating the GEMM while a repeat still fits and
 *          busy-waiting the rest, like a real slow device sharing the host.
 *  rotate  S > 0: every entry moves to the next rank every S steps (entry rank + step/S, mod tp);
 *          0: fixed.
 *  nslow, slow[]: the emulated stragglers (rank < tp size, factor >= 1; a rank listed twice takes
 *          the larger factor).
 * Initialise with zen_tp_emulation_init or ZEN_TP_EMULATION_INIT (no straggler).
 */
typedef enum zen_tp_slow_mode {
    ZEN_TP_SLOW_SLEEP = 0,
    ZEN_TP_SLOW_SPIN = 1
} zen_tp_slow_mode;

typedef struct zen_tp_slow {
    int rank;
    double factor;
} zen_tp_slow;

#define ZEN_TP_MAX_SLOW 64

typedef struct zen_tp_emulation {
    size_t size; /* sizeof, set by the initialisers; 0: this version's */
    zen_tp_slow_mode mode;
    int rotate;
    int nslow;
    zen_tp_slow slow[ZEN_TP_MAX_SLOW];
} zen_tp_emulation;

#define ZEN_TP_EMULATION_INIT                                                                \
    {                                                                                        \
        .size = sizeof(zen_tp_emulation), .mode = ZEN_TP_SLOW_SLEEP, .rotate = 0, .nslow = 0 \
    }

/* Fill *e with no straggler (the same as ZEN_TP_EMULATION_INIT). NULL is ignored. */
ZEN_API void zen_tp_emulation_init(zen_tp_emulation *e);

/*
 * Set (copy of *e) or clear (e == NULL) the group's straggler emulation. Local, no
 * communication; takes effect for the GEMMs after the call (the rotation counts from step 0 of
 * the group, not from this call). Every rank of the group should set the same emulation so the
 * ranks agree on who is slow -- nothing checks that. Call between steps, not concurrently with
 * other calls on the group. ZEN_EINVAL (group unchanged, reason in the last error) for a bad
 * mode, rotate < 0, nslow outside 0..ZEN_TP_MAX_SLOW, a rank outside the group or a factor < 1.
 */
ZEN_API zen_status zen_tp_group_set_emulation(zen_tp_group *g, const zen_tp_emulation *e);

/*
 * Create a layer; out (COLUMN) or in (ROW) must be divisible by the tp size. Weights and bias
 * start at zero, gradients at zero. Destroy layers before their group.
 */
ZEN_API zen_status zen_tp_linear_create(zen_tp_group *g, zen_tp_kind kind, int in_features,
                                        int out_features, int has_bias, zen_tp_linear **out);
ZEN_API void zen_tp_linear_destroy(zen_tp_linear *l);

/* The local shard: weight (and bias) with their gradient buffers, owned by the layer.
 * Weight: rows = out/tp, cols = in (COLUMN) or rows = out, cols = in/tp (ROW).
 * Bias: out/tp values (COLUMN) or out (ROW, replicated); count 0 and NULL pointers without. */
typedef struct zen_tp_param {
    float *data;
    float *grad;
    size_t count;
    int rows;
    int cols;
} zen_tp_param;

ZEN_API zen_status zen_tp_linear_weight(zen_tp_linear *l, zen_tp_param *w);
ZEN_API zen_status zen_tp_linear_bias(zen_tp_linear *l, zen_tp_param *b);

/* Canonical (unpermuted) copies of the local weight shard, rows*cols floats. */
ZEN_API zen_status zen_tp_linear_export_weight(const zen_tp_linear *l, float *dst);
ZEN_API zen_status zen_tp_linear_import_weight(zen_tp_linear *l, const float *src);
/* The same for the gradient (tests, gradient clipping by column). */
ZEN_API zen_status zen_tp_linear_export_grad(const zen_tp_linear *l, float *dst);

/* Register a companion buffer shaped like the weight shard (optimizer moments); any column
 * permutation moves it too. Up to 4 per layer; the caller owns the memory. */
ZEN_API zen_status zen_tp_linear_attach_state(zen_tp_linear *l, float *companion);

/* Unregister a companion attached with zen_tp_linear_attach_state (e.g. an optimizer replaced its
 * state buffer): later permutations leave it alone. ZEN_EINVAL when it is not attached. */
ZEN_API zen_status zen_tp_linear_detach_state(zen_tp_linear *l, const float *companion);

/*
 * The layer's physical column layout along K (K = cols of the weight shard): perm[p] is the
 * canonical column held at physical column p (the identity without a plan), for p < K; perm may
 * be NULL. *computed (may be NULL) is how many leading physical columns this rank computes itself
 * in a training pass: K without a plan, fewer while it is resized (the rest is pruned) or
 * migrating (the rest goes to helpers). Local; it changes only in zen_tp_group_step. Lets a
 * caller keep other weight-shaped data in step with the layer, or check what resizing dropped.
 */
ZEN_API zen_status zen_tp_linear_layout(const zen_tp_linear *l, int *perm, int *computed);

/* training = 0 for evaluation passes (never resized, never migrated). x and y must not alias. */
ZEN_API zen_status zen_tp_linear_forward(zen_tp_linear *l, const float *x, int rows, float *y,
                                         int training);

/* x is the same input as in the forward; dx is written (not accumulated); dW and db accumulate.
 * dx may be NULL when the input gradient is not needed (first layer): the COLUMN allreduce is
 * still performed (with a scratch buffer) so that ranks stay in step. */
ZEN_API zen_status zen_tp_linear_backward(zen_tp_linear *l, const float *x, const float *dy,
                                          int rows, float *dx);

/* Call once per training step after the optimizer update: straggler emulation rotation,
 * detection, decisions, priority refresh and replica versioning. Collective every period. */
ZEN_API zen_status zen_tp_group_step(zen_tp_group *g);

/*
 * Data parallelism over tp groups: replicas decide their balance plans independently, so the
 * same tp rank of two replicas may hold its K columns in different physical orders. Call with
 * canonical = 1 after the backward pass and before synchronising weight gradients across
 * replicas (allreduce, top-k with error feedback, ...), and with canonical = 0 after it, before
 * the optimizer: the gradient buffers of permuted layers are put into canonical column order and
 * back. Local; a no-op for unpermuted layers. Forward/backward must not run in between.
 */
ZEN_API zen_status zen_tp_group_canonical_grads(zen_tp_group *g, int canonical);

/* Group statistics (this rank's view; the plan fields are identical on all ranks). */
typedef struct zen_tp_stats {
    zen_tp_balance balance;
    uint64_t steps;           /* zen_tp_group_step calls */
    uint64_t decisions;       /* detection rounds done */
    int nstragglers;          /* ranks flagged at the last round */
    uint64_t straggler_mask;  /* bit r: rank r (r < 64) is a straggler */
    double keep_fraction;     /* this rank: fraction of its own K computed (local, not pruned) */
    double min_keep_fraction; /* minimum over ranks of the fraction not pruned (1: lossless) */
    long migrated_cols;       /* columns moved to helpers, summed over layers and ranks */
    double ms_wait;           /* last step: time in tp collectives and migration waits */
    double ms_compute;        /* last step: tp GEMM time including the emulated slowness */
    double slow_factor;       /* emulated slowness of this rank now */
    double t_norm_ms;         /* this rank's EMA of full-K GEMM time per step */
    int last_arrival_rank;    /* from the arrival stamps of the last step's tp collectives: the
                                 rank the others waited for most (-1 before the first period) */
    double arrival_spread_ms; /* how long, summed over that step's collectives, they waited */
} zen_tp_stats;

ZEN_API zen_status zen_tp_group_stats(const zen_tp_group *g, zen_tp_stats *out);

/* One rank's share of the current plan (fractions of that rank's own K). */
typedef struct zen_tp_rank_plan {
    double t_ms;     /* its full-K tp GEMM time per step as the last decision round saw it (the
                        detector's whole-step view included; 0 before the first round) */
    double local;    /* computed by the rank itself (1 without a plan) */
    double pruned;   /* dropped: zero gradients, left out of the output (resizing) */
    double migrated; /* computed by helpers on its behalf (exact) */
    double helped;   /* what it computes for stragglers, in units of one rank's K */
} zen_tp_rank_plan;

/*
 * The plan per tp rank, identical on all ranks: out[r] for r < tp size (n >= tp size entries,
 * else ZEN_EINVAL). Local, no communication; call between steps.
 */
ZEN_API zen_status zen_tp_group_plan(const zen_tp_group *g, zen_tp_rank_plan *out, int n);

#ifdef __cplusplus
}
#endif

#endif /* ZEN_TP_H */
