/* Strict JSONL suite parser (cJSON for the JSON, the checks here). Errors name the file, the
 * line, the field and what was expected, so a hand-edited manifest is easy to fix. */
#include "suite.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdarg.h>
#include <string.h>

#include "vdn_util.h"

static const char *mode_names[] = {"t2va", "i2va", "l2va", "fl2va"};

const char *vdn_suite_mode_name(vdn_suite_mode m) {
    return (unsigned)m < 4 ? mode_names[m] : "?";
}

int vdn_suite_mode_keyframes(vdn_suite_mode m) {
    return m == VDN_MODE_T2VA ? 0 : m == VDN_MODE_FL2VA ? 2 : 1;
}

int vdn_suite_mode_first(vdn_suite_mode m) {
    return m == VDN_MODE_I2VA || m == VDN_MODE_FL2VA;
}

int vdn_suite_mode_last(vdn_suite_mode m) {
    return m == VDN_MODE_L2VA || m == VDN_MODE_FL2VA;
}

static const char *json_kind(const cJSON *v) {
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "something else";
}

/* Integer field in [lo, hi]; JSON numbers are doubles, so integers above 2^53 are refused. */
static int get_int(const cJSON *o, const char *name, double lo, double hi, double *out,
                   const char *where, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v) return vdn_fail(err, errlen, "%s: missing field '%s'", where, name);
    if (!cJSON_IsNumber(v))
        return vdn_fail(err, errlen, "%s: field '%s': expected an integer, got %s", where, name,
                        json_kind(v));
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < lo || d > hi)
        return vdn_fail(err, errlen,
                        "%s: field '%s': expected an integer in [%.0f, %.0f], got %.17g", where,
                        name, lo, hi, d);
    *out = d;
    return 0;
}

static int get_str(const cJSON *o, const char *name, int required, char **out, const char *where,
                   char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    *out = NULL;
    if (!v) return required ? vdn_fail(err, errlen, "%s: missing field '%s'", where, name) : 0;
    if (!cJSON_IsString(v))
        return vdn_fail(err, errlen, "%s: field '%s': expected a string, got %s", where, name,
                        json_kind(v));
    if (strlen(v->valuestring) > 65536)
        return vdn_fail(err, errlen, "%s: field '%s': longer than 65536 bytes", where, name);
    *out = vdn_xstrdup(v->valuestring);
    return 0;
}

static void item_free(vdn_suite_item *it) {
    free(it->prompt);
    free(it->prompt_cache);
    free(it->first_frame);
    free(it->last_frame);
    free(it->keyframes);
    memset(it, 0, sizeof *it);
}

static const char *known_fields[] = {"id",          "mode",       "prompt",    "prompt_cache",
                                     "first_frame", "last_frame", "keyframes", "seed",
                                     "frames",      "height",     "width",     NULL};

/* What renders: a prompt cache, or the text with the pictures its mode conditions on. */
static int check_inputs(const vdn_suite_item *it, const char *where, char *err, size_t errlen) {
    const char *names[4] = {"prompt_cache", "first_frame", "last_frame", "keyframes"};
    const char *vals[4] = {it->prompt_cache, it->first_frame, it->last_frame, it->keyframes};
    for (int i = 0; i < 4; i++)
        if (vals[i] && !vals[i][0])
            return vdn_fail(err, errlen,
                            "%s: field '%s': expected a path or URI, got an empty string", where,
                            names[i]);
    const int pics = it->first_frame || it->last_frame;
    const char *pic = it->first_frame ? "first_frame" : "last_frame";
    const char *mode = vdn_suite_mode_name(it->mode);
    if (it->mode == VDN_MODE_T2VA && (pics || it->keyframes))
        return vdn_fail(err, errlen,
                        "%s: field '%s': t2va takes no keyframes (use i2va, l2va or "
                        "fl2va)",
                        where, pics ? pic : "keyframes");
    if (pics && it->prompt_cache)
        return vdn_fail(err, errlen,
                        "%s: field '%s': keyframe pictures go with the text 'prompt', not with a "
                        "'prompt_cache' (which carries its keyframes already)",
                        where, pic);
    if (pics && it->keyframes)
        return vdn_fail(err, errlen,
                        "%s: field 'keyframes': names keyframe latents of a prompt cache; a line "
                        "with pictures has none",
                        where);
    if (pics && !it->prompt[0])
        return vdn_fail(err, errlen,
                        "%s: field 'prompt': empty; keyframe pictures are encoded with the text",
                        where);
    if (pics && (!it->first_frame != !vdn_suite_mode_first(it->mode) ||
                 !it->last_frame != !vdn_suite_mode_last(it->mode)))
        return vdn_fail(err, errlen, "%s: fields 'first_frame'/'last_frame': %s takes %s, got %s",
                        where, mode,
                        it->mode == VDN_MODE_I2VA   ? "first_frame only"
                        : it->mode == VDN_MODE_L2VA ? "last_frame only"
                                                    : "both",
                        it->first_frame && it->last_frame ? "both"
                        : it->first_frame                 ? "first_frame only"
                                                          : "last_frame only");
    if (!pics && !it->prompt_cache && it->mode != VDN_MODE_T2VA)
        return vdn_fail(err, errlen,
                        "%s: %s needs its keyframes: fields 'first_frame'/'last_frame' (pictures "
                        "encoded with the text) or 'prompt_cache' (missing field 'prompt_cache')",
                        where, mode);
    if (!it->prompt_cache && !it->prompt[0])
        return vdn_fail(err, errlen,
                        "%s: field 'prompt': empty and no 'prompt_cache' (missing field "
                        "'prompt_cache'): nothing to render",
                        where);
    return 0;
}

static int parse_line(const char *line, size_t len, const char *where, vdn_suite_item *it,
                      char *err, size_t errlen) {
    memset(it, 0, sizeof *it);
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (!o) {
        size_t at = end ? (size_t)(end - line) : 0;
        return vdn_fail(err, errlen,
                        "%s: not valid JSON (near byte %zu); expected one JSON object per line",
                        where, at + 1);
    }
    int rc = -1;
    for (const char *p = end; p && p < line + len; p++)
        if (*p != ' ' && *p != '\t') {
            vdn_fail(err, errlen,
                     "%s: text after the JSON object (byte %zu); expected one object per line",
                     where, (size_t)(p - line) + 1);
            goto out;
        }
    if (!cJSON_IsObject(o)) {
        vdn_fail(err, errlen, "%s: expected a JSON object, got %s", where, json_kind(o));
        goto out;
    }
    unsigned seen = 0;
    for (const cJSON *f = o->child; f; f = f->next) {
        int k = -1;
        for (int i = 0; known_fields[i]; i++)
            if (f->string && !strcmp(f->string, known_fields[i])) k = i;
        if (k < 0) {
            vdn_fail(err, errlen,
                     "%s: unknown field '%.80s' (expected one of id, mode, prompt, prompt_cache, "
                     "first_frame, last_frame, keyframes, seed, frames, height, width)",
                     where, f->string ? f->string : "");
            goto out;
        }
        if (seen & (1u << k)) {
            vdn_fail(err, errlen, "%s: field '%s' appears twice", where, f->string);
            goto out;
        }
        seen |= 1u << k;
    }
    char *id = NULL, *mode = NULL;
    if (get_str(o, "id", 1, &id, where, err, errlen)) goto out;
    size_t idlen = strlen(id);
    int id_ok = idlen >= 1 && idlen < sizeof it->id;
    for (size_t i = 0; id_ok && i < idlen; i++) {
        char c = id[i];
        id_ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-';
    }
    if (id_ok && (!strcmp(id, ".") || !strcmp(id, ".."))) id_ok = 0;
    if (!id_ok) {
        vdn_fail(err, errlen,
                 "%s: field 'id': expected 1..63 characters of [A-Za-z0-9._-], got \"%.80s\"",
                 where, id);
        free(id);
        goto out;
    }
    memcpy(it->id, id, idlen + 1);
    free(id);
    if (get_str(o, "mode", 1, &mode, where, err, errlen)) goto out;
    int m = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(mode, mode_names[i])) m = i;
    if (m < 0) {
        vdn_fail(err, errlen, "%s: field 'mode': expected t2va, i2va, l2va or fl2va, got \"%.40s\"",
                 where, mode);
        free(mode);
        goto out;
    }
    free(mode);
    it->mode = (vdn_suite_mode)m;
    if (get_str(o, "prompt", 1, &it->prompt, where, err, errlen)) goto out;
    if (get_str(o, "prompt_cache", 0, &it->prompt_cache, where, err, errlen) ||
        get_str(o, "first_frame", 0, &it->first_frame, where, err, errlen) ||
        get_str(o, "last_frame", 0, &it->last_frame, where, err, errlen) ||
        get_str(o, "keyframes", 0, &it->keyframes, where, err, errlen))
        goto out;
    if (check_inputs(it, where, err, errlen)) goto out;
    double d;
    if (get_int(o, "seed", 0, 9007199254740992.0, &d, where, err, errlen)) goto out;
    it->seed = (uint64_t)d;
    if (get_int(o, "frames", 1, 100000, &d, where, err, errlen)) goto out;
    it->frames = (int)d;
    if (get_int(o, "height", 32, 16384, &d, where, err, errlen)) goto out;
    it->height = (int)d;
    if (get_int(o, "width", 32, 16384, &d, where, err, errlen)) goto out;
    it->width = (int)d;
    if (it->height % 32 || it->width % 32) {
        vdn_fail(err, errlen, "%s: fields 'height'/'width': expected multiples of 32, got %dx%d",
                 where, it->height, it->width);
        goto out;
    }
    rc = 0;
out:
    cJSON_Delete(o);
    if (rc) item_free(it);
    return rc;
}

int vdn_suite_parse(const char *text, size_t len, const char *path, vdn_suite *s, char *err,
                    size_t errlen) {
    memset(s, 0, sizeof *s);
    s->path = vdn_xstrdup(path ? path : "<memory>");
    const char *slash = strrchr(s->path, '/');
    if (slash) {
        s->base_dir = vdn_xmalloc((size_t)(slash - s->path) + 2);
        memcpy(s->base_dir, s->path, (size_t)(slash - s->path) + 1);
        s->base_dir[slash - s->path + 1] = 0;
    } else {
        s->base_dir = vdn_xstrdup("");
    }
    int cap = 0, lineno = 0;
    size_t pos = 0;
    char where[1200];
    while (pos < len) {
        size_t e = pos;
        while (e < len && text[e] != '\n')
            e++;
        lineno++;
        size_t a = pos, b = e;
        if (b > a && text[b - 1] == '\r') b--;
        while (a < b && (text[a] == ' ' || text[a] == '\t'))
            a++;
        pos = e + 1;
        if (a == b || text[a] == '#') continue;
        snprintf(where, sizeof where, "%s:%d", s->path, lineno);
        if (memchr(text + a, 0, b - a)) {
            vdn_fail(err, errlen, "%s: NUL byte inside the line; expected UTF-8 JSON text", where);
            goto fail;
        }
        if (s->n == cap) {
            cap = cap ? 2 * cap : 128;
            vdn_suite_item *grown = vdn_xmalloc((size_t)cap * sizeof *grown);
            if (s->n) memcpy(grown, s->items, (size_t)s->n * sizeof *grown);
            free(s->items);
            s->items = grown;
        }
        vdn_suite_item *it = &s->items[s->n];
        if (parse_line(text + a, b - a, where, it, err, errlen)) goto fail;
        it->line = lineno;
        for (int i = 0; i < s->n; i++)
            if (!strcmp(s->items[i].id, it->id)) {
                vdn_fail(err, errlen,
                         "%s: field 'id': \"%s\" already used on line %d; ids must be unique",
                         where, it->id, s->items[i].line);
                item_free(it);
                goto fail;
            }
        s->n++;
    }
    if (s->n == 0) {
        vdn_fail(err, errlen, "%s: no prompts; expected one JSON object per line", s->path);
        goto fail;
    }
    return 0;
fail:
    vdn_suite_free(s);
    return -1;
}

int vdn_suite_load(const char *path, vdn_suite *s, char *err, size_t errlen) {
    size_t len;
    char *text = vdn_read_file(path, &len, err, errlen);
    memset(s, 0, sizeof *s);
    if (!text) return -1;
    int rc = vdn_suite_parse(text, len, path, s, err, errlen);
    free(text);
    return rc;
}

void vdn_suite_free(vdn_suite *s) {
    for (int i = 0; i < s->n; i++)
        item_free(&s->items[i]);
    free(s->items);
    free(s->path);
    free(s->base_dir);
    memset(s, 0, sizeof *s);
}

int vdn_suite_keyframe_texts(vdn_suite *s) {
    int n = 0;
    for (int i = 0; i < s->n; i++) {
        vdn_suite_item *it = &s->items[i];
        if (it->mode == VDN_MODE_T2VA || !it->prompt[0]) {
            item_free(it);
            continue;
        }
        free(it->prompt_cache);
        free(it->keyframes);
        free(it->first_frame);
        free(it->last_frame);
        it->prompt_cache = it->keyframes = it->first_frame = it->last_frame = NULL;
        it->mode = VDN_MODE_T2VA;
        s->items[n++] = *it;
    }
    s->n = n;
    return n;
}

char *vdn_suite_resolve(const vdn_suite *s, const char *p) {
    if (!p) return NULL;
    if (p[0] == '/' || strstr(p, "://")) return vdn_xstrdup(p);
    size_t n = strlen(s->base_dir) + strlen(p) + 1;
    char *out = vdn_xmalloc(n);
    snprintf(out, n, "%s%s", s->base_dir, p);
    return out;
}

char *vdn_suite_item_json(const vdn_suite_item *it) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", it->id);
    cJSON_AddStringToObject(o, "mode", vdn_suite_mode_name(it->mode));
    cJSON_AddStringToObject(o, "prompt", it->prompt ? it->prompt : "");
    if (it->prompt_cache) cJSON_AddStringToObject(o, "prompt_cache", it->prompt_cache);
    if (it->first_frame) cJSON_AddStringToObject(o, "first_frame", it->first_frame);
    if (it->last_frame) cJSON_AddStringToObject(o, "last_frame", it->last_frame);
    if (it->keyframes) cJSON_AddStringToObject(o, "keyframes", it->keyframes);
    char seed[32]; /* raw: cJSON would print a 2^53 seed with 15 digits */
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)it->seed);
    cJSON_AddRawToObject(o, "seed", seed);
    cJSON_AddNumberToObject(o, "frames", it->frames);
    cJSON_AddNumberToObject(o, "height", it->height);
    cJSON_AddNumberToObject(o, "width", it->width);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}
