/* Object storage used by the worker (uploads), the CLI (`vdn store`) and eval (downloads).
 * Backends: file://DIR (embedded default) and s3://bucket/prefix (libcurl CURLOPT_AWS_SIGV4,
 * path-style, custom endpoint, multipart for large objects, retries with backoff).
 * Writes are atomic: nothing ever appears under a final key half-written.
 * Keys are relative paths like "batches/b12/job34/out.safetensors" ('/'-separated, no "..").
 * Credentials never appear in logs or error messages. */
#ifndef VDN_STORE_H
#define VDN_STORE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *endpoint;     /* S3: e.g. "http://127.0.0.1:4568"; NULL = $VDN_S3_ENDPOINT or AWS */
    const char *region;       /* NULL = $AWS_REGION or "us-east-1" */
    const char *access_key;   /* NULL = $AWS_ACCESS_KEY_ID */
    const char *secret_key;   /* NULL = $AWS_SECRET_ACCESS_KEY */
    int max_retries;          /* 0 = default (8) */
    double retry_max_seconds; /* cap on total backoff per request, 0 = default (120 s) */
    size_t multipart_threshold; /* 0 = default (64 MiB); parts are this size */
    /* S3: a response body held in memory (listings, multipart answers, vdn_store_get_bytes)
     * larger than this fails the request, not retried; 0 = default (64 MiB). Objects fetched to
     * files (vdn_store_get_file) stream to disk and are not bounded by it. */
    size_t max_body_bytes;
} vdn_store_opts;

typedef struct vdn_store vdn_store;

/* uri: "file:///abs/dir", "file://rel/dir", a plain directory path, or "s3://bucket/prefix". */
vdn_store *vdn_store_open(const char *uri, const vdn_store_opts *opts, char *err, size_t errlen);
void vdn_store_close(vdn_store *st);
const char *vdn_store_uri(const vdn_store *st); /* as opened, never with credentials */

int vdn_store_put_file(vdn_store *st, const char *key, const char *local_path, char *err,
                       size_t errlen);
int vdn_store_put_bytes(vdn_store *st, const char *key, const void *data, size_t len, char *err,
                        size_t errlen);
int vdn_store_get_file(vdn_store *st, const char *key, const char *local_path, char *err,
                       size_t errlen);
/* *data malloc'd, caller frees. (The store owner adds: a NUL byte follows the len bytes, so
 * text objects can be used as strings.) */
int vdn_store_get_bytes(vdn_store *st, const char *key, void **data, size_t *len, char *err,
                        size_t errlen);
/* 1 exists, 0 absent, -1 error. */
int vdn_store_exists(vdn_store *st, const char *key, uint64_t *size, char *err, size_t errlen);
/* Calls fn for each key under prefix (sorted); fn returns nonzero to stop. */
int vdn_store_list(vdn_store *st, const char *prefix,
                   int (*fn)(void *user, const char *key, uint64_t size), void *user, char *err,
                   size_t errlen);
int vdn_store_delete(vdn_store *st, const char *key, char *err, size_t errlen);

/* Added by the store owner (additive). 0 if key is a valid object key, else -1 and a message
 * saying what is wrong: relative '/'-separated path, no empty/"."/".." segments, no leading
 * '/', no control bytes or backslashes, at most 1024 bytes, not under ".vdn-tmp/". */
int vdn_store_check_key(const char *key, char *err, size_t errlen);
/* Same rules for a list prefix, which may also be "" or end with '/'. */
int vdn_store_check_prefix(const char *prefix, char *err, size_t errlen);

/* Requests (of every store of this process) that failed at least once and then succeeded on one
 * of the backend's own retries (S3: connection errors, 5xx, 429, throttling; see docs/storage.md
 * "Retries"). A failure the retries did not cure is not counted here: the caller sees it. The
 * file backend does not retry. For operators: a rising count means a flaky store that has not
 * failed a job yet (the worker reports it, /metrics exports it). */
uint64_t vdn_store_retried_ok(void);

/* Temp files of puts whose process died that the file stores of this process removed (at open
 * and every minute of puts; store_file.c), since it started. A worker's run records say it. */
uint64_t vdn_store_temps_swept(void);

#endif
