/* Block-sparse flash attention on Hopper tensor cores: wgmma (sm_90a), bf16 in, fp32 accumulation,
 * head dim 128. Same contract and key-range walk as attn.cu (attn_tiles.h), FlashAttention-3's
 * operand layout without its warp specialisation:
 *
 *   CTA = 128 query rows x one head = 2 warpgroups of 64 rows; 128-key blocks.
 *   S = Q K^T : wgmma m64n128k16, A = Q and B = K both from shared memory (K-major);
 *   O += P V  : wgmma m64n128k16, A = P from registers (the S accumulators, rounded to bf16, are
 *               already in the A-fragment layout), B = V^T from shared memory (K-major: V is
 *               transposed per head into [d][keys] once per call by vt_k, a cheap extra pass).
 *   Tiles sit in shared memory in the 128-byte-swizzled layout wgmma descriptors expect: a
 *   [rows][128] tile is two [rows][64] halves; row r's 16-byte chunk c is stored at c ^ (r & 7).
 *   K and V^T are double-buffered with cp.async; all 256 threads load, then both warpgroups
 *   compute (no producer/consumer split, no softmax/MMA overlap: the two things FA3 adds).
 */
#include <cudaTypedefs.h>
#include <stdlib.h>

#include "cuda_util.cuh"

#define BM 128
#define BN 128
#define HD 128
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

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait0() {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait1() {
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}
/* Registers an in-flight wgmma reads or writes must not be touched (or reused) by the compiler
 * before the matching wait: an empty asm that "modifies" them pins them after it. */
template <int N> __device__ __forceinline__ void fence_regs(float *r) {
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> __device__ __forceinline__ void fence_regs(unsigned *r) {
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+r"(r[i])::"memory");
}
/* named barrier 1 between the two warpgroups (barrier 0 is __syncthreads) */
__device__ __forceinline__ void named_sync(int id, int n) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int n) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void fence_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* shared-memory matrix descriptor: 128B swizzle, 8-row groups 1024 bytes apart */
__device__ __forceinline__ uint64_t desc(const void *p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

__device__ __forceinline__ void cp16(void *smem, const void *g, int bytes) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(g), "r"(bytes));
}
__device__ __forceinline__ void cp_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ unsigned pack_bf2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
}

/* byte offset of 16-byte chunk c (0..15) of row r in a swizzled [rows][128] bf16 tile */
__device__ __forceinline__ int swz(int rows, int r, int c) {
    return (c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

/* [128][128] tile: row r from g + (row0 + r) * ld (16-byte chunks), rows >= limit zero-filled */
__device__ __forceinline__ void load128(char *sm, const bf16 *g, size_t ld, int row0, int limit) {
#pragma unroll
    for (int i = 0; i < 128 * 16 / NT; i++) {
        int c = threadIdx.x + i * NT, r = c >> 4, ch = c & 15;
        int gr = row0 + r;
        const bf16 *src = g + (size_t)(gr < limit ? gr : 0) * ld + ch * 8;
        cp16(sm + swz(128, r, ch), src, gr < limit ? 16 : 0);
    }
}

/* V^T tile: 128 d-rows of Vt (row stride ldt keys, zero-padded past N), keys kb..kb+127 */
__device__ __forceinline__ void load_vt(char *sm, const bf16 *vt, size_t ldt, int kb) {
#pragma unroll
    for (int i = 0; i < 128 * 16 / NT; i++) {
        int c = threadIdx.x + i * NT, r = c >> 4, ch = c & 15;
        cp16(sm + swz(128, r, ch), vt + (size_t)r * ldt + kb + ch * 8, 16);
    }
}

__global__ void __launch_bounds__(NT, 1)
    attn_wg_k(const bf16 *__restrict__ Q, const bf16 *__restrict__ K, const bf16 *__restrict__ Vt,
              int ldq, int ldk, size_t ldt, int N, const int *__restrict__ lohi, int head_end,
              int tail_start, const int *__restrict__ tiles, float scale_log2,
              const float *__restrict__ gate, int heads, bf16 *__restrict__ O, int ldo) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    char *base = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    char *sQ = base, *sK = sQ + BM * HD * 2, *sV = sK + 2 * BN * HD * 2;

    const int tile = blockIdx.x, h = blockIdx.y;
    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int g = lane >> 2, t4 = lane & 3;
    const int q0 = tile * BM;
    const bf16 *Qh = Q + h * HD, *Kh = K + h * HD, *Vh = Vt + (size_t)h * HD * ldt;

    const int *tl = tiles + tile * 8;
    const int nr = tl[0], mixed = tl[1];
    const int rs0 = nr > 0 ? tl[2] : 0, re0 = nr > 0 ? tl[3] : 0;
    const int rs1 = nr > 1 ? tl[4] : 0, re1 = nr > 1 ? tl[5] : 0;
    const int rs2 = nr > 2 ? tl[6] : 0, re2 = nr > 2 ? tl[7] : 0;
    const int rb0 = nr > 0 ? (re0 - (rs0 / BN) * BN + BN - 1) / BN : 0;
    const int rb1 = nr > 1 ? (re1 - (rs1 / BN) * BN + BN - 1) / BN : 0;
    const int rb2 = nr > 2 ? (re2 - (rs2 / BN) * BN + BN - 1) / BN : 0;
    const int nb = rb0 + rb1 + rb2;
    auto block_at = [&](int i, int &s, int &e, int &kb) {
        if (i < rb0) {
            s = rs0, e = re0, kb = (rs0 / BN) * BN + i * BN;
        } else if (i < rb0 + rb1) {
            s = rs1, e = re1, kb = (rs1 / BN) * BN + (i - rb0) * BN;
        } else {
            s = rs2, e = re2, kb = (rs2 / BN) * BN + (i - rb0 - rb1) * BN;
        }
    };

    load128(sQ, Qh, ldq, q0, N);
    cp_commit();
    if (nb > 0) {
        int s_, e_, kb;
        block_at(0, s_, e_, kb);
        load128(sK, Kh, ldk, kb, N);
        load_vt(sV, Vh, ldt, kb);
    }
    cp_commit();

    const int row_a = q0 + wg * 64 + warp * 16 + g, row_b = row_a + 8;
    int lo_a = 0, hi_a = 0, lo_b = 0, hi_b = 0;
    if (mixed) {
        if (row_a < N) lo_a = lohi[2 * row_a], hi_a = lohi[2 * row_a + 1];
        if (row_b < N) lo_b = lohi[2 * row_b], hi_b = lohi[2 * row_b + 1];
    }
    float o[64], s[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        o[i] = 0.f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;
    const char *qw = sQ + wg * 64 * 128; /* this warpgroup's 64 rows inside each half */

    for (int i = 0; i < nb; i++) {
        const int cur = i & 1;
        if (i + 1 < nb) {
            int s_, e_, kb;
            block_at(i + 1, s_, e_, kb);
            load128(sK + (cur ^ 1) * BN * HD * 2, Kh, ldk, kb, N);
            load_vt(sV + (cur ^ 1) * BN * HD * 2, Vh, ldt, kb);
        }
        cp_commit();
        cp_wait<1>();
        fence_async_smem();
        __syncthreads();

        int rcur_s, rcur_e, kb;
        block_at(i, rcur_s, rcur_e, kb);
        const char *k_s = sK + cur * BN * HD * 2, *v_s = sV + cur * BN * HD * 2;

        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
            wgmma_ss(s, desc(qw + (kk >> 2) * BM * 128 + (kk & 3) * 32),
                     desc(k_s + (kk >> 2) * BN * 128 + (kk & 3) * 32), kk > 0);
        wgmma_commit();
        wgmma_wait0();

        const bool edge = mixed || kb < rcur_s || kb + BN > rcur_e || kb + BN > N;
        float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float va = s[4 * j + e] * scale_log2, vb = s[4 * j + 2 + e] * scale_log2;
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
        const float base_a = mn_a == -INFINITY ? 0.f : mn_a;
        const float base_b = mn_b == -INFINITY ? 0.f : mn_b;
        const float corr_a = exp2f(m_a - base_a), corr_b = exp2f(m_b - base_b);
        m_a = mn_a, m_b = mn_b;
        float sum_a = 0.f, sum_b = 0.f;
        unsigned pf[BN / 16][4];
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            float p0 = exp2f(s[4 * j] - base_a), p1 = exp2f(s[4 * j + 1] - base_a);
            float p2 = exp2f(s[4 * j + 2] - base_b), p3 = exp2f(s[4 * j + 3] - base_b);
            sum_a += p0 + p1, sum_b += p2 + p3;
            pf[j >> 1][(j & 1) * 2 + 0] = pack_bf2(p0, p1);
            pf[j >> 1][(j & 1) * 2 + 1] = pack_bf2(p2, p3);
        }
        l_a = l_a * corr_a + sum_a, l_b = l_b * corr_b + sum_b;
#pragma unroll
        for (int c = 0; c < 16; c++)
            o[4 * c] *= corr_a, o[4 * c + 1] *= corr_a, o[4 * c + 2] *= corr_b,
                o[4 * c + 3] *= corr_b;

        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wgmma_rs(o, pf[kk], desc(v_s + (kk >> 2) * HD * 128 + (kk & 3) * 32), 1);
        wgmma_commit();
        wgmma_wait0();
        __syncthreads();
    }

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
    for (int c = 0; c < 16; c++) {
        int col = h * HD + c * 8 + 2 * t4;
        if (row_a < N)
            *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)row_a * ldo + col) =
                __floats2bfloat162_rn(o[4 * c] * ia, o[4 * c + 1] * ia);
        if (row_b < N)
            *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)row_b * ldo + col) =
                __floats2bfloat162_rn(o[4 * c + 2] * ib, o[4 * c + 3] * ib);
    }
}

/* Pipelined variant: in iteration i the warpgroup issues S_{i+1} = Q K_{i+1}^T and then
 * O += P_i V_i, waits only for S_{i+1}, and runs the softmax of block i+1 while the P V product
 * is still on the tensor cores; O is rescaled once that product has landed. K_{i+2} and V_{i+1}
 * are loaded (cp.async) during iteration i, so every load has a whole iteration to arrive. */
/* STAGGER: warpgroup 1 issues its products after warpgroup 0 (a light form of FA3's
 * ping-pong), so one warpgroup's softmax can run under the other's matrix work */
template <bool STAGGER>
__global__ void __launch_bounds__(NT, 1)
    attn_wg2_k(const bf16 *__restrict__ Q, const bf16 *__restrict__ K, const bf16 *__restrict__ Vt,
               int ldq, int ldk, size_t ldt, int N, const int *__restrict__ lohi, int head_end,
               int tail_start, const int *__restrict__ tiles, float scale_log2,
               const float *__restrict__ gate, int heads, bf16 *__restrict__ O, int ldo) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    char *base = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    char *sQ = base, *sK = sQ + BM * HD * 2, *sV = sK + 2 * BN * HD * 2;
    const int TILE = BN * HD * 2;

    const int tile = blockIdx.x, h = blockIdx.y;
    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int g = lane >> 2, t4 = lane & 3;
    const int q0 = tile * BM;
    const bf16 *Qh = Q + h * HD, *Kh = K + h * HD, *Vh = Vt + (size_t)h * HD * ldt;

    const int *tl = tiles + tile * 8;
    const int nr = tl[0], mixed = tl[1];
    const int rs0 = nr > 0 ? tl[2] : 0, re0 = nr > 0 ? tl[3] : 0;
    const int rs1 = nr > 1 ? tl[4] : 0, re1 = nr > 1 ? tl[5] : 0;
    const int rs2 = nr > 2 ? tl[6] : 0, re2 = nr > 2 ? tl[7] : 0;
    const int rb0 = nr > 0 ? (re0 - (rs0 / BN) * BN + BN - 1) / BN : 0;
    const int rb1 = nr > 1 ? (re1 - (rs1 / BN) * BN + BN - 1) / BN : 0;
    const int rb2 = nr > 2 ? (re2 - (rs2 / BN) * BN + BN - 1) / BN : 0;
    const int nb = rb0 + rb1 + rb2;
    auto block_at = [&](int i, int &s, int &e, int &kb) {
        if (i < rb0) {
            s = rs0, e = re0, kb = (rs0 / BN) * BN + i * BN;
        } else if (i < rb0 + rb1) {
            s = rs1, e = re1, kb = (rs1 / BN) * BN + (i - rb0) * BN;
        } else {
            s = rs2, e = re2, kb = (rs2 / BN) * BN + (i - rb0 - rb1) * BN;
        }
    };
    auto load_k = [&](int i) {
        int s_, e_, kb;
        block_at(i, s_, e_, kb);
        load128(sK + (i & 1) * TILE, Kh, ldk, kb, N);
    };
    auto load_v = [&](int i) {
        int s_, e_, kb;
        block_at(i, s_, e_, kb);
        load_vt(sV + (i & 1) * TILE, Vh, ldt, kb);
    };

    const int row_a = q0 + wg * 64 + warp * 16 + g, row_b = row_a + 8;
    int lo_a = 0, hi_a = 0, lo_b = 0, hi_b = 0;
    if (mixed) {
        if (row_a < N) lo_a = lohi[2 * row_a], hi_a = lohi[2 * row_a + 1];
        if (row_b < N) lo_b = lohi[2 * row_b], hi_b = lohi[2 * row_b + 1];
    }
    float o[64], s[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        o[i] = 0.f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;
    const char *qw = sQ + wg * 64 * 128;
    unsigned pf[BN / 16][4];
    float corr_a = 1.f, corr_b = 1.f;

    /* softmax of block i in place (s becomes the probabilities), updating m, l and the O rescale
     * factors; packing into bf16 A fragments waits until the previous P V product is done */
    auto softmax = [&](int i) {
        int rcur_s, rcur_e, kb;
        block_at(i, rcur_s, rcur_e, kb);
        const bool edge = mixed || kb < rcur_s || kb + BN > rcur_e || kb + BN > N;
        float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float va = s[4 * j + e], vb = s[4 * j + 2 + e]; /* raw: scale folds into exp2 */
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
    };

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
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
            wgmma_ss(s, desc(qw + (kk >> 2) * BM * 128 + (kk & 3) * 32),
                     desc(sK + (kk >> 2) * BN * 128 + (kk & 3) * 32), kk > 0);
        wgmma_commit();
        wgmma_wait0();
        fence_regs<64>(s);
        softmax(0);
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            pf[j >> 1][(j & 1) * 2 + 0] = pack_bf2(s[4 * j], s[4 * j + 1]);
            pf[j >> 1][(j & 1) * 2 + 1] = pack_bf2(s[4 * j + 2], s[4 * j + 3]);
        }
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
        if (STAGGER && wg == 1) named_sync(1, NT); /* warpgroup 1 issues after warpgroup 0 */
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
            wgmma_ss(s, desc(qw + (kk >> 2) * BM * 128 + (kk & 3) * 32),
                     desc(kn + (kk >> 2) * BN * 128 + (kk & 3) * 32), kk > 0);
        wgmma_commit();
        wgmma_fence(); /* a separate stage: the softmax below reads S while P V runs */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wgmma_rs(o, pf[kk], desc(vc + (kk >> 2) * HD * 128 + (kk & 3) * 32), 1);
        wgmma_commit();
        if (STAGGER && wg == 0) named_arrive(1, NT);
        wgmma_wait1(); /* S_{i+1} is in; P_i V_i may still run */
        fence_regs<64>(s);
        softmax(i + 1);
        wgmma_wait0();
        fence_regs<64>(o);
        fence_regs<4 * (BN / 16)>(&pf[0][0]);
#pragma unroll
        for (int c = 0; c < 16; c++)
            o[4 * c] *= corr_a, o[4 * c + 1] *= corr_a, o[4 * c + 2] *= corr_b,
                o[4 * c + 3] *= corr_b;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            pf[j >> 1][(j & 1) * 2 + 0] = pack_bf2(s[4 * j], s[4 * j + 1]);
            pf[j >> 1][(j & 1) * 2 + 1] = pack_bf2(s[4 * j + 2], s[4 * j + 3]);
        }
    }
    if (nb > 0) { /* the last block: only its P V product is left */
        cp_wait<0>();
        fence_async_smem();
        __syncthreads();
        const char *vc = sV + ((nb - 1) & 1) * TILE;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wgmma_rs(o, pf[kk], desc(vc + (kk >> 2) * HD * 128 + (kk & 3) * 32), 1);
        wgmma_commit();
        wgmma_wait0();
        fence_regs<64>(o);
    }

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
    for (int c = 0; c < 16; c++) {
        int col = h * HD + c * 8 + 2 * t4;
        if (row_a < N)
            *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)row_a * ldo + col) =
                __floats2bfloat162_rn(o[4 * c] * ia, o[4 * c + 1] * ia);
        if (row_b < N)
            *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)row_b * ldo + col) =
                __floats2bfloat162_rn(o[4 * c + 2] * ib, o[4 * c + 3] * ib);
    }
}

/* mbarriers (shared memory, CTA scope) */
__device__ __forceinline__ uint32_t saddr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(saddr(b)), "r"(count)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(saddr(b)) : "memory");
}
/* arrive once all of this thread's earlier cp.async copies have landed */
__device__ __forceinline__ void cp_arrive(uint64_t *b) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(saddr(b))
                 : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, int parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(saddr(b)), "r"(parity)
                     : "memory");
}
#define NSTAGE 3

/* Decoupled variant: the same pipelined loop, but the K/V^T tiles go through a ring of NSTAGE
 * stages guarded by mbarriers instead of __syncthreads, so the two warpgroups are free to drift
 * apart (up to a stage) and one's softmax overlaps the other's tensor-core work. Every thread
 * copies its share of a stage with cp.async and arrives on the stage's `full` barrier through
 * cp.async.mbarrier.arrive; it arrives on `empty` once its P V product has read the stage. */
__global__ void __launch_bounds__(NT, 1)
    attn_wg3_k(const bf16 *__restrict__ Q, const bf16 *__restrict__ K, const bf16 *__restrict__ Vt,
               int ldq, int ldk, size_t ldt, int N, const int *__restrict__ lohi, int head_end,
               int tail_start, const int *__restrict__ tiles, float scale_log2,
               const float *__restrict__ gate, int heads, bf16 *__restrict__ O, int ldo) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    char *base = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    /* NSTAGE stages of (K, V^T) tiles after Q; full[s] completes when the 256 threads' copies
     * into stage s have landed, empty[s] when both warpgroups are done reading it */
    char *sQ = base, *sK = sQ + BM * HD * 2, *sV = sK + NSTAGE * BN * HD * 2;
    const int TILE = BN * HD * 2;
    __shared__ __align__(8) uint64_t full[NSTAGE], empty[NSTAGE];
    if (threadIdx.x == 0)
        for (int k = 0; k < NSTAGE; k++)
            mbar_init(&full[k], NT), mbar_init(&empty[k], NT);
    __syncthreads();

    const int tile = blockIdx.x, h = blockIdx.y;
    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int g = lane >> 2, t4 = lane & 3;
    const int q0 = tile * BM;
    const bf16 *Qh = Q + h * HD, *Kh = K + h * HD, *Vh = Vt + (size_t)h * HD * ldt;

    const int *tl = tiles + tile * 8;
    const int nr = tl[0], mixed = tl[1];
    const int rs0 = nr > 0 ? tl[2] : 0, re0 = nr > 0 ? tl[3] : 0;
    const int rs1 = nr > 1 ? tl[4] : 0, re1 = nr > 1 ? tl[5] : 0;
    const int rs2 = nr > 2 ? tl[6] : 0, re2 = nr > 2 ? tl[7] : 0;
    const int rb0 = nr > 0 ? (re0 - (rs0 / BN) * BN + BN - 1) / BN : 0;
    const int rb1 = nr > 1 ? (re1 - (rs1 / BN) * BN + BN - 1) / BN : 0;
    const int rb2 = nr > 2 ? (re2 - (rs2 / BN) * BN + BN - 1) / BN : 0;
    const int nb = rb0 + rb1 + rb2;
    auto block_at = [&](int i, int &s, int &e, int &kb) {
        if (i < rb0) {
            s = rs0, e = re0, kb = (rs0 / BN) * BN + i * BN;
        } else if (i < rb0 + rb1) {
            s = rs1, e = re1, kb = (rs1 / BN) * BN + (i - rb0) * BN;
        } else {
            s = rs2, e = re2, kb = (rs2 / BN) * BN + (i - rb0 - rb1) * BN;
        }
    };
    auto load_k = [&](int i) {
        int s_, e_, kb;
        block_at(i, s_, e_, kb);
        load128(sK + (i % NSTAGE) * TILE, Kh, ldk, kb, N);
    };
    auto load_v = [&](int i) {
        int s_, e_, kb;
        block_at(i, s_, e_, kb);
        load_vt(sV + (i % NSTAGE) * TILE, Vh, ldt, kb);
    };

    const int row_a = q0 + wg * 64 + warp * 16 + g, row_b = row_a + 8;
    int lo_a = 0, hi_a = 0, lo_b = 0, hi_b = 0;
    if (mixed) {
        if (row_a < N) lo_a = lohi[2 * row_a], hi_a = lohi[2 * row_a + 1];
        if (row_b < N) lo_b = lohi[2 * row_b], hi_b = lohi[2 * row_b + 1];
    }
    float o[64], s[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        o[i] = 0.f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;
    const char *qw = sQ + wg * 64 * 128;
    unsigned pf[BN / 16][4];
    float corr_a = 1.f, corr_b = 1.f;

    /* softmax of block i in place (s becomes the probabilities), updating m, l and the O rescale
     * factors; packing into bf16 A fragments waits until the previous P V product is done */
    auto softmax = [&](int i) {
        int rcur_s, rcur_e, kb;
        block_at(i, rcur_s, rcur_e, kb);
        const bool edge = mixed || kb < rcur_s || kb + BN > rcur_e || kb + BN > N;
        float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float va = s[4 * j + e], vb = s[4 * j + 2 + e]; /* raw: scale folds into exp2 */
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
    };

    /* prologue: Q, K_0, V_0, then K_1 in flight; S_0 and its softmax */
    load128(sQ, Qh, ldq, q0, N);
    /* block j lives in stage j % NSTAGE; its copies are the (j / NSTAGE)-th use of that stage */
    auto fill = [&](int j) {
        if (j >= NSTAGE) mbar_wait(&empty[j % NSTAGE], ((j / NSTAGE) - 1) & 1);
        load_k(j), load_v(j);
        cp_arrive(&full[j % NSTAGE]);
    };
    if (nb > 0) load_k(0), load_v(0); /* Q rides with stage 0 */
    cp_arrive(&full[0]);
    for (int j = 1; j < NSTAGE - 1 && j < nb; j++)
        fill(j);
    if (nb > 0) mbar_wait(&full[0], 0);
    fence_async_smem();
    if (nb > 0) {
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
            wgmma_ss(s, desc(qw + (kk >> 2) * BM * 128 + (kk & 3) * 32),
                     desc(sK + (kk >> 2) * BN * 128 + (kk & 3) * 32), kk > 0);
        wgmma_commit();
        wgmma_wait0();
        fence_regs<64>(s);
        softmax(0);
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            pf[j >> 1][(j & 1) * 2 + 0] = pack_bf2(s[4 * j], s[4 * j + 1]);
            pf[j >> 1][(j & 1) * 2 + 1] = pack_bf2(s[4 * j + 2], s[4 * j + 3]);
        }
    }

    /* all but the last block: S_{i+1} always exists, so the loop body has no branches around
     * the asynchronous products */
    for (int i = 0; i + 1 < nb; i++) {
        if (i + NSTAGE - 1 < nb) fill(i + NSTAGE - 1); /* waits until both warpgroups freed it */
        mbar_wait(&full[(i + 1) % NSTAGE], ((i + 1) / NSTAGE) & 1); /* K_{i+1}, V_{i+1} landed */
        fence_async_smem();
        const char *kn = sK + ((i + 1) % NSTAGE) * TILE, *vc = sV + (i % NSTAGE) * TILE;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
            wgmma_ss(s, desc(qw + (kk >> 2) * BM * 128 + (kk & 3) * 32),
                     desc(kn + (kk >> 2) * BN * 128 + (kk & 3) * 32), kk > 0);
        wgmma_commit();
        wgmma_fence(); /* a separate stage: the softmax below reads S while P V runs */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wgmma_rs(o, pf[kk], desc(vc + (kk >> 2) * HD * 128 + (kk & 3) * 32), 1);
        wgmma_commit();
        wgmma_wait1(); /* S_{i+1} is in; P_i V_i may still run */
        fence_regs<64>(s);
        softmax(i + 1);
        wgmma_wait0();
        fence_regs<64>(o);
        fence_regs<4 * (BN / 16)>(&pf[0][0]);
        mbar_arrive(&empty[i % NSTAGE]); /* this thread is done with K_i and V_i */
#pragma unroll
        for (int c = 0; c < 16; c++)
            o[4 * c] *= corr_a, o[4 * c + 1] *= corr_a, o[4 * c + 2] *= corr_b,
                o[4 * c + 3] *= corr_b;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            pf[j >> 1][(j & 1) * 2 + 0] = pack_bf2(s[4 * j], s[4 * j + 1]);
            pf[j >> 1][(j & 1) * 2 + 1] = pack_bf2(s[4 * j + 2], s[4 * j + 3]);
        }
    }
    if (nb > 0) { /* the last block: only its P V product is left */
        const char *vc = sV + ((nb - 1) % NSTAGE) * TILE; /* landed: waited for its K */
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wgmma_rs(o, pf[kk], desc(vc + (kk >> 2) * HD * 128 + (kk & 3) * 32), 1);
        wgmma_commit();
        wgmma_wait0();
        fence_regs<64>(o);
    }

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
    for (int c = 0; c < 16; c++) {
        int col = h * HD + c * 8 + 2 * t4;
        if (row_a < N)
            *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)row_a * ldo + col) =
                __floats2bfloat162_rn(o[4 * c] * ia, o[4 * c + 1] * ia);
        if (row_b < N)
            *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)row_b * ldo + col) =
                __floats2bfloat162_rn(o[4 * c + 2] * ib, o[4 * c + 3] * ib);
    }
}

/* TMA: a 3-D box of a tensor map into shared memory, completing on an mbarrier */
__device__ __forceinline__ void tma3(void *dst, const CUtensorMap *map, int c0, int c1, int c2,
                                     uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(saddr(dst)),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(saddr(bar))
                 : "memory");
}
/* arrive once and expect `bytes` of TMA data on the barrier's current phase */
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(saddr(b)),
                 "r"(bytes)
                 : "memory");
}

/* TMA variant: variant 4's stage ring, filled by the tensor memory accelerator. One thread
 * issues each tile as two bulk tensor copies (64-column halves, 128-byte swizzle, rows past N
 * zero-filled by the hardware) completing on the stage's `full` mbarrier, so the warpgroups spend
 * no instructions on address arithmetic for loads. */
template <bool PINGPONG>
__global__ void __launch_bounds__(NT, 1)
    attn_wg4_k(const __grid_constant__ CUtensorMap qmap, const __grid_constant__ CUtensorMap kmap,
               const __grid_constant__ CUtensorMap vmap, int N, const int *__restrict__ lohi,
               int head_end, int tail_start, const int *__restrict__ tiles, float scale_log2,
               const float *__restrict__ gate, int heads, bf16 *__restrict__ O, int ldo) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    char *base = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    /* NSTAGE stages of (K, V^T) tiles after Q; full[s] completes when the 256 threads' copies
     * into stage s have landed, empty[s] when both warpgroups are done reading it */
    char *sQ = base, *sK = sQ + BM * HD * 2, *sV = sK + NSTAGE * BN * HD * 2;
    const int TILE = BN * HD * 2;
    __shared__ __align__(8) uint64_t full[NSTAGE], empty[NSTAGE];
    if (threadIdx.x == 0)
        for (int k = 0; k < NSTAGE; k++)
            mbar_init(&full[k], 1), mbar_init(&empty[k], NT);
    __syncthreads();

    const int tile = blockIdx.x, h = blockIdx.y;
    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int g = lane >> 2, t4 = lane & 3;
    const int q0 = tile * BM;

    const int *tl = tiles + tile * 8;
    const int nr = tl[0], mixed = tl[1];
    const int rs0 = nr > 0 ? tl[2] : 0, re0 = nr > 0 ? tl[3] : 0;
    const int rs1 = nr > 1 ? tl[4] : 0, re1 = nr > 1 ? tl[5] : 0;
    const int rs2 = nr > 2 ? tl[6] : 0, re2 = nr > 2 ? tl[7] : 0;
    const int rb0 = nr > 0 ? (re0 - (rs0 / BN) * BN + BN - 1) / BN : 0;
    const int rb1 = nr > 1 ? (re1 - (rs1 / BN) * BN + BN - 1) / BN : 0;
    const int rb2 = nr > 2 ? (re2 - (rs2 / BN) * BN + BN - 1) / BN : 0;
    const int nb = rb0 + rb1 + rb2;
    auto block_at = [&](int i, int &s, int &e, int &kb) {
        if (i < rb0) {
            s = rs0, e = re0, kb = (rs0 / BN) * BN + i * BN;
        } else if (i < rb0 + rb1) {
            s = rs1, e = re1, kb = (rs1 / BN) * BN + (i - rb0) * BN;
        } else {
            s = rs2, e = re2, kb = (rs2 / BN) * BN + (i - rb0 - rb1) * BN;
        }
    };
    auto load_kv =
        [&](int i) { /* thread 0 only */
                     int s_, e_, kb;
                     block_at(i, s_, e_, kb);
                     char *ks = sK + (i % NSTAGE) * TILE, *vs = sV + (i % NSTAGE) * TILE;
                     uint64_t *bar = &full[i % NSTAGE];
                     tma3(ks, &kmap, 0, h, kb, bar), tma3(ks + BN * 128, &kmap, 64, h, kb, bar);
                     tma3(vs, &vmap, kb, 0, h, bar), tma3(vs + HD * 128, &vmap, kb + 64, 0, h, bar);
        };
    const int row_a = q0 + wg * 64 + warp * 16 + g, row_b = row_a + 8;
    int lo_a = 0, hi_a = 0, lo_b = 0, hi_b = 0;
    if (mixed) {
        if (row_a < N) lo_a = lohi[2 * row_a], hi_a = lohi[2 * row_a + 1];
        if (row_b < N) lo_b = lohi[2 * row_b], hi_b = lohi[2 * row_b + 1];
    }
    float o[64], s[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        o[i] = 0.f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;
    const char *qw = sQ + wg * 64 * 128;
    unsigned pf[BN / 16][4];
    float corr_a = 1.f, corr_b = 1.f;

    /* softmax of block i in place (s becomes the probabilities), updating m, l and the O rescale
     * factors; packing into bf16 A fragments waits until the previous P V product is done */
    auto softmax = [&](int i) {
        int rcur_s, rcur_e, kb;
        block_at(i, rcur_s, rcur_e, kb);
        const bool edge = mixed || kb < rcur_s || kb + BN > rcur_e || kb + BN > N;
        float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float va = s[4 * j + e], vb = s[4 * j + 2 + e]; /* raw: scale folds into exp2 */
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
    };

    /* prologue: Q, K_0, V_0, then K_1 in flight; S_0 and its softmax */
    /* block j lives in stage j % NSTAGE; its copies are the (j / NSTAGE)-th use of that stage */
    auto fill = [&](int j) { /* thread 0 only */
                             if (j >= NSTAGE) mbar_wait(&empty[j % NSTAGE], ((j / NSTAGE) - 1) & 1);
                             mbar_expect_tx(&full[j % NSTAGE], 2 * TILE);
                             load_kv(j);
    };
    if (threadIdx.x == 0) {
        mbar_expect_tx(&full[0], BM * HD * 2 + (nb > 0 ? 2 * TILE : 0)); /* Q rides with stage 0 */
        tma3(sQ, &qmap, 0, h, q0, &full[0]), tma3(sQ + BM * 128, &qmap, 64, h, q0, &full[0]);
        if (nb > 0) load_kv(0);
        for (int j = 1; j < NSTAGE - 1 && j < nb; j++)
            fill(j);
    }
    mbar_wait(&full[0], 0);
    if (nb > 0) {
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
            wgmma_ss(s, desc(qw + (kk >> 2) * BM * 128 + (kk & 3) * 32),
                     desc(sK + (kk >> 2) * BN * 128 + (kk & 3) * 32), kk > 0);
        wgmma_commit();
        wgmma_wait0();
        fence_regs<64>(s);
        softmax(0);
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            pf[j >> 1][(j & 1) * 2 + 0] = pack_bf2(s[4 * j], s[4 * j + 1]);
            pf[j >> 1][(j & 1) * 2 + 1] = pack_bf2(s[4 * j + 2], s[4 * j + 3]);
        }
    }

    /* all but the last block: S_{i+1} always exists, so the loop body has no branches around
     * the asynchronous products */
    /* PINGPONG: the warpgroups take turns issuing their products (FA3's schedule): one
     * warpgroup's softmax then runs while the tensor cores work for the other */
    if (PINGPONG && wg == 1) named_arrive(1, NT); /* warpgroup 0 goes first */
    for (int i = 0; i + 1 < nb; i++) {
        if (threadIdx.x == 0 && i + NSTAGE - 1 < nb)
            fill(i + NSTAGE - 1); /* waits for both warpgroups to free it */
        mbar_wait(&full[(i + 1) % NSTAGE], ((i + 1) / NSTAGE) & 1); /* K_{i+1}, V_{i+1} landed */
        const char *kn = sK + ((i + 1) % NSTAGE) * TILE, *vc = sV + (i % NSTAGE) * TILE;
        if (PINGPONG) named_sync(1 + wg, NT);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
            wgmma_ss(s, desc(qw + (kk >> 2) * BM * 128 + (kk & 3) * 32),
                     desc(kn + (kk >> 2) * BN * 128 + (kk & 3) * 32), kk > 0);
        wgmma_commit();
        wgmma_fence(); /* a separate stage: the softmax below reads S while P V runs */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wgmma_rs(o, pf[kk], desc(vc + (kk >> 2) * HD * 128 + (kk & 3) * 32), 1);
        wgmma_commit();
        if (PINGPONG) named_arrive(1 + (wg ^ 1), NT);
        wgmma_wait1(); /* S_{i+1} is in; P_i V_i may still run */
        fence_regs<64>(s);
        softmax(i + 1);
        wgmma_wait0();
        fence_regs<64>(o);
        fence_regs<4 * (BN / 16)>(&pf[0][0]);
        mbar_arrive(&empty[i % NSTAGE]); /* this thread is done with K_i and V_i */
#pragma unroll
        for (int c = 0; c < 16; c++)
            o[4 * c] *= corr_a, o[4 * c + 1] *= corr_a, o[4 * c + 2] *= corr_b,
                o[4 * c + 3] *= corr_b;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            pf[j >> 1][(j & 1) * 2 + 0] = pack_bf2(s[4 * j], s[4 * j + 1]);
            pf[j >> 1][(j & 1) * 2 + 1] = pack_bf2(s[4 * j + 2], s[4 * j + 3]);
        }
    }
    if (nb > 0) { /* the last block: only its P V product is left */
        const char *vc = sV + ((nb - 1) % NSTAGE) * TILE; /* landed: waited for its K */
        if (PINGPONG) named_sync(1 + wg, NT);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++)
            wgmma_rs(o, pf[kk], desc(vc + (kk >> 2) * HD * 128 + (kk & 3) * 32), 1);
        wgmma_commit();
        if (PINGPONG) named_arrive(1 + (wg ^ 1), NT);
        wgmma_wait0();
        fence_regs<64>(o);
    }

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
    for (int c = 0; c < 16; c++) {
        int col = h * HD + c * 8 + 2 * t4;
        if (row_a < N)
            *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)row_a * ldo + col) =
                __floats2bfloat162_rn(o[4 * c] * ia, o[4 * c + 1] * ia);
        if (row_b < N)
            *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)row_b * ldo + col) =
                __floats2bfloat162_rn(o[4 * c + 2] * ib, o[4 * c + 3] * ib);
    }
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

#define DEFAULT_VARIANT 2
static int g_variant = DEFAULT_VARIANT; /* kernels.h lists the variants */
extern "C" void vdn_attention_wgmma_variant(int v) {
    g_variant = v >= 1 && v <= VDN_ATTN_NVARIANTS ? v : DEFAULT_VARIANT;
}
extern "C" int vdn_attention_wgmma_variant_default(void) {
    return DEFAULT_VARIANT;
}
extern "C" const char *vdn_attention_wgmma_variant_name(int v) {
    static const char *names[VDN_ATTN_NVARIANTS + 1] = {"?",
                                                        "wgmma",
                                                        "wgmma pipelined",
                                                        "wgmma staggered",
                                                        "wgmma mbarrier ring",
                                                        "wgmma TMA ring",
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
    const int smem4 = (BM + 2 * NSTAGE * BN) * HD * (int)sizeof(bf16) + 1024;
    static int configured = 0;
    if (!configured) {
        CUDA_CHECK(
            cudaFuncSetAttribute(attn_wg_k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CUDA_CHECK(cudaFuncSetAttribute(attn_wg2_k<false>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CUDA_CHECK(cudaFuncSetAttribute(attn_wg2_k<true>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CUDA_CHECK(
            cudaFuncSetAttribute(attn_wg3_k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem4));
        CUDA_CHECK(cudaFuncSetAttribute(attn_wg4_k<false>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, smem4));
        CUDA_CHECK(cudaFuncSetAttribute(attn_wg4_k<true>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, smem4));
        configured = 1;
    }
    dim3 grid(n_tiles, heads);
    const float sl = scale * 1.4426950408889634f;
    const bf16 *Q = (const bf16 *)q, *K = (const bf16 *)k, *Vt = (const bf16 *)vt_scratch;
    if (g_variant == 1)
        attn_wg_k<<<grid, NT, smem, S_(st)>>>(Q, K, Vt, ldq, ldk, ldt, rows, lohi, head_end,
                                              tail_start, tiles, sl, gate, heads, (bf16 *)out,
                                              ld_o);
    else if (g_variant == 2)
        attn_wg2_k<false><<<grid, NT, smem, S_(st)>>>(Q, K, Vt, ldq, ldk, ldt, rows, lohi, head_end,
                                                      tail_start, tiles, sl, gate, heads,
                                                      (bf16 *)out, ld_o);
    else if (g_variant == 3)
        attn_wg2_k<true><<<grid, NT, smem, S_(st)>>>(Q, K, Vt, ldq, ldk, ldt, rows, lohi, head_end,
                                                     tail_start, tiles, sl, gate, heads,
                                                     (bf16 *)out, ld_o);
    else if (g_variant == 4)
        attn_wg3_k<<<grid, NT, smem4, S_(st)>>>(Q, K, Vt, ldq, ldk, ldt, rows, lohi, head_end,
                                                tail_start, tiles, sl, gate, heads, (bf16 *)out,
                                                ld_o);
    else {
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
        if (g_variant == 6)
            attn_wg4_k<true><<<grid, NT, smem4, S_(st)>>>(qm, km, vm, rows, lohi, head_end,
                                                          tail_start, tiles, sl, gate, heads,
                                                          (bf16 *)out, ld_o);
        else
            attn_wg4_k<false><<<grid, NT, smem4, S_(st)>>>(qm, km, vm, rows, lohi, head_end,
                                                           tail_start, tiles, sl, gate, heads,
                                                           (bf16 *)out, ld_o);
    }
    LAUNCH_CHECK("attention_wgmma");
    return 0;
}
