/* Shared option parsing and output helpers of the client commands. */
#include "cli_common.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pbjson.h"
#include "vdn_util.h"

int cli_parse(const char *cmd, int argc, char **argv, cli_args *a,
              int (*own)(void *user, int argc, char **argv, int i), void *user) {
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char **slot = !strcmp(s, "--coordinator")       ? &a->coordinator
                            : !strcmp(s, "--dir")             ? &a->dir
                            : !strcmp(s, "--key")             ? &a->key
                            : !strcmp(s, "--coordinator-key") ? &a->coordinator_key
                                                              : NULL;
        if (slot) {
            if (i + 1 >= argc) {
                fprintf(stderr, "vdn %s: %s needs a value\n", cmd, s);
                return -1;
            }
            *slot = argv[++i];
            continue;
        }
        if (!strcmp(s, "--json")) {
            a->json = 1;
            continue;
        }
        if (!strcmp(s, "--timeout")) {
            char *end;
            if (i + 1 >= argc || (a->timeout = strtod(argv[i + 1], &end)) <= 0 || *end) {
                fprintf(stderr, "vdn %s: --timeout needs a positive number of seconds\n", cmd);
                return -1;
            }
            i++;
            continue;
        }
        if (own) {
            int used = own(user, argc, argv, i);
            if (used < 0) return -1;
            if (used > 0) {
                i += used - 1;
                continue;
            }
        }
        if (s[0] == '-' && s[1]) {
            fprintf(stderr, "vdn %s: unknown option %s\n", cmd, s);
            return -1;
        }
        if (a->npos == (int)(sizeof a->pos / sizeof *a->pos)) {
            fprintf(stderr, "vdn %s: too many arguments\n", cmd);
            return -1;
        }
        a->pos[a->npos++] = argv[i];
    }
    return 0;
}

vdn_client_env cli_env_client(void) {
    return (vdn_client_env){.coordinator = getenv("VDN_COORDINATOR"),
                            .dir = getenv("VDN_DIR"),
                            .key = getenv("VDN_KEY"),
                            .coordinator_key = getenv("VDN_COORDINATOR_KEY")};
}

vdn_client *cli_connect(const char *cmd, const cli_args *a) {
    char err[VDN_ERR_LEN];
    static vdn_client_conf conf; /* opts point into it for the life of the command */
    vdn_client_opts o;
    const vdn_client_env env = cli_env_client();
    if (vdn_client_resolve(a->coordinator, a->dir, a->key, a->coordinator_key, &env, &conf, &o, err,
                           sizeof err)) {
        fprintf(stderr, "vdn %s: %s\n", cmd, err);
        return NULL;
    }
    o.timeout_ms = a->timeout > 0 ? (int)(a->timeout * 1000) : 0;
    vdn_client *c = vdn_client_open(&o, err, sizeof err);
    if (!c) fprintf(stderr, "vdn %s: %s\n", cmd, err);
    return c;
}

int cli_fail(const char *cmd, vdn_client *c, const char *err) {
    fprintf(stderr, "vdn %s: %s\n", cmd, err);
    switch (c ? vdn_client_error_code(c) : VDN_CLIENT_E_LOCAL) {
    case VDN_CLIENT_E_UNREACHABLE:
        return VDN_EXIT_UNREACHABLE;
    case VDN__ERROR__CODE__NOT_FOUND:
        return VDN_EXIT_NOT_FOUND;
    case VDN__ERROR__CODE__INVALID:
    case VDN__ERROR__CODE__FORBIDDEN: /* refused for this key's name or role */
        return VDN_EXIT_INVALID;
    default:
        return VDN_EXIT_ERROR;
    }
}

void cli_print_json(const void *msg) {
    cJSON *j = vdn_pb_to_json(msg);
    char *s = cJSON_Print(j);
    puts(s);
    free(s);
    cJSON_Delete(j);
}

const char *cli_time(double wall, char *buf, size_t n) {
    if (wall <= 0) {
        snprintf(buf, n, "-");
        return buf;
    }
    time_t t = (time_t)wall;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M:%SZ", &tm);
    return buf;
}
