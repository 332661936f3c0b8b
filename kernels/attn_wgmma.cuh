/* Pieces of the Hopper attention kernels (attn_pingpong.cu: head dim 128, the DiT's;
 * attn_pp64.cu: head dim 64, the video VAE decoder's; their launcher is attn_wgmma.cu). Same
 * contract as the portable mma.sync kernel attn.cu (attn_tiles.h). The head dim HD is a template
 * parameter of the pieces below:
 *
 *   CTA of attn_pingpong.cu = 128 query rows x one head = 2 warpgroups of 64 rows; 128-key
 *   blocks (attn_pp64.cu: 3 warpgroups, 192 rows; its header says why).
 *   S = Q K^T : wgmma m64n128k16 (HD / 16 of them), A = Q and B = K both from shared memory
 *               (K-major);
 *   O += P V  : wgmma m64nHDk16, A = P from registers (the S accumulators, rounded to bf16, are
 *               already in the A-fragment layout), B = V^T from shared memory (K-major: V is
 *               transposed per head into [d][keys] once per call by vt_k).
 *   Tiles sit in shared memory in the 128-byte-swizzled layout wgmma descriptors expect: a
 *   [rows][w] tile is w / 64 [rows][64] halves (one for a [rows][64] Q or K tile of HD 64); row
 *   r's 16-byte chunk c is stored at c ^ (r & 7).
 *
 * A thread owns two query rows (row_a, row_a + 8) and, per 128-key block, 64 accumulators of S
 * (m64n128 fragment layout: s[4j + e] is (row_a, key 8j + 2 t4 + e) and s[4j + 2 + e] is (row_b,
 * same key)) and HD / 2 of O in the same layout over the HD columns. */
#ifndef VDN_ATTN_WGMMA_CUH
#define VDN_ATTN_WGMMA_CUH

#include <cudaTypedefs.h>

#include "cuda_util.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

#define BM 128
#define BN 128
#define NT 256

__device__ __forceinline__ void wgmma_ss(float *d, uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%"
                 "22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%"
                 "42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%"
                 "62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                   "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_rs(float *d, const unsigned *a, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%"
                 "22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%"
                 "42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%"
                 "62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                   "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}

/* the same product with n = 64 (O += P V of head dim 64) */
__device__ __forceinline__ void wgmma_rs64(float *d, const unsigned *a, uint64_t db,
                                           int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%"
                 "22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}
/* O += P V's wgmma for head dim HD (n = HD) */
template <int HD>
__device__ __forceinline__ void wgmma_pv(float *d, const unsigned *a, uint64_t db, int acc) {
    static_assert(HD == 64 || HD == 128, "head dim 64 or 128");
    if constexpr (HD == 128)
        wgmma_rs(d, a, db, acc);
    else
        wgmma_rs64(d, a, db, acc);
}

/* named barrier 1 between the two warpgroups (barrier 0 is __syncthreads) */
__device__ __forceinline__ void named_sync(int id, int n) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int n) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
/* K and V^T stages of attn_pingpong.cu's ring: 3 at head dim 128 (224 KB of shared memory with
 * Q). A block's copies are issued PP_AHEAD = 2 blocks before its use, into the stage of block
 * j - 3, the block just before the current one, so the refill (thread 0, blocking warpgroup 0)
 * waits until the other warpgroup has finished its softmax of it: warpgroup 0 cannot issue its
 * next products while warpgroup 1's softmax runs (a 4th stage made head dim 64 8% faster when it
 * ran this kernel; head dim 128 has no room for one). */
#define PP_STAGES 3
#define PP_AHEAD 2

/* TMA: a 3-D box of a tensor map into shared memory, completing on an mbarrier */
__device__ __forceinline__ void tma3(void *dst, const CUtensorMap *map, int c0, int c1, int c2,
                                     uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(saddr(dst)),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(saddr(bar))
                 : "memory");
}

/* The key blocks of one query tile (attn_tiles.h: up to three key ranges [rs, re) per tile, and
 * whether its rows disagree, `mixed`): block i starts at key kb, rounded down to a multiple of
 * BN, and belongs to range [s, e). */
struct KeyBlocks {
    int mixed, nb;
    int rs0, re0, rs1, re1, rs2, re2, rb0, rb1;
    __device__ __forceinline__ KeyBlocks(const int *tl) {
        const int nr = tl[0];
        mixed = tl[1];
        rs0 = nr > 0 ? tl[2] : 0, re0 = nr > 0 ? tl[3] : 0;
        rs1 = nr > 1 ? tl[4] : 0, re1 = nr > 1 ? tl[5] : 0;
        rs2 = nr > 2 ? tl[6] : 0, re2 = nr > 2 ? tl[7] : 0;
        rb0 = nr > 0 ? (re0 - (rs0 / BN) * BN + BN - 1) / BN : 0;
        rb1 = nr > 1 ? (re1 - (rs1 / BN) * BN + BN - 1) / BN : 0;
        const int rb2 = nr > 2 ? (re2 - (rs2 / BN) * BN + BN - 1) / BN : 0;
        nb = rb0 + rb1 + rb2;
    }
    __device__ __forceinline__ void at(int i, int &s, int &e, int &kb) const {
        if (i < rb0) {
            s = rs0, e = re0, kb = (rs0 / BN) * BN + i * BN;
        } else if (i < rb0 + rb1) {
            s = rs1, e = re1, kb = (rs1 / BN) * BN + (i - rb0) * BN;
        } else {
            s = rs2, e = re2, kb = (rs2 / BN) * BN + (i - rb0 - rb1) * BN;
        }
    }
};

/* One thread's two query rows: their window (only read in mixed tiles), the online-softmax
 * state, and the final normalise + gate + store. */
struct Rows {
    int row_a, row_b, lo_a, hi_a, lo_b, hi_b;
    float m_a, m_b, l_a, l_b, corr_a, corr_b;
    __device__ __forceinline__ Rows(int q0, int mixed, const int *lohi, int N) {
        const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, g = (threadIdx.x & 31) >> 2;
        row_a = q0 + wg * 64 + warp * 16 + g, row_b = row_a + 8;
        lo_a = hi_a = lo_b = hi_b = 0;
        if (mixed) {
            if (row_a < N) lo_a = lohi[2 * row_a], hi_a = lohi[2 * row_a + 1];
            if (row_b < N) lo_b = lohi[2 * row_b], hi_b = lohi[2 * row_b + 1];
        }
        m_a = m_b = -INFINITY, l_a = l_b = 0.f, corr_a = corr_b = 1.f;
    }

    /* Softmax of key block i in place: s holds the raw scores Q K^T (the scale folds into exp2)
     * and becomes the probabilities; m, l and the O rescale factors corr are updated. Keys
     * outside the block's range, past N, or (mixed tiles) outside a row's window get -inf. */
    __device__ __forceinline__ void softmax(float *s, const KeyBlocks &kbs, int i, int N,
                                            int head_end, int tail_start, float scale_log2) {
        const int t4 = threadIdx.x & 3;
        int rcur_s, rcur_e, kb;
        kbs.at(i, rcur_s, rcur_e, kb);
        const int mixed = kbs.mixed;
        const bool edge = mixed || kb < rcur_s || kb + BN > rcur_e || kb + BN > N;
        float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float va = s[4 * j + e], vb = s[4 * j + 2 + e];
                if (edge) {
                    int kx = kb + j * 8 + 2 * t4 + e;
                    bool in = kx >= rcur_s && kx < rcur_e && kx < N;
                    bool oka = in, okb = in;
                    if (mixed && in && kx >= head_end && kx < tail_start) {
                        oka = kx >= lo_a && kx < hi_a;
                        okb = kx >= lo_b && kx < hi_b;
                    }
                    if (!oka) va = -INFINITY;
                    if (!okb) vb = -INFINITY;
                }
                s[4 * j + e] = va, s[4 * j + 2 + e] = vb;
                mx_a = fmaxf(mx_a, va), mx_b = fmaxf(mx_b, vb);
            }
        }
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
        const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
        const float base_a = mn_a == -INFINITY ? 0.f : mn_a * scale_log2;
        const float base_b = mn_b == -INFINITY ? 0.f : mn_b * scale_log2;
        corr_a = exp2f(m_a * scale_log2 - base_a), corr_b = exp2f(m_b * scale_log2 - base_b);
        m_a = mn_a, m_b = mn_b;
        float sum_a = 0.f, sum_b = 0.f;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            float p0 = exp2f(fmaf(s[4 * j], scale_log2, -base_a)),
                  p1 = exp2f(fmaf(s[4 * j + 1], scale_log2, -base_a));
            float p2 = exp2f(fmaf(s[4 * j + 2], scale_log2, -base_b)),
                  p3 = exp2f(fmaf(s[4 * j + 3], scale_log2, -base_b));
            sum_a += p0 + p1, sum_b += p2 + p3;
            s[4 * j] = p0, s[4 * j + 1] = p1, s[4 * j + 2] = p2, s[4 * j + 3] = p3;
        }
        l_a = l_a * corr_a + sum_a, l_b = l_b * corr_b + sum_b;
    }

    /* O *= corr (after the previous P V product has landed in o) */
    template <int HD> __device__ __forceinline__ void rescale(float *o) const {
#pragma unroll
        for (int c = 0; c < HD / 8; c++)
            o[4 * c] *= corr_a, o[4 * c + 1] *= corr_a, o[4 * c + 2] *= corr_b,
                o[4 * c + 3] *= corr_b;
    }

    /* O / l (times the gate) to bf16 rows of the output */
    template <int HD>
    __device__ __forceinline__ void store(const float *o, const float *gate, int heads, int h,
                                          bf16 *O, int ldo, int N) {
        const int t4 = threadIdx.x & 3;
        l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
        l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
        l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
        l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
        float ia = l_a > 0.f ? 1.f / l_a : 0.f, ib = l_b > 0.f ? 1.f / l_b : 0.f;
        if (gate) {
            if (row_a < N) ia *= gate[(size_t)row_a * heads + h];
            if (row_b < N) ib *= gate[(size_t)row_b * heads + h];
        }
#pragma unroll
        for (int c = 0; c < HD / 8; c++) {
            int col = h * HD + c * 8 + 2 * t4;
            if (row_a < N)
                *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)row_a * ldo + col) =
                    __floats2bfloat162_rn(o[4 * c] * ia, o[4 * c + 1] * ia);
            if (row_b < N)
                *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)row_b * ldo + col) =
                    __floats2bfloat162_rn(o[4 * c + 2] * ib, o[4 * c + 3] * ib);
        }
    }
};

/* probabilities s -> the bf16 A fragments of P V */
__device__ __forceinline__ void pack_p(const float *s, unsigned (*pf)[4]) {
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        pf[j >> 1][(j & 1) * 2 + 0] = pack_bf2(s[4 * j], s[4 * j + 1]);
        pf[j >> 1][(j & 1) * 2 + 1] = pack_bf2(s[4 * j + 2], s[4 * j + 3]);
    }
}

/* S = Q K^T of this warpgroup's 64 rows (qw) against a key tile, issued (not waited for) */
template <int HD>
__device__ __forceinline__ void issue_qk(float *s, const char *qw, const char *k_tile) {
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++)
        wgmma_ss(s, desc(qw + (kk >> 2) * BM * 128 + (kk & 3) * 32),
                 desc(k_tile + (kk >> 2) * BN * 128 + (kk & 3) * 32), kk > 0);
}
/* O += P V against a V^T tile, issued (not waited for) */
template <int HD>
__device__ __forceinline__ void issue_pv(float *o, unsigned (*pf)[4], const char *v_tile) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++)
        wgmma_pv<HD>(o, pf[kk], desc(v_tile + (kk >> 2) * HD * 128 + (kk & 3) * 32), 1);
}

/* the kernel of attn_pingpong.cu (head dim 128) */
#define ATTN_PP_ARGS                                                                               \
    const __grid_constant__ CUtensorMap qmap, const __grid_constant__ CUtensorMap kmap,            \
        const __grid_constant__ CUtensorMap vmap, int N, const int *__restrict__ lohi,             \
        int head_end, int tail_start, const int *__restrict__ tiles, float scale_log2,             \
        const float *__restrict__ gate, int heads, bf16 *__restrict__ O, int ldo
__global__ void attn_pp_k(ATTN_PP_ARGS);
/* shared memory of one CTA: Q, then the stages' K and V^T tiles, plus 1024 for the alignment */
#define ATTN_PP_SMEM(hd) ((BM + 2 * PP_STAGES * BN) * 2 * (hd) + 1024)

/* Head dim 64's persistent kernel (attn_pp64.cu): query tiles of ATTN_P64_ROWS rows (the Q
 * tensor map's box); max_ctas > 0 caps its grid (kernels.h vdn_attention_hd64_grid_cap). */
#define ATTN_P64_ROWS 192
int attn_p64_launch(int max_ctas, const CUtensorMap &qm, const CUtensorMap &km,
                    const CUtensorMap &vm, int N, const int *lohi, int head_end, int tail_start,
                    float sl2, const float *gate, int heads, bf16 *O, int ldo, cudaStream_t st);

#endif
