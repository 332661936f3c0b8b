/* text_encoder/config.json -> vdn_text_config. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encoder_config.h"
#include "vdn_util.h"

static int get_num(const cJSON *tc, const char *key, double lo, double hi, int whole, double *out,
                   const char *file, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(tc, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        (whole && v->valuedouble != floor(v->valuedouble)))
        return vdn_fail(err, errlen, "%s: text_config.%s: expected a %s in [%g, %g]", file, key,
                        whole ? "whole number" : "number", lo, hi);
    *out = v->valuedouble;
    return 0;
}

const vdn_text_config vdn_text_qwen3_vl_32b = {.vocab = 151936,
                                               .hidden = 5120,
                                               .intermediate = 25600,
                                               .head_dim = 128,
                                               .layers = 64,
                                               .heads = 64,
                                               .kv_heads = 8,
                                               .rms_eps = 1e-6,
                                               .rope_theta = 5000000.0,
                                               .max_positions = 262144};

/* rope_theta sits in text_config (transformers 4) or in text_config.rope_parameters (5). */
static int get_theta(const cJSON *tc, double *theta, const char *file, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(tc, "rope_theta");
    if (!v) {
        const cJSON *rp = cJSON_GetObjectItemCaseSensitive(tc, "rope_parameters");
        v = rp ? cJSON_GetObjectItemCaseSensitive(rp, "rope_theta") : NULL;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 1))
        return vdn_fail(err, errlen, "%s: text_config.rope_theta: expected a number > 1", file);
    *theta = v->valuedouble;
    return 0;
}

int vdn_text_config_load(const char *dir, vdn_text_config *c, char *err, size_t errlen) {
    char file[4096];
    snprintf(file, sizeof file, "%s/config.json", dir);
    size_t len;
    char *text = vdn_read_file(file, &len, err, errlen);
    if (!text) return -1;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (!cJSON_IsObject(tc)) {
        cJSON_Delete(root);
        return vdn_fail(err, errlen,
                        "%s: expected a JSON object with text_config (a Qwen3-VL "
                        "config)",
                        file);
    }
    double v[8];
    int rc = get_num(tc, "vocab_size", 1, 1 << 24, 1, &v[0], file, err, errlen) ||
             get_num(tc, "hidden_size", 1, 1 << 16, 1, &v[1], file, err, errlen) ||
             get_num(tc, "intermediate_size", 1, 1 << 20, 1, &v[2], file, err, errlen) ||
             get_num(tc, "num_hidden_layers", 1, 4096, 1, &v[3], file, err, errlen) ||
             get_num(tc, "num_attention_heads", 1, 4096, 1, &v[4], file, err, errlen) ||
             get_num(tc, "num_key_value_heads", 1, 4096, 1, &v[5], file, err, errlen) ||
             get_num(tc, "rms_norm_eps", 1e-12, 1, 0, &v[6], file, err, errlen) ||
             get_num(tc, "max_position_embeddings", 1, 1 << 24, 1, &v[7], file, err, errlen) ||
             get_theta(tc, &c->rope_theta, file, err, errlen);
    double hd = 0;
    if (!rc && cJSON_GetObjectItemCaseSensitive(tc, "head_dim"))
        rc = get_num(tc, "head_dim", 2, 1024, 1, &hd, file, err, errlen);
    else if (!rc)
        hd = v[1] / v[4]; /* transformers' default */
    if (!rc) {
        c->vocab = (int64_t)v[0];
        c->hidden = (int64_t)v[1];
        c->intermediate = (int64_t)v[2];
        c->layers = (int)v[3];
        c->heads = (int)v[4];
        c->kv_heads = (int)v[5];
        c->rms_eps = v[6];
        c->max_positions = (int64_t)v[7];
        c->head_dim = (int64_t)hd;
        if (c->heads % c->kv_heads)
            rc = vdn_fail(err, errlen,
                          "%s: text_config: num_attention_heads %d is not a multiple "
                          "of num_key_value_heads %d",
                          file, c->heads, c->kv_heads);
        else if (hd != floor(hd) || c->head_dim % 2)
            rc = vdn_fail(err, errlen, "%s: text_config.head_dim: expected an even whole number",
                          file);
        const cJSON *bias = cJSON_GetObjectItemCaseSensitive(tc, "attention_bias");
        if (!rc && cJSON_IsTrue(bias))
            rc = vdn_fail(err, errlen,
                          "%s: text_config.attention_bias: true is not supported "
                          "(Qwen3-VL has none)",
                          file);
    }
    cJSON_Delete(root);
    return rc ? -1 : 0;
}

int vdn_text_encoder_default_layer(const vdn_text_config *c) {
    return c->layers > VDN_TEXT_ENCODER_LAYER ? VDN_TEXT_ENCODER_LAYER
           : c->layers - 1 > 0                ? c->layers - 1
                                              : 1;
}

void vdn_text_weight_name(char *out, size_t n, int layer, const char *what) {
    if (layer < 0)
        snprintf(out, n, "model.language_model.%s", what);
    else
        snprintf(out, n, "model.language_model.layers.%d.%s", layer, what);
}

/* ---- the vision tower ---- */

static int get_int(const cJSON *obj, const char *sect, const char *key, int lo, int hi, int *out,
                   const char *file, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        v->valuedouble != floor(v->valuedouble))
        return vdn_fail(err, errlen, "%s: %s%s: expected a whole number in [%d, %d]", file, sect,
                        key, lo, hi);
    *out = (int)v->valuedouble;
    return 0;
}

/* text_config.rope_scaling.mrope_section (transformers 4) or rope_parameters (5) */
static int get_mrope(const cJSON *tc, const vdn_text_config *text, int out[3], const char *file,
                     char *err, size_t errlen) {
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(tc, "rope_scaling");
    const cJSON *sec = rs ? cJSON_GetObjectItemCaseSensitive(rs, "mrope_section") : NULL;
    if (!sec) {
        rs = cJSON_GetObjectItemCaseSensitive(tc, "rope_parameters");
        sec = rs ? cJSON_GetObjectItemCaseSensitive(rs, "mrope_section") : NULL;
    }
    int sum = 0, ok = cJSON_IsArray(sec) && cJSON_GetArraySize(sec) == 3;
    for (int i = 0; ok && i < 3; i++) {
        const cJSON *x = cJSON_GetArrayItem(sec, i);
        ok = cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble == floor(x->valuedouble) &&
             x->valuedouble <= 4096;
        if (ok) sum += out[i] = (int)x->valuedouble;
    }
    if (!ok || sum != text->head_dim / 2)
        return vdn_fail(err, errlen,
                        "%s: text_config.rope_scaling.mrope_section: expected 3 whole numbers "
                        "adding up to head_dim / 2 = %lld",
                        file, (long long)(text->head_dim / 2));
    return 0;
}

static int vision_fields(const cJSON *root, const cJSON *vc, const vdn_text_config *text,
                         vdn_vision_config *v, const char *file, char *err, size_t errlen) {
    const char *V = "vision_config.";
    int hidden, inter, out, npos, tok[3];
    if (get_int(vc, V, "depth", 1, 1024, &v->depth, file, err, errlen) ||
        get_int(vc, V, "num_heads", 1, 1024, &v->heads, file, err, errlen) ||
        get_int(vc, V, "hidden_size", 1, 1 << 16, &hidden, file, err, errlen) ||
        get_int(vc, V, "intermediate_size", 1, 1 << 20, &inter, file, err, errlen) ||
        get_int(vc, V, "out_hidden_size", 1, 1 << 16, &out, file, err, errlen) ||
        get_int(vc, V, "patch_size", 1, 1024, &v->patch, file, err, errlen) ||
        get_int(vc, V, "temporal_patch_size", 1, 16, &v->temporal_patch, file, err, errlen) ||
        get_int(vc, V, "spatial_merge_size", 1, 16, &v->merge, file, err, errlen) ||
        get_int(vc, V, "in_channels", 3, 3, &v->in_channels, file, err, errlen) ||
        get_int(vc, V, "num_position_embeddings", 1, 1 << 20, &npos, file, err, errlen) ||
        get_int(root, "", "image_token_id", 0, 1 << 24, &tok[0], file, err, errlen) ||
        get_int(root, "", "vision_start_token_id", 0, 1 << 24, &tok[1], file, err, errlen) ||
        get_int(root, "", "vision_end_token_id", 0, 1 << 24, &tok[2], file, err, errlen))
        return -1;
    v->hidden = hidden, v->intermediate = inter, v->out_hidden = out, v->n_pos_embed = npos;
    v->image_token = tok[0], v->vision_start_token = tok[1], v->vision_end_token = tok[2];
    int side = (int)floor(sqrt((double)npos) + 0.5);
    if (side * side != npos)
        return vdn_fail(err, errlen,
                        "%s: vision_config.num_position_embeddings %d: expected a square", file,
                        npos);
    if (hidden % v->heads || (hidden / v->heads) % 4)
        return vdn_fail(err, errlen,
                        "%s: vision_config: hidden_size %d over num_heads %d: expected a head "
                        "width that is a multiple of 4 (two rotary axes of pairs)",
                        file, hidden, v->heads);
    if (out != text->hidden)
        return vdn_fail(err, errlen,
                        "%s: vision_config.out_hidden_size %d: expected text_config.hidden_size "
                        "%lld",
                        file, out, (long long)text->hidden);
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(vc, "hidden_act");
    if (!cJSON_IsString(act) || strcmp(act->valuestring, "gelu_pytorch_tanh"))
        return vdn_fail(err, errlen, "%s: vision_config.hidden_act: expected \"gelu_pytorch_tanh\"",
                        file);
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(vc, "deepstack_visual_indexes");
    int n = cJSON_IsArray(ds) ? cJSON_GetArraySize(ds) : -1;
    if (n < 0 || n > VDN_VISION_MAX_DEEPSTACK)
        return vdn_fail(err, errlen,
                        "%s: vision_config.deepstack_visual_indexes: expected a list of at most "
                        "%d block indexes",
                        file, VDN_VISION_MAX_DEEPSTACK);
    v->n_deepstack = n;
    for (int i = 0; i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(ds, i);
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
            x->valuedouble >= v->depth || (i > 0 && x->valuedouble <= v->deepstack[i - 1]))
            return vdn_fail(err, errlen,
                            "%s: vision_config.deepstack_visual_indexes[%d]: expected an "
                            "ascending block index below depth %d",
                            file, i, v->depth);
        v->deepstack[i] = (int)x->valuedouble;
    }
    if (n > text->layers)
        return vdn_fail(err, errlen,
                        "%s: vision_config.deepstack_visual_indexes: %d features for %d decoder "
                        "layers",
                        file, n, text->layers);
    return get_mrope(cJSON_GetObjectItemCaseSensitive(root, "text_config"), text, v->mrope, file,
                     err, errlen);
}

int vdn_vision_config_load(const char *dir, const vdn_text_config *text, vdn_vision_config *v,
                           char *err, size_t errlen) {
    char file[4096];
    snprintf(file, sizeof file, "%s/config.json", dir);
    size_t len;
    char *json = vdn_read_file(file, &len, err, errlen);
    if (!json) return -1;
    int rc = vdn_vision_config_parse(json, len, file, text, v, err, errlen);
    free(json);
    return rc;
}

int vdn_vision_config_parse(const char *json, size_t len, const char *file,
                            const vdn_text_config *text, vdn_vision_config *v, char *err,
                            size_t errlen) {
    cJSON *root = cJSON_ParseWithLength(json, len);
    const cJSON *vc = cJSON_GetObjectItemCaseSensitive(root, "vision_config");
    memset(v, 0, sizeof *v);
    int rc = !root                 ? vdn_fail(err, errlen, "%s: not valid JSON", file)
             : !cJSON_IsObject(vc) ? 1
                                   : vision_fields(root, vc, text, v, file, err, errlen);
    cJSON_Delete(root);
    return rc;
}

void vdn_vision_weight_name(char *out, size_t n, int block, const char *what) {
    if (block < 0)
        snprintf(out, n, "model.visual.%s", what);
    else
        snprintf(out, n, "model.visual.blocks.%d.%s", block, what);
}
