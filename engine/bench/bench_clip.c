/* `vdn bench --clip`: the time a user feels for one clip (issue 26 item 3), as `vdn render
 * --prompt` and a farm worker make it (engine/pipeline/pipeline.c), stage by stage on warm
 * engines:
 *
 *   text    a prompt of --tokens random ids through the Qwen3-VL text encoder (random weights,
 *           the 32B shapes or --text-config's, made on the first engine's device beforehand as a
 *           farm miss loads it) to hidden_states[50], written as a prompt cache (bf16, as
 *           prompt_text.c writes it), and the encoder freed before the render, as the farm does
 *           (the prompt's tokenization and the cache entry's copy into a store are left out: a
 *           tokenizer is not needed for random ids, and the entry is 5 MB)
 *   render  the DiT: --steps evaluations of the H3 workload over random weights (the engines of
 *           `vdn bench --whole`; --gpus K: one clip sharded over K engines as `--whole --gpus`
 *           renders it), from the prompt cache to the latents file
 *   decode  the video and audio VAEs (--vae, --audio-vae, loaded beside each engine as a worker
 *           keeps them) decode the latents, over the K engines' devices as `vdn decode --devices`
 *   mux     the mp4 (H.264 + AAC) written from the frames, where this build has FFmpeg
 *
 * The clip's total is one wall clock over the four; what it pays beyond the stages (glue) is the
 * total less their sum. Then the parts are measured apart, warm, as the separate benches measure
 * them (text: median of 3 encodes after one; DiT: the median evaluation of a render of
 * --parts-nfe, times --steps; decode: the decoders again; mux: the mp4 again), so the clip can be
 * set beside their sum. Loading (engines, decoders, the encoder) is reported, not counted, as the
 * official figures leave it out. --warmup 1 (default) renders and decodes an untimed clip of one
 * evaluation first, so the timed clip meets warm kernels as a working farm's does.
 *
 * bench_mux.c: the mux apart (--mux-only, for builds with FFmpeg: the GPU machine's has none). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_clip.h"
#include "bench_peer.h"
#include "bench_whole.h"
#include "ckpt_init.h"
#include "comm.h"
#include "decode.h"
#include "dit.h"
#include "encoder.h"
#include "mp4.h"
#include "safetensors.h"
#include "seq.h"
#include "vdn_util.h"

#define GIB (1024.0 * 1024 * 1024)

typedef struct {
    const vdn_bench_clip_opts *o;
    vdn_bench_whole_opts w; /* the DiT's workload, as `vdn bench --whole` takes it */
    vdn_config cfg;
    vdn_text_config tcfg;
    int n;
    vdn_engine *eng[VDN_BENCH_MAX_ENGINES];
    vdn_decoder *dec[VDN_BENCH_MAX_ENGINES];
    const char *dir;
    int mp4_ok;    /* the clip muxes: this build writes mp4 files, and no --mux-json */
    int mux_apart; /* --mux-json read into mux */
    vdn_mux_part mux;
    cJSON *json;
} clip_ctx;

/* ---- opening: engines, decoders ---- */

typedef struct {
    clip_ctx *c;
    char (*err)[VDN_ERR_LEN];
} open_job;

static int open_one(int i, void *arg) {
    open_job *j = arg;
    clip_ctx *c = j->c;
    vdn_weight_source src = vdn_weight_source_random(c->o->seed);
    const vdn_engine_opts eo = whole_engine_opts(&c->w, c->n > 1 ? i : -1);
    c->eng[i] = vdn_engine_open_source(&c->cfg, &src, WHOLE_LABEL, &eo, j->err[i], VDN_ERR_LEN);
    vdn_weight_source_random_free(&src);
    if (!c->eng[i] || !c->o->vae) return c->eng[i] ? 0 : -1;
    c->dec[i] = vdn_decoder_open(vdn_engine_device(c->eng[i]), c->o->vae, c->o->audio_vae,
                                 c->o->vae_precision, j->err[i], VDN_ERR_LEN);
    return c->dec[i] ? 0 : -1;
}

static int open_all(clip_ctx *c, char *err, size_t errlen) {
    char(*e)[VDN_ERR_LEN] = vdn_xcalloc((size_t)c->n, sizeof *e);
    open_job j = {c, e};
    const double t0 = vdn_now();
    int rc = vdn_comm_run_ranks(c->n, open_one, &j);
    const double s = vdn_now() - t0;
    for (int i = 0; rc && i < c->n; i++)
        if (e[i][0]) {
            vdn_fail(err, errlen, "engine %d: %s", i, e[i]);
            break;
        }
    free(e);
    if (rc) return -1;
    char why[VDN_ERR_LEN];
    if (c->n > 1 && !vdn_engine_group_check(c->eng, c->n, why, sizeof why))
        return vdn_fail(err, errlen, "--gpus %d: %s", c->n, why);
    const double wg = (double)vdn_engine_memory_used(c->eng[0]) / GIB;
    printf("-- clip: %s, %d blocks, %s, %s DiT on %d engine%s (weights %.2f GiB each) and %s, "
           "opened in %.1f s --\n",
           c->o->preset, c->cfg.layers, vdn_engine_backend_name(c->eng[0]), c->o->precision, c->n,
           c->n > 1 ? "s" : "", wg, c->o->vae ? "decoders beside each" : "no decoders", s);
    fflush(stdout);
    cJSON_AddNumberToObject(c->json, "open_s", s);
    cJSON_AddNumberToObject(c->json, "dit_weights_gib", wg);
    return 0;
}

/* ---- the stages ---- */

/* the prompt's ids: --tokens ids spread over the vocabulary */
static int32_t *prompt_ids(const clip_ctx *c) {
    int32_t *ids = vdn_xmalloc(sizeof(int32_t) * (size_t)c->o->tokens);
    for (int i = 0; i < c->o->tokens; i++)
        ids[i] = (int32_t)(((int64_t)i * 7919) % c->tcfg.vocab);
    return ids;
}

/* the random encoder on the first engine's device (a farm miss's load; not in the clip) */
static vdn_text_encoder *text_make(clip_ctx *c, double *seconds, char *err, size_t errlen) {
    const double t0 = vdn_now();
    vdn_text_encoder *e =
        vdn_text_encoder_random(&c->tcfg, c->o->text_layer, c->o->text_precision,
                                vdn_engine_device(c->eng[0]), c->o->seed, err, errlen);
    *seconds = vdn_now() - t0;
    return e;
}

/* hidden states [L, hidden] -> a prompt cache at path as prompt_text.c writes one (bf16 rows,
 * every tag 1) */
static int write_cache(const float *h, int L, int64_t hidden, const char *path, char *err,
                       size_t errlen) {
    const size_t n = (size_t)L * (size_t)hidden;
    uint16_t *bf = vdn_xmalloc(2 * n);
    int64_t *tags = vdn_xmalloc(sizeof(int64_t) * (size_t)L);
    for (size_t i = 0; i < n; i++)
        bf[i] = vdn_f32_to_bf16(h[i]);
    for (int i = 0; i < L; i++)
        tags[i] = 1;
    vdn_st_tensor t[2] = {{"prompt_embeds", VDN_DT_BF16, 2, {L, hidden}, bf},
                          {"text_token_tags", VDN_DT_I64, 1, {L}, tags}};
    const int rc = vdn_st_write(path, t, 2, NULL, 0, err, errlen);
    free(bf);
    free(tags);
    return rc;
}

/* the text stage: encode (cold, as a miss's fresh encoder runs), the prompt cache, the encoder
 * freed; *encode_s the encode alone */
static int text_stage(clip_ctx *c, vdn_text_encoder *e, const char *path, double *encode_s,
                      char *err, size_t errlen) {
    int32_t *ids = prompt_ids(c);
    float *h = vdn_xmalloc(sizeof(float) * (size_t)c->o->tokens * (size_t)c->tcfg.hidden);
    const double t0 = vdn_now();
    int rc = vdn_text_encoder_run(e, ids, c->o->tokens, h, err, errlen);
    *encode_s = vdn_now() - t0;
    if (!rc) rc = write_cache(h, c->o->tokens, c->tcfg.hidden, path, err, errlen);
    vdn_text_encoder_close(e);
    free(ids);
    free(h);
    return rc;
}

/* A render of `steps` evaluations from the prompt cache to PREFIX.safetensors: its wall time,
 * the median evaluation and the time outside the evaluations (setup, refiner, output). */
typedef struct {
    double wall_s, median_s, fixed_s, peak_gib;
} render_times;

static int render(clip_ctx *c, const char *prompt, const char *prefix, int steps, render_times *rt,
                  char *err, size_t errlen) {
    vdn_bench_whole_opts w = c->w;
    w.nfe = steps, w.warmup = 0;
    vdn_render_request req;
    whole_request(&w, c->o->variant, prompt, prefix, &req);
    whole_nfe_times t = {.s = vdn_xcalloc((size_t)steps, sizeof(double)), .n = steps};
    for (int i = 0; i < c->n; i++)
        vdn_engine_memory_reset_peak(c->eng[i]);
    const double t0 = vdn_now();
    int rc = vdn_engine_render_group(c->eng, c->n, &req, whole_on_nfe, &t, err, errlen);
    rt->wall_s = vdn_now() - t0;
    if (!rc) {
        double all = 0, lo, hi;
        for (int i = 0; i < steps; i++)
            all += t.s[i];
        rt->fixed_s = rt->wall_s - all;
        whole_stats(t.s, steps, &rt->median_s, &lo, &hi);
        rt->peak_gib = 0;
        for (int i = 0; i < c->n; i++) {
            const double p = (double)vdn_engine_memory_peak(c->eng[i]) / GIB;
            rt->peak_gib = p > rt->peak_gib ? p : rt->peak_gib;
        }
    }
    free(t.s);
    return rc;
}

/* PREFIX.safetensors -> frames and waveform (and PREFIX.mp4 when mux): the decoders' seconds and
 * the mux's */
static int decode(clip_ctx *c, const char *prefix, int mux, double *decode_s, double *mux_s,
                  char *err, size_t errlen) {
    char lat[4200], mp4[4200];
    snprintf(lat, sizeof lat, "%s.safetensors", prefix);
    snprintf(mp4, sizeof mp4, "%s.mp4", prefix);
    vdn_decode_opts d = {.latents = lat, .mp4 = mux ? mp4 : NULL, .crf = c->o->crf, .quiet = 1};
    vdn_decode_share share;
    const double t0 = vdn_now();
    if (vdn_decoder_decode_group(c->dec, c->n, &d, &share, err, errlen)) return -1;
    const double wall = vdn_now() - t0;
    *mux_s = mux ? share.write_s : -1;
    *decode_s = wall - share.write_s;
    return 0;
}

/* ---- the clip, timed ---- */

typedef struct {
    double text_load_s, encode_s, text_s, render_s, decode_s, mux_s, total_s, stages_s;
    double peak_gib; /* the devices' most, every model on them counted (DiT, encoder, VAEs) */
    render_times r;
} clip_times;

/* the largest peak of the engines' devices since their last reset (the decoders and the text
 * encoder allocate on those devices too), GiB */
static double devices_peak_gib(const clip_ctx *c) {
    double most = 0;
    for (int i = 0; i < c->n; i++) {
        size_t used, peak;
        vdn_dev_memory(vdn_engine_device(c->eng[i]), &used, &peak);
        most = (double)peak / GIB > most ? (double)peak / GIB : most;
    }
    return most;
}

static int clip_once(clip_ctx *c, clip_times *ct, char *err, size_t errlen) {
    char prompt[4200], prefix[4200];
    snprintf(prompt, sizeof prompt, "%s/clip.prompt.safetensors", c->dir);
    snprintf(prefix, sizeof prefix, "%s/clip", c->dir);
    *ct = (clip_times){.decode_s = -1, .mux_s = -1};
    for (int i = 0; i < c->n; i++)
        vdn_engine_memory_reset_peak(c->eng[i]);
    vdn_text_encoder *e = text_make(c, &ct->text_load_s, err, errlen);
    if (!e) return -1;
    fprintf(stderr, "vdn bench --clip: text encoder made in %.1f s; the clip starts\n",
            ct->text_load_s);
    const double t0 = vdn_now();
    if (text_stage(c, e, prompt, &ct->encode_s, err, errlen)) return -1;
    const double t1 = vdn_now();
    ct->text_s = t1 - t0;
    ct->peak_gib = devices_peak_gib(c); /* the render resets the peaks */
    fprintf(stderr, "vdn bench --clip: text %.3f s (encode %.3f s); render, %d evaluations\n",
            ct->text_s, ct->encode_s, c->o->steps);
    if (render(c, prompt, prefix, c->o->steps, &ct->r, err, errlen)) return -1;
    const double t2 = vdn_now();
    ct->render_s = t2 - t1;
    if (c->dec[0] && decode(c, prefix, c->mp4_ok, &ct->decode_s, &ct->mux_s, err, errlen))
        return -1;
    ct->total_s = vdn_now() - t0;
    const double rest = devices_peak_gib(c);
    ct->peak_gib = rest > ct->peak_gib ? rest : ct->peak_gib;
    ct->stages_s = ct->text_s + ct->render_s + (ct->decode_s > 0 ? ct->decode_s : 0) +
                   (ct->mux_s > 0 ? ct->mux_s : 0);
    return 0;
}

/* an untimed clip of one evaluation from a random prompt cache: the kernels, handles and
 * allocations of every stage but the text's warm (the encoder is fresh for every miss) */
static int warm_up(clip_ctx *c, char *err, size_t errlen) {
    char prompt[4200], prefix[4200];
    snprintf(prompt, sizeof prompt, "%s/warm.prompt.safetensors", c->dir);
    snprintf(prefix, sizeof prefix, "%s/warm", c->dir);
    const size_t n = (size_t)c->o->tokens * (size_t)c->tcfg.hidden;
    float *h = vdn_xmalloc(sizeof(float) * n);
    const int64_t shape[2] = {c->o->tokens, c->tcfg.hidden};
    for (size_t i = 0; i < n; i++)
        h[i] = vdn_ckpt_init_value(c->o->seed, "bench.prompt_embeds", 2, shape, (int64_t)i);
    int rc = write_cache(h, c->o->tokens, c->tcfg.hidden, prompt, err, errlen);
    free(h);
    render_times rt;
    double d, m;
    const double t0 = vdn_now();
    if (!rc) rc = render(c, prompt, prefix, 1, &rt, err, errlen);
    if (!rc && c->dec[0]) rc = decode(c, prefix, c->mp4_ok, &d, &m, err, errlen);
    if (!rc)
        fprintf(stderr, "vdn bench --clip: warm-up clip (1 evaluation) in %.1f s\n",
                vdn_now() - t0);
    return rc;
}

/* ---- the parts, apart ---- */

typedef struct {
    double text_s, dit_s, s_per_nfe, decode_s, mux_s, sum_s; /* -1: not measured */
} clip_parts;

static int parts_measure(clip_ctx *c, clip_parts *p, char *err, size_t errlen) {
    *p = (clip_parts){.text_s = -1, .dit_s = -1, .s_per_nfe = -1, .decode_s = -1, .mux_s = -1};
    double make_s, enc[4];
    vdn_text_encoder *e = text_make(c, &make_s, err, errlen);
    if (!e) return -1;
    int32_t *ids = prompt_ids(c);
    float *h = vdn_xmalloc(sizeof(float) * (size_t)c->o->tokens * (size_t)c->tcfg.hidden);
    int rc = 0;
    for (int r = 0; !rc && r < 4; r++) { /* one warm-up, the median of 3 */
        const double t0 = vdn_now();
        rc = vdn_text_encoder_run(e, ids, c->o->tokens, h, err, errlen);
        enc[r] = vdn_now() - t0;
    }
    vdn_text_encoder_close(e);
    free(ids);
    free(h);
    if (rc) return -1;
    double lo, hi;
    whole_stats(enc + 1, 3, &p->text_s, &lo, &hi);
    char prompt[4200], prefix[4200];
    snprintf(prompt, sizeof prompt, "%s/clip.prompt.safetensors", c->dir);
    snprintf(prefix, sizeof prefix, "%s/parts", c->dir);
    render_times rt;
    fprintf(stderr, "vdn bench --clip: the parts apart: a render of %d evaluations\n",
            c->o->parts_nfe);
    if (render(c, prompt, prefix, c->o->parts_nfe, &rt, err, errlen)) return -1;
    p->s_per_nfe = rt.median_s;
    p->dit_s = c->o->steps * rt.median_s;
    if (c->dec[0] && decode(c, prefix, c->mp4_ok, &p->decode_s, &p->mux_s, err, errlen)) return -1;
    p->sum_s =
        p->text_s + p->dit_s + (p->decode_s > 0 ? p->decode_s : 0) + (p->mux_s > 0 ? p->mux_s : 0);
    return 0;
}

/* ---- report ---- */

static void add_time(cJSON *j, const char *key, double s) {
    if (s < 0)
        cJSON_AddNullToObject(j, key);
    else
        cJSON_AddNumberToObject(j, key, s);
}

static void print_stage(const char *what, double s, const char *note) {
    if (s < 0)
        printf("%-8s %10s   %s\n", what, "-", note);
    else
        printf("%-8s %10.3f s %s\n", what, s, note);
}

/* the official stack's published one-clip figures at this workload, with where they are */
static void published(const clip_ctx *c, const clip_times *ct) {
    const vdn_bench_clip_opts *o = c->o;
    cJSON *pub = cJSON_AddArrayToObject(c->json, "published");
    const int h3 = !strcmp(o->preset, "h3") && o->frames == 102 && o->height == 768 &&
                   o->width == 1344 && o->steps == 8 && !o->cpu;
    static const struct {
        int gpus;
        double s;
        const char *what, *where;
    } figs[] = {
        {1, 90.5, "VDN-H3 FP8, 8 NFE, one H200: steady-state denoising",
         "official README \"Results\" (shared/spec/H3-VDN-ARCH.md section 7): excludes model "
         "loading, warm-up, VAE decoding and MP4 encoding"},
        {1, 89.3, "VDN-H3 + few-step, 8 NFE x 11.16 s, one H200: \"end-to-end latency\"",
         "the paper, table \"H200 efficiency\" (shared/paper/video-deltanet.tex): DiT denoising"},
        {8, 18.3, "VDN-H3 FP8 Distributed, 8 NFE, 8 H200s: steady-state denoising",
         "official README \"Results\" (shared/spec/H3-VDN-ARCH.md section 7): excludes loading, "
         "VAE decoding and MP4 encoding"},
        {8, 12.5, "VDN-H3 + distributed, 8 NFE x 1.56 s, 8 H200s: \"end-to-end latency\"",
         "the paper, table \"H200 efficiency\": DiT denoising"},
    };
    int any = 0;
    for (size_t i = 0; h3 && i < sizeof figs / sizeof figs[0]; i++) {
        if (figs[i].gpus != c->n) continue;
        any = 1;
        printf("published: %.1f s, %s [%s]; this clip's render %.1f s, whole clip %.1f s\n",
               figs[i].s, figs[i].what, figs[i].where, ct->render_s, ct->total_s);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddItemToArray(pub, f);
        cJSON_AddNumberToObject(f, "gpus", figs[i].gpus);
        cJSON_AddNumberToObject(f, "seconds", figs[i].s);
        cJSON_AddStringToObject(f, "what", figs[i].what);
        cJSON_AddStringToObject(f, "source", figs[i].where);
    }
    if (!any)
        printf("published: none for this clip (the official figures are for 8 evaluations of the "
               "H3 workload on 1 and on 8 H200s, denoising only)\n");
}

static void report(const clip_ctx *c, const clip_times *ct) {
    cJSON *j = c->json;
    char note[160];
    printf("%-8s %10s\n", "stage", "seconds");
    snprintf(note, sizeof note, "(encode %.3f s of %d tokens; encoder made in %.1f s, not counted)",
             ct->encode_s, c->o->tokens, ct->text_load_s);
    print_stage("text", ct->text_s, note);
    snprintf(note, sizeof note, "(%d x %.3f s median + %.3f s outside the evaluations)",
             c->o->steps, ct->r.median_s, ct->r.fixed_s);
    print_stage("render", ct->render_s, note);
    print_stage("decode", ct->decode_s,
                c->dec[0] ? "(video + audio decoders)" : "no --vae: the clip stops at latents");
    print_stage("mux", ct->mux_s,
                !c->dec[0]     ? "(nothing decoded)"
                : c->mp4_ok    ? "(mp4: H.264 + AAC)"
                : c->mux_apart ? "not here: --mux-json gives it"
                               : "not measured: this build has no FFmpeg (bench --clip --mux-only "
                                 "times it where there is)");
    snprintf(note, sizeof note, "(stages %.3f s + %.3f s between them)", ct->stages_s,
             ct->total_s - ct->stages_s);
    print_stage("clip", ct->total_s, note);
    if (c->mux_apart) {
        snprintf(note, sizeof note, "(the mux timed apart: %s, %s, %d cores)", c->o->mux_json,
                 c->mux.source, c->mux.cores);
        print_stage("mux", c->mux.mux_s, note);
        print_stage("clip+mux", ct->total_s + c->mux.mux_s, "(the clip with the mux timed apart)");
        cJSON *m = cJSON_AddObjectToObject(j, "mux_apart");
        cJSON_AddStringToObject(m, "file", c->o->mux_json);
        cJSON_AddStringToObject(m, "source", c->mux.source);
        cJSON_AddNumberToObject(m, "cores", c->mux.cores);
        cJSON_AddNumberToObject(m, "mux_s", c->mux.mux_s);
        cJSON_AddNumberToObject(j, "total_with_mux_s", ct->total_s + c->mux.mux_s);
    }
    cJSON *st = cJSON_AddObjectToObject(j, "stages");
    add_time(st, "text_s", ct->text_s);
    add_time(st, "text_encode_s", ct->encode_s);
    add_time(st, "render_s", ct->render_s);
    add_time(st, "decode_s", ct->decode_s);
    add_time(st, "mux_s", ct->mux_s);
    cJSON_AddNumberToObject(j, "total_s", ct->total_s);
    cJSON_AddNumberToObject(j, "stages_sum_s", ct->stages_s);
    cJSON_AddNumberToObject(j, "text_load_s", ct->text_load_s);
    cJSON_AddNumberToObject(j, "peak_gib", ct->peak_gib);
    printf("peak device memory %.2f GiB (DiT, text encoder and VAEs on the device%s; the render "
           "alone %.2f GiB)\n",
           ct->peak_gib, c->n > 1 ? "s: the largest" : "", ct->r.peak_gib);
    cJSON *r = cJSON_AddObjectToObject(j, "render");
    cJSON_AddNumberToObject(r, "median_s_per_nfe", ct->r.median_s);
    cJSON_AddNumberToObject(r, "fixed_s", ct->r.fixed_s);
    cJSON_AddNumberToObject(r, "peak_gib", ct->r.peak_gib);
    cJSON_AddBoolToObject(j, "decoded", c->dec[0] != NULL);
    cJSON_AddBoolToObject(j, "mp4", c->dec[0] && c->mp4_ok);
    published(c, ct);
}

/* the parts apart, beside the clip */
static void report_parts(const clip_ctx *c, const clip_times *ct, const clip_parts *p) {
    cJSON *j = c->json;
    char dec[32] = "-", mux[32] = "- (not measured)";
    if (p->decode_s >= 0) snprintf(dec, sizeof dec, "%.3f s", p->decode_s);
    if (p->mux_s >= 0) snprintf(mux, sizeof mux, "%.3f s", p->mux_s);
    printf("the parts apart: text %.3f s + DiT %d x %.3f s + decode %s + mux %s = %.3f s; "
           "the clip %.3f s is %.2fx their sum\n",
           p->text_s, c->o->steps, p->s_per_nfe, dec, mux, p->sum_s, ct->total_s,
           ct->total_s / p->sum_s);
    cJSON *pj = cJSON_AddObjectToObject(j, "parts");
    add_time(pj, "text_s", p->text_s);
    add_time(pj, "dit_s", p->dit_s);
    add_time(pj, "s_per_nfe", p->s_per_nfe);
    cJSON_AddNumberToObject(pj, "nfe", c->o->parts_nfe);
    add_time(pj, "decode_s", p->decode_s);
    add_time(pj, "mux_s", p->mux_s);
    cJSON_AddNumberToObject(pj, "sum_s", p->sum_s);
}

/* ---- the run ---- */

static void header(clip_ctx *c) {
    const vdn_bench_clip_opts *o = c->o;
    cJSON *j = c->json = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "op", "clip");
    cJSON_AddStringToObject(j, "preset", o->preset);
    cJSON_AddNumberToObject(j, "layers", c->cfg.layers);
    cJSON_AddNumberToObject(j, "latent_frames", o->frames);
    cJSON_AddNumberToObject(j, "pixel_frames", (o->frames - 2) / 5 * 17 + 5);
    cJSON_AddNumberToObject(j, "height", o->height);
    cJSON_AddNumberToObject(j, "width", o->width);
    cJSON_AddNumberToObject(j, "steps", o->steps);
    cJSON_AddStringToObject(j, "variant", o->variant);
    cJSON_AddStringToObject(j, "precision", o->precision);
    cJSON_AddStringToObject(j, "backend", o->cpu ? "cpu" : "cuda");
    cJSON_AddNumberToObject(j, "gpus", c->n);
    cJSON_AddNumberToObject(j, "tokens", o->tokens);
    cJSON_AddNumberToObject(j, "text_layer", o->text_layer);
    cJSON_AddNumberToObject(j, "text_hidden", (double)c->tcfg.hidden);
    cJSON_AddStringToObject(j, "text_precision", vdn_precision_name(o->text_precision));
    cJSON_AddStringToObject(j, "vae_precision", vdn_precision_name(o->vae_precision));
    cJSON_AddBoolToObject(j, "warmup", o->warmup);
}

static int write_json(const clip_ctx *c) {
    char *text = cJSON_Print(c->json);
    FILE *f = fopen(c->o->json, "w");
    int rc = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF ? 0 : -1;
    if (f && fclose(f) != 0) rc = -1;
    if (rc)
        fprintf(stderr, "vdn bench --clip: --json %s: cannot write (%s)\n", c->o->json,
                strerror(errno));
    free(text);
    return rc;
}

/* the shapes: the DiT preset, the text encoder's config (its width must be the DiT's text_dim) */
static int shapes(clip_ctx *c, char *err, size_t errlen) {
    const vdn_bench_clip_opts *o = c->o;
    if (vdn_ckpt_preset(o->preset, o->layers, &c->cfg, err, errlen)) return -1;
    c->cfg.has_vdn = 1;
    c->tcfg = vdn_text_qwen3_vl_32b;
    if (o->text_config && vdn_text_config_load(o->text_config, &c->tcfg, err, errlen)) return -1;
    if (c->tcfg.hidden != c->cfg.text_dim)
        return vdn_fail(err, errlen,
                        "the text encoder's hidden size %lld is not the DiT's text_dim %d (preset "
                        "%s): give --text-config a text_encoder/ of that width",
                        (long long)c->tcfg.hidden, c->cfg.text_dim, o->preset);
    if (o->text_layer > c->tcfg.layers)
        return vdn_fail(err, errlen, "--text-layer %d: the text encoder has %d layers",
                        o->text_layer, c->tcfg.layers);
    c->w = (vdn_bench_whole_opts){.preset = o->preset,
                                  .layers = o->layers,
                                  .frames = o->frames,
                                  .height = o->height,
                                  .width = o->width,
                                  .text = o->tokens,
                                  .cpu = o->cpu,
                                  .precision = o->precision,
                                  .seed = o->seed};
    return 0;
}

/* --mux-json, read before any work: the mux of this clip's frames, timed where FFmpeg is */
static int mux_apart(clip_ctx *c, char *err, size_t errlen) {
    const vdn_bench_clip_opts *o = c->o;
    size_t n;
    char *text = vdn_read_file(o->mux_json, &n, err, errlen);
    if (!text) return -1;
    const int frames = vdn_snap_frames((o->frames - 2) / 5 * 17 + 5);
    const int rc =
        vdn_mux_part_parse(text, n, o->mux_json, frames, o->height, o->width, &c->mux, err, errlen);
    free(text);
    c->mux_apart = rc == 0;
    c->mp4_ok = 0;
    return rc;
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    char path[4400];
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
}

static int run(clip_ctx *c, char *err, size_t errlen) {
    const vdn_bench_clip_opts *o = c->o;
    clip_times ct;
    clip_parts p;
    if (open_all(c, err, errlen)) return -1;
    if (o->warmup && warm_up(c, err, errlen)) return -1;
    if (clip_once(c, &ct, err, errlen)) return -1;
    report(c, &ct);
    fflush(stdout);
    if (o->json) write_json(c); /* a run cut short in the parts keeps the clip */
    if (o->parts && parts_measure(c, &p, err, errlen)) return -1;
    if (o->parts) report_parts(c, &ct, &p);
    return 0;
}

int vdn_bench_clip_run(const vdn_bench_clip_opts *o) {
    if (o->mux_only) return vdn_bench_mux_run(o);
    char err[VDN_ERR_LEN] = "", tmp[] = "/tmp/vdn-bench-clip-XXXXXX";
    clip_ctx c = {.o = o, .n = o->gpus > 1 ? o->gpus : 1, .mp4_ok = vdn_mp4_available()};
    int rc = shapes(&c, err, sizeof err);
    if (!rc && o->mux_json) rc = mux_apart(&c, err, sizeof err);
    if (!rc && o->out_dir) rc = vdn_mkdir_p(o->out_dir, err, sizeof err);
    if (!rc && !(c.dir = o->out_dir ? o->out_dir : mkdtemp(tmp)))
        rc = vdn_fail(err, sizeof err, "cannot make a folder in /tmp (%s)", strerror(errno));
    if (!rc) {
        header(&c);
        rc = run(&c, err, sizeof err);
        if (rc) cJSON_AddStringToObject(c.json, "error", err);
        if (o->json && write_json(&c)) rc = -1;
    }
    if (rc && err[0]) fprintf(stderr, "vdn bench --clip: %s\n", err);
    for (int i = 0; i < c.n; i++) {
        vdn_decoder_close(c.dec[i]);
        if (c.eng[i]) vdn_engine_close(c.eng[i]);
    }
    cJSON_Delete(c.json);
    if (c.dir && !o->out_dir) remove_dir(c.dir);
    return rc ? 1 : 0;
}
