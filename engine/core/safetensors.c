/* safetensors reader (mmap + full header validation) and writer; see safetensors.h. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "vdn_util.h"

/* The reference implementation refuses headers above 100 MB; a 638-tensor H3 header is ~80 KB. */
#define ST_MAX_HEADER (100u * 1024 * 1024)

/* ---- dtypes ---- */

static const struct {
    const char *name;
    size_t size;
} dtype_info[] = {
    [VDN_DT_F32] = {"F32", 4},   [VDN_DT_BF16] = {"BF16", 2},       [VDN_DT_F16] = {"F16", 2},
    [VDN_DT_I64] = {"I64", 8},   [VDN_DT_I32] = {"I32", 4},         [VDN_DT_U8] = {"U8", 1},
    [VDN_DT_F64] = {"F64", 8},   [VDN_DT_I16] = {"I16", 2},         [VDN_DT_I8] = {"I8", 1},
    [VDN_DT_U16] = {"U16", 2},   [VDN_DT_U32] = {"U32", 4},         [VDN_DT_U64] = {"U64", 8},
    [VDN_DT_BOOL] = {"BOOL", 1}, [VDN_DT_F8_E4M3] = {"F8_E4M3", 1},
};
#define N_DTYPES ((int)(sizeof dtype_info / sizeof dtype_info[0]))

size_t vdn_dtype_size(vdn_dtype dt) {
    return (int)dt >= 0 && (int)dt < N_DTYPES ? dtype_info[dt].size : 0;
}
const char *vdn_dtype_name(vdn_dtype dt) {
    return (int)dt >= 0 && (int)dt < N_DTYPES ? dtype_info[dt].name : "?";
}
int vdn_dtype_parse(const char *s, vdn_dtype *out) {
    for (int i = 0; i < N_DTYPES; i++)
        if (strcmp(s, dtype_info[i].name) == 0) {
            *out = (vdn_dtype)i;
            return 0;
        }
    return -1;
}
int vdn_dtype_is_float(vdn_dtype dt) {
    return dt == VDN_DT_F32 || dt == VDN_DT_BF16 || dt == VDN_DT_F16;
}

/* ---- reader ---- */

typedef struct {
    char *key, *value;
} meta_kv;

struct vdn_st_file {
    char *path;
    const uint8_t *base; /* whole file */
    size_t size;
    int mapped;         /* base is our mmap (else the caller's buffer) */
    const char *header; /* base + 8 */
    size_t header_len;
    int n;
    vdn_st_entry *entries; /* sorted by offset */
    int *by_name;          /* indices sorted by name */
    int n_meta;
    meta_kv *meta;
};

const char *vdn_st_path(const vdn_st_file *f) {
    return f->path;
}
int vdn_st_count(const vdn_st_file *f) {
    return f->n;
}
const vdn_st_entry *vdn_st_at(const vdn_st_file *f, int i) {
    return i >= 0 && i < f->n ? &f->entries[i] : NULL;
}
const char *vdn_st_header(const vdn_st_file *f, size_t *len) {
    if (len) *len = f->header_len;
    return f->header;
}
int vdn_st_meta_count(const vdn_st_file *f) {
    return f->n_meta;
}
void vdn_st_meta_at(const vdn_st_file *f, int i, const char **key, const char **value) {
    *key = f->meta[i].key;
    *value = f->meta[i].value;
}
const char *vdn_st_meta(const vdn_st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

static int cmp_by_name(const void *a, const void *b, void *entries) {
    const vdn_st_entry *e = entries;
    return strcmp(e[*(const int *)a].name, e[*(const int *)b].name);
}
static int cmp_by_offset(const void *a, const void *b) {
    const vdn_st_entry *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    /* zero-size tensors share an offset with their successor: order them by size, then name */
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

const vdn_st_entry *vdn_st_find(const vdn_st_file *f, const char *name) {
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const vdn_st_entry *e = &f->entries[f->by_name[mid]];
        int c = strcmp(e->name, name);
        if (c == 0) return e;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

void vdn_st_close(vdn_st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++)
        free((char *)f->entries[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->entries);
    free(f->by_name);
    free(f->meta);
    if (f->mapped && f->base) munmap((void *)f->base, f->size);
    free(f->path);
    free(f);
}

/* A JSON number that is an exact non-negative integer below 2^53 (cJSON holds doubles). */
static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (!(d >= 0) || d > 9007199254740992.0 || floor(d) != d) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int parse_meta(vdn_st_file *f, const cJSON *m, char *err, size_t errlen) {
    if (!cJSON_IsObject(m))
        return vdn_fail(err, errlen, "%s: __metadata__ must be an object of strings", f->path);
    int n = cJSON_GetArraySize(m);
    f->meta = vdn_xcalloc(n ? n : 1, sizeof *f->meta);
    const cJSON *kv;
    cJSON_ArrayForEach(kv, m) {
        if (!cJSON_IsString(kv))
            return vdn_fail(err, errlen, "%s: __metadata__ key \"%s\": expected a string value",
                            f->path, kv->string);
        f->meta[f->n_meta].key = vdn_xstrdup(kv->string);
        f->meta[f->n_meta].value = vdn_xstrdup(kv->valuestring);
        f->n_meta++;
    }
    return 0;
}

static int parse_entry(vdn_st_file *f, const cJSON *t, vdn_st_entry *e, uint64_t data_len,
                       char *err, size_t errlen) {
    const char *nm = t->string;
    if (!cJSON_IsObject(t))
        return vdn_fail(err, errlen,
                        "%s: tensor \"%s\": expected an object with dtype, shape, "
                        "data_offsets",
                        f->path, nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
    if (!cJSON_IsString(dt))
        return vdn_fail(err, errlen, "%s: tensor \"%s\": missing or non-string \"dtype\"", f->path,
                        nm);
    if (vdn_dtype_parse(dt->valuestring, &e->dtype) != 0)
        return vdn_fail(err, errlen,
                        "%s: tensor \"%s\": dtype \"%s\" not supported (expected F32, BF16, F16, "
                        "I64, I32 or U8)",
                        f->path, nm, dt->valuestring);
    if (!cJSON_IsArray(sh))
        return vdn_fail(err, errlen, "%s: tensor \"%s\": missing or non-array \"shape\"", f->path,
                        nm);
    int nd = cJSON_GetArraySize(sh);
    if (nd > VDN_ST_MAX_DIMS)
        return vdn_fail(err, errlen, "%s: tensor \"%s\": %d dims, at most %d supported", f->path,
                        nm, nd, VDN_ST_MAX_DIMS);
    e->ndim = nd;
    /* numel is bounded by the file size once multiplied by the dtype size, so any product above
     * 2^62 is already wrong: stop there instead of overflowing */
    uint64_t numel = 1;
    int too_big = 0;
    for (int d = 0; d < nd; d++) {
        uint64_t v;
        if (json_uint(cJSON_GetArrayItem(sh, d), &v) != 0)
            return vdn_fail(err, errlen,
                            "%s: tensor \"%s\": shape[%d] is not a non-negative integer", f->path,
                            nm, d);
        e->shape[d] = (int64_t)v;
        if (v && numel > (UINT64_C(1) << 62) / v)
            too_big = 1;
        else
            numel *= v;
    }
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return vdn_fail(err, errlen, "%s: tensor \"%s\": \"data_offsets\" must be [begin, end]",
                        f->path, nm);
    uint64_t b, en;
    if (json_uint(cJSON_GetArrayItem(off, 0), &b) != 0 ||
        json_uint(cJSON_GetArrayItem(off, 1), &en) != 0)
        return vdn_fail(err, errlen,
                        "%s: tensor \"%s\": data_offsets must be non-negative integers", f->path,
                        nm);
    if (en < b)
        return vdn_fail(err, errlen,
                        "%s: tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64
                        "] end before begin",
                        f->path, nm, b, en);
    if (en > data_len)
        return vdn_fail(err, errlen,
                        "%s: tensor \"%s\": data_offsets end %" PRIu64
                        " beyond the data region (%" PRIu64 " bytes; truncated file?)",
                        f->path, nm, en, data_len);
    uint64_t want = numel * vdn_dtype_size(e->dtype);
    if (too_big || want != en - b)
        return vdn_fail(err, errlen,
                        "%s: tensor \"%s\": shape x %s size = %s%" PRIu64
                        " bytes but data_offsets span %" PRIu64,
                        f->path, nm, dt->valuestring, too_big ? "more than " : "",
                        too_big ? (UINT64_C(1) << 62) : want, en - b);
    e->numel = (int64_t)numel;
    e->nbytes = en - b;
    e->offset = 8 + f->header_len + b;
    e->data = f->base + e->offset;
    e->name = vdn_xstrdup(nm);
    return 0;
}

static int parse_header(vdn_st_file *f, char *err, size_t errlen) {
    if (f->size < 8)
        return vdn_fail(err, errlen,
                        "%s: %zu bytes, too short for a safetensors file (need the "
                        "8-byte header length)",
                        f->path, f->size);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = (hl << 8) | f->base[i];
    if (hl > ST_MAX_HEADER)
        return vdn_fail(err, errlen,
                        "%s: header length %" PRIu64 " exceeds the 100 MB limit "
                        "(not a safetensors file?)",
                        f->path, hl);
    if (hl > f->size - 8)
        return vdn_fail(err, errlen,
                        "%s: header length %" PRIu64 " but only %zu bytes follow "
                        "(truncated file?)",
                        f->path, hl, f->size - 8);
    if (hl < 2)
        return vdn_fail(err, errlen, "%s: header length %" PRIu64 ", expected a JSON object",
                        f->path, hl);
    f->header = (const char *)f->base + 8;
    f->header_len = (size_t)hl;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(f->header, f->header_len, &end, 0);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long pos = at ? (long)(at - f->header) : -1;
        return vdn_fail(err, errlen, "%s: header is not valid JSON (error near byte %ld)", f->path,
                        pos);
    }
    /* the format pads the header with spaces; nothing else may follow the object */
    for (const char *p = end; p && p < f->header + f->header_len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\0') {
            cJSON_Delete(root);
            return vdn_fail(err, errlen, "%s: trailing bytes after the header JSON object",
                            f->path);
        }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return vdn_fail(err, errlen, "%s: header must be a JSON object", f->path);
    }
    uint64_t data_len = f->size - 8 - f->header_len;
    int n_items = cJSON_GetArraySize(root);
    f->entries = vdn_xcalloc(n_items ? n_items : 1, sizeof *f->entries);
    int rc = 0, have_meta = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, root) {
        if (strcmp(t->string, "__metadata__") == 0) {
            if (have_meta) {
                rc = vdn_fail(err, errlen, "%s: __metadata__ appears twice", f->path);
                break;
            }
            have_meta = 1;
            if ((rc = parse_meta(f, t, err, errlen)) != 0) break;
            continue;
        }
        if (t->string[0] == '\0') {
            rc = vdn_fail(err, errlen, "%s: a tensor has an empty name", f->path);
            break;
        }
        if ((rc = parse_entry(f, t, &f->entries[f->n], data_len, err, errlen)) != 0) break;
        f->n++;
    }
    cJSON_Delete(root);
    if (rc) return rc;

    /* names unique (cJSON keeps duplicate keys) */
    f->by_name = vdn_xmalloc((f->n ? f->n : 1) * sizeof(int));
    qsort(f->entries, f->n, sizeof *f->entries, cmp_by_offset);
    for (int i = 0; i < f->n; i++)
        f->by_name[i] = i;
    qsort_r(f->by_name, f->n, sizeof(int), cmp_by_name, f->entries);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->entries[f->by_name[i]].name, f->entries[f->by_name[i - 1]].name) == 0)
            return vdn_fail(err, errlen, "%s: tensor \"%s\" appears twice in the header", f->path,
                            f->entries[f->by_name[i]].name);
    /* the data region is exactly the tensors, back to back: no overlap, no hole */
    uint64_t pos = 8 + f->header_len;
    for (int i = 0; i < f->n; i++) {
        const vdn_st_entry *e = &f->entries[i];
        if (e->offset < pos)
            return vdn_fail(err, errlen, "%s: tensor \"%s\" overlaps the previous tensor (\"%s\")",
                            f->path, e->name, i ? f->entries[i - 1].name : "?");
        if (e->offset > pos)
            return vdn_fail(err, errlen,
                            "%s: %" PRIu64 " unused bytes before tensor \"%s\" (data region must "
                            "be contiguous)",
                            f->path, e->offset - pos, e->name);
        pos = e->offset + e->nbytes;
    }
    if (pos != f->size)
        return vdn_fail(err, errlen,
                        "%s: %" PRIu64 " bytes after the last tensor (data region must end at the "
                        "end of the file)",
                        f->path, (uint64_t)f->size - pos);
    return 0;
}

vdn_st_file *vdn_st_open_mem(const void *buf, size_t len, const char *label, char *err,
                             size_t errlen) {
    vdn_st_file *f = vdn_xcalloc(1, sizeof *f);
    f->path = vdn_xstrdup(label ? label : "<memory>");
    f->base = buf;
    f->size = len;
    if (parse_header(f, err, errlen) != 0) {
        vdn_st_close(f);
        return NULL;
    }
    return f;
}

vdn_st_file *vdn_st_open(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        vdn_fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        vdn_fail(err, errlen, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    vdn_st_file *f = vdn_xcalloc(1, sizeof *f);
    f->path = vdn_xstrdup(path);
    f->size = (size_t)st.st_size;
    if (f->size > 0) {
        void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            vdn_fail(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
            close(fd);
            vdn_st_close(f);
            return NULL;
        }
        f->base = m;
        f->mapped = 1;
    }
    close(fd);
    if (parse_header(f, err, errlen) != 0) {
        vdn_st_close(f);
        return NULL;
    }
    return f;
}

int vdn_st_check_shape(const vdn_st_file *f, const vdn_st_entry *e, int ndim, const int64_t *shape,
                       char *err, size_t errlen) {
    int same = e->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = e->shape[d] == shape[d];
    if (same) return 0;
    char got[160] = "", want[160] = "";
    size_t g = 0, w = 0;
    for (int d = 0; d < e->ndim && g < sizeof got - 24; d++)
        g += snprintf(got + g, sizeof got - g, "%s%" PRId64, d ? ", " : "", e->shape[d]);
    for (int d = 0; d < ndim && w < sizeof want - 24; d++)
        w += snprintf(want + w, sizeof want - w, "%s%" PRId64, d ? ", " : "", shape[d]);
    return vdn_fail(err, errlen, "%s: tensor \"%s\": shape [%s], expected [%s]", f ? f->path : "?",
                    e->name, got, want);
}

int vdn_st_to_f32(const vdn_st_file *f, const vdn_st_entry *e, float *out, char *err,
                  size_t errlen) {
    const uint8_t *p = e->data;
    int64_t n = e->numel;
    switch (e->dtype) {
    case VDN_DT_F32:
        memcpy(out, p, (size_t)n * 4);
        return 0;
    case VDN_DT_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2); /* data may be unaligned when the header length is odd */
            out[i] = vdn_bf16_to_f32(h);
        }
        return 0;
    case VDN_DT_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = vdn_f16_to_f32(h);
        }
        return 0;
    default:
        return vdn_fail(err, errlen, "%s: tensor \"%s\": dtype %s, expected F32, BF16 or F16",
                        f ? f->path : "?", e->name, vdn_dtype_name(e->dtype));
    }
}

/* ---- sharded sets ---- */

typedef struct {
    int file;
    const vdn_st_entry *e;
} set_item;

struct vdn_st_set {
    int n_files;
    vdn_st_file **files;
    int n;
    set_item *items; /* sorted by name */
    char *index_text;
};

static int cmp_item(const void *a, const void *b) {
    return strcmp(((const set_item *)a)->e->name, ((const set_item *)b)->e->name);
}

void vdn_st_set_close(vdn_st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n_files; i++)
        vdn_st_close(s->files[i]);
    free(s->files);
    free(s->items);
    free(s->index_text);
    free(s);
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int set_add_file(vdn_st_set *s, const char *path, char *err, size_t errlen) {
    vdn_st_file *f = vdn_st_open(path, err, errlen);
    if (!f) return -1;
    s->files = realloc(s->files, (s->n_files + 1) * sizeof *s->files);
    VDN_ASSERT(s->files);
    s->files[s->n_files++] = f;
    return 0;
}

static int set_open_index(vdn_st_set *s, const char *path, char *err, size_t errlen) {
    size_t len;
    s->index_text = vdn_read_file(path, &len, err, errlen);
    if (!s->index_text) return -1;
    cJSON *root = cJSON_ParseWithLength(s->index_text, len);
    if (!root) return vdn_fail(err, errlen, "%s: not valid JSON", path);
    int rc = 0;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) {
        rc = vdn_fail(err, errlen, "%s: missing \"weight_map\" object", path);
        goto done;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[1] = '\0';
    else
        dir[0] = '\0';
    /* open each distinct shard once, in order of first mention */
    const cJSON *kv;
    char **names = NULL;
    int n_names = 0;
    cJSON_ArrayForEach(kv, wm) {
        if (!cJSON_IsString(kv)) {
            rc = vdn_fail(err, errlen, "%s: weight_map[\"%s\"]: expected a shard file name", path,
                          kv->string);
            break;
        }
        const char *shard = kv->valuestring;
        if (shard[0] == '\0' || strchr(shard, '/') || strcmp(shard, "..") == 0) {
            rc = vdn_fail(err, errlen,
                          "%s: weight_map[\"%s\"]: \"%s\" is not a file name in the index's "
                          "directory",
                          path, kv->string, shard);
            break;
        }
        int known = 0;
        for (int i = 0; i < n_names && !known; i++)
            known = strcmp(names[i], shard) == 0;
        if (known) continue;
        names = realloc(names, (n_names + 1) * sizeof *names);
        VDN_ASSERT(names);
        names[n_names++] = vdn_xstrdup(shard);
        char full[8192];
        snprintf(full, sizeof full, "%s%s", dir, shard);
        if ((rc = set_add_file(s, full, err, errlen)) != 0) break;
    }
    /* every weight_map entry is in the shard it names */
    if (rc == 0) {
        cJSON_ArrayForEach(kv, wm) {
            int fi = 0;
            while (fi < n_names && strcmp(names[fi], kv->valuestring) != 0)
                fi++;
            if (!vdn_st_find(s->files[fi], kv->string)) {
                rc = vdn_fail(err, errlen,
                              "%s: weight_map says tensor \"%s\" is in %s, but %s "
                              "has no such tensor",
                              path, kv->string, kv->valuestring, vdn_st_path(s->files[fi]));
                break;
            }
        }
    }
    if (rc == 0) {
        /* and every shard tensor is in the weight_map, under that shard */
        for (int fi = 0; fi < s->n_files && rc == 0; fi++)
            for (int i = 0; i < vdn_st_count(s->files[fi]); i++) {
                const char *tn = vdn_st_at(s->files[fi], i)->name;
                const cJSON *m = cJSON_GetObjectItemCaseSensitive(wm, tn);
                if (!m || strcmp(m->valuestring, names[fi]) != 0) {
                    rc = vdn_fail(err, errlen, "%s: tensor \"%s\" of shard %s is %s the weight_map",
                                  path, tn, names[fi],
                                  m ? "under another shard in" : "missing from");
                    break;
                }
            }
    }
    for (int i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
done:
    cJSON_Delete(root);
    return rc;
}

vdn_st_set *vdn_st_set_open(const char *path, char *err, size_t errlen) {
    vdn_st_set *s = vdn_xcalloc(1, sizeof *s);
    int rc;
    if (ends_with(path, ".json")) {
        rc = set_open_index(s, path, err, errlen);
    } else {
        s->index_text = vdn_xstrdup("");
        rc = set_add_file(s, path, err, errlen);
    }
    if (rc != 0) {
        vdn_st_set_close(s);
        return NULL;
    }
    for (int i = 0; i < s->n_files; i++)
        s->n += vdn_st_count(s->files[i]);
    s->items = vdn_xcalloc(s->n ? s->n : 1, sizeof *s->items);
    int k = 0;
    for (int i = 0; i < s->n_files; i++)
        for (int j = 0; j < vdn_st_count(s->files[i]); j++)
            s->items[k++] = (set_item){i, vdn_st_at(s->files[i], j)};
    qsort(s->items, s->n, sizeof *s->items, cmp_item);
    for (int i = 1; i < s->n; i++)
        if (strcmp(s->items[i].e->name, s->items[i - 1].e->name) == 0) {
            vdn_fail(err, errlen, "%s: tensor \"%s\" is in two shards (%s and %s)", path,
                     s->items[i].e->name, vdn_st_path(s->files[s->items[i - 1].file]),
                     vdn_st_path(s->files[s->items[i].file]));
            vdn_st_set_close(s);
            return NULL;
        }
    return s;
}

int vdn_st_set_count(const vdn_st_set *s) {
    return s->n;
}
const vdn_st_entry *vdn_st_set_at(const vdn_st_set *s, int i, const vdn_st_file **file) {
    if (i < 0 || i >= s->n) return NULL;
    if (file) *file = s->files[s->items[i].file];
    return s->items[i].e;
}
const vdn_st_entry *vdn_st_set_find(const vdn_st_set *s, const char *name,
                                    const vdn_st_file **file) {
    int lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(s->items[mid].e->name, name);
        if (c == 0) return vdn_st_set_at(s, mid, file);
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}
int vdn_st_set_file_count(const vdn_st_set *s) {
    return s->n_files;
}
const vdn_st_file *vdn_st_set_file(const vdn_st_set *s, int i) {
    return s->files[i];
}
const char *vdn_st_set_index_text(const vdn_st_set *s) {
    return s->index_text;
}

/* ---- writer ---- */

struct vdn_st_writer {
    char *path, *tmp;
    FILE *fp;
    uint64_t remaining; /* data bytes still to put */
};

static uint64_t tensor_bytes(const vdn_st_tensor *t) {
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= (uint64_t)t->shape[d];
    return n * vdn_dtype_size(t->dtype);
}

/* Header JSON, padded with spaces to a multiple of 8 bytes. */
static char *build_header(const vdn_st_tensor *tensors, int n, const vdn_st_kv *meta, int n_meta,
                          uint64_t *total, size_t *hlen, char *err, size_t errlen) {
    cJSON *root = cJSON_CreateObject();
    if (n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; i < n_meta; i++)
            cJSON_AddStringToObject(m, meta[i].key, meta[i].value);
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const vdn_st_tensor *t = &tensors[i];
        if (!t->name || !t->name[0] || strcmp(t->name, "__metadata__") == 0 || t->ndim < 0 ||
            t->ndim > VDN_ST_MAX_DIMS || vdn_dtype_size(t->dtype) == 0) {
            cJSON_Delete(root);
            vdn_fail(err, errlen, "safetensors writer: tensor %d (\"%s\"): bad name, ndim or dtype",
                     i, t->name ? t->name : "(null)");
            return NULL;
        }
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] < 0) {
                cJSON_Delete(root);
                vdn_fail(err, errlen, "safetensors writer: tensor \"%s\": negative shape", t->name);
                return NULL;
            }
        cJSON *o = cJSON_AddObjectToObject(root, t->name);
        cJSON_AddStringToObject(o, "dtype", vdn_dtype_name(t->dtype));
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        char num[32];
        for (int d = 0; d < t->ndim; d++) {
            snprintf(num, sizeof num, "%" PRId64, t->shape[d]);
            cJSON_AddItemToArray(sh, cJSON_CreateRaw(num));
        }
        cJSON *of = cJSON_AddArrayToObject(o, "data_offsets");
        uint64_t nb = tensor_bytes(t);
        snprintf(num, sizeof num, "%" PRIu64, off);
        cJSON_AddItemToArray(of, cJSON_CreateRaw(num));
        snprintf(num, sizeof num, "%" PRIu64, off + nb);
        cJSON_AddItemToArray(of, cJSON_CreateRaw(num));
        off += nb;
    }
    char *js = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    VDN_ASSERT(js);
    size_t len = strlen(js), padded = (len + 7) / 8 * 8;
    char *h = vdn_xmalloc(padded + 1);
    memcpy(h, js, len);
    memset(h + len, ' ', padded - len);
    h[padded] = '\0';
    cJSON_free(js);
    /* the writer refuses duplicate names: a reader would refuse the file */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(tensors[i].name, tensors[j].name) == 0) {
                free(h);
                vdn_fail(err, errlen, "safetensors writer: tensor \"%s\" given twice",
                         tensors[i].name);
                return NULL;
            }
    *total = off;
    *hlen = padded;
    return h;
}

vdn_st_writer *vdn_st_writer_begin(const char *path, const vdn_st_tensor *tensors, int n,
                                   const vdn_st_kv *meta, int n_meta, char *err, size_t errlen) {
    uint64_t total;
    size_t hlen;
    char *h = build_header(tensors, n, meta, n_meta, &total, &hlen, err, errlen);
    if (!h) return NULL;
    vdn_st_writer *w = vdn_xcalloc(1, sizeof *w);
    w->path = vdn_xstrdup(path);
    size_t tl = strlen(path) + 32;
    w->tmp = vdn_xmalloc(tl);
    snprintf(w->tmp, tl, "%s.tmp.%d", path, (int)getpid());
    w->fp = fopen(w->tmp, "wb");
    if (!w->fp) {
        vdn_fail(err, errlen, "%s: cannot create: %s", w->tmp, strerror(errno));
        free(h);
        free(w->tmp);
        free(w->path);
        free(w);
        return NULL;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    int ok = fwrite(len8, 1, 8, w->fp) == 8 && fwrite(h, 1, hlen, w->fp) == hlen;
    free(h);
    if (!ok) {
        vdn_fail(err, errlen, "%s: write failed: %s", w->tmp, strerror(errno));
        vdn_st_writer_abort(w);
        return NULL;
    }
    w->remaining = total;
    return w;
}

int vdn_st_writer_put(vdn_st_writer *w, const void *bytes, size_t len, char *err, size_t errlen) {
    if ((uint64_t)len > w->remaining)
        return vdn_fail(err, errlen, "%s: %zu bytes put but only %" PRIu64 " declared remain",
                        w->path, len, w->remaining);
    if (len && fwrite(bytes, 1, len, w->fp) != len)
        return vdn_fail(err, errlen, "%s: write failed: %s", w->tmp, strerror(errno));
    w->remaining -= len;
    return 0;
}

void vdn_st_writer_abort(vdn_st_writer *w) {
    if (!w) return;
    if (w->fp) fclose(w->fp);
    unlink(w->tmp);
    free(w->tmp);
    free(w->path);
    free(w);
}

int vdn_st_writer_finish(vdn_st_writer *w, char *err, size_t errlen) {
    int rc = 0;
    if (w->remaining)
        rc = vdn_fail(err, errlen, "%s: %" PRIu64 " declared data bytes never written", w->path,
                      w->remaining);
    if (!rc && (fflush(w->fp) != 0 || fsync(fileno(w->fp)) != 0))
        rc = vdn_fail(err, errlen, "%s: flush failed: %s", w->tmp, strerror(errno));
    if (!rc) {
        int c = fclose(w->fp);
        w->fp = NULL;
        if (c != 0) rc = vdn_fail(err, errlen, "%s: close failed: %s", w->tmp, strerror(errno));
    }
    if (!rc && rename(w->tmp, w->path) != 0)
        rc = vdn_fail(err, errlen, "%s: rename to %s failed: %s", w->tmp, w->path, strerror(errno));
    if (rc) {
        vdn_st_writer_abort(w);
        return rc;
    }
    free(w->tmp);
    free(w->path);
    free(w);
    return 0;
}

int vdn_st_write(const char *path, const vdn_st_tensor *tensors, int n, const vdn_st_kv *meta,
                 int n_meta, char *err, size_t errlen) {
    vdn_st_writer *w = vdn_st_writer_begin(path, tensors, n, meta, n_meta, err, errlen);
    if (!w) return -1;
    for (int i = 0; i < n; i++) {
        uint64_t nb = tensor_bytes(&tensors[i]);
        if (nb && !tensors[i].data) {
            vdn_st_writer_abort(w);
            return vdn_fail(err, errlen, "%s: tensor \"%s\" has no data", path, tensors[i].name);
        }
        if (vdn_st_writer_put(w, tensors[i].data, (size_t)nb, err, errlen) != 0) {
            vdn_st_writer_abort(w);
            return -1;
        }
    }
    return vdn_st_writer_finish(w, err, errlen);
}
