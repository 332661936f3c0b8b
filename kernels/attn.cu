/* Block-sparse flash attention, bf16 in, fp32 accumulation, head dim 64 or 128, tensor cores
 * through mma.sync m16n8k16 (FlashAttention-2 structure): the portable kernel, and the one for
 * the cases the Hopper kernel (attn_pingpong.cu) does not take: head dim 64 (the video VAE's
 * decoder), grouped-query heads and keys != query rows (the text encoder), causal masks.
 *
 * One CTA = 128 query rows x one query head, 8 warps x 16 rows; query head h reads key/value
 * head h / group (GQA). Instead of a mask, each query tile
 * carries up to three key ranges (attn_tiles.h): the global rows + anchor frame 0, the union of
 * its rows' chunk windows, and the last anchor frame. The CTA walks 64-key blocks of those
 * ranges only; a block is tested element by element only where it straddles a range end or the
 * tile's rows disagree about it ("mixed" tiles, where a tile crosses a chunk boundary). Dense
 * attention is the same kernel with one range [0, N) per tile.
 *
 * Shared memory: Q 128xHD, K and V 2 x 64xHD each (double-buffered with cp.async), rows of HD/8
 * chunks of 16 bytes XOR-swizzled by (row & 7) so ldmatrix reads hit 8 distinct bank groups. */
#include "cuda_util.cuh"
#include "mma_sync.cuh"

#define BM 128
#define BN 64
#define NWARP 8

template <int HD> __device__ __forceinline__ int swz(int row, int chunk) {
    return row * HD + ((chunk ^ (row & 7)) << 3);
}

__device__ __forceinline__ unsigned pack_bf2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
}

/* rows x HD tile from global (row stride ld elements) into swizzled smem; rows past `limit`
 * are zero-filled so that no NaN from stale memory can reach the accumulators. */
template <int ROWS, int HD>
__device__ __forceinline__ void load_tile(bf16 *sm, const bf16 *g, int ld, int row0, int limit) {
    constexpr int CH = HD / 8; /* 16-byte chunks per row */
#pragma unroll
    for (int i = 0; i < ROWS * CH / (NWARP * 32); i++) {
        int c = threadIdx.x + i * NWARP * 32;
        int r = c / CH, ch = c % CH;
        int gr = row0 + r;
        const bf16 *src = g + (size_t)(gr < limit ? gr : 0) * ld + ch * 8;
        cp_async16(sm + swz<HD>(r, ch), src, gr < limit ? 16 : 0);
    }
}

/* Nq query rows, Nk key rows; tiles and lohi per query row (attn_tiles.h); gate [Nq][ld_gate] */
template <int HD>
__global__ void __launch_bounds__(NWARP * 32, 1)
    attn_k(const bf16 *__restrict__ Q, const bf16 *__restrict__ K, const bf16 *__restrict__ V,
           int ldq, int ldk, int ldv, int Nq, int Nk, int group, const int *__restrict__ lohi,
           int head_end, int tail_start, const int *__restrict__ tiles, float scale_log2,
           const float *__restrict__ gate, int ld_gate, bf16 *__restrict__ O, int ldo) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16 *sQ = reinterpret_cast<bf16 *>(smem_raw);
    bf16 *sK = sQ + BM * HD;
    bf16 *sV = sK + 2 * BN * HD;

    const int tile = blockIdx.x, h = blockIdx.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t4 = lane & 3;
    const int q0 = tile * BM;
    const bf16 *Qh = Q + h * HD, *Kh = K + (h / group) * HD, *Vh = V + (h / group) * HD;

    const int *tl = tiles + tile * 8;
    const int nr = tl[0], mixed = tl[1];
    /* scalars, not arrays: a run-time index would put them in local memory */
    const int rs0 = nr > 0 ? tl[2] : 0, re0 = nr > 0 ? tl[3] : 0;
    const int rs1 = nr > 1 ? tl[4] : 0, re1 = nr > 1 ? tl[5] : 0;
    const int rs2 = nr > 2 ? tl[6] : 0, re2 = nr > 2 ? tl[7] : 0;
    const int rb0 = nr > 0 ? (re0 - (rs0 / BN) * BN + BN - 1) / BN : 0;
    const int rb1 = nr > 1 ? (re1 - (rs1 / BN) * BN + BN - 1) / BN : 0;
    const int rb2 = nr > 2 ? (re2 - (rs2 / BN) * BN + BN - 1) / BN : 0;
    const int nb = rb0 + rb1 + rb2;
    /* block i -> its range [s, e) and first key */
    auto block_at = [&](int i, int &s, int &e, int &kb) {
        if (i < rb0) {
            s = rs0, e = re0, kb = (rs0 / BN) * BN + i * BN;
        } else if (i < rb0 + rb1) {
            s = rs1, e = re1, kb = (rs1 / BN) * BN + (i - rb0) * BN;
        } else {
            s = rs2, e = re2, kb = (rs2 / BN) * BN + (i - rb0 - rb1) * BN;
        }
    };

    load_tile<BM, HD>(sQ, Qh, ldq, q0, Nq);
    cp_commit();
    if (nb > 0) {
        int rs_, re_, kb;
        block_at(0, rs_, re_, kb);
        load_tile<BN, HD>(sK, Kh, ldk, kb, Nk);
        load_tile<BN, HD>(sV, Vh, ldv, kb, Nk);
    }
    cp_commit();
    cp_wait<1>();
    __syncthreads();

    unsigned qf[HD / 16][4];
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++)
        ldsm_x4(qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3],
                sQ + swz<HD>(warp * 16 + (lane & 15), kk * 2 + (lane >> 4)));

    const int row_a = q0 + warp * 16 + g, row_b = row_a + 8;
    int lo_a = 0, hi_a = 0, lo_b = 0, hi_b = 0;
    if (mixed) {
        if (row_a < Nq) lo_a = lohi[2 * row_a], hi_a = lohi[2 * row_a + 1];
        if (row_b < Nq) lo_b = lohi[2 * row_b], hi_b = lohi[2 * row_b + 1];
    }

    float o[HD / 8][4];
#pragma unroll
    for (int i = 0; i < HD / 8; i++)
        o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;

    for (int i = 0; i < nb; i++) {
        const int cur = i & 1;
        if (i + 1 < nb) {
            int rs_, re_, kb;
            block_at(i + 1, rs_, re_, kb);
            load_tile<BN, HD>(sK + (cur ^ 1) * BN * HD, Kh, ldk, kb, Nk);
            load_tile<BN, HD>(sV + (cur ^ 1) * BN * HD, Vh, ldv, kb, Nk);
        }
        cp_commit();
        cp_wait<1>();
        __syncthreads();

        int rcur_s, rcur_e, kb;
        block_at(i, rcur_s, rcur_e, kb);
        const bf16 *k_s = sK + cur * BN * HD, *v_s = sV + cur * BN * HD;

        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++)
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
#pragma unroll
            for (int j = 0; j < 8; j += 2) {
                unsigned b0, b1, b2, b3;
                ldsm_x4(b0, b1, b2, b3,
                        k_s + swz<HD>(j * 8 + (lane & 7) + ((lane >> 4) << 3),
                                      kk * 2 + ((lane >> 3) & 1)));
                mma16816(s[j], qf[kk], b0, b1);
                mma16816(s[j + 1], qf[kk], b2, b3);
            }
        }

        const bool edge = mixed || kb < rcur_s || kb + BN > rcur_e || kb + BN > Nk;
        float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
        for (int j = 0; j < 8; j++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float va = s[j][e] * scale_log2, vb = s[j][2 + e] * scale_log2;
                if (edge) {
                    int kx = kb + j * 8 + 2 * t4 + e;
                    bool in = kx >= rcur_s && kx < rcur_e && kx < Nk;
                    bool va_ok = in, vb_ok = in;
                    if (mixed && in && kx >= head_end && kx < tail_start) {
                        va_ok = kx >= lo_a && kx < hi_a;
                        vb_ok = kx >= lo_b && kx < hi_b;
                    }
                    if (!va_ok) va = -INFINITY;
                    if (!vb_ok) vb = -INFINITY;
                }
                s[j][e] = va, s[j][2 + e] = vb;
                mx_a = fmaxf(mx_a, va), mx_b = fmaxf(mx_b, vb);
            }
        }
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
        const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
        /* a row that has seen no key yet keeps max -inf: use 0 as the base so exp2 gives 0 */
        const float base_a = mn_a == -INFINITY ? 0.f : mn_a,
                    base_b = mn_b == -INFINITY ? 0.f : mn_b;
        const float corr_a = exp2f(m_a - base_a), corr_b = exp2f(m_b - base_b);
        m_a = mn_a, m_b = mn_b;
        float sum_a = 0.f, sum_b = 0.f;
        unsigned pf[4][4];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float p0 = exp2f(s[j][0] - base_a), p1 = exp2f(s[j][1] - base_a);
            float p2 = exp2f(s[j][2] - base_b), p3 = exp2f(s[j][3] - base_b);
            sum_a += p0 + p1, sum_b += p2 + p3;
            pf[j >> 1][(j & 1) * 2 + 0] = pack_bf2(p0, p1);
            pf[j >> 1][(j & 1) * 2 + 1] = pack_bf2(p2, p3);
        }
        l_a = l_a * corr_a + sum_a, l_b = l_b * corr_b + sum_b;
#pragma unroll
        for (int c = 0; c < HD / 8; c++)
            o[c][0] *= corr_a, o[c][1] *= corr_a, o[c][2] *= corr_b, o[c][3] *= corr_b;

#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
#pragma unroll
            for (int c = 0; c < HD / 8; c += 2) {
                unsigned b0, b1, b2, b3;
                ldsm_x4_t(b0, b1, b2, b3,
                          v_s + swz<HD>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                        c + (lane >> 4)));
                mma16816(o[c], pf[kk], b0, b1);
                mma16816(o[c + 1], pf[kk], b2, b3);
            }
        }
        __syncthreads();
    }

    l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
    float ia = l_a > 0.f ? 1.f / l_a : 0.f, ib = l_b > 0.f ? 1.f / l_b : 0.f;
    if (gate) {
        if (row_a < Nq) ia *= gate[(size_t)row_a * ld_gate + h];
        if (row_b < Nq) ib *= gate[(size_t)row_b * ld_gate + h];
    }
#pragma unroll
    for (int c = 0; c < HD / 8; c++) {
        int col = h * HD + c * 8 + 2 * t4;
        if (row_a < Nq)
            *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)row_a * ldo + col) =
                __floats2bfloat162_rn(o[c][0] * ia, o[c][1] * ia);
        if (row_b < Nq)
            *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)row_b * ldo + col) =
                __floats2bfloat162_rn(o[c][2] * ib, o[c][3] * ib);
    }
}

extern "C" int vdn_k_attention_ex(const void *q, int ldq, const void *k, int ldk, const void *v,
                                  int ldv, int rows, int keys, int heads, int group, int head_dim,
                                  const int *lohi, int head_end, int tail_start, const int *tiles,
                                  int n_tiles, float scale, const float *gate, int ld_gate,
                                  void *out, int ld_o, vdn_stream st) {
    if ((ldq | ldk | ldv) % 8 || ld_o % 2 || n_tiles != (rows + BM - 1) / BM || group < 1 ||
        heads % group || (head_dim != 64 && head_dim != 128) ||
        ((uintptr_t)q | (uintptr_t)k | (uintptr_t)v) % 16) {
        fprintf(stderr,
                "vdn_k_attention: strides %d/%d/%d must be multiples of 8 (16-byte aligned rows), "
                "tiles %d for %d rows, %d heads in groups of %d, head dim %d (64 or 128)\n",
                ldq, ldk, ldv, n_tiles, rows, heads, group, head_dim);
        return -1;
    }
    if (rows == 0 || heads == 0) return 0;
    dim3 grid(n_tiles, heads);
    const float sl = scale * 1.4426950408889634f;
    if (head_dim == 128) {
        const int smem = (BM + 4 * BN) * 128 * (int)sizeof(bf16);
        static unsigned optin = 0;
        if (vdn_smem_optin(&optin, (const void *)attn_k<128>, smem)) return -1;
        attn_k<128><<<grid, NWARP * 32, smem, S_(st)>>>(
            (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, ldq, ldk, ldv, rows, keys, group,
            lohi, head_end, tail_start, tiles, sl, gate, ld_gate, (bf16 *)out, ld_o);
    } else {
        const int smem = (BM + 4 * BN) * 64 * (int)sizeof(bf16);
        static unsigned optin = 0;
        if (vdn_smem_optin(&optin, (const void *)attn_k<64>, smem)) return -1;
        attn_k<64><<<grid, NWARP * 32, smem, S_(st)>>>(
            (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, ldq, ldk, ldv, rows, keys, group,
            lohi, head_end, tail_start, tiles, sl, gate, ld_gate, (bf16 *)out, ld_o);
    }
    LAUNCH_CHECK("attention");
    return 0;
}

extern "C" int vdn_k_attention(const void *q, int ldq, const void *k, int ldk, const void *v,
                               int ldv, int rows, int heads, const int *lohi, int head_end,
                               int tail_start, const int *tiles, int n_tiles, float scale,
                               const float *gate, void *out, int ld_o, vdn_stream st) {
    return vdn_k_attention_ex(q, ldq, k, ldk, v, ldv, rows, rows, heads, 1, 128, lohi, head_end,
                              tail_start, tiles, n_tiles, scale, gate, heads, out, ld_o, st);
}
