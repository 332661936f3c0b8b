/* The report: statistics per (metric, variant) against the baseline, then one self-contained
 * HTML page (inline SVG, PNG strips as data: URIs) and a JSON file holding every number. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "png_write.h"
#include "results.h"
#include "stats.h"
#include "strbuf.h"
#include "svg.h"
#include "vdn_util.h"

typedef struct {
    int n; /* prompts with a value for this variant */
    double mean;
    vdn_ci ci;    /* bootstrap CI of the mean value */
    int has_test; /* paired comparison with the baseline done */
    vdn_paired paired;
} cell_stats;

static uint64_t cell_seed(const vdn_results *r, int m, int v) {
    return r->seed ^ ((uint64_t)(m + 1) * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(v + 1) << 32);
}

static cell_stats compute_cell(vdn_results *r, int m, int v) {
    cell_stats c;
    memset(&c, 0, sizeof c);
    int np = r->n_prompts;
    double *x = vdn_xmalloc(((size_t)np + 1) * sizeof *x),
           *y = vdn_xmalloc(((size_t)np + 1) * sizeof *y);
    double *zero = vdn_xcalloc((size_t)np + 1, sizeof *zero);
    int n = 0;
    for (int p = 0; p < np; p++) {
        double a = *vdn_results_at(r, m, v, p);
        if (isfinite(a)) x[n++] = a;
    }
    c.n = n;
    c.mean = NAN;
    c.ci.lo = c.ci.hi = NAN;
    if (n > 0) {
        double s = 0;
        for (int i = 0; i < n; i++)
            s += x[i];
        c.mean = s / n;
        c.ci = vdn_bootstrap_mean_ci(x, zero, (size_t)n, r->resamples, 0.95, cell_seed(r, m, v));
    }
    if (r->metrics[m].kind == VDN_METRIC_PAIRED && v != r->baseline) {
        n = 0;
        for (int p = 0; p < np; p++) {
            double a = *vdn_results_at(r, m, v, p), b = *vdn_results_at(r, m, r->baseline, p);
            if (isfinite(a) && isfinite(b)) {
                x[n] = a;
                y[n] = b;
                n++;
            }
        }
        if (n > 0) {
            c.has_test = 1;
            c.paired =
                vdn_paired_compare(x, y, (size_t)n, r->alpha, r->resamples, cell_seed(r, m, v) + 1);
        }
    }
    free(x);
    free(y);
    free(zero);
    return c;
}

static cJSON *num(double v) {
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

static cJSON *ci_json(vdn_ci ci) {
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, num(ci.lo));
    cJSON_AddItemToArray(a, num(ci.hi));
    return a;
}

static double mean_finite(const double *v, int n, int *count) {
    double s = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) s += v[i], k++;
    if (count) *count = k;
    return k ? s / k : NAN;
}

static const char *fmt_p(char *buf, double p) {
    if (!isfinite(p)) return "n/a";
    if (p < 1e-4)
        snprintf(buf, 32, "%.1e", p);
    else
        snprintf(buf, 32, "%.4f", p);
    return buf;
}

static void html_head(vdn_sb *h, const vdn_results *r) {
    vdn_sb_printf(h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
    vdn_sb_escape(h, r->title ? r->title : "vdn evaluation report");
    vdn_sb_printf(h,
                  "</title><style>\n"
                  "body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}\n"
                  "table{border-collapse:collapse;margin:8px 0;font-size:13px}\n"
                  "th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}\n"
                  "th{background:#f2f2f2}td.l,th.l{text-align:left}\n"
                  ".sig{color:#b00;font-weight:bold}.charts{display:flex;flex-wrap:wrap;gap:8px}\n"
                  ".err{color:#b00;white-space:pre-wrap;text-align:left}\n"
                  "img.strip{image-rendering:pixelated;border:1px solid #ccc}\n"
                  ".note{color:#555;font-size:13px}\n"
                  ".sync{display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start}\n"
                  ".sync figure{margin:0}.sync figcaption{font-size:13px;text-align:center}\n"
                  ".sync video{max-width:420px;max-height:240px;background:#000}\n"
                  "</style></head><body>\n<h1>");
    vdn_sb_escape(h, r->title ? r->title : "vdn evaluation report");
    vdn_sb_printf(h, "</h1>\n<p class=\"note\">");
    const char *labels[] = {"sweep", "store", "suite", "checkpoint"};
    const char *vals[] = {r->sweep_path, r->store_uri, r->suite_path, r->checkpoint};
    for (int i = 0; i < 4; i++)
        if (vals[i]) {
            vdn_sb_printf(h, "%s: <code>", labels[i]);
            vdn_sb_escape(h, vals[i]);
            vdn_sb_printf(h, "</code><br>");
        }
    if (r->note) {
        vdn_sb_printf(h, "<b>note:</b> ");
        vdn_sb_escape(h, r->note);
        vdn_sb_printf(h, "<br>");
    }
    vdn_sb_printf(h, "baseline: <b>");
    vdn_sb_escape(h, r->variants[r->baseline]);
    vdn_sb_printf(
        h,
        "</b>; %d prompts, %d variants. Paired tests against the baseline, prompt by prompt: "
        "Student t (two-sided) and Wilcoxon signed-rank; <span class=\"sig\">*</span> marks "
        "t-test p &lt; %g. Intervals: 95%% percentile bootstrap (%d resamples, seed %llu).<br>"
        "Metrics are computed on the output latents and on the fixed latent preview (decoders "
        "to mp4 come later); learned metrics come from configured external scorers.</p>\n",
        r->n_prompts, r->n_variants, r->alpha, r->resamples, (unsigned long long)r->seed);
}

/* Whether any output has a video to play. */
static int any_video(const vdn_results *r) {
    for (size_t i = 0; i < (size_t)r->n_variants * r->n_prompts; i++)
        if (r->videos[i]) return 1;
    return 0;
}

/* The players of one prompt: the baseline first (its clock leads), then the other variants. */
static void html_players(vdn_sb *h, const vdn_results *r, int p) {
    vdn_sb_printf(h, "<div class=\"sync\" data-prompt=\"");
    vdn_sb_escape(h, r->prompt_ids[p]);
    vdn_sb_printf(h, "\"><div><button class=\"play\">play all</button> <button "
                     "class=\"restart\">from the start</button></div>\n");
    for (int k = 0; k < r->n_variants; k++) {
        int v = k == 0 ? r->baseline : k <= r->baseline ? k - 1 : k;
        const char *src = r->videos[(size_t)v * r->n_prompts + p];
        vdn_sb_printf(h, "<figure>");
        if (src) {
            vdn_sb_printf(h, "<video muted playsinline preload=\"metadata\" data-variant=\"");
            vdn_sb_escape(h, r->variants[v]);
            vdn_sb_printf(h, "\" src=\"");
            vdn_sb_escape(h, src);
            vdn_sb_printf(h, "\"></video>");
        } else {
            vdn_sb_printf(h, "<span class=\"err\">no mp4</span>");
        }
        vdn_sb_printf(h, "<figcaption>");
        vdn_sb_escape(h, r->variants[v]);
        vdn_sb_printf(h, "%s</figcaption></figure>\n", v == r->baseline ? " (baseline)" : "");
    }
    vdn_sb_printf(h, "</div>\n");
}

static void html_strip(vdn_sb *h, const vdn_results *r, const vdn_strip *st) {
    vdn_sb_printf(h, "<p class=\"note\">frame strip: %s</p><table class=\"strip\">",
                  st->pixels ? "decoded frames" : "latent preview");
    for (int v = 0; v < r->n_variants; v++) {
        vdn_sb_printf(h, "<tr><td class=\"l\">");
        vdn_sb_escape(h, r->variants[v]);
        vdn_sb_printf(h, "</td><td class=\"l\">");
        uint8_t *png;
        size_t plen;
        char perr[VDN_ERR_LEN];
        if (st->rgb[v] && !vdn_png_encode(st->rgb[v], vdn_strip_width(st), st->tile_h, &png, &plen,
                                          perr, sizeof perr)) {
            char *b64 = vdn_base64(png, plen);
            /* tiny latents: show the pixels bigger (pixelated), at least 64 px tall */
            int zoom = st->tile_h < 64 ? (64 + st->tile_h - 1) / st->tile_h : 1;
            vdn_sb_printf(h,
                          "<img class=\"strip\" alt=\"frames\" width=\"%d\" height=\"%d\" "
                          "src=\"data:image/png;base64,%s\">",
                          zoom * vdn_strip_width(st), zoom * st->tile_h, b64);
            free(b64);
            free(png);
        } else {
            vdn_sb_printf(h, "<span class=\"err\">no output</span>");
        }
        vdn_sb_printf(h, "</td></tr>\n");
    }
    vdn_sb_printf(h, "</table>\n");
}

/* Synced playback: "play all" seeks every player to the leader's (the baseline's) time and plays
 * them together. While they play, every 100 ms each follower is steered to the leader's clock:
 * a drift under half a second by its playback rate (1 + 3 x drift, within 0.5..1.5: a seek
 * stalls a player for longer than the drift it removes), a larger one by a seek to where the leader
 * will be once the seek is done (the last seek's duration ahead); a seek still not done after a
 * second is asked again. Pausing or seeking the leader pauses or seeks the rest. vdnSync(group) is
 * the page's entry point (also what the tests drive). */
static const char sync_script[] =
    "<script>\n"
    "function vdnSync(g){\n"
    "  var vs=Array.prototype.slice.call(g.querySelectorAll('video'));\n"
    "  if(!vs.length)return null;var lead=vs[0],rest=vs.slice(1),tick=null,lag=0;\n"
    "  "
    "rest.forEach(function(v){v.addEventListener('seeking',function(){v.t0=performance.now();});\n"
    "    "
    "v.addEventListener('seeked',function(){lag=Math.min(1,(performance.now()-v.t0)/1000);});});\n"
    "  function steer(){rest.forEach(function(v){\n"
    "    if(v.seeking&&performance.now()-v.t0<1000)return;\n"
    "    var d=lead.currentTime-v.currentTime;\n"
    "    if(Math.abs(d)>0.5||v.seeking){v.playbackRate=1;v.currentTime=lead.currentTime+lag;}\n"
    "    else v.playbackRate=Math.abs(d)<0.02?1:Math.min(1.5,Math.max(0.5,1+3*d));});}\n"
    "  function stop(){clearInterval(tick);tick=null;rest.forEach(function(v){v.pause();"
    "v.playbackRate=1;});}\n"
    "  lead.addEventListener('playing',function(){if(!tick)tick=setInterval(steer,100);});\n"
    "  lead.addEventListener('pause',stop);lead.addEventListener('ended',stop);\n"
    "  lead.addEventListener('seeked',function(){rest.forEach(function(v){"
    "v.currentTime=lead.currentTime;});});\n"
    "  function play(){var "
    "t=lead.ended?0:lead.currentTime;vs.forEach(function(v){v.currentTime=t;});"
    "return Promise.all(vs.map(function(v){return v.play();}));}\n"
    "  function restart(){vs.forEach(function(v){v.pause();v.currentTime=0;});return play();}\n"
    "  function toggle(){if(lead.paused)play();else lead.pause();}\n"
    "  g.querySelector('.play').onclick=toggle;g.querySelector('.restart').onclick=restart;\n"
    "  vs.forEach(function(v){v.addEventListener('click',toggle);});\n"
    "  return {play:play,restart:restart,videos:vs};\n"
    "}\n"
    "var vdnGroups=Array.prototype.map.call(document.querySelectorAll('.sync'),vdnSync);\n"
    "</script>\n";

int vdn_report_write(const vdn_results *res, const char *out_dir, char *err, size_t errlen) {
    vdn_results *r = (vdn_results *)res; /* read-only use; vdn_results_at takes non-const */
    if (vdn_mkdir_p(out_dir, err, errlen)) return -1;
    int nv = r->n_variants, np = r->n_prompts, nm = r->n_metrics;
    cell_stats *cs = vdn_xcalloc((size_t)nm * nv + 1, sizeof *cs);
    for (int m = 0; m < nm; m++)
        for (int v = 0; v < nv; v++)
            cs[m * nv + v] = compute_cell(r, m, v);
    /* metrics with no value at all (e.g. endpoint fidelity in a t2va-only suite) stay in the
     * JSON but get no chart or table on the page */
    int *empty = vdn_xcalloc((size_t)nm + 1, sizeof *empty);
    for (int m = 0; m < nm; m++) {
        empty[m] = 1;
        for (int v = 0; v < nv; v++)
            empty[m] &= cs[m * nv + v].n == 0;
    }

    /* ---------------- JSON ---------------- */
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "title", r->title ? r->title : "vdn evaluation report");
    if (r->sweep_path) cJSON_AddStringToObject(root, "sweep", r->sweep_path);
    if (r->store_uri) cJSON_AddStringToObject(root, "store", r->store_uri);
    if (r->suite_path) cJSON_AddStringToObject(root, "suite", r->suite_path);
    if (r->checkpoint) cJSON_AddStringToObject(root, "checkpoint", r->checkpoint);
    if (r->note) cJSON_AddStringToObject(root, "note", r->note);
    cJSON_AddStringToObject(root, "baseline", r->variants[r->baseline]);
    cJSON_AddNumberToObject(root, "alpha", r->alpha);
    cJSON *boot = cJSON_AddObjectToObject(root, "bootstrap");
    cJSON_AddNumberToObject(boot, "resamples", r->resamples);
    cJSON_AddNumberToObject(boot, "level", 0.95);
    cJSON_AddNumberToObject(boot, "seed", (double)r->seed);
    cJSON *jv = cJSON_AddArrayToObject(root, "variants");
    for (int v = 0; v < nv; v++)
        cJSON_AddItemToArray(jv, cJSON_CreateString(r->variants[v]));
    cJSON *jp = cJSON_AddArrayToObject(root, "prompts");
    for (int p = 0; p < np; p++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", r->prompt_ids[p] ? r->prompt_ids[p] : "");
        cJSON_AddStringToObject(o, "mode", r->prompt_modes[p] ? r->prompt_modes[p] : "");
        if (r->prompt_texts[p]) cJSON_AddStringToObject(o, "prompt", r->prompt_texts[p]);
        cJSON_AddItemToArray(jp, o);
    }
    cJSON *jm = cJSON_AddArrayToObject(root, "metrics");
    for (int m = 0; m < nm; m++) {
        const vdn_metric_def *d = &r->metrics[m];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", d->name);
        cJSON_AddStringToObject(o, "label", d->label);
        cJSON_AddStringToObject(o, "unit", d->unit);
        cJSON_AddNumberToObject(o, "better", d->better);
        cJSON_AddStringToObject(o, "kind", d->kind == VDN_METRIC_PAIRED ? "paired" : "reference");
        cJSON *pv = cJSON_AddObjectToObject(o, "per_variant");
        for (int v = 0; v < nv; v++) {
            cell_stats *c = &cs[m * nv + v];
            cJSON *s = cJSON_CreateObject();
            cJSON_AddNumberToObject(s, "n", c->n);
            cJSON_AddItemToObject(s, "mean", num(c->mean));
            cJSON_AddItemToObject(s, "ci", ci_json(c->ci));
            if (c->has_test) {
                vdn_paired *q = &c->paired;
                cJSON *t = cJSON_AddObjectToObject(s, "vs_baseline");
                cJSON_AddNumberToObject(t, "n", (double)q->n);
                cJSON_AddItemToObject(t, "mean_variant", num(q->mean_variant));
                cJSON_AddItemToObject(t, "mean_baseline", num(q->mean_baseline));
                cJSON_AddItemToObject(t, "mean_diff", num(q->mean_diff));
                cJSON_AddItemToObject(t, "sd_diff", num(q->sd_diff));
                cJSON_AddItemToObject(t, "ci_diff", ci_json(q->ci));
                cJSON_AddItemToObject(t, "t", num(q->ttest.t));
                cJSON_AddItemToObject(t, "df", num(q->ttest.df));
                cJSON_AddItemToObject(t, "t_p", num(q->ttest.p));
                cJSON_AddItemToObject(t, "wilcoxon_statistic", num(q->wilcoxon.statistic));
                cJSON_AddItemToObject(t, "wilcoxon_p", num(q->wilcoxon.p));
                cJSON_AddItemToObject(t, "wilcoxon_z", num(q->wilcoxon.z));
                cJSON_AddBoolToObject(t, "wilcoxon_exact", q->wilcoxon.exact);
                cJSON_AddBoolToObject(t, "significant", q->significant);
            }
            cJSON_AddItemToObject(pv, r->variants[v], s);
        }
        cJSON *vals = cJSON_AddObjectToObject(o, "values");
        for (int v = 0; v < nv; v++) {
            cJSON *a = cJSON_CreateArray();
            for (int p = 0; p < np; p++)
                cJSON_AddItemToArray(a, num(*vdn_results_at(r, m, v, p)));
            cJSON_AddItemToObject(vals, r->variants[v], a);
        }
        cJSON_AddItemToArray(jm, o);
    }
    cJSON *jt = cJSON_AddObjectToObject(root, "timing");
    for (int v = 0; v < nv; v++) {
        cJSON *o = cJSON_CreateObject();
        int k1, k2;
        cJSON_AddItemToObject(o, "s_per_nfe_mean",
                              num(mean_finite(r->s_per_nfe + (size_t)v * np, np, &k1)));
        cJSON_AddItemToObject(o, "seconds_total_mean",
                              num(mean_finite(r->seconds_total + (size_t)v * np, np, &k2)));
        cJSON_AddNumberToObject(o, "renders_timed", k2);
        cJSON *a = cJSON_AddArrayToObject(o, "s_per_nfe");
        cJSON *b = cJSON_AddArrayToObject(o, "seconds_total");
        for (int p = 0; p < np; p++) {
            cJSON_AddItemToArray(a, num(r->s_per_nfe[(size_t)v * np + p]));
            cJSON_AddItemToArray(b, num(r->seconds_total[(size_t)v * np + p]));
        }
        cJSON_AddItemToObject(jt, r->variants[v], o);
    }
    for (int which = 0; which < 2; which++) {
        double **per = which ? r->frame_psnr : r->frame_rel_l2;
        cJSON *jf = cJSON_AddObjectToObject(root, which ? "frame_psnr" : "frame_rel_l2");
        for (int v = 0; v < nv; v++) {
            cJSON *o = cJSON_CreateObject();
            for (int p = 0; p < np; p++) {
                size_t i = (size_t)v * np + p;
                if (!per[i]) continue;
                cJSON *a = cJSON_CreateArray();
                for (int f = 0; f < r->frame_count[i]; f++)
                    cJSON_AddItemToArray(a, num(per[i][f]));
                cJSON_AddItemToObject(o, r->prompt_ids[p], a);
            }
            cJSON_AddItemToObject(jf, r->variants[v], o);
        }
    }
    cJSON *jvid = cJSON_AddObjectToObject(root, "videos"); /* variant -> prompt -> mp4 */
    for (int v = 0; v < nv; v++) {
        cJSON *o = cJSON_AddObjectToObject(jvid, r->variants[v]);
        for (int p = 0; p < np; p++)
            if (r->videos[(size_t)v * np + p])
                cJSON_AddStringToObject(o, r->prompt_ids[p], r->videos[(size_t)v * np + p]);
    }
    cJSON *je = cJSON_AddArrayToObject(root, "errors");
    int n_err = 0;
    for (int v = 0; v < nv; v++)
        for (int p = 0; p < np; p++) {
            const char *e = r->errors[(size_t)v * np + p];
            if (!e) continue;
            n_err++;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "prompt", r->prompt_ids[p]);
            cJSON_AddStringToObject(o, "variant", r->variants[v]);
            cJSON_AddStringToObject(o, "error", e);
            cJSON_AddItemToArray(je, o);
        }
    char *json = cJSON_Print(root);
    cJSON_Delete(root);
    char path[4096];
    snprintf(path, sizeof path, "%s/report.json", out_dir);
    int rc = vdn_write_file_atomic(path, json, strlen(json), err, errlen);
    free(json);
    if (rc) {
        free(cs);
        free(empty);
        return -1;
    }

    /* ---------------- HTML ---------------- */
    vdn_sb h = {0};
    char pb1[32], pb2[32];
    html_head(&h, r);
    vdn_sb_printf(&h, "<h2>Summary</h2>\n<div class=\"charts\">\n");
    double *mean = vdn_xmalloc((size_t)nv * sizeof *mean),
           *lo = vdn_xmalloc((size_t)nv * sizeof *lo), *hi = vdn_xmalloc((size_t)nv * sizeof *hi);
    int *sig = vdn_xmalloc((size_t)nv * sizeof *sig);
    for (int m = 0; m < nm; m++) {
        if (empty[m]) continue;
        for (int v = 0; v < nv; v++) {
            cell_stats *c = &cs[m * nv + v];
            mean[v] = c->mean;
            lo[v] = c->ci.lo;
            hi[v] = c->ci.hi;
            sig[v] = c->has_test && c->paired.significant;
        }
        char title[300];
        const vdn_metric_def *d = &r->metrics[m];
        snprintf(title, sizeof title, "%s%s", d->label,
                 d->better > 0   ? " \xe2\x86\x91"
                 : d->better < 0 ? " \xe2\x86\x93"
                                 : "");
        vdn_svg_bars(&h, title, d->unit, nv, r->variants, mean, lo, hi, sig,
                     d->kind == VDN_METRIC_PAIRED ? r->baseline : -1);
    }
    vdn_sb_printf(
        &h,
        "</div>\n<p class=\"note\">\xe2\x86\x91 higher is better, \xe2\x86\x93 lower is better, "
        "no arrow: a diagnostic. Bars: mean over prompts with its 95%% bootstrap interval; "
        "dashed line: the baseline's mean. Fidelity metrics measure each variant against the "
        "baseline output of the same prompt, so the baseline has no bar there.</p>\n");

    vdn_sb_printf(&h, "<h2>Paired statistics against ");
    vdn_sb_escape(&h, r->variants[r->baseline]);
    vdn_sb_printf(
        &h,
        "</h2>\n<table id=\"stats\"><tr><th class=\"l\">metric</th><th class=\"l\">variant</th>"
        "<th>n</th><th>mean</th><th>baseline mean</th><th>mean diff</th><th>95%% CI of diff</th>"
        "<th>t</th><th>t-test p</th><th>Wilcoxon p</th><th>sig.</th></tr>\n");
    for (int m = 0; m < nm; m++)
        for (int v = 0; v < nv && !empty[m]; v++) {
            cell_stats *c = &cs[m * nv + v];
            if (v == r->baseline && r->metrics[m].kind == VDN_METRIC_PAIRED) continue;
            if (r->metrics[m].kind == VDN_METRIC_REFERENCE && v == r->baseline) continue;
            vdn_sb_printf(&h, "<tr><td class=\"l\">");
            vdn_sb_escape(&h, r->metrics[m].label);
            vdn_sb_printf(&h, "</td><td class=\"l\">");
            vdn_sb_escape(&h, r->variants[v]);
            vdn_sb_printf(&h, "</td>");
            if (c->has_test) {
                vdn_paired *q = &c->paired;
                vdn_sb_printf(
                    &h,
                    "<td>%zu</td><td>%.5g</td><td>%.5g</td><td>%+.4g</td><td>[%.4g, %.4g]</td>"
                    "<td>%.3g</td><td>%s</td><td>%s%s</td><td class=\"sig\">%s</td></tr>\n",
                    q->n, q->mean_variant, q->mean_baseline, q->mean_diff, q->ci.lo, q->ci.hi,
                    q->ttest.t, fmt_p(pb1, q->ttest.p), fmt_p(pb2, q->wilcoxon.p),
                    q->wilcoxon.exact ? " (exact)" : "", q->significant ? "*" : "");
            } else {
                vdn_sb_printf(&h,
                              "<td>%d</td><td>%.5g</td><td>&mdash;</td><td>&mdash;</td><td>[%.4g, "
                              "%.4g] (of the mean)</td>"
                              "<td>&mdash;</td><td>&mdash;</td><td>&mdash;</td><td></td></tr>\n",
                              c->n, c->mean, c->ci.lo, c->ci.hi);
            }
        }
    vdn_sb_printf(&h, "</table>\n");

    /* per-frame fidelity: mean over prompts of each frame's relative L2 and PSNR */
    for (int which = 0; which < 2; which++) {
        double **per = which ? r->frame_psnr : r->frame_rel_l2;
        double **curves = vdn_xcalloc((size_t)nv, sizeof *curves);
        int *lens = vdn_xcalloc((size_t)nv, sizeof *lens), any_curve = 0;
        for (int v = 0; v < nv; v++) {
            int len = 0;
            for (int p = 0; p < np; p++)
                if (per[(size_t)v * np + p] && r->frame_count[(size_t)v * np + p] > len)
                    len = r->frame_count[(size_t)v * np + p];
            if (!len) continue;
            curves[v] = vdn_xcalloc((size_t)len, sizeof **curves);
            int *cnt = vdn_xcalloc((size_t)len, sizeof *cnt);
            for (int p = 0; p < np; p++) {
                size_t i = (size_t)v * np + p;
                for (int f = 0; per[i] && f < r->frame_count[i]; f++)
                    if (isfinite(per[i][f])) curves[v][f] += per[i][f], cnt[f]++;
            }
            for (int f = 0; f < len; f++)
                curves[v][f] = cnt[f] ? curves[v][f] / cnt[f] : NAN;
            free(cnt);
            lens[v] = len;
            any_curve = 1;
        }
        if (any_curve) {
            if (!which)
                vdn_sb_printf(
                    &h,
                    "<h2>Fidelity to the baseline per latent frame</h2>\n<div class=\"charts\">\n");
            vdn_svg_lines(&h,
                          which ? "latent PSNR to the baseline (dB), mean over prompts"
                                : "relative L2 to the baseline, mean over prompts",
                          nv, r->variants, (const double *const *)curves, lens);
            if (which) vdn_sb_printf(&h, "</div>\n");
        }
        for (int v = 0; v < nv; v++)
            free(curves[v]);
        free(curves);
        free(lens);
    }

    vdn_sb_printf(&h, "<h2>Timing</h2>\n<table id=\"timing\"><tr><th "
                      "class=\"l\">variant</th><th>renders timed</th>"
                      "<th>s / NFE (mean)</th><th>end-to-end s (mean)</th></tr>\n");
    for (int v = 0; v < nv; v++) {
        int k;
        double spn = mean_finite(r->s_per_nfe + (size_t)v * np, np, NULL);
        double tot = mean_finite(r->seconds_total + (size_t)v * np, np, &k);
        vdn_sb_printf(&h, "<tr><td class=\"l\">");
        vdn_sb_escape(&h, r->variants[v]);
        vdn_sb_printf(&h, "</td><td>%d</td><td>%.4g</td><td>%.4g</td></tr>\n", k, spn, tot);
    }
    vdn_sb_printf(&h, "</table>\n");

    if (r->n_strips || any_video(r)) {
        vdn_sb_printf(
            &h,
            "<h2>Side by side</h2>\n<p class=\"note\">The stored mp4s of the baseline and every "
            "variant play together (one clock: the baseline's; the others follow it). Frame "
            "strips: evenly spaced frames left to right, decoded frames (the stored mp4, or "
            "--vae) where the outputs have them, else the latent preview (channels in three "
            "groups as R, G, B; see docs/eval.md).</p>\n");
        for (int p = 0; p < r->n_prompts; p++) {
            const vdn_strip *st = NULL;
            for (int s = 0; s < r->n_strips; s++)
                if (r->strips[s].prompt == p) st = &r->strips[s];
            int vids = 0;
            for (int v = 0; v < nv; v++)
                vids += r->videos[(size_t)v * r->n_prompts + p] != NULL;
            if (!st && !vids) continue;
            vdn_sb_printf(&h, "<h3>");
            vdn_sb_escape(&h, r->prompt_ids[p]);
            vdn_sb_printf(&h, " (");
            vdn_sb_escape(&h, r->prompt_modes[p]);
            vdn_sb_printf(&h, ")</h3>\n");
            if (r->prompt_texts[p] && r->prompt_texts[p][0]) {
                vdn_sb_printf(&h, "<details class=\"note\"><summary>prompt</summary><pre "
                                  "style=\"white-space:pre-wrap\">");
                vdn_sb_escape(&h, r->prompt_texts[p]);
                vdn_sb_printf(&h, "</pre></details>\n");
            }
            if (vids) html_players(&h, r, p);
            if (st) html_strip(&h, r, st);
        }
        vdn_sb_printf(&h, "%s", sync_script);
    }

    vdn_sb_printf(&h, "<h2>Per-prompt breakdown</h2>\n");
    for (int m = 0; m < nm; m++) {
        if (empty[m]) continue;
        vdn_sb_printf(&h, "<details><summary>");
        vdn_sb_escape(&h, r->metrics[m].label);
        vdn_sb_printf(&h, "</summary><table class=\"per-prompt\"><tr><th "
                          "class=\"l\">prompt</th><th class=\"l\">mode</th>");
        for (int v = 0; v < nv; v++) {
            vdn_sb_printf(&h, "<th>");
            vdn_sb_escape(&h, r->variants[v]);
            vdn_sb_printf(&h, "</th>");
        }
        vdn_sb_printf(&h, "</tr>\n");
        for (int p = 0; p < np; p++) {
            vdn_sb_printf(&h, "<tr><td class=\"l\">");
            vdn_sb_escape(&h, r->prompt_ids[p]);
            vdn_sb_printf(&h, "</td><td class=\"l\">");
            vdn_sb_escape(&h, r->prompt_modes[p]);
            vdn_sb_printf(&h, "</td>");
            for (int v = 0; v < nv; v++) {
                double x = *vdn_results_at(r, m, v, p);
                if (isfinite(x))
                    vdn_sb_printf(&h, "<td>%.5g</td>", x);
                else
                    vdn_sb_printf(&h, "<td>&mdash;</td>");
            }
            vdn_sb_printf(&h, "</tr>\n");
        }
        vdn_sb_printf(&h, "</table></details>\n");
    }

    vdn_sb_printf(&h, "<h2>Errors</h2>\n");
    if (!n_err)
        vdn_sb_printf(&h, "<p>None: every output was read and scored.</p>\n");
    else {
        vdn_sb_printf(&h, "<table id=\"errors\"><tr><th class=\"l\">prompt</th><th "
                          "class=\"l\">variant</th><th class=\"l\">error</th></tr>\n");
        for (int v = 0; v < nv; v++)
            for (int p = 0; p < np; p++) {
                const char *e = r->errors[(size_t)v * np + p];
                if (!e) continue;
                vdn_sb_printf(&h, "<tr><td class=\"l\">");
                vdn_sb_escape(&h, r->prompt_ids[p]);
                vdn_sb_printf(&h, "</td><td class=\"l\">");
                vdn_sb_escape(&h, r->variants[v]);
                vdn_sb_printf(&h, "</td><td class=\"err\">");
                vdn_sb_escape(&h, e);
                vdn_sb_printf(&h, "</td></tr>\n");
            }
        vdn_sb_printf(&h, "</table>\n");
    }
    vdn_sb_printf(&h, "<p class=\"note\">Every number on this page is in report.json next to "
                      "it.</p>\n</body></html>\n");
    snprintf(path, sizeof path, "%s/report.html", out_dir);
    rc = vdn_write_file_atomic(path, h.s, h.len, err, errlen);
    vdn_sb_free(&h);
    free(mean);
    free(lo);
    free(hi);
    free(sig);
    free(cs);
    free(empty);
    return rc;
}
