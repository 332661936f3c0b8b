/* The CPU decoders against the public diffusers VAE code
 * (vae/test/reference/expected_vae.safetensors, made by ops/reference/vae_reference.py on the GPU
 * machine; docs/reference-check.md). usage: test_vae_reference CKPT_ROOT EXPECTED   (CKPT_ROOT from
 * `vdn ckpt init --preset tiny --vae`) Checks: the checkpoint files are the ones the reference read
 * (sha256); every video case (one chunk; three chunks; two chunks x two tiles; 2 x 2 tiles) and
 * audio case (5 and 24 latents, stereo) decodes to the reference within float32 tolerance; and that
 * the checks can fail (the tiled clip decoded as one big tile differs from the reference by far
 * more). With PRECISION fp8 (after the backend): the video decoder at fp8 instead (fp8_checks). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../ops/test/check.h"
#include "../../../ops/test/reference_files.h"
#include "backends.h"
#include "safetensors.h"
#include "vae.h"
#include "vdn_util.h"

static vdn_st_file *expected;

static const float *tensor(const char *name, int64_t *numel) {
    const vdn_st_entry *e = vdn_st_find(expected, name);
    if (!e) {
        fprintf(stderr, "expected file: no tensor %s\n", name);
        exit(1);
    }
    if (numel) *numel = e->numel;
    return e->data;
}

static const vdn_st_entry *entry(const char *name) {
    return vdn_st_find(expected, name);
}

/* max |a - b| over n values, and the largest |b| (the scale) */
static double max_err(const float *a, const float *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN propagates */
    }
    return m;
}

static void check_hashes(const char *root) {
    const char *files[4] = {"vae/config.json", "vae/diffusion_pytorch_model.safetensors",
                            "audio_vae/config.json",
                            "audio_vae/diffusion_pytorch_model.safetensors"};
    check_reference_hashes(expected, root, files, 4);
}

/* decode video case NAME; compare full frames or the 4x4 pooled frames and the kept frames */
static void video_case(vdn_video_vae *v, const char *name, double tol) {
    char key[128], err[1024];
    snprintf(key, sizeof key, "video.%s.latents", name);
    const vdn_st_entry *le = entry(key);
    const int C = (int)le->shape[0], T = (int)le->shape[1], h = (int)le->shape[2],
              w = (int)le->shape[3];
    (void)C;
    const int F = vdn_video_vae_frames(v, T, err, sizeof err);
    CHECK(F > 0, "%s", err);
    if (F <= 0) return;
    const int H = h * 16, W = w * 16;
    float *out = vdn_xmalloc(sizeof(float) * 3 * (size_t)F * H * W);
    int rc = vdn_video_vae_decode(v, le->data, T, h, w, out, NULL, NULL, err, sizeof err);
    CHECK(rc == 0, "video %s: %s", name, err);
    if (rc) {
        free(out);
        return;
    }
    snprintf(key, sizeof key, "video.%s.frames", name);
    if (entry(key)) {
        const vdn_st_entry *fe = entry(key);
        CHECK(fe->shape[1] == F, "video %s: %d frames, reference %lld", name, F,
              (long long)fe->shape[1]);
        if (fe->shape[1] == F) {
            double e = max_err(out, fe->data, fe->numel);
            printf("video %-6s (%d latent frames %dx%d -> %d frames %dx%d): max |err| %.3g\n", name,
                   T, h, w, F, H, W, e);
            CHECK(e <= tol, "video %s: max |err| %.3g > %.3g", name, e, tol);
        }
    } else {
        snprintf(key, sizeof key, "video.%s.frames_pool4", name);
        const vdn_st_entry *pe = entry(key);
        CHECK(pe->shape[1] == F, "video %s: %d frames, reference %lld", name, F,
              (long long)pe->shape[1]);
        if (pe->shape[1] == F) {
            const int Hp = H / 4, Wp = W / 4;
            float *pool = vdn_xmalloc(sizeof(float) * 3 * (size_t)F * Hp * Wp);
            for (int64_t i = 0; i < 3LL * F * Hp * Wp; i++) {
                int64_t x = i % Wp, y = (i / Wp) % Hp, ct = i / ((int64_t)Wp * Hp);
                double s = 0.0;
                for (int dy = 0; dy < 4; dy++)
                    for (int dx = 0; dx < 4; dx++)
                        s += out[(ct * H + 4 * y + dy) * W + 4 * x + dx];
                pool[i] = (float)(s / 16.0);
            }
            double e = max_err(pool, pe->data, pe->numel);
            free(pool);
            snprintf(key, sizeof key, "video.%s.frames_at", name);
            const vdn_st_entry *ae = entry(key);
            const char *which = vdn_st_meta(expected, key);
            double ea = 0.0;
            int n_at = (int)ae->shape[1], idx[16] = {0}, k = 0;
            for (const char *p = which; p && *p && k < 16; p++)
                if (*p >= '0' && *p <= '9') {
                    idx[k++] = (int)strtol(p, (char **)&p, 10);
                    p--;
                }
            CHECK(k == n_at, "video %s: frames_at metadata lists %d frames, tensor has %d", name, k,
                  n_at);
            for (int ch = 0; ch < 3; ch++)
                for (int j = 0; j < n_at && j < k; j++) {
                    const float *mine = out + ((int64_t)ch * F + idx[j]) * H * W;
                    const float *ref = (const float *)ae->data + ((int64_t)ch * n_at + j) * H * W;
                    double e1 = max_err(mine, ref, (int64_t)H * W);
                    if (!(e1 <= ea)) ea = e1;
                }
            printf("video %-6s (%d latent frames %dx%d -> %d frames %dx%d): max |err| %.3g (4x4 "
                   "means), %.3g (frames %s)\n",
                   name, T, h, w, F, H, W, e, ea, which);
            CHECK(e <= tol && ea <= tol, "video %s: max |err| %.3g / %.3g > %.3g", name, e, ea,
                  tol);
        }
    }
    free(out);
}

static void audio_case(vdn_audio_vae *a, const char *name, double tol) {
    char key[128], err[1024];
    snprintf(key, sizeof key, "audio.%s.latents", name);
    const vdn_st_entry *le = entry(key);
    const int ch = (int)le->shape[0], La = (int)le->shape[2];
    const int hop = vdn_audio_vae_config(a)->hop;
    float *wave = vdn_xmalloc(sizeof(float) * (size_t)ch * La * hop);
    int rc = vdn_audio_vae_decode(a, le->data, ch, La, wave, NULL, NULL, err, sizeof err);
    CHECK(rc == 0, "audio %s: %s", name, err);
    if (!rc) {
        int64_t n;
        snprintf(key, sizeof key, "audio.%s.wave", name);
        const float *ref = tensor(key, &n);
        CHECK(n == (int64_t)ch * La * hop, "audio %s: %lld samples, reference %lld", name,
              (long long)ch * La * hop, (long long)n);
        if (n == (int64_t)ch * La * hop) {
            double e = max_err(wave, ref, n);
            printf("audio %-6s (%d x %d latents -> %d x %d samples): max |err| %.3g\n", name, ch,
                   La, ch, La * hop, e);
            CHECK(e <= tol, "audio %s: max |err| %.3g > %.3g", name, e, tol);
        }
    }
    free(wave);
}

/* ---- fp8 precision (vae.h vdn_video_vae_load_precision) ----
 *
 * The statistic: ||got - want|| / ||want - mean_c(want)|| over a clip's frames, mean_c the
 * reference clip's mean of channel c. The frames are ImageNet de-normalised (x std_c + mean_c,
 * std_c 0.224-0.229, nearly one value), so away from the clamp this is the relative L2 error of
 * the decoder's output x itself; the clamp only removes error.
 *
 * FP8_HI(L): the bound text/test/test_encoder.c argues from e4m3's 3-bit mantissa: a quantised
 * operand is off by 1.8e-2 .. 3.6e-2 RMS relative, a product of two by at most 5.1e-2, a branch
 * of two products in series (q/k/v then to_out, FFN in then FFN out) by at most 7.2e-2, and L
 * blocks' independent branch errors add in square: sqrt(L) x 7.2e-2 on the residual stream. The
 * stream then goes through the float32 LayerNorm and proj_out (a fixed linear map, whose random
 * weights in the tiny checkpoint spread an error as they spread the signal), the unpatchify and
 * the cross-fades (convex blends). The tiny checkpoint's 2 blocks give 1.0e-1; its random
 * weights make every branch as large as the stream, the worst case of the argument. A lost or
 * swapped scale, a wrong row or a product of the raw e4m3 codes gives O(1).
 *
 * FP8_LO: a decode that skipped the quantisation is the float32 decoder, 5e-7 from the reference
 * at most per value (vae_vs_official_reference), while the first block's q/k/v product alone is
 * off by at least 2.6e-2. 3e-3 sits between the two with room for the stream's dilution by the
 * exact proj_in tokens. Skipping some of the Linears stays inside both: the count of fp8
 * Linears (vdn_video_vae_fp8_linears) is what catches that. */
#define FP8_LO 3e-3
#define FP8_HI(layers) (7.2e-2 * sqrt((double)(layers)))

static double rel_c(const float *got, const float *want, int F, int64_t plane) {
    double d = 0, m = 0;
    for (int c = 0; c < 3; c++) {
        const float *g = got + (int64_t)c * F * plane, *w = want + (int64_t)c * F * plane;
        double mean = 0;
        for (int64_t i = 0; i < F * plane; i++)
            mean += w[i];
        mean /= (double)(F * plane);
        for (int64_t i = 0; i < F * plane; i++) {
            const double e = (double)g[i] - w[i], x = (double)w[i] - mean;
            d += e * e;
            m += x * x;
        }
    }
    return m > 0 ? sqrt(d / m) : sqrt(d);
}

static float *decode_case(vdn_video_vae *v, const char *name, int *F, int64_t *plane) {
    char key[128], err[1024];
    snprintf(key, sizeof key, "video.%s.latents", name);
    const vdn_st_entry *le = entry(key);
    const int T = (int)le->shape[1], h = (int)le->shape[2], w = (int)le->shape[3];
    *F = vdn_video_vae_frames(v, T, err, sizeof err);
    *plane = (int64_t)h * 16 * w * 16;
    CHECK(*F > 0, "%s", err);
    if (*F <= 0) return NULL;
    float *out = vdn_xmalloc(sizeof(float) * 3 * (size_t)*F * (size_t)*plane);
    int rc = vdn_video_vae_decode(v, le->data, T, h, w, out, NULL, NULL, err, sizeof err);
    CHECK(rc == 0, "video %s at fp8: %s", name, err);
    if (rc) {
        free(out);
        return NULL;
    }
    return out;
}

/* The fp8 decoder on dev against the reference frames within FP8_LO..FP8_HI; the CPU's oracle
 * (on the CPU: dev itself) gives the same bits twice; on a GPU, CUDA fp8 against the CPU's fp8
 * oracle closer than the oracle is to the reference (the two quantise the same float32 weights
 * to the same codes and part only where an activation rounds to another e4m3 code, a subset of
 * the roundings that separate fp8 from float32). */
static void fp8_checks(vdn_dev *dev, const char *dir) {
    char err[1024];
    const int gpu = !vdn_dev_is_cpu(dev);
    vdn_dev *cpu = gpu ? vdn_dev_open("cpu", 0, 0, err, sizeof err) : dev;
    CHECK(cpu != NULL, "%s", err);
    if (!cpu) return;
    vdn_video_vae *v = vdn_video_vae_load_precision(dev, dir, VDN_PRECISION_FP8, err, sizeof err);
    CHECK(v != NULL, "%s", err);
    vdn_video_vae *twin =
        gpu ? vdn_video_vae_load_precision(cpu, dir, VDN_PRECISION_FP8, err, sizeof err) : v;
    CHECK(twin != NULL, "%s", err);
    vdn_video_vae *b16 = vdn_video_vae_load(cpu, dir, err, sizeof err);
    CHECK(b16 != NULL, "%s", err);
    if (v && twin && b16) {
        const int L = vdn_video_vae_config(v)->dec_layers;
        CHECK(vdn_video_vae_precision(v) == VDN_PRECISION_FP8 &&
                  vdn_video_vae_precision(b16) == VDN_PRECISION_BF16,
              "precisions %s / %s", vdn_precision_name(vdn_video_vae_precision(v)),
              vdn_precision_name(vdn_video_vae_precision(b16)));
        CHECK(vdn_video_vae_fp8_linears(v) == 3 * L && vdn_video_vae_fp8_linears(b16) == 0,
              "%d Linears in fp8 at fp8 and %d at bf16 over %d blocks (want %d and 0)",
              vdn_video_vae_fp8_linears(v), vdn_video_vae_fp8_linears(b16), L, 3 * L);
        const char *cases[] = {"small", "long"};
        for (int i = 0; i < 2; i++) {
            char key[128];
            snprintf(key, sizeof key, "video.%s.frames", cases[i]);
            const vdn_st_entry *fe = entry(key);
            int F, F2;
            int64_t plane;
            float *got = decode_case(v, cases[i], &F, &plane);
            float *again = decode_case(twin, cases[i], &F2, &plane);
            float *f32 = decode_case(b16, cases[i], &F2, &plane);
            if (f32 && fe &&
                fe->shape[1] == F2) { /* the lower bound fails a skipped quantisation */
                const double e32 = rel_c(f32, fe->data, F2, plane);
                CHECK(e32 < FP8_LO,
                      "video %s: the float32 decoder is %.3e from the reference, not "
                      "under FP8_LO",
                      cases[i], e32);
            }
            free(f32);
            if (got && again && fe && fe->shape[1] == F) {
                const float *want = fe->data;
                const double e = rel_c(got, want, F, plane), eo = rel_c(again, want, F, plane);
                printf("video %-6s fp8 (%s): %.2e of ||frames - mean|| from the reference (max "
                       "|err| %.3g); bounds %.0e..%.2e\n",
                       cases[i], vdn_dev_name(dev), e, max_err(got, want, fe->numel), FP8_LO,
                       FP8_HI(L));
                CHECK(e > FP8_LO && e < FP8_HI(L), "video %s fp8: %.3e, outside %.1e..%.2e",
                      cases[i], e, FP8_LO, FP8_HI(L));
                if (!gpu)
                    CHECK(!memcmp(got, again, sizeof(float) * (size_t)fe->numel),
                          "video %s: two fp8 decodes on the CPU differ", cases[i]);
                else {
                    const double el = rel_c(got, again, F, plane);
                    printf("video %-6s CUDA fp8 against the CPU's fp8 oracle: %.2e (the oracle is "
                           "%.2e from the reference); max |err| %.3g\n",
                           cases[i], el, eo, max_err(got, again, fe->numel));
                    CHECK(el < eo,
                          "video %s: CUDA fp8 %.3e from the CPU fp8 oracle, not under "
                          "the oracle's own %.3e",
                          cases[i], el, eo);
                }
            }
            free(got);
            free(again);
        }
    }
    vdn_video_vae_free(v);
    if (twin != v) vdn_video_vae_free(twin);
    vdn_video_vae_free(b16);
    if (cpu != dev) vdn_dev_close(cpu);
}

int main(int argc, char **argv) {
    vdn_backends_register(); /* "cuda" where this build has it */
    if (argc < 3) {
        fprintf(stderr,
                "usage: %s CKPT_ROOT EXPECTED.safetensors [video|audio|all] [cpu|cuda] "
                "[bf16|fp8]\n",
                argv[0]);
        return 2;
    }
    vdn_precision prec = VDN_PRECISION_BF16;
    if (argc > 5 && vdn_precision_parse(argv[5], &prec)) {
        fprintf(stderr, "%s: PRECISION '%s': expected bf16 or fp8\n", argv[0], argv[5]);
        return 2;
    }
    const char *only = argc > 3 ? argv[3] : "";
    char err[1024], dir[4200];
    expected = vdn_st_open(argv[2], err, sizeof err);
    if (!expected) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const char *errors = vdn_st_meta(expected, "errors");
    CHECK(errors && !strcmp(errors, "[]"), "the reference run reported errors: %s",
          errors ? errors : "?");
    check_hashes(argv[1]);
    const char *backend = argc > 4 ? argv[4] : "cpu";
    const int gpu = strcmp(backend, "cpu") != 0;
    vdn_dev *dev = vdn_dev_open(backend, 0, 0, err, sizeof err);
    if (!dev) {
        fprintf(stderr, "%s%s\n", gpu ? "SKIP: " : "", err);
        return gpu ? 77 : 1;
    }
    printf("backend %s\n", vdn_dev_name(dev));
    const double vtol = gpu ? 1.5e-2 : 5e-6, atol = 5e-5;
    if (prec == VDN_PRECISION_FP8) { /* the video decoder's fp8 precision only */
        snprintf(dir, sizeof dir, "%s/vae", argv[1]);
        fp8_checks(dev, dir);
        vdn_dev_close(dev);
        vdn_st_close(expected);
        return check_report("vae_reference (fp8)");
    }
    if (strcmp(only, "audio")) {
        snprintf(dir, sizeof dir, "%s/vae", argv[1]);
        vdn_video_vae *v = vdn_video_vae_load(dev, dir, err, sizeof err);
        CHECK(v != NULL, "%s", err);
        if (v) {
            const char *cases[] = {"small", "long", "tiles", "grid"};
            for (int i = 0; i < 4; i++)
                video_case(v, cases[i], vtol);
            vdn_video_vae_free(v);
        }
    }
    if (strcmp(only, "video")) {
        snprintf(dir, sizeof dir, "%s/audio_vae", argv[1]);
        vdn_audio_vae *a = vdn_audio_vae_load(dev, dir, err, sizeof err);
        CHECK(a != NULL, "%s", err);
        if (a) {
            audio_case(a, "short", atol);
            audio_case(a, "long", atol);
            vdn_audio_vae_free(a);
        }
    }
    vdn_dev_close(dev);
    vdn_st_close(expected);
    return check_report("vae_reference");
}
