/* Integer arguments of the bench programs (bench_programs.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

int vdn_bench_int_arg(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s ? s : "", &end, 10);
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "%s: %s expects an integer in [%d, %d], got '%s'\n", cmd, opt, lo, hi,
                s ? s : "(missing)");
        return -1;
    }
    *out = (int)v;
    return 0;
}
