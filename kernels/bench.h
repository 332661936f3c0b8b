/* `vdn bench` options and the CUDA entry point (bench.cu). */
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

/* Options of `vdn bench` (argv[0] = "bench"): 0, or -1 after a message naming the option and
 * what it expects. *help = 1 when --help was given. */
int vdn_bench_parse(int argc, char **argv, vdn_bench_opts *o, int *help);

/* One integer option's value in [lo, hi]: 0, or -1 after "CMD: OPT expects an integer in [lo, hi],
 * got 'S'" on stderr. */
int vdn_bench_int_arg(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out);

/* `vdn bench --whole ...` (bench_whole.c): whole model evaluations at the real shapes with
 * random weights, timed end to end; exit status. */
int vdn_bench_whole(int argc, char **argv);

/* Runs the benchmark on GPU 0; 0 on success, -1 with a message on stderr. */
int vdn_bench_cuda(const vdn_bench_opts *o);

/* `vdn bench attn-vae` (bench_attn_vae.cu): the video VAE decoder's attention (head dim 64,
 * block-diagonal) on the mma.sync and wgmma kernels, median of `reps`; -1 when a kernel fails or
 * their outputs differ by more than 1e-2 (relative RMS). */
int vdn_bench_attn_vae(int reps);

/* The target table (op, PyTorch peer, target, ours, met/MISSED) from a `vdn bench --json`
 * file and an h3_peers.py PEERS_JSON file of the same run (bench_compare.c; no GPU needed).
 * 0, or -1 with a message naming the file. */
int vdn_bench_compare(const char *ours_json, const char *peers_json, FILE *out, char *err,
                      size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
