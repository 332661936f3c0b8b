/* VDA solve (spec 5.3 "vdn_solve"): per (frame, head), M = (I + A)^-1 by Gauss-Jordan in shared
 * memory (I + A is symmetric positive definite with eigenvalues >= 1, so no pivoting is needed),
 * A symmetrised first as the reference does; then T = Diag(alpha) M and J = B M are written
 * directly, fp32 throughout. 512 threads: thread = column j and every 4th row.
 *
 * The matrix lives in registers (32 elements per thread); step p is written without branches on
 * the pivot row/column: with the pivot row taken as r[j] = (j == p ? 1 : G[p][j]) / piv and the
 * pivot column as c[i] = (i == p ? -1 : G[i][p]), every element becomes
 * (i == p || j == p ? 0 : G[i][j]) - c[i] r[j]. The threads that produce column p+1 and row p+1
 * publish them in shared memory for the next step, so one barrier per step suffices and shared
 * memory traffic is two broadcast vectors per step instead of the whole matrix.
 * additive_S > 0 selects the SANA rule instead: T = Diag(a)(I - A/S), J = B/sqrt(S). */
#include "cuda_util.cuh"

#define D 128
#define NT 256
#define RPT (D * D / NT) /* rows of G per thread (one column j, rows RPT r0 ..) */
#define TR (NT / D * 8)  /* rows of B per J tile */
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

__global__ void __launch_bounds__(NT, 2) solve_k(const float *A, const float *B, const float *alpha,
                                                 float *T, float *J, int additive_S) {
    extern __shared__ float sm[];
    float *G = sm;              /* D x DP */
    float *Bt = G + D * DP;     /* 32 x D tile of B */
    float *colb = Bt + 32 * D;  /* [2][D] pivot columns */
    float *rowb = colb + 2 * D; /* [2][D] pivot rows */
    const size_t m = blockIdx.x;
    const float *a = A + m * D * D;
    const int j = threadIdx.x & (D - 1), r0 = threadIdx.x >> 7;
    const float *al = alpha ? alpha + m * D : NULL;
    if (additive_S > 0) {
        const float is = 1.f / (float)additive_S, isq = rsqrtf((float)additive_S);
        for (int i = r0; i < D; i += NT / D) {
            float sym = 0.5f * (a[i * D + j] + a[j * D + i]);
            if (T)
                T[m * D * D + i * D + j] = (al ? al[i] : 1.f) * ((i == j ? 1.f : 0.f) - is * sym);
            J[m * D * D + i * D + j] = isq * B[m * D * D + i * D + j];
        }
        return;
    }
    /* G lives in registers: thread (j, r0) owns rows 32 r0 .. 32 r0 + 31 of column j, so the pivot
     * column it needs is 8 float4 loads per step. */
    for (int e = threadIdx.x; e < D * D; e += NT)
        G[(e / D) * DP + (e % D)] = a[e]; /* coalesced */
    __syncthreads();
    float g[RPT];
#pragma unroll
    for (int k = 0; k < RPT; k++) {
        const int i = RPT * r0 + k;
        g[k] = 0.5f * (G[i * DP + j] + G[j * DP + i]) + (i == j ? 1.f : 0.f);
        if (j == 0) colb[i] = g[k];
        if (i == 0) rowb[j] = g[k];
    }
    __syncthreads();
    for (int p = 0; p < D; p++) {
        const float *col = colb + (p & 1) * D, *row = rowb + (p & 1) * D;
        float *ncol = colb + ((p + 1) & 1) * D, *nrow = rowb + ((p + 1) & 1) * D;
        const float inv = 1.f / row[p];
        const bool jp = j == p, jn = j == p + 1;
        const float rj = (jp ? 1.f : row[j]) * inv;
        float cv[RPT];
#pragma unroll
        for (int q = 0; q < RPT / 4; q++)
            *reinterpret_cast<float4 *>(&cv[4 * q]) =
                reinterpret_cast<const float4 *>(col + RPT * r0)[q];
#pragma unroll
        for (int k = 0; k < RPT; k++) {
            const int i = RPT * r0 + k;
            const bool ip = i == p;
            const float ci = ip ? -1.f : cv[k];
            const float v = ((ip || jp) ? 0.f : g[k]) - ci * rj;
            g[k] = v;
            if (jn) ncol[i] = v;
            if (i == p + 1) nrow[j] = v;
        }
        __syncthreads();
    }
#pragma unroll
    for (int k = 0; k < RPT; k++)
        G[(RPT * r0 + k) * DP + j] = g[k];
    if (T)
#pragma unroll
        for (int k = 0; k < RPT; k++)
            T[m * D * D + (RPT * r0 + k) * D + j] = (al ? al[RPT * r0 + k] : 1.f) * g[k];
    __syncthreads();
    if (J) write_j(G, Bt, B, J, m, j, r0);
}

/* Variant 2: the symmetric sweep operator instead of Gauss-Jordan. Sweeping pivot p of a
 * symmetric G (d = G[p][p], c = column p):
 *   G[i][j] -= c_i c_j / d,   G[i][p] = G[p][i] = c_i / d (i != p),   G[p][p] = -1 / d;
 * keeps G symmetric, so the published column p also serves as row p, and after all D pivots
 * G = -(I + A)^-1. The element update is one FMA, G[i][j] -= c_i (c_j / d), for every element
 * but column p: row p comes out right from the same FMA because the published column holds
 * d - 1 at index p (G[p][j] - (d - 1) c_j / d = c_j / d), with d itself published beside it.
 * Only the thread of column p (the new column c / d, -1 / d on the diagonal) and the thread of
 * column p + 1 (publishing it) take other paths. Gauss-Jordan above spends ~7 instructions per
 * element per step on its branch-free selects and publishing compares. */
__global__ void __launch_bounds__(NT, 2)
    sweep_k(const float *A, const float *B, const float *alpha, float *T, float *J) {
    extern __shared__ float sm[];
    float *G = sm;              /* D x DP */
    float *Bt = G + D * DP;     /* 32 x D tile of B */
    float *colb = Bt + 32 * D;  /* [2][D] pivot columns, d - 1 at the pivot's index */
    float *pivb = colb + 2 * D; /* [2] pivots d */
    const size_t m = blockIdx.x;
    const float *a = A + m * D * D;
    const int j = threadIdx.x & (D - 1), r0 = threadIdx.x >> 7;
    const float *al = alpha ? alpha + m * D : NULL;
    for (int e = threadIdx.x; e < D * D; e += NT)
        G[(e / D) * DP + (e % D)] = a[e]; /* coalesced */
    __syncthreads();
    float g[RPT];
#pragma unroll
    for (int k = 0; k < RPT; k++) {
        const int i = RPT * r0 + k;
        g[k] = 0.5f * (G[i * DP + j] + G[j * DP + i]) + (i == j ? 1.f : 0.f);
        if (j == 0) colb[i] = i == 0 ? g[k] - 1.f : g[k];
        if (j == 0 && i == 0) pivb[0] = g[k];
    }
    __syncthreads();
    for (int p = 0; p < D; p++) {
        const float *col = colb + (p & 1) * D;
        float *ncol = colb + ((p + 1) & 1) * D;
        const float inv = 1.f / pivb[p & 1];
        const float4 *c4 = reinterpret_cast<const float4 *>(col + RPT * r0);
        if (j != p) {
            const float rj = col[j] * inv;
#pragma unroll
            for (int q = 0; q < RPT / 4; q++) {
                const float4 c = c4[q];
                g[4 * q] = fmaf(-c.x, rj, g[4 * q]);
                g[4 * q + 1] = fmaf(-c.y, rj, g[4 * q + 1]);
                g[4 * q + 2] = fmaf(-c.z, rj, g[4 * q + 2]);
                g[4 * q + 3] = fmaf(-c.w, rj, g[4 * q + 3]);
            }
            if (j == p + 1) { /* publish column p + 1 for the next step */
#pragma unroll
                for (int k = 0; k < RPT; k++) {
                    const int i = RPT * r0 + k;
                    ncol[i] = i == p + 1 ? g[k] - 1.f : g[k];
                    if (i == p + 1) pivb[(p + 1) & 1] = g[k];
                }
            }
        } else {
#pragma unroll
            for (int q = 0; q < RPT / 4; q++) {
                const float4 c = c4[q];
                const float cc[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
                for (int e = 0; e < 4; e++)
                    g[4 * q + e] = RPT * r0 + 4 * q + e == p ? -inv : cc[e] * inv;
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int k = 0; k < RPT; k++)
        G[(RPT * r0 + k) * DP + j] = -g[k]; /* M = -G */
    if (T)
#pragma unroll
        for (int k = 0; k < RPT; k++)
            T[m * D * D + (RPT * r0 + k) * D + j] = (al ? al[RPT * r0 + k] : 1.f) * -g[k];
    __syncthreads();
    if (J) write_j(G, Bt, B, J, m, j, r0);
}

/* Variant 3: the same sweep with each thread owning an 8 x 8 block (rows 8 br.., columns 8 bc..)
 * instead of 64 rows of one column: per pivot a thread reads 8 + 8 values of the published
 * column (four 16-byte loads) instead of 64 + 1, for the same 64 FMAs. Threads of one warp share
 * bc, so only the warp holding column p (or publishing p + 1) takes the other paths. */
__global__ void __launch_bounds__(NT, 2)
    sweep8_k(const float *A, const float *B, const float *alpha, float *T, float *J) {
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

static int g_solve_variant = 3;
extern "C" void vdn_vda_solve_variant(int v) {
    g_solve_variant = v >= 1 && v <= 3 ? v : 3;
}
extern "C" int vdn_vda_solve_variant_get(void) {
    return g_solve_variant;
}

extern "C" int vdn_k_vda_solve(const float *A, const float *B, const float *alpha, int nmat,
                               float *T, float *J, int additive_S, vdn_stream st) {
    const int smem = (D * DP + 32 * D + 4 * D) * (int)sizeof(float);
    static int configured = 0;
    if (!configured) {
        CUDA_CHECK(
            cudaFuncSetAttribute(solve_k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CUDA_CHECK(
            cudaFuncSetAttribute(sweep_k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CUDA_CHECK(
            cudaFuncSetAttribute(sweep8_k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        configured = 1;
    }
    if (g_solve_variant == 3 && additive_S <= 0)
        sweep8_k<<<nmat, NT, smem, S_(st)>>>(A, B, alpha, T, J);
    else if (g_solve_variant == 2 && additive_S <= 0)
        sweep_k<<<nmat, NT, smem, S_(st)>>>(A, B, alpha, T, J);
    else
        solve_k<<<nmat, NT, smem, S_(st)>>>(A, B, alpha, T, J, additive_S);
    LAUNCH_CHECK("vda_solve");
    return 0;
}
