/* Config JSON -> vdn_config; see ckpt_config.h. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "ckpt_config.h"
#include "vdn_util.h"

enum { K_INT, K_FLOAT, K_DOUBLE };

/* One base config value: its diffusers key, its native key (NULL when the same), where it goes. */
typedef struct {
    const char *key, *native_key;
    int type;
    size_t offset;
    int has_default;
    double def;
    double lo, hi; /* accepted range */
} base_key;

#define F(field) offsetof(vdn_config, field)
static const base_key base_keys[] = {
    {"hidden_size", NULL, K_INT, F(hidden), 0, 0, 1, 1 << 20},
    {"num_attention_heads", NULL, K_INT, F(heads), 0, 0, 1, 4096},
    {"attention_head_dim", NULL, K_INT, F(head_dim), 0, 0, 2, 4096},
    {"ffn_dim", "ffn_hidden_size", K_INT, F(ffn), 0, 0, 1, 1 << 22},
    {"num_layers", NULL, K_INT, F(layers), 0, 0, 0, 4096},
    {"num_refiner_layers", "token_refiner_num_layers", K_INT, F(refiner_layers), 1, 2, 0, 4096},
    {"text_dim", NULL, K_INT, F(text_dim), 0, 0, 1, 1 << 20},
    {"in_channels", "latents_dim", K_INT, F(in_channels), 0, 0, 1, 4096},
    {"audio_in_channels", "audio_latents_dim", K_INT, F(audio_channels), 0, 0, 1, 4096},
    {"freq_dim", "timestep_input_dim", K_INT, F(freq_dim), 0, 0, 2, 1 << 16},
    {"time_embed_dim", NULL, K_INT, F(time_embed_dim), 0, 0, 1, 1 << 20},
    {"time_embed_hidden_dim", "time_embed_hidden_size", K_INT, F(time_hidden), 0, 0, 1, 1 << 20},
    {"rope_freq_dim", "rope_inv_freq_len", K_INT, F(rope_freq_dim), 0, 0, 0, 4096},
    {"rope_theta", NULL, K_DOUBLE, F(rope_theta), 1, 10000.0, 1e-6, 1e12},
    {"norm_eps", NULL, K_FLOAT, F(norm_eps), 1, 1e-5, 0, 1},
};
#undef F
#define N_BASE_KEYS (sizeof base_keys / sizeof base_keys[0])

/* Keys we read but that are not vdn_config fields (checked separately). */
static const char *const other_base_keys[] = {
    "patch_size", "qk_norm_eps", "final_norm_eps", "adaln_out_features", "final_adaln_out_features",
};

static int number_in(const cJSON *j, int type, double lo, double hi, double *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (!isfinite(d) || d < lo || d > hi) return -1;
    if (type == K_INT && floor(d) != d) return -1;
    *out = d;
    return 0;
}

static void store(vdn_config *c, const base_key *k, double v) {
    char *p = (char *)c + k->offset;
    if (k->type == K_INT)
        *(int *)p = (int)v;
    else if (k->type == K_FLOAT)
        *(float *)p = (float)v;
    else
        *(double *)p = v;
}

static const char *type_word(int type) {
    return type == K_INT ? "an integer" : "a number";
}

static int read_base_key(const char *label, const cJSON *root, const base_key *k, vdn_config *c,
                         char *err, size_t errlen) {
    const char *names[2] = {k->key, k->native_key};
    double val[2];
    int have[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        if (!names[i]) continue;
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, names[i]);
        if (!j) continue;
        if (number_in(j, k->type, k->lo, k->hi, &val[i]) != 0)
            return vdn_fail(err, errlen, "%s: key \"%s\": expected %s in [%g, %g]", label, names[i],
                            type_word(k->type), k->lo, k->hi);
        have[i] = 1;
    }
    if (have[0] && have[1] && val[0] != val[1])
        return vdn_fail(err, errlen, "%s: keys \"%s\" (%g) and \"%s\" (%g) disagree", label,
                        names[0], val[0], names[1], val[1]);
    if (have[0] || have[1]) {
        store(c, k, have[0] ? val[0] : val[1]);
        return 0;
    }
    if (k->has_default) {
        store(c, k, k->def);
        return 0;
    }
    return vdn_fail(err, errlen, "%s: missing key \"%s\"%s%s%s", label, k->key,
                    k->native_key ? " (or \"" : "", k->native_key ? k->native_key : "",
                    k->native_key ? "\")" : "");
}

static int known_key(const char *name) {
    if (name[0] == '_') return 1;
    for (size_t i = 0; i < N_BASE_KEYS; i++)
        if (strcmp(name, base_keys[i].key) == 0 ||
            (base_keys[i].native_key && strcmp(name, base_keys[i].native_key) == 0))
            return 1;
    for (size_t i = 0; i < sizeof other_base_keys / sizeof *other_base_keys; i++)
        if (strcmp(name, other_base_keys[i]) == 0) return 1;
    return 0;
}

/* An optional eps key that must equal norm_eps: the engine has one eps for all three norms. */
static int same_eps(const char *label, const cJSON *root, const char *key, float norm_eps,
                    char *err, size_t errlen) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j) return 0;
    double v;
    if (number_in(j, K_FLOAT, 0, 1, &v) != 0)
        return vdn_fail(err, errlen, "%s: key \"%s\": expected a number in [0, 1]", label, key);
    if ((float)v != norm_eps)
        return vdn_fail(err, errlen,
                        "%s: key \"%s\" = %g differs from norm_eps %g (the engine supports one "
                        "eps for every norm)",
                        label, key, v, (double)norm_eps);
    return 0;
}

static int parse_base(const char *label, const cJSON *root, vdn_config *c, vdn_layout_kind *layout,
                      char *err, size_t errlen) {
    if (!cJSON_IsObject(root)) return vdn_fail(err, errlen, "%s: expected a JSON object", label);
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(root, "_class_name");
    if (!cls)
        return vdn_fail(err, errlen,
                        "%s: missing key \"_class_name\" (expected MiniMaxH3Transformer3DModel or "
                        "MiniMaxH3DiTModel)",
                        label);
    if (!cJSON_IsString(cls))
        return vdn_fail(err, errlen, "%s: key \"_class_name\": expected a string", label);
    if (strcmp(cls->valuestring, "MiniMaxH3Transformer3DModel") == 0)
        *layout = VDN_LAYOUT_DIFFUSERS;
    else if (strcmp(cls->valuestring, "MiniMaxH3DiTModel") == 0)
        *layout = VDN_LAYOUT_NATIVE;
    else
        return vdn_fail(err, errlen,
                        "%s: key \"_class_name\" = \"%s\", expected MiniMaxH3Transformer3DModel "
                        "(diffusers) or MiniMaxH3DiTModel (native)",
                        label, cls->valuestring);
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < N_BASE_KEYS; i++)
        if (read_base_key(label, root, &base_keys[i], c, err, errlen) != 0) return -1;
    /* patch_size [t, h, w]; diffusers defaults to (1, 2, 2) */
    c->patch_t = 1;
    c->patch_h = c->patch_w = 2;
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(root, "patch_size");
    if (ps) {
        double v[3];
        if (!cJSON_IsArray(ps) || cJSON_GetArraySize(ps) != 3)
            return vdn_fail(err, errlen, "%s: key \"patch_size\": expected [t, h, w]", label);
        for (int d = 0; d < 3; d++)
            if (number_in(cJSON_GetArrayItem(ps, d), K_INT, 1, 64, &v[d]) != 0)
                return vdn_fail(err, errlen,
                                "%s: key \"patch_size\"[%d]: expected an integer in [1, 64]", label,
                                d);
        c->patch_t = (int)v[0];
        c->patch_h = (int)v[1];
        c->patch_w = (int)v[2];
    }
    if (c->patch_t != 1)
        return vdn_fail(err, errlen,
                        "%s: key \"patch_size\": temporal patch %d unsupported "
                        "(expected 1)",
                        label, c->patch_t);
    if (same_eps(label, root, "qk_norm_eps", c->norm_eps, err, errlen) ||
        same_eps(label, root, "final_norm_eps", c->norm_eps, err, errlen))
        return -1;
    /* derived sizes the native config states explicitly */
    const struct {
        const char *key;
        double want;
    } derived[] = {{"adaln_out_features", 18.0 * c->hidden},
                   {"final_adaln_out_features", 2.0 * c->hidden}};
    for (int i = 0; i < 2; i++) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, derived[i].key);
        double v;
        if (!d) continue;
        if (number_in(d, K_INT, 0, 1e12, &v) != 0 || v != derived[i].want)
            return vdn_fail(err, errlen, "%s: key \"%s\": expected %.0f (from hidden_size %d)",
                            label, derived[i].key, derived[i].want, c->hidden);
    }
    if (6 * c->rope_freq_dim > c->head_dim)
        return vdn_fail(err, errlen,
                        "%s: key \"rope_freq_dim\" = %d rotates %d channels, more than "
                        "attention_head_dim %d",
                        label, c->rope_freq_dim, 6 * c->rope_freq_dim, c->head_dim);
    if (c->freq_dim % 2)
        return vdn_fail(err, errlen, "%s: key \"freq_dim\" = %d, expected an even number", label,
                        c->freq_dim);
    c->video_shift = 12.0f;
    c->audio_shift = 3.0f;
    /* only a config that parsed is worth a warning about what it also holds */
    const cJSON *j;
    cJSON_ArrayForEach(j, root) {
        if (!known_key(j->string)) VDN_WARN("%s: ignoring unknown key \"%s\"", label, j->string);
    }
    return 0;
}

static cJSON *parse_json(const char *label, const char *text, size_t len, char *err,
                         size_t errlen) {
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long pos = at && at >= text && at <= text + len ? (long)(at - text) : -1;
        vdn_fail(err, errlen, "%s: not valid JSON (error near byte %ld)", label, pos);
    }
    return root;
}

int vdn_config_parse_base(const char *label, const char *text, size_t len, vdn_config *cfg,
                          vdn_layout_kind *layout, char *err, size_t errlen) {
    cJSON *root = parse_json(label, text, len, err, errlen);
    if (!root) return -1;
    int rc = parse_base(label, root, cfg, layout, err, errlen);
    cJSON_Delete(root);
    return rc;
}

/* ---- VDN transform ---- */

static const cJSON *need(const char *label, const cJSON *obj, const char *path, const char *key,
                         int want_type, char *err, size_t errlen) {
    const cJSON *j = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    const char *what = want_type == cJSON_True     ? "a boolean"
                       : want_type == cJSON_Number ? "an integer"
                       : want_type == cJSON_String ? "a string"
                       : want_type == cJSON_Object ? "an object"
                                                   : "an array";
    int ok = j && (want_type == cJSON_True ? cJSON_IsBool(j) : (j->type & 0xFF) == want_type);
    if (ok && want_type == cJSON_Number)
        ok = isfinite(j->valuedouble) && floor(j->valuedouble) == j->valuedouble &&
             j->valuedouble >= 0 && j->valuedouble <= 1 << 20;
    if (!ok) {
        vdn_fail(err, errlen, "%s: %s \"%s%s\": expected %s", label, j ? "key" : "missing key",
                 path, key, what);
        return NULL;
    }
    return j;
}

static int parse_transform(const char *label, const cJSON *root, vdn_config *c, char *err,
                           size_t errlen) {
    if (!cJSON_IsObject(root)) return vdn_fail(err, errlen, "%s: expected a JSON object", label);
    const cJSON *cfg = root;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "type");
    if (type) { /* a whole transform entry */
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "hybrid_attention") != 0)
            return vdn_fail(err, errlen, "%s: key \"type\": expected \"hybrid_attention\"", label);
        const cJSON *ver = need(label, root, "", "version", cJSON_Number, err, errlen);
        if (!ver) return -1;
        if (ver->valuedouble != 2)
            return vdn_fail(err, errlen,
                            "%s: key \"version\" = %g, this engine reads hybrid_attention "
                            "version 2",
                            label, ver->valuedouble);
        if (!(cfg = need(label, root, "", "config", cJSON_Object, err, errlen))) return -1;
    }
    const cJSON *gate = need(label, cfg, "", "enable_softmax_gate", cJSON_True, err, errlen);
    const cJSON *anchors =
        gate ? need(label, cfg, "", "anchor_frames", cJSON_String, err, errlen) : NULL;
    const cJSON *soft =
        anchors ? need(label, cfg, "", "softmax_attention", cJSON_Object, err, errlen) : NULL;
    const cJSON *lin =
        soft ? need(label, cfg, "", "linear_attention", cJSON_Object, err, errlen) : NULL;
    if (!lin) return -1;
    const cJSON *radius =
        need(label, soft, "softmax_attention.", "radius", cJSON_Number, err, errlen);
    const cJSON *chunk =
        radius ? need(label, soft, "softmax_attention.", "chunk", cJSON_Number, err, errlen) : NULL;
    const cJSON *rule =
        chunk ? need(label, lin, "linear_attention.", "delta_rule", cJSON_String, err, errlen)
              : NULL;
    const cJSON *lhd =
        rule ? need(label, lin, "linear_attention.", "linear_head_dim", cJSON_Number, err, errlen)
             : NULL;
    const cJSON *bridge =
        lhd ? need(label, lin, "linear_attention.", "bridge", cJSON_String, err, errlen) : NULL;
    const cJSON *sc =
        bridge ? need(label, lin, "linear_attention.", "short_conv", cJSON_Object, err, errlen)
               : NULL;
    const cJSON *targets =
        sc ? need(label, sc, "linear_attention.short_conv.", "targets", cJSON_Array, err, errlen)
           : NULL;
    const cJSON *text_state = targets ? need(label, lin, "linear_attention.", "enable_text_state",
                                             cJSON_True, err, errlen)
                                      : NULL;
    if (!text_state) return -1;
    if (strcmp(anchors->valuestring, "both") != 0 && strcmp(anchors->valuestring, "none") != 0)
        return vdn_fail(err, errlen,
                        "%s: key \"anchor_frames\" = \"%s\": the engine supports "
                        "\"both\" and \"none\"",
                        label, anchors->valuestring);
    if (strcmp(rule->valuestring, "vdn_solve") != 0)
        return vdn_fail(err, errlen,
                        "%s: key \"linear_attention.delta_rule\" = \"%s\": the engine supports "
                        "\"vdn_solve\" (the released rule)",
                        label, rule->valuestring);
    if (strcmp(bridge->valuestring, "alpha") != 0)
        return vdn_fail(err, errlen,
                        "%s: key \"linear_attention.bridge\" = \"%s\": the engine supports "
                        "\"alpha\"",
                        label, bridge->valuestring);
    int have_k = 0, have_v = 0, n = cJSON_GetArraySize(targets);
    for (int i = 0; i < n; i++) {
        const cJSON *t = cJSON_GetArrayItem(targets, i);
        if (cJSON_IsString(t) && strcmp(t->valuestring, "k") == 0 && !have_k)
            have_k = 1;
        else if (cJSON_IsString(t) && strcmp(t->valuestring, "v") == 0 && !have_v)
            have_v = 1;
        else
            have_k = -100;
    }
    if (have_k != 1 || have_v != 1)
        return vdn_fail(err, errlen,
                        "%s: key \"linear_attention.short_conv.targets\": the engine "
                        "supports exactly [\"k\", \"v\"]",
                        label);
    if (radius->valuedouble > 64 || chunk->valuedouble < 1 || chunk->valuedouble > 4096)
        return vdn_fail(err, errlen, "%s: softmax_attention radius %g / chunk %g out of range",
                        label, radius->valuedouble, chunk->valuedouble);
    c->has_vdn = 1;
    c->softmax_gate = cJSON_IsTrue(gate);
    c->anchors_both = strcmp(anchors->valuestring, "both") == 0;
    c->radius = (int)radius->valuedouble;
    c->chunk = (int)chunk->valuedouble;
    c->linear_head_dim = (int)lhd->valuedouble;
    c->text_state = cJSON_IsTrue(text_state);
    /* constants of the release (spec 5.3): RMSNorm eps of the readout, TEXT_STATE_SCALE */
    c->linear_norm_eps = 1e-6f;
    c->text_state_scale = 0.5f;
    return 0;
}

int vdn_config_parse_transform(const char *label, const char *text, size_t len, vdn_config *cfg,
                               char *err, size_t errlen) {
    cJSON *root = parse_json(label, text, len, err, errlen);
    if (!root) return -1;
    int rc = parse_transform(label, root, cfg, err, errlen);
    cJSON_Delete(root);
    return rc;
}

int vdn_config_parse_shift(const char *label, const char *text, size_t len, float *shift, char *err,
                           size_t errlen) {
    cJSON *root = parse_json(label, text, len, err, errlen);
    if (!root) return -1;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return vdn_fail(err, errlen, "%s: expected a JSON object", label);
    }
    /* a scheduler config without "shift" keeps the default (the key name is all we read) */
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "shift");
    double v = 0;
    int rc = 0;
    if (s && number_in(s, K_FLOAT, 1e-6, 1e6, &v) != 0)
        rc = vdn_fail(err, errlen, "%s: key \"shift\": expected a positive number", label);
    else if (s)
        *shift = (float)v;
    cJSON_Delete(root);
    return rc;
}
