/* `vdnmini`: the engine's own subcommands (ckpt, render, bench) without the render system's
 * libraries, for the GPU device machine: ops/device/kernels.sh builds it to time whole renders
 * of an H3-shaped checkpoint on the CUDA backend (measured, not summed, seconds per NFE). */
#include <stdio.h>
#include <string.h>

#include "commands.h"

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "ckpt")) return vdn_cmd_ckpt(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "render")) return vdn_cmd_render(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "bench")) return vdn_cmd_bench(argc - 1, argv + 1);
    fprintf(stderr, "usage: vdnmini ckpt|render|bench ...\n");
    return 2;
}
