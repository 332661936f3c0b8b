/* file://DIR backend: one file per key under DIR. A put writes DIR/.vdn-tmp/put-HOST.PID-XXXXXX
 * (same filesystem), fsyncs it and renames it over DIR/KEY, so a reader sees the old object or
 * the new one, never a half one; a failed put unlinks its temp file and leaves the key untouched.
 * The temp file's name says which process owns it, so the temp files of a process that died (a
 * SIGKILL mid-upload) are swept by the next one on that host. */
#include "store_impl.h"
#include "vdn_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    char *root;
    int root_fd;   /* every key is opened beneath it, following no symlink (vdn_open_beneath) */
    char host[64]; /* this host's name, as temp file names carry it */
    time_t swept;  /* when .vdn-tmp was last swept */
} file_store;

#define SWEEP_EVERY_SECONDS 60

static atomic_ullong temps_swept; /* vdn_store_temps_swept */

uint64_t vdn_store_temps_swept(void) {
    return atomic_load(&temps_swept);
}

/* A symlink (or "..") where a key's path goes: the store never follows one, so a link planted in
 * its folder cannot make a put write, or a get read, a file outside it. */
static int is_link_errno(int e) {
    return e == ELOOP || e == ENOTDIR || e == EXDEV;
}

static char *join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *p = vdn_xmalloc(la + lb + 2);
    memcpy(p, a, la);
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
    return p;
}

/* Whether temp file `name` (put-HOST.PID-XXXXXX) belongs to a process of this host that is gone:
 * no live put owns it. */
static int orphan_of_host(const char *name, const char *host) {
    const char *hp = name + 4, *dash = strrchr(hp, '-');
    if (!dash) return 0;
    const char *dot = NULL;
    for (const char *p = hp; p < dash; p++)
        if (*p == '.') dot = p;
    if (!dot || (size_t)(dot - hp) != strlen(host) || strncmp(hp, host, strlen(host))) return 0;
    char *end;
    long pid = strtol(dot + 1, &end, 10);
    if (end != dash || pid <= 0) return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Temp files of puts whose process died stay in .vdn-tmp; nothing lists or reads them. Remove
 * those of this host's processes that are gone (at open and every SWEEP_EVERY_SECONDS of puts),
 * and any untouched for a day (another host's, or an older vdn's put-XXXXXX; a live put rewrites
 * its temp file continuously). Returns how many were removed. */
static int sweep_stale_temps(file_store *fs, const char *tmpdir) {
    DIR *d = opendir(tmpdir);
    if (!d) return 0;
    time_t now = time(NULL);
    fs->swept = now;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "put-", 4)) continue;
        char *path = join(tmpdir, de->d_name);
        struct stat sb;
        if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
            (orphan_of_host(de->d_name, fs->host) || now - sb.st_mtime > 24 * 3600) &&
            unlink(path) == 0)
            n++;
        free(path);
    }
    closedir(d);
    if (n) VDN_INFO("file store %s: removed %d temp file(s) of puts that died", fs->root, n);
    atomic_fetch_add(&temps_swept, (unsigned long long)n);
    return n;
}

void *vdn_store_file_open(const char *dir, char *err, size_t errlen) {
    char sub[VDN_ERR_LEN];
    if (vdn_mkdir_p(dir, sub, sizeof sub) != 0) {
        vdn_fail(err, errlen, "file store '%s': cannot create the directory: %s", dir, sub);
        return NULL;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        vdn_fail(err, errlen, "file store '%s': not a directory", dir);
        return NULL;
    }
    file_store *fs = vdn_xcalloc(1, sizeof *fs);
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--; /* "dir/" and "dir" are the same store */
    fs->root = vdn_xmalloc(n + 1);
    memcpy(fs->root, dir, n);
    fs->root[n] = 0;
    char *tmp = join(fs->root, VDN_STORE_TMP_DIR);
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
        vdn_fail(err, errlen, "file store '%s': cannot create %s: %s", dir, tmp, strerror(errno));
        free(tmp);
        free(fs->root);
        free(fs);
        return NULL;
    }
    if (gethostname(fs->host, sizeof fs->host) != 0) snprintf(fs->host, sizeof fs->host, "host");
    fs->host[sizeof fs->host - 1] = 0;
    for (char *p = fs->host; *p; p++) /* a file name's part: letters, digits, '.', '_' */
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.'))
            *p = '_';
    sweep_stale_temps(fs, tmp);
    free(tmp);
    fs->root_fd = open(fs->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fs->root_fd < 0) {
        vdn_fail(err, errlen, "file store '%s': %s", dir, strerror(errno));
        free(fs->root);
        free(fs);
        return NULL;
    }
    return fs;
}

static void file_close(void *be) {
    file_store *fs = be;
    close(fs->root_fd);
    free(fs->root);
    free(fs);
}

/* The folder a key lands in, created beneath the root as needed without following any symlink:
 * its descriptor (AT-style: the root's own for a key without '/'), or -1 with the error. */
static int parent_fd(file_store *fs, const char *key, const char *op, int create, char *err,
                     size_t errlen) {
    const char *slash = strrchr(key, '/');
    if (!slash) return dup(fs->root_fd);
    char *rel = vdn_xmalloc((size_t)(slash - key) + 1);
    memcpy(rel, key, (size_t)(slash - key));
    rel[slash - key] = 0;
    int fd = create ? vdn_open_beneath_walk(fs->root_fd, rel, O_RDONLY | O_DIRECTORY, 1)
                    : vdn_open_beneath(fs->root_fd, rel, O_RDONLY | O_DIRECTORY);
    int e = errno;
    free(rel);
    if (fd < 0) {
        if (is_link_errno(e))
            vdn_fail(err, errlen,
                     "file store %s: %s %s: a symlink (or a non-folder) on the way; the file "
                     "store follows no symlinks",
                     fs->root, op, key);
        else
            vdn_fail(err, errlen, "file store %s: %s %s: %s", fs->root, op, key, strerror(e));
        errno = e;
    }
    return fd;
}

typedef int (*fill_fn)(void *user, int fd, char *err, size_t errlen);

/* The one way anything lands under a key: temp file, fsync, rename. */
static int publish(file_store *fs, const char *key, fill_fn fill, void *user, char *err,
                   size_t errlen) {
    char *tmpdir = join(fs->root, VDN_STORE_TMP_DIR), name[128];
    if (time(NULL) - fs->swept >= SWEEP_EVERY_SECONDS) sweep_stale_temps(fs, tmpdir);
    snprintf(name, sizeof name, "put-%s.%ld-XXXXXX", fs->host, (long)getpid());
    char *tmpl = join(tmpdir, name);
    free(tmpdir);
    int fd = mkstemp(tmpl);
    if (fd < 0) {
        vdn_fail(err, errlen, "file store %s: put %s: cannot create a temp file %s: %s", fs->root,
                 key, tmpl, strerror(errno));
        free(tmpl);
        return -1;
    }
    fchmod(fd, 0644);
    int rc = fill(user, fd, err, errlen);
    if (rc == 0 && fsync(fd) != 0)
        rc = vdn_fail(err, errlen, "file store %s: put %s: fsync failed: %s", fs->root, key,
                      strerror(errno));
    if (close(fd) != 0 && rc == 0)
        rc = vdn_fail(err, errlen, "file store %s: put %s: close failed: %s", fs->root, key,
                      strerror(errno));
    /* A concurrent delete may remove an emptied parent folder between mkdir and rename. */
    const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
    for (int attempt = 0; rc == 0; attempt++) {
        int pfd = parent_fd(fs, key, "put", 1, err, errlen);
        if (pfd < 0) {
            rc = -1;
            break;
        }
        int moved = renameat(AT_FDCWD, tmpl, pfd, base);
        int e = errno;
        if (moved == 0) fsync(pfd); /* make the rename durable; best effort */
        close(pfd);
        errno = e;
        if (moved == 0) break;
        if (errno == ENOENT && attempt < 3) continue;
        if (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST)
            rc = vdn_fail(err, errlen, "file store %s: put %s: a folder of that name exists",
                          fs->root, key);
        else if (errno == ENOTDIR)
            rc = vdn_fail(err, errlen,
                          "file store %s: put %s: a parent of the key is an object, not a "
                          "folder",
                          fs->root, key);
        else
            rc = vdn_fail(err, errlen, "file store %s: put %s: rename into place failed: %s",
                          fs->root, key, strerror(errno));
    }
    if (rc != 0) unlink(tmpl);
    free(tmpl);
    return rc;
}

typedef struct {
    int src;
    const char *src_path;
    const char *key;
} copy_job;

/* Copy src to fd; errors name the side that failed. */
static int copy_fd(int src, int dst, const char *src_path, const char *dst_what, char *err,
                   size_t errlen) {
    char *buf = vdn_xmalloc(1 << 20);
    int rc = 0;
    for (;;) {
        ssize_t r = read(src, buf, 1 << 20);
        if (r < 0) {
            if (errno == EINTR) continue;
            rc = vdn_fail(err, errlen, "%s: read failed: %s", src_path, strerror(errno));
            break;
        }
        if (r == 0) break;
        if (vdn_store_write_all(dst, buf, (size_t)r) != 0) {
            rc = vdn_fail(err, errlen, "%s: write failed: %s", dst_what, strerror(errno));
            break;
        }
    }
    free(buf);
    return rc;
}

static int fill_from_file(void *user, int fd, char *err, size_t errlen) {
    copy_job *j = user;
    char what[1200];
    snprintf(what, sizeof what, "temp file for key %s", j->key);
    return copy_fd(j->src, fd, j->src_path, what, err, errlen);
}

static int file_put_file(void *be, const char *key, const char *local_path, char *err,
                         size_t errlen) {
    file_store *fs = be;
    int src = open(local_path, O_RDONLY);
    if (src < 0)
        return vdn_fail(err, errlen, "put %s: cannot open local file %s: %s", key, local_path,
                        strerror(errno));
    struct stat sb;
    if (fstat(src, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        close(src);
        return vdn_fail(err, errlen, "put %s: local path %s is a directory, not a file", key,
                        local_path);
    }
    copy_job j = {src, local_path, key};
    int rc = publish(fs, key, fill_from_file, &j, err, errlen);
    close(src);
    return rc;
}

typedef struct {
    const void *data;
    size_t len;
    const char *key;
} bytes_job;

static int fill_from_bytes(void *user, int fd, char *err, size_t errlen) {
    bytes_job *j = user;
    if (vdn_store_write_all(fd, j->data, j->len) != 0)
        return vdn_fail(err, errlen, "put %s: write to temp file failed: %s", j->key,
                        strerror(errno));
    return 0;
}

static int file_put_bytes(void *be, const char *key, const void *data, size_t len, char *err,
                          size_t errlen) {
    bytes_job j = {data, len, key};
    return publish(be, key, fill_from_bytes, &j, err, errlen);
}

/* Open DIR/KEY for reading; a missing key is an error that says so. */
static int open_object(file_store *fs, const char *key, const char *op, char *err, size_t errlen) {
    char *path = join(fs->root, key);
    int fd = vdn_open_beneath(fs->root_fd, key, O_RDONLY | O_NONBLOCK);
    int e = errno;
    if (fd < 0 && e == ELOOP) {
        vdn_fail(err, errlen,
                 "file store %s: %s %s: a symlink on the way; the file store follows no symlinks",
                 fs->root, op, key);
        free(path);
        return -1;
    }
    struct stat sb;
    if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
        close(fd);
        fd = -1;
        e = ENOENT;
    }
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (fd < 0) {
        if (e == ENOENT || e == ENOTDIR || e == EXDEV)
            vdn_fail(err, errlen, "file store %s: %s %s: no such key", fs->root, op, key);
        else
            vdn_fail(err, errlen, "file store %s: %s %s: cannot open %s: %s", fs->root, op, key,
                     path, strerror(e));
    }
    free(path);
    return fd;
}

static int fill_copy(void *user, int fd, char *err, size_t errlen) {
    copy_job *j = user;
    return copy_fd(j->src, fd, j->src_path, "local temp file", err, errlen);
}

static int file_get_file(void *be, const char *key, const char *local_path, char *err,
                         size_t errlen) {
    file_store *fs = be;
    int src = open_object(fs, key, "get", err, errlen);
    if (src < 0) return -1;
    char *path = join(fs->root, key);
    copy_job j = {src, path, key};
    int rc = vdn_store_write_local_atomic(local_path, fill_copy, &j, err, errlen);
    free(path);
    close(src);
    return rc;
}

static int file_get_bytes(void *be, const char *key, void **data, size_t *len, char *err,
                          size_t errlen) {
    file_store *fs = be;
    int fd = open_object(fs, key, "get", err, errlen);
    if (fd < 0) return -1;
    struct stat sb;
    fstat(fd, &sb);
    size_t cap = (size_t)sb.st_size + 1, n = 0;
    char *buf = vdn_xmalloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                close(fd);
                return vdn_fail(err, errlen, "get %s: out of memory", key);
            }
            buf = nb;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return vdn_fail(err, errlen, "file store %s: get %s: read failed: %s", fs->root, key,
                            strerror(e));
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (n == cap) {
        char *nb = realloc(buf, cap + 1);
        if (!nb) {
            free(buf);
            return vdn_fail(err, errlen, "get %s: out of memory", key);
        }
        buf = nb;
    }
    buf[n] = 0; /* callers may treat small objects (JSON records) as strings */
    *data = buf;
    *len = n;
    return 0;
}

/* A key reached through a symlink is not there (a put then replaces the link itself). */
static int file_exists(void *be, const char *key, uint64_t *size, char *err, size_t errlen) {
    file_store *fs = be;
    int fd = vdn_open_beneath(fs->root_fd, key, O_RDONLY | O_NONBLOCK);
    int e = errno;
    struct stat sb;
    int rc;
    if (fd >= 0 && fstat(fd, &sb) == 0) {
        rc = S_ISREG(sb.st_mode) ? 1 : 0;
        if (rc) *size = (uint64_t)sb.st_size;
    } else if (fd < 0 && (e == ENOENT || is_link_errno(e))) {
        rc = 0;
    } else {
        rc = vdn_fail(err, errlen, "file store %s: exists %s: %s", fs->root, key,
                      strerror(fd < 0 ? e : errno));
    }
    if (fd >= 0) close(fd);
    return rc;
}

typedef struct {
    char *key;
    uint64_t size;
} entry;

typedef struct {
    entry *v;
    size_t n, cap;
} entries;

static void push(entries *es, const char *key, uint64_t size) {
    if (es->n == es->cap) {
        es->cap = es->cap ? es->cap * 2 : 64;
        es->v = realloc(es->v, es->cap * sizeof *es->v);
        VDN_ASSERT(es->v);
    }
    es->v[es->n].key = vdn_xstrdup(key);
    es->v[es->n].size = size;
    es->n++;
}

/* Walk root/rel recursively, collecting regular files whose key starts with prefix. */
static int walk(file_store *fs, const char *rel, const char *prefix, entries *es, char *err,
                size_t errlen) {
    char *dir = *rel ? join(fs->root, rel) : vdn_xstrdup(fs->root);
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        free(dir);
        if (e == ENOENT || e == ENOTDIR) return 0; /* nothing under that prefix */
        return vdn_fail(err, errlen, "file store %s: list: cannot open folder %s: %s", fs->root,
                        rel, strerror(e));
    }
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
        if (!*rel && !strcmp(name, VDN_STORE_TMP_DIR)) continue; /* in-flight puts */
        char *key = *rel ? join(rel, name) : vdn_xstrdup(name);
        size_t kl = strlen(key), pl = strlen(prefix);
        /* Descend only where keys under this folder can still match the prefix. */
        int could_match = strncmp(key, prefix, kl < pl ? kl : pl) == 0;
        if (could_match) {
            char *path = join(fs->root, key);
            struct stat sb;
            if (lstat(path, &sb) == 0) {
                if (S_ISDIR(sb.st_mode))
                    rc = walk(fs, key, prefix, es, err, errlen);
                else if (S_ISREG(sb.st_mode) && kl >= pl)
                    push(es, key, (uint64_t)sb.st_size);
            }
            free(path);
        }
        free(key);
        if (rc) break;
    }
    closedir(d);
    free(dir);
    return rc;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const entry *)a)->key, ((const entry *)b)->key);
}

static int file_list(void *be, const char *prefix, vdn_store_list_fn fn, void *user, char *err,
                     size_t errlen) {
    file_store *fs = be;
    entries es = {0};
    int rc = walk(fs, "", prefix, &es, err, errlen);
    if (rc == 0) {
        if (es.n) qsort(es.v, es.n, sizeof *es.v, cmp_entry);
        for (size_t i = 0; i < es.n; i++)
            if (fn(user, es.v[i].key, es.v[i].size)) break;
    }
    for (size_t i = 0; i < es.n; i++)
        free(es.v[i].key);
    free(es.v);
    return rc;
}

static int file_delete(void *be, const char *key, char *err, size_t errlen) {
    file_store *fs = be;
    char *path = join(fs->root, key);
    int rc = 0;
    struct stat sb;
    const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
    char e2[VDN_ERR_LEN];
    int pfd = parent_fd(fs, key, "delete", 0, e2, sizeof e2);
    if (pfd < 0) {
        /* no such folder: nothing to delete; a symlink on the way: refused */
        if (errno != ENOENT) rc = vdn_fail(err, errlen, "%s", e2);
        free(path);
        return rc;
    }
    if (fstatat(pfd, base, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode)) {
        rc = vdn_fail(err, errlen, "file store %s: delete %s: that is a folder, not an object",
                      fs->root, key);
    } else if (unlinkat(pfd, base, 0) != 0 && errno != ENOENT && errno != ENOTDIR) {
        rc = vdn_fail(err, errlen, "file store %s: delete %s: %s", fs->root, key, strerror(errno));
    }
    close(pfd);
    /* Drop folders the delete emptied, like S3 where folders do not exist on their own. */
    for (char *slash = strrchr(path, '/'); rc == 0 && slash && slash > path + strlen(fs->root);
         slash = strrchr(path, '/')) {
        *slash = 0;
        if (rmdir(path) != 0) break;
    }
    free(path);
    return rc;
}

const vdn_store_backend vdn_store_file_backend = {
    .scheme = "file",
    .close = file_close,
    .put_file = file_put_file,
    .put_bytes = file_put_bytes,
    .get_file = file_get_file,
    .get_bytes = file_get_bytes,
    .exists = file_exists,
    .list = file_list,
    .del = file_delete,
};
