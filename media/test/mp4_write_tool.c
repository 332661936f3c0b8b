/* Test driver: IN.safetensors (frames F32 (3, T, H, W) in [0, 1], optional audio F32 (2, n))
 * -> OUT.mp4 through vdn_mp4_write. Options: --crf N, --rate HZ (default 32000), --fps N.
 * Exit 1 with the writer's message on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp4.h"
#include "safetensors.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s IN.safetensors OUT.mp4 [--crf N] [--rate HZ] [--fps N]\n",
                argv[0]);
        return 2;
    }
    vdn_mp4_opts o = {.crf = -1, .sample_rate = 32000};
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--crf"))
            o.crf = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rate"))
            o.sample_rate = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--fps"))
            o.fps = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    char err[1024];
    vdn_st_file *f = vdn_st_open(argv[1], err, sizeof err);
    if (!f) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const vdn_st_entry *fe = vdn_st_find(f, "frames"), *ae = vdn_st_find(f, "audio");
    if (!fe || fe->ndim != 4 || fe->shape[0] != 3 || fe->dtype != VDN_DT_F32) {
        fprintf(stderr, "%s: expected frames F32 (3, T, H, W)\n", argv[1]);
        return 1;
    }
    o.height = (int)fe->shape[2];
    o.width = (int)fe->shape[3];
    float *audio = NULL;
    if (ae) {
        if (ae->ndim != 2 || ae->shape[0] != 2 || ae->dtype != VDN_DT_F32) {
            fprintf(stderr, "%s: expected audio F32 (2, n)\n", argv[1]);
            return 1;
        }
        audio = malloc(ae->nbytes);
        memcpy(audio, ae->data, ae->nbytes);
        o.left = audio;
        o.right = audio + ae->shape[1];
        o.n_samples = ae->shape[1];
    }
    int rc = vdn_mp4_write(argv[2], fe->data, (int)fe->shape[1], &o, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    free(audio);
    vdn_st_close(f);
    return rc ? 1 : 0;
}
