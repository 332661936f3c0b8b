/* The fused fp8 producers of the CUDA backend (op.h vdn_op_rmsnorm_quant and
 * vdn_op_linear_swiglu_quant): the ops whose outputs only ever feed an fp8 Linear write its e4m3
 * rows and row scales directly, so the float activation never goes through memory.
 *
 * rmsnorm_quant: one block a row; the row's values stay in registers (16-byte loads, 8 columns a
 * thread group) through the sum of squares, the normalisation, the amax and the e4m3 write.
 *
 * linear_swiglu_quant: x as e4m3 rows (itself, or quantised into scratch), then the raw
 * cuBLASLt e4m3 product into bf16 scratch (gemm.cu vdn_gemm_fp8, as linear does; one GEMM a
 * video decoder pass, slabs of SLAB_ROWS past that), then one kernel a row: h = sx[r] sw[c] D +
 * b[c] in float32 (scales and the bias as float32 vectors), y = h_value silu(h_gate) with the
 * fast exp and division, the row's amax, the scale and the e4m3 bytes (two conversions an
 * instruction), the row in registers. A call cuBLASLt's fp8 kernels cannot take runs the same
 * operands dequantised through SGEMM into float32 scratch, then a plain row kernel.
 *
 * Both are the CPU oracle's composition up to float32 arithmetic order, the fast functions, the
 * quantisation's multiply by 1 / scale (within an ulp of the division), and for
 * linear_swiglu_quant the raw product's bf16 rounding (2^-8 relative): an e4m3 code may land on
 * its neighbour, the scale move by as much as the row's largest value (test_backend_ops argues
 * the bounds). */
#include "fp8.cuh"

namespace {

const int NT = 256; /* threads of the row kernels: one block a row */
/* rows of one linear_swiglu_quant product in scratch: a whole pass of the video decoder
 * (VDN_VAE_BATCH_ROWS) is one GEMM (smaller slabs measured slower: 7 of 7200 rows, H200) */
const int64_t SLAB_ROWS = 65536;

/* 8 values of row r from column c (c % 8 == 0) of a bf16 (one 16-byte load) or f32 (two) view
 * with 16-byte aligned rows */
__device__ __forceinline__ void load8(const FView &x, int64_t r, int64_t c, float *f) {
    if (x.dt == VDN_DT_BF16) {
        unpack8(*(const uint4 *)((const bf16 *)x.p + r * x.ld + c), f);
        return;
    }
    const float4 *p = (const float4 *)((const float *)x.p + r * x.ld + c);
    const float4 a = p[0], b = p[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}

/* registers a thread needs for `groups` groups of 8 columns: 1, 2, 4 or 8 groups, else 0 (the
 * re-reading kernel) */
int pick_v(int64_t groups) {
    for (int v = 1; v <= 8; v *= 2)
        if (groups <= (int64_t)v * NT) return v;
    return 0;
}

/* ---- rmsnorm_quant ---- */

/* h = x inv w, float32, as the CPU's float32 y of rmsnorm */
__device__ __forceinline__ float norm1(float x, float inv, const FView &w, int has_w, int64_t c) {
    const float h = __fmul_rn(x, inv);
    return has_w ? __fmul_rn(h, fv_get(w, 0, c)) : h;
}

/* V > 0: the row in registers, V groups of 8 columns a thread (cols % 8 == 0, 16-byte rows of
 * x, 8-byte rows of q); V == 0: any view, each pass re-reads x (L1/L2) and recomputes the same h */
template <int V>
__global__ void __launch_bounds__(NT)
    k_rmsnorm_quant(FView x, int64_t rows, int64_t cols, FView w, int has_w, float eps, uint8_t *q,
                    int64_t ldq, float *scale) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float h[V > 0 ? V : 1][8];
        float ss = 0.f;
        if (V > 0) {
#pragma unroll
            for (int i = 0; i < V; i++) {
                const int64_t c = ((int64_t)threadIdx.x + i * NT) * 8;
#pragma unroll
                for (int j = 0; j < 8; j++)
                    h[i][j] = 0.f;
                if (c < cols) load8(x, r, c, h[i]);
#pragma unroll
                for (int j = 0; j < 8; j++)
                    ss = fmaf(h[i][j], h[i][j], ss);
            }
        } else {
            for (int64_t c = threadIdx.x; c < cols; c += NT) {
                const float v = fv_get(x, r, c);
                ss = fmaf(v, v, ss);
            }
        }
        ss = fp8::block_reduce<NT, 1>(ss);
        /* IEEE square root and reciprocal: the CPU's 1 / sqrt(mean + eps) to float32's rounding */
        const float inv = __frcp_rn(__fsqrt_rn(__fadd_rn(__fdiv_rn(ss, (float)cols), eps)));
        float amax = 0.f;
        if (V > 0) {
#pragma unroll
            for (int i = 0; i < V; i++) {
                const int64_t c = ((int64_t)threadIdx.x + i * NT) * 8;
                if (c >= cols) continue;
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    h[i][j] = norm1(h[i][j], inv, w, has_w, c + j);
                    amax = fmaxf(amax, fabsf(h[i][j]));
                }
            }
        } else {
            for (int64_t c = threadIdx.x; c < cols; c += NT)
                amax = fmaxf(amax, fabsf(norm1(fv_get(x, r, c), inv, w, has_w, c)));
        }
        const float s = fp8::row_scale(fp8::block_reduce<NT, 0>(amax)), si = __frcp_rn(s);
        if (threadIdx.x == 0) scale[r] = s;
        uint8_t *qr = q + r * ldq;
        if (V > 0) {
#pragma unroll
            for (int i = 0; i < V; i++) {
                const int64_t c = ((int64_t)threadIdx.x + i * NT) * 8;
                if (c < cols) *(uint2 *)(qr + c) = fp8::quant8_mul(h[i], si);
            }
        } else {
            for (int64_t c = threadIdx.x; c < cols; c += NT)
                qr[c] = fp8::to_e4m3(norm1(fv_get(x, r, c), inv, w, has_w, c) * si);
        }
    }
}

template <int V>
void launch_rmsnorm_quant(int grid, cudaStream_t st, FView x, int64_t rows, int64_t cols, FView w,
                          int has_w, float eps, uint8_t *q, int64_t ldq, float *scale) {
    k_rmsnorm_quant<V><<<grid, NT, 0, st>>>(x, rows, cols, w, has_w, eps, q, ldq, scale);
}

/* ---- linear_swiglu_quant ---- */

const int ST = 512; /* threads of the SwiGLU row kernel: f = 8192 is 2 groups of 8 a thread */

/* silu(g) = g / (1 + e^-g) with the fast exponential and division (2 ulp each; a gate past -88
 * makes the denominator inf and __fdividef gives 0, silu's limit) */
__device__ __forceinline__ float silu_fast(float g) {
    return __fdividef(g, 1.f + __expf(-g));
}

/* One block a row of the raw product D (bf16 [rows, 2f], rows ldd apart, 16-byte aligned; value
 * columns [0, f), gate [f, 2f)): h = sx[r] sw[c] D + b[c], y = h_v silu(h_g), the row's amax and
 * e4m3 bytes, the row's f outputs in registers (V groups of 8 a thread). sw and bias (packed
 * float32, or NULL) 16-byte aligned; f % 8 == 0; q rows 8-byte aligned. */
template <int V>
__global__ void __launch_bounds__(ST)
    k_swiglu_quant(const bf16 *D, int64_t ldd, int64_t rows, int64_t f, const float *sx,
                   const float *sw, const float *bias, uint8_t *q, int64_t ldq, float *scale) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float s0 = sx[r];
        const bf16 *Dr = D + r * ldd;
        float y[V][8];
        float amax = 0.f;
#pragma unroll
        for (int i = 0; i < V; i++) {
            const int64_t c = ((int64_t)threadIdx.x + i * ST) * 8;
            if (c < f) {
                float dg[8], cv[8], cg[8], bv[8] = {0.f}, bg[8] = {0.f};
                unpack8(*(const uint4 *)(Dr + c), y[i]);
                unpack8(*(const uint4 *)(Dr + f + c), dg);
                fp8::load8f(sw + c, cv);
                fp8::load8f(sw + f + c, cg);
                if (bias) fp8::load8f(bias + c, bv), fp8::load8f(bias + f + c, bg);
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const float hv = fmaf(s0 * cv[j], y[i][j], bv[j]);
                    const float hg = fmaf(s0 * cg[j], dg[j], bg[j]);
                    y[i][j] = hv * silu_fast(hg);
                    amax = fmaxf(amax, fabsf(y[i][j]));
                }
            }
        }
        const float s = fp8::row_scale(fp8::block_reduce<ST, 0>(amax));
        if (threadIdx.x == 0) scale[r] = s;
        const float inv = __frcp_rn(s);
        uint8_t *qr = q + r * ldq;
#pragma unroll
        for (int i = 0; i < V; i++) {
            const int64_t c = ((int64_t)threadIdx.x + i * ST) * 8;
            if (c < f) *(uint2 *)(qr + c) = fp8::quant8_mul(y[i], inv);
        }
    }
}

/* y of column c (< f) of row r: D bf16 raw with the scales (sw given), or the finished float32
 * product (sw NULL); any bias view */
__device__ __forceinline__ float y_at(const FView &D, int64_t r, int64_t f, int64_t c, float s0,
                                      const float *sw, const FView &b, int has_b) {
    float hv = fv_get(D, r, c), hg = fv_get(D, r, f + c);
    if (sw) hv *= s0 * sw[c], hg *= s0 * sw[f + c];
    if (has_b) hv += fv_get(b, 0, c), hg += fv_get(b, 0, f + c);
    return hv * silu_fast(hg);
}

/* Any D, bias, q rows: the same arithmetic a column at a time, y computed twice (the amax, then
 * the bytes: the same expression, so the same values) */
__global__ void __launch_bounds__(ST)
    k_swiglu_quant_any(FView D, int64_t rows, int64_t f, const float *sx, const float *sw, FView b,
                       int has_b, uint8_t *q, int64_t ldq, float *scale) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float s0 = sw ? sx[r] : 1.f;
        float amax = 0.f;
        for (int64_t c = threadIdx.x; c < f; c += ST)
            amax = fmaxf(amax, fabsf(y_at(D, r, f, c, s0, sw, b, has_b)));
        const float s = fp8::row_scale(fp8::block_reduce<ST, 0>(amax));
        if (threadIdx.x == 0) scale[r] = s;
        const float inv = __frcp_rn(s);
        for (int64_t c = threadIdx.x; c < f; c += ST)
            q[r * ldq + c] = fp8::to_e4m3(y_at(D, r, f, c, s0, sw, b, has_b) * inv);
    }
}

int row_grid(int64_t rows) {
    return (int)(rows < 65536 ? rows : 65536);
}

/* the row kernel over `rows` rows of a raw bf16 product D (ldd = 2f) with the fp8 scales */
int swiglu_quant_raw(vdn_dev *d, const char *OP, const bf16 *D, int64_t rows, int64_t f,
                     const float *sx, const float *sw, const vdn_tensor *b, uint8_t *q, int64_t ldq,
                     float *scale) {
    const float *bias = NULL;
    if (b && !(bias = (const float *)op_cuda_packed(d, b, VDN_DT_F32, SCR_W0))) return -1;
    const int64_t V = (f + 8 * ST - 1) / (8 * ST);
    const int vec = ((uintptr_t)q & 7) == 0 && ldq % 8 == 0 && aligned16(sw) &&
                    (!bias || aligned16(bias)) && (V == 1 || V == 2 || V == 4);
    const int g = row_grid(rows);
    cudaStream_t st = cdev(d)->st;
    if (vec && V == 1)
        k_swiglu_quant<1><<<g, ST, 0, st>>>(D, 2 * f, rows, f, sx, sw, bias, q, ldq, scale);
    else if (vec && V == 2)
        k_swiglu_quant<2><<<g, ST, 0, st>>>(D, 2 * f, rows, f, sx, sw, bias, q, ldq, scale);
    else if (vec && V == 4)
        k_swiglu_quant<4><<<g, ST, 0, st>>>(D, 2 * f, rows, f, sx, sw, bias, q, ldq, scale);
    else {
        const FView Dv = {(char *)D, VDN_DT_BF16, 2 * f}, bv = b ? fview(b) : FView{};
        k_swiglu_quant_any<<<g, ST, 0, st>>>(Dv, rows, f, sx, sw, bv, b != NULL, q, ldq, scale);
    }
    OPL();
    return 0;
}

} // namespace

int op_cuda_rmsnorm_quant(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x,
                          const vdn_tensor *w, double eps) {
    vdn_dev *d = q->dev;
    const char *OP = "rmsnorm_quant";
    if (op_cuda_enter(d, OP, {x, w})) return -1;
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    if (rows == 0 || cols == 0) return 0;
    const int x_rows = is_bf16(x) ? x->ld % 8 == 0 : is_f32(x) && x->ld % 4 == 0;
    const int vec = x_rows && aligned16(x->data) && cols % 8 == 0 &&
                    ((uintptr_t)q->data & 7) == 0 && q->ld % 8 == 0;
    const int V = vec ? pick_v(cols / 8) : 0;
    const FView xv = fview(x), wv = w ? fview(w) : FView{};
    uint8_t *qp = (uint8_t *)q->data;
    float *sp = (float *)scale->data;
    const int g = row_grid(rows), hw = w != NULL;
    const float e = (float)eps;
    cudaStream_t st = cdev(d)->st;
    switch (V) {
    case 1:
        launch_rmsnorm_quant<1>(g, st, xv, rows, cols, wv, hw, e, qp, q->ld, sp);
        break;
    case 2:
        launch_rmsnorm_quant<2>(g, st, xv, rows, cols, wv, hw, e, qp, q->ld, sp);
        break;
    case 4:
        launch_rmsnorm_quant<4>(g, st, xv, rows, cols, wv, hw, e, qp, q->ld, sp);
        break;
    case 8:
        launch_rmsnorm_quant<8>(g, st, xv, rows, cols, wv, hw, e, qp, q->ld, sp);
        break;
    default:
        launch_rmsnorm_quant<0>(g, st, xv, rows, cols, wv, hw, e, qp, q->ld, sp);
        break;
    }
    OPL();
    return 0;
}

int op_cuda_linear_swiglu_quant(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x,
                                const vdn_tensor *w, const vdn_tensor *b) {
    vdn_dev *d = q->dev;
    const char *OP = "linear_swiglu_quant";
    if (op_cuda_enter(d, OP, {x->dtype == VDN_DT_F8_E4M3 ? NULL : x, b})) return -1;
    const int64_t rows = vdn_tensor_rows(x), k = vdn_tensor_cols(x), n = vdn_tensor_rows(w),
                  f = n / 2;
    if (rows == 0 || f == 0) return 0;
    if (rows > INT32_MAX || n > INT32_MAX || k > INT32_MAX || x->ld > INT32_MAX ||
        w->ld > INT32_MAX)
        return vdn_dev_fail(d, "op %s: dimensions past 2^31 are not supported on cuda", OP);
    Fp8Rows xr;
    if (op_cuda_fp8_x(d, OP, x, &xr)) return -1;
    uint8_t *qp = (uint8_t *)q->data;
    float *sp = (float *)scale->data;
    int64_t r0 = 0;
    if (xr.fits && op_cuda_fp8_fits(NULL, w, k, n)) {
        /* equal slabs of at most SLAB_ROWS rows (a multiple of 16: every slab's x8 rows stay
         * 16-byte aligned), each product then its row kernel */
        const int64_t n_slabs = (rows + SLAB_ROWS - 1) / SLAB_ROWS;
        const int64_t slab = ((rows + n_slabs - 1) / n_slabs + 15) / 16 * 16;
        bf16 *D = (bf16 *)op_cuda_scratch(d, SCR_STAGE, (size_t)slab * n * 2);
        if (!D) return -1;
        for (; r0 < rows; r0 += slab) {
            const int64_t m = rows - r0 < slab ? rows - r0 : slab;
            const int rc = vdn_gemm_fp8(cdev(d)->gc, xr.q + r0 * xr.ld, (int)xr.ld, w->data,
                                        (int)w->ld, D, (int)n, (int)m, (int)n, (int)k, vst(d));
            if (rc < 0)
                return vdn_dev_fault(d, VDN_DEV_FAULT_DEVICE,
                                     "op %s (%s): vdn_gemm_fp8 failed (details on stderr)", OP,
                                     d->name);
            if (rc == 1) break; /* no fp8 algorithm for this shape: the fp32 route from r0 */
            if (swiglu_quant_raw(d, OP, D, m, f, xr.scale + r0, w->scale, b, qp + r0 * q->ld, q->ld,
                                 sp + r0))
                return -1;
        }
        if (r0 >= rows) return 0;
    }
    /* the fp32 route for rows [r0, rows): the same e4m3 operands dequantised, SGEMM into float32
     * scratch (scales applied), then the row kernel adds the bias */
    const int64_t m = rows - r0;
    float *xf = (float *)op_cuda_scratch(d, SCR_CONV, (size_t)m * k * 4);
    float *wf = (float *)op_cuda_scratch(d, SCR_CONV2, (size_t)n * k * 4);
    float *Df = (float *)op_cuda_scratch(d, SCR_STAGE, (size_t)m * n * 4);
    if (!xf || !wf || !Df ||
        op_cuda_dequant_rows(d, OP, xr.q + r0 * xr.ld, xr.ld, xr.scale + r0, m, k, xf) ||
        op_cuda_dequant_rows(d, OP, (const uint8_t *)w->data, w->ld, w->scale, n, k, wf))
        return -1;
    vdn_tensor Dt = {};
    Dt.dev = d, Dt.dtype = VDN_DT_F32, Dt.ndim = 2, Dt.ne[0] = m, Dt.ne[1] = n;
    Dt.ne[2] = Dt.ne[3] = 1, Dt.ld = n, Dt.data = Df;
    if (op_cuda_linear_f32(&Dt, xf, k, wf, k, k, NULL, VDN_ACT_NONE, 0)) return -1;
    const FView Dv = {(char *)Df, VDN_DT_F32, n}, bv = b ? fview(b) : FView{};
    k_swiglu_quant_any<<<row_grid(m), ST, 0, cdev(d)->st>>>(Dv, m, f, NULL, NULL, bv, b != NULL,
                                                            qp + r0 * q->ld, q->ld, sp + r0);
    OPL();
    return 0;
}
