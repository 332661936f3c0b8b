/* VDA solve (spec 5.3 "vdn_solve"): per (frame, head), M = (I + A)^-1 with A symmetrised first as
 * the reference does, then T = Diag(alpha) M and J = B M written directly, fp32 throughout. One
 * CTA of 256 threads per matrix, two CTAs per SM.
 *
 * The inverse is the symmetric sweep operator (I + A is symmetric positive definite with
 * eigenvalues >= 1: no pivoting). Sweeping pivot p of a symmetric G (d = G[p][p], c = column p):
 *   G[i][j] -= c_i c_j / d,   G[i][p] = G[p][i] = c_i / d (i != p),   G[p][p] = -1 / d
 * keeps G symmetric, and after all D pivots G = -(I + A)^-1. G lives in registers, each thread
 * owning an 8 x 8 block; the thread that produces column p+1 publishes it in shared memory, which
 * by symmetry is also row p+1, so one barrier per pivot suffices and a thread reads 8 + 8 values
 * of it (four 16-byte loads) per pivot for its 64 FMAs. The published column holds d - 1 at the
 * pivot's own index, so row p comes out of the same update: G[p][j] - (d - 1) c_j / d = c_j / d.
 * Only the warp holding column p (it becomes c / d, with -1 / d on the diagonal) and the one
 * publishing p+1 take other paths. (Measured, docs/PERF.md: 3.1 ms for 5600 matrices against
 * 5.8 ms for the former branch-free Gauss-Jordan with a column per thread, which was bound by
 * shared-memory loads; ~2.3 ms of it is the 128 barrier-separated pivot steps, ~0.9 ms J.)
 *
 * additive_S > 0 selects the SANA rule instead: T = Diag(a)(I - A/S), J = B/sqrt(S). */
#include "cuda_util.cuh"

#define D 128
#define NT 256
#define TR (NT / D * 8) /* rows of B per J tile */
#define DP (D + 1) /* padded row stride of the shared copy: transposed reads hit distinct banks */

/* J = B M for matrix m, with M in shared memory (G, row stride DP): B goes through shared
 * memory in tiles of TR rows; thread (j, r0) computes 8 rows of column j per tile. */
__device__ __forceinline__ void write_j(const float *G, float *Bt, const float *B, float *J,
                                        size_t m, int j, int r0) {
    const float *b = B + m * D * D;
    for (int tile = 0; tile < D / TR; tile++) {
        for (int e = threadIdx.x; e < TR * D; e += NT)
            Bt[e] = b[tile * TR * D + e];
        __syncthreads();
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll 2
        for (int k = 0; k < D; k += 4) {
            const float m0 = G[k * DP + j], m1 = G[(k + 1) * DP + j], m2 = G[(k + 2) * DP + j],
                        m3 = G[(k + 3) * DP + j];
#pragma unroll
            for (int r = 0; r < 8; r++) {
                const float4 bv = *reinterpret_cast<const float4 *>(&Bt[(r0 * 8 + r) * D + k]);
                acc[r] += bv.x * m0 + bv.y * m1 + bv.z * m2 + bv.w * m3;
            }
        }
#pragma unroll
        for (int r = 0; r < 8; r++)
            J[m * D * D + (size_t)(tile * TR + r0 * 8 + r) * D + j] = acc[r];
        __syncthreads();
    }
}

__global__ void __launch_bounds__(NT, 2)
    sweep_k(const float *A, const float *B, const float *alpha, float *T, float *J) {
    extern __shared__ float sm[];
    float *G = sm;              /* D x DP */
    float *Bt = G + D * DP;     /* 32 x D tile of B */
    float *colb = Bt + 32 * D;  /* [2][D] pivot columns, d - 1 at the pivot's index */
    float *pivb = colb + 2 * D; /* [2] pivots d */
    const size_t m = blockIdx.x;
    const float *a = A + m * D * D;
    const int bc = threadIdx.x >> 4, br = threadIdx.x & 15, i0 = 8 * br, j0 = 8 * bc;
    const float *al = alpha ? alpha + m * D : NULL;
    for (int e = threadIdx.x; e < D * D; e += NT)
        G[(e / D) * DP + (e % D)] = a[e]; /* coalesced */
    __syncthreads();
    float g[8][8];
#pragma unroll
    for (int u = 0; u < 8; u++)
#pragma unroll
        for (int v = 0; v < 8; v++) {
            const int i = i0 + u, j = j0 + v;
            g[u][v] = 0.5f * (G[i * DP + j] + G[j * DP + i]) + (i == j ? 1.f : 0.f);
        }
    if (bc == 0)
#pragma unroll
        for (int u = 0; u < 8; u++) {
            colb[i0 + u] = i0 + u == 0 ? g[u][0] - 1.f : g[u][0];
            if (i0 + u == 0) pivb[0] = g[u][0];
        }
    __syncthreads();
    for (int p = 0; p < D; p++) {
        const float *col = colb + (p & 1) * D;
        float *ncol = colb + ((p + 1) & 1) * D;
        const float inv = 1.f / pivb[p & 1];
        float ci[8], rj[8];
        *reinterpret_cast<float4 *>(&ci[0]) = *reinterpret_cast<const float4 *>(col + i0);
        *reinterpret_cast<float4 *>(&ci[4]) = *reinterpret_cast<const float4 *>(col + i0 + 4);
        *reinterpret_cast<float4 *>(&rj[0]) = *reinterpret_cast<const float4 *>(col + j0);
        *reinterpret_cast<float4 *>(&rj[4]) = *reinterpret_cast<const float4 *>(col + j0 + 4);
#pragma unroll
        for (int v = 0; v < 8; v++)
            rj[v] *= inv;
        if (bc != (p >> 3)) {
#pragma unroll
            for (int u = 0; u < 8; u++)
#pragma unroll
                for (int v = 0; v < 8; v++)
                    g[u][v] = fmaf(-ci[u], rj[v], g[u][v]);
        } else { /* this warp holds column p: it becomes c / d, -1 / d on the diagonal */
#pragma unroll
            for (int v = 0; v < 8; v++) {
                if (j0 + v == p) {
#pragma unroll
                    for (int u = 0; u < 8; u++)
                        g[u][v] = i0 + u == p ? -inv : ci[u] * inv;
                } else {
#pragma unroll
                    for (int u = 0; u < 8; u++)
                        g[u][v] = fmaf(-ci[u], rj[v], g[u][v]);
                }
            }
        }
        if (bc == ((p + 1) >> 3)) { /* publish column p + 1 for the next step */
#pragma unroll
            for (int v = 0; v < 8; v++)
                if (j0 + v == p + 1)
#pragma unroll
                    for (int u = 0; u < 8; u++) {
                        const int i = i0 + u;
                        ncol[i] = i == p + 1 ? g[u][v] - 1.f : g[u][v];
                        if (i == p + 1) pivb[(p + 1) & 1] = g[u][v];
                    }
        }
        __syncthreads();
    }
#pragma unroll
    for (int u = 0; u < 8; u++)
#pragma unroll
        for (int v = 0; v < 8; v++)
            G[(i0 + u) * DP + j0 + v] = -g[u][v]; /* M = -G */
    if (T)
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const float s = al ? al[i0 + u] : 1.f;
            float4 *t4 = reinterpret_cast<float4 *>(T + m * D * D + (size_t)(i0 + u) * D + j0);
            t4[0] = make_float4(-s * g[u][0], -s * g[u][1], -s * g[u][2], -s * g[u][3]);
            t4[1] = make_float4(-s * g[u][4], -s * g[u][5], -s * g[u][6], -s * g[u][7]);
        }
    __syncthreads();
    if (J) write_j(G, Bt, B, J, m, threadIdx.x & (D - 1), threadIdx.x >> 7);
}

/* the SANA-style additive rule: thread per element, no inverse */
__global__ void additive_k(const float *A, const float *B, const float *alpha, float *T, float *J,
                           int S) {
    const size_t m = blockIdx.x;
    const float *a = A + m * D * D;
    const float *al = alpha ? alpha + m * D : NULL;
    const float is = 1.f / (float)S, isq = rsqrtf((float)S);
    for (int e = threadIdx.x; e < D * D; e += blockDim.x) {
        const int i = e / D, j = e % D;
        const float sym = 0.5f * (a[i * D + j] + a[j * D + i]);
        if (T) T[m * D * D + e] = (al ? al[i] : 1.f) * ((i == j ? 1.f : 0.f) - is * sym);
        if (J) J[m * D * D + e] = isq * B[m * D * D + e];
    }
}

extern "C" int vdn_k_vda_solve(const float *A, const float *B, const float *alpha, int nmat,
                               float *T, float *J, int additive_S, vdn_stream st) {
    if (additive_S > 0) {
        additive_k<<<nmat, NT, 0, S_(st)>>>(A, B, alpha, T, J, additive_S);
        LAUNCH_CHECK("vda_solve_additive");
        return 0;
    }
    const int smem = (D * DP + 32 * D + 4 * D) * (int)sizeof(float);
    static unsigned optin = 0;
    if (vdn_smem_optin(&optin, (const void *)sweep_k, smem)) return -1;
    sweep_k<<<nmat, NT, smem, S_(st)>>>(A, B, alpha, T, J);
    LAUNCH_CHECK("vda_solve");
    return 0;
}
