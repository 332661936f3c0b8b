/* `vdn eval suite init`: a synthetic suite for pipeline tests and dry runs. Each prompt gets a
 * random prompt cache in the official layout (engine/prompt.h) sized to the checkpoint's
 * text_dim; keyframe modes get random keyframe latents inside the cache. A real suite (Qwen3-VL
 * caches from the text encoder) uses the same manifest format unchanged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "safetensors.h"
#include "suite.h"
#include "suite_init.h"
#include "vdn_util.h"

static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double gauss(uint64_t *s) { /* Box-Muller */
    double u = ((double)(next_u64(s) >> 11) + 0.5) * 0x1p-53,
           v = (double)(next_u64(s) >> 11) * 0x1p-53;
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* Mix like the paper's evaluation: mostly text-to-video, the rest keyframe modes. */
static vdn_suite_mode mode_for(int i) {
    switch (i % 5) {
    case 3:
        return VDN_MODE_FL2VA;
    case 4:
        return (i / 5) % 2 ? VDN_MODE_L2VA : VDN_MODE_I2VA;
    default:
        return VDN_MODE_T2VA;
    }
}

static const char *subjects[] = {"a red kite over a windy beach",  "a chef flipping pancakes",
                                 "rain on a city street at night", "a cat chasing a paper ball",
                                 "waves breaking on black rocks",  "a cyclist on a mountain road",
                                 "fireworks above a harbour",      "a potter shaping clay"};

int vdn_suite_init(const vdn_suite_init_opts *o, char *err, size_t errlen) {
    int text_dim = o->text_dim;
    if (!text_dim) {
        if (!o->checkpoint) return vdn_fail(err, errlen, "--checkpoint CKPT is required");
        vdn_ckpt *ck = vdn_ckpt_open(o->checkpoint, NULL, 0, o->base_dir, err, errlen);
        if (!ck) return -1;
        text_dim = vdn_ckpt_config(ck)->text_dim;
        vdn_ckpt_close(ck);
    }
    if (text_dim <= 0 || text_dim > 65536)
        return vdn_fail(err, errlen, "text_dim %d out of range", text_dim);
    if (o->n_prompts < 1 || o->n_prompts > 100000)
        return vdn_fail(err, errlen, "--prompts %d, expected 1..100000", o->n_prompts);
    if (o->height < 32 || o->width < 32 || o->height % 32 || o->width % 32)
        return vdn_fail(err, errlen, "--height/--width %dx%d, expected multiples of 32", o->height,
                        o->width);
    if (o->frames < 1) return vdn_fail(err, errlen, "--frames %d, expected >= 1", o->frames);
    char path[4096];
    snprintf(path, sizeof path, "%s/caches", o->dir);
    if (vdn_mkdir_p(path, err, errlen)) return -1;
    int kh = o->height / 16, kw = o->width / 16;
    size_t kn = (size_t)24 * kh * kw;
    float *kf = vdn_xmalloc(2 * kn * sizeof *kf);
    uint16_t *emb = NULL;
    int64_t *tags = NULL;
    FILE *man = NULL;
    char tmp_manifest[4200];
    snprintf(tmp_manifest, sizeof tmp_manifest, "%s/suite.jsonl.tmp", o->dir);
    man = fopen(tmp_manifest, "w");
    if (!man) {
        free(kf);
        return vdn_fail(err, errlen, "%s: cannot create", tmp_manifest);
    }
    fprintf(man, "# vdn eval suite: %d synthetic prompts (random caches, text_dim %d)\n",
            o->n_prompts, text_dim);
    int rc = 0;
    for (int i = 0; i < o->n_prompts && rc == 0; i++) {
        uint64_t rng = o->seed * 0x100000001B3ull + (uint64_t)i * 0x9E3779B97F4A7C15ull + 1;
        vdn_suite_mode mode = mode_for(i);
        int nk = vdn_suite_mode_keyframes(mode);
        /* official layout: per keyframe "<Picture i>: " text rows then a vision block tagged 0 */
        int L = 12 + (int)(next_u64(&rng) % 21) + 8 * nk;
        emb = vdn_xmalloc((size_t)L * text_dim * sizeof *emb);
        tags = vdn_xmalloc((size_t)L * sizeof *tags);
        for (size_t j = 0; j < (size_t)L * text_dim; j++)
            emb[j] = vdn_f32_to_bf16((float)gauss(&rng));
        for (int j = 0; j < L; j++)
            tags[j] = (j < 8 * nk && (j % 8) >= 3) ? 0 : 1;
        for (size_t j = 0; j < (size_t)nk * kn; j++)
            kf[j] = (float)gauss(&rng);
        char id[32], prompt[200], hs[16], ws[16];
        snprintf(id, sizeof id, "p%03d", i + 1);
        snprintf(prompt, sizeof prompt, "synthetic %s prompt %d: %s", vdn_suite_mode_name(mode),
                 i + 1, subjects[i % 8]);
        snprintf(hs, sizeof hs, "%d", o->height);
        snprintf(ws, sizeof ws, "%d", o->width);
        vdn_st_tensor t[4] = {{"prompt_embeds", VDN_DT_BF16, 2, {L, text_dim}, emb},
                              {"text_token_tags", VDN_DT_I64, 1, {L}, tags}};
        int nt = 2;
        const char *anchors = NULL;
        if (mode == VDN_MODE_I2VA || mode == VDN_MODE_FL2VA) {
            t[nt++] = (vdn_st_tensor){"keyframe_first", VDN_DT_F32, 4, {24, 1, kh, kw}, kf};
            anchors = "first";
        }
        if (mode == VDN_MODE_L2VA || mode == VDN_MODE_FL2VA) {
            const float *last = kf + (size_t)(nt - 2) * kn; /* second latent block for fl2va */
            t[nt++] = (vdn_st_tensor){"keyframe_last", VDN_DT_F32, 4, {24, 1, kh, kw}, last};
            anchors = mode == VDN_MODE_FL2VA ? "first,last" : "last";
        }
        vdn_st_kv meta[4] = {
            {"prompt", prompt}, {"height", hs}, {"width", ws}, {"keyframe_anchors", anchors}};
        snprintf(path, sizeof path, "%s/caches/%s.safetensors", o->dir, id);
        rc = vdn_st_write(path, t, nt, meta, anchors ? 4 : 3, err, errlen);
        if (rc == 0) {
            char rel[64];
            snprintf(rel, sizeof rel, "caches/%s.safetensors", id);
            vdn_suite_item it = {.mode = mode,
                                 .prompt = prompt,
                                 .prompt_cache = rel,
                                 .keyframes = nk ? rel : NULL,
                                 .seed = o->seed * 1000003ull + 1000 + i,
                                 .frames = o->frames,
                                 .height = o->height,
                                 .width = o->width};
            snprintf(it.id, sizeof it.id, "%s", id);
            char *line = vdn_suite_item_json(&it);
            fprintf(man, "%s\n", line);
            free(line);
        }
        free(emb);
        free(tags);
    }
    free(kf);
    if (fclose(man) != 0 && rc == 0) rc = vdn_fail(err, errlen, "%s: write failed", tmp_manifest);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/suite.jsonl", o->dir);
        if (rename(tmp_manifest, path) != 0)
            rc = vdn_fail(err, errlen, "%s: cannot rename into place", path);
    } else {
        remove(tmp_manifest);
    }
    return rc;
}
