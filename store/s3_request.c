/* The HTTP side of the S3 backend. curl 7.88 (Debian 12) signs with SigV4 but (a) uses our
 * query string verbatim as the canonical query, so callers pass it sorted and encoded, and
 * (b) takes the payload hash from an x-amz-content-sha256 header when present, which S3
 * requires anyway; we send the real sha256 of the body so S3 also checks integrity. */
#include "s3_request.h"
#include "retry.h"
#include "s3_xml.h"
#include "store_impl.h"
#include "vdn_util.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define ERROR_BODY_CAP (64 * 1024)

char *s3_encode(const char *s, int keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = vdn_xmalloc(3 * n + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o = 0;
    return out;
}

void s3_scrub(char *msg, const char *secret) {
    if (!msg || !secret || !*secret) return;
    size_t sl = strlen(secret);
    char *hit;
    while ((hit = strstr(msg, secret)) != NULL) {
        size_t tail = strlen(hit + sl);
        memcpy(hit, "***", 3);
        memmove(hit + 3, hit + sl, tail + 1);
        if (sl < 3) break; /* cannot happen for real secrets; avoid looping on "**" */
    }
}

typedef struct {
    s3_req *r;
    CURL *h;
    size_t sent;
    int write_failed;
    size_t max_body; /* a 2xx body kept in memory is refused beyond this */
    int too_big;
} xfer;

static size_t on_read(char *dst, size_t size, size_t nmemb, void *user) {
    xfer *x = user;
    size_t want = size * nmemb, left = x->r->body_len - x->sent;
    if (want > left) want = left;
    if (want) memcpy(dst, (const char *)x->r->body + x->sent, want);
    x->sent += want;
    return want;
}

static size_t on_write(char *src, size_t size, size_t nmemb, void *user) {
    xfer *x = user;
    size_t n = size * nmemb;
    long status = 0;
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
    if (x->r->out_fd >= 0 && status >= 200 && status < 300) {
        if (vdn_store_write_all(x->r->out_fd, src, n) != 0) {
            x->write_failed = errno ? errno : EIO;
            return 0; /* makes curl stop with CURLE_WRITE_ERROR */
        }
        return n;
    }
    if (status >= 300 && x->r->body_in.n + n > ERROR_BODY_CAP) return n; /* keep the head */
    if (x->r->body_in.n + n > x->max_body) { /* a store (or a proxy) that never stops talking */
        x->too_big = 1;
        return 0; /* makes curl stop with CURLE_WRITE_ERROR, which is not retried */
    }
    vdn_s3_buf_add(&x->r->body_in, src, n);
    return n;
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *user) {
    xfer *x = user;
    size_t n = size * nmemb;
    if (n > 5 && !strncasecmp(line, "etag:", 5)) {
        const char *v = line + 5;
        size_t len = n - 5;
        while (len && (*v == ' ' || *v == '\t'))
            v++, len--;
        while (len && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
            len--;
        if (len >= sizeof x->r->etag) len = sizeof x->r->etag - 1;
        memcpy(x->r->etag, v, len);
        x->r->etag[len] = 0;
    }
    return n;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *build_url(s3_conn *c, s3_req *r) {
    char *obj = r->object ? s3_encode(r->object, 1) : vdn_xstrdup("");
    char *bucket = s3_encode(c->bucket, 0);
    size_t n =
        strlen(c->endpoint) + strlen(bucket) + strlen(obj) + (r->query ? strlen(r->query) : 0) + 8;
    char *url = vdn_xmalloc(n);
    snprintf(url, n, "%s/%s%s%s%s%s", c->endpoint, bucket, r->object ? "/" : "", obj,
             r->query ? "?" : "", r->query ? r->query : "");
    free(obj);
    free(bucket);
    return url;
}

/* vdn_store_retried_ok(): process-wide, as the worker reports one number for all its stores. */
static uint64_t retried_ok;

uint64_t vdn_store_retried_ok(void) {
    return __atomic_load_n(&retried_ok, __ATOMIC_RELAXED);
}

/* One attempt. Returns the CURLcode; fills r->status etc. */
static CURLcode attempt(s3_conn *c, CURL *h, s3_req *r, const char *url, const char *payload_sha,
                        char *curl_err) {
    if (!h) return CURLE_FAILED_INIT;
    curl_easy_reset(h);
    xfer x = {r, h, 0, 0, c->max_body, 0};
    r->status = 0;
    r->etag[0] = 0;
    r->content_length = -1;
    r->body_in.n = 0;
    if (r->body_in.s) r->body_in.s[0] = 0;

    char region_sig[160], sha_hdr[128], token_hdr[4096];
    struct curl_slist *hdrs = NULL;
    snprintf(sha_hdr, sizeof sha_hdr, "x-amz-content-sha256: %s", payload_sha);
    hdrs = curl_slist_append(hdrs, sha_hdr);
    if (r->content_type) {
        char ct[256];
        snprintf(ct, sizeof ct, "Content-Type: %s", r->content_type);
        hdrs = curl_slist_append(hdrs, ct);
    }
    if (c->access_key) {
        snprintf(region_sig, sizeof region_sig, "aws:amz:%s:s3", c->region);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, region_sig);
        curl_easy_setopt(h, CURLOPT_USERNAME, c->access_key);
        curl_easy_setopt(h, CURLOPT_PASSWORD, c->secret_key);
        if (c->session_token) {
            snprintf(token_hdr, sizeof token_hdr, "x-amz-security-token: %s", c->session_token);
            hdrs = curl_slist_append(hdrs, token_hdr);
        }
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    /* No total timeout (objects can be large); a stalled transfer is cut instead. */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
    if (!strcmp(r->method, "HEAD")) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (!strcmp(r->method, "PUT")) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, &x);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
    } else if (!strcmp(r->method, "POST")) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body ? (const char *)r->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    } else if (strcmp(r->method, "GET")) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
    }
    curl_err[0] = 0;
    CURLcode cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_off_t cl = -1;
    curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    r->content_length = cl;
    if (cc == CURLE_WRITE_ERROR && x.write_failed)
        snprintf(curl_err, CURL_ERROR_SIZE, "writing the local file failed: %s",
                 strerror(x.write_failed));
    if (cc == CURLE_WRITE_ERROR && x.too_big)
        snprintf(curl_err, CURL_ERROR_SIZE,
                 "the response body is over %zu bytes, the store's limit on a body held in "
                 "memory (max_body_bytes)",
                 x.max_body);
    curl_slist_free_all(hdrs);
    return cc;
}

static void sleep_seconds(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int s3_perform(s3_conn *c, s3_req *r, char *err, size_t errlen) {
    pthread_once(&curl_once, curl_init_once);
    /* Take the cached handle if free, else a private one for this request. */
    CURL *h = NULL;
    int shared = pthread_mutex_trylock(&c->curl_lock) == 0;
    if (shared) {
        if (!c->curl) c->curl = curl_easy_init();
        h = c->curl;
    } else {
        h = curl_easy_init();
    }
    uint64_t rng = c->rng_seed ^ (__atomic_fetch_add(&c->rng_counter, 1, __ATOMIC_RELAXED) *
                                  0x9e3779b97f4a7c15ull);
    char payload_sha[65];
    vdn_sha256_hex(r->body ? r->body : "", r->body ? r->body_len : 0, payload_sha);
    char *url = build_url(c, r);
    char curl_err[CURL_ERROR_SIZE];
    double slept = 0;
    int max_retries = r->max_retries > 0 ? r->max_retries : c->max_retries;
    int rc = -1;
    for (int tries = 1;; tries++) {
        if (r->out_fd >= 0) {
            if (ftruncate(r->out_fd, 0) != 0 || lseek(r->out_fd, 0, SEEK_SET) != 0) {
                vdn_fail(err, errlen, "%s %s: cannot rewind the local temp file: %s", c->display,
                         r->what, strerror(errno));
                break;
            }
        }
        CURLcode cc = attempt(c, h, r, url, payload_sha, curl_err);
        if ((cc == CURLE_OK && r->status >= 200 && r->status < 300) ||
            (cc == CURLE_OK && r->status == 404 && r->allow_404)) {
            if (tries > 1) __atomic_fetch_add(&retried_ok, 1, __ATOMIC_RELAXED);
            rc = 0;
            break;
        }
        char code[128] = "", msg[512] = "", why[1024];
        if (cc == CURLE_OK) {
            vdn_s3_parse_error(r->body_in.s, r->body_in.n, code, sizeof code, msg, sizeof msg);
            if (code[0])
                snprintf(why, sizeof why, "HTTP %ld %s: %s", r->status, code, msg);
            else
                snprintf(why, sizeof why, "HTTP %ld%s", r->status,
                         r->status == 404 ? " (no such key or bucket)" : "");
        } else {
            snprintf(why, sizeof why, "%s (%s)", curl_easy_strerror(cc),
                     curl_err[0] ? curl_err : "no detail");
        }
        int retryable = vdn_retry_is_retryable((int)cc, r->status, code);
        double delay = vdn_retry_delay(tries, c->retry_base_seconds, 20.0, &rng);
        if (!retryable || tries > max_retries || slept + delay > c->retry_max_seconds) {
            if (retryable)
                vdn_fail(err, errlen, "%s: %s at endpoint %s failed after %d attempts: %s",
                         c->display, r->what, c->endpoint, tries, why);
            else
                vdn_fail(err, errlen, "%s: %s at endpoint %s: %s", c->display, r->what, c->endpoint,
                         why);
            break;
        }
        char line[1400];
        snprintf(line, sizeof line, "%s: %s at %s: %s; retry %d/%d in %.2f s", c->display, r->what,
                 c->endpoint, why, tries, max_retries, delay);
        s3_scrub(line, c->secret_key);
        VDN_WARN("%s", line);
        sleep_seconds(delay);
        slept += delay;
    }
    free(url);
    if (shared)
        pthread_mutex_unlock(&c->curl_lock);
    else if (h)
        curl_easy_cleanup(h);
    s3_scrub(err, c->secret_key);
    return rc;
}

void s3_req_free(s3_req *r) {
    free(r->body_in.s);
    r->body_in.s = NULL;
    r->body_in.n = r->body_in.cap = 0;
}
