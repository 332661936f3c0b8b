/* Sweep manifest JSON: written by `vdn eval sweep`, read by the next sweep run (resume) and by
 * `vdn eval report`. Read strictly: a damaged manifest is an error naming the field. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep.h"
#include "vdn_util.h"

void vdn_sweep_free(vdn_sweep *s) {
    for (int i = 0; i < s->n_pairs; i++) {
        free(s->pairs[i].prompt);
        free(s->pairs[i].variant);
        free(s->pairs[i].video_key);
        free(s->pairs[i].record_key);
    }
    free(s->pairs);
    free(s->variants);
    free(s->batches);
    free(s->path);
    free(s->suite);
    free(s->checkpoint);
    free(s->store);
    free(s->tag);
    free(s->baseline);
    memset(s, 0, sizeof *s);
}

const vdn_sweep_pair *vdn_sweep_find(const vdn_sweep *s, const char *prompt, const char *variant) {
    for (int i = 0; i < s->n_pairs; i++)
        if (!strcmp(s->pairs[i].prompt, prompt) && !strcmp(s->pairs[i].variant, variant))
            return &s->pairs[i];
    return NULL;
}

static int str_field(const cJSON *o, const char *name, int required, char **out, const char *where,
                     char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    *out = NULL;
    if (!v) return required ? vdn_fail(err, errlen, "%s: missing field '%s'", where, name) : 0;
    if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) > 4096)
        return vdn_fail(err, errlen, "%s: field '%s': expected a non-empty string", where, name);
    *out = vdn_xstrdup(v->valuestring);
    return 0;
}

static int id_field(const cJSON *o, const char *name, uint64_t *out, const char *where, char *err,
                    size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    *out = 0;
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != floor(v->valuedouble))
        return vdn_fail(err, errlen, "%s: field '%s': expected a non-negative integer", where,
                        name);
    *out = (uint64_t)v->valuedouble;
    return 0;
}

int vdn_sweep_parse(const char *text, size_t len, const char *path, vdn_sweep *s, char *err,
                    size_t errlen) {
    memset(s, 0, sizeof *s);
    s->path = vdn_xstrdup(path);
    cJSON *root = cJSON_ParseWithLength(text, len);
    char where[1200];
    int rc = -1;
    if (!root || !cJSON_IsObject(root)) {
        vdn_fail(err, errlen,
                 "%s: not a JSON object; expected a sweep manifest written by `vdn eval sweep`",
                 path);
        goto out;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != 1) {
        vdn_fail(err, errlen, "%s: field 'version': expected 1", path);
        goto out;
    }
    if (str_field(root, "suite", 1, &s->suite, path, err, errlen) ||
        str_field(root, "checkpoint", 0, &s->checkpoint, path, err, errlen) ||
        str_field(root, "store", 1, &s->store, path, err, errlen) ||
        str_field(root, "tag", 1, &s->tag, path, err, errlen) ||
        str_field(root, "baseline", 1, &s->baseline, path, err, errlen))
        goto out;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "steps_override");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsNumber(so) || so->valuedouble < 1 || so->valuedouble > 1000 ||
            so->valuedouble != floor(so->valuedouble)) {
            vdn_fail(err, errlen,
                     "%s: field 'steps_override': expected null or an integer in [1, 1000]", path);
            goto out;
        }
        s->steps_override = (int)so->valuedouble;
    }
    const cJSON *vars = cJSON_GetObjectItemCaseSensitive(root, "variants");
    if (!cJSON_IsArray(vars) || cJSON_GetArraySize(vars) < 1 || cJSON_GetArraySize(vars) > 64) {
        vdn_fail(err, errlen, "%s: field 'variants': expected an array of 1..64 variant names",
                 path);
        goto out;
    }
    s->variants = vdn_xcalloc((size_t)cJSON_GetArraySize(vars), sizeof *s->variants);
    for (const cJSON *v = vars->child; v; v = v->next) {
        snprintf(where, sizeof where, "%s: variants[%d]", path, s->n_variants);
        if (!cJSON_IsString(v)) {
            vdn_fail(err, errlen, "%s: expected a string", where);
            goto out;
        }
        char e2[VDN_ERR_LEN];
        if (vdn_variant_parse(v->valuestring, &s->variants[s->n_variants], e2, sizeof e2)) {
            vdn_fail(err, errlen, "%s: %s", where, e2);
            goto out;
        }
        for (int i = 0; i < s->n_variants; i++)
            if (!strcmp(s->variants[i].name, s->variants[s->n_variants].name)) {
                vdn_fail(err, errlen, "%s: '%s' listed twice", where, v->valuestring);
                goto out;
            }
        s->n_variants++;
    }
    int base_ok = 0;
    for (int i = 0; i < s->n_variants; i++)
        base_ok |= !strcmp(s->variants[i].name, s->baseline);
    if (!base_ok) {
        vdn_fail(err, errlen, "%s: field 'baseline': '%.60s' is not one of the variants", path,
                 s->baseline);
        goto out;
    }
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(root, "batches");
    if (bs && !cJSON_IsArray(bs)) {
        vdn_fail(err, errlen, "%s: field 'batches': expected an array of batch ids", path);
        goto out;
    }
    s->batches = vdn_xcalloc((size_t)cJSON_GetArraySize(bs) + 1, sizeof *s->batches);
    for (const cJSON *b = bs ? bs->child : NULL; b; b = b->next) {
        if (!cJSON_IsNumber(b) || b->valuedouble < 1 || b->valuedouble != floor(b->valuedouble) ||
            b->valuedouble > 9007199254740992.0) {
            vdn_fail(err, errlen, "%s: batches[%d]: expected a positive integer", path,
                     s->n_batches);
            goto out;
        }
        s->batches[s->n_batches++] = (uint64_t)b->valuedouble;
    }
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(root, "pairs");
    if (!cJSON_IsArray(ps)) {
        vdn_fail(err, errlen, "%s: field 'pairs': expected an array", path);
        goto out;
    }
    s->pairs = vdn_xcalloc((size_t)cJSON_GetArraySize(ps) + 1, sizeof *s->pairs);
    for (const cJSON *p = ps->child; p; p = p->next) {
        snprintf(where, sizeof where, "%s: pairs[%d]", path, s->n_pairs);
        if (!cJSON_IsObject(p)) {
            vdn_fail(err, errlen, "%s: expected an object", where);
            goto out;
        }
        vdn_sweep_pair *q = &s->pairs[s->n_pairs++];
        if (str_field(p, "prompt", 1, &q->prompt, where, err, errlen) ||
            str_field(p, "variant", 1, &q->variant, where, err, errlen) ||
            str_field(p, "video_key", 1, &q->video_key, where, err, errlen) ||
            str_field(p, "record_key", 1, &q->record_key, where, err, errlen) ||
            id_field(p, "batch_id", &q->batch_id, where, err, errlen) ||
            id_field(p, "job_id", &q->job_id, where, err, errlen))
            goto out;
        int known = 0;
        for (int i = 0; i < s->n_variants; i++)
            known |= !strcmp(s->variants[i].name, q->variant);
        if (!known) {
            vdn_fail(err, errlen, "%s: field 'variant': '%.60s' is not in 'variants'", where,
                     q->variant);
            goto out;
        }
        if (strstr(q->video_key, "..") || strstr(q->record_key, "..") || q->video_key[0] == '/' ||
            q->record_key[0] == '/') {
            vdn_fail(err, errlen, "%s: keys must be relative store keys without '..'", where);
            goto out;
        }
    }
    rc = 0;
out:
    cJSON_Delete(root);
    if (rc) vdn_sweep_free(s);
    return rc;
}

int vdn_sweep_load(const char *path, vdn_sweep *s, char *err, size_t errlen) {
    size_t len;
    memset(s, 0, sizeof *s);
    char *text = vdn_read_file(path, &len, err, errlen);
    if (!text) return -1;
    int rc = vdn_sweep_parse(text, len, path, s, err, errlen);
    free(text);
    return rc;
}

int vdn_sweep_save(const vdn_sweep *s, char *err, size_t errlen) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "version", 1);
    cJSON_AddStringToObject(o, "suite", s->suite);
    if (s->checkpoint) cJSON_AddStringToObject(o, "checkpoint", s->checkpoint);
    cJSON_AddStringToObject(o, "store", s->store);
    cJSON_AddStringToObject(o, "tag", s->tag);
    cJSON_AddStringToObject(o, "baseline", s->baseline);
    if (s->steps_override)
        cJSON_AddNumberToObject(o, "steps_override", s->steps_override);
    else
        cJSON_AddNullToObject(o, "steps_override");
    cJSON *v = cJSON_AddArrayToObject(o, "variants");
    for (int i = 0; i < s->n_variants; i++)
        cJSON_AddItemToArray(v, cJSON_CreateString(s->variants[i].name));
    cJSON *b = cJSON_AddArrayToObject(o, "batches");
    for (int i = 0; i < s->n_batches; i++)
        cJSON_AddItemToArray(b, cJSON_CreateNumber((double)s->batches[i]));
    cJSON *ps = cJSON_AddArrayToObject(o, "pairs");
    for (int i = 0; i < s->n_pairs; i++) {
        const vdn_sweep_pair *q = &s->pairs[i];
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "prompt", q->prompt);
        cJSON_AddStringToObject(p, "variant", q->variant);
        cJSON_AddStringToObject(p, "video_key", q->video_key);
        cJSON_AddStringToObject(p, "record_key", q->record_key);
        if (q->batch_id) cJSON_AddNumberToObject(p, "batch_id", (double)q->batch_id);
        if (q->job_id) cJSON_AddNumberToObject(p, "job_id", (double)q->job_id);
        cJSON_AddItemToArray(ps, p);
    }
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    int rc = vdn_write_file_atomic(s->path, text, strlen(text), err, errlen);
    free(text);
    return rc;
}
