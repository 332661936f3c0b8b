#include "media.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db.h"
#include "store.h"
#include "vdn_util.h"

coord_media_kind coord_media_kind_of(const char *store_uri, char **dir) {
    *dir = NULL;
    if (!store_uri || !*store_uri) return COORD_MEDIA_NONE;
    if (!strncmp(store_uri, "s3://", 5)) return COORD_MEDIA_S3;
    /* store.c's rule: file://DIR or a plain directory; any other scheme is not a file store */
    if (strstr(store_uri, "://") && strncmp(store_uri, "file://", 7)) return COORD_MEDIA_NONE;
    const char *d = strncmp(store_uri, "file://", 7) ? store_uri : store_uri + 7;
    if (!*d) return COORD_MEDIA_NONE;
    *dir = vdn_xstrdup(d);
    return COORD_MEDIA_FILE;
}

int coord_media_parse_url(const char *url, uint64_t *job, coord_media_what *what) {
    if (strncmp(url, "/media/j", 8)) return -1;
    const char *p = url + 8;
    uint64_t v = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (digits >= 18) return -1; /* ids are SQLite integers: never this long */
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (!digits || !v) return -1;
    if (!strcmp(p, "/poster.png"))
        *what = COORD_MEDIA_POSTER;
    else if (!strcmp(p, "/video.mp4"))
        *what = COORD_MEDIA_VIDEO;
    else
        return -1;
    *job = v;
    return 0;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

const char *coord_media_type(coord_media_what what) {
    return what == COORD_MEDIA_POSTER ? "image/png" : "video/mp4";
}

char *coord_media_job_key(sqlite3 *db, uint64_t job, coord_media_what what, int *status, char *err,
                          size_t errlen) {
    const char *suffix = what == COORD_MEDIA_POSTER ? ".png" : ".mp4";
    sqlite3_stmt *st =
        cdb_prep(db, "SELECT state, object_keys FROM jobs WHERE id=?", "i", (int64_t)job);
    char *key = NULL;
    *status = 404;
    if (!st || sqlite3_step(st) != SQLITE_ROW) {
        vdn_fail(err, errlen, "no job j%llu", (unsigned long long)job);
    } else if (strcmp((const char *)sqlite3_column_text(st, 0), "done")) {
        vdn_fail(err, errlen, "job j%llu is %s, not done: it has no outputs to show",
                 (unsigned long long)job, (const char *)sqlite3_column_text(st, 0));
    } else {
        cJSON *keys = cJSON_Parse((const char *)sqlite3_column_text(st, 1));
        const cJSON *k;
        cJSON_ArrayForEach(k, keys) if (cJSON_IsString(k) && ends_with(k->valuestring, suffix)) {
            key = vdn_xstrdup(k->valuestring);
            break;
        }
        cJSON_Delete(keys);
        if (!key)
            vdn_fail(err, errlen, "job j%llu stored no %s (a render without a video VAE)",
                     (unsigned long long)job, suffix);
    }
    sqlite3_finalize(st);
    char kerr[VDN_ERR_LEN];
    if (key && vdn_store_check_key(key, kerr, sizeof kerr)) {
        /* the database names a key the store would refuse: never resolve it */
        vdn_fail(err, errlen, "job j%llu: recorded key refused: %s", (unsigned long long)job, kerr);
        *status = 500;
        free(key);
        key = NULL;
    }
    return key;
}

/* dir/key opened one component at a time with O_NOFOLLOW: a symlink anywhere under the store
 * (planted or not) is refused instead of followed out of it. The key has passed the store's
 * rules, so it has no "..", "." or empty segments. -1 with errno set on failure. */
static int open_beneath(const char *dir, const char *key) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char *k = vdn_xstrdup(key), *save = NULL;
    for (char *seg = strtok_r(k, "/", &save); fd >= 0 && seg;) {
        char *next = strtok_r(NULL, "/", &save);
        int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (next ? O_DIRECTORY : O_NONBLOCK);
        int child = openat(fd, seg, flags);
        int e = errno;
        close(fd);
        fd = child;
        errno = e;
        seg = next;
    }
    free(k);
    return fd;
}

int coord_media_open(sqlite3 *db, const char *dir, uint64_t job, coord_media_what what,
                     coord_media_object *out, char *err, size_t errlen) {
    int status;
    char *key = coord_media_job_key(db, job, what, &status, err, errlen);
    if (!key) return status;
    int fd = open_beneath(dir, key);
    int e = errno;
    struct stat sb;
    status = 200;
    if (fd < 0) {
        status = e == ENOENT ? 404 : 500;
        vdn_fail(err, errlen, "job j%llu: %s in the store %s: %s", (unsigned long long)job, key,
                 dir, e == ELOOP ? "a symlink, not served" : strerror(e));
    } else if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        status = 500;
        vdn_fail(err, errlen, "job j%llu: %s in the store %s is not a regular file",
                 (unsigned long long)job, key, dir);
    }
    free(key);
    if (status != 200) {
        if (fd >= 0) close(fd);
        return status;
    }
    out->fd = fd;
    out->size = (uint64_t)sb.st_size;
    out->content_type = coord_media_type(what);
    return 200;
}
