/* Scoring on the farm: the metric work of one sweep output (its mp4 decoded, flow and temporal
 * change on full-resolution frames, PSNR/SSIM against the baseline's frames and against the
 * keyframe pictures on the canvas, its frame strip, the external scorers) as a farm job (request
 * kind "score"), so a suite's outputs are scored in parallel on the workers and `vdn eval report`
 * only gathers the results from the store. `vdn eval score SWEEP.json` submits the jobs.
 *
 * The work (the job's `score` field, JSON):
 *   {"v": 1, "id": "p004", "variant": "vdn@8", "prompt": "...",
 *    "mp4": KEY, "baseline_mp4": KEY (absent for the baseline itself), "record": KEY,
 *    "latents": KEY (absent without), "first": KEY|URI, "last": KEY|URI (the pictures, absent
 *    where the line has none), "height": H, "width": W (the canvas),
 *    "endpoints": [first, last] (the mode's endpoints compared with the baseline's),
 *    "strip": {"cols": 6, "tile_w": W', "tile_h": H'} (absent: no strip),
 *    "scorers": {"scorers": [...]} (scorer.h's config; absent: none)}
 * Keys name objects in the job's store; s3:// URIs their own bucket.
 *
 * The result (the job's record, JSON):
 *   {"v": 1, "T", "H", "W", "flow", "tdiff", "tdiff_var", "psnr", "end_psnr", "end_ssim",
 *    "kf_psnr", "kf_ssim" (null where not computed), "strip": {"cols", "tile_w", "tile_h",
 *    "rgb": base64 of cols tiles of tile_h x tile_w x 3 bytes}, "scores": {"NAME.KEY": x},
 *    "higher_is_better": {"NAME": bool}, "errors": ["..."], "seconds": s} */
#ifndef VDN_EVAL_SCORE_JOB_H
#define VDN_EVAL_SCORE_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "pixel_scores.h"
#include "store.h"

/* The worker's score function (worker.h vdn_score_fn). */
int vdn_eval_score_job(const char *spec, vdn_store *st, const char *scratch, const char *out_path,
                       char *err, size_t errlen);

/* A result read back. */
typedef struct {
    vdn_pixel_scores pix; /* pix.strip: strip_cols tiles (malloc'd), tile size below */
    int tile_w, tile_h;
    char **score_keys; /* "NAME.KEY" */
    double *score_values;
    int *score_higher; /* per score: 1 higher is better, 0 lower */
    int n_scores;
    char **errors;
    int n_errors;
    double seconds;
} vdn_score_result;

int vdn_score_result_parse(const char *text, size_t len, const char *name, vdn_score_result *r,
                           char *err, size_t errlen);
void vdn_score_result_free(vdn_score_result *r);

#endif
