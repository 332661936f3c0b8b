/* Block-sparse flash attention on Hopper tensor cores (wgmma, sm_90a): the launcher
 * vdn_k_attention_wgmma and its variants (kernels.h). Shared pieces and the layout are in
 * attn_wgmma.cuh; the default kernel (variant 3: TMA stage ring + FA3 ping-pong) has its own
 * file, attn_pingpong.cu. The two kernels here are the steps that led to it, kept as readable
 * references and measured beside it by `vdn bench` (docs/PERF.md):
 *   1  plain: all 256 threads load (cp.async, K/V^T double-buffered), then both warpgroups
 *      compute S, softmax, P V in turn;
 *   2  pipelined: the softmax of block i+1 runs while P_i V_i is on the tensor cores.
 * Variants measured as no faster than 3 and removed (numbers in docs/PERF.md, run 23):
 * staggered warpgroups, a cp.async mbarrier stage ring, the TMA ring without ping-pong. */
#include <stdlib.h>

#include "attn_wgmma.cuh"

__global__ void __launch_bounds__(NT, 1)
    attn_wg_k(const bf16 *__restrict__ Q, const bf16 *__restrict__ K, const bf16 *__restrict__ Vt,
              int ldq, int ldk, size_t ldt, int N, const int *__restrict__ lohi, int head_end,
              int tail_start, const int *__restrict__ tiles, float scale_log2,
              const float *__restrict__ gate, int heads, bf16 *__restrict__ O, int ldo) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    char *base = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    char *sQ = base, *sK = sQ + BM * HD * 2, *sV = sK + 2 * BN * HD * 2;
    const int TILE = BN * HD * 2;

    const int tile = blockIdx.x, h = blockIdx.y, wg = threadIdx.x >> 7;
    const int q0 = tile * BM;
    const bf16 *Qh = Q + h * HD, *Kh = K + h * HD, *Vh = Vt + (size_t)h * HD * ldt;
    const KeyBlocks kbs(tiles + tile * 8);
    const int nb = kbs.nb;
    Rows rows(q0, kbs.mixed, lohi, N);

    load128(sQ, Qh, ldq, q0, N);
    cp_commit();
    if (nb > 0) {
        int s_, e_, kb;
        kbs.at(0, s_, e_, kb);
        load128(sK, Kh, ldk, kb, N);
        load_vt(sV, Vh, ldt, kb);
    }
    cp_commit();

    float o[64], s[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        o[i] = 0.f;
    const char *qw = sQ + wg * 64 * 128; /* this warpgroup's 64 rows inside each half */
    unsigned pf[BN / 16][4];

    for (int i = 0; i < nb; i++) {
        const int cur = i & 1;
        if (i + 1 < nb) { /* next block's K and V^T into the other buffer */
            int s_, e_, kb;
            kbs.at(i + 1, s_, e_, kb);
            load128(sK + (cur ^ 1) * TILE, Kh, ldk, kb, N);
            load_vt(sV + (cur ^ 1) * TILE, Vh, ldt, kb);
        }
        cp_commit();
        cp_wait<1>();
        fence_async_smem();
        __syncthreads();
        wgmma_fence();
        issue_qk(s, qw, sK + cur * TILE);
        wgmma_commit();
        wgmma_wait0();
        fence_regs<64>(s);
        rows.softmax(s, kbs, i, N, head_end, tail_start, scale_log2);
        rows.rescale(o);
        pack_p(s, pf);
        wgmma_fence();
        issue_pv(o, pf, sV + cur * TILE);
        wgmma_commit();
        wgmma_wait0();
        fence_regs<64>(o);
        __syncthreads();
    }
    rows.store(o, gate, heads, h, O, ldo, N);
}

/* Pipelined: in iteration i the warpgroup issues S_{i+1} = Q K_{i+1}^T and then O += P_i V_i,
 * waits only for S_{i+1}, and runs the softmax of block i+1 while the P V product is still on
 * the tensor cores; O is rescaled once that product has landed. K_{i+2} and V_{i+1} are loaded
 * (cp.async) during iteration i, so every load has a whole iteration to arrive. */
__global__ void __launch_bounds__(NT, 1)
    attn_wg2_k(const bf16 *__restrict__ Q, const bf16 *__restrict__ K, const bf16 *__restrict__ Vt,
               int ldq, int ldk, size_t ldt, int N, const int *__restrict__ lohi, int head_end,
               int tail_start, const int *__restrict__ tiles, float scale_log2,
               const float *__restrict__ gate, int heads, bf16 *__restrict__ O, int ldo) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    char *base = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    char *sQ = base, *sK = sQ + BM * HD * 2, *sV = sK + 2 * BN * HD * 2;
    const int TILE = BN * HD * 2;

    const int tile = blockIdx.x, h = blockIdx.y, wg = threadIdx.x >> 7;
    const int q0 = tile * BM;
    const bf16 *Qh = Q + h * HD, *Kh = K + h * HD, *Vh = Vt + (size_t)h * HD * ldt;
    const KeyBlocks kbs(tiles + tile * 8);
    const int nb = kbs.nb;
    Rows rows(q0, kbs.mixed, lohi, N);
    auto load_k = [&](int i) {
        int s_, e_, kb;
        kbs.at(i, s_, e_, kb);
        load128(sK + (i & 1) * TILE, Kh, ldk, kb, N);
    };
    auto load_v = [&](int i) {
        int s_, e_, kb;
        kbs.at(i, s_, e_, kb);
        load_vt(sV + (i & 1) * TILE, Vh, ldt, kb);
    };

    float o[64], s[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        o[i] = 0.f;
    const char *qw = sQ + wg * 64 * 128;
    unsigned pf[BN / 16][4];

    /* prologue: Q, K_0, V_0, then K_1 in flight; S_0 and its softmax */
    load128(sQ, Qh, ldq, q0, N);
    if (nb > 0) load_k(0), load_v(0);
    cp_commit();
    if (nb > 1) load_k(1);
    cp_commit();
    cp_wait<1>();
    fence_async_smem();
    __syncthreads();
    if (nb > 0) {
        wgmma_fence();
        issue_qk(s, qw, sK);
        wgmma_commit();
        wgmma_wait0();
        fence_regs<64>(s);
        rows.softmax(s, kbs, 0, N, head_end, tail_start, scale_log2);
        pack_p(s, pf);
    }
    /* the loop's first barrier also tells every warpgroup is done with K_0 */

    /* all but the last block: S_{i+1} always exists, so the loop body has no branches around
     * the asynchronous products */
    for (int i = 0; i + 1 < nb; i++) {
        cp_wait<0>(); /* K_{i+1} and V_i (issued one iteration ago) have landed */
        fence_async_smem();
        __syncthreads(); /* ... for every thread, and iteration i-1 is over: buffers free */
        if (i + 2 < nb) load_k(i + 2);
        load_v(i + 1);
        cp_commit();
        const char *kn = sK + ((i + 1) & 1) * TILE, *vc = sV + (i & 1) * TILE;
        wgmma_fence();
        issue_qk(s, qw, kn);
        wgmma_commit();
        wgmma_fence(); /* a separate stage: the softmax below reads S while P V runs */
        issue_pv(o, pf, vc);
        wgmma_commit();
        wgmma_wait1(); /* S_{i+1} is in; P_i V_i may still run */
        fence_regs<64>(s);
        rows.softmax(s, kbs, i + 1, N, head_end, tail_start, scale_log2);
        wgmma_wait0();
        fence_regs<64>(o);
        fence_regs<4 * (BN / 16)>(&pf[0][0]);
        rows.rescale(o);
        pack_p(s, pf);
    }
    if (nb > 0) { /* the last block: only its P V product is left */
        cp_wait<0>();
        fence_async_smem();
        __syncthreads();
        const char *vc = sV + ((nb - 1) & 1) * TILE;
        wgmma_fence();
        issue_pv(o, pf, vc);
        wgmma_commit();
        wgmma_wait0();
        fence_regs<64>(o);
    }
    rows.store(o, gate, heads, h, O, ldo, N);
}

/* V [rows, heads*128] (stride ldv) -> Vt [heads][128][ldt], zero past `rows`: 32x32 tiles
 * through shared memory so both sides are coalesced. */
__global__ void vt_k(const bf16 *V, int ldv, int rows, int heads, size_t ldt, bf16 *Vt) {
    __shared__ bf16 t[32][33];
    const int h = blockIdx.z, d0 = blockIdx.y * 32, r0 = blockIdx.x * 32;
    const int tx = threadIdx.x, ty = threadIdx.y; /* 32 x 8 */
    for (int k = ty; k < 32; k += 8) {
        int r = r0 + k;
        t[k][tx] = r < rows ? V[(size_t)r * ldv + h * HD + d0 + tx] : __float2bfloat16(0.f);
    }
    __syncthreads();
    for (int k = ty; k < 32; k += 8)
        Vt[((size_t)h * HD + d0 + k) * ldt + r0 + tx] = t[tx][k];
}

#define DEFAULT_VARIANT 3
static int g_variant = DEFAULT_VARIANT; /* kernels.h lists the variants */
extern "C" void vdn_attention_wgmma_variant(int v) {
    g_variant = v >= 1 && v <= VDN_ATTN_NVARIANTS ? v : DEFAULT_VARIANT;
}
extern "C" int vdn_attention_wgmma_variant_default(void) {
    return DEFAULT_VARIANT;
}
extern "C" const char *vdn_attention_wgmma_variant_name(int v) {
    static const char *names[VDN_ATTN_NVARIANTS + 1] = {"?", "wgmma", "wgmma pipelined",
                                                        "wgmma TMA ping-pong"};
    return v >= 1 && v <= VDN_ATTN_NVARIANTS ? names[v] : names[0];
}
extern "C" int vdn_attention_wgmma_variant_wanted(int v) {
    const char *e = getenv("VDN_ATTN_VARIANTS");
    if (!e || !*e) return 1;
    for (const char *p = e; *p;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p) {
            p++;
            continue;
        }
        if (x == v) return 1;
        p = end;
    }
    return 0;
}

/* 3-D bf16 tensor map, 128-byte swizzle, zero fill past the end */
static int make_map(CUtensorMap *m, const void *base, const cuuint64_t dims[3],
                    const cuuint64_t strides[2], const cuuint32_t box[3]) {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
    if (!encode) {
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&encode, 12000,
                                             cudaEnableDefault, &q) != cudaSuccess ||
            !encode) {
            fprintf(stderr, "attention: cuTensorMapEncodeTiled is not available from the driver\n");
            return -1;
        }
    }
    const cuuint32_t es[3] = {1, 1, 1};
    CUresult r = encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)base, dims, strides, box,
                        es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "attention: cuTensorMapEncodeTiled failed (%d)\n", (int)r);
        return -1;
    }
    return 0;
}

extern "C" size_t vdn_attention_vt_elems(int rows, int heads) {
    return (size_t)heads * HD * (((size_t)rows + BN - 1) / BN * BN);
}

extern "C" int vdn_k_attention_wgmma(const void *q, int ldq, const void *k, int ldk, const void *v,
                                     int ldv, void *vt_scratch, int rows, int heads,
                                     const int *lohi, int head_end, int tail_start,
                                     const int *tiles, int n_tiles, float scale, const float *gate,
                                     void *out, int ld_o, vdn_stream st) {
    if ((ldq | ldk) % 8 || ld_o % 2 || n_tiles != (rows + BM - 1) / BM) {
        fprintf(
            stderr,
            "vdn_k_attention_wgmma: strides %d/%d must be multiples of 8, tiles %d for %d rows\n",
            ldq, ldk, n_tiles, rows);
        return -1;
    }
    const size_t ldt = ((size_t)rows + BN - 1) / BN * BN;
    dim3 tg((unsigned)(ldt / 32), HD / 32, heads), tb(32, 8);
    vt_k<<<tg, tb, 0, S_(st)>>>((const bf16 *)v, ldv, rows, heads, ldt, (bf16 *)vt_scratch);
    LAUNCH_CHECK("attention_vt");
    const int smem = (BM + 4 * BN) * HD * (int)sizeof(bf16) + 1024;
    const int smem3 = (BM + 2 * NSTAGE * BN) * HD * (int)sizeof(bf16) + 1024;
    static int configured = 0;
    if (!configured) {
        CUDA_CHECK(
            cudaFuncSetAttribute(attn_wg_k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CUDA_CHECK(
            cudaFuncSetAttribute(attn_wg2_k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CUDA_CHECK(
            cudaFuncSetAttribute(attn_pp_k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem3));
        configured = 1;
    }
    dim3 grid(n_tiles, heads);
    const float sl = scale * 1.4426950408889634f;
    const bf16 *Q = (const bf16 *)q, *K = (const bf16 *)k, *Vt = (const bf16 *)vt_scratch;
    if (g_variant == 1) {
        attn_wg_k<<<grid, NT, smem, S_(st)>>>(Q, K, Vt, ldq, ldk, ldt, rows, lohi, head_end,
                                              tail_start, tiles, sl, gate, heads, (bf16 *)out,
                                              ld_o);
    } else if (g_variant == 2) {
        attn_wg2_k<<<grid, NT, smem, S_(st)>>>(Q, K, Vt, ldq, ldk, ldt, rows, lohi, head_end,
                                               tail_start, tiles, sl, gate, heads, (bf16 *)out,
                                               ld_o);
    } else {
        /* tensor maps: Q and K as [rows][heads][128], V^T as [heads][128][ldt]; boxes of 64
         * columns (one 128-byte swizzle span) by 128 rows */
        CUtensorMap qm, km, vm;
        const cuuint64_t qd[3] = {HD, (cuuint64_t)heads, (cuuint64_t)rows};
        const cuuint64_t qs[2] = {HD * 2, (cuuint64_t)ldq * 2},
                         ks[2] = {HD * 2, (cuuint64_t)ldk * 2};
        const cuuint32_t qb[3] = {64, 1, BM}, kbx[3] = {64, 1, BN};
        const cuuint64_t vd[3] = {(cuuint64_t)ldt, HD, (cuuint64_t)heads};
        const cuuint64_t vs[2] = {(cuuint64_t)ldt * 2, (cuuint64_t)ldt * 2 * HD};
        const cuuint32_t vb[3] = {64, HD, 1};
        if (make_map(&qm, q, qd, qs, qb) || make_map(&km, k, qd, ks, kbx) ||
            make_map(&vm, vt_scratch, vd, vs, vb))
            return -1;
        attn_pp_k<<<grid, NT, smem3, S_(st)>>>(qm, km, vm, rows, lohi, head_end, tail_start, tiles,
                                               sl, gate, heads, (bf16 *)out, ld_o);
    }
    LAUNCH_CHECK("attention_wgmma");
    return 0;
}
