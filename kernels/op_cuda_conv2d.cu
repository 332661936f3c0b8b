/* The video VAE encoder's ops of the conv family (engine/core/op_conv.h) on CUDA.
 *
 *   conv2d      im2col into bf16, k-major: row k = (input channel, kh, kw) of the kernel holds that
 *               tap's padded input under every output pixel (reflect or zero padding), so a
 *               warp's loads and stores run along an image row (coalesced); then one cuBLAS
 *               bf16 GEMM per image (cublasGemmEx, float32 accumulation) of the weight [Cout, R]
 *               and those rows [R, pixels] into a float32 staging matrix [Cout, pixels]
 *               (channels-major, as the op's output), then one epilogue:
 *               y = float32(v + b) (+ y's old value in float32 when accumulating), in y's dtype.
 *   group_norm  no atomics: per (row, 4096-column slice) float64 sums of x and x^2 (a block
 *               each, its own slot), then the elementwise pass: each block sums its group's
 *               slots in a fixed order (the same result in every block), mean and 1 / sqrt(var +
 *               eps) once, then (x - mean) inv w + b in double, rounded to float32, then SiLU.
 *               (It replaced float64 atomics per group and per-element 64-bit divisions with a
 *               double division and square root: docs/PERF.md "Keyframe prompts".)
 * The bf16 operands cost ~2^-9 relative each per product (the encoder's bound is argued in
 * engine/vae/test/test_vae_encoder.c). */
#include <cublas_v2.h>
#include <stdint.h>

#include "op_cuda.h"
extern "C" {
#include "op_conv.h"
}

namespace {

constexpr int THREADS = 256;

/* the padded position s of a side of n: its source index, or -1 (a zero pad) */
__device__ __forceinline__ int src_index(int s, int n, int reflect) {
    if (s >= 0 && s < n) return s;
    if (!reflect) return -1;
    return s < 0 ? -s : 2 * (n - 1) - s;
}

struct Im2col {
    FView x;     /* the image's rows: x.p already at image b's first channel row */
    bf16 *col;   /* [R, ldc]: row k, column p */
    int64_t ldc; /* >= npix */
    int H, W, K, stride, top, left, reflect, Wo, npix, red;
};

/* blockIdx.y: the reduction row k (slices of it in z when R > 65535), x: output pixels */
__global__ void __launch_bounds__(THREADS) im2col_k(Im2col a) {
    const int k = blockIdx.y + blockIdx.z * 65535, kk = a.K * a.K;
    if (k >= a.red) return; /* the last z slice is partial */
    const int i = k / kk, r = k % kk, kh = r / a.K, kw = r % a.K;
    bf16 *row = a.col + (int64_t)k * a.ldc;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < a.npix; p += gridDim.x * blockDim.x) {
        const int oh = p / a.Wo, ow = p - oh * a.Wo;
        const int sh = src_index(oh * a.stride + kh - a.top, a.H, a.reflect);
        const int sw = src_index(ow * a.stride + kw - a.left, a.W, a.reflect);
        row[p] =
            __float2bfloat16_rn(sh >= 0 && sw >= 0 ? fv_get(a.x, i, (int64_t)sh * a.W + sw) : 0.f);
    }
}

/* w [rows, cols] (any float dtype, strided) -> packed bf16 [rows, cols] */
__global__ void __launch_bounds__(THREADS)
    to_bf16_k(FView w, bf16 *out, int64_t rows, int64_t cols) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows * cols;
         e += (int64_t)gridDim.x * blockDim.x)
        out[e] = __float2bfloat16_rn(fv_get(w, e / cols, e % cols));
}

/* y[o, p] = float32(t[o, p] + b[o]) (+ y[o, p] in float32), y's rows at image b's first */
__global__ void __launch_bounds__(THREADS)
    conv_epilogue_k(FView y, const float *t, int64_t ldt, FView b, int has_b, int64_t cout,
                    int64_t npix, int accumulate) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < cout * npix;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = e / npix, p = e % npix;
        float v = t[o * ldt + p];
        if (has_b) v = v + fv_get(b, 0, o);
        if (accumulate) v = fv_get(y, o, p) + v;
        fv_set(y, o, p, v);
    }
}

FView offset_rows(FView v, int64_t r) {
    const size_t es = v.dt == VDN_DT_F32 ? 4 : 2;
    v.p += (size_t)(r * v.ld) * es;
    return v;
}

/* t [cout, ldt] (row-major) = w [cout, red] col [red, ldc]: in cuBLAS's column-major terms
 * t^T (npix x cout) = col^T (npix x red, ld ldc) w^T (red x cout, ld red) */
int gemm(vdn_dev *d, const bf16 *w, const bf16 *col, float *t, int cout, int npix, int red, int ldc,
         int ldt) {
    const char *OP = "conv2d";
    cublasHandle_t h = (cublasHandle_t)cdev(d)->cb;
    const float one = 1.f, zero = 0.f;
    cublasStatus_t s = cublasSetStream(h, cdev(d)->st);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, npix, cout, red, &one, col, CUDA_R_16BF, ldc,
                         w, CUDA_R_16BF, red, &zero, t, CUDA_R_32F, ldt, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return vdn_dev_fault(
            d, op_cuda_cublas_fault_kind((int)s),
            "op %s (%s): cublasGemmEx (pixels %d, out %d, reduction %d): status %d", OP, d->name,
            npix, cout, red, (int)s);
    return 0;
}

int conv2d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b, int H,
           int W, int K, int stride, const int pad[4], int reflect, int accumulate) {
    vdn_dev *d = y->dev;
    const char *OP = "conv2d";
    if (op_cuda_enter(d, OP, {y, x, w, b})) return -1;
    const int64_t kk = (int64_t)K * K, red = vdn_tensor_cols(w), cin = red / kk;
    const int64_t cout = vdn_tensor_rows(w), B = vdn_tensor_rows(x) / cin;
    const int Ho = (H + pad[0] + pad[1] - K) / stride + 1,
              Wo = (W + pad[2] + pad[3] - K) / stride + 1;
    const int64_t npix = (int64_t)Ho * Wo, ld = (npix + 7) / 8 * 8;
    if (npix == 0 || cout == 0) return 0;
    if (red * ld > INT32_MAX || cout * ld > INT32_MAX || (int64_t)H * W > INT32_MAX)
        return vdn_dev_fail(d, "op conv2d: operands past 2^31 elements are not supported on cuda");
    /* the weight as a packed bf16 [cout, red] (the encoder keeps it so) */
    const bf16 *wb = (const bf16 *)w->data;
    if (!(is_bf16(w) && w->ld == red)) {
        bf16 *s = (bf16 *)op_cuda_scratch(d, SCR_CONV3, (size_t)(cout * red) * 2);
        if (!s) return -1;
        to_bf16_k<<<op_grid(cout * red), THREADS, 0, cdev(d)->st>>>(fview(w), s, cout, red);
        OPL();
        wb = s;
    }
    bf16 *col = (bf16 *)op_cuda_scratch(d, SCR_CONV, (size_t)(red * ld) * 2);
    float *t = (float *)op_cuda_scratch(d, SCR_CONV2, (size_t)(cout * ld) * 4);
    if (!col || !t) return -1;
    const unsigned gx =
        (unsigned)((npix + THREADS - 1) / THREADS < 64 ? (npix + THREADS - 1) / THREADS : 64);
    const dim3 grid(gx, (unsigned)(red < 65535 ? red : 65535), (unsigned)((red + 65534) / 65535));
    for (int64_t img = 0; img < B; img++) {
        Im2col a = {offset_rows(fview(x), img * cin),
                    col,
                    ld,
                    H,
                    W,
                    K,
                    stride,
                    pad[0],
                    pad[2],
                    reflect,
                    Wo,
                    (int)npix,
                    (int)red};
        im2col_k<<<grid, THREADS, 0, cdev(d)->st>>>(a);
        OPL();
        if (gemm(d, wb, col, t, (int)cout, (int)npix, (int)red, (int)ld, (int)ld)) return -1;
        FView bv = {b ? (char *)b->data : NULL, b ? (int)b->dtype : VDN_DT_F32, b ? b->ld : 0};
        conv_epilogue_k<<<op_grid(cout * npix), THREADS, 0, cdev(d)->st>>>(
            offset_rows(fview(y), img * cout), t, ld, bv, b != NULL, cout, npix, accumulate);
        OPL();
    }
    return 0;
}

/* ---- group_norm ---- */

constexpr int GN_SLICE = 4096; /* columns per block of either pass */

/* block sum of a double (every thread gets it) */
__device__ __forceinline__ double block_sum(double v, double *sh) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); /* sh may still be read from a previous call */
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    double t = 0;
    for (int i = 0; i < THREADS / 32; i++)
        t += sh[i];
    return t;
}

/* part[(r nsl + s) 2 + {0, 1}] = sum of x, x^2 over row r's slice s (grid x: rows, y: slices) */
__global__ void __launch_bounds__(THREADS) gn_part_k(FView x, double *part, int64_t L, int nsl) {
    __shared__ double sh[THREADS / 32];
    const int64_t r = blockIdx.x, c0 = (int64_t)blockIdx.y * GN_SLICE;
    const int64_t c1 = c0 + GN_SLICE < L ? c0 + GN_SLICE : L;
    double s = 0, q = 0;
    for (int64_t c = c0 + threadIdx.x; c < c1; c += THREADS) {
        const double v = fv_get(x, r, c);
        s += v, q += v * v;
    }
    s = block_sum(s, sh);
    q = block_sum(q, sh);
    if (threadIdx.x == 0) {
        part[(r * nsl + blockIdx.y) * 2] = s;
        part[(r * nsl + blockIdx.y) * 2 + 1] = q;
    }
}

/* row r's slice blockIdx.y: its group's statistics from the cpg rows' slots, then the values */
__global__ void __launch_bounds__(THREADS)
    gn_apply_k(FView y, FView x, FView w, FView b, const double *part, int64_t C, int64_t cpg,
               int64_t L, int nsl, double eps, int silu) {
    __shared__ double sh[THREADS / 32];
    const int64_t r = blockIdx.x, c = r % C, r0 = r - c % cpg; /* the group's first row */
    double s = 0, q = 0;
    for (int64_t i = threadIdx.x; i < cpg * nsl; i += THREADS) {
        s += part[(r0 * nsl + i) * 2];
        q += part[(r0 * nsl + i) * 2 + 1];
    }
    s = block_sum(s, sh);
    q = block_sum(q, sh);
    const double cnt = (double)(cpg * L), mean = s / cnt;
    const double var = fmax(q / cnt - mean * mean, 0.0), inv = 1.0 / sqrt(var + eps);
    const double wc = fv_get(w, 0, c), bc = fv_get(b, 0, c);
    const int64_t c0 = (int64_t)blockIdx.y * GN_SLICE;
    const int64_t c1 = c0 + GN_SLICE < L ? c0 + GN_SLICE : L;
    for (int64_t n = c0 + threadIdx.x; n < c1; n += THREADS) {
        float v = (float)(((double)fv_get(x, r, n) - mean) * inv * wc + bc);
        if (silu) v = v / (1.f + expf(-v));
        fv_set(y, r, n, v);
    }
}

int group_norm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
               int groups, double eps, vdn_act act) {
    vdn_dev *d = y->dev;
    const char *OP = "group_norm";
    if (op_cuda_enter(d, OP, {y, x, w, b})) return -1;
    const int64_t C = vdn_tensor_numel(w), rows = vdn_tensor_rows(x), L = vdn_tensor_cols(x);
    const int64_t cpg = C / groups;
    if (rows * L == 0) return 0;
    const int64_t nsl = (L + GN_SLICE - 1) / GN_SLICE;
    if (rows > INT32_MAX || nsl > 65535)
        return vdn_dev_fail(d,
                            "op group_norm: %lld rows of %lld columns (at most 2^31 rows of "
                            "65535 x %d columns on cuda)",
                            (long long)rows, (long long)L, GN_SLICE);
    double *part = (double *)op_cuda_scratch(d, SCR_GATE, (size_t)(rows * nsl * 2) * 8);
    if (!part) return -1;
    const dim3 grid((unsigned)rows, (unsigned)nsl);
    gn_part_k<<<grid, THREADS, 0, cdev(d)->st>>>(fview(x), part, L, (int)nsl);
    OPL();
    gn_apply_k<<<grid, THREADS, 0, cdev(d)->st>>>(fview(y), fview(x), fview(w), fview(b), part, C,
                                                  cpg, L, (int)nsl, eps, act == VDN_ACT_SILU);
    OPL();
    return 0;
}

} // namespace

int op_cuda_conv2d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                   int H, int W, int K, int stride, const int pad[4], int reflect, int accumulate) {
    return conv2d(y, x, w, b, H, W, K, stride, pad, reflect, accumulate);
}

int op_cuda_group_norm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                       int groups, double eps, vdn_act act) {
    return group_norm(y, x, w, b, groups, eps, act);
}
