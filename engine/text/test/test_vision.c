/* The text encoder with pictures in (the Qwen3-VL vision path), two modes:
 *
 *   test_vision dump CKPT IN.safetensors OUT.safetensors [BACKEND]
 *     IN holds pictures image_P (U8 [H, W, 3]) and, in its metadata, "cases": a JSON list of
 *     {"prompt": "...", "pictures": [P, ...]}. For each case k, OUT gets what
 *     vdn_text_encode_pictures makes (hidden_k F32 [L, hidden], ids_k and tags_k I32 [L]), and for
 *     each picture the processor's rows pixels_P (F32) and grid_P (I32 [3]). The float64 numpy
 *     reference (vision_numpy_ref.py) checks OUT; nothing here decides what is right. Beside it:
 *     the fp8 encoder on the case with the most pictures must stay within the bounds argued from
 *     e4m3 (fp8_check); OUT.text_only/ gets the checkpoint without model.visual.*, whose text
 *     rows must equal the full checkpoint's bit for bit and which must refuse a picture naming
 *     the missing tensor.
 *
 *   test_vision expected CKPT EXPECTED.safetensors [BACKEND [TOL]]
 *     EXPECTED comes from the public transformers model on the same tiny checkpoint
 *     (ops/reference/qwen3vl_vision_reference.py): per picture its processor output, per case the
 *     presentation's ids and tags and hidden_states[layer] with its pixel_values in (float32 and
 *     bf16 models), and smart_resize's sizes for a table of picture sizes. Each is compared:
 *     processor rows within 1e-6 (a resized picture: one of its backends'), ids and tags exactly,
 *     hidden states within TOL of max |h| (the float32 model's on the CPU; on CUDA the bf16
 *     model's, and the CPU backend's).
 *
 * Exit 77 when the backend cannot run here (no GPU). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../ops/test/check.h"
#include "backends.h"
#include "encoder.h"
#include "safetensors.h"
#include "tokenizer.h"
#include "vdn_util.h"
#include "vision_preprocess.h"

static char err[VDN_ERR_LEN];
static vdn_vision_proc ckpt_proc; /* CKPT/processor/preprocessor_config.json */

static double rel_err(const float *got, const float *want, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)got[i] - want[i]));
        m = fmax(m, fabs((double)want[i]));
    }
    return m > 0 ? d / m : d;
}

typedef struct {
    vdn_st_file *f;
    cJSON *cases;
} inputs;

static int open_inputs(const char *path, inputs *in) {
    in->f = vdn_st_open(path, err, sizeof err);
    if (!in->f) return fprintf(stderr, "%s\n", err), -1;
    const char *c = vdn_st_meta(in->f, "cases");
    in->cases = c ? cJSON_Parse(c) : NULL;
    if (!cJSON_IsArray(in->cases)) return fprintf(stderr, "%s: no cases in metadata\n", path), -1;
    return 0;
}

/* picture P of the file as a vdn_picture over the mapping */
static int picture(const vdn_st_file *f, int p, vdn_picture *pic) {
    char name[32];
    snprintf(name, sizeof name, "image_%d", p);
    const vdn_st_entry *e = vdn_st_find(f, name);
    CHECK(e && e->dtype == VDN_DT_U8 && e->ndim == 3 && e->shape[2] == 3, "%s", name);
    if (!e) return -1;
    *pic = (vdn_picture){e->data, (int)e->shape[1], (int)e->shape[0], (size_t)e->shape[1] * 3};
    return 0;
}

static int case_pictures(const cJSON *c, int *pics, int max) {
    const cJSON *ps = cJSON_GetObjectItem(c, "pictures");
    int n = cJSON_GetArraySize(ps);
    for (int i = 0; i < n && i < max; i++)
        pics[i] = cJSON_GetArrayItem(ps, i)->valueint;
    return n < max ? n : max;
}

/* ---- dump ---- */

static int dump(vdn_text_encoder *enc, const vdn_tokenizer *tok, const char *in_path,
                const char *out_path) {
    inputs in;
    if (open_inputs(in_path, &in)) return 1;
    const int64_t H = vdn_text_encoder_config(enc)->hidden;
    vdn_st_tensor ts[256];
    void *owned[256];
    char names[256][32];
    int nt = 0;
    for (int k = 0; k < cJSON_GetArraySize(in.cases) && nt + 3 <= 256; k++) {
        const cJSON *c = cJSON_GetArrayItem(in.cases, k);
        const char *prompt = cJSON_GetObjectItem(c, "prompt")->valuestring;
        int idx[8], np = case_pictures(c, idx, 8);
        vdn_picture pics[8];
        for (int i = 0; i < np; i++)
            if (picture(in.f, idx[i], &pics[i])) return 1;
        float *rows;
        uint8_t *tags;
        int n;
        int rc = vdn_text_encode_pictures(enc, tok, prompt, strlen(prompt), pics, np, &rows, &tags,
                                          &n, err, sizeof err);
        CHECK(rc == 0, "case %d: %s", k, err);
        if (rc) return 1;
        int32_t *ids, *t32 = vdn_xmalloc(sizeof(int32_t) * (size_t)n);
        uint8_t *tags2;
        int n2;
        int64_t grids[8][3];
        for (int i = 0; i < np; i++) {
            float *px;
            vdn_vision_proc proc = ckpt_proc;
            CHECK(vdn_vision_preprocess(&proc, pics[i].rgb, pics[i].width, pics[i].height,
                                        pics[i].stride, &px, grids[i], err, sizeof err) == 0,
                  "%s", err);
            free(px);
        }
        CHECK(vdn_text_presentation(enc, tok, prompt, strlen(prompt), (const int64_t(*)[3])grids,
                                    np, &ids, &tags2, &n2, err, sizeof err) == 0 &&
                  n2 == n,
              "presentation: %s", err);
        for (int i = 0; i < n; i++)
            t32[i] = tags[i];
        printf("case %d: %d pictures, %d rows\n", k, np, n);
        snprintf(names[nt], 32, "hidden_%d", k);
        ts[nt] = (vdn_st_tensor){names[nt], VDN_DT_F32, 2, {n, H}, rows};
        owned[nt++] = rows;
        snprintf(names[nt], 32, "ids_%d", k);
        ts[nt] = (vdn_st_tensor){names[nt], VDN_DT_I32, 1, {n}, ids};
        owned[nt++] = ids;
        snprintf(names[nt], 32, "tags_%d", k);
        ts[nt] = (vdn_st_tensor){names[nt], VDN_DT_I32, 1, {n}, t32};
        owned[nt++] = t32;
        free(tags), free(tags2);
    }
    /* every picture's processor rows */
    for (int p = 0; nt + 2 <= 256; p++) {
        char name[32];
        snprintf(name, sizeof name, "image_%d", p);
        if (!vdn_st_find(in.f, name)) break;
        vdn_picture pic;
        picture(in.f, p, &pic);
        vdn_vision_proc proc = ckpt_proc;
        float *px;
        int64_t g[3];
        int rc = vdn_vision_preprocess(&proc, pic.rgb, pic.width, pic.height, pic.stride, &px, g,
                                       err, sizeof err);
        CHECK(rc == 0, "%s: %s", name, err);
        if (rc) return 1;
        int32_t *g32 = vdn_xmalloc(3 * sizeof(int32_t));
        g32[0] = (int32_t)g[0], g32[1] = (int32_t)g[1], g32[2] = (int32_t)g[2];
        snprintf(names[nt], 32, "pixels_%d", p);
        ts[nt] = (vdn_st_tensor){names[nt], VDN_DT_F32, 2, {g[0] * g[1] * g[2], 1536}, px};
        owned[nt++] = px;
        snprintf(names[nt], 32, "grid_%d", p);
        ts[nt] = (vdn_st_tensor){names[nt], VDN_DT_I32, 1, {3}, g32};
        owned[nt++] = g32;
    }
    vdn_st_kv meta = {"layer", "default"};
    int rc = vdn_st_write(out_path, ts, nt, &meta, 1, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    for (int i = 0; i < nt; i++)
        free(owned[i]);
    cJSON_Delete(in.cases);
    vdn_st_close(in.f);
    return 0;
}

/* ---- fp8 precision with pictures ---- */

static double rel_l2(const float *got, const float *want, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)got[i] - want[i];
        d += e * e;
        m += (double)want[i] * want[i];
    }
    return m > 0 ? sqrt(d / m) : sqrt(d);
}

/* The fp8 encoder (its decoder Linears in e4m3; the vision tower stays float) on the case with
 * the most pictures, against the same checkpoint at bf16 (fp32 on the CPU): relative L2 within
 * test_encoder.c's bounds argued from e4m3's precision, [1e-2, 7.2e-2 sqrt(layers)] (the merged
 * and DeepStack features enter the stream like the embedding rows, unquantised). */
static void fp8_check(vdn_text_encoder *enc, vdn_dev *dev, const vdn_tokenizer *tok,
                      const char *ckpt, const inputs *in) {
    int best = -1, most = -1;
    for (int k = 0; k < cJSON_GetArraySize(in->cases); k++) {
        int idx[8], np = case_pictures(cJSON_GetArrayItem(in->cases, k), idx, 8);
        if (np > most) most = np, best = k;
    }
    if (best < 0 || most < 1) return;
    const cJSON *c = cJSON_GetArrayItem(in->cases, best);
    const char *prompt = cJSON_GetObjectItem(c, "prompt")->valuestring;
    int idx[8], np = case_pictures(c, idx, 8);
    vdn_picture pics[8];
    for (int i = 0; i < np; i++)
        if (picture(in->f, idx[i], &pics[i])) return;
    char dir[4352];
    snprintf(dir, sizeof dir, "%s/text_encoder", ckpt);
    vdn_text_encoder *e8 = vdn_text_encoder_open(dir, dev, 0, VDN_PRECISION_FP8, err, sizeof err);
    CHECK(e8 != NULL, "fp8 encoder: %s", err);
    if (!e8) return;
    float *a = NULL, *b = NULL;
    uint8_t *ta = NULL, *tb = NULL;
    int na = 0, nb = 0;
    int rc = vdn_text_encode_pictures(e8, tok, prompt, strlen(prompt), pics, np, &a, &ta, &na, err,
                                      sizeof err) ||
             vdn_text_encode_pictures(enc, tok, prompt, strlen(prompt), pics, np, &b, &tb, &nb, err,
                                      sizeof err);
    CHECK(rc == 0 && na == nb, "fp8 with pictures: %s", err);
    if (rc == 0 && na == nb) {
        const int layers = vdn_text_encoder_layer(e8);
        double e = rel_l2(a, b, (size_t)na * (size_t)vdn_text_encoder_config(e8)->hidden);
        printf("fp8 with %d pictures, %d rows: relative L2 %.2e from bf16 (bounds %.0e .. %.2e)\n",
               np, na, e, 1e-2, 7.2e-2 * sqrt((double)layers));
        CHECK(e >= 1e-2 && e <= 7.2e-2 * sqrt((double)layers), "fp8 with pictures: %.3e", e);
    }
    free(a), free(b), free(ta), free(tb);
    vdn_text_encoder_close(e8);
}

/* ---- refusals: checked in every mode ---- */

static void refusals(vdn_text_encoder *enc, const vdn_tokenizer *tok) {
    vdn_vision_proc proc = vdn_vision_proc_default();
    int h, w;
    CHECK(vdn_vision_smart_resize(&proc, 0, 10, &h, &w, err, sizeof err) != 0 &&
              vdn_vision_smart_resize(&proc, 10, 2010, &h, &w, err, sizeof err) != 0,
          "a zero size and an aspect ratio over 200 are refused");
    /* a size beyond the processor's aspect limit */
    uint8_t px[3 * 2 * 500] = {0};
    vdn_picture thin = {px, 500, 2, 1500};
    float *rows;
    uint8_t *tags;
    int n;
    int rc =
        vdn_text_encode_pictures(enc, tok, "x", 1, &thin, 1, &rows, &tags, &n, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "aspect ratio") && strstr(err, "(picture 1)"), "thin: %s", err);
    /* ids whose <|image_pad|> run does not match the grid */
    int32_t ids[8] = {100, 151652, 151655, 151655, 151655, 151653, 200, 300};
    int64_t grid[1][3] = {{1, 4, 4}};
    float pix[16 * 1536] = {0}, out[8 * 64];
    rc = vdn_text_encoder_run_pictures(enc, ids, 8, pix, (const int64_t(*)[3])grid, 1, out, err,
                                       sizeof err);
    CHECK(rc != 0 && strstr(err, "run is 3 <|image_pad|> tokens; its grid 1x4x4 makes 4"), "%s",
          err);
}

/* ---- a released-layout encoder without the vision tower ---- */

static int copy_file(const char *from, const char *to) {
    size_t len;
    char *data = vdn_read_file(from, &len, err, sizeof err);
    int rc = !data || vdn_write_file_atomic(to, data, len, err, sizeof err);
    free(data);
    return rc;
}

/* ckpt/text_encoder without model.visual.* (one shard, same config) as out/text_encoder, with
 * ckpt's processor/: its text rows equal the full checkpoint's bit for bit, and pictures are
 * refused naming the first missing tensor */
static void text_only(vdn_text_encoder *full, vdn_dev *dev, const vdn_tokenizer *tok,
                      const char *ckpt, const char *out) {
    char from[4352], to[8704];
    snprintf(to, sizeof to, "%s/text_encoder", out);
    CHECK(vdn_mkdir_p(to, err, sizeof err) == 0, "%s", err);
    snprintf(to, sizeof to, "%s/processor", out);
    CHECK(vdn_mkdir_p(to, err, sizeof err) == 0, "%s", err);
    snprintf(from, sizeof from, "%s/text_encoder/config.json", ckpt);
    snprintf(to, sizeof to, "%s/text_encoder/config.json", out);
    CHECK(copy_file(from, to) == 0, "%s", err);
    snprintf(from, sizeof from, "%s/processor/preprocessor_config.json", ckpt);
    snprintf(to, sizeof to, "%s/processor/preprocessor_config.json", out);
    CHECK(copy_file(from, to) == 0, "%s", err);
    snprintf(from, sizeof from, "%s/text_encoder/model.safetensors.index.json", ckpt);
    vdn_st_set *set = vdn_st_set_open(from, err, sizeof err);
    CHECK(set != NULL, "%s", err);
    if (!set) return;
    int n = vdn_st_set_count(set), kept = 0;
    vdn_st_tensor *ts = vdn_xcalloc((size_t)n, sizeof *ts);
    for (int i = 0; i < n; i++) {
        const vdn_st_entry *e = vdn_st_set_at(set, i, NULL);
        if (!strncmp(e->name, "model.visual.", 13)) continue;
        ts[kept] = (vdn_st_tensor){e->name, e->dtype, e->ndim, {0}, e->data};
        memcpy(ts[kept].shape, e->shape, sizeof e->shape);
        kept++;
    }
    snprintf(to, sizeof to, "%s/text_encoder/model.safetensors", out);
    CHECK(kept < n && vdn_st_write(to, ts, kept, NULL, 0, err, sizeof err) == 0, "%s", err);
    free(ts);
    vdn_st_set_close(set);
    snprintf(to, sizeof to, "%s/text_encoder", out);
    vdn_text_encoder *enc = vdn_text_encoder_open(to, dev, 0, VDN_PRECISION_BF16, err, sizeof err);
    CHECK(enc != NULL, "text-only encoder: %s", err);
    if (!enc) return;
    const char *prompt = "A drone shot over mountains at sunset";
    int32_t *ids = NULL;
    size_t n_ids = 0;
    CHECK(vdn_tokenize(tok, prompt, strlen(prompt), &ids, &n_ids, err, sizeof err) == 0, "%s", err);
    const int64_t H = vdn_text_encoder_config(enc)->hidden;
    float *a = vdn_xmalloc(sizeof(float) * n_ids * (size_t)H);
    float *b = vdn_xmalloc(sizeof(float) * n_ids * (size_t)H);
    CHECK(vdn_text_encoder_run(enc, ids, (int)n_ids, a, err, sizeof err) == 0 &&
              vdn_text_encoder_run(full, ids, (int)n_ids, b, err, sizeof err) == 0 &&
              !memcmp(a, b, sizeof(float) * n_ids * (size_t)H),
          "text-only encoder: the text rows differ from the full checkpoint's: %s", err);
    static uint8_t px[3 * 256 * 256];
    vdn_picture pic = {px, 256, 256, 768};
    float *rows;
    uint8_t *tags;
    int nr;
    int rc = vdn_text_encode_pictures(enc, tok, prompt, strlen(prompt), &pic, 1, &rows, &tags, &nr,
                                      err, sizeof err);
    CHECK(rc != 0 && strstr(err, "cannot read pictures") &&
              strstr(err, "model.visual.patch_embed.proj.weight is missing"),
          "text-only encoder with a picture: %s", rc ? err : "accepted");
    printf("text-only checkpoint: text rows equal, pictures refused: %s\n", err);
    free(a), free(b), free(ids);
    vdn_text_encoder_close(enc);
}

/* ---- expected (transformers) ---- */

static const vdn_st_entry *need(const vdn_st_file *f, const char *fmt, int k, vdn_dtype dt) {
    char name[64];
    snprintf(name, sizeof name, fmt, k);
    const vdn_st_entry *e = vdn_st_find(f, name);
    CHECK(e && e->dtype == dt, "%s: missing or not %s", name, vdn_dtype_name(dt));
    return e && e->dtype == dt ? e : NULL;
}

static int64_t i64_at(const vdn_st_entry *e, int64_t i) {
    int64_t v;
    memcpy(&v, (const char *)e->data + 8 * i, 8);
    return v;
}

static void check_processor(const vdn_st_file *f, int p) {
    vdn_picture pic;
    if (picture(f, p, &pic)) return;
    const vdn_st_entry *want = need(f, "pixel_values_%d", p, VDN_DT_F32);
    const vdn_st_entry *grid = need(f, "grid_%d", p, VDN_DT_I64);
    if (!want || !grid) return;
    vdn_vision_proc proc = ckpt_proc;
    float *px;
    int64_t g[3];
    int rc = vdn_vision_preprocess(&proc, pic.rgb, pic.width, pic.height, pic.stride, &px, g, err,
                                   sizeof err);
    CHECK(rc == 0, "picture %d: %s", p, err);
    if (rc) return;
    CHECK(g[0] == i64_at(grid, 0) && g[1] == i64_at(grid, 1) && g[2] == i64_at(grid, 2),
          "picture %d: grid %lld %lld %lld", p, (long long)g[0], (long long)g[1], (long long)g[2]);
    double d = 0;
    for (int64_t i = 0; i < want->numel; i++)
        d = fmax(d, fabs((double)px[i] - ((const float *)want->data)[i]));
    printf("picture %d (%dx%d): processor rows, max difference %.2e\n", p, pic.width, pic.height,
           d);
    CHECK(d <= 1e-6, "picture %d: processor rows differ by %.3e", p, d);
    free(px);
}

/* a picture the processor resizes: one of transformers' backends (the default and, where it has
 * another, that one: torchvision and PIL) gives our rows exactly, Pillow's BICUBIC being the PIL
 * backend's; the other is only reported */
static void check_resized(const vdn_st_file *f) {
    const vdn_st_entry *img = vdn_st_find(f, "resized_image_0");
    const vdn_st_entry *want[2] = {vdn_st_find(f, "resized_pixel_values_0"),
                                   vdn_st_find(f, "resized_alt_pixel_values_0")};
    if (!img || img->dtype != VDN_DT_U8 || img->ndim != 3 || !want[0]) return;
    vdn_vision_proc proc = ckpt_proc;
    float *px;
    int64_t g[3];
    int rc = vdn_vision_preprocess(&proc, img->data, (int)img->shape[1], (int)img->shape[0],
                                   (size_t)img->shape[1] * 3, &px, g, err, sizeof err);
    CHECK(rc == 0 && g[0] * g[1] * g[2] * 1536 == want[0]->numel, "resized picture: %s", err);
    if (rc || g[0] * g[1] * g[2] * 1536 != want[0]->numel) return;
    const char *names = vdn_st_meta(f, "image_processor");
    double best = INFINITY;
    for (int k = 0; k < 2; k++) {
        if (!want[k] || want[k]->numel != want[0]->numel) continue;
        double d = 0;
        for (int64_t i = 0; i < want[k]->numel; i++)
            d = fmax(d, fabs((double)px[i] - ((const float *)want[k]->data)[i]));
        printf("resized picture %lldx%lld: against the %s backend (%s), max difference %.2e\n",
               (long long)img->shape[1], (long long)img->shape[0], k ? "other" : "default",
               names ? names : "?", d);
        best = fmin(best, d);
    }
    CHECK(best <= 1e-6, "resized picture: no backend's rows within 1e-6 (closest %.3e)", best);
    free(px);
}

/* smart_resize's sizes under the checkpoint's processor settings, which the reference read */
static void check_resize_table(const vdn_st_file *f) {
    const vdn_st_entry *in = vdn_st_find(f, "resize_in"), *out = vdn_st_find(f, "resize_out");
    CHECK(in && out && in->numel == out->numel, "resize_in / resize_out");
    if (!in || !out) return;
    vdn_vision_proc proc = ckpt_proc;
    for (int64_t i = 0; i < in->numel / 2; i++) {
        int h, w;
        int rc = vdn_vision_smart_resize(&proc, (int)i64_at(in, 2 * i), (int)i64_at(in, 2 * i + 1),
                                         &h, &w, err, sizeof err);
        int64_t wh = i64_at(out, 2 * i), ww = i64_at(out, 2 * i + 1);
        if (wh < 0)
            CHECK(rc != 0, "smart_resize %lldx%lld: transformers refuses it",
                  (long long)i64_at(in, 2 * i), (long long)i64_at(in, 2 * i + 1));
        else
            CHECK(rc == 0 && h == wh && w == ww,
                  "smart_resize %lldx%lld: %dx%d, expected %lldx%lld", (long long)i64_at(in, 2 * i),
                  (long long)i64_at(in, 2 * i + 1), h, w, (long long)wh, (long long)ww);
    }
}

static void check_case(vdn_text_encoder *enc, vdn_text_encoder *cpu, const vdn_tokenizer *tok,
                       const vdn_st_file *f, const cJSON *c, int k, double tol, int bf16) {
    const char *prompt = cJSON_GetObjectItem(c, "prompt")->valuestring;
    int idx[8], np = case_pictures(c, idx, 8);
    const vdn_st_entry *ids_e = need(f, "ids_%d", k, VDN_DT_I64);
    const vdn_st_entry *tags_e = need(f, "tags_%d", k, VDN_DT_I64);
    const vdn_st_entry *want = need(f, bf16 ? "hidden_bf16_%d" : "hidden_%d", k, VDN_DT_F32);
    if (!ids_e || !tags_e || !want) return;
    int64_t grids[8][3];
    size_t total = 0;
    for (int i = 0; i < np; i++) {
        const vdn_st_entry *g = need(f, "grid_%d", idx[i], VDN_DT_I64);
        if (!g) return;
        for (int a = 0; a < 3; a++)
            grids[i][a] = i64_at(g, a);
        total += (size_t)(grids[i][0] * grids[i][1] * grids[i][2]);
    }
    /* the presentation */
    int32_t *ids;
    uint8_t *tags;
    int n;
    int rc = vdn_text_presentation(enc, tok, prompt, strlen(prompt), (const int64_t(*)[3])grids, np,
                                   &ids, &tags, &n, err, sizeof err);
    CHECK(rc == 0 && n == ids_e->numel, "case %d: presentation of %d rows, expected %lld: %s", k, n,
          (long long)ids_e->numel, rc ? err : "");
    int same = rc == 0 && n == ids_e->numel;
    for (int i = 0; same && i < n; i++)
        same = ids[i] == i64_at(ids_e, i) && tags[i] == i64_at(tags_e, i);
    CHECK(same, "case %d: the presentation's ids or tags differ from the release's", k);
    if (rc == 0) free(ids), free(tags);
    /* hidden states from the reference's own ids and pixel_values */
    n = (int)ids_e->numel;
    int32_t *rid = vdn_xmalloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++)
        rid[i] = (int32_t)i64_at(ids_e, i);
    float *px = vdn_xmalloc(sizeof(float) * total * 1536);
    for (int i = 0, r = 0; i < np; i++) {
        const vdn_st_entry *pv = need(f, "pixel_values_%d", idx[i], VDN_DT_F32);
        if (pv) memcpy(px + (size_t)r * 1536, pv->data, sizeof(float) * (size_t)pv->numel);
        r += (int)(grids[i][0] * grids[i][1] * grids[i][2]);
    }
    const int64_t H = vdn_text_encoder_config(enc)->hidden;
    float *got = vdn_xmalloc(sizeof(float) * (size_t)(n * H));
    rc = vdn_text_encoder_run_pictures(enc, rid, n, px, (const int64_t(*)[3])grids, np, got, err,
                                       sizeof err);
    CHECK(rc == 0, "case %d: %s", k, err);
    if (rc == 0) {
        double e = rel_err(got, want->data, (size_t)(n * H));
        printf("case %d: %d pictures, %d rows: hidden max error %.2e of max |h| (%s model)\n", k,
               np, n, e, bf16 ? "bf16" : "fp32");
        CHECK(e <= tol, "case %d: error %.3e > %.1e", k, e, tol);
        float *ref = vdn_xmalloc(sizeof(float) * (size_t)(n * H));
        if (cpu && vdn_text_encoder_run_pictures(cpu, rid, n, px, (const int64_t(*)[3])grids, np,
                                                 ref, err, sizeof err) == 0) {
            double ec = rel_err(got, ref, (size_t)(n * H));
            printf("case %d: against the CPU backend %.2e\n", k, ec);
            CHECK(ec <= tol, "case %d: against CPU: %.3e > %.1e", k, ec, tol);
        }
        free(ref);
    }
    free(got), free(px), free(rid);
}

/* the checkpoint `vdn ckpt init` rebuilt here is the one the reference read */
static void check_ckpt(const vdn_st_file *f, const char *ckpt) {
    const char *m = vdn_st_meta(f, "ckpt_sha256");
    cJSON *sha = m ? cJSON_Parse(m) : NULL;
    CHECK(cJSON_IsObject(sha) && cJSON_GetArraySize(sha) > 0, "metadata ckpt_sha256");
    for (const cJSON *e = sha ? sha->child : NULL; e; e = e->next) {
        char path[4352], hex[65];
        snprintf(path, sizeof path, "%s/text_encoder/%s", ckpt, e->string);
        size_t len;
        char *data = vdn_read_file(path, &len, err, sizeof err);
        CHECK(data != NULL, "%s", err);
        if (!data) continue;
        vdn_sha256_hex(data, len, hex);
        CHECK(cJSON_IsString(e) && !strcmp(hex, e->valuestring),
              "%s: SHA-256 %s, the reference read %s (vdn ckpt init changed: remake the "
              "expected file)",
              path, hex, cJSON_IsString(e) ? e->valuestring : "?");
        free(data);
    }
    cJSON_Delete(sha);
}

static int expected(vdn_text_encoder *enc, vdn_text_encoder *cpu, const vdn_tokenizer *tok,
                    const char *ckpt, const char *path, double tol) {
    inputs in;
    if (open_inputs(path, &in)) return 1;
    check_ckpt(in.f, ckpt);
    for (int p = 0;; p++) {
        char name[32];
        snprintf(name, sizeof name, "image_%d", p);
        if (!vdn_st_find(in.f, name)) break;
        check_processor(in.f, p);
    }
    check_resize_table(in.f);
    check_resized(in.f);
    for (int k = 0; k < cJSON_GetArraySize(in.cases); k++)
        check_case(enc, cpu, tok, in.f, cJSON_GetArrayItem(in.cases, k), k, tol, cpu != NULL);
    cJSON_Delete(in.cases);
    vdn_st_close(in.f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: test_vision dump CKPT IN OUT [BACKEND] | expected CKPT FILE "
                        "[BACKEND [TOL]]\n");
        return 2;
    }
    const int is_dump = !strcmp(argv[1], "dump");
    const char *backend = argc > (is_dump ? 5 : 4) ? argv[is_dump ? 5 : 4] : "cpu";
    double tol = !is_dump && argc > 5 ? atof(argv[5]) : 1e-4;
    vdn_backends_register();
    vdn_dev *dev = vdn_dev_open(backend, 0, 0, err, sizeof err);
    if (!dev) {
        if (strcmp(backend, "cpu")) {
            printf("SKIP: no %s device here: %s\n", backend, err);
            return 77;
        }
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/text_encoder", argv[2]);
    vdn_text_encoder *enc = vdn_text_encoder_open(dir, dev, 0, VDN_PRECISION_BF16, err, sizeof err);
    CHECK(enc != NULL, "%s", err);
    snprintf(dir, sizeof dir, "%s/processor/preprocessor_config.json", argv[2]);
    if (vdn_vision_proc_load(dir, &ckpt_proc, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    snprintf(dir, sizeof dir, "%s/tokenizer", argv[2]);
    vdn_tokenizer *tok = vdn_tokenizer_load(dir, err, sizeof err);
    CHECK(tok != NULL, "%s", err);
    if (!enc || !tok) return 1;
    vdn_dev *cdev = NULL;
    vdn_text_encoder *cpu = NULL;
    if (!vdn_dev_is_cpu(dev)) {
        cdev = vdn_dev_open("cpu", 0, 0, err, sizeof err);
        snprintf(dir, sizeof dir, "%s/text_encoder", argv[2]);
        cpu =
            cdev ? vdn_text_encoder_open(dir, cdev, 0, VDN_PRECISION_BF16, err, sizeof err) : NULL;
    }
    refusals(enc, tok);
    if (is_dump) { /* beside the dump: the same checkpoint without its vision tower */
        char out[4096];
        snprintf(out, sizeof out, "%.4000s.text_only", argv[4]);
        text_only(enc, dev, tok, argv[2], out);
        inputs in = {0};
        if (open_inputs(argv[3], &in) == 0) fp8_check(enc, dev, tok, argv[2], &in);
        cJSON_Delete(in.cases);
        vdn_st_close(in.f);
    }
    int rc =
        is_dump ? dump(enc, tok, argv[3], argv[4]) : expected(enc, cpu, tok, argv[2], argv[3], tol);
    vdn_text_encoder_close(cpu);
    vdn_dev_close(cdev);
    vdn_text_encoder_close(enc);
    vdn_tokenizer_free(tok);
    vdn_dev_close(dev);
    return rc ? rc : check_report("test_vision");
}
