/* Shared types of one model evaluation: the packed sequence's layout, the attention plan of a
 * variant, and the inputs of one evaluation as host arrays (vdn_step_inputs: what dit_host.c and
 * the tests hand the DiT over the op layer). Everything around the model lives in engine/:
 * the packed sequence (seq.h), positions, per-row timesteps, sigma grids, noise, patchify, I/O.
 * Backends are the op layer's (op_backend.h); the model is written once over it (dit.h).
 *
 * Row layout of the packed sequence (spec 1.2), batch 1, no padding:
 *
 *   [ text (n_text) | conditioning (n_cond = n_keyframes * S) | audio (2*La) | video (F*S) ]
 *
 * text rows: prompt_embeds rows (tags from text_token_tags: 1 text, 0 for a keyframe's vision-block
 * rows); conditioning rows: keyframe latent frames, patchified like video (tag 0); audio rows:
 * channel-major (left channel times 0..La-1, then right), 32 features each (tag 2); video rows:
 * t-major then (hp, wp) row-major, 96 features each in (c, ph, pw) order (tag 0).
 */
#ifndef VDN_BACKEND_H
#define VDN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "config.h"

/* Where each row group sits in the packed sequence, and the video geometry. */
typedef struct {
    int n_rows;           /* n_text + n_cond + n_audio + n_video */
    int n_text;           /* rows [0, n_text) */
    int cond_start;       /* = n_text */
    int n_cond;           /* keyframes * tokens_per_frame */
    int audio_start;      /* = cond_start + n_cond */
    int n_audio;          /* 2 * audio latents (channel-major) */
    int video_start;      /* = audio_start + n_audio; video rows run to n_rows */
    int n_video;          /* frames * tokens_per_frame */
    int frames;           /* F: target latent frames */
    int grid_h, grid_w;   /* patch grid of one frame: (H/16)/patch_h, (W/16)/patch_w */
    int tokens_per_frame; /* S = grid_h * grid_w */
} vdn_layout;

/* What the attention of every DiT block does for this evaluation, resolved once from the
 * requested variant (vdn_attn_mode), the checkpoint and F by vdn_attn_plan_make (model.h).
 * A backend follows these flags; it never re-derives them. */
typedef struct {
    vdn_attn_mode mode; /* the variant asked for (for records / logs) */
    int window;         /* 1: chunk-window mask on target-video x target-video pairs */
    int anchors;        /* 1: frames 0 and F-1 are dense rows and columns (anchor "both") */
    int softmax_gate;   /* 1: o_s *= sigmoid(W_sg x + b_sg) per head, on ALL rows */
    int linear;         /* 1: VDA linear branch on target video rows, + to_out_linear */
    int skip_ends;      /* 1: linear branch drops frames 0 and F-1 (input and output) */
    int additive;       /* 1: SANA-style rule S <- S Diag(a)(I - A/S) + B/sqrt(S) */
    int bypass;         /* 1: the window covers the clip (F <= 10): dense + gate, no linear */
} vdn_attn_plan;

/* Inputs of one model evaluation. Arrays are host memory, row-major, owned by the caller and
 * valid only during forward(). Timesteps follow the contract: t = 1 - sigma in [0,1], 1 = clean. */
typedef struct {
    const vdn_layout *layout;
    const float *video_x;  /* (n_video, in_channels*patch_t*patch_h*patch_w) noisy patch rows */
    const float *cond_x;   /* (n_cond, same width) keyframe patch rows, or NULL when n_cond = 0 */
    const float *audio_x;  /* (n_audio, audio_channels) noisy audio rows */
    const int8_t *tags;    /* (n_rows) 0 video, 1 text, 2 audio; adaLN row = t_index*3 + tag */
    const double *pos;     /* (n_rows, 3) RoPE positions (t, h, w), float64 as the contract */
    const int *t_index;    /* (n_rows) index into t_values */
    const float *t_values; /* (n_t) unique timesteps, ascending */
    int n_t;
    vdn_attn_plan plan;
} vdn_step_inputs;

/* Shared rules every backend follows (engine/attention_plan.c). */

/* Resolve the variant for this clip: dense when the checkpoint has no branch or mode is DENSE;
 * bypass (dense + softmax gate, no linear branch) when the window covers all F frames. */
vdn_attn_plan vdn_attn_plan_make(const vdn_config *cfg, vdn_attn_mode mode, int frames);
/* Unclamped window [lo, hi] of target frame t (0-based), spec 5.2: chunk c = t / chunk,
 * lo = (c - radius) * chunk, hi = (c + radius + 1) * chunk - 1. */
void vdn_window_bounds(const vdn_config *cfg, int t, int *lo, int *hi);
/* 1 when the softmax branch keeps the pair (query row qr, key row kr) under plan (spec 5.2). */
int vdn_attn_keep(const vdn_config *cfg, const vdn_attn_plan *plan, const vdn_layout *lay, int qr,
                  int kr);
/* Parse "dense" | "vdn" | "vdn-no-anchors" | "window-only" | "vdn-additive"; -1 if unknown. */
int vdn_attn_mode_parse(const char *name, vdn_attn_mode *mode);
const char *vdn_attn_mode_name(vdn_attn_mode mode);

#endif
