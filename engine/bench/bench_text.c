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

/* Qwen3-VL-32B's vision_config and vision tokens (config.json) */
static const vdn_vision_config qwen3_vl_32b_vision = {.depth = 27,
                                                      .heads = 16,
                                                      .patch = 16,
                                                      .temporal_patch = 2,
                                                      .merge = 2,
                                                      .in_channels = 3,
                                                      .hidden = 1152,
                                                      .intermediate = 4304,
                                                      .out_hidden = 5120,
                                                      .n_pos_embed = 2304,
                                                      .n_deepstack = 3,
                                                      .deepstack = {8, 16, 24},
                                                      .image_token = 151655,
                                                      .vision_start_token = 151652,
                                                      .vision_end_token = 151653,
                                                      .mrope = {24, 20, 20}};

/* A presentation of `pictures` 768 x 1344 keyframes (a 4-token label and a vision block of 1008
 * rows each: grid 1 x 48 x 84) and `tokens` prompt tokens; random pixel rows in [-1, 1]. */
typedef struct {
    int32_t *ids;
    int n, pictures;
    int64_t (*grids)[3];
    float *pixels;
} bench_input;

static void make_input(bench_input *in, int pictures, int tokens, const vdn_vision_config *vc) {
    const int64_t gh = 48, gw = 84, per = gh * gw / (vc->merge * vc->merge);
    in->pictures = pictures;
    in->n = tokens + pictures * (int)(4 + per + 2);
    in->ids = vdn_xmalloc(sizeof(int32_t) * (size_t)in->n);
    in->grids = vdn_xcalloc((size_t)(pictures > 0 ? pictures : 1), sizeof *in->grids);
    int at = 0;
    for (int p = 0; p < pictures; p++) {
        for (int k = 0; k < 4; k++)
            in->ids[at++] = 27 + 100 * p + k;
        in->ids[at++] = vc->vision_start_token;
        for (int64_t k = 0; k < per; k++)
            in->ids[at++] = vc->image_token;
        in->ids[at++] = vc->vision_end_token;
        in->grids[p][0] = 1, in->grids[p][1] = gh, in->grids[p][2] = gw;
    }
    for (int i = 0; i < tokens; i++)
        in->ids[at++] = (int32_t)((i * 7919) % 151000);
    const int64_t cols = 3 * (int64_t)vc->temporal_patch * vc->patch * vc->patch;
    const size_t np = (size_t)(pictures * gh * gw * cols);
    in->pixels = vdn_xmalloc(sizeof(float) * (np ? np : 1));
    for (size_t i = 0; i < np; i++)
        in->pixels[i] = (float)((double)((i * 2654435761u) % 1000003) / 500001.5 - 1.0);
}

static int encode(vdn_text_encoder *e, const bench_input *in, float *out, char *err,
                  size_t errlen) {
    return vdn_text_encoder_run_pictures(e, in->ids, in->n, in->pixels,
                                         (const int64_t(*)[3])in->grids, in->pictures, out, err,
                                         errlen);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* one more encode with every op timed on the device (op_profile.h), printed to stdout */
static int profile_run(vdn_text_encoder *e, vdn_dev *dev, const bench_input *in, float *out,
                       char *err, size_t errlen) {
    if (vdn_prof_start(dev) != 0) {
        vdn_fail(err, errlen, "%s", vdn_dev_error(dev));
        return -1;
    }
    int rc = encode(e, in, out, err, errlen);
    vdn_prof_stop(dev, rc ? NULL : stdout, "one encode");
    return rc;
}

int vdn_bench_text_run(const vdn_bench_text_opts *o) {
    int layer = o->layer;
    const int tokens = o->tokens, reps = o->reps, profile = o->profile;
    const char *backend = o->cpu ? "cpu" : "cuda", *config = o->config, *json = o->json;
    const vdn_precision precision = o->precision;
    char err[VDN_ERR_LEN];
    vdn_text_config cfg = vdn_text_qwen3_vl_32b; /* encoder_config.h */
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
    int rc = 0;
    vdn_vision_config vc = qwen3_vl_32b_vision; /* or --config's vision_config */
    if (o->pictures > 0 && config) {
        rc = vdn_vision_config_load(config, &cfg, &vc, err, sizeof err);
        if (rc == 1) vdn_fail(err, sizeof err, "%s/config.json has no vision_config", config);
    }
    if (o->pictures > 0 && !rc) {
        t0 = vdn_now();
        rc = vdn_text_encoder_random_vision(e, &vc, 2, err, sizeof err);
        vdn_dev_memory(dev, &in_use, &peak);
        if (!rc)
            printf("vision tower: depth %d, hidden %lld, %d heads, %d DeepStack mergers: %.1f GB "
                   "of weights in all, made in %.1f s\n",
                   vc.depth, (long long)vc.hidden, vc.heads, vc.n_deepstack, in_use / 1e9,
                   vdn_now() - t0);
    }
    bench_input in;
    make_input(&in, o->pictures, tokens, &vc);
    const int rows = in.n;
    float *out = vdn_xmalloc(sizeof(float) * (size_t)rows * (size_t)cfg.hidden);
    double *sec = vdn_xcalloc((size_t)reps, sizeof *sec);
    rc = rc || encode(e, &in, out, err, sizeof err); /* warm-up */
    for (int r = 0; !rc && r < reps; r++) {
        double t = vdn_now();
        rc = encode(e, &in, out, err, sizeof err);
        sec[r] = vdn_now() - t;
    }
    if (!rc && profile) rc = profile_run(e, dev, &in, out, err, sizeof err);
    if (rc) {
        fprintf(stderr, "vdn bench text-encoder: %s\n", err);
    } else {
        int finite = 1;
        for (size_t i = 0; i < (size_t)rows * (size_t)cfg.hidden; i++)
            if (!(out[i] == out[i]) || out[i] - out[i] != 0) finite = 0;
        qsort(sec, (size_t)reps, sizeof *sec, cmp_double);
        vdn_dev_memory(dev, &in_use, &peak);
        printf("encode %d tokens%s -> hidden_states[%d]: median %.1f ms, best %.1f ms (%d reps, "
               "%.0f rows/s, peak %.1f GB%s)\n",
               rows, o->pictures ? " with pictures" : "", layer, 1e3 * sec[reps / 2], 1e3 * sec[0],
               reps, rows / sec[reps / 2], peak / 1e9, finite ? "" : ", NON-FINITE output");
        if (json) {
            FILE *f = fopen(json, "w");
            if (f) {
                fprintf(f,
                        "{\"op\": \"text_encoder\", \"tokens\": %d, \"pictures\": %d, "
                        "\"rows\": %d, \"layer\": %d, \"hidden\": "
                        "%lld, \"device\": \"%s\", \"precision\": \"%s\", \"median_ms\": "
                        "%.3f, \"best_ms\": %.3f, \"reps\": %d, \"peak_bytes\": %zu, "
                        "\"finite\": %s}\n",
                        tokens, o->pictures, rows, layer, (long long)cfg.hidden, vdn_dev_name(dev),
                        vdn_precision_name(precision), 1e3 * sec[reps / 2], 1e3 * sec[0], reps,
                        peak, finite ? "true" : "false");
                fclose(f);
            }
        }
        if (!finite) rc = -1;
    }
    free(in.ids), free(in.grids), free(in.pixels);
    free(out);
    free(sec);
    vdn_text_encoder_close(e);
    vdn_dev_close(dev);
    return rc ? 1 : 0;
}
