#include "record_timing.h"

#include <cjson/cJSON.h>
#include <math.h>

#include "vdn_util.h"

int vdn_record_timing_parse(const char *text, size_t len, const char *label, double *s_per_nfe,
                            double *total, char *err, size_t errlen) {
    *s_per_nfe = *total = NAN;
    cJSON *o = cJSON_ParseWithLength(text, len);
    int rc = -1;
    if (!o || !cJSON_IsObject(o)) {
        vdn_fail(err, errlen, "%s: run record is not a JSON object", label);
        goto out;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "timing");
    if (!cJSON_IsObject(t)) {
        vdn_fail(err, errlen, "%s: run record: field 'timing': expected an object", label);
        goto out;
    }
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(t, "nfe_seconds");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(t, "total_seconds");
    if (!cJSON_IsArray(ns) || cJSON_GetArraySize(ns) < 1) {
        vdn_fail(
            err, errlen,
            "%s: run record: field 'timing.nfe_seconds': expected a non-empty array of seconds",
            label);
        goto out;
    }
    if (!cJSON_IsNumber(ts) || !isfinite(ts->valuedouble) || ts->valuedouble < 0) {
        vdn_fail(err, errlen,
                 "%s: run record: field 'timing.total_seconds': expected a number >= 0", label);
        goto out;
    }
    double s = 0;
    int n = 0;
    for (const cJSON *x = ns->child; x; x = x->next, n++) {
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 0) {
            vdn_fail(err, errlen,
                     "%s: run record: field 'timing.nfe_seconds[%d]': expected a number >= 0",
                     label, n);
            goto out;
        }
        s += x->valuedouble;
    }
    *s_per_nfe = s / n;
    *total = ts->valuedouble;
    rc = 0;
out:
    cJSON_Delete(o);
    return rc;
}
