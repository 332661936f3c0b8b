/* Prompt-cache reader; the format is in prompt.h and docs/formats.md. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "prompt.h"
#include "safetensors.h"
#include "vdn_util.h"

static const char *const known_tensors[] = {"prompt_embeds", "text_token_tags", "keyframe_first",
                                            "keyframe_last"};

/* A positive decimal integer metadata value; 0 when absent, -1 on a bad value. */
static int meta_int(const vdn_st_file *f, const char *key, int *out, char *err, size_t errlen) {
    const char *s = vdn_st_meta(f, key);
    *out = 0;
    if (!s) return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v <= 0 || v > 1 << 20)
        return vdn_fail(err, errlen, "%s: metadata \"%s\" = \"%s\", expected a positive integer",
                        vdn_st_path(f), key, s);
    *out = (int)v;
    return 0;
}

/* Keyframe latents (24, 1, h, w) or (1, 24, 1, h, w) -> h, w. */
static int keyframe_dims(const vdn_st_file *f, const vdn_st_entry *e, int *h, int *w, char *err,
                         size_t errlen) {
    const int64_t *s = e->shape;
    int ok4 = e->ndim == 4 && s[0] == VDN_LATENT_CHANNELS && s[1] == 1;
    int ok5 = e->ndim == 5 && s[0] == 1 && s[1] == VDN_LATENT_CHANNELS && s[2] == 1;
    if (!ok4 && !ok5)
        return vdn_fail(err, errlen,
                        "%s: tensor \"%s\": expected shape (24, 1, h, w) or (1, 24, 1, h, w)",
                        vdn_st_path(f), e->name);
    int64_t hh = s[e->ndim - 2], ww = s[e->ndim - 1];
    if (hh < 1 || ww < 1 || hh > 4096 || ww > 4096)
        return vdn_fail(err, errlen,
                        "%s: tensor \"%s\": latent size %" PRId64 "x%" PRId64 " out of range",
                        vdn_st_path(f), e->name, hh, ww);
    if (!vdn_dtype_is_float(e->dtype))
        return vdn_fail(err, errlen, "%s: tensor \"%s\": dtype %s, expected F32, BF16 or F16",
                        vdn_st_path(f), e->name, vdn_dtype_name(e->dtype));
    *h = (int)hh;
    *w = (int)ww;
    return 0;
}

static int load(vdn_st_file *f, int text_dim, vdn_prompt *p, char *err, size_t errlen) {
    const char *path = vdn_st_path(f);
    for (int i = 0; i < vdn_st_count(f); i++) {
        const char *n = vdn_st_at(f, i)->name;
        int known = 0;
        for (size_t k = 0; k < sizeof known_tensors / sizeof *known_tensors; k++)
            known |= strcmp(n, known_tensors[k]) == 0;
        if (!known)
            return vdn_fail(err, errlen,
                            "%s: unexpected tensor \"%s\" (a prompt cache holds prompt_embeds, "
                            "text_token_tags, keyframe_first, keyframe_last)",
                            path, n);
    }
    const vdn_st_entry *emb = vdn_st_find(f, "prompt_embeds");
    if (!emb) return vdn_fail(err, errlen, "%s: missing tensor \"prompt_embeds\"", path);
    if (emb->ndim != 2 || emb->shape[0] < 1 || emb->shape[1] < 1)
        return vdn_fail(err, errlen,
                        "%s: tensor \"prompt_embeds\": expected shape (L, text_dim) "
                        "with L >= 1",
                        path);
    if (text_dim > 0 && emb->shape[1] != text_dim)
        return vdn_fail(err, errlen,
                        "%s: tensor \"prompt_embeds\": width %" PRId64
                        " but the checkpoint's text_dim is %d",
                        path, emb->shape[1], text_dim);
    if (emb->shape[0] > VDN_PROMPT_MAX_ROWS || emb->shape[1] > VDN_PROMPT_MAX_DIM)
        return vdn_fail(err, errlen,
                        "%s: tensor \"prompt_embeds\": shape (%" PRId64 ", %" PRId64
                        "), above the limit of %d rows of at most %d (refused before loading)",
                        path, emb->shape[0], emb->shape[1], VDN_PROMPT_MAX_ROWS,
                        VDN_PROMPT_MAX_DIM);
    const vdn_st_entry *tags = vdn_st_find(f, "text_token_tags");
    if (!tags) return vdn_fail(err, errlen, "%s: missing tensor \"text_token_tags\"", path);
    if (tags->ndim != 1 || tags->shape[0] != emb->shape[0])
        return vdn_fail(err, errlen,
                        "%s: tensor \"text_token_tags\": expected shape (%" PRId64
                        ",) to match prompt_embeds",
                        path, emb->shape[0]);
    if (tags->dtype != VDN_DT_I64 && tags->dtype != VDN_DT_I32)
        return vdn_fail(err, errlen, "%s: tensor \"text_token_tags\": dtype %s, expected I64", path,
                        vdn_dtype_name(tags->dtype));

    p->n_text = (int)emb->shape[0];
    p->text_dim = (int)emb->shape[1];
    p->embeds = vdn_xmalloc((size_t)emb->numel * sizeof(float));
    if (vdn_st_to_f32(f, emb, p->embeds, err, errlen) != 0) return -1;
    p->tags = vdn_xmalloc((size_t)p->n_text * sizeof(int));
    const uint8_t *tp = tags->data;
    for (int i = 0; i < p->n_text; i++) {
        int64_t v;
        if (tags->dtype == VDN_DT_I64) {
            memcpy(&v, tp + 8 * (size_t)i, 8);
        } else {
            int32_t v32;
            memcpy(&v32, tp + 4 * (size_t)i, 4);
            v = v32;
        }
        if (v != 0 && v != 1)
            return vdn_fail(err, errlen,
                            "%s: tensor \"text_token_tags\"[%d] = %" PRId64
                            ", expected 0 (vision-block row) or 1 (text row)",
                            path, i, v);
        p->tags[i] = (int)v;
    }

    if (meta_int(f, "height", &p->height, err, errlen) ||
        meta_int(f, "width", &p->width, err, errlen))
        return -1;
    const char *txt = vdn_st_meta(f, "prompt");
    if (txt) p->prompt = vdn_xstrdup(txt);

    const vdn_st_entry *kf[2] = {vdn_st_find(f, "keyframe_first"), vdn_st_find(f, "keyframe_last")};
    int dims[2][2] = {{0, 0}, {0, 0}};
    for (int k = 0; k < 2; k++)
        if (kf[k] && keyframe_dims(f, kf[k], &dims[k][0], &dims[k][1], err, errlen)) return -1;
    if (kf[0] && kf[1] && (dims[0][0] != dims[1][0] || dims[0][1] != dims[1][1]))
        return vdn_fail(err, errlen,
                        "%s: keyframe_first is %dx%d but keyframe_last is %dx%d (one canvas)", path,
                        dims[0][0], dims[0][1], dims[1][0], dims[1][1]);
    const char *anchors = vdn_st_meta(f, "keyframe_anchors");
    if (anchors) {
        const char *want = kf[0] && kf[1] ? "first,last" : kf[0] ? "first" : kf[1] ? "last" : "";
        if (strcmp(anchors, want) != 0)
            return vdn_fail(err, errlen,
                            "%s: metadata \"keyframe_anchors\" = \"%s\" but the keyframe tensors "
                            "present say \"%s\"",
                            path, anchors, want);
    }
    if (!kf[0] && !kf[1]) return 0;
    int h = kf[0] ? dims[0][0] : dims[1][0], w = kf[0] ? dims[0][1] : dims[1][1];
    if (!p->height || !p->width)
        return vdn_fail(err, errlen,
                        "%s: keyframes present but metadata \"height\"/\"width\" (pixels) missing",
                        path);
    if (p->height != 16 * h || p->width != 16 * w)
        return vdn_fail(err, errlen,
                        "%s: keyframe latents are %dx%d but height x width = %dx%d pixels "
                        "(expected latents of height/16 x width/16)",
                        path, h, w, p->height, p->width);
    p->kf_h = h;
    p->kf_w = w;
    size_t per = (size_t)VDN_LATENT_CHANNELS * h * w;
    p->keyframes = vdn_xmalloc(2 * per * sizeof(float));
    for (int k = 0; k < 2; k++) {
        if (!kf[k]) continue;
        if (vdn_st_to_f32(f, kf[k], p->keyframes + (size_t)p->n_keyframes * per, err, errlen))
            return -1;
        p->anchor_last[p->n_keyframes++] = k;
    }
    return 0;
}

int vdn_prompt_from_st(vdn_st_file *f, int text_dim, vdn_prompt *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    int rc = load(f, text_dim, out, err, errlen);
    if (rc) vdn_prompt_free(out);
    return rc;
}

int vdn_prompt_load(const char *path, int text_dim, vdn_prompt *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    vdn_st_file *f = vdn_st_open(path, err, errlen);
    if (!f) return -1;
    int rc = vdn_prompt_from_st(f, text_dim, out, err, errlen);
    vdn_st_close(f);
    return rc;
}

void vdn_prompt_free(vdn_prompt *p) {
    free(p->embeds);
    free(p->tags);
    free(p->keyframes);
    free(p->prompt);
    memset(p, 0, sizeof *p);
}
