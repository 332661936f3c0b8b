/* `vdn eval report`: read a sweep's outputs back from the object store, compute the metrics of
 * every (prompt, variant) output, run the configured external scorers, and hand the results to
 * report.c. A missing or damaged output is an error for that output only: the report still
 * comes out, with the error listed and the pair left out of the statistics. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "record_timing.h"
#include "results.h"
#include "safetensors.h"
#include "scorer.h"
#include "store.h"
#include "suite.h"
#include "sweep.h"
#include "vae.h"
#include "vdn_util.h"

#define PSNR_CAP 100.0 /* identical outputs give +inf; capped so they still count in the means */

typedef struct {
    float *video; /* (C, F, H, W) */
    int C, F, H, W;
    float *px; /* with --vae: the decoded frames (3, pF, pH, pW) in [0, 1], else NULL */
    int pF, pH, pW;
    char *local_video, *local_record;
} output;

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
        "                       [--keep-outputs] [--vae DIR]\n"
        "Reads every output of the sweep from its store, computes the metrics (docs/eval.md),\n"
        "paired statistics against the baseline, and writes DIR/report.html + DIR/report.json.\n"
        "Outputs are downloaded into DIR/outputs/ one prompt at a time and removed after scoring\n"
        "unless --keep-outputs. --vae DIR decodes every output with that video VAE (CPU) and adds\n"
        "pixel metrics (PSNR to the baseline's frames, motion, temporal stability) and frame\n"
        "strips of the decoded frames.\n");
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

static int mode_of(const vdn_suite *s, int p) {
    return (int)s->items[p].mode;
}

int vdn_eval_report_main(int argc, char **argv) {
    const char *sweep_path = NULL, *out_dir = NULL, *scorers_path = NULL, *title = NULL,
               *baseline = NULL, *vae_dir = NULL;
    int n_strips = 4, resamples = 10000, keep = 0;
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
            else if (!strcmp(a, "--strips"))
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
    /* on decoded frames (--vae): pixels in [0, 1] */
    int m_pp = -1, m_pm = -1, m_pt = -1;
    if (vae) {
        m_pp = vdn_results_add_metric(&r, "pixel_psnr", "PSNR to baseline (decoded frames)", "dB",
                                      1, VDN_METRIC_REFERENCE);
        m_pm = vdn_results_add_metric(&r, "pixel_motion_flow", "Mean ILK flow (decoded frames)",
                                      "px", 0, VDN_METRIC_PAIRED);
        m_pt = vdn_results_add_metric(&r, "pixel_temporal_diff",
                                      "Frame-to-frame RMS change (decoded frames)", "", 0,
                                      VDN_METRIC_PAIRED);
    }

    /* strips: the first prompt of each mode, then the next prompts in order */
    int *strip_of = vdn_xcalloc((size_t)np + 1, sizeof *strip_of), chosen = 0;
    for (int mode = 0; mode < 4 && chosen < n_strips; mode++)
        for (int p = 0; p < np; p++)
            if (mode_of(&suite, p) == mode) {
                strip_of[p] = 1;
                chosen++;
                break;
            }
    for (int p = 0; p < np && chosen < n_strips; p++)
        if (!strip_of[p]) strip_of[p] = 1, chosen++;
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
            char lv[4300], lr[4300];
            snprintf(lv, sizeof lv, "%s/%s_%s.safetensors", cache_dir, it->id, sw.variants[v].key);
            snprintf(lr, sizeof lr, "%s/%s_%s.json", cache_dir, it->id, sw.variants[v].key);
            if (vdn_store_get_file(st, q->video_key, lv, err, sizeof err) ||
                load_video(lv, o, err, sizeof err)) {
                vdn_results_set_error(&r, v, p, "%s", err);
                continue;
            }
            o->local_video = vdn_xstrdup(lv);
            double spn, tot;
            if (vdn_store_get_file(st, q->record_key, lr, err, sizeof err) ||
                load_timing(lr, &spn, &tot, err, sizeof err)) {
                vdn_results_set_error(&r, v, p, "%s", err);
            } else {
                o->local_record = vdn_xstrdup(lr);
                r.s_per_nfe[(size_t)v * np + p] = spn;
                r.seconds_total[(size_t)v * np + p] = tot;
            }
            n_ok++;
            *vdn_results_at(&r, m_mo, v, p) =
                vdn_motion_mean_flow(o->video, o->C, o->F, o->H, o->W);
            double tm, tvv;
            vdn_temporal_diff(o->video, o->C, o->F, o->H, o->W, &tm, &tvv);
            *vdn_results_at(&r, m_td, v, p) = tm;
            *vdn_results_at(&r, m_tv, v, p) = tvv;
            if (vae) {
                if (decode_pixels(vae, o, err, sizeof err)) {
                    vdn_results_set_error(&r, v, p, "%s", err);
                } else {
                    *vdn_results_at(&r, m_pm, v, p) =
                        vdn_pixel_mean_flow(o->px, o->pF, o->pH, o->pW);
                    double pm, pv;
                    vdn_temporal_diff(o->px, 3, o->pF, o->pH, o->pW, &pm, &pv);
                    *vdn_results_at(&r, m_pt, v, p) = pm;
                }
            }
            int nk = vdn_suite_mode_keyframes(it->mode);
            if (nk) {
                char *kname =
                    vdn_suite_resolve(&suite, it->keyframes ? it->keyframes : it->prompt_cache);
                char kpath[4400];
                double ps = 0, ss = 0;
                int got = 0;
                const char *names[2] = {"keyframe_first", "keyframe_last"};
                if (local_copy(kname, cache_dir, it->id, kpath, sizeof kpath, err, sizeof err)) {
                    vdn_results_set_error(&r, v, p, "keyframes: %s", err);
                    kpath[0] = 0;
                }
                for (int k = 0; k < 2 && kpath[0]; k++) {
                    if (k == 0 && it->mode == VDN_MODE_L2VA) continue;
                    if (k == 1 && it->mode == VDN_MODE_I2VA) continue;
                    float *kf = load_keyframe(kpath, names[k], o->C, o->H, o->W, err, sizeof err);
                    if (!kf) {
                        vdn_results_set_error(&r, v, p, "%s", err);
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
                    *vdn_results_at(&r, m_ep, v, p) = ps / got;
                    *vdn_results_at(&r, m_es, v, p) = ss / got;
                }
                free(kname);
            }
            for (int s = 0; s < scorers.n; s++) {
                vdn_scorer_args sa = {o->local_video, o->local_record, it->prompt, it->id,
                                      sw.variants[v].name};
                char **keys;
                double *vals;
                int nsc;
                if (vdn_scorer_run(&scorers.s[s], &sa, &keys, &vals, &nsc, err, sizeof err)) {
                    vdn_results_set_error(&r, v, p, "%s", err);
                    continue;
                }
                for (int k = 0; k < nsc; k++) {
                    char name[128];
                    snprintf(name, sizeof name, "%s.%s", scorers.s[s].name, keys[k]);
                    int m = vdn_results_find_metric(&r, name);
                    if (m < 0)
                        m = vdn_results_add_metric(&r, name, name, "",
                                                   scorers.s[s].higher_is_better ? 1 : -1,
                                                   VDN_METRIC_PAIRED);
                    *vdn_results_at(&r, m, v, p) = vals[k];
                }
                vdn_scores_free(keys, vals, nsc);
            }
        }
        /* fidelity against the baseline output of the same prompt (same seed, same noise) */
        const output *b = &outs[r.baseline];
        for (int v = 0; v < nv; v++) {
            const output *o = &outs[v];
            if (v == r.baseline || !o->video || !b->video) continue;
            if (o->C != b->C || o->F != b->F || o->H != b->H || o->W != b->W) {
                vdn_results_set_error(
                    &r, v, p, "video shape (%d,%d,%d,%d) differs from the baseline's (%d,%d,%d,%d)",
                    o->C, o->F, o->H, o->W, b->C, b->F, b->H, b->W);
                continue;
            }
            size_t n = (size_t)o->C * o->F * o->H * o->W;
            if (o->px && b->px) { /* same latent shape: same decoded shape */
                size_t pn = (size_t)3 * o->pF * o->pH * o->pW;
                double mse = 0;
                for (size_t k = 0; k < pn; k++) {
                    double d = (double)o->px[k] - b->px[k];
                    mse += d * d;
                }
                mse /= (double)pn;
                *vdn_results_at(&r, m_pp, v, p) = mse > 0 ? cap(-10 * log10(mse)) : PSNR_CAP;
            }
            *vdn_results_at(&r, m_l2, v, p) = vdn_rel_l2(b->video, o->video, n);
            *vdn_results_at(&r, m_fp, v, p) = cap(vdn_latent_psnr(b->video, o->video, n));
            size_t i = (size_t)v * np + p, plane = (size_t)o->H * o->W;
            r.frame_count[i] = o->F;
            r.frame_rel_l2[i] = vdn_xmalloc((size_t)o->F * sizeof(double));
            r.frame_psnr[i] = vdn_xmalloc((size_t)o->F * sizeof(double));
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
                r.frame_rel_l2[i][f] = den > 0 ? sqrt(num / den) : NAN;
                double mse = num / ((double)o->C * (double)plane);
                r.frame_psnr[i][f] =
                    mse > 0 ? cap(10 * log10((hi - lo) * (hi - lo) / mse)) : PSNR_CAP;
            }
        }
        if (strip_of[p]) {
            vdn_strip *sp = &r.strips[r.n_strips++];
            sp->prompt = p;
            sp->rgb = vdn_xcalloc((size_t)nv, sizeof *sp->rgb);
            const output *ref = b->video ? b : NULL;
            for (int v = 0; v < nv && !ref; v++)
                if (outs[v].video) ref = &outs[v];
            if (ref) {
                int cols = ref->F < 6 ? ref->F : 6;
                int scale = 96 / ref->H;
                scale = scale < 1 ? 1 : scale > 8 ? 8 : scale;
                sp->frames = cols;
                sp->tile_w = ref->W * scale;
                sp->tile_h = ref->H * scale;
                sp->gap = sp->tile_h < 32 ? 1 : 2;
                size_t tile = (size_t)sp->tile_w * sp->tile_h * 3;
                uint8_t *t = vdn_xmalloc(tile);
                for (int v = 0; v < nv; v++) {
                    const output *o = &outs[v];
                    if (!o->video || o->H != ref->H || o->W != ref->W) continue;
                    int rw = vdn_strip_width(sp);
                    sp->rgb[v] = vdn_xmalloc((size_t)rw * sp->tile_h * 3);
                    memset(sp->rgb[v], 255, (size_t)rw * sp->tile_h * 3); /* white gutters */
                    for (int k = 0; k < cols; k++) {
                        int f = cols > 1 ? (int)lround((double)k * (o->F - 1) / (cols - 1)) : 0;
                        if (o->px) { /* the decoded frame, sampled down to the tile */
                            int pf =
                                cols > 1 ? (int)lround((double)k * (o->pF - 1) / (cols - 1)) : 0;
                            for (int y = 0; y < sp->tile_h; y++)
                                for (int x = 0; x < sp->tile_w; x++)
                                    for (int ch = 0; ch < 3; ch++) {
                                        size_t sy = (size_t)y * o->pH / sp->tile_h,
                                               sx = (size_t)x * o->pW / sp->tile_w;
                                        float val =
                                            o->px[(((size_t)ch * o->pF + pf) * o->pH + sy) * o->pW +
                                                  sx];
                                        t[((size_t)y * sp->tile_w + x) * 3 + ch] =
                                            (uint8_t)lrintf(val * 255.0f);
                                    }
                        } else
                            vdn_latent_preview(o->video, o->C, o->F, o->H, o->W, f, scale, NULL, t);
                        for (int y = 0; y < sp->tile_h; y++)
                            memcpy(sp->rgb[v] +
                                       ((size_t)y * rw + (size_t)k * (sp->tile_w + sp->gap)) * 3,
                                   t + (size_t)y * sp->tile_w * 3, (size_t)sp->tile_w * 3);
                    }
                }
                free(t);
            }
        }
        for (int v = 0; v < nv; v++) { /* local copies live only while their prompt is scored */
            if (!keep && outs[v].local_video) remove(outs[v].local_video);
            if (!keep && outs[v].local_record) remove(outs[v].local_record);
            free(outs[v].video);
            free(outs[v].px);
            outs[v].px = NULL;
            free(outs[v].local_video);
            free(outs[v].local_record);
        }
        if ((p + 1) % 10 == 0 || p + 1 == np)
            fprintf(stderr, "eval report: %d/%d prompts read\n", p + 1, np);
    }
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
