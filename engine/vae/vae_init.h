/* Tiny random VAEs in the released layout, for tests and demos: ROOT/vae/ (AutoencoderKLMiniMaxH3,
 * the encoder's tensors too, so the files load wherever a real download does) and
 * ROOT/audio_vae/ (AutoencoderKLMiniMaxH3Audio, weight_g/weight_v and the resampling filters).
 * Released geometry (16x spatial, 4x temporal, hop 800, 24 and 32 latent channels), small widths
 * (vdn_vae_video_tiny, vdn_vae_audio_tiny). Values are a counter-based hash of seed, tensor name
 * and index, so a seed always gives the same bytes. */
#ifndef VDN_VAE_INIT_H
#define VDN_VAE_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "vae_config.h"

int vdn_vae_init(const char *root, uint64_t seed, char *err, size_t errlen);
/* DIR/ (config.json + weights) of a random video VAE of geometry c (its latents statistics
 * replaced by random ones, as vdn_vae_init writes them): other geometries for tests, such as the
 * keyframe encoder's with channels that change (conv_shortcut). vdn_vae_init's vae/ is this with
 * vdn_vae_video_tiny. */
int vdn_vae_init_video(const char *dir, const vdn_vae_video_config *c, uint64_t seed, char *err,
                       size_t errlen);
/* DIR/ (config.json + weights) of a random audio VAE at the release's size (BigVGAN width 1024,
 * about 260 MB of float32), for timing the decoder without the PyTorch peer (bench_vae). */
int vdn_vae_init_audio_full(const char *dir, uint64_t seed, char *err, size_t errlen);

#endif
