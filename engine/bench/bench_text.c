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

int vdn_bench_text_run(const vdn_bench_text_opts *o) {
    int layer = o->layer;
    const int tokens = o->tokens, reps = o->reps, profile = o->profile;
    const char *backend = o->cpu ? "cpu" : "cuda", *config = o->config, *json = o->json;
    const vdn_precision precision = o->precision;
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
