/* `vdn coordinator --http HOST:PORT`: a read-only status page (/), its data (/api/status) and
 * Prometheus metrics (/metrics), and a done job's poster and mp4 (/media/jN/poster.png,
 * /media/jN/video.mp4) from the coordinator's --store: a file store's objects directly, an S3
 * store's through a local cache (media_cache.h). Served by libmicrohttpd on its own thread from a
 * read-only connection to the database (WAL lets it read while the main loop writes); an S3
 * download runs on a thread of its own while its request is suspended, so a slow store never
 * holds up the page or other requests. Loopback only, unless TLS (--http-cert/--http-key) and a
 * bearer token (--http-token-file) are both set. On loopback the Host header must name loopback
 * (a DNS-rebinding page gets 403). The token is taken only from the Authorization header; the
 * page itself (static) needs none, and media are reached by signed links that expire
 * (coord_http_media_sig), since an <img> cannot send a header. */
#ifndef VDN_COORD_HTTP_H
#define VDN_COORD_HTTP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *bind;       /* "127.0.0.1:8080", "[::1]:8080", "0.0.0.0:8443" */
    const char *db_path;    /* opened read-only by the server thread */
    const char *token_file; /* NULL = no token; else requests need it (header only) */
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

/* HMAC-SHA256 (RFC 2104) of msg under key, as 64 hex digits. */
void coord_hmac_sha256_hex(const void *key, size_t keylen, const void *msg, size_t msglen,
                           char out[65]);
/* The signature of a link to job's media that is good until exp (wall seconds): the HMAC of
 * "vdn media jJOB EXP" under the token. */
void coord_http_media_sig(const char *token, uint64_t job, long long exp, char out[65]);
/* How long a link lives: it expires at the end of the hour after the current one, so that a page
 * redrawing every 2 s keeps the same URLs (the browser's cache holds) for an hour. */
#define COORD_HTTP_LINK_HOURS 2

/* The page (http_page.c). */
extern const char coord_http_page[];
extern const char coord_http_job_page[]; /* one job: /job#j=N (http_page.c) */

#endif
