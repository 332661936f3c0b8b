#include "scorer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "strbuf.h"
#include "vdn_util.h"

void vdn_scorers_free(vdn_scorer_set *s) {
    for (int i = 0; i < s->n; i++) {
        free(s->s[i].name);
        free(s->s[i].command);
    }
    free(s->s);
    memset(s, 0, sizeof *s);
}

static int name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 40) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-'))
            return 0;
    return 1;
}

int vdn_scorers_parse(const char *text, size_t len, const char *path, vdn_scorer_set *out,
                      char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root)
        return vdn_fail(
            err, errlen,
            "%s: not valid JSON; expected {\"scorers\": [{\"name\": ..., \"command\": ...}]}",
            path);
    int rc = -1;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "scorers");
    if (!cJSON_IsObject(root) || !cJSON_IsArray(arr)) {
        vdn_fail(err, errlen, "%s: expected an object with a \"scorers\" array", path);
        goto out;
    }
    for (const cJSON *k = root->child; k; k = k->next)
        if (!k->string || strcmp(k->string, "scorers")) {
            vdn_fail(err, errlen, "%s: unknown top-level field '%.60s' (expected only \"scorers\")",
                     path, k->string ? k->string : "");
            goto out;
        }
    int n = cJSON_GetArraySize(arr);
    if (n > 64) {
        vdn_fail(err, errlen, "%s: %d scorers, at most 64", path, n);
        goto out;
    }
    out->s = vdn_xcalloc((size_t)n + 1, sizeof *out->s);
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        if (!cJSON_IsObject(e)) {
            vdn_fail(err, errlen, "%s: scorers[%d]: expected an object", path, i);
            goto out;
        }
        for (const cJSON *k = e->child; k; k = k->next) {
            const char *f = k->string ? k->string : "";
            if (strcmp(f, "name") && strcmp(f, "command") && strcmp(f, "higher_is_better") &&
                strcmp(f, "timeout_s")) {
                vdn_fail(err, errlen,
                         "%s: scorers[%d]: unknown field '%.60s' (expected name, command, "
                         "higher_is_better, timeout_s)",
                         path, i, f);
                goto out;
            }
        }
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(e, "command");
        const cJSON *hb = cJSON_GetObjectItemCaseSensitive(e, "higher_is_better");
        const cJSON *to = cJSON_GetObjectItemCaseSensitive(e, "timeout_s");
        if (!cJSON_IsString(nm) || !name_ok(nm->valuestring)) {
            vdn_fail(err, errlen,
                     "%s: scorers[%d]: field 'name': expected 1..40 characters of [A-Za-z0-9_-]",
                     path, i);
            goto out;
        }
        for (int j = 0; j < out->n; j++)
            if (!strcmp(out->s[j].name, nm->valuestring)) {
                vdn_fail(err, errlen, "%s: scorers[%d]: name '%s' used twice", path, i,
                         nm->valuestring);
                goto out;
            }
        if (!cJSON_IsString(cmd) || !cmd->valuestring[0] || strlen(cmd->valuestring) > 8192) {
            vdn_fail(err, errlen,
                     "%s: scorers[%d] (%s): field 'command': expected a non-empty string (at most "
                     "8192 bytes)",
                     path, i, nm->valuestring);
            goto out;
        }
        if (hb && !cJSON_IsBool(hb)) {
            vdn_fail(err, errlen,
                     "%s: scorers[%d] (%s): field 'higher_is_better': expected true or false", path,
                     i, nm->valuestring);
            goto out;
        }
        if (to && (!cJSON_IsNumber(to) || to->valuedouble != floor(to->valuedouble) ||
                   to->valuedouble < 1 || to->valuedouble > 86400)) {
            vdn_fail(err, errlen,
                     "%s: scorers[%d] (%s): field 'timeout_s': expected an integer in [1, 86400]",
                     path, i, nm->valuestring);
            goto out;
        }
        vdn_scorer *s = &out->s[out->n++];
        s->name = vdn_xstrdup(nm->valuestring);
        s->command = vdn_xstrdup(cmd->valuestring);
        s->higher_is_better = hb ? cJSON_IsTrue(hb) : 1;
        s->timeout_s = to ? (int)to->valuedouble : 600;
    }
    rc = 0;
out:
    cJSON_Delete(root);
    if (rc) vdn_scorers_free(out);
    return rc;
}

int vdn_scorers_load(const char *path, vdn_scorer_set *out, char *err, size_t errlen) {
    size_t len;
    memset(out, 0, sizeof *out);
    char *text = vdn_read_file(path, &len, err, errlen);
    if (!text) return -1;
    int rc = vdn_scorers_parse(text, len, path, out, err, errlen);
    free(text);
    return rc;
}

void vdn_scores_free(char **keys, double *values, int n) {
    for (int i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
    free(values);
}

int vdn_scores_parse(const char *text, size_t len, const char *label, char ***keys, double **values,
                     int *n, char *err, size_t errlen) {
    *keys = NULL;
    *values = NULL;
    *n = 0;
    cJSON *o = cJSON_ParseWithLength(text, len);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        int show = len < 80 ? (int)len : 80; /* text is not NUL-terminated */
        return vdn_fail(err, errlen, "%s: stdout is not one JSON object of numbers (got \"%.*s\")",
                        label, show, text);
    }
    int cnt = cJSON_GetArraySize(o);
    if (cnt < 1 || cnt > 256) {
        cJSON_Delete(o);
        return vdn_fail(err, errlen, "%s: expected 1..256 scores, got %d", label, cnt);
    }
    *keys = vdn_xcalloc((size_t)cnt, sizeof **keys);
    *values = vdn_xcalloc((size_t)cnt, sizeof **values);
    for (const cJSON *k = o->child; k; k = k->next) {
        if (!cJSON_IsNumber(k) || !isfinite(k->valuedouble) || !k->string || !name_ok(k->string)) {
            vdn_fail(err, errlen,
                     "%s: score '%.60s': expected a finite number under a key of [A-Za-z0-9_-]",
                     label, k->string ? k->string : "");
            vdn_scores_free(*keys, *values, *n);
            *keys = NULL;
            *values = NULL;
            *n = 0;
            cJSON_Delete(o);
            return -1;
        }
        (*keys)[*n] = vdn_xstrdup(k->string);
        (*values)[*n] = k->valuedouble;
        (*n)++;
    }
    cJSON_Delete(o);
    return 0;
}

/* 'text' with every ' written as '\'' : safe inside sh -c whatever the text holds. */
static void shell_quote(vdn_sb *b, const char *s) {
    vdn_sb_append(b, "'", 1);
    for (; s && *s; s++) {
        if (*s == '\'')
            vdn_sb_append(b, "'\\''", 4);
        else
            vdn_sb_append(b, s, 1);
    }
    vdn_sb_append(b, "'", 1);
}

int vdn_scorer_run(const vdn_scorer *sc, const vdn_scorer_args *a, char ***keys, double **values,
                   int *n, char *err, size_t errlen) {
    vdn_sb cmd = {0};
    vdn_sb_printf(&cmd, "timeout %d sh -c ", sc->timeout_s);
    vdn_sb inner = {0};
    const char *names[] = {"{video}", "{latents}", "{record}", "{prompt}", "{id}", "{variant}"};
    const char *vals[] = {a->video, a->latents, a->record, a->prompt, a->id, a->variant};
    for (const char *p = sc->command; *p;) {
        int hit = -1;
        for (int i = 0; i < 6; i++)
            if (!strncmp(p, names[i], strlen(names[i]))) hit = i;
        if (hit >= 0) {
            shell_quote(&inner, vals[hit] ? vals[hit] : "");
            p += strlen(names[hit]);
        } else {
            vdn_sb_append(&inner, p, 1);
            p++;
        }
    }
    shell_quote(&cmd, inner.s);
    vdn_sb_free(&inner);
    fflush(NULL);
    FILE *f = popen(cmd.s, "r");
    vdn_sb_free(&cmd);
    if (!f) return vdn_fail(err, errlen, "scorer %s: could not start the command", sc->name);
    vdn_sb out = {0};
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        if (out.len < (1u << 20)) vdn_sb_append(&out, buf, got);
    int st = pclose(f);
    int rc;
    char label[200];
    snprintf(label, sizeof label, "scorer %s", sc->name);
    if (st == -1 || !WIFEXITED(st))
        rc = vdn_fail(err, errlen, "scorer %s: the command did not exit normally", sc->name);
    else if (WEXITSTATUS(st) == 124)
        rc = vdn_fail(err, errlen, "scorer %s: timed out after %d s", sc->name, sc->timeout_s);
    else if (WEXITSTATUS(st) != 0)
        rc = vdn_fail(err, errlen, "scorer %s: exit status %d", sc->name, WEXITSTATUS(st));
    else
        rc = vdn_scores_parse(out.s ? out.s : "", out.len, label, keys, values, n, err, errlen);
    vdn_sb_free(&out);
    return rc;
}
