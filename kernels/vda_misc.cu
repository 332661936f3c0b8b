/* VDA pieces around the solve: per-frame statistics and the readout as batched cuBLAS GEMMs,
 * the readout epilogue (RMSNorm eps 1e-6, output gate, row layout), frame means and alpha. */
#include <cublas_v2.h>

#include "cuda_util.cuh"

#define D 128

/* FHSD rows are column-major D x S matrices (ld D) to cuBLAS. B^T = kb vt^T, i.e. B row-major
 * [v][k], bf16 inputs (spec 5.3). A = ks ks^T from fp32 ks = sqrt(beta) k~ on TF32 tensor cores
 * (the contract's fp32 GEMM, TF32 allowed at inference). (A = kb kt^T from bf16, the former path,
 * went in the house-in-order change: only a bench row and a test comparison ran it.) */
extern "C" int vdn_k_vda_stats(void *cublas, const float *ks, const void *kb, const void *vt,
                               int nmat, int S, float *A, float *B, vdn_stream st) {
    cublasHandle_t hd = (cublasHandle_t)cublas;
    CUBLAS_CHECK(cublasSetStream(hd, S_(st)));
    float one = 1.f, zero = 0.f;
    long long sin = (long long)S * D, sout = (long long)D * D;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        hd, CUBLAS_OP_N, CUBLAS_OP_T, D, D, S, &one, ks, CUDA_R_32F, D, sin, ks, CUDA_R_32F, D, sin,
        &zero, A, CUDA_R_32F, D, sout, nmat, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        hd, CUBLAS_OP_N, CUBLAS_OP_T, D, D, S, &one, kb, CUDA_R_16BF, D, sin, vt, CUDA_R_16BF, D,
        sin, &zero, B, CUDA_R_32F, D, sout, nmat, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

/* r (col-major D x S per matrix = FHSD rows) = Slin q: Slin row-major is its own transpose to
 * cuBLAS, hence OP_T. */
extern "C" int vdn_k_vda_readout(void *cublas, const void *Slin, const void *qt, int nmat, int S,
                                 float *r, vdn_stream st) {
    cublasHandle_t hd = (cublasHandle_t)cublas;
    CUBLAS_CHECK(cublasSetStream(hd, S_(st)));
    float one = 1.f, zero = 0.f;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        hd, CUBLAS_OP_T, CUBLAS_OP_N, D, S, D, &one, Slin, CUDA_R_16BF, D, (long long)D * D, qt,
        CUDA_R_16BF, D, (long long)S * D, &zero, r, CUDA_R_32F, D, (long long)S * D, nmat,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

/* warp per (frame f, token s, head h) */
__global__ void epilogue_k(const float *r, const bf16 *wn, float eps, const bf16 *gpre, int ld_g,
                           int F, int S, int H, bf16 *out, int ld_out) {
    long warp = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= (long)F * S * H) return;
    int h = (int)(warp % H);
    long fs = warp / H;
    int s = (int)(fs % S), f = (int)(fs / S);
    float4 v = *reinterpret_cast<const float4 *>(r + (((size_t)f * H + h) * S + s) * D + lane * 4);
    float ss = warp_sum(v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w);
    float inv = rsqrtf(ss / (float)D + eps);
    size_t row = (size_t)f * S + s;
    const bf16 *g = gpre + row * ld_g + h * D + lane * 4;
    const bf16 *w = wn + lane * 4;
    float x[4] = {v.x, v.y, v.z, v.w};
    __nv_bfloat162 o2[2];
#pragma unroll
    for (int j = 0; j < 4; j += 2) {
        float a = x[j] * inv * bf2f(w[j]) / (1.f + __expf(-bf2f(g[j])));
        float b = x[j + 1] * inv * bf2f(w[j + 1]) / (1.f + __expf(-bf2f(g[j + 1])));
        o2[j / 2] = __floats2bfloat162_rn(a, b);
    }
    *reinterpret_cast<uint2 *>(out + row * ld_out + h * D + lane * 4) =
        *reinterpret_cast<uint2 *>(o2);
}

extern "C" int vdn_k_vda_epilogue(const float *r, const void *wn, float eps, const void *gpre,
                                  int ld_g, int frames, int S, int heads, void *out, int ld_out,
                                  vdn_stream st) {
    long threads = (long)frames * S * heads * 32;
    epilogue_k<<<(unsigned)((threads + 255) / 256), 256, 0, S_(st)>>>(
        r, (const bf16 *)wn, eps, (const bf16 *)gpre, ld_g, frames, S, heads, (bf16 *)out, ld_out);
    LAUNCH_CHECK("vda_epilogue");
    return 0;
}

/* CTA = (frame, 512 channels): 64 threads x 8 channels (16-byte loads) x 4 row groups */
__global__ void frame_means_k(const bf16 *x, int ld, int S, int hidden, float *m) {
    __shared__ float part[4][512];
    int f = blockIdx.x, c0 = blockIdx.y * 512 + (threadIdx.x & 63) * 8, rg = threadIdx.x >> 6;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (c0 < hidden)
        for (int s = rg; s < S; s += 4) {
            float v[8];
            unpack8(*reinterpret_cast<const uint4 *>(x + (size_t)(f * S + s) * ld + c0), v);
#pragma unroll
            for (int j = 0; j < 8; j++)
                acc[j] += v[j];
        }
#pragma unroll
    for (int j = 0; j < 8; j++)
        part[rg][(threadIdx.x & 63) * 8 + j] = acc[j];
    __syncthreads();
    for (int c = threadIdx.x; c < 512; c += blockDim.x) {
        int cc = blockIdx.y * 512 + c;
        if (cc < hidden)
            m[(size_t)f * hidden + cc] =
                (part[0][c] + part[1][c] + part[2][c] + part[3][c]) / (float)S;
    }
}

extern "C" int vdn_k_frame_means(const void *x, int ld, int frames, int S, int hidden, float *m,
                                 vdn_stream st) {
    if (hidden % 8 || ld % 8) {
        fprintf(stderr, "vdn_k_frame_means: hidden %d and stride %d must be multiples of 8\n",
                hidden, ld);
        return -1;
    }
    dim3 grid(frames, (hidden + 511) / 512);
    frame_means_k<<<grid, 256, 0, S_(st)>>>((const bf16 *)x, ld, S, hidden, m);
    LAUNCH_CHECK("frame_means");
    return 0;
}

__global__ void alpha_k(const float *u, const float *dtb, const float *A_log, int n, int C,
                        float *alpha) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int c = i % C;
    float x = u[i] + dtb[c];
    float sp = x > 20.f ? x : log1pf(expf(x));
    alpha[i] = expf(-expf(A_log[c / D]) * sp);
}

extern "C" int vdn_k_alpha_finish(const float *u, const float *dt_bias, const float *A_log,
                                  int frames, int C, float *alpha, vdn_stream st) {
    int n = frames * C;
    alpha_k<<<(n + 255) / 256, 256, 0, S_(st)>>>(u, dt_bias, A_log, n, C, alpha);
    LAUNCH_CHECK("alpha_finish");
    return 0;
}
