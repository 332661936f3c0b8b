#include "http.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "db.h"
#include "media.h"
#include "media_cache.h"
#include "metrics.h"
#include "pbjson.h"
#include "query.h"
#include "range.h"
#include "vdn_util.h"

struct coord_http {
    struct MHD_Daemon *d;
    int loopback; /* bound to a loopback address: Host must be a loopback name */
    char *db_path;
    sqlite3 *db; /* opened on the server thread at the first request */
    char *token;
    char *cert, *key;
    coord_media_kind media;
    char *store_uri;
    char *store_dir;          /* COORD_MEDIA_FILE: the folder served from */
    coord_media_cache *cache; /* COORD_MEDIA_S3: the local copies served from */
    /* S3 downloads in progress, each on its own thread with its request suspended; stopping
     * waits for them (libmicrohttpd must not stop with a connection suspended) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fetching, stopping;
};

/* A media request waiting for an S3 download: the connection's state from the fetch until
 * the request completes (request_done frees it). */
typedef struct {
    coord_http *h;
    struct MHD_Connection *conn;
    uint64_t job;
    char *key;
    int status; /* the cache's answer */
    coord_media_object obj;
    char err[VDN_ERR_LEN];
} media_fetch;

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

/* Constant-time: how long the comparison takes says nothing about the secret. */
static int same_secret(const char *want, const char *given) {
    size_t n = strlen(want), m = strlen(given);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)want[i] ^ (unsigned char)(i < m ? given[i] : 0);
    return diff == 0;
}

/* The token only from the Authorization header: a ?token= would end up in proxies' and
 * servers' logs, browser histories and Referer headers. */
static int token_ok(const coord_http *h, struct MHD_Connection *conn) {
    if (!h->token) return 1;
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    return auth && !strncmp(auth, "Bearer ", 7) && same_secret(h->token, auth + 7);
}

void coord_hmac_sha256_hex(const void *key, size_t keylen, const void *msg, size_t msglen,
                           char out[65]) {
    uint8_t k[64] = {0}, inner[32];
    char hex[65];
    if (keylen > 64) { /* a long key is hashed first */
        vdn_sha256_hex(key, keylen, hex);
        for (int i = 0; i < 32; i++)
            sscanf(hex + 2 * i, "%2hhx", &k[i]);
    } else {
        memcpy(k, key, keylen);
    }
    uint8_t *buf = vdn_xmalloc(64 + (msglen > 32 ? msglen : 32));
    for (int i = 0; i < 64; i++)
        buf[i] = k[i] ^ 0x36;
    memcpy(buf + 64, msg, msglen);
    vdn_sha256_hex(buf, 64 + msglen, hex);
    for (int i = 0; i < 32; i++)
        sscanf(hex + 2 * i, "%2hhx", &inner[i]);
    for (int i = 0; i < 64; i++)
        buf[i] = k[i] ^ 0x5c;
    memcpy(buf + 64, inner, 32);
    vdn_sha256_hex(buf, 64 + 32, out);
    free(buf);
}

void coord_http_media_sig(const char *token, uint64_t job, long long exp, char out[65]) {
    char msg[96];
    int n = snprintf(msg, sizeof msg, "vdn media j%llu %lld", (unsigned long long)job, exp);
    coord_hmac_sha256_hex(token, strlen(token), msg, (size_t)n, out);
}

/* A signed link to job's media: ?exp=EXP&sig=HMAC, unexpired and signed for this job. */
static int link_ok(const coord_http *h, struct MHD_Connection *conn, uint64_t job) {
    const char *exp = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "exp");
    const char *sig = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "sig");
    if (!h->token || !exp || !sig) return 0;
    char *end;
    long long e = strtoll(exp, &end, 10);
    if (*end || end == exp || (double)e < vdn_wall()) return 0;
    char want[65];
    coord_http_media_sig(h->token, job, e, want);
    return same_secret(want, sig);
}

/* DNS rebinding: a page on evil.example whose name is made to resolve to 127.0.0.1 can make the
 * browser read a loopback server, but the browser still sends Host: evil.example. On loopback
 * only loopback names are answered (a request without Host, HTTP/1.0, is no browser's). */
static int host_ok(const coord_http *h, struct MHD_Connection *conn) {
    if (!h->loopback) return 1;
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
    if (!host) return 1;
    char name[256];
    if (host[0] == '[') { /* [::1]:8080 */
        const char *close = strchr(host, ']');
        if (!close || close - host > 200) return 0;
        snprintf(name, sizeof name, "%.*s", (int)(close - host + 1), host);
    } else {
        snprintf(name, sizeof name, "%.*s", (int)strcspn(host, ":"), host);
    }
    if (!strcasecmp(name, "localhost") || !strcmp(name, "[::1]")) return 1;
    struct in_addr a;
    return inet_pton(AF_INET, name, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

static void add_msg(cJSON *arr, const ProtobufCMessage *m) {
    cJSON_AddItemToArray(arr, vdn_pb_to_json(m));
}

/* How a done job's outputs are served, for the page: "served" (links to /media/, from the file
 * store), "cached" (links to /media/, fetched from the S3 store into the media cache, whose
 * numbers follow), "none" (no --store: the workers' own stores; the page shows the keys). */
static void add_media(cJSON *o, const coord_http *h) {
    cJSON *m = cJSON_AddObjectToObject(o, "media");
    cJSON_AddStringToObject(m, "mode",
                            h->media == COORD_MEDIA_FILE ? "served"
                            : h->media == COORD_MEDIA_S3 ? "cached"
                                                         : "none");
    /* a store URI never holds credentials (store.h), so the page may show it */
    if (h->store_uri) cJSON_AddStringToObject(m, "store", h->store_uri);
    if (h->cache) {
        coord_media_cache_stats cs;
        coord_media_cache_stats_get(h->cache, &cs);
        cJSON *c = cJSON_AddObjectToObject(m, "cache");
        cJSON_AddNumberToObject(c, "max_bytes", (double)cs.max_bytes);
        cJSON_AddNumberToObject(c, "bytes", (double)cs.bytes);
        cJSON_AddNumberToObject(c, "objects", (double)cs.objects);
        cJSON_AddNumberToObject(c, "fetches", (double)cs.fetches);
    }
}

/* A signed media link for a done job (an <img> or <video> sends no header), when a token is
 * set: ?exp=EXP&sig=... in o's "media_link". */
static void add_media_link(cJSON *o, const coord_http *h, uint64_t job, const char *state) {
    if (!h->token || !state || strcmp(state, "done")) return;
    char sig[65], q[128];
    long long exp = ((long long)vdn_wall() / 3600 + COORD_HTTP_LINK_HOURS) * 3600;
    coord_http_media_sig(h->token, job, exp, sig);
    snprintf(q, sizeof q, "exp=%lld&sig=%s", exp, sig);
    cJSON_AddStringToObject(o, "media_link", q);
}

/* One job's page data (/api/job/N): the job with its request, every attempt (worker, state,
 * blame, timings, NFEs), its events (the log) and how its media are served. NULL when there is
 * no such job. */
static char *job_json(sqlite3 *db, const coord_http *h, int64_t job) {
    char err[VDN_ERR_LEN];
    Vdn__LogsReply *r = query_logs(db, job, err, sizeof err);
    if (!r) return NULL;
    cJSON *o = vdn_pb_to_json(&r->base);
    cJSON_AddNumberToObject(o, "now", vdn_wall());
    add_media(o, h);
    if (r->job) add_media_link(o, h, r->job->job_id, r->job->state);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
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
        for (size_t k = 0; s && k < s->n_jobs && njobs < 1000; k++, njobs++) {
            add_msg(jobs, &s->jobs[k]->base);
            /* with a token, the page reaches media by signed links (an <img> sends no header) */
            add_media_link(cJSON_GetArrayItem(jobs, cJSON_GetArraySize(jobs) - 1), h,
                           s->jobs[k]->job_id, s->jobs[k]->state);
        }
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

/* An object, whole or the one byte range the request asks for (a browser's <video> seeks with
 * "Range: bytes=A-"), from its open descriptor, which the response (or this, on failure) closes.
 * Outputs of a done job never change (a retry is only for failed or cancelled jobs), so the
 * browser may keep them: the page redraws every 2 s without fetching the images again. */
static enum MHD_Result serve_object(struct MHD_Connection *conn, const coord_media_object *o) {
    uint64_t first = 0, len = o->size;
    coord_range_result rr = wanted_range(conn, o->size, &first, &len);
    if (rr == COORD_RANGE_UNSATISFIABLE) return unsatisfiable(conn, o);
    if (rr != COORD_RANGE_PARTIAL) first = 0, len = o->size;
    /* libmicrohttpd sends [first, first + len) of the file (sendfile where it can) and closes
     * the descriptor with the response */
    struct MHD_Response *r = MHD_create_response_from_fd_at_offset64(len, o->fd, first);
    if (!r) {
        close(o->fd);
        return text(conn, 500, "cannot stream the object\n");
    }
    media_headers(r, o->content_type);
    if (rr == COORD_RANGE_PARTIAL) {
        char cr[80];
        snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)first,
                 (unsigned long long)(first + len - 1), (unsigned long long)o->size);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
    }
    enum MHD_Result rc =
        MHD_queue_response(conn, rr == COORD_RANGE_PARTIAL ? MHD_HTTP_PARTIAL_CONTENT : 200, r);
    MHD_destroy_response(r);
    return rc;
}

/* The fetch thread: downloads into the cache (however long the store takes), then hands the
 * request back to the server thread, which answers it (media_fetched). The fetch must not be
 * touched after the resume: the request may complete and free it at once. */
static void *fetch_thread(void *arg) {
    media_fetch *f = arg;
    coord_http *h = f->h;
    f->status =
        coord_media_cache_get(h->cache, f->key, &f->obj.fd, &f->obj.size, f->err, sizeof f->err);
    pthread_mutex_lock(&h->mu);
    MHD_resume_connection(f->conn);
    h->fetching--;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* A request resumed after its fetch: the copy, or the store's answer naming the job and key
 * (logged once, by the cache, when the fetch failed). */
static enum MHD_Result media_fetched(struct MHD_Connection *conn, media_fetch *f) {
    if (f->status == 200) {
        coord_media_object o = f->obj;
        f->obj.fd = -1; /* the response owns it now */
        return serve_object(conn, &o);
    }
    char msg[VDN_ERR_LEN + 64];
    snprintf(msg, sizeof msg, "job j%llu: %s\n", (unsigned long long)f->job, f->err);
    return text(conn, (unsigned)f->status, msg);
}

/* An S3 store's object: from the media cache when it holds a copy, else fetched on a thread of
 * its own while the request is suspended, so the server thread goes on serving the page. */
static enum MHD_Result media_s3(coord_http *h, struct MHD_Connection *conn, uint64_t job,
                                coord_media_what what, void **state) {
    char err[VDN_ERR_LEN], msg[VDN_ERR_LEN + 2];
    int status;
    char *key = coord_media_job_key(h->db, job, what, &status, err, sizeof err);
    if (!key) {
        if (status >= 500) VDN_WARN("http: %s", err);
        snprintf(msg, sizeof msg, "%s\n", err);
        return text(conn, (unsigned)status, msg);
    }
    coord_media_object o = {.fd = -1, .content_type = coord_media_type(what)};
    if (coord_media_cache_lookup(h->cache, key, &o.fd, &o.size)) {
        free(key);
        return serve_object(conn, &o);
    }
    pthread_mutex_lock(&h->mu);
    int stopping = h->stopping;
    if (!stopping) h->fetching++;
    pthread_mutex_unlock(&h->mu);
    if (stopping) {
        free(key);
        return text(conn, 503, "the coordinator is stopping\n");
    }
    media_fetch *f = vdn_xcalloc(1, sizeof *f);
    f->h = h;
    f->conn = conn;
    f->job = job;
    f->key = key;
    f->obj = o;
    *state = f; /* from now on request_done frees it */
    /* suspend before the thread can resume: a resume that came first would be undone by it */
    MHD_suspend_connection(conn);
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, fetch_thread, f);
    pthread_attr_destroy(&attr);
    if (rc) { /* answered 503 when the server thread comes back to it */
        f->status = 503;
        vdn_fail(f->err, sizeof f->err, "cannot start a download thread: %s", strerror(rc));
        pthread_mutex_lock(&h->mu);
        MHD_resume_connection(conn);
        h->fetching--;
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
    return MHD_YES;
}

/* A done job's poster or mp4: from the file store, or from the S3 store through the cache. */
static enum MHD_Result media(coord_http *h, struct MHD_Connection *conn, uint64_t job,
                             coord_media_what what, void **state) {
    char err[VDN_ERR_LEN], msg[VDN_ERR_LEN + 2];
    if (h->media == COORD_MEDIA_S3) return media_s3(h, conn, job, what, state);
    if (h->media != COORD_MEDIA_FILE)
        return text(conn, 404,
                    "the coordinator has no --store: outputs are in the workers' stores\n");
    coord_media_object o;
    int status = coord_media_open(h->db, h->store_dir, job, what, &o, err, sizeof err);
    if (status != 200) {
        if (status >= 500) VDN_WARN("http: %s", err);
        snprintf(msg, sizeof msg, "%s\n", err);
        return text(conn, (unsigned)status, msg);
    }
    return serve_object(conn, &o);
}

/* libmicrohttpd is done with a request: a media fetch's state is freed (with its copy's
 * descriptor, when the answer never took it: the client went away). */
static void request_done(void *cls, struct MHD_Connection *conn, void **state,
                         enum MHD_RequestTerminationCode why) {
    (void)conn, (void)why;
    if (!*state || *state == cls) return;
    media_fetch *f = *state;
    if (f->obj.fd >= 0) close(f->obj.fd);
    free(f->key);
    free(f);
    *state = NULL;
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
    if (*state != h) return media_fetched(conn, *state); /* back from an S3 download */
    if (*upload_len) return text(conn, 413, "this server takes no request bodies\n");
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return text(conn, 405, "read-only: GET only\n");
    if (!host_ok(h, conn)) {
        VDN_WARN("http: refused a request for Host '%.100s' on a loopback address",
                 MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host"));
        return text(conn, 403,
                    "Host refused: on a loopback address this server answers only to 127.0.0.1, "
                    "localhost or [::1] (a DNS-rebinding guard)\n");
    }
    /* the page is static (its data come from /api/status with the token) */
    if (!strcmp(url, "/") || !strcmp(url, "/index.html"))
        return reply(conn, 200, "text/html; charset=utf-8", vdn_xstrdup(coord_http_page),
                     strlen(coord_http_page));
    if (!strcmp(url, "/job")) /* one job's page: job#j=N, its data from /api/job/N */
        return reply(conn, 200, "text/html; charset=utf-8", vdn_xstrdup(coord_http_job_page),
                     strlen(coord_http_job_page));
    uint64_t job;
    coord_media_what what;
    int is_media = !coord_media_parse_url(url, &job, &what);
    if (!token_ok(h, conn) && !(is_media && link_ok(h, conn, job)))
        return text(conn, 401,
                    is_media ? "token required: Authorization: Bearer TOKEN, or a signed link "
                               "from /api/status that has not expired\n"
                             : "token required: Authorization: Bearer TOKEN (a token in the URL "
                               "is not accepted)\n");
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
    if (!strncmp(url, "/api/job/", 9)) {
        char *end;
        long long id = strtoll(url + 9, &end, 10);
        char *j = *end || end == url + 9 || id <= 0 ? NULL : job_json(h->db, h, id);
        if (!j) return text(conn, 404, "no such job (expected /api/job/N)\n");
        return reply(conn, 200, "application/json", j, strlen(j));
    }
    if (is_media) return media(h, conn, job, what, state);
    return text(conn, 404,
                "not found: try /, /job#j=N, /api/status, /api/job/N, /metrics or "
                "/media/jN/poster.png\n");
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
    pthread_mutex_lock(&h->mu);
    h->stopping = 1;
    if (h->fetching) VDN_INFO("http: waiting for %d media download(s) to end", h->fetching);
    while (h->fetching)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    if (h->d) MHD_stop_daemon(h->d);
    coord_media_cache_close(h->cache);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
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
    char e2[VDN_ERR_LEN];
    parse_bind(o->bind, &ss, &h->loopback, e2, sizeof e2);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->db_path = vdn_xstrdup(o->db_path);
    h->media = coord_media_kind_of(o->store_uri, &h->store_dir);
    if (o->store_uri) h->store_uri = vdn_xstrdup(o->store_uri);
    if (h->media == COORD_MEDIA_S3) {
        char dflt[4200];
        snprintf(dflt, sizeof dflt, "%s.media-cache", o->db_path);
        coord_media_cache_opts co = {
            .dir = o->media_cache_dir ? o->media_cache_dir : dflt,
            .max_bytes = o->media_cache_bytes ? o->media_cache_bytes
                                              : (uint64_t)COORD_HTTP_MEDIA_CACHE_MB << 20,
            .store_uri = o->store_uri,
            .retry_seconds =
                o->store_retry_seconds > 0 ? o->store_retry_seconds : COORD_HTTP_STORE_RETRY_S};
        if (!(h->cache = coord_media_cache_open(&co, err, errlen))) goto fail;
    }
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
    /* one server thread; an S3 download suspends its request and runs beside it */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    if (h->cert) flags |= MHD_USE_TLS;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d =
        h->cert
            ? MHD_start_daemon(flags, 0, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, &ss,
                               MHD_OPTION_HTTPS_MEM_CERT, h->cert, MHD_OPTION_HTTPS_MEM_KEY, h->key,
                               MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
                               MHD_OPTION_NOTIFY_COMPLETED, request_done, h, MHD_OPTION_END)
            : MHD_start_daemon(flags, 0, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, &ss,
                               MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
                               MHD_OPTION_NOTIFY_COMPLETED, request_done, h, MHD_OPTION_END);
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
