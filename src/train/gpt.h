/*
 * gpt.h - a small GPT-style decoder (fp32, CPU, OpenBLAS) with Megatron 1D tensor parallelism.
 *
 * Model: token embedding wte [vocab][d] (not tied to the head), learned positions wpe [ctx][d],
 * n_layer pre-LayerNorm blocks
 *     x = x + proj(attn(qkv(ln1(x))))        causal multi-head attention, n_head heads
 *     x = x + fc2(gelu(fc1(ln2(x))))         GELU with the tanh approximation
 * then a final LayerNorm lnf, a linear head [vocab][d] without bias (replicated on every tp
 * rank) and softmax cross-entropy averaged over the B*T tokens.
 *
 * Tensor parallelism (over the tp communicator given at creation; a 1-rank one for no tp):
 * qkv and fc1 are column-parallel, proj and fc2 row-parallel (include/zen/tp.h); the heads are
 * split evenly over the tp ranks, so n_head and d_ff must be divisible by the tp size. Every
 * block does 2 allreduces forward and 2 backward, all inside the tp layers. Everything else
 * (embeddings, LayerNorms, head, loss) is computed redundantly and identically on every tp rank.
 *
 * Initialisation is deterministic from cfg.seed and independent of the tp size: each tensor is
 * drawn as the FULL matrix (GPT-2 style: weights N(0, 0.02), residual projections proj and fc2
 * N(0, 0.02/sqrt(2*n_layer)), biases 0, LayerNorm gains 1) and then sliced by tp rank. So the
 * model is the same function for every tp size.
 *
 * Canonical full layouts (export/import, checkpoints), all row-major W[out][in]:
 *   qkv.w [3d][d]: rows 0..d-1 are Q, d..2d-1 K, 2d..3d-1 V; within each, head h owns rows
 *   h*hd..(h+1)*hd-1 (hd = d/n_head). qkv.b [3d] likewise. proj.w [d][d], fc1.w [d_ff][d],
 *   fc2.w [d][d_ff].
 *
 * Thread safety: one thread per model. Calls that say "collective over tp" must be made by
 * every rank of the tp communicator in the same order.
 */
#ifndef ZEN_TRAIN_GPT_H
#define ZEN_TRAIN_GPT_H

#include <stddef.h>
#include <stdint.h>

#include <zen/comm.h>
#include <zen/tp.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zen_gpt zen_gpt;

typedef struct zen_gpt_config {
    int vocab;   /* token ids are in [0, vocab) */
    int ctx;     /* maximum sequence length T */
    int d_model; /* divisible by n_head */
    int n_layer;
    int n_head;    /* divisible by the tp size */
    int d_ff;      /* MLP width, divisible by the tp size (usually 4*d_model) */
    uint64_t seed; /* initialisation seed */
} zen_gpt_config;

/* The default small model: vocab 8000, ctx 64, d_model 128, 4 layers, 4 heads, d_ff 512, seed 1. */
void zen_gpt_config_default(zen_gpt_config *cfg);

/* ZEN_OK when the configuration is usable with tp_size tensor-parallel ranks, else ZEN_EINVAL. */
zen_status zen_gpt_config_check(const zen_gpt_config *cfg, int tp_size);

/* Number of scalars of the full (unsharded) model. */
size_t zen_gpt_full_param_count(const zen_gpt_config *cfg);

/*
 * Create the model on this tp rank. Collective over tp (it creates the tp layers). tp_comm is the
 * tensor-parallel communicator (zen_tp_group_create was called on it to make g); both must outlive
 * the model. Every tp rank must pass the same cfg (checked: ZEN_EMISMATCH otherwise).
 */
zen_status zen_gpt_create(const zen_gpt_config *cfg, zen_comm *tp_comm, zen_tp_group *g,
                          zen_gpt **out);
void zen_gpt_destroy(zen_gpt *m);

const zen_gpt_config *zen_gpt_get_config(const zen_gpt *m);

/* The tp communicator and group given at creation. */
zen_comm *zen_gpt_tp_comm(const zen_gpt *m);
zen_tp_group *zen_gpt_tp_group(const zen_gpt *m);

/* ---- Parameter registry (what the optimizer and the data-parallel sync walk) ---- */

typedef enum zen_gpt_param_kind {
    /* Replicated on every tp rank with identical values and gradients: data-parallel allreduce
     * of the whole tensor; counted once (not once per tp rank) in a global gradient norm. */
    ZEN_GPT_PARAM_DENSE = 0,
    /* This tp rank's shard of a tp layer tensor: data-parallel allreduce of the shard (with the
     * same tp rank of the other replicas); shards' squares are summed over tp for a norm. */
    ZEN_GPT_PARAM_TP_SHARD = 1,
    /* The token embedding [vocab][d], replicated over tp like DENSE, but its gradient is
     * row-sparse: only the rows listed by zen_gpt_touched_rows can be nonzero. */
    ZEN_GPT_PARAM_EMBEDDING = 2
} zen_gpt_param_kind;

typedef struct zen_gpt_param {
    const char *name;  /* "wte", "h.0.attn.qkv.w", ..., "head.w" (static, model-owned) */
    float *data;       /* local values (the shard for TP_SHARD) */
    float *grad;       /* local gradient, same shape */
    size_t count;      /* local scalar count */
    size_t full_count; /* scalar count of the full tensor */
    int rows, cols;    /* full shape (rows = 1 for vectors) */
    zen_gpt_param_kind kind;
    int decay;            /* 1: weight decay applies (matrices of the blocks and the head) */
    zen_tp_linear *layer; /* owning tp layer for tp weights (attach optimizer state), else NULL */
    int is_tp_weight;     /* 1 when data is the weight shard of layer (not its bias) */
} zen_gpt_param;

/* The registry, in canonical order (the order of export/import). Valid for the model's life:
 * the pointers never move. */
size_t zen_gpt_param_count(const zen_gpt *m);
const zen_gpt_param *zen_gpt_params(const zen_gpt *m);

/*
 * Rows of the token embedding whose gradient may be nonzero: the sorted unique token ids seen by
 * zen_gpt_forward since the last zen_gpt_zero_grad (the union over gradient-accumulation
 * micro-batches). *rows stays valid until the next forward or zero_grad.
 */
void zen_gpt_touched_rows(const zen_gpt *m, const int32_t **rows, size_t *count);

/* ---- Training and inference ---- */

/*
 * Forward pass over B sequences of T tokens (tokens[b*T + t], 1 <= T <= ctx, ids in [0, vocab)).
 * Keeps the activations for zen_gpt_backward. targets (same layout, may be NULL): when given,
 * *loss (may be NULL) gets the mean cross-entropy over the B*T positions. Collective over tp.
 * Activation buffers grow to the largest B*T seen and are reused (no allocation per step).
 * ZEN_EINVAL for a token or target out of range or a bad shape.
 */
zen_status zen_gpt_forward(zen_gpt *m, const int32_t *tokens, const int32_t *targets, int B, int T,
                           float *loss);

/*
 * Backward of the last forward (which must have had targets): ACCUMULATES d(loss)/d(param) into
 * every param's grad (so micro-batches add up; divide yourself if you want their mean).
 * Collective over tp.
 */
zen_status zen_gpt_backward(zen_gpt *m);

/* Zero every gradient and the touched-row set. Local. */
void zen_gpt_zero_grad(zen_gpt *m);

/*
 * Logits [vocab] at sequence b, position t of the last forward (t = -1: the last position), for
 * sampling. Local (logits are replicated over tp).
 */
zen_status zen_gpt_logits(const zen_gpt *m, int b, int t, float *out);

/* Evaluation mode (training = 0) makes tp layers skip resizing. Default 1. */
void zen_gpt_set_training(zen_gpt *m, int training);

/* ---- Full weights in canonical order (checkpoints) ---- */

/*
 * Gather the full model into dst (zen_gpt_full_param_count scalars): the registry's tensors in
 * order, each in its full canonical layout. Collective over tp; every tp rank gets the result.
 */
zen_status zen_gpt_export(zen_gpt *m, float *dst);

/* Load the full model from src (same layout); each tp rank keeps its slice. Local. */
zen_status zen_gpt_import(zen_gpt *m, const float *src);

/*
 * Same for arrays shaped like the local params (gradients, optimizer moments): local[i] has
 * params[i].count scalars in the layout of params[i].data. Export is collective over tp and
 * reads tp weights in canonical order even while a balance plan permutes them. Import is local
 * and writes the canonical slice as is, which is the physical layout whenever no plan is active
 * (e.g. when resuming into a freshly created model).
 */
zen_status zen_gpt_export_tensors(zen_gpt *m, const float *const *local, float *dst);
zen_status zen_gpt_import_tensors(zen_gpt *m, float *const *local, const float *src);

/* ---- Misc ---- */

/* Threads used by OpenBLAS in this process (1 when several ranks share the cores). */
void zen_train_set_blas_threads(int n);

#ifdef __cplusplus
}
#endif

#endif /* ZEN_TRAIN_GPT_H */
