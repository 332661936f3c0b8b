/* libFuzzer target for the VAE config.json parsers: the first byte picks the video (even) or the
 * audio (odd) config, the rest is the JSON text. An accepted config must keep the invariants the
 * decoders rely on (positive sizes within the arrays' bounds, rates that multiply to the hop,
 * positive latent std), and its tensor list must enumerate. Corpus: corpus_vae_config/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "vae_config.h"

static void count(void *user, const char *name, int ndim, const int64_t *shape) {
    (void)name;
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 1) abort();
    (*(int *)user)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char err[1024];
    const char *text = (const char *)data + 1;
    if (data[0] % 2 == 0) {
        vdn_vae_video_config c;
        if (vdn_vae_video_config_parse(text, size - 1, "fuzz", &c, err, sizeof err)) return 0;
        if (c.n_levels < 1 || c.n_levels > VDN_VAE_MAX_LEVELS || c.latent_channels < 1 ||
            c.latent_channels > VDN_VAE_MAX_CH || c.spatial_ratio < 1 || c.temporal_ratio < 1 ||
            c.dec_head_dim != 64)
            abort();
        for (int i = 0; i < c.latent_channels; i++)
            if (!(c.latents_std[i] > 0)) abort();
        if (c.spatial_ratio > 4096 || c.temporal_ratio > 4096 || c.layers_per_block > 64 ||
            c.dec_layers > 1024)
            return 0; /* legal but too big to enumerate quickly */
        int n = 0;
        vdn_vae_video_tensors(&c, count, &n);
        if (n < 1) abort();
    } else {
        vdn_vae_audio_config c;
        if (vdn_vae_audio_config_parse(text, size - 1, "fuzz", &c, err, sizeof err)) return 0;
        if (c.n_ups < 1 || c.n_ups > VDN_VAE_MAX_LEVELS || c.n_res < 1 || c.n_res > 4 ||
            c.n_dil < 1 || c.n_dil > 4 || c.hop < 1 || (c.decoder_dim >> c.n_ups) < 1 ||
            c.latent_channels < 1 || c.latent_channels > VDN_VAE_MAX_CH)
            abort();
        int n = 0;
        vdn_vae_audio_tensors(&c, count, &n);
        if (n < 1) abort();
    }
    return 0;
}
