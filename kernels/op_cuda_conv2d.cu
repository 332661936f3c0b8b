/* The video VAE encoder's ops of the conv family (engine/core/op_conv.h) on CUDA.
 *
 *   conv2d      im2col into bf16 (the padded window of every output pixel as a row, reflect or
 *               zero padding, the reduction padded to a multiple of 8 with zeros), one cuBLASLt
 *               bf16 GEMM per image with float32 accumulation into a float32 staging matrix
 *               [Cout, pixels] (the weight as the left operand, so the product comes out
 *               channels-major), then one epilogue: y = float32(v + b) (+ y's old value in float32
 *               when accumulating), stored in y's dtype.
 *   group_norm  per (image, group) float64 sums of x and x^2 over blocks of the group (atomics),
 *               then one elementwise pass: (x - mean) rsqrt(var + eps) w + b, rounded to float32,
 *               then SiLU.
 * Correctness first: the bf16 operands cost ~2^-9 relative per product (the encoder's bound is
 * argued in engine/vae/test/test_vae_encoder.c); speed is measured later. */
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
    FView x;    /* the image's rows: x.p already at image b's first channel row */
    bf16 *col;  /* [npix, kp] */
    int64_t kp; /* the padded reduction */
    int cin, H, W, K, stride, top, left, reflect, Wo;
    int64_t npix;
};

__global__ void __launch_bounds__(THREADS) im2col_k(Im2col a) {
    const int64_t total = a.npix * a.kp, kk = (int64_t)a.K * a.K, red = a.cin * kk;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t p = e / a.kp, k = e % a.kp;
        float v = 0.f;
        if (k < red) {
            const int i = (int)(k / kk), r = (int)(k % kk), kh = r / a.K, kw = r % a.K;
            const int oh = (int)(p / a.Wo), ow = (int)(p % a.Wo);
            const int sh = src_index(oh * a.stride + kh - a.top, a.H, a.reflect);
            const int sw = src_index(ow * a.stride + kw - a.left, a.W, a.reflect);
            if (sh >= 0 && sw >= 0) v = fv_get(a.x, i, (int64_t)sh * a.W + sw);
        }
        a.col[e] = __float2bfloat16_rn(v);
    }
}

/* w [rows, cols] (any float dtype, strided) -> bf16 [rows, kp], zeros past cols */
__global__ void __launch_bounds__(THREADS)
    pad_bf16_k(FView w, bf16 *out, int64_t rows, int64_t cols, int64_t kp) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows * kp;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / kp, c = e % kp;
        out[e] = __float2bfloat16_rn(c < cols ? fv_get(w, r, c) : 0.f);
    }
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

/* t[o, p] = sum_k w[o, k] col[p, k] in float32: where cuBLASLt has no algorithm for a shape */
__global__ void __launch_bounds__(THREADS)
    gemm_plain_k(const bf16 *w, const bf16 *col, float *t, int64_t ldt, int64_t cout, int64_t npix,
                 int64_t kp) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < cout * npix;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = e / npix, p = e % npix;
        float acc = 0.f;
        for (int64_t k = 0; k < kp; k++)
            acc += __bfloat162float(w[o * kp + k]) * __bfloat162float(col[p * kp + k]);
        t[o * ldt + p] = acc;
    }
}

FView offset_rows(FView v, int64_t r) {
    const size_t es = v.dt == VDN_DT_F32 ? 4 : 2;
    v.p += (size_t)(r * v.ld) * es;
    return v;
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
    const int64_t npix = (int64_t)Ho * Wo, kp = (red + 7) / 8 * 8, ldt = (npix + 3) / 4 * 4;
    if (npix == 0 || cout == 0) return 0;
    if (kp > INT32_MAX || npix > INT32_MAX || cout > INT32_MAX)
        return vdn_dev_fail(d, "op conv2d: dimensions past 2^31 are not supported on cuda");
    /* the weight as a packed bf16 [cout, kp] */
    const bf16 *wb = (const bf16 *)w->data;
    if (!(is_bf16(w) && red == kp && w->ld == kp && aligned16(w->data))) {
        bf16 *s = (bf16 *)op_cuda_scratch(d, SCR_CONV3, (size_t)(cout * kp) * 2);
        if (!s) return -1;
        pad_bf16_k<<<op_grid(cout * kp), THREADS, 0, cdev(d)->st>>>(fview(w), s, cout, red, kp);
        OPL();
        wb = s;
    }
    bf16 *col = (bf16 *)op_cuda_scratch(d, SCR_CONV, (size_t)(npix * kp) * 2);
    float *t = (float *)op_cuda_scratch(d, SCR_CONV2, (size_t)(cout * ldt) * 4);
    if (!col || !t) return -1;
    for (int64_t img = 0; img < B; img++) {
        Im2col a = {offset_rows(fview(x), img * cin),
                    col,
                    kp,
                    (int)cin,
                    H,
                    W,
                    K,
                    stride,
                    pad[0],
                    pad[2],
                    reflect,
                    Wo,
                    npix};
        im2col_k<<<op_grid(npix * kp), THREADS, 0, cdev(d)->st>>>(a);
        OPL();
        const int rc = vdn_gemm_bf16_f32(cdev(d)->gc, wb, (int)kp, col, (int)kp, t, (int)ldt,
                                         (int)cout, (int)npix, (int)kp, NULL, 0, vst(d));
        if (rc < 0)
            return vdn_dev_fault(d, VDN_DEV_FAULT_DEVICE,
                                 "op conv2d (%s): the bf16 GEMM [%lld x %lld] x [%lld x %lld]^T "
                                 "failed (details on stderr)",
                                 d->name, (long long)cout, (long long)kp, (long long)npix,
                                 (long long)kp);
        if (rc > 0) { /* no cuBLASLt algorithm for the shape: the same sums in a plain kernel */
            gemm_plain_k<<<op_grid(cout * npix), THREADS, 0, cdev(d)->st>>>(wb, col, t, ldt, cout,
                                                                            npix, kp);
            OPL();
        }
        FView bv = {b ? (char *)b->data : NULL, b ? (int)b->dtype : VDN_DT_F32, b ? b->ld : 0};
        conv_epilogue_k<<<op_grid(cout * npix), THREADS, 0, cdev(d)->st>>>(
            offset_rows(fview(y), img * cout), t, ldt, bv, b != NULL, cout, npix, accumulate);
        OPL();
    }
    return 0;
}

/* stats[2 g] += sum x, stats[2 g + 1] += sum x^2 over group g's rows (cpg rows of L columns),
 * blockIdx.x = the group (image-major), blockIdx.y = a slice of its elements */
__global__ void __launch_bounds__(THREADS)
    gn_stats_k(FView x, double *stats, int64_t cpg, int64_t L) {
    const int64_t g = blockIdx.x, n = cpg * L, r0 = g * cpg;
    double s = 0, q = 0;
    for (int64_t e = blockIdx.y * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.y * blockDim.x) {
        const double v = fv_get(x, r0 + e / L, e % L);
        s += v, q += v * v;
    }
    __shared__ double ss[THREADS], sq[THREADS];
    ss[threadIdx.x] = s, sq[threadIdx.x] = q;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k /= 2) {
        if ((int)threadIdx.x < k)
            ss[threadIdx.x] += ss[threadIdx.x + k], sq[threadIdx.x] += sq[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(&stats[2 * g], ss[0]);
        atomicAdd(&stats[2 * g + 1], sq[0]);
    }
}

__global__ void __launch_bounds__(THREADS)
    gn_apply_k(FView y, FView x, FView w, FView b, const double *stats, int64_t rows, int64_t C,
               int64_t cpg, int64_t L, double eps, int silu) {
    const double cnt = (double)(cpg * L);
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows * L;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / L, n = e % L, c = r % C, g = r / cpg;
        const double mean = stats[2 * g] / cnt,
                     var = fmax(stats[2 * g + 1] / cnt - mean * mean, 0.0);
        float v =
            (float)(((double)fv_get(x, r, n) - mean) / sqrt(var + eps) * (double)fv_get(w, 0, c) +
                    (double)fv_get(b, 0, c));
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
    const int64_t cpg = C / groups, ng = rows / cpg;
    if (rows * L == 0) return 0;
    if (ng > 65535)
        return vdn_dev_fail(d, "op group_norm: %lld groups in one call (at most 65535 on cuda)",
                            (long long)ng);
    double *stats = (double *)op_cuda_scratch(d, SCR_GATE, (size_t)(2 * ng) * sizeof(double));
    if (!stats) return -1;
    OPC(cudaMemsetAsync(stats, 0, (size_t)(2 * ng) * sizeof(double), cdev(d)->st));
    int64_t slices = (cpg * L + THREADS * 8 - 1) / (THREADS * 8);
    slices = slices < 1 ? 1 : slices > 1024 ? 1024 : slices;
    gn_stats_k<<<dim3((unsigned)ng, (unsigned)slices), THREADS, 0, cdev(d)->st>>>(fview(x), stats,
                                                                                  cpg, L);
    OPL();
    gn_apply_k<<<op_grid(rows * L), THREADS, 0, cdev(d)->st>>>(
        fview(y), fview(x), fview(w), fview(b), stats, rows, C, cpg, L, eps, act == VDN_ACT_SILU);
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
