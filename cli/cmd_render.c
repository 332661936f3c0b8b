/* vdn render: one render from the command line; progress per NFE on stderr, or with --json one
 * JSON object per line on stdout for scripts. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "decode.h"
#include "engine.h"
#include "vdn_util.h"

static const char *usage =
    "usage: vdn render --checkpoint DIR --prompt-cache FILE --frames N --height H --width W\n"
    "                  --steps K --seed S --out PREFIX [options]\n"
    "\n"
    "Renders one clip; writes PREFIX.mp4 (H.264 + AAC, decoded with the VAEs beside the\n"
    "checkpoint's transformer/, or --vae/--audio-vae) and PREFIX.json (run record); the latents\n"
    "PREFIX.safetensors (video (24,F,H/16,W/16), audio (2,32,L), float32) only with\n"
    "--save-latents, or when no video VAE is there.\n"
    "\n"
    "  --checkpoint DIR     diffusers/native base or VDN checkpoint directory\n"
    "  --prompt-cache FILE  safetensors prompt cache (prompt_embeds, text_token_tags[, "
    "keyframes])\n"
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

int vdn_cmd_render(int argc, char **argv) {
    const char *ckpt = NULL;
    const char *adapters[64];
    int n_ad = 0, cpu = 0, quiet = 0, json = 0, save_latents = 0, crf = -1;
    const char *vae = NULL, *audio_vae = NULL;
    long long v;
    vdn_render_request rq = {0};
    int have_seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--cpu")) {
            cpu = 1;
            continue;
        }
        if (!strcmp(a, "--dense")) {
            rq.variant = "dense";
            continue;
        }
        if (!strcmp(a, "--quiet")) {
            quiet = 1;
            continue;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!strcmp(a, "--save-latents")) {
            save_latents = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "vdn render: %s needs a value (see --help)\n", a);
            return 2;
        }
        const char *val = argv[++i];
        if (!strcmp(a, "--checkpoint"))
            ckpt = val;
        else if (!strcmp(a, "--prompt-cache"))
            rq.prompt_cache = val;
        else if (!strcmp(a, "--out"))
            rq.out_prefix = val;
        else if (!strcmp(a, "--noise"))
            rq.noise_file = val;
        else if (!strcmp(a, "--variant"))
            rq.variant = val;
        else if (!strcmp(a, "--adapter")) {
            if (n_ad == 64) {
                fprintf(stderr, "vdn render: more than 64 --adapter\n");
                return 2;
            }
            adapters[n_ad++] = val;
        } else if (!strcmp(a, "--frames")) {
            if (parse_int(a, val, 1, 100000, &v)) return 2;
            rq.frames = (int)v;
        } else if (!strcmp(a, "--height")) {
            if (parse_int(a, val, 32, 16384, &v)) return 2;
            rq.height = (int)v;
        } else if (!strcmp(a, "--width")) {
            if (parse_int(a, val, 32, 16384, &v)) return 2;
            rq.width = (int)v;
        } else if (!strcmp(a, "--steps")) {
            if (parse_int(a, val, 1, 1000, &v)) return 2;
            rq.steps = (int)v;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 10);
            if (errno || *end || end == val || val[0] == '-') {
                fprintf(stderr, "vdn render: --seed '%s': expected an unsigned 64-bit integer\n",
                        val);
                return 2;
            }
            rq.seed = s;
            have_seed = 1;
        } else if (!strcmp(a, "--precision")) {
            vdn_precision p;
            if (vdn_precision_parse(val, &p) != 0) {
                fprintf(stderr, "vdn render: --precision '%s': expected bf16 or fp8\n", val);
                return 2;
            }
            vdn_engine_set_precision(p);
        } else if (!strcmp(a, "--ranks")) {
            if (parse_int(a, val, 1, 64, &v)) return 2;
            vdn_engine_set_ranks((int)v);
        } else if (!strcmp(a, "--threads")) {
            if (parse_int(a, val, 1, 64, &v)) return 2;
            vdn_engine_set_threads((int)v);
        } else if (!strcmp(a, "--vae")) {
            vae = val;
        } else if (!strcmp(a, "--audio-vae")) {
            audio_vae = val;
        } else if (!strcmp(a, "--crf")) {
            if (parse_int(a, val, 0, 51, &v)) return 2;
            crf = (int)v;
        } else if (!strcmp(a, "--video-shift")) {
            if (parse_float(a, val, &rq.video_shift)) return 2;
        } else if (!strcmp(a, "--audio-shift")) {
            if (parse_float(a, val, &rq.audio_shift)) return 2;
        } else {
            fprintf(stderr, "vdn render: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    const char *missing = !ckpt              ? "--checkpoint"
                          : !rq.prompt_cache ? "--prompt-cache"
                          : !rq.frames       ? "--frames"
                          : !rq.height       ? "--height"
                          : !rq.width        ? "--width"
                          : !rq.steps        ? "--steps"
                          : !have_seed       ? "--seed"
                          : !rq.out_prefix   ? "--out"
                                             : NULL;
    if (missing) {
        fprintf(stderr, "vdn render: missing %s (see --help)\n", missing);
        return 2;
    }
    char err[VDN_ERR_LEN];
    vdn_engine *eng = vdn_engine_open(ckpt, adapters, n_ad,
                                      cpu ? VDN_BACKEND_CPU : VDN_BACKEND_AUTO, err, sizeof err);
    if (!eng) {
        fprintf(stderr, "vdn render: %s\n", err);
        if (json) {
            cJSON *o = event("error");
            cJSON_AddStringToObject(o, "message", err);
            emit(o);
        }
        return 1;
    }
    if (json) {
        cJSON *o = event("start");
        cJSON_AddStringToObject(o, "backend", vdn_engine_backend_name(eng));
        cJSON_AddNumberToObject(o, "pixel_frames", vdn_snap_frames(rq.frames));
        cJSON_AddNumberToObject(o, "latent_frames", vdn_latent_frames(rq.frames));
        cJSON_AddNumberToObject(o, "height", rq.height);
        cJSON_AddNumberToObject(o, "width", rq.width);
        cJSON_AddNumberToObject(o, "nfe_total", rq.steps);
        emit(o);
        char msgs[8][VDN_REQ_WARN_LEN];
        int nw = vdn_request_warnings(&rq, msgs, 8);
        for (int i = 0; i < nw; i++) {
            o = event("warning");
            cJSON_AddStringToObject(o, "message", msgs[i]);
            emit(o);
        }
    } else if (!quiet)
        fprintf(stderr, "vdn render: backend %s, %d pixel frames -> %d latent frames, %d NFE\n",
                vdn_engine_backend_name(eng), vdn_snap_frames(rq.frames),
                vdn_latent_frames(rq.frames), rq.steps);
    progress_state ps = {vdn_now(), quiet, json};
    int rc = vdn_engine_render(eng, &rq, on_progress, &ps, err, sizeof err);
    if (rc != 0) fprintf(stderr, "vdn render: %s\n", err);
    char vdir[4400], adir[4400], lat[4200], mp4[4200];
    snprintf(lat, sizeof lat, "%s.safetensors", rq.out_prefix);
    snprintf(mp4, sizeof mp4, "%s.mp4", rq.out_prefix);
    if (!vae && vdn_vae_find(ckpt, "vae", vdir, sizeof vdir) == 0) vae = vdir;
    if (!audio_vae && vdn_vae_find(ckpt, "audio_vae", adir, sizeof adir) == 0) audio_vae = adir;
    int have_mp4 = 0;
    if (rc == 0 && vae) { /* the product: the mp4; the latents stay only when asked */
        vdn_decode_opts dopt = {.latents = lat,
                                .mp4 = mp4,
                                .vae_dir = vae,
                                .audio_vae_dir = audio_vae,
                                .crf = crf,
                                .quiet = quiet || json};
        rc = vdn_decode_file(&dopt, err, sizeof err);
        if (rc != 0) fprintf(stderr, "vdn render: decoding: %s\n", err);
        have_mp4 = rc == 0;
        if (!save_latents) unlink(lat);
    } else if (rc == 0 && !quiet && !json)
        fprintf(stderr, "vdn render: no video VAE beside %s (and no --vae): latents only\n", ckpt);
    if (json) {
        cJSON *o = event(rc == 0 ? "done" : "error");
        if (rc == 0) {
            char path[4096];
            if (have_mp4) cJSON_AddStringToObject(o, "mp4", mp4);
            if (!have_mp4 || save_latents) cJSON_AddStringToObject(o, "output", lat);
            snprintf(path, sizeof path, "%s.json", rq.out_prefix);
            cJSON_AddStringToObject(o, "record", path);
            cJSON_AddNumberToObject(o, "seconds", vdn_now() - ps.t0);
        } else
            cJSON_AddStringToObject(o, "message", err);
        emit(o);
    } else if (rc == 0 && !quiet)
        fprintf(stderr, "vdn render: wrote %s%s%s and %s.json\n", have_mp4 ? mp4 : lat,
                have_mp4 && save_latents ? ", " : "", have_mp4 && save_latents ? lat : "",
                rq.out_prefix);
    vdn_engine_close(eng);
    return rc == 0 ? 0 : 1;
}
