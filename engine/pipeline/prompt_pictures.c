/* Keyframe pictures into prompt caches (prompt_pictures.h). */
#include "prompt_pictures.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "vae.h"
#include "vdn_util.h"

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

/* A picture file's SHA-256, refusing a file that is not there or too large before reading it. */
static int picture_sha(const char *field, const char *path, char out[65], char *err,
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
    vdn_sha256_hex(bytes, len, out);
    free(bytes);
    return 0;
}

int vdn_pictures_of(const char *ckpt_root, const vdn_prompt_input *in, vdn_pictures *out, char *err,
                    size_t errlen) {
    memset(out, 0, sizeof *out);
    const char *files[2] = {in->first_frame, in->last_frame};
    const char *fields[2] = {"first_frame", "last_frame"};
    for (int i = 0; i < 2; i++) {
        if (!files[i] || !files[i][0]) continue;
        if (picture_sha(fields[i], files[i], out->sha256[out->n], err, errlen)) return -1;
        out->path[out->n] = files[i];
        out->anchor_last[out->n++] = i;
    }
    if (!out->n) return 0;
    if ((in->height > 0) != (in->width > 0) || in->height < 0 || in->width < 0 || in->height % 32 ||
        in->width % 32)
        return vdn_fail(err, errlen,
                        "keyframe canvas %d x %d (height x width): expected both multiples of 32, "
                        "or neither given (the release's canvas of the first keyframe)",
                        in->height, in->width);
    out->height = in->height;
    out->width = in->width;
    char dir[4400];
    if (vdn_vae_find(ckpt_root, "vae", dir, sizeof dir))
        return vdn_fail(err, errlen,
                        "checkpoint %s has no vae/ (nor base/vae/): keyframe pictures need the "
                        "video VAE's encoder",
                        ckpt_root);
    return vae_identity(dir, out->vae, err, errlen);
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
    if (pics->height > 0) {
        cJSON *c = cJSON_AddObjectToObject(o, "canvas_asked");
        cJSON_AddNumberToObject(c, "height", pics->height);
        cJSON_AddNumberToObject(c, "width", pics->width);
    }
}

int vdn_pictures_write_cache(const char *ckpt_root, vdn_text_encoder *enc, struct vdn_dev *dev,
                             const vdn_tokenizer *tok, const char *text, const vdn_pictures *pics,
                             const vdn_pictures_meta *meta, const char *path, char *err,
                             size_t errlen) {
    (void)ckpt_root, (void)enc, (void)dev, (void)tok, (void)text, (void)pics, (void)meta,
        (void)path;
    return vdn_fail(err, errlen,
                    "keyframe pictures: this build cannot encode them yet (the video VAE "
                    "encoder and the vision tower are being added)");
}
