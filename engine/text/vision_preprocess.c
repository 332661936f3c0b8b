/* Qwen3-VL's image processor (see vision_preprocess.h). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resample.h"
#include "vdn_util.h"
#include "vision_preprocess.h"

vdn_vision_proc vdn_vision_proc_default(void) {
    return (vdn_vision_proc){.min_pixels = 65536,
                             .max_pixels = 16777216,
                             .patch = 16,
                             .temporal_patch = 2,
                             .merge = 2,
                             .mean = {0.5f, 0.5f, 0.5f},
                             .std = {0.5f, 0.5f, 0.5f},
                             .rescale = 1.0 / 255.0};
}

static int num_field(const cJSON *o, const char *key, double lo, double hi, int whole, double *out,
                     const char *file, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        (whole && v->valuedouble != floor(v->valuedouble)))
        return vdn_fail(err, errlen, "%s: %s: expected a %s in [%g, %g]", file, key,
                        whole ? "whole number" : "number", lo, hi);
    *out = v->valuedouble;
    return 0;
}

static int triple(const cJSON *o, const char *key, float out[3], int positive, const char *file,
                  char *err, size_t errlen) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    int ok = cJSON_IsArray(a) && cJSON_GetArraySize(a) == 3;
    for (int i = 0; ok && i < 3; i++) {
        const cJSON *x = cJSON_GetArrayItem(a, i);
        ok = cJSON_IsNumber(x) && isfinite(x->valuedouble) && (!positive || x->valuedouble > 0);
        if (ok) out[i] = (float)x->valuedouble;
    }
    return ok ? 0
              : vdn_fail(err, errlen, "%s: %s: expected 3 %snumbers", file, key,
                         positive ? "positive " : "");
}

/* min/max pixels: size.shortest_edge / longest_edge, overridden by top-level min_pixels /
 * max_pixels as transformers does */
static int pixel_bounds(const cJSON *root, vdn_vision_proc *p, const char *file, char *err,
                        size_t errlen) {
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(root, "size");
    double lo = -1, hi = -1;
    if (cJSON_IsObject(size) &&
        (num_field(size, "shortest_edge", 1, 1 << 26, 1, &lo, file, err, errlen) ||
         num_field(size, "longest_edge", 1, 1 << 26, 1, &hi, file, err, errlen)))
        return -1;
    if (cJSON_GetObjectItemCaseSensitive(root, "min_pixels") &&
        num_field(root, "min_pixels", 1, 1 << 26, 1, &lo, file, err, errlen))
        return -1;
    if (cJSON_GetObjectItemCaseSensitive(root, "max_pixels") &&
        num_field(root, "max_pixels", 1, 1 << 26, 1, &hi, file, err, errlen))
        return -1;
    if (lo < 0 || hi < lo)
        return vdn_fail(err, errlen,
                        "%s: size: expected shortest_edge <= longest_edge (the pixel bounds)",
                        file);
    p->min_pixels = (int64_t)lo, p->max_pixels = (int64_t)hi;
    return 0;
}

int vdn_vision_proc_load(const char *path, vdn_vision_proc *p, char *err, size_t errlen) {
    size_t len;
    char *json = vdn_read_file(path, &len, err, errlen);
    if (!json) return -1;
    int rc = vdn_vision_proc_parse(json, len, path, p, err, errlen);
    free(json);
    return rc;
}

int vdn_vision_proc_parse(const char *json, size_t len, const char *path, vdn_vision_proc *p,
                          char *err, size_t errlen) {
    cJSON *root = cJSON_ParseWithLength(json, len);
    *p = vdn_vision_proc_default();
    double patch, tp, merge;
    int rc = !cJSON_IsObject(root) ? vdn_fail(err, errlen, "%s: expected a JSON object", path)
             : pixel_bounds(root, p, path, err, errlen) ||
                     num_field(root, "patch_size", 1, 64, 1, &patch, path, err, errlen) ||
                     num_field(root, "temporal_patch_size", 1, 16, 1, &tp, path, err, errlen) ||
                     num_field(root, "merge_size", 1, 8, 1, &merge, path, err, errlen) ||
                     triple(root, "image_mean", p->mean, 0, path, err, errlen) ||
                     triple(root, "image_std", p->std, 1, path, err, errlen)
                 ? -1
                 : 0;
    if (!rc && cJSON_GetObjectItemCaseSensitive(root, "rescale_factor"))
        rc = num_field(root, "rescale_factor", 1e-9, 1, 0, &p->rescale, path, err, errlen);
    const char *flags[] = {"do_resize", "do_rescale", "do_normalize"};
    for (int i = 0; !rc && i < 3; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, flags[i]);
        if (f && !cJSON_IsTrue(f))
            rc = vdn_fail(err, errlen, "%s: %s: only true is supported (the release's)", path,
                          flags[i]);
    }
    if (!rc) p->patch = (int)patch, p->temporal_patch = (int)tp, p->merge = (int)merge;
    cJSON_Delete(root);
    return rc ? -1 : 0;
}

int vdn_vision_smart_resize(const vdn_vision_proc *p, int height, int width, int *out_h, int *out_w,
                            char *err, size_t errlen) {
    const double f = (double)p->patch * p->merge, h = height, w = width;
    if (height < 1 || width < 1 || fmax(h, w) / fmin(h, w) > 200)
        return vdn_fail(err, errlen,
                        "picture %dx%d: expected a size with an aspect ratio of at most 200", width,
                        height);
    /* Python's round(): halves to even, as rint in the default rounding mode */
    double hb = rint(h / f) * f, wb = rint(w / f) * f;
    if (hb * wb > (double)p->max_pixels) {
        double beta = sqrt(h * w / (double)p->max_pixels);
        hb = fmax(f, floor(h / beta / f) * f), wb = fmax(f, floor(w / beta / f) * f);
    } else if (hb * wb < (double)p->min_pixels) {
        double beta = sqrt((double)p->min_pixels / (h * w));
        hb = ceil(h * beta / f) * f, wb = ceil(w * beta / f) * f;
    }
    *out_h = (int)hb, *out_w = (int)wb;
    return 0;
}

int vdn_vision_preprocess(const vdn_vision_proc *p, const uint8_t *rgb, int width, int height,
                          size_t stride, float **rows, int64_t grid[3], char *err, size_t errlen) {
    int rh, rw;
    *rows = NULL;
    if (vdn_vision_smart_resize(p, height, width, &rh, &rw, err, errlen)) return -1;
    /* the PIL backend's resize: Pillow's BICUBIC, which resample.h computes byte for byte */
    uint8_t *resized = NULL;
    if (rh != height || rw != width) {
        resized = vdn_xmalloc((size_t)rh * (size_t)rw * 3);
        if (vdn_resample_u8(rgb, width, height, stride, 3, rw, rh, VDN_RESAMPLE_BICUBIC, NULL,
                            resized, err, errlen)) {
            free(resized);
            return -1;
        }
        rgb = resized, width = rw, height = rh, stride = (size_t)rw * 3;
    }
    const int P = p->patch, T = p->temporal_patch, M = p->merge;
    const int64_t gh = height / P, gw = width / P, cols = 3 * (int64_t)T * P * P;
    grid[0] = 1, grid[1] = gh, grid[2] = gw;
    /* (x * rescale - mean) / std, with the processor's fused constants: x - mean / rescale over
     * std / rescale, in float32 */
    float mu[3], sd[3];
    for (int c = 0; c < 3; c++)
        mu[c] = (float)(p->mean[c] / p->rescale), sd[c] = (float)(p->std[c] / p->rescale);
    float *out = vdn_xmalloc(sizeof(float) * (size_t)(gh * gw * cols));
    int64_t r = 0;
    for (int64_t bh = 0; bh < gh / M; bh++)
        for (int64_t bw = 0; bw < gw / M; bw++)
            for (int mh = 0; mh < M; mh++)
                for (int mw = 0; mw < M; mw++, r++) {
                    const int64_t y0 = (bh * M + mh) * P, x0 = (bw * M + mw) * P;
                    float *o = out + r * cols;
                    for (int c = 0; c < 3; c++)
                        for (int t = 0; t < T; t++)
                            for (int y = 0; y < P; y++)
                                for (int x = 0; x < P; x++) {
                                    uint8_t v =
                                        rgb[(size_t)(y0 + y) * stride + (size_t)(x0 + x) * 3 + c];
                                    *o++ = ((float)v - mu[c]) / sd[c];
                                }
                }
    free(resized);
    *rows = out;
    return 0;
}
