/* libFuzzer target: the suite manifest parser must never crash or leak on any input. */
#include <stddef.h>
#include <stdint.h>

#include "suite.h"
#include "vdn_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vdn_suite s;
    char err[VDN_ERR_LEN];
    if (vdn_suite_parse((const char *)data, size, "fuzz.jsonl", &s, err, sizeof err) == 0)
        vdn_suite_free(&s);
    return 0;
}
