/* `vdn ckpt init --vae`: tiny random video and audio VAEs in the released layout (vae_init.h). */
#include "vae_init.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "vae_config.h"
#include "vdn_util.h"

static uint64_t mix64(uint64_t z) { /* splitmix64's finaliser */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t name_key(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return mix64(seed + 0x9e3779b97f4a7c15ULL) ^ h;
}

/* uniform in [-1, 1), value i of the tensor */
static double unif(uint64_t key, int64_t i) {
    return (double)(mix64(key + (uint64_t)i * 0x9e3779b97f4a7c15ULL) >> 11) * 0x1.0p-52 - 1.0;
}

static int ends(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Values that keep activations O(1) through the random network: weights uniform with std
 * 1/sqrt(fan_in), weight-norm magnitudes near 1, norm weights near 1, small biases, the block
 * scales well away from the release's zero init (so every block changes its input). The random
 * BigVGAN grows its signal to a std of ~17 before conv_post, so conv_post's magnitude is 0.02:
 * the waveform then stays mostly inside the [-1, 1] clamp (a clamped sample tells a test
 * nothing). */
static void fill(uint64_t seed, const char *name, int ndim, const int64_t *shape, float *out) {
    int64_t n = 1, fan_in = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    for (int d = 1; d < ndim; d++)
        fan_in *= shape[d];
    const uint64_t key = name_key(seed, name);
    if (ends(name, ".filter")) { /* the resampling filters are buffers computed from the ratio */
        vdn_vae_kaiser_sinc(0.25, 0.3, (int)shape[ndim - 1], out);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double u = unif(key, i), v;
        if (ends(name, "zero_k_bias"))
            v = 0.0;
        else if (ends(name, "conv_post.weight_g"))
            v = 0.02 * (1.0 + 0.2 * u);
        else if (ends(name, "weight_g"))
            v = 1.0 + 0.2 * u;
        else if (ends(name, "weight_v"))
            v = u;
        else if (strstr(name, "norm") && ends(name, ".weight"))
            v = 1.0 + 0.1 * u;
        else if (ends(name, ".scale1") || ends(name, ".scale2"))
            v = 0.4 + 0.2 * u;
        else if (ends(name, ".act.alpha") || ends(name, ".act.beta"))
            v = 0.3 * u; /* log space */
        else if (ends(name, ".alpha"))
            v = 1.0 + 0.5 * u; /* Snake1d */
        else if (ends(name, "register_tokens"))
            v = u;
        else if (ends(name, "bias"))
            v = 0.1 * u;
        else
            v = u * sqrt(3.0 / (double)fan_in);
        out[i] = (float)v;
    }
}

typedef struct {
    vdn_st_tensor *t;
    int n, cap;
    uint64_t seed;
} tlist;

static void collect(void *user, const char *name, int ndim, const int64_t *shape) {
    tlist *l = user;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->t = realloc(l->t, sizeof *l->t * (size_t)l->cap);
        if (!l->t) abort();
    }
    vdn_st_tensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    t->name = vdn_xstrdup(name);
    t->dtype = VDN_DT_F32;
    t->ndim = ndim;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        numel *= shape[d];
    }
    float *data = vdn_xmalloc(sizeof(float) * (size_t)numel);
    fill(l->seed, name, ndim, shape, data);
    t->data = data;
}

static int write_dir(const char *dir, const char *json, tlist *l, char *err, size_t errlen) {
    char path[4200];
    if (vdn_mkdir_p(dir, err, errlen)) return -1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f || fputs(json, f) < 0 || fputc('\n', f) < 0) {
        if (f) fclose(f);
        return vdn_fail(err, errlen, "%s: cannot write", path);
    }
    if (fclose(f)) return vdn_fail(err, errlen, "%s: cannot write", path);
    snprintf(path, sizeof path, "%s/diffusion_pytorch_model.safetensors", dir);
    vdn_st_kv meta[1] = {{"format", "pt"}};
    return vdn_st_write(path, l->t, l->n, meta, 1, err, errlen);
}

static void tlist_free(tlist *l) {
    for (int i = 0; i < l->n; i++) {
        free((void *)l->t[i].name);
        free((void *)l->t[i].data);
    }
    free(l->t);
}

/* random latent statistics, so the un-normalisation is exercised */
static void random_audio_stats(vdn_vae_audio_config *ac, uint64_t seed) {
    uint64_t key = name_key(seed, "latents_stats");
    for (int i = 0; i < VDN_VAE_MAX_CH; i++) {
        ac->latents_mean[i] = (float)(0.5 * unif(key, 200 + i));
        ac->latents_std[i] = (float)(1.0 + 0.5 * unif(key, 300 + i));
    }
}

static int write_audio(const char *dir, const vdn_vae_audio_config *ac, uint64_t seed, char *err,
                       size_t errlen) {
    tlist a = {.seed = seed};
    vdn_vae_audio_tensors(ac, collect, &a);
    char *aj = vdn_vae_audio_config_json(ac);
    int rc = write_dir(dir, aj, &a, err, errlen);
    free(aj);
    tlist_free(&a);
    return rc;
}

/* random latent statistics, so the normalisation is exercised */
static void random_video_stats(vdn_vae_video_config *vc, uint64_t seed) {
    uint64_t key = name_key(seed, "latents_stats");
    for (int i = 0; i < VDN_VAE_MAX_CH; i++) {
        vc->latents_mean[i] = (float)(0.5 * unif(key, i));
        vc->latents_std[i] = (float)(1.0 + 0.5 * unif(key, 100 + i));
    }
}

int vdn_vae_init_video(const char *dir, const vdn_vae_video_config *c, uint64_t seed, char *err,
                       size_t errlen) {
    vdn_vae_video_config vc = *c;
    random_video_stats(&vc, seed);
    tlist v = {.seed = seed};
    vdn_vae_video_tensors(&vc, collect, &v);
    char *vj = vdn_vae_video_config_json(&vc);
    int rc = write_dir(dir, vj, &v, err, errlen);
    free(vj);
    tlist_free(&v);
    return rc;
}

int vdn_vae_init(const char *root, uint64_t seed, char *err, size_t errlen) {
    char dir[4200];
    vdn_vae_video_config vc;
    vdn_vae_audio_config ac;
    vdn_vae_video_tiny(&vc);
    vdn_vae_audio_tiny(&ac);
    random_audio_stats(&ac, seed);
    snprintf(dir, sizeof dir, "%s/vae", root);
    int rc = vdn_vae_init_video(dir, &vc, seed, err, errlen);
    snprintf(dir, sizeof dir, "%s/audio_vae", root);
    if (!rc) rc = write_audio(dir, &ac, seed, err, errlen);
    return rc;
}

int vdn_vae_init_audio_full(const char *dir, uint64_t seed, char *err, size_t errlen) {
    vdn_vae_audio_config ac;
    vdn_vae_audio_defaults(&ac);
    random_audio_stats(&ac, seed);
    return write_audio(dir, &ac, seed, err, errlen);
}
