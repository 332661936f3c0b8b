/* Opening a path beneath a directory descriptor without following any symlink; see vdn_util.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vdn_util.h"

int vdn_open_beneath_walk(int root_fd, const char *rel, int flags, int mkdirs) {
    char part[NAME_MAX + 1];
    int dir = dup(root_fd);
    for (const char *p = rel; dir >= 0;) {
        size_t n = strcspn(p, "/");
        if (n == 0 || n > NAME_MAX || (n == 1 && p[0] == '.') ||
            (n == 2 && p[0] == '.' && p[1] == '.')) {
            close(dir);
            errno = n > NAME_MAX ? ENAMETOOLONG : EXDEV;
            return -1;
        }
        memcpy(part, p, n);
        part[n] = 0;
        int last = p[n] == 0;
        if (mkdirs && mkdirat(dir, part, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            close(dir);
            errno = e;
            return -1;
        }
        int next = openat(dir, part,
                          last ? flags | O_NOFOLLOW | O_CLOEXEC
                               : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(dir);
        if (last || next < 0) {
            errno = e;
            return next;
        }
        dir = next;
        p += n + 1;
    }
    return -1;
}

int vdn_open_beneath(int root_fd, const char *rel, int flags) {
    struct open_how how = {.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
    long fd = syscall(SYS_openat2, root_fd, rel, &how, sizeof how);
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return (int)fd; /* EPERM: seccomp */
    return vdn_open_beneath_walk(root_fd, rel, flags, 0);
}
