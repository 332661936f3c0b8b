/* The H3 / VDN-H3 forward on the CPU (spec 2-5): weights as views into the checkpoint's float32
 * tensors, one function per stage. Wrapped as the "cpu" backend in cpu_backend.c. */
#ifndef VDN_MODEL_H
#define VDN_MODEL_H

#include "backend.h"
#include "ckpt.h"
#include "config.h"
#include "vda.h"

/* One transformer block (DiT block or token-refiner block; the refiner has no adaLN/hybrid). */
typedef struct {
    const float *norm1, *norm2;      /* (hidden) */
    const float *to_q, *to_k, *to_v; /* (heads*head_dim, hidden) */
    const float *norm_q, *norm_k;    /* (head_dim) shared by heads */
    const float *to_out;             /* (hidden, heads*head_dim) */
    const float *ff_in;              /* (2*ffn, hidden) rows [value; gate] */
    const float *ff_out;             /* (hidden, ffn) */
    const float *ada_w, *ada_b;      /* (18*hidden, time_embed_dim), (18*hidden) */
    const float *sg_w, *sg_b;        /* softmax_gate.up (heads, hidden), (heads) */
    const float *to_out_linear;      /* (hidden, heads*head_dim) */
    vdn_vda_weights vda;
} vdn_block_weights;

typedef struct {
    const float *proj_in_w, *proj_in_b;           /* (hidden, 96) */
    const float *audio_in_w, *audio_in_b;         /* (hidden, 32) */
    const float *ctx_w, *ctx_b;                   /* context_embedder (hidden, text_dim) */
    const float *t1_w, *t1_b, *t2_w, *t2_b;       /* time_embedder.linear_1/2 */
    const float *refiner_final_norm;              /* token_refiner.final_norm */
    const float *norm_out_w;                      /* norm_out.norm */
    const float *norm_out_lin_w, *norm_out_lin_b; /* (2*hidden, time_embed_dim) */
    const float *proj_out_w, *proj_out_b;         /* (96, hidden) */
    const float *audio_out_w, *audio_out_b;       /* (32, hidden) */
    vdn_block_weights *refiner;                   /* refiner_layers */
    vdn_block_weights *blocks;                    /* layers */
} vdn_weights;

/* Look every tensor up (shape-checked). has_vdn: also the hybrid tensors. */
int vdn_weights_load(vdn_weights *w, vdn_ckpt *ck, const vdn_config *cfg, char *err, size_t errlen);
void vdn_weights_free(vdn_weights *w);

/* prompt_embeds (L, text_dim) -> refined text rows (L, hidden). */
void vdn_model_refine_text(float *out, const float *embeds, int L, const vdn_weights *w,
                           const vdn_config *cfg);
/* One evaluation; text: refined text rows. */
int vdn_model_forward(const vdn_weights *w, const vdn_config *cfg, const float *text,
                      const vdn_step_inputs *in, float *video_v, float *audio_v, char *err,
                      size_t errlen);

/* Pieces, exported for tests. */
/* temb -> SiLU(temb) for a timestep: out (time_embed_dim). */
void vdn_model_time_embed(float *silu_temb, float t, const vdn_weights *w, const vdn_config *cfg);
/* adaLN value k (0 shift_msa .. 5 gate_mlp) of row tag j from a block's projection P (18*hidden):
 * P[j*6*hidden + k*hidden + c] (spec 2.4). */
static inline const float *vdn_adaln_slice(const float *P, int tag, int k, int hidden) {
    return P + (size_t)tag * 6 * hidden + (size_t)k * hidden;
}

#endif
