/* Everything a report shows, gathered before any HTML is written: per (metric, variant, prompt)
 * values, errors, timings, frame strips. The report writers (report.c) turn it into one HTML
 * page and one JSON file; the sweep reader (collect.c) fills it from the object store. Keeping
 * the two apart lets tests render a report from synthetic results. */
#ifndef VDN_EVAL_RESULTS_H
#define VDN_EVAL_RESULTS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    VDN_METRIC_PAIRED = 0, /* every variant has a value; compared with the baseline's (tests) */
    VDN_METRIC_REFERENCE,  /* a distance to the baseline itself (fidelity): the baseline has none,
                              so no test, only the mean with a bootstrap CI */
} vdn_metric_kind;

typedef struct {
    char *name;  /* JSON key, e.g. "endpoint_psnr" or "scorer.dover.overall" */
    char *label; /* chart title */
    char *unit;  /* "dB", "", ... */
    int better;  /* +1 higher is better, -1 lower is better, 0 a diagnostic */
    vdn_metric_kind kind;
} vdn_metric_def;

typedef struct {
    int prompt; /* index into prompts */
    int frames; /* columns per row */
    int tile_w, tile_h;
    int gap;       /* white pixels between frames */
    int pixels;    /* 1: decoded frames (mp4 or --vae), 0: latent previews */
    uint8_t **rgb; /* per variant: (tile_h, vdn_strip_width, 3), NULL when the output is missing */
} vdn_strip;

typedef struct {
    int n_prompts, n_variants, n_metrics;
    char **prompt_ids, **prompt_modes, **prompt_texts;
    char **variants; /* names as given, e.g. "dense@50" */
    int baseline;    /* index of the baseline variant */
    vdn_metric_def *metrics;
    double *values; /* [metric][variant][prompt], NAN when absent */
    char **errors;  /* [variant][prompt]: what went wrong for that output, or NULL */
    double *s_per_nfe, *seconds_total; /* [variant][prompt] from run records, NAN when absent */
    double **frame_rel_l2; /* [variant][prompt] -> per-frame relative L2 to the baseline, or NULL */
    double **frame_psnr;   /* [variant][prompt] -> per-frame latent PSNR to the baseline, or NULL */
    int *frame_count;      /* [variant][prompt] entries in frame_rel_l2 and frame_psnr */
    vdn_strip *strips;
    int n_strips;
    /* [variant][prompt] -> the output's mp4 relative to the report's folder (videos/...), to
     * play side by side, or NULL */
    char **videos;
    char *title, *sweep_path, *store_uri, *suite_path, *checkpoint;
    char *note;    /* shown under the header, e.g. the sweep's steps override; may be NULL */
    double alpha;  /* 0.05 */
    int resamples; /* bootstrap resamples (default 10000) */
    uint64_t seed; /* bootstrap seed */
} vdn_results;

static inline int vdn_strip_width(const vdn_strip *s) {
    return s->frames * s->tile_w + (s->frames > 0 ? s->frames - 1 : 0) * s->gap;
}

void vdn_results_init(vdn_results *r, int n_prompts, int n_variants, int n_metrics);
void vdn_results_free(vdn_results *r);
static inline double *vdn_results_at(vdn_results *r, int m, int v, int p) {
    return &r->values[((size_t)m * r->n_variants + v) * r->n_prompts + p];
}
/* Adds a metric definition (grows metrics and values). Returns its index. */
int vdn_results_add_metric(vdn_results *r, const char *name, const char *label, const char *unit,
                           int better, vdn_metric_kind kind);
int vdn_results_find_metric(const vdn_results *r, const char *name);
void vdn_results_set_error(vdn_results *r, int v, int p, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* report.c: out_dir/report.html (self-contained) and out_dir/report.json. */
int vdn_report_write(const vdn_results *r, const char *out_dir, char *err, size_t errlen);

#endif
