/* The store dispatcher: parses the URI, picks the backend, validates every key before a
 * backend sees it, and owns the helpers both backends share (atomic local writes). */
#include "store.h"
#include "store_impl.h"
#include "vdn_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct vdn_store {
    const vdn_store_backend *be;
    void *impl;
    char *uri;
};

#define KEY_MAX 1024

/* One rule for keys and prefixes: relative '/'-separated paths with no way to climb out of the
 * store or name the same object twice. A prefix may be empty or end in '/' (an open segment). */
static int check_path(const char *what, const char *s, int is_prefix, char *err, size_t errlen) {
    if (!s) return vdn_fail(err, errlen, "%s is NULL (expected a relative path)", what);
    size_t n = strlen(s);
    if (!is_prefix && n == 0)
        return vdn_fail(err, errlen, "%s is empty (expected a relative path like a/b/c.bin)", what);
    if (n > KEY_MAX)
        return vdn_fail(err, errlen, "%s is %zu bytes long (at most %d allowed)", what, n, KEY_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return vdn_fail(err, errlen, "%s '%.*s...' has a control byte 0x%02x at offset %zu",
                            what, (int)(i < 200 ? i : 200), s, c, i);
        if (c == '\\')
            return vdn_fail(err, errlen,
                            "%s '%.200s' has a backslash at offset %zu (use '/' to separate)", what,
                            s, i);
    }
    if (n && s[0] == '/')
        return vdn_fail(err, errlen,
                        "%s '%.200s' starts with '/' (expected a relative path like a/b/c.bin)",
                        what, s);
    const char *seg = s;
    int first = 1;
    for (;;) {
        const char *end = strchr(seg, '/');
        size_t len = end ? (size_t)(end - seg) : strlen(seg);
        int last = end == NULL;
        if (len == 0 && !(last && is_prefix)) { /* a prefix may end open: "a/" or "" */
            if (last)
                return vdn_fail(err, errlen, "%s '%.200s' ends with '/' (expected a file name)",
                                what, s);
            return vdn_fail(err, errlen, "%s '%.200s' has an empty segment ('//')", what, s);
        }
        if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
            return vdn_fail(err, errlen, "%s '%.200s' has a '%.*s' segment (not allowed)", what, s,
                            (int)len, seg);
        if (first && len == strlen(VDN_STORE_TMP_DIR) && !strncmp(seg, VDN_STORE_TMP_DIR, len) &&
            !last)
            return vdn_fail(err, errlen, "%s '%.200s' starts with the reserved folder '%s/'", what,
                            s, VDN_STORE_TMP_DIR);
        if (first && last && len == strlen(VDN_STORE_TMP_DIR) &&
            !strncmp(seg, VDN_STORE_TMP_DIR, len) && !is_prefix)
            return vdn_fail(err, errlen, "%s '%.200s' is the reserved name '%s'", what, s,
                            VDN_STORE_TMP_DIR);
        if (last) break;
        seg = end + 1;
        first = 0;
    }
    return 0;
}

int vdn_store_check_key(const char *key, char *err, size_t errlen) {
    return check_path("key", key, 0, err, errlen);
}

int vdn_store_check_prefix(const char *prefix, char *err, size_t errlen) {
    return check_path("prefix", prefix ? prefix : "", 1, err, errlen);
}

vdn_store *vdn_store_open(const char *uri, const vdn_store_opts *opts, char *err, size_t errlen) {
    if (!uri || !*uri) {
        vdn_fail(err, errlen,
                 "store URI is empty (expected file:///dir, a directory or "
                 "s3://bucket/prefix)");
        return NULL;
    }
    const vdn_store_backend *be;
    void *impl;
    if (!strncmp(uri, "s3://", 5)) {
        be = &vdn_store_s3_backend;
        impl = vdn_store_s3_open(uri + 5, opts, err, errlen);
    } else if (strstr(uri, "://") && strncmp(uri, "file://", 7)) {
        vdn_fail(err, errlen,
                 "store URI '%.200s': unknown scheme (expected file://DIR, a directory or "
                 "s3://bucket/prefix)",
                 uri);
        return NULL;
    } else {
        const char *dir = strncmp(uri, "file://", 7) ? uri : uri + 7;
        if (!*dir) {
            vdn_fail(err, errlen, "store URI '%s' names no directory", uri);
            return NULL;
        }
        be = &vdn_store_file_backend;
        impl = vdn_store_file_open(dir, err, errlen);
    }
    if (!impl) return NULL;
    vdn_store *st = vdn_xcalloc(1, sizeof *st);
    st->be = be;
    st->impl = impl;
    st->uri = vdn_xstrdup(uri);
    return st;
}

void vdn_store_close(vdn_store *st) {
    if (!st) return;
    st->be->close(st->impl);
    free(st->uri);
    free(st);
}

const char *vdn_store_uri(const vdn_store *st) {
    return st ? st->uri : "";
}

#define NEED_STORE(st)                                                                             \
    do {                                                                                           \
        if (!(st)) return vdn_fail(err, errlen, "store is NULL (vdn_store_open failed?)");         \
    } while (0)

int vdn_store_put_file(vdn_store *st, const char *key, const char *local_path, char *err,
                       size_t errlen) {
    NEED_STORE(st);
    if (vdn_store_check_key(key, err, errlen)) return -1;
    if (!local_path) return vdn_fail(err, errlen, "put %s: local path is NULL", key);
    return st->be->put_file(st->impl, key, local_path, err, errlen);
}

int vdn_store_put_bytes(vdn_store *st, const char *key, const void *data, size_t len, char *err,
                        size_t errlen) {
    NEED_STORE(st);
    if (vdn_store_check_key(key, err, errlen)) return -1;
    if (!data && len) return vdn_fail(err, errlen, "put %s: data is NULL", key);
    return st->be->put_bytes(st->impl, key, data ? data : "", len, err, errlen);
}

int vdn_store_get_file(vdn_store *st, const char *key, const char *local_path, char *err,
                       size_t errlen) {
    NEED_STORE(st);
    if (vdn_store_check_key(key, err, errlen)) return -1;
    if (!local_path) return vdn_fail(err, errlen, "get %s: local path is NULL", key);
    return st->be->get_file(st->impl, key, local_path, err, errlen);
}

int vdn_store_get_bytes(vdn_store *st, const char *key, void **data, size_t *len, char *err,
                        size_t errlen) {
    NEED_STORE(st);
    if (vdn_store_check_key(key, err, errlen)) return -1;
    if (!data || !len) return vdn_fail(err, errlen, "get %s: output pointers are NULL", key);
    *data = NULL;
    *len = 0;
    return st->be->get_bytes(st->impl, key, data, len, err, errlen);
}

int vdn_store_exists(vdn_store *st, const char *key, uint64_t *size, char *err, size_t errlen) {
    NEED_STORE(st);
    if (vdn_store_check_key(key, err, errlen)) return -1;
    uint64_t dummy;
    return st->be->exists(st->impl, key, size ? size : &dummy, err, errlen);
}

int vdn_store_list(vdn_store *st, const char *prefix,
                   int (*fn)(void *user, const char *key, uint64_t size), void *user, char *err,
                   size_t errlen) {
    NEED_STORE(st);
    if (!prefix) prefix = "";
    if (vdn_store_check_prefix(prefix, err, errlen)) return -1;
    if (!fn) return vdn_fail(err, errlen, "list: callback is NULL");
    return st->be->list(st->impl, prefix, fn, user, err, errlen);
}

int vdn_store_delete(vdn_store *st, const char *key, char *err, size_t errlen) {
    NEED_STORE(st);
    if (vdn_store_check_key(key, err, errlen)) return -1;
    return st->be->del(st->impl, key, err, errlen);
}

/* ---- helpers shared by the backends ---- */

int vdn_store_write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static void fsync_parent_dir(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd); /* best effort: some filesystems refuse fsync on directories */
        close(fd);
    }
}

int vdn_store_write_local_atomic(const char *local_path, vdn_store_fill_fn fill, void *user,
                                 char *err, size_t errlen) {
    char tmp[4096];
    int n = snprintf(tmp, sizeof tmp, "%s.vdn-part-XXXXXX", local_path);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return vdn_fail(err, errlen, "%.200s: path too long", local_path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return vdn_fail(err, errlen, "%s: cannot create a temp file next to it: %s", local_path,
                        strerror(errno));
    fchmod(fd, 0644);
    if (fill(user, fd, err, errlen) != 0) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return vdn_fail(err, errlen, "%s: fsync failed: %s", tmp, strerror(e));
    }
    if (close(fd) != 0) {
        unlink(tmp);
        return vdn_fail(err, errlen, "%s: close failed: %s", tmp, strerror(errno));
    }
    if (rename(tmp, local_path) != 0) {
        int e = errno;
        unlink(tmp);
        return vdn_fail(err, errlen, "%s: cannot rename the downloaded temp file into place: %s",
                        local_path, strerror(e));
    }
    fsync_parent_dir(local_path);
    return 0;
}
