/* `vdn bench encode`: the video VAE's keyframe encoder (engine/vae/video_encoder.h) at a request's
 * size, as a keyframe request pays for it: --keyframes random u8 canvases (an FL2VA request's two
 * on the 768 x 1344 canvas by default), each encoded with vdn_video_encoder_encode_u8. Reported
 * per rep, for all the canvases together: the whole encode_u8 (what ops/reference/
 * vae_encoder_bench.py times of the PyTorch pipeline's encode_vae_condition), and apart its
 * parts: the pixels' normalisation (host), the moments (the device work: the tiled encoder and
 * quant_conv, read back) and the posterior's sample (host: the seeded torch.randn, float16
 * rounding, latents_mean / latents_std). One warm-up rep, then --reps timed ones: median and best
 * of each; peak device memory. --peer prints PyTorch / vdn from the peer's JSON line of the same
 * GPU; --profile adds one more encode of one canvas, op by op (op_profile.h, stdout).
 * stdout: the table, then one JSON line (the keys below), then the comparison with the peer. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_peer.h"
#include "bench_programs.h"
#include "bench_whole.h"
#include "op_profile.h"
#include "video_encoder.h"
#include "vdn_util.h"

enum { PART_PIXELS, PART_MOMENTS, PART_SAMPLE, PART_ENCODE, N_PARTS };
static const char *const part_name[N_PARTS] = {"pixels", "moments", "sample", "encode"};

typedef struct {
    const vdn_bench_encode_opts *o;
    vdn_dev *dev;
    vdn_video_encoder *enc;
    int C, h, w;
    uint8_t *rgb;       /* keyframes x [H, W, 3] */
    float *pixels;      /* [3, H, W] of one canvas */
    float *moments;     /* [2C, h, w] */
    float *latents;     /* keyframes x [C, h, w] */
    double *s[N_PARTS]; /* seconds of each timed rep */
    double median[N_PARTS], best[N_PARTS];
    double load_s;
    size_t weights_bytes, peak_bytes;
} enc_run;

/* one rep: every canvas through the parts, then every canvas through encode_u8; seconds of each
 * into t[] */
static int one_rep(enc_run *r, double t[N_PARTS], char *err, size_t errlen) {
    const vdn_bench_encode_opts *o = r->o;
    const int H = o->height, W = o->width;
    const size_t canvas = (size_t)H * W * 3, lat = (size_t)r->C * r->h * r->w;
    memset(t, 0, sizeof(double) * N_PARTS);
    for (int k = 0; k < o->keyframes; k++) {
        double t0 = vdn_now();
        vdn_video_encoder_pixels_u8(r->rgb + k * canvas, H, W, r->pixels);
        double t1 = vdn_now();
        if (vdn_video_encoder_moments(r->enc, r->pixels, H, W, NULL, r->moments, err, errlen))
            return -1;
        double t2 = vdn_now();
        if (vdn_video_encoder_sample(vdn_video_encoder_config(r->enc), r->moments, r->h, r->w, NULL,
                                     r->latents + k * lat, err, errlen))
            return -1;
        double t3 = vdn_now();
        t[PART_PIXELS] += t1 - t0, t[PART_MOMENTS] += t2 - t1, t[PART_SAMPLE] += t3 - t2;
    }
    double t0 = vdn_now();
    for (int k = 0; k < o->keyframes; k++)
        if (vdn_video_encoder_encode_u8(r->enc, r->rgb + k * canvas, H, W, NULL,
                                        r->latents + k * lat, err, errlen))
            return -1;
    t[PART_ENCODE] = vdn_now() - t0;
    return 0;
}

/* the device, the encoder, the canvases (uniform u8 from a fixed seed) */
static int setup(enc_run *r, char *err, size_t errlen) {
    const vdn_bench_encode_opts *o = r->o;
    if (!(r->dev = vdn_dev_open(o->cpu ? "cpu" : "cuda", 0, 0, err, errlen))) return -1;
    const double t0 = vdn_now();
    if (!(r->enc = vdn_video_encoder_load(r->dev, o->vae, err, errlen))) return -1;
    r->load_s = vdn_now() - t0;
    size_t peak;
    vdn_dev_memory(r->dev, &r->weights_bytes, &peak);
    const vdn_vae_video_config *c = vdn_video_encoder_config(r->enc);
    const int sr = c->spatial_ratio;
    if (o->height % sr || o->width % sr)
        return vdn_fail(err, errlen, "--height/--width %d x %d: expected multiples of %d",
                        o->height, o->width, sr);
    r->C = c->latent_channels, r->h = o->height / sr, r->w = o->width / sr;
    const size_t canvas = (size_t)o->height * o->width * 3;
    r->rgb = vdn_xmalloc(canvas * (size_t)o->keyframes);
    uint64_t x = 0x9e3779b97f4a7c15ull; /* splitmix64: any fixed bytes will do */
    for (size_t i = 0; i < canvas * (size_t)o->keyframes; i++) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        r->rgb[i] = (uint8_t)((z ^ (z >> 31)) >> 56);
    }
    r->pixels = vdn_xmalloc(sizeof(float) * canvas);
    r->moments = vdn_xmalloc(sizeof(float) * 2 * (size_t)r->C * r->h * r->w);
    r->latents = vdn_xmalloc(sizeof(float) * (size_t)o->keyframes * r->C * r->h * r->w);
    for (int p = 0; p < N_PARTS; p++)
        r->s[p] = vdn_xcalloc((size_t)o->reps, sizeof(double));
    return 0;
}

static void run_free(enc_run *r) {
    vdn_video_encoder_free(r->enc);
    if (r->dev) vdn_dev_close(r->dev);
    free(r->rgb);
    free(r->pixels);
    free(r->moments);
    free(r->latents);
    for (int p = 0; p < N_PARTS; p++)
        free(r->s[p]);
}

/* one more moments pass of canvas 0, op by op */
static int profile(enc_run *r, char *err, size_t errlen) {
    if (vdn_prof_start(r->dev) != 0) return vdn_fail(err, errlen, "%s", vdn_dev_error(r->dev));
    vdn_video_encoder_pixels_u8(r->rgb, r->o->height, r->o->width, r->pixels);
    const int rc = vdn_video_encoder_moments(r->enc, r->pixels, r->o->height, r->o->width, NULL,
                                             r->moments, err, errlen);
    vdn_prof_stop(r->dev, rc ? NULL : stdout, "one keyframe's moments");
    return rc;
}

static int bench(enc_run *r, char *err, size_t errlen) {
    const vdn_bench_encode_opts *o = r->o;
    if (setup(r, err, errlen)) return -1;
    fprintf(stderr,
            "bench encode: encoder loaded on %s in %.1f s; %d keyframe%s of %d x %d, "
            "warm-up\n",
            vdn_dev_name(r->dev), r->load_s, o->keyframes, o->keyframes > 1 ? "s" : "", o->width,
            o->height);
    double t[N_PARTS];
    for (int rep = 0; rep <= o->reps; rep++) {
        if (one_rep(r, t, err, errlen)) return -1;
        if (rep == 0) continue; /* the warm-up */
        for (int p = 0; p < N_PARTS; p++)
            r->s[p][rep - 1] = t[p];
        fprintf(stderr, "bench encode: rep %d/%d: encode %.4f s (moments %.4f, sample %.4f)\n", rep,
                o->reps, t[PART_ENCODE], t[PART_MOMENTS], t[PART_SAMPLE]);
    }
    for (int p = 0; p < N_PARTS; p++) {
        double hi;
        whole_stats(r->s[p], o->reps, &r->median[p], &r->best[p], &hi);
    }
    size_t in_use;
    vdn_dev_memory(r->dev, &in_use, &r->peak_bytes);
    return o->profile ? profile(r, err, errlen) : 0;
}

/* the latents' RMS, and whether every value is finite */
static double latents_rms(const enc_run *r, int *finite) {
    const size_t n = (size_t)r->o->keyframes * r->C * r->h * r->w;
    double s = 0;
    *finite = 1;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(r->latents[i])) *finite = 0;
        s += (double)r->latents[i] * r->latents[i];
    }
    return n ? sqrt(s / (double)n) : 0;
}

static void write_json(FILE *f, const enc_run *r) {
    const vdn_bench_encode_opts *o = r->o;
    int finite;
    const double rms = latents_rms(r, &finite);
    fprintf(f,
            "{\"op\": \"vae_encode\", \"backend\": \"%s\", \"keyframes\": %d, \"height\": %d, "
            "\"width\": %d, \"latents\": [%d, %d, %d], \"reps\": %d, \"load_s\": %.3f, ",
            vdn_dev_name(r->dev), o->keyframes, o->height, o->width, r->C, r->h, r->w, o->reps,
            r->load_s);
    for (int p = 0; p < N_PARTS; p++)
        fprintf(f, "\"%s_s\": %.6f, \"%s_best_s\": %.6f, ", part_name[p], r->median[p],
                part_name[p], r->best[p]);
    fprintf(f,
            "\"weights_bytes\": %zu, \"peak_bytes\": %zu, \"latent_rms\": %.6f, \"finite\": %s}\n",
            r->weights_bytes, r->peak_bytes, rms, finite ? "true" : "false");
}

static void print_table(const enc_run *r) {
    const vdn_bench_encode_opts *o = r->o;
    printf("-- keyframe encode: %d x %d x %d canvas%s -> latents (%d, %d, %d) each, %s, %d reps "
           "--\n",
           o->keyframes, o->width, o->height, o->keyframes > 1 ? "es" : "", r->C, r->h, r->w,
           vdn_dev_name(r->dev), o->reps);
    static const char *const what[N_PARTS] = {
        "pixels (host: u8 -> ImageNet-normalised)", "moments (device: tiled encoder + quant_conv)",
        "sample (host: seeded randn, fp16, mean/std)", "encode_u8 (the whole call)"};
    for (int p = 0; p < N_PARTS; p++)
        printf("%-46s median %9.4f s, best %9.4f s\n", what[p], r->median[p], r->best[p]);
    printf("peak device memory %.3f GiB (encoder weights %.3f GiB), loaded in %.1f s\n",
           r->peak_bytes / (1024.0 * 1024 * 1024), r->weights_bytes / (1024.0 * 1024 * 1024),
           r->load_s);
}

static int compare_peer(const enc_run *r, char *err, size_t errlen) {
    const vdn_bench_encode_opts *o = r->o;
    size_t n;
    char *text = vdn_read_file(o->peer, &n, err, errlen);
    if (!text) return -1;
    vdn_encode_peer p;
    const int rc =
        vdn_encode_peer_parse(text, n, o->peer, o->keyframes, o->height, o->width, &p, err, errlen);
    free(text);
    if (rc) return -1;
    const double ours = r->median[PART_ENCODE], x = p.seconds / ours;
    printf("-- against the PyTorch encode (%s: %s on %s) --\n", o->peer, p.peer, p.gpu);
    printf("encode PyTorch %.4f s, vdn %.4f s: %.2fx %s\n", p.seconds, ours, x >= 1 ? x : 1 / x,
           x >= 1 ? "faster" : "slower");
    return 0;
}

int vdn_bench_encode_run(const vdn_bench_encode_opts *o) {
    char err[VDN_ERR_LEN] = "";
    enc_run r = {.o = o};
    int rc = bench(&r, err, sizeof err);
    if (!rc) {
        print_table(&r);
        write_json(stdout, &r);
        fflush(stdout);
    }
    if (!rc && o->json) {
        FILE *f = fopen(o->json, "w");
        if (!f)
            rc = vdn_fail(err, sizeof err, "--json %s: cannot write it: %s", o->json,
                          strerror(errno));
        if (f) {
            write_json(f, &r);
            if (fclose(f)) rc = vdn_fail(err, sizeof err, "--json %s: write failed", o->json);
        }
    }
    if (!rc && o->peer) rc = compare_peer(&r, err, sizeof err);
    if (rc) fprintf(stderr, "vdn bench encode: %s\n", err);
    run_free(&r);
    return rc ? 1 : 0;
}
