/* `vdn bench --clip` internals, shared by bench_clip.c (the clip, stage by stage) and bench_mux.c
 * (the mp4 mux apart: --mux-only). Not a public header. */
#ifndef VDN_BENCH_CLIP_H
#define VDN_BENCH_CLIP_H

#include "bench_programs.h"

/* --mux-only: the exit status, as vdn_bench_clip_run's */
int vdn_bench_mux_run(const vdn_bench_clip_opts *o);

#endif
