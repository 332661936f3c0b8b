/* `vdn bench`: per-op milliseconds of one DiT block at the H3 workload on this GPU, with random
 * weights made on the GPU, and the seconds per model evaluation they add up to. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cli.h"
#include "bench_programs.h"
#include "commands.h"
#include "vdn_util.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vdn bench [--frames 102] [--text 512] [--audio 575] [--grid 24x42]\n"
            "                 [--reps 10] [--attn-reps 3] [--json FILE] [--peers PEERS.json]\n"
            "       vdn bench compare VDN.json PEERS.json\n"
            "       vdn bench attn-vae [--reps 10]  (the video VAE decoder's attention)\n"
            "       vdn bench text-encoder --help   (the Qwen3-VL text encoder, text/)\n"
            "       vdn bench decode --help         (the video and audio VAE decoders)\n"
            "       vdn bench --whole --help        (whole model evaluations, end to end)\n"
            "       vdn bench encode --help         (the video VAE's keyframe encoder)\n"
            "       vdn bench --clip --help         (one whole clip: text, DiT, decode, mux)\n"
            "Times one MiniMax-H3 / VDN-H3 block op by op (CUDA events, warm, median) at the\n"
            "given workload with random weights generated on the GPU, and estimates seconds per\n"
            "model evaluation (50 blocks + embeddings and heads) for dense and VDN attention.\n"
            "--peers takes the PEERS_JSON that shared/bench/h3_peers.py wrote in the same session\n"
            "and prints the target table (op, PyTorch peer, target, vdn, met or MISSED);\n"
            "`vdn bench compare` prints it for recorded runs (no GPU needed).\n");
}

int vdn_bench_int_arg(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s ? s : "", &end, 10);
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "%s: %s expects an integer in [%d, %d], got '%s'\n", cmd, opt, lo, hi,
                s ? s : "(missing)");
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_int(const char *opt, const char *s, int lo, int hi, int *out) {
    return vdn_bench_int_arg("vdn bench", opt, s, lo, hi, out);
}

int vdn_bench_parse(int argc, char **argv, vdn_bench_opts *out, int *help) {
    vdn_bench_opts o = {.frames = 102,
                        .text = 512,
                        .audio = 575,
                        .gh = 24,
                        .gw = 42,
                        .reps = 10,
                        .attn_reps = 3,
                        .json = NULL,
                        .peers = NULL};
    *help = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *help = 1;
        } else if (!strcmp(a, "--frames")) {
            rc = parse_int(a, v, 11, 1000, &o.frames), i++;
        } else if (!strcmp(a, "--text")) {
            rc = parse_int(a, v, 1, 100000, &o.text), i++;
        } else if (!strcmp(a, "--audio")) {
            rc = parse_int(a, v, 0, 100000, &o.audio), i++;
        } else if (!strcmp(a, "--reps")) {
            rc = parse_int(a, v, 1, 1000, &o.reps), i++;
        } else if (!strcmp(a, "--attn-reps")) {
            rc = parse_int(a, v, 1, 100, &o.attn_reps), i++;
        } else if (!strcmp(a, "--grid")) {
            int gh, gw;
            char tail;
            if (!v || sscanf(v, "%dx%d%c", &gh, &gw, &tail) != 2 || gh < 1 || gw < 1 || gh > 512 ||
                gw > 512) {
                fprintf(stderr, "vdn bench: --grid expects HxW patch counts like 24x42, got '%s'\n",
                        v ? v : "(missing)");
                return -1;
            }
            o.gh = gh, o.gw = gw, i++;
        } else if (!strcmp(a, "--json")) {
            if (!v) {
                fprintf(stderr, "vdn bench: --json expects a file name\n");
                return -1;
            }
            o.json = v, i++;
        } else if (!strcmp(a, "--peers")) {
            if (!v) {
                fprintf(stderr, "vdn bench: --peers expects the h3_peers.py PEERS_JSON file\n");
                return -1;
            }
            o.peers = v, i++;
        } else {
            fprintf(stderr, "vdn bench: unknown option '%s'\n", a);
            return -1;
        }
        if (rc) return -1;
    }
    *out = o;
    return 0;
}

static int compare(const char *ours, const char *peers) {
    char err[VDN_ERR_LEN];
    if (vdn_bench_compare(ours, peers, stdout, err, sizeof err) != 0) {
        fprintf(stderr, "vdn bench: %s\n", err);
        return 1;
    }
    return 0;
}

int vdn_cmd_bench(int argc, char **argv) {
    vdn_bench_opts o;
    int help = 0;
    if (argc >= 2 && !strcmp(argv[1], "text-encoder")) {
        return vdn_text_bench(argc - 1, argv + 1);
    }
    if (argc >= 2 && !strcmp(argv[1], "decode")) {
        return vdn_vae_bench(argc - 1, argv + 1);
    }
    if (argc >= 2 && !strcmp(argv[1], "encode")) {
        return vdn_encode_bench(argc - 1, argv + 1);
    }
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--clip")) return vdn_clip_bench(argc, argv);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--whole")) return vdn_bench_whole(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "compare")) {
        if (argc != 4) {
            usage(stderr);
            return 2;
        }
        return compare(argv[2], argv[3]);
    }
    if (argc >= 2 && !strcmp(argv[1], "attn-vae")) {
        int reps = 10;
        if (argc != 2 &&
            (argc != 4 || strcmp(argv[2], "--reps") ||
             vdn_bench_int_arg("vdn bench attn-vae", "--reps", argv[3], 1, 1000, &reps))) {
            usage(stderr);
            return 2;
        }
#ifdef VDN_HAVE_CUDA
        return vdn_bench_attn_vae(reps) != 0;
#else
        fprintf(stderr, "vdn bench attn-vae: this build has no CUDA backend\n");
        return 2;
#endif
    }
    if (vdn_bench_parse(argc, argv, &o, &help) != 0) {
        usage(stderr);
        return 2;
    }
    if (help) {
        usage(stdout);
        return 0;
    }
#ifdef VDN_HAVE_CUDA
    /* the table needs our numbers as JSON: keep them beside the peers' file when not asked to */
    char ours[4096];
    if (o.peers && !o.json) {
        snprintf(ours, sizeof ours, "%s.vdn-bench.json", o.peers);
        o.json = ours;
    }
    if (vdn_bench_cuda(&o) != 0) return 1;
    if (!o.peers) return 0;
    printf("-- targets, with the PyTorch peers of this run (%s) --\n", o.peers);
    return compare(o.json, o.peers);
#else
    fprintf(stderr, "vdn bench: this build has no CUDA backend (nvcc was not found when it was "
                    "built); rebuild where the CUDA toolkit is installed to benchmark a GPU\n");
    return 2;
#endif
}
