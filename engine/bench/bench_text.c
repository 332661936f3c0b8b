/* `vdn bench text-encoder`: seconds to encode one prompt with the real Qwen3-VL-32B text shapes
 * (random weights, hidden_states[50]) on this machine's GPU; the PyTorch peer is
 * text/bench/peer_text_encoder.py, run in the same session (docs/PERF.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encoder.h"
#include "op_profile.h"
#include "bench_programs.h"
#include "vdn_util.h"

/* Qwen3-VL-32B's text_config (the release's text_encoder/config.json) */
static const vdn_text_config qwen3_vl_32b = {.vocab = 151936,
                                             .hidden = 5120,
                                             .intermediate = 25600,
                                             .head_dim = 128,
                                             .layers = 64,
                                             .heads = 64,
                                             .kv_heads = 8,
                                             .rms_eps = 1e-6,
                                             .rope_theta = 5000000.0,
                                             .max_positions = 262144};

static void usage(FILE *f) {
    fprintf(f,
            "usage: vdn bench text-encoder [--tokens 512] [--layer 50] [--reps 5] [--cpu]\n"
            "                              [--precision bf16|fp8]\n"
            "                              [--config TEXT_ENCODER_DIR] [--json FILE] [--profile]\n"
            "Encodes one prompt of --tokens tokens up to hidden_states[--layer] with random\n"
            "weights of the Qwen3-VL-32B text shapes (or DIR/config.json's), warm, and prints the\n"
            "median and best seconds. The GPU unless --cpu. --precision fp8: the Linears\n"
            "quantised to e4m3 with row scales at load (default bf16). --profile: one more\n"
            "encode, timed op by op on the device (not in the median).\n");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* one more encode with every op timed on the device (op_profile.h), printed to stdout */
static int profile_run(vdn_text_encoder *e, vdn_dev *dev, const int32_t *ids, int tokens,
                       float *out, char *err, size_t errlen) {
    if (vdn_prof_start(dev) != 0) {
        vdn_fail(err, errlen, "%s", vdn_dev_error(dev));
        return -1;
    }
    int rc = vdn_text_encoder_run(e, ids, tokens, out, err, errlen);
    vdn_prof_stop(dev, rc ? NULL : stdout, "one encode");
    return rc;
}

int vdn_text_bench(int argc, char **argv) {
    int tokens = 512, layer = VDN_TEXT_ENCODER_LAYER, reps = 5;
    const char *backend = "cuda", *config = NULL, *json = NULL;
    int profile = 0;
    vdn_precision precision = VDN_PRECISION_BF16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--cpu")) {
            backend = "cpu";
        } else if (!strcmp(a, "--profile")) {
            profile = 1;
        } else if (v && (!strcmp(a, "--tokens") || !strcmp(a, "--layer") || !strcmp(a, "--reps"))) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || x < 1 || x > 1000000) {
                fprintf(stderr, "vdn bench text-encoder: %s \"%s\": expected a positive integer\n",
                        a, v);
                return 2;
            }
            *(!strcmp(a, "--tokens") ? &tokens : !strcmp(a, "--layer") ? &layer : &reps) = (int)x;
            i++;
        } else if (v && !strcmp(a, "--config")) {
            config = v, i++;
        } else if (v && !strcmp(a, "--json")) {
            json = v, i++;
        } else if (v && !strcmp(a, "--precision")) {
            if (vdn_precision_parse(v, &precision)) {
                fprintf(stderr, "vdn bench text-encoder: --precision '%s': expected bf16 or fp8\n",
                        v);
                return 2;
            }
            i++;
        } else {
            fprintf(stderr, "vdn bench text-encoder: unknown or incomplete option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    char err[VDN_ERR_LEN];
    vdn_text_config cfg = qwen3_vl_32b;
    if (config && vdn_text_config_load(config, &cfg, err, sizeof err)) {
        fprintf(stderr, "vdn bench text-encoder: %s\n", err);
        return 1;
    }
    if (layer > cfg.layers) layer = cfg.layers;
    vdn_dev *dev = vdn_dev_open(backend, 0, 0, err, sizeof err);
    if (!dev) {
        fprintf(stderr, "vdn bench text-encoder: %s\n", err);
        return 1;
    }
    double t0 = vdn_now();
    vdn_text_encoder *e = vdn_text_encoder_random(&cfg, layer, precision, dev, 1, err, sizeof err);
    if (!e) {
        fprintf(stderr, "vdn bench text-encoder: %s\n", err);
        vdn_dev_close(dev);
        return 1;
    }
    size_t in_use, peak;
    vdn_dev_memory(dev, &in_use, &peak);
    printf("text encoder: %d layers of hidden %lld (%d heads / %d kv x %lld, mlp %lld) on %s, "
           "%s: %.1f GB of weights (load peak %.1f GB), made in %.1f s\n",
           layer, (long long)cfg.hidden, cfg.heads, cfg.kv_heads, (long long)cfg.head_dim,
           (long long)cfg.intermediate, vdn_dev_name(dev), vdn_precision_name(precision),
           in_use / 1e9, peak / 1e9, vdn_now() - t0);
    int32_t *ids = vdn_xmalloc(sizeof(int32_t) * (size_t)tokens);
    for (int i = 0; i < tokens; i++)
        ids[i] = (int32_t)((i * 7919) % 151000);
    float *out = vdn_xmalloc(sizeof(float) * (size_t)tokens * (size_t)cfg.hidden);
    double *sec = vdn_xcalloc((size_t)reps, sizeof *sec);
    int rc = vdn_text_encoder_run(e, ids, tokens, out, err, sizeof err); /* warm-up */
    for (int r = 0; !rc && r < reps; r++) {
        double t = vdn_now();
        rc = vdn_text_encoder_run(e, ids, tokens, out, err, sizeof err);
        sec[r] = vdn_now() - t;
    }
    if (!rc && profile) rc = profile_run(e, dev, ids, tokens, out, err, sizeof err);
    if (rc) {
        fprintf(stderr, "vdn bench text-encoder: %s\n", err);
    } else {
        int finite = 1;
        for (size_t i = 0; i < (size_t)tokens * (size_t)cfg.hidden; i++)
            if (!(out[i] == out[i]) || out[i] - out[i] != 0) finite = 0;
        qsort(sec, (size_t)reps, sizeof *sec, cmp_double);
        vdn_dev_memory(dev, &in_use, &peak);
        printf("encode %d tokens -> hidden_states[%d]: median %.1f ms, best %.1f ms (%d reps, "
               "%.0f tokens/s, peak %.1f GB%s)\n",
               tokens, layer, 1e3 * sec[reps / 2], 1e3 * sec[0], reps, tokens / sec[reps / 2],
               peak / 1e9, finite ? "" : ", NON-FINITE output");
        if (json) {
            FILE *f = fopen(json, "w");
            if (f) {
                fprintf(f,
                        "{\"op\": \"text_encoder\", \"tokens\": %d, \"layer\": %d, \"hidden\": "
                        "%lld, \"device\": \"%s\", \"precision\": \"%s\", \"median_ms\": "
                        "%.3f, \"best_ms\": %.3f, \"reps\": %d, \"peak_bytes\": %zu, "
                        "\"finite\": %s}\n",
                        tokens, layer, (long long)cfg.hidden, vdn_dev_name(dev),
                        vdn_precision_name(precision), 1e3 * sec[reps / 2], 1e3 * sec[0], reps,
                        peak, finite ? "true" : "false");
                fclose(f);
            }
        }
        if (!finite) rc = -1;
    }
    free(ids);
    free(out);
    free(sec);
    vdn_text_encoder_close(e);
    vdn_dev_close(dev);
    return rc ? 1 : 0;
}
