/* The CUDA backend of the op layer: its table, devices, memory, host <-> device transfers,
 * copies between dtypes and attention masks (op_cuda.h lists the other files).
 *
 * Memory: every tensor is one cudaMalloc (engine/op.c counts it in the device's in-use and peak
 * bytes); the backend adds its own: the cuBLASLt workspace, grow-only scratch (conversions, the
 * V^T of the wgmma attention) and the masks' device tables.
 * Registered as "cuda" through the weak symbol vdn_cuda_dev_backend that engine/op.c looks up,
 * so engine/ never depends on CUDA. */
#include <cuda_fp16.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "attn_tiles.h"
#ifdef VDN_HAVE_NCCL
#include "comm_nccl.h"
#endif
#include "op_cuda.h"
extern "C" {
#include "op_vda.h"
}

namespace {

void account(vdn_dev *d, ptrdiff_t delta) {
    d->mem_in_use = (size_t)((ptrdiff_t)d->mem_in_use + delta);
    if (d->mem_in_use > d->mem_peak) d->mem_peak = d->mem_in_use;
}

int cuda_available(char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        cudaGetLastError();
        snprintf(err, errlen, "no CUDA GPU visible (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 0;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || p.major < 9) {
        cudaGetLastError();
        snprintf(err, errlen, "GPU 0 (%s) is not Hopper (sm_90); the kernels are built for sm_90a",
                 p.name);
        return 0;
    }
    return 1;
}

void cuda_close(vdn_dev *d);

void lane_free(CudaDev *c) {
    if (c->st) cudaStreamSynchronize(c->st);
    for (int i = 0; i < SCR_SLOTS_MAX; i++)
        if (c->scratch[i]) cudaFree(c->scratch[i]);
    if (c->gc) vdn_gemm_destroy(c->gc);
    if (c->cb) vdn_cublas_destroy(c->cb);
    if (c->st) cudaStreamDestroy(c->st);
    const int gpu = c->gpu;
    *c = CudaDev();
    c->gpu = gpu;
}

/* lane i's stream and handles, all or nothing; the cuBLASLt workspace counts in the device's
 * memory. Lane 1's stream has the greatest priority, so that its short memory-bound kernels get
 * SMs as soon as the other lane's long kernel retires blocks, instead of after its last one. */
int lane_make(vdn_dev *d, int i) {
    CudaDev *c = &((CudaGpu *)d->be_state)->lane[i];
    int least = 0, prio = 0;
    if (i == 1 && cudaDeviceGetStreamPriorityRange(&least, &prio) != cudaSuccess) prio = 0;
    if (cudaStreamCreateWithPriority(&c->st, cudaStreamDefault, prio) != cudaSuccess) {
        cudaGetLastError();
        c->st = NULL;
    } else {
        c->gc = vdn_gemm_create((size_t)64 << 20);
        c->cb = vdn_cublas_create();
    }
    if (!c->st || !c->gc || !c->cb) {
        lane_free(c);
        return vdn_dev_fault(d, VDN_DEV_FAULT_DEVICE,
                             "cuda: stream or cuBLAS(Lt) handles for lane %d on %s failed", i,
                             d->name);
    }
    account(d, (ptrdiff_t)64 << 20);
    return 0;
}

int cuda_open(vdn_dev *d, int index, int threads) {
    (void)threads;
    const char *OP = "open";
    int n = 0;
    OPC(cudaGetDeviceCount(&n));
    if (index < 0 || index >= n)
        return vdn_dev_fail(d, "cuda: GPU %d requested, %d visible", index, n);
    cudaDeviceProp p;
    OPC(cudaGetDeviceProperties(&p, index));
    if (p.major < 9)
        return vdn_dev_fail(d, "cuda: GPU %d (%s) is sm_%d%d; the kernels are built for sm_90a",
                            index, p.name, p.major, p.minor);
    OPC(cudaSetDevice(index));
    CudaGpu *g = new CudaGpu();
    g->lane[0].gpu = g->lane[1].gpu = index;
    d->be_state = g;
    snprintf(d->name, sizeof d->name, "cuda:%d", index);
    if (lane_make(d, 0) != 0) {
        cuda_close(d);
        return -1;
    }
    return 0;
}

void cuda_close(vdn_dev *d) {
    CudaGpu *g = (CudaGpu *)d->be_state;
    if (!g) return;
    cudaSetDevice(g->lane[0].gpu);
    for (CudaDev &c : g->lane)
        lane_free(&c);
    if (g->fork_ev) cudaEventDestroy(g->fork_ev);
    if (g->join_ev) cudaEventDestroy(g->join_ev);
    delete g;
    d->be_state = NULL;
}

/* both lanes */
int cuda_sync(vdn_dev *d) {
    const char *OP = "sync";
    if (op_cuda_enter(d, OP)) return -1;
    for (const CudaDev &c : ((CudaGpu *)d->be_state)->lane)
        if (c.st) OPC(cudaStreamSynchronize(c.st));
    OPC(cudaGetLastError());
    return 0;
}

/* ---- lanes (op.h): an event recorded on one stream, waited for on the other (cdev() follows
 * the front end's d->lane, so switching lanes needs nothing here) ---- */

int cuda_lane_fork(vdn_dev *d) {
    const char *OP = "fork";
    if (op_cuda_enter(d, OP)) return -1;
    CudaGpu *g = (CudaGpu *)d->be_state;
    if (!g->fork_ev) OPC(cudaEventCreateWithFlags(&g->fork_ev, cudaEventDisableTiming));
    if (!g->join_ev) OPC(cudaEventCreateWithFlags(&g->join_ev, cudaEventDisableTiming));
    if (!g->lane[1].st && lane_make(d, 1) != 0) return -1;
    OPC(cudaEventRecord(g->fork_ev, g->lane[0].st));
    OPC(cudaStreamWaitEvent(g->lane[1].st, g->fork_ev, 0));
    return 0;
}

int cuda_lane_join(vdn_dev *d) {
    const char *OP = "join";
    if (op_cuda_enter(d, OP)) return -1;
    CudaGpu *g = (CudaGpu *)d->be_state;
    OPC(cudaEventRecord(g->join_ev, g->lane[1].st));
    OPC(cudaStreamWaitEvent(g->lane[0].st, g->join_ev, 0));
    return 0;
}

void *cuda_alloc(vdn_dev *d, size_t bytes) {
    if (op_cuda_enter(d, "alloc")) return NULL;
    void *p = NULL;
    /* at least 16 bytes, so a vectorised kernel's last word stays inside */
    cudaError_t e = cudaMalloc(&p, bytes < 16 ? 16 : bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        vdn_dev_fault(d, op_cuda_fault_kind(e),
                      "cuda: cudaMalloc of %zu bytes on %s: %s (%zu of %zu MiB free)", bytes,
                      d->name, cudaGetErrorString(e), fr >> 20, tot >> 20);
        return NULL;
    }
    return p; /* the front end counts it */
}

void cuda_free(vdn_dev *d, void *p) {
    if (!p) return;
    cudaSetDevice(cdev(d)->gpu);
    /* the stream may still use it: cudaFree waits for the device */
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess)
        fprintf(stderr, "op_cuda: cudaFree on %s: %s\n", d->name, cudaGetErrorString(e));
}

/* What the GPU reports, every process's allocations counted (the op layer's own count is
 * vdn_dev_memory). */
int cuda_mem_info(vdn_dev *d, size_t *free_bytes, size_t *total_bytes) {
    const char *OP = "mem_info";
    OPC(cudaSetDevice(cdev(d)->gpu));
    OPC(cudaMemGetInfo(free_bytes, total_bytes));
    return 0;
}

/* op_profile.c's timers: CUDA events on the device's stream (timing enabled) */
void *cuda_timer_new(vdn_dev *d) {
    cudaEvent_t e = NULL;
    if (cudaSetDevice(cdev(d)->gpu) != cudaSuccess || cudaEventCreate(&e) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return (void *)e;
}
int cuda_timer_mark(vdn_dev *d, void *t) {
    const char *OP = "profile";
    OPC(cudaEventRecord((cudaEvent_t)t, cdev(d)->st));
    return 0;
}
double cuda_timer_ms(vdn_dev *d, const void *from, const void *to) {
    float ms = 0;
    (void)d;
    if (cudaEventElapsedTime(&ms, (cudaEvent_t)from, (cudaEvent_t)to) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return ms;
}
void cuda_timer_free(vdn_dev *d, void *t) {
    (void)d;
    cudaEventDestroy((cudaEvent_t)t);
}

/* host <-> device in t's layout: rows of `cols` elements, packed on the host */
int copy2d(vdn_dev *d, const char *OP, void *dst, size_t dpitch, const void *src, size_t spitch,
           size_t width, size_t rows, cudaMemcpyKind kind) {
    if (rows == 0 || width == 0) return 0;
    OPC(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, cdev(d)->st));
    return 0;
}

int cuda_set(vdn_tensor *t, const void *host, vdn_dtype host_dt) {
    vdn_dev *d = t->dev;
    const char *OP = "tensor_set";
    if (op_cuda_enter(d, OP)) return -1;
    const int64_t rows = vdn_tensor_rows(t), cols = vdn_tensor_cols(t);
    const size_t tes = vdn_dtype_size(t->dtype), hes = vdn_dtype_size(host_dt);
    if (host_dt == t->dtype)
        return copy2d(d, OP, t->data, (size_t)t->ld * tes, host, (size_t)cols * hes,
                      (size_t)cols * hes, (size_t)rows, cudaMemcpyHostToDevice);
    void *stage = op_cuda_scratch(d, SCR_STAGE, (size_t)rows * cols * hes);
    if (!stage) return -1;
    if (copy2d(d, OP, stage, (size_t)cols * hes, host, (size_t)cols * hes, (size_t)cols * hes,
               (size_t)rows, cudaMemcpyHostToDevice))
        return -1;
    return op_cuda_convert2d(d, t->data, t->dtype, t->ld, stage, host_dt, cols, rows, cols);
}

int cuda_get(const vdn_tensor *t, void *host, vdn_dtype host_dt) {
    vdn_dev *d = t->dev;
    const char *OP = "tensor_get";
    if (op_cuda_enter(d, OP)) return -1;
    const int64_t rows = vdn_tensor_rows(t), cols = vdn_tensor_cols(t);
    const size_t tes = vdn_dtype_size(t->dtype), hes = vdn_dtype_size(host_dt);
    if (host_dt == t->dtype) {
        if (copy2d(d, OP, host, (size_t)cols * hes, t->data, (size_t)t->ld * tes,
                   (size_t)cols * tes, (size_t)rows, cudaMemcpyDeviceToHost))
            return -1;
    } else {
        void *stage = op_cuda_scratch(d, SCR_STAGE, (size_t)rows * cols * hes);
        if (!stage) return -1;
        if (op_cuda_convert2d(d, stage, host_dt, cols, t->data, t->dtype, t->ld, rows, cols) ||
            copy2d(d, OP, host, (size_t)cols * hes, stage, (size_t)cols * hes, (size_t)cols * hes,
                   (size_t)rows, cudaMemcpyDeviceToHost))
            return -1;
    }
    OPC(cudaStreamSynchronize(cdev(d)->st));
    return 0;
}

int cuda_copy(vdn_tensor *dst, const vdn_tensor *src) {
    vdn_dev *d = dst->dev;
    const char *OP = "tensor_copy";
    if (op_cuda_enter(d, OP)) return -1;
    const int64_t rows = vdn_tensor_rows(dst), cols = vdn_tensor_cols(dst);
    if (dst->dtype == src->dtype) {
        const size_t es = vdn_dtype_size(dst->dtype);
        return copy2d(d, OP, dst->data, (size_t)dst->ld * es, src->data, (size_t)src->ld * es,
                      (size_t)cols * es, (size_t)rows, cudaMemcpyDeviceToDevice);
    }
    return op_cuda_convert2d(d, dst->data, dst->dtype, dst->ld, src->data, src->dtype, src->ld,
                             rows, cols);
}

} // namespace

/* ---- shared helpers (op_cuda.h) ---- */

int op_cuda_enter(vdn_dev *d, const char *op, std::initializer_list<const vdn_tensor *> floats) {
    const char *OP = op;
    for (const vdn_tensor *t : floats)
        if (t && t->dtype != VDN_DT_F32 && t->dtype != VDN_DT_BF16 && t->dtype != VDN_DT_F16)
            return vdn_dev_fail(d, "op %s: %s tensors are not supported on %s (F32, BF16, F16)", op,
                                vdn_dtype_name(t->dtype), d->name);
    OPC(cudaSetDevice(cdev(d)->gpu));
    return 0;
}

void *op_cuda_scratch(vdn_dev *d, int slot, size_t bytes) {
    CudaDev *c = cdev(d);
    if (bytes <= c->scratch_bytes[slot]) return c->scratch[slot];
    if (c->scratch[slot]) {
        /* queued work may still read it: cudaFree waits for the device (and reports an earlier
         * asynchronous failure, which must not pass unnoticed) */
        cudaError_t fe = cudaFree(c->scratch[slot]);
        account(d, -(ptrdiff_t)c->scratch_bytes[slot]);
        c->scratch[slot] = NULL, c->scratch_bytes[slot] = 0;
        if (fe != cudaSuccess) {
            vdn_dev_fault(d, op_cuda_fault_kind(fe), "cuda: freeing scratch on %s: %s", d->name,
                          cudaGetErrorString(fe));
            return NULL;
        }
    }
    size_t want = bytes + bytes / 4 + 256; /* headroom: shapes grow a little between calls */
    cudaError_t e = cudaMalloc(&c->scratch[slot], want);
    if (e != cudaSuccess) {
        cudaGetLastError();
        c->scratch[slot] = NULL;
        vdn_dev_fault(d, op_cuda_fault_kind(e), "cuda: scratch of %zu bytes on %s: %s", want,
                      d->name, cudaGetErrorString(e));
        return NULL;
    }
    c->scratch_bytes[slot] = want;
    account(d, (ptrdiff_t)want);
    return c->scratch[slot];
}

namespace {

__device__ __forceinline__ double load_any(const char *p, int dt, int64_t i) {
    switch (dt) {
    case VDN_DT_F32:
        return ((const float *)p)[i];
    case VDN_DT_BF16:
        return __bfloat162float(((const bf16 *)p)[i]);
    case VDN_DT_F16:
        return __half2float(((const __half *)p)[i]);
    case VDN_DT_F64:
        return ((const double *)p)[i];
    default: /* I32 */
        return ((const int *)p)[i];
    }
}
__device__ __forceinline__ void store_any(char *p, int dt, int64_t i, double v) {
    switch (dt) {
    case VDN_DT_F32:
        ((float *)p)[i] = (float)v;
        break;
    case VDN_DT_BF16:
        ((bf16 *)p)[i] = __double2bfloat16(v);
        break;
    case VDN_DT_F16:
        ((__half *)p)[i] = __double2half(v);
        break;
    case VDN_DT_F64:
        ((double *)p)[i] = v;
        break;
    default:
        ((int *)p)[i] = __double2int_rn(v);
    }
}

__global__ void convert2d_k(char *dst, int ddt, int64_t ldd, const char *src, int sdt, int64_t lds,
                            int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / cols, c = i % cols;
        store_any(dst, ddt, r * ldd + c, load_any(src, sdt, r * lds + c));
    }
}

__global__ void fill_k(char *dst, int dt, int64_t ld, int64_t rows, int64_t cols, double v) {
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        store_any(dst, dt, (i / cols) * ld + i % cols, v);
}

int dt_supported(int dt) {
    return dt == VDN_DT_F32 || dt == VDN_DT_BF16 || dt == VDN_DT_F16 || dt == VDN_DT_F64 ||
           dt == VDN_DT_I32;
}

} // namespace

int op_cuda_convert2d(vdn_dev *d, void *dst, int dst_dt, int64_t ld_dst, const void *src,
                      int src_dt, int64_t ld_src, int64_t rows, int64_t cols) {
    const char *OP = "convert";
    if (!dt_supported(dst_dt) || !dt_supported(src_dt))
        return vdn_dev_fail(d, "cuda: conversion from dtype %d to %d is not supported", src_dt,
                            dst_dt);
    if (rows * cols == 0) return 0;
    convert2d_k<<<op_grid(rows * cols), 256, 0, cdev(d)->st>>>(
        (char *)dst, dst_dt, ld_dst, (const char *)src, src_dt, ld_src, rows, cols);
    OPL();
    return 0;
}

const void *op_cuda_as_bf16_packed(vdn_dev *d, const vdn_tensor *t, int slot, int64_t *ld) {
    const int64_t rows = vdn_tensor_rows(t), cols = vdn_tensor_cols(t);
    const int64_t ldc = (cols + 7) / 8 * 8; /* 16-byte rows for the vectorised kernels */
    void *s = op_cuda_scratch(d, slot, (size_t)rows * ldc * 2);
    if (!s || op_cuda_convert2d(d, s, VDN_DT_BF16, ldc, t->data, t->dtype, t->ld, rows, cols))
        return NULL;
    *ld = ldc;
    return s;
}

const void *op_cuda_packed(vdn_dev *d, const vdn_tensor *t, vdn_dtype dt, int slot) {
    if (t->dtype == dt && contiguous(t)) return t->data;
    const int64_t rows = vdn_tensor_rows(t), cols = vdn_tensor_cols(t);
    void *s = op_cuda_scratch(d, slot, (size_t)(rows * cols) * vdn_dtype_size(dt));
    if (!s || op_cuda_convert2d(d, s, dt, cols, t->data, t->dtype, t->ld, rows, cols)) return NULL;
    return s;
}

int op_cuda_fill(vdn_tensor *t, double value) {
    vdn_dev *d = t->dev;
    const char *OP = "tensor_fill";
    if (op_cuda_enter(d, OP)) return -1;
    if (!dt_supported(t->dtype))
        return vdn_dev_fail(d, "op %s: dtype %d not supported on cuda", OP, (int)t->dtype);
    const int64_t rows = vdn_tensor_rows(t), cols = vdn_tensor_cols(t);
    if (rows * cols == 0) return 0;
    fill_k<<<op_grid(rows * cols), 256, 0, cdev(d)->st>>>((char *)t->data, t->dtype, t->ld, rows,
                                                          cols, value);
    OPL();
    return 0;
}

/* ---- attention masks: per-row windows and per-tile key ranges on the device ---- */

struct MaskDev {
    int *lohi;  /* [rows][2] */
    int *tiles; /* VDN_TILE_INTS per 128-row query tile */
    int n_tiles;
    size_t bytes; /* counted in the device's memory */
};

int op_cuda_mask_init(vdn_attn_mask *m) {
    vdn_dev *d = m->dev;
    const char *OP = "attn_mask";
    if (op_cuda_enter(d, OP)) return -1;
    const int rows = m->rows, keys = m->keys;
    std::vector<int> lo(rows > 0 ? rows : 1), hi(rows > 0 ? rows : 1);
    vdn_attn_rows ar = {rows, 0, keys, lo.data(), hi.data()};
    for (int r = 0; r < rows; r++) {
        if (m->kind == VDN_MASK_ROWS)
            lo[r] = m->lo[r], hi[r] = m->hi[r];
        else if (m->kind == VDN_MASK_CAUSAL)
            lo[r] = 0, hi[r] = r + 1 < keys ? r + 1 : keys;
        else
            lo[r] = 0, hi[r] = keys;
    }
    if (m->kind == VDN_MASK_ROWS) ar.head_end = m->head_end, ar.tail_start = m->tail_start;
    int nt = (rows + VDN_ATTN_BM - 1) / VDN_ATTN_BM;
    std::vector<int> tl((size_t)(nt > 0 ? nt : 1) * VDN_TILE_INTS, 0);
    if (keys == rows) {
        int n2 = 0;
        int *t = vdn_attn_tiles_make(&ar, VDN_ATTN_BM, &n2);
        if (!t) return vdn_dev_fail(d, "op %s: out of host memory", OP);
        memcpy(tl.data(), t, (size_t)n2 * VDN_TILE_INTS * sizeof(int));
        free(t);
    } else { /* dense over keys != rows: one range per tile (the front end allows only that) */
        for (int i = 0; i < nt; i++)
            tl[(size_t)i * VDN_TILE_INTS] = keys > 0, tl[(size_t)i * VDN_TILE_INTS + 3] = keys;
    }
    std::vector<int> lh(2 * (size_t)(rows > 0 ? rows : 1));
    for (int r = 0; r < rows; r++)
        lh[2 * (size_t)r] = lo[r], lh[2 * (size_t)r + 1] = hi[r];
    MaskDev *md = new MaskDev();
    md->n_tiles = nt;
    cudaError_t e = cudaMalloc(&md->lohi, lh.size() * sizeof(int));
    if (e == cudaSuccess) e = cudaMalloc(&md->tiles, tl.size() * sizeof(int));
    if (e == cudaSuccess)
        e = cudaMemcpy(md->lohi, lh.data(), lh.size() * sizeof(int), cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(md->tiles, tl.data(), tl.size() * sizeof(int), cudaMemcpyHostToDevice);
    m->be_data = md;
    if (e != cudaSuccess) {
        cudaGetLastError();
        op_cuda_mask_free(m);
        return vdn_dev_fail(d, "op %s (%s): mask upload: %s", OP, d->name, cudaGetErrorString(e));
    }
    md->bytes = (lh.size() + tl.size()) * sizeof(int);
    account(d, (ptrdiff_t)md->bytes);
    return 0;
}

void op_cuda_mask_free(vdn_attn_mask *m) {
    MaskDev *md = (MaskDev *)m->be_data;
    if (!md) return;
    cudaSetDevice(cdev(m->dev)->gpu);
    account(m->dev, -(ptrdiff_t)md->bytes);
    if (md->lohi) cudaFree(md->lohi);
    if (md->tiles) cudaFree(md->tiles);
    delete md;
    m->be_data = NULL;
}

/* the attention file reads the mask through these (MaskDev stays private to this file) */
const int *op_cuda_mask_lohi(const vdn_attn_mask *m) {
    return ((const MaskDev *)m->be_data)->lohi;
}
const int *op_cuda_mask_tiles(const vdn_attn_mask *m, int *n_tiles) {
    *n_tiles = ((const MaskDev *)m->be_data)->n_tiles;
    return ((const MaskDev *)m->be_data)->tiles;
}

/* In op_backend.h's member order (C++17 has no designated initialisers): a member added there
 * needs its entry here; test_backend_ops checks the last one, act_dtype. */
extern "C" const vdn_dev_backend vdn_cuda_dev_backend = {
    /* name */ "cuda",
    cuda_available,
    cuda_open,
    cuda_close,
    cuda_sync,
    cuda_alloc,
    cuda_free,
    cuda_set,
    cuda_get,
    cuda_copy,
    op_cuda_fill,
    op_cuda_mask_init,
    op_cuda_mask_free,
    op_cuda_linear,
    op_cuda_matmul_bt,
    op_cuda_act,
    op_cuda_swiglu,
    op_cuda_add,
    op_cuda_scale,
    op_cuda_gate_residual,
    op_cuda_mul_groups,
    op_cuda_rmsnorm,
    op_cuda_layernorm,
    op_cuda_qk_norm_rope,
    op_cuda_attention,
    op_cuda_time_features,
    op_cuda_euler,
    &op_cuda_vda,
    &op_cuda_conv,
    /* act_dtype: activations and the big matrices in bf16 (the contract's precision) */
    VDN_DT_BF16,
    op_cuda_quantize_rows,
    cuda_mem_info,
    cuda_timer_new,
    cuda_timer_mark,
    cuda_timer_ms,
    cuda_timer_free,
    cuda_lane_fork, /* lanes: cdev() follows d->lane; lane 1 is made by the first fork */
    cuda_lane_join,
    &op_cuda_pixels,
    op_cuda_rmsnorm_quant,
    op_cuda_linear_swiglu_quant,
#ifdef VDN_HAVE_NCCL
    "nccl",
    vdn_comm_nccl_unique_id,
    vdn_comm_nccl_open,
#else
    NULL, /* comm_name, comm_unique_id, comm_open: no nccl.h at build time, so no clip over */
    NULL, /* several GPUs */
    NULL,
#endif
};
