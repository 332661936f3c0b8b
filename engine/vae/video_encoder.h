/* The video VAE's encoder for keyframes: a canvas picture -> the conditioning latents MiniMax-H3's
 * keyframe modes (I2VA, L2VA, FL2VA) put in front of the video rows. Written once over the op
 * layer (engine/core/op_conv.h: conv2d, group_norm); the numerical contract is diffusers'
 * AutoencoderKLMiniMaxH3.encode (models/autoencoders/autoencoder_kl_minimax_h3.py) and the
 * pipeline's encode_vae_condition (modular_pipelines/minimax_h3/encoders.py), which the release's
 * src/inference/encode_keyframes.py calls:
 *
 *   pixels  = (uint8 / 255 - ImageNet mean) / ImageNet std      (mean 0.485 0.456 0.406,
 *                                                               std 0.229 0.224 0.225; no [-1, 1])
 *   moments = quant_conv(encoder(pixels)), per 256-px tile (overlap >= 64 px, widened in steps of
 *             16 px so the tiles cover the canvas), the tiles' moments blended linearly
 *   latents = mean + exp(0.5 clamp(logvar, -30, 20)) * torch.randn(1, 24, 1, H/16, W/16) drawn
 *             from a fresh CPU generator seeded 42, rounded to float16, then
 *             (latents - latents_mean) / latents_std (the VAE config's, as float32)
 *
 * One frame has no temporal extent: diffusers runs it through the encoder alone, where every
 * causal 3x3x3 convolution sees two zero frames before it, so only the last temporal slice of
 * each kernel (k_t = 2) touches the picture, and the downsamplers' temporal stride leaves one
 * frame. The encoder is therefore the 2-D network of those slices (taken at load), with the
 * release's reflect padding, the per-frame GroupNorm and SiLU.
 *
 * The encoder is optional: vdn_video_vae_load (the decoder) never uploads its weights; this
 * loader uploads only the encoder's and quant_conv's. */
#ifndef VDN_VIDEO_ENCODER_H
#define VDN_VIDEO_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "op.h"
#include "torch_rng.h"
#include "vae_config.h"

typedef struct vdn_video_encoder vdn_video_encoder;

/* Zeroed (or NULL): the release's recipe. */
typedef struct {
    uint64_t seed;          /* the posterior's generator seed; 0: the release's 42 */
    int seed_set;           /* 1: use seed even when it is 0 */
    int randn_path;         /* vdn_torch_randn_path: which of torch's CPU kernels drew the noise
                               (default 0 = AVX2: what torch runs on every AVX2 or AVX-512 host) */
    int tile, tile_overlap; /* pixels; 0: the release's 256 and 64 */
    int tiles_per_pass;     /* tiles through the network together (a batch per op); 0: as many
                               as the device's pass budget holds (video_encoder.c) */
} vdn_video_encoder_opts;

/* DIR holds the video VAE (config.json + safetensors, every released tensor present: the loader
 * of vae.h checks them). Uploads the encoder's and quant_conv's weights (the 2-D slices) in the
 * device's activation dtype. NULL with a message naming the file and tensor. */
vdn_video_encoder *vdn_video_encoder_load(vdn_dev *dev, const char *dir, char *err, size_t errlen);
void vdn_video_encoder_free(vdn_video_encoder *e);
const vdn_vae_video_config *vdn_video_encoder_config(const vdn_video_encoder *e);

/* One keyframe canvas -> normalised conditioning latents [latent_channels, H/16, W/16] float32
 * (the release's (1, 24, 1, H/16, W/16) without its unit dims). rgb: [H, W, 3] row-major, u8
 * as the recipe reads a PIL picture, or float in [0, 1] (taken as the recipe's u8 / 255). H and W
 * multiples of 16 (the canvas is a multiple of 32) and at least 32. 0, or -1 with a message. */
int vdn_video_encoder_encode_u8(vdn_video_encoder *e, const uint8_t *rgb, int H, int W,
                                const vdn_video_encoder_opts *opts, float *latents, char *err,
                                size_t errlen);
int vdn_video_encoder_encode_f32(vdn_video_encoder *e, const float *rgb, int H, int W,
                                 const vdn_video_encoder_opts *opts, float *latents, char *err,
                                 size_t errlen);

/* The steps apart (tests, benchmarks). moments: the posterior's parameters after the tiles'
 * blend, [2 * latent_channels, H/16, W/16] (mean rows, then logvar rows before the clamp), from
 * ImageNet-normalised pixels [3, H, W] (channels-major, float32). This is the device work of an
 * encode (a benchmark times it). */
int vdn_video_encoder_moments(vdn_video_encoder *e, const float *pixels, int H, int W,
                              const vdn_video_encoder_opts *opts, float *moments, char *err,
                              size_t errlen);
/* moments [2C, h, w] -> normalised latents [C, h, w]: the sample under the seeded generator,
 * float16 rounding, latents_mean / latents_std (host float32, torch's order of operations). */
int vdn_video_encoder_sample(const vdn_vae_video_config *c, const float *moments, int h, int w,
                             const vdn_video_encoder_opts *opts, float *latents, char *err,
                             size_t errlen);
/* rgb u8 [H, W, 3] -> ImageNet-normalised pixels [3, H, W] float32 (x / 255, - mean, / std) */
void vdn_video_encoder_pixels_u8(const uint8_t *rgb, int H, int W, float *pixels);

#endif
