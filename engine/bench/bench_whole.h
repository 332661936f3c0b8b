/* `vdn bench --whole` internals, shared by bench_whole.c (options, prompt, one engine) and
 * bench_group.c (several engines: --gpus, --independent; issue 14). Not a public header. */
#ifndef VDN_BENCH_WHOLE_H
#define VDN_BENCH_WHOLE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "engine.h"

#define WHOLE_MAX_LIST 8     /* entries of --gpus */
#define WHOLE_MAX_ENGINES 64 /* engines (VDN_COMM_MAX_RANKS) */

typedef struct {
    const char *preset;    /* "h3" */
    int layers;            /* 0 = the preset's */
    int frames;            /* latent frames, 5k + 2 (102 = 345 pixel frames) */
    int height, width;     /* pixels */
    int text;              /* prompt rows */
    int nfe, warmup;       /* timed and untimed model evaluations per variant */
    const char *variants;  /* comma list */
    int cpu;               /* the CPU backend (small presets; checks the path without a GPU) */
    const char *precision; /* "bf16" | "fp8" (the DiT's large Linears) */
    uint64_t seed;
    const char *json;
    /* several engines (bench_group.c); all 0 / NULL = the one-engine run */
    int gpus[WHOLE_MAX_LIST]; /* --gpus: engine counts of the sharded renders, in order */
    int n_gpus;
    int independent;     /* --independent K: K one-engine renders at once */
    int comm_profile;    /* --comm-profile: one more, profiled evaluation per sharded render */
    int clip_steps;      /* --steps N: the clip length clips per hour are quoted for */
    const char *out_dir; /* --out-dir: keep latents and run records there (else a temp dir) */
    int profile;         /* --profile: one more evaluation per variant, timed op by op */
} whole_opts;

/* the engines' label in run records: every engine of a group must carry the same one */
#define WHOLE_LABEL "random weights (vdn bench --whole)"

/* the engines the options ask for: the largest --gpus entry or --independent, at least 1 */
int whole_engines(const whole_opts *o);

/* A progress callback's record of one render: seconds of each model evaluation. */
typedef struct {
    double *s;
    int n;
    int quiet;            /* no progress line per evaluation */
    struct vdn_dev *prof; /* profile the evaluation after the first prof_at ones on this device */
    int prof_at;
} whole_nfe_times;
int whole_on_nfe(void *user, int done, int total, double seconds);

/* The median, min and max of n values (sorted in place). */
void whole_stats(double *v, int n, double *median, double *min, double *max);

/* The render request of one variant at the options' workload (steps = warm-up + N). */
void whole_request(const whole_opts *o, const char *variant, const char *prompt, const char *prefix,
                   vdn_render_request *req);

/* The several-engine run (bench_group.c): engines opened, every variant rendered as the options
 * ask, the table printed and the JSON written. 0, or -1 after a message on stderr. */
int whole_run_group(const whole_opts *o, const vdn_config *cfg, const char *dir,
                    const char *prompt);

#endif
