/* The command lines of `vdn bench encode` and `vdn bench --clip`: help text and parsing into
 * engine/bench's options (bench_programs.h), then the run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cli.h"
#include "bench_programs.h"
#include "encoder.h" /* VDN_TEXT_ENCODER_LAYER */

/* ---- vdn bench encode ---- */

static void encode_usage(FILE *f) {
    fprintf(f,
            "usage: vdn bench encode --vae DIR [--keyframes 2] [--height 768] [--width 1344]\n"
            "                        [--reps 5] [--cpu] [--json FILE] [--peer PEER.json]\n"
            "                        [--profile]\n"
            "Times the video VAE's keyframe encoder (a keyframe request's pictures -> the\n"
            "conditioning latents) on --keyframes random canvases (an FL2VA request's two on the\n"
            "768 x 1344 canvas by default), all of them per rep: the whole encode, and apart its\n"
            "device work (the tiled encoder's moments) and host work (pixels, the posterior's\n"
            "sample). One warm-up, then median and best of --reps; peak device memory. The GPU\n"
            "unless --cpu.\n"
            "  --vae DIR         the video VAE folder (config.json + safetensors with encoder.*)\n"
            "  --peer PEER.json  ops/reference/vae_encoder_bench.py's line (the PyTorch encode\n"
            "                    on the same GPU, same sizes): prints PyTorch / vdn\n"
            "  --profile         one more keyframe's moments, op by op\n");
}

static int encode_parse(int argc, char **argv, vdn_bench_encode_opts *o) {
    const char *cmd = "vdn bench encode";
    *o = (vdn_bench_encode_opts){.keyframes = 2, .height = 768, .width = 1344, .reps = 5};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!strcmp(a, "--cpu")) {
            o->cpu = 1;
            continue;
        }
        if (!strcmp(a, "--profile")) {
            o->profile = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "%s: %s expects a value\n", cmd, a);
            return -1;
        }
        if (!strcmp(a, "--vae"))
            o->vae = v;
        else if (!strcmp(a, "--peer"))
            o->peer = v;
        else if (!strcmp(a, "--json"))
            o->json = v;
        else if (!strcmp(a, "--keyframes"))
            rc = vdn_bench_int_arg(cmd, a, v, 1, 16, &o->keyframes);
        else if (!strcmp(a, "--height"))
            rc = vdn_bench_int_arg(cmd, a, v, 32, 8192, &o->height);
        else if (!strcmp(a, "--width"))
            rc = vdn_bench_int_arg(cmd, a, v, 32, 8192, &o->width);
        else if (!strcmp(a, "--reps"))
            rc = vdn_bench_int_arg(cmd, a, v, 1, 1000, &o->reps);
        else {
            fprintf(stderr, "%s: unknown option '%s'\n", cmd, a);
            return -1;
        }
        if (rc) return -1;
        i++;
    }
    if (!o->vae) {
        fprintf(stderr, "%s: --vae DIR is required (the video VAE folder)\n", cmd);
        return -1;
    }
    return 0;
}

int vdn_encode_bench(int argc, char **argv) {
    vdn_bench_encode_opts o;
    const int p = encode_parse(argc, argv, &o);
    if (p) {
        encode_usage(p > 0 ? stdout : stderr);
        return p > 0 ? 0 : 2;
    }
    return vdn_bench_encode_run(&o);
}

/* ---- vdn bench --clip ---- */

static void clip_usage(FILE *f) {
    fprintf(
        f,
        "usage: vdn bench --clip [--vae DIR] [--audio-vae DIR] [--steps 8] [--gpus 1]\n"
        "                 [--preset h3] [--layers N] [--frames 102] [--height 768] [--width 1344]\n"
        "                 [--variant vdn] [--precision bf16|fp8] [--vae-precision bf16|fp8]\n"
        "                 [--tokens 500] [--text-layer 50] [--text-precision bf16|fp8]\n"
        "                 [--text-config TEXT_ENCODER_DIR] [--warmup 1] [--parts 1]\n"
        "                 [--parts-nfe 2] [--crf 18] [--seed 1] [--cpu] [--json FILE]\n"
        "                 [--out-dir DIR] [--mux-json MUX.json]\n"
        "       vdn bench --clip --mux-only [--frames-in FRAMES.safetensors] [--frames 102]\n"
        "                 [--height 768] [--width 1344] [--reps 3] [--crf 18] [--json FILE]\n"
        "Times one whole clip as `vdn render --prompt` makes it, on warm engines, stage by\n"
        "stage: the text encode (random Qwen3-VL-32B text weights, or --text-config's shapes;\n"
        "--tokens to hidden_states[--text-layer], the encoder freed before the render as the\n"
        "farm frees it), --steps model evaluations of the H3 workload (random DiT weights as\n"
        "`vdn bench --whole` makes them), the video and audio decoders (--vae, --audio-vae;\n"
        "without --vae the clip stops at the latents) and the mp4 mux (where this build has\n"
        "FFmpeg). Prints each stage's seconds, the clip's total, the parts measured apart (warm,\n"
        "as the separate benches time them) and their sum, and the official stack's published\n"
        "figure where there is one. Loading is reported, not counted.\n"
        "  --gpus K        one clip on K engines: the DiT sharded (NCCL between GPUs 0..K-1; K\n"
        "                  CPU engines with --cpu), the decode over their devices\n"
        "  --warmup 0|1    an untimed clip of one evaluation first (default 1; --mux-only:\n"
        "                  an untimed mux)\n"
        "  --parts 0|1     the parts apart after the clip (default 1); --parts-nfe evaluations\n"
        "                  for the DiT's\n"
        "  --mux-json F    the mux timed apart (--mux-only --json F, on a host with FFmpeg, at\n"
        "                  this clip's size) in place of this build's: the clip with it\n"
        "  --mux-only      the mux alone: the frames of --frames-in (`vdn decode --frames-out`)\n"
        "                  or a synthetic clip of the workload's size, with the clip's sound\n");
}

static int precision_arg(const char *opt, const char *v, vdn_precision *out) {
    if (vdn_precision_parse(v, out) == 0) return 0;
    fprintf(stderr, "vdn bench --clip: %s '%s': expected bf16 or fp8\n", opt, v);
    return -1;
}

/* the options that take a value; 0, or -1 after a message */
static int clip_value(const char *a, const char *v, vdn_bench_clip_opts *o) {
    const char *cmd = "vdn bench --clip";
    int seed = 0, rc = 0;
    vdn_precision p;
    if (!strcmp(a, "--vae"))
        o->vae = v;
    else if (!strcmp(a, "--audio-vae"))
        o->audio_vae = v;
    else if (!strcmp(a, "--preset"))
        o->preset = v;
    else if (!strcmp(a, "--variant"))
        o->variant = v;
    else if (!strcmp(a, "--precision"))
        rc = precision_arg(a, v, &p), o->precision = v;
    else if (!strcmp(a, "--vae-precision"))
        rc = precision_arg(a, v, &o->vae_precision);
    else if (!strcmp(a, "--text-precision"))
        rc = precision_arg(a, v, &o->text_precision);
    else if (!strcmp(a, "--text-config"))
        o->text_config = v;
    else if (!strcmp(a, "--json"))
        o->json = v;
    else if (!strcmp(a, "--out-dir"))
        o->out_dir = v;
    else if (!strcmp(a, "--frames-in"))
        o->frames_in = v;
    else if (!strcmp(a, "--mux-json"))
        o->mux_json = v;
    else if (!strcmp(a, "--layers"))
        rc = vdn_bench_int_arg(cmd, a, v, 1, 1000, &o->layers);
    else if (!strcmp(a, "--frames"))
        rc = vdn_bench_int_arg(cmd, a, v, 2, 1002, &o->frames);
    else if (!strcmp(a, "--height"))
        rc = vdn_bench_int_arg(cmd, a, v, 32, 4096, &o->height);
    else if (!strcmp(a, "--width"))
        rc = vdn_bench_int_arg(cmd, a, v, 32, 4096, &o->width);
    else if (!strcmp(a, "--steps"))
        rc = vdn_bench_int_arg(cmd, a, v, 1, 1000, &o->steps);
    else if (!strcmp(a, "--tokens"))
        rc = vdn_bench_int_arg(cmd, a, v, 1, 100000, &o->tokens);
    else if (!strcmp(a, "--text-layer"))
        rc = vdn_bench_int_arg(cmd, a, v, 1, 4096, &o->text_layer);
    else if (!strcmp(a, "--gpus"))
        rc = vdn_bench_int_arg(cmd, a, v, 1, VDN_BENCH_MAX_ENGINES, &o->gpus);
    else if (!strcmp(a, "--warmup"))
        rc = vdn_bench_int_arg(cmd, a, v, 0, 1, &o->warmup);
    else if (!strcmp(a, "--parts"))
        rc = vdn_bench_int_arg(cmd, a, v, 0, 1, &o->parts);
    else if (!strcmp(a, "--parts-nfe"))
        rc = vdn_bench_int_arg(cmd, a, v, 1, 100, &o->parts_nfe);
    else if (!strcmp(a, "--crf"))
        rc = vdn_bench_int_arg(cmd, a, v, 0, 51, &o->crf);
    else if (!strcmp(a, "--reps"))
        rc = vdn_bench_int_arg(cmd, a, v, 1, 100, &o->reps);
    else if (!strcmp(a, "--seed"))
        rc = vdn_bench_int_arg(cmd, a, v, 0, 1 << 30, &seed), o->seed = (uint64_t)seed;
    else {
        fprintf(stderr, "%s: unknown option '%s'\n", cmd, a);
        return -1;
    }
    return rc;
}

/* 0, 1 for --help, -1 after a message */
static int clip_parse(int argc, char **argv, vdn_bench_clip_opts *o) {
    *o = (vdn_bench_clip_opts){.preset = "h3",
                               .frames = 102,
                               .height = 768,
                               .width = 1344,
                               .steps = 8,
                               .variant = "vdn",
                               .precision = "bf16",
                               .tokens = 500,
                               .text_layer = VDN_TEXT_ENCODER_LAYER,
                               .gpus = 1,
                               .warmup = 1,
                               .parts = 1,
                               .parts_nfe = 2,
                               .crf = -1,
                               .seed = 1,
                               .reps = 3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--clip")) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!strcmp(a, "--cpu") || !strcmp(a, "--mux-only")) {
            *(!strcmp(a, "--cpu") ? &o->cpu : &o->mux_only) = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "vdn bench --clip: %s expects a value\n", a);
            return -1;
        }
        if (clip_value(a, v, o)) return -1;
        i++;
    }
    if ((o->frames - 2) % 5) {
        fprintf(stderr,
                "vdn bench --clip: --frames %d: expected 5k + 2 latent frames (the official "
                "17n + 5 pixel frames), e.g. 102\n",
                o->frames);
        return -1;
    }
    if (o->height % 32 || o->width % 32) {
        fprintf(stderr, "vdn bench --clip: --height/--width %d x %d: expected multiples of 32\n",
                o->height, o->width);
        return -1;
    }
    if (o->audio_vae && !o->vae) {
        fprintf(stderr, "vdn bench --clip: --audio-vae without --vae: the decode needs the video "
                        "VAE\n");
        return -1;
    }
    if (o->mux_json && (o->mux_only || !o->vae)) {
        fprintf(stderr, "vdn bench --clip: --mux-json stands for the mux of a decoded clip: give "
                        "--vae, without --mux-only\n");
        return -1;
    }
    if (o->frames_in && !o->mux_only) {
        fprintf(stderr, "vdn bench --clip: --frames-in is --mux-only's\n");
        return -1;
    }
    return 0;
}

int vdn_clip_bench(int argc, char **argv) {
    vdn_bench_clip_opts o;
    const int p = clip_parse(argc, argv, &o);
    if (p) {
        clip_usage(p > 0 ? stdout : stderr);
        return p > 0 ? 0 : 2;
    }
    return vdn_bench_clip_run(&o);
}
