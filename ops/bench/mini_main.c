/* `vdnmini`: the engine's own subcommands (ckpt, render, bench) without the render system's
 * libraries, for the GPU device machine: ops/device/kernels.sh builds it to time whole renders
 * of an H3-shaped checkpoint on the CUDA backend (measured, not summed, seconds per NFE). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "decode.h"

/* vdnmini is built without FFmpeg (the device machine has no libav): the mp4 writer behind
 * vdn_decode_file is not linked. A render of a checkpoint with VAEs then keeps its latents. */
int vdn_decode_file(const vdn_decode_opts *o, char *err, size_t errlen) {
    (void)o;
    snprintf(err, errlen, "vdnmini: built without the video decoder (no FFmpeg libraries); "
                          "decode the latents with vdn decode");
    return -1;
}

/* Host memory at exit (Linux): peak resident set, and the anonymous (heap) and file-backed
 * (mapped checkpoint) parts now, so a render shows what the weight upload left on the host. */
static void report_memory(const char *cmd) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long hwm = -1, anon = -1, file = -1;
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "VmHWM: %lld kB", &hwm);
        sscanf(line, "RssAnon: %lld kB", &anon);
        sscanf(line, "RssFile: %lld kB", &file);
    }
    if (f) fclose(f);
    fprintf(stderr,
            "vdnmini %s: host memory peak %.2f GB, at exit anonymous %.2f GB, file %.2f GB\n", cmd,
            hwm / 1048576.0, anon / 1048576.0, file / 1048576.0);
}

int main(int argc, char **argv) {
    int rc = 2;
    if (argc >= 2 && !strcmp(argv[1], "ckpt"))
        rc = vdn_cmd_ckpt(argc - 1, argv + 1);
    else if (argc >= 2 && !strcmp(argv[1], "render"))
        rc = vdn_cmd_render(argc - 1, argv + 1);
    else if (argc >= 2 && !strcmp(argv[1], "bench"))
        rc = vdn_cmd_bench(argc - 1, argv + 1);
    else {
        fprintf(stderr, "usage: vdnmini ckpt|render|bench ...\n");
        return 2;
    }
    report_memory(argv[1]);
    return rc;
}
