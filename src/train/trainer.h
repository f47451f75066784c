/*
 * trainer.h - internals of the training loop (train.h is the public entry).
 *
 *  trainer.c         world setup (inproc threads or process ranks), the per-rank loop,
 *                    evaluation, checkpoints
 *  trainer_sync.c    data-parallel gradient synchronisation (buckets, sparse embedding, top-k)
 *  trainer_report.c  progress lines, --metrics JSON lines, the summary, text sampling
 *
 * Rank layout: world rank w has tp rank w % tp and dp rank w / tp; the tp communicator joins
 * the tp consecutive ranks of one model replica, the dp communicator the ranks holding the same
 * shard in every replica:
 *
 *     world  0 1 | 2 3        (dp 2 x tp 2)
 *     tp     {0,1} {2,3}
 *     dp     {0,2} {1,3}
 */
#ifndef ZEN_TRAIN_TRAINER_H
#define ZEN_TRAIN_TRAINER_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "adamw.h"
#include "gpt.h"
#include "train.h"

/* ---- resume consistency (trainer_resume.c) ---- */

/* Collective over world, before the first step: every rank passes the status of its checkpoint
 * load (ZEN_OK also for a fresh start), the step it starts at, a checksum of the full weights it
 * starts from (0 for a fresh start) and the parameter count. ZEN_OK when all agree; else
 * ZEN_EMISMATCH (or the rank's own failure) on every rank, err naming the ranks that differ. */
zen_status zen_trainer_agree_start(zen_comm *world, zen_status mine, uint64_t step,
                                   uint64_t checksum, uint64_t nparams, char *err, size_t errlen);

/* ---- gradient synchronisation over dp ---- */

typedef struct zen_trainer_sync zen_trainer_sync;

/* Phases of one sync, timed apart for --metrics (ms): the top-k path's copy of the dense
 * gradients into the work buffer, residual/momentum update with the selection, the sparse
 * allreduce of the selection into a dense result, the copy back (with --topk-rescale's ages);
 * the embedding's sparse path (capture and scatter included); the dense buckets. */
typedef enum zen_sync_phase {
    ZEN_SYNC_PACK,
    ZEN_SYNC_SELECT,
    ZEN_SYNC_REDUCE,
    ZEN_SYNC_UNPACK,
    ZEN_SYNC_EMB,
    ZEN_SYNC_BUCKETS,
    ZEN_SYNC_PHASES
} zen_sync_phase;

typedef struct zen_sync_stats {
    uint64_t bytes_sent;          /* by this rank over the dp communicator during the sync */
    uint64_t bytes_dense;         /* what a ring allreduce of every gradient would send */
    size_t emb_rows;              /* touched embedding rows on this rank */
    size_t emb_rows_union;        /* rows in the synced embedding gradient */
    double keep_fraction;         /* top-k: kept fraction of the dense gradient (1 without top-k) */
    zen_sparse_scheme emb_scheme; /* scheme the sparse allreduce used */
    double emb_density, emb_gamma, emb_skew; /* from the sparse allreduce statistics */
    double ms_phase[ZEN_SYNC_PHASES];
    double topk_phase_us[ZEN_PHASE_COUNT]; /* the top-k sparse allreduce's own phases */
} zen_sync_stats;

/* CLOCK_MONOTONIC in ns: the clock the step phases are timed with. */
static inline int64_t zen_trainer_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

zen_status zen_trainer_sync_create(zen_gpt *m, zen_comm *dp, const zen_train_options *o,
                                   zen_trainer_sync **out);
void zen_trainer_sync_destroy(zen_trainer_sync *s);

/* Average every gradient over dp (collective over dp) for the step with 0-based index step (it
 * picks the top-k warm-up's kept fraction). A dp of 1 does nothing. */
zen_status zen_trainer_sync_grads(zen_trainer_sync *s, long step, zen_sync_stats *st);

/* --topk-rescale: point AdamW's per-scalar second-moment factors of the top-k'd params at the
 * sync's (1 / tau^2, tau the steps a coordinate's value accumulated; see trainer_sync.c). Does
 * nothing otherwise. Call once after both are created; the factors live as long as s. */
void zen_trainer_sync_attach_moment_scales(zen_trainer_sync *s, zen_adamw *opt);

/* The fraction of the dense gradient top-k keeps at step (0-based): o->topk, or during the
 * --topk-warmup steps topk_start * (topk / topk_start)^(step / topk_warmup), an exponential decay
 * from max(topk_start, topk) to topk (DGC's sparsity warm-up). 1 without top-k. Pure. */
double zen_trainer_topk_keep(const zen_train_options *o, long step);

/* 1 when step (0-based) syncs the top-k'd gradients densely: --topk with --topk-dense-from F > 0
 * and zen_trainer_topk_keep(o, step) >= F. Pure. */
int zen_trainer_topk_dense_step(const zen_train_options *o, long step);

/* This rank's sparse tensors of the last sync, before averaging (valid until the next sync):
 * the touched embedding rows (captured when synced sparsely or when dumping) and the top-k
 * selection (with --topk and dp > 1). */
typedef struct zen_sync_local {
    uint64_t emb_rows;
    uint32_t emb_width;
    size_t emb_nnz;
    const uint32_t *emb_idx;
    const float *emb_val;
    uint64_t topk_rows;
    size_t topk_nnz;
    const uint32_t *topk_idx;
    const float *topk_val;
} zen_sync_local;

void zen_trainer_sync_local(const zen_trainer_sync *s, zen_sync_local *out);

/* ---- grad dumps (--dump-grads) ---- */

/* Write this rank's sparse gradients of a step as DIR/rank<dp_rank>-step<S>.zgrad in the trace
 * format of docs/trace-format.md (tensors "wte" and, with top-k, "topk"). */
zen_status zen_trainer_dump_grads(const char *dir, int dp_rank, int dp_size, long step,
                                  const zen_trainer_sync *s);

/* ---- reporting (world rank 0 only) ---- */

typedef struct zen_step_report {
    long step, steps;
    float loss, val_loss; /* val_loss NAN when not evaluated this step */
    float lr, grad_norm;
    double tokens_per_s;
    double ms_step, ms_compute, ms_comm, ms_wait;
    double ms_opt;                         /* optimizer step, part of ms_compute */
    double ms_sync_phase[ZEN_SYNC_PHASES]; /* parts of ms_comm (zen_sync_phase) */
    double topk_phase_us[ZEN_PHASE_COUNT]; /* parts of its reduce phase (zen_sparse_phase) */
    uint64_t bytes_synced, bytes_dense;
    double eta_s;
    double keep_fraction;
    const char *emb_scheme;
    size_t emb_rows;
    /* tp balancing */
    const char *balance;
    int stragglers;
    double tp_keep_fraction;
    long migrated_cols;
    /* this rank's time in tp collectives and migration waits (zen_tp_stats.ms_wait) */
    double tp_ms_wait;
    int late_rank;  /* tp rank that arrived last at a tp collective (arrival stamps), -1 */
    double late_ms; /* how long the first tp rank waited for it */
} zen_step_report;

void zen_report_progress(FILE *f, const zen_step_report *r);
/* Write ,"key":value (null when not finite: JSON has no NaN). */
void zen_json_number(FILE *f, const char *key, double v);
/* One JSON line per step, flushed; -1 (errno set) when it could not be written. */
int zen_report_metrics(FILE *f, const zen_step_report *r);

/*
 * Generate ntokens after the prompt with temperature sampling (top 40, temperature 0.8, seeded).
 * Collective over the model's tp communicator; tp rank 0 draws and broadcasts each token.
 * out gets the decoded text.
 */
zen_status zen_trainer_sample(zen_gpt *m, const zen_vocab *v, const char *prompt, int ntokens,
                              uint64_t seed, char *out, size_t outlen);

#endif
