/* `vdn bench decode` as a program of its own, for the device scripts (ops/device/vae.sh), which
 * build the op layer and vae/ with gcc/nvcc directly rather than the whole vdn CLI:
 *   bench_vae decode --vae DIR --audio-vae DIR ... (vae/bench_decode.c's options) */
#include "vae.h"

int main(int argc, char **argv) {
    return vdn_vae_bench(argc - 1, argv + 1);
}
