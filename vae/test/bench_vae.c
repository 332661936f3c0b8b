/* Decode timing of the two VAE decoders on one backend: random normal latents (fixed seed), one
 * warm-up decode, then REPS timed decodes (wall clock, the result read back to the host each
 * time, as `vdn decode` does). Prints one JSON line.
 * usage: bench_vae VAE_DIR AUDIO_VAE_DIR BACKEND T h w La REPS [--profile]
 * --profile: one more decode of each, timed op by op on the device (op_profile.h), printed to
 * stderr (stdout keeps the one JSON line).
 *   VAE_DIR `-`: the audio decoder only (T h w ignored);
 *   AUDIO_VAE_DIR `random:DIR`: first write a random audio VAE at the release's size to DIR
 *   (vdn_vae_init_audio_full), so the audio decode can be timed without the PyTorch peer.
 * VDN_VAE_PRECISION=bf16|fp8 in the environment: the video decoder's precision (vae.h
 * vdn_video_vae_load_precision; default bf16), recorded in the JSON as video_precision. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "op_profile.h"
#include "vae.h"
#include "vae_init.h"
#include "vdn_util.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void randn(float *x, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i += 2) { /* Box-Muller over a 64-bit LCG */
        double u[2];
        for (int k = 0; k < 2; k++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            u[k] = ((seed >> 11) + 0.5) * 0x1.0p-53;
        }
        double r = sqrt(-2 * log(u[0]));
        x[i] = (float)(r * cos(2 * M_PI * u[1]));
        if (i + 1 < n) x[i + 1] = (float)(r * sin(2 * M_PI * u[1]));
    }
}

int main(int argc, char **argv) {
    if (argc < 9) {
        fprintf(stderr, "usage: %s VAE_DIR AUDIO_VAE_DIR BACKEND T h w La REPS\n", argv[0]);
        return 2;
    }
    const int T = atoi(argv[4]), h = atoi(argv[5]), w = atoi(argv[6]), La = atoi(argv[7]),
              reps = atoi(argv[8]);
    char err[1024];
    vdn_dev *dev = vdn_dev_open(argv[3], 0, 0, err, sizeof err);
    if (!dev) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const char *adir = argv[2];
    if (!strncmp(adir, "random:", 7)) {
        adir += 7;
        if (vdn_vae_init_audio_full(adir, 1, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    }
    const int video = strcmp(argv[1], "-") != 0;
    vdn_precision prec = VDN_PRECISION_BF16;
    const char *ps = getenv("VDN_VAE_PRECISION");
    if (ps && *ps && vdn_precision_parse(ps, &prec)) {
        fprintf(stderr, "VDN_VAE_PRECISION '%s': expected bf16 or fp8\n", ps);
        return 2;
    }
    double t0 = now();
    vdn_video_vae *v =
        video ? vdn_video_vae_load_precision(dev, argv[1], prec, err, sizeof err) : NULL;
    if (video && !v) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    vdn_audio_vae *a = vdn_audio_vae_load(dev, adir, err, sizeof err);
    if (!a) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const double load_s = now() - t0;
    const int F = video ? vdn_video_vae_frames(v, T, err, sizeof err) : 0;
    if (F < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const int Cv = video ? vdn_video_vae_config(v)->latent_channels : 0;
    const size_t nz = (size_t)Cv * T * h * w, nf = video ? 3 * (size_t)F * h * 16 * w * 16 : 0;
    float *z = vdn_xmalloc(sizeof(float) * (nz ? nz : 1));
    randn(z, nz, 1);
    float *frames = vdn_xmalloc(sizeof(float) * (nf ? nf : 1));
    const int C = vdn_audio_vae_config(a)->latent_channels, hop = vdn_audio_vae_config(a)->hop;
    float *za = vdn_xmalloc(sizeof(float) * 2 * (size_t)C * La);
    randn(za, 2 * (size_t)C * La, 2);
    float *wave = vdn_xmalloc(sizeof(float) * 2 * (size_t)La * hop);
    double tv = 0, ta = 0;
    const int profile = argc > 9 && !strcmp(argv[9], "--profile");
    for (int r = -1; r < reps + profile; r++) {
        const int prof = r == reps; /* the extra, profiled pass */
        double s = now();
        if (prof && vdn_prof_start(dev) != 0) {
            fprintf(stderr, "%s\n", vdn_dev_error(dev));
            return 1;
        }
        if (video && vdn_video_vae_decode(v, z, T, h, w, frames, NULL, NULL, err, sizeof err)) {
            fprintf(stderr, "video: %s\n", err);
            return 1;
        }
        if (prof && video) vdn_prof_stop(dev, stderr, "video decode");
        double m = now();
        if (prof && video) vdn_prof_start(dev);
        if (vdn_audio_vae_decode(a, za, 2, La, wave, NULL, NULL, err, sizeof err)) {
            fprintf(stderr, "audio: %s\n", err);
            return 1;
        }
        if (prof) vdn_prof_stop(dev, stderr, "audio decode");
        if (r >= 0 && !prof) {
            tv += m - s;
            ta += now() - m;
        }
    }
    double sum = 0, wsum = 0;
    for (size_t i = 0; i < nf; i++)
        sum += frames[i];
    for (size_t i = 0; i < 2 * (size_t)La * hop; i++)
        wsum += (double)wave[i] * wave[i];
    printf("{\"backend\": \"%s\", \"video_precision\": \"%s\", \"latents\": [%d, %d, %d, %d], "
           "\"frames\": %d, "
           "\"audio_latents\": %d, "
           "\"video_s\": %.4f, \"audio_s\": %.4f, \"load_s\": %.1f, \"reps\": %d, \"frame_mean\": "
           "%.4f, "
           "\"wave_rms\": %.4f}\n",
           vdn_dev_name(dev), vdn_precision_name(prec), Cv, T, h, w, F, La, tv / reps, ta / reps,
           load_s, reps, nf ? sum / (double)nf : 0.0, sqrt(wsum / (2.0 * La * hop)));
    vdn_video_vae_free(v);
    vdn_audio_vae_free(a);
    vdn_dev_close(dev);
    free(z);
    free(za);
    free(frames);
    free(wave);
    return 0;
}
