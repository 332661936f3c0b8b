#include "conf.h"

#include <ctype.h>
#include <string.h>

#include "vdn_util.h"

/* Every key the format knows. Keeping the list here (not per caller) lets one parser reject
 * typos for both the cluster file and vdn.conf. */
static const char *const known_keys[] = {
    "worker_endpoint", /* tcp://HOST:PORT the coordinator's worker ROUTER binds / workers dial */
    "client_endpoint", /* tcp://HOST:PORT for submit/status/watch */
    "store",           /* file://DIR or s3://bucket/prefix */
    "s3_endpoint",     /* http(s)://host:port for S3-compatible stores */
    "s3_region",
    "s3_env_file",     /* file with AWS_ACCESS_KEY_ID=... lines (mode 0600), never the keys here */
    "keys",            /* CURVE key directory */
    "key",             /* a client's own NAME.key (CURVE) */
    "coordinator_key", /* the coordinator's public key file */
    "checkpoint",      /* checkpoint directory on worker hosts */
    "db",              /* coordinator SQLite file */
    "scratch",         /* worker scratch directory */
    "text_precision",  /* workers: the text encoder's precision, bf16 or fp8 */
    "vae_precision",   /* workers: the video decoder's precision, bf16 or fp8 */
    "precision",       /* workers: the DiT precisions whose engines they load, bf16[,fp8] */
    "data_root",       /* repeated: folders whose files a request may name by local path */
    "worker",          /* repeated: "HOST [gpus=SPEC] [id=NAME]" */
    "lease_seconds",
    "heartbeat_seconds",
    "max_attempts",
    "workers", /* vdn up: number of local workers */
    "pid",     /* vdn up --detach: supervisor pid */
    "log_dir",
};

static int is_known(const char *key) {
    for (size_t i = 0; i < sizeof known_keys / sizeof *known_keys; i++)
        if (!strcmp(key, known_keys[i])) return 1;
    return 0;
}

void vdn_conf_free(vdn_conf *c) {
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].key);
        free(c->e[i].value);
    }
    free(c->path);
    memset(c, 0, sizeof *c);
}

int vdn_conf_parse(vdn_conf *c, const char *path, const char *text, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    c->path = vdn_xstrdup(path);
    int line = 0;
    const char *p = text;
    while (*p) {
        line++;
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *next = p + len + (eol ? 1 : 0);
        char buf[4096];
        if (len >= sizeof buf) {
            vdn_fail(err, errlen, "%s:%d: line longer than %zu bytes", path, line, sizeof buf - 1);
            goto fail;
        }
        memcpy(buf, p, len);
        buf[len] = '\0';
        p = next;
        if (len && buf[len - 1] == '\r') buf[--len] = '\0';
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)buf[i] < 0x20 && buf[i] != '\t') {
                vdn_fail(err, errlen, "%s:%d: control character 0x%02x at column %zu", path, line,
                         (unsigned char)buf[i], i + 1);
                goto fail;
            }
        char *s = buf;
        while (isspace((unsigned char)*s))
            s++;
        if (*s == '\0' || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            vdn_fail(err, errlen, "%s:%d: expected 'key = value', got '%s'", path, line, s);
            goto fail;
        }
        char *kend = eq;
        while (kend > s && isspace((unsigned char)kend[-1]))
            kend--;
        *kend = '\0';
        char *val = eq + 1;
        while (isspace((unsigned char)*val))
            val++;
        size_t vlen = strlen(val);
        while (vlen && isspace((unsigned char)val[vlen - 1]))
            val[--vlen] = '\0';
        if (!*s) {
            vdn_fail(err, errlen, "%s:%d: missing key before '='", path, line);
            goto fail;
        }
        for (char *k = s; *k; k++)
            if (!(islower((unsigned char)*k) || isdigit((unsigned char)*k) || *k == '_')) {
                vdn_fail(err, errlen, "%s:%d: key '%s': expected lowercase letters, digits, '_'",
                         path, line, s);
                goto fail;
            }
        if (!is_known(s)) {
            vdn_fail(err, errlen, "%s:%d: unknown key '%s' (see ops/cluster.example.conf)", path,
                     line, s);
            goto fail;
        }
        if (!*val) {
            vdn_fail(err, errlen, "%s:%d: key '%s' has an empty value", path, line, s);
            goto fail;
        }
        if (strcmp(s, "worker") && vdn_conf_get(c, s)) {
            int first = 0;
            for (int i = 0; i < c->n; i++)
                if (!strcmp(c->e[i].key, s)) first = c->e[i].line;
            vdn_fail(err, errlen, "%s:%d: key '%s' given again (first on line %d)", path, line, s,
                     first);
            goto fail;
        }
        if (c->n >= VDN_CONF_MAX_ENTRIES) {
            vdn_fail(err, errlen, "%s:%d: more than %d entries", path, line, VDN_CONF_MAX_ENTRIES);
            goto fail;
        }
        c->e[c->n].key = vdn_xstrdup(s);
        c->e[c->n].value = vdn_xstrdup(val);
        c->e[c->n].line = line;
        c->n++;
    }
    return 0;
fail:
    vdn_conf_free(c);
    return -1;
}

int vdn_conf_load(vdn_conf *c, const char *path, char *err, size_t errlen) {
    size_t len;
    char *text = vdn_read_file(path, &len, err, errlen);
    if (!text) return -1;
    if (strlen(text) != len) {
        free(text);
        return vdn_fail(err, errlen, "%s: contains a NUL byte; expected a text file", path);
    }
    int rc = vdn_conf_parse(c, path, text, err, errlen);
    free(text);
    return rc;
}

const char *vdn_conf_get(const vdn_conf *c, const char *key) {
    const char *v = NULL;
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->e[i].key, key)) v = c->e[i].value;
    return v;
}

const char *vdn_conf_get_nth(const vdn_conf *c, const char *key, int n) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->e[i].key, key) && n-- == 0) return c->e[i].value;
    return NULL;
}

int vdn_conf_write(const char *path, const char *const *keys, const char *const *values, int n,
                   char *err, size_t errlen) {
    size_t cap = 256;
    for (int i = 0; i < n; i++)
        cap += strlen(keys[i]) + strlen(values[i]) + 8;
    char *buf = vdn_xmalloc(cap);
    size_t len = (size_t)snprintf(buf, cap,
                                  "# written by `vdn up`; read by vdn submit/status/watch "
                                  "--dir and vdn up --stop\n");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s = %s\n", keys[i], values[i]);
    int rc = vdn_write_file_atomic(path, buf, len, err, errlen);
    free(buf);
    return rc;
}
