#include "media_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "vdn_util.h"

/* 64 hex digits of SHA-256, ".png"/".mp4"/".bin", NUL */
#define NAME_LEN 72
#define MAX_FAILURES 64

typedef struct {
    char name[NAME_LEN];
    uint64_t size;
    uint64_t used; /* the cache's clock when last served: the smallest goes first */
} entry;

/* A download in progress; requests for the same object wait for it instead of fetching it too.
 * The fetching thread unlists it when done; the last of it and its waiters frees it. */
typedef struct flight {
    char name[NAME_LEN];
    int done, status, waiters;
    char err[VDN_ERR_LEN];
    struct flight *next;
} flight;

typedef struct {
    char name[NAME_LEN];
    int status;
    double until; /* monotonic; answered from here until then */
    char err[VDN_ERR_LEN];
} failure;

struct coord_media_cache {
    char *dir, *store_uri;
    int dirfd, lockfd;
    vdn_store *st;
    uint64_t max_bytes, bytes, clock, fetches;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    entry *e;
    size_t n, cap;
    flight *flights;
    failure fail[MAX_FAILURES];
};

/* The copy's file name: SHA-256 of "STORE_URI\nKEY" plus the key's extension, so it is always
 * a plain name (no '/', no leading '.') whatever the key, and unique per store and key. */
static void name_of(const coord_media_cache *c, const char *key, char name[NAME_LEN]) {
    size_t ul = strlen(c->store_uri), kl = strlen(key);
    char *s = vdn_xmalloc(ul + 1 + kl);
    memcpy(s, c->store_uri, ul);
    s[ul] = '\n';
    memcpy(s + ul + 1, key, kl);
    char hex[65];
    vdn_sha256_hex(s, ul + 1 + kl, hex);
    free(s);
    const char *dot = strrchr(key, '.');
    const char *ext = dot && (!strcmp(dot, ".png") || !strcmp(dot, ".mp4")) ? dot : ".bin";
    snprintf(name, NAME_LEN, "%s%s", hex, ext);
}

/* A name this cache writes: 64 lowercase hex digits and one of its extensions. */
static int is_copy_name(const char *n) {
    if (strlen(n) != 68) return 0;
    for (int i = 0; i < 64; i++)
        if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f'))) return 0;
    return !strcmp(n + 64, ".png") || !strcmp(n + 64, ".mp4") || !strcmp(n + 64, ".bin");
}

static long find(const coord_media_cache *c, const char *name) {
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->e[i].name, name)) return (long)i;
    return -1;
}

static void add(coord_media_cache *c, const char *name, uint64_t size, uint64_t used) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        entry *e = vdn_xcalloc(c->cap, sizeof *e);
        if (c->n) memcpy(e, c->e, c->n * sizeof *e);
        free(c->e);
        c->e = e;
    }
    snprintf(c->e[c->n].name, NAME_LEN, "%s", name);
    c->e[c->n].size = size;
    c->e[c->n].used = used;
    c->n++;
    c->bytes += size;
}

/* Unlists copy i, and deletes its file when unlink is set. A request serving it keeps its open
 * descriptor: the bytes stay readable until it closes. */
static void drop(coord_media_cache *c, size_t i, int unlink) {
    if (unlink && unlinkat(c->dirfd, c->e[i].name, 0) && errno != ENOENT)
        VDN_WARN("media cache %s: cannot delete %s: %s", c->dir, c->e[i].name, strerror(errno));
    c->bytes -= c->e[i].size;
    c->e[i] = c->e[--c->n];
}

/* Deletes the least recently served copies (never keep, when given) until the kept ones add up
 * to at most limit. */
static void evict_to(coord_media_cache *c, uint64_t limit, const char *keep) {
    while (c->bytes > limit) {
        long oldest = -1;
        for (size_t i = 0; i < c->n; i++)
            if ((!keep || strcmp(c->e[i].name, keep)) &&
                (oldest < 0 || c->e[i].used < c->e[oldest].used))
                oldest = (long)i;
        if (oldest < 0) return;
        VDN_DEBUG("media cache %s: evicting %s (%llu bytes, least recently served)", c->dir,
                  c->e[oldest].name, (unsigned long long)c->e[oldest].size);
        drop(c, (size_t)oldest, 1);
    }
}

/* The file called name in the folder, opened read-only without following a symlink: 0 with *fd
 * (a regular file) and *size, or -1 with errno (ELOOP: a symlink; EINVAL: not a regular file). */
static int open_name(const coord_media_cache *c, const char *name, int *fd, uint64_t *size) {
    int f = openat(c->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (f < 0) return -1;
    struct stat sb;
    if (fstat(f, &sb) || !S_ISREG(sb.st_mode)) {
        close(f);
        errno = EINVAL;
        return -1;
    }
    *fd = f;
    *size = (uint64_t)sb.st_size;
    return 0;
}

/* Opens copy i and marks it as just served (also its mtime, which orders the copies found at the
 * next start). A copy whose file went away, or turned into something else, is unlisted: -1. */
static int open_copy(coord_media_cache *c, size_t i, int *fd, uint64_t *size) {
    if (open_name(c, c->e[i].name, fd, size)) {
        VDN_WARN("media cache %s: %s is gone or not a regular file (%s): fetching it again", c->dir,
                 c->e[i].name, strerror(errno));
        drop(c, i, errno != ENOENT);
        return -1;
    }
    c->e[i].used = ++c->clock;
    futimens(*fd, NULL); /* best effort: only the order after a restart depends on it */
    return 0;
}

static failure *failed(coord_media_cache *c, const char *name) {
    double now = vdn_now();
    for (int i = 0; i < MAX_FAILURES; i++)
        if (c->fail[i].until > now && !strcmp(c->fail[i].name, name)) return &c->fail[i];
    return NULL;
}

static void remember_failure(coord_media_cache *c, const char *name, int status, const char *err) {
    int slot = 0; /* an expired slot, else the one that expires first */
    for (int i = 1; i < MAX_FAILURES; i++)
        if (c->fail[i].until < c->fail[slot].until) slot = i;
    snprintf(c->fail[slot].name, NAME_LEN, "%s", name);
    snprintf(c->fail[slot].err, sizeof c->fail[slot].err, "%s", err);
    c->fail[slot].status = status;
    c->fail[slot].until = vdn_now() + COORD_MEDIA_CACHE_RETRY_S;
}

/* Downloads key into the folder as name: HEAD first (which tells a missing object, 404, from a
 * store that does not answer, 502, and gives the size to make room for), then the GET into a
 * temp file renamed into place. Runs without the lock. */
static int download(coord_media_cache *c, const char *key, const char *name, char *err,
                    size_t errlen) {
    char e2[VDN_ERR_LEN];
    uint64_t size = 0;
    int ex = vdn_store_exists(c->st, key, &size, e2, sizeof e2);
    if (ex == 0) return vdn_fail(err, errlen, "%s is not in the store %s", key, c->store_uri), 404;
    if (ex < 0)
        return vdn_fail(err, errlen, "cannot reach %s in the store %s: %s", key, c->store_uri, e2),
               502;
    pthread_mutex_lock(&c->mu);
    if (size <= c->max_bytes) evict_to(c, c->max_bytes - size, NULL);
    pthread_mutex_unlock(&c->mu);
    char path[4096 + NAME_LEN];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    double t0 = vdn_now();
    if (vdn_store_get_file(c->st, key, path, e2, sizeof e2))
        return vdn_fail(err, errlen, "cannot fetch %s from the store %s: %s", key, c->store_uri,
                        e2),
               502;
    VDN_INFO("media cache %s: fetched %s (%llu bytes) from %s in %.2f s", c->dir, key,
             (unsigned long long)size, c->store_uri, vdn_now() - t0);
    return 200;
}

int coord_media_cache_lookup(coord_media_cache *c, const char *key, int *fd, uint64_t *size) {
    char name[NAME_LEN];
    name_of(c, key, name);
    pthread_mutex_lock(&c->mu);
    long i = find(c, name);
    int hit = i >= 0 && !open_copy(c, (size_t)i, fd, size);
    pthread_mutex_unlock(&c->mu);
    return hit;
}

int coord_media_cache_get(coord_media_cache *c, const char *key, int *fd, uint64_t *size, char *err,
                          size_t errlen) {
    char name[NAME_LEN];
    name_of(c, key, name);
    pthread_mutex_lock(&c->mu);
    flight *fl;
    for (;;) {
        long i = find(c, name);
        if (i >= 0 && !open_copy(c, (size_t)i, fd, size)) {
            pthread_mutex_unlock(&c->mu);
            return 200;
        }
        const failure *f = failed(c, name);
        if (f) {
            int status = f->status;
            vdn_fail(err, errlen, "%s (the last try, under %.0f s ago)", f->err,
                     COORD_MEDIA_CACHE_RETRY_S);
            pthread_mutex_unlock(&c->mu);
            return status;
        }
        for (fl = c->flights; fl && strcmp(fl->name, name); fl = fl->next)
            ;
        if (!fl) break;
        fl->waiters++;
        while (!fl->done)
            pthread_cond_wait(&c->cv, &c->mu);
        int status = fl->status;
        if (status != 200) vdn_fail(err, errlen, "%s", fl->err);
        if (--fl->waiters == 0) free(fl);
        if (status != 200) {
            pthread_mutex_unlock(&c->mu);
            return status;
        }
        /* fetched: look again (an object too large to keep is fetched again for us) */
    }
    fl = vdn_xcalloc(1, sizeof *fl);
    snprintf(fl->name, NAME_LEN, "%s", name);
    fl->next = c->flights;
    c->flights = fl;
    pthread_mutex_unlock(&c->mu);

    int status = download(c, key, name, fl->err, sizeof fl->err);
    int got = -1;
    uint64_t sz = 0;
    if (status == 200 && open_name(c, name, &got, &sz)) {
        status = 500;
        vdn_fail(fl->err, sizeof fl->err, "media cache %s: %s vanished after its download: %s",
                 c->dir, name, strerror(errno));
    }

    pthread_mutex_lock(&c->mu);
    if (status == 200) {
        c->fetches++;
        if (sz > c->max_bytes) { /* alone larger than the cache: served, not kept */
            VDN_INFO("media cache %s: %s (%llu bytes) is larger than the whole cache "
                     "(--media-cache-mb): served, not kept",
                     c->dir, key, (unsigned long long)sz);
            unlinkat(c->dirfd, name, 0);
        } else {
            add(c, name, sz, ++c->clock);
            evict_to(c, c->max_bytes, name);
        }
        *fd = got;
        *size = sz;
    } else {
        /* logged here, once per failed fetch; its waiters and the requests answered from
         * memory until the next try are not logged again */
        VDN_WARN("http: media: %s", fl->err);
        remember_failure(c, name, status, fl->err);
        vdn_fail(err, errlen, "%s", fl->err);
    }
    fl->done = 1;
    fl->status = status;
    for (flight **p = &c->flights; *p; p = &(*p)->next)
        if (*p == fl) {
            *p = fl->next;
            break;
        }
    pthread_cond_broadcast(&c->cv);
    if (fl->waiters == 0) free(fl);
    pthread_mutex_unlock(&c->mu);
    return status;
}

/* The copies already in the folder (a restart keeps them: they never go stale), oldest mtime
 * first; temp files of downloads a crash cut short are deleted. */
static int scan(coord_media_cache *c, char *err, size_t errlen) {
    int fd = openat(c->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return vdn_fail(err, errlen, "--media-cache %s: cannot list it: %s", c->dir,
                        strerror(errno));
    }
    typedef struct {
        char name[NAME_LEN];
        uint64_t size;
        double mtime;
    } found;
    found *fs = NULL;
    size_t nf = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        struct stat sb;
        if (strstr(de->d_name, ".vdn-part-")) {
            if (unlinkat(c->dirfd, de->d_name, 0) == 0)
                VDN_INFO("media cache %s: deleted %s, left by a download cut short", c->dir,
                         de->d_name);
            continue;
        }
        if (!is_copy_name(de->d_name) || fstatat(c->dirfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) ||
            !S_ISREG(sb.st_mode))
            continue; /* not ours (symlinks included): neither served nor counted */
        if (nf == cap) {
            cap = cap ? 2 * cap : 64;
            found *g = vdn_xcalloc(cap, sizeof *g);
            if (nf) memcpy(g, fs, nf * sizeof *g);
            free(fs);
            fs = g;
        }
        snprintf(fs[nf].name, NAME_LEN, "%s", de->d_name);
        fs[nf].size = (uint64_t)sb.st_size;
        fs[nf].mtime = (double)sb.st_mtim.tv_sec + 1e-9 * (double)sb.st_mtim.tv_nsec;
        nf++;
    }
    closedir(d);
    /* insertion sort by mtime: the cache holds at most a few thousand copies */
    for (size_t i = 1; i < nf; i++)
        for (size_t j = i; j > 0 && fs[j].mtime < fs[j - 1].mtime; j--) {
            found t = fs[j];
            fs[j] = fs[j - 1];
            fs[j - 1] = t;
        }
    for (size_t i = 0; i < nf; i++)
        add(c, fs[i].name, fs[i].size, ++c->clock);
    free(fs);
    evict_to(c, c->max_bytes, NULL);
    return 0;
}

coord_media_cache *coord_media_cache_open(const coord_media_cache_opts *o, char *err,
                                          size_t errlen) {
    if (!o->dir || !*o->dir || strlen(o->dir) > 4000 || !o->max_bytes) {
        vdn_fail(err, errlen, "--media-cache: a folder and a size above 0 are needed");
        return NULL;
    }
    coord_media_cache *c = vdn_xcalloc(1, sizeof *c);
    c->dir = vdn_xstrdup(o->dir);
    c->store_uri = vdn_xstrdup(o->store_uri);
    c->max_bytes = o->max_bytes;
    c->dirfd = c->lockfd = -1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (mkdir(c->dir, 0700) && errno != EEXIST) {
        vdn_fail(err, errlen, "--media-cache %s: cannot create it: %s", c->dir, strerror(errno));
        goto fail;
    }
    if ((c->dirfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        vdn_fail(err, errlen, "--media-cache %s: not a folder we can open: %s", c->dir,
                 strerror(errno));
        goto fail;
    }
    /* two processes evicting each other's files would break both bounds */
    c->lockfd = openat(c->dirfd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (c->lockfd < 0 || flock(c->lockfd, LOCK_EX | LOCK_NB)) {
        vdn_fail(err, errlen, "--media-cache %s: %s", c->dir,
                 c->lockfd < 0 ? strerror(errno)
                               : "another coordinator uses this media cache (.lock is held)");
        goto fail;
    }
    vdn_store_opts so = {.retry_max_seconds = o->retry_seconds};
    char e2[VDN_ERR_LEN];
    if (!(c->st = vdn_store_open(o->store_uri, &so, e2, sizeof e2))) {
        vdn_fail(err, errlen, "--store %s: %s", o->store_uri, e2);
        goto fail;
    }
    if (scan(c, err, errlen)) goto fail;
    VDN_INFO("media cache %s: %zu copies, %.1f of %.1f MiB, for %s", c->dir, c->n,
             (double)c->bytes / 1048576.0, (double)c->max_bytes / 1048576.0, c->store_uri);
    return c;
fail:
    coord_media_cache_close(c);
    return NULL;
}

void coord_media_cache_close(coord_media_cache *c) {
    if (!c) return;
    vdn_store_close(c->st);
    if (c->dirfd >= 0) close(c->dirfd);
    if (c->lockfd >= 0) close(c->lockfd);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->e);
    free(c->dir);
    free(c->store_uri);
    free(c);
}

void coord_media_cache_stats_get(coord_media_cache *c, coord_media_cache_stats *s) {
    pthread_mutex_lock(&c->mu);
    s->max_bytes = c->max_bytes;
    s->bytes = c->bytes;
    s->objects = c->n;
    s->fetches = c->fetches;
    pthread_mutex_unlock(&c->mu);
}
