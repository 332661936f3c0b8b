/* `vdn bench` rejects malformed options with exit status 2 and a message naming the option and
 * what it expects, before touching any GPU (so this runs everywhere). */
#include <stdio.h>
#include <string.h>

#include <stdint.h>
#include <stdlib.h>

#include "commands.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int failures;

static void expect(int want, int argc, const char *a1, const char *a2) {
    char *argv[4] = {"bench", (char *)a1, (char *)a2, NULL};
    int rc = vdn_cmd_bench(argc, argv);
    int ok = rc == want;
    printf("vdn bench %s %s -> %d (want %d) %s\n", a1 ? a1 : "", a2 ? a2 : "", rc, want,
           ok ? "ok" : "FAIL");
    failures += !ok;
}

int main(void) {
    expect(2, 3, "--frames", "2");      /* below the 11 frames the window needs */
    expect(2, 3, "--frames", "12x");    /* trailing garbage */
    expect(2, 3, "--frames", "");       /* empty */
    expect(2, 2, "--frames", NULL);     /* missing value */
    expect(2, 3, "--text", "-5");       /* negative */
    expect(2, 3, "--reps", "0");        /* zero repeats */
    expect(2, 3, "--attn-reps", "1e3"); /* not an integer */
    expect(2, 3, "--grid", "24");       /* needs HxW */
    expect(2, 3, "--grid", "24x42x1");  /* too many fields */
    expect(2, 3, "--grid", "0x42");     /* empty grid */
    expect(2, 2, "--json", NULL);       /* missing file name */
    expect(2, 2, "--bogus", NULL);      /* unknown option */
    expect(0, 2, "--help", NULL);
    /* replay: deterministic byte mutations of valid and invalid command lines through the fuzz
     * target (which aborts if anything out of range is accepted) */
    static const char seeds[][40] = {"--frames\0"
                                     "102\0--grid\0"
                                     "24x42",
                                     "--text\0"
                                     "512\0--reps\0"
                                     "3",
                                     "--grid\0"
                                     "7x9\0--audio\0"
                                     "0",
                                     "--json\0"
                                     "x.json\0--attn-reps\0"
                                     "2"};
    uint64_t r = 0x9E3779B97F4A7C15ull;
    int replays = 0;
    for (int s = 0; s < 4; s++)
        for (int k = 0; k < 500; k++) {
            uint8_t buf[40];
            memcpy(buf, seeds[s], sizeof buf);
            for (int m = 0; m < 1 + k % 4; m++) {
                r ^= r << 13, r ^= r >> 7, r ^= r << 17;
                buf[r % 39] = (uint8_t)(r >> 32);
            }
            LLVMFuzzerTestOneInput(buf, 39);
            replays++;
        }
    printf("replayed %d mutated command lines\n", replays);
    if (failures) {
        printf("%d check(s) FAILED\n", failures);
        return 1;
    }
    printf("all bench option checks passed\n");
    return 0;
}
