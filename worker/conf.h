/* The cluster configuration file (ops/cluster.example.conf) and the `vdn up` directory's vdn.conf
 * share one format: `key = value` lines, '#' comments, blank lines ignored. Keys are checked
 * against a known list so a typo is an error naming the file and line, not a silent default.
 * `worker` may repeat (one line per worker host); every other key appears at most once.
 * Secrets never live here: S3 credentials come from the environment or an env file named by
 * `s3_env_file`, CURVE secret keys from the `keys` directory. */
#ifndef VDN_WORKER_CONF_H
#define VDN_WORKER_CONF_H

#include <stddef.h>

#define VDN_CONF_MAX_ENTRIES 256

typedef struct {
    char *key, *value;
    int line;
} vdn_conf_entry;

typedef struct {
    char *path;
    int n;
    vdn_conf_entry e[VDN_CONF_MAX_ENTRIES];
} vdn_conf;

/* Parse text (path is only for messages). 0, or -1 with "PATH:LINE: what was wrong". */
int vdn_conf_parse(vdn_conf *c, const char *path, const char *text, char *err, size_t errlen);
int vdn_conf_load(vdn_conf *c, const char *path, char *err, size_t errlen);
void vdn_conf_free(vdn_conf *c);

/* Last value for key, or NULL. */
const char *vdn_conf_get(const vdn_conf *c, const char *key);
/* i-th value of a repeated key (0-based), or NULL past the end. */
const char *vdn_conf_get_nth(const vdn_conf *c, const char *key, int i);

/* DIR/vdn.conf as `vdn up` writes it: the endpoints and paths of one local farm. */
int vdn_conf_write(const char *path, const char *const *keys, const char *const *values, int n,
                   char *err, size_t errlen);

#endif
