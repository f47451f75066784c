/*
 * adamw.h - AdamW for zen_gpt: decoupled weight decay, global-norm gradient clipping, cosine
 * learning-rate schedule with linear warmup. Deterministic (no randomness; the same inputs give
 * bit-identical updates on every run and every data-parallel replica).
 *
 * Weight decay applies only to params with decay = 1 in the registry (the weight matrices of the
 * blocks and the head); biases, LayerNorm gains/biases and both embeddings are not decayed.
 *
 * Gradient clipping uses the norm of the whole model's gradient: squares of TP_SHARD params are
 * summed over the tp ranks (one allreduce over tp), replicated params (DENSE, EMBEDDING) are
 * counted once. Call zen_adamw_step after the data-parallel gradient sync, so that grads are
 * the same on every replica.
 */
#ifndef ZEN_TRAIN_ADAMW_H
#define ZEN_TRAIN_ADAMW_H

#include "gpt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zen_adamw zen_adamw;

typedef struct zen_adamw_config {
    float lr;     /* peak learning rate */
    float min_lr; /* floor of the cosine decay (reached at total_steps) */
    float beta1, beta2, eps;
    float weight_decay; /* decoupled: p -= lr * weight_decay * p */
    float grad_clip;    /* max global gradient norm; <= 0 disables clipping */
    long warmup_steps;  /* linear warmup from lr/warmup_steps to lr over this many steps */
    long total_steps;   /* cosine from lr (at warmup_steps) to min_lr (at total_steps) */
} zen_adamw_config;

/* lr 3e-4, min_lr 3e-5, betas 0.9/0.95, eps 1e-8, weight_decay 0.1, grad_clip 1.0, warmup 100,
 * total 5000. */
void zen_adamw_config_default(zen_adamw_config *cfg);

/* Learning rate used by the step with 0-based index step (pure function of cfg and step). */
float zen_adamw_lr(const zen_adamw_config *cfg, long step);

/*
 * Optimizer over every param of m (moments zero, step 0). Registers the moments of tp weights
 * with zen_tp_linear_attach_state. Local.
 */
zen_status zen_adamw_create(zen_gpt *m, const zen_adamw_config *cfg, zen_adamw **out);
void zen_adamw_destroy(zen_adamw *o);

/*
 * One update from the grads now in the model: global norm (collective over tp), clipping,
 * AdamW with the scheduled lr, then zen_tp_group_step on the model's tp group (so the trainer
 * must NOT call zen_tp_group_step itself). Does not zero the grads. *grad_norm (may be NULL)
 * gets the global norm before clipping, *lr (may be NULL) the rate used.
 */
zen_status zen_adamw_step(zen_adamw *o, float *grad_norm, float *lr);

/*
 * From the next step on, the squared gradient of scalar j of registry param `param` enters its
 * second moment times scales[j]: v = b2 v + (1-b2) scales[j] g^2 (1 for all at creation, and
 * again after scales = NULL). scales has the param's count entries in its local layout, is read
 * at every step and stays the caller's. For gradients that arrive as the sum of several steps'
 * (top-k with error feedback, src/train/trainer_sync.c), whose square over-states the per-step
 * second moment. Out-of-range param: no effect. Not saved in checkpoints.
 */
void zen_adamw_set_moment_scales(zen_adamw *o, size_t param, const float *scales);

/* Steps taken so far (the next step's index). */
long zen_adamw_steps(const zen_adamw *o);

/*
 * Optimizer state for checkpoints: first and second moments in the model's canonical full layout
 * (zen_gpt_full_param_count scalars each, like zen_gpt_export) and the step count. Export is
 * collective over tp and canonical even while a tp balance plan permutes the weights; import is
 * local and meant for a model without an active plan (resuming a fresh model), see
 * zen_gpt_import_tensors.
 */
zen_status zen_adamw_export_state(zen_adamw *o, float *m1, float *m2, long *step);
zen_status zen_adamw_import_state(zen_adamw *o, const float *m1, const float *m2, long step);

#ifdef __cplusplus
}
#endif

#endif /* ZEN_TRAIN_ADAMW_H */
