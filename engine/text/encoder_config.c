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
