/* Internal: what store.c (the dispatcher) needs from each backend. Not part of the public API.
 * store.c validates keys and prefixes before a backend sees them, so backends may assume a key
 * is a clean relative path: no leading '/', no empty, "." or ".." segments, no control bytes. */
#ifndef VDN_STORE_IMPL_H
#define VDN_STORE_IMPL_H

#include "store.h"

typedef int (*vdn_store_list_fn)(void *user, const char *key, uint64_t size);

typedef struct {
    const char *scheme; /* "file" or "s3", for messages */
    void (*close)(void *be);
    int (*put_file)(void *be, const char *key, const char *local_path, char *err, size_t errlen);
    int (*put_bytes)(void *be, const char *key, const void *data, size_t len, char *err,
                     size_t errlen);
    int (*get_file)(void *be, const char *key, const char *local_path, char *err, size_t errlen);
    int (*get_bytes)(void *be, const char *key, void **data, size_t *len, char *err, size_t errlen);
    int (*exists)(void *be, const char *key, uint64_t *size, char *err, size_t errlen);
    int (*list)(void *be, const char *prefix, vdn_store_list_fn fn, void *user, char *err,
                size_t errlen);
    int (*del)(void *be, const char *key, char *err, size_t errlen);
} vdn_store_backend;

extern const vdn_store_backend vdn_store_file_backend;
extern const vdn_store_backend vdn_store_s3_backend;

/* file://DIR: dir must exist or be creatable. */
void *vdn_store_file_open(const char *dir, char *err, size_t errlen);
/* s3://bucket/prefix: bucket_and_prefix is the part after "s3://". */
void *vdn_store_s3_open(const char *bucket_and_prefix, const vdn_store_opts *opts, char *err,
                        size_t errlen);

/* The temp folder inside a file store (same filesystem, so rename publishes atomically).
 * Keys may not use it as their first segment. */
#define VDN_STORE_TMP_DIR ".vdn-tmp"

/* Write a local file atomically (temp next to it, fsync, rename); the reader callback fills
 * the temp file. Used by get_file in both backends so a failed download leaves nothing. */
typedef int (*vdn_store_fill_fn)(void *user, int fd, char *err, size_t errlen);
int vdn_store_write_local_atomic(const char *local_path, vdn_store_fill_fn fill, void *user,
                                 char *err, size_t errlen);
/* write(2) all of buf, retrying on EINTR. 0 or -1 with errno set. */
int vdn_store_write_all(int fd, const void *buf, size_t len);

#endif
