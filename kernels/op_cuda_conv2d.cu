/* The video VAE encoder's ops of the conv family (engine/core/op_conv.h) on CUDA.
 *
 *   conv2d      an implicit GEMM on the bf16 tensor cores (mma.sync m16n8k16, float32
 *               accumulation): Y_b[o, p] = b[o] + sum_r A[o, r] X_b[r, p] with no im2col matrix in
 *               memory. A is the weight, packed once per call into bf16 [Cout, Rp] (Rp: the
 *               reduction rounded up to a stage, zeros after it); X_b[r, p] is gathered from the
 *               image while a block loads a stage: the padded input of reduction row r's (input
 *               channel, kernel tap) under output pixel p (reflect or zero padding), rounded to
 *               bf16. Where Cin is a multiple of a stage (every conv of the release but conv_in
 *               and quant_conv) the reduction runs tap-major, r = tap Cin + i, so a stage is one
 *               tap of 32 consecutive channels: each thread finds its pixel's source offset once
 *               per stage and its 16 loads walk down the channels (coalesced along image rows
 *               across the warp); otherwise r = i K K + tap as torch's weight and each element
 *               finds its own. A block owns 128 output channels x 128 pixels of one image (grid
 *               z: the batch), 8 warps of 64 x 32; stages of 32 reduction rows in two shared
 *               buffers: the next stage's weight tile by cp.async and its image values in
 *               registers while the tensor cores work on the current one; ldmatrix fragments
 *               (the X tile stored [r][p], read transposed). The epilogue writes
 *               y = float32(sum + b) (+ y's old value in float32 when accumulating) in y's dtype.
 *   group_norm  no atomics: per (row, 4096-column slice) float64 sums of x and x^2 (a block
 *               each, its own slot), then the elementwise pass: each block sums its group's
 *               slots in a fixed order (the same result in every block), mean and 1 / sqrt(var +
 *               eps) once, then (x - mean) inv w + b in double, rounded to float32, then SiLU.
 * The bf16 operands cost ~2^-9 relative each per product (the encoder's bound is argued in
 * engine/vae/test/test_vae_encoder.c). What this replaced (im2col into bf16 + cublasGemmEx per
 * image, float64 atomics): docs/PERF.md "Keyframe prompts". */
#include <stdint.h>

#include "mma_sync.cuh"
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

/* ---- conv2d ---- */

constexpr int BM = 128, BN = 128, BK = 32; /* block tile: output channels x pixels, a stage */
constexpr int PA = BK + 8; /* A tile row pitch (bf16): 80 bytes, ldmatrix rows on 8 bank quads */
constexpr int PX = BN + 8; /* X tile row pitch: 272 bytes, likewise */
constexpr int XPER = BK * BN / THREADS; /* X elements a thread gathers per stage (16) */
constexpr int XROWS = THREADS / BN;     /* its rows are this far apart (2) */
static_assert(XPER * THREADS == BK * BN && XROWS * BN == THREADS, "X tile shape");

struct Conv2dArgs {
    const bf16 *w; /* packed [cout, rp] */
    int64_t rp;    /* reduction rows, a multiple of BK */
    const char *x; /* image b's channel i at row b cin + i, ldx elements apart */
    int64_t ldx;
    FView y, b;
    int has_b, accumulate;
    int cin, cout, H, W, K, stride, top, left, reflect, Wo, npix, red;
};

/* an image value as bf16 bits: XT 0 float32, 1 bf16, 2 float16 */
template <int XT> __device__ __forceinline__ unsigned short ld_x(const char *p, int64_t i) {
    if (XT == 0) return __bfloat16_as_ushort(__float2bfloat16_rn(((const float *)p)[i]));
    if (XT == 1) return ((const unsigned short *)p)[i];
    return __bfloat16_as_ushort(__float2bfloat16_rn(__half2float(((const __half *)p)[i])));
}

/* TM: tap-major reduction (cin a multiple of BK) */
template <int XT, bool TM> __global__ void __launch_bounds__(THREADS, 2) conv2d_k(Conv2dArgs g) {
    __shared__ __align__(16) bf16 As[2][BM * PA];
    __shared__ __align__(16) unsigned short Xs[2][BK * PX];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3; /* the warp's 64 x 32 of the block's 128 x 128 */
    const int n0 = blockIdx.x * BN, o0 = blockIdx.y * BM, img = blockIdx.z;
    const int KK = g.K * g.K, nst = (int)(g.rp / BK);

    /* this thread's gathered pixel (column xn of the X tile) and its first row */
    const int xn = tid % BN, xj0 = tid / BN, p = n0 + xn;
    const bool pv = p < g.npix;
    const int oh = pv ? p / g.Wo : 0, ow = pv ? p - oh * g.Wo : 0;
    const int ih0 = oh * g.stride - g.top, iw0 = ow * g.stride - g.left;
    const int64_t img_row = (int64_t)img * g.cin;

    unsigned short xr[XPER];
    auto load_x = [&](int s) {
        const int r0 = s * BK;
        if (TM) { /* one tap, channels ci0 .. ci0 + BK - 1 (all < cin) */
            const int tap = r0 / g.cin, ci0 = r0 - tap * g.cin;
            const int kh = tap / g.K, kw = tap - kh * g.K;
            const int ih = src_index(ih0 + kh, g.H, g.reflect);
            const int iw = src_index(iw0 + kw, g.W, g.reflect);
            const bool v = pv && ih >= 0 && iw >= 0;
            const int64_t base = (img_row + ci0 + xj0) * g.ldx + (v ? (int64_t)ih * g.W + iw : 0);
#pragma unroll
            for (int i = 0; i < XPER; i++)
                xr[i] = v ? ld_x<XT>(g.x, base + (int64_t)(XROWS * i) * g.ldx) : 0;
        } else {
#pragma unroll
            for (int i = 0; i < XPER; i++) {
                const int r = r0 + xj0 + XROWS * i;
                unsigned short e = 0;
                if (pv && r < g.red) {
                    const int ci = r / KK, tap = r - ci * KK, kh = tap / g.K, kw = tap - kh * g.K;
                    const int ih = src_index(ih0 + kh, g.H, g.reflect);
                    const int iw = src_index(iw0 + kw, g.W, g.reflect);
                    if (ih >= 0 && iw >= 0)
                        e = ld_x<XT>(g.x, (img_row + ci) * g.ldx + (int64_t)ih * g.W + iw);
                }
                xr[i] = e;
            }
        }
    };
    auto store_x = [&](int buf) {
#pragma unroll
        for (int i = 0; i < XPER; i++)
            Xs[buf][(xj0 + XROWS * i) * PX + xn] = xr[i];
    };
    /* the weight tile: 128 rows of 32 bf16 = 4 chunks of 16 bytes each; rows past cout zeros */
    auto load_a = [&](int s, int buf) {
#pragma unroll
        for (int c = tid; c < BM * BK / 8; c += THREADS) {
            const int row = c / (BK / 8), ch = c % (BK / 8), o = o0 + row;
            const bf16 *src = g.w + (o < g.cout ? (int64_t)o * g.rp + (int64_t)s * BK + ch * 8 : 0);
            cp_async16(&As[buf][row * PA + ch * 8], src, o < g.cout ? 16 : 0);
        }
    };

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

    load_a(0, 0);
    cp_commit();
    load_x(0);
    store_x(0);
    cp_wait<0>();
    __syncthreads();
    for (int s = 0; s < nst; s++) {
        const int cur = s & 1;
        if (s + 1 < nst) { /* in flight while the tensor cores work */
            load_a(s + 1, cur ^ 1);
            cp_commit();
            load_x(s + 1);
        }
        const bf16 *as = As[cur];
        const unsigned short *xs = Xs[cur];
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            unsigned a[4][4];
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
                ldsm_x4(a[mt][0], a[mt][1], a[mt][2], a[mt][3],
                        as + (wm * 64 + mt * 16 + (lane & 15)) * PA + kk * 16 + (lane >> 4) * 8);
#pragma unroll
            for (int nt = 0; nt < 4; nt += 2) {
                unsigned b0, b1, b2, b3;
                ldsm_x4_t(b0, b1, b2, b3,
                          xs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * PX + wn * 32 +
                              (nt + (lane >> 4)) * 8);
#pragma unroll
                for (int mt = 0; mt < 4; mt++) {
                    mma16816(acc[mt][nt], a[mt], b0, b1);
                    mma16816(acc[mt][nt + 1], a[mt], b2, b3);
                }
            }
        }
        if (s + 1 < nst) {
            store_x(cur ^ 1);
            cp_wait<0>();
        }
        __syncthreads();
    }

    /* accumulator (mt, nt, e): output channel row g (+8 for e >= 2), pixel 2 t4 + (e & 1) */
    const int gq = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {
            const int o = o0 + wm * 64 + mt * 16 + gq + hf * 8;
            if (o >= g.cout) continue;
            const float bias = g.has_b ? fv_get(g.b, 0, o) : 0.f;
            const int64_t row = (int64_t)img * g.cout + o;
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int pc = n0 + wn * 32 + nt * 8 + 2 * t4 + e;
                    if (pc >= g.npix) continue;
                    float v = acc[mt][nt][hf * 2 + e];
                    if (g.has_b) v = v + bias;
                    if (g.accumulate) v = fv_get(g.y, row, pc) + v;
                    fv_set(g.y, row, pc, v);
                }
        }
}

/* w [cout, red] (any float dtype, strided, torch's (i, kh, kw) order) -> packed bf16 [cout, rp]:
 * column r = tap cin + i (tap-major) or r = i K K + tap, zeros from red on */
__global__ void __launch_bounds__(THREADS)
    pack_w_k(FView w, bf16 *out, int64_t cout, int64_t rp, int red, int cin, int KK, int tm) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < cout * rp;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = e / rp;
        const int r = (int)(e - o * rp);
        float v = 0.f;
        if (r < red) v = fv_get(w, o, tm ? (r % cin) * KK + r / cin : r);
        out[e] = __float2bfloat16_rn(v);
    }
}

template <int XT> int launch_conv2d(vdn_dev *d, const Conv2dArgs &a, int tm, dim3 grid) {
    const char *OP = "conv2d";
    if (tm)
        conv2d_k<XT, true><<<grid, THREADS, 0, cdev(d)->st>>>(a);
    else
        conv2d_k<XT, false><<<grid, THREADS, 0, cdev(d)->st>>>(a);
    OPL();
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
    const int64_t npix = (int64_t)Ho * Wo;
    if (npix == 0 || cout == 0 || B == 0) return 0;
    if (red > INT32_MAX - BK || npix > INT32_MAX - BN || (int64_t)H * W > INT32_MAX ||
        cout > INT32_MAX - BM)
        return vdn_dev_fail(d, "op conv2d: operands past 2^31 elements are not supported on cuda");
    if (B > 65535 || (cout + BM - 1) / BM > 65535)
        return vdn_dev_fail(d,
                            "op conv2d: %lld images of %lld output channels in one call (at most "
                            "65535 images and 65535 x %d channels on cuda)",
                            (long long)B, (long long)cout, BM);
    const int tm = cin % BK == 0;
    const int64_t rp = (red + BK - 1) / BK * BK;
    bf16 *wp = (bf16 *)op_cuda_scratch(d, SCR_CONV3, (size_t)(cout * rp) * 2);
    if (!wp) return -1;
    pack_w_k<<<op_grid(cout * rp), THREADS, 0, cdev(d)->st>>>(fview(w), wp, cout, rp, (int)red,
                                                              (int)cin, (int)kk, tm);
    OPL();
    Conv2dArgs a;
    a.w = wp, a.rp = rp;
    a.x = (const char *)x->data, a.ldx = x->ld;
    a.y = fview(y);
    a.b = FView{b ? (char *)b->data : NULL, b ? (int)b->dtype : VDN_DT_F32, b ? b->ld : 0};
    a.has_b = b != NULL, a.accumulate = accumulate;
    a.cin = (int)cin, a.cout = (int)cout, a.H = H, a.W = W, a.K = K, a.stride = stride;
    a.top = pad[0], a.left = pad[2], a.reflect = reflect, a.Wo = Wo, a.npix = (int)npix;
    a.red = (int)red;
    const dim3 grid((unsigned)((npix + BN - 1) / BN), (unsigned)((cout + BM - 1) / BM),
                    (unsigned)B);
    if (x->dtype == VDN_DT_F32) return launch_conv2d<0>(d, a, tm, grid);
    if (x->dtype == VDN_DT_BF16) return launch_conv2d<1>(d, a, tm, grid);
    return launch_conv2d<2>(d, a, tm, grid);
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
