/* `vdn coordinator --http HOST:PORT`: a read-only status page (/), its data (/api/status) and
 * Prometheus metrics (/metrics), and a done job's poster and mp4 (/media/jN/poster.png,
 * /media/jN/video.mp4) from the coordinator's --store: a file store's objects directly, an S3
 * store's through a local cache (media_cache.h). Served by libmicrohttpd on its own thread from a
 * read-only connection to the database (WAL lets it read while the main loop writes); an S3
 * download runs on a thread of its own while its request is suspended, so a slow store never
 * holds up the page or other requests. Loopback only, unless TLS (--http-cert/--http-key) and a
 * bearer token (--http-token-file) are both set. */
#ifndef VDN_COORD_HTTP_H
#define VDN_COORD_HTTP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *bind;       /* "127.0.0.1:8080", "[::1]:8080", "0.0.0.0:8443" */
    const char *db_path;    /* opened read-only by the server thread */
    const char *token_file; /* NULL = no token; else requests need it (header or ?token=) */
    const char *tls_cert;   /* PEM files: HTTPS instead of HTTP */
    const char *tls_key;
    const char *store_uri; /* the coordinator's --store: done jobs' poster/mp4 (media.h) */
    /* S3 store only: the media cache (media_cache.h). NULL dir = DB_PATH.media-cache beside the
     * database; 0 bytes = COORD_HTTP_MEDIA_CACHE_MB; 0 seconds = COORD_HTTP_STORE_RETRY_S. */
    const char *media_cache_dir;
    uint64_t media_cache_bytes;
    double store_retry_seconds;
} coord_http_opts;

#define COORD_HTTP_MEDIA_CACHE_MB 2048
/* A page waits for its posters: a store that does not answer gets this long (of retries), not
 * the worker's 120 s, before the request is answered 502. */
#define COORD_HTTP_STORE_RETRY_S 10.0

typedef struct coord_http coord_http;

/* The options alone (address, non-loopback only with TLS and a token), before anything is
 * opened: 0, or -1 saying what is wrong. */
int coord_http_check(const coord_http_opts *o, char *err, size_t errlen);
/* Checks the options, reads the files, opens the media cache (an S3 store), binds, starts. */
coord_http *coord_http_start(const coord_http_opts *o, char *err, size_t errlen);
/* Waits for S3 downloads in progress (each bounded by the store's retry budget), then stops. */
void coord_http_stop(coord_http *h);

/* The page (http_page.c). */
extern const char coord_http_page[];

#endif
