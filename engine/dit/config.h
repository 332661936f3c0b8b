/* The model configuration, read from the checkpoint's own JSON (diffusers `config.json`, native
 * config, VDN `model_spec.json` + `linear_branch/config.json`). Config keys, never constants,
 * decide every size, so the tiny test models and the real H3 share all code.
 * Owner: engine checkpoint code (ckpt*.c). Consumers: forward, CUDA backend, bench. */
#ifndef VDN_CONFIG_H
#define VDN_CONFIG_H

#include <stdint.h>

enum { VDN_TAG_VIDEO = 0, VDN_TAG_TEXT = 1, VDN_TAG_AUDIO = 2 };

/* Ablations of the VDN hybrid that the engine honours (eval variants). */
typedef enum {
    VDN_ATTN_DENSE = 0,   /* stock dense attention everywhere (also the F <= 10 bypass) */
    VDN_ATTN_HYBRID,      /* released VDN-H3: window + anchors + globals, softmax gate, VDA */
    VDN_ATTN_NO_ANCHORS,  /* hybrid with anchor_frames = none (no anchor rows/columns, no skip_ends)
                           */
    VDN_ATTN_WINDOW_ONLY, /* softmax window branch with its gate; linear branch off */
    VDN_ATTN_ADDITIVE, /* SANA-style additive update S*Diag(a)(I - A/S) + B/sqrt(S) instead of the
                          solve */
} vdn_attn_mode;

typedef struct {
    /* base transformer (MiniMaxH3Transformer3DModel) */
    int hidden;                    /* 5376 */
    int heads;                     /* 56 */
    int head_dim;                  /* 128 */
    int ffn;                       /* 14336 (inner width of the SwiGLU) */
    int layers;                    /* 50 */
    int refiner_layers;            /* 2 */
    int text_dim;                  /* 5120 (prompt_embeds width) */
    int in_channels;               /* 24 (video latent channels) */
    int audio_channels;            /* 32 */
    int patch_t, patch_h, patch_w; /* 1, 2, 2 */
    int freq_dim;                  /* 256 (sinusoidal timestep features) */
    int time_embed_dim;            /* 2688 (adaLN input width) */
    int time_hidden;               /* 5376 (time_embedder hidden width) */
    int rope_freq_dim; /* 16 inverse frequencies per axis -> 3*2*16 = 96 rotated channels */
    double rope_theta; /* 10000 */
    float norm_eps;    /* 1e-5 */

    /* VDN-H3 hybrid attention (has_vdn = 0 for a plain base checkpoint) */
    int has_vdn;
    int chunk;              /* 5 */
    int radius;             /* 1 */
    int anchors_both;       /* anchor_frames == "both" */
    int softmax_gate;       /* enable_softmax_gate */
    int text_state;         /* enable_text_state */
    int linear_head_dim;    /* 128 */
    int alpha_rank;         /* rows of alpha.down (128) */
    int gate_rank;          /* rows of output_gate.down (128) */
    int conv_spatial;       /* 5 */
    int conv_temporal;      /* 5 */
    float linear_norm_eps;  /* 1e-6 */
    float text_state_scale; /* 0.5 */

    /* sampler defaults (scheduler configs) */
    float video_shift; /* 12.0 */
    float audio_shift; /* 3.0 */
} vdn_config;

#endif
