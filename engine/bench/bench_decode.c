/* `vdn bench decode`: wall time of the video and audio decoders at a chosen size on one device or
 * a group of devices, as `vdn decode` runs them (the result read back to the host each time),
 * with the PyTorch decode's numbers beside ours when the peer's JSON (ops/reference/vae_bench.py,
 * run on the same GPU in the same session) is given. Random normal latents (fixed seeds); for each
 * group size of --devices, the video's warm-up decode and REPS timed ones, then the audio's, as
 * the peer times them (the largest size first: the frames and waveform of every other size are
 * compared with its); --profile adds one decode of each timed op by op (op_profile.h, stderr) on
 * one device.
 * stdout: one JSON line (the keys below), then the comparison with the peer. */
#include <pthread.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_peer.h"
#include "op_profile.h"
#include "sampler.h"
#include "vae.h"
#include "vae_init.h"
#include "bench_programs.h"
#include "vdn_util.h"

typedef struct {
    int devices;
    double video_s, audio_s;            /* < 0: not run */
    double video_diff, audio_diff;      /* max |x - x of the first size|; 0 for the first */
    int video_units[VDN_VAE_MAX_GROUP]; /* the deal: tiles of each member */
} bench_size;

typedef struct {
    char backend[64];
    int C, T, h, w, F, La, reps;
    double video_s, audio_s, load_s, frame_mean, wave_rms; /* one device's (the list's last size) */
    bench_size size[VDN_BENCH_MAX_SIZES];
    int n_sizes;
} bench_result;

/* standard normal latents from the sampler's seeded stream (sampler.h) */
static void randn(float *x, size_t n, uint64_t seed) {
    vdn_rng r;
    vdn_rng_seed(&r, seed);
    vdn_rng_normal(&r, x, n);
}

/* the decoders as loaded for one run: a copy on each of n devices */
typedef struct {
    int n;
    vdn_dev *dev[VDN_VAE_MAX_GROUP];
    vdn_video_vae *v[VDN_VAE_MAX_GROUP];
    vdn_audio_vae *a[VDN_VAE_MAX_GROUP];
    float *z, *frames, *za, *wave, *frames0, *wave0; /* *0: the first size's output */
    size_t n_frames, n_wave;
} bench_run;

static void run_free(bench_run *b) {
    for (int i = 0; i < b->n; i++) {
        vdn_video_vae_free(b->v[i]);
        vdn_audio_vae_free(b->a[i]);
        if (b->dev[i]) vdn_dev_close(b->dev[i]);
    }
    free(b->z);
    free(b->frames);
    free(b->za);
    free(b->wave);
    free(b->frames0);
    free(b->wave0);
}

typedef struct {
    const vdn_bench_decode_opts *o;
    const char *adir;
    bench_run *b;
    int i;
    char err[VDN_ERR_LEN];
} load_job;

/* device i's copy of the decoders */
static void *load_one(void *arg) {
    load_job *j = arg;
    const vdn_bench_decode_opts *o = j->o;
    bench_run *b = j->b;
    const int i = j->i;
    if (o->vae && !(b->v[i] = vdn_video_vae_load_precision(b->dev[i], o->vae, o->precision, j->err,
                                                           sizeof j->err)))
        return NULL;
    if (j->adir) b->a[i] = vdn_audio_vae_load(b->dev[i], j->adir, j->err, sizeof j->err);
    return NULL;
}

/* the decoders on every device, loaded in parallel (a copy each: the disk is read n times) */
static int load_all(const vdn_bench_decode_opts *o, const char *adir, bench_run *b, char *err,
                    size_t errlen) {
    load_job jobs[VDN_VAE_MAX_GROUP];
    pthread_t th[VDN_VAE_MAX_GROUP];
    int started[VDN_VAE_MAX_GROUP] = {0};
    for (int i = 0; i < b->n; i++) {
        jobs[i] = (load_job){.o = o, .adir = adir, .b = b, .i = i};
        started[i] = i > 0 && pthread_create(&th[i], NULL, load_one, &jobs[i]) == 0;
        if (!started[i]) load_one(&jobs[i]);
    }
    int rc = 0;
    for (int i = 0; i < b->n; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        if (!rc && jobs[i].err[0]) rc = vdn_fail(err, errlen, "%s", jobs[i].err);
    }
    return rc;
}

/* open the devices, load the decoders, make the latents and the output buffers */
static int run_setup(const vdn_bench_decode_opts *o, bench_run *b, bench_result *res, char *err,
                     size_t errlen) {
    for (b->n = 0; b->n < o->max_devices; b->n++)
        if (!(b->dev[b->n] = vdn_dev_open(o->backend, o->device + b->n, 0, err, errlen))) return -1;
    snprintf(res->backend, sizeof res->backend, "%s", vdn_dev_name(b->dev[0]));
    const char *adir = o->audio_vae;
    if (o->random_audio) {
        fprintf(stderr, "bench decode: writing a random audio VAE at the release's size to %s\n",
                o->random_audio);
        if (vdn_vae_init_audio_full(o->random_audio, 1, err, errlen)) return -1;
        adir = o->random_audio;
    }
    const double t0 = vdn_now();
    if (load_all(o, adir, b, err, errlen)) return -1;
    res->load_s = vdn_now() - t0;
    if (b->v[0]) {
        const vdn_vae_video_config *c = vdn_video_vae_config(b->v[0]);
        if ((res->F = vdn_video_vae_frames(b->v[0], o->T, err, errlen)) < 0) return -1;
        res->C = c->latent_channels;
        const size_t nz = (size_t)res->C * o->T * o->h * o->w;
        b->n_frames = 3 * (size_t)res->F * (size_t)(o->h * c->spatial_ratio) *
                      (size_t)(o->w * c->spatial_ratio);
        b->z = vdn_xmalloc(sizeof(float) * nz);
        randn(b->z, nz, 1);
        b->frames = vdn_xmalloc(sizeof(float) * b->n_frames);
    }
    if (b->a[0]) {
        const vdn_vae_audio_config *c = vdn_audio_vae_config(b->a[0]);
        const size_t nza = 2 * (size_t)c->latent_channels * o->La;
        b->n_wave = 2 * (size_t)o->La * c->hop;
        b->za = vdn_xmalloc(sizeof(float) * nza);
        randn(b->za, nza, 2);
        b->wave = vdn_xmalloc(sizeof(float) * b->n_wave);
    }
    return 0;
}

enum { PART_VIDEO = 1, PART_AUDIO = 2 };

/* one decode of each loaded decoder in parts (PART_*) over the first k devices; *tv, *ta their
 * wall times; the video's deal into units */
static int decode_once(const vdn_bench_decode_opts *o, bench_run *b, int k, int parts, int profile,
                       double *tv, double *ta, int *units, char *err, size_t errlen) {
    vdn_vae_share share;
    double s = vdn_now();
    if (b->v[0] && (parts & PART_VIDEO)) {
        if (profile && vdn_prof_start(b->dev[0]) != 0)
            return vdn_fail(err, errlen, "%s", vdn_dev_error(b->dev[0]));
        if (vdn_video_vae_decode_group(b->v, k, b->z, o->T, o->h, o->w, b->frames, NULL, NULL,
                                       &share, err, errlen))
            return -1;
        if (profile) vdn_prof_stop(b->dev[0], stderr, "video decode");
        memcpy(units, share.units, sizeof share.units);
    }
    double m = vdn_now();
    if (b->a[0] && (parts & PART_AUDIO)) {
        if (profile && vdn_prof_start(b->dev[0]) != 0)
            return vdn_fail(err, errlen, "%s", vdn_dev_error(b->dev[0]));
        if (vdn_audio_vae_decode_group(b->a, k, b->za, 2, o->La, b->wave, NULL, NULL, NULL, err,
                                       errlen))
            return -1;
        if (profile) vdn_prof_stop(b->dev[0], stderr, "audio decode");
    }
    *tv = m - s;
    *ta = vdn_now() - m;
    return 0;
}

/* the largest |x - y| (NaN counts as infinite) */
static double max_diff(const float *x, const float *y, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)x[i] - (double)y[i]);
        if (!(d <= m)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

/* one decoder's warm-up and o->reps timed decodes over the first k devices; the mean time */
static int time_part(const vdn_bench_decode_opts *o, bench_run *b, int k, int part, bench_size *sz,
                     double *mean, char *err, size_t errlen) {
    const char *name = part == PART_VIDEO ? "video" : "audio";
    double sum = 0, tv, ta;
    for (int r = 0; r <= o->reps; r++) {
        if (decode_once(o, b, k, part, 0, &tv, &ta, sz->video_units, err, errlen)) return -1;
        if (r == 0) continue; /* decode 0 is the warm-up */
        const double t = part == PART_VIDEO ? tv : ta;
        sum += t;
        fprintf(stderr, "bench decode: %d device%s, rep %d/%d: %s %.4f s\n", k, k > 1 ? "s" : "", r,
                o->reps, name, t);
    }
    *mean = sum / o->reps;
    return 0;
}

/* the timed decodes over the first k devices into *sz: the video's warm-up and reps, then the
 * audio's, as the PyTorch peer times them (ops/reference/vae_bench.py): each decoder's warm-up
 * runs right after the other's work, and every timed decode after one of its own. (Timing the
 * audio right after each video decode measured it at the clocks of a GPU held at its power limit
 * by the video: 57.4 ms instead of 49.1 ms on the H200, 576 stereo latents.) */
static int bench_size_run(const vdn_bench_decode_opts *o, bench_run *b, int k, bench_size *sz,
                          char *err, size_t errlen) {
    *sz = (bench_size){.devices = k, .video_s = -1, .audio_s = -1};
    if (b->v[0] && time_part(o, b, k, PART_VIDEO, sz, &sz->video_s, err, errlen)) return -1;
    if (b->a[0] && time_part(o, b, k, PART_AUDIO, sz, &sz->audio_s, err, errlen)) return -1;
    if (!b->frames0 && !b->wave0) { /* the first size: the others are compared with it */
        b->frames0 = b->n_frames ? vdn_xmalloc(sizeof(float) * b->n_frames) : NULL;
        b->wave0 = b->n_wave ? vdn_xmalloc(sizeof(float) * b->n_wave) : NULL;
        if (b->frames0) memcpy(b->frames0, b->frames, sizeof(float) * b->n_frames);
        if (b->wave0) memcpy(b->wave0, b->wave, sizeof(float) * b->n_wave);
    }
    sz->video_diff = b->frames0 ? max_diff(b->frames0, b->frames, b->n_frames) : 0;
    sz->audio_diff = b->wave0 ? max_diff(b->wave0, b->wave, b->n_wave) : 0;
    return 0;
}

static int bench(const vdn_bench_decode_opts *o, bench_result *res, char *err, size_t errlen) {
    bench_run b = {0};
    memset(res, 0, sizeof *res);
    res->T = o->T, res->h = o->h, res->w = o->w, res->La = o->La, res->reps = o->reps;
    int rc = run_setup(o, &b, res, err, errlen);
    if (!rc)
        fprintf(stderr, "bench decode: loaded in %.1f s on %s%s; warm-up\n", res->load_s,
                res->backend, b.n > 1 ? " and the next devices" : "");
    for (int i = 0; !rc && i < o->n_sizes; i++, res->n_sizes++)
        rc = bench_size_run(o, &b, o->sizes[i], &res->size[i], err, errlen);
    if (!rc && o->profile) {
        double tv, ta;
        int units[VDN_VAE_MAX_GROUP];
        rc = decode_once(o, &b, 1, PART_VIDEO | PART_AUDIO, 1, &tv, &ta, units, err, errlen);
    }
    if (!rc) {
        const bench_size *last = &res->size[res->n_sizes - 1];
        res->video_s = last->video_s;
        res->audio_s = last->audio_s;
        double sum = 0, wsum = 0;
        for (size_t i = 0; i < b.n_frames; i++)
            sum += b.frames[i];
        for (size_t i = 0; i < b.n_wave; i++)
            wsum += (double)b.wave[i] * b.wave[i];
        res->frame_mean = b.n_frames ? sum / (double)b.n_frames : 0;
        res->wave_rms = b.n_wave ? sqrt(wsum / (double)b.n_wave) : 0;
    }
    run_free(&b);
    return rc;
}

static void put_time(FILE *f, const char *key, double s) {
    if (s < 0)
        fprintf(f, "\"%s\": null", key);
    else
        fprintf(f, "\"%s\": %.4f", key, s);
}

static void write_json(FILE *f, const vdn_bench_decode_opts *o, const bench_result *r) {
    fprintf(f, "{\"backend\": \"%s\", \"video_precision\": \"%s\", \"latents\": [%d, %d, %d, %d], ",
            r->backend, vdn_precision_name(o->precision), r->C, r->T, r->h, r->w);
    fprintf(f, "\"frames\": %d, \"audio_latents\": %d, ", r->F,
            o->audio_vae || o->random_audio ? r->La : 0);
    put_time(f, "video_s", r->video_s);
    fprintf(f, ", ");
    put_time(f, "audio_s", r->audio_s);
    fprintf(f,
            ", \"devices\": %d, \"load_s\": %.1f, \"reps\": %d, \"frame_mean\": %.6f, "
            "\"wave_rms\": %.6f, \"sizes\": [",
            r->n_sizes ? r->size[r->n_sizes - 1].devices : 1, r->load_s, r->reps, r->frame_mean,
            r->wave_rms);
    for (int i = 0; i < r->n_sizes; i++) {
        const bench_size *z = &r->size[i];
        fprintf(f, "%s{\"devices\": %d, ", i ? ", " : "", z->devices);
        put_time(f, "video_s", z->video_s);
        fprintf(f, ", ");
        put_time(f, "audio_s", z->audio_s);
        fprintf(f, ", \"video_max_diff\": %.3g, \"audio_max_diff\": %.3g, \"tiles\": [",
                z->video_diff, z->audio_diff);
        for (int m = 0; m < z->devices; m++)
            fprintf(f, "%s%d", m ? ", " : "", z->video_units[m]);
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
}

static void compare_line(const char *what, double peer, double ours) {
    if (ours < 0) return;
    if (peer < 0) {
        printf("%-6s vdn %.4f s (the peer has no time for it)\n", what, ours);
        return;
    }
    const double x = peer / ours;
    printf("%-6s PyTorch %.4f s, vdn %.4f s: %.2fx %s\n", what, peer, ours, x >= 1 ? x : 1 / x,
           x >= 1 ? "faster" : "slower");
}

static int compare_peer(const char *path, const bench_result *r, int video, int audio, char *err,
                        size_t errlen) {
    size_t n;
    char *text = vdn_read_file(path, &n, err, errlen);
    if (!text) return -1;
    const int latents[4] = {r->C, r->T, r->h, r->w};
    vdn_vae_peer peer;
    const int rc =
        vdn_vae_peer_parse(text, n, path, latents, r->La, video, audio, &peer, err, errlen);
    free(text);
    if (rc) return -1;
    printf("-- against the PyTorch decode (%s: %s on %s) --\n", path, peer.peer, peer.gpu);
    for (int i = r->n_sizes - 1; i >= 0; i--) { /* one device first */
        const bench_size *z = &r->size[i];
        char v[48], a[48];
        snprintf(v, sizeof v, z->devices == 1 ? "video" : "video on %d devices", z->devices);
        snprintf(a, sizeof a, z->devices == 1 ? "audio" : "audio on %d devices", z->devices);
        compare_line(v, peer.video_s, z->video_s);
        compare_line(a, peer.audio_s, z->audio_s);
    }
    return 0;
}

int vdn_bench_decode_run(const vdn_bench_decode_opts *opts) {
    const vdn_bench_decode_opts o = *opts;
    char err[VDN_ERR_LEN] = "";
    bench_result r;
    if (bench(&o, &r, err, sizeof err)) {
        fprintf(stderr, "vdn bench decode: %s\n", err);
        return 1;
    }
    write_json(stdout, &o, &r);
    fflush(stdout);
    if (o.json) {
        FILE *f = fopen(o.json, "w");
        if (!f) {
            fprintf(stderr, "vdn bench decode: --json %s: cannot write it: %s\n", o.json,
                    strerror(errno));
            return 1;
        }
        write_json(f, &o, &r);
        if (fclose(f)) {
            fprintf(stderr, "vdn bench decode: --json %s: write failed\n", o.json);
            return 1;
        }
    }
    if (o.peer &&
        compare_peer(o.peer, &r, o.vae != NULL, o.audio_vae || o.random_audio, err, sizeof err)) {
        fprintf(stderr, "vdn bench decode: %s\n", err);
        return 1;
    }
    return 0;
}
