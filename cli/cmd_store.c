/* `vdn store`: move objects in and out of a file:// or s3:// store by hand, with the same code
 * the workers and eval use. */
#include "commands.h"
#include "store.h"
#include "vdn_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: vdn store [OPTIONS] COMMAND URI ...\n"
               "  put URI KEY FILE     upload FILE ('-' = stdin) as KEY (atomic)\n"
               "  get URI KEY FILE     download KEY into FILE ('-' = stdout; atomic rename)\n"
               "  cat URI KEY          print KEY to stdout\n"
               "  ls URI [PREFIX]      list keys (sorted) with their sizes in bytes\n"
               "  stat URI KEY         print the size of KEY; exit 1 if it does not exist\n"
               "  rm URI KEY           delete KEY (absent keys are not an error)\n"
               "URI: file:///dir, a plain directory, or s3://bucket/prefix\n"
               "options (S3):\n"
               "  --endpoint URL       e.g. http://127.0.0.1:4568 (default $VDN_S3_ENDPOINT, AWS)\n"
               "  --region NAME        default $AWS_REGION or us-east-1\n"
               "  --max-retries N      retries per request on 5xx/429/connection errors (8)\n"
               "  --retry-max-seconds S  cap on total backoff per request (120)\n"
               "  --part-size BYTES    multipart threshold and part size, >= 5 MiB (64 MiB)\n"
               "  --max-body-bytes N   largest response held in memory (listings, cat) (64 MiB)\n"
               "credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.\n");
}

static int print_entry(void *user, const char *key, uint64_t size) {
    (void)user;
    printf("%12llu  %s\n", (unsigned long long)size, key);
    return ferror(stdout) != 0;
}

static int parse_number(const char *flag, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < 0) {
        fprintf(stderr, "vdn store: %s expects a non-negative number, got '%s'\n", flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int write_stdout(const void *data, size_t len) {
    if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0) {
        fprintf(stderr, "vdn store: writing to stdout failed: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

int vdn_cmd_store(int argc, char **argv) {
    vdn_store_opts opts = {0};
    const char *pos[5];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        int is_flag = !strncmp(a, "--", 2);
        if (is_flag) {
            const char *val = strchr(a, '=');
            char name[64];
            size_t nl = val ? (size_t)(val - a) : strlen(a);
            snprintf(name, sizeof name, "%.*s", (int)nl, a);
            if (val)
                val++;
            else if (i + 1 < argc)
                val = argv[++i];
            else {
                fprintf(stderr, "vdn store: %s needs a value\n", name);
                return 2;
            }
            double num;
            if (!strcmp(name, "--endpoint"))
                opts.endpoint = val;
            else if (!strcmp(name, "--region"))
                opts.region = val;
            else if (!strcmp(name, "--max-retries")) {
                if (parse_number(name, val, &num)) return 2;
                opts.max_retries = (int)num;
            } else if (!strcmp(name, "--retry-max-seconds")) {
                if (parse_number(name, val, &num)) return 2;
                opts.retry_max_seconds = num;
            } else if (!strcmp(name, "--max-body-bytes")) {
                if (parse_number(name, val, &num)) return 2;
                opts.max_body_bytes = (size_t)num;
            } else if (!strcmp(name, "--part-size")) {
                if (parse_number(name, val, &num)) return 2;
                opts.multipart_threshold = (size_t)num;
            } else {
                fprintf(stderr, "vdn store: unknown option %s (see vdn store --help)\n", name);
                return 2;
            }
            continue;
        }
        if (npos == 5) {
            fprintf(stderr, "vdn store: too many arguments at '%s' (see vdn store --help)\n", a);
            return 2;
        }
        pos[npos++] = a;
    }
    if (npos < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = pos[0], *uri = pos[1];
    static const struct {
        const char *name;
        int min, max;
        const char *args;
    } cmds[] = {{"put", 4, 4, "URI KEY FILE"}, {"get", 4, 4, "URI KEY FILE"},
                {"cat", 3, 3, "URI KEY"},      {"ls", 2, 3, "URI [PREFIX]"},
                {"stat", 3, 3, "URI KEY"},     {"rm", 3, 3, "URI KEY"}};
    int found = -1;
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
        if (!strcmp(cmd, cmds[i].name)) found = (int)i;
    if (found < 0) {
        fprintf(stderr, "vdn store: unknown command '%s' (expected put, get, cat, ls, stat, rm)\n",
                cmd);
        return 2;
    }
    if (npos < cmds[found].min || npos > cmds[found].max) {
        fprintf(stderr, "vdn store %s: expected %s\n", cmd, cmds[found].args);
        return 2;
    }
    char err[VDN_ERR_LEN];
    vdn_store *st = vdn_store_open(uri, &opts, err, sizeof err);
    if (!st) {
        fprintf(stderr, "vdn store: %s\n", err);
        return 1;
    }
    int rc = 0;
    const char *key = npos > 2 ? pos[2] : "";
    if (!strcmp(cmd, "put")) {
        const char *file = pos[3];
        if (!strcmp(file, "-")) {
            size_t len;
            char *data = vdn_read_file("/dev/stdin", &len, err, sizeof err);
            rc = data ? vdn_store_put_bytes(st, key, data, len, err, sizeof err) : -1;
            free(data);
        } else {
            rc = vdn_store_put_file(st, key, file, err, sizeof err);
        }
    } else if (!strcmp(cmd, "get") && strcmp(pos[3], "-")) {
        rc = vdn_store_get_file(st, key, pos[3], err, sizeof err);
    } else if (!strcmp(cmd, "get") || !strcmp(cmd, "cat")) {
        void *data;
        size_t len;
        rc = vdn_store_get_bytes(st, key, &data, &len, err, sizeof err);
        if (rc == 0) {
            if (write_stdout(data, len)) rc = 1;
            free(data);
        }
    } else if (!strcmp(cmd, "ls")) {
        rc = vdn_store_list(st, npos > 2 ? pos[2] : "", print_entry, NULL, err, sizeof err);
        if (rc == 0 && fflush(stdout) != 0) rc = 1;
    } else if (!strcmp(cmd, "stat")) {
        uint64_t size = 0;
        int e = vdn_store_exists(st, key, &size, err, sizeof err);
        if (e == 1)
            printf("%llu\n", (unsigned long long)size);
        else if (e == 0) {
            fprintf(stderr, "vdn store: %s: no such key %s\n", vdn_store_uri(st), key);
            vdn_store_close(st);
            return 1;
        }
        rc = e < 0 ? -1 : 0;
    } else {
        rc = vdn_store_delete(st, key, err, sizeof err);
    }
    if (rc < 0) fprintf(stderr, "vdn store: %s\n", err);
    vdn_store_close(st);
    return rc ? 1 : 0;
}
