/* A keyframe job reads its inputs once (pipeline.c, prompt_pictures.h), on the tiny checkpoint
 * with VAEs and a text encoder, CPU, latents only:
 *
 *  1. a miss: the pictures are read before the prompt stage; moved away when that stage starts,
 *     the job still keys, encodes and renders (no step decodes them again), and the prompt cache
 *     the prompt stage wrote, moved away when the render stage starts, is not read again either
 *     (the render takes it as the pipeline loaded it);
 *  2. a hit: the same with the VAE's config.json moved away too (its identity was read once, with
 *     the pictures; a hit loads no VAE);
 *  3. the image processor's settings are part of the key: another mean or min_pixels in
 *     processor/preprocessor_config.json is another key (a miss through the pipeline), the same
 *     settings written with other spacing the same key, and restored settings the old key again.
 *
 *   test_pipeline_pictures CKPT WORKDIR   (CKPT: vdn ckpt init --preset tiny --vae --text-encoder)
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ops/test/check.h"
#include "pipeline.h"
#include "png_write.h"
#include "vdn_util.h"

static const char *ckpt, *work;
static const char *TEXT = "The lighthouse beam sweeps over a stormy sea.";
static char first[4200], last[4200];

/* What the stage callback moves away as each stage starts (path -> path.away). */
typedef struct {
    const char *at_prompt[3];
    const char *at_render;
} mover;

static void away(const char *path, int back) {
    char a[4300];
    snprintf(a, sizeof a, "%s.away", path);
    if (rename(back ? a : path, back ? path : a) != 0) CHECK(0, "cannot move %s", path);
}

static int on_stage(void *user, vdn_pipeline_stage s) {
    const mover *m = user;
    if (s == VDN_PIPELINE_PROMPT)
        for (int i = 0; i < 3 && m->at_prompt[i]; i++)
            away(m->at_prompt[i], 0);
    if (s == VDN_PIPELINE_RENDER && m->at_render) away(m->at_render, 0);
    return 0;
}

static void restore(const mover *m) {
    for (int i = 0; i < 3 && m->at_prompt[i]; i++)
        away(m->at_prompt[i], 1);
}

/* A gradient picture of w x h, seeded by k, written as PNG. */
static void picture(const char *path, int w, int h, int k) {
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = rgb + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(x * 2 + k), p[1] = (uint8_t)(y * 3),
            p[2] = (uint8_t)((x * y + k) % 256);
        }
    char err[VDN_ERR_LEN];
    CHECK(vdn_png_write_file(path, rgb, w, h, err, sizeof err) == 0, "%s", err);
    free(rgb);
}

/* One job: text + both pictures on a 64 x 64 canvas, 2 steps. */
static int job(const vdn_pipeline *p, const char *name, mover *m, vdn_pipeline_result *res,
               char *err, size_t errlen) {
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s/%s", work, name);
    vdn_pipeline_request rq = {
        .render =
            {.frames = 22, .height = 64, .width = 64, .steps = 2, .seed = 3, .out_prefix = prefix},
        .prompt_text = TEXT,
        .first_frame = first,
        .last_frame = last,
        .crf = -1,
        .quiet = 1,
        .user = m,
        .stage = on_stage};
    return vdn_pipeline_render(p, &rq, res, err, errlen);
}

/* The prompt's key as the pipeline computes it, pictures and processor read now. */
static void key_now(vdn_text_prompts *t, char *key, size_t len) {
    char err[VDN_ERR_LEN];
    vdn_prompt_input in = {
        .text = TEXT, .first_frame = first, .last_frame = last, .height = 64, .width = 64};
    vdn_pictures pics;
    key[0] = 0;
    CHECK(vdn_text_prompts_pictures(t, &in, &pics, err, sizeof err) == 0 &&
              vdn_text_prompts_key(t, &in, &pics, key, len, NULL, err, sizeof err) == 0,
          "key: %s", err);
    vdn_pictures_free(&pics);
}

/* processor/preprocessor_config.json with one number changed (field, index in an array or -1),
 * or reprinted unformatted (field NULL). */
static void edit_processor(const char *path, const char *field, int index, double value) {
    char err[VDN_ERR_LEN];
    size_t len;
    char *text = vdn_read_file(path, &len, err, sizeof err);
    cJSON *j = text ? cJSON_ParseWithLength(text, len) : NULL;
    CHECK(j != NULL, "%s: %s", path, err);
    free(text);
    if (!j) return;
    if (field) {
        cJSON *f = cJSON_GetObjectItem(j, field);
        if (index >= 0) f = cJSON_GetArrayItem(f, index);
        if (!strcmp(field, "size")) f = cJSON_GetObjectItem(f, "shortest_edge");
        CHECK(cJSON_IsNumber(f), "%s: no number %s", path, field);
        if (f) cJSON_SetNumberValue(f, value);
    }
    char *out = field ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    CHECK(vdn_write_file_atomic(path, out, strlen(out), err, sizeof err) == 0, "%s", err);
    cJSON_free(out);
    cJSON_Delete(j);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_pipeline_pictures CKPT WORKDIR\n");
        return 2;
    }
    ckpt = argv[1];
    work = argv[2];
    char err[VDN_ERR_LEN], uri[4200], vae_cfg[4200], proc[4200], prompt_file[4300];
    snprintf(first, sizeof first, "%s/first.png", work);
    snprintf(last, sizeof last, "%s/last.png", work);
    snprintf(uri, sizeof uri, "file://%s/store", work);
    snprintf(vae_cfg, sizeof vae_cfg, "%s/vae/config.json", ckpt);
    snprintf(proc, sizeof proc, "%s/processor/preprocessor_config.json", ckpt);
    picture(first, 120, 80, 0);
    picture(last, 90, 90, 7);

    const vdn_engine_opts eo = {.backend = VDN_BACKEND_CPU};
    vdn_engine *eng = vdn_engine_open(ckpt, NULL, 0, &eo, err, sizeof err);
    vdn_text_prompts *t =
        vdn_text_prompts_open(ckpt, &(vdn_text_prompts_opts){.backend = "cpu"}, err, sizeof err);
    vdn_store *st = vdn_store_open(uri, NULL, err, sizeof err);
    CHECK(eng && t && st, "open: %s", err);
    if (!eng || !t || !st) return check_report("test_pipeline_pictures");
    vdn_pipeline p = {
        .engines = &eng, .n_engines = 1, .text = t, .prompt_store = st, .text_gpu = -1};
    vdn_pipeline_result res;

    /* 1. a miss with the pictures gone once the prompt stage starts, the prompt cache once the
     * render starts */
    snprintf(prompt_file, sizeof prompt_file, "%s/miss.prompt.safetensors", work);
    mover m = {.at_prompt = {first, last}, .at_render = prompt_file};
    int rc = job(&p, "miss", &m, &res, err, sizeof err);
    restore(&m);
    CHECK(rc == 0 && res.text_used && !res.text.hit && res.text.pictures.n == 2 && res.have_latents,
          "miss, inputs moved away after their one read: rc %d '%s' hit %d pictures %d", rc, err,
          res.text.hit, res.text.pictures.n);
    CHECK(vdn_text_prompts_encodes(t) == 1, "%ld encodes", vdn_text_prompts_encodes(t));
    char key[256];
    key_now(t, key, sizeof key);
    CHECK(!strcmp(key, res.text.key), "the job's key %s, the prompt's %s", res.text.key, key);

    /* 2. a hit with the VAE's config gone too */
    snprintf(prompt_file, sizeof prompt_file, "%s/hit.prompt.safetensors", work);
    m = (mover){.at_prompt = {first, last, vae_cfg}, .at_render = prompt_file};
    rc = job(&p, "hit", &m, &res, err, sizeof err);
    restore(&m);
    CHECK(rc == 0 && res.text.hit && vdn_text_prompts_encodes(t) == 1,
          "hit with pictures and VAE config moved away: rc %d '%s' hit %d", rc, err, res.text.hit);

    /* 3. the processor's settings in the key */
    size_t len;
    char *orig = vdn_read_file(proc, &len, err, sizeof err);
    CHECK(orig != NULL, "%s", err);
    edit_processor(proc, NULL, -1, 0);
    char k2[256];
    key_now(t, k2, sizeof k2);
    CHECK(!strcmp(k2, key), "the same settings reprinted: key %s, was %s", k2, key);
    edit_processor(proc, "image_mean", 1, 0.25);
    key_now(t, k2, sizeof k2);
    CHECK(k2[0] && strcmp(k2, key), "another image_mean: the same key %s", k2);
    m = (mover){0};
    rc = job(&p, "mean", &m, &res, err, sizeof err);
    CHECK(rc == 0 && !res.text.hit && !strcmp(res.text.key, k2) && vdn_text_prompts_encodes(t) == 2,
          "another image_mean through the pipeline: rc %d '%s' hit %d", rc, err, res.text.hit);
    if (orig) vdn_write_file_atomic(proc, orig, len, err, sizeof err);
    edit_processor(proc, "size", -1, 64 * 64);
    key_now(t, k2, sizeof k2);
    CHECK(k2[0] && strcmp(k2, key), "another min_pixels: the same key %s", k2);
    if (orig) vdn_write_file_atomic(proc, orig, len, err, sizeof err);
    key_now(t, k2, sizeof k2);
    CHECK(!strcmp(k2, key), "the settings restored: key %s, was %s", k2, key);
    free(orig);

    vdn_store_close(st);
    vdn_text_prompts_close(t);
    vdn_engine_close(eng);
    return check_report("test_pipeline_pictures");
}
