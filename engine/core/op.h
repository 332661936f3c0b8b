/* The op layer: tensors that live on a device, and the ops every model is written with.
 *
 * A model (the DiT, the video VAE's ViT decoder, the audio VAE's BigVGAN decoder, the Qwen3-VL
 * text encoder) is written ONCE as a sequence of these ops. Each op has a CPU implementation
 * (engine/op_cpu*.c: plain C, float64 accumulation, written for clarity: the oracle) and a CUDA
 * one (kernels/op_cuda*.cu). kernels/test/test_backend_ops checks every op CUDA against CPU on
 * fresh random inputs, as ggml's test-backend-ops does.
 *
 * Conventions
 *  - A tensor has a dtype and up to 4 dims, outermost first (numpy order). Its innermost dim is
 *    contiguous; the rows (all outer dims flattened) are `ld` elements apart, so a column slice of
 *    a wider matrix (q inside a fused qkv output) is a tensor too. Views never own memory.
 *  - Matrices are row-major [rows, cols]. A Linear weight is [out, in] as torch stores it.
 *  - Every op returns 0, or -1 with a message naming the op and what was wrong, kept in the
 *    device (vdn_dev_error). The front end (engine/op.c) checks shapes and dtypes before it
 *    dispatches, so both backends refuse the same calls with the same words.
 *  - Ops are asynchronous on CUDA (a stream per lane of a device, see "lanes" below);
 *    vdn_tensor_get and vdn_dev_sync wait.
 *  - fp32 and bf16 tensors are both accepted where an op says "float" (the front end also lets
 *    F64 through: the CPU oracle keeps the VDA states in it; a backend without F64 refuses it);
 *    outputs are rounded to their dtype. The CPU backend normally holds everything in fp32 (the
 * oracle); the CUDA backend holds activations in bf16 where the contract allows and fp32 where it
 * says so.
 */
#ifndef VDN_OP_H
#define VDN_OP_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "safetensors.h" /* vdn_dtype_size, vdn_dtype_name */

#ifdef __cplusplus
extern "C" {
#endif

#define VDN_MAX_DIMS 4

typedef struct vdn_dev vdn_dev;                 /* one backend instance (a CPU, a GPU) */
typedef struct vdn_dev_backend vdn_dev_backend; /* its op table (op_backend.h) */
typedef struct vdn_attn_mask vdn_attn_mask;     /* which keys each query sees, on a device */

typedef struct {
    vdn_dev *dev;
    vdn_dtype dtype;          /* VDN_DT_F32, BF16, F16, I32, F64 (and F8_E4M3 for weights) */
    int ndim;                 /* 1..4 */
    int64_t ne[VDN_MAX_DIMS]; /* sizes, outermost first; unused dims are 1 */
    int64_t ld;               /* elements between consecutive rows (>= ne[ndim-1]) */
    void *data;               /* device memory (host memory on the CPU backend) */
    const float *scale;       /* quantised weights: per-row scales on the device, else NULL */
    int owned;                /* 1: vdn_tensor_free releases data */
} vdn_tensor;

/* ---- devices ---- */

/* "cpu" or "cuda" (index: the GPU). threads: CPU worker threads (0 = default). NULL + err when
 * the backend is missing or cannot run here. */
vdn_dev *vdn_dev_open(const char *backend, int index, int threads, char *err, size_t errlen);
void vdn_dev_close(vdn_dev *d);
const char *vdn_dev_name(const vdn_dev *d); /* "cpu", "cuda:0" */
int vdn_dev_is_cpu(const vdn_dev *d);
const char *vdn_dev_error(const vdn_dev *d); /* the last failed op's message */
int vdn_dev_sync(vdn_dev *d);                /* wait for queued work; 0 or -1 */
/* Record a failure in d (the backends' own errors; a model's, e.g. "dit: ...") and return -1. */
int vdn_dev_fail(vdn_dev *d, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* What a device's failures came from, recorded as a type so that callers (the worker's failure
 * blame) never have to guess from the words. A refused call (shapes, dtypes, a model's own
 * error) records nothing: vdn_dev_fail. A backend reports its own failures with vdn_dev_fault. */
typedef enum {
    VDN_DEV_FAULT_NONE = 0, /* no device failure since the last clear */
    VDN_DEV_FAULT_MEMORY,   /* the device ran out of memory (the request's size, not the device) */
    VDN_DEV_FAULT_DEVICE,   /* the device itself failed (a CUDA, cuBLAS or NCCL error): its context
                               may be unusable */
} vdn_dev_fault_kind;
/* vdn_dev_fail that also raises d's fault record to at least `kind`. Returns -1. */
int vdn_dev_fault(vdn_dev *d, vdn_dev_fault_kind kind, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The worst fault recorded since open or the last vdn_dev_clear_fault. */
vdn_dev_fault_kind vdn_dev_faulted(const vdn_dev *d);
void vdn_dev_clear_fault(vdn_dev *d);
/* The dtype the device keeps activations and big weights in (CPU F32, CUDA BF16). */
vdn_dtype vdn_dev_act_dtype(const vdn_dev *d);
/* bytes of device memory in use now and at most since open (allocations through this layer) */
void vdn_dev_memory(const vdn_dev *d, size_t *in_use, size_t *peak);
/* the peak starts again from what is in use now (a benchmark reads each render's peak apart) */
void vdn_dev_memory_reset_peak(vdn_dev *d);
/* Free and total bytes of the device's memory as the device reports them (CUDA: cudaMemGetInfo,
 * which counts every allocation on the GPU, this layer's and anyone else's; CPU: the host's
 * available and physical memory). What a model about to load beside another (the text encoder
 * beside the DiT) asks before it decides to stay. 0, or -1 in d's error when it cannot say. */
int vdn_dev_mem_info(vdn_dev *d, size_t *free_bytes, size_t *total_bytes);

/* ---- lanes: two queues of work on one device ----
 * Ops go to lane 0 of their device unless a model moves independent work to lane 1 so that the
 * two overlap (the DiT's VDA linear branch, memory-bound, beside the compute-bound softmax
 * attention). On CUDA a lane is a stream with its own scratch and cuBLAS(Lt) handles, since
 * each of those is ordered on one stream; lane 1's stream has the greatest priority (its short
 * kernels take SMs as the long kernel's blocks finish) and is made on the first fork (its
 * cuBLASLt workspace then counts in the device's memory). Tensors, memory accounting and errors
 * stay the device's: an op on lane 1 takes the same tensors. On the CPU every op completes
 * before it returns, so lanes change nothing there (only the order the model issues ops in).
 *   vdn_dev_fork(d): lane 1 waits for everything queued on lane 0 so far; later ops go to lane 1.
 *   vdn_dev_lane(d, lane): later ops go to lane 0, or to 1 (only between a fork and its join).
 *   vdn_dev_join(d): lane 0 waits for everything queued on lane 1 so far; later ops go to lane 0.
 * Between a fork and its join neither lane may write what the other reads or writes, and lane
 * 1's results are read (vdn_tensor_get included) only after the join. Freeing a tensor waits
 * for the whole device (cudaFree), and vdn_dev_sync waits for both lanes. 0, or -1 with d's
 * error. */
int vdn_dev_fork(vdn_dev *d);
int vdn_dev_lane(vdn_dev *d, int lane);
int vdn_dev_join(vdn_dev *d);

/* ---- tensors ---- */

/* New contiguous tensor, contents undefined. ne: ndim sizes. NULL on failure (message in dev). */
vdn_tensor *vdn_tensor_new(vdn_dev *d, vdn_dtype dt, int ndim, const int64_t *ne);
vdn_tensor *vdn_tensor_new2(vdn_dev *d, vdn_dtype dt, int64_t rows, int64_t cols);
void vdn_tensor_free(vdn_tensor *t); /* NULL ok; views must not be freed */

size_t vdn_dtype_size(vdn_dtype dt);          /* bytes per element; 0: not a tensor dtype */
const char *vdn_dtype_name(vdn_dtype dt);     /* "f32", "bf16", ... */
int64_t vdn_tensor_rows(const vdn_tensor *t); /* product of all but the innermost dim */
int64_t vdn_tensor_cols(const vdn_tensor *t); /* the innermost dim */
int64_t vdn_tensor_numel(const vdn_tensor *t);
/* "BF16[4,56,128] ld 7168" for messages */
const char *vdn_tensor_desc(const vdn_tensor *t, char *buf, size_t len);

/* Views (no copy, not owned): rows [r0, r0+n) of the 2-D form, columns [c0, c0+n), and a new
 * shape over a contiguous tensor (same element count). */
vdn_tensor vdn_view_rows(const vdn_tensor *t, int64_t r0, int64_t n);
vdn_tensor vdn_view_cols(const vdn_tensor *t, int64_t c0, int64_t n);
vdn_tensor vdn_view_reshape(const vdn_tensor *t, int ndim, const int64_t *ne);

/* Host <-> device. set: host values of dtype `host_dt` (F32, BF16, F16, F64, I32) converted to
 * t's dtype (round to nearest even); get: t's values converted to host float32 (get_f64 for F64
 * tensors, get_i32 for I32). Both handle strided views; get waits for queued work. */
int vdn_tensor_set(vdn_tensor *t, const void *host, vdn_dtype host_dt);
int vdn_tensor_get(const vdn_tensor *t, float *host);
int vdn_tensor_get_raw(const vdn_tensor *t, void *host); /* t's own dtype, packed rows */
/* dst = src converted to dst's dtype (same shape), on the device */
int vdn_tensor_copy(vdn_tensor *dst, const vdn_tensor *src);
int vdn_tensor_fill(vdn_tensor *t, double value);

/* ---- matrix products ---- */

/* GELU_TANH: the tanh approximation (gelu_pytorch_tanh); GELU: the exact one, x Phi(x) with erf
 * (torch's nn.GELU(), the Qwen3-VL vision patch merger's) */
typedef enum {
    VDN_ACT_NONE = 0,
    VDN_ACT_SILU,
    VDN_ACT_GELU_TANH,
    VDN_ACT_SIGMOID,
    VDN_ACT_GELU
} vdn_act;

/* y[r, o] = act(sum_i x[r, i] w[o, i] + b[o]) (+ y[r, o] before the op when accumulate).
 * x [rows, in], w [out, in] (bf16/fp32, or fp8 with w->scale), b [out] or NULL, y [rows, out].
 * accumulate and act != NONE are exclusive.
 * fp8 (w F8_E4M3 with per-row scales sw, from vdn_op_quantize_rows): x is quantised per row by
 * the same rule (x8, sx), then y[r, o] = act(sx[r] sw[o] sum_i x8[r, i] w8[o, i] + b[o]), the
 * sum exact or in fp32 (CUDA: fp8 tensor cores), bias and accumulate as for the other dtypes.
 * x may arrive already quantised: F8_E4M3 with its row scales in x->scale (as
 * vdn_op_quantize_rows, vdn_op_rmsnorm_quant and vdn_op_linear_swiglu_quant leave it); it is then
 * taken as (x8, sx) without a second quantisation, and w must be fp8 too. */
int vdn_op_linear(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                  vdn_act act, int accumulate);

/* Row-wise fp8 quantisation: scale[r] = amax_r / 448 (float32; an all-zero row gets 1) and
 * q[r, c] = e4m3(float32(x[r, c] / scale[r])), rounded to nearest even and saturated to +-448
 * (vdn_f32_to_e4m3). x [rows, cols] float (F32, BF16, F16), q F8_E4M3 [rows, cols], scale F32
 * with `rows` elements, contiguous. On success q->scale points at scale's data, so q is a weight
 * vdn_op_linear takes; scale must outlive q's use. */
int vdn_op_quantize_rows(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x);
/* RMSNorm then the row quantisation, fused (the fp8 decoder's norms feeding a Linear):
 * h[r, c] = float32(x[r, c] / sqrt(mean_c x[r, c]^2 + eps) * w[c]) as vdn_op_rmsnorm computes it
 * into a float32 y (no modulation), then q, scale = vdn_op_quantize_rows(h) with no rounding of h
 * to another dtype in between. x [rows, cols] F32/BF16/F16, w [cols] or NULL, q F8_E4M3
 * [rows, cols], scale F32 with `rows` contiguous elements; q->scale points at scale's data. */
int vdn_op_rmsnorm_quant(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x, const vdn_tensor *w,
                         double eps);
/* An fp8 Linear, SwiGLU and the row quantisation, fused (the fp8 decoder's FFN-in, whose output
 * only ever feeds the fp8 FFN-out): w F8_E4M3 [2f, in] with its scales, b [2f] or NULL;
 * h = vdn_op_linear(x, w, b) in float32 (the fp8 rule: x float is quantised, x F8_E4M3 with
 * scales is taken as it is), y[r, c] = float32(h[r, c] * silu(h[r, f + c])) (value first, gate
 * second: vdn_op_swiglu on the column halves), then q, scale = vdn_op_quantize_rows(y).
 * q F8_E4M3 [rows, f], scale F32 with `rows` contiguous elements; q->scale points at scale. */
int vdn_op_linear_swiglu_quant(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x,
                               const vdn_tensor *w, const vdn_tensor *b);
/* A float weight w [out, in] as a new fp8 weight (*q) with its new row scales (*scale), both on
 * w's device, the device synced so the caller may free w at once (loaders quantise as they load:
 * the device never holds the whole model in float). 0, or -1 with nothing allocated and the
 * device's error set. */
int vdn_quantize_weight_fp8(const vdn_tensor *w, vdn_tensor **q, vdn_tensor **scale);

/* Batched y[i] = a[i] b[i]^T (+ y[i] when accumulate): a [n, m, k], b [n, p, k], y [n, m, p]. */
int vdn_op_matmul_bt(vdn_tensor *y, const vdn_tensor *a, const vdn_tensor *b, int accumulate);

/* ---- elementwise and per row ---- */

int vdn_op_act(vdn_tensor *y, const vdn_tensor *x, vdn_act act); /* in place ok */
/* y = value * silu(gate), all [rows, f] (value and gate may be column views of one tensor) */
int vdn_op_swiglu(vdn_tensor *y, const vdn_tensor *value, const vdn_tensor *gate);
int vdn_op_add(vdn_tensor *x, const vdn_tensor *y); /* x += y */
int vdn_op_scale(vdn_tensor *x, double s);          /* x *= s */
/* x[r, :] += gate[idx[r], :] * y[r, :]; gate NULL: x += y. gate [n, width] (a view, any ld);
 * idx I32 [rows] (NULL: row r uses gate row r). */
int vdn_op_gate_residual(vdn_tensor *x, const vdn_tensor *y, const vdn_tensor *gate,
                         const vdn_tensor *idx);
/* x[r, c] *= s[r, c / group] (per-head gate: s [rows, heads], group = head_dim) */
int vdn_op_mul_groups(vdn_tensor *x, const vdn_tensor *s, int group);

/* RMSNorm over the innermost dim with optional weight, then an optional adaLN modulation:
 * y[r] = rms(x[r]) * w * (1 + scale[idx[r]]) + shift[idx[r]]. w, shift, scale, idx may be NULL
 * (shift and scale together). shift/scale [n, width] views; idx I32 [rows]. */
int vdn_op_rmsnorm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, double eps,
                   const vdn_tensor *shift, const vdn_tensor *scale, const vdn_tensor *idx);
/* LayerNorm over the innermost dim: (x - mean) / sqrt(var + eps) * w + b (w, b may be NULL). */
int vdn_op_layernorm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                     double eps);

/* ---- rotary embedding ---- */

/* RoPE of up to three position axes, half-split (NeoX) on the first n_rot channels of every
 * head: pair i (< n_rot/2) couples channels i and i + n_rot/2 and turns by
 * float32(pos[r, axis(i)]) * inv[i], axis(i) = 0 for the first sections[0] pairs, 1 for the next
 * sections[1], 2 for the rest; channels past n_rot pass through. inv: F32 [n_rot/2] on the device
 * (the model's float32 inv_freq values, per pair). pos: F64 [rows, 3].
 * interleaved: Qwen3-VL's multimodal layout instead (apply_interleaved_mrope): axis(i) = 1 when
 * i % 3 == 1 and i < 3 sections[1], 2 when i % 3 == 2 and i < 3 sections[2], else 0 (the
 * sections still add up to n_rot/2). vdn_rope_axis says which. */
typedef struct {
    const vdn_tensor *pos;
    const vdn_tensor *inv;
    int n_rot;
    int sections[3];
    int interleaved;
} vdn_rope;

/* the position axis pair i turns by (both layouts above); for the backends (CUDA's too) */
#ifdef __CUDACC__
#define VDN_HOST_DEVICE __host__ __device__
#else
#define VDN_HOST_DEVICE
#endif
static inline VDN_HOST_DEVICE int vdn_rope_axis(int i, int s0, int s1, int s2, int interleaved) {
    if (interleaved) return i % 3 == 1 && i < 3 * s1 ? 1 : (i % 3 == 2 && i < 3 * s2 ? 2 : 0);
    return i < s0 ? 0 : (i < s0 + s1 ? 1 : 2);
}

/* Per head of width head_dim: RMSNorm with the shared weight (wq for q, wk for k; NULL = none,
 * eps), then the rope (NULL = none). q_in/k_in [rows, heads*head_dim] (heads may differ: GQA);
 * outputs likewise. k_in/k_out may be NULL (q only). */
int vdn_op_qk_norm_rope(vdn_tensor *q_out, vdn_tensor *k_out, const vdn_tensor *q_in,
                        const vdn_tensor *k_in, const vdn_tensor *wq, const vdn_tensor *wk,
                        int head_dim, double eps, const vdn_rope *rope);

/* ---- attention ---- */

/* Which keys query row r sees: k < head_end || k >= tail_start || lo[r] <= k < hi[r]
 * (kernels/attn_tiles.h), or causal (k <= r), or all. Made once per layout, kept on the device. */
vdn_attn_mask *vdn_attn_mask_dense(vdn_dev *d, int rows, int keys);
vdn_attn_mask *vdn_attn_mask_causal(vdn_dev *d, int rows);
vdn_attn_mask *vdn_attn_mask_rows(vdn_dev *d, int rows, int head_end, int tail_start, const int *lo,
                                  const int *hi);
void vdn_attn_mask_free(vdn_attn_mask *m);

/* o = softmax(q k^T * scale + mask) v per query head, then o *= gate[r, h] when gate != NULL.
 * q [rows, hq*hd], k and v [keys, hkv*hd] (hq % hkv == 0: GQA, query head h reads kv head
 * h / (hq/hkv)), o [rows, hq*hd], gate F32 [rows, hq]. hd: 64 or 128 on CUDA. */
int vdn_op_attention(vdn_tensor *o, const vdn_tensor *q, const vdn_tensor *k, const vdn_tensor *v,
                     int head_dim, double scale, const vdn_attn_mask *mask, const vdn_tensor *gate);

/* ---- diffusion ---- */

/* Sinusoidal timestep features, cos first: e[m] = [cos(t_m f_j), sin(t_m f_j)],
 * f_j = exp(-ln(1e4) j / half), arguments formed in float32 (spec 2.3). t F32 [M], e F32 [M, dim].
 */
int vdn_op_time_features(vdn_tensor *e, const vdn_tensor *t);
/* The Euler step of the flow sampler on rows of x (spec 4), in float32:
 * x0 = x + (1 - t) v (t = 1 - sigma), x <- r x + (1 - r) x0, r = sigma_next / sigma. */
int vdn_op_euler(vdn_tensor *x, const vdn_tensor *v, double sigma, double sigma_next);

#ifdef __cplusplus
}
#endif
#endif
