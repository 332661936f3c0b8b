/* safetensors: the file format of every tensor vdn reads or writes (checkpoints, adapters, prompt
 * caches, noise files, outputs). https://github.com/huggingface/safetensors
 *
 *   u64 little-endian N | N bytes of JSON header | data region
 *   header: {"__metadata__": {str: str}, "name": {"dtype": "BF16", "shape": [..],
 *            "data_offsets": [begin, end]}, ...}   offsets relative to the data region
 *
 * The reader mmaps the file and validates the whole header before anything uses it: the 8-byte
 * length, JSON syntax, every entry's dtype/shape/offsets, shape x dtype size == byte range,
 * ranges inside the file, no two tensors overlapping, and the data region fully covered (no
 * holes, as the reference writer never leaves any). Errors name the file and the tensor.
 *
 * The writer builds the header itself (entries in the order given, data packed contiguously,
 * header padded with spaces to a multiple of 8 so data stays aligned) and writes atomically
 * (PATH.tmp.PID, fsync, rename): a crash never leaves a half file under the final name. */
#ifndef VDN_SAFETENSORS_H
#define VDN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

#ifdef __cplusplus
extern "C" { /* op.h includes it, and op.h is included by the CUDA backend's C++ */
#endif

#define VDN_ST_MAX_DIMS 8

size_t vdn_dtype_size(vdn_dtype dt);                /* bytes per element */
const char *vdn_dtype_name(vdn_dtype dt);           /* "F32", "BF16", "F16", "I64", "I32", "U8" */
int vdn_dtype_parse(const char *s, vdn_dtype *out); /* 0 ok, -1 unknown */
int vdn_dtype_is_float(vdn_dtype dt);               /* F32, BF16, F16 */

/* One tensor of an open file. data points into the mapping (valid until vdn_st_close). */
typedef struct {
    const char *name;
    vdn_dtype dtype;
    int ndim;
    int64_t shape[VDN_ST_MAX_DIMS];
    int64_t numel;
    uint64_t nbytes;
    uint64_t offset; /* absolute file offset of the first byte */
    const void *data;
} vdn_st_entry;

typedef struct vdn_st_file vdn_st_file;

/* Open and validate. NULL with a message naming the file (and tensor) on any problem. */
vdn_st_file *vdn_st_open(const char *path, char *err, size_t errlen);
/* Same validation over a buffer the caller keeps alive (fuzzing, tests). label names it. */
vdn_st_file *vdn_st_open_mem(const void *buf, size_t len, const char *label, char *err,
                             size_t errlen);
void vdn_st_close(vdn_st_file *f);

const char *vdn_st_path(const vdn_st_file *f);
int vdn_st_count(const vdn_st_file *f); /* tensors, in data-offset order */
const vdn_st_entry *vdn_st_at(const vdn_st_file *f, int i);
const vdn_st_entry *vdn_st_find(const vdn_st_file *f, const char *name); /* NULL if absent */
/* The raw JSON header bytes (for identity hashes). */
const char *vdn_st_header(const vdn_st_file *f, size_t *len);
/* __metadata__ (string values only, as the format requires). */
int vdn_st_meta_count(const vdn_st_file *f);
void vdn_st_meta_at(const vdn_st_file *f, int i, const char **key, const char **value);
const char *vdn_st_meta(const vdn_st_file *f, const char *key); /* NULL if absent */

/* Widen a float tensor (F32/BF16/F16) into out[numel]. -1 (naming file and tensor) for a
 * non-float dtype. */
int vdn_st_to_f32(const vdn_st_file *f, const vdn_st_entry *e, float *out, char *err,
                  size_t errlen);
/* Check ndim/shape exactly; -1 with "FILE: tensor NAME: shape [a, b], expected [c, d]". */
int vdn_st_check_shape(const vdn_st_file *f, const vdn_st_entry *e, int ndim, const int64_t *shape,
                       char *err, size_t errlen);

/* ---- sharded checkpoints: X.safetensors.index.json {"metadata": {...}, "weight_map": {...}} ----
 */

typedef struct vdn_st_set vdn_st_set;

/* path: a .safetensors file, or a *.safetensors.index.json whose weight_map names shard files
 * in the same directory. Every tensor of the weight map must be in the shard it names, and every
 * tensor of every shard must be in the weight map. */
vdn_st_set *vdn_st_set_open(const char *path, char *err, size_t errlen);
void vdn_st_set_close(vdn_st_set *s);
int vdn_st_set_count(const vdn_st_set *s);
/* i-th tensor over all shards (sorted by name); *file (optional) gets its shard. */
const vdn_st_entry *vdn_st_set_at(const vdn_st_set *s, int i, const vdn_st_file **file);
const vdn_st_entry *vdn_st_set_find(const vdn_st_set *s, const char *name,
                                    const vdn_st_file **file);
int vdn_st_set_file_count(const vdn_st_set *s);
const vdn_st_file *vdn_st_set_file(const vdn_st_set *s, int i);
/* The index JSON text ("" for a single file), for identity hashes. */
const char *vdn_st_set_index_text(const vdn_st_set *s);

/* ---- writer ---- */

typedef struct {
    const char *name;
    vdn_dtype dtype;
    int ndim;
    int64_t shape[VDN_ST_MAX_DIMS];
    const void *data; /* numel * dtype size bytes; may be NULL for the streaming writer */
} vdn_st_tensor;

typedef struct {
    const char *key, *value;
} vdn_st_kv;

/* Whole file at once, atomically. */
int vdn_st_write(const char *path, const vdn_st_tensor *tensors, int n, const vdn_st_kv *meta,
                 int n_meta, char *err, size_t errlen);

/* Streaming: declare every tensor (data ignored), then put each tensor's bytes in the declared
 * order (any number of put calls per tensor), then finish (fsync + rename). Memory stays at one
 * caller buffer however large the file. abort removes the temporary file. */
typedef struct vdn_st_writer vdn_st_writer;
vdn_st_writer *vdn_st_writer_begin(const char *path, const vdn_st_tensor *tensors, int n,
                                   const vdn_st_kv *meta, int n_meta, char *err, size_t errlen);
int vdn_st_writer_put(vdn_st_writer *w, const void *bytes, size_t len, char *err, size_t errlen);
int vdn_st_writer_finish(vdn_st_writer *w, char *err, size_t errlen); /* frees w */
void vdn_st_writer_abort(vdn_st_writer *w);                           /* frees w */

#ifdef __cplusplus
}
#endif
#endif
