/* Opening a VAE's safetensors and checking it against the released tensor list (vae.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "safetensors.h"
#include "vae.h"
#include "vdn_util.h"

typedef struct {
    vdn_st_set *st;
    char *err;
    size_t errlen;
    int failed, count;
} check_ctx;

static void check_one(void *user, const char *name, int ndim, const int64_t *shape) {
    check_ctx *c = user;
    c->count++;
    if (c->failed) return;
    const vdn_st_file *f;
    const vdn_st_entry *e = vdn_st_set_find(c->st, name, &f);
    if (!e) {
        vdn_fail(c->err, c->errlen, "%s: tensor %s is missing (a %d-D tensor in the release)",
                 vdn_st_path(vdn_st_set_file(c->st, 0)), name, ndim);
        c->failed = 1;
        return;
    }
    if (vdn_st_check_shape(f, e, ndim, shape, c->err, c->errlen)) {
        c->failed = 1;
        return;
    }
    if (!vdn_dtype_is_float(e->dtype)) {
        vdn_fail(c->err, c->errlen, "%s: tensor %s: dtype %s, expected F32, BF16 or F16",
                 vdn_st_path(f), name, vdn_dtype_name(e->dtype));
        c->failed = 1;
    }
}

vdn_st_set *vdn_vae_open_weights(const char *dir, int video, const void *config, char *err,
                                 size_t errlen) {
    char path[4300];
    struct stat sb;
    snprintf(path, sizeof path, "%s/diffusion_pytorch_model.safetensors", dir);
    if (stat(path, &sb) != 0)
        snprintf(path, sizeof path, "%s/diffusion_pytorch_model.safetensors.index.json", dir);
    if (stat(path, &sb) != 0) {
        vdn_fail(err, errlen, "%s: no diffusion_pytorch_model.safetensors (or .index.json)", dir);
        return NULL;
    }
    vdn_st_set *st = vdn_st_set_open(path, err, errlen);
    if (!st) return NULL;
    check_ctx c = {st, err, errlen, 0, 0};
    if (video)
        vdn_vae_video_tensors(config, check_one, &c);
    else
        vdn_vae_audio_tensors(config, check_one, &c);
    if (!c.failed && vdn_st_set_count(st) != c.count) {
        vdn_fail(err, errlen, "%s: %d tensors, the %s VAE of this config has %d", path,
                 vdn_st_set_count(st), video ? "video" : "audio", c.count);
        c.failed = 1;
    }
    if (c.failed) {
        vdn_st_set_close(st);
        return NULL;
    }
    return st;
}

float *vdn_vae_read(vdn_st_set *st, const char *name, int64_t *n) {
    const vdn_st_file *f;
    const vdn_st_entry *e = vdn_st_set_find(st, name, &f);
    if (!e) return NULL;
    float *out = vdn_xmalloc(sizeof(float) * (size_t)(e->numel ? e->numel : 1));
    char err[256];
    if (vdn_st_to_f32(f, e, out, err, sizeof err)) {
        free(out);
        return NULL;
    }
    if (n) *n = e->numel;
    return out;
}

int vdn_vae_find(const char *root, const char *which, char *out, size_t len) {
    const char *sub[2] = {"", "/base"};
    for (int i = 0; i < 2; i++) {
        char cfg[4400];
        struct stat sb;
        snprintf(out, len, "%s%s/%s", root, sub[i], which);
        snprintf(cfg, sizeof cfg, "%s/config.json", out);
        if (stat(cfg, &sb) == 0) return 0;
    }
    out[0] = 0;
    return -1;
}
