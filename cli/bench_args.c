/* The command lines of `vdn bench --whole`, `vdn bench decode` and `vdn bench text-encoder`:
 * help text and parsing into engine/bench's options (bench_programs.h), then the run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cli.h"
#include "bench_programs.h"
#include "encoder.h" /* VDN_TEXT_ENCODER_LAYER */
#include "vae.h"     /* VDN_VAE_MAX_GROUP */

/* ---- vdn bench --whole ---- */

static void whole_usage(FILE *f) {
    fprintf(f,
            "usage: vdn bench --whole [--preset h3] [--layers N] [--frames 102] [--height 768]\n"
            "                 [--width 1344] [--text 512] [--nfe 3] [--warmup 1]\n"
            "                 [--variants vdn,dense] [--precision bf16|fp8] [--seed 1] [--cpu]\n"
            "                 [--json FILE] [--gpus K[,K...]] [--comm-profile]\n"
            "                 [--independent K] [--steps 50] [--out-dir DIR] [--profile]\n"
            "Times whole model evaluations: an engine over random weights in the preset's real\n"
            "shapes (no checkpoint file) renders each variant for warm-up + N evaluations, as\n"
            "`vdn render` would, and reports the median seconds per evaluation after warm-up and\n"
            "the peak device memory. --frames counts latent frames (5k + 2; 102 = 345 pixel\n"
            "frames, 575 audio rows). --cpu runs the CPU backend (for small presets).\n"
            "--profile adds one evaluation per variant, timed op by op on the device (every op\n"
            "between two device timers; the time by op and by operand shapes, TFLOP/s of the\n"
            "products, and the time between ops); it is not in the median.\n"
            "Several devices (one engine each, its own random weights; GPUs 0..K-1, or K CPU\n"
            "engines with --cpu):\n"
            "  --gpus 1,2,4,8    one clip sharded over K engines for each K (sequence\n"
            "                    parallelism: NCCL between GPUs), with speed-up and efficiency\n"
            "                    against K = 1, peak memory per device, the latents against\n"
            "                    the K = 1 render's, and collectives per rank\n"
            "  --comm-profile    one more evaluation per K >= 2 with every collective timed\n"
            "                    (adds a device sync and a barrier per collective): compute,\n"
            "                    collective and wait seconds per rank\n"
            "  --independent K   K one-engine renders at once, one per device (a worker's K\n"
            "                    one-GPU jobs): each render's s/NFE and clips per hour\n"
            "  --steps N         the clip length clips per hour are quoted for (50)\n"
            "  --out-dir DIR     keep the latents and run records in DIR\n");
}

static int whole_int(const char *opt, const char *s, int lo, int hi, int *out) {
    return vdn_bench_int_arg("vdn bench --whole", opt, s, lo, hi, out);
}

static int whole_str(const char *opt, const char *s, const char **out) {
    if (!s || !*s) {
        fprintf(stderr, "vdn bench --whole: %s expects a value\n", opt);
        return -1;
    }
    *out = s;
    return 0;
}

/* --gpus: engine counts, comma-separated, each 1..64, none twice */
static int gpus_arg(const char *v, vdn_bench_whole_opts *o) {
    const char *what = "expected engine counts from 1 to 64, comma-separated (e.g. 1,2,4,8)";
    if (!v || !*v) {
        fprintf(stderr, "vdn bench --whole: --gpus expects a value: %s\n", what);
        return -1;
    }
    o->n_gpus = 0;
    for (const char *p = v;;) {
        char *end;
        errno = 0;
        long k = strtol(p, &end, 10);
        if (end == p || errno || k < 1 || k > VDN_BENCH_MAX_ENGINES || (*end && *end != ',')) {
            fprintf(stderr, "vdn bench --whole: --gpus '%s': %s\n", v, what);
            return -1;
        }
        if (o->n_gpus == VDN_BENCH_MAX_GPU_LIST) {
            fprintf(stderr, "vdn bench --whole: --gpus '%s': at most %d counts\n", v,
                    VDN_BENCH_MAX_GPU_LIST);
            return -1;
        }
        for (int i = 0; i < o->n_gpus; i++)
            if (o->gpus[i] == (int)k) {
                fprintf(stderr, "vdn bench --whole: --gpus '%s': %ld appears twice\n", v, k);
                return -1;
            }
        o->gpus[o->n_gpus++] = (int)k;
        if (!*end) return 0;
        p = end + 1;
    }
}

/* 0, 1 for --help, -1 after a message */
static int whole_parse(int argc, char **argv, vdn_bench_whole_opts *o) {
    *o = (vdn_bench_whole_opts){.preset = "h3",
                                .frames = 102,
                                .height = 768,
                                .width = 1344,
                                .text = 512,
                                .nfe = 3,
                                .warmup = 1,
                                .variants = "vdn,dense",
                                .seed = 1,
                                .precision = "bf16",
                                .clip_steps = 50};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0, seed = 0;
        if (!strcmp(a, "--whole")) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!strcmp(a, "--cpu")) {
            o->cpu = 1;
            continue;
        }
        if (!strcmp(a, "--comm-profile")) {
            o->comm_profile = 1;
            continue;
        }
        if (!strcmp(a, "--profile")) {
            o->profile = 1;
            continue;
        }
        if (!strcmp(a, "--preset"))
            rc = whole_str(a, v, &o->preset);
        else if (!strcmp(a, "--layers"))
            rc = whole_int(a, v, 1, 1000, &o->layers);
        else if (!strcmp(a, "--frames"))
            rc = whole_int(a, v, 2, 1002, &o->frames);
        else if (!strcmp(a, "--height"))
            rc = whole_int(a, v, 32, 4096, &o->height);
        else if (!strcmp(a, "--width"))
            rc = whole_int(a, v, 32, 4096, &o->width);
        else if (!strcmp(a, "--text"))
            rc = whole_int(a, v, 1, 100000, &o->text);
        else if (!strcmp(a, "--nfe"))
            rc = whole_int(a, v, 1, 1000, &o->nfe);
        else if (!strcmp(a, "--warmup"))
            rc = whole_int(a, v, 0, 100, &o->warmup);
        else if (!strcmp(a, "--variants"))
            rc = whole_str(a, v, &o->variants);
        else if (!strcmp(a, "--precision"))
            rc = whole_str(a, v, &o->precision);
        else if (!strcmp(a, "--json"))
            rc = whole_str(a, v, &o->json);
        else if (!strcmp(a, "--seed"))
            rc = whole_int(a, v, 0, 1 << 30, &seed), o->seed = (uint64_t)seed;
        else if (!strcmp(a, "--gpus"))
            rc = gpus_arg(v, o);
        else if (!strcmp(a, "--independent"))
            rc = whole_int(a, v, 1, VDN_BENCH_MAX_ENGINES, &o->independent);
        else if (!strcmp(a, "--steps"))
            rc = whole_int(a, v, 1, 10000, &o->clip_steps);
        else if (!strcmp(a, "--out-dir"))
            rc = whole_str(a, v, &o->out_dir);
        else {
            fprintf(stderr, "vdn bench --whole: unknown option '%s'\n", a);
            return -1;
        }
        if (rc) return -1;
        i++;
    }
    if ((o->frames - 2) % 5) {
        fprintf(stderr,
                "vdn bench --whole: --frames %d: expected 5k + 2 latent frames (the official "
                "17n + 5 pixel frames), e.g. 102\n",
                o->frames);
        return -1;
    }
    vdn_precision prec;
    if (vdn_precision_parse(o->precision, &prec) != 0) {
        fprintf(stderr, "vdn bench --whole: --precision '%s': expected bf16 or fp8\n",
                o->precision);
        return -1;
    }
    if (o->height % 32 || o->width % 32) {
        fprintf(stderr, "vdn bench --whole: --height/--width %d x %d: expected multiples of 32\n",
                o->height, o->width);
        return -1;
    }
    if (o->profile && (o->n_gpus || o->independent)) {
        fprintf(stderr, "vdn bench --whole: --profile times one engine's render; --gpus and "
                        "--independent have --comm-profile\n");
        return -1;
    }
    if (o->comm_profile && !o->n_gpus) {
        fprintf(stderr, "vdn bench --whole: --comm-profile profiles the sharded renders of --gpus; "
                        "give --gpus too\n");
        return -1;
    }
    return 0;
}

int vdn_bench_whole(int argc, char **argv) {
    vdn_bench_whole_opts o;
    int p = whole_parse(argc, argv, &o);
    if (p == 1) {
        whole_usage(stdout);
        return 0;
    }
    if (p != 0) {
        whole_usage(stderr);
        return 2;
    }
    return vdn_bench_whole_run(&o);
}

/* ---- vdn bench decode ---- */

static void decode_usage(FILE *f) {
    fprintf(
        f,
        "usage: vdn bench decode [--vae DIR] [--audio-vae DIR | --random-audio DIR]\n"
        "                        [--backend cuda|cpu] [--device N] [--devices 4,2,1]\n"
        "                        [--precision bf16|fp8]\n"
        "                        [--T 17] [--h 48] [--w 84] [--La 200] [--reps 3] [--profile]\n"
        "                        [--peer PEER.json] [--json OUT.json]\n"
        "Times the video decoder (latents (C, T, h, w) -> frames (3, F, 16h, 16w)) and the\n"
        "audio decoder (2 x La latents, stereo) on one device: the video's warm-up and --reps\n"
        "timed decodes, then the audio's (as the PyTorch peer's script), each read back to the\n"
        "host as `vdn decode` does. Defaults: the 5 s 768x1344 clip (T 17, 48 x 84 latents)\n"
        "and 5 s of stereo audio (La 200), CUDA device 0, bf16.\n"
        "  --vae / --audio-vae   the released folders (vae/, audio_vae/); either may be left out\n"
        "  --random-audio DIR    write a random audio VAE at the release's size to DIR first\n"
        "  --devices LIST        group sizes (devices --device, --device + 1, ...), each timed:\n"
        "                        the decoders are loaded once on the largest group; every\n"
        "                        size's frames and waveform are compared with the first's\n"
        "                        (largest first; default 1)\n"
        "  --precision           the video decoder's (the audio decoder is always float32)\n"
        "  --profile             one more decode of each, op by op, to stderr\n"
        "  --peer PEER.json      the PyTorch decode's numbers (ops/reference/vae_bench.py on\n"
        "                        the same GPU, same sizes): prints PyTorch / vdn for each\n"
        "  --json OUT.json       also write our JSON line there\n");
}

static int decode_int(const char *opt, const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "vdn bench decode: %s '%s': expected an integer in [%d, %d]\n", opt,
                v ? v : "", lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* --devices "4,2,1": distinct group sizes in 1..VDN_VAE_MAX_GROUP, sorted largest first */
static int sizes_arg(const char *v, vdn_bench_decode_opts *o) {
    int n = 0, sizes[VDN_BENCH_MAX_SIZES];
    for (const char *q = v; *q;) {
        char *end;
        errno = 0;
        const long x = strtol(q, &end, 10);
        int dup = 0;
        for (int i = 0; i < n; i++)
            dup |= sizes[i] == x;
        if (errno || end == q || x < 1 || x > VDN_VAE_MAX_GROUP || dup ||
            n == VDN_BENCH_MAX_SIZES || (*end && *end != ',') || (*end == ',' && !end[1])) {
            fprintf(stderr,
                    "vdn bench decode: --devices '%s': expected up to %d distinct group sizes "
                    "in 1..%d, separated by commas (e.g. 4,2,1)\n",
                    v, VDN_BENCH_MAX_SIZES, VDN_VAE_MAX_GROUP);
            return -1;
        }
        sizes[n++] = (int)x;
        q = *end ? end + 1 : end;
    }
    if (!n) {
        fprintf(stderr, "vdn bench decode: --devices '': expected a group size\n");
        return -1;
    }
    for (int i = 0; i < n; i++) /* largest first */
        for (int j = i + 1; j < n; j++)
            if (sizes[j] > sizes[i]) {
                const int t = sizes[i];
                sizes[i] = sizes[j], sizes[j] = t;
            }
    memcpy(o->sizes, sizes, sizeof sizes);
    o->n_sizes = n;
    o->max_devices = sizes[0];
    return 0;
}

/* 0, 1 for --help, -1 after printing why */
static int decode_parse(int argc, char **argv, vdn_bench_decode_opts *o) {
    *o = (vdn_bench_decode_opts){.backend = "cuda",
                                 .T = 17,
                                 .h = 48,
                                 .w = 84,
                                 .La = 200,
                                 .reps = 3,
                                 .sizes = {1},
                                 .n_sizes = 1,
                                 .max_devices = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0, takes = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!strcmp(a, "--profile")) {
            o->profile = 1, takes = 0;
        } else if (!v) {
            fprintf(stderr, "vdn bench decode: %s expects a value\n", a);
            return -1;
        } else if (!strcmp(a, "--vae")) {
            o->vae = v;
        } else if (!strcmp(a, "--audio-vae")) {
            o->audio_vae = v;
        } else if (!strcmp(a, "--random-audio")) {
            o->random_audio = v;
        } else if (!strcmp(a, "--backend")) {
            o->backend = v;
        } else if (!strcmp(a, "--peer")) {
            o->peer = v;
        } else if (!strcmp(a, "--json")) {
            o->json = v;
        } else if (!strcmp(a, "--precision")) {
            if (vdn_precision_parse(v, &o->precision)) {
                fprintf(stderr, "vdn bench decode: --precision '%s': expected bf16 or fp8\n", v);
                return -1;
            }
        } else if (!strcmp(a, "--device")) {
            rc = decode_int(a, v, 0, 1023, &o->device);
        } else if (!strcmp(a, "--devices")) {
            rc = sizes_arg(v, o);
        } else if (!strcmp(a, "--T")) {
            rc = decode_int(a, v, 1, 100000, &o->T);
        } else if (!strcmp(a, "--h")) {
            rc = decode_int(a, v, 1, 100000, &o->h);
        } else if (!strcmp(a, "--w")) {
            rc = decode_int(a, v, 1, 100000, &o->w);
        } else if (!strcmp(a, "--La")) {
            rc = decode_int(a, v, 1, 10000000, &o->La);
        } else if (!strcmp(a, "--reps")) {
            rc = decode_int(a, v, 1, 1000, &o->reps);
        } else {
            fprintf(stderr, "vdn bench decode: unknown option '%s'\n", a);
            return -1;
        }
        if (rc) return -1;
        i += takes;
    }
    if (o->audio_vae && o->random_audio) {
        fprintf(stderr, "vdn bench decode: --audio-vae and --random-audio are exclusive\n");
        return -1;
    }
    if (!o->vae && !o->audio_vae && !o->random_audio) {
        fprintf(stderr, "vdn bench decode: nothing to time: give --vae and/or --audio-vae (or "
                        "--random-audio)\n");
        return -1;
    }
    return 0;
}

int vdn_vae_bench(int argc, char **argv) {
    vdn_bench_decode_opts o;
    const int p = decode_parse(argc, argv, &o);
    if (p) {
        decode_usage(p > 0 ? stdout : stderr);
        return p > 0 ? 0 : 2;
    }
    return vdn_bench_decode_run(&o);
}

/* ---- vdn bench text-encoder ---- */

static void text_usage(FILE *f) {
    fprintf(f,
            "usage: vdn bench text-encoder [--tokens 512] [--layer 50] [--reps 5] [--cpu]\n"
            "                              [--precision bf16|fp8] [--pictures N]\n"
            "                              [--config TEXT_ENCODER_DIR] [--json FILE] [--profile]\n"
            "Encodes one prompt of --tokens tokens up to hidden_states[--layer] with random\n"
            "weights of the Qwen3-VL-32B text shapes (or DIR/config.json's), warm, and prints the\n"
            "median and best seconds. The GPU unless --cpu. --precision fp8: the Linears\n"
            "quantised to e4m3 with row scales at load (default bf16). --profile: one more\n"
            "encode, timed op by op on the device (not in the median). --pictures N: N 768 x\n"
            "1344 keyframes before the prompt (1014 rows each), through a random vision tower\n"
            "of Qwen3-VL-32B's shapes.\n");
}

int vdn_text_bench(int argc, char **argv) {
    vdn_bench_text_opts o = {.tokens = 512, .layer = VDN_TEXT_ENCODER_LAYER, .reps = 5};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            text_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--cpu")) {
            o.cpu = 1;
        } else if (!strcmp(a, "--profile")) {
            o.profile = 1;
        } else if (v && (!strcmp(a, "--tokens") || !strcmp(a, "--layer") || !strcmp(a, "--reps"))) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || x < 1 || x > 1000000) {
                fprintf(stderr, "vdn bench text-encoder: %s \"%s\": expected a positive integer\n",
                        a, v);
                return 2;
            }
            *(!strcmp(a, "--tokens")  ? &o.tokens
              : !strcmp(a, "--layer") ? &o.layer
                                      : &o.reps) = (int)x;
            i++;
        } else if (v && !strcmp(a, "--pictures")) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || x < 0 || x > 16) {
                fprintf(stderr, "vdn bench text-encoder: --pictures \"%s\": expected 0..16\n", v);
                return 2;
            }
            o.pictures = (int)x, i++;
        } else if (v && !strcmp(a, "--config")) {
            o.config = v, i++;
        } else if (v && !strcmp(a, "--json")) {
            o.json = v, i++;
        } else if (v && !strcmp(a, "--precision")) {
            if (vdn_precision_parse(v, &o.precision)) {
                fprintf(stderr, "vdn bench text-encoder: --precision '%s': expected bf16 or fp8\n",
                        v);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "vdn bench text-encoder: unknown or incomplete option %s\n", a);
            text_usage(stderr);
            return 2;
        }
    }
    return vdn_bench_text_run(&o);
}
