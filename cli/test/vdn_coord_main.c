/* The coordinator's commands in a binary of their own, so these tests run real processes
 * without linking the engine, kernels and eval the full `vdn` binary carries. Same code paths:
 * the functions below are exactly what ops/cli/vdn.c dispatches to. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"coordinator", vdn_cmd_coordinator},
                {"submit", vdn_cmd_submit},
                {"status", vdn_cmd_status},
                {"ls", vdn_cmd_ls},
                {"watch", vdn_cmd_watch},
                {"cancel", vdn_cmd_cancel},
                {"retry", vdn_cmd_retry},
                {"logs", vdn_cmd_logs},
                {"workers", vdn_cmd_workers},
                {"drain", vdn_cmd_drain},
                {"keygen", vdn_cmd_keygen}};
    if (argc >= 2)
        for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
            if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "usage: %s COMMAND ...\n", argv[0]);
    return 2;
}
