/* Launcher of the Hopper attention (vdn_k_attention_wgmma, kernels.h): V transposed per head,
 * the TMA tensor maps of Q, K and V^T, and the launch of the kernel in attn_pingpong.cu at head
 * dim 128 (TMA stage ring + FlashAttention-3 ping-pong between two warpgroups) or attn_pp64.cu's
 * at head dim 64 (persistent, warp-specialised, three consumer warpgroups). Shared pieces and
 * the layout are in attn_wgmma.cuh.
 * The steps that led to it were measured beside it and removed once it was the fastest (plain
 * wgmma, softmax overlapped with P V, staggered warpgroups, a cp.async mbarrier ring, the TMA ring
 * without ping-pong): their numbers are in docs/PERF.md (runs 23-27). */
#include "attn_wgmma.cuh"

/* V [rows, heads*HD] (stride ldv) -> Vt [heads][HD][ldt], zero past `rows`: 32x32 tiles
 * through shared memory so both sides are coalesced. */
template <int HD>
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

/* 3-D bf16 tensor map, 128-byte swizzle, zero fill past the end */
static int make_map(CUtensorMap *m, const void *base, const cuuint64_t dims[3],
                    const cuuint64_t strides[2], const cuuint32_t box[3]) {
    PFN_cuTensorMapEncodeTiled_v12000 encode = tma_encoder("attention");
    if (!encode) return -1;
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

/* the grid cap of head dim 64's persistent kernel (0: one CTA per SM), process-wide: tests */
static int p64_max_ctas = 0;
extern "C" int vdn_attention_hd64_grid_cap(int max_ctas) {
    if (max_ctas < 0) {
        fprintf(stderr, "vdn_attention_hd64_grid_cap: %d CTAs (>= 0 expected)\n", max_ctas);
        return -1;
    }
    p64_max_ctas = max_ctas;
    return 0;
}

extern "C" size_t vdn_attention_vt_elems(int rows, int heads, int head_dim) {
    return (size_t)heads * head_dim * (((size_t)rows + BN - 1) / BN * BN);
}

/* the transpose, the tensor maps and the launch for head dim HD */
template <int HD>
static int attention_pp(const void *q, int ldq, const void *k, int ldk, const void *v, int ldv,
                        void *vt_scratch, int rows, int heads, const int *lohi, int head_end,
                        int tail_start, const int *tiles, int n_tiles, float scale,
                        const float *gate, void *out, int ld_o, vdn_stream st) {
    const size_t ldt = ((size_t)rows + BN - 1) / BN * BN;
    dim3 tg((unsigned)(ldt / 32), HD / 32, heads), tb(32, 8);
    vt_k<HD><<<tg, tb, 0, S_(st)>>>((const bf16 *)v, ldv, rows, heads, ldt, (bf16 *)vt_scratch);
    LAUNCH_CHECK("attention_vt");
    const int bmq = HD == 64 ? ATTN_P64_ROWS : BM; /* query rows of a CTA's tile */
    /* tensor maps: Q and K as [rows][heads][HD], V^T as [heads][HD][ldt]; boxes of 64 columns
     * (one 128-byte swizzle span) by 128 rows (Q at head dim 64: by 192) */
    CUtensorMap qm, km, vm;
    const cuuint64_t qd[3] = {HD, (cuuint64_t)heads, (cuuint64_t)rows};
    const cuuint64_t qs[2] = {HD * 2, (cuuint64_t)ldq * 2}, ks[2] = {HD * 2, (cuuint64_t)ldk * 2};
    const cuuint32_t qb[3] = {64, 1, (cuuint32_t)bmq}, kbx[3] = {64, 1, BN};
    const cuuint64_t vd[3] = {(cuuint64_t)ldt, HD, (cuuint64_t)heads};
    const cuuint64_t vs[2] = {(cuuint64_t)ldt * 2, (cuuint64_t)ldt * 2 * HD};
    const cuuint32_t vb[3] = {64, HD, 1};
    if (make_map(&qm, q, qd, qs, qb) || make_map(&km, k, qd, ks, kbx) ||
        make_map(&vm, vt_scratch, vd, vs, vb))
        return -1;
    const float sl2 = scale * 1.4426950408889634f;
    if constexpr (HD == 64) { /* it finds its key ranges from lohi (192-row tiles, no table) */
        (void)tiles, (void)n_tiles;
        return attn_p64_launch(p64_max_ctas, qm, km, vm, rows, lohi, head_end, tail_start, sl2,
                               gate, heads, (bf16 *)out, ld_o, S_(st));
    } else {
        const int smem = ATTN_PP_SMEM(HD);
        static unsigned optin = 0;
        if (vdn_smem_optin(&optin, (const void *)attn_pp_k, smem)) return -1;
        dim3 grid(n_tiles, heads);
        attn_pp_k<<<grid, NT, smem, S_(st)>>>(qm, km, vm, rows, lohi, head_end, tail_start, tiles,
                                              sl2, gate, heads, (bf16 *)out, ld_o);
        LAUNCH_CHECK("attention_wgmma");
        return 0;
    }
}

extern "C" int vdn_k_attention_wgmma(const void *q, int ldq, const void *k, int ldk, const void *v,
                                     int ldv, void *vt_scratch, int rows, int heads, int head_dim,
                                     const int *lohi, int head_end, int tail_start,
                                     const int *tiles, int n_tiles, float scale, const float *gate,
                                     void *out, int ld_o, vdn_stream st) {
    if ((ldq | ldk) % 8 || ld_o % 2 || n_tiles != (rows + BM - 1) / BM ||
        (head_dim != 64 && head_dim != 128)) {
        fprintf(stderr,
                "vdn_k_attention_wgmma: strides %d/%d must be multiples of 8, tiles %d for %d "
                "rows, head dim %d must be 64 or 128\n",
                ldq, ldk, n_tiles, rows, head_dim);
        return -1;
    }
    if (head_dim == 128)
        return attention_pp<128>(q, ldq, k, ldk, v, ldv, vt_scratch, rows, heads, lohi, head_end,
                                 tail_start, tiles, n_tiles, scale, gate, out, ld_o, st);
    return attention_pp<64>(q, ldq, k, ldk, v, ldv, vt_scratch, rows, heads, lohi, head_end,
                            tail_start, tiles, n_tiles, scale, gate, out, ld_o, st);
}
