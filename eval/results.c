#include "results.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vdn_util.h"

void vdn_results_init(vdn_results *r, int n_prompts, int n_variants, int n_metrics) {
    memset(r, 0, sizeof *r);
    r->n_prompts = n_prompts;
    r->n_variants = n_variants;
    size_t vp = (size_t)n_prompts * n_variants;
    r->prompt_ids = vdn_xcalloc((size_t)n_prompts + 1, sizeof(char *));
    r->prompt_modes = vdn_xcalloc((size_t)n_prompts + 1, sizeof(char *));
    r->prompt_texts = vdn_xcalloc((size_t)n_prompts + 1, sizeof(char *));
    r->variants = vdn_xcalloc((size_t)n_variants + 1, sizeof(char *));
    r->errors = vdn_xcalloc(vp + 1, sizeof(char *));
    r->videos = vdn_xcalloc(vp + 1, sizeof(char *));
    r->s_per_nfe = vdn_xmalloc((vp + 1) * sizeof(double));
    r->seconds_total = vdn_xmalloc((vp + 1) * sizeof(double));
    r->frame_rel_l2 = vdn_xcalloc(vp + 1, sizeof(double *));
    r->frame_psnr = vdn_xcalloc(vp + 1, sizeof(double *));
    r->frame_count = vdn_xcalloc(vp + 1, sizeof(int));
    for (size_t i = 0; i < vp; i++)
        r->s_per_nfe[i] = r->seconds_total[i] = NAN;
    r->alpha = 0.05;
    r->resamples = 10000;
    r->seed = 20261120;
    for (int m = 0; m < n_metrics; m++)
        vdn_results_add_metric(r, "", "", "", 0, VDN_METRIC_PAIRED);
}

int vdn_results_add_metric(vdn_results *r, const char *name, const char *label, const char *unit,
                           int better, vdn_metric_kind kind) {
    size_t per = (size_t)r->n_variants * r->n_prompts;
    int m = r->n_metrics;
    vdn_metric_def *defs = vdn_xmalloc((size_t)(m + 1) * sizeof *defs);
    if (m) memcpy(defs, r->metrics, (size_t)m * sizeof *defs);
    free(r->metrics);
    r->metrics = defs;
    double *vals = vdn_xmalloc(((size_t)(m + 1) * per + 1) * sizeof *vals);
    if (m) memcpy(vals, r->values, (size_t)m * per * sizeof *vals);
    for (size_t i = 0; i < per; i++)
        vals[(size_t)m * per + i] = NAN;
    free(r->values);
    r->values = vals;
    defs[m].name = vdn_xstrdup(name);
    defs[m].label = vdn_xstrdup(label);
    defs[m].unit = vdn_xstrdup(unit);
    defs[m].better = better;
    defs[m].kind = kind;
    r->n_metrics = m + 1;
    return m;
}

int vdn_results_find_metric(const vdn_results *r, const char *name) {
    for (int m = 0; m < r->n_metrics; m++)
        if (!strcmp(r->metrics[m].name, name)) return m;
    return -1;
}

void vdn_results_set_error(vdn_results *r, int v, int p, const char *fmt, ...) {
    char buf[VDN_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **slot = &r->errors[(size_t)v * r->n_prompts + p];
    if (*slot) { /* keep every problem of the output, one per line */
        size_t n = strlen(*slot) + strlen(buf) + 2;
        char *s = vdn_xmalloc(n);
        snprintf(s, n, "%s\n%s", *slot, buf);
        free(*slot);
        *slot = s;
    } else {
        *slot = vdn_xstrdup(buf);
    }
}

void vdn_results_free(vdn_results *r) {
    size_t vp = (size_t)r->n_prompts * r->n_variants;
    for (int p = 0; p < r->n_prompts; p++) {
        free(r->prompt_ids[p]);
        free(r->prompt_modes[p]);
        free(r->prompt_texts[p]);
    }
    for (int v = 0; v < r->n_variants; v++)
        free(r->variants[v]);
    for (size_t i = 0; i < vp; i++) {
        free(r->errors[i]);
        free(r->videos[i]);
        free(r->frame_rel_l2[i]);
        free(r->frame_psnr[i]);
    }
    for (int m = 0; m < r->n_metrics; m++) {
        free(r->metrics[m].name);
        free(r->metrics[m].label);
        free(r->metrics[m].unit);
    }
    for (int s = 0; s < r->n_strips; s++) {
        for (int v = 0; v < r->n_variants; v++)
            free(r->strips[s].rgb[v]);
        free(r->strips[s].rgb);
    }
    free(r->strips);
    free(r->prompt_ids);
    free(r->prompt_modes);
    free(r->prompt_texts);
    free(r->variants);
    free(r->errors);
    free(r->videos);
    free(r->s_per_nfe);
    free(r->seconds_total);
    free(r->frame_rel_l2);
    free(r->frame_psnr);
    free(r->frame_count);
    free(r->metrics);
    free(r->values);
    free(r->title);
    free(r->sweep_path);
    free(r->store_uri);
    free(r->suite_path);
    free(r->checkpoint);
    free(r->note);
    memset(r, 0, sizeof *r);
}
