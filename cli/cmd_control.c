/* `vdn cancel`, `vdn retry`, `vdn drain`, `vdn keygen`. */
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "curve.h"
#include "vdn_util.h"

static int count_cmd(const char *cmd, int argc, char **argv,
                     int (*fn)(vdn_client *, const char *, int *, char *, size_t),
                     const char *verb) {
    cli_args a;
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: vdn %s bN|jN [--json] [--coordinator EP | --dir DIR]\n", cmd);
        return 0;
    }
    if (cli_parse(cmd, argc, argv, &a, NULL, NULL)) return VDN_EXIT_USAGE;
    char err[VDN_ERR_LEN], kind;
    uint64_t id;
    if (a.npos != 1) {
        fprintf(stderr, "usage: vdn %s bN|jN\n", cmd);
        return VDN_EXIT_USAGE;
    }
    if (vdn_parse_target(a.pos[0], &kind, &id, err, sizeof err)) {
        fprintf(stderr, "vdn %s: %s\n", cmd, err);
        return VDN_EXIT_USAGE;
    }
    vdn_client *c = cli_connect(cmd, &a);
    if (!c) return VDN_EXIT_UNREACHABLE;
    int n = 0, rc = VDN_EXIT_OK;
    if (fn(c, a.pos[0], &n, err, sizeof err))
        rc = cli_fail(cmd, c, err);
    else if (a.json)
        printf("{\"target\": \"%s\", \"%s\": %d}\n", a.pos[0], verb, n);
    else
        printf("%s %d job(s) of %s\n", verb, n, a.pos[0]);
    vdn_client_close(c);
    return rc;
}

int vdn_cmd_cancel(int argc, char **argv) {
    return count_cmd("cancel", argc, argv, vdn_client_cancel, "cancelled");
}

int vdn_cmd_retry(int argc, char **argv) {
    return count_cmd("retry", argc, argv, vdn_client_retry, "requeued");
}

static int drain_own(void *user, int argc, char **argv, int i) {
    (void)argc;
    if (strcmp(argv[i], "--undo")) return 0;
    *(int *)user = 1;
    return 1;
}

int vdn_cmd_drain(int argc, char **argv) {
    cli_args a;
    int undo = 0;
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: vdn drain WORKER [--undo] [--coordinator EP | --dir DIR]\n"
               "  the worker finishes its current job and takes no more; --undo takes it back\n");
        return 0;
    }
    if (cli_parse("drain", argc, argv, &a, drain_own, &undo)) return VDN_EXIT_USAGE;
    if (a.npos != 1) {
        fprintf(stderr, "usage: vdn drain WORKER [--undo]\n");
        return VDN_EXIT_USAGE;
    }
    vdn_client *c = cli_connect("drain", &a);
    if (!c) return VDN_EXIT_UNREACHABLE;
    char err[VDN_ERR_LEN];
    int rc = VDN_EXIT_OK;
    if (vdn_client_drain(c, a.pos[0], undo, err, sizeof err))
        rc = cli_fail("drain", c, err);
    else if (a.json)
        printf("{\"worker\": \"%s\", \"draining\": %s}\n", a.pos[0], undo ? "false" : "true");
    else
        printf(undo ? "worker %s back in service\n"
                    : "worker %s draining: it finishes its job and takes no more\n",
               a.pos[0]);
    vdn_client_close(c);
    return rc;
}

int vdn_cmd_keygen(int argc, char **argv) {
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: vdn keygen --out DIR/NAME\n"
                   "  writes DIR/NAME.key (CURVE secret key, mode 0600) and DIR/NAME.pub\n"
                   "  coordinator: NAME = coordinator in its --keys DIR; copy worker/client .pub\n"
                   "  files into DIR/authorized_workers/ or DIR/authorized_clients/\n");
            return 0;
        }
        if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else {
            fprintf(stderr, "vdn keygen: unknown argument %s (usage: vdn keygen --out DIR/NAME)\n",
                    argv[i]);
            return VDN_EXIT_USAGE;
        }
    }
    if (!out) {
        fprintf(stderr, "usage: vdn keygen --out DIR/NAME\n");
        return VDN_EXIT_USAGE;
    }
    char err[VDN_ERR_LEN], dir[4096];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        if (vdn_mkdir_p(dir, err, sizeof err)) {
            fprintf(stderr, "vdn keygen: %s\n", err);
            return VDN_EXIT_ERROR;
        }
    }
    if (vdn_curve_keygen(out, err, sizeof err)) {
        fprintf(stderr, "vdn keygen: %s\n", err);
        return VDN_EXIT_ERROR;
    }
    printf("wrote %s.key (secret, mode 0600) and %s.pub\n", out, out);
    return 0;
}
