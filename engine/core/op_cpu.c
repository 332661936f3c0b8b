/* The CPU backend of the op layer: host memory, the table, and tensor transfers. The ops
 * themselves are in op_cpu_{linear,elem,norm,attn}.c. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "op_cpu.h"
#include "op_vda.h"
#include "ops.h"

static int cpu_available(char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    return 1;
}

static int cpu_open(vdn_dev *d, int index, int threads) {
    (void)d;
    (void)index;
    vdn_ops_set_threads(threads > 0 ? threads : 2);
    return 0;
}

static void cpu_close(vdn_dev *d) {
    (void)d;
}

static int cpu_sync(vdn_dev *d) {
    (void)d;
    return 0;
}

static void *cpu_alloc(vdn_dev *d, size_t bytes) {
    (void)d;
    return malloc(bytes ? bytes : 1); /* NULL: the front end reports out of memory */
}

static void cpu_free(vdn_dev *d, void *p) {
    (void)d;
    free(p);
}

/* a host value of dtype dt as a double; memcpy reads, since checkpoint data mapped from a file
 * may be unaligned (ckpt.h, vdn_ckpt_stored) */
static double host_at(const void *host, vdn_dtype dt, size_t i) {
    const char *p = (const char *)host + i * vdn_dtype_size(dt);
    float f;
    double d;
    uint16_t h;
    int32_t n;
    switch (dt) {
    case VDN_DT_F32:
        memcpy(&f, p, 4);
        return f;
    case VDN_DT_BF16:
        memcpy(&h, p, 2);
        return vdn_bf16_to_f32(h);
    case VDN_DT_F16:
        memcpy(&h, p, 2);
        return vdn_f16_to_f32(h);
    case VDN_DT_F64:
        memcpy(&d, p, 8);
        return d;
    case VDN_DT_I32:
        memcpy(&n, p, 4);
        return n;
    case VDN_DT_U8:
        return *(const uint8_t *)p;
    default:
        return NAN;
    }
}

static int cpu_set(vdn_tensor *t, const void *host, vdn_dtype host_dt) {
    const int64_t rows = vdn_tensor_rows(t), cols = vdn_tensor_cols(t);
    const size_t es = vdn_dtype_size(t->dtype);
    for (int64_t r = 0; r < rows; r++) {
        if (host_dt == t->dtype) {
            memcpy(cpu_addr(t, r, 0), (const char *)host + (size_t)r * cols * es, cols * es);
            continue;
        }
        for (int64_t c = 0; c < cols; c++)
            cpu_put(t, r, c, host_at(host, host_dt, (size_t)(r * cols + c)));
    }
    return 0;
}

static int cpu_get(const vdn_tensor *t, void *host, vdn_dtype host_dt) {
    const int64_t rows = vdn_tensor_rows(t), cols = vdn_tensor_cols(t);
    const size_t es = vdn_dtype_size(t->dtype);
    for (int64_t r = 0; r < rows; r++) {
        if (host_dt == t->dtype) {
            memcpy((char *)host + (size_t)r * cols * es, cpu_addr(t, r, 0), cols * es);
            continue;
        }
        float *out = (float *)host + (size_t)r * cols; /* host_dt is F32 (front end) */
        for (int64_t c = 0; c < cols; c++)
            out[c] = (float)cpu_at(t, r, c);
    }
    return 0;
}

static int cpu_copy(vdn_tensor *dst, const vdn_tensor *src) {
    const int64_t rows = vdn_tensor_rows(dst), cols = vdn_tensor_cols(dst);
    const size_t es = vdn_dtype_size(dst->dtype);
    for (int64_t r = 0; r < rows; r++) {
        if (dst->dtype == src->dtype) {
            memmove(cpu_addr(dst, r, 0), cpu_addr(src, r, 0), cols * es);
            continue;
        }
        for (int64_t c = 0; c < cols; c++)
            cpu_put(dst, r, c, cpu_at(src, r, c));
    }
    return 0;
}

static int cpu_fill(vdn_tensor *t, double value) {
    const int64_t rows = vdn_tensor_rows(t), cols = vdn_tensor_cols(t);
    if (t->dtype == VDN_DT_F32) {
        const float f = (float)value;
        for (int64_t r = 0; r < rows; r++) {
            float *p = (float *)t->data + (size_t)r * t->ld;
            for (int64_t c = 0; c < cols; c++)
                p[c] = f;
        }
        return 0;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            cpu_put(t, r, c, value);
    return 0;
}

cpu_fmat cpu_fmat_of(const vdn_tensor *t) {
    cpu_fmat m = {0};
    if (t->dtype == VDN_DT_F32) {
        m.p = t->data;
        m.ld = t->ld;
        return m;
    }
    const int64_t rows = vdn_tensor_rows(t), cols = vdn_tensor_cols(t);
    m.copy = vdn_xmalloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            m.copy[r * cols + c] = (float)cpu_at(t, r, c);
    m.p = m.copy;
    m.ld = cols;
    return m;
}

void cpu_fmat_done(cpu_fmat *m) {
    free(m->copy);
    m->copy = NULL;
}

/* The host's memory: the CPU backend's tensors live there. */
static int cpu_mem_info(vdn_dev *d, size_t *free_bytes, size_t *total_bytes) {
    long page = sysconf(_SC_PAGESIZE), avail = sysconf(_SC_AVPHYS_PAGES),
         phys = sysconf(_SC_PHYS_PAGES);
    if (page <= 0 || avail < 0 || phys <= 0)
        return vdn_dev_fail(d, "cpu: sysconf cannot say how much memory the host has");
    *free_bytes = (size_t)avail * (size_t)page;
    *total_bytes = (size_t)phys * (size_t)page;
    return 0;
}

/* op_profile.c's timers: the CPU's ops are synchronous, so a timer is the monotonic clock */
static void *cpu_timer_new(vdn_dev *d) {
    (void)d;
    return vdn_xmalloc(sizeof(double));
}
static int cpu_timer_mark(vdn_dev *d, void *t) {
    (void)d;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *(double *)t = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
    return 0;
}
static double cpu_timer_ms(vdn_dev *d, const void *from, const void *to) {
    (void)d;
    return *(const double *)to - *(const double *)from;
}
static void cpu_timer_free(vdn_dev *d, void *t) {
    (void)d;
    free(t);
}

const vdn_dev_backend vdn_cpu_dev_backend = {
    .name = "cpu",
    .available = cpu_available,
    .open = cpu_open,
    .close = cpu_close,
    .sync = cpu_sync,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .set = cpu_set,
    .get = cpu_get,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .mask_init = NULL, /* the host lo/hi are the CPU's form */
    .mask_free = NULL,
    .linear = vdn_cpu_linear,
    .matmul_bt = vdn_cpu_matmul_bt,
    .act = vdn_cpu_act,
    .swiglu = vdn_cpu_swiglu,
    .add = vdn_cpu_add,
    .scale = vdn_cpu_scale,
    .gate_residual = vdn_cpu_gate_residual,
    .mul_groups = vdn_cpu_mul_groups,
    .rmsnorm = vdn_cpu_rmsnorm,
    .layernorm = vdn_cpu_layernorm,
    .qk_norm_rope = vdn_cpu_qk_norm_rope,
    .attention = vdn_cpu_attention,
    .time_features = vdn_cpu_time_features,
    .euler = vdn_cpu_euler,
    .vda = &vdn_cpu_vda_backend,
    .conv = &vdn_cpu_conv_backend,
    .act_dtype = VDN_DT_F32,
    .quantize_rows = vdn_cpu_quantize_rows,
    .mem_info = cpu_mem_info,
    .timer_new = cpu_timer_new,
    .timer_mark = cpu_timer_mark,
    .timer_ms = cpu_timer_ms,
    .timer_free = cpu_timer_free,
    /* every op completes before it returns: lanes are only the order ops are issued in */
    .lane_fork = NULL,
    .lane_join = NULL,
    .pixels = &vdn_cpu_pixel_backend,
    .rmsnorm_quant = vdn_cpu_rmsnorm_quant,
    .linear_swiglu_quant = vdn_cpu_linear_swiglu_quant,
};
