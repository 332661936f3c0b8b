#include "variants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precision.h"
#include "vdn_util.h"

static const char *engine_variants[] = {"dense",       "vdn",          "vdn-no-anchors",
                                        "window-only", "vdn-additive", NULL};

/* ":PRECISION" at the end of a variant (colon: NULL = none): bf16 when absent */
static int parse_precision(const char *s, const char *colon, vdn_variant *out, char *err,
                           size_t errlen) {
    vdn_precision p = VDN_PRECISION_BF16;
    if (colon && vdn_precision_parse(colon + 1, &p))
        return vdn_fail(err, errlen,
                        "variant '%.60s': expected :PRECISION to be bf16 or fp8 (e.g. vdn@8:fp8), "
                        "got ':%.20s'",
                        s, colon + 1);
    snprintf(out->precision, sizeof out->precision, "%s", vdn_precision_name(p));
    return 0;
}

int vdn_variant_parse(const char *s, vdn_variant *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const char *colon = strchr(s, ':');
    if (parse_precision(s, colon, out, err, errlen)) return -1;
    const size_t len = colon ? (size_t)(colon - s) : strlen(s);
    const char *at = memchr(s, '@', len);
    size_t blen = at ? (size_t)(at - s) : len;
    int found = 0;
    for (int i = 0; engine_variants[i]; i++)
        if (strlen(engine_variants[i]) == blen && !strncmp(s, engine_variants[i], blen)) {
            snprintf(out->engine, sizeof out->engine, "%s", engine_variants[i]);
            found = 1;
        }
    if (!found)
        return vdn_fail(err, errlen,
                        "variant '%.60s': expected dense, vdn, vdn-no-anchors, window-only or "
                        "vdn-additive, optionally followed by @STEPS and :PRECISION (e.g. vdn@8, "
                        "vdn@8:fp8)",
                        s);
    out->steps = 50;
    if (at) {
        char *end;
        long k = strtol(at + 1, &end, 10);
        if (at[1] < '0' || at[1] > '9' || end != s + len || k < 1 || k > 1000)
            return vdn_fail(err, errlen, "variant '%.60s': expected @STEPS with STEPS in 1..1000",
                            s);
        out->steps = (int)k;
    }
    /* bf16 keeps the names and keys it had before precisions existed */
    const int fp8 = strcmp(out->precision, "bf16") != 0;
    snprintf(out->name, sizeof out->name, "%s@%d%s%s", out->engine, out->steps, fp8 ? ":" : "",
             fp8 ? out->precision : "");
    snprintf(out->key, sizeof out->key, "%s_%d%s%s", out->engine, out->steps, fp8 ? "_" : "",
             fp8 ? out->precision : "");
    return 0;
}

int vdn_variant_list_parse(const char *s, vdn_variant **out, int *n, char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    char *copy = vdn_xstrdup(s), *save = NULL;
    int cap = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            vdn_variant *g = vdn_xmalloc((size_t)cap * sizeof *g);
            if (*n) memcpy(g, *out, (size_t)*n * sizeof *g);
            free(*out);
            *out = g;
        }
        if (vdn_variant_parse(tok, &(*out)[*n], err, errlen)) goto fail;
        for (int i = 0; i < *n; i++)
            if (!strcmp((*out)[i].name, (*out)[*n].name)) {
                vdn_fail(err, errlen, "variant '%s' listed twice", (*out)[*n].name);
                goto fail;
            }
        (*n)++;
    }
    free(copy);
    if (*n == 0) {
        free(*out);
        *out = NULL;
        return vdn_fail(err, errlen,
                        "--variants: expected a comma-separated list, e.g. dense@50,vdn@8");
    }
    return 0;
fail:
    free(copy);
    free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}
