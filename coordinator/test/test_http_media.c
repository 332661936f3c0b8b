/* The status page's media route (coordinator/media.h): a done job's poster and mp4 streamed from
 * a file store with the right bytes and types; a job that is not done, has no such output or
 * does not exist is 404; URLs that try to climb out of the route, keys in the database that
 * break the store's rules, and symlinks in the store are never followed to another file; the
 * token guards media as it guards the page. An S3 store's media come from the media cache
 * (media_cache.h): here against a store that never answers, so only what the cache does alone is
 * seen: copies already in its folder served with no store at all; a symlink planted under a
 * copy's name never followed; temp files of a crash deleted and old copies trimmed to the bound
 * at start (oldest first); a fetch that fails answered 502 naming the job, key and store, never
 * the credentials, while the page goes on being served; the failure remembered; stopping waits
 * for a fetch in progress. tests/e2e/test_http_s3.py has the rest, against a real S3 server. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "db.h"
#include "http.h"
#include "vdn_util.h"
#include "../../ops/test/check.h"

/* A valid 1x1 PNG (signature, IHDR, IDAT, IEND). */
static const unsigned char PNG[] = {
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48,
    0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00,
    0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x08,
    0xd7, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0x18, 0xdd, 0x8d,
    0xb0, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};
static const char MP4[] = "\0\0\0\x18"
                          "ftypisom-not-really-a-movie";
static const char SECRET[] = "root:x:0:0:secret outside the store\n";

typedef struct {
    char *data;
    size_t len;
} buf;

static size_t sink(char *p, size_t size, size_t n, void *user) {
    buf *b = user;
    b->data = realloc(b->data, b->len + size * n + 1);
    memcpy(b->data + b->len, p, size * n);
    b->len += size * n;
    b->data[b->len] = 0;
    return size * n;
}

/* GET base+path, the path sent exactly as written (no "/../" folding by curl). */
static long get(const char *base, const char *path, const char *token, buf *body, char *ctype,
                size_t ctlen) {
    char url[1024], auth[256];
    snprintf(url, sizeof url, "%s%s", base, path);
    free(body->data);
    memset(body, 0, sizeof *body);
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        h = curl_slist_append(h, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    long status = -1;
    if (curl_easy_perform(c) == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        char *ct = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        if (ctype) snprintf(ctype, ctlen, "%s", ct ? ct : "");
    }
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

/* The response headers a range answer is checked by. */
typedef struct {
    char content_range[128], accept_ranges[64];
} range_headers;

static size_t header_line(char *p, size_t size, size_t n, void *user) {
    range_headers *h = user;
    size_t len = size * n;
    char line[256];
    snprintf(line, sizeof line, "%.*s", (int)(len < 255 ? len : 255), p);
    line[strcspn(line, "\r\n")] = 0;
    if (!strncasecmp(line, "Content-Range: ", 15))
        snprintf(h->content_range, sizeof h->content_range, "%.100s", line + 15);
    if (!strncasecmp(line, "Accept-Ranges: ", 15))
        snprintf(h->accept_ranges, sizeof h->accept_ranges, "%.60s", line + 15);
    return len;
}

/* GET base+path with the Range header sent exactly as given ("Range: VALUE"; NULL = none) and
 * an optional second header; the status, the body, Content-Range and Accept-Ranges. */
static long get_range(const char *base, const char *path, const char *range, const char *extra,
                      buf *body, range_headers *rh) {
    char url[1024], hdr[512];
    snprintf(url, sizeof url, "%s%s", base, path);
    free(body->data);
    memset(body, 0, sizeof *body);
    memset(rh, 0, sizeof *rh);
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    if (range) {
        snprintf(hdr, sizeof hdr, "Range: %s", range);
        h = curl_slist_append(h, hdr);
    }
    if (extra) h = curl_slist_append(h, extra);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_line);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, rh);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    long status = -1;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &n))
        return -1;
    close(s);
    return ntohs(a.sin_port);
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, len, f) == len);
    if (f) fclose(f);
}

static void add_job(sqlite3 *db, int id, const char *state, const char *keys) {
    char err[VDN_ERR_LEN];
    CHECK(cdb_run(db, err, sizeof err,
                  "INSERT INTO jobs(id,batch_id,state,request,output_prefix,submitted_at,"
                  "object_keys) VALUES(?,1,?,'{}','o',1,?)",
                  "iss", (int64_t)id, state, keys) == 0,
          "%s", err);
}

/* j9's mp4: larger than the server's buffers, bytes that differ at every offset's neighbours. */
enum { BIG = 300007 };
static const unsigned char *big_mp4(void) {
    static unsigned char b[BIG];
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < BIG; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        b[i] = (unsigned char)x;
    }
    return b;
}

/* The store and database the server reads: jobs 1..9, each a case below. */
static void make_farm(const char *dir) {
    char p[512], q[512], err[VDN_ERR_LEN];
    snprintf(p, sizeof p, "%s/vdn.db", dir);
    sqlite3 *db = cdb_open(p, 0, err, sizeof err);
    CHECK(db, "%s", err);
    if (!db) exit(1);
    CHECK(cdb_run(db, err, sizeof err,
                  "INSERT INTO batches(id,tag,priority,submitted_at) VALUES(1,'t',0,1)", "") == 0);
    add_job(db, 1, "done", "[\"b/j1/out.mp4\",\"b/j1/out.png\",\"b/j1/out.json\"]");
    add_job(db, 2, "running", NULL);
    add_job(db, 3, "done", "[\"../secret.png\",\"../../etc/passwd.mp4\"]"); /* tampered */
    add_job(db, 4, "done", "[\"b/j4/out.png\"]");         /* a symlink to a file outside */
    add_job(db, 5, "done", "[\"b/j5/x/out.png\"]");       /* a symlinked folder */
    add_job(db, 6, "done", "[\"b/j6/out.safetensors\"]"); /* latents only: no VAE */
    add_job(db, 7, "failed", "[\"b/j7/out.png\"]");       /* outputs of a job that is not done */
    add_job(db, 8, "done", "[\"b/j8/out.png\"]");         /* recorded, but not in the store */
    add_job(db, 9, "done", "[\"b/j9/out.mp4\"]");         /* a larger mp4, for byte ranges */
    add_job(db, 10, "done", "[\"b/j10/out.png\"]");       /* S3: fetched while stopping */
    cdb_close(db);
    const char *dirs[] = {"store",      "store/b",    "store/b/j1", "store/b/j4",
                          "store/b/j5", "store/b/j7", "store/b/j9", "outside"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, dirs[i]);
        CHECK(mkdir(p, 0755) == 0, "%s", p);
    }
    snprintf(p, sizeof p, "%s/store/b/j1/out.png", dir);
    write_file(p, PNG, sizeof PNG);
    snprintf(p, sizeof p, "%s/store/b/j1/out.mp4", dir);
    write_file(p, MP4, sizeof MP4 - 1);
    snprintf(p, sizeof p, "%s/store/b/j9/out.mp4", dir);
    write_file(p, big_mp4(), BIG);
    snprintf(p, sizeof p, "%s/store/b/j7/out.png", dir);
    write_file(p, PNG, sizeof PNG);
    snprintf(p, sizeof p, "%s/store/secret.png", dir);
    write_file(p, SECRET, sizeof SECRET - 1);
    snprintf(p, sizeof p, "%s/outside/out.png", dir);
    write_file(p, SECRET, sizeof SECRET - 1);
    snprintf(q, sizeof q, "%s/outside/out.png", dir);
    snprintf(p, sizeof p, "%s/store/b/j4/out.png", dir);
    CHECK(symlink(q, p) == 0);
    snprintf(q, sizeof q, "%s/outside", dir);
    snprintf(p, sizeof p, "%s/store/b/j5/x", dir);
    CHECK(symlink(q, p) == 0);
}

static coord_http *serve_opts(const char *dir, coord_http_opts *o, char *base, size_t baselen) {
    char db[512], bind[48], err[VDN_ERR_LEN];
    snprintf(db, sizeof db, "%s/vdn.db", dir);
    int port = free_port();
    snprintf(bind, sizeof bind, "127.0.0.1:%d", port);
    snprintf(base, baselen, "http://%s", bind);
    o->bind = bind;
    o->db_path = db;
    coord_http *h = coord_http_start(o, err, sizeof err);
    CHECK(h, "%s", err);
    if (!h) exit(1);
    return h;
}

static coord_http *serve(const char *dir, const char *store, const char *token_file, char *base,
                         size_t baselen) {
    coord_http_opts o = {.token_file = token_file, .store_uri = store};
    return serve_opts(dir, &o, base, baselen);
}

/* One byte range of j9's mp4: 206, exactly those bytes, and the Content-Range that names them. */
static void check_range(const char *base, const char *range, size_t first, size_t len) {
    buf b = {0};
    range_headers rh;
    long st = get_range(base, "/media/j9/video.mp4", range, NULL, &b, &rh);
    char want[128];
    snprintf(want, sizeof want, "bytes %zu-%zu/%d", first, first + len - 1, BIG);
    CHECK(st == 206, "Range: %s: HTTP %ld", range, st);
    CHECK(!strcmp(rh.content_range, want), "Range: %s: Content-Range '%s', expected '%s'", range,
          rh.content_range, want);
    CHECK(b.len == len && !memcmp(b.data, big_mp4() + first, len),
          "Range: %s: %zu bytes, expected bytes %zu..%zu of the file", range, b.len, first,
          first + len - 1);
    free(b.data);
}

/* A value the server must not act on (RFC 9110 14.2: malformed, another unit, several ranges, a
 * conditional it cannot evaluate): the whole file, 200, as if no Range had been sent. */
static void check_ignored(const char *base, const char *range, const char *extra) {
    buf b = {0};
    range_headers rh;
    long st = get_range(base, "/media/j9/video.mp4", range, extra, &b, &rh);
    CHECK(st == 200 && b.len == BIG && !memcmp(b.data, big_mp4(), BIG) && !rh.content_range[0],
          "Range: %s%s%s: HTTP %ld, %zu bytes, Content-Range '%s'; expected the whole file", range,
          extra ? " with " : "", extra ? extra : "", st, b.len, rh.content_range);
    free(b.data);
}

static void check_unsatisfiable(const char *base, const char *path, const char *range,
                                size_t size) {
    buf b = {0};
    range_headers rh;
    long st = get_range(base, path, range, NULL, &b, &rh);
    char want[64];
    snprintf(want, sizeof want, "bytes */%zu", size);
    CHECK(st == 416 && !strcmp(rh.content_range, want),
          "Range: %s: HTTP %ld, Content-Range '%s'; expected 416 and '%s'", range, st,
          rh.content_range, want);
    free(b.data);
}

static void check_ranges(const char *base) {
    buf b = {0};
    range_headers rh;
    /* a full answer says ranges may be asked for */
    CHECK(get_range(base, "/media/j9/video.mp4", NULL, NULL, &b, &rh) == 200 && b.len == BIG &&
              !memcmp(b.data, big_mp4(), BIG) && !strcmp(rh.accept_ranges, "bytes"),
          "whole file: %zu bytes, Accept-Ranges '%s'", b.len, rh.accept_ranges);
    check_range(base, "bytes=0-0", 0, 1);
    check_range(base, "bytes=0-99", 0, 100);
    check_range(base, "bytes=1000-1999", 1000, 1000);
    check_range(base, "bytes=150000-", 150000, BIG - 150000);
    check_range(base, "bytes=-1", BIG - 1, 1);
    check_range(base, "bytes=-70000", BIG - 70000, 70000);
    check_range(base, "bytes=-999999", 0, BIG); /* longer than the file: all of it */
    check_range(base, "bytes=299000-999999", 299000, BIG - 299000); /* clamped to the end */
    check_range(base, "bytes=300006-300006", BIG - 1, 1);
    check_range(base, "BYTES=5-9", 5, 5);
    check_range(base, "bytes=,7-8, ", 7, 2);
    check_range(base, "bytes=0-99999999999999999999999", 0, BIG);
    check_range(base, "bytes=0-0", 0, 1);
    /* the poster takes ranges too */
    CHECK(get_range(base, "/media/j1/poster.png", "bytes=1-3", NULL, &b, &rh) == 206 &&
              b.len == 3 && !memcmp(b.data, PNG + 1, 3),
          "poster range: %zu bytes", b.len);
    /* unsatisfiable: 416 naming the length */
    check_unsatisfiable(base, "/media/j9/video.mp4", "bytes=300007-", BIG);
    check_unsatisfiable(base, "/media/j9/video.mp4", "bytes=300007-400000", BIG);
    check_unsatisfiable(base, "/media/j9/video.mp4", "bytes=-0", BIG);
    check_unsatisfiable(base, "/media/j9/video.mp4", "bytes=99999999999999999999-", BIG);
    /* ignored: the whole file */
    static const char *ignored[] = {"bytes=5-2",     "bytes=0-1,5-6", "bytes=",      "bytes=-",
                                    "bytes=1-2-3",   "bytes=+1-2",    "bytes =0-1",  "items=0-1",
                                    "bytes=0x10-20", "bytes=1 - 2",   "bytes=a-b",   "0-1",
                                    "bytes=--5",     "bytes=1000-5,", "bytes=0-1;x", "bytes"};
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
        check_ignored(base, ignored[i], NULL);
    /* If-Range needs a validator these answers do not carry: the range is not applied */
    check_ignored(base, "bytes=0-9", "If-Range: \"x\"");
    check_ignored(base, "bytes=0-9", "If-Range: Wed, 21 Oct 2015 07:28:00 GMT");
    /* a range never reaches outside the route's own file */
    CHECK(get_range(base, "/media/j4/poster.png", "bytes=0-5", NULL, &b, &rh) == 500 &&
              !strstr(b.data, "secret"),
          "symlink with a range: %s", b.data ? b.data : "");
    CHECK(get_range(base, "/media/j2/video.mp4", "bytes=0-5", NULL, &b, &rh) == 404);
    free(b.data);
}

/* Every way of asking for something other than a done job's own outputs: 404 (or 400 from the
 * server for a malformed request line), and never another file's bytes. */
static void check_refusals(const char *base) {
    static const char *paths[] = {"/media/j2/poster.png",  /* running */
                                  "/media/j7/poster.png",  /* failed, though its file exists */
                                  "/media/j99/poster.png", /* no such job */
                                  "/media/j6/poster.png",  /* done, latents only */
                                  "/media/j8/poster.png",  /* done, file missing */
                                  "/media/j0/poster.png",
                                  "/media/j/poster.png",
                                  "/media/j1/out.png",
                                  "/media/j1/poster.png/",
                                  "/media/j1/poster.pngx",
                                  "/media/j1/../../vdn.db",
                                  "/media/j1/../j1/poster.png/../../../vdn.db",
                                  "/media/../vdn.db",
                                  "/media/j1/..%2f..%2fvdn.db",
                                  "/media/b/j1/out.png",
                                  "/store/b/j1/out.png",

                                  "/media/j99999999999999999999/poster.png",
                                  "/media/j-1/poster.png"};
    buf b = {0};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        long st = get(base, paths[i], NULL, &b, NULL, 0);
        CHECK(st == 404 || st == 400, "%s: HTTP %ld, expected 404", paths[i], st);
        CHECK(!b.data || (!strstr(b.data, "secret outside") && memcmp(b.data, "SQLite", 6) &&
                          memcmp(b.data, PNG, 8)),
              "%s: served another file's bytes", paths[i]);
    }
    free(b.data);
}

/* ---- an S3 store through the media cache ---- */

#define S3_URI "s3://bucket/prefix"
#define S3_SECRET "MediaCacheSecret0123456789abcdefXYZ"
enum { OLD = 300000 }; /* a copy's size: four are over the 1 MiB bound, three under */

/* The copy's name the cache documents (media_cache.h): SHA-256 of "STORE\nKEY", the extension. */
static void copy_path(const char *cache, const char *key, char *out, size_t outlen) {
    char id[1200], hex[65];
    int n = snprintf(id, sizeof id, "%s\n%s", S3_URI, key);
    vdn_sha256_hex(id, (size_t)n, hex);
    snprintf(out, outlen, "%s/%s%s", cache, hex, strrchr(key, '.'));
}

static void set_mtime(const char *path, double ago) {
    struct timeval tv[2];
    gettimeofday(&tv[0], NULL);
    tv[0].tv_sec -= (time_t)ago;
    tv[1] = tv[0];
    CHECK(utimes(path, tv) == 0, "%s", path);
}

static int exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

typedef struct {
    const char *base, *path;
    long status;
    buf body;
    double seconds;
    volatile int done;
} bg_get;

static void *bg_get_run(void *arg) {
    bg_get *g = arg;
    double t0 = vdn_now();
    g->status = get(g->base, g->path, NULL, &g->body, NULL, 0);
    g->seconds = vdn_now() - t0;
    g->done = 1;
    return NULL;
}

static void check_s3(const char *dir) {
    /* a store that never answers (nothing listens on port 1), with credentials that must never
     * show up in an answer */
    setenv("VDN_S3_ENDPOINT", "http://127.0.0.1:1", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    setenv("AWS_ACCESS_KEY_ID", "AKIDMEDIACACHETEST", 1);
    setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET, 1);
    unsetenv("AWS_SESSION_TOKEN");
    char cache[600], p[800], q[800], outside[600], base[64];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    CHECK(mkdir(cache, 0700) == 0);
    /* the folder as an earlier run left it: j1's poster, a temp file of a download cut short,
     * four old 300 kB copies (1.2 MB with the poster: over the 1 MiB bound), a file of
     * someone else's, and a symlink under the name j9's mp4 would get */
    copy_path(cache, "b/j1/out.png", p, sizeof p);
    write_file(p, PNG, sizeof PNG);
    char part[900];
    copy_path(cache, "b/j1/out.mp4", p, sizeof p);
    snprintf(part, sizeof part, "%s.vdn-part-Ab12Cd", p);
    write_file(part, "half", 4);
    const char *old[] = {"old/b.mp4", "old/a.mp4", "old/d.mp4", "old/c.mp4"};
    char oldp[4][800];
    for (int i = 0; i < 4; i++) {
        copy_path(cache, old[i], oldp[i], sizeof oldp[i]);
        write_file(oldp[i], big_mp4(), OLD);
        set_mtime(oldp[i], 400 - 100 * i); /* the first is the least recently served */
    }
    snprintf(q, sizeof q, "%s/notes.txt", cache);
    write_file(q, "mine", 4);
    snprintf(outside, sizeof outside, "%s/outside/out.png", dir);
    copy_path(cache, "b/j9/out.mp4", p, sizeof p);
    CHECK(symlink(outside, p) == 0);

    coord_http_opts o = {.store_uri = S3_URI,
                         .media_cache_dir = cache,
                         .media_cache_bytes = 1 << 20,
                         .store_retry_seconds = 1.5};
    coord_http *h = serve_opts(dir, &o, base, sizeof base);
    buf b = {0};
    char ct[128];
    /* at start: the temp file deleted, the oldest copy evicted to fit, the rest kept */
    CHECK(!exists(part), "a temp file left by a crash is still there: %s", part);
    CHECK(!exists(oldp[0]) && exists(oldp[1]) && exists(oldp[2]) && exists(oldp[3]),
          "trimmed to 1 MiB at start: expected the oldest copy gone, the three newer kept");
    CHECK(exists(q) && exists(p), "the cache deleted files that are not its copies");
    CHECK(get(base, "/api/status", NULL, &b, NULL, 0) == 200 &&
              strstr(b.data, "\"mode\":\"cached\",\"store\":\"" S3_URI "\"") &&
              strstr(b.data, "\"cache\":{\"max_bytes\":1048576,\"bytes\":900069,\"objects\":4,"
                             "\"fetches\":0}"),
          "%s", b.data);

    /* a copy already here is served with no store at all, byte for byte, with ranges */
    CHECK(get(base, "/media/j1/poster.png", NULL, &b, ct, sizeof ct) == 200 &&
              !strcmp(ct, "image/png") && b.len == sizeof PNG && !memcmp(b.data, PNG, b.len),
          "a cached poster: %s, %zu bytes", ct, b.len);
    range_headers rh;
    CHECK(get_range(base, "/media/j1/poster.png", "bytes=2-5", NULL, &b, &rh) == 206 &&
              b.len == 4 && !memcmp(b.data, PNG + 2, 4) &&
              !strcmp(rh.content_range, "bytes 2-5/69"),
          "a range of a cached poster: %zu bytes, '%s'", b.len, rh.content_range);

    /* not done, tampered keys, no such job: refused before the store or the cache is asked */
    CHECK(get(base, "/media/j2/poster.png", NULL, &b, NULL, 0) == 404 && strstr(b.data, "not done"),
          "%s", b.data);
    CHECK(get(base, "/media/j7/poster.png", NULL, &b, NULL, 0) == 404);
    CHECK(get(base, "/media/j99/video.mp4", NULL, &b, NULL, 0) == 404);
    CHECK(get(base, "/media/j3/poster.png", NULL, &b, NULL, 0) == 500 &&
              strstr(b.data, "recorded key refused"),
          "%s", b.data);

    /* a fetch from a store that does not answer: 502 naming the job, key and store, never the
     * credentials; meanwhile the server answers the page at once */
    bg_get g = {.base = base, .path = "/media/j1/video.mp4"};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, bg_get_run, &g) == 0);
    usleep(200 * 1000);
    double t0 = vdn_now();
    long st = get(base, "/api/status", NULL, &b, NULL, 0);
    double page_s = vdn_now() - t0;
    int fetch_running = !g.done;
    CHECK(st == 200 && page_s < 0.5 && fetch_running,
          "the page during a fetch: HTTP %ld in %.2f s, the fetch %s", st, page_s,
          fetch_running ? "still running" : "already over (too fast to tell)");
    CHECK(get(base, "/", NULL, &b, NULL, 0) == 200 && strstr(b.data, "vdn farm"));
    pthread_join(t, NULL);
    CHECK(g.status == 502 && g.body.data && strstr(g.body.data, "job j1:") &&
              strstr(g.body.data, "b/j1/out.mp4") && strstr(g.body.data, S3_URI) &&
              !strstr(g.body.data, S3_SECRET),
          "the store down: HTTP %ld after %.2f s: %s", g.status, g.seconds,
          g.body.data ? g.body.data : "");
    CHECK(g.seconds < 10, "the 502 took %.1f s with 1.5 s of retries", g.seconds);
    /* the failure is remembered: the next request is answered without waiting for the store */
    t0 = vdn_now();
    st = get(base, "/media/j1/video.mp4", NULL, &b, NULL, 0);
    CHECK(st == 502 && vdn_now() - t0 < 0.5 && strstr(b.data, "the last try") &&
              !strstr(b.data, S3_SECRET),
          "again: HTTP %ld after %.2f s: %s", st, vdn_now() - t0, b.data);
    /* three requests at once for one object: one download, whose answer all three get */
    bg_get three[3];
    pthread_t tt[3];
    for (int i = 0; i < 3; i++) {
        three[i] = (bg_get){.base = base, .path = "/media/j8/poster.png"};
        CHECK(pthread_create(&tt[i], NULL, bg_get_run, &three[i]) == 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(tt[i], NULL);
        CHECK(three[i].status == 502 && strstr(three[i].body.data, "b/j8/out.png"),
              "concurrent request %d: HTTP %ld %s", i, three[i].status,
              three[i].body.data ? three[i].body.data : "");
        free(three[i].body.data);
    }
    /* the symlink under j9's copy name is not followed: the store is asked (and fails) */
    st = get(base, "/media/j9/video.mp4", NULL, &b, NULL, 0);
    CHECK(st == 502 && !strstr(b.data, "secret outside"), "j9 over a planted symlink: %ld %s", st,
          b.data);
    CHECK(exists(p), "the planted symlink was touched");
    free(g.body.data);

    /* stopping with a fetch in flight waits for it (libmicrohttpd must not stop with the request
     * suspended) and does not take longer than the fetch */
    bg_get g2 = {.base = base, .path = "/media/j10/poster.png"};
    CHECK(pthread_create(&t, NULL, bg_get_run, &g2) == 0);
    usleep(200 * 1000);
    t0 = vdn_now();
    coord_http_stop(h);
    double stop_s = vdn_now() - t0;
    pthread_join(t, NULL);
    CHECK(stop_s < 10 && g2.done, "stopping took %.1f s", stop_s);
    free(g2.body.data);

    /* the cache folder belongs to one coordinator at a time */
    h = serve_opts(dir, &o, base, sizeof base);
    char db[600], err[VDN_ERR_LEN];
    snprintf(db, sizeof db, "%s/vdn.db", dir);
    char bind[48];
    snprintf(bind, sizeof bind, "127.0.0.1:%d", free_port());
    coord_http_opts o2 = o;
    o2.bind = bind;
    o2.db_path = db;
    CHECK(!coord_http_start(&o2, err, sizeof err) && strstr(err, "another coordinator"), "%s", err);
    coord_http_stop(h);
    /* a folder that cannot be made is an error at start, naming it */
    o2.media_cache_dir = "/proc/no/such/cache";
    CHECK(!coord_http_start(&o2, err, sizeof err) && strstr(err, "/proc/no/such/cache"), "%s", err);
    free(b.data);
}

int main(void) {
    char dir[] = "/tmp/vdn_http_media_XXXXXX", store[600], base[64], ct[128];
    if (!mkdtemp(dir)) return 1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    make_farm(dir);
    snprintf(store, sizeof store, "file://%s/store", dir);
    coord_http *h = serve(dir, store, NULL, base, sizeof base);
    buf b = {0};

    /* the product, byte for byte, with its type */
    CHECK(get(base, "/media/j1/poster.png", NULL, &b, ct, sizeof ct) == 200);
    CHECK(!strcmp(ct, "image/png"), "poster type %s", ct);
    CHECK(b.len == sizeof PNG && !memcmp(b.data, PNG, sizeof PNG), "poster bytes (%zu)", b.len);
    CHECK(get(base, "/media/j1/video.mp4", NULL, &b, ct, sizeof ct) == 200);
    CHECK(!strcmp(ct, "video/mp4"), "video type %s", ct);
    CHECK(b.len == sizeof MP4 - 1 && !memcmp(b.data, MP4, b.len), "video bytes (%zu)", b.len);
    CHECK(get(base, "/media/j2/poster.png", NULL, &b, NULL, 0) == 404 && strstr(b.data, "not done"),
          "a running job: %s", b.data);
    check_refusals(base);
    check_ranges(base);
    /* keys that break the store's rules are refused before any file is opened */
    long st = get(base, "/media/j3/poster.png", NULL, &b, NULL, 0);
    CHECK(st == 500 && strstr(b.data, "recorded key refused"), "%ld %s", st, b.data);
    CHECK(get(base, "/media/j3/video.mp4", NULL, &b, NULL, 0) == 500);
    /* symlinks in the store, to a file or a folder outside it, are not followed */
    CHECK(get(base, "/media/j4/poster.png", NULL, &b, NULL, 0) == 500 &&
              strstr(b.data, "symlink") && !strstr(b.data, "secret outside"),
          "%s", b.data);
    CHECK(get(base, "/media/j5/poster.png", NULL, &b, NULL, 0) >= 400 &&
              !strstr(b.data, "secret outside"),
          "%s", b.data);
    /* the page learns that the store is served */
    CHECK(get(base, "/api/status", NULL, &b, NULL, 0) == 200 &&
              strstr(b.data, "\"media\":{\"mode\":\"served\""),
          "%s", b.data);
    coord_http_stop(h);

    /* a token guards media as it guards the page */
    char tokf[600];
    snprintf(tokf, sizeof tokf, "%s/token", dir);
    write_file(tokf, "media-token-0123456789\n", 23);
    h = serve(dir, store, tokf, base, sizeof base);
    CHECK(get(base, "/media/j1/poster.png", NULL, &b, NULL, 0) == 401);
    CHECK(get(base, "/media/j1/poster.png", "wrong-token-0123456789", &b, NULL, 0) == 401);
    CHECK(get(base, "/media/j1/poster.png", "media-token-0123456789", &b, NULL, 0) == 200 &&
          b.len == sizeof PNG);
    /* the token only from the header: in the URL it is refused (logs, histories, Referer) */
    CHECK(get(base, "/media/j1/poster.png?token=media-token-0123456789", NULL, &b, NULL, 0) ==
              401 &&
          strstr(b.data, "signed link"));
    CHECK(get(base, "/api/status?token=media-token-0123456789", NULL, &b, NULL, 0) == 401 &&
          strstr(b.data, "not accepted"));
    /* the page itself is static and needs none; its data do */
    CHECK(get(base, "/", NULL, &b, NULL, 0) == 200 && strstr(b.data, "Authorization"));
    /* signed links: /api/status gives one per done job; it opens that job's media alone, until
     * it expires; any change to it is refused */
    CHECK(get(base, "/api/status", "media-token-0123456789", &b, NULL, 0) == 200);
    char link[160] = "", path[300];
    const char *at = b.data ? strstr(b.data, "\"job_id\":\"1\"") : NULL;
    if (!at) at = b.data ? strstr(b.data, "\"job_id\":1,") : NULL;
    const char *ml = at ? strstr(at, "\"media_link\":\"") : NULL;
    if (ml) snprintf(link, sizeof link, "%.*s", (int)strcspn(ml + 14, "\""), ml + 14);
    CHECK(!strncmp(link, "exp=", 4) && strstr(link, "&sig="), "media_link of j1: '%s' in %s", link,
          b.data);
    long long exp = atoll(link + 4);
    double now = vdn_wall();
    CHECK(exp > now + 3600 - 5 && exp <= now + 2 * 3600 + 5, "link expiry %lld, now %.0f", exp,
          now);
    snprintf(path, sizeof path, "/media/j1/poster.png?%s", link);
    CHECK(get(base, path, NULL, &b, NULL, 0) == 200 && b.len == sizeof PNG, "signed link: %s",
          path);
    snprintf(path, sizeof path, "/media/j9/video.mp4?%s", link); /* j1's link for j9 */
    CHECK(get(base, path, NULL, &b, NULL, 0) == 401, "j1's link opened j9");
    char sig[65], forged[300];
    coord_http_media_sig("media-token-0123456789", 1, (long long)now - 10, sig); /* expired */
    snprintf(forged, sizeof forged, "/media/j1/poster.png?exp=%lld&sig=%s", (long long)now - 10,
             sig);
    CHECK(get(base, forged, NULL, &b, NULL, 0) == 401, "an expired link served");
    coord_http_media_sig("media-token-0123456789", 1, exp + 3600, sig); /* a later exp, own sig */
    snprintf(forged, sizeof forged, "/media/j1/poster.png?exp=%lld&sig=%s", exp + 3600, sig);
    CHECK(get(base, forged, NULL, &b, NULL, 0) == 200, "a valid link for a later hour");
    snprintf(forged, sizeof forged, "/media/j1/poster.png?exp=%lld&sig=%s", exp + 7200, sig);
    CHECK(get(base, forged, NULL, &b, NULL, 0) == 401, "a link whose exp was moved served");
    coord_http_media_sig("wrong-token-0123456789", 1, exp, sig);
    snprintf(forged, sizeof forged, "/media/j1/poster.png?exp=%lld&sig=%s", exp, sig);
    CHECK(get(base, forged, NULL, &b, NULL, 0) == 401, "a link signed with another key served");
    /* a range does not get around the token, and works with it */
    range_headers rh;
    CHECK(get_range(base, "/media/j9/video.mp4", "bytes=0-9", NULL, &b, &rh) == 401 &&
              !rh.content_range[0],
          "a range without the token: %s", rh.content_range);
    CHECK(get_range(base, "/media/j9/video.mp4", "bytes=10-19",
                    "Authorization: Bearer media-token-0123456789", &b, &rh) == 206 &&
              b.len == 10 && !memcmp(b.data, big_mp4() + 10, 10),
          "a range with the token: %zu bytes", b.len);
    /* DNS rebinding: on loopback only loopback Host names are answered */
    CHECK(get_range(base, "/", NULL, "Host: evil.example:8080", &b, &rh) == 403 &&
              strstr(b.data, "Host refused"),
          "Host evil.example: %s", b.data ? b.data : "");
    CHECK(get_range(base, "/", NULL, "Host: 127.0.0.1.evil.example", &b, &rh) == 403);
    CHECK(get_range(base, "/", NULL, "Host: localhost:1234", &b, &rh) == 200);
    CHECK(get_range(base, "/", NULL, "Host: [::1]:1234", &b, &rh) == 200);
    CHECK(get_range(base, "/", NULL, "Host: 127.0.0.2", &b, &rh) == 200);
    coord_http_stop(h);

    /* HMAC-SHA256 against RFC 4231's test cases 1, 2 and 6 (a key longer than a block) */
    {
        char out[65], k1[20], k6[131];
        memset(k1, 0x0b, sizeof k1);
        memset(k6, 0xaa, sizeof k6);
        coord_hmac_sha256_hex(k1, 20, "Hi There", 8, out);
        CHECK(!strcmp(out, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
              "RFC 4231 case 1: %s", out);
        coord_hmac_sha256_hex("Jefe", 4, "what do ya want for nothing?", 28, out);
        CHECK(!strcmp(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
              "RFC 4231 case 2: %s", out);
        const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
        coord_hmac_sha256_hex(k6, 131, m6, strlen(m6), out);
        CHECK(!strcmp(out, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
              "RFC 4231 case 6: %s", out);
    }

    check_s3(dir);
    /* no --store: nothing known */
    h = serve(dir, NULL, NULL, base, sizeof base);
    CHECK(get(base, "/media/j1/poster.png", NULL, &b, NULL, 0) == 404);
    coord_http_stop(h);

    free(b.data);
    curl_global_cleanup();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (!failures && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_report("coordinator_http_media");
}
