/* The `vdn store` command alone, so store tests do not depend on every other part's build:
 * `vdn_store_tool ARGS` behaves exactly like `vdn store ARGS`. */
#include "commands.h"

int main(int argc, char **argv) {
    argv[0] = "store";
    return vdn_cmd_store(argc, argv);
}
