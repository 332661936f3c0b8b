/* The op layer's front end (op.h): devices, the backend registry, tensors and views, attention
 * masks, and one checked entry per op. Every shape, dtype and view rule is checked here, with the
 * same message for every backend, before the backend's table (op_backend.h) sees the call. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_backend.h"
#include "op_check.h"
#include "op_profile.h"
#include "safetensors.h"
#include "vdn_util.h"

/* ---- registry ---- */

#define MAX_BACKENDS 8
static const vdn_dev_backend *g_backends[MAX_BACKENDS];
static int g_n_backends;

int vdn_dev_backend_register(const vdn_dev_backend *be) {
    for (int i = 0; i < g_n_backends; i++)
        if (strcmp(g_backends[i]->name, be->name) == 0) {
            g_backends[i] = be;
            return 0;
        }
    if (g_n_backends == MAX_BACKENDS) return -1;
    g_backends[g_n_backends++] = be;
    return 0;
}

const vdn_dev_backend *vdn_dev_backend_find(const char *name) {
    for (int i = 0; i < g_n_backends; i++)
        if (strcmp(g_backends[i]->name, name) == 0) return g_backends[i];
    if (strcmp(name, "cpu") == 0) return &vdn_cpu_dev_backend;
    return NULL;
}

/* ---- devices ---- */

int vdn_dev_fail(vdn_dev *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err, sizeof d->err, fmt, ap);
    va_end(ap);
    return -1;
}

int vdn_dev_fault(vdn_dev *d, vdn_dev_fault_kind kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err, sizeof d->err, fmt, ap);
    va_end(ap);
    if ((int)kind > d->fault) d->fault = (int)kind; /* the worst one decides the blame */
    return -1;
}

vdn_dev_fault_kind vdn_dev_faulted(const vdn_dev *d) {
    return (vdn_dev_fault_kind)d->fault;
}

void vdn_dev_clear_fault(vdn_dev *d) {
    d->fault = VDN_DEV_FAULT_NONE;
}

vdn_dev *vdn_dev_open(const char *backend, int index, int threads, char *err, size_t errlen) {
    const vdn_dev_backend *be = vdn_dev_backend_find(backend ? backend : "");
    if (!be) {
        vdn_fail(err, errlen, "device: backend '%s' unknown (expected cpu%s)",
                 backend ? backend : "(null)", vdn_dev_backend_find("cuda") ? " or cuda" : "");
        return NULL;
    }
    if (be->available && !be->available(err, errlen)) return NULL;
    vdn_dev *d = vdn_xcalloc(1, sizeof *d);
    d->be = be;
    d->index = index;
    if (strcmp(be->name, "cpu") == 0)
        snprintf(d->name, sizeof d->name, "cpu");
    else
        snprintf(d->name, sizeof d->name, "%s:%d", be->name, index);
    if (be->open(d, index, threads) != 0) {
        vdn_fail(err, errlen, "device %s: %s", d->name, d->err);
        free(d);
        return NULL;
    }
    return d;
}

void vdn_dev_close(vdn_dev *d) {
    if (!d) return;
    d->be->close(d);
    free(d);
}

const char *vdn_dev_name(const vdn_dev *d) {
    return d->name;
}
int vdn_dev_is_cpu(const vdn_dev *d) {
    return strcmp(d->be->name, "cpu") == 0;
}
const char *vdn_dev_error(const vdn_dev *d) {
    return d->err;
}
vdn_dtype vdn_dev_act_dtype(const vdn_dev *d) {
    return d->be->act_dtype;
}
int vdn_dev_sync(vdn_dev *d) {
    return d->be->sync(d);
}
/* lanes (op.h): the front end keeps which lane ops go to and whether a fork is open, so that
 * every backend refuses the same misuse; the backend orders its streams (NULL: nothing to order) */
int vdn_dev_fork(vdn_dev *d) {
    if (d->be->lane_fork && d->be->lane_fork(d) != 0) return -1;
    d->lane = 1, d->forked = 1;
    return 0;
}

int vdn_dev_lane(vdn_dev *d, int lane) {
    if (lane != 0 && lane != 1)
        return vdn_dev_fail(d, "device %s: lane %d, expected 0 or 1", d->name, lane);
    if (lane == 1 && !d->forked)
        return vdn_dev_fail(d,
                            "device %s: lane 1 outside a fork (vdn_dev_fork first: lane 1 "
                            "would not wait for lane 0's work)",
                            d->name);
    d->lane = lane;
    return 0;
}

int vdn_dev_join(vdn_dev *d) {
    if (!d->forked) return vdn_dev_fail(d, "device %s: join without a fork", d->name);
    if (d->be->lane_join && d->be->lane_join(d) != 0) return -1;
    d->lane = 0, d->forked = 0;
    return 0;
}

void vdn_dev_memory(const vdn_dev *d, size_t *in_use, size_t *peak) {
    if (in_use) *in_use = d->mem_in_use;
    if (peak) *peak = d->mem_peak;
}
void vdn_dev_memory_reset_peak(vdn_dev *d) {
    d->mem_peak = d->mem_in_use;
}
int vdn_dev_mem_info(vdn_dev *d, size_t *free_bytes, size_t *total_bytes) {
    size_t f = 0, t = 0;
    if (!d->be->mem_info)
        return vdn_dev_fail(d, "device %s cannot report its free memory", d->name);
    if (d->be->mem_info(d, &f, &t)) return -1;
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
    return 0;
}

/* ---- tensors ---- */

int64_t vdn_tensor_cols(const vdn_tensor *t) {
    return t->ne[t->ndim - 1];
}
int64_t vdn_tensor_rows(const vdn_tensor *t) {
    int64_t r = 1;
    for (int i = 0; i < t->ndim - 1; i++)
        r *= t->ne[i];
    return r;
}
int64_t vdn_tensor_numel(const vdn_tensor *t) {
    return vdn_tensor_rows(t) * vdn_tensor_cols(t);
}

const char *vdn_tensor_desc(const vdn_tensor *t, char *buf, size_t len) {
    if (!t) {
        snprintf(buf, len, "(none)");
        return buf;
    }
    if (!t->data || t->ndim < 1) {
        snprintf(buf, len, "(invalid view)");
        return buf;
    }
    size_t n = (size_t)snprintf(buf, len, "%s[", vdn_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? "," : "", (long long)t->ne[i]);
    if (n < len) n += (size_t)snprintf(buf + n, len - n, "]");
    if (n < len && t->ld != vdn_tensor_cols(t))
        snprintf(buf + n, len - n, " ld %lld", (long long)t->ld);
    return buf;
}

static vdn_tensor *tensor_alloc(vdn_dev *d, vdn_dtype dt, int ndim, const int64_t *ne) {
    if (ndim < 1 || ndim > VDN_MAX_DIMS) {
        vdn_dev_fail(d, "tensor_new: %d dims, expected 1..%d", ndim, VDN_MAX_DIMS);
        return NULL;
    }
    size_t es = vdn_dtype_size(dt);
    if (dt != VDN_DT_F32 && dt != VDN_DT_BF16 && dt != VDN_DT_F16 && dt != VDN_DT_F64 &&
        dt != VDN_DT_I32 && dt != VDN_DT_U8 && dt != VDN_DT_F8_E4M3) {
        vdn_dev_fail(d,
                     "tensor_new: dtype %s is not a tensor dtype (F32, BF16, F16, F64, I32, U8, "
                     "F8_E4M3)",
                     vdn_dtype_name(dt));
        return NULL;
    }
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (ne[i] < 1) {
            vdn_dev_fail(d, "tensor_new: dim %d is %lld, expected >= 1", i, (long long)ne[i]);
            return NULL;
        }
        n *= (size_t)ne[i];
    }
    vdn_tensor *t = vdn_xcalloc(1, sizeof *t);
    t->dev = d;
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < VDN_MAX_DIMS; i++)
        t->ne[i] = i < ndim ? ne[i] : 1;
    t->ld = ne[ndim - 1];
    t->data = d->be->alloc(d, n * es);
    if (!t->data) {
        char b[96];
        if (!d->err[0])
            vdn_dev_fail(d, "tensor_new: out of device memory for %s (%zu bytes)",
                         vdn_tensor_desc(t, b, sizeof b), n * es);
        /* at least out of memory; the backend may have recorded worse (a faulted GPU) */
        if (d->fault < VDN_DEV_FAULT_MEMORY) d->fault = VDN_DEV_FAULT_MEMORY;
        free(t);
        return NULL;
    }
    t->owned = 1;
    d->mem_in_use += n * es;
    if (d->mem_in_use > d->mem_peak) d->mem_peak = d->mem_in_use;
    return t;
}

vdn_tensor *vdn_tensor_new(vdn_dev *d, vdn_dtype dt, int ndim, const int64_t *ne) {
    return tensor_alloc(d, dt, ndim, ne);
}

vdn_tensor *vdn_tensor_new2(vdn_dev *d, vdn_dtype dt, int64_t rows, int64_t cols) {
    int64_t ne[2] = {rows, cols};
    return tensor_alloc(d, dt, 2, ne);
}

void vdn_tensor_free(vdn_tensor *t) {
    if (!t) return;
    VDN_ASSERT(t->owned && "vdn_tensor_free on a view");
    size_t bytes = (size_t)vdn_tensor_numel(t) * vdn_dtype_size(t->dtype);
    t->dev->be->free(t->dev, t->data);
    t->dev->mem_in_use -= bytes;
    free(t);
}

/* A view that failed: no data, so every op refuses it ("invalid view"). */
static vdn_tensor bad_view(const vdn_tensor *t) {
    vdn_tensor v = {0};
    v.dev = t ? t->dev : NULL;
    return v;
}

vdn_tensor vdn_view_rows(const vdn_tensor *t, int64_t r0, int64_t n) {
    int64_t rows = vdn_tensor_rows(t);
    if (!t->data || r0 < 0 || n < 1 || r0 + n > rows) {
        char b[96];
        vdn_dev_fail(t->dev, "view_rows: rows [%lld, %lld) outside %s", (long long)r0,
                     (long long)(r0 + n), vdn_tensor_desc(t, b, sizeof b));
        return bad_view(t);
    }
    vdn_tensor v = *t;
    v.ndim = 2;
    v.ne[0] = n;
    v.ne[1] = vdn_tensor_cols(t);
    v.ne[2] = v.ne[3] = 1;
    v.data = (char *)t->data + (size_t)r0 * (size_t)t->ld * vdn_dtype_size(t->dtype);
    v.scale = t->scale ? t->scale + r0 : NULL;
    v.owned = 0;
    return v;
}

vdn_tensor vdn_view_cols(const vdn_tensor *t, int64_t c0, int64_t n) {
    int64_t cols = vdn_tensor_cols(t);
    if (!t->data || c0 < 0 || n < 1 || c0 + n > cols) {
        char b[96];
        vdn_dev_fail(t->dev, "view_cols: columns [%lld, %lld) outside %s", (long long)c0,
                     (long long)(c0 + n), vdn_tensor_desc(t, b, sizeof b));
        return bad_view(t);
    }
    vdn_tensor v = *t;
    v.ndim = 2;
    v.ne[0] = vdn_tensor_rows(t);
    v.ne[1] = n;
    v.ne[2] = v.ne[3] = 1;
    v.data = (char *)t->data + (size_t)c0 * vdn_dtype_size(t->dtype);
    v.owned = 0;
    return v;
}

vdn_tensor vdn_view_reshape(const vdn_tensor *t, int ndim, const int64_t *ne) {
    char b[96];
    int64_t n = 1;
    for (int i = 0; i < ndim && ndim <= VDN_MAX_DIMS; i++)
        n *= ne[i];
    if (!t->data || ndim < 1 || ndim > VDN_MAX_DIMS || n != vdn_tensor_numel(t)) {
        vdn_dev_fail(t->dev, "view_reshape: %d dims of %lld elements do not fit %s", ndim,
                     (long long)n, vdn_tensor_desc(t, b, sizeof b));
        return bad_view(t);
    }
    /* a strided tensor keeps its rows: only the outer dims may change */
    int contiguous = t->ld == vdn_tensor_cols(t);
    if (!contiguous && ne[ndim - 1] != vdn_tensor_cols(t)) {
        vdn_dev_fail(
            t->dev, "view_reshape: %s has rows %lld apart; a new shape must keep %lld columns",
            vdn_tensor_desc(t, b, sizeof b), (long long)t->ld, (long long)vdn_tensor_cols(t));
        return bad_view(t);
    }
    vdn_tensor v = *t;
    v.ndim = ndim;
    for (int i = 0; i < VDN_MAX_DIMS; i++)
        v.ne[i] = i < ndim ? ne[i] : 1;
    if (contiguous) v.ld = ne[ndim - 1];
    v.owned = 0;
    return v;
}

/* ---- shared checks (op_check.h) ---- */

int vdn_chk_tensor(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t) {
    if (!t) return vdn_dev_fail(d, "op %s: %s is missing", op, name);
    if (!t->data || t->ndim < 1) { /* the view's own failure is the device's last message */
        char why[sizeof d->err];
        snprintf(why, sizeof why, "%s", t->dev ? t->dev->err : "no device");
        return vdn_dev_fail(d, "op %s: %s is an invalid view (%s)", op, name, why);
    }
    if (t->dev != d)
        return vdn_dev_fail(d, "op %s: %s lives on %s, the op runs on %s", op, name,
                            t->dev ? t->dev->name : "(no device)", d->name);
    if (t->ld < vdn_tensor_cols(t)) {
        char b[96];
        return vdn_dev_fail(d, "op %s: %s is %s with ld < columns", op, name,
                            vdn_tensor_desc(t, b, sizeof b));
    }
    return 0;
}

int vdn_chk_float(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t) {
    if (vdn_chk_tensor(d, op, name, t)) return -1;
    if (t->dtype != VDN_DT_F32 && t->dtype != VDN_DT_BF16 && t->dtype != VDN_DT_F16 &&
        t->dtype != VDN_DT_F64) {
        char b[96];
        return vdn_dev_fail(d, "op %s: %s is %s, expected a float tensor (F32, BF16, F16, F64)", op,
                            name, vdn_tensor_desc(t, b, sizeof b));
    }
    return 0;
}

int vdn_chk_dtype(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t, vdn_dtype dt) {
    if (vdn_chk_tensor(d, op, name, t)) return -1;
    if (t->dtype != dt) {
        char b[96];
        return vdn_dev_fail(d, "op %s: %s is %s, expected %s", op, name,
                            vdn_tensor_desc(t, b, sizeof b), vdn_dtype_name(dt));
    }
    return 0;
}

int vdn_chk_2d(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t, int64_t rows,
               int64_t cols) {
    if (vdn_tensor_rows(t) == rows && vdn_tensor_cols(t) == cols) return 0;
    char b[96];
    return vdn_dev_fail(d, "op %s: %s is %s, expected [%lld, %lld]", op, name,
                        vdn_tensor_desc(t, b, sizeof b), (long long)rows, (long long)cols);
}

int vdn_chk_family(vdn_dev *d, const char *op, const void *table) {
    if (table) return 0;
    return vdn_dev_fail(d, "op %s: not implemented on backend %s", op, d->be->name);
}

/* the device of an op: its first tensor's */
#define DEV_OF(t)                                                                                  \
    vdn_dev *d = (t) ? (t)->dev : NULL;                                                            \
    if (!d) return -1

/* ---- host <-> device ---- */

int vdn_tensor_set(vdn_tensor *t, const void *host, vdn_dtype host_dt) {
    DEV_OF(t);
    if (vdn_chk_tensor(d, "tensor_set", "t", t)) return -1;
    if (!host) return vdn_dev_fail(d, "op tensor_set: host pointer is NULL");
    int ok = host_dt == VDN_DT_F32 || host_dt == VDN_DT_BF16 || host_dt == VDN_DT_F16 ||
             host_dt == VDN_DT_F64 || host_dt == VDN_DT_I32 || host_dt == t->dtype;
    if (!ok)
        return vdn_dev_fail(d,
                            "op tensor_set: host values are %s, expected f32, bf16, f16, f64 "
                            "or i32",
                            vdn_dtype_name(host_dt));
    if ((host_dt == VDN_DT_I32) != (t->dtype == VDN_DT_I32)) {
        char b[96];
        return vdn_dev_fail(d, "op tensor_set: %s host values into %s (integers only to I32)",
                            vdn_dtype_name(host_dt), vdn_tensor_desc(t, b, sizeof b));
    }
    if (t->dtype == VDN_DT_F8_E4M3 && host_dt != VDN_DT_F8_E4M3) {
        char b[96];
        return vdn_dev_fail(d,
                            "op tensor_set: %s host values into %s (fp8 takes raw F8_E4M3 bytes; "
                            "quantise with vdn_op_quantize_rows)",
                            vdn_dtype_name(host_dt), vdn_tensor_desc(t, b, sizeof b));
    }
    return VDN_PROF(d, "set", t, NULL, 0, d->be->set(t, host, host_dt));
}

int vdn_tensor_get(const vdn_tensor *t, float *host) {
    DEV_OF(t);
    if (vdn_chk_tensor(d, "tensor_get", "t", t)) return -1;
    if (t->dtype == VDN_DT_I32 || t->dtype == VDN_DT_U8 || t->dtype == VDN_DT_F8_E4M3) {
        char b[96];
        return vdn_dev_fail(d, "op tensor_get: %s is not a float tensor (use tensor_get_raw)",
                            vdn_tensor_desc(t, b, sizeof b));
    }
    return VDN_PROF(d, "get", t, NULL, 0, d->be->get(t, host, VDN_DT_F32));
}

int vdn_tensor_get_raw(const vdn_tensor *t, void *host) {
    DEV_OF(t);
    if (vdn_chk_tensor(d, "tensor_get_raw", "t", t)) return -1;
    return VDN_PROF(d, "get", t, NULL, 0, d->be->get(t, host, t->dtype));
}

int vdn_tensor_copy(vdn_tensor *dst, const vdn_tensor *src) {
    DEV_OF(dst);
    if (vdn_chk_tensor(d, "copy", "dst", dst) || vdn_chk_tensor(d, "copy", "src", src)) return -1;
    if (vdn_chk_2d(d, "copy", "src", src, vdn_tensor_rows(dst), vdn_tensor_cols(dst))) return -1;
    if ((dst->dtype == VDN_DT_I32) != (src->dtype == VDN_DT_I32))
        return vdn_dev_fail(d, "op copy: %s into %s (integers only to I32)",
                            vdn_dtype_name(src->dtype), vdn_dtype_name(dst->dtype));
    if ((dst->dtype == VDN_DT_F8_E4M3 || src->dtype == VDN_DT_F8_E4M3) && dst->dtype != src->dtype)
        return vdn_dev_fail(d, "op copy: %s into %s (fp8 copies only to fp8)",
                            vdn_dtype_name(src->dtype), vdn_dtype_name(dst->dtype));
    return VDN_PROF(d, "copy", dst, NULL, 0, d->be->copy(dst, src));
}

int vdn_tensor_fill(vdn_tensor *t, double value) {
    DEV_OF(t);
    if (vdn_chk_tensor(d, "fill", "t", t)) return -1;
    if (t->dtype == VDN_DT_F8_E4M3)
        return vdn_dev_fail(d, "op fill: fp8 tensors are written by vdn_op_quantize_rows only");
    return VDN_PROF(d, "fill", t, NULL, 0, d->be->fill(t, value));
}

/* ---- attention masks ---- */

static vdn_attn_mask *mask_new(vdn_dev *d, int kind, int rows, int keys) {
    if (rows < 1 || keys < 1) {
        vdn_dev_fail(d, "attn_mask: %d rows x %d keys, expected >= 1", rows, keys);
        return NULL;
    }
    vdn_attn_mask *m = vdn_xcalloc(1, sizeof *m);
    m->dev = d;
    m->kind = kind;
    m->rows = rows;
    m->keys = keys;
    m->head_end = keys;
    m->tail_start = keys;
    return m;
}

static vdn_attn_mask *mask_init(vdn_attn_mask *m) {
    if (m->dev->be->mask_init && m->dev->be->mask_init(m) != 0) {
        free(m->lo);
        free(m->hi);
        free(m);
        return NULL;
    }
    return m;
}

vdn_attn_mask *vdn_attn_mask_dense(vdn_dev *d, int rows, int keys) {
    vdn_attn_mask *m = mask_new(d, VDN_MASK_DENSE, rows, keys);
    return m ? mask_init(m) : NULL;
}

vdn_attn_mask *vdn_attn_mask_causal(vdn_dev *d, int rows) {
    vdn_attn_mask *m = mask_new(d, VDN_MASK_CAUSAL, rows, rows);
    return m ? mask_init(m) : NULL;
}

vdn_attn_mask *vdn_attn_mask_rows(vdn_dev *d, int rows, int head_end, int tail_start, const int *lo,
                                  const int *hi) {
    if (head_end < 0 || tail_start < head_end || tail_start > rows) {
        vdn_dev_fail(d,
                     "attn_mask_rows: head_end %d / tail_start %d outside 0 <= head_end <= "
                     "tail_start <= %d",
                     head_end, tail_start, rows);
        return NULL;
    }
    for (int r = 0; r < rows; r++)
        if (lo[r] < 0 || hi[r] < lo[r] || hi[r] > rows) {
            vdn_dev_fail(d, "attn_mask_rows: row %d has window [%d, %d), expected within [0, %d)",
                         r, lo[r], hi[r], rows);
            return NULL;
        }
    vdn_attn_mask *m = mask_new(d, VDN_MASK_ROWS, rows, rows);
    if (!m) return NULL;
    m->head_end = head_end;
    m->tail_start = tail_start;
    m->lo = vdn_xmalloc(sizeof(int) * (size_t)rows);
    m->hi = vdn_xmalloc(sizeof(int) * (size_t)rows);
    memcpy(m->lo, lo, sizeof(int) * (size_t)rows);
    memcpy(m->hi, hi, sizeof(int) * (size_t)rows);
    return mask_init(m);
}

void vdn_attn_mask_free(vdn_attn_mask *m) {
    if (!m) return;
    if (m->dev->be->mask_free) m->dev->be->mask_free(m);
    free(m->lo);
    free(m->hi);
    free(m);
}

/* ---- matrix products ---- */

static int chk_act(vdn_dev *d, const char *op, vdn_act act) {
    if (act >= VDN_ACT_NONE && act <= VDN_ACT_GELU) return 0;
    return vdn_dev_fail(d, "op %s: activation %d unknown", op, (int)act);
}

/* a Linear weight: float without scales, or fp8 with its per-row scales */
static int chk_weight(vdn_dev *d, const char *op, const vdn_tensor *w) {
    char b[96];
    if (w && w->dtype == VDN_DT_F8_E4M3) {
        if (vdn_chk_tensor(d, op, "w", w)) return -1;
        if (!w->scale)
            return vdn_dev_fail(d,
                                "op %s: w is %s without per-row scales (quantise it with "
                                "vdn_op_quantize_rows)",
                                op, vdn_tensor_desc(w, b, sizeof b));
        return 0;
    }
    if (vdn_chk_float(d, op, "w", w)) return -1;
    if (w->scale)
        return vdn_dev_fail(d, "op %s: w is %s with scales; only F8_E4M3 weights carry scales", op,
                            vdn_tensor_desc(w, b, sizeof b));
    return 0;
}

/* x of a Linear: float without scales, or F8_E4M3 already quantised (its row scales in
 * x->scale) beside an fp8 w (w checked first) */
static int chk_linear_x(vdn_dev *d, const char *op, const vdn_tensor *x, const vdn_tensor *w) {
    char b[96], bw[96];
    if (x && x->dtype == VDN_DT_F8_E4M3) {
        if (vdn_chk_tensor(d, op, "x", x)) return -1;
        if (!x->scale)
            return vdn_dev_fail(d,
                                "op %s: x is %s without per-row scales (an fp8 x comes from "
                                "vdn_op_quantize_rows, vdn_op_rmsnorm_quant or "
                                "vdn_op_linear_swiglu_quant)",
                                op, vdn_tensor_desc(x, b, sizeof b));
        if (w->dtype != VDN_DT_F8_E4M3)
            return vdn_dev_fail(d, "op %s: x is %s (fp8) but w is %s: an fp8 x needs an fp8 weight",
                                op, vdn_tensor_desc(x, b, sizeof b),
                                vdn_tensor_desc(w, bw, sizeof bw));
        return 0;
    }
    if (vdn_chk_float(d, op, "x", x)) return -1;
    if (x->scale)
        return vdn_dev_fail(d, "op %s: x is %s with scales; only F8_E4M3 tensors carry scales", op,
                            vdn_tensor_desc(x, b, sizeof b));
    return 0;
}

/* the outputs of a row quantisation: q F8_E4M3 [rows, cols], scale F32 with one contiguous value
 * a row */
static int chk_quant_out(vdn_dev *d, const char *op, const vdn_tensor *q, const vdn_tensor *scale,
                         int64_t rows, int64_t cols) {
    char b[96];
    if (vdn_chk_dtype(d, op, "q", q, VDN_DT_F8_E4M3) ||
        vdn_chk_dtype(d, op, "scale", scale, VDN_DT_F32) || vdn_chk_2d(d, op, "q", q, rows, cols))
        return -1;
    if (vdn_tensor_numel(scale) != rows || scale->ld != vdn_tensor_cols(scale))
        return vdn_dev_fail(d,
                            "op %s: scale is %s, expected %lld contiguous F32 values (one a row)",
                            op, vdn_tensor_desc(scale, b, sizeof b), (long long)rows);
    return 0;
}

/* a float input the row quantisation reads (F64 has no fp8 rule on the devices) */
static int chk_quant_in(vdn_dev *d, const char *op, const vdn_tensor *x) {
    char b[96];
    if (vdn_chk_float(d, op, "x", x)) return -1;
    if (x->dtype == VDN_DT_F64)
        return vdn_dev_fail(d, "op %s: x is %s, expected F32, BF16 or F16", op,
                            vdn_tensor_desc(x, b, sizeof b));
    return 0;
}

int vdn_op_quantize_rows(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x) {
    DEV_OF(q);
    const char *op = "quantize_rows";
    if (vdn_chk_dtype(d, op, "q", q, VDN_DT_F8_E4M3) ||
        vdn_chk_dtype(d, op, "scale", scale, VDN_DT_F32) || chk_quant_in(d, op, x))
        return -1;
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    if (chk_quant_out(d, op, q, scale, rows, cols)) return -1;
    if (!d->be->quantize_rows)
        return vdn_dev_fail(d, "op %s: not implemented on backend %s", op, d->be->name);
    if (VDN_PROF(d, "quantize_rows", x, NULL, 0, d->be->quantize_rows(q, scale, x)) != 0) return -1;
    q->scale = (const float *)scale->data;
    return 0;
}

int vdn_quantize_weight_fp8(const vdn_tensor *w, vdn_tensor **q, vdn_tensor **scale) {
    const int64_t rows = vdn_tensor_rows(w), cols = vdn_tensor_cols(w);
    *q = vdn_tensor_new2(w->dev, VDN_DT_F8_E4M3, rows, cols);
    *scale = *q ? vdn_tensor_new2(w->dev, VDN_DT_F32, rows, 1) : NULL;
    if (*scale && vdn_op_quantize_rows(*q, *scale, w) == 0 && vdn_dev_sync(w->dev) == 0) return 0;
    vdn_tensor_free(*q);
    vdn_tensor_free(*scale);
    *q = *scale = NULL;
    return -1;
}

int vdn_op_linear(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                  vdn_act act, int accumulate) {
    DEV_OF(y);
    const char *op = "linear";
    if (vdn_chk_float(d, op, "y", y) || chk_weight(d, op, w) || chk_linear_x(d, op, x, w) ||
        chk_act(d, op, act))
        return -1;
    int64_t rows = vdn_tensor_rows(x), in = vdn_tensor_cols(x), out = vdn_tensor_rows(w);
    if (vdn_chk_2d(d, op, "w", w, out, in) || vdn_chk_2d(d, op, "y", y, rows, out)) return -1;
    if (b && (vdn_chk_float(d, op, "b", b) || vdn_chk_2d(d, op, "b", b, 1, out))) return -1;
    if (accumulate && act != VDN_ACT_NONE)
        return vdn_dev_fail(d, "op linear: accumulate and an activation are exclusive");
    if (y->data == x->data)
        return vdn_dev_fail(d, "op linear: y and x overlap (the product needs a separate output)");
    return VDN_PROF(d, "linear", x, w, 2.0 * (double)rows * (double)in * (double)out,
                    d->be->linear(y, x, w, b, act, accumulate));
}

int vdn_op_linear_swiglu_quant(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x,
                               const vdn_tensor *w, const vdn_tensor *b) {
    DEV_OF(q);
    const char *op = "linear_swiglu_quant";
    char bw[96];
    if (chk_weight(d, op, w)) return -1;
    if (w->dtype != VDN_DT_F8_E4M3)
        return vdn_dev_fail(d, "op %s: w is %s, expected an F8_E4M3 weight with row scales", op,
                            vdn_tensor_desc(w, bw, sizeof bw));
    if (chk_linear_x(d, op, x, w)) return -1;
    const int64_t rows = vdn_tensor_rows(x), in = vdn_tensor_cols(x), out = vdn_tensor_rows(w);
    if (out % 2)
        return vdn_dev_fail(d,
                            "op %s: w is %s, expected an even number of rows (value half, then "
                            "gate half)",
                            op, vdn_tensor_desc(w, bw, sizeof bw));
    if (vdn_chk_2d(d, op, "w", w, out, in) || chk_quant_out(d, op, q, scale, rows, out / 2))
        return -1;
    if (b && (vdn_chk_float(d, op, "b", b) || vdn_chk_2d(d, op, "b", b, 1, out))) return -1;
    if (q->data == x->data)
        return vdn_dev_fail(d, "op %s: q and x overlap (the product needs a separate output)", op);
    if (!d->be->linear_swiglu_quant)
        return vdn_dev_fail(d, "op %s: not implemented on backend %s", op, d->be->name);
    if (VDN_PROF(d, op, x, w, 2.0 * (double)rows * (double)in * (double)out,
                 d->be->linear_swiglu_quant(q, scale, x, w, b)) != 0)
        return -1;
    q->scale = (const float *)scale->data;
    return 0;
}

int vdn_op_matmul_bt(vdn_tensor *y, const vdn_tensor *a, const vdn_tensor *b, int accumulate) {
    DEV_OF(y);
    const char *op = "matmul_bt";
    if (vdn_chk_float(d, op, "y", y) || vdn_chk_float(d, op, "a", a) ||
        vdn_chk_float(d, op, "b", b))
        return -1;
    int64_t n = a->ndim == 3 ? a->ne[0] : 1;
    int64_t m = a->ndim == 3 ? a->ne[1] : vdn_tensor_rows(a), k = vdn_tensor_cols(a);
    if (a->ndim > 3 || b->ndim > 3 || y->ndim > 3)
        return vdn_dev_fail(d, "op matmul_bt: expected 2- or 3-dim tensors [n, m, k]");
    int64_t p = b->ndim == 3 ? b->ne[1] : vdn_tensor_rows(b);
    int64_t nb = b->ndim == 3 ? b->ne[0] : 1, ny = y->ndim == 3 ? y->ne[0] : 1;
    if (nb != n || ny != n || vdn_chk_2d(d, op, "b", b, n * p, k) ||
        vdn_chk_2d(d, op, "y", y, n * m, p)) {
        char ba[96], bb[96], by[96];
        return vdn_dev_fail(d,
                            "op matmul_bt: shapes a %s, b %s, y %s do not match [n,m,k] "
                            "[n,p,k] [n,m,p]",
                            vdn_tensor_desc(a, ba, sizeof ba), vdn_tensor_desc(b, bb, sizeof bb),
                            vdn_tensor_desc(y, by, sizeof by));
    }
    return VDN_PROF(d, "matmul_bt", a, b, 2.0 * (double)n * (double)m * (double)p * (double)k,
                    d->be->matmul_bt(y, a, b, accumulate));
}

/* ---- elementwise and per row ---- */

static int chk_same(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t,
                    const vdn_tensor *like) {
    return vdn_chk_2d(d, op, name, t, vdn_tensor_rows(like), vdn_tensor_cols(like));
}

int vdn_op_act(vdn_tensor *y, const vdn_tensor *x, vdn_act act) {
    DEV_OF(y);
    if (vdn_chk_float(d, "act", "y", y) || vdn_chk_float(d, "act", "x", x) ||
        chk_same(d, "act", "x", x, y) || chk_act(d, "act", act))
        return -1;
    return VDN_PROF(d, "act", NULL, NULL, 0, d->be->act(y, x, act));
}

int vdn_op_swiglu(vdn_tensor *y, const vdn_tensor *value, const vdn_tensor *gate) {
    DEV_OF(y);
    const char *op = "swiglu";
    if (vdn_chk_float(d, op, "y", y) || vdn_chk_float(d, op, "value", value) ||
        vdn_chk_float(d, op, "gate", gate) || chk_same(d, op, "value", value, y) ||
        chk_same(d, op, "gate", gate, y))
        return -1;
    return VDN_PROF(d, "swiglu", NULL, NULL, 0, d->be->swiglu(y, value, gate));
}

int vdn_op_add(vdn_tensor *x, const vdn_tensor *y) {
    DEV_OF(x);
    if (vdn_chk_float(d, "add", "x", x) || vdn_chk_float(d, "add", "y", y) ||
        chk_same(d, "add", "y", y, x))
        return -1;
    return VDN_PROF(d, "add", NULL, NULL, 0, d->be->add(x, y));
}

int vdn_op_scale(vdn_tensor *x, double s) {
    DEV_OF(x);
    if (vdn_chk_float(d, "scale", "x", x)) return -1;
    return VDN_PROF(d, "scale", NULL, NULL, 0, d->be->scale(x, s));
}

/* table [n, width] indexed per row by idx (I32 [rows]) or, without idx, row r by row r */
static int chk_row_table(vdn_dev *d, const char *op, const char *name, const vdn_tensor *tab,
                         const vdn_tensor *idx, int64_t rows, int64_t width) {
    if (vdn_chk_float(d, op, name, tab)) return -1;
    char b[96];
    if (vdn_tensor_cols(tab) != width)
        return vdn_dev_fail(d, "op %s: %s is %s, expected %lld columns", op, name,
                            vdn_tensor_desc(tab, b, sizeof b), (long long)width);
    if (!idx && vdn_tensor_rows(tab) != rows)
        return vdn_dev_fail(d, "op %s: %s is %s without idx, expected %lld rows (one per row)", op,
                            name, vdn_tensor_desc(tab, b, sizeof b), (long long)rows);
    return 0;
}

static int chk_idx(vdn_dev *d, const char *op, const vdn_tensor *idx, int64_t rows) {
    if (!idx) return 0;
    if (vdn_chk_dtype(d, op, "idx", idx, VDN_DT_I32)) return -1;
    if (vdn_tensor_numel(idx) != rows ||
        (vdn_tensor_rows(idx) > 1 && vdn_tensor_cols(idx) != idx->ld)) {
        char b[96];
        return vdn_dev_fail(d, "op %s: idx is %s, expected %lld contiguous indices (one per row)",
                            op, vdn_tensor_desc(idx, b, sizeof b), (long long)rows);
    }
    return 0;
}

int vdn_op_gate_residual(vdn_tensor *x, const vdn_tensor *y, const vdn_tensor *gate,
                         const vdn_tensor *idx) {
    DEV_OF(x);
    const char *op = "gate_residual";
    if (vdn_chk_float(d, op, "x", x) || vdn_chk_float(d, op, "y", y) ||
        chk_same(d, op, "y", y, x) || chk_idx(d, op, idx, vdn_tensor_rows(x)))
        return -1;
    if (gate && chk_row_table(d, op, "gate", gate, idx, vdn_tensor_rows(x), vdn_tensor_cols(x)))
        return -1;
    if (idx && !gate) return vdn_dev_fail(d, "op gate_residual: idx given without a gate");
    return VDN_PROF(d, "gate_residual", NULL, NULL, 0, d->be->gate_residual(x, y, gate, idx));
}

int vdn_op_mul_groups(vdn_tensor *x, const vdn_tensor *s, int group) {
    DEV_OF(x);
    const char *op = "mul_groups";
    if (vdn_chk_float(d, op, "x", x) || vdn_chk_float(d, op, "s", s)) return -1;
    if (group < 1 || vdn_tensor_cols(x) % group)
        return vdn_dev_fail(d, "op mul_groups: group %d does not divide %lld columns", group,
                            (long long)vdn_tensor_cols(x));
    if (vdn_chk_2d(d, op, "s", s, vdn_tensor_rows(x), vdn_tensor_cols(x) / group)) return -1;
    return VDN_PROF(d, "mul_groups", NULL, NULL, 0, d->be->mul_groups(x, s, group));
}

static int chk_vec(vdn_dev *d, const char *op, const char *name, const vdn_tensor *v, int64_t n) {
    if (!v) return 0;
    if (vdn_chk_float(d, op, name, v)) return -1;
    return vdn_chk_2d(d, op, name, v, 1, n);
}

int vdn_op_rmsnorm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, double eps,
                   const vdn_tensor *shift, const vdn_tensor *scale, const vdn_tensor *idx) {
    DEV_OF(y);
    const char *op = "rmsnorm";
    if (vdn_chk_float(d, op, "y", y) || vdn_chk_float(d, op, "x", x) ||
        chk_same(d, op, "x", x, y) || chk_vec(d, op, "w", w, vdn_tensor_cols(x)))
        return -1;
    if (!shift != !scale)
        return vdn_dev_fail(d, "op rmsnorm: shift and scale go together (one is missing)");
    if (idx && !shift) return vdn_dev_fail(d, "op rmsnorm: idx given without shift/scale");
    if (!(eps > 0)) return vdn_dev_fail(d, "op rmsnorm: eps %g, expected > 0", eps);
    int64_t rows = vdn_tensor_rows(x), width = vdn_tensor_cols(x);
    if (shift &&
        (chk_idx(d, op, idx, rows) || chk_row_table(d, op, "shift", shift, idx, rows, width) ||
         chk_row_table(d, op, "scale", scale, idx, rows, width)))
        return -1;
    return VDN_PROF(d, "rmsnorm", NULL, NULL, 0, d->be->rmsnorm(y, x, w, eps, shift, scale, idx));
}

int vdn_op_rmsnorm_quant(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x, const vdn_tensor *w,
                         double eps) {
    DEV_OF(q);
    const char *op = "rmsnorm_quant";
    if (chk_quant_in(d, op, x) ||
        chk_quant_out(d, op, q, scale, vdn_tensor_rows(x), vdn_tensor_cols(x)) ||
        chk_vec(d, op, "w", w, vdn_tensor_cols(x)))
        return -1;
    if (!(eps > 0)) return vdn_dev_fail(d, "op %s: eps %g, expected > 0", op, eps);
    if (!d->be->rmsnorm_quant)
        return vdn_dev_fail(d, "op %s: not implemented on backend %s", op, d->be->name);
    if (VDN_PROF(d, op, x, NULL, 0, d->be->rmsnorm_quant(q, scale, x, w, eps)) != 0) return -1;
    q->scale = (const float *)scale->data;
    return 0;
}

int vdn_op_layernorm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                     double eps) {
    DEV_OF(y);
    const char *op = "layernorm";
    if (vdn_chk_float(d, op, "y", y) || vdn_chk_float(d, op, "x", x) ||
        chk_same(d, op, "x", x, y) || chk_vec(d, op, "w", w, vdn_tensor_cols(x)) ||
        chk_vec(d, op, "b", b, vdn_tensor_cols(x)))
        return -1;
    if (!(eps > 0)) return vdn_dev_fail(d, "op layernorm: eps %g, expected > 0", eps);
    return VDN_PROF(d, "layernorm", NULL, NULL, 0, d->be->layernorm(y, x, w, b, eps));
}

/* ---- rotary embedding ---- */

static int chk_rope(vdn_dev *d, const char *op, const vdn_rope *r, int64_t rows, int head_dim) {
    if (!r) return 0;
    if (r->n_rot < 2 || r->n_rot % 2 || r->n_rot > head_dim)
        return vdn_dev_fail(d, "op %s: rope n_rot %d, expected even and 2..head_dim %d", op,
                            r->n_rot, head_dim);
    if (r->sections[0] < 0 || r->sections[1] < 0 || r->sections[2] < 0 ||
        r->sections[0] + r->sections[1] + r->sections[2] != r->n_rot / 2)
        return vdn_dev_fail(d, "op %s: rope sections %d+%d+%d, expected n_rot/2 = %d pairs", op,
                            r->sections[0], r->sections[1], r->sections[2], r->n_rot / 2);
    if (vdn_chk_dtype(d, op, "rope.pos", r->pos, VDN_DT_F64) ||
        vdn_chk_2d(d, op, "rope.pos", r->pos, rows, 3) ||
        vdn_chk_dtype(d, op, "rope.inv", r->inv, VDN_DT_F32) ||
        vdn_chk_2d(d, op, "rope.inv", r->inv, 1, r->n_rot / 2))
        return -1;
    return 0;
}

int vdn_op_qk_norm_rope(vdn_tensor *q_out, vdn_tensor *k_out, const vdn_tensor *q_in,
                        const vdn_tensor *k_in, const vdn_tensor *wq, const vdn_tensor *wk,
                        int head_dim, double eps, const vdn_rope *rope) {
    DEV_OF(q_out);
    const char *op = "qk_norm_rope";
    if (vdn_chk_float(d, op, "q_out", q_out) || vdn_chk_float(d, op, "q_in", q_in) ||
        chk_same(d, op, "q_in", q_in, q_out))
        return -1;
    if (!k_in != !k_out) return vdn_dev_fail(d, "op qk_norm_rope: k_in and k_out go together");
    if (k_in && (vdn_chk_float(d, op, "k_out", k_out) || vdn_chk_float(d, op, "k_in", k_in) ||
                 chk_same(d, op, "k_in", k_in, k_out)))
        return -1;
    if (head_dim < 1 || vdn_tensor_cols(q_in) % head_dim ||
        (k_in && vdn_tensor_cols(k_in) % head_dim))
        return vdn_dev_fail(d, "op qk_norm_rope: head_dim %d does not divide the q/k widths",
                            head_dim);
    if (k_in && vdn_tensor_rows(k_in) != vdn_tensor_rows(q_in))
        return vdn_dev_fail(d, "op qk_norm_rope: q has %lld rows, k %lld",
                            (long long)vdn_tensor_rows(q_in), (long long)vdn_tensor_rows(k_in));
    if (chk_vec(d, op, "wq", wq, head_dim) || chk_vec(d, op, "wk", wk, head_dim)) return -1;
    if (wk && !k_in) return vdn_dev_fail(d, "op qk_norm_rope: wk given without k");
    if ((wq || wk) && !(eps > 0))
        return vdn_dev_fail(d, "op qk_norm_rope: eps %g, expected > 0", eps);
    if (chk_rope(d, op, rope, vdn_tensor_rows(q_in), head_dim)) return -1;
    return VDN_PROF(d, "qk_norm_rope", NULL, NULL, 0,
                    d->be->qk_norm_rope(q_out, k_out, q_in, k_in, wq, wk, head_dim, eps, rope));
}

/* ---- attention ---- */

int vdn_op_attention(vdn_tensor *o, const vdn_tensor *q, const vdn_tensor *k, const vdn_tensor *v,
                     int head_dim, double scale, const vdn_attn_mask *mask,
                     const vdn_tensor *gate) {
    DEV_OF(o);
    const char *op = "attention";
    if (vdn_chk_float(d, op, "o", o) || vdn_chk_float(d, op, "q", q) ||
        vdn_chk_float(d, op, "k", k) || vdn_chk_float(d, op, "v", v) ||
        chk_same(d, op, "q", q, o) || chk_same(d, op, "v", v, k))
        return -1;
    if (head_dim < 1 || vdn_tensor_cols(q) % head_dim || vdn_tensor_cols(k) % head_dim)
        return vdn_dev_fail(d, "op attention: head_dim %d does not divide q (%lld) and k (%lld)",
                            head_dim, (long long)vdn_tensor_cols(q), (long long)vdn_tensor_cols(k));
    int64_t hq = vdn_tensor_cols(q) / head_dim, hkv = vdn_tensor_cols(k) / head_dim;
    if (hq % hkv)
        return vdn_dev_fail(d,
                            "op attention: %lld query heads over %lld kv heads (GQA needs a "
                            "multiple)",
                            (long long)hq, (long long)hkv);
    if (!mask) return vdn_dev_fail(d, "op attention: mask is missing (use vdn_attn_mask_dense)");
    if (mask->dev != d) return vdn_dev_fail(d, "op attention: mask lives on another device");
    if (mask->rows != vdn_tensor_rows(q) || mask->keys != vdn_tensor_rows(k))
        return vdn_dev_fail(d, "op attention: mask is %d rows x %d keys, q has %lld rows, k %lld",
                            mask->rows, mask->keys, (long long)vdn_tensor_rows(q),
                            (long long)vdn_tensor_rows(k));
    if (gate && (vdn_chk_dtype(d, op, "gate", gate, VDN_DT_F32) ||
                 vdn_chk_2d(d, op, "gate", gate, vdn_tensor_rows(q), hq)))
        return -1;
    if (!(scale > 0)) return vdn_dev_fail(d, "op attention: scale %g, expected > 0", scale);
    return VDN_PROF(d, mask && mask->kind == VDN_MASK_ROWS ? "attention_rows" : "attention", q, k,
                    0, d->be->attention(o, q, k, v, head_dim, scale, mask, gate));
}

/* ---- diffusion ---- */

int vdn_op_time_features(vdn_tensor *e, const vdn_tensor *t) {
    DEV_OF(e);
    const char *op = "time_features";
    if (vdn_chk_dtype(d, op, "e", e, VDN_DT_F32) || vdn_chk_dtype(d, op, "t", t, VDN_DT_F32))
        return -1;
    if (vdn_tensor_numel(t) != vdn_tensor_rows(e) ||
        (vdn_tensor_rows(t) > 1 && t->ld != vdn_tensor_cols(t))) {
        char bt[96], be[96];
        return vdn_dev_fail(d,
                            "op time_features: t is %s, expected one contiguous value per row "
                            "of e %s",
                            vdn_tensor_desc(t, bt, sizeof bt), vdn_tensor_desc(e, be, sizeof be));
    }
    if (vdn_tensor_cols(e) % 2)
        return vdn_dev_fail(d, "op time_features: e has %lld columns, expected an even count",
                            (long long)vdn_tensor_cols(e));
    return VDN_PROF(d, "time_features", NULL, NULL, 0, d->be->time_features(e, t));
}

int vdn_op_euler(vdn_tensor *x, const vdn_tensor *v, double sigma, double sigma_next) {
    DEV_OF(x);
    if (vdn_chk_dtype(d, "euler", "x", x, VDN_DT_F32) || vdn_chk_float(d, "euler", "v", v) ||
        chk_same(d, "euler", "v", v, x))
        return -1;
    if (!(sigma > 0) || !(sigma_next >= 0) || sigma_next > sigma)
        return vdn_dev_fail(d,
                            "op euler: sigma %g -> %g, expected 0 <= sigma_next <= sigma, "
                            "sigma > 0",
                            sigma, sigma_next);
    return VDN_PROF(d, "euler", NULL, NULL, 0, d->be->euler(x, v, sigma, sigma_next));
}
