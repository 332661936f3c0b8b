/* The two released VAEs of MiniMax-H3 as vdn sees them: their config.json fields and the full
 * list of tensors (name and shape) of their diffusion_pytorch_model.safetensors, derived from the
 * config exactly as diffusers builds the modules (models/autoencoders/autoencoder_kl_minimax_h3.py
 * and autoencoder_kl_minimax_h3_audio.py). The list is what the loader checks, what `vdn ckpt
 * init` writes and what `vdn inspect` counts. */
#ifndef VDN_VAE_CONFIG_H
#define VDN_VAE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define VDN_VAE_MAX_LEVELS 8
#define VDN_VAE_MAX_CH 64

/* vae/config.json, class AutoencoderKLMiniMaxH3. Defaults are the release's. */
typedef struct {
    int in_channels, out_channels, latent_channels;
    int n_levels;
    int block_out_channels[VDN_VAE_MAX_LEVELS];
    int layers_per_block;
    int spatial_factors[VDN_VAE_MAX_LEVELS], temporal_factors[VDN_VAE_MAX_LEVELS];
    int norm_num_groups;
    int dec_layers, dec_heads, dec_head_dim, dec_registers, dec_ffn_mult;
    double rope_theta, rope_dim_ratio, dec_norm_eps;
    int clip_length, token_drop;
    double latents_mean[VDN_VAE_MAX_CH], latents_std[VDN_VAE_MAX_CH];
    /* derived */
    int spatial_ratio, temporal_ratio; /* products of the factors: 16, 4 */
} vdn_vae_video_config;

/* audio_vae/config.json, class AutoencoderKLMiniMaxH3Audio. */
typedef struct {
    int encoder_dim, n_enc_rates, encoder_rates[VDN_VAE_MAX_LEVELS];
    int latent_dim, latent_channels, heads;
    int decoder_dim, n_ups, decoder_rates[VDN_VAE_MAX_LEVELS], decoder_kernels[VDN_VAE_MAX_LEVELS];
    int n_res, res_kernels[4], res_dilations[4][4], n_dil;
    int sampling_rate;
    double latents_mean[VDN_VAE_MAX_CH], latents_std[VDN_VAE_MAX_CH];
    int hop; /* product of the rates: 800 */
} vdn_vae_audio_config;

void vdn_vae_video_defaults(vdn_vae_video_config *c);
void vdn_vae_audio_defaults(vdn_vae_audio_config *c);
/* The tiny configs `vdn ckpt init` writes (released geometry, small widths). */
void vdn_vae_video_tiny(vdn_vae_video_config *c);
void vdn_vae_audio_tiny(vdn_vae_audio_config *c);

/* Parse DIR/config.json (fields absent: the release's defaults). -1 with a message naming the
 * file and field. */
int vdn_vae_video_config_load(const char *dir, vdn_vae_video_config *c, char *err, size_t errlen);
int vdn_vae_audio_config_load(const char *dir, vdn_vae_audio_config *c, char *err, size_t errlen);
/* The same from text in memory (label names it in messages): what the loaders call, and the fuzz
 * target vae/test/fuzz_vae_config.c. */
int vdn_vae_video_config_parse(const char *text, size_t len, const char *label,
                               vdn_vae_video_config *c, char *err, size_t errlen);
int vdn_vae_audio_config_parse(const char *text, size_t len, const char *label,
                               vdn_vae_audio_config *c, char *err, size_t errlen);
/* config.json text of a config (caller frees). */
char *vdn_vae_video_config_json(const vdn_vae_video_config *c);
char *vdn_vae_audio_config_json(const vdn_vae_audio_config *c);

/* Every tensor of the released state dict, in module order. */
typedef void (*vdn_vae_tensor_fn)(void *user, const char *name, int ndim, const int64_t *shape);
void vdn_vae_video_tensors(const vdn_vae_video_config *c, vdn_vae_tensor_fn fn, void *user);
void vdn_vae_audio_tensors(const vdn_vae_audio_config *c, vdn_vae_tensor_fn fn, void *user);

/* The anti-aliasing filter of the BigVGAN activations (alias-free-torch's Kaiser-windowed sinc,
 * normalised to sum 1), computed in double: out[kernel]. */
void vdn_vae_kaiser_sinc(double cutoff, double half_width, int kernel, float *out);

#endif
