/* vdn render: one render from the command line, through the pipeline (pipeline.h) the farm's
 * workers render with: a prompt cache or text (encoded through a content-addressed cache) ->
 * DiT -> decoders -> mp4 + run record. Progress per NFE on stderr, or with --json one JSON
 * object per line on stdout for scripts. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "commands.h"
#include "decode.h"
#include "engine.h"
#include "pipeline.h"
#include "prompt_text.h"
#include "store.h"
#include "vdn_util.h"

static const char *usage =
    "usage: vdn render --checkpoint DIR (--prompt-cache FILE | --prompt TEXT) --frames N\n"
    "                  --height H --width W --steps K --seed S --out PREFIX [options]\n"
    "\n"
    "Renders one clip; writes PREFIX.mp4 (H.264 + AAC, decoded with the VAEs beside the\n"
    "checkpoint's transformer/, or --vae/--audio-vae) and PREFIX.json (run record); the latents\n"
    "PREFIX.safetensors (video (24,F,H/16,W/16), audio (2,32,L), float32) only with\n"
    "--save-latents, or when no video VAE is there.\n"
    "\n"
    "  --checkpoint DIR     diffusers/native base or VDN checkpoint directory\n"
    "  --prompt-cache FILE  safetensors prompt cache (prompt_embeds, text_token_tags[, "
    "keyframes])\n"
    "  --prompt TEXT        the prompt's text instead: tokenized and encoded with the\n"
    "                       checkpoint's tokenizer/ and text_encoder/ (as `vdn encode`), the\n"
    "                       encoding cached by content (encoder, precision, token ids) in\n"
    "                       --prompt-store and reused by every later render of that text\n"
    "  --prompt-store DIR|URI  where encoded prompts are cached, as the farm caches them:\n"
    "                       DIR/prompt-cache/<sha256>.safetensors (default: PREFIX's folder;\n"
    "                       a farm's store, file:// or s3://, shares its cache)\n"
    "  --text-precision P   bf16 (default) or fp8: the text encoder's Linears (a separate\n"
    "                       cache entry per precision)\n"
    "  --first-frame IMG --last-frame IMG   keyframe pictures (PNG, JPEG, WebP) with\n"
    "                       --prompt: the first frame (I2VA), the last (L2VA) or both\n"
    "                       (FL2VA), encoded with the text (as `vdn encode`) into the cache;\n"
    "                       the clip takes the first keyframe's canvas (short edge 768,\n"
    "                       at most 768 x 1344) unless --height and --width are given\n"
    "  --frames N           pixel frames at 24 fps, snapped up to 17n+5\n"
    "  --height H --width W pixels, multiples of 32\n"
    "  --steps K            model evaluations (the sigma grid has K+1 points)\n"
    "  --seed S             noise seed (vdn's own generator; see --noise)\n"
    "  --noise FILE         safetensors noise_video (24,F,h,w), noise_audio (2L,32)\n"
    "                       [, noise_keyframes (K,24,1,h,w)]: bit-for-bit comparisons\n"
    "  --variant V          vdn (default with a branch), dense, vdn-no-anchors, window-only,\n"
    "                       vdn-additive\n"
    "  --dense              same as --variant dense\n"
    "  --video-shift X --audio-shift X   sigma shifts (default 12 and 3)\n"
    "  --adapter PATH       fold another PEFT adapter (repeatable)\n"
    "  --vae DIR --audio-vae DIR   the VAE folders (default: beside the checkpoint's\n"
    "                       transformer/; no audio VAE: an mp4 without sound)\n"
    "  --save-latents       keep PREFIX.safetensors beside the mp4\n"
    "  --poster             also write PREFIX.png: the first, middle and last frame\n"
    "  --crf N              H.264 quality 0..51 (default 18)\n"
    "  --cpu                use the CPU backend even when a GPU is present\n"
    "  --threads N          CPU threads: the cpu backend's products and the render's host\n"
    "                       work (default 2 with cpu, the cores up to 8 with cuda)\n"
    "  --precision P        bf16 (default) or fp8: the DiT's large Linears (q/k/v, to_out,\n"
    "                       FFN, to_out_linear, refiner, context_embedder) in e4m3 with row\n"
    "                       scales, weights quantised once at load; recorded in PREFIX.json\n"
    "  --ranks P            shard each model evaluation over P in-process ranks (sequence\n"
    "                       parallelism, 1..64; default 1: unsharded); equals the plain render\n"
    "  --quiet              no progress lines\n"
    "  --json               progress as JSON lines on stdout (one object per line, flushed):\n"
    "                       {\"event\":\"start\",...}, {\"event\":\"warning\",\"message\":...},\n"
    "                       "
    "{\"event\":\"nfe\",\"nfe\":k,\"nfe_total\":n,\"seconds\":s,\"elapsed\":e,\n"
    "                       \"eta\":s}, then {\"event\":\"done\",...} or {\"event\":\"error\",\n"
    "                       \"message\":...}; the human progress lines are left out\n";

static int parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "vdn render: %s '%s': expected an integer in [%lld, %lld]\n", opt, s, lo,
                hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_float(const char *opt, const char *s, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v > 0) || v > 1e6) {
        fprintf(stderr, "vdn render: %s '%s': expected a positive number\n", opt, s);
        return -1;
    }
    *out = (float)v;
    return 0;
}

typedef struct {
    double t0;
    int quiet, json;
} progress_state;

/* One JSON event line on stdout, flushed so a pipe reader sees it at once; takes o. */
static void emit(cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        free(s);
    }
    cJSON_Delete(o);
}

static cJSON *event(const char *name) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", name);
    return o;
}

static int on_progress(void *user, int k, int n, double secs) {
    progress_state *p = user;
    double el = vdn_now() - p->t0;
    if (p->json) {
        cJSON *o = event("nfe");
        cJSON_AddNumberToObject(o, "nfe", k);
        cJSON_AddNumberToObject(o, "nfe_total", n);
        cJSON_AddNumberToObject(o, "seconds", secs);
        cJSON_AddNumberToObject(o, "elapsed", el);
        cJSON_AddNumberToObject(o, "eta", el / k * (n - k));
        emit(o);
        return 0;
    }
    if (p->quiet) return 0;
    fprintf(stderr, "vdn render: NFE %d/%d  %.2f s/NFE  ETA %.1f s\n", k, n, secs,
            el / k * (n - k));
    return 0;
}

/* What the command line asks for, besides the render request itself. */
typedef struct {
    const char *ckpt;
    const char *adapters[64];
    int n_ad, cpu, quiet, json, save_latents, poster, crf;
    const char *vae, *audio_vae;
    const char *prompt_text, *prompt_store;
    const char *first_frame, *last_frame; /* keyframe pictures, encoded with prompt_text */
    vdn_precision text_precision;
    vdn_engine_opts engine; /* --precision, --ranks, --threads; the backend from --cpu */
} render_args;

/* Options that take no value; 1 when a is one. */
static int parse_flag(const char *a, render_args *o, vdn_render_request *rq) {
    if (!strcmp(a, "--cpu"))
        o->cpu = 1;
    else if (!strcmp(a, "--dense"))
        rq->variant = "dense";
    else if (!strcmp(a, "--quiet"))
        o->quiet = 1;
    else if (!strcmp(a, "--json"))
        o->json = 1;
    else if (!strcmp(a, "--save-latents"))
        o->save_latents = 1;
    else if (!strcmp(a, "--poster"))
        o->poster = 1;
    else
        return 0;
    return 1;
}

/* The text prompt's options; 1 when a was one of them (*bad: its value was refused). */
static int parse_text_opt(const char *a, const char *val, render_args *o, int *bad) {
    if (!strcmp(a, "--prompt"))
        o->prompt_text = val;
    else if (!strcmp(a, "--prompt-store"))
        o->prompt_store = val;
    else if (!strcmp(a, "--first-frame"))
        o->first_frame = val;
    else if (!strcmp(a, "--last-frame"))
        o->last_frame = val;
    else if (!strcmp(a, "--text-precision")) {
        if (vdn_precision_parse(val, &o->text_precision) != 0) {
            fprintf(stderr, "vdn render: --text-precision '%s': expected bf16 or fp8\n", val);
            *bad = 1;
        }
    } else
        return 0;
    return 1;
}

/* 0, 2 on a usage error (said on stderr), or -1 after --help. */
static int parse_args(int argc, char **argv, render_args *o, vdn_render_request *rq) {
    long long v;
    int have_seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return -1;
        }
        if (parse_flag(a, o, rq)) continue;
        if (i + 1 >= argc) {
            fprintf(stderr, "vdn render: %s needs a value (see --help)\n", a);
            return 2;
        }
        const char *val = argv[++i];
        int bad = 0;
        if (parse_text_opt(a, val, o, &bad)) {
            if (bad) return 2;
        } else if (!strcmp(a, "--checkpoint"))
            o->ckpt = val;
        else if (!strcmp(a, "--prompt-cache"))
            rq->prompt_cache = val;
        else if (!strcmp(a, "--out"))
            rq->out_prefix = val;
        else if (!strcmp(a, "--noise"))
            rq->noise_file = val;
        else if (!strcmp(a, "--variant"))
            rq->variant = val;
        else if (!strcmp(a, "--adapter")) {
            if (o->n_ad == 64) {
                fprintf(stderr, "vdn render: more than 64 --adapter\n");
                return 2;
            }
            o->adapters[o->n_ad++] = val;
        } else if (!strcmp(a, "--frames")) {
            if (parse_int(a, val, 1, 100000, &v)) return 2;
            rq->frames = (int)v;
        } else if (!strcmp(a, "--height")) {
            if (parse_int(a, val, 32, 16384, &v)) return 2;
            rq->height = (int)v;
        } else if (!strcmp(a, "--width")) {
            if (parse_int(a, val, 32, 16384, &v)) return 2;
            rq->width = (int)v;
        } else if (!strcmp(a, "--steps")) {
            if (parse_int(a, val, 1, 1000, &v)) return 2;
            rq->steps = (int)v;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 10);
            if (errno || *end || end == val || val[0] == '-') {
                fprintf(stderr, "vdn render: --seed '%s': expected an unsigned 64-bit integer\n",
                        val);
                return 2;
            }
            rq->seed = s;
            have_seed = 1;
        } else if (!strcmp(a, "--precision")) {
            vdn_precision p;
            if (vdn_precision_parse(val, &p) != 0) {
                fprintf(stderr, "vdn render: --precision '%s': expected bf16 or fp8\n", val);
                return 2;
            }
            o->engine.precision = p;
        } else if (!strcmp(a, "--ranks")) {
            if (parse_int(a, val, 1, 64, &v)) return 2;
            o->engine.ranks = (int)v;
        } else if (!strcmp(a, "--threads")) {
            if (parse_int(a, val, 1, 64, &v)) return 2;
            o->engine.threads = (int)v;
        } else if (!strcmp(a, "--vae")) {
            o->vae = val;
        } else if (!strcmp(a, "--audio-vae")) {
            o->audio_vae = val;
        } else if (!strcmp(a, "--crf")) {
            if (parse_int(a, val, 0, 51, &v)) return 2;
            o->crf = (int)v;
        } else if (!strcmp(a, "--video-shift")) {
            if (parse_float(a, val, &rq->video_shift)) return 2;
        } else if (!strcmp(a, "--audio-shift")) {
            if (parse_float(a, val, &rq->audio_shift)) return 2;
        } else {
            fprintf(stderr, "vdn render: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (rq->prompt_cache && o->prompt_text) {
        fprintf(stderr, "vdn render: --prompt and --prompt-cache both given: give one (the text "
                        "is encoded into a prompt cache; a prompt cache is used as it is)\n");
        return 2;
    }
    if (o->prompt_store && !o->prompt_text) {
        fprintf(stderr, "vdn render: --prompt-store without --prompt (it caches encoded text)\n");
        return 2;
    }
    const int pictures = o->first_frame || o->last_frame;
    if (pictures && !o->prompt_text) {
        fprintf(stderr, "vdn render: --first-frame/--last-frame go with --prompt (the pictures "
                        "are encoded with the text; a prompt cache carries its keyframes)\n");
        return 2;
    }
    if (pictures && !rq->height != !rq->width) {
        fprintf(stderr, "vdn render: give both --height and --width, or neither (the first "
                        "keyframe's canvas)\n");
        return 2;
    }
    const char *missing = !o->ckpt                               ? "--checkpoint"
                          : !rq->prompt_cache && !o->prompt_text ? "--prompt-cache or --prompt"
                          : !rq->frames                          ? "--frames"
                          : !rq->height && !pictures             ? "--height"
                          : !rq->width && !pictures              ? "--width"
                          : !rq->steps                           ? "--steps"
                          : !have_seed                           ? "--seed"
                          : !rq->out_prefix                      ? "--out"
                                                                 : NULL;
    if (missing) {
        fprintf(stderr, "vdn render: missing %s (see --help)\n", missing);
        return 2;
    }
    return 0;
}

/* What the render runs with, opened in the order that fails cheapest first. */
typedef struct {
    vdn_text_prompts *text;
    vdn_store *store;
    vdn_engine *eng;
    vdn_decoder *dec;
    char vae_dir[4400], audio_dir[4400];
} render_parts;

/* The text prompt's tokenizer and encoder config (the weights load on the first encode) and the
 * store its cache lives in: by default PREFIX's folder. */
static int open_text(const render_args *o, const char *out_prefix, render_parts *rp, char *err,
                     size_t errlen) {
    char e2[VDN_ERR_LEN], dir[4096];
    vdn_text_prompts_opts to = {.backend = o->cpu ? "cpu" : NULL, .precision = o->text_precision};
    cli_env_text_prompts(&to);
    rp->text = vdn_text_prompts_open(o->ckpt, &to, e2, sizeof e2);
    if (!rp->text) return vdn_fail(err, errlen, "--prompt: %s", e2);
    const char *uri = o->prompt_store;
    if (!uri) {
        const char *slash = strrchr(out_prefix, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else
            snprintf(dir, sizeof dir, "%.*s", slash == out_prefix ? 1 : (int)(slash - out_prefix),
                     out_prefix);
        uri = dir;
    }
    vdn_store_opts so = {0};
    if (!(rp->store = vdn_store_open(uri, &so, e2, sizeof e2)))
        return vdn_fail(err, errlen, "--prompt-store %s: %s", uri, e2);
    return 0;
}

/* The VAEs on the engine's device, as a worker keeps them beside its DiT; none: latents only. */
static int open_decoder(const render_args *o, render_parts *rp, char *err, size_t errlen) {
    const char *vae = o->vae, *audio = o->audio_vae;
    if (!vae && vdn_vae_find(o->ckpt, "vae", rp->vae_dir, sizeof rp->vae_dir) == 0)
        vae = rp->vae_dir;
    if (!audio && vdn_vae_find(o->ckpt, "audio_vae", rp->audio_dir, sizeof rp->audio_dir) == 0)
        audio = rp->audio_dir;
    if (!vae) return 0;
    char e2[VDN_ERR_LEN];
    rp->dec =
        vdn_decoder_open(vdn_engine_device(rp->eng), vae, audio, VDN_PRECISION_BF16, e2, sizeof e2);
    return rp->dec ? 0 : vdn_fail(err, errlen, "decoding: %s", e2);
}

static int open_parts(const render_args *o, const vdn_render_request *rq, render_parts *rp,
                      char *err, size_t errlen) {
    if (o->prompt_text && open_text(o, rq->out_prefix, rp, err, errlen)) return -1;
    vdn_engine_opts eo = o->engine;
    eo.base_dir = cli_env_base_dir();
    eo.backend = o->cpu ? VDN_BACKEND_CPU : VDN_BACKEND_AUTO;
    rp->eng = vdn_engine_open(o->ckpt, o->adapters, o->n_ad, &eo, err, errlen);
    if (!rp->eng) return -1;
    return open_decoder(o, rp, err, errlen);
}

static void close_parts(render_parts *rp) {
    if (rp->text && rp->eng) vdn_text_prompts_release(rp->text, vdn_engine_device(rp->eng));
    vdn_text_prompts_close(rp->text);
    vdn_decoder_close(rp->dec);
    if (rp->eng) vdn_engine_close(rp->eng);
    if (rp->store) vdn_store_close(rp->store);
}

static void announce(const render_args *o, const vdn_render_request *rq, const vdn_engine *eng) {
    if (o->json) {
        cJSON *e = event("start");
        cJSON_AddStringToObject(e, "backend", vdn_engine_backend_name(eng));
        cJSON_AddNumberToObject(e, "pixel_frames", vdn_snap_frames(rq->frames));
        cJSON_AddNumberToObject(e, "latent_frames", vdn_latent_frames(rq->frames));
        cJSON_AddNumberToObject(e, "height", rq->height);
        cJSON_AddNumberToObject(e, "width", rq->width);
        cJSON_AddNumberToObject(e, "nfe_total", rq->steps);
        emit(e);
        char msgs[8][VDN_REQ_WARN_LEN];
        int nw = vdn_request_warnings(rq, msgs, 8);
        for (int i = 0; i < nw; i++) {
            e = event("warning");
            cJSON_AddStringToObject(e, "message", msgs[i]);
            emit(e);
        }
    } else if (!o->quiet)
        fprintf(stderr, "vdn render: backend %s, %d pixel frames -> %d latent frames, %d NFE\n",
                vdn_engine_backend_name(eng), vdn_snap_frames(rq->frames),
                vdn_latent_frames(rq->frames), rq->steps);
}

/* The human lines between stages (--json and --quiet leave them out). */
static int on_stage(void *user, vdn_pipeline_stage s) {
    const progress_state *p = user;
    if (p->quiet || p->json) return 0;
    if (s == VDN_PIPELINE_PROMPT) fprintf(stderr, "vdn render: text prompt\n");
    if (s == VDN_PIPELINE_DECODE) fprintf(stderr, "vdn render: decoding\n");
    return 0;
}

static void report(const render_args *o, const vdn_render_request *rq,
                   const vdn_pipeline_result *res, const char *err, double t0) {
    char lat[4200], mp4[4200], png[4200], rec[4200];
    snprintf(lat, sizeof lat, "%s.safetensors", rq->out_prefix);
    snprintf(mp4, sizeof mp4, "%s.mp4", rq->out_prefix);
    snprintf(png, sizeof png, "%s.png", rq->out_prefix);
    snprintf(rec, sizeof rec, "%s.json", rq->out_prefix);
    const int ok = res->error == VDN_PIPELINE_OK;
    char msg[VDN_ERR_LEN + 64];
    snprintf(msg, sizeof msg, "%s%s", res->error == VDN_PIPELINE_ERR_DECODE ? "decoding: " : "",
             err);
    if (!ok) fprintf(stderr, "vdn render: %s\n", msg);
    if (ok && res->text_used && !o->quiet && !o->json)
        fprintf(stderr, "vdn render: text prompt, %d tokens: cache %s (%s)\n", res->text.tokens,
                res->text.hit ? "hit" : "miss", res->text.key);
    if (ok && !res->have_mp4 && !o->quiet && !o->json)
        fprintf(stderr, "vdn render: no video VAE beside %s (and no --vae): latents only\n",
                o->ckpt);
    if (o->json) {
        cJSON *e = event(ok ? "done" : "error");
        if (ok) {
            if (res->have_mp4) cJSON_AddStringToObject(e, "mp4", mp4);
            if (res->have_poster) cJSON_AddStringToObject(e, "poster", png);
            if (res->have_latents) cJSON_AddStringToObject(e, "output", lat);
            cJSON_AddStringToObject(e, "record", rec);
            if (res->text_used) cJSON_AddStringToObject(e, "prompt_cache", res->text.key);
            cJSON_AddNumberToObject(e, "seconds", vdn_now() - t0);
        } else
            cJSON_AddStringToObject(e, "message", msg);
        emit(e);
    } else if (ok && !o->quiet)
        fprintf(stderr, "vdn render: wrote %s%s%s and %s\n", res->have_mp4 ? mp4 : lat,
                res->have_mp4 && res->have_latents ? ", " : "",
                res->have_mp4 && res->have_latents ? lat : "", rec);
}

int vdn_cmd_render(int argc, char **argv) {
    render_args o = {.crf = -1, .text_precision = VDN_PRECISION_BF16};
    vdn_render_request rq = {0};
    int prc = parse_args(argc, argv, &o, &rq);
    if (prc) return prc < 0 ? 0 : prc;
    char err[VDN_ERR_LEN];
    render_parts rp = {0};
    if (open_parts(&o, &rq, &rp, err, sizeof err)) {
        fprintf(stderr, "vdn render: %s\n", err);
        if (o.json) {
            cJSON *e = event("error");
            cJSON_AddStringToObject(e, "message", err);
            emit(e);
        }
        close_parts(&rp);
        return 1;
    }
    announce(&o, &rq, rp.eng);
    progress_state ps = {vdn_now(), o.quiet, o.json};
    vdn_pipeline pl = {.engines = &rp.eng,
                       .n_engines = 1,
                       .decoders = rp.dec ? &rp.dec : NULL,
                       .n_decoders = rp.dec ? 1 : 0,
                       .text = rp.text,
                       .prompt_store = rp.store,
                       .text_gpu = strcmp(vdn_engine_backend_name(rp.eng), "cpu") ? 0 : -1};
    vdn_pipeline_request preq = {.render = rq,
                                 .prompt_text = o.prompt_text,
                                 .first_frame = o.first_frame,
                                 .last_frame = o.last_frame,
                                 .save_latents = o.save_latents,
                                 .poster = o.poster,
                                 .crf = o.crf,
                                 .quiet = o.quiet || o.json,
                                 .progress = on_progress,
                                 .user = &ps,
                                 .stage = on_stage};
    vdn_pipeline_result res;
    int rc = vdn_pipeline_render(&pl, &preq, &res, err, sizeof err);
    report(&o, &rq, &res, err, ps.t0);
    close_parts(&rp);
    return rc == 0 ? 0 : 1;
}
