/* libFuzzer target for the worker's outside-data parsers: the cluster config file, nvidia-smi
 * output and --gpus specs. Each must return an error, never crash, on any bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "gpus.h"
#include "vdn_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char err[VDN_ERR_LEN];
    vdn_conf c;
    if (vdn_conf_parse(&c, "fuzz.conf", text, err, sizeof err) == 0) vdn_conf_free(&c);
    vdn_gpu_list l;
    vdn_parse_nvidia_smi(text, &l, err, sizeof err);
    int sel[64];
    if (size < 256) vdn_parse_gpu_spec(text, sel, 64, err, sizeof err);
    free(text);
    return 0;
}
