/* `vdn cancel`, `vdn retry`, `vdn drain`, `vdn keygen`. */
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "curve.h"
#include "keys.h"
#include "vdn_util.h"

/* `vdn retry --force`: quarantined jobs too */
static int force_own(void *user, int argc, char **argv, int i) {
    (void)argc;
    if (strcmp(argv[i], "--force")) return 0;
    *(int *)user = 1;
    return 1;
}

/* cancel and retry: a batch or a job, and how many jobs it changed. */
static int count_cmd(const char *cmd, int argc, char **argv, int retry, const char *verb) {
    cli_args a;
    int force = 0;
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: vdn %s bN|jN%s [--json] [--coordinator EP | --dir DIR]\n", cmd,
               retry ? " [--force]" : "");
        if (retry)
            printf("  failed and cancelled jobs back to the queue with fresh budgets; quarantined\n"
                   "  jobs (they crashed the renderer on two workers) only with --force, which\n"
                   "  also clears their crash records; exit status 1 when it left any alone\n");
        return 0;
    }
    if (cli_parse(cmd, argc, argv, &a, retry ? force_own : NULL, &force)) return VDN_EXIT_USAGE;
    char err[VDN_ERR_LEN], kind;
    uint64_t id;
    if (a.npos != 1) {
        fprintf(stderr, "usage: vdn %s bN|jN%s\n", cmd, retry ? " [--force]" : "");
        return VDN_EXIT_USAGE;
    }
    if (vdn_parse_target(a.pos[0], &kind, &id, err, sizeof err)) {
        fprintf(stderr, "vdn %s: %s\n", cmd, err);
        return VDN_EXIT_USAGE;
    }
    vdn_client *c = cli_connect(cmd, &a);
    if (!c) return VDN_EXIT_UNREACHABLE;
    int n = 0, q = 0, rc = VDN_EXIT_OK;
    int bad = retry ? vdn_client_retry_force(c, a.pos[0], force, &n, &q, err, sizeof err)
                    : vdn_client_cancel(c, a.pos[0], &n, err, sizeof err);
    if (bad)
        rc = cli_fail(cmd, c, err);
    else if (a.json && retry)
        printf("{\"target\": \"%s\", \"%s\": %d, \"quarantined_left\": %d}\n", a.pos[0], verb, n,
               q);
    else if (a.json)
        printf("{\"target\": \"%s\", \"%s\": %d}\n", a.pos[0], verb, n);
    else {
        printf("%s %d job(s) of %s\n", verb, n, a.pos[0]);
        if (q)
            printf("left %d quarantined job(s) of %s alone: they crashed the renderer (on two "
                   "workers, or --max-crashes times; vdn logs says where); vdn retry --force %s "
                   "runs them again\n",
                   q, a.pos[0], a.pos[0]);
    }
    /* jobs asked for are still failed: scripts see it as with vdn watch */
    if (!bad && q) rc = VDN_EXIT_JOBS_FAILED;
    vdn_client_close(c);
    return rc;
}

int vdn_cmd_cancel(int argc, char **argv) {
    return count_cmd("cancel", argc, argv, 0, "cancelled");
}

int vdn_cmd_retry(int argc, char **argv) {
    return count_cmd("retry", argc, argv, 1, "requeued");
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

static const char keygen_usage[] =
    "usage: vdn keygen --out DIR/NAME [--keys-file FILE --role worker|read|submit|admin\n"
    "                  [--name NAME]]\n"
    "  writes DIR/NAME.key (CURVE secret key, mode 0600) and DIR/NAME.pub; with --keys-file\n"
    "  also appends 'PUBLIC_KEY NAME ROLE' to that keys file (the coordinator's\n"
    "  --keys DIR/authorized_keys; created if missing; NAME defaults to the file's name).\n"
    "  A worker key pins its worker id to NAME; client roles: read (look), submit (also\n"
    "  submit, and cancel/retry its own batches), admin (anyone's batches, drain).\n"
    "  The coordinator's own pair: vdn keygen --out KEYS/coordinator\n";

int vdn_cmd_keygen(int argc, char **argv) {
    const char *out = NULL, *keys_file = NULL, *role_s = NULL, *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(keygen_usage, stdout);
            return 0;
        }
        const char **dst = !strcmp(a, "--out")         ? &out
                           : !strcmp(a, "--keys-file") ? &keys_file
                           : !strcmp(a, "--role")      ? &role_s
                           : !strcmp(a, "--name")      ? &name
                                                       : NULL;
        if (!dst || i + 1 >= argc) {
            fprintf(stderr, "vdn keygen: %s %s\n%s",
                    dst ? "missing value after" : "unknown argument", a, keygen_usage);
            return VDN_EXIT_USAGE;
        }
        *dst = argv[++i];
    }
    vdn_role role = VDN_ROLE_SUBMIT;
    if (!out || (keys_file && !role_s) || ((role_s || name) && !keys_file)) {
        fprintf(stderr, "vdn keygen: %s\n%s",
                !out ? "--out is required"
                     : "--keys-file and --role go together (--name with them)",
                keygen_usage);
        return VDN_EXIT_USAGE;
    }
    if (role_s && vdn_role_parse(role_s, &role)) {
        fprintf(stderr, "vdn keygen: --role '%s': expected worker, read, submit or admin\n",
                role_s);
        return VDN_EXIT_USAGE;
    }
    const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
    if (!name) name = base;
    if (keys_file && !vdn_key_name_ok(name)) {
        fprintf(
            stderr,
            "vdn keygen: name '%s': expected 1..%d of A-Z a-z 0-9 . _ - , starting with a letter "
            "or digit (--name NAME, or the last part of --out)\n",
            name, VDN_KEY_NAME_MAX);
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
    if (!keys_file) return 0;
    char pub_path[4200], pub[VDN_Z85_KEY_LEN + 1];
    snprintf(pub_path, sizeof pub_path, "%s.pub", out);
    if (vdn_curve_read_key(pub_path, pub, err, sizeof err) ||
        vdn_keys_append(keys_file, pub, name, role, err, sizeof err)) {
        fprintf(stderr, "vdn keygen: %s (the key pair is written; add the line by hand)\n", err);
        return VDN_EXIT_ERROR;
    }
    printf("added %s %s to %s\n", name, vdn_role_name(role), keys_file);
    return 0;
}
