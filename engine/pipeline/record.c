/* Run record JSON via cJSON; see record.h. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "record.h"
#include "vdn_util.h"

static void add_iso_time(cJSON *o, const char *key, double wall) {
    char buf[64];
    time_t s = (time_t)wall;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON_AddStringToObject(o, key, buf);
}

static cJSON *config_json(const vdn_config *c) {
    cJSON *o = cJSON_CreateObject();
#define I(f) cJSON_AddNumberToObject(o, #f, c->f)
    I(hidden), I(heads), I(head_dim), I(ffn), I(layers), I(refiner_layers), I(text_dim);
    I(in_channels), I(audio_channels), I(patch_t), I(patch_h), I(patch_w), I(freq_dim);
    I(time_embed_dim), I(time_hidden), I(rope_freq_dim), I(rope_theta), I(norm_eps);
    I(has_vdn), I(chunk), I(radius), I(anchors_both), I(softmax_gate), I(text_state);
    I(linear_head_dim), I(alpha_rank), I(gate_rank), I(conv_spatial), I(conv_temporal);
    I(linear_norm_eps), I(text_state_scale), I(video_shift), I(audio_shift);
#undef I
    return o;
}

static cJSON *float_array(const float *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

char *vdn_record_json(const vdn_record *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "engine", "vdn");
    cJSON_AddStringToObject(o, "engine_version", VDN_ENGINE_VERSION);
    cJSON_AddStringToObject(o, "backend", r->backend);
    if (r->precision) cJSON_AddStringToObject(o, "precision", r->precision);
    cJSON *ck = cJSON_AddObjectToObject(o, "checkpoint");
    cJSON_AddStringToObject(ck, "identity", r->ckpt_identity ? r->ckpt_identity : "");
    cJSON_AddStringToObject(ck, "layout", r->ckpt_layout ? r->ckpt_layout : "");
    cJSON *ad = cJSON_AddArrayToObject(ck, "adapters");
    for (int i = 0; i < r->n_adapters; i++)
        cJSON_AddItemToArray(ad, cJSON_CreateString(r->adapters[i]));
    cJSON_AddItemToObject(o, "config", config_json(r->cfg));
    cJSON *rq = cJSON_AddObjectToObject(o, "request");
    const vdn_render_request *q = r->req;
    cJSON_AddStringToObject(rq, "prompt_cache", q->prompt_cache ? q->prompt_cache : "");
    cJSON_AddNumberToObject(rq, "frames", q->frames);
    cJSON_AddNumberToObject(rq, "height", q->height);
    cJSON_AddNumberToObject(rq, "width", q->width);
    cJSON_AddNumberToObject(rq, "steps", q->steps);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)q->seed);
    cJSON_AddStringToObject(rq, "seed", seed); /* as a string: a u64 does not fit a double */
    cJSON_AddStringToObject(rq, "noise", r->noise_source);
    cJSON_AddStringToObject(rq, "out_prefix", q->out_prefix);
    cJSON *rs = cJSON_AddObjectToObject(o, "resolved");
    cJSON_AddNumberToObject(rs, "pixel_frames", r->pixel_frames);
    cJSON_AddNumberToObject(rs, "latent_frames", r->latent_frames);
    cJSON_AddNumberToObject(rs, "audio_latents", r->audio_latents);
    cJSON_AddNumberToObject(rs, "latent_height", r->lat_h);
    cJSON_AddNumberToObject(rs, "latent_width", r->lat_w);
    cJSON_AddNumberToObject(rs, "text_rows", r->n_text);
    cJSON_AddNumberToObject(rs, "keyframes", r->n_keyframes);
    cJSON *v = cJSON_AddObjectToObject(o, "variant");
    cJSON_AddStringToObject(v, "name", vdn_attn_mode_name(r->plan->mode));
    cJSON_AddBoolToObject(v, "window", r->plan->window);
    cJSON_AddBoolToObject(v, "anchors", r->plan->anchors);
    cJSON_AddBoolToObject(v, "softmax_gate", r->plan->softmax_gate);
    cJSON_AddBoolToObject(v, "linear", r->plan->linear);
    cJSON_AddBoolToObject(v, "skip_ends", r->plan->skip_ends);
    cJSON_AddBoolToObject(v, "additive", r->plan->additive);
    cJSON_AddBoolToObject(v, "bypass", r->plan->bypass);
    cJSON *sc = cJSON_AddObjectToObject(o, "sampler");
    cJSON_AddNumberToObject(sc, "nfe", r->n_sigma - 1);
    cJSON_AddNumberToObject(sc, "resumed_from_step", r->resumed_from_step);
    cJSON_AddNumberToObject(sc, "video_shift", r->video_shift);
    cJSON_AddNumberToObject(sc, "audio_shift", r->audio_shift);
    cJSON_AddItemToObject(sc, "sigma_video", float_array(r->sigma_video, r->n_sigma));
    cJSON_AddItemToObject(sc, "sigma_audio", float_array(r->sigma_audio, r->n_sigma));
    cJSON *tm = cJSON_AddObjectToObject(o, "timing");
    cJSON *ns = cJSON_AddArrayToObject(tm, "nfe_seconds");
    for (int i = 0; i < r->n_nfe; i++)
        cJSON_AddItemToArray(ns, cJSON_CreateNumber(r->nfe_seconds[i]));
    cJSON_AddNumberToObject(tm, "setup_seconds", r->setup_seconds);
    cJSON_AddNumberToObject(tm, "output_seconds", r->output_seconds);
    cJSON_AddNumberToObject(tm, "total_seconds", r->total_seconds);
    add_iso_time(tm, "start", r->wall_start);
    add_iso_time(tm, "end", r->wall_end);
    cJSON *wa = cJSON_AddArrayToObject(o, "warnings");
    for (int i = 0; i < r->n_warnings; i++)
        cJSON_AddItemToArray(wa, cJSON_CreateString(r->warnings[i]));
    cJSON_AddStringToObject(o, "output", r->output);
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

int vdn_record_write(const char *path, const vdn_record *r, char *err, size_t errlen) {
    char *s = vdn_record_json(r);
    if (!s) return vdn_fail(err, errlen, "%s: cannot build the run record", path);
    int rc = vdn_write_file_atomic(path, s, strlen(s), err, errlen);
    free(s);
    return rc;
}
