/* A done job's product (its poster PNG and its mp4), served read-only by the status page's
 * HTTP server (http.c) from the coordinator's own --store. The client names a job and which of
 * the two it wants, never a key or a path: the key is the one the job's RESULT recorded
 * (jobs.object_keys), checked with the store's key rules. A file store's object is opened under
 * the store's folder one component at a time without following symlinks, so nothing outside the
 * store is served; an S3 store's object is fetched into a local cache first (media_cache.h). */
#ifndef VDN_COORD_MEDIA_H
#define VDN_COORD_MEDIA_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    COORD_MEDIA_NONE, /* no --store: the workers' own stores, unknown here */
    COORD_MEDIA_FILE, /* file:// or a directory: served from it */
    COORD_MEDIA_S3    /* s3://: fetched into the media cache, served from there */
} coord_media_kind;

typedef enum { COORD_MEDIA_POSTER, COORD_MEDIA_VIDEO } coord_media_what;

/* What the store URI (NULL = none) allows; *dir gets the file store's folder (malloc'd). */
coord_media_kind coord_media_kind_of(const char *store_uri, char **dir);

/* "/media/j12/poster.png" or "/media/j12/video.mp4" into the job and what; 0, or -1 for any
 * other URL (the caller answers 404). */
int coord_media_parse_url(const char *url, uint64_t *job, coord_media_what *what);

/* The job's key for what, from its recorded object keys (malloc'd), or NULL with an HTTP status
 * in *status: 404 (no such job, not done, no such output) or 500 (a recorded key that breaks the
 * store's rules: never resolved), the reason in err. */
char *coord_media_job_key(sqlite3 *db, uint64_t job, coord_media_what what, int *status, char *err,
                          size_t errlen);

/* "image/png" or "video/mp4". */
const char *coord_media_type(coord_media_what what);

typedef struct {
    int fd; /* open, read-only, a regular file; the caller owns it */
    uint64_t size;
    const char *content_type;
} coord_media_object;

/* Opens the object of a done job in the file store under dir. Returns an HTTP status: 200 with
 * *out filled, 404 (no such job, not done, no such output, the file is missing) or 500 (a key
 * that breaks the store's rules, an I/O error), with the reason in err. */
int coord_media_open(sqlite3 *db, const char *dir, uint64_t job, coord_media_what what,
                     coord_media_object *out, char *err, size_t errlen);

#endif
