/* VDA solve (spec 5.3 "vdn_solve"): per (frame, head), M = (I + A)^-1 by Gauss-Jordan in shared
 * memory (I + A is symmetric positive definite with eigenvalues >= 1, so no pivoting is needed),
 * A symmetrised first as the reference does; then T = Diag(alpha) M and J = B M are written
 * directly, fp32 throughout. 512 threads: thread = column j and every 4th row. */
#include "cuda_util.cuh"

#define D 128
#define NT 512

__global__ void __launch_bounds__(NT)
    solve_k(const float *A, const float *B, const float *alpha, float *T, float *J) {
    extern __shared__ float sm[];
    float *G = sm;             /* D x D */
    float *Bt = G + D * D;     /* 32 x D tile of B */
    float *colp = Bt + 32 * D; /* column p before the step */
    float *rowp = colp + D;    /* row p before the step */
    const size_t m = blockIdx.x;
    const float *a = A + m * D * D;
    const int j = threadIdx.x & (D - 1), r0 = threadIdx.x >> 7;
    for (int i = r0; i < D; i += NT / D)
        G[i * D + j] = 0.5f * (a[i * D + j] + a[j * D + i]) + (i == j ? 1.f : 0.f);
    __syncthreads();
    for (int p = 0; p < D; p++) {
        if (threadIdx.x < D)
            colp[threadIdx.x] = G[threadIdx.x * D + p];
        else if (threadIdx.x < 2 * D)
            rowp[threadIdx.x - D] = G[p * D + threadIdx.x - D];
        __syncthreads();
        const float inv = 1.f / rowp[p], rj = rowp[j] * inv;
        for (int i = r0; i < D; i += NT / D) {
            float v;
            if (i == p)
                v = (j == p) ? inv : rj;
            else
                v = (j == p) ? -colp[i] * inv : G[i * D + j] - colp[i] * rj;
            G[i * D + j] = v;
        }
        __syncthreads();
    }
    if (T) {
        const float *al = alpha ? alpha + m * D : NULL;
        for (int i = r0; i < D; i += NT / D)
            T[m * D * D + i * D + j] = (al ? al[i] : 1.f) * G[i * D + j];
    }
    const float *b = B + m * D * D;
    for (int tile = 0; tile < D / 32; tile++) {
        for (int e = threadIdx.x; e < 32 * D; e += NT)
            Bt[e] = b[tile * 32 * D + e];
        __syncthreads();
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int k = 0; k < D; k++) {
            float mk = G[k * D + j];
#pragma unroll
            for (int r = 0; r < 8; r++)
                acc[r] += Bt[(r0 * 8 + r) * D + k] * mk;
        }
#pragma unroll
        for (int r = 0; r < 8; r++)
            J[m * D * D + (size_t)(tile * 32 + r0 * 8 + r) * D + j] = acc[r];
        __syncthreads();
    }
}

extern "C" int vdn_k_vda_solve(const float *A, const float *B, const float *alpha, int nmat,
                               float *T, float *J, vdn_stream st) {
    const int smem = (D * D + 32 * D + 2 * D) * (int)sizeof(float);
    static int configured = 0;
    if (!configured) {
        CUDA_CHECK(
            cudaFuncSetAttribute(solve_k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        configured = 1;
    }
    solve_k<<<nmat, NT, smem, S_(st)>>>(A, B, alpha, T, J);
    LAUNCH_CHECK("vda_solve");
    return 0;
}
