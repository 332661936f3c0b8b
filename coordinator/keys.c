/* The keys file (public key, name, role) and peer identities; see keys.h. */
#include "keys.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "vdn_util.h"

static const char *const role_names[] = {"worker", "read", "submit", "admin"};

const char *vdn_role_name(vdn_role r) {
    return (unsigned)r < 4 ? role_names[r] : "?";
}

int vdn_role_parse(const char *s, vdn_role *out) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, role_names[i])) {
            *out = (vdn_role)i;
            return 0;
        }
    return -1;
}

static int name_char(char ch, int first) {
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) return 1;
    return !first && (ch == '.' || ch == '_' || ch == '-' || ch == ',');
}

int vdn_key_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > VDN_KEY_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i], i == 0)) return 0;
    return 1;
}

void vdn_keys_free(vdn_keyset *ks) {
    free(ks->e);
    ks->e = NULL;
    ks->n = 0;
}

const vdn_key_entry *vdn_keys_find(const vdn_keyset *ks, const uint8_t key[32]) {
    for (int i = 0; i < ks->n; i++)
        if (!memcmp(ks->e[i].key, key, 32)) return &ks->e[i];
    return NULL;
}

int vdn_keys_add(vdn_keyset *ks, const uint8_t key[32], const char *name, vdn_role role,
                 const char *where, char *err, size_t errlen) {
    const vdn_key_entry *dup = vdn_keys_find(ks, key);
    if (dup)
        return vdn_fail(err, errlen,
                        "%s: this public key is already listed at %s (one key, one "
                        "identity)",
                        where, dup->where);
    int worker = role == VDN_ROLE_WORKER;
    for (int i = 0; i < ks->n; i++)
        if ((ks->e[i].role == VDN_ROLE_WORKER) == worker && !strcmp(ks->e[i].name, name))
            return vdn_fail(err, errlen, "%s: name '%s' is already a %s at %s", where, name,
                            worker ? "worker" : "client", ks->e[i].where);
    vdn_key_entry *g = realloc(ks->e, sizeof *g * (size_t)(ks->n + 1));
    VDN_ASSERT(g);
    ks->e = g;
    vdn_key_entry *e = &ks->e[ks->n++];
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, 32);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->role = role;
    snprintf(e->where, sizeof e->where, "%s", where);
    return 0;
}

/* Splits a line into at most 4 blank-separated fields (in place); returns how many. */
static int fields(char *line, char *f[4]) {
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (!*p) return n;
        if (n == 4) return 5;
        f[n++] = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r')
            p++;
        if (*p) *p++ = 0;
    }
}

static int parse_line(char *line, const char *fname, int lineno, vdn_keyset *ks, char *err,
                      size_t errlen) {
    char *f[4], where[160];
    snprintf(where, sizeof where, "%.140s:%d", fname, lineno);
    char *p = line;
    while (*p == ' ' || *p == '\t' || *p == '\r')
        p++;
    if (!*p || *p == '#') return 0; /* blank or comment */
    int n = fields(line, f);
    if (n != 3)
        return vdn_fail(err, errlen,
                        "%s: expected 3 fields 'PUBLIC_KEY NAME ROLE' (a comment starts with "
                        "'#'), got %d",
                        where, n > 4 ? 5 : n);
    uint8_t key[32];
    if (strlen(f[0]) != 40 || !zmq_z85_decode(key, f[0]))
        return vdn_fail(err, errlen,
                        "%s: field 'public key': expected the 40-character Z85 key of a .pub file "
                        "(vdn keygen), got %zu characters",
                        where, strlen(f[0]));
    if (!vdn_key_name_ok(f[1]))
        return vdn_fail(err, errlen,
                        "%s: field 'name': expected 1..%d of A-Z a-z 0-9 . _ - , starting with a "
                        "letter or digit, got \"%.70s\"",
                        where, VDN_KEY_NAME_MAX, f[1]);
    vdn_role role;
    if (vdn_role_parse(f[2], &role))
        return vdn_fail(err, errlen,
                        "%s: field 'role': expected worker, read, submit or admin, got \"%.40s\"",
                        where, f[2]);
    return vdn_keys_add(ks, key, f[1], role, where, err, errlen);
}

int vdn_keys_parse(const char *text, size_t len, const char *fname, vdn_keyset *ks, char *err,
                   size_t errlen) {
    size_t pos = 0;
    int lineno = 0;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        lineno++;
        size_t n = end - pos;
        if (memchr(text + pos, 0, n))
            return vdn_fail(err, errlen, "%.140s:%d: NUL byte: expected text", fname, lineno);
        if (n > 1024)
            return vdn_fail(err, errlen, "%.140s:%d: line longer than 1024 bytes", fname, lineno);
        char line[1025];
        memcpy(line, text + pos, n);
        line[n] = 0;
        if (parse_line(line, fname, lineno, ks, err, errlen)) return -1;
        pos = end + 1;
    }
    return 0;
}

int vdn_keys_append(const char *path, const char *pub_z85, const char *name, vdn_role role,
                    char *err, size_t errlen) {
    vdn_keyset ks = {0};
    uint8_t key[32];
    if (strlen(pub_z85) != 40 || !zmq_z85_decode(key, pub_z85))
        return vdn_fail(err, errlen, "not a 40-character Z85 public key");
    if (!vdn_key_name_ok(name))
        return vdn_fail(err, errlen,
                        "name \"%.70s\": expected 1..%d of A-Z a-z 0-9 . _ - , starting with a "
                        "letter or digit",
                        name, VDN_KEY_NAME_MAX);
    if (access(path, F_OK) == 0) {
        size_t len;
        char *text = vdn_read_file(path, &len, err, errlen);
        if (!text) return -1;
        int rc = vdn_keys_parse(text, len, path, &ks, err, errlen);
        free(text);
        char where[160];
        snprintf(where, sizeof where, "new entry for %s", path);
        if (!rc) rc = vdn_keys_add(&ks, key, name, role, where, err, errlen);
        vdn_keys_free(&ks);
        if (rc) return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return vdn_fail(err, errlen, "%s: %s", path, strerror(errno));
    char line[200];
    int n = snprintf(line, sizeof line, "%s %s %s\n", pub_z85, name, vdn_role_name(role));
    /* a file whose last line has no newline would glue our entry onto it */
    off_t end = lseek(fd, 0, SEEK_END);
    char last = '\n';
    if (end > 0 && pread(fd, &last, 1, end - 1) != 1) last = '\n';
    int bad = (last != '\n' && write(fd, "\n", 1) != 1) || write(fd, line, (size_t)n) != n ||
              fsync(fd) != 0;
    int e = errno;
    close(fd);
    if (bad) return vdn_fail(err, errlen, "%s: %s", path, strerror(e));
    return 0;
}

int vdn_peer_parse(const char *user_id, vdn_peer *p) {
    memset(p, 0, sizeof *p);
    if (!user_id || !user_id[0]) {
        p->local = 1;
        p->role = VDN_ROLE_ADMIN;
        return 0;
    }
    const char *colon = strchr(user_id, ':');
    if (!colon || colon - user_id > 15) return -1;
    char role[16];
    memcpy(role, user_id, (size_t)(colon - user_id));
    role[colon - user_id] = 0;
    if (vdn_role_parse(role, &p->role) || !vdn_key_name_ok(colon + 1)) return -1;
    snprintf(p->name, sizeof p->name, "%s", colon + 1);
    return 0;
}
