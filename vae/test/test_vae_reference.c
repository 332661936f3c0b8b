/* The CPU decoders against the public diffusers VAE code
 * (vae/test/reference/expected_vae.safetensors, made by ops/reference/vae_reference.py on the GPU
 * machine; docs/reference-check.md). usage: test_vae_reference CKPT_ROOT EXPECTED   (CKPT_ROOT from
 * `vdn ckpt init --preset tiny --vae`) Checks: the checkpoint files are the ones the reference read
 * (sha256); every video case (one chunk; three chunks; two chunks x two tiles; 2 x 2 tiles) and
 * audio case (5 and 24 latents, stereo) decodes to the reference within float32 tolerance; and that
 * the checks can fail (the tiled clip decoded as one big tile differs from the reference by far
 * more). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ops/test/check.h"
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
    for (int i = 0; i < 4; i++) {
        char path[4200], key[128], err[512], hex[65];
        snprintf(path, sizeof path, "%s/%s", root, files[i]);
        snprintf(key, sizeof key, "sha256.%s", files[i]);
        size_t len;
        char *data = vdn_read_file(path, &len, err, sizeof err);
        CHECK(data != NULL, "%s", err);
        if (!data) continue;
        vdn_sha256_hex(data, len, hex);
        free(data);
        const char *want = vdn_st_meta(expected, key);
        CHECK(want && !strcmp(want, hex),
              "%s changed (sha256 %s, the reference read %s): `vdn ckpt init --vae` no longer "
              "writes what the expected values were made from; re-run docs/reference-check.md",
              path, hex, want ? want : "?");
    }
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

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s CKPT_ROOT EXPECTED.safetensors [video|audio|all] [cpu|cuda]\n",
                argv[0]);
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
