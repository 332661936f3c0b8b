/* VDA bidirectional scans and the boundary gather with the alpha bridge (spec 5.3).
 *
 * Scans: P_t = P_{t-1} T_t + J_t (forward) and R_t = R_{t+1} T_t + J_t (reverse). Row i of the
 * next state depends only on row i of the previous one, so a CTA owns 32 rows of one head's
 * state for one direction and walks all frames with no inter-CTA dependency: 56 heads x 4 row
 * blocks x 2 directions = 448 CTAs in one launch, each step a 32x128x128 fp32 product that reads
 * T_t from L2. (This replaces composing 5-frame chunks: it needs no extra products and has the
 * same sequential depth per CTA as the frame count, with each step a few microseconds.)
 * Each thread owns 16 state rows of one column; the rows are read from shared memory four keys
 * per 16-byte broadcast load, and T's next four rows are requested before the current four rows'
 * products (measured 2.78 -> 2.47 ms over the per-key form, bit-identical; docs/PERF.md). */
#include "cuda_util.cuh"

#define D 128
#define RB 32 /* state rows per CTA; each thread owns 16 of them in one column */

__global__ void __launch_bounds__(256, 4) /* 448 CTAs resident at once: <= 64 registers */
    scan_k(const float *T, const float *J, const float *S0, int F, int H, float *P, float *R) {
    __shared__ __align__(16) float X[RB][D];
    const int h = blockIdx.x, rblk = blockIdx.y, dir = blockIdx.z;
    const int j = threadIdx.x & (D - 1), rg = threadIdx.x >> 7;
    const size_t mm = (size_t)D * D;
    for (int r = 0; r < 16; r++) {
        int i = rblk * RB + rg * 16 + r;
        X[rg * 16 + r][j] = S0 ? S0[h * mm + (size_t)i * D + j] : 0.f;
    }
    __syncthreads();
    float *out = dir ? R : P;
    const size_t row0 = (size_t)(rblk * RB + rg * 16) * D + j;
    for (int n = 0; n < F; n++) {
        const int t = dir ? F - 1 - n : n;
        const float *Tt = T + ((size_t)t * H + h) * mm + j,
                    *Jt = J + ((size_t)t * H + h) * mm + row0;
        float acc[16];
#pragma unroll
        for (int r = 0; r < 16; r++)
            acc[r] = Jt[(size_t)r * D];
        float tc[4], tn[4];
#pragma unroll
        for (int e = 0; e < 4; e++)
            tc[e] = __ldg(Tt + (size_t)e * D);
#pragma unroll 2
        for (int k = 0; k < D; k += 4) {
            if (k + 4 < D)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    tn[e] = __ldg(Tt + (size_t)(k + 4 + e) * D);
#pragma unroll
            for (int r = 0; r < 16; r++) {
                const float4 x = *reinterpret_cast<const float4 *>(&X[rg * 16 + r][k]);
                acc[r] += x.x * tc[0];
                acc[r] += x.y * tc[1];
                acc[r] += x.z * tc[2];
                acc[r] += x.w * tc[3];
            }
#pragma unroll
            for (int e = 0; e < 4; e++)
                tc[e] = tn[e];
        }
        __syncthreads();
        float *o = out + ((size_t)t * H + h) * mm;
#pragma unroll
        for (int r = 0; r < 16; r++) {
            X[rg * 16 + r][j] = acc[r];
            o[row0 + (size_t)r * D] = acc[r];
        }
        __syncthreads();
    }
}

extern "C" int vdn_k_vda_scans(const float *T, const float *J, const float *S0, int frames,
                               int heads, float *P, float *R, vdn_stream st) {
    dim3 grid(heads, D / RB, R ? 2 : 1); /* R NULL: the forward scan only */
    scan_k<<<grid, 256, 0, S_(st)>>>(T, J, S0, frames, heads, P, R);
    LAUNCH_CHECK("vda_scans");
    return 0;
}

/* CTA per (frame t, head h): bridge factors per key channel j from log-sums of alpha, then
 * S_lin = left * pl[j] + right * pr[j], written bf16 for the readout GEMM. */
__global__ void gather_k(const float *P, const float *R, const float *S0, const float *alpha,
                         const int *win, int F, int H, bf16 *Slin) {
    __shared__ float pl[D], pr[D];
    const int t = blockIdx.x, h = blockIdx.y;
    const int lo = win[2 * t], hi = win[2 * t + 1];
    if (threadIdx.x < D) {
        const int j = threadIdx.x;
        float ll = 0.f, lr = 0.f;
        for (int u = lo > 0 ? lo : 0; u <= t; u++)
            ll += __logf(fmaxf(alpha[((size_t)u * H + h) * D + j], 1e-12f));
        for (int u = t; u <= (hi < F - 1 ? hi : F - 1); u++)
            lr += __logf(fmaxf(alpha[((size_t)u * H + h) * D + j], 1e-12f));
        pl[j] = __expf(ll), pr[j] = __expf(lr);
    }
    __syncthreads();
    const size_t mm = (size_t)D * D;
    const float *left =
        lo - 1 >= 0 ? P + ((size_t)(lo - 1) * H + h) * mm : (S0 ? S0 + h * mm : NULL);
    const float *right =
        hi + 1 <= F - 1 ? R + ((size_t)(hi + 1) * H + h) * mm : (S0 ? S0 + h * mm : NULL);
    bf16 *o = Slin + ((size_t)t * H + h) * mm;
    for (int e = threadIdx.x; e < D * D; e += blockDim.x) {
        int j = e & (D - 1);
        float v = (left ? left[e] * pl[j] : 0.f) + (right ? right[e] * pr[j] : 0.f);
        o[e] = f2bf(v);
    }
}

extern "C" int vdn_k_vda_gather(const float *P, const float *R, const float *S0, const float *alpha,
                                const int *win, int frames, int heads, void *Slin, vdn_stream st) {
    dim3 grid(frames, heads);
    gather_k<<<grid, 256, 0, S_(st)>>>(P, R, S0, alpha, win, frames, heads, (bf16 *)Slin);
    LAUNCH_CHECK("vda_gather");
    return 0;
}
