/* libFuzzer target for `vdn bench` option parsing: the input is split at NUL bytes into at most
 * 15 arguments. Parsing must never crash, and whatever it accepts must be in range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[16] = {"bench"};
    int argc = 1;
    for (size_t i = 0; i < size && argc < 16;) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    vdn_bench_opts o;
    int help = 0;
    if (vdn_bench_parse(argc, argv, &o, &help) == 0 &&
        (o.frames < 11 || o.frames > 1000 || o.text < 1 || o.audio < 0 || o.reps < 1 ||
         o.attn_reps < 1 || o.gh < 1 || o.gw < 1 || o.gh > 512 || o.gw > 512))
        abort(); /* accepted something out of range */
    free(buf);
    return 0;
}
