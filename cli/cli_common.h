/* Options every client command shares (--coordinator, --dir, --key, --coordinator-key, --json,
 * --timeout) and the exit codes they return. */
#ifndef VDN_COORD_CLI_COMMON_H
#define VDN_COORD_CLI_COMMON_H

#include <stdio.h>

#include "client.h"

/* Exit codes of the client commands (docs/protocol.md). */
enum {
    VDN_EXIT_OK = 0,
    VDN_EXIT_JOBS_FAILED = 1, /* watch: the batch ended with failed or cancelled jobs */
    VDN_EXIT_USAGE = 2,
    VDN_EXIT_UNREACHABLE = 3, /* no reply from the coordinator */
    VDN_EXIT_NOT_FOUND = 4,
    VDN_EXIT_INVALID = 5, /* the request was refused (bad JSONL, bad field) */
    VDN_EXIT_ERROR = 6,   /* anything else (I/O, database) */
};

typedef struct {
    const char *coordinator, *dir, *key, *coordinator_key;
    int json;
    double timeout;
    /* what is left after the common options, in order */
    char *pos[16];
    int npos;
} cli_args;

/* Common options are removed; the command's own flags are handed to `own`, which returns how
 * many argv entries it consumed (0 = not its flag, -1 = bad value). Unknown -x is an error. */
int cli_parse(const char *cmd, int argc, char **argv, cli_args *a,
              int (*own)(void *user, int argc, char **argv, int i), void *user);
/* Opens the client from the parsed options; prints the error and returns NULL on failure. */
vdn_client *cli_connect(const char *cmd, const cli_args *a);
/* $VDN_COORDINATOR, $VDN_DIR, $VDN_KEY, $VDN_COORDINATOR_KEY (client.h vdn_client_resolve). */
vdn_client_env cli_env_client(void);
/* Maps the client's last error to an exit code and prints the message. */
int cli_fail(const char *cmd, vdn_client *c, const char *err);
void cli_print_json(const void *msg);                   /* protobuf-c message */
const char *cli_time(double wall, char *buf, size_t n); /* "2026-11-20 22:05:37" */

#endif
