/* The whole-program benchmarks of engine/bench/ that `vdn bench` runs. Their command lines are
 * parsed in the app layer (cli/bench_args.c); here are the options and the runs. Each run prints
 * its results (and writes JSON where asked) and returns the exit status: 0, or 1 after a message
 * on stderr. */
#ifndef VDN_BENCH_PROGRAMS_H
#define VDN_BENCH_PROGRAMS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "precision.h"

#define VDN_BENCH_MAX_GPU_LIST 8 /* entries of --gpus */
#define VDN_BENCH_MAX_ENGINES 64 /* engines (VDN_COMM_MAX_RANKS) */
#define VDN_BENCH_MAX_SIZES 8    /* entries of bench decode's --devices */

/* `vdn bench --whole`: whole model evaluations at a preset's real shapes with random weights,
 * timed end to end (bench_whole.c; several engines: bench_group.c) */

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
    int gpus[VDN_BENCH_MAX_GPU_LIST]; /* --gpus: engine counts of the sharded renders, in order */
    int n_gpus;
    int independent;     /* --independent K: K one-engine renders at once */
    int comm_profile;    /* --comm-profile: one more, profiled evaluation per sharded render */
    int clip_steps;      /* --steps N: the clip length clips per hour are quoted for */
    const char *out_dir; /* --out-dir: keep latents and run records there (else a temp dir) */
    int profile;         /* --profile: one more evaluation per variant, timed op by op */
} vdn_bench_whole_opts;
int vdn_bench_whole_run(const vdn_bench_whole_opts *o);

/* `vdn bench decode`: the video and audio decoders at a chosen size (bench_decode.c) */
typedef struct {
    const char *vae, *audio_vae, *random_audio, *backend, *peer, *json;
    int device, T, h, w, La, reps, profile;
    int sizes[VDN_BENCH_MAX_SIZES], n_sizes,
        max_devices; /* --devices: group sizes, largest first */
    vdn_precision precision;
} vdn_bench_decode_opts;
int vdn_bench_decode_run(const vdn_bench_decode_opts *o);

/* `vdn bench text-encoder`: one prompt through the Qwen3-VL text shapes (bench_text.c) */
typedef struct {
    int tokens, layer, reps; /* prompt length, hidden_states[layer], timed encodes */
    int pictures;            /* 768 x 1344 keyframes before the prompt (random vision weights) */
    int cpu, profile;
    const char *config; /* a text_encoder/ folder whose config.json sets the shapes, or NULL */
    const char *json;   /* write the result there too, or NULL */
    vdn_precision precision;
} vdn_bench_text_opts;
int vdn_bench_text_run(const vdn_bench_text_opts *o);

/* `vdn bench encode`: the video VAE's keyframe encoder on --keyframes random canvases
 * (bench_encode.c) */
typedef struct {
    const char *vae;  /* the video VAE folder (with the encoder's tensors) */
    const char *peer; /* ops/reference/vae_encoder_bench.py's JSON line, or NULL */
    const char *json; /* write the result there too, or NULL */
    int keyframes, height, width, reps, cpu, profile;
} vdn_bench_encode_opts;
int vdn_bench_encode_run(const vdn_bench_encode_opts *o);

/* `vdn bench --clip`: one whole clip as `vdn render --prompt` makes it, stage by stage: text
 * encode, the DiT's evaluations, the decoders, the mp4 mux; then the parts apart (bench_clip.c;
 * --mux-only: bench_mux.c) */
typedef struct {
    const char *preset;        /* the DiT's shapes ("h3"), random weights */
    int layers;                /* 0 = the preset's */
    int frames, height, width; /* latent frames (5k + 2), pixels */
    int steps;                 /* model evaluations of the clip */
    const char *variant;       /* "vdn" */
    const char *precision;     /* the DiT's: "bf16" | "fp8" */
    vdn_precision text_precision, vae_precision;
    int tokens, text_layer;      /* the prompt's tokens, hidden_states[text_layer] */
    const char *text_config;     /* a text_encoder/ whose config.json sets the shapes; NULL:
                                    Qwen3-VL-32B's */
    const char *vae, *audio_vae; /* the decoders' folders; no vae: the clip stops at latents */
    int gpus;                    /* engines of the one clip (DiT sharded, decode over the group) */
    int cpu;
    int warmup;           /* an untimed clip of one evaluation first */
    int parts, parts_nfe; /* the parts apart after the clip; the DiT's evaluations then */
    int crf;              /* -1: the mp4 writer's default */
    uint64_t seed;
    const char *json, *out_dir;
    const char *mux_json;  /* the mux timed apart (--mux-only's JSON) instead of this build's */
    int mux_only, reps;    /* --mux-only: the mux alone, reps timed */
    const char *frames_in; /* --mux-only: frames from `vdn decode --frames-out` */
} vdn_bench_clip_opts;
int vdn_bench_clip_run(const vdn_bench_clip_opts *o);

/* The target table (op, PyTorch peer, target, ours, met/MISSED) from a `vdn bench --json`
 * file and an h3_peers.py PEERS_JSON file of the same run (bench_compare.c; no GPU needed).
 * 0, or -1 with a message naming the file. */
int vdn_bench_compare(const char *ours_json, const char *peers_json, FILE *out, char *err,
                      size_t errlen);

#endif
