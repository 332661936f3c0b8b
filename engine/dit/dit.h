/* The MiniMax-H3 / VDN-H3 DiT (spec 2-5) written once over the op layer (op.h, op_vda.h): the
 * same code runs on every backend. Weights are device tensors uploaded once (dit_weights.c);
 * a forward is a function of (device, weights, inputs) with scratch for one layout
 * (vdn_dit_buffers), so it can run per rank of a sharded forward.
 *
 *   w = vdn_dit_weights_load(dev, cfg, source)        once per engine
 *   per render: text = vdn_dit_refine_text(...)       the token refiner, once
 *               seq  = vdn_dit_seq_init(...)          positions, masks, windows on the device
 *               buf  = vdn_dit_buffers_new(...)       activations for this layout (this
 *                                                     rank's, over a communicator)
 *   per NFE:    vdn_dit_seq_timesteps(...)            the few per-row timestep indices
 *               vdn_dit_forward(...)                  velocities, on the device
 *
 * Dtypes: activations and the big matrices in the device's activation dtype
 * (vdn_dev_act_dtype: CPU F32, CUDA BF16); float32 where the contract keeps float32: the time
 * MLP, the patch/audio projections in and out, the VDA alpha projections, the softmax gate's
 * bias. Each DiT block's q, k, v, output-gate down projection, softmax gate and beta are one
 * fused weight [q; k; v; gate_down; softmax_gate; beta; zero rows to a multiple of 64], so one
 * product serves them all (the softmax gate's bias rides in the fused bias). */
#ifndef VDN_DIT_H
#define VDN_DIT_H

#include "backend.h" /* vdn_layout, vdn_attn_plan */
#include "cancel.h"
#include "config.h"
#include "op.h"

/* Where the weights come from: the tensor `name` (canonical diffusers name, ckpt.h) of the
 * given shape in its stored dtype (F32, BF16, F16), or NULL with a message naming it. release
 * (may be NULL) drops a host copy once uploaded. */
typedef struct vdn_weight_source {
    const void *(*get)(void *ctx, const char *name, int ndim, const int64_t *shape,
                       vdn_dtype *dtype, char *err, size_t errlen);
    void (*release)(void *ctx, const char *name);
    void *ctx;
    /* optional: write tensor `name` straight into dst on its device (a source that makes values
     * there); 1 done, 0 not this one (then get is used), -1 + err */
    int (*fill)(void *ctx, const char *name, int ndim, const int64_t *shape, vdn_tensor *dst,
                char *err, size_t errlen);
} vdn_weight_source;
vdn_weight_source vdn_weight_source_ckpt(vdn_ckpt *ck);
/* Random weights in whatever shapes the loader asks for (weights_random.c): small tensors exactly
 * as `vdn ckpt init --seed` writes them, large matrices with the same mean and spread from a fast
 * hash, made on the loader's device. For benchmarks at the real size without a file. Free it with
 * vdn_weight_source_random_free before that device closes (it keeps a pool there). */
vdn_weight_source vdn_weight_source_random(uint64_t seed);
void vdn_weight_source_random_free(vdn_weight_source *src);

typedef struct {
    vdn_tensor *norm1, *norm2;         /* [hidden] */
    vdn_tensor *wqkv, *bqkv;           /* fused [ldq, hidden]; bias F32 [ldq] (VDN) or NULL */
    vdn_tensor *norm_q, *norm_k;       /* [head_dim] */
    vdn_tensor *to_out;                /* [hidden, C] */
    vdn_tensor *ff_in, *ff_out;        /* [2 ffn, hidden] rows [value; gate], [hidden, ffn] */
    vdn_tensor *ada_w, *ada_b;         /* [18 hidden, time_embed_dim], [18 hidden] (DiT blocks) */
    vdn_tensor *to_out_linear;         /* [hidden, C] (VDN) */
    vdn_tensor *k_sp, *v_sp;           /* [C, ks*ks] */
    vdn_tensor *k_tm, *v_tm;           /* [C, kt] */
    vdn_tensor *gate_up, *gate_up_b;   /* [C, gate_rank], [C] */
    vdn_tensor *lin_norm;              /* [head_dim] */
    vdn_tensor *alpha_down, *alpha_up; /* F32 [alpha_rank, hidden], [C, alpha_rank] */
    vdn_tensor *A_log, *dt_bias;       /* F32 [heads], [C] */
} vdn_dit_block;

typedef struct {
    vdn_config cfg;
    vdn_dev *dev;
    int ldq, ldq_refiner;                   /* widths of the fused projection outputs */
    int col_gate_down, col_sgate, col_beta; /* their column offsets (VDN) */
    vdn_tensor *proj_in_w, *proj_in_b, *audio_in_w, *audio_in_b; /* F32 */
    vdn_tensor *ctx_w, *ctx_b;
    vdn_tensor *t1_w, *t1_b, *t2_w, *t2_b; /* F32 */
    vdn_tensor *refiner_final_norm, *norm_out_w, *norm_out_lin_w, *norm_out_lin_b;
    vdn_tensor *proj_out_w, *proj_out_b, *audio_out_w, *audio_out_b; /* F32 */
    vdn_tensor *rope_inv; /* F32 [3 rope_freq_dim]: the reference's float32 inv_freq per pair */
    vdn_dit_block *refiner, *blocks;
    vdn_tensor **owned; /* every tensor above, for vdn_dit_weights_free */
    int n_owned, cap_owned;
    int n_fp8; /* Linears quantised to fp8 by vdn_dit_weights_quantize_fp8 (0: none) */
} vdn_dit_weights;

/* Upload every tensor the forward needs (shape-checked by the source). -1 + err. */
int vdn_dit_weights_load(vdn_dit_weights *w, vdn_dev *d, const vdn_config *cfg,
                         const vdn_weight_source *src, char *err, size_t errlen);
/* The same, with fp8 != 0 quantising as vdn_dit_weights_quantize_fp8 does, block by block as
 * the blocks arrive (the device's peak stays near the fp8 size). */
int vdn_dit_weights_load_as(vdn_dit_weights *w, vdn_dev *d, const vdn_config *cfg,
                            const vdn_weight_source *src, int fp8, char *err, size_t errlen);
void vdn_dit_weights_free(vdn_dit_weights *w);
/* fp8 precision (issue 13): quantise, once and in place, the Linears that are at least 4096 wide
 * in H3 (chosen by name, so a tiny checkpoint runs the same code): every block's and refiner
 * block's fused q/k/v (with the VDN gates' down projections and beta rows fused into it),
 * to_out, ff_in, ff_out and to_out_linear, context_embedder, and the adaLN projections of every
 * block and of the final layer (13 B of H3's 33 B parameters: in bf16 they alone are 24 GiB).
 * Row-wise e4m3 with fp32 scales (vdn_op_quantize_rows); the forward's vdn_op_linear calls then
 * quantise their inputs per row. Everything else (embeddings, time MLP, norms, the VDA branch's
 * small matrices, the fp32 heads) keeps its dtype. -1 + err. */
int vdn_dit_weights_quantize_fp8(vdn_dit_weights *w, char *err, size_t errlen);

/* prompt_embeds F32 [n_text, text_dim] -> text [n_text, hidden] (act dtype): context embedder,
 * the token refiner (pre-norm blocks, no adaLN, no RoPE), its final norm. */
int vdn_dit_refine_text(const vdn_dit_weights *w, const vdn_tensor *embeds, vdn_tensor *text);

/* The per-render inputs on the device, made from the host sequence (seq.h). */
typedef struct {
    vdn_layout lay;
    vdn_attn_plan plan;
    vdn_tensor *pos;      /* F64 [n_rows, 3] RoPE positions */
    vdn_tensor *ada_idx;  /* I32 [n_rows]: adaLN table row t_index * 3 + tag */
    vdn_tensor *t_idx;    /* I32 [n_rows]: t_index (final layer) */
    vdn_tensor *t_values; /* F32 [4]: the unique timesteps, n_t of them */
    int n_t;
    vdn_attn_mask *mask; /* the softmax branch's visible keys (attn_tiles.h rules) */
    vdn_tensor *vda_win; /* I32 [F', 2] the branch frames' windows (plan.linear), or NULL */
    int *h_ada, *h_tidx; /* host copies: upload only what changed */
} vdn_dit_seq;

int vdn_dit_seq_init(vdn_dit_seq *s, vdn_dev *d, const vdn_config *cfg, const vdn_layout *lay,
                     const vdn_attn_plan *plan, const double *pos);
/* This NFE's timesteps: per-row indices (only changed rows are sent) and the unique values. */
int vdn_dit_seq_timesteps(vdn_dit_seq *s, const int8_t *tags, const int *t_index,
                          const float *t_values, int n_t);
void vdn_dit_seq_free(vdn_dit_seq *s);

/* The forward's experiment switches, fixed when its buffers are made. A zeroed struct (or NULL
 * where one is taken) is the default; the non-default values exist for tests and measurements. */
typedef struct {
    /* rows of one piece of the feed-forward and the output heads: they run in pieces of at most
     * this many rows, which keeps ~7 GB of inner activations off the device at the H3 workload.
     * 0: 16384. Any value gives the same bits on the CPU (engine_dit_opts_cpu runs 5). */
    int chunk_rows;
    /* heads of the linear branch per pass on one rank (P = 1): the largest divisor of the head
     * count not above it (H3 at 14: four passes; the per-head buffers of all 56 heads at once are
     * 15 GB). A rank of a sharded forward runs its own heads at once. 0: 14. Any value gives the
     * same bits on the CPU (engine_dit_opts_cpu runs 1). */
    int vda_heads;
    /* 0 (default): the linear branch runs on lane 1 of the device (op.h, lanes) beside the
     * softmax attention, forked once its inputs are queued; 1: after the softmax on one lane,
     * for measuring the overlap (docs/PERF.md: 0.6% at H3 on an H200) and for checking that both
     * give the same bits (engine_dit_lanes_cpu). */
    int vda_one_lane;
    /* the caller's stop request (cancel.h): the forward checks it between blocks and fails
     * with "cancelled" once set. NULL: never. Not copied by virtual buffers' ranks. */
    const atomic_int *cancel;
} vdn_dit_opts;

/* One rank's activations for one layout, made once per render (a render's layout and plan do
 * not change between its evaluations). comm NULL: the whole forward on this device (P = 1: no
 * collective, no head-sharded copy); else this rank's part of the forward sharded over comm's
 * ranks (sequence parallelism, spec 6; dit_shard.c): its own rows' and its own heads'
 * activations only. opts NULL: the defaults. NULL with the device's error set (out of memory,
 * or too few rows for the ranks: the same on every rank). */
typedef struct vdn_dit_buffers vdn_dit_buffers;
typedef struct vdn_comm vdn_comm;
vdn_dit_buffers *vdn_dit_buffers_new(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_comm *comm,
                                     const vdn_dit_opts *opts);
/* Buffers whose forward shards over `ranks` virtual ranks in one address space (the CPU, or one
 * GPU; `vdn render --ranks P`, a checking tool): devs[0] = w->dev, the others devices of the same
 * backend and memory (vdn_dev_open of the same GPU). Every rank reads the one copy of the
 * weights, the layout and the inputs, and makes its own rank's buffers per evaluation; rank 0's
 * outputs are the result. */
vdn_dit_buffers *vdn_dit_buffers_virtual(const vdn_dit_weights *w, vdn_dev *const *devs, int ranks,
                                         const vdn_dit_opts *opts);
void vdn_dit_buffers_free(vdn_dit_buffers *b);

/* One evaluation over buffers of vdn_dit_buffers_new (for the same w and s) or
 * vdn_dit_buffers_virtual. text: refined text rows; video_x / cond_x (NULL when no keyframes)
 * F32 [rows, patch features], audio_x F32 [n_audio, audio_channels]; outputs F32 video_v
 * [n_video, patch features], audio_v [n_audio, audio_channels] (data-ward velocities), on every
 * rank of a sharded forward (each rank passes its own weights, seq and full inputs on its
 * device). -1 with the failed op's message in vdn_dev_error; a sharded rank that fails aborts its
 * communicator so no peer waits. */
int vdn_dit_forward(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_dit_buffers *buf,
                    const vdn_tensor *text, const vdn_tensor *video_x, const vdn_tensor *cond_x,
                    const vdn_tensor *audio_x, vdn_tensor *video_v, vdn_tensor *audio_v);

/* From host arrays (dit_host.c), for the tests and the benchmarks: text [n_text, hidden]
 * floats. */
int vdn_dit_refine_text_host(const vdn_dit_weights *w, const float *embeds, int n_text, float *text,
                             char *err, size_t errlen);
/* One evaluation of vdn_step_inputs (backend.h) into host velocities (NULL: not wanted), over
 * comm (NULL: one rank; else this rank's part, every rank calling it) with buffers made once.
 * reps > 0: then reps more forwards, their mean seconds (device work included) in *seconds. */
int vdn_dit_forward_host(const vdn_dit_weights *w, vdn_comm *comm, const vdn_dit_opts *opts,
                         const float *text, const vdn_step_inputs *in, float *video_v,
                         float *audio_v, int reps, double *seconds, char *err, size_t errlen);

#endif
