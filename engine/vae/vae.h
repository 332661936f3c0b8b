/* The released MiniMax-H3 decoders, written once over the op layer (engine/op.h, op_conv.h):
 * the video VAE's ViT decoder with its temporal chunks and spatial tiles, and the audio VAE's
 * BigVGAN decoder. The numerical contract is diffusers' autoencoder_kl_minimax_h3.py and
 * autoencoder_kl_minimax_h3_audio.py plus the pipeline's decode steps
 * (modular_pipelines/minimax_h3/decoders.py); vae/test compares both with values that code
 * produced (docs/reference-check.md).
 *
 * Latents in are vdn's (and the official save_latents') normalised latents: video (C, T, h, w),
 * audio (2, C, La) (one row per stereo channel). Out: frames (3, F, 16h, 16w) float32 in [0, 1],
 * waveforms (2, La * hop) float32 in [-1, 1]. */
#ifndef VDN_VAE_H
#define VDN_VAE_H

#include <stddef.h>
#include <stdint.h>

#include "precision.h"
#include "op.h"
#include "vae_config.h"

typedef struct vdn_video_vae vdn_video_vae;
typedef struct vdn_audio_vae vdn_audio_vae;

/* progress: units done of total (tile decodes for video, channels for audio). Nonzero stops the
 * decode (a cancel): every member stops at its next unit and the decode fails with
 * "cancelled". */
typedef int (*vdn_vae_progress_fn)(void *user, int done, int total);

/* DIR holds config.json and diffusion_pytorch_model.safetensors (or its .index.json). Every
 * released tensor must be present with its shape (the encoder's too: a file that is not the
 * release is refused, naming the tensor); only the decoder's go onto the device. */
vdn_video_vae *vdn_video_vae_load(vdn_dev *dev, const char *dir, char *err, size_t errlen);
/* The same at a precision (engine.h vdn_precision). bf16 (what vdn_video_vae_load gives) keeps
 * every weight in the device's float dtype. fp8 quantises three of each ViT block's four large
 * Linears (fused q/k/v, FFN in, FFN out; scale2 folded first; to_out stays bf16, video_vae.c
 * says why) to e4m3 with one float32 scale a row, once here; their inputs are quantised per row
 * by the ops that make them (op.h vdn_op_rmsnorm_quant, vdn_op_linear_swiglu_quant).
 * post_quant_conv, proj_in, proj_out, the biases, norms, attention and the pixel work are as at
 * bf16. The CPU backend runs fp8 as the quantised oracle (the same codes and scales, float64 sums).
 */
vdn_video_vae *vdn_video_vae_load_precision(vdn_dev *dev, const char *dir, vdn_precision precision,
                                            char *err, size_t errlen);
vdn_precision vdn_video_vae_precision(const vdn_video_vae *v);
int vdn_video_vae_fp8_linears(
    const vdn_video_vae *v); /* 3 x blocks at fp8 (qkv, FFN in, FFN out), else 0 */
void vdn_video_vae_free(vdn_video_vae *v);
const vdn_vae_video_config *vdn_video_vae_config(const vdn_video_vae *v);
/* Pixel frames decoded from T latent frames; -1 (with a message) when T is too few for one
 * chunk. */
int vdn_video_vae_frames(const vdn_video_vae *v, int T, char *err, size_t errlen);
/* latents (C, T, h, w) -> frames (3, F, 16h, 16w), F = vdn_video_vae_frames(T).
 * vdn_video_vae_decode_group with v alone. */
int vdn_video_vae_decode(vdn_video_vae *v, const float *latents, int T, int h, int w, float *frames,
                         vdn_vae_progress_fn progress, void *user, char *err, size_t errlen);

vdn_audio_vae *vdn_audio_vae_load(vdn_dev *dev, const char *dir, char *err, size_t errlen);
void vdn_audio_vae_free(vdn_audio_vae *a);
const vdn_vae_audio_config *vdn_audio_vae_config(const vdn_audio_vae *a);
/* latents (channels, C, La) -> wave (channels, La * hop), each channel decoded alone (mono VAE).
 * vdn_audio_vae_decode_group with a alone. */
int vdn_audio_vae_decode(vdn_audio_vae *a, const float *latents, int channels, int La, float *wave,
                         vdn_vae_progress_fn progress, void *user, char *err, size_t errlen);

/* ---- one clip over several devices ----
 * A group is n decoders of the same VAE (the same config; each loaded on its own device, with its
 * own copy of the weights). A group decode deals the clip's device work over the members and runs
 * member i's share on a thread of its own (member 0's on the caller's), so each device is still
 * used by one thread at a time; the pixel work (the stitch of a chunk's tiles, the cross-fades,
 * the de-normalisation) is the one decoder's, in the same float32 order, so on the CPU backend
 * the output equals a one-member decode bit for bit. progress is called under the
 * group's lock, one call at a time, counting up. n = 1 is the one-device decode, by the same
 * code. */
#define VDN_VAE_MAX_GROUP 64
typedef struct {
    int n;                        /* members */
    int units[VDN_VAE_MAX_GROUP]; /* what member i decoded: video tiles, or audio channels */
    uint64_t failed;              /* members whose share failed (bit i: member i) */
} vdn_vae_share;

/* The video: the clip's tiles, chunk after chunk, are dealt to the members in contiguous runs of
 * near-equal length; each member stitches and cross-fades its own chunks on its device
 * (video_vae.c says why). share: NULL, or filled (also on failure). A
 * failure stops the other members at their next pass; err is the lowest failed member's, naming
 * its device when n > 1. */
int vdn_video_vae_decode_group(vdn_video_vae *const *v, int n, const float *latents, int T, int h,
                               int w, float *frames, vdn_vae_progress_fn progress, void *user,
                               vdn_vae_share *share, char *err, size_t errlen);
/* The audio: stereo channel s on member s mod n. */
int vdn_audio_vae_decode_group(vdn_audio_vae *const *a, int n, const float *latents, int channels,
                               int La, float *wave, vdn_vae_progress_fn progress, void *user,
                               vdn_vae_share *share, char *err, size_t errlen);

/* shared by both loaders (vae_weights.c) */
typedef struct vdn_st_set vdn_st_set;
vdn_st_set *vdn_vae_open_weights(const char *dir, int video, const void *config, char *err,
                                 size_t errlen);
/* The released layout keeps vae/ and audio_vae/ beside transformer/: ROOT/vae, or ROOT/base/vae
 * for a VDN checkpoint folder. Fills out (size len) and returns 0 when ROOT has one (a folder
 * with a config.json), else -1. */
int vdn_vae_find(const char *root, const char *which, char *out, size_t len);
/* the tensor as float32, in a new host buffer (n: its element count) */
float *vdn_vae_read(vdn_st_set *st, const char *name, int64_t *n);

#endif
