/* `vdn bench --clip --mux-only`: the clip's last stage apart, the mp4 mux (media/mp4.h: H.264 +
 * AAC, as `vdn render` and `vdn decode` write it), for the machines whose build has FFmpeg (the
 * GPU machine's has none, so its clip reports the mux as not measured). The frames are those of
 * --frames-in (a `vdn decode --frames-out` file: float32 (3, T, H, W) in [0, 1]) or a synthetic
 * clip of the workload's size: the pixel frames of --frames latent frames at --height x --width,
 * a colour gradient moving one pixel a frame under +-2 levels of noise (x264's work depends on
 * the pictures: a real render's frames are the better measure), and stereo sound of the release's
 * audio VAE (32 kHz, 800 samples a latent; vae_config.c) for the clip's length. One warm-up mux
 * (--warmup 0: none), then --reps timed: median and best, the file's size and this host's
 * cores. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_clip.h"
#include "bench_whole.h"
#include "mp4.h"
#include "safetensors.h"
#include "seq.h"
#include "vae_config.h"
#include "vdn_util.h"

typedef struct {
    float *frames, *wave; /* (3, T, H, W); 2 x n */
    int T, H, W, rate;
    int64_t n;
    char source[4200];
} mux_input;

/* frames (3, T, H, W) float32 from --frames-in */
static int frames_in(const char *path, mux_input *m, char *err, size_t errlen) {
    vdn_st_file *f = vdn_st_open(path, err, errlen);
    if (!f) return -1;
    const vdn_st_entry *e = vdn_st_find(f, "frames");
    int rc = 0;
    if (!e || e->ndim != 4 || e->shape[0] != 3 || e->shape[2] % 2 || e->shape[3] % 2)
        rc = vdn_fail(err, errlen,
                      "%s: expected a tensor \"frames\" (3, T, H, W) with even H and W (vdn "
                      "decode --frames-out)",
                      path);
    if (!rc) {
        m->T = (int)e->shape[1], m->H = (int)e->shape[2], m->W = (int)e->shape[3];
        m->frames = vdn_xmalloc(sizeof(float) * (size_t)e->numel);
        rc = vdn_st_to_f32(f, e, m->frames, err, errlen);
        snprintf(m->source, sizeof m->source, "%s", path);
    }
    vdn_st_close(f);
    return rc;
}

static uint32_t hash32(uint64_t x) {
    x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ull;
    return (uint32_t)(x ^ (x >> 33));
}

static void synthetic(const vdn_bench_clip_opts *o, mux_input *m) {
    m->T = vdn_snap_frames((o->frames - 2) / 5 * 17 + 5), m->H = o->height, m->W = o->width;
    const size_t plane = (size_t)m->H * m->W;
    m->frames = vdn_xmalloc(sizeof(float) * 3 * (size_t)m->T * plane);
    for (int c = 0; c < 3; c++)
        for (int t = 0; t < m->T; t++)
            for (int y = 0; y < m->H; y++)
                for (int x = 0; x < m->W; x++) {
                    const size_t i = (((size_t)c * m->T + t) * m->H + y) * m->W + x;
                    const double g = (double)((x + t + 97 * c) % m->W) / m->W * 0.6 +
                                     (double)y / m->H * 0.3 + 0.05;
                    const double noise = (double)(hash32(i) % 5) - 2.0;
                    m->frames[i] = (float)(g + noise / 255.0);
                }
    snprintf(m->source, sizeof m->source, "synthetic");
}

/* stereo sound for the clip's length: two tones under a little noise */
static void sound(mux_input *m) {
    vdn_vae_audio_config ac;
    vdn_vae_audio_defaults(&ac);
    m->rate = ac.sampling_rate;
    m->n = (int64_t)vdn_audio_latents(m->T) * ac.hop;
    m->wave = vdn_xmalloc(sizeof(float) * 2 * (size_t)m->n);
    for (int ch = 0; ch < 2; ch++)
        for (int64_t i = 0; i < m->n; i++)
            m->wave[ch * m->n + i] =
                (float)(0.3 * sin(2 * M_PI * (220.0 + 110 * ch) * (double)i / m->rate) +
                        0.01 * ((double)(hash32((uint64_t)(ch * m->n + i)) % 2001) / 1000 - 1));
}

static int mux_once(const vdn_bench_clip_opts *o, const mux_input *m, const char *path, double *s,
                    char *err, size_t errlen) {
    vdn_mp4_opts mo = {.width = m->W,
                       .height = m->H,
                       .crf = o->crf,
                       .left = m->wave,
                       .right = m->wave + m->n,
                       .n_samples = m->n,
                       .sample_rate = m->rate};
    const double t0 = vdn_now();
    const int rc = vdn_mp4_write(path, m->frames, m->T, &mo, err, errlen);
    *s = vdn_now() - t0;
    return rc;
}

int vdn_bench_mux_run(const vdn_bench_clip_opts *o) {
    char err[VDN_ERR_LEN] = "", dir[] = "/tmp/vdn-bench-mux-XXXXXX", path[4200];
    mux_input m = {0};
    int rc = 0;
    if (!vdn_mp4_available())
        rc = vdn_fail(err, sizeof err,
                      "this vdn was built without FFmpeg's libraries: no mp4 to time (run "
                      "--mux-only where `vdn render` writes mp4 files)");
    if (!rc && o->frames_in)
        rc = frames_in(o->frames_in, &m, err, sizeof err);
    else if (!rc)
        synthetic(o, &m);
    if (!rc && !mkdtemp(dir))
        rc = vdn_fail(err, sizeof err, "cannot make a folder in /tmp (%s)", strerror(errno));
    double *s = vdn_xcalloc((size_t)o->reps + 1, sizeof(double)), med = 0, best = 0, worst;
    struct stat sb = {0};
    if (!rc) {
        sound(&m);
        snprintf(path, sizeof path, "%s/mux.mp4", dir);
        fprintf(stderr,
                "vdn bench --clip --mux-only: %d frames %d x %d (%s), %.2f s of sound; %d + %d "
                "muxes\n",
                m.T, m.W, m.H, m.source, (double)m.n / m.rate, o->warmup, o->reps);
    }
    for (int r = o->warmup ? 0 : 1; !rc && r <= o->reps; r++) /* s[0]: the warm-up's */
        rc = mux_once(o, &m, path, &s[r], err, sizeof err);
    if (!rc) {
        stat(path, &sb);
        unlink(path);
        whole_stats(s + 1, o->reps, &med, &best, &worst);
        printf("mux %d frames %d x %d + stereo AAC (%s): median %.3f s, best %.3f s (%d reps, "
               "%ld cores, %.1f MB)\n",
               m.T, m.W, m.H, m.source, med, best, o->reps, sysconf(_SC_NPROCESSORS_ONLN),
               sb.st_size / 1e6);
    }
    if (!rc && o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "op", "mux");
        cJSON_AddStringToObject(j, "source", m.source);
        cJSON_AddNumberToObject(j, "pixel_frames", m.T);
        cJSON_AddNumberToObject(j, "height", m.H);
        cJSON_AddNumberToObject(j, "width", m.W);
        cJSON_AddNumberToObject(j, "audio_samples", (double)m.n);
        cJSON_AddNumberToObject(j, "sample_rate", m.rate);
        cJSON_AddNumberToObject(j, "crf", o->crf < 0 ? VDN_MP4_DEFAULT_CRF : o->crf);
        cJSON_AddNumberToObject(j, "reps", o->reps);
        cJSON_AddNumberToObject(j, "mux_s", med);
        cJSON_AddNumberToObject(j, "mux_best_s", best);
        cJSON_AddNumberToObject(j, "bytes", (double)sb.st_size);
        cJSON_AddNumberToObject(j, "cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
        char *text = cJSON_PrintUnformatted(j);
        FILE *f = fopen(o->json, "w");
        int bad = !f || fprintf(f, "%s\n", text) < 0;
        if (f && fclose(f)) bad = 1;
        if (bad)
            rc =
                vdn_fail(err, sizeof err, "--json %s: cannot write (%s)", o->json, strerror(errno));
        free(text);
        cJSON_Delete(j);
    }
    if (rc) fprintf(stderr, "vdn bench --clip --mux-only: %s\n", err);
    free(s);
    free(m.frames);
    free(m.wave);
    rmdir(dir);
    return rc ? 1 : 0;
}
