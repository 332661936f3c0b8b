/* Local files a request names, read only beneath the worker's --data-root folders: opened from a
 * descriptor of the root without following any symlink (vdn_open_beneath), then copied into the
 * attempt's private scratch; see vdn_root_copy in attempt.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attempt.h"
#include "vdn_util.h"

/* path (absolute) lies lexically under root (as given or resolved): the rest, else NULL. */
static const char *under(const char *path, const char *root) {
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    if (n == 1 && root[0] == '/') return path + 1;
    if (strncmp(path, root, n) || path[n] != '/') return NULL;
    return path + n + 1;
}

/* No "", "." or ".." component: the path names the file it spells. */
static int plain(const char *rel) {
    if (!*rel) return 0;
    for (const char *p = rel;;) {
        size_t n = strcspn(p, "/");
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) return 0;
        if (!p[n]) return 1;
        p += n + 1;
    }
}

static int copy_fd(int in, const char *dest, char *err, size_t errlen) {
    unlink(dest);
    int out = open(dest, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) return vdn_fail(err, errlen, "%s: %s", dest, strerror(errno));
    char buf[1 << 16];
    ssize_t r;
    while ((r = read(in, buf, sizeof buf)) > 0)
        for (ssize_t off = 0, w; off < r; off += w)
            if ((w = write(out, buf + off, (size_t)(r - off))) <= 0) {
                r = -1;
                goto done;
            }
done:;
    int e = errno;
    if (close(out) != 0 && r == 0) r = -1, e = errno;
    if (r < 0) {
        unlink(dest);
        return vdn_fail(err, errlen, "copying into %s: %s", dest, strerror(e));
    }
    return 0;
}

int vdn_root_copy(const char *path, const char *const *roots, int nroots, const char *dest,
                  char *err, size_t errlen) {
    if (nroots == 0)
        return vdn_fail(err, errlen,
                        "local path '%s' refused: this worker takes no local paths (start it "
                        "with --data-root DIR, or name a store URI: s3://BUCKET/KEY or a key in "
                        "the job's store)",
                        path);
    char abs[PATH_MAX], cwd[PATH_MAX];
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd))
        return vdn_fail(err, errlen, "local path '%s': %s", path, strerror(errno));
    if (snprintf(abs, sizeof abs, "%s%s%s", path[0] == '/' ? "" : cwd, path[0] == '/' ? "" : "/",
                 path) >= (int)sizeof abs)
        return vdn_fail(err, errlen, "local path '%s': too long", path);
    for (int i = 0; i < nroots; i++) {
        char real[PATH_MAX];
        const char *rel = under(abs, roots[i]);
        if (!rel && realpath(roots[i], real)) rel = under(abs, real);
        if (!rel) continue;
        if (!plain(rel))
            return vdn_fail(err, errlen,
                            "local path '%s' refused: an empty, '.' or '..' part (name the file "
                            "under --data-root %s as it is)",
                            path, roots[i]);
        int root_fd = open(roots[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
            return vdn_fail(err, errlen, "--data-root %s: %s", roots[i], strerror(errno));
        int fd = vdn_open_beneath(root_fd, rel, O_RDONLY | O_NONBLOCK);
        int e = errno;
        close(root_fd);
        if (fd < 0) {
            if (e == ENOENT)
                return vdn_fail(err, errlen, "local path '%s': no such file on this worker", path);
            if (e == ELOOP || e == ENOTDIR || e == EXDEV)
                return vdn_fail(err, errlen,
                                "local path '%s' refused: a symlink on the way (files under "
                                "--data-root %s are opened without following symlinks)",
                                path, roots[i]);
            return vdn_fail(err, errlen, "local path '%s': %s", path, strerror(e));
        }
        struct stat sb;
        int rc = 0;
        if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
            rc = vdn_fail(err, errlen, "local path '%s': not a regular file", path);
        else if ((uint64_t)sb.st_size > VDN_ROOT_COPY_MAX)
            rc = vdn_fail(err, errlen,
                          "local path '%s': %lld bytes, above the %llu a request's input file "
                          "may have",
                          path, (long long)sb.st_size, (unsigned long long)VDN_ROOT_COPY_MAX);
        else
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        if (!rc) rc = copy_fd(fd, dest, err, errlen);
        close(fd);
        return rc;
    }
    char list[1024] = "";
    for (int i = 0; i < nroots && strlen(list) < sizeof list - 64; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", roots[i]);
    return vdn_fail(err, errlen,
                    "local path '%s' refused: it is outside this worker's --data-root (%s); "
                    "name a path under one of them or a store URI",
                    path, list);
}
