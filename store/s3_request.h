/* One S3 request over libcurl, signed with CURLOPT_AWS_SIGV4, retried with backoff.
 * Internal to the s3 backend. */
#ifndef VDN_S3_REQUEST_H
#define VDN_S3_REQUEST_H

#include <curl/curl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "s3_xml.h"

typedef struct {
    char *endpoint; /* "http://host:port", no trailing '/' */
    char *region;
    char *access_key; /* NULL: unsigned (anonymous) requests */
    char *secret_key;
    char *session_token;
    char *bucket;
    char *prefix;  /* object-name prefix without trailing '/', "" for none */
    char *display; /* "s3://bucket/prefix" for messages */
    int max_retries;
    double retry_max_seconds;
    double retry_base_seconds;
    size_t part_size;
    size_t max_body; /* vdn_store_opts.max_body_bytes */
    /* One cached handle, reused (curl_easy_reset) so connections stay alive. A request that
     * finds it busy (another thread) uses a handle of its own: a store may be shared. */
    pthread_mutex_t curl_lock;
    CURL *curl;
    uint64_t rng_seed;
    uint64_t rng_counter; /* atomic */
} s3_conn;

typedef vdn_s3_buf s3_buf;

typedef struct {
    /* what to send */
    const char *method; /* GET, HEAD, PUT, POST, DELETE */
    const char *object; /* full object name (prefix included); NULL = the bucket itself */
    const char *query;  /* already canonical: sorted, RFC 3986-encoded; NULL = none */
    const void *body;   /* PUT/POST payload (may be NULL with body_len 0) */
    size_t body_len;
    const char *content_type; /* NULL = none */
    int out_fd;               /* >= 0: a 2xx GET body goes to this fd (rewound on retry) */
    int allow_404;            /* 404 is an answer (exists), not an error */
    int max_retries;          /* 0 = the store's setting */
    const char *what;         /* for messages, e.g. "put batches/b1/x.bin" */
    /* what came back */
    long status;
    s3_buf body_in; /* response body unless it went to out_fd (error bodies capped) */
    char etag[256];
    int64_t content_length;
} s3_req;

/* 0 on a 2xx (or 404 with allow_404); -1 with a message naming the store, endpoint, operation
 * and the S3 error code/message or the connection error, never the secret. */
int s3_perform(s3_conn *c, s3_req *r, char *err, size_t errlen);
void s3_req_free(s3_req *r);

/* RFC 3986 percent-encoding as SigV4 wants it; keep_slash for paths. Caller frees. */
char *s3_encode(const char *s, int keep_slash);

/* Replace every occurrence of secret in msg by "***" (defense in depth for error texts). */
void s3_scrub(char *msg, const char *secret);

#endif
