/* The render pipeline, written once: a request's prompt (a prompt cache, or its text encoded
 * through the content-addressed cache of a store) -> the DiT (one engine, or a group sharding
 * one clip) -> latents -> the video and audio decoders -> mp4 and poster, with the run record
 * beside them. `vdn render` and the farm worker both render through vdn_pipeline_render (eval
 * renders through the farm); what stays theirs is their own: arguments and printing for the
 * one, downloads, snapshots' storage, uploads and the blame of failures for the other.
 *
 * Outputs, all beside req->render.out_prefix (PREFIX):
 *   PREFIX.json         the run record (engine.h), with "text_prompt" for a text prompt
 *   PREFIX.mp4          with decoders: H.264 + AAC (no sound without an audio VAE)
 *   PREFIX.png          with decoders and req->poster: the first, middle and last frame
 *   PREFIX.safetensors  the latents: kept with req->save_latents or when there is no mp4
 * A text prompt's cache entry is fetched or encoded to PREFIX.prompt.safetensors while the
 * pipeline needs it, and removed after (it lives on in the store).
 *
 * Each input is read once a job: keyframe pictures before the prompt stage (decoded, hashed, put
 * on the canvas, with the VAE's and the image processor's identities), and the key, the store
 * lookup and a miss's encode take that reading (prompt_text.h); the prompt cache before the
 * render stage, and the render takes it as loaded (engine.h vdn_render_request.prompt). */
#ifndef VDN_PIPELINE_H
#define VDN_PIPELINE_H

#include <stddef.h>

#include "decode.h"
#include "engine.h"
#include "prompt_text.h"
#include "store.h"

/* What renders: opened once, used for many requests, one at a time. */
typedef struct {
    vdn_engine *const *engines;   /* rank r on engines[r] (engine.h vdn_engine_render_group); the
                                     record is engines[0]'s */
    int n_engines;                /* 1: a plain render */
    vdn_decoder *const *decoders; /* copies of the same VAEs on their devices (decode.h
                                     vdn_decoder_decode_group); NULL: latents only */
    int n_decoders;
    /* Text prompts: NULL refuses them. A miss encodes on engines[0]'s device (so the encoder's
     * memory counts with the DiT's, and the encoder's keep/release policy of prompt_text.h
     * applies) and is stored in prompt_store under prompt-cache/. */
    vdn_text_prompts *text;
    vdn_store *prompt_store;
    int text_gpu; /* what the run record calls that device (a GPU index; -1: the CPU) */
} vdn_pipeline;

/* The stages, in order; the stage callback hears of each before it starts. */
typedef enum {
    VDN_PIPELINE_PROMPT = 0, /* a text prompt: fetched from the cache, or encoded and stored */
    VDN_PIPELINE_RENDER,     /* the DiT */
    VDN_PIPELINE_DECODE,     /* the decoders (skipped without them) */
    VDN_PIPELINE_RECORD      /* the text prompt's part of the run record */
} vdn_pipeline_stage;
const char *vdn_pipeline_stage_name(vdn_pipeline_stage s);

typedef struct {
    /* The render (engine.h): out_prefix is required; prompt_cache is a local prompt cache file,
     * or NULL with prompt_text; progress, cancel and snapshots/resume as vdn_engine_render's. */
    vdn_render_request render;
    const char *prompt_text; /* encoded when render.prompt_cache is NULL */
    /* Keyframe pictures (local image files) encoded with prompt_text into its cache entry: the
     * first frame (I2VA), the last (L2VA) or both (FL2VA); NULL: none. The canvas is
     * render.height x render.width when both are given, else the release's canvas of the first
     * keyframe (prompt_text.h), and the render takes the canvas's size. A prompt cache carries
     * its keyframes already: pictures with one are refused. */
    const char *first_frame, *last_frame;
    int save_latents;         /* keep PREFIX.safetensors beside the mp4 */
    int poster;               /* write PREFIX.png */
    int crf;                  /* H.264 quality; -1: the writer's default */
    int quiet;                /* no decoder progress on stderr */
    vdn_progress_fn progress; /* per NFE; nonzero cancels (engine.h) */
    void *user;
    /* Before each stage that runs (NULL: none); nonzero stops the pipeline there, as a cancel. */
    int (*stage)(void *user, vdn_pipeline_stage stage);
} vdn_pipeline_request;

/* Which kind of failure stopped the pipeline: a caller decides whose fault it was from this
 * and the devices' own fault records (engine.h vdn_engine_last_fault), never from words. */
typedef enum {
    VDN_PIPELINE_OK = 0,
    VDN_PIPELINE_ERR_REQUEST, /* the request itself: fails alike everywhere (a keyframe picture
                                 that does not decode, a prompt the tokenizer refuses or too
                                 long for the encoder, a
                                 prompt cache that does not load for this checkpoint, text with
                                 no text encoder) */
    VDN_PIPELINE_ERR_TEXT,    /* encoding or caching a text prompt (result.text.store_failed:
                                 the store's part; else the encoder or its device) */
    VDN_PIPELINE_ERR_RENDER,  /* the DiT render (a size the model cannot take, a device, cancel) */
    VDN_PIPELINE_ERR_DECODE,  /* the decoders (result.share says whose share failed) */
    VDN_PIPELINE_ERR_OUTPUT,  /* writing the run record */
    VDN_PIPELINE_ERR_STOPPED  /* the stage callback said stop */
} vdn_pipeline_error;

typedef struct {
    vdn_pipeline_error error;
    vdn_pipeline_stage stage; /* the last stage entered (the failed one on failure) */
    int text_used;            /* a text prompt went through the cache: `text` says how */
    vdn_text_cache_info text;
    int have_mp4, have_poster, have_latents; /* which outputs are there */
    vdn_decode_share share;                  /* what each decoder decoded (decode.h) */
    double decode_seconds;
} vdn_pipeline_result;

/* 0, or -1 with a message in err and the kind in res->error. No partial mp4 is left on failure;
 * the run record and latents of a render that succeeded stay for the caller to look at. */
int vdn_pipeline_render(const vdn_pipeline *p, const vdn_pipeline_request *req,
                        vdn_pipeline_result *res, char *err, size_t errlen);

#endif
