/* The status page's local copies of an S3 store's media (http.c, media.h): a done job's poster
 * and mp4 are fetched from the store once, into a folder on the coordinator's disk, and served
 * from there with the same descriptor + byte-range path as a file store's objects. A done job's
 * outputs never change (only failed or cancelled jobs are retried, and their keys name the job),
 * so a copy never goes stale: it is served without asking the store again, across restarts too.
 *
 * - Each copy is named by the SHA-256 of the store URI and the key, plus the key's extension: a
 *   cache folder reused with another store never serves the first store's objects.
 * - A download goes to a temp name beside its final name and is renamed into place once whole
 *   (vdn_store_get_file), and only then listed: no request ever sees half a file. One download
 *   per object at a time: a request for an object being fetched waits for that fetch.
 * - Bounded: the kept copies add up to at most max_bytes; the least recently served go first.
 *   Room is made before a download starts. An object larger than the whole cache is fetched,
 *   served from its open descriptor and not kept. Downloads still running are not counted.
 * - Files are opened relative to the folder with O_NOFOLLOW, so a symlink planted there is never
 *   followed (nor counted); temp files a crash left behind are removed at open. One coordinator
 *   per folder (a lock file, .lock, says so).
 * - A failure (the object missing, the store unreachable or refusing) is logged once, when it
 *   happens, and remembered for COORD_MEDIA_CACHE_RETRY_S: requests meanwhile get the same
 *   answer without asking the store, so a page that redraws every 2 s neither hammers a store
 *   that is down nor fills the log.
 * Thread-safe: lookups run on the HTTP server's thread, fetches on their own threads; the lock is
 * never held across a network request. */
#ifndef VDN_COORD_MEDIA_CACHE_H
#define VDN_COORD_MEDIA_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define COORD_MEDIA_CACHE_RETRY_S 10.0

typedef struct coord_media_cache coord_media_cache;

typedef struct {
    const char *dir;       /* the cache folder; created (mode 0700) when missing */
    uint64_t max_bytes;    /* > 0 */
    const char *store_uri; /* s3://bucket/prefix, opened with the store's usual settings */
    double retry_seconds;  /* the store's retry budget for one request (vdn_store_opts) */
} coord_media_cache_opts;

/* Opens the store (no request is made yet) and the folder, lists the copies already there and
 * trims them to max_bytes. NULL with the reason in err (naming the folder or the store). */
coord_media_cache *coord_media_cache_open(const coord_media_cache_opts *o, char *err,
                                          size_t errlen);
void coord_media_cache_close(coord_media_cache *c);

/* A copy of key already here: 1 with *fd open read-only (the caller closes it) and *size, marked
 * as just used; 0 when there is none. Never waits for the network. */
int coord_media_cache_lookup(coord_media_cache *c, const char *key, int *fd, uint64_t *size);

/* The copy of key, fetched from the store first when there is none: blocks for as long as the
 * store takes (its retry budget), so call it off the HTTP server's thread. Returns an HTTP
 * status: 200 with *fd and *size as above; 404 the store has no such object; 502 the store did
 * not answer or refused; 500 a local error (the cache folder). err says which key of which store
 * and why, never with credentials (store.h). */
int coord_media_cache_get(coord_media_cache *c, const char *key, int *fd, uint64_t *size, char *err,
                          size_t errlen);

typedef struct {
    uint64_t max_bytes, bytes; /* the bound, and what the kept copies add up to */
    uint64_t objects;          /* copies kept */
    uint64_t fetches;          /* objects downloaded from the store since the start */
} coord_media_cache_stats;

void coord_media_cache_stats_get(coord_media_cache *c, coord_media_cache_stats *s);

#endif
