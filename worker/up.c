/* Placeholder until the owning capability lands. */
#include <stdio.h>
#include "commands.h"
int vdn_cmd_up(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "vdn up: not built yet\n");
    return 2;
}
