/* Keyframe pictures into prompt caches (prompt_pictures.h). */
#include "prompt_pictures.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "keyframes.h"
#include "safetensors.h"
#include "vae.h"
#include "vdn_util.h"
#include "video_encoder.h"
#include "vision_preprocess.h"

/* ---- identities ---- */

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends a safetensors file's 8-byte length and JSON header (names, dtypes, shapes, offsets:
 * what a changed weight file changes) to buf. */
static int add_header(const char *path, char **buf, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    unsigned char n8[8];
    if (!f || fread(n8, 1, 8, f) != 8) {
        if (f) fclose(f);
        return vdn_fail(err, errlen, "%s: cannot read its safetensors header", path);
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | n8[i];
    if (n > (100u << 20)) {
        fclose(f);
        return vdn_fail(err, errlen, "%s: safetensors header of %llu bytes (at most 100 MiB)", path,
                        (unsigned long long)n);
    }
    *buf = realloc(*buf, *len + 8 + n);
    VDN_ASSERT(*buf);
    memcpy(*buf + *len, n8, 8);
    size_t got = fread(*buf + *len + 8, 1, n, f);
    fclose(f);
    if (got != n) return vdn_fail(err, errlen, "%s: truncated safetensors header", path);
    *len += 8 + n;
    return 0;
}

/* The video VAE's identity: SHA-256 of its config.json and the headers of its weight files, in
 * name order. */
static int vae_identity(const char *dir, char out[65], char *err, size_t errlen) {
    char path[4600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t len;
    char *buf = vdn_read_file(path, &len, err, errlen);
    if (!buf) return -1;
    DIR *d = opendir(dir);
    if (!d) {
        free(buf);
        return vdn_fail(err, errlen, "%s: cannot list the VAE's folder", dir);
    }
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l > 12 && !strcmp(e->d_name + l - 12, ".safetensors")) {
            names = realloc(names, (n + 1) * sizeof *names);
            VDN_ASSERT(names);
            names[n++] = vdn_xstrdup(e->d_name);
        }
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int rc = n ? 0 : vdn_fail(err, errlen, "%s: no .safetensors weights", dir);
    for (size_t i = 0; i < n && !rc; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rc = add_header(path, &buf, &len, err, errlen);
    }
    if (!rc) vdn_sha256_hex(buf, len, out);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(buf);
    return rc;
}

/* A picture file decoded (media/image.h) and its bytes' SHA-256: a file that is not there, too
 * large, not a PNG, JPEG or WebP, truncated or over the pixel limit is the request's error, said
 * here, naming the field, before any model is loaded. */
static int picture_read(const char *field, const char *path, vdn_image *im, char out[65], char *err,
                        size_t errlen) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return vdn_fail(err, errlen, "%s %s: no such picture file", field, path);
    if (sb.st_size > VDN_PICTURE_MAX_BYTES)
        return vdn_fail(err, errlen, "%s %s: %lld bytes, above the %lld MiB a picture may have",
                        field, path, (long long)sb.st_size, VDN_PICTURE_MAX_BYTES >> 20);
    size_t len;
    char *bytes = vdn_read_file(path, &len, err, errlen);
    if (!bytes) return -1;
    vdn_image_opts io = {.max_pixels = VDN_PICTURE_MAX_PIXELS,
                         .max_bytes = (size_t)VDN_PICTURE_MAX_BYTES};
    char ierr[VDN_ERR_LEN];
    int rc = vdn_image_decode(bytes, len, path, &io, im, ierr, sizeof ierr);
    if (rc)
        vdn_fail(err, errlen, "%s: %s", field, ierr);
    else
        vdn_sha256_hex(bytes, len, out);
    free(bytes);
    return rc;
}

/* The image processor's settings as the text encoder reads them (processor/ beside
 * text_encoder/), hashed in a fixed text form: what changes how a picture becomes the vision
 * tower's rows changes the identity, a file's spacing or key order does not. */
static int processor_identity(const char *ckpt_root, char out[65], char *err, size_t errlen) {
    char path[4400];
    snprintf(path, sizeof path, "%s/processor/preprocessor_config.json", ckpt_root);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return vdn_fail(err, errlen,
                        "checkpoint %s has no processor/preprocessor_config.json: keyframe "
                        "pictures need the image processor's settings",
                        ckpt_root);
    vdn_vision_proc v;
    if (vdn_vision_proc_load(path, &v, err, errlen)) return -1;
    char text[512];
    int n =
        snprintf(text, sizeof text,
                 "pixels %lld..%lld\npatch %d temporal %d merge %d\nmean %.9g %.9g %.9g\n"
                 "std %.9g %.9g %.9g\nrescale %.17g\n",
                 (long long)v.min_pixels, (long long)v.max_pixels, v.patch, v.temporal_patch,
                 v.merge, v.mean[0], v.mean[1], v.mean[2], v.std[0], v.std[1], v.std[2], v.rescale);
    vdn_sha256_hex(text, (size_t)n, out);
    return 0;
}

/* The canvas asked for: both sides multiples of 32, or neither given. */
static int canvas_asked_ok(const vdn_prompt_input *in, char *err, size_t errlen) {
    if ((in->height > 0) != (in->width > 0) || in->height < 0 || in->width < 0 || in->height % 32 ||
        in->width % 32)
        return vdn_fail(err, errlen,
                        "keyframe canvas %d x %d (height x width): expected both multiples "
                        "of 32, or neither given (the release's canvas of the first keyframe)",
                        in->height, in->width);
    return 0;
}

/* Each picture decoded once and hashed, then put on the canvas (media/keyframes.h): what the
 * canvas refuses (a first keyframe outside 1:4 .. 4:1, a resize too costly) is the request's
 * error too. */
static int read_pictures(const vdn_prompt_input *in, vdn_pictures *out, char *err, size_t errlen) {
    const char *files[2] = {in->first_frame, in->last_frame};
    const char *fields[2] = {"first_frame", "last_frame"};
    vdn_image ims[2] = {{0}};
    int rc = 0;
    for (int i = 0; i < 2 && !rc; i++) {
        if (!files[i] || !files[i][0]) continue;
        rc = picture_read(fields[i], files[i], &ims[out->n], out->sha256[out->n], err, errlen);
        out->path[out->n] = files[i];
        out->anchor_last[out->n++] = i;
    }
    char kerr[VDN_ERR_LEN];
    if (!rc && out->n &&
        vdn_keyframes_prepare(ims, out->n, in->width, in->height, out->canvas, &out->canvas_w,
                              &out->canvas_h, kerr, sizeof kerr))
        rc = vdn_fail(err, errlen, "keyframe pictures: %s", kerr);
    for (int i = 0; i < 2; i++)
        vdn_image_free(&ims[i]);
    return rc;
}

int vdn_pictures_of(const char *ckpt_root, const vdn_prompt_input *in, vdn_pictures *out, char *err,
                    size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!(in->first_frame && in->first_frame[0]) && !(in->last_frame && in->last_frame[0]))
        return 0;
    if (canvas_asked_ok(in, err, errlen)) return -1;
    out->height = in->height;
    out->width = in->width;
    char dir[4400];
    int rc = read_pictures(in, out, err, errlen);
    if (!rc && vdn_vae_find(ckpt_root, "vae", dir, sizeof dir))
        rc = vdn_fail(err, errlen,
                      "checkpoint %s has no vae/ (nor base/vae/): keyframe pictures need the "
                      "video VAE's encoder",
                      ckpt_root);
    if (!rc) rc = vae_identity(dir, out->vae, err, errlen);
    if (!rc) rc = processor_identity(ckpt_root, out->processor, err, errlen);
    if (rc) vdn_pictures_free(out);
    return rc;
}

void vdn_pictures_free(vdn_pictures *pics) {
    for (int i = 0; i < 2; i++)
        vdn_image_free(&pics->canvas[i]);
    memset(pics, 0, sizeof *pics);
}

vdn_pictures vdn_pictures_identity(const vdn_pictures *pics) {
    vdn_pictures id = *pics;
    memset(id.canvas, 0, sizeof id.canvas);
    return id;
}

void vdn_pictures_to_json(const vdn_pictures *pics, cJSON *o) {
    cJSON *a = cJSON_AddArrayToObject(o, "keyframes");
    for (int i = 0; i < pics->n; i++) {
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "anchor", pics->anchor_last[i] ? "last" : "first");
        cJSON_AddStringToObject(k, "sha256", pics->sha256[i]);
        const char *slash = strrchr(pics->path[i], '/');
        cJSON_AddStringToObject(k, "file", slash ? slash + 1 : pics->path[i]);
        cJSON_AddItemToArray(a, k);
    }
    cJSON_AddStringToObject(o, "vae", pics->vae);
    cJSON_AddStringToObject(o, "processor", pics->processor);
    if (pics->height > 0) {
        cJSON *c = cJSON_AddObjectToObject(o, "canvas_asked");
        cJSON_AddNumberToObject(c, "height", pics->height);
        cJSON_AddNumberToObject(c, "width", pics->width);
    }
}

void vdn_prompt_content_sha256(const void *const *parts, const size_t *sizes, int n, char hex[65]) {
    size_t total = 0, at = 0;
    for (int i = 0; i < n; i++)
        total += sizes[i];
    uint8_t *buf = vdn_xmalloc(total + 1);
    for (int i = 0; i < n; i++) {
        memcpy(buf + at, parts[i], sizes[i]);
        at += sizes[i];
    }
    vdn_sha256_hex(buf, total, hex);
    free(buf);
}

/* ---- the encode ---- */

/* What one encode holds: the canvas pictures' latents, the prompt's rows. */
typedef struct {
    int cw, ch;        /* the canvas, pixels */
    float *latents[2]; /* [C, ch/16, cw/16] each */
    int lc;            /* latent channels */
    float *rows;       /* [n_rows, hidden] */
    uint8_t *tags;     /* [n_rows] */
    int n_rows;
} keyframe_work;

static void work_free(keyframe_work *w) {
    for (int i = 0; i < 2; i++)
        free(w->latents[i]);
    free(w->rows);
    free(w->tags);
}

/* Each canvas picture through the VAE's encoder (ckpt_root/vae, loaded on dev for the call). */
static int encode_latents(const char *ckpt_root, vdn_dev *dev, const vdn_pictures *pics,
                          keyframe_work *w, char *err, size_t errlen) {
    char dir[4400], verr[VDN_ERR_LEN];
    if (vdn_vae_find(ckpt_root, "vae", dir, sizeof dir))
        return vdn_fail(err, errlen, "checkpoint %s has no vae/: keyframe pictures need it",
                        ckpt_root);
    vdn_video_encoder *e = vdn_video_encoder_load(dev, dir, verr, sizeof verr);
    if (!e) return vdn_fail(err, errlen, "video VAE encoder: %s", verr);
    w->lc = vdn_video_encoder_config(e)->latent_channels;
    const size_t per = (size_t)w->lc * (w->ch / 16) * (w->cw / 16);
    int rc = 0;
    for (int i = 0; i < pics->n && !rc; i++) {
        w->latents[i] = vdn_xmalloc(sizeof(float) * per);
        if (vdn_video_encoder_encode_u8(e, pics->canvas[i].rgb, w->ch, w->cw, NULL, w->latents[i],
                                        verr, sizeof verr))
            rc = vdn_fail(err, errlen, "%s: the VAE encoder: %s", pics->path[i], verr);
    }
    vdn_video_encoder_free(e);
    return rc;
}

/* The prompt with its pictures through the text encoder (and its vision tower). */
static int encode_rows(vdn_text_encoder *enc, const vdn_tokenizer *tok, const char *text,
                       const vdn_pictures *pics, keyframe_work *w, char *err, size_t errlen) {
    vdn_picture in[2];
    for (int i = 0; i < pics->n; i++)
        in[i] = (vdn_picture){.rgb = pics->canvas[i].rgb,
                              .width = w->cw,
                              .height = w->ch,
                              .stride = (size_t)w->cw * 3};
    return vdn_text_encode_pictures(enc, tok, text, strlen(text), in, pics->n, &w->rows, &w->tags,
                                    &w->n_rows, err, errlen);
}

/* The cache file: prompt_embeds bf16, text_token_tags, keyframe_first / keyframe_last
 * [1, C, 1, h, w] float32, and the metadata of docs/formats.md. */
static int write_file(const vdn_text_encoder *enc, const char *text, const vdn_pictures *pics,
                      const vdn_pictures_meta *meta, const keyframe_work *w, const char *path,
                      char *err, size_t errlen) {
    const int64_t H = vdn_text_encoder_config(enc)->hidden, L = w->n_rows;
    uint16_t *bf = vdn_xmalloc(2 * (size_t)(L * H));
    for (int64_t i = 0; i < L * H; i++)
        bf[i] = vdn_f32_to_bf16(w->rows[i]);
    int64_t *tags = vdn_xmalloc(sizeof(int64_t) * (size_t)L);
    for (int64_t i = 0; i < L; i++)
        tags[i] = w->tags[i];
    vdn_st_tensor t[4] = {
        {.name = "prompt_embeds", .dtype = VDN_DT_BF16, .ndim = 2, .shape = {L, H}, .data = bf},
        {.name = "text_token_tags", .dtype = VDN_DT_I64, .ndim = 1, .shape = {L}, .data = tags},
    };
    int nt = 2;
    for (int i = 0; i < pics->n; i++)
        t[nt++] = (vdn_st_tensor){.name = pics->anchor_last[i] ? "keyframe_last" : "keyframe_first",
                                  .dtype = VDN_DT_F32,
                                  .ndim = 5,
                                  .shape = {1, w->lc, 1, w->ch / 16, w->cw / 16},
                                  .data = w->latents[i]};
    char hs[16], ws[16], layer[16], files[1200] = "[", shas[300] = "[";
    snprintf(hs, sizeof hs, "%d", w->ch);
    snprintf(ws, sizeof ws, "%d", w->cw);
    snprintf(layer, sizeof layer, "%d", vdn_text_encoder_layer(enc));
    for (int i = 0; i < pics->n; i++) {
        const char *slash = strrchr(pics->path[i], '/');
        cJSON *name = cJSON_CreateString(slash ? slash + 1 : pics->path[i]);
        char *quoted = cJSON_PrintUnformatted(name);
        snprintf(files + strlen(files), sizeof files - strlen(files), "%s%.500s", i ? "," : "",
                 quoted);
        cJSON_free(quoted);
        cJSON_Delete(name);
        snprintf(shas + strlen(shas), sizeof shas - strlen(shas), "%s\"%s\"", i ? "," : "",
                 pics->sha256[i]);
    }
    strcat(files, "]");
    strcat(shas, "]");
    const char *anchors = pics->n == 2 ? "first,last" : pics->anchor_last[0] ? "last" : "first";
    const void *parts[4] = {bf, tags};
    size_t sizes[4] = {2 * (size_t)(L * H), sizeof(int64_t) * (size_t)L};
    const size_t per = sizeof(float) * (size_t)w->lc * (w->ch / 16) * (w->cw / 16);
    for (int i = 0; i < pics->n; i++)
        parts[2 + i] = w->latents[i], sizes[2 + i] = per;
    char content[65], tokens[32];
    vdn_prompt_content_sha256(parts, sizes, 2 + pics->n, content);
    snprintf(tokens, sizeof tokens, "%d", meta->tokens);
    vdn_st_kv kv[] = {{"cache_key", meta->cache_key},
                      {"content_sha256", content},
                      {"tokens", tokens},
                      {"prompt", text},
                      {"height", hs},
                      {"width", ws},
                      {"keyframe_anchors", anchors},
                      {"keyframe_files", files},
                      {"keyframe_sha256", shas},
                      {"vae", pics->vae},
                      {"processor", pics->processor},
                      {"text_encoder", meta->identity},
                      {"text_encoder_layer", layer},
                      {"text_encoder_precision", vdn_precision_name(meta->precision)},
                      {"tokenizer", meta->tokenizer_sha256}};
    int rc = vdn_st_write(path, t, nt, kv, sizeof kv / sizeof *kv, err, errlen);
    free(bf);
    free(tags);
    return rc;
}

int vdn_pictures_write_cache(const char *ckpt_root, vdn_text_encoder *enc, struct vdn_dev *dev,
                             const vdn_tokenizer *tok, const char *text, const vdn_pictures *pics,
                             const vdn_pictures_meta *meta, const char *path, char *err,
                             size_t errlen) {
    keyframe_work w = {.cw = pics->canvas_w, .ch = pics->canvas_h};
    int rc = encode_latents(ckpt_root, dev, pics, &w, err, errlen);
    if (!rc) rc = encode_rows(enc, tok, text, pics, &w, err, errlen);
    if (!rc) rc = write_file(enc, text, pics, meta, &w, path, err, errlen);
    work_free(&w);
    return rc;
}
