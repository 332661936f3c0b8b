/* libFuzzer target for eval's other parsers of outside data. The first byte picks the parser:
 * 0 scorer config, 1 scorer stdout, 2 sweep manifest, 3 variant list, 4 run-record timing.
 * Never crash, never leak. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "record_timing.h"
#include "scorer.h"
#include "sweep.h"
#include "variants.h"
#include "vdn_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char err[VDN_ERR_LEN];
    switch (data[0] % 5) {
    case 0: {
        vdn_scorer_set s;
        if (vdn_scorers_parse(text, len, "fuzz.json", &s, err, sizeof err) == 0)
            vdn_scorers_free(&s);
        break;
    }
    case 1: {
        char **k;
        double *v;
        int n;
        if (vdn_scores_parse(text, len, "fuzz", &k, &v, &n, err, sizeof err) == 0)
            vdn_scores_free(k, v, n);
        break;
    }
    case 2: {
        vdn_sweep s;
        if (vdn_sweep_parse(text, len, "fuzz.json", &s, err, sizeof err) == 0) vdn_sweep_free(&s);
        break;
    }
    case 4: {
        double a, b;
        vdn_record_timing_parse(text, len, "fuzz.json", &a, &b, err, sizeof err);
        break;
    }
    default: {
        char *z = vdn_xmalloc(len + 1);
        memcpy(z, text, len);
        z[len] = 0;
        vdn_variant *v;
        int n;
        if (vdn_variant_list_parse(z, &v, &n, err, sizeof err) == 0) free(v);
        free(z);
    }
    }
    return 0;
}
