/* The CUDA backend of the op layer (engine/op_backend.h): what its files share.
 *
 *   op_cuda.cu         the table, devices, memory, host <-> device, copies, masks
 *   op_cuda_elem.cu    elementwise and per-row ops (act, swiglu, add, scale, gate_residual,
 *                      mul_groups, time_features, euler) and the dtype conversions
 *   op_cuda_norm.cu    rmsnorm (+ adaLN modulate), layernorm, qk_norm_rope
 *   op_cuda_linear.cu  linear (cuBLASLt bf16 with the fused bias, cuBLAS fp32), matmul_bt
 *   op_cuda_fp8.cu     quantize_rows, linear with an fp8 weight (fp8.cuh: the e4m3 rule)
 *   op_cuda_fp8_fused.cu  rmsnorm_quant, linear_swiglu_quant (fp8 producers, fused)
 *   op_cuda_attn.cu    attention (the wgmma ping-pong kernel, else the portable mma.sync one)
 *   op_cuda_vda.cu     the VDA family (engine/op_vda.h)
 *   op_cuda_conv.cu    the decoders' convolutions (engine/op_conv.h)
 *   op_cuda_conv2d.cu  the video encoder's conv2d and group_norm (engine/op_conv.h)
 *
 * Every op maps onto the kernels of this folder (kernels.h); where its call fits a fused kernel's
 * layout (bf16, contiguous, 16-byte aligned) that kernel runs, otherwise a plain strided kernel
 * of the op's file that takes any float dtype. All work goes to the stream of the device's
 * current lane (engine/op.h, "lanes"): cdev(d) is that lane. */
#ifndef VDN_OP_CUDA_H
#define VDN_OP_CUDA_H

#include <stdint.h>

#include <initializer_list>

extern "C" {
#include "op_backend.h"
}
#include "cuda_util.cuh"

/* scratch slots: one use each at a time (op_cuda_scratch) */
enum {
    SCR_STAGE = 0,
    SCR_VT,
    SCR_CONV,
    SCR_CONV2,
    SCR_CONV3,
    SCR_OUT,
    SCR_GATE,
    SCR_ROPE, /* qk_norm_rope's per-row sine/cosine table */
    SCR_W0,   /* weights in a kernel's dtype (SCR_W0 + i) */
    SCR_SLOTS_MAX = SCR_W0 + 4
};

/* One lane of a GPU: a stream and what is ordered on it (the cuBLASLt workspace, the handles'
 * streams, the scratch), so that two lanes never share any of it. */
struct CudaDev {
    int gpu;
    cudaStream_t st;
    vdn_gemm_ctx *gc; /* cuBLASLt (bf16 GEMMs) */
    void *cb;         /* cuBLAS (fp32 GEMMs, batched products) */
    /* grow-only scratch, stream-ordered (a new size frees the old one after a device sync) */
    void *scratch[SCR_SLOTS_MAX];
    size_t scratch_bytes[SCR_SLOTS_MAX];
};

/* A device's state (vdn_dev.be_state): lane 0, lane 1 (made on the first fork: st NULL until
 * then), and the events a fork and a join record. */
struct CudaGpu {
    CudaDev lane[2];
    cudaEvent_t fork_ev, join_ev;
};

/* the lane ops go to now (the front end's d->lane) */
static inline CudaDev *cdev(const vdn_dev *d) {
    return &((CudaGpu *)d->be_state)->lane[d->lane];
}
static inline vdn_stream vst(const vdn_dev *d) {
    return (vdn_stream)cdev(d)->st;
}

/* Make d's GPU current (one thread may drive several devices) and refuse float dtypes the
 * kernels do not take (F64: the CPU oracle's VDA states) among `floats` (NULLs skipped). */
int op_cuda_enter(vdn_dev *d, const char *op,
                  std::initializer_list<const vdn_tensor *> floats = {});
/* A device buffer of at least `bytes` for one use on the stream (slot: SCR_*). NULL + message. */
void *op_cuda_scratch(vdn_dev *d, int slot, size_t bytes);

/* What a CUDA error says about the GPU (vdn_dev_fault): running out of memory is the request's
 * size; anything else (an illegal address, a launch failure, ECC) is the device's own failure. */
static inline vdn_dev_fault_kind op_cuda_fault_kind(cudaError_t e) {
    return e == cudaErrorMemoryAllocation ? VDN_DEV_FAULT_MEMORY : VDN_DEV_FAULT_DEVICE;
}

/* The same for a cuBLAS(Lt) status: CUBLAS_STATUS_ALLOC_FAILED (3) is memory, any other failure
 * of a call the front end checked (an execution failure, 13) the device's. */
static inline vdn_dev_fault_kind op_cuda_cublas_fault_kind(int status) {
    return status == 3 ? VDN_DEV_FAULT_MEMORY : VDN_DEV_FAULT_DEVICE;
}

/* In an op returning int, with vdn_dev *d in scope and `OP` naming the op: */
#define OPC(call)                                                                                  \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return vdn_dev_fault(d, op_cuda_fault_kind(e_), "op %s (%s): %s: %s", OP, d->name,     \
                                 #call, cudaGetErrorString(e_));                                   \
    } while (0)
/* a kernels.h launcher (it printed its reason on stderr) */
#define OPK(call)                                                                                  \
    do {                                                                                           \
        if ((call) != 0)                                                                           \
            return vdn_dev_fault(d, VDN_DEV_FAULT_DEVICE,                                          \
                                 "op %s (%s): %s failed (details on "                              \
                                 "stderr)",                                                        \
                                 OP, d->name, #call);                                              \
    } while (0)
#define OPL() OPC(cudaGetLastError())

/* A 2-D float view for the plain kernels: element (r, c) at p + (r * ld + c) * size(dt). */
struct FView {
    char *p;
    int dt; /* VDN_DT_F32, BF16, F16 */
    int64_t ld;
};
static inline FView fview(const vdn_tensor *t) {
    FView v = {(char *)t->data, (int)t->dtype, t->ld};
    return v;
}
__device__ __forceinline__ float fv_get(const FView &v, int64_t r, int64_t c) {
    const int64_t i = r * v.ld + c;
    if (v.dt == VDN_DT_F32) return ((const float *)v.p)[i];
    if (v.dt == VDN_DT_BF16) return __bfloat162float(((const bf16 *)v.p)[i]);
    return __half2float(((const __half *)v.p)[i]);
}
__device__ __forceinline__ void fv_set(const FView &v, int64_t r, int64_t c, float x) {
    const int64_t i = r * v.ld + c;
    if (v.dt == VDN_DT_F32)
        ((float *)v.p)[i] = x;
    else if (v.dt == VDN_DT_BF16)
        ((bf16 *)v.p)[i] = __float2bfloat16_rn(x);
    else
        ((__half *)v.p)[i] = __float2half_rn(x);
}

static inline int op_grid(int64_t n, int threads = 256) {
    int64_t g = (n + threads - 1) / threads;
    return (int)(g > 65536 ? 65536 : (g < 1 ? 1 : g));
}
static inline int is_bf16(const vdn_tensor *t) {
    return t && t->dtype == VDN_DT_BF16;
}
static inline int is_f32(const vdn_tensor *t) {
    return t && t->dtype == VDN_DT_F32;
}
static inline int aligned16(const void *p) {
    return ((uintptr_t)p & 15) == 0;
}
static inline int contiguous(const vdn_tensor *t) {
    return t->ld == t->ne[t->ndim - 1];
}

/* dst (rows x cols, strided, any of F32 BF16 F16 F64 I32) = src converted, on the stream */
int op_cuda_convert2d(vdn_dev *d, void *dst, int dst_dt, int64_t ld_dst, const void *src,
                      int src_dt, int64_t ld_src, int64_t rows, int64_t cols);
/* a bf16 copy of t in scratch slot `slot`, rows padded to 16 bytes; NULL + message */
const void *op_cuda_as_bf16_packed(vdn_dev *d, const vdn_tensor *t, int slot, int64_t *ld);

/* t's data as a packed `dt` matrix: t itself when it already is one, else converted into scratch
 * slot `slot` (weights a model keeps in another dtype). NULL + message. */
const void *op_cuda_packed(vdn_dev *d, const vdn_tensor *t, vdn_dtype dt, int slot);

extern "C" const struct vdn_vda_backend op_cuda_vda;
extern "C" const struct vdn_conv_backend op_cuda_conv;
extern "C" const struct vdn_pixel_backend op_cuda_pixels;

/* the conv family's encoder ops (op_cuda_conv2d.cu) */
int op_cuda_conv2d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                   int H, int W, int K, int stride, const int pad[4], int reflect, int accumulate);
int op_cuda_group_norm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                       int groups, double eps, vdn_act act);

/* the table's members, by file */
int op_cuda_act(vdn_tensor *y, const vdn_tensor *x, vdn_act act);
int op_cuda_swiglu(vdn_tensor *y, const vdn_tensor *value, const vdn_tensor *gate);
int op_cuda_add(vdn_tensor *x, const vdn_tensor *y);
int op_cuda_scale(vdn_tensor *x, double s);
int op_cuda_gate_residual(vdn_tensor *x, const vdn_tensor *y, const vdn_tensor *gate,
                          const vdn_tensor *idx);
int op_cuda_mul_groups(vdn_tensor *x, const vdn_tensor *s, int group);
int op_cuda_time_features(vdn_tensor *e, const vdn_tensor *t);
int op_cuda_euler(vdn_tensor *x, const vdn_tensor *v, double sigma, double sigma_next);
int op_cuda_fill(vdn_tensor *t, double value);
int op_cuda_rmsnorm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, double eps,
                    const vdn_tensor *shift, const vdn_tensor *scale, const vdn_tensor *idx);
int op_cuda_layernorm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                      double eps);
int op_cuda_qk_norm_rope(vdn_tensor *q_out, vdn_tensor *k_out, const vdn_tensor *q_in,
                         const vdn_tensor *k_in, const vdn_tensor *wq, const vdn_tensor *wk,
                         int head_dim, double eps, const vdn_rope *rope);
int op_cuda_linear(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                   vdn_act act, int accumulate);
int op_cuda_matmul_bt(vdn_tensor *y, const vdn_tensor *a, const vdn_tensor *b, int accumulate);
/* linear with an fp8 weight (op_cuda_fp8.cu): the cuBLASLt fp8 path, else dequantised fp32 */
int op_cuda_linear_fp8(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                       vdn_act act, int accumulate);
/* the fp32 tail of linear: fp32 operands xf [rows(y), k] (rows ldx apart), wf [cols(y), k] */
int op_cuda_linear_f32(vdn_tensor *y, const float *xf, int64_t ldx, const float *wf, int64_t ldw,
                       int64_t k, const vdn_tensor *b, vdn_act act, int accumulate);
int op_cuda_quantize_rows(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x);
/* the fused fp8 producers (op_cuda_fp8_fused.cu) */
int op_cuda_rmsnorm_quant(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x,
                          const vdn_tensor *w, double eps);
int op_cuda_linear_swiglu_quant(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x,
                                const vdn_tensor *w, const vdn_tensor *b);

/* fp8 helpers of op_cuda_fp8.cu. An fp8 Linear's x as e4m3 rows: q rows ld bytes apart with
 * scale[rows]; fits: the rows suit cuBLASLt's fp8 kernels (16-byte aligned, ld % 16 == 0). */
struct Fp8Rows {
    const uint8_t *q;
    int64_t ld;
    const float *scale;
    int fits;
};
/* x itself when it is F8_E4M3 with scales, else x quantised into scratch (SCR_OUT, SCR_GATE) */
int op_cuda_fp8_x(vdn_dev *d, const char *OP, const vdn_tensor *x, Fp8Rows *o);
/* x (any float view) -> q (rows ldq apart) and scale[rows] by the fp8 rule */
int op_cuda_quant_rows(vdn_dev *d, const char *OP, const vdn_tensor *x, uint8_t *q, int64_t ldq,
                       float *scale);
/* out[r, c] (packed float32) = e4m3 q[r, c] * scale[r] */
int op_cuda_dequant_rows(vdn_dev *d, const char *OP, const uint8_t *q, int64_t ldq,
                         const float *scale, int64_t rows, int64_t cols, float *out);
/* whether cuBLASLt's fp8 kernels take y (NULL: a packed product into scratch) = x8 w^T, w [n, k] */
int op_cuda_fp8_fits(const vdn_tensor *y, const vdn_tensor *w, int64_t k, int64_t n);
int op_cuda_attention(vdn_tensor *o, const vdn_tensor *q, const vdn_tensor *k, const vdn_tensor *v,
                      int head_dim, double scale, const vdn_attn_mask *mask,
                      const vdn_tensor *gate);
int op_cuda_mask_init(vdn_attn_mask *m);
void op_cuda_mask_free(vdn_attn_mask *m);
const int *op_cuda_mask_lohi(const vdn_attn_mask *m); /* device [rows][2] */
const int *op_cuda_mask_tiles(const vdn_attn_mask *m, int *n_tiles);

/* y = act(y + bias) over a strided float view (bias: a vector of n in any float dtype, or NULL);
 * the epilogue of the GEMMs that have no fused one. */
int op_cuda_bias_act(vdn_dev *d, const char *OP, FView y, int64_t rows, int64_t n,
                     const vdn_tensor *bias, vdn_act act);

#endif
