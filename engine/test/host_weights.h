/* The DiT's weights as host float32 arrays, one struct per block: the form the forward tests build
 * their tiny random models in (tiny_model.h) and hand to the DiT over the op layer by canonical
 * name (tiny_source.h). The forward itself is engine/dit.c. */
#ifndef VDN_TEST_HOST_WEIGHTS_H
#define VDN_TEST_HOST_WEIGHTS_H

/* One block's branch weights, canonical names under transformer_blocks.{i}.attn.linear_attention.
 */
typedef struct {
    const float *k_sp, *v_sp; /* short_conv.{k,v}_sp.weight (C, 1, ks, ks) */
    const float *k_tm, *v_tm; /* short_conv.{k,v}_tm.weight (C, 1, kt) */
    const float *beta_w;      /* beta_proj.weight (H, hidden) */
    const float *alpha_down;  /* alpha.down.weight (R, hidden) */
    const float *alpha_up;    /* alpha.up.weight (C, R) */
    const float *A_log;       /* alpha.A_log (H) */
    const float *dt_bias;     /* alpha.dt_bias (C) */
    const float *gate_down;   /* output_gate.down.weight (G, hidden) */
    const float *gate_up;     /* output_gate.up.weight (C, G) */
    const float *gate_up_b;   /* output_gate.up.bias (C) */
    const float *norm_w;      /* norm.weight (d) */
} vdn_vda_weights;

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

#endif
