/*
 * ops.h - the GPT's building blocks with hand-written forward and backward passes (fp32).
 *
 * Conventions: activations are row-major [n][width] with n = B*T rows (row b*T + t). Weights are
 * W[out][in] and a linear layer computes y = x W^T + b. Backward functions ACCUMULATE parameter
 * gradients (dW, db, dg, ...); what they do to the input gradient is stated per function. No
 * function allocates: callers pass scratch space.
 */
#ifndef ZEN_TRAIN_OPS_H
#define ZEN_TRAIN_OPS_H

#include <stddef.h>
#include <stdint.h>

#define ZEN_LN_EPS 1e-5f

/* out[b*T+t][:] = wte[tokens[b*T+t]][:] + wpe[t][:]. Token ids must already be validated. */
void zen_op_embed_forward(float *out, const float *wte, const float *wpe, const int32_t *tokens,
                          int B, int T, int d);

/* Scatter-add of dout into dwte (rows of the tokens) and dwpe (rows 0..T-1). */
void zen_op_embed_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                           int B, int T, int d);

/* LayerNorm over the last dimension (biased variance, eps ZEN_LN_EPS); saves mean and 1/std. */
void zen_op_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *g,
                              const float *b, int n, int d);

/* dx += LN backward (accumulates, so the residual stream's gradient collects it); dg, db += too. */
void zen_op_layernorm_backward(float *dx, float *dg, float *db, const float *dout, const float *x,
                               const float *mean, const float *rstd, const float *g, int n, int d);

/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). out may alias x. */
void zen_op_gelu_forward(float *out, const float *x, size_t n);

/* dx = dout * gelu'(x) (overwrites; dx may alias dout). */
void zen_op_gelu_backward(float *dx, const float *x, const float *dout, size_t n);

/* y = a + b elementwise (y may alias a or b). */
void zen_op_add(float *y, const float *a, const float *b, size_t n);

/* y[n][out] = x[n][in] W^T (+ bias when not NULL). */
void zen_op_linear_forward(float *y, const float *x, const float *w, const float *bias, int n,
                           int in, int out);

/* dx = dy W (overwrites; dx NULL skips), dW += dy^T x, db += column sums of dy (db NULL skips). */
void zen_op_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int n, int in, int out);

/*
 * Causal multi-head self-attention over B sequences of length T with h heads of size hd.
 * qkv is [B*T][3*h*hd]: per row the queries of heads 0..h-1, then the keys, then the values
 * (each head a contiguous slice of hd). out is [B*T][h*hd] (head-major within a row). att saves
 * the softmax probabilities [B][h][T][T] (zero above the diagonal) for the backward.
 * Scores are 1/sqrt(hd) Q K^T, masked so position t sees 0..t, softmax with max subtraction.
 */
void zen_op_attention_forward(float *out, float *att, const float *qkv, int B, int T, int h,
                              int hd);

/* dqkv = backward (overwrites all of it); scratch holds T*T floats. */
void zen_op_attention_backward(float *dqkv, float *scratch, const float *dout, const float *att,
                               const float *qkv, int B, int T, int h, int hd);

/*
 * Softmax cross-entropy. Forward returns the mean over n rows of -log softmax(logits)[target];
 * it saves expz [n][v] = e^(logits - row max) and rsum[n] = 1 / row sum of expz for the
 * backward (so the exponentials are computed once). Targets must already be validated.
 */
float zen_op_xent_forward(float *expz, float *rsum, const float *logits, const int32_t *targets,
                          int n, int v);

/* dlogits = scale * (softmax - onehot(target)) from the saved expz and rsum (overwrites; may
 * alias expz); scale is 1/n for the mean loss. */
void zen_op_xent_backward(float *dlogits, const float *expz, const float *rsum,
                          const int32_t *targets, int n, int v, float scale);

/* Tests: 1 makes the elementwise kernels use their 4-lane baseline version even where the CPU
 * has AVX2 (the default, 0, picks by the CPU). Not thread safe: set before using the ops. */
void zen_op_force_baseline(int on);

#endif /* ZEN_TRAIN_OPS_H */
