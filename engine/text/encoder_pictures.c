/* Pictures into the text encoder (see encoder.h, "pictures"): the vision tower and processor
 * read on the first picture, Qwen3-VL's multimodal positions, the merged and DeepStack features
 * into the picture rows, and the release's presentation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encoder_internal.h"
#include "vdn_util.h"

/* The vision config, the processor's settings (processor/ beside text_encoder/) and the tower's
 * weights, on the first picture; a text-only checkpoint is refused here, not at open. */
static int vision_config(vdn_text_encoder *e, char *err, size_t errlen) {
    if (e->vision_loaded) return 0;
    if (!e->dir[0])
        return vdn_fail(err, errlen, "text encoder (random weights): no vision tower for pictures");
    int rc = vdn_vision_config_load(e->dir, &e->cfg, &e->vcfg, err, errlen);
    if (rc == 1)
        return vdn_fail(err, errlen,
                        "text encoder %s: config.json has no vision_config, so it cannot read "
                        "pictures",
                        e->dir);
    if (rc) return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/../processor/preprocessor_config.json", e->dir);
    if (vdn_vision_proc_load(path, &e->proc, err, errlen)) return -1;
    if (e->proc.patch != e->vcfg.patch || e->proc.merge != e->vcfg.merge ||
        e->proc.temporal_patch != e->vcfg.temporal_patch)
        return vdn_fail(err, errlen,
                        "%s: patch_size %d, merge_size %d, temporal_patch_size %d: expected the "
                        "vision_config's %d, %d, %d",
                        path, e->proc.patch, e->proc.merge, e->proc.temporal_patch, e->vcfg.patch,
                        e->vcfg.merge, e->vcfg.temporal_patch);
    e->vision_loaded = 1;
    return 0;
}

static int vision_tower(vdn_text_encoder *e, char *err, size_t errlen) {
    if (vision_config(e, err, errlen)) return -1;
    if (e->vision) return 0;
    char why[VDN_ERR_LEN];
    e->vision = vdn_vision_open(e->st, &e->vcfg, e->dev, why, sizeof why);
    if (!e->vision)
        return vdn_fail(err, errlen, "text encoder %s cannot read pictures: %s", e->dir, why);
    return 0;
}

int vdn_text_encoder_random_vision(vdn_text_encoder *e, const vdn_vision_config *vc, uint64_t seed,
                                   char *err, size_t errlen) {
    if (e->vision) return vdn_fail(err, errlen, "text encoder: it has a vision tower already");
    if (vc->out_hidden != e->cfg.hidden ||
        vc->mrope[0] + vc->mrope[1] + vc->mrope[2] != e->cfg.head_dim / 2)
        return vdn_fail(err, errlen,
                        "text encoder (random): the vision config's out_hidden_size %lld or rope "
                        "sections do not fit hidden %lld, head_dim %lld",
                        (long long)vc->out_hidden, (long long)e->cfg.hidden,
                        (long long)e->cfg.head_dim);
    e->vision = vdn_vision_random(vc, e->dev, seed, err, errlen);
    if (!e->vision) return -1;
    e->vcfg = *vc, e->proc = vdn_vision_proc_default(), e->vision_loaded = 1;
    return 0;
}

/* Qwen3-VL's multimodal positions (get_rope_index): text tokens count on all three axes; picture
 * p's run of grid t x h/2 x w/2 <|image_pad|> tokens sits at (t, row, column) after the text
 * before it, and the text after it resumes at one past the run's largest position. pos[n, 3];
 * start[p]: the row of picture p's first token. */
static int mrope_positions(const vdn_text_encoder *e, const int32_t *ids, int n,
                           const int64_t (*grids)[3], int n_pics, double *pos, int *start,
                           char *err, size_t errlen) {
    const vdn_vision_config *v = &e->vcfg;
    int st = 0;
    double next = 0;
    for (int p = 0; p <= n_pics; p++) {
        int ed = st;
        while (ed < n && (p == n_pics || ids[ed] != v->image_token))
            ed++;
        if (p < n_pics && ed == n)
            return vdn_fail(err, errlen, "text encoder: %d pictures, %d runs of <|image_pad|>",
                            n_pics, p);
        for (int i = st; i < ed; i++)
            for (int a = 0; a < 3; a++)
                pos[3 * i + a] = next + (i - st);
        next += ed - st;
        if (p == n_pics) {
            for (int i = st; i < n; i++)
                if (ids[i] == v->image_token)
                    return vdn_fail(err, errlen,
                                    "text encoder: <|image_pad|> at token %d, after the %d "
                                    "pictures' runs",
                                    i, n_pics);
            break;
        }
        if (ed > 0 && ids[ed - 1] == v->image_token)
            return vdn_fail(err, errlen,
                            "text encoder: picture %d's <|image_pad|> run follows "
                            "picture %d's without a token between",
                            p, p - 1);
        const int64_t gt = grids[p][0], gh = grids[p][1] / v->merge, gw = grids[p][2] / v->merge;
        const int64_t count = gt * gh * gw;
        int64_t run = 0;
        while (ed + run < n && ids[ed + run] == v->image_token)
            run++;
        if (run != count)
            return vdn_fail(err, errlen,
                            "text encoder: picture %d's run is %lld <|image_pad|> tokens; its grid "
                            "%lldx%lldx%lld makes %lld",
                            p, (long long)run, (long long)grids[p][0], (long long)grids[p][1],
                            (long long)grids[p][2], (long long)count);
        start[p] = ed;
        for (int64_t i = 0; i < count; i++) {
            double *q = pos + 3 * (ed + i);
            q[0] = next + (double)(i / (gh * gw));
            q[1] = next + (double)(i / gw % gh);
            q[2] = next + (double)(i % gw);
        }
        next += (double)(fmax((double)gt, fmax((double)gh, (double)gw)));
        st = ed + (int)count;
    }
    return 0;
}

/* hidden rows of picture p's run += (or =) the vision rows [f0, f0 + count) of src */
static int vision_rows(vdn_text_encoder *e, enc_acts *a, const vdn_tensor *src, const int *start,
                       const int64_t (*grids)[3], int n_pics, int add) {
    const int64_t mm = (int64_t)e->vcfg.merge * e->vcfg.merge;
    for (int p = 0, f0 = 0; p < n_pics; p++) {
        const int64_t count = grids[p][0] * grids[p][1] * grids[p][2] / mm;
        vdn_tensor dst = vdn_view_rows(a->h, start[p], count);
        vdn_tensor s = vdn_view_rows(src, f0, count);
        if (add ? vdn_op_add(&dst, &s) : vdn_tensor_copy(&dst, &s)) return -1;
        f0 += (int)count;
    }
    return 0;
}

int vdn_text_encoder_run_pictures(vdn_text_encoder *e, const int32_t *ids, int n,
                                  const float *pixel_rows, const int64_t (*grids)[3], int n_pics,
                                  float *out, char *err, size_t errlen) {
    if (n_pics < 1) return vdn_text_encoder_run(e, ids, n, out, err, errlen);
    if (vdn_enc_check_ids(e, ids, n, err, errlen) || vision_tower(e, err, errlen)) return -1;
    double *pos = vdn_xmalloc(sizeof(double) * 3 * (size_t)n);
    int *start = vdn_xmalloc(sizeof(int) * (size_t)n_pics);
    vdn_tensor *feat = NULL, *ds[VDN_VISION_MAX_DEEPSTACK] = {0};
    const int nds = e->vcfg.n_deepstack;
    int rc =
        mrope_positions(e, ids, n, grids, n_pics, pos, start, err, errlen) ||
        vdn_vision_run(e->vision, pixel_rows, grids, n_pics, e->run.cancel, &feat, ds, err, errlen);
    if (rc) goto done;
    rc = vdn_enc_acts_for(e, n);
    enc_acts *a = e->acts;
    const int hd = (int)e->cfg.head_dim;
    vdn_rope rope = {.pos = a->pos,
                     .inv = e->inv_freq,
                     .n_rot = hd,
                     .sections = {e->vcfg.mrope[0], e->vcfg.mrope[1], e->vcfg.mrope[2]},
                     .interleaved = 1};
    a->picture_pos = 1;
    rc = rc || vdn_tensor_set(a->pos, pos, VDN_DT_F64) || vdn_enc_embed(e, ids, n, a->h) ||
         vision_rows(e, a, feat, start, grids, n_pics, 0);
    /* DeepStack: after decoder layer l < n_deepstack, the l-th feature joins the picture rows
     * (in place, so hidden_states[l + 1] holds it, as transformers records it) */
    int cancelled = 0;
    for (int l = 0; !rc && l < e->layer; l++) {
        if ((cancelled = vdn_enc_layer_gate(e, l, err, errlen) != 0)) break;
        rc = vdn_enc_run_layer(e, &e->layers[l], a, &rope) ||
             (l < nds && vision_rows(e, a, ds[l], start, grids, n_pics, 1));
    }
    if (!rc && !cancelled) rc = vdn_tensor_get(a->h, out);
    if (rc) vdn_enc_run_failed(e, err, errlen);
    rc = rc || cancelled;
done:
    vdn_tensor_free(feat);
    for (int j = 0; j < nds; j++)
        vdn_tensor_free(ds[j]);
    free(pos);
    free(start);
    return rc ? -1 : 0;
}

int vdn_text_presentation(vdn_text_encoder *e, const vdn_tokenizer *tok, const char *prompt,
                          size_t len, const int64_t (*grids)[3], int n_pics, int32_t **ids,
                          uint8_t **tags, int *n, char *err, size_t errlen) {
    *ids = NULL, *tags = NULL, *n = 0;
    if (n_pics > 0 && vision_config(e, err, errlen)) return -1;
    const int64_t mm = (int64_t)e->vcfg.merge * e->vcfg.merge;
    /* part 2p: picture p's label; 2p + 1: its vision block; 2 n_pics: the prompt */
    const int parts = 2 * n_pics + 1;
    int32_t **part = vdn_xcalloc((size_t)parts, sizeof *part);
    size_t *len_of = vdn_xcalloc((size_t)parts, sizeof *len_of), total = 0;
    int rc = 0;
    for (int p = 0; !rc && p < n_pics; p++) {
        char label[32];
        int ll = snprintf(label, sizeof label, "<Picture %d>: ", p + 1);
        rc = vdn_tokenize(tok, label, (size_t)ll, &part[2 * p], &len_of[2 * p], err, errlen);
        const int64_t count = grids[p][0] * grids[p][1] * grids[p][2] / mm;
        int32_t *b = part[2 * p + 1] = vdn_xmalloc(sizeof(int32_t) * (size_t)(count + 2));
        b[0] = e->vcfg.vision_start_token, b[count + 1] = e->vcfg.vision_end_token;
        for (int64_t k = 1; k <= count; k++)
            b[k] = e->vcfg.image_token;
        len_of[2 * p + 1] = (size_t)count + 2;
    }
    if (!rc) rc = vdn_tokenize(tok, prompt, len, &part[parts - 1], &len_of[parts - 1], err, errlen);
    for (int k = 0; !rc && k < parts; k++)
        total += len_of[k];
    if (!rc && total > 0) {
        *ids = vdn_xmalloc(sizeof(int32_t) * total);
        *tags = vdn_xmalloc(total);
        for (int k = 0, at = 0; k < parts; k++) {
            if (len_of[k]) memcpy(*ids + at, part[k], sizeof(int32_t) * len_of[k]);
            memset(*tags + at, k % 2 ? VDN_TEXT_TAG_VISION : VDN_TEXT_TAG_TEXT, len_of[k]);
            at += (int)len_of[k];
        }
        *n = (int)total;
    }
    for (int k = 0; k < parts; k++)
        free(part[k]);
    free(part), free(len_of);
    return rc ? -1 : 0;
}

int vdn_text_encode_pictures(vdn_text_encoder *e, const vdn_tokenizer *tok, const char *prompt,
                             size_t len, const vdn_picture *pics, int n_pics, float **rows,
                             uint8_t **tags, int *n, char *err, size_t errlen) {
    *rows = NULL, *tags = NULL, *n = 0;
    if (n_pics > 0 && vision_config(e, err, errlen)) return -1;
    int64_t(*grids)[3] = vdn_xcalloc((size_t)(n_pics > 0 ? n_pics : 1), sizeof *grids);
    float **px = vdn_xcalloc((size_t)(n_pics > 0 ? n_pics : 1), sizeof *px);
    float *pixels = NULL;
    int32_t *ids = NULL;
    int rc = 0;
    size_t total = 0;
    const size_t cols =
        3 * (size_t)e->proc.temporal_patch * (size_t)(e->proc.patch * e->proc.patch);
    for (int p = 0; !rc && p < n_pics; p++) {
        rc = vdn_vision_preprocess(&e->proc, pics[p].rgb, pics[p].width, pics[p].height,
                                   pics[p].stride, &px[p], grids[p], err, errlen);
        if (rc) {
            size_t m = strlen(err);
            snprintf(err + m, errlen - m, " (picture %d)", p + 1);
        } else
            total += (size_t)(grids[p][0] * grids[p][1] * grids[p][2]);
    }
    if (!rc && n_pics > 0) { /* the pictures' rows, one after another */
        pixels = vdn_xmalloc(sizeof(float) * total * cols);
        for (int p = 0, r = 0; p < n_pics; p++) {
            size_t m = (size_t)(grids[p][0] * grids[p][1] * grids[p][2]);
            memcpy(pixels + (size_t)r * cols, px[p], sizeof(float) * m * cols);
            r += (int)m;
        }
    }
    rc = rc || vdn_text_presentation(e, tok, prompt, len, (const int64_t(*)[3])grids, n_pics, &ids,
                                     tags, n, err, errlen);
    if (!rc) {
        *rows = vdn_xmalloc(sizeof(float) * (size_t)*n * (size_t)e->cfg.hidden);
        rc = vdn_text_encoder_run_pictures(e, ids, *n, pixels, (const int64_t(*)[3])grids, n_pics,
                                           *rows, err, errlen);
    }
    if (rc) {
        free(*rows), free(*tags);
        *rows = NULL, *tags = NULL, *n = 0;
    }
    for (int p = 0; p < n_pics; p++)
        free(px[p]);
    free(px), free(grids), free(pixels), free(ids);
    return rc ? -1 : 0;
}
