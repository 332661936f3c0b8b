#include "http.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "media.h"
#include "metrics.h"
#include "pbjson.h"
#include "query.h"
#include "range.h"
#include "vdn_util.h"

struct coord_http {
    struct MHD_Daemon *d;
    char *db_path;
    sqlite3 *db; /* opened on the server thread at the first request */
    char *token;
    char *cert, *key;
    coord_media_kind media;
    char *store_uri;
    char *store_dir; /* COORD_MEDIA_FILE: the folder served from */
};

/* "HOST:PORT" or "[V6]:PORT" into a socket address. */
static int parse_bind(const char *bind, struct sockaddr_storage *ss, int *loopback, char *err,
                      size_t errlen) {
    char host[256];
    const char *colon = strrchr(bind, ':');
    if (!colon || colon == bind || strlen(bind) >= sizeof host)
        return vdn_fail(err, errlen, "--http '%s': expected HOST:PORT (e.g. 127.0.0.1:8080)", bind);
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || port < 1 || port > 65535)
        return vdn_fail(err, errlen, "--http '%s': port must be 1..65535", bind);
    snprintf(host, sizeof host, "%.*s", (int)(colon - bind), bind);
    if (!strcmp(host, "localhost")) snprintf(host, sizeof host, "127.0.0.1");
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    size_t hl = strlen(host);
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        host[hl - 1] = 0;
        if (inet_pton(AF_INET6, host + 1, &v6->sin6_addr) != 1)
            return vdn_fail(err, errlen, "--http '%s': bad IPv6 address", bind);
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
        return 0;
    }
    if (inet_pton(AF_INET, host, &v4->sin_addr) != 1)
        return vdn_fail(err, errlen, "--http '%s': '%s' is not an IPv4 address", bind, host);
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    *loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    return 0;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result text(struct MHD_Connection *conn, unsigned status, const char *msg) {
    return reply(conn, status, "text/plain; charset=utf-8", vdn_xstrdup(msg), strlen(msg));
}

/* Constant-time: how long the comparison takes says nothing about the token. */
static int token_ok(const coord_http *h, struct MHD_Connection *conn) {
    if (!h->token) return 1;
    const char *given = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "token");
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (auth && !strncmp(auth, "Bearer ", 7)) given = auth + 7;
    if (!given) return 0;
    size_t n = strlen(h->token), m = strlen(given);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)h->token[i] ^ (unsigned char)(i < m ? given[i] : 0);
    return diff == 0;
}

static void add_msg(cJSON *arr, const ProtobufCMessage *m) {
    cJSON_AddItemToArray(arr, vdn_pb_to_json(m));
}

/* What the page can do with a done job's outputs: "served" (links to /media/), "s3" (show
 * the store URI and keys), "none" (no --store: the workers' own stores). */
static void add_media(cJSON *o, const coord_http *h) {
    cJSON *m = cJSON_AddObjectToObject(o, "media");
    cJSON_AddStringToObject(m, "mode",
                            h->media == COORD_MEDIA_FILE ? "served"
                            : h->media == COORD_MEDIA_S3 ? "s3"
                                                         : "none");
    /* a store URI never holds credentials (store.h), so the page may show it */
    if (h->store_uri) cJSON_AddStringToObject(m, "store", h->store_uri);
}

/* The page's data: the newest batches with their jobs, and every worker. */
static char *status_json(sqlite3 *db, const coord_http *h) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "now", vdn_wall());
    add_media(o, h);
    cJSON *batches = cJSON_AddArrayToObject(o, "batches");
    cJSON *jobs = cJSON_AddArrayToObject(o, "jobs");
    cJSON *workers = cJSON_AddArrayToObject(o, "workers");
    Vdn__ListReply *l = query_list(db, NULL, 20);
    size_t njobs = 0;
    for (size_t i = 0; l && i < l->n_batches; i++) {
        add_msg(batches, &l->batches[i]->base);
        char err[VDN_ERR_LEN];
        if (njobs >= 1000) continue; /* the page stays light on a huge farm */
        Vdn__StatusReply *s =
            query_status(db, 'b', (int64_t)l->batches[i]->batch_id, err, sizeof err);
        for (size_t k = 0; s && k < s->n_jobs && njobs < 1000; k++, njobs++)
            add_msg(jobs, &s->jobs[k]->base);
        if (s) protobuf_c_message_free_unpacked(&s->base, NULL);
    }
    if (l) protobuf_c_message_free_unpacked(&l->base, NULL);
    Vdn__WorkersReply *w = query_workers(db);
    for (size_t i = 0; w && i < w->n_workers; i++)
        add_msg(workers, &w->workers[i]->base);
    if (w) protobuf_c_message_free_unpacked(&w->base, NULL);
    char *out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return out;
}

/* The headers every media answer carries (200, 206 and 416 alike). */
static void media_headers(struct MHD_Response *r, const char *type) {
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "private, max-age=86400");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
}

/* 416: the one range asked for selects no byte; Content-Range names the length (RFC 9110
 * 15.5.17) so the browser can ask again. */
static enum MHD_Result unsatisfiable(struct MHD_Connection *conn, const coord_media_object *o) {
    char cr[64], msg[96];
    snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)o->size);
    snprintf(msg, sizeof msg, "range not satisfiable: the object has %llu bytes\n",
             (unsigned long long)o->size);
    close(o->fd);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(msg), vdn_xstrdup(msg), MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
    enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_RANGE_NOT_SATISFIABLE, r);
    MHD_destroy_response(r);
    return rc;
}

/* Which bytes to send: the whole object, or the one range the Range header asks for (range.h).
 * An If-Range makes the range conditional on a validator; these responses carry none (no ETag,
 * no Last-Modified), so no If-Range can match and RFC 9110 13.1.5 says send it all. */
static coord_range_result wanted_range(struct MHD_Connection *conn, uint64_t size, uint64_t *first,
                                       uint64_t *len) {
    const char *range = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
    if (MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_RANGE)) range = NULL;
    return coord_range_parse(range, size, first, len);
}

/* A done job's poster or mp4, streamed from the file store, whole or one byte range (a browser's
 * <video> seeks with "Range: bytes=A-"). Outputs of a done job never change (a retry is only for
 * failed or cancelled jobs), so the browser may keep them: the page redraws every 2 s without
 * fetching the images again. */
static enum MHD_Result media(coord_http *h, struct MHD_Connection *conn, uint64_t job,
                             coord_media_what what) {
    char err[VDN_ERR_LEN], msg[VDN_ERR_LEN + 2];
    if (h->media != COORD_MEDIA_FILE)
        return text(conn, 404,
                    h->media == COORD_MEDIA_S3
                        ? "outputs are in S3: this server serves only a file store's\n"
                        : "the coordinator has no --store: outputs are in the workers' stores\n");
    coord_media_object o;
    int status = coord_media_open(h->db, h->store_dir, job, what, &o, err, sizeof err);
    if (status != 200) {
        if (status >= 500) VDN_WARN("http: %s", err);
        snprintf(msg, sizeof msg, "%s\n", err);
        return text(conn, (unsigned)status, msg);
    }
    uint64_t first = 0, len = o.size;
    coord_range_result rr = wanted_range(conn, o.size, &first, &len);
    if (rr == COORD_RANGE_UNSATISFIABLE) return unsatisfiable(conn, &o);
    if (rr != COORD_RANGE_PARTIAL) first = 0, len = o.size;
    /* libmicrohttpd sends [first, first + len) of the file (sendfile where it can) and closes
     * the descriptor with the response */
    struct MHD_Response *r = MHD_create_response_from_fd_at_offset64(len, o.fd, first);
    if (!r) {
        close(o.fd);
        return text(conn, 500, "cannot stream the object\n");
    }
    media_headers(r, o.content_type);
    if (rr == COORD_RANGE_PARTIAL) {
        char cr[80];
        snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)first,
                 (unsigned long long)(first + len - 1), (unsigned long long)o.size);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
    }
    enum MHD_Result rc =
        MHD_queue_response(conn, rr == COORD_RANGE_PARTIAL ? MHD_HTTP_PARTIAL_CONTENT : 200, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_len, void **state) {
    (void)version, (void)upload;
    coord_http *h = cls;
    if (*state == NULL) { /* first call: headers only; answer on the second */
        *state = h;
        return MHD_YES;
    }
    if (*upload_len) return text(conn, 413, "this server takes no request bodies\n");
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return text(conn, 405, "read-only: GET only\n");
    if (!token_ok(h, conn))
        return text(conn, 401, "token required: Authorization: Bearer TOKEN or ?token=TOKEN\n");
    if (!strcmp(url, "/") || !strcmp(url, "/index.html"))
        return reply(conn, 200, "text/html; charset=utf-8", vdn_xstrdup(coord_http_page),
                     strlen(coord_http_page));
    char err[VDN_ERR_LEN];
    if (!h->db && !(h->db = cdb_open(h->db_path, 1, err, sizeof err))) {
        VDN_WARN("http: %s", err);
        return text(conn, 503, "database not readable yet\n");
    }
    if (!strcmp(url, "/metrics")) {
        char *m = coord_metrics_text(h->db);
        return reply(conn, 200, "text/plain; version=0.0.4; charset=utf-8", m, strlen(m));
    }
    if (!strcmp(url, "/api/status")) {
        char *j = status_json(h->db, h);
        return reply(conn, 200, "application/json", j, strlen(j));
    }
    uint64_t job;
    coord_media_what what;
    if (!coord_media_parse_url(url, &job, &what)) return media(h, conn, job, what);
    return text(conn, 404, "not found: try /, /api/status, /metrics or /media/jN/poster.png\n");
}

static char *read_text(const char *path, const char *what, char *err, size_t errlen) {
    size_t len;
    char e2[VDN_ERR_LEN];
    char *t = vdn_read_file(path, &len, e2, sizeof e2);
    if (!t) return vdn_fail(err, errlen, "%s: %s", what, e2), NULL;
    return t;
}

void coord_http_stop(coord_http *h) {
    if (!h) return;
    if (h->d) MHD_stop_daemon(h->d);
    if (h->db) cdb_close(h->db);
    if (h->token) memset(h->token, 0, strlen(h->token));
    free(h->token);
    free(h->cert);
    if (h->key) memset(h->key, 0, strlen(h->key));
    free(h->key);
    free(h->db_path);
    free(h->store_uri);
    free(h->store_dir);
    free(h);
}

static int check(const coord_http_opts *o, struct sockaddr_storage *ss, char *err, size_t errlen) {
    int loopback = 0;
    if (parse_bind(o->bind, ss, &loopback, err, errlen)) return -1;
    if ((o->tls_cert != NULL) != (o->tls_key != NULL))
        return vdn_fail(err, errlen, "--http-cert and --http-key go together");
    if (!loopback && !(o->tls_cert && o->token_file))
        return vdn_fail(err, errlen,
                        "--http %s is not a loopback address: the page is served beyond this "
                        "machine only over TLS with a token (--http-cert, --http-key, "
                        "--http-token-file)",
                        o->bind);
    return 0;
}

int coord_http_check(const coord_http_opts *o, char *err, size_t errlen) {
    struct sockaddr_storage ss;
    return check(o, &ss, err, errlen);
}

coord_http *coord_http_start(const coord_http_opts *o, char *err, size_t errlen) {
    struct sockaddr_storage ss;
    if (check(o, &ss, err, errlen)) return NULL;
    coord_http *h = vdn_xcalloc(1, sizeof *h);
    h->db_path = vdn_xstrdup(o->db_path);
    h->media = coord_media_kind_of(o->store_uri, &h->store_dir);
    if (o->store_uri) h->store_uri = vdn_xstrdup(o->store_uri);
    if (o->token_file) {
        if (!(h->token = read_text(o->token_file, "--http-token-file", err, errlen))) goto fail;
        h->token[strcspn(h->token, "\r\n")] = 0;
        if (strlen(h->token) < 16) {
            vdn_fail(err, errlen, "--http-token-file %s: the token is under 16 characters",
                     o->token_file);
            goto fail;
        }
    }
    if (o->tls_cert && (!(h->cert = read_text(o->tls_cert, "--http-cert", err, errlen)) ||
                        !(h->key = read_text(o->tls_key, "--http-key", err, errlen))))
        goto fail;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (h->cert) flags |= MHD_USE_TLS;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = h->cert ? MHD_start_daemon(flags, 0, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, &ss,
                                      MHD_OPTION_HTTPS_MEM_CERT, h->cert, MHD_OPTION_HTTPS_MEM_KEY,
                                      h->key, MHD_OPTION_CONNECTION_LIMIT, 64u,
                                      MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END)
                   : MHD_start_daemon(flags, 0, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, &ss,
                                      MHD_OPTION_CONNECTION_LIMIT, 64u,
                                      MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    if (!h->d) {
        vdn_fail(err, errlen,
                 "--http %s: cannot serve there (address in use, or a bad TLS "
                 "certificate/key)",
                 o->bind);
        goto fail;
    }
    VDN_INFO("status page on %s://%s/ (metrics at /metrics)%s", h->cert ? "https" : "http", o->bind,
             h->token ? ", token required" : "");
    return h;
fail:
    coord_http_stop(h);
    return NULL;
}
