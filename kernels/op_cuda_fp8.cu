/* fp8 (e4m3) of the CUDA backend: row-wise quantisation (vdn_op_quantize_rows) and linear with
 * an fp8 weight.
 *
 * The rule (op.h, fp8.cuh) is the CPU oracle's bit for bit.
 *
 * linear: x is quantised per row into scratch (one block a row, 16-byte loads for bf16 rows),
 * or taken as it is when it arrives quantised (F8_E4M3 with x->scale: rmsnorm_quant's and
 * linear_swiglu_quant's outputs, op_cuda_fp8_fused.cu), then cuBLASLt multiplies e4m3 x e4m3 into
 * bf16 without scales (gemm.cu, vdn_gemm_fp8: its row-wise scale mode is refused on Hopper), into y
 * itself or, to accumulate, into scratch; one vectorised epilogue then applies both row scales, the
 * bias and the accumulation: y = bf16(sx[r] sw[o] bf16(acc) + b[o] (+ y)). The extra bf16 rounding
 * of the raw product is 2^-9 relative, far under the e4m3 operands' own error. A float32 y (16-byte
 * aligned rows) takes the same path with the raw product in scratch and a float32 epilogue. A call
 * the fp8 kernels cannot take (k or out not multiples of 16, unaligned operands, an F16 output, or
 * a shape cuBLASLt has no algorithm for) runs the same quantised operands dequantised to fp32
 * through SGEMM, so every call the front end accepts computes the same function. */
#include "fp8.cuh"

using fp8::from_e4m3;
using fp8::to_e4m3;

namespace {

const int QT = 256; /* threads of the row kernel */

/* One block per row (grid-stride). vec: bf16 rows of 16-byte words (cols % 8 == 0, x and q
 * rows aligned), 8 values per load and 8 bytes per store; else one value at a time. */
__global__ void k_quant_rows(FView x, int64_t rows, int64_t cols, int vec, uint8_t *q, int64_t ldq,
                             float *scale) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const uint4 *xv = (const uint4 *)((const bf16 *)x.p + r * x.ld);
        float amax = 0.f;
        if (vec) {
            for (int64_t c = threadIdx.x; c < cols / 8; c += QT) {
                float f[8];
                unpack8(xv[c], f);
#pragma unroll
                for (int i = 0; i < 8; i++)
                    amax = fmaxf(amax, fabsf(f[i]));
            }
        } else {
            for (int64_t c = threadIdx.x; c < cols; c += QT)
                amax = fmaxf(amax, fabsf(fv_get(x, r, c)));
        }
        amax = fp8::block_reduce<QT, 0>(amax);
        const float s = fp8::row_scale(amax);
        if (threadIdx.x == 0) scale[r] = s;
        uint8_t *qr = q + r * ldq;
        if (vec) { /* the row is re-read from L1/L2 */
            for (int64_t c = threadIdx.x; c < cols / 8; c += QT) {
                float f[8];
                unpack8(xv[c], f);
                ((uint2 *)qr)[c] = fp8::quant8(f, s);
            }
        } else {
            for (int64_t c = threadIdx.x; c < cols; c += QT)
                qr[c] = to_e4m3(__fdiv_rn(fv_get(x, r, c), s));
        }
    }
}

/* out[r, c] = e4m3 value * scale[r] in fp32 (exact but for one rounding at 2^-24) */
__global__ void k_dequant_rows(const uint8_t *q, int64_t ldq, const float *scale, int64_t rows,
                               int64_t cols, float *out, int64_t ldo) {
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / cols, c = i - r * cols;
        out[r * ldo + c] = from_e4m3(q[r * ldq + c]) * scale[r];
    }
}

} // namespace

/* x (any float view) -> q (rows ldq apart) and scale[rows], on the device's stream */
int op_cuda_quant_rows(vdn_dev *d, const char *OP, const vdn_tensor *x, uint8_t *q, int64_t ldq,
                       float *scale) {
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    const int vec = is_bf16(x) && aligned16(x->data) && x->ld % 8 == 0 && cols % 8 == 0 &&
                    ((uintptr_t)q & 7) == 0 && ldq % 8 == 0;
    const int grid = (int)(rows < 65536 ? rows : 65536);
    k_quant_rows<<<grid, QT, 0, cdev(d)->st>>>(fview(x), rows, cols, vec, q, ldq, scale);
    OPL();
    return 0;
}

int op_cuda_dequant_rows(vdn_dev *d, const char *OP, const uint8_t *q, int64_t ldq,
                         const float *scale, int64_t rows, int64_t cols, float *out) {
    k_dequant_rows<<<op_grid(rows * cols), 256, 0, cdev(d)->st>>>(q, ldq, scale, rows, cols, out,
                                                                  cols);
    OPL();
    return 0;
}

int op_cuda_fp8_x(vdn_dev *d, const char *OP, const vdn_tensor *x, Fp8Rows *o) {
    const int64_t rows = vdn_tensor_rows(x), k = vdn_tensor_cols(x);
    if (x->dtype == VDN_DT_F8_E4M3) { /* quantised already: its bytes and scales as they are */
        o->q = (const uint8_t *)x->data, o->ld = x->ld, o->scale = x->scale;
        o->fits = aligned16(x->data) && x->ld % 16 == 0;
        return 0;
    }
    /* x8 rows 16-byte aligned (ld a multiple of 16) for the fp8 kernels */
    const int64_t ldq = (k + 15) / 16 * 16;
    uint8_t *x8 = (uint8_t *)op_cuda_scratch(d, SCR_OUT, (size_t)rows * ldq);
    float *sx = (float *)op_cuda_scratch(d, SCR_GATE, (size_t)rows * 4);
    if (!x8 || !sx || op_cuda_quant_rows(d, OP, x, x8, ldq, sx)) return -1;
    o->q = x8, o->ld = ldq, o->scale = sx, o->fits = 1;
    return 0;
}

namespace {

/* 8 consecutive values of an output row as float32, and back (bf16: one 16-byte word; float32:
 * two) */
__device__ __forceinline__ void load_out8(const bf16 *p, float *f) {
    unpack8(*(const uint4 *)p, f);
}
__device__ __forceinline__ void load_out8(const float *p, float *f) {
    const float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
__device__ __forceinline__ void store_out8(bf16 *p, const float *f) {
    *(uint4 *)p = pack8(f);
}
__device__ __forceinline__ void store_out8(float *p, const float *f) {
    ((float4 *)p)[0] = make_float4(f[0], f[1], f[2], f[3]);
    ((float4 *)p)[1] = make_float4(f[4], f[5], f[6], f[7]);
}

/* y = sx[r] sw[o] D[r, o] + b[o] (+ y[r, o]) in float32, stored as T (bf16 or float32: the video
 * VAE's residual stream accumulates its branches there), 8 columns a thread (n % 8 == 0, 16-byte
 * aligned rows of D and y, sw 16-byte aligned). D may be a bf16 y itself (no accumulate). bias:
 * packed float32 or NULL, vb: 16-byte aligned (vector loads); the scales and bias as vectors keep
 * the kernel at memory speed (per-element loads and dtype switches made it compute-bound). A block
 * a row (grid-stride), threads over its 8-column groups: no division per thread. */
template <typename T>
__global__ void k_fp8_epilogue(const bf16 *D, int64_t ldd, T *y, int64_t ldy, const float *sx,
                               const float *sw, const float *bias, int vb, int64_t rows, int64_t n,
                               int acc) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float s = sx[r];
        const bf16 *Dr = D + r * ldd;
        T *yr = y + r * ldy;
        for (int64_t c = threadIdx.x * 8; c < n; c += blockDim.x * 8) {
            float f[8], prev[8] = {0.f}, cw[8], bb[8] = {0.f};
            unpack8(*(const uint4 *)(Dr + c), f);
            if (acc) load_out8(yr + c, prev);
            fp8::load8f(sw + c, cw);
            if (bias) fp8::load8v(bias + c, vb, bb);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float v = fmaf(s * cw[j], f[j], bb[j]);
                f[j] = acc ? prev[j] + v : v;
            }
            store_out8(yr + c, f);
        }
    }
}

} // namespace

/* whether cuBLASLt's fp8 kernels can take the call as it stands (y NULL: a product into scratch) */
int op_cuda_fp8_fits(const vdn_tensor *y, const vdn_tensor *w, int64_t k, int64_t n) {
    const int y_rows =
        !y || (is_bf16(y) ? y->ld % 8 == 0 && aligned16(y->data)
                          : y->dtype == VDN_DT_F32 && y->ld % 4 == 0 && aligned16(y->data));
    return y_rows && k % 16 == 0 && n % 16 == 0 && aligned16(w->data) && w->ld % 16 == 0 &&
           aligned16(w->scale);
}

int op_cuda_quantize_rows(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x) {
    vdn_dev *d = q->dev;
    const char *OP = "quantize_rows";
    if (op_cuda_enter(d, OP, {x})) return -1;
    if (vdn_tensor_rows(x) == 0 || vdn_tensor_cols(x) == 0) return 0;
    return op_cuda_quant_rows(d, OP, x, (uint8_t *)q->data, q->ld, (float *)scale->data);
}

int op_cuda_linear_fp8(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                       vdn_act act, int accumulate) {
    vdn_dev *d = y->dev;
    const char *OP = "linear";
    const int64_t rows = vdn_tensor_rows(x), k = vdn_tensor_cols(x), n = vdn_tensor_rows(w);
    Fp8Rows xr;
    if (op_cuda_fp8_x(d, OP, x, &xr)) return -1;
    const uint8_t *x8 = xr.q;
    const int64_t ldq = xr.ld;
    const float *sx = xr.scale;
    if (xr.fits && op_cuda_fp8_fits(y, w, k, n)) {
        /* the raw product lands in y itself, or in scratch when y's values are still needed or
         * y is float32 */
        const int y32 = !is_bf16(y);
        bf16 *D = (bf16 *)y->data;
        int64_t ldd = y->ld;
        if (accumulate || y32) {
            if (!(D = (bf16 *)op_cuda_scratch(d, SCR_STAGE, (size_t)rows * n * 2))) return -1;
            ldd = n;
        }
        const int rc = vdn_gemm_fp8(cdev(d)->gc, x8, (int)ldq, w->data, (int)w->ld, D, (int)ldd,
                                    (int)rows, (int)n, (int)k, vst(d));
        if (rc < 0)
            return vdn_dev_fail(d, "op %s (%s): vdn_gemm_fp8 failed (details on stderr)", OP,
                                d->name);
        if (rc == 0) {
            const float *bias = NULL; /* the bias as packed float32 (SCR_W0 unless it is one) */
            if (b && !(bias = (const float *)op_cuda_packed(d, b, VDN_DT_F32, SCR_W0))) return -1;
            const int vb = aligned16(bias);
            const int grid = (int)(rows < 65536 ? rows : 65536); /* a block a row */
            if (y32)
                k_fp8_epilogue<float><<<grid, 256, 0, cdev(d)->st>>>(
                    D, ldd, (float *)y->data, y->ld, sx, w->scale, bias, vb, rows, n, accumulate);
            else
                k_fp8_epilogue<bf16><<<grid, 256, 0, cdev(d)->st>>>(
                    D, ldd, (bf16 *)y->data, y->ld, sx, w->scale, bias, vb, rows, n, accumulate);
            OPL();
            return op_cuda_bias_act(d, OP, fview(y), rows, n, NULL, act);
        }
        /* rc 1: cuBLASLt has no fp8 algorithm for this shape; the fp32 route below */
    }
    float *xf = (float *)op_cuda_scratch(d, SCR_CONV, (size_t)rows * k * 4);
    float *wf = (float *)op_cuda_scratch(d, SCR_CONV2, (size_t)n * k * 4);
    if (!xf || !wf || op_cuda_dequant_rows(d, OP, x8, ldq, sx, rows, k, xf) ||
        op_cuda_dequant_rows(d, OP, (const uint8_t *)w->data, w->ld, w->scale, n, k, wf))
        return -1;
    return op_cuda_linear_f32(y, xf, k, wf, k, k, b, act, accumulate);
}
