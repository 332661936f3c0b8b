/* Placeholder until the owning capability lands. */
#include <stdio.h>
#include "commands.h"
int vdn_cmd_ckpt(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn ckpt: not built yet\n");
    return 2;
}
int vdn_cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn inspect: not built yet\n");
    return 2;
}
