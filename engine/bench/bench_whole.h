/* `vdn bench --whole` internals, shared by bench_whole.c (options, prompt, one engine) and
 * bench_group.c (several engines: --gpus, --independent; issue 14). Not a public header. */
#ifndef VDN_BENCH_WHOLE_H
#define VDN_BENCH_WHOLE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "bench_programs.h"
#include "engine.h"

/* the engines' label in run records: every engine of a group must carry the same one */
#define WHOLE_LABEL "random weights (vdn bench --whole)"

/* the engines the options ask for: the largest --gpus entry or --independent, at least 1 */
int whole_engines(const vdn_bench_whole_opts *o);

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

/* How the run's engines open: the options' backend and precision, on GPU `device` (-1: the
 * default one). */
vdn_engine_opts whole_engine_opts(const vdn_bench_whole_opts *o, int device);

/* The render request of one variant at the options' workload (steps = warm-up + N). */
void whole_request(const vdn_bench_whole_opts *o, const char *variant, const char *prompt,
                   const char *prefix, vdn_render_request *req);

/* The several-engine run (bench_group.c): engines opened, every variant rendered as the options
 * ask, the table printed and the JSON written. 0, or -1 after a message on stderr. */
int whole_run_group(const vdn_bench_whole_opts *o, const vdn_config *cfg, const char *dir,
                    const char *prompt);

#endif
