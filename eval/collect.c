/* `vdn eval report`: read a sweep's outputs back from the object store, compute the metrics of
 * every (prompt, variant) output, run the configured external scorers, and hand the results to
 * report.c. A missing or damaged output is an error for that output only: the report still
 * comes out, with the error listed and the pair left out of the statistics. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frames.h"
#include "metrics.h"
#include "pictures.h"
#include "pixel_scores.h"
#include "record_timing.h"
#include "results.h"
#include "safetensors.h"
#include "score_job.h"
#include "scorer.h"
#include "store.h"
#include "suite.h"
#include "sweep.h"
#include "vae.h"
#include "vdn_util.h"

#define PSNR_CAP 100.0 /* identical outputs give +inf; capped so they still count in the means */

typedef struct {
    float *video; /* (C, F, H, W) latents; NULL when the job stored none (save_latents off) */
    int C, F, H, W;
    char *local_mp4; /* the stored mp4, downloaded: the pixel metrics' frames */
    float *px; /* no mp4 but --vae: the latents decoded (3, pF, pH, pW) in [0, 1], else NULL */
    int pF, pH, pW;
    char *local_video, *local_record;
    vdn_pixel_scores pix;  /* from the pixel pass (pix.T == 0: none) */
    vdn_score_result farm; /* the output's scoring job's result (have_farm) */
    int have_farm;
} output;

/* The pixel metrics, added to the report when the first output with frames comes. */
typedef struct {
    int psnr, end_psnr, end_ssim, flow, tdiff, tdiff_var;
    int kf_psnr, kf_ssim; /* against the keyframe pictures (-1: the suite has none) */
    int pictures;         /* whether any line of the suite has pictures */
    int n_mp4, n_vae;     /* outputs whose frames came from their mp4 / from --vae */
    int n_farm;           /* outputs scored by a farm job (vdn eval score) */
} pixel_metrics;

/* --vae: the output's frames through the video VAE (CPU). A clip too short for one decoder
 * chunk, or a latent grid the VAE does not take, leaves px NULL with a message. */
static int decode_pixels(vdn_video_vae *vae, output *o, char *err, size_t errlen) {
    const vdn_vae_video_config *c = vdn_video_vae_config(vae);
    if (o->C != c->latent_channels)
        return vdn_fail(err, errlen, "pixels: %d latent channels, the VAE takes %d", o->C,
                        c->latent_channels);
    char e2[512];
    int F = vdn_video_vae_frames(vae, o->F, e2, sizeof e2);
    if (F < 0) return vdn_fail(err, errlen, "pixels: %s", e2);
    o->pF = F;
    o->pH = o->H * c->spatial_ratio;
    o->pW = o->W * c->spatial_ratio;
    o->px = malloc(sizeof(float) * 3 * (size_t)F * o->pH * o->pW);
    if (!o->px) return vdn_fail(err, errlen, "pixels: out of memory");
    if (vdn_video_vae_decode(vae, o->video, o->F, o->H, o->W, o->px, NULL, NULL, err, errlen)) {
        free(o->px);
        o->px = NULL;
        return -1;
    }
    return 0;
}

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: vdn eval report SWEEP.json --out DIR [--scorers CONF.json] [--strips N]\n"
        "                       [--baseline VARIANT] [--resamples N] [--seed S] [--title TEXT]\n"
        "                       [--keep-outputs] [--vae DIR] [--videos strips|all|none]\n"
        "Reads every output of the sweep from its store, computes the metrics (docs/eval.md),\n"
        "paired statistics against the baseline, and writes DIR/report.html + DIR/report.json.\n"
        "Outputs are downloaded into DIR/outputs/ one prompt at a time and removed after scoring\n"
        "unless --keep-outputs. Pixel metrics (PSNR and endpoint PSNR/SSIM to the baseline's\n"
        "frames, motion, temporal stability) and frame strips come from each job's stored mp4;\n"
        "--vae DIR decodes, with that video VAE on the CPU, the outputs that have latents and no\n"
        "mp4 (older runs).\n"
        "--videos: whose mp4s the page plays side by side, kept in DIR/videos/ (default: the\n"
        "prompts with frame strips; all: every prompt's; none).\n");
}

static double cap(double x) {
    return x > PSNR_CAP ? PSNR_CAP : x;
}

/* Video tensor of an output file: float, 4-D (C, F, H, W). */
static int load_video(const char *path, output *o, char *err, size_t errlen) {
    vdn_st_file *f = vdn_st_open(path, err, errlen);
    if (!f) return -1;
    const vdn_st_entry *e = vdn_st_find(f, "video");
    int rc = -1;
    if (!e) {
        vdn_fail(err, errlen, "%s: no tensor 'video'; expected (24, F, H, W) float32", path);
    } else if (e->ndim != 4 || e->shape[0] < 1 || e->shape[1] < 1 || e->shape[2] < 1 ||
               e->shape[3] < 1 || e->shape[0] > 4096 || e->shape[1] > 100000 ||
               e->shape[2] > 4096 || e->shape[3] > 4096) {
        vdn_fail(err, errlen, "%s: tensor 'video': expected 4 dims (C, F, H, W), got %d", path,
                 e->ndim);
    } else {
        o->C = (int)e->shape[0];
        o->F = (int)e->shape[1];
        o->H = (int)e->shape[2];
        o->W = (int)e->shape[3];
        o->video = vdn_xmalloc((size_t)e->numel * sizeof(float));
        rc = vdn_st_to_f32(f, e, o->video, err, errlen);
        if (rc) {
            free(o->video);
            o->video = NULL;
        } else {
            for (int64_t i = 0; i < e->numel; i++)
                if (!isfinite(o->video[i])) {
                    rc = vdn_fail(err, errlen, "%s: tensor 'video': element %lld is not finite",
                                  path, (long long)i);
                    free(o->video);
                    o->video = NULL;
                    break;
                }
        }
    }
    vdn_st_close(f);
    return rc;
}

/* Seconds per model evaluation (mean of timing.nfe_seconds) and end-to-end seconds. */
static int load_timing(const char *path, double *spn, double *total, char *err, size_t errlen) {
    size_t len;
    *spn = *total = NAN;
    char *text = vdn_read_file(path, &len, err, errlen);
    if (!text) return -1;
    int rc = vdn_record_timing_parse(text, len, path, spn, total, err, errlen);
    free(text);
    return rc;
}

/* Keyframe latent "keyframe_first" / "keyframe_last": (C,1,h,w) or (1,C,1,h,w). */
static float *load_keyframe(const char *path, const char *name, int C, int H, int W, char *err,
                            size_t errlen) {
    vdn_st_file *f = vdn_st_open(path, err, errlen);
    if (!f) return NULL;
    const vdn_st_entry *e = vdn_st_find(f, name);
    float *out = NULL;
    int off = e && e->ndim == 5 ? 1 : 0;
    if (!e) {
        vdn_fail(err, errlen, "%s: no tensor '%s' (the mode needs it for endpoint fidelity)", path,
                 name);
    } else if ((e->ndim != 4 && e->ndim != 5) || (off && e->shape[0] != 1) || e->shape[off] != C ||
               e->shape[off + 1] != 1 || e->shape[off + 2] != H || e->shape[off + 3] != W) {
        vdn_fail(err, errlen, "%s: tensor '%s': expected shape (%d, 1, %d, %d) to match the output",
                 path, name, C, H, W);
    } else {
        out = vdn_xmalloc((size_t)e->numel * sizeof *out);
        if (vdn_st_to_f32(f, e, out, err, errlen)) {
            free(out);
            out = NULL;
        }
    }
    vdn_st_close(f);
    return out;
}

/* Endpoint fidelity: preview of generated frame `frame` against the keyframe's preview. */
static void endpoint_scores(const output *o, const float *kf, int frame, double *psnr,
                            double *ssim) {
    int s = vdn_preview_scale(o->H, o->W), h = o->H * s, w = o->W * s;
    double *a = vdn_xmalloc((size_t)h * w * sizeof *a), *b = vdn_xmalloc((size_t)h * w * sizeof *b);
    vdn_latent_preview(kf, o->C, 1, o->H, o->W, 0, s, a, NULL);
    vdn_latent_preview(o->video, o->C, o->F, o->H, o->W, frame, s, b, NULL);
    *psnr = cap(vdn_psnr(a, b, (size_t)h * w, 1.0));
    *ssim = vdn_ssim(a, b, h, w, 1.0);
    free(a);
    free(b);
}

/* A keyframe file named in the suite: a local path, file://PATH, or s3://BUCKET/KEY (fetched
 * into the report's folder). Writes the local path to out. */
static int local_copy(const char *p, const char *dir, const char *id, char *out, size_t outlen,
                      char *err, size_t errlen) {
    if (!strncmp(p, "file://", 7)) {
        snprintf(out, outlen, "%s", p + 7);
        return 0;
    }
    if (strncmp(p, "s3://", 5) != 0) {
        if (strstr(p, "://"))
            return vdn_fail(err, errlen, "%s: expected a local path, file:// or s3:// URI", p);
        snprintf(out, outlen, "%s", p);
        return 0;
    }
    const char *slash = strchr(p + 5, '/');
    if (!slash || !slash[1]) return vdn_fail(err, errlen, "%s: expected s3://BUCKET/KEY", p);
    char uri[1024];
    snprintf(uri, sizeof uri, "%.*s", (int)(slash - p), p);
    vdn_store *st = vdn_store_open(uri, NULL, err, errlen);
    if (!st) return -1;
    snprintf(out, outlen, "%s/keyframes_%s.safetensors", dir, id);
    int rc = vdn_store_get_file(st, slash + 1, out, err, errlen);
    vdn_store_close(st);
    return rc;
}

/* The mp4 of an output: its latents key with ".mp4" for ".safetensors" (worker/attempt.c
 * names the job's objects so: PREFIX.safetensors, PREFIX.mp4, PREFIX.png, PREFIX.json). */
static void mp4_key_of(const char *latents_key, char *out, size_t len) {
    size_t n = strlen(latents_key), m = strlen(".safetensors");
    if (n >= m && !strcmp(latents_key + n - m, ".safetensors")) n -= m;
    snprintf(out, len, "%.*s.mp4", (int)n, latents_key);
}

/* Downloads what the job stored: the latents (only when asked for: save_latents, or a worker
 * without a video VAE) and the mp4. Either is enough; neither, or a store error, is an error
 * for the output (-1). Latents that do not load are an error but the mp4 is still used. */
static int fetch_output(vdn_store *st, const vdn_sweep_pair *q, const char *dir, const char *id,
                        const char *vkey, int want_mp4, output *o, vdn_results *r, int v, int p) {
    char err[VDN_ERR_LEN], mkey[1100], lv[4300], lm[4300];
    mp4_key_of(q->video_key, mkey, sizeof mkey);
    int have_lat = vdn_store_exists(st, q->video_key, NULL, err, sizeof err);
    int have_mp4 = have_lat < 0 ? -1 : vdn_store_exists(st, mkey, NULL, err, sizeof err);
    if (have_lat < 0 || have_mp4 < 0) {
        vdn_results_set_error(r, v, p, "%s", err);
        return -1;
    }
    if (!have_lat && !have_mp4) {
        vdn_results_set_error(r, v, p, "no output in the store: neither %s nor %s", q->video_key,
                              mkey);
        return -1;
    }
    if (have_lat) {
        snprintf(lv, sizeof lv, "%s/%s_%s.safetensors", dir, id, vkey);
        if (vdn_store_get_file(st, q->video_key, lv, err, sizeof err) ||
            load_video(lv, o, err, sizeof err))
            vdn_results_set_error(r, v, p, "%s", err);
        else
            o->local_video = vdn_xstrdup(lv);
    }
    if (have_mp4 && want_mp4) {
        snprintf(lm, sizeof lm, "%s/%s_%s.mp4", dir, id, vkey);
        if (vdn_store_get_file(st, mkey, lm, err, sizeof err))
            vdn_results_set_error(r, v, p, "%s", err);
        else
            o->local_mp4 = vdn_xstrdup(lm);
    }
    return o->video || o->local_mp4 || (have_mp4 && !want_mp4) ? 0 : -1;
}

static void score_key(const vdn_sweep *sw, const char *id, const char *vkey, char *key,
                      size_t len) {
    snprintf(key, len, "eval/%s/scores/%s/%s.json", sw->tag, id, vkey);
}

/* Whether every output of the prompt has its scoring job's result. */
static int farm_covers(const vdn_sweep *sw, vdn_store *st, const char *id) {
    char key[1200], err[VDN_ERR_LEN];
    for (int v = 0; v < sw->n_variants; v++) {
        score_key(sw, id, sw->variants[v].key, key, sizeof key);
        if (vdn_store_exists(st, key, NULL, err, sizeof err) != 1) return 0;
    }
    return 1;
}

/* The output's scoring job's result (eval/TAG/scores/PROMPT/VARIANT_KEY.json), when there is
 * one: 1 and o->farm filled, or 0 (none, or unreadable: then an error and scored here). */
static int farm_result(vdn_store *st, const vdn_sweep *sw, const char *id, const char *vkey,
                       const char *dir, output *o, vdn_results *r, int v, int p) {
    char key[1200], local[4400], err[VDN_ERR_LEN];
    score_key(sw, id, vkey, key, sizeof key);
    if (vdn_store_exists(st, key, NULL, err, sizeof err) != 1) return 0;
    snprintf(local, sizeof local, "%s/%s_%s_score.json", dir, id, vkey);
    size_t len;
    char *text = NULL;
    int ok = vdn_store_get_file(st, key, local, err, sizeof err) == 0 &&
             (text = vdn_read_file(local, &len, err, sizeof err)) != NULL &&
             vdn_score_result_parse(text, len, key, &o->farm, err, sizeof err) == 0;
    free(text);
    remove(local);
    if (!ok) vdn_results_set_error(r, v, p, "farm scores: %s (scored here instead)", err);
    o->have_farm = ok;
    return ok;
}

/* Metrics on the latents: motion and temporal change of the latent video, and, for keyframe
 * modes, the preview of the endpoint frames against the keyframe latents the request
 * conditioned on. */
static void latent_scores(output *o, const vdn_suite_item *it, const vdn_suite *suite,
                          const char *cache_dir, vdn_results *r, int v, int p, int m_mo, int m_td,
                          int m_tv, int m_ep, int m_es) {
    char err[VDN_ERR_LEN];
    *vdn_results_at(r, m_mo, v, p) = vdn_motion_mean_flow(o->video, o->C, o->F, o->H, o->W);
    double tm, tvv;
    vdn_temporal_diff(o->video, o->C, o->F, o->H, o->W, &tm, &tvv);
    *vdn_results_at(r, m_td, v, p) = tm;
    *vdn_results_at(r, m_tv, v, p) = tvv;
    int nk = vdn_suite_mode_keyframes(it->mode);
    if (!nk || !(it->keyframes || it->prompt_cache)) return; /* pictures: the pixel pass's */
    char *kname = vdn_suite_resolve(suite, it->keyframes ? it->keyframes : it->prompt_cache);
    char kpath[4400];
    double ps = 0, ss = 0;
    int got = 0;
    const char *names[2] = {"keyframe_first", "keyframe_last"};
    if (local_copy(kname, cache_dir, it->id, kpath, sizeof kpath, err, sizeof err)) {
        vdn_results_set_error(r, v, p, "keyframes: %s", err);
        kpath[0] = 0;
    }
    for (int k = 0; k < 2 && kpath[0]; k++) {
        if (k == 0 && it->mode == VDN_MODE_L2VA) continue;
        if (k == 1 && it->mode == VDN_MODE_I2VA) continue;
        float *kf = load_keyframe(kpath, names[k], o->C, o->H, o->W, err, sizeof err);
        if (!kf) {
            vdn_results_set_error(r, v, p, "%s", err);
            continue;
        }
        double a, b;
        endpoint_scores(o, kf, k == 0 ? 0 : o->F - 1, &a, &b);
        ps += a;
        ss += b;
        got++;
        free(kf);
    }
    if (got == nk) {
        *vdn_results_at(r, m_ep, v, p) = ps / got;
        *vdn_results_at(r, m_es, v, p) = ss / got;
    }
    free(kname);
}

/* {video} is the product a person watches (the mp4) when there is one, else the latents;
 * {latents} the latents file, empty when the job stored none. */
static void run_scorers(const vdn_scorer_set *scorers, const output *o, const vdn_suite_item *it,
                        const char *variant, vdn_results *r, int v, int p) {
    char err[VDN_ERR_LEN];
    for (int s = 0; s < scorers->n; s++) {
        vdn_scorer_args sa = {o->local_mp4 ? o->local_mp4 : o->local_video,
                              o->local_video,
                              o->local_record,
                              it->prompt,
                              it->id,
                              variant};
        char **keys;
        double *vals;
        int nsc;
        if (vdn_scorer_run(&scorers->s[s], &sa, &keys, &vals, &nsc, err, sizeof err)) {
            vdn_results_set_error(r, v, p, "%s", err);
            continue;
        }
        for (int k = 0; k < nsc; k++) {
            char name[128];
            snprintf(name, sizeof name, "%s.%s", scorers->s[s].name, keys[k]);
            int m = vdn_results_find_metric(r, name);
            if (m < 0)
                m = vdn_results_add_metric(
                    r, name, name, "", scorers->s[s].higher_is_better ? 1 : -1, VDN_METRIC_PAIRED);
            *vdn_results_at(r, m, v, p) = vals[k];
        }
        vdn_scores_free(keys, vals, nsc);
    }
}

/* The output's decoded frames: its mp4, else what --vae decoded. NULL: none (err empty), or
 * the mp4 does not open (err says why). */
static vdn_frames *frames_of(const output *o, char *err, size_t errlen) {
    err[0] = 0;
    if (o->local_mp4) return vdn_frames_open_mp4(o->local_mp4, err, errlen);
    if (o->px) return vdn_frames_from_buffer(o->px, o->pF, o->pH, o->pW);
    return NULL;
}

static int has_frames(const output *o) {
    return o->local_mp4 || o->px;
}

static void add_pixel_metrics(vdn_results *r, pixel_metrics *pm) {
    if (pm->psnr >= 0) return;
    pm->psnr = vdn_results_add_metric(r, "pixel_psnr", "PSNR to baseline (decoded frames)", "dB", 1,
                                      VDN_METRIC_REFERENCE);
    pm->end_psnr = vdn_results_add_metric(
        r, "pixel_endpoint_psnr", "Endpoint PSNR to baseline (decoded frames, keyframe modes)",
        "dB", 1, VDN_METRIC_REFERENCE);
    pm->end_ssim = vdn_results_add_metric(
        r, "pixel_endpoint_ssim", "Endpoint SSIM to baseline (decoded frames, keyframe modes)", "",
        1, VDN_METRIC_REFERENCE);
    if (pm->pictures) /* a suite with pictures: the FL2VA fidelity */
        pm->kf_psnr = vdn_results_add_metric(
            r, "keyframe_psnr", "FL2VA PSNR: end frames vs keyframe pictures (decoded frames)",
            "dB", 1, VDN_METRIC_PAIRED);
    if (pm->pictures)
        pm->kf_ssim = vdn_results_add_metric(
            r, "keyframe_ssim", "FL2VA SSIM: end frames vs keyframe pictures (decoded frames)", "",
            1, VDN_METRIC_PAIRED);
    pm->flow = vdn_results_add_metric(r, "pixel_motion_flow", "Mean ILK flow (decoded frames)",
                                      "px", 0, VDN_METRIC_PAIRED);
    pm->tdiff = vdn_results_add_metric(r, "pixel_temporal_diff",
                                       "Frame-to-frame RMS change (decoded frames)", "", 0,
                                       VDN_METRIC_PAIRED);
    pm->tdiff_var = vdn_results_add_metric(r, "pixel_temporal_diff_var",
                                           "Variance of frame-to-frame change (decoded frames)", "",
                                           0, VDN_METRIC_PAIRED);
}

/* An item's keyframe pictures on its canvas, read once per prompt for every variant. */
typedef struct {
    float *first, *last; /* (3, height, width), NULL where the item has none */
    char *error;         /* why they could not be read, NULL when fine */
} prompt_pictures;

/* A picture named in the suite: a local path (relative to the suite), file://PATH, s3://BUCKET/KEY
 * or a key in the sweep's store (a name that is no local file), fetched into dir. */
static int picture_local(const vdn_suite *suite, vdn_store *st, const char *name, const char *dir,
                         const char *id, const char *which, char *out, size_t outlen, char *err,
                         size_t errlen) {
    char *p = vdn_suite_resolve(suite, name);
    int rc = 0;
    const char *dot = strrchr(name, '.'), *slash = strrchr(name, '/');
    const char *ext = dot && (!slash || dot > slash) && strlen(dot) <= 6 ? dot : "";
    if (!strncmp(p, "file://", 7)) {
        snprintf(out, outlen, "%s", p + 7);
    } else if (!strncmp(p, "s3://", 5)) {
        const char *k = strchr(p + 5, '/');
        char uri[1024];
        vdn_store *s3 = NULL;
        snprintf(out, outlen, "%s/%s_%s%s", dir, id, which, ext);
        if (!k || !k[1]) {
            rc = vdn_fail(err, errlen, "%s: expected s3://BUCKET/KEY", p);
        } else {
            snprintf(uri, sizeof uri, "%.*s", (int)(k - p), p);
            s3 = vdn_store_open(uri, NULL, err, errlen);
            rc = s3 ? vdn_store_get_file(s3, k + 1, out, err, errlen) : -1;
        }
        if (s3) vdn_store_close(s3);
    } else if (strstr(p, "://")) {
        rc = vdn_fail(err, errlen, "%s: expected a path, a store key, file:// or s3:// URI", p);
    } else if (access(p, F_OK) == 0) {
        snprintf(out, outlen, "%s", p);
    } else { /* a key in the sweep's store */
        snprintf(out, outlen, "%s/%s_%s%s", dir, id, which, ext);
        rc = vdn_store_get_file(st, name, out, err, errlen);
    }
    free(p);
    return rc;
}

static void pictures_load(const vdn_suite *suite, const vdn_suite_item *it, vdn_store *st,
                          const char *dir, prompt_pictures *pp) {
    memset(pp, 0, sizeof *pp);
    if (!it->first_frame && !it->last_frame) return;
    char err[VDN_ERR_LEN], a[4400] = "", b[4400] = "";
    if ((it->first_frame && picture_local(suite, st, it->first_frame, dir, it->id, "first", a,
                                          sizeof a, err, sizeof err)) ||
        (it->last_frame && picture_local(suite, st, it->last_frame, dir, it->id, "last", b,
                                         sizeof b, err, sizeof err)) ||
        vdn_eval_canvas(a[0] ? a : NULL, b[0] ? b : NULL, it->height, it->width, &pp->first,
                        &pp->last, err, sizeof err))
        pp->error = vdn_xstrdup(err);
}

static void pictures_free(prompt_pictures *pp) {
    free(pp->first);
    free(pp->last);
    free(pp->error);
    memset(pp, 0, sizeof *pp);
}

static void add_score(vdn_results *r, const char *name, int higher, double x, int v, int p) {
    int m = vdn_results_find_metric(r, name);
    if (m < 0) m = vdn_results_add_metric(r, name, name, "", higher ? 1 : -1, VDN_METRIC_PAIRED);
    *vdn_results_at(r, m, v, p) = x;
}

/* An output scored by a farm job: its numbers, strip, scores and errors into the results. */
static void farm_metrics(output *o, int is_baseline, int tile_w, int tile_h, vdn_results *r, int v,
                         int p, pixel_metrics *pm) {
    vdn_score_result *f = &o->farm;
    add_pixel_metrics(r, pm);
    pm->n_farm++;
    *vdn_results_at(r, pm->flow, v, p) = f->pix.flow;
    *vdn_results_at(r, pm->tdiff, v, p) = f->pix.tdiff;
    *vdn_results_at(r, pm->tdiff_var, v, p) = f->pix.tdiff_var;
    if (pm->pictures) {
        *vdn_results_at(r, pm->kf_psnr, v, p) = f->pix.kf_psnr;
        *vdn_results_at(r, pm->kf_ssim, v, p) = f->pix.kf_ssim;
    }
    if (!is_baseline) {
        *vdn_results_at(r, pm->psnr, v, p) = f->pix.psnr;
        *vdn_results_at(r, pm->end_psnr, v, p) = f->pix.end_psnr;
        *vdn_results_at(r, pm->end_ssim, v, p) = f->pix.end_ssim;
    }
    for (int k = 0; k < f->n_scores; k++)
        add_score(r, f->score_keys[k], f->score_higher[k], f->score_values[k], v, p);
    for (int k = 0; k < f->n_errors; k++)
        vdn_results_set_error(r, v, p, "farm scoring: %s", f->errors[k]);
    /* its strip, when it has the prompt's tile size */
    vdn_pixel_scores_free(&o->pix);
    o->pix = f->pix;
    if (f->tile_w != tile_w || f->tile_h != tile_h) o->pix.strip_cols = 0;
    memset(&f->pix, 0, sizeof f->pix);
}

/* Pixel metrics of every output of one prompt with frames: its own in one pass, read in
 * lockstep with the baseline's frames for the fidelity metrics (the baseline is decoded once
 * more per variant: decoding costs far less than the flow). Endpoints: the paper compares the
 * endpoint frames with the conditioning images, which the suite holds only as latents, so
 * they are compared with the baseline's endpoint frames (docs/eval.md). */
static void pixel_pass(output *outs, int nv, int bl, const vdn_suite_item *it,
                       const prompt_pictures *pics, int strip_px, int tile_w, int tile_h,
                       vdn_results *r, int p, pixel_metrics *pm) {
    const vdn_suite_mode mode = it->mode;
    char err[VDN_ERR_LEN];
    for (int v = 0; v < nv; v++) {
        output *o = &outs[v];
        if (o->have_farm) {
            farm_metrics(o, v == bl, tile_w, tile_h, r, v, p, pm);
            continue;
        }
        if (!has_frames(o)) continue;
        vdn_frames *f = frames_of(o, err, sizeof err), *b = NULL;
        if (f && v != bl && has_frames(&outs[bl])) {
            b = frames_of(&outs[bl], err, sizeof err);
            if (!b) vdn_results_set_error(r, v, p, "pixels: baseline: %s", err);
        }
        if (!f) {
            vdn_results_set_error(r, v, p, "pixels: %s", err);
            continue;
        }
        vdn_pixel_opts po = {.first = mode == VDN_MODE_I2VA || mode == VDN_MODE_FL2VA,
                             .last = mode == VDN_MODE_L2VA || mode == VDN_MODE_FL2VA,
                             .kf_first = pics->first,
                             .kf_last = pics->last,
                             .kf_h = it->height,
                             .kf_w = it->width,
                             .strip_cols = strip_px ? 6 : 0,
                             .tile_w = tile_w,
                             .tile_h = tile_h};
        if (pics->error) vdn_results_set_error(r, v, p, "keyframe pictures: %s", pics->error);
        if (vdn_pixel_scores_run(f, b, &po, &o->pix, err, sizeof err)) {
            vdn_results_set_error(r, v, p, "pixels of %s: %s",
                                  o->local_mp4 ? o->local_mp4 : "the --vae decode", err);
        } else {
            add_pixel_metrics(r, pm);
            if (o->local_mp4)
                pm->n_mp4++;
            else
                pm->n_vae++;
            *vdn_results_at(r, pm->flow, v, p) = o->pix.flow;
            *vdn_results_at(r, pm->tdiff, v, p) = o->pix.tdiff;
            *vdn_results_at(r, pm->tdiff_var, v, p) = o->pix.tdiff_var;
            if (pm->pictures) {
                *vdn_results_at(r, pm->kf_psnr, v, p) = o->pix.kf_psnr;
                *vdn_results_at(r, pm->kf_ssim, v, p) = o->pix.kf_ssim;
            }
            if (b) {
                *vdn_results_at(r, pm->psnr, v, p) = o->pix.psnr;
                *vdn_results_at(r, pm->end_psnr, v, p) = o->pix.end_psnr;
                *vdn_results_at(r, pm->end_ssim, v, p) = o->pix.end_ssim;
            }
        }
        vdn_frames_close(f);
        vdn_frames_close(b);
    }
}

/* Latent fidelity against the baseline output of the same prompt (same seed, same noise). */
static void latent_fidelity(const output *outs, int nv, vdn_results *r, int p, int m_l2, int m_fp) {
    const output *b = &outs[r->baseline];
    int np = r->n_prompts;
    for (int v = 0; v < nv; v++) {
        const output *o = &outs[v];
        if (v == r->baseline || !o->video || !b->video) continue;
        if (o->C != b->C || o->F != b->F || o->H != b->H || o->W != b->W) {
            vdn_results_set_error(
                r, v, p, "video shape (%d,%d,%d,%d) differs from the baseline's (%d,%d,%d,%d)",
                o->C, o->F, o->H, o->W, b->C, b->F, b->H, b->W);
            continue;
        }
        size_t n = (size_t)o->C * o->F * o->H * o->W;
        *vdn_results_at(r, m_l2, v, p) = vdn_rel_l2(b->video, o->video, n);
        *vdn_results_at(r, m_fp, v, p) = cap(vdn_latent_psnr(b->video, o->video, n));
        size_t i = (size_t)v * np + p, plane = (size_t)o->H * o->W;
        r->frame_count[i] = o->F;
        r->frame_rel_l2[i] = vdn_xmalloc((size_t)o->F * sizeof(double));
        r->frame_psnr[i] = vdn_xmalloc((size_t)o->F * sizeof(double));
        double lo = b->video[0], hi = b->video[0]; /* the whole baseline's range, as overall */
        for (size_t k = 0; k < n; k++) {
            if (b->video[k] < lo) lo = b->video[k];
            if (b->video[k] > hi) hi = b->video[k];
        }
        for (int f = 0; f < o->F; f++) { /* gather frame f of every channel */
            double num = 0, den = 0;
            for (int c = 0; c < o->C; c++) {
                const float *x = o->video + ((size_t)c * o->F + f) * plane,
                            *y = b->video + ((size_t)c * b->F + f) * plane;
                for (size_t k = 0; k < plane; k++) {
                    double d = (double)x[k] - y[k];
                    num += d * d;
                    den += (double)y[k] * y[k];
                }
            }
            r->frame_rel_l2[i][f] = den > 0 ? sqrt(num / den) : NAN;
            double mse = num / ((double)o->C * (double)plane);
            r->frame_psnr[i][f] = mse > 0 ? cap(10 * log10((hi - lo) * (hi - lo) / mse)) : PSNR_CAP;
        }
    }
}

/* The strip's tile: decoded frames when the reference output (the baseline, else the first
 * output there is) has them, at most 96 pixels tall; else the latent preview, as before. */
static void strip_tiles(const output *outs, int nv, int bl, int *px, int *tw, int *th) {
    for (int k = 0; k < nv; k++) { /* the farm's strips, the baseline's first */
        const output *f = &outs[k == 0 ? bl : k <= bl ? k - 1 : k];
        if (f->have_farm && f->farm.pix.strip_cols) {
            *px = 1, *tw = f->farm.tile_w, *th = f->farm.tile_h;
            return;
        }
    }
    const output *ref = has_frames(&outs[bl]) || outs[bl].video ? &outs[bl] : NULL;
    for (int v = 0; v < nv && !ref; v++)
        if (has_frames(&outs[v]) || outs[v].video) ref = &outs[v];
    *px = *tw = *th = 0;
    if (!ref) return;
    char err[VDN_ERR_LEN];
    vdn_frames *f = has_frames(ref) ? frames_of(ref, err, sizeof err) : NULL;
    if (f) {
        int T, H, W;
        vdn_frames_info(f, &T, &H, &W);
        vdn_frames_close(f);
        *px = 1;
        *th = H < 96 ? H : 96;
        *tw = (int)lround((double)W * *th / H);
        if (*tw < 1) *tw = 1;
    } else if (ref->video) {
        int scale = 96 / ref->H;
        scale = scale < 1 ? 1 : scale > 8 ? 8 : scale;
        *tw = ref->W * scale;
        *th = ref->H * scale;
    }
}

static void add_strip(vdn_results *r, const output *outs, int nv, int p, int strip_px, int tw,
                      int th) {
    vdn_strip *sp = &r->strips[r->n_strips++];
    sp->prompt = p;
    sp->rgb = vdn_xcalloc((size_t)nv, sizeof *sp->rgb);
    sp->pixels = strip_px;
    if (!tw) return;
    int cols = 0;
    for (int v = 0; v < nv; v++) {
        const output *o = &outs[v];
        int c = strip_px ? o->pix.strip_cols : o->video ? (o->F < 6 ? o->F : 6) : 0;
        if (c > cols) cols = c;
    }
    sp->frames = cols;
    sp->tile_w = tw;
    sp->tile_h = th;
    sp->gap = th < 32 ? 1 : 2;
    int rw = vdn_strip_width(sp);
    size_t tile = (size_t)tw * th * 3;
    uint8_t *t = vdn_xmalloc(tile);
    for (int v = 0; v < nv; v++) {
        const output *o = &outs[v];
        int have = strip_px ? o->pix.strip_cols > 0
                            : o->video && th / o->H * o->H == th && th / o->H * o->W == tw;
        if (!have) continue;
        sp->rgb[v] = vdn_xmalloc((size_t)rw * th * 3);
        memset(sp->rgb[v], 255, (size_t)rw * th * 3); /* white gutters */
        int oc = strip_px ? o->pix.strip_cols : (o->F < 6 ? o->F : 6);
        for (int k = 0; k < oc && k < cols; k++) {
            const uint8_t *src = t;
            if (strip_px) {
                src = o->pix.strip + (size_t)k * tile;
            } else {
                int f = oc > 1 ? (int)lround((double)k * (o->F - 1) / (oc - 1)) : 0;
                vdn_latent_preview(o->video, o->C, o->F, o->H, o->W, f, th / o->H, NULL, t);
            }
            for (int y = 0; y < th; y++)
                memcpy(sp->rgb[v] + ((size_t)y * rw + (size_t)k * (tw + sp->gap)) * 3,
                       src + (size_t)y * tw * 3, (size_t)tw * 3);
        }
    }
    free(t);
}

/* The prompt's mp4s into OUT/videos/ID/VARIANT_KEY.mp4 (moved from the scoring folder), named in
 * the results relative to OUT for the page's players. */
static void keep_videos(vdn_results *r, output *outs, const vdn_sweep *sw, int p,
                        const char *out_dir) {
    char err[VDN_ERR_LEN], dir[4400], path[4600], rel[600];
    snprintf(dir, sizeof dir, "%s/videos/%s", out_dir, r->prompt_ids[p]);
    for (int v = 0; v < sw->n_variants; v++) {
        output *o = &outs[v];
        if (!o->local_mp4) continue;
        if (vdn_mkdir_p(dir, err, sizeof err)) {
            vdn_results_set_error(r, v, p, "videos: %s", err);
            return;
        }
        snprintf(rel, sizeof rel, "videos/%s/%s.mp4", r->prompt_ids[p], sw->variants[v].key);
        snprintf(path, sizeof path, "%s/%s", out_dir, rel);
        if (rename(o->local_mp4, path) != 0) {
            vdn_results_set_error(r, v, p, "videos: %s -> %s: %s", o->local_mp4, path,
                                  strerror(errno));
            continue;
        }
        free(o->local_mp4);
        o->local_mp4 = NULL;
        r->videos[(size_t)v * r->n_prompts + p] = vdn_xstrdup(rel);
    }
}

/* Where the frames came from, on the page: a mix of mp4 and --vae frames is worth knowing (the
 * mp4s went through H.264, the --vae frames did not). */
static void pixel_note(vdn_results *r, const pixel_metrics *pm) {
    char buf[600];
    snprintf(buf, sizeof buf,
             "%s%spixel metrics: %d output(s) scored by farm jobs (vdn eval score), frames of %d "
             "output(s) decoded from their stored mp4, %d "
             "decoded from their latents with --vae; endpoint PSNR/SSIM on pixels compare with "
             "the baseline's endpoint frames, keyframe PSNR/SSIM with the keyframe pictures on "
             "the canvas (items with pictures)",
             r->note ? r->note : "", r->note ? "; " : "", pm->n_farm, pm->n_mp4, pm->n_vae);
    free(r->note);
    r->note = vdn_xstrdup(buf);
}

int vdn_eval_report_main(int argc, char **argv) {
    const char *sweep_path = NULL, *out_dir = NULL, *scorers_path = NULL, *title = NULL,
               *baseline = NULL, *vae_dir = NULL;
    int n_strips = 4, resamples = 10000, keep = 0, videos = 1; /* 0 none, 1 strips, 2 all */
    unsigned long long seed = 20261120ull;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--keep-outputs")) {
            keep = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            if (!v) {
                fprintf(stderr, "vdn eval report: %s needs a value\n", a);
                return 2;
            }
            i++;
            if (!strcmp(a, "--out"))
                out_dir = v;
            else if (!strcmp(a, "--scorers"))
                scorers_path = v;
            else if (!strcmp(a, "--baseline"))
                baseline = v;
            else if (!strcmp(a, "--title"))
                title = v;
            else if (!strcmp(a, "--vae"))
                vae_dir = v;
            else if (!strcmp(a, "--videos")) {
                videos = !strcmp(v, "none")     ? 0
                         : !strcmp(v, "strips") ? 1
                         : !strcmp(v, "all")    ? 2
                                                : -1;
                if (videos < 0) {
                    fprintf(stderr,
                            "vdn eval report: --videos '%s': expected strips, all or none\n", v);
                    return 2;
                }
            } else if (!strcmp(a, "--strips"))
                n_strips = atoi(v);
            else if (!strcmp(a, "--resamples"))
                resamples = atoi(v);
            else if (!strcmp(a, "--seed"))
                seed = strtoull(v, NULL, 10);
            else {
                fprintf(stderr, "vdn eval report: unknown option %s\n", a);
                usage(stderr);
                return 2;
            }
        } else if (!sweep_path) {
            sweep_path = a;
        } else {
            fprintf(stderr, "vdn eval report: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!sweep_path || !out_dir) {
        usage(stderr);
        return 2;
    }
    if (resamples < 100 || resamples > 10000000 || n_strips < 0 || n_strips > 1000) {
        fprintf(stderr, "vdn eval report: --resamples expects 100..1e7, --strips 0..1000\n");
        return 2;
    }
    char err[VDN_ERR_LEN];
    vdn_sweep sw;
    if (vdn_sweep_load(sweep_path, &sw, err, sizeof err)) {
        fprintf(stderr, "vdn eval report: %s\n", err);
        return 1;
    }
    vdn_suite suite;
    if (vdn_suite_load(sw.suite, &suite, err, sizeof err)) {
        fprintf(stderr, "vdn eval report: %s\n", err);
        vdn_sweep_free(&sw);
        return 1;
    }
    vdn_scorer_set scorers = {0};
    if (scorers_path && vdn_scorers_load(scorers_path, &scorers, err, sizeof err)) {
        fprintf(stderr, "vdn eval report: %s\n", err);
        vdn_suite_free(&suite);
        vdn_sweep_free(&sw);
        return 1;
    }
    vdn_store *st = vdn_store_open(sw.store, NULL, err, sizeof err);
    if (!st) {
        fprintf(stderr, "vdn eval report: store %s: %s\n", sw.store, err);
        vdn_scorers_free(&scorers);
        vdn_suite_free(&suite);
        vdn_sweep_free(&sw);
        return 1;
    }
    char cache_dir[4096];
    snprintf(cache_dir, sizeof cache_dir, "%s/outputs", out_dir);
    if (vdn_mkdir_p(cache_dir, err, sizeof err)) {
        fprintf(stderr, "vdn eval report: %s\n", err);
        return 1;
    }

    vdn_dev *vae_dev = NULL;
    vdn_video_vae *vae = NULL;
    if (vae_dir) {
        vae_dev = vdn_dev_open("cpu", 0, 0, err, sizeof err);
        vae = vae_dev ? vdn_video_vae_load(vae_dev, vae_dir, err, sizeof err) : NULL;
        if (!vae) {
            fprintf(stderr, "vdn eval report: --vae %s: %s\n", vae_dir, err);
            if (vae_dev) vdn_dev_close(vae_dev);
            return 1;
        }
    }
    int np = suite.n, nv = sw.n_variants;
    vdn_results r;
    vdn_results_init(&r, np, nv, 0);
    for (int v = 0; v < nv; v++) {
        r.variants[v] = vdn_xstrdup(sw.variants[v].name);
        if (!strcmp(sw.variants[v].name, sw.baseline)) r.baseline = v;
    }
    if (baseline) { /* compare against another variant of the sweep, e.g. vdn@50 for ablations */
        vdn_variant bv;
        int found = -1;
        if (vdn_variant_parse(baseline, &bv, err, sizeof err) == 0)
            for (int v = 0; v < nv; v++)
                if (!strcmp(sw.variants[v].name, bv.name)) found = v;
        if (found < 0) {
            fprintf(stderr, "vdn eval report: --baseline '%s' is not a variant of the sweep\n",
                    baseline);
            vdn_results_free(&r);
            vdn_store_close(st);
            vdn_scorers_free(&scorers);
            vdn_suite_free(&suite);
            vdn_sweep_free(&sw);
            return 2;
        }
        r.baseline = found;
    }
    for (int p = 0; p < np; p++) {
        r.prompt_ids[p] = vdn_xstrdup(suite.items[p].id);
        r.prompt_modes[p] = vdn_xstrdup(vdn_suite_mode_name(suite.items[p].mode));
        r.prompt_texts[p] = vdn_xstrdup(suite.items[p].prompt);
    }
    r.title = vdn_xstrdup(title ? title : "vdn evaluation report");
    r.sweep_path = vdn_xstrdup(sweep_path);
    r.store_uri = vdn_xstrdup(sw.store);
    r.suite_path = vdn_xstrdup(sw.suite);
    if (sw.checkpoint) r.checkpoint = vdn_xstrdup(sw.checkpoint);
    if (sw.steps_override) {
        char note[200];
        snprintf(note, sizeof note,
                 "every variant was rendered with %d model evaluation(s) (--steps-override); the "
                 "@STEPS in the names were not used",
                 sw.steps_override);
        r.note = vdn_xstrdup(note);
    }
    r.resamples = resamples;
    r.seed = seed;
    int m_l2 = vdn_results_add_metric(&r, "fidelity_rel_l2", "Rel. L2 to baseline (latent)", "", -1,
                                      VDN_METRIC_REFERENCE);
    int m_fp = vdn_results_add_metric(&r, "fidelity_psnr", "PSNR to baseline (latent)", "dB", 1,
                                      VDN_METRIC_REFERENCE);
    int m_ep = vdn_results_add_metric(&r, "endpoint_psnr", "Endpoint PSNR (keyframe modes)", "dB",
                                      1, VDN_METRIC_PAIRED);
    int m_es = vdn_results_add_metric(&r, "endpoint_ssim", "Endpoint SSIM (keyframe modes)", "", 1,
                                      VDN_METRIC_PAIRED);
    int m_mo = vdn_results_add_metric(&r, "motion_flow", "Mean ILK flow", "latent px", 0,
                                      VDN_METRIC_PAIRED);
    int m_td = vdn_results_add_metric(&r, "temporal_diff", "Frame-to-frame RMS change", "", 0,
                                      VDN_METRIC_PAIRED);
    int m_tv = vdn_results_add_metric(&r, "temporal_diff_var", "Variance of frame-to-frame change",
                                      "", 0, VDN_METRIC_PAIRED);
    pixel_metrics pm = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0};
    for (int p = 0; p < np; p++)
        pm.pictures |= suite.items[p].first_frame || suite.items[p].last_frame;
    int *strip_of = vdn_xcalloc((size_t)np + 1, sizeof *strip_of), chosen = 0;
    vdn_eval_pick_strips(&suite, n_strips, strip_of);
    for (int p = 0; p < np; p++)
        chosen += strip_of[p];
    r.strips = vdn_xcalloc((size_t)chosen + 1, sizeof *r.strips);

    output *outs = vdn_xcalloc((size_t)nv, sizeof *outs);
    int n_ok = 0;
    for (int p = 0; p < np; p++) {
        const vdn_suite_item *it = &suite.items[p];
        for (int v = 0; v < nv; v++) {
            output *o = &outs[v];
            memset(o, 0, sizeof *o);
            const vdn_sweep_pair *q = vdn_sweep_find(&sw, it->id, sw.variants[v].name);
            if (!q) {
                vdn_results_set_error(&r, v, p,
                                      "the sweep manifest has no pair for this prompt and variant");
                continue;
            }
            int farm = farm_result(st, &sw, it->id, sw.variants[v].key, cache_dir, o, &r, v, p);
            /* the mp4 for the pixel pass (unless a farm job scored it, and every other output
             * of the prompt: they read the baseline's frames), or for the page's players */
            int want_mp4 = !farm || videos == 2 || (videos == 1 && strip_of[p]) ||
                           !farm_covers(&sw, st, it->id);
            if (fetch_output(st, q, cache_dir, it->id, sw.variants[v].key, want_mp4, o, &r, v, p))
                continue;
            double spn, tot;
            char lr[4300];
            snprintf(lr, sizeof lr, "%s/%s_%s.json", cache_dir, it->id, sw.variants[v].key);
            if (vdn_store_get_file(st, q->record_key, lr, err, sizeof err) ||
                load_timing(lr, &spn, &tot, err, sizeof err)) {
                vdn_results_set_error(&r, v, p, "%s", err);
            } else {
                o->local_record = vdn_xstrdup(lr);
                r.s_per_nfe[(size_t)v * np + p] = spn;
                r.seconds_total[(size_t)v * np + p] = tot;
            }
            n_ok++;
            if (o->video) {
                latent_scores(o, it, &suite, cache_dir, &r, v, p, m_mo, m_td, m_tv, m_ep, m_es);
                if (vae && !o->local_mp4 && decode_pixels(vae, o, err, sizeof err))
                    vdn_results_set_error(&r, v, p, "%s", err);
            }
            if (!o->have_farm) run_scorers(&scorers, o, it, sw.variants[v].name, &r, v, p);
        }
        int strip_px = 0, tile_w = 0, tile_h = 0;
        if (strip_of[p]) strip_tiles(outs, nv, r.baseline, &strip_px, &tile_w, &tile_h);
        prompt_pictures pics;
        pictures_load(&suite, it, st, cache_dir, &pics);
        pixel_pass(outs, nv, r.baseline, it, &pics, strip_px, tile_w, tile_h, &r, p, &pm);
        pictures_free(&pics);
        latent_fidelity(outs, nv, &r, p, m_l2, m_fp);
        if (strip_of[p]) add_strip(&r, outs, nv, p, strip_px, tile_w, tile_h);
        if (videos == 2 || (videos == 1 && strip_of[p])) keep_videos(&r, outs, &sw, p, out_dir);
        for (int v = 0; v < nv; v++) { /* local copies live only while their prompt is scored */
            output *o = &outs[v];
            if (!keep && o->local_video) remove(o->local_video);
            if (!keep && o->local_record) remove(o->local_record);
            if (!keep && o->local_mp4) remove(o->local_mp4);
            free(o->video);
            free(o->px);
            free(o->local_video);
            free(o->local_record);
            free(o->local_mp4);
            vdn_pixel_scores_free(&o->pix);
            vdn_score_result_free(&o->farm);
        }
        if ((p + 1) % 10 == 0 || p + 1 == np)
            fprintf(stderr, "eval report: %d/%d prompts read\n", p + 1, np);
    }
    if (pm.n_mp4 + pm.n_vae + pm.n_farm) pixel_note(&r, &pm);
    free(outs);
    free(strip_of);
    int rc = vdn_report_write(&r, out_dir, err, sizeof err);
    if (rc)
        fprintf(stderr, "vdn eval report: %s\n", err);
    else
        printf("report: %s/report.html (%d of %d outputs read; numbers in %s/report.json)\n",
               out_dir, n_ok, np * nv, out_dir);
    vdn_results_free(&r);
    vdn_video_vae_free(vae);
    if (vae_dev) vdn_dev_close(vae_dev);
    vdn_store_close(st);
    vdn_scorers_free(&scorers);
    vdn_suite_free(&suite);
    vdn_sweep_free(&sw);
    return rc ? 1 : 0;
}
