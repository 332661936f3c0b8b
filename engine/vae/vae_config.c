/* config.json of the two VAEs, and their tensor lists (see vae_config.h). */
#include "vae_config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdn_util.h"

void vdn_vae_video_defaults(vdn_vae_video_config *c) {
    memset(c, 0, sizeof *c);
    c->in_channels = 3;
    c->out_channels = 3;
    c->latent_channels = 24;
    c->n_levels = 6;
    const int boc[6] = {128, 256, 256, 512, 512, 1024}, sf[6] = {2, 2, 2, 2, 1, 1},
              tf[6] = {1, 2, 2, 1, 1, 1};
    for (int i = 0; i < 6; i++) {
        c->block_out_channels[i] = boc[i];
        c->spatial_factors[i] = sf[i];
        c->temporal_factors[i] = tf[i];
    }
    c->layers_per_block = 2;
    c->norm_num_groups = 32;
    c->dec_layers = 36;
    c->dec_heads = 32;
    c->dec_head_dim = 64;
    c->dec_registers = 4;
    c->dec_ffn_mult = 4;
    c->rope_theta = 100.0;
    c->rope_dim_ratio = 0.75;
    c->dec_norm_eps = 1e-5;
    c->clip_length = 17;
    c->token_drop = 3;
    for (int i = 0; i < VDN_VAE_MAX_CH; i++) {
        c->latents_mean[i] = 0.0;
        c->latents_std[i] = 1.0;
    }
    c->spatial_ratio = 16;
    c->temporal_ratio = 4;
}

void vdn_vae_audio_defaults(vdn_vae_audio_config *c) {
    memset(c, 0, sizeof *c);
    c->encoder_dim = 64;
    c->n_enc_rates = 5;
    const int er[5] = {2, 4, 4, 5, 5}, dr[7] = {5, 5, 2, 2, 2, 2, 2}, dk[7] = {9, 9, 4, 4, 4, 4, 4};
    for (int i = 0; i < 5; i++)
        c->encoder_rates[i] = er[i];
    c->latent_dim = 2048;
    c->latent_channels = 32;
    c->heads = 8;
    c->decoder_dim = 1024;
    c->n_ups = 7;
    for (int i = 0; i < 7; i++) {
        c->decoder_rates[i] = dr[i];
        c->decoder_kernels[i] = dk[i];
    }
    c->n_res = 3;
    c->n_dil = 3;
    const int rk[3] = {3, 7, 11};
    for (int i = 0; i < 3; i++) {
        c->res_kernels[i] = rk[i];
        c->res_dilations[i][0] = 1;
        c->res_dilations[i][1] = 3;
        c->res_dilations[i][2] = 5;
    }
    c->sampling_rate = 32000;
    for (int i = 0; i < VDN_VAE_MAX_CH; i++) {
        c->latents_mean[i] = 0.0;
        c->latents_std[i] = 1.0;
    }
    c->hop = 800;
}

void vdn_vae_video_tiny(vdn_vae_video_config *c) {
    vdn_vae_video_defaults(c);
    for (int i = 0; i < 6; i++)
        c->block_out_channels[i] = 8;
    c->layers_per_block = 1;
    c->norm_num_groups = 4;
    c->dec_layers = 2;
    c->dec_heads = 2;
    c->dec_ffn_mult = 2;
}

void vdn_vae_audio_tiny(vdn_vae_audio_config *c) {
    vdn_vae_audio_defaults(c);
    c->encoder_dim = 4;
    c->latent_dim = 64;
    c->heads = 2;
    c->decoder_dim = 128; /* halved 7 times: the last stage has 1 channel */
}

/* ---- parsing ---- */

static int get_int(const cJSON *j, const char *key, int *out, int lo, int hi, const char *path,
                   char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi)
        return vdn_fail(err, errlen, "%s: field %s: expected an integer in %d..%d", path, key, lo,
                        hi);
    *out = (int)v->valuedouble;
    return 0;
}

static int get_num(const cJSON *j, const char *key, double *out, double lo, double hi,
                   const char *path, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return vdn_fail(err, errlen, "%s: field %s: expected a number in [%g, %g]", path, key, lo,
                        hi);
    *out = v->valuedouble;
    return 0;
}

/* integer array; *n = its length (must be 1..max, or exactly want when want > 0) */
static int get_ints(const cJSON *j, const char *key, int *out, int *n, int max, int want, int lo,
                    const char *path, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) return 0;
    int len = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (len < 1 || len > max || (want > 0 && len != want))
        return vdn_fail(err, errlen, "%s: field %s: expected a list of %s%d integers", path, key,
                        want > 0 ? "" : "1..", want > 0 ? want : max);
    for (int i = 0; i < len; i++) {
        const cJSON *e = cJSON_GetArrayItem(v, i);
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < lo ||
            e->valuedouble > 1 << 20)
            return vdn_fail(err, errlen, "%s: field %s[%d]: expected an integer >= %d", path, key,
                            i, lo);
        out[i] = (int)e->valuedouble;
    }
    if (n) *n = len;
    return 0;
}

static int get_stats(const cJSON *j, const char *key, double *out, int n, int positive,
                     const char *path, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != n)
        return vdn_fail(err, errlen,
                        "%s: field %s: expected a list of %d numbers (one per latent "
                        "channel)",
                        path, key, n);
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(v, i);
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || (positive && e->valuedouble <= 0))
            return vdn_fail(err, errlen, "%s: field %s[%d]: expected a %snumber", path, key, i,
                            positive ? "positive " : "finite ");
        out[i] = e->valuedouble;
    }
    return 0;
}

/* text (len bytes) as a JSON object; label names it in messages */
static cJSON *parse_json(const char *text, size_t len, const char *label, char *err,
                         size_t errlen) {
    cJSON *j = cJSON_ParseWithLength(text, len);
    if (!j || !cJSON_IsObject(j)) {
        vdn_fail(err, errlen, "%s: not a JSON object", label);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* DIR/config.json read into a new buffer; path gets its name */
static char *read_config(const char *dir, char *path, size_t pathlen, size_t *len, char *err,
                         size_t errlen) {
    snprintf(path, pathlen, "%s/config.json", dir);
    return vdn_read_file(path, len, err, errlen);
}

static int check_class(const cJSON *j, const char *want, const char *path, char *err,
                       size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "_class_name");
    if (cJSON_IsString(v) && strcmp(v->valuestring, want))
        return vdn_fail(err, errlen, "%s: _class_name \"%s\": expected %s", path, v->valuestring,
                        want);
    return 0;
}

int vdn_vae_video_config_load(const char *dir, vdn_vae_video_config *c, char *err, size_t errlen) {
    char path[4200];
    size_t len;
    char *text = read_config(dir, path, sizeof path, &len, err, errlen);
    if (!text) return -1;
    int rc = vdn_vae_video_config_parse(text, len, path, c, err, errlen);
    free(text);
    return rc;
}

int vdn_vae_video_config_parse(const char *text, size_t len, const char *path,
                               vdn_vae_video_config *c, char *err, size_t errlen) {
    vdn_vae_video_defaults(c);
    cJSON *j = parse_json(text, len, path, err, errlen);
    if (!j) return -1;
    int rc = check_class(j, "AutoencoderKLMiniMaxH3", path, err, errlen);
    int nb = c->n_levels, ns = c->n_levels, nt = c->n_levels;
    if (!rc) rc = get_int(j, "in_channels", &c->in_channels, 1, 16, path, err, errlen);
    if (!rc) rc = get_int(j, "out_channels", &c->out_channels, 3, 3, path, err, errlen);
    if (!rc)
        rc = get_int(j, "latent_channels", &c->latent_channels, 1, VDN_VAE_MAX_CH, path, err,
                     errlen);
    if (!rc)
        rc = get_ints(j, "block_out_channels", c->block_out_channels, &nb, VDN_VAE_MAX_LEVELS, 0, 1,
                      path, err, errlen);
    if (!rc)
        rc = get_ints(j, "spatial_downsample_factors", c->spatial_factors, &ns, VDN_VAE_MAX_LEVELS,
                      nb, 1, path, err, errlen);
    if (!rc)
        rc = get_ints(j, "temporal_downsample_factors", c->temporal_factors, &nt,
                      VDN_VAE_MAX_LEVELS, nb, 1, path, err, errlen);
    c->n_levels = nb;
    if (!rc && (ns != nb || nt != nb))
        rc = vdn_fail(
            err, errlen,
            "%s: the downsample factor lists must have %d entries (one per block_out_channels)",
            path, nb);
    if (!rc) rc = get_int(j, "layers_per_block", &c->layers_per_block, 1, 64, path, err, errlen);
    if (!rc) rc = get_int(j, "norm_num_groups", &c->norm_num_groups, 1, 1 << 16, path, err, errlen);
    if (!rc) rc = get_int(j, "decoder_num_layers", &c->dec_layers, 1, 1024, path, err, errlen);
    if (!rc)
        rc = get_int(j, "decoder_num_attention_heads", &c->dec_heads, 1, 1024, path, err, errlen);
    if (!rc)
        rc = get_int(j, "decoder_attention_head_dim", &c->dec_head_dim, 64, 64, path, err, errlen);
    /* at least 1: the released decoder has 4, and a (1, 0, dim) register tensor is not a shape
     * the loader or `vdn ckpt init` handles (the fuzz target found that 0 slipped through) */
    if (!rc)
        rc = get_int(j, "decoder_num_register_tokens", &c->dec_registers, 1, 1024, path, err,
                     errlen);
    if (!rc) rc = get_int(j, "decoder_ffn_mult", &c->dec_ffn_mult, 1, 64, path, err, errlen);
    if (!rc) rc = get_num(j, "decoder_rope_theta", &c->rope_theta, 1.0, 1e9, path, err, errlen);
    if (!rc)
        rc = get_num(j, "decoder_rope_dim_ratio", &c->rope_dim_ratio, 0.0, 1.0, path, err, errlen);
    if (!rc) rc = get_num(j, "decoder_norm_eps", &c->dec_norm_eps, 0.0, 1.0, path, err, errlen);
    if (!rc) rc = get_int(j, "clip_length", &c->clip_length, 1, 1 << 16, path, err, errlen);
    if (!rc) rc = get_int(j, "token_drop", &c->token_drop, 0, 1 << 16, path, err, errlen);
    if (!rc)
        rc =
            get_stats(j, "latents_mean", c->latents_mean, c->latent_channels, 0, path, err, errlen);
    if (!rc)
        rc = get_stats(j, "latents_std", c->latents_std, c->latent_channels, 1, path, err, errlen);
    cJSON_Delete(j);
    if (rc) return -1;
    c->spatial_ratio = c->temporal_ratio = 1;
    for (int i = 0; i < c->n_levels; i++) {
        c->spatial_ratio *= c->spatial_factors[i];
        c->temporal_ratio *= c->temporal_factors[i];
        if (c->block_out_channels[i] % c->norm_num_groups)
            return vdn_fail(
                err, errlen,
                "%s: block_out_channels[%d] = %d is not a multiple of norm_num_groups %d", path, i,
                c->block_out_channels[i], c->norm_num_groups);
    }
    int rot = (int)(c->dec_head_dim * c->rope_dim_ratio);
    if (rot % 6)
        return vdn_fail(err, errlen,
                        "%s: decoder_rope_dim_ratio %g gives %d rotated channels, expected a "
                        "multiple of 6 (2 x 3 axes)",
                        path, c->rope_dim_ratio, rot);
    int chunk = (c->clip_length + c->temporal_ratio - 1) / c->temporal_ratio;
    if (c->token_drop >= chunk)
        return vdn_fail(err, errlen,
                        "%s: token_drop %d: expected fewer than the %d latent frames of a chunk",
                        path, c->token_drop, chunk);
    return 0;
}

int vdn_vae_audio_config_load(const char *dir, vdn_vae_audio_config *c, char *err, size_t errlen) {
    char path[4200];
    size_t len;
    char *text = read_config(dir, path, sizeof path, &len, err, errlen);
    if (!text) return -1;
    int rc = vdn_vae_audio_config_parse(text, len, path, c, err, errlen);
    free(text);
    return rc;
}

int vdn_vae_audio_config_parse(const char *text, size_t len, const char *path,
                               vdn_vae_audio_config *c, char *err, size_t errlen) {
    vdn_vae_audio_defaults(c);
    cJSON *j = parse_json(text, len, path, err, errlen);
    if (!j) return -1;
    int rc = check_class(j, "AutoencoderKLMiniMaxH3Audio", path, err, errlen);
    int nk = c->n_ups, nrk = c->n_res;
    if (!rc) rc = get_int(j, "encoder_dim", &c->encoder_dim, 1, 1 << 16, path, err, errlen);
    if (!rc)
        rc = get_ints(j, "encoder_rates", c->encoder_rates, &c->n_enc_rates, VDN_VAE_MAX_LEVELS, 0,
                      1, path, err, errlen);
    if (!rc) rc = get_int(j, "latent_dim", &c->latent_dim, 1, 1 << 16, path, err, errlen);
    if (!rc)
        rc = get_int(j, "latent_channels", &c->latent_channels, 1, VDN_VAE_MAX_CH, path, err,
                     errlen);
    if (!rc) rc = get_int(j, "num_attention_heads", &c->heads, 1, 1024, path, err, errlen);
    if (!rc) rc = get_int(j, "decoder_dim", &c->decoder_dim, 1, 1 << 16, path, err, errlen);
    if (!rc)
        rc = get_ints(j, "decoder_rates", c->decoder_rates, &c->n_ups, VDN_VAE_MAX_LEVELS, 0, 1,
                      path, err, errlen);
    if (!rc)
        rc = get_ints(j, "decoder_kernel_sizes", c->decoder_kernels, &nk, VDN_VAE_MAX_LEVELS, 0, 1,
                      path, err, errlen);
    if (!rc && nk != c->n_ups)
        rc = vdn_fail(err, errlen, "%s: decoder_kernel_sizes has %d entries, decoder_rates %d",
                      path, nk, c->n_ups);
    if (!rc)
        rc = get_ints(j, "resblock_kernel_sizes", c->res_kernels, &nrk, 4, 0, 1, path, err, errlen);
    c->n_res = nrk;
    const cJSON *dl = cJSON_GetObjectItemCaseSensitive(j, "resblock_dilation_sizes");
    if (!rc && dl && !cJSON_IsNull(dl)) {
        if (!cJSON_IsArray(dl) || cJSON_GetArraySize(dl) != c->n_res)
            rc = vdn_fail(
                err, errlen,
                "%s: field resblock_dilation_sizes: expected %d lists (one per resblock kernel)",
                path, c->n_res);
        for (int i = 0; !rc && i < c->n_res; i++) {
            const cJSON *e = cJSON_GetArrayItem(dl, i);
            int n = 0;
            int *d = c->res_dilations[i];
            if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) < 1 || cJSON_GetArraySize(e) > 4)
                rc = vdn_fail(err, errlen,
                              "%s: field resblock_dilation_sizes[%d]: expected 1..4 integers", path,
                              i);
            for (int k = 0; !rc && k < cJSON_GetArraySize(e); k++) {
                const cJSON *x = cJSON_GetArrayItem(e, k);
                if (!cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble > 1024)
                    rc = vdn_fail(
                        err, errlen,
                        "%s: field resblock_dilation_sizes[%d][%d]: expected an integer >= 1", path,
                        i, k);
                else
                    d[n++] = (int)x->valuedouble;
            }
            if (!rc && i > 0 && n != c->n_dil)
                rc = vdn_fail(err, errlen,
                              "%s: resblock_dilation_sizes: every list must have the same length",
                              path);
            c->n_dil = n;
        }
    }
    if (!rc) rc = get_int(j, "sampling_rate", &c->sampling_rate, 1000, 1000000, path, err, errlen);
    if (!rc)
        rc =
            get_stats(j, "latents_mean", c->latents_mean, c->latent_channels, 0, path, err, errlen);
    if (!rc)
        rc = get_stats(j, "latents_std", c->latents_std, c->latent_channels, 1, path, err, errlen);
    cJSON_Delete(j);
    if (rc) return -1;
    /* The hop (samples per latent frame) is the product of the rates; bound it so a hostile
     * config cannot overflow it (the released one is 2 * 4 * 4 * 5 * 5 = 800). */
    const int64_t hop_max = 1 << 20;
    int64_t henc = 1, hdec = 1;
    for (int i = 0; i < c->n_enc_rates && henc <= hop_max; i++)
        henc *= c->encoder_rates[i];
    for (int i = 0; i < c->n_ups && hdec <= hop_max; i++)
        hdec *= c->decoder_rates[i];
    if (hdec > hop_max)
        return vdn_fail(err, errlen,
                        "%s: decoder_rates multiply to more than %lld: expected at most that", path,
                        (long long)hop_max);
    if (henc != hdec)
        return vdn_fail(err, errlen,
                        "%s: decoder_rates multiply to %lld, encoder_rates to %lld: expected equal",
                        path, (long long)hdec, (long long)henc);
    c->hop = (int)hdec;
    if (c->decoder_dim >> c->n_ups < 1)
        return vdn_fail(err, errlen, "%s: decoder_dim %d cannot be halved %d times", path,
                        c->decoder_dim, c->n_ups);
    if (c->latent_dim % c->latent_channels || c->latent_dim % c->heads)
        return vdn_fail(
            err, errlen,
            "%s: latent_dim %d must be a multiple of latent_channels %d and num_attention_heads %d",
            path, c->latent_dim, c->latent_channels, c->heads);
    return 0;
}

/* ---- writing ---- */

static cJSON *int_array(const int *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static cJSON *dbl_array(const double *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

char *vdn_vae_video_config_json(const vdn_vae_video_config *c) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "_class_name", "AutoencoderKLMiniMaxH3");
    cJSON_AddNumberToObject(j, "in_channels", c->in_channels);
    cJSON_AddNumberToObject(j, "out_channels", c->out_channels);
    cJSON_AddNumberToObject(j, "latent_channels", c->latent_channels);
    cJSON_AddItemToObject(j, "block_out_channels", int_array(c->block_out_channels, c->n_levels));
    cJSON_AddNumberToObject(j, "layers_per_block", c->layers_per_block);
    cJSON_AddItemToObject(j, "spatial_downsample_factors",
                          int_array(c->spatial_factors, c->n_levels));
    cJSON_AddItemToObject(j, "temporal_downsample_factors",
                          int_array(c->temporal_factors, c->n_levels));
    cJSON_AddNumberToObject(j, "norm_num_groups", c->norm_num_groups);
    cJSON_AddNumberToObject(j, "norm_eps", 1e-6);
    cJSON_AddStringToObject(j, "spatial_padding_mode", "reflect");
    cJSON_AddNumberToObject(j, "decoder_num_layers", c->dec_layers);
    cJSON_AddNumberToObject(j, "decoder_num_attention_heads", c->dec_heads);
    cJSON_AddNumberToObject(j, "decoder_attention_head_dim", c->dec_head_dim);
    cJSON_AddNumberToObject(j, "decoder_num_register_tokens", c->dec_registers);
    cJSON_AddNumberToObject(j, "decoder_ffn_mult", c->dec_ffn_mult);
    cJSON_AddNumberToObject(j, "decoder_rope_theta", c->rope_theta);
    cJSON_AddNumberToObject(j, "decoder_rope_dim_ratio", c->rope_dim_ratio);
    cJSON_AddNumberToObject(j, "decoder_norm_eps", c->dec_norm_eps);
    cJSON_AddNumberToObject(j, "clip_length", c->clip_length);
    cJSON_AddNumberToObject(j, "token_drop", c->token_drop);
    cJSON_AddItemToObject(j, "latents_mean", dbl_array(c->latents_mean, c->latent_channels));
    cJSON_AddItemToObject(j, "latents_std", dbl_array(c->latents_std, c->latent_channels));
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    return s;
}

char *vdn_vae_audio_config_json(const vdn_vae_audio_config *c) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "_class_name", "AutoencoderKLMiniMaxH3Audio");
    cJSON_AddNumberToObject(j, "encoder_dim", c->encoder_dim);
    cJSON_AddItemToObject(j, "encoder_rates", int_array(c->encoder_rates, c->n_enc_rates));
    cJSON_AddNumberToObject(j, "latent_dim", c->latent_dim);
    cJSON_AddNumberToObject(j, "latent_channels", c->latent_channels);
    cJSON_AddNumberToObject(j, "num_attention_heads", c->heads);
    cJSON_AddNumberToObject(j, "decoder_dim", c->decoder_dim);
    cJSON_AddItemToObject(j, "decoder_rates", int_array(c->decoder_rates, c->n_ups));
    cJSON_AddItemToObject(j, "decoder_kernel_sizes", int_array(c->decoder_kernels, c->n_ups));
    cJSON_AddItemToObject(j, "resblock_kernel_sizes", int_array(c->res_kernels, c->n_res));
    cJSON *dl = cJSON_CreateArray();
    for (int i = 0; i < c->n_res; i++)
        cJSON_AddItemToArray(dl, int_array(c->res_dilations[i], c->n_dil));
    cJSON_AddItemToObject(j, "resblock_dilation_sizes", dl);
    cJSON_AddNumberToObject(j, "sampling_rate", c->sampling_rate);
    cJSON_AddItemToObject(j, "latents_mean", dbl_array(c->latents_mean, c->latent_channels));
    cJSON_AddItemToObject(j, "latents_std", dbl_array(c->latents_std, c->latent_channels));
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    return s;
}

/* ---- tensor lists ---- */

static void emit(vdn_vae_tensor_fn fn, void *user, const char *name, int ndim, int64_t a, int64_t b,
                 int64_t c, int64_t d, int64_t e) {
    const int64_t s[5] = {a, b, c, d, e};
    fn(user, name, ndim, s);
}

#define NAME(...) (snprintf(n, sizeof n, __VA_ARGS__), n)

/* a Conv3d of the encoder: weight [out, in, k, k, k] and bias */
static void conv3(vdn_vae_tensor_fn fn, void *u, const char *pre, int out, int in, int k) {
    char n[320];
    emit(fn, u, NAME("%s.weight", pre), 5, out, in, k, k, k);
    emit(fn, u, NAME("%s.bias", pre), 1, out, 0, 0, 0, 0);
}

static void affine(vdn_vae_tensor_fn fn, void *u, const char *pre, int ch, int bias) {
    char n[320];
    emit(fn, u, NAME("%s.weight", pre), 1, ch, 0, 0, 0, 0);
    if (bias) emit(fn, u, NAME("%s.bias", pre), 1, ch, 0, 0, 0, 0);
}

static void linear(vdn_vae_tensor_fn fn, void *u, const char *pre, int out, int in, int bias) {
    char n[320];
    emit(fn, u, NAME("%s.weight", pre), 2, out, in, 0, 0, 0);
    if (bias) emit(fn, u, NAME("%s.bias", pre), 1, out, 0, 0, 0, 0);
}

void vdn_vae_video_tensors(const vdn_vae_video_config *c, vdn_vae_tensor_fn fn, void *u) {
    char n[256], p[200];
    const int *boc = c->block_out_channels;
    conv3(fn, u, "encoder.conv_in", boc[0], c->in_channels, 3);
    for (int i = 0; i < c->n_levels; i++) {
        int in = i == 0 ? boc[0] : boc[i - 1], out = boc[i];
        for (int r = 0; r < c->layers_per_block; r++) {
            int rin = r == 0 ? in : out;
            snprintf(p, sizeof p, "encoder.down_blocks.%d.resnets.%d", i, r);
            affine(fn, u, NAME("%s.norm1", p), rin, 1);
            conv3(fn, u, NAME("%s.conv1", p), out, rin, 3);
            affine(fn, u, NAME("%s.norm2", p), out, 1);
            conv3(fn, u, NAME("%s.conv2", p), out, out, 3);
            if (rin != out) conv3(fn, u, NAME("%s.conv_shortcut", p), out, rin, 1);
        }
        if (c->spatial_factors[i] * c->temporal_factors[i] > 1)
            conv3(fn, u, NAME("encoder.down_blocks.%d.downsamplers.0.conv", i), out, out, 3);
    }
    const int last = boc[c->n_levels - 1], lc = c->latent_channels;
    affine(fn, u, "encoder.norm_out", last, 1);
    conv3(fn, u, "encoder.conv_out", 2 * lc, last, 3);
    conv3(fn, u, "quant_conv", 2 * lc, 2 * lc, 1);
    conv3(fn, u, "post_quant_conv", lc, lc, 1);

    const int dim = c->dec_heads * c->dec_head_dim, inner = dim * c->dec_ffn_mult;
    linear(fn, u, "decoder.proj_in", dim, lc, 1);
    emit(fn, u, "decoder.register_tokens", 3, 1, c->dec_registers, dim, 0, 0);
    for (int l = 0; l < c->dec_layers; l++) {
        snprintf(p, sizeof p, "decoder.transformer_blocks.%d", l);
        affine(fn, u, NAME("%s.norm1", p), dim, 0);
        linear(fn, u, NAME("%s.attn.to_q", p), dim, dim, 1);
        linear(fn, u, NAME("%s.attn.to_k", p), dim, dim, 1);
        linear(fn, u, NAME("%s.attn.to_v", p), dim, dim, 1);
        linear(fn, u, NAME("%s.attn.to_out.0", p), dim, dim, 1);
        emit(fn, u, NAME("%s.scale1", p), 1, dim, 0, 0, 0, 0);
        affine(fn, u, NAME("%s.norm2", p), dim, 0);
        linear(fn, u, NAME("%s.ff.net.0.proj", p), 2 * inner, dim, 1);
        linear(fn, u, NAME("%s.ff.net.2", p), dim, inner, 1);
        emit(fn, u, NAME("%s.scale2", p), 1, dim, 0, 0, 0, 0);
    }
    affine(fn, u, "decoder.norm_out", dim, 1);
    linear(fn, u, "decoder.proj_out",
           c->out_channels * c->temporal_ratio * c->spatial_ratio * c->spatial_ratio, dim, 1);
}

/* a weight-normalised Conv1d (or ConvTranspose1d: weight [in, out, k], g over dim 0 = in) */
static void wn_conv(vdn_vae_tensor_fn fn, void *u, const char *pre, int d0, int d1, int k,
                    int bias_ch) {
    char n[320];
    emit(fn, u, NAME("%s.weight_g", pre), 3, d0, 1, 1, 0, 0);
    emit(fn, u, NAME("%s.weight_v", pre), 3, d0, d1, k, 0, 0);
    if (bias_ch) emit(fn, u, NAME("%s.bias", pre), 1, bias_ch, 0, 0, 0, 0);
}

static void aa_act(vdn_vae_tensor_fn fn, void *u, const char *pre, int ch) {
    char n[320];
    emit(fn, u, NAME("%s.act.alpha", pre), 1, ch, 0, 0, 0, 0);
    emit(fn, u, NAME("%s.act.beta", pre), 1, ch, 0, 0, 0, 0);
    emit(fn, u, NAME("%s.upsample.filter", pre), 3, 1, 1, 12, 0, 0);
    emit(fn, u, NAME("%s.downsample.lowpass.filter", pre), 3, 1, 1, 12, 0, 0);
}

void vdn_vae_audio_tensors(const vdn_vae_audio_config *c, vdn_vae_tensor_fn fn, void *u) {
    char n[256], p[200];
    /* DAC encoder */
    int d = c->encoder_dim;
    wn_conv(fn, u, "encoder.block.0", d, 1, 7, d);
    for (int i = 0; i < c->n_enc_rates; i++) {
        int half = d, s = c->encoder_rates[i];
        d *= 2;
        for (int r = 0; r < 3; r++) {
            snprintf(p, sizeof p, "encoder.block.%d.block.%d.block", i + 1, r);
            emit(fn, u, NAME("%s.0.alpha", p), 3, 1, half, 1, 0, 0);
            wn_conv(fn, u, NAME("%s.1", p), half, half, 7, half);
            emit(fn, u, NAME("%s.2.alpha", p), 3, 1, half, 1, 0, 0);
            wn_conv(fn, u, NAME("%s.3", p), half, half, 1, half);
        }
        emit(fn, u, NAME("encoder.block.%d.block.3.alpha", i + 1), 3, 1, half, 1, 0, 0);
        wn_conv(fn, u, NAME("encoder.block.%d.block.4", i + 1), d, half, 2 * s, d);
    }
    emit(fn, u, NAME("encoder.block.%d.alpha", c->n_enc_rates + 1), 3, 1, d, 1, 0, 0);
    wn_conv(fn, u, NAME("encoder.block.%d", c->n_enc_rates + 2), c->latent_dim, d, 3,
            c->latent_dim);
    /* pre_block */
    const int L = c->latent_dim, C = c->latent_channels;
    affine(fn, u, "pre_block.norm1", L, 1);
    linear(fn, u, "pre_block.attn.qkv", 3 * L, L, 0);
    emit(fn, u, "pre_block.attn.q_bias", 1, L, 0, 0, 0, 0);
    emit(fn, u, "pre_block.attn.v_bias", 1, L, 0, 0, 0, 0);
    emit(fn, u, "pre_block.attn.zero_k_bias", 1, L, 0, 0, 0, 0);
    linear(fn, u, "pre_block.attn.proj", C, C, 1);
    linear(fn, u, "pre_block.proj", C, L, 1);
    affine(fn, u, "pre_block.norm3", L, 1);
    affine(fn, u, "pre_block.norm2", C, 1);
    affine(fn, u, "pre_block.mlp.norm", C, 1);
    linear(fn, u, "pre_block.mlp.w0", 2 * C, C, 1);
    linear(fn, u, "pre_block.mlp.w1", 2 * C, C, 1);
    linear(fn, u, "pre_block.mlp.w2", C, 2 * C, 1);
    emit(fn, u, "mean_proj.weight", 3, C, C, 1, 0, 0);
    emit(fn, u, "mean_proj.bias", 1, C, 0, 0, 0, 0);
    emit(fn, u, "logs_proj.weight", 3, C, C, 1, 0, 0);
    emit(fn, u, "logs_proj.bias", 1, C, 0, 0, 0, 0);
    emit(fn, u, "dec_in_proj.weight", 3, L, C, 1, 0, 0);
    emit(fn, u, "dec_in_proj.bias", 1, L, 0, 0, 0, 0);
    /* BigVGAN decoder */
    const int U = c->decoder_dim;
    wn_conv(fn, u, "decoder.conv_pre", U, L, 7, U);
    for (int i = 0; i < c->n_ups; i++)
        wn_conv(fn, u, NAME("decoder.ups.%d.0", i), U >> i, U >> (i + 1), c->decoder_kernels[i],
                U >> (i + 1));
    for (int i = 0; i < c->n_ups; i++) {
        int ch = U >> (i + 1);
        for (int j = 0; j < c->n_res; j++) {
            int k = c->res_kernels[j];
            snprintf(p, sizeof p, "decoder.resblocks.%d", i * c->n_res + j);
            for (int e = 0; e < c->n_dil; e++)
                wn_conv(fn, u, NAME("%s.convs1.%d", p, e), ch, ch, k, ch);
            for (int e = 0; e < c->n_dil; e++)
                wn_conv(fn, u, NAME("%s.convs2.%d", p, e), ch, ch, k, ch);
            for (int a = 0; a < 2 * c->n_dil; a++)
                aa_act(fn, u, NAME("%s.activations.%d", p, a), ch);
        }
    }
    const int last = U >> c->n_ups;
    aa_act(fn, u, "decoder.activation_post", last);
    wn_conv(fn, u, "decoder.conv_post", 1, last, 7, 0);
}

/* ---- the Kaiser-sinc filter ---- */

static double bessel_i0(double x) { /* power series; converges fast for the betas used (< 10) */
    double sum = 1.0, term = 1.0, q = x * x / 4.0;
    for (int k = 1; k < 200; k++) {
        term *= q / ((double)k * k);
        sum += term;
        if (term < sum * 1e-17) break;
    }
    return sum;
}

void vdn_vae_kaiser_sinc(double cutoff, double half_width, int kernel, float *out) {
    const int half = kernel / 2;
    double att = 2.285 * (half - 1) * M_PI * (4 * half_width) + 7.95, beta;
    if (att > 50.0)
        beta = 0.1102 * (att - 8.7);
    else if (att >= 21.0)
        beta = 0.5842 * pow(att - 21.0, 0.4) + 0.07886 * (att - 21.0);
    else
        beta = 0.0;
    double f[64], sum = 0.0;
    for (int i = 0; i < kernel && i < 64; i++) {
        double r = kernel > 1 ? 2.0 * i / (kernel - 1) - 1.0 : 0.0; /* symmetric window */
        double w = bessel_i0(beta * sqrt(fmax(0.0, 1.0 - r * r))) / bessel_i0(beta);
        double t = kernel % 2 == 0 ? (i - half) + 0.5 : (double)(i - half);
        double x = 2.0 * cutoff * t;
        double sinc = x == 0.0 ? 1.0 : sin(M_PI * x) / (M_PI * x);
        f[i] = 2.0 * cutoff * w * sinc;
        sum += f[i];
    }
    for (int i = 0; i < kernel && i < 64; i++)
        out[i] = (float)(f[i] / sum);
}
