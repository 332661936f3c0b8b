/* The decoders' convolutions (engine/op_conv.h) on CUDA, any float dtype through FView, a batch
 * of signals per call (grid z).
 *
 * conv1d and conv_transpose1d are implicit GEMMs on the tensor cores: mma.sync m16n8k8 on TF32
 * operands with float32 accumulation. By default each operand v is split into two TF32 numbers,
 * big = tf32(v) and small = tf32(v - big), and a product takes three MMAs (small x big,
 * big x small, big x big; small x small, 2^-22 relative, is dropped): float32 accuracy, as the
 * audio decoder's contract asks (the release documents that lower precision makes decodes
 * audibly worse; on the tiny random reference decoder single TF32 moves the waveform by 1.5e-2,
 * the split one by 1e-5, emulated on the CPU). (Plain TF32, one MMA per product, is what the
 * PyTorch decode gets from cuDNN by default; it was a switch here until the house-in-order
 * change: docs/PERF.md.)
 * The transposed convolution is `stride` small convolutions (its polyphase form): output
 * n = q stride + p - pad of phase p sums x[i, q - j] w[i, o K + p + j stride] over (i, j), a GEMM
 * of its own per phase (grid z). With float32 x and 64 or more output channels (every wide
 * BigVGAN conv and transposed conv) these GEMMs run on Hopper's warpgroup MMAs instead
 * (conv_tap_k: wgmma m64n64k8 on TF32, tap-major reductions read straight from one strip, the
 * same split and float32 sums); the other shapes run on mma.sync (conv_mma_k). Stride-1
 * conv1d with at most 32 output channels (the release's last stages) runs in float32 FMAs
 * (conv_direct_k). conv1d's accumulate flag adds the result to y's values in every epilogue.
 *
 * The anti-aliased SnakeBeta is one kernel per tile of outputs: the input strip, the upsampled
 * and activated samples (each computed once) and the down filter all in shared memory (the
 * release's 12 taps at ratio 2: snake2_k, pairs of upsamples from one window). */
#include <stdint.h>

#include <type_traits>

#include "conv_wgmma.cuh"
#include "op_cuda.h"
extern "C" {
#include "op_conv.h"
}

namespace {

/* ---- convolutions: implicit GEMM on TF32 tensor cores ----
 * Y_b[o, col] = bias[o] + sum_r A[o, r] X_b[r, col], per signal b of the batch:
 *   conv1d:    r = i K + k,  A = w[o, r],                  X = x[b cin + i, col stride + k dil -
 * pad], output column n = col; transpose: r = i J + j (J = ceil(K / stride) taps per phase; phase p
 * from grid z), A = w[i, o K + k] for k = p + j stride < K (else 0), X = x[b cin + i, col - j],
 *              output column n = col stride + p - pad.
 * A block owns BM x BN outputs: WARPS_M x WARPS_N warps of (MT x 16) x 32; the reduction runs in
 * stages of CB = 32 terms through shared memory (each value stored as its TF32 parts, split once
 * per block: ConvSmem), the next stage's global loads in registers while the tensor cores work on
 * the current one, three MMAs per product (the split form above).
 * STRIP (conv1d, stride 1, K >= 3 in practice): X's rows are not gathered per tap; the stage's
 * few input channels are loaded once as strips of BN + (K - 1) dil samples and each row reads
 * its tap's window of its channel's strip (strip_fits, below).
 *
 * Each k-step's 8-term sum (its 3 MMAs) goes into a zeroed fragment that is then added to
 * the output's sum with a float32 add. Why: the tensor cores do not round their accumulation to
 * nearest; they truncate (round toward zero, the addends aligned to the largest exponent: Fasi et
 * al. 2021 for V100/A100, Khattak and Mikaitis 2025 for H100), about half an ulp of the
 * accumulator per MMA, always toward zero. Accumulating a whole reduction of length R on the
 * tensor cores (3 MMAs per 8 terms), that bias grows linearly with R where rounding to nearest
 * grows as sqrt(R): emulated on the CPU for random products, relative L2 error 8.6e-6 at R = 1056
 * and 8.7e-5 at R = 10752 (float32 FMAs in order: 5.8e-7 and 1.9e-6); the H200 run of 89f1c00 saw
 * 7.1e-6 on its R = 1056 op case and 15x the float32 error on the reference audio decode. With
 * the truncation confined to 8 terms and the sum rounded to nearest: 2.3e-7 and 6.5e-7 (emulated),
 * below float32 FMAs in order. (A fragment per stage and a second accumulator set would truncate
 * less often but spills registers at this tile size.) */
constexpr int CB = 32;        /* reduction terms per stage */
constexpr int STRIP_CAP = 16; /* strip tiles: at most 16 BN strip samples per stage */

struct ConvArgs {
    FView y, x, w, b;
    int64_t cin, lin, cout, lout;
    int64_t ncols; /* GEMM columns: lout, or the phase length for the transpose */
    int K, stride, pad, dil, J, phases;
    int sw, nch, swp; /* strip tiles: a channel's samples, channels and pitch (words) per stage */
    /* split reduction: grid z = (signal x phase) x ksplit, part kp sums rows kp rchunk ..
     * (kp + 1) rchunk - 1 into part[(kp Z + zs) cout + o][col] (no bias; zs the grid's signal x
     * phase, Z their count), conv_ksum_k adds them */
    int ksplit;
    int64_t rchunk;
    float *part;
    /* conv_tap_k's weights, split into TF32 parts and laid out per stage by wtap_k */
    const uint32_t *wsplit;
    int64_t nstages;
    int64_t cpp; /* conv_tap_k's split reduction: TC-channel chunks per part */
    int accum;   /* conv1d's accumulate flag: y = y + (sum + bias) (op_conv.h) */
};

/* an output value v (the float32 sum plus bias) into y, or added to y's value (accumulate) */
__device__ __forceinline__ void put_out(const ConvArgs &g, int64_t r, int64_t c, float v) {
    fv_set(g.y, r, c, g.accum ? __fadd_rn(fv_get(g.y, r, c), v) : v);
}

/* a block's sum v for output channel o, GEMM column c (output position n) of signal b: with a
 * split reduction into part kp of grid signal zs (conv_ksum_k adds the parts and the bias), else
 * plus the bias into y */
__device__ __forceinline__ void put_sum(const ConvArgs &g, int kp, int zs, int b, int64_t o,
                                        int64_t c, int64_t n, float v, float bias) {
    if (g.ksplit > 1)
        g.part[((kp * (int64_t)(gridDim.z / g.ksplit) + zs) * g.cout + o) * g.ncols + c] = v;
    else
        put_out(g, b * g.cout + o, n, v + bias);
}

__device__ __forceinline__ uint32_t to_tf32(float v) {
    uint32_t u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(v));
    return u;
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* c = a b, from a zero sum (no zeroed registers per 8-term step: C is the zero register) */
__device__ __forceinline__ void mma_tf32_first(float (&c)[4], const uint32_t (&a)[4],
                                               const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
                 : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.f));
}

/* an operand element, float32 (F32: both x and w are, no dtype test per element) or any FView */
template <bool F32> __device__ __forceinline__ float ld_el(const FView &v, int64_t r, int64_t c) {
    if (F32) return ((const float *)v.p)[r * v.ld + c];
    return fv_get(v, r, c);
}

/* Shared-memory layout of a stage: element (row, k) of A and (k, col) of X as W = 2 words, the
 * TF32 big part then the small one, so a fragment element is one 64-bit load and each value is
 * split once per block (when it enters shared memory) instead of once per warp that reads it.
 * Row pitches are 8 words mod 32: a warp's fragment loads hit every bank once per 16-lane
 * phase. */
template <int BM, int BN> struct ConvSmem {
    static constexpr int W = 2;
    static constexpr int PA = CB * W + 8, PX = BN * W + 8;
    static constexpr size_t bytes = sizeof(uint32_t) * (size_t)(BM * PA + CB * PX);
};

template <int WARPS_M, int WARPS_N, int MT, int MINB, bool TR, bool F32, bool STRIP>
__global__ void __launch_bounds__(WARPS_M *WARPS_N * 32, MINB) conv_mma_k(ConvArgs g) {
    constexpr int CTHREADS = WARPS_M * WARPS_N * 32, BM = WARPS_M * MT * 16, BN = WARPS_N * 32;
    constexpr int A_PER = BM * CB / CTHREADS, X_PER = CB * BN / CTHREADS;
    constexpr int X_ROW_STEP = CTHREADS / BN; /* a thread's X rows are this far apart */
    static_assert(CTHREADS % BN == 0 && (BM * CB) % CTHREADS == 0, "tile shape");
    using SM = ConvSmem<BM, BN>;
    constexpr int W = SM::W, PA = SM::PA, PX = SM::PX;
    static_assert(!(STRIP && TR), "strip tiles: conv1d only");
    constexpr int SPT = STRIP ? BN * STRIP_CAP / CTHREADS : 1; /* strip elements per thread */
    extern __shared__ uint2
        conv_smem[]; /* uint2: the 64-bit fragment loads need 8-byte alignment */
    uint32_t *As = (uint32_t *)conv_smem, *Xs = As + BM * PA;
    int *tab = (int *)(Xs + (g.nch + 1) * g.swp); /* STRIP: a stage row's (channel, tap) offset */

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int64_t col0 = blockIdx.x * (int64_t)BN, o0 = blockIdx.y * (int64_t)BM;
    const int zs = blockIdx.z / g.ksplit, kp = blockIdx.z % g.ksplit;
    const int b = TR ? zs / g.phases : zs, p = TR ? zs % g.phases : 0;
    const int per = TR ? g.J : g.K; /* reduction terms per input channel */
    /* this block's rows rb .. R - 1 (all of them unless the reduction is split) */
    const int64_t rb = kp * g.rchunk, R = min(g.cin * per, rb + g.rchunk), xrow0 = b * g.cin;

    /* this thread's X elements: column xc, rows xr0 + X_ROW_STEP t of each stage; a row's
     * (i, tap) packed as i << 16 | tap (taps < 2^16 and channels < 2^15: the launcher checks),
     * one counter for the thread's first row (advanced by CB per stage) from which the load walks
     * to the others: no divisions in the loop, and one register instead of X_PER */
    const int xc = tid % BN, xr0 = tid / BN;
    const int64_t col = col0 + xc;
    int xik0 = (int)((rb + xr0) / per) << 16 | (int)((rb + xr0) % per);
    const int step = (CB / per) << 16 | (CB % per), carry = (1 << 16) - per;
    const int rstep = (X_ROW_STEP / per) << 16 | (X_ROW_STEP % per);

    /* STRIP: this thread's strip elements t (channel << 16 | sample, or -1) at sidx[t CTHREADS +
     * tid], fixed for the block (shared memory: registers are the kernel's limit) */
    int *sidx = tab + CB;
    if (STRIP)
        for (int t = 0; t < SPT; t++) {
            const int e = tid + CTHREADS * t;
            sidx[e] = e < g.nch * g.sw ? (e / g.sw) << 16 | (e % g.sw) : -1;
        }

    float ra[A_PER], rx[STRIP ? SPT : X_PER];
    auto load = [&](int64_t r0) {
        for (int t = 0; t < A_PER; t++) { /* consecutive threads: consecutive r */
            const int e = tid + CTHREADS * t, m = e / CB, kk = e % CB;
            const int64_t o = o0 + m, r = r0 + kk;
            float v = 0.f;
            if (o < g.cout && r < R) {
                if (!TR) {
                    v = ld_el<F32>(g.w, o, r);
                } else {
                    const int64_t i = r / g.J;
                    const int k = p + (int)(r % g.J) * g.stride;
                    if (k < g.K) v = ld_el<F32>(g.w, i, o * g.K + k);
                }
            }
            ra[t] = v;
        }
        if constexpr (STRIP) { /* the stage's channels from r0 / K on, samples col0 - pad + u */
            const int ilo = (int)(r0 / g.K);
            const int64_t s0 = col0 - g.pad;
            for (int t = 0; t < SPT; t++) {
                float v = 0.f;
                const int si = sidx[tid + CTHREADS * t], ch = ilo + (si >> 16);
                const int64_t s = s0 + (si & 0xffff);
                if (si >= 0 && ch < g.cin && s >= 0 && s < g.lin)
                    v = ld_el<F32>(g.x, xrow0 + ch, s);
                rx[t] = v;
            }
        } else {
            int ik = xik0;
            for (int t = 0; t < X_PER; t++) { /* consecutive threads: consecutive columns */
                const int64_t r = r0 + xr0 + X_ROW_STEP * t;
                float v = 0.f;
                const int i = ik >> 16, k = ik & 0xffff;
                if (r < R && col < g.ncols) {
                    const int64_t s = TR ? col - k : col * g.stride + (int64_t)k * g.dil - g.pad;
                    if (s >= 0 && s < g.lin) v = ld_el<F32>(g.x, xrow0 + i, s);
                }
                rx[t] = v;
                ik += rstep; /* to row r + X_ROW_STEP */
                if ((ik & 0xffff) >= per) ik += carry;
            }
            xik0 += step; /* to the next stage's first row, r + CB */
            if ((xik0 & 0xffff) >= per) xik0 += carry;
        }
    };
    /* v as TF32 big + small (the rest) at word w of shared memory */
    auto put = [&](uint32_t *dst, float v) {
        const uint32_t big = to_tf32(v);
        *(uint2 *)dst = make_uint2(big, to_tf32(v - __uint_as_float(big)));
    };
    auto store = [&](int64_t r0) {
#pragma unroll
        for (int t = 0; t < A_PER; t++) {
            const int e = tid + CTHREADS * t;
            put(As + (e / CB) * PA + (e % CB) * W, ra[t]);
        }
        if constexpr (STRIP) {
#pragma unroll
            for (int t = 0; t < SPT; t++) {
                const int si = sidx[tid + CTHREADS * t];
                if (si >= 0) put(Xs + (si >> 16) * g.swp + (si & 0xffff) * W, rx[t]);
            }
            /* row r = i K + k of the stage reads channel i's strip from tap k: (i - ilo) pitches
             * plus k dil samples; rows past R read the zero row (A is zero there too) */
            if (tid < CB) {
                const int r = (int)r0 + tid, ilo = (int)(r0 / g.K);
                tab[tid] = r < R ? (r / g.K - ilo) * g.swp + (r % g.K) * g.dil * W : g.nch * g.swp;
            }
        } else {
#pragma unroll
            for (int t = 0; t < X_PER; t++)
                put(Xs + (xr0 + X_ROW_STEP * t) * PX + xc * W, rx[t]);
        }
    };
    /* fragment element: big and small from shared memory */
    auto get = [&](const uint32_t *src, uint32_t &big, uint32_t &small) {
        const uint2 v = *(const uint2 *)src;
        big = v.x, small = v.y;
    };

    const int wm = warp % WARPS_M, wn = warp / WARPS_M, gq = lane / 4, tq = lane % 4;
    float acc[MT][4][4] = {}; /* the sum, in float32 adds of 8-term MMA sums (why: above) */
    if (STRIP)                /* the zero row after the strip's channels */
        for (int u = tid; u < g.sw * W; u += CTHREADS)
            Xs[g.nch * g.swp + u] = 0;
    load(rb);
    store(rb);
    __syncthreads();
    for (int64_t r0 = rb; r0 < R; r0 += CB) {
        if (r0 + CB < R) load(r0 + CB); /* in flight during the products below */
#pragma unroll
        for (int ks = 0; ks < CB; ks += 8) {
            uint32_t af[MT][4], bf[4][2], as[MT][4], bs[4][2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                const uint32_t *a = As + ((wm * MT + mt) * 16 + gq) * PA + (ks + tq) * W;
                get(a, af[mt][0], as[mt][0]);
                get(a + 8 * PA, af[mt][1], as[mt][1]);
                get(a + 4 * W, af[mt][2], as[mt][2]);
                get(a + 8 * PA + 4 * W, af[mt][3], as[mt][3]);
            }
            const int x0 = STRIP ? tab[ks + tq] : (ks + tq) * PX,
                      x1 = STRIP ? tab[ks + tq + 4] : (ks + tq + 4) * PX;
#pragma unroll
            for (int nt = 0; nt < 4; nt++) {
                const uint32_t *x = Xs + (wn * 32 + nt * 8 + gq) * W;
                get(x + x0, bf[nt][0], bs[nt][0]);
                get(x + x1, bf[nt][1], bs[nt][1]);
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < 4; nt++) {
                    float t[4]; /* the small terms first: they are the ones to keep exact */
                    mma_tf32_first(t, as[mt], bf[nt]);
                    mma_tf32(t, af[mt], bs[nt]);
                    mma_tf32(t, af[mt], bf[nt]);
#pragma unroll
                    for (int h = 0; h < 4; h++)
                        acc[mt][nt][h] = __fadd_rn(acc[mt][nt][h], t[h]);
                }
        }
        __syncthreads();
        if (r0 + CB < R) {
            store(r0 + CB);
            __syncthreads();
        }
    }
    /* accumulator (mt, nt, h): row gq + 8 (h / 2), column 2 tq + h % 2 of its 16 x 8 tile */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h2 = 0; h2 < 2; h2++) {
            const int64_t o = o0 + (wm * MT + mt) * 16 + gq + 8 * h2;
            if (o >= g.cout) continue;
            const float bias = g.b.p ? fv_get(g.b, 0, o) : 0.f;
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int64_t c = col0 + wn * 32 + nt * 8 + 2 * tq + h;
                    const int64_t n = TR ? c * g.stride + p - g.pad : c;
                    if (c >= g.ncols || n < 0 || n >= g.lout) continue;
                    put_sum(g, kp, zs, b, o, c, n, acc[mt][nt][2 * h2 + h], bias);
                }
        }
}

/* a split reduction's sum: the parts in order, then the bias. Rows: (signal x phase) x cout, n
 * GEMM columns; column c of phase p is output c ostride + p - opad (conv1d: one phase, ostride 1,
 * opad 0), those outside [0, lout) left out, as the GEMM kernels leave them out of the parts */
__global__ void conv_ksum_k(FView y, FView bias, const float *part, int ksplit, int64_t rows,
                            int64_t cout, int64_t n, int phases, int ostride, int opad,
                            int64_t lout, int accum) {
    const int64_t total = rows * n;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = e / n, c = e % n, zs = row / cout, o = row % cout;
        const int64_t out = c * ostride + zs % phases - opad;
        if (out < 0 || out >= lout) continue;
        float v = part[e];
        for (int k = 1; k < ksplit; k++)
            v = __fadd_rn(v, part[k * total + e]);
        v = v + (bias.p ? fv_get(bias, 0, o) : 0.f);
        const int64_t r = zs / phases * cout + o;
        fv_set(y, r, out, accum ? __fadd_rn(fv_get(y, r, out), v) : v);
    }
}

/* conv_tap_k's tiles: 64 output channels x 128 columns, two warpgroups of 64 x 64 */
constexpr int WG_BM = 64, WG_BN = 128, WG_THREADS = 256;

/* Strip tiles (conv1d, stride 1): a stage's 32 reduction rows r = i K + k span at most
 * 31 / K + 2 input channels, and the block's BN columns read samples col0 - pad .. col0 - pad +
 * BN - 1 + (K - 1) dil of each: loaded once into shared memory instead of once per tap (K-fold),
 * the fragments reading channel i's strip from tap k's offset. When that strip fits STRIP_CAP BN
 * samples (K >= 3 at the release's dilations); else the im2col rows. */
int strip_samples(const ConvArgs &g, int bn) {
    return bn + (g.K - 1) * g.dil;
}
int strip_channels(const ConvArgs &g) {
    return (CB - 1) / g.K + 2;
}
bool strip_fits(const ConvArgs &g, int bn) {
    return g.phases == 1 && g.stride == 1 &&
           (int64_t)strip_channels(g) * strip_samples(g, bn) <= (int64_t)STRIP_CAP * bn;
}

/* one tile shape: its dynamic shared memory (over 48 KiB for some: opted in per device, a
 * function attribute being the current device's, when a launch needs more than before) */
template <int WARPS_M, int WARPS_N, int MT, int MINB, bool TR, bool F32, bool STRIP>
cudaError_t launch_tile(vdn_dev *d, ConvArgs g, unsigned z, int dev) {
    constexpr int BM = WARPS_M * MT * 16, BN = WARPS_N * 32;
    using SM = ConvSmem<BM, BN>;
    size_t smem = SM::bytes;
    g.sw = g.nch = g.swp = 0;
    if (STRIP) {
        g.sw = strip_samples(g, BN), g.nch = strip_channels(g);
        g.swp = (g.sw * SM::W + 23) / 32 * 32 + 8; /* >= sw W, 8 mod 32 */
        smem = sizeof(uint32_t) *
               ((size_t)BM * SM::PA + (size_t)(g.nch + 1) * g.swp + CB + (size_t)BN * STRIP_CAP);
    }
    auto k = conv_mma_k<WARPS_M, WARPS_N, MT, MINB, TR, F32, STRIP>;
    static size_t opted[64]; /* per device ordinal below 64 */
    if (dev >= 64 || smem > opted[dev]) {
        const cudaError_t e =
            cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
        if (dev < 64) opted[dev] = smem;
    }
    const dim3 grid((unsigned)((g.ncols + BN - 1) / BN), (unsigned)((g.cout + BM - 1) / BM), z);
    k<<<grid, WARPS_M * WARPS_N * 32, smem, cdev(d)->st>>>(g);
    return cudaSuccess;
}

/* ---- conv1d on wgmma with tap-major reductions (conv_tap_k) ----
 * The previous wgmma kernel (conv_wg_k, until branch audio6) ordered the reduction r = i K + k, so
 * a stage's X tile (rows r, columns n: x[i, n + k dil - pad]) had to be built from the strip row
 * by row (64 KiB of shared-memory traffic per 32-row stage, more than the stage's wgmmas read)
 * between two barriers. Here the reduction runs tap-major within chunks of TC = 16 input channels:
 * stage (c, k) sums channels 16 c .. 16 c + 15 at tap k. Its X tile is then x[16 c + j, n + k dil -
 * pad], the chunk's strip shifted by k dil samples; stored unswizzled as core matrices (4 channels
 * x 8 samples, 128 contiguous bytes; sample s of channel quad q at word 4 (q swp + s)), a wgmma B
 * operand can start at any sample, so every tap's tile is a descriptor into the one strip: nothing
 * is copied per tap. The strip is loaded by cp.async (4-byte copies, zero-filled outside the signal
 * and past cin) into a raw staging area one chunk ahead, and split into its TF32 parts once per
 * chunk; the A tiles (the weights, pre-split by wtap_k in the stage order) stream through a 4-slot
 * cp.async ring, 3 stages ahead. Each 8-term step's 3 products go to one of two temporaries
 * in turn and are added to the float32 sum (why: above conv_mma_k): the same accuracy as
 * conv_mma_k, the terms grouped by tap instead. H200 (audio6 run 2, 5 s stereo): the release's K =
 * 7 and 11 convs at 41-50 TFLOP/s (conv_wg_k: 31-37), the K = 3 ones 18-35 (16-27), the transposed
 * convs 15-20 (mma.sync: 8.7-11.8). */
constexpr int TC = 16, TAP_NA = 4, TAP_SW_MAX = 256;

/* TPS taps a stage (1, or 2: half the stages, barriers and waits a chunk; H200, audio6 run 3:
 * the 5 s stereo decode 20.2 ms against 21.4 with 1 tap a stage in the same call) */
template <int TPS> struct TapSmem {
    static constexpr int W = 2;
    static constexpr int A = WG_BM * TC;     /* one part of one tap's A tile, words */
    static constexpr int SLOT = TPS * W * A; /* a ring slot: a stage's taps, W parts each */
    /* the ring, the strip (W parts of TC channels x swp samples), the raw strip (TC x sw) */
    static size_t bytes(int sw, int swp) {
        return sizeof(uint32_t) * ((size_t)TAP_NA * SLOT + (size_t)W * TC * swp + (size_t)TC * sw);
    }
};

template <bool TR, int TPS>
__global__ void __launch_bounds__(WG_THREADS, 2) conv_tap_k(ConvArgs g) {
    using SM = TapSmem<TPS>;
    constexpr int W = SM::W, A = SM::A, SLOT = SM::SLOT, KS = TC / 8; /* 8-term steps a tap */
    static_assert(KS % 2 == 0, "a stage's last step is in t2");
    extern __shared__ __align__(128) uint32_t tap_smem[];
    uint32_t *ring = tap_smem, *strip = ring + TAP_NA * SLOT;
    float *raw = (float *)(strip + W * TC * g.swp);
    const int sw = g.sw, swp = g.swp, PS = TC * swp; /* a strip part, words */

    const int tid = threadIdx.x, wg = tid / 128;
    const int64_t col0 = blockIdx.x * (int64_t)WG_BN, o0 = blockIdx.y * (int64_t)WG_BM;
    const int zs = blockIdx.z / g.ksplit, kp = blockIdx.z % g.ksplit;
    const int b = TR ? zs / g.phases : zs, p = TR ? zs % g.phases : 0;
    const int per = TR ? g.J : g.K;        /* taps per input channel */
    const int spc = (per + TPS - 1) / TPS; /* stages per chunk: taps TPS h .. */
    const int64_t nchunk = (g.cin + TC - 1) / TC, c0 = kp * g.cpp;
    const int64_t c1 = min(nchunk, c0 + g.cpp), s0 = c0 * spc, s1 = c1 * spc;
    /* the strip's first sample: conv1d's tap k reads sample n + k dil - pad (shift k dil), a
     * phase's tap j sample q - j (shift J - 1 - j) */
    const int64_t xrow0 = b * g.cin, x0 = TR ? col0 - (g.J - 1) : col0 - g.pad;
    const float *xp = (const float *)g.x.p;

    /* stage s's A tiles (its taps' W parts, W 4 KiB each, consecutive in g.wsplit: tile c per
     * + k) into its ring slot */
    auto load_a = [&](int64_t s) {
        const int64_t cs = s / spc;
        const int k0 = (int)(s - cs * spc) * TPS, nt = min(TPS, per - k0);
        const uint32_t *src =
            g.wsplit +
            (((int64_t)p * gridDim.y + blockIdx.y) * g.nstages + cs * per + k0) * (W * A);
        uint32_t *dst = ring + (s % TAP_NA) * SLOT;
#pragma unroll
        for (int t = 0; t < TPS * W * A / 4 / WG_THREADS; t++) {
            if (t >= nt * W * A / 4 / WG_THREADS) break;
            const int e = 4 * (tid + WG_THREADS * t);
            cp16(dst + e, src + e);
        }
    };
    /* chunk c's raw strip: raw[j sw + u] = x[16 c + j, x0 + u] (zero outside) */
    auto load_raw = [&](int64_t c) {
        for (int e = tid; e < TC * sw; e += WG_THREADS) {
            const int j = e / sw, u = e - j * sw;
            const int64_t ch = c * TC + j, smp = x0 + u;
            const bool ok = ch < g.cin && smp >= 0 && smp < g.lin;
            cp4_or_zero(raw + e, ok ? xp + (xrow0 + ch) * g.x.ld + smp : xp, ok);
        }
    };
    /* the raw strip as TF32 parts in the core-matrix layout: a thread takes sample u of a channel
     * quad q (four conflict-free reads, one 16-byte store per part) */
    auto split_strip = [&]() {
        for (int e = tid; e < 4 * sw; e += WG_THREADS) {
            const int q = e / sw, u = e - q * sw;
            uint4 hi, lo;
            uint32_t *h = &hi.x, *l = &lo.x;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float v = raw[(4 * q + j) * sw + u];
                h[j] = to_tf32(v);
                l[j] = to_tf32(v - __uint_as_float(h[j]));
            }
            *(uint4 *)(strip + 4 * (q * swp + u)) = hi;
            *(uint4 *)(strip + PS + 4 * (q * swp + u)) = lo;
        }
    };

    float acc[32], t[32], t2[32];
#pragma unroll
    for (int i = 0; i < 32; i++)
        acc[i] = t[i] = t2[i] = 0.f;
    /* prologue: 3 groups (chunk c0's raw strip with stage s0's A tile), empty ones included, so
     * that stage s's A tile is always group s - s0 */
    if (s0 < s1) load_raw(c0);
#pragma unroll
    for (int j = 0; j < TAP_NA - 1; j++) {
        if (s0 + j < s1) load_a(s0 + j);
        cp_commit();
    }
    /* A: 64 rows x 16 terms, quads of terms 1 KiB apart, 8-row groups 128 bytes; B: the strip's
     * quads swp 16 bytes apart, 8-sample groups 128 bytes */
    const uint64_t da0 = desc_plain(ring, WG_BM * 16, 128),
                   db0 = desc_plain(strip + 4 * wg * 64, (uint32_t)swp * 16, 128);
    int64_t c = c0;
    int h = 0; /* the stage within its chunk */
    for (int64_t s = s0; s < s1; s++) {
        /* committed: 3 + (s - s0) groups. Stage s's A tiles are group s - s0 (2 newer ones may
         * be pending); at a chunk's first stage, its raw strip went with the group of the
         * previous chunk's first stage, spc groups before this stage's */
        cp_wait_upto(h == 0 ? min(TAP_NA - 2, spc - 1) : TAP_NA - 2);
        fence_async_smem(); /* this thread's copies, then the tensor cores' reads */
        __syncthreads();    /* the copies visible; every wgmma of stage s - 1 complete */
        if (h == 0) {
            split_strip(); /* the strip's last readers were the previous chunk's wgmmas */
            fence_async_smem();
            __syncthreads();
        }
        /* stage s + 3 into stage s - 1's slot, and at a chunk's first tap the next chunk's raw
         * strip (its staging area read by split_strip above, before the barrier) */
        if (s + TAP_NA - 1 < s1) load_a(s + TAP_NA - 1);
        if (h == 0 && c + 1 < c1) load_raw(c + 1);
        cp_commit();

        const int k0 = h * TPS;
        const uint64_t da0s = da0 + (uint64_t)((s % TAP_NA) * SLOT * 4 >> 4);
        constexpr uint64_t SA = A * 4 >> 4;
        const uint64_t SB = (uint64_t)(PS * 4 >> 4);
        /* NS steps (a compile-time count: a data-dependent exit between the wgmmas and the adds
         * of their temporaries makes ptxas serialise the wgmmas, C7514) */
        auto steps = [&](auto ns) {
            constexpr int NS = decltype(ns)::value;
#pragma unroll
            for (int q = 0; q < NS; q++) { /* tap k0 + q / KS, 8 terms: quads 2 ks, 2 ks + 1 */
                const int k = k0 + q / KS, ks = q % KS;
                const uint64_t da = da0s + (uint64_t)((q / KS) * W * A * 4 >> 4),
                               db = db0 + (uint64_t)(TR ? g.J - 1 - k : k * g.dil); /* 16 B */
                const uint64_t ka = (uint64_t)(2 * ks * WG_BM), kb = (uint64_t)(2 * ks * swp);
                float(&tc)[32] = q % 2 ? t2 : t;
                wgmma_fence();
                /* the small terms first, as conv_mma_k */
                wg_tf32(tc, da + SA + ka, db + kb, 0);
                wg_tf32(tc, da + ka, db + SB + kb, 1);
                wg_tf32(tc, da + ka, db + kb, 1);
                wgmma_commit();
                if (q > 0) { /* step q - 1's add under step q's products */
                    float(&tp)[32] = q % 2 ? t : t2;
                    wgmma_wait1();
                    fence_regs<32>(tp);
#pragma unroll
                    for (int i = 0; i < 32; i++)
                        acc[i] = __fadd_rn(acc[i], tp[i]);
                }
            }
            wgmma_wait0(); /* the last step (an even count) went to t2 */
            fence_regs<32>(t2);
#pragma unroll
            for (int i = 0; i < 32; i++)
                acc[i] = __fadd_rn(acc[i], t2[i]);
        };
        if (TPS == 1 || k0 + TPS <= per) /* all of the stage's TPS taps */
            steps(std::integral_constant<int, TPS * KS>{});
        else /* a chunk's last stage with one tap */
            steps(std::integral_constant<int, KS>{});
        if (++h == spc) h = 0, c++;
    }
    cp_wait0(); /* no copy outlives the block */
    /* accumulator 4 j + 2 h2 + h: row 16 (warp % 4) + lane / 4 + 8 h2, column 8 j + 2 (lane % 4)
     * + h of the warpgroup's 64 x 64 */
    const int lane = tid % 32, warp = tid / 32, gq = lane / 4, tq = lane % 4;
#pragma unroll
    for (int h2 = 0; h2 < 2; h2++) {
        const int64_t o = o0 + 16 * (warp % 4) + gq + 8 * h2;
        if (o >= g.cout) continue;
        const float bias = g.b.p ? fv_get(g.b, 0, o) : 0.f;
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int64_t col = col0 + wg * 64 + 8 * j + 2 * tq + h;
                const int64_t n = TR ? col * g.stride + p - g.pad : col;
                if (col >= g.ncols || n < 0 || n >= g.lout) continue;
                put_sum(g, kp, zs, b, o, col, n, acc[4 * j + 2 * h2 + h], bias);
            }
    }
}

/* conv_tap_k's weights in its stage order: stage s = c per + k (per = K taps, or J per phase)
 * of phase p's 64-channel block y, tile (p Y + y) nstages + s (Y blocks a phase), holds A[o, i,
 * k] for o = 64 y + m, i = 16 c + j at word (j / 4) 256 + 4 m + j % 4 (the core-matrix layout),
 * W parts (TF32 big, then small), zero past cout and cin. conv1d: A[o, i, k] = w[o, i K + k];
 * transposed: A[o, i, j] = w[i, o K + p + j stride], zero where p + j stride >= K.
 * Written tile by tile: block (c, p Y + y) writes the per consecutive tiles of chunk c (stages
 * c per .. c per + per - 1), one contiguous range of per W A words, a thread per word in order, so
 * every store is coalesced; the gathered reads (a warp: 8 rows x 4 channels of the chunk's 64 x
 * 16 per region) come from L1 for the block's other taps; 32-bit word index (per A < 2^26: per <
 * 2^16, the launcher checks). Until audio7 a thread took a reduction term (coalesced reads, 4-byte
 * stores scattered over per tiles), which dominated the 200-sample convs, whose weights are large
 * against their columns' work (conv_pre's 14.7 M: H200, audio7, 0.441 ms -> 0.331 a call; the
 * first transposed conv 0.263 -> 0.231; the 5 s stereo decode 20.2 -> 19.5 ms). */
template <bool F32, bool TR>
__global__ void wtap_k(FView w, int64_t cout, int cin, int K, int per, int stride, int phases,
                       int64_t nyb, int64_t nstages, uint32_t *dst) {
    constexpr int W = 2, A = WG_BM * TC;
    const int c = (int)blockIdx.x;
    for (int64_t py = blockIdx.y; py < phases * nyb; py += gridDim.y) {
        const int p = (int)(py / nyb);
        const int64_t yb = py % nyb;
        uint32_t *tile0 = dst + (py * nstages + (int64_t)c * per) * (W * A);
        for (int e = threadIdx.x; e < per * A; e += blockDim.x) {
            const int k = e / A, word = e - k * A;
            const int jq = word / (4 * WG_BM), rem = word - jq * (4 * WG_BM);
            const int m = rem / 4, jl = rem % 4, i = c * TC + 4 * jq + jl;
            const int64_t o = yb * WG_BM + m;
            float v = 0.f;
            if (o < cout && i < cin) {
                if (!TR)
                    v = ld_el<F32>(w, o, (int64_t)i * per + k);
                else if (p + k * stride < K)
                    v = ld_el<F32>(w, i, o * K + p + k * stride);
            }
            uint32_t *tile = tile0 + (int64_t)k * (W * A);
            const uint32_t big = to_tf32(v);
            tile[word] = big;
            tile[A + word] = to_tf32(v - __uint_as_float(big));
        }
    }
}

/* conv_tap_k's strip: the tile's 128 columns and the taps' span */
int tap_samples(const ConvArgs &g) {
    return WG_BN + (g.phases > 1 ? g.J - 1 : (g.K - 1) * g.dil);
}
/* conv_tap_k takes stride-1 conv1d and the transposed convs (float32 x) whose strip fits */
bool tap_fits(const ConvArgs &g) {
    return (g.phases > 1 || g.stride == 1) && tap_samples(g) <= TAP_SW_MAX;
}

template <bool F32, bool TR, int TPS>
cudaError_t launch_tap(vdn_dev *d, ConvArgs g, unsigned z, int dev) {
    constexpr int W = 2;
    const int per = TR ? g.J : g.K;
    const int64_t nchunk = (g.cin + TC - 1) / TC, nyb = (g.cout + WG_BM - 1) / WG_BM;
    g.sw = tap_samples(g), g.swp = g.sw, g.nch = TC;
    g.nstages = nchunk * per;
    g.cpp = (nchunk + g.ksplit - 1) / g.ksplit; /* a trailing part may get none: it writes zeros */
    const int64_t words = g.phases * nyb * g.nstages * (W * WG_BM * TC);
    uint32_t *ws = (uint32_t *)op_cuda_scratch(d, SCR_CONV2, sizeof(uint32_t) * (size_t)words);
    if (!ws) return cudaErrorMemoryAllocation;
    const int64_t pys = g.phases * nyb;
    const dim3 wgrid((unsigned)nchunk, (unsigned)(pys < 65535 ? pys : 65535));
    wtap_k<F32, TR><<<wgrid, 256, 0, cdev(d)->st>>>(g.w, g.cout, (int)g.cin, g.K, per, g.stride,
                                                    g.phases, nyb, g.nstages, ws);
    g.wsplit = ws;
    const size_t smem = TapSmem<TPS>::bytes(g.sw, g.swp);
    auto k = conv_tap_k<TR, TPS>;
    static size_t opted[64]; /* per device ordinal below 64, as launch_tile */
    if (dev >= 64 || smem > opted[dev]) {
        cudaError_t e =
            cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     cudaSharedmemCarveoutMaxShared);
        if (e != cudaSuccess) return e;
        if (dev < 64) opted[dev] = smem;
    }
    const dim3 grid((unsigned)((g.ncols + WG_BN - 1) / WG_BN), (unsigned)nyb, z);
    k<<<grid, WG_THREADS, smem, cdev(d)->st>>>(g);
    return cudaSuccess;
}

/* 64 x 128 tiles of float32 x on wgmma (conv_tap_k) where the strip fits; else conv_mma_k's
 * strip tiles (stride-1 conv1d) or im2col rows */
template <int WARPS_M, int WARPS_N, int MT, int MINB, bool TR, bool F32>
cudaError_t launch_any(vdn_dev *d, const ConvArgs &g, unsigned z, int dev) {
    if constexpr (F32 && WARPS_M * MT * 16 == WG_BM && WARPS_N * 32 == WG_BN)
        if (tap_fits(g))
            /* 2 taps a stage where a channel has 3 or more (with 1 or 2 every stage would
             * start a chunk and wait for its strip) */
            return (TR ? g.J : g.K) >= 3 ? launch_tap<F32, TR, 2>(d, g, z, dev)
                                         : launch_tap<F32, TR, 1>(d, g, z, dev);
    if (!TR && strip_fits(g, WARPS_N * 32))
        return launch_tile<WARPS_M, WARPS_N, MT, MINB, false, F32, true>(d, g, z, dev);
    return launch_tile<WARPS_M, WARPS_N, MT, MINB, TR, F32, false>(d, g, z, dev);
}

/* ---- narrow conv1d (at most 32 output channels) in float32 FMAs (conv_direct_k) ----
 * The release's last stages (32, 16 and 8 channels at 40,000 to 160,000 samples, and conv_post's
 * one) do 2 x 8 x 88 to 2 x 32 x 352 flops a sample: on the tensor cores' 64-row (wgmma) or
 * 16-row (mma.sync, 16 x 256 tiles) shapes most rows are idle, and the mma.sync tiles ran the
 * 8-channel convs at about 6 TFLOP/s, ten times their memory time. Here each thread keeps CO
 * outputs x NCOL columns (32 sums) in registers and reads, per (channel, tap), NCOL strip samples
 * and the CO weights (float4 broadcasts): 32 FMAs per 4 to 9 shared-memory loads. Float32 FMAs
 * in (i, k) order: for the reduction lengths taken here (<= 32 x 11 terms) about 3e-7 relative
 * (the split TF32 form's class, docs above conv_tol in test_backend_ops.c). Strips and weights
 * by chunks of DC = 8 input channels. H200 (audio6 run 2, against the mma.sync tiles): [8 x 88]
 * weights at 160,000 samples 0.036 ms (0.082), [16 x 176] at 80,000 0.053 (0.082), [32 x 352]
 * at 40,000 0.118 (0.134). */
constexpr int DC = 8, DIR_THREADS = 256, DIR_SPAN_MAX = 128;

template <int CO> struct DirShape {
    static constexpr int NCOL = 32 / CO, TS = DIR_THREADS * NCOL; /* columns a thread, a block */
};

template <int CO, bool F32>
__global__ void __launch_bounds__(DIR_THREADS) conv_direct_k(ConvArgs g) {
    constexpr int NCOL = DirShape<CO>::NCOL, TS = DirShape<CO>::TS;
    extern __shared__ float4 dir_smem[];
    float *ws = (float *)dir_smem; /* [DC K][CO]: weight (o, i K + k) at (i % DC) K + k, o */
    const int K = g.K, dil = g.dil, sw = TS + (K - 1) * dil;
    float *xs = ws + DC * K * CO; /* [DC][sw] */
    const int tid = threadIdx.x, b = blockIdx.y;
    const int64_t n0 = blockIdx.x * (int64_t)TS, x0 = n0 - g.pad, xrow0 = b * g.cin;
    float acc[NCOL][CO];
#pragma unroll
    for (int c = 0; c < NCOL; c++)
#pragma unroll
        for (int o = 0; o < CO; o++)
            acc[c][o] = 0.f;
    for (int64_t i0 = 0; i0 < g.cin; i0 += DC) {
        const int nc = (int)min((int64_t)DC, g.cin - i0);
        for (int e = tid; e < nc * sw; e += DIR_THREADS) {
            const int j = e / sw, u = e - j * sw;
            const int64_t smp = x0 + u;
            xs[e] = smp >= 0 && smp < g.lin ? ld_el<F32>(g.x, xrow0 + i0 + j, smp) : 0.f;
        }
        for (int e = tid; e < nc * K * CO; e += DIR_THREADS) {
            const int r = e / CO, o = e - r * CO;
            ws[e] = o < g.cout ? ld_el<F32>(g.w, o, i0 * K + r) : 0.f;
        }
        __syncthreads();
        for (int j = 0; j < nc; j++)
            for (int k = 0; k < K; k++) {
                float xv[NCOL];
#pragma unroll
                for (int c = 0; c < NCOL; c++)
                    xv[c] = xs[j * sw + tid + c * DIR_THREADS + k * dil];
                const float4 *w4 = (const float4 *)(ws + (j * K + k) * CO);
#pragma unroll
                for (int o4 = 0; o4 < CO / 4; o4++) {
                    const float4 wv = w4[o4];
#pragma unroll
                    for (int c = 0; c < NCOL; c++) {
                        acc[c][4 * o4] = fmaf(wv.x, xv[c], acc[c][4 * o4]);
                        acc[c][4 * o4 + 1] = fmaf(wv.y, xv[c], acc[c][4 * o4 + 1]);
                        acc[c][4 * o4 + 2] = fmaf(wv.z, xv[c], acc[c][4 * o4 + 2]);
                        acc[c][4 * o4 + 3] = fmaf(wv.w, xv[c], acc[c][4 * o4 + 3]);
                    }
                }
            }
        __syncthreads(); /* xs and ws are rewritten for the next chunk */
    }
#pragma unroll
    for (int o = 0; o < CO; o++) {
        if (o >= g.cout) break;
        const float bias = g.b.p ? fv_get(g.b, 0, o) : 0.f;
#pragma unroll
        for (int c = 0; c < NCOL; c++) {
            const int64_t n = n0 + tid + c * DIR_THREADS;
            if (n < g.lout) put_out(g, b * g.cout + o, n, acc[c][o] + bias);
        }
    }
}

/* conv_direct_k takes stride-1 conv1d with at most 32 output channels, K dil < DIR_SPAN_MAX and
 * a batch under 65536 (grid y) */
bool direct_fits(const ConvArgs &g, int64_t batch) {
    return g.phases == 1 && g.stride == 1 && g.cout <= 32 &&
           (int64_t)(g.K - 1) * g.dil < DIR_SPAN_MAX && batch <= 65535;
}

template <int CO, bool F32>
cudaError_t launch_direct(vdn_dev *d, const ConvArgs &g, int64_t batch, int dev) {
    constexpr int TS = DirShape<CO>::TS;
    const size_t smem =
        sizeof(float) * ((size_t)DC * g.K * CO + (size_t)DC * (TS + (g.K - 1) * g.dil));
    auto k = conv_direct_k<CO, F32>;
    static size_t opted[64]; /* per device ordinal below 64, as launch_tile */
    if (dev >= 64 || smem > opted[dev]) {
        const cudaError_t e =
            cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
        if (dev < 64) opted[dev] = smem;
    }
    const dim3 grid((unsigned)((g.lout + TS - 1) / TS), (unsigned)batch);
    k<<<grid, DIR_THREADS, smem, cdev(d)->st>>>(g);
    return cudaSuccess;
}

/* A tile shape for the output channels: 64 x 128 (8 warps, two blocks an SM) for wide layers,
 * 16 x 256 for the narrow last stages (8 to 32 channels), so a 16-channel layer does not pay for
 * 64. Where 64 x 128 tiles fill the SMs' two block slots badly (the audio decoder's first conv: 64
 * tiles for 264 slots; its 1000-sample stage: 128; the 5000-, 10000- and 20000-sample stages about
 * 320, 1.2 waves; the first transposed conv 160), a convolution splits its reduction into up to 4
 * parts (grid z, each at least 8 stages; split_cost picks the count), summed in order by
 * conv_ksum_k (the float32 sum of each part's float32 sum: no less accurate than one running sum,
 * the same bits every run). (64 x 64 tiles of 4 warps, three blocks an SM, for such grids ran on
 * the H200 in 1b92b82 and were not kept: the first transposed conv took 0.61 ms against 0.49.) */
/* The time of `tiles` tiles whose reduction is split into ks parts, in units of a whole tile's
 * time at two blocks an SM: ceil(tiles ks / 2 sms) waves of 1 / ks each, but a last wave of at most
 * one block an SM at 0.725 (one block alone ran at 69% of two blocks' rate: the audio decoder's
 * [1024x1000] x [512x5632] conv on the H200, 0.666 ms whole against 0.459 ms in 2 parts), and a
 * tenth per split for the parts' traffic (written, read back, summed). */
double split_cost(int64_t tiles, int64_t ks, int sms) {
    const int64_t n = tiles * ks, slots = 2 * (int64_t)sms, last = n % slots;
    const double waves = (double)(n / slots) + (last == 0 ? 0.0 : last <= sms ? 0.725 : 1.0);
    return waves / (double)ks + (ks > 1 ? 0.1 : 0.0);
}

template <bool TR, bool F32> cudaError_t launch_shape(vdn_dev *d, ConvArgs g, unsigned z) {
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    if (!TR && direct_fits(g, z)) /* conv1d: z is the batch */
        return g.cout <= 8    ? launch_direct<8, F32>(d, g, z, dev)
               : g.cout <= 16 ? launch_direct<16, F32>(d, g, z, dev)
                              : launch_direct<32, F32>(d, g, z, dev);
    if (g.cout < 64) return launch_any<1, 8, 1, 2, TR, F32>(d, g, z, dev);
    const int64_t big = (g.ncols + 127) / 128 * ((g.cout + 63) / 64) * z;
    const int64_t stages = (g.cin * (TR ? g.J : g.K) + CB - 1) / CB;
    int64_t ks = 1;
    for (int64_t k = 2; k <= 4 && k <= stages / 8; k++)
        if (split_cost(big, k, sms) < split_cost(big, ks, sms)) ks = k;
    if (ks < 2 || z * ks > 65535) return launch_any<2, 4, 2, 2, TR, F32>(d, g, z, dev);
    g.rchunk = (stages + ks - 1) / ks * CB;
    g.ksplit = (int)((stages * CB + g.rchunk - 1) / g.rchunk);
    const int64_t total = z * g.cout * g.ncols;
    g.part = (float *)op_cuda_scratch(d, SCR_CONV, sizeof(float) * (size_t)(g.ksplit * total));
    if (!g.part) return cudaErrorMemoryAllocation;
    e = launch_any<2, 4, 2, 2, TR, F32>(d, g, z * (unsigned)g.ksplit, dev);
    if (e != cudaSuccess) return e;
    conv_ksum_k<<<op_grid(total), 256, 0, cdev(d)->st>>>(
        g.y, g.b, g.part, g.ksplit, z * g.cout, g.cout, g.ncols, g.phases, TR ? g.stride : 1,
        TR ? g.pad : 0, TR ? g.lout : g.ncols, g.accum);
    return cudaSuccess;
}

template <bool TR> int launch_conv(vdn_dev *d, const char *OP, ConvArgs g, int64_t batch) {
    const int64_t z = batch * g.phases;
    if (z > 65535 || g.cin >= (1 << 15) || (g.phases > 1 ? g.J : g.K) >= (1 << 16))
        return vdn_dev_fail(d,
                            "op %s: batch x phases %lld, %lld input channels, kernel %d (expected "
                            "at most 65535, 32767, 65535)",
                            OP, (long long)z, (long long)g.cin, g.K);
    const bool f32 = g.x.dt == VDN_DT_F32 && g.w.dt == VDN_DT_F32;
    const cudaError_t e = f32 ? launch_shape<TR, true>(d, g, (unsigned)z)
                              : launch_shape<TR, false>(d, g, (unsigned)z);
    OPC(e);
    OPL();
    return 0;
}

/* ---- BigVGAN's anti-aliased SnakeBeta, one block per SN_TILE outputs of one row ----
 * As op_cpu_conv.c through its intermediate arrays: the outputs n0 .. n0 + SN_TILE - 1 read
 * act[j] for j in [jlo, jhi] (clamped: the down filter's replicate padding), act[j] is the
 * snake of up[j + crop_left], and up[t] sums the replicate-padded input x[clamp(m - pad)] times
 * fu[t - m ratio]. Each act value is computed once per tile (a tile's halo: K - 1 of them). */
constexpr int SN_TILE = 512, SN_THREADS = 256;

struct SnakeGeom {
    int K, ratio, pad, crop_left, dpad_left;
    int64_t L, lp, lact;
};

__host__ __device__ inline SnakeGeom snake_geom(int64_t L, int K, int ratio) {
    SnakeGeom s;
    s.K = K;
    s.ratio = ratio;
    s.pad = K / ratio - 1;
    s.crop_left = s.pad * ratio + (K - ratio) / 2;
    s.dpad_left = K / 2 - (K % 2 == 0);
    s.L = L;
    s.lp = L + 2 * s.pad;
    s.lact = L * ratio;
    return s;
}

/* shared floats: both filters, act for a tile, and the input strip it reads */
__host__ __device__ inline int snake_act_max(int K, int ratio) {
    return ratio * (SN_TILE - 1) + K;
}
__host__ __device__ inline int snake_x_max(int K, int ratio) {
    return (snake_act_max(K, ratio) + K - 1) / ratio + 2;
}

/* sin^2 x in float: x = k pi / 2 + r (pi / 2 in three parts, FMAs: r exact to about an ulp for
 * |x| < 2^15), then sin^2 r (k even) or cos^2 r (k odd) from their Taylor polynomials on |r| <=
 * pi / 4 (truncation under 3e-9). Why not sinf: --use_fast_math makes it __sinf, whose error
 * grows away from [-pi, pi]; sin in double costs about 25 double-precision operations a sample,
 * at half the float rate. Measured on the CPU against sin^2 in double over 4e7 arguments up to
 * 32768: at most 1.3e-7 absolute, 3.3 ulp (sin rounded to float, then squared: 8.9e-8, 1.9 ulp).
 * Larger |x| go through double. */
__device__ __forceinline__ float sin_sq(float x) {
    if (fabsf(x) >= 32768.f) {
        const float sn = (float)sin((double)x);
        return sn * sn;
    }
    const float k = rintf(x * 0.636619772f);
    float r = fmaf(-k, 1.57079625e+00f, x);
    r = fmaf(-k, 7.54978942e-08f, r);
    r = fmaf(-k, 5.39030253e-15f, r);
    const float z = r * r;
    float v;
    if (((int)k & 1) == 0) {
        float p = fmaf(z, 2.75573192e-6f, -1.98412698e-4f);
        p = fmaf(z, p, 8.33333333e-3f);
        p = fmaf(z, p, -1.66666667e-1f);
        v = fmaf(r * z, p, r);
    } else {
        float p = fmaf(z, -2.75573192e-7f, 2.48015873e-5f);
        p = fmaf(z, p, -1.38888889e-3f);
        p = fmaf(z, p, 4.16666667e-2f);
        p = fmaf(z, p, -0.5f);
        v = fmaf(z, p, 1.0f);
    }
    return v * v;
}

__device__ __forceinline__ int64_t clampi(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* any taps and ratio (the release's 12 at ratio 2 take snake2_k, below) */
__global__ void __launch_bounds__(SN_THREADS)
    snake_aa_k(FView y, FView x, FView alpha, FView beta, FView fu, FView fd, int64_t rows,
               int64_t C, SnakeGeom s) {
    const int K = s.K, ratio = s.ratio;
    extern __shared__ float sm[];
    float *fus = sm, *fds = sm + K, *act = fds + K, *xs = act + snake_act_max(K, ratio);
    const int tid = threadIdx.x;
    for (int k = tid; k < K; k += SN_THREADS) {
        fus[k] = fv_get(fu, 0, k);
        fds[k] = fv_get(fd, 0, k);
    }
    const int64_t n0 = blockIdx.x * (int64_t)SN_TILE;
    const int64_t nl = s.L - n0 < SN_TILE ? s.L - n0 : SN_TILE;
    const int64_t jlo = clampi(n0 * ratio - s.dpad_left, 0, s.lact - 1);
    const int64_t jhi = clampi((n0 + nl - 1) * ratio + K - 1 - s.dpad_left, 0, s.lact - 1);
    const int64_t mnum = jlo + s.crop_left - (K - 1); /* the lowest m any act[j] reads */
    const int64_t mlo = mnum > 0 ? mnum / ratio : 0, mhi = (jhi + s.crop_left) / ratio;
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        const float a = expf(fv_get(alpha, 0, row % C)),
                    inv_b = 1.f / (expf(fv_get(beta, 0, row % C)) + 1e-9f);
        for (int64_t m = mlo + tid; m <= mhi; m += SN_THREADS)
            xs[m - mlo] = fv_get(x, row, clampi(m - s.pad, 0, s.L - 1));
        __syncthreads();
        for (int64_t j = jlo + tid; j <= jhi; j += SN_THREADS) {
            /* up[t]: taps q = t - m ratio, ascending q (descending m >= 0). One 32-bit division
             * per sample (t < 2^31: the launcher checks) instead of about 7 64-bit ones (each a
             * long software sequence): estimated to be most of the 0.114 ms per call the H200
             * profile gave this kernel (2.56 M outputs); unmeasured */
            const int t = (int)(j + s.crop_left), mt = t / ratio, q0 = t - mt * ratio;
            float up = 0.f;
            for (int q = q0, m = mt; q < K && m >= 0; q += ratio, m--)
                if (m < s.lp) up += xs[m - mlo] * fus[q];
            const float u = ratio * up;
            act[j - jlo] = u + inv_b * sin_sq(a * u);
        }
        __syncthreads();
        for (int64_t i = tid; i < nl; i += SN_THREADS) {
            const int64_t n = n0 + i, j0 = n * ratio - s.dpad_left;
            float acc = 0.f;
            if (j0 >= 0 && j0 + K <= s.lact) { /* no clamping: a plain window of act */
                const float *w = act + (j0 - jlo);
#pragma unroll
                for (int k = 0; k < K; k++)
                    acc += fds[k] * w[k];
            } else { /* the signal's ends: replicate padding, the same taps in the same order */
                for (int k = 0; k < K; k++)
                    acc += fds[k] * act[clampi(j0 + k, 0, s.lact - 1) - jlo];
            }
            fv_set(y, row, n, acc);
        }
        __syncthreads(); /* xs and act are rewritten for the next row */
    }
}

/* ---- the release's SnakeBeta (12 taps, ratio 2): pairs of upsamples from one window ----
 * The same values as snake_aa_k (the same taps in the same order), organised for fewer
 * shared-memory loads: at ratio 2 with an even K every tap of every upsample is inside the padded
 * signal, and the two upsamples t = 2 mt, 2 mt + 1 read the same K / 2 inputs x_pad[mt - i] (the
 * even and the odd taps), so a thread computes 4 act values (2 such pairs) from one window of
 * K / 2 + 1 inputs with the taps in registers, instead of 2 shared-memory loads per tap and
 * sample; and 4 outputs from one window of K + 6 act values (float2 loads) instead of 2 loads per
 * tap and output. A tile of SN2_T outputs per block: 2 SN2_T + K - 2 act values, at most 2 groups
 * of 4 per thread (SN2_T = 1016: (2 SN2_T + 10) / 4 = 510.5 groups for 256 threads). H200
 * (audio6 run 2): 0.025 ms a call at the 2.56 M-output stages (snake_aa_k: 0.038), 3.03 ms a 5 s
 * stereo decode (4.49). */
constexpr int SN2_T = 1016, SN2_THREADS = 256, SN2_XM = 2;

template <int KT, bool F32>
__global__ void __launch_bounds__(SN2_THREADS)
    snake2_k(FView y, FView x, FView alpha, FView beta, FView fu, FView fd, int64_t rows, int64_t C,
             int L) {
    constexpr int NUP = KT / 2, PAD = NUP - 1, CROP = 3 * NUP - 3, DPAD = NUP - 1;
    static_assert(KT % 2 == 0 && KT >= 4, "ratio 2, an even number of taps");
    constexpr int NACT = 2 * SN2_T + KT - 2;         /* act values a tile reads */
    constexpr int NX = SN2_T + 2 * NUP + 2 * SN2_XM; /* x_pad[n0 - SN2_XM ..], with margin */
    static_assert(SN2_T % 4 == 0 && (NACT + 3) / 4 <= 2 * SN2_THREADS, "tile shape");
    __shared__ float xs[NX];
    __shared__ __align__(16) float act[(NACT + 3) / 4 * 4];
    float fe[NUP], fo[NUP], fdr[KT];
#pragma unroll
    for (int i = 0; i < NUP; i++)
        fe[i] = fv_get(fu, 0, 2 * i), fo[i] = fv_get(fu, 0, 2 * i + 1);
#pragma unroll
    for (int k = 0; k < KT; k++)
        fdr[k] = fv_get(fd, 0, k);
    const int tid = threadIdx.x, n0 = blockIdx.x * SN2_T, nl = min(SN2_T, L - n0);
    const int jb = 2 * n0 - DPAD, jmax = 2 * L - 1; /* act index i is act[clamp(jb + i)] */
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        const float a = expf(fv_get(alpha, 0, row % C)),
                    inv_b = 1.f / (expf(fv_get(beta, 0, row % C)) + 1e-9f);
        /* xs[u] = x_pad[m] = x[clamp(m - PAD)] for m = n0 - SN2_XM + u */
        for (int u = tid; u < NX; u += SN2_THREADS) {
            const int m = min(max(n0 - SN2_XM + u - PAD, 0), L - 1);
            xs[u] = F32 ? ((const float *)x.p)[row * x.ld + m] : fv_get(x, row, m);
        }
        __syncthreads();
        auto snake = [&](float up) {
            const float u = 2.f * up;
            return u + inv_b * sin_sq(a * u);
        };
        for (int gi = tid; gi < (NACT + 3) / 4; gi += SN2_THREADS) {
            const int i0 = 4 * gi, j0 = jb + i0;
            if (j0 >= 0 && j0 + 3 <= jmax) {
                /* t = j0 + CROP = 2 mt is even: pairs (2 mt, 2 mt + 1), (2 mt + 2, 2 mt + 3) */
                const int mt = (j0 + CROP) >> 1;
                const float *xm = xs + (mt - (n0 - SN2_XM));
                float v[NUP + 1]; /* v[q] = x_pad[mt - NUP + 1 + q] */
#pragma unroll
                for (int q = 0; q <= NUP; q++)
                    v[q] = xm[q - NUP + 1];
#pragma unroll
                for (int p = 0; p < 2; p++) {
                    float ue = 0.f, uo = 0.f; /* taps q0 + 2 i, ascending, as snake_aa_k */
#pragma unroll
                    for (int i = 0; i < NUP; i++) {
                        ue += v[p - i + NUP - 1] * fe[i];
                        uo += v[p - i + NUP - 1] * fo[i];
                    }
                    if (i0 + 2 * p < NACT) act[i0 + 2 * p] = snake(ue);
                    if (i0 + 2 * p + 1 < NACT) act[i0 + 2 * p + 1] = snake(uo);
                }
            } else { /* the signal's ends: act index clamped (the down filter's replicate pad) */
                for (int e = 0; e < 4 && i0 + e < NACT; e++) {
                    const int j = min(max(jb + i0 + e, 0), jmax), t = j + CROP, mt = t >> 1;
                    const float *xm = xs + (mt - (n0 - SN2_XM));
                    float up = 0.f;
#pragma unroll
                    for (int i = 0; i < NUP; i++)
                        up += xm[-i] * ((t & 1) ? fo[i] : fe[i]);
                    act[i0 + e] = snake(up);
                }
            }
        }
        __syncthreads();
        for (int gi = tid; 4 * gi < nl; gi += SN2_THREADS) {
            const int q0 = 4 * gi;
            float w[KT + 6]; /* act[2 q0 ..], 8-byte aligned */
#pragma unroll
            for (int r = 0; r < (KT + 6) / 2; r++) {
                const float2 p2 = *(const float2 *)(act + 2 * q0 + 2 * r);
                w[2 * r] = p2.x, w[2 * r + 1] = p2.y;
            }
#pragma unroll
            for (int o = 0; o < 4; o++) {
                float acc = 0.f;
#pragma unroll
                for (int k = 0; k < KT; k++)
                    acc += fdr[k] * w[2 * o + k];
                if (q0 + o < nl) {
                    if (F32)
                        ((float *)y.p)[row * y.ld + n0 + q0 + o] = acc;
                    else
                        fv_set(y, row, n0 + q0 + o, acc);
                }
            }
        }
        __syncthreads(); /* xs and act are rewritten for the next row */
    }
}

FView opt_view(const vdn_tensor *t) {
    FView v = {t ? (char *)t->data : NULL, t ? (int)t->dtype : VDN_DT_F32, t ? t->ld : 0};
    return v;
}

int conv1d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b, int K,
           int stride, int pad, int dilation, int accumulate) {
    vdn_dev *d = y->dev;
    const char *OP = "conv1d";
    if (op_cuda_enter(d, OP, {y, x, w, b})) return -1;
    ConvArgs g;
    g.y = fview(y), g.x = fview(x), g.w = fview(w), g.b = opt_view(b);
    g.cin = vdn_tensor_cols(w) / K, g.lin = vdn_tensor_cols(x);
    g.cout = vdn_tensor_rows(w), g.lout = vdn_tensor_cols(y), g.ncols = g.lout;
    g.K = K, g.stride = stride, g.pad = pad, g.dil = dilation, g.J = 1, g.phases = 1;
    g.accum = accumulate;
    g.ksplit = 1, g.rchunk = g.cin * K, g.part = NULL, g.wsplit = NULL, g.nstages = 0, g.cpp = 0;
    if (g.cout * g.lout == 0) return 0;
    return launch_conv<false>(d, OP, g, vdn_tensor_rows(x) / g.cin);
}

int conv_transpose1d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                     int K, int stride, int pad) {
    vdn_dev *d = y->dev;
    const char *OP = "conv_transpose1d";
    if (op_cuda_enter(d, OP, {y, x, w, b})) return -1;
    ConvArgs g;
    g.y = fview(y), g.x = fview(x), g.w = fview(w), g.b = opt_view(b);
    g.cin = vdn_tensor_rows(w), g.lin = vdn_tensor_cols(x);
    g.cout = vdn_tensor_cols(w) / K, g.lout = vdn_tensor_cols(y);
    /* phase p's columns q give n = q stride + p - pad; q = 0 .. (lout - 1 + pad) / stride covers
     * every n of every phase (the kernel skips n outside [0, lout)) */
    g.ncols = (g.lout - 1 + pad) / stride + 1;
    g.K = K, g.stride = stride, g.pad = pad, g.dil = 1, g.accum = 0;
    g.J = (K + stride - 1) / stride, g.phases = stride;
    g.ksplit = 1, g.rchunk = g.cin * g.J, g.part = NULL, g.wsplit = NULL, g.nstages = 0, g.cpp = 0;
    if (g.cout * g.lout == 0) return 0;
    return launch_conv<true>(d, OP, g, vdn_tensor_rows(x) / g.cin);
}

int snake_aa(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *alpha, const vdn_tensor *beta,
             const vdn_tensor *up_filter, const vdn_tensor *down_filter, int ratio) {
    vdn_dev *d = y->dev;
    const char *OP = "snake_aa";
    if (op_cuda_enter(d, OP, {y, x, alpha, beta, up_filter, down_filter})) return -1;
    const int64_t rows = vdn_tensor_rows(x), L = vdn_tensor_cols(x);
    if (rows * L == 0) return 0;
    const int K = (int)vdn_tensor_numel(up_filter); /* <= VDN_SNAKE_AA_MAX_TAPS: checked */
    if (L * ratio + 2 * K >= INT32_MAX)
        return vdn_dev_fail(d, "op snake_aa: %lld samples x ratio %d (expected under 2^31)",
                            (long long)L, ratio);
    const SnakeGeom s = snake_geom(L, K, ratio);
    const size_t smem = sizeof(float) * (2 * K + snake_act_max(K, ratio) + snake_x_max(K, ratio));
    if (smem > 48 * 1024)
        return vdn_dev_fail(d,
                            "op snake_aa: ratio %d with %d taps needs %zu bytes of shared memory",
                            ratio, K, smem);
    if (K == 12 && ratio == 2) { /* the release's */
        const dim3 g2((unsigned)((L + SN2_T - 1) / SN2_T), (unsigned)(rows < 65535 ? rows : 65535));
        const bool f32 = x->dtype == VDN_DT_F32 && y->dtype == VDN_DT_F32;
        auto k2 = f32 ? snake2_k<12, true> : snake2_k<12, false>;
        k2<<<g2, SN2_THREADS, 0, cdev(d)->st>>>(fview(y), fview(x), fview(alpha), fview(beta),
                                                fview(up_filter), fview(down_filter), rows,
                                                vdn_tensor_numel(alpha), (int)L);
        OPL();
        return 0;
    }
    const dim3 grid((unsigned)((L + SN_TILE - 1) / SN_TILE),
                    (unsigned)(rows < 65535 ? rows : 65535));
    snake_aa_k<<<grid, SN_THREADS, smem, cdev(d)->st>>>(
        fview(y), fview(x), fview(alpha), fview(beta), fview(up_filter), fview(down_filter), rows,
        vdn_tensor_numel(alpha), s);
    OPL();
    return 0;
}

} // namespace

extern "C" const struct vdn_conv_backend op_cuda_conv = {conv1d, conv_transpose1d, snake_aa,
                                                         op_cuda_conv2d, op_cuda_group_norm};
