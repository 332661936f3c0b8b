/* The decoders' convolutions (engine/op_conv.h) on CUDA, float32 accumulation, any float dtype
 * through FView, following the CPU oracle's formulas (engine/op_cpu_conv.c) term for term.
 * conv1d is an implicit GEMM (output channels x positions, reduced over cin K) tiled through
 * shared memory; each output still sums its terms in the oracle's order (bias, then i, then k).
 * The transposed convolution and the activation are direct, one thread per output element. */
#include "op_cuda.h"
extern "C" {
#include "op_conv.h"
}

namespace {

#define GRID_LOOP(i, n)                                                                            \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

/* y[o, n] = b[o] + sum_{i,k} w[o, i K + k] x[i, n stride + k dilation - pad], as a GEMM of
 * w [cout, cin K] by the gathered x [cin K, lout]: a block owns CT_M x CT_N outputs, each thread
 * 4 x 4 of them (rows ty*4 + a, columns tx + 16 c), reducing CT_K terms per shared-memory stage
 * in ascending r = i K + k (the oracle's order; out-of-range terms are zeros). */
#define CT_M 64
#define CT_N 64
#define CT_K 16
__global__ void __launch_bounds__(256)
    conv1d_k(FView y, FView x, FView w, FView b, int64_t cin, int64_t lin, int64_t cout,
             int64_t lout, int K, int stride, int pad, int dilation) {
    __shared__ float ws[CT_K][CT_M + 1];
    __shared__ float xs[CT_K][CT_N];
    const int64_t o0 = blockIdx.y * (int64_t)CT_M, n0 = blockIdx.x * (int64_t)CT_N;
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int64_t R = cin * K;
    float acc[4][4];
    for (int a = 0; a < 4; a++) {
        const int64_t o = o0 + ty * 4 + a;
        const float bias = b.p && o < cout ? fv_get(b, 0, o) : 0.f;
        for (int c = 0; c < 4; c++)
            acc[a][c] = bias;
    }
    for (int64_t r0 = 0; r0 < R; r0 += CT_K) {
        for (int e = tid; e < CT_K * CT_M; e += 256) { /* consecutive threads: consecutive r */
            const int kk = e % CT_K, m = e / CT_K;
            const int64_t o = o0 + m, r = r0 + kk;
            ws[kk][m] = o < cout && r < R ? fv_get(w, o, r) : 0.f;
        }
        for (int e = tid; e < CT_K * CT_N; e += 256) { /* consecutive threads: consecutive n */
            const int nn = e % CT_N, kk = e / CT_N;
            const int64_t r = r0 + kk, n = n0 + nn;
            float v = 0.f;
            if (r < R && n < lout) {
                const int64_t i = r / K, s = n * stride + (r % K) * dilation - pad;
                if (s >= 0 && s < lin) v = fv_get(x, i, s);
            }
            xs[kk][nn] = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < CT_K; kk++) {
            float wa[4], xb[4];
            for (int a = 0; a < 4; a++)
                wa[a] = ws[kk][ty * 4 + a];
            for (int c = 0; c < 4; c++)
                xb[c] = xs[kk][tx + 16 * c];
            for (int a = 0; a < 4; a++)
                for (int c = 0; c < 4; c++)
                    acc[a][c] += wa[a] * xb[c];
        }
        __syncthreads();
    }
    for (int a = 0; a < 4; a++)
        for (int c = 0; c < 4; c++) {
            const int64_t o = o0 + ty * 4 + a, n = n0 + tx + 16 * c;
            if (o < cout && n < lout) fv_set(y, o, n, acc[a][c]);
        }
}

/* y[o, n] = b[o] + sum over (i, m, k) with n = m stride + k - pad of x[i, m] w[i, o K + k] */
__global__ void conv_transpose1d_k(FView y, FView x, FView w, FView b, int64_t cin, int64_t lin,
                                   int64_t cout, int64_t lout, int K, int stride, int pad) {
    GRID_LOOP(e, cout * lout) {
        const int64_t o = e / lout, n = e % lout;
        float acc = b.p ? fv_get(b, 0, o) : 0.f;
        for (int k = 0; k < K; k++) {
            const int64_t t = n + pad - k; /* = m stride */
            if (t < 0 || t % stride) continue;
            const int64_t m = t / stride;
            if (m >= lin) continue;
            for (int64_t i = 0; i < cin; i++)
                acc += fv_get(x, i, m) * fv_get(w, i, o * K + k);
        }
        fv_set(y, o, n, acc);
    }
}

__device__ __forceinline__ int64_t clampi(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* BigVGAN's anti-aliased SnakeBeta per output (c, n), as op_cpu_conv.c computes it through its
 * intermediate arrays: act[j] for the K down-filter taps, each from up[j + crop_left] =
 * sum of the replicate-padded input times the up filter over the taps that land on it */
__global__ void snake_aa_k(FView y, FView x, FView alpha, FView beta, FView fu, FView fd, int64_t C,
                           int64_t L, int K, int ratio) {
    const int pad = K / ratio - 1;
    const int crop_left = pad * ratio + (K - ratio) / 2;
    const int dpad_left = K / 2 - (K % 2 == 0);
    const int64_t lp = L + 2 * pad, lact = L * ratio;
    GRID_LOOP(e, C * L) {
        const int64_t c = e / L, n = e % L;
        const float a = expf(fv_get(alpha, 0, c)), inv_b = 1.f / (expf(fv_get(beta, 0, c)) + 1e-9f);
        float acc = 0.f;
        for (int k = 0; k < K; k++) {
            const int64_t j = clampi(n * ratio + k - dpad_left, 0, lact - 1);
            const int64_t t = j + crop_left; /* index into the transposed convolution's output */
            float up = 0.f;
            for (int q = 0; q < K; q++) { /* t = m ratio + q */
                const int64_t r = t - q;
                if (r < 0 || r % ratio) continue;
                const int64_t m = r / ratio;
                if (m >= lp) continue;
                up += fv_get(x, c, clampi(m - pad, 0, L - 1)) * fv_get(fu, 0, q);
            }
            /* sin in double: fast-math's sinf loses accuracy away from [-pi, pi] */
            const float u = ratio * up, s = (float)sin((double)(a * u));
            acc += fv_get(fd, 0, k) * (u + inv_b * s * s);
        }
        fv_set(y, c, n, acc);
    }
}

FView opt_view(const vdn_tensor *t) {
    FView v = {t ? (char *)t->data : NULL, t ? (int)t->dtype : VDN_DT_F32, t ? t->ld : 0};
    return v;
}

int conv1d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b, int K,
           int stride, int pad, int dilation) {
    vdn_dev *d = y->dev;
    const char *OP = "conv1d";
    if (op_cuda_enter(d, OP, {y, x, w, b})) return -1;
    const int64_t cout = vdn_tensor_rows(y), lout = vdn_tensor_cols(y);
    if (cout * lout == 0) return 0;
    const dim3 grid((unsigned)((lout + CT_N - 1) / CT_N), (unsigned)((cout + CT_M - 1) / CT_M));
    conv1d_k<<<grid, 256, 0, cdev(d)->st>>>(
        fview(y), fview(x), fview(w), opt_view(b), vdn_tensor_rows(x), vdn_tensor_cols(x), cout,
        lout, K, stride, pad, dilation);
    OPL();
    return 0;
}

int conv_transpose1d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                     int K, int stride, int pad) {
    vdn_dev *d = y->dev;
    const char *OP = "conv_transpose1d";
    if (op_cuda_enter(d, OP, {y, x, w, b})) return -1;
    const int64_t cout = vdn_tensor_rows(y), lout = vdn_tensor_cols(y);
    if (cout * lout == 0) return 0;
    conv_transpose1d_k<<<op_grid(cout * lout), 256, 0, cdev(d)->st>>>(
        fview(y), fview(x), fview(w), opt_view(b), vdn_tensor_rows(x), vdn_tensor_cols(x), cout,
        lout, K, stride, pad);
    OPL();
    return 0;
}

int snake_aa(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *alpha, const vdn_tensor *beta,
             const vdn_tensor *up_filter, const vdn_tensor *down_filter, int ratio) {
    vdn_dev *d = y->dev;
    const char *OP = "snake_aa";
    if (op_cuda_enter(d, OP, {y, x, alpha, beta, up_filter, down_filter})) return -1;
    const int64_t C = vdn_tensor_rows(x), L = vdn_tensor_cols(x);
    if (C * L == 0) return 0;
    snake_aa_k<<<op_grid(C * L), 256, 0, cdev(d)->st>>>(
        fview(y), fview(x), fview(alpha), fview(beta), fview(up_filter), fview(down_filter), C, L,
        (int)vdn_tensor_numel(up_filter), ratio);
    OPL();
    return 0;
}

} // namespace

extern "C" const struct vdn_conv_backend op_cuda_conv = {conv1d, conv_transpose1d, snake_aa};
