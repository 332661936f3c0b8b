/* Standalone `vdn bench` for machines without the render system's libraries (the GPU device
 * machine): the same vdn_cmd_bench as `vdn bench`, built by ops/device/kernels.sh. */
#include "commands.h"

int main(int argc, char **argv) {
    return vdn_cmd_bench(argc, argv);
}
