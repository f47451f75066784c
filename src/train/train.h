/*
 * train.h - the entry point of `zen train` (tools/cmd_train.c) and of the trainer tests.
 *
 * A run trains the GPT of train/gpt.h on a word-level corpus (train/data.h) over a world of
 * dp x tp ranks: tensor parallelism inside each group of tp consecutive ranks, data parallelism
 * across the groups. See docs/training.md.
 */
#ifndef ZEN_TRAIN_TRAIN_H
#define ZEN_TRAIN_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include <zen/comm.h>
#include <zen/sparse.h>
#include <zen/tp.h>

#include "data.h"

/* How the token-embedding gradient is synchronised over dp. */
typedef enum zen_emb_sync {
    ZEN_EMB_SYNC_SPARSE = 0, /* row-sparse zen_sparse_allreduce with opts.sparse_scheme */
    ZEN_EMB_SYNC_DENSE = 1   /* plain dense allreduce of the whole [vocab][d] gradient */
} zen_emb_sync;

typedef struct zen_train_options {
    /* model */
    int layers, d_model, heads, d_ff, ctx;
    /* schedule */
    long steps;   /* length of the schedule (cosine decay ends here) */
    long stop_at; /* > 0: stop after this many steps of the schedule (interruption tests) */
    int batch;    /* sequences per dp rank per step */
    int seq;      /* tokens per sequence (<= ctx) */
    float lr, min_lr, weight_decay, grad_clip;
    long warmup;
    uint64_t seed;
    /* parallelism */
    int dp, tp;
    zen_transport_kind transport; /* AUTO: inproc threads unless started as a process rank */
    int threads;                  /* BLAS threads per rank (0: cores / ranks in this process) */
    zen_emb_sync emb_sync;
    zen_sparse_scheme sparse_scheme;
    double topk;            /* > 0: keep this fraction of the dense gradient (DGC-style) */
    int topk_global;        /* 1: with topk, global top-k (zen_sparse_options.global_topk) */
    long topk_warmup;       /* > 0: the kept fraction decays exponentially from topk_start to
                               topk over the first topk_warmup steps (DGC's sparsity warm-up) */
    double topk_start;      /* kept fraction at step 0 of the warm-up (0.25) */
    double topk_dense_from; /* > 0: a step whose kept fraction is at least this sends the whole
                               residual through the dense allreduce (0: never) */
    float topk_momentum;    /* > 0: DGC momentum correction (the velocity is accumulated before the
                               selection and AdamW's beta1 becomes 0); 0: plain error feedback */
    int topk_rescale;       /* 1: a value that accumulated tau steps enters AdamW's v as
                               g^2 / tau^2 */
    size_t bucket_bytes;    /* dense allreduce bucket size */
    zen_tp_options tp_opts;
    zen_tp_emulation tp_emulation; /* emulated stragglers (benchmarks, tests; none by default) */
    /* data */
    const char *data_path; /* NULL: KJV */
    const char *cache_dir;
    size_t vocab_max;
    uint64_t min_count;
    /* evaluation, logging, output */
    long eval_interval;
    int eval_batches;
    long log_interval;
    const char *metrics_path;
    const char *dump_grads_dir;
    int sample_tokens;
    const char *prompt;
    int json;  /* 1: the final summary as one JSON object on stdout instead of text */
    int quiet; /* 1: no progress lines (tests) */
    /* checkpoints */
    const char *checkpoint_dir;
    long checkpoint_interval;
    const char *resume; /* a checkpoint file or a directory holding checkpoint.zck */
} zen_train_options;

void zen_train_options_default(zen_train_options *o);

/* What a run hands back (filled by world rank 0's view; may be NULL). */
typedef struct zen_train_result {
    long steps_done;      /* last step index + 1 */
    long first_step;      /* 0, or the resumed step */
    float *losses;        /* losses[i] = training loss of step first_step + i (free()) */
    float final_val_loss; /* NAN when never evaluated */
    double unigram_loss;
    float *params; /* full model in canonical order (free()), when want_params */
    size_t nparams;
    int want_params; /* input: 1 to export the final parameters */
    double tokens_per_s;
    /* tp runs with an emulated straggler (--slow), else 0: the largest slowdown factor, and the
     * slowest rank's mean tp GEMM time per step over the fastest rank's (docs/training.md) */
    double straggler_factor, straggler_gemm_ratio;
    char error[256]; /* reason of a failure */
} zen_train_result;

void zen_train_result_free(zen_train_result *r);

/*
 * Run a training job. ds may be NULL (the dataset is loaded from opts) or a preloaded dataset
 * shared read-only by all in-process ranks. Returns ZEN_OK or the failure, with res->error (when
 * res is given) or stderr saying why.
 */
zen_status zen_train_run(const zen_train_options *opts, const zen_dataset *ds,
                         zen_train_result *res);

/* The OpenBLAS kernel set this process runs ("Haswell", "Cooperlake", ...; never NULL): OpenBLAS's
 * choice for the CPU unless OPENBLAS_CORETYPE named one. Thread safe. */
const char *zen_train_blas_core(void);

#endif
