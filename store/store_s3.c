/* s3://bucket/prefix backend. Objects up to the part size go up in one PUT; larger ones by
 * multipart upload (initiate, parts, complete; abort on failure). Either way S3 only shows the
 * object once the PUT or the complete succeeds, so publishing is atomic. */
#include "s3_request.h"
#include "s3_xml.h"
#include "store_impl.h"
#include "vdn_util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define MIN_PART (5 * MIB) /* S3's minimum size for every part but the last */
#define MAX_PARTS 10000    /* S3's maximum part count */
#define DEFAULT_PART (64 * MIB)

static char *env_or(const char *opt, const char *env1, const char *env2) {
    if (opt && *opt) return vdn_xstrdup(opt);
    const char *v = env1 ? getenv(env1) : NULL;
    if ((!v || !*v) && env2) v = getenv(env2);
    return v && *v ? vdn_xstrdup(v) : NULL;
}

static void conn_free(s3_conn *c) {
    if (!c) return;
    if (c->curl) curl_easy_cleanup(c->curl);
    pthread_mutex_destroy(&c->curl_lock);
    free(c->endpoint);
    free(c->region);
    free(c->access_key);
    if (c->secret_key) memset(c->secret_key, 0, strlen(c->secret_key));
    free(c->secret_key);
    free(c->session_token);
    free(c->bucket);
    free(c->prefix);
    free(c->display);
    free(c);
}

void *vdn_store_s3_open(const char *rest, const vdn_store_opts *opts, char *err, size_t errlen) {
    vdn_store_opts none = {0};
    if (!opts) opts = &none;
    const char *slash = strchr(rest, '/');
    size_t blen = slash ? (size_t)(slash - rest) : strlen(rest);
    if (blen == 0 || blen > 255) {
        vdn_fail(err, errlen, "store URI 's3://%.200s': expected s3://BUCKET[/PREFIX]", rest);
        return NULL;
    }
    for (size_t i = 0; i < blen; i++) {
        char ch = rest[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '.' || ch == '_')) {
            vdn_fail(err, errlen,
                     "store URI 's3://%.200s': bucket name has '%c' (expected letters, digits, "
                     "'-', '.', '_')",
                     rest, ch);
            return NULL;
        }
    }
    s3_conn *c = vdn_xcalloc(1, sizeof *c);
    pthread_mutex_init(&c->curl_lock, NULL);
    c->bucket = vdn_xmalloc(blen + 1);
    memcpy(c->bucket, rest, blen);
    c->bucket[blen] = 0;
    const char *pfx = slash ? slash + 1 : "";
    size_t plen = strlen(pfx);
    while (plen && pfx[plen - 1] == '/')
        plen--; /* s3://b/p and s3://b/p/ are the same */
    c->prefix = vdn_xmalloc(plen + 1);
    memcpy(c->prefix, pfx, plen);
    c->prefix[plen] = 0;
    char sub[VDN_ERR_LEN];
    if (plen && vdn_store_check_key(c->prefix, sub, sizeof sub)) {
        vdn_fail(err, errlen, "store URI 's3://%.200s': bad prefix: %s", rest, sub);
        conn_free(c);
        return NULL;
    }
    c->display = vdn_xmalloc(blen + plen + 8);
    sprintf(c->display, "s3://%s%s%s", c->bucket, plen ? "/" : "", c->prefix);

    c->region = env_or(opts->region, "AWS_REGION", "AWS_DEFAULT_REGION");
    if (!c->region) c->region = vdn_xstrdup("us-east-1");
    for (const char *p = c->region; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) {
            vdn_fail(err, errlen, "%s: region '%.64s' is not a region name like us-east-1",
                     c->display, c->region);
            conn_free(c);
            return NULL;
        }
    c->endpoint = env_or(opts->endpoint, "VDN_S3_ENDPOINT", "AWS_ENDPOINT_URL");
    if (!c->endpoint) {
        char ep[128];
        snprintf(ep, sizeof ep, "https://s3.%s.amazonaws.com", c->region);
        c->endpoint = vdn_xstrdup(ep);
    }
    size_t el = strlen(c->endpoint);
    while (el && c->endpoint[el - 1] == '/')
        c->endpoint[--el] = 0;
    if (strncmp(c->endpoint, "http://", 7) && strncmp(c->endpoint, "https://", 8)) {
        vdn_fail(err, errlen, "%s: endpoint '%.200s' must start with http:// or https://",
                 c->display, c->endpoint);
        conn_free(c);
        return NULL;
    }
    c->access_key = env_or(opts->access_key, "AWS_ACCESS_KEY_ID", NULL);
    c->secret_key = env_or(opts->secret_key, "AWS_SECRET_ACCESS_KEY", NULL);
    if (!c->access_key != !c->secret_key) {
        vdn_fail(err, errlen,
                 "%s: S3 credentials incomplete: the %s is set but the %s is not (set both "
                 "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither for anonymous access)",
                 c->display, c->access_key ? "access key" : "secret key",
                 c->access_key ? "secret key" : "access key");
        conn_free(c);
        return NULL;
    }
    if (c->access_key)
        c->session_token = env_or(NULL, "AWS_SESSION_TOKEN", NULL);
    else
        VDN_DEBUG("%s: no credentials, requests go unsigned", c->display);

    c->max_retries = opts->max_retries > 0 ? opts->max_retries : 8;
    c->retry_max_seconds = opts->retry_max_seconds > 0 ? opts->retry_max_seconds : 120.0;
    c->retry_base_seconds = 0.25;
    c->part_size = opts->multipart_threshold ? opts->multipart_threshold : DEFAULT_PART;
    c->max_body = opts->max_body_bytes ? opts->max_body_bytes : (size_t)64 << 20;
    if (c->part_size < MIN_PART) {
        vdn_fail(err, errlen,
                 "%s: multipart threshold %zu bytes is below S3's minimum part size of 5 MiB "
                 "(%zu bytes)",
                 c->display, c->part_size, MIN_PART);
        conn_free(c);
        return NULL;
    }
    c->rng_seed = (uint64_t)(vdn_wall() * 1e6) ^ ((uint64_t)getpid() << 32);
    return c;
}

static void s3_close(void *be) {
    conn_free(be);
}

static char *object_name(s3_conn *c, const char *key) {
    size_t n = strlen(c->prefix) + strlen(key) + 2;
    char *s = vdn_xmalloc(n);
    snprintf(s, n, "%s%s%s", c->prefix, *c->prefix ? "/" : "", key);
    return s;
}

/* Where the bytes of an upload come from: memory, or a file read part by part. */
typedef struct {
    const char *mem;
    int fd;
    const char *path;
    uint64_t size;
} source;

static int source_read(const source *s, uint64_t off, size_t len, char *dst, char *err,
                       size_t errlen) {
    if (s->mem) {
        memcpy(dst, s->mem + off, len);
        return 0;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(s->fd, dst + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return vdn_fail(err, errlen, "%s: read failed at byte %llu: %s", s->path,
                            (unsigned long long)(off + got), strerror(errno));
        if (r == 0)
            return vdn_fail(err, errlen,
                            "%s: file shrank while uploading (ended at byte %llu, expected %llu)",
                            s->path, (unsigned long long)(off + got), (unsigned long long)s->size);
        got += (size_t)r;
    }
    return 0;
}

static int put_single(s3_conn *c, const char *key, const source *src, char *err, size_t errlen) {
    char *obj = object_name(c, key);
    char *buf = src->mem ? NULL : vdn_xmalloc((size_t)src->size);
    int rc = 0;
    if (buf) rc = source_read(src, 0, (size_t)src->size, buf, err, errlen);
    if (rc == 0) {
        char what[1200];
        snprintf(what, sizeof what, "put %s", key);
        s3_req r = {.method = "PUT",
                    .object = obj,
                    .body = buf ? buf : src->mem,
                    .body_len = (size_t)src->size,
                    .content_type = "application/octet-stream",
                    .out_fd = -1,
                    .what = what};
        rc = s3_perform(c, &r, err, errlen);
        s3_req_free(&r);
    }
    free(buf);
    free(obj);
    return rc;
}

static void xml_escape_into(char *dst, size_t cap, const char *s) {
    size_t o = 0;
    for (; *s && o + 7 < cap; s++) {
        const char *rep = NULL;
        switch (*s) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&apos;";
            break;
        }
        if (rep) {
            size_t n = strlen(rep);
            memcpy(dst + o, rep, n);
            o += n;
        } else {
            dst[o++] = *s;
        }
    }
    dst[o] = 0;
}

static void abort_upload(s3_conn *c, const char *obj, const char *key, const char *enc_id) {
    char query[1024], what[1200], err[VDN_ERR_LEN];
    snprintf(query, sizeof query, "uploadId=%s", enc_id);
    snprintf(what, sizeof what, "abort multipart upload of %s", key);
    /* Best effort, briefly: S3 lifecycle rules (AbortIncompleteMultipartUpload) clean up the
     * rest, and the object never appeared anyway. */
    s3_req r = {.method = "DELETE",
                .object = obj,
                .query = query,
                .out_fd = -1,
                .what = what,
                .max_retries = c->max_retries < 2 ? c->max_retries : 2};
    if (s3_perform(c, &r, err, sizeof err)) VDN_WARN("%s", err);
    s3_req_free(&r);
}

static int put_multipart(s3_conn *c, const char *key, const source *src, char *err, size_t errlen) {
    size_t part = c->part_size;
    while ((src->size + part - 1) / part > MAX_PARTS)
        part += MIB;
    size_t nparts = (size_t)((src->size + part - 1) / part);
    char *obj = object_name(c, key);
    char what[1200];
    snprintf(what, sizeof what, "put %s (initiate multipart upload)", key);
    s3_req r = {.method = "POST",
                .object = obj,
                .query = "uploads=",
                .content_type = "application/octet-stream",
                .out_fd = -1,
                .what = what};
    int rc = s3_perform(c, &r, err, errlen);
    char *upload_id = NULL;
    if (rc == 0) {
        char sub[VDN_ERR_LEN];
        if (vdn_s3_parse_upload_id(r.body_in.s, r.body_in.n, &upload_id, sub, sizeof sub))
            rc = vdn_fail(err, errlen, "%s: %s: %s", c->display, what, sub);
    }
    s3_req_free(&r);
    if (rc) {
        free(obj);
        return rc;
    }
    char *enc_id = s3_encode(upload_id, 0);
    char(*etags)[256] = vdn_xcalloc(nparts, sizeof *etags);
    char *buf = vdn_xmalloc(part);
    for (size_t i = 0; i < nparts && rc == 0; i++) {
        uint64_t off = (uint64_t)i * part;
        size_t len = (size_t)(src->size - off < part ? src->size - off : part);
        rc = source_read(src, off, len, buf, err, errlen);
        if (rc) break;
        char query[1024];
        /* Sorted by name, as curl 7.88 signs the query string verbatim. */
        snprintf(query, sizeof query, "partNumber=%zu&uploadId=%s", i + 1, enc_id);
        snprintf(what, sizeof what, "put %s (part %zu of %zu)", key, i + 1, nparts);
        s3_req pr = {.method = "PUT",
                     .object = obj,
                     .query = query,
                     .body = buf,
                     .body_len = len,
                     .out_fd = -1,
                     .what = what};
        rc = s3_perform(c, &pr, err, errlen);
        if (rc == 0 && !pr.etag[0])
            rc = vdn_fail(err, errlen, "%s: %s: the response has no ETag header", c->display, what);
        if (rc == 0) snprintf(etags[i], sizeof etags[i], "%s", pr.etag);
        s3_req_free(&pr);
    }
    free(buf);
    if (rc == 0) {
        size_t cap = 128 + nparts * 640, o = 0;
        char *xml = vdn_xmalloc(cap);
        o += (size_t)snprintf(xml + o, cap - o, "<CompleteMultipartUpload>");
        for (size_t i = 0; i < nparts; i++) {
            char esc[600];
            xml_escape_into(esc, sizeof esc, etags[i]);
            o += (size_t)snprintf(xml + o, cap - o,
                                  "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>", i + 1,
                                  esc);
        }
        o += (size_t)snprintf(xml + o, cap - o, "</CompleteMultipartUpload>");
        char query[1024];
        snprintf(query, sizeof query, "uploadId=%s", enc_id);
        snprintf(what, sizeof what, "put %s (complete multipart upload of %zu parts)", key, nparts);
        s3_req cr = {.method = "POST",
                     .object = obj,
                     .query = query,
                     .body = xml,
                     .body_len = o,
                     .content_type = "application/xml",
                     .out_fd = -1,
                     .what = what};
        rc = s3_perform(c, &cr, err, errlen);
        if (rc == 0) {
            char sub[VDN_ERR_LEN];
            if (vdn_s3_check_complete(cr.body_in.s, cr.body_in.n, sub, sizeof sub))
                rc = vdn_fail(err, errlen, "%s: %s: %s", c->display, what, sub);
        }
        s3_req_free(&cr);
        free(xml);
    }
    if (rc) abort_upload(c, obj, key, enc_id);
    free(etags);
    free(enc_id);
    free(upload_id);
    free(obj);
    return rc;
}

static int put_source(s3_conn *c, const char *key, const source *src, char *err, size_t errlen) {
    if (src->size <= c->part_size) return put_single(c, key, src, err, errlen);
    return put_multipart(c, key, src, err, errlen);
}

static int s3_put_file(void *be, const char *key, const char *local_path, char *err,
                       size_t errlen) {
    int fd = open(local_path, O_RDONLY);
    if (fd < 0)
        return vdn_fail(err, errlen, "put %s: cannot open local file %s: %s", key, local_path,
                        strerror(errno));
    struct stat sb;
    memset(&sb, 0, sizeof sb);
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int dir = S_ISDIR(sb.st_mode);
        close(fd);
        return vdn_fail(err, errlen, "put %s: local path %s is %s", key, local_path,
                        dir ? "a directory, not a file" : "not a regular file");
    }
    source src = {NULL, fd, local_path, (uint64_t)sb.st_size};
    int rc = put_source(be, key, &src, err, errlen);
    close(fd);
    return rc;
}

static int s3_put_bytes(void *be, const char *key, const void *data, size_t len, char *err,
                        size_t errlen) {
    source src = {data, -1, "(memory)", len};
    return put_source(be, key, &src, err, errlen);
}

typedef struct {
    s3_conn *c;
    const char *key;
} get_job;

static int fill_get(void *user, int fd, char *err, size_t errlen) {
    get_job *j = user;
    char *obj = object_name(j->c, j->key);
    char what[1200];
    snprintf(what, sizeof what, "get %s", j->key);
    s3_req r = {.method = "GET", .object = obj, .out_fd = fd, .what = what};
    int rc = s3_perform(j->c, &r, err, errlen);
    s3_req_free(&r);
    free(obj);
    return rc;
}

static int s3_get_file(void *be, const char *key, const char *local_path, char *err,
                       size_t errlen) {
    get_job j = {be, key};
    return vdn_store_write_local_atomic(local_path, fill_get, &j, err, errlen);
}

static int s3_get_bytes(void *be, const char *key, void **data, size_t *len, char *err,
                        size_t errlen) {
    s3_conn *c = be;
    char *obj = object_name(c, key);
    char what[1200];
    snprintf(what, sizeof what, "get %s", key);
    s3_req r = {.method = "GET", .object = obj, .out_fd = -1, .what = what};
    int rc = s3_perform(c, &r, err, errlen);
    if (rc == 0) {
        *len = r.body_in.n;
        *data = r.body_in.s ? r.body_in.s : vdn_xcalloc(1, 1);
        r.body_in.s = NULL;
    }
    s3_req_free(&r);
    free(obj);
    return rc;
}

static int s3_exists(void *be, const char *key, uint64_t *size, char *err, size_t errlen) {
    s3_conn *c = be;
    char *obj = object_name(c, key);
    char what[1200];
    snprintf(what, sizeof what, "exists %s", key);
    s3_req r = {.method = "HEAD", .object = obj, .out_fd = -1, .allow_404 = 1, .what = what};
    int rc = s3_perform(c, &r, err, errlen);
    if (rc == 0) {
        rc = r.status == 404 ? 0 : 1;
        if (rc == 1) *size = r.content_length >= 0 ? (uint64_t)r.content_length : 0;
    }
    s3_req_free(&r);
    free(obj);
    return rc;
}

static int cmp_object(const void *a, const void *b) {
    return strcmp(((const vdn_s3_object *)a)->key, ((const vdn_s3_object *)b)->key);
}

/* All pages first, then the callback: a listing is a few thousand keys at most here. */
static int s3_list(void *be, const char *prefix, vdn_store_list_fn fn, void *user, char *err,
                   size_t errlen) {
    s3_conn *c = be;
    vdn_s3_list_page all = {0};
    size_t cap = 0;
    char *full = object_name(c, prefix);
    size_t strip = *c->prefix ? strlen(c->prefix) + 1 : 0;
    char *enc_prefix = s3_encode(full, 0);
    char *token = NULL;
    int rc = 0, last = 0;
    for (int page_no = 1; rc == 0 && !last; page_no++) {
        char *enc_token = token ? s3_encode(token, 0) : NULL;
        size_t qn = strlen(enc_prefix) + (enc_token ? strlen(enc_token) : 0) + 64;
        char *query = vdn_xmalloc(qn);
        /* Sorted by name: continuation-token < list-type < prefix. */
        snprintf(query, qn, "%s%s%slist-type=2&prefix=%s", enc_token ? "continuation-token=" : "",
                 enc_token ? enc_token : "", enc_token ? "&" : "", enc_prefix);
        char what[1200];
        snprintf(what, sizeof what, "list '%s' (page %d)", prefix, page_no);
        s3_req r = {.method = "GET", .query = query, .out_fd = -1, .what = what};
        rc = s3_perform(c, &r, err, errlen);
        vdn_s3_list_page page = {0};
        if (rc == 0) {
            char sub[VDN_ERR_LEN];
            if (vdn_s3_parse_list(r.body_in.s, r.body_in.n, &page, sub, sizeof sub))
                rc = vdn_fail(err, errlen, "%s: %s: %s", c->display, what, sub);
        }
        for (size_t i = 0; rc == 0 && i < page.n; i++) {
            const char *k = page.objects[i].key;
            if (strlen(k) < strip || strncmp(k, full, strip)) continue; /* not ours */
            if (all.n == cap) {
                cap = cap ? 2 * cap : 256;
                vdn_s3_object *nv = realloc(all.objects, cap * sizeof *nv);
                VDN_ASSERT(nv);
                all.objects = nv;
            }
            all.objects[all.n].key = vdn_xstrdup(k + strip);
            all.objects[all.n].size = page.objects[i].size;
            all.n++;
        }
        free(token);
        token = NULL;
        if (rc == 0 && page.truncated)
            token = vdn_xstrdup(page.next_token);
        else
            last = 1;
        vdn_s3_list_page_free(&page);
        s3_req_free(&r);
        free(query);
        free(enc_token);
    }
    /* S3 returns keys in byte order, but not every S3-compatible server does (s3rver walks
     * its folders depth first), so sort here: the API promises byte order everywhere. */
    if (rc == 0 && all.n) {
        qsort(all.objects, all.n, sizeof *all.objects, cmp_object);
        for (size_t i = 0; i < all.n; i++) {
            if (i && !strcmp(all.objects[i].key, all.objects[i - 1].key)) continue;
            if (fn(user, all.objects[i].key, all.objects[i].size)) break;
        }
    }
    vdn_s3_list_page_free(&all);
    free(token);
    free(enc_prefix);
    free(full);
    return rc;
}

static int s3_delete(void *be, const char *key, char *err, size_t errlen) {
    s3_conn *c = be;
    char *obj = object_name(c, key);
    char what[1200];
    snprintf(what, sizeof what, "delete %s", key);
    /* S3 answers 204 for absent keys too; 404 (some servers) means the same: it is gone. */
    s3_req r = {.method = "DELETE", .object = obj, .out_fd = -1, .allow_404 = 1, .what = what};
    int rc = s3_perform(c, &r, err, errlen);
    s3_req_free(&r);
    free(obj);
    return rc;
}

const vdn_store_backend vdn_store_s3_backend = {
    .scheme = "s3",
    .close = s3_close,
    .put_file = s3_put_file,
    .put_bytes = s3_put_bytes,
    .get_file = s3_get_file,
    .get_bytes = s3_get_bytes,
    .exists = s3_exists,
    .list = s3_list,
    .del = s3_delete,
};
