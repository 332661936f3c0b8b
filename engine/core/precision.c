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
