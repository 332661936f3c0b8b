/* `vdn coordinator --http HOST:PORT`: a read-only status page (/), its data (/api/status) and
 * Prometheus metrics (/metrics), and a done job's poster and mp4 from a file store
 * (/media/jN/poster.png, /media/jN/video.mp4), served by libmicrohttpd on its own thread from a
 * read-only connection to the database (WAL lets it read while the main loop writes). Loopback
 * only, unless TLS (--http-cert/--http-key) and a bearer token (--http-token-file) are both set. */
#ifndef VDN_COORD_HTTP_H
#define VDN_COORD_HTTP_H

#include <stddef.h>

typedef struct {
    const char *bind;       /* "127.0.0.1:8080", "[::1]:8080", "0.0.0.0:8443" */
    const char *db_path;    /* opened read-only by the server thread */
    const char *token_file; /* NULL = no token; else requests need it (header or ?token=) */
    const char *tls_cert;   /* PEM files: HTTPS instead of HTTP */
    const char *tls_key;
    const char *store_uri; /* the coordinator's --store: done jobs' poster/mp4 (media.h) */
} coord_http_opts;

typedef struct coord_http coord_http;

/* The options alone (address, non-loopback only with TLS and a token), before anything is
 * opened: 0, or -1 saying what is wrong. */
int coord_http_check(const coord_http_opts *o, char *err, size_t errlen);
/* Checks the options, reads the files, binds, starts. */
coord_http *coord_http_start(const coord_http_opts *o, char *err, size_t errlen);
void coord_http_stop(coord_http *h);

/* The page (http_page.c). */
extern const char coord_http_page[];

#endif
