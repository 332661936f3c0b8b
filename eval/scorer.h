/* External scorers: learned metrics (DOVER, Q-Align, VQA, ...) run as user-configured commands,
 * because their weights do not belong in vdn. Config (JSON):
 *
 *   {"scorers": [{"name": "dover", "command": "python3 dover.py --video {video} --prompt {prompt}",
 *                 "higher_is_better": true, "timeout_s": 600}]}
 *
 * Placeholders, substituted shell-quoted: {video} (the output's mp4; its latent safetensors when
 * the job stored no mp4), {latents} (the latent safetensors; empty when the job stored none),
 * {record} (the run record JSON), {prompt} (the prompt text), {id}
 * (prompt id), {variant}. The command prints one JSON object of numbers on stdout, e.g.
 * {"overall": 61.2, "technical": 58.0}; each key becomes metric "NAME.KEY". A command that
 * fails, times out or prints anything else is an error for that output only. */
#ifndef VDN_EVAL_SCORER_H
#define VDN_EVAL_SCORER_H

#include <stddef.h>

typedef struct {
    char *name;
    char *command;
    int higher_is_better; /* 1 (default) or 0 = lower is better */
    int timeout_s;        /* default 600 */
} vdn_scorer;

typedef struct {
    vdn_scorer *s;
    int n;
} vdn_scorer_set;

int vdn_scorers_parse(const char *text, size_t len, const char *path, vdn_scorer_set *out,
                      char *err, size_t errlen);
int vdn_scorers_load(const char *path, vdn_scorer_set *out, char *err, size_t errlen);
void vdn_scorers_free(vdn_scorer_set *s);

typedef struct {
    const char *video, *latents, *record, *prompt, *id, *variant;
} vdn_scorer_args;

/* Runs one scorer on one output. On success *keys / *values hold n scores (malloc'd arrays of
 * malloc'd strings; free with vdn_scores_free). -1 with a message otherwise. */
int vdn_scorer_run(const vdn_scorer *sc, const vdn_scorer_args *a, char ***keys, double **values,
                   int *n, char *err, size_t errlen);
void vdn_scores_free(char **keys, double *values, int n);

/* Parse a scorer's stdout: one JSON object whose values are all finite numbers. */
int vdn_scores_parse(const char *text, size_t len, const char *label, char ***keys, double **values,
                     int *n, char *err, size_t errlen);

#endif
