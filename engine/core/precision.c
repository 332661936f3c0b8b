/* Precision names (precision.h). */
#include "precision.h"

#include <string.h>

const char *vdn_precision_name(vdn_precision p) {
    return p == VDN_PRECISION_FP8 ? "fp8" : "bf16";
}

int vdn_precision_parse(const char *s, vdn_precision *out) {
    if (s && !strcmp(s, "bf16")) return *out = VDN_PRECISION_BF16, 0;
    if (s && !strcmp(s, "fp8")) return *out = VDN_PRECISION_FP8, 0;
    return -1;
}

int vdn_precision_parse_list(const char *s, unsigned *mask) {
    if (!s || !*s) return -1;
    unsigned m = 0;
    for (const char *p = s;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char name[8];
        vdn_precision v;
        if (n == 0 || n >= sizeof name) return -1;
        memcpy(name, p, n);
        name[n] = 0;
        if (vdn_precision_parse(name, &v) || (m >> v & 1u)) return -1;
        m |= 1u << v;
        if (!comma) break;
        p = comma + 1;
    }
    *mask = m;
    return 0;
}
