/* Scoring jobs on the farm (score_job.h). */
#include "score_job.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "pictures.h"
#include "png_write.h"
#include "scorer.h"
#include "vdn_util.h"

/* A key of the job's store, or s3://BUCKET/KEY, fetched to local. -1: not there (the job's),
 * -2: the store failed. */
static int fetch(vdn_store *st, const char *name, const char *local, char *err, size_t errlen) {
    vdn_store *own = NULL;
    const char *key = name;
    if (!strncmp(name, "s3://", 5)) {
        const char *k = strchr(name + 5, '/');
        char uri[1024];
        if (!k || !k[1]) return vdn_fail(err, errlen, "%s: expected s3://BUCKET/KEY", name);
        snprintf(uri, sizeof uri, "%.*s", (int)(k - name), name);
        own = vdn_store_open(uri, NULL, err, errlen);
        if (!own) return -2;
        st = own, key = k + 1;
    } else if (strstr(name, "://")) {
        return vdn_fail(err, errlen, "%s: expected a store key or an s3:// URI", name);
    }
    int have = vdn_store_exists(st, key, NULL, err, errlen), rc = 0;
    if (have < 0)
        rc = -2;
    else if (!have)
        rc = vdn_fail(err, errlen, "%s: not in the store %s", key, vdn_store_uri(st));
    else if (vdn_store_get_file(st, key, local, err, errlen))
        rc = -2;
    if (own) vdn_store_close(own);
    return rc;
}

static const char *str_of(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

static int int_of(const cJSON *o, const char *k, int dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int)v->valuedouble : dflt;
}

static void add_num(cJSON *o, const char *k, double x) {
    if (isfinite(x))
        cJSON_AddNumberToObject(o, k, x);
    else
        cJSON_AddNullToObject(o, k);
}

/* The file extension of a key (".png"), or "" */
static const char *ext_of(const char *name) {
    const char *slash = strrchr(name, '/'), *dot = strrchr(name, '.');
    return dot && (!slash || dot > slash) && strlen(dot) <= 6 ? dot : "";
}

typedef struct {
    char mp4[4200], base[4200], first[4200], last[4200], lat[4200], rec[4200];
} local_files;

/* Everything the work names, fetched into scratch. */
static int fetch_all(const cJSON *w, vdn_store *st, const char *scratch, local_files *lf, char *err,
                     size_t errlen) {
    memset(lf, 0, sizeof *lf);
    struct {
        const char *field, *name;
        char *out;
    } in[] = {{"mp4", "out.mp4", lf->mp4},
              {"baseline_mp4", "base.mp4", lf->base},
              {"first", "first", lf->first},
              {"last", "last", lf->last},
              {"latents", "out.safetensors", lf->lat},
              {"record", "record.json", lf->rec}};
    for (size_t i = 0; i < sizeof in / sizeof *in; i++) {
        const char *name = str_of(w, in[i].field);
        if (!name) continue;
        snprintf(in[i].out, 4200, "%s/%s%s", scratch, in[i].name,
                 strchr(in[i].name, '.') ? "" : ext_of(name));
        char e2[VDN_ERR_LEN];
        int rc = fetch(st, name, in[i].out, e2, sizeof e2);
        if (rc) {
            vdn_fail(err, errlen, "%s %s", in[i].field, e2);
            return rc;
        }
    }
    if (!lf->mp4[0]) return vdn_fail(err, errlen, "the work names no \"mp4\"");
    return 0;
}

static void run_scorers(const cJSON *w, const local_files *lf, cJSON *res, cJSON *errs) {
    const cJSON *conf = cJSON_GetObjectItemCaseSensitive(w, "scorers");
    if (!conf) return;
    char err[VDN_ERR_LEN], *text = cJSON_PrintUnformatted(conf);
    vdn_scorer_set set;
    if (vdn_scorers_parse(text, strlen(text), "the work's scorers", &set, err, sizeof err)) {
        cJSON_AddItemToArray(errs, cJSON_CreateString(err));
        free(text);
        return;
    }
    free(text);
    cJSON *sc = cJSON_AddObjectToObject(res, "scores");
    cJSON *hb = cJSON_AddObjectToObject(res, "higher_is_better");
    for (int s = 0; s < set.n; s++) {
        const char *p = str_of(w, "prompt");
        vdn_scorer_args a = {lf->mp4,
                             lf->lat[0] ? lf->lat : "",
                             lf->rec[0] ? lf->rec : "",
                             p ? p : "",
                             str_of(w, "id") ? str_of(w, "id") : "",
                             str_of(w, "variant") ? str_of(w, "variant") : ""};
        char **keys;
        double *vals;
        int n;
        if (vdn_scorer_run(&set.s[s], &a, &keys, &vals, &n, err, sizeof err)) {
            cJSON_AddItemToArray(errs, cJSON_CreateString(err));
            continue;
        }
        cJSON_AddBoolToObject(hb, set.s[s].name, set.s[s].higher_is_better);
        for (int k = 0; k < n; k++) {
            char name[160];
            snprintf(name, sizeof name, "%s.%s", set.s[s].name, keys[k]);
            cJSON_AddNumberToObject(sc, name, vals[k]);
        }
        vdn_scores_free(keys, vals, n);
    }
    vdn_scorers_free(&set);
}

int vdn_eval_score_job(const char *spec, vdn_store *st, const char *scratch, const char *out_path,
                       char *err, size_t errlen) {
    double t0 = vdn_now();
    cJSON *w = spec ? cJSON_Parse(spec) : NULL;
    if (!cJSON_IsObject(w)) {
        cJSON_Delete(w);
        return vdn_fail(err, errlen, "the work (request field score) is not a JSON object");
    }
    local_files lf;
    int rc = fetch_all(w, st, scratch, &lf, err, errlen);
    float *kf[2] = {NULL, NULL};
    vdn_frames *clip = NULL, *base = NULL;
    vdn_pixel_scores pix;
    memset(&pix, 0, sizeof pix);
    int H = int_of(w, "height", 0), W = int_of(w, "width", 0);
    if (!rc && (lf.first[0] || lf.last[0]) &&
        vdn_eval_canvas(lf.first[0] ? lf.first : NULL, lf.last[0] ? lf.last : NULL, H, W, &kf[0],
                        &kf[1], err, errlen))
        rc = -1;
    if (!rc && !(clip = vdn_frames_open_mp4(lf.mp4, err, errlen))) rc = -1;
    if (!rc && lf.base[0] && !(base = vdn_frames_open_mp4(lf.base, err, errlen))) rc = -1;
    const cJSON *ends = cJSON_GetObjectItemCaseSensitive(w, "endpoints");
    const cJSON *strip = cJSON_GetObjectItemCaseSensitive(w, "strip");
    vdn_pixel_opts po = {.first = cJSON_IsTrue(cJSON_GetArrayItem(ends, 0)),
                         .last = cJSON_IsTrue(cJSON_GetArrayItem(ends, 1)),
                         .kf_first = kf[0],
                         .kf_last = kf[1],
                         .kf_h = H,
                         .kf_w = W,
                         .strip_cols = int_of(strip, "cols", 0),
                         .tile_w = int_of(strip, "tile_w", 0),
                         .tile_h = int_of(strip, "tile_h", 0)};
    if (!rc && vdn_pixel_scores_run(clip, base, &po, &pix, err, errlen)) rc = -1;
    if (!rc) {
        cJSON *res = cJSON_CreateObject(), *errs = cJSON_CreateArray();
        cJSON_AddNumberToObject(res, "v", 1);
        cJSON_AddNumberToObject(res, "T", pix.T);
        cJSON_AddNumberToObject(res, "H", pix.H);
        cJSON_AddNumberToObject(res, "W", pix.W);
        const char *names[] = {"flow",     "tdiff",    "tdiff_var", "psnr",
                               "end_psnr", "end_ssim", "kf_psnr",   "kf_ssim"};
        const double vals[] = {pix.flow,     pix.tdiff,    pix.tdiff_var, pix.psnr,
                               pix.end_psnr, pix.end_ssim, pix.kf_psnr,   pix.kf_ssim};
        for (int i = 0; i < 8; i++)
            add_num(res, names[i], vals[i]);
        if (pix.strip_cols) {
            cJSON *s = cJSON_AddObjectToObject(res, "strip");
            cJSON_AddNumberToObject(s, "cols", pix.strip_cols);
            cJSON_AddNumberToObject(s, "tile_w", po.tile_w);
            cJSON_AddNumberToObject(s, "tile_h", po.tile_h);
            char *b64 = vdn_base64(pix.strip, (size_t)pix.strip_cols * po.tile_w * po.tile_h * 3);
            cJSON_AddStringToObject(s, "rgb", b64);
            free(b64);
        }
        run_scorers(w, &lf, res, errs);
        cJSON_AddItemToObject(res, "errors", errs);
        cJSON_AddNumberToObject(res, "seconds", vdn_now() - t0);
        char *text = cJSON_Print(res);
        cJSON_Delete(res);
        rc = vdn_write_file_atomic(out_path, text, strlen(text), err, errlen) ? -2 : 0;
        free(text);
    }
    vdn_pixel_scores_free(&pix);
    vdn_frames_close(clip);
    vdn_frames_close(base);
    free(kf[0]);
    free(kf[1]);
    cJSON_Delete(w);
    return rc;
}

/* ---- reading a result back ---- */

static int b64_value(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard base64 with padding into out (at most cap bytes); the bytes written, or -1. */
static long b64_decode(const char *s, uint8_t *out, size_t cap) {
    size_t n = 0, len = strlen(s);
    if (len % 4) return -1;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            v[k] = s[i + k] == '=' && i + 4 == len && k >= 2 ? (pad++, 0) : b64_value(s[i + k]);
            if (v[k] < 0) return -1;
        }
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | v[3];
        for (int k = 0; k < 3 - pad; k++) {
            if (n >= cap) return -1;
            out[n++] = (uint8_t)(x >> (16 - 8 * k));
        }
    }
    return (long)n;
}

static double num_of(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

void vdn_score_result_free(vdn_score_result *r) {
    vdn_pixel_scores_free(&r->pix);
    for (int i = 0; i < r->n_scores; i++)
        free(r->score_keys[i]);
    for (int i = 0; i < r->n_errors; i++)
        free(r->errors[i]);
    free(r->score_keys);
    free(r->score_values);
    free(r->score_higher);
    free(r->errors);
    memset(r, 0, sizeof *r);
}

int vdn_score_result_parse(const char *text, size_t len, const char *name, vdn_score_result *r,
                           char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    cJSON *o = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(o) || num_of(o, "v") != 1) {
        cJSON_Delete(o);
        return vdn_fail(err, errlen, "%s: not a scoring result (a JSON object with \"v\": 1)",
                        name);
    }
    vdn_pixel_scores *p = &r->pix;
    p->T = (int)num_of(o, "T"), p->H = (int)num_of(o, "H"), p->W = (int)num_of(o, "W");
    p->flow = num_of(o, "flow"), p->tdiff = num_of(o, "tdiff");
    p->tdiff_var = num_of(o, "tdiff_var"), p->psnr = num_of(o, "psnr");
    p->end_psnr = num_of(o, "end_psnr"), p->end_ssim = num_of(o, "end_ssim");
    p->kf_psnr = num_of(o, "kf_psnr"), p->kf_ssim = num_of(o, "kf_ssim");
    r->seconds = num_of(o, "seconds");
    int rc = 0;
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "strip");
    if (s) {
        int cols = (int)num_of(s, "cols"), tw = (int)num_of(s, "tile_w"),
            th = (int)num_of(s, "tile_h");
        const char *rgb = str_of(s, "rgb");
        size_t want = (size_t)cols * tw * th * 3;
        if (cols < 1 || cols > 64 || tw < 1 || th < 1 || tw > 4096 || th > 4096 || !rgb) {
            rc = vdn_fail(err, errlen, "%s: field 'strip': expected cols, tile_w, tile_h, rgb",
                          name);
        } else {
            p->strip = vdn_xmalloc(want + 3);
            if (b64_decode(rgb, p->strip, want + 3) != (long)want)
                rc = vdn_fail(err, errlen, "%s: field 'strip.rgb': not %zu bytes of base64", name,
                              want);
            p->strip_cols = cols, r->tile_w = tw, r->tile_h = th;
        }
    }
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "scores");
    const cJSON *hb = cJSON_GetObjectItemCaseSensitive(o, "higher_is_better");
    int n = cJSON_GetArraySize(sc);
    r->score_keys = vdn_xcalloc((size_t)n + 1, sizeof *r->score_keys);
    r->score_values = vdn_xcalloc((size_t)n + 1, sizeof *r->score_values);
    r->score_higher = vdn_xcalloc((size_t)n + 1, sizeof *r->score_higher);
    for (const cJSON *e = sc ? sc->child : NULL; e; e = e->next) {
        if (!cJSON_IsNumber(e) || !e->string) continue;
        char scorer[128];
        snprintf(scorer, sizeof scorer, "%s", e->string);
        char *dot = strchr(scorer, '.');
        if (dot) *dot = 0;
        r->score_keys[r->n_scores] = vdn_xstrdup(e->string);
        r->score_values[r->n_scores] = e->valuedouble;
        r->score_higher[r->n_scores++] =
            !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(hb, scorer));
    }
    const cJSON *es = cJSON_GetObjectItemCaseSensitive(o, "errors");
    r->errors = vdn_xcalloc((size_t)cJSON_GetArraySize(es) + 1, sizeof *r->errors);
    for (const cJSON *e = es ? es->child : NULL; e; e = e->next)
        if (cJSON_IsString(e)) r->errors[r->n_errors++] = vdn_xstrdup(e->valuestring);
    cJSON_Delete(o);
    if (rc) vdn_score_result_free(r);
    return rc;
}
