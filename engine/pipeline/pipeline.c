/* The render pipeline, stage by stage (pipeline.h). */
#include "pipeline.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "prompt.h"
#include "vdn_util.h"

const char *vdn_pipeline_stage_name(vdn_pipeline_stage s) {
    switch (s) {
    case VDN_PIPELINE_PROMPT:
        return "prompt";
    case VDN_PIPELINE_RENDER:
        return "render";
    case VDN_PIPELINE_DECODE:
        return "decode";
    case VDN_PIPELINE_RECORD:
        return "record";
    }
    return "?";
}

/* PREFIX + ext */
static void out_path(const vdn_pipeline_request *req, const char *ext, char *buf, size_t len) {
    snprintf(buf, len, "%s%s", req->render.out_prefix, ext);
}

/* Fails with kind e: "what: why". */
static int fail(vdn_pipeline_result *res, vdn_pipeline_error e, char *err, size_t errlen,
                const char *what, const char *why) {
    res->error = e;
    return vdn_fail(err, errlen, "%s: %s", what, why);
}

/* Enters a stage: tells the caller, who may stop the pipeline there. */
static int enter(const vdn_pipeline_request *req, vdn_pipeline_result *res, vdn_pipeline_stage s,
                 char *err, size_t errlen) {
    res->stage = s;
    if (req->stage && req->stage(req->user, s)) {
        res->error = VDN_PIPELINE_ERR_STOPPED;
        return vdn_fail(err, errlen, "stopped before the %s stage", vdn_pipeline_stage_name(s));
    }
    return 0;
}

/* What the request asks that the pipeline cannot do, before any work. */
static int check_request(const vdn_pipeline *p, const vdn_pipeline_request *req,
                         vdn_pipeline_result *res, char *err, size_t errlen) {
    res->error = VDN_PIPELINE_ERR_REQUEST;
    if (!req->render.out_prefix || !req->render.out_prefix[0])
        return vdn_fail(err, errlen, "render request: no output prefix (out_prefix)");
    if (p->n_engines < 1 || !p->engines || !p->engines[0])
        return vdn_fail(err, errlen, "pipeline: no engine to render with");
    const int has_cache = req->render.prompt_cache && req->render.prompt_cache[0];
    const int has_text = req->prompt_text && req->prompt_text[0];
    const char *pic = req->first_frame ? "first_frame" : req->last_frame ? "last_frame" : NULL;
    if (pic && (has_cache || !has_text))
        return vdn_fail(err, errlen, "%s: keyframe pictures are encoded with a text prompt; %s",
                        pic,
                        has_cache ? "a prompt cache carries its keyframes already"
                                  : "no text prompt was given");
    if (!has_cache && !has_text)
        return vdn_fail(err, errlen, "render request: neither a prompt cache nor a text prompt");
    if (!has_cache && !p->text)
        return vdn_fail(err, errlen, "a text prompt, and no text encoder to encode it with");
    if (!has_cache && !p->prompt_store)
        return vdn_fail(err, errlen, "a text prompt, and no store to cache its encoding in");
    res->error = VDN_PIPELINE_OK;
    return 0;
}

/* The request's prompt as the text prompts take it: text, pictures and the canvas asked for. */
static vdn_prompt_input prompt_input(const vdn_pipeline_request *req) {
    const int sized = req->render.height > 0 && req->render.width > 0;
    return (vdn_prompt_input){.text = req->prompt_text,
                              .first_frame = req->first_frame,
                              .last_frame = req->last_frame,
                              .height = sized ? req->render.height : 0,
                              .width = sized ? req->render.width : 0};
}

/* Text (and pictures, read once: pics) -> a prompt cache at path, through the store's
 * content-addressed cache. */
static int text_prompt(const vdn_pipeline *p, const vdn_pipeline_request *req,
                       const vdn_pictures *pics, const char *path, vdn_pipeline_result *res,
                       char *err, size_t errlen) {
    char terr[VDN_ERR_LEN], key[256];
    int tokens = 0;
    const vdn_prompt_input in = prompt_input(req);
    res->error = VDN_PIPELINE_ERR_REQUEST; /* the tokenizer's refusals fail alike everywhere */
    if (vdn_text_prompts_key(p->text, &in, pics, key, sizeof key, &tokens, terr, sizeof terr))
        return vdn_fail(err, errlen, "%s prompt: %s", pics->n ? "keyframe" : "text", terr);
    const int64_t max = vdn_text_prompts_max_tokens(p->text);
    if (tokens > max)
        return vdn_fail(err, errlen,
                        "text prompt: %d tokens; the text encoder takes at most %lld "
                        "(text_config.max_position_embeddings)",
                        tokens, (long long)max);
    vdn_text_place at = {
        .dev = vdn_engine_device(p->engines[0]), .gpu = p->text_gpu, .cancel = req->render.cancel};
    res->error = VDN_PIPELINE_ERR_TEXT;
    if (vdn_text_prompts_cached(p->text, &at, p->prompt_store, &in, pics, path, &res->text, terr,
                                sizeof terr))
        return vdn_fail(err, errlen, "text prompt (cache %s in %s): %s", key,
                        vdn_store_uri(p->prompt_store), terr);
    res->text_used = 1;
    res->error = VDN_PIPELINE_OK;
    return 0;
}

/* The prompt cache, read once for the job: one that does not load for this checkpoint fails the
 * same way everywhere, said here as the request's, before the render; the render takes it as
 * loaded (vdn_render_request.prompt). A render that left its size open takes the keyframes'
 * canvas from the cache (*h, *w). */
static int load_prompt_cache(const vdn_pipeline *p, const char *path, vdn_prompt *pr, int *h,
                             int *w, vdn_pipeline_result *res, char *err, size_t errlen) {
    char perr[VDN_ERR_LEN];
    if (vdn_prompt_load(path, vdn_engine_config(p->engines[0])->text_dim, pr, perr, sizeof perr))
        return fail(res, VDN_PIPELINE_ERR_REQUEST, err, errlen, "bad prompt cache", perr);
    if (pr->n_keyframes && *h <= 0 && *w <= 0) {
        *h = pr->height;
        *w = pr->width;
    }
    return 0;
}

/* Latents -> mp4 (+ poster) over the decoders; the latents go unless asked to stay. */
static int decode(const vdn_pipeline *p, const vdn_pipeline_request *req, vdn_pipeline_result *res,
                  char *err, size_t errlen) {
    char lat[4200], mp4[4200], png[4200];
    out_path(req, ".safetensors", lat, sizeof lat);
    out_path(req, ".mp4", mp4, sizeof mp4);
    out_path(req, ".png", png, sizeof png);
    vdn_decode_opts o = {.latents = lat,
                         .mp4 = mp4,
                         .poster = req->poster ? png : NULL,
                         .crf = req->crf,
                         .quiet = req->quiet,
                         .cancel = req->render.cancel};
    double t0 = vdn_now();
    if (vdn_decoder_decode_group(p->decoders, p->n_decoders, &o, &res->share, err, errlen)) {
        /* a cancel is nobody's failure: stopped, as between stages */
        res->error =
            vdn_cancelled(req->render.cancel) ? VDN_PIPELINE_ERR_STOPPED : VDN_PIPELINE_ERR_DECODE;
        return -1;
    }
    res->decode_seconds = vdn_now() - t0;
    res->have_mp4 = 1;
    res->have_poster = req->poster;
    if (!req->save_latents) {
        unlink(lat);
        res->have_latents = 0;
    }
    return 0;
}

/* The stages after the prompt is a local cache file at pc. */
static int render_decode_record(const vdn_pipeline *p, const vdn_pipeline_request *req,
                                const char *pc, vdn_pipeline_result *res, char *err,
                                size_t errlen) {
    vdn_render_request r = req->render;
    vdn_prompt pr;
    r.prompt_cache = pc;
    r.prompt = &pr;
    if (load_prompt_cache(p, pc, &pr, &r.height, &r.width, res, err, errlen)) return -1;
    int rc = enter(req, res, VDN_PIPELINE_RENDER, err, errlen);
    if (!rc && vdn_engine_render_group(p->engines, p->n_engines, &r, req->progress, req->user, err,
                                       errlen)) {
        res->error = VDN_PIPELINE_ERR_RENDER;
        rc = -1;
    }
    vdn_prompt_free(&pr);
    if (rc) return -1;
    res->have_latents = 1;
    if (p->n_decoders > 0 &&
        (enter(req, res, VDN_PIPELINE_DECODE, err, errlen) || decode(p, req, res, err, errlen)))
        return -1;
    if (!res->text_used) return 0;
    char rec[4200], rerr[VDN_ERR_LEN];
    out_path(req, ".json", rec, sizeof rec);
    if (enter(req, res, VDN_PIPELINE_RECORD, err, errlen)) return -1;
    if (vdn_text_cache_info_to_record(rec, &res->text, vdn_text_prompts_identity(p->text), rerr,
                                      sizeof rerr))
        return fail(res, VDN_PIPELINE_ERR_OUTPUT, err, errlen, "run record", rerr);
    return 0;
}

int vdn_pipeline_render(const vdn_pipeline *p, const vdn_pipeline_request *req,
                        vdn_pipeline_result *res, char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    if (check_request(p, req, res, err, errlen)) return -1;
    const char *pc = req->render.prompt_cache;
    if (pc && pc[0]) return render_decode_record(p, req, pc, res, err, errlen);
    /* A text prompt: its pictures read once here (a picture that does not decode is the
     * request's, before any model is loaded), then keyed, fetched or encoded from them. */
    char text_path[4200], perr[VDN_ERR_LEN];
    const vdn_prompt_input in = prompt_input(req);
    vdn_pictures pics;
    if (vdn_text_prompts_pictures(p->text, &in, &pics, perr, sizeof perr))
        return fail(res, VDN_PIPELINE_ERR_REQUEST, err, errlen, "keyframe prompt", perr);
    out_path(req, ".prompt.safetensors", text_path, sizeof text_path);
    int rc = enter(req, res, VDN_PIPELINE_PROMPT, err, errlen) ||
             text_prompt(p, req, &pics, text_path, res, err, errlen);
    vdn_pictures_free(&pics);
    if (!rc) rc = render_decode_record(p, req, text_path, res, err, errlen);
    unlink(text_path); /* the store keeps the entry */
    return rc ? -1 : 0;
}
