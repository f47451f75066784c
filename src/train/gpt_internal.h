/* gpt_internal.h - the zen_gpt struct, shared by gpt.c (parameters) and gpt_pass.c (passes). */
#ifndef ZEN_TRAIN_GPT_INTERNAL_H
#define ZEN_TRAIN_GPT_INTERNAL_H

#include "gpt.h"

/* How a canonical full tensor maps to this tp rank's local tensor. */
typedef enum gpt_split {
    GPT_SPLIT_NONE = 0, /* replicated: local = full */
    GPT_SPLIT_ROWS = 1, /* column-parallel: each of `parts` row blocks is split over tp by rows */
    GPT_SPLIT_COLS = 2  /* row-parallel weight: columns split over tp */
} gpt_split;

typedef struct gpt_pinfo {
    gpt_split split;
    int parts;      /* GPT_SPLIT_ROWS: 3 for qkv (Q, K, V blocks), 1 otherwise */
    float init_std; /* > 0: N(0, std); 0: constant init_const */
    float init_const;
} gpt_pinfo;

typedef struct gpt_block {
    float *ln1_g, *ln1_b, *ln2_g, *ln2_b;     /* in the model's own parameter block */
    float *dln1_g, *dln1_b, *dln2_g, *dln2_b; /* their gradients */
    zen_tp_linear *qkv, *proj, *fc1, *fc2;
} gpt_block;

/* Per-layer activations saved by the forward for the backward; each array holds n_layer slabs. */
typedef struct gpt_acts {
    size_t rows_cap;  /* B*T the buffers hold */
    size_t att_cap;   /* B*T*T they hold (attention probabilities per local head) */
    float *resid;     /* (2L+1) x [rows][d]: residual stream before attn / before mlp / output */
    float *ln1, *ln2; /* L x [rows][d] */
    float *ln1_stat, *ln2_stat; /* L x [rows][2]: mean, rstd (interleaved by slab) */
    float *qkv;                 /* L x [rows][3 dl] */
    float *att;                 /* L x [B][hl][T][T] */
    float *att_out;             /* L x [rows][dl] */
    float *fc1;                 /* L x [rows][ffl] (pre-activation) */
    float *gelu;                /* L x [rows][ffl] */
    float *lnf;                 /* [rows][d] */
    float *lnf_stat;            /* [rows][2] */
    float *logits;              /* [rows][vocab] */
    float *rsum;                /* [rows]: 1 / softmax denominators (xent) */
    /* backward scratch, shared by all layers */
    float *dresid, *dln, *tmp, *datt, *dqkv, *dfc, *scratch_tt;
    float *dlogits; /* [rows][vocab]: e^(z - max) after a forward with targets, then dlogits */
    int32_t *tokens, *targets; /* copies of the last batch */
} gpt_acts;

struct zen_gpt {
    zen_gpt_config cfg;
    zen_comm *comm;
    zen_tp_group *group;
    int tp, rank;
    int hd;  /* head size */
    int hl;  /* local heads */
    int dl;  /* hl * hd */
    int ffl; /* d_ff / tp */
    int training;

    float *own, *own_grad; /* every non-tp parameter and its gradient, one block each */
    float *wte, *wpe, *lnf_g, *lnf_b, *head;
    float *dwte, *dwpe, *dlnf_g, *dlnf_b, *dhead;
    gpt_block *blocks;

    size_t nparams;
    zen_gpt_param *params;
    gpt_pinfo *pinfo;
    char (*names)[32];

    gpt_acts a;
    int B, T;         /* shape of the last forward */
    int fwd_valid;    /* a forward ran since the last failure */
    int can_backward; /* the last forward had targets and no backward ran since */

    uint8_t *seen;    /* [vocab]: token touched since the last zero_grad */
    int32_t *touched; /* sorted unique touched ids */
    size_t ntouched;
};

/* gpt_pass.c */
void gpt_acts_free(gpt_acts *a);

/* gpt_weights.c: draw every tensor full from cfg.seed and keep this rank's slice */
zen_status gpt_init_weights(zen_gpt *m);

#endif
