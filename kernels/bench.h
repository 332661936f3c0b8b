/* The CUDA microbenchmarks of `vdn bench` (bench.cu, bench_attn_vae.cu): options and entry
 * points. The command line is parsed in cli/cmd_bench.c. */
#ifndef VDN_BENCH_H
#define VDN_BENCH_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int frames;        /* latent frames (102 = 345 pixel frames) */
    int text;          /* text rows (512) */
    int audio;         /* audio rows (575, as the peer script packs them) */
    int gh, gw;        /* patch grid of a frame (24 x 42 = 1008 tokens) */
    int reps;          /* timed repeats of each small op (median reported) */
    int attn_reps;     /* timed repeats of each attention (median) */
    const char *json;  /* write results here, or NULL */
    const char *peers; /* h3_peers.py PEERS_JSON of the same run: print the target table, or NULL */
} vdn_bench_opts;

/* Runs the benchmark on GPU 0; 0 on success, -1 with a message on stderr. */
int vdn_bench_cuda(const vdn_bench_opts *o);

/* `vdn bench attn-vae` (bench_attn_vae.cu): the video VAE decoder's attention (head dim 64,
 * block-diagonal) on the mma.sync and wgmma kernels, median of `reps`; -1 when a kernel fails or
 * their outputs differ by more than 1e-2 (relative RMS). */
int vdn_bench_attn_vae(int reps);

#ifdef __cplusplus
}
#endif
#endif
