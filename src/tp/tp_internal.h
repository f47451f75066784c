/*
 * Internal state of the tensor-parallel runtime (include/zen/tp.h).
 *
 * A group owns the balance plan (identical on all ranks, recomputed every period from
 * all-gathered timings) and the per-step timing counters. A layer owns its shard, and, while a
 * plan is active, a column permutation of its inner dimension K:
 *
 *   physical column p of W holds canonical column perm[p];  pos[perm[p]] == p
 *   source rank layout:  [ local (computed here) | to helper a0 | to helper a1 ... | pruned ]
 *
 * so every GEMM works on a contiguous prefix / block with leading dimension K and no copy of W.
 */
#ifndef ZEN_TP_TP_INTERNAL_H
#define ZEN_TP_TP_INTERNAL_H

#include <stdint.h>

#include <zen/tp.h>

#include "common/clock.h"
#include "tp/detect.h"

#define TP_MAX_COMPANIONS 4
#define TP_TAG_BASE       0x7a700000
#define TP_MAX_RANKS      64
#define TP_MAX_SAMPLES    512
#define TP_STEP_SAMPLES   64         /* step times kept per balance period */
#define TP_TAG_CALIB      0x7ff00000 /* link calibration (above every migration tag) */

/* The balance plan as fractions of each rank's K (the same on all ranks). */
typedef struct tp_plan {
    int n;
    uint64_t straggler_mask;
    double *local; /* [n] fraction of rank r's K it computes itself */
    double *prune; /* [n] fraction it drops (zero gradients) */
    double *mig;   /* [n*n] mig[s*n+a]: fraction of s's K computed by helper a */
    /* the numbers behind the decision (logged) */
    double tstar_ms;  /* slowest non-straggler */
    double target_ms; /* balanced time with migration (0: not considered) */
    double cost_ms;   /* predicted migration cost per step */
    double capped_ms; /* slowest straggler resized to the cap (SEMI) */
    int kept;         /* the previous plan was kept (hysteresis or missing timings) */
    double model_ms;  /* migration cost of the link model before the learned scale */
    int probe;        /* SEMI migrates this period only to measure what migration costs */
} tp_plan;

/* Inputs of one decision round (all ranks see the same numbers). */
typedef struct tp_ctl_input {
    int n;
    const double *t_ms; /* [n] full-K GEMM time per step (EMA) */
    zen_tp_balance balance;
    double delta;
    double rho_max;
    double hysteresis;
    /* Migration traffic per step over all registered layers (group.c mig_cost_terms): bytes a
     * source sends to (out) and gets back from (in) its helpers per unit fraction of its K, the
     * same per (source, helper) pair whatever the fraction, and the latency rounds (waits that
     * follow each other on the critical path; messages to different helpers share a round). */
    double mig_out_per_frac;
    double mig_in_per_frac;
    double mig_out_per_pair;
    double mig_in_per_pair;
    double mig_rounds;
    double bandwidth_Bps;
    double latency_s;
    double cost_scale; /* learned observed / modelled migration overhead (<= 0: use 1) */
    int probe;         /* SEMI may migrate once to measure the overhead (nothing learned yet) */
    int probe_resize;  /* SEMI resizes once, even if migration pays, to refresh the base */
    /* [n] the GEMM times before the whole-step detector (detect.c) raised those of ranks slow
     * from outside; NULL: t_ms. SEMI migrates from a straggler only when these alone make it
     * heavy: what only the detector sees (a throttled process) is resized, because migration
     * would make the throttled rank send its columns and wait for results, slowly too. */
    const double *gemm_ms;
} tp_ctl_input;

/*
 * What the controller learned from observed step times (controller.c zen__tp_learn_observe; updated
 * on every rank from the same all-gathered numbers, so it stays identical everywhere).
 */
typedef struct tp_learn {
    double base_ms; /* step time outside the critical tp GEMM time (EMA, non-migrating periods) */
    int base_valid;
    double scale;   /* EMA of observed / modelled migration overhead */
    int scale_n;    /* migration periods folded into scale */
    double obs_ms;  /* last observed migration overhead (logged) */
    double pred_ms; /* the model's cost of the plan that ran then */
    double step_ms; /* last observed step time */
    double crit_ms; /* critical tp GEMM time of the plan that ran, from the timings */
    int used;       /* the last observation was folded in (else: skipped, see why) */
    int base_age;   /* rounds since base / scale were last updated */
    int scale_age;
} tp_learn;

/* Per-layer column counts of one source rank derived from a plan. */
typedef struct tp_counts {
    int local;
    int prune;
    int mig_total;
    int *mig; /* [n] columns to helper a (caller provides storage) */
} tp_counts;

struct zen_tp_group {
    zen_comm *comm;
    int rank;
    int size;
    zen_tp_options opts;
    zen_tp_linear **layers; /* registered layers, creation order */
    int nlayers;
    int cap_layers;
    int next_layer_id;
    uint64_t steps;
    uint64_t decisions;
    uint64_t version; /* bumped by every step: helpers refresh weight replicas once per version */
    tp_plan plan;
    int plan_active; /* some rank is resized or migrating */
    /* timing of the current step */
    int64_t step_compute_ns;
    int64_t step_wait_ns;
    double step_norm_ns; /* own GEMM time scaled to full K */
    int step_timed;      /* some training GEMM was timed this step */
    int nsamples;        /* own training GEMMs of this step kept for the robust estimate */

    struct tp_sample {
        double ns;    /* time incl. emulated slowness */
        double flops; /* 2 m n k actually computed */
        double scale; /* K / columns computed */
    } samples[TP_MAX_SAMPLES];

    double t_norm_ema_ms;
    int ema_valid;
    double last_ms_wait;
    double last_ms_compute;
    zen_tp_emulation emu; /* test/benchmark straggler emulation (slow.c) */
    double slow_factor;
    int64_t sleep_debt_ns; /* SLEEP emulation not slept yet (negative: oversleep credit) */
    double bandwidth_Bps;
    double latency_s;
    uint64_t colls_before_step; /* tp collectives completed before this step */
    uint64_t colls_last_step;   /* tp collectives of the last step */
    int last_arrival_rank;
    double arrival_spread_ms;
    double arrival_weight;             /* ZEN_TP_ARRIVAL_WEIGHT: blame added to detected times */
    double blame_ema_ms[TP_MAX_RANKS]; /* EMA of how long the others waited for each rank */
    long migrated_cols;
    double min_keep;
    int last_rows;           /* rows of the latest training forward (cost model) */
    double time_override_ms; /* tests: report this full-K time instead of the measured one */
    tp_detect det;           /* whole-step slowness detection (detect.c) */
    float *spin_scratch;
    size_t spin_cap;
    /* wall time between zen_tp_group_step calls this period (learning the migration cost) */
    int64_t last_step_ns;
    double step_ms[TP_STEP_SAMPLES];
    int nstep_ms;
    tp_learn learn;
    double round_ms[TP_MAX_RANKS]; /* per-rank GEMM times the last decision round used */
};

struct zen_tp_linear {
    zen_tp_group *g; /* NULL once the group was destroyed (then only destroy is valid) */
    int npeers;      /* tp size, for the per-peer arrays */
    int id;
    zen_tp_kind kind;
    int in;
    int out;
    int wrows; /* local weight rows */
    int K;     /* local weight cols = GEMM inner dimension */
    int has_bias;
    int nbias;
    float *w;
    float *gw;
    float *b;
    float *gb;
    float *companions[TP_MAX_COMPANIONS];
    int ncompanions;
    /* resizing / migration (NULL/identity until a plan is active) */
    int *perm; /* [K] physical -> canonical */
    int *pos;  /* [K] canonical -> physical */
    int permuted;
    int grad_canonical;      /* zen_tp_group_canonical_grads(g, 1) is in effect */
    int n_local;             /* own columns computed locally: physical [0, n_local) */
    int *mig_off;            /* [n] physical start of the block sent to helper a */
    int *mig_cnt;            /* [n] its size */
    int *in_cnt;             /* [n] columns this rank computes for straggler s */
    int **in_idx;            /* [n] canonical indices of those columns (COLUMN layers) */
    float **replica;         /* [n] helper's copy of W_s[:, block], wrows x in_cnt[s] */
    int n_out;               /* own columns computed by helpers */
    int n_in;                /* columns this rank computes for stragglers */
    uint64_t synced_version; /* group version the replicas were last refreshed at */
    float *score;            /* [K] canonical priority scores */
    float *wref;             /* physical layout copy of W at the last refresh */
    int wref_valid; /* wref is captured at the first training forward, after the caller init */
    unsigned char *active; /* [K] canonical: got a gradient in the last period */
    /* scratch */
    float *xg;
    size_t xg_cap;
    float *tmp;
    size_t tmp_cap;
    float *tmp2;
    size_t tmp2_cap;
    float *mbuf; /* migration messages */
    size_t mbuf_cap;
    float *mbuf2;
    size_t mbuf2_cap;
};

/* gemm.c: C = alpha op(A) op(B) + beta C through cblas_sgemm, timed and slowed as configured.
 * own = 1 for the rank's own shard (feeds detection, scaled by full_scale = K/used_K). */
void zen__tp_gemm(zen_tp_group *g, int timed, int own, double full_scale, int trans_a, int trans_b,
                  int m, int n, int k, const float *a, int lda, const float *b, int ldb, float beta,
                  float *c, int ldc);

/* SLEEP emulation: sleep the accumulated slowdown now (before any wait on peers). */
void zen__tp_pay_sleep_debt(zen_tp_group *g);

/* The step's own full-K GEMM time in ns, robust to scheduler spikes (gemm.c). */
double zen__tp_step_norm_ns(zen_tp_group *g);

/* Time a wait (collective or migration receive) into the step counters. */
static inline void tp_add_wait(zen_tp_group *g, int64_t t0)
{
    g->step_wait_ns += zen_now_ns() - t0;
}

/* Grow a scratch buffer to at least count floats. */
zen_status zen__tp_scratch(float **buf, size_t *cap, size_t count);

/* Allreduce (sum, f32) on the tp communicator, counted as wait time. */
zen_status zen__tp_allreduce(zen_tp_group *g, float *buf, size_t count);

/* controller.c: the pure decision function. prev may be NULL. Returns ZEN_OK and fills out. */
zen_status zen__tp_plan_init(tp_plan *p, int n);
void zen__tp_plan_free(tp_plan *p);
void zen__tp_plan_reset(tp_plan *p);
void zen__tp_plan_copy(tp_plan *dst, const tp_plan *src);
void zen__tp_decide(const tp_ctl_input *in, const tp_plan *prev, tp_plan *out);
/* The modelled migration cost (ms per step) of plan p under the input's link model, before the
 * learned scale. */
double zen__tp_migration_cost_ms(const tp_ctl_input *in, const tp_plan *p);
/* Critical tp GEMM time of plan p under the timings: max over ranks of t_r (local_r + received_r).
 */
double zen__tp_plan_critical_ms(const tp_ctl_input *in, const tp_plan *p);
/* Fold the median step time of the period that ran plan `ran` into L (see controller.c). */
void zen__tp_learn_observe(tp_learn *L, const tp_ctl_input *in, const tp_plan *ran, double step_ms);
/* Set in's cost_scale and SEMI's probes from what L holds. */
void zen__tp_learn_apply(const tp_learn *L, tp_ctl_input *in);
int zen__tp_plan_is_active(const tp_plan *p);
/* Column counts of source s for a layer of inner size K (deterministic on all ranks). */
void zen__tp_plan_counts(const tp_plan *p, int s, int K, tp_counts *c);

/* group.c: install a plan on this rank (tests; every rank must install the same one). */
zen_status zen__tp_group_force_plan(zen_tp_group *g, const tp_plan *p);

/* priority.c */
zen_status zen__tp_layer_alloc_balance(zen_tp_linear *l);
void zen__tp_layer_refresh_scores(zen_tp_linear *l);
zen_status zen__tp_layer_apply_plan(zen_tp_linear *l);
/* Put the gradient of a permuted layer into canonical column order (1) or back (0). */
zen_status zen__tp_layer_canonical_grad(zen_tp_linear *l, int canonical);

/* migrate.c */
zen_status zen__tp_sync_replicas(zen_tp_linear *l);
int zen__tp_layer_migrating(const zen_tp_linear *l);
zen_status zen__tp_col_forward_mig(zen_tp_linear *l, const float *x, int rows, float *y);
zen_status zen__tp_col_backward_mig(zen_tp_linear *l, const float *x, const float *dy, int rows,
                                    float *dx);
zen_status zen__tp_row_forward_mig(zen_tp_linear *l, const float *x, int rows, float *ypart);
zen_status zen__tp_row_backward_mig(zen_tp_linear *l, const float *x, const float *dy, int rows,
                                    float *dx);

/* linear.c helpers shared with migrate.c */
/* Gather x[:, perm[first .. first+count)] into a packed rows x count buffer. */
void zen__tp_gather_cols(const zen_tp_linear *l, const float *x, int rows, int first, int count,
                         float *dst);
/* "score|random|prefix" (ZEN_TP_PRIORITY); ZEN_EINVAL, out unchanged, for another name. */
zen_status zen__tp_parse_priority(const char *name, zen_tp_priority *out);

/* The emulated slowness of rank r at step s. */
double zen__tp_slow_factor(const zen_tp_emulation *e, int size, int rank, uint64_t step);

#endif
