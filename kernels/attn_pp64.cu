/* The video VAE decoder's attention on Hopper (head dim 64): a persistent, warp-specialised
 * variant of the TMA ping-pong kernel in attn_pingpong.cu, launched by attn_wgmma.cu.
 *
 * Why a separate body: at head dim 64 under the decoder's block-diagonal mask a CTA of the
 * ping-pong kernel walks only ~15 key blocks (one 1,797-key tile), so its serial start (Q and the
 * first K/V from memory, the first S and softmax with nothing beside them) and end (the last P V,
 * the store) weigh heavily with one CTA per SM; and a 128-row block's exponentials (16 per clock
 * per SM) take as long as its tensor-core work, so two warpgroups leave the tensor cores idle
 * while both are in their softmax. Here:
 *   - the grid is at most one CTA per SM; CTA c takes work units c, c + grid, ... (unit = one
 *     query tile of one head, tile-major so that the CTAs running together share K/V in L2);
 *   - a producer warpgroup (one warp issues; setmaxnreg hands the others' registers to the
 *     consumers) issues every TMA copy: each unit's Q (two buffers) and its K/V^T blocks through
 *     one stage ring that runs on across units, so the next unit's Q and first blocks land under
 *     the current unit's last blocks;
 *   - NC = 3 consumer warpgroups of 64 query rows (query tile = 192 rows, FA3's head-dim-64
 *     tile) take turns on the tensor cores (FlashAttention-3's ping-pong, round robin over the
 *     three), so each warpgroup has two others' products to hide its softmax under;
 *   - a unit's first S is issued beside the previous unit's last P V, like any other block; the
 *     finished unit is normalised and stored (then the new unit's first softmax runs) while the
 *     other warpgroups use the tensor cores;
 *   - the producer derives each unit's key ranges from the per-row windows (lohi), the same
 *     union as vdn_attn_tiles_make, so any tile height works without a second table;
 *   - edge blocks in the window part of the mask test each key against one interval per row.
 * Same contract as attn_pingpong.cu (attn_tiles.h's visibility rule, gate, zero rows past N).
 * Measured on an H200 at the decoder's shape (`vdn bench attn-vae`, docs/PERF.md): 2.163 ms a
 * call (342 TFLOP/s) against 2.870 ms for the ping-pong kernel at head dim 64; with 2 consumer
 * warpgroups 2.515 ms; a quarter of the exponentials as FMA polynomials (to unload the MUFU
 * unit) made both slower (2.340 / 2.623 ms), so it is not kept. */
#include <climits>

#include "attn_wgmma.cuh"

namespace {

constexpr int HD = 64, NC = 3;    /* consumer warpgroups */
constexpr int BMQ = 64 * NC;      /* query rows of a unit */
constexpr int TILE = BN * HD * 2; /* one K or V^T block: 16 KB */
constexpr int QROWB = 128;        /* bytes of one Q row (64 bf16) */

/* K/V^T stages of the ring: 5 x 32 KB, with Q's two buffers (48 KB) within 227 KB */
constexpr int P64_STAGES = 5;
/* registers: the producer warpgroup gives most of its share to the consumers (setmaxnreg: 24
 * and 160, multiples of 8 within the SM's 64 K for 4 warpgroups) */
constexpr int P64_PRODUCER_REGS = 24;
constexpr int P64_CONSUMER_REGS = (65536 / 128 - P64_PRODUCER_REGS) / NC / 8 * 8;
/* shared memory: Q's two buffers, the stages' K and V^T blocks, 1024 for the alignment */
constexpr int P64_SMEM = 2 * BMQ * QROWB + 2 * P64_STAGES * TILE + 1024;

/* A unit's key blocks, planned by the producer into shared memory: up to three ranges [s, e)
 * (unused ones empty), rb0 / rb1 blocks in the first two, nb in all; block i starts at kb (a
 * multiple of BN) inside its range. A unit with no visible key walks one block of the empty range
 * [0, 0): every score is masked and its rows get zeros. The consumers read it where they use it
 * (a few shared loads a block) rather than keep it in registers. */
struct Plan {
    int mixed, nb, rb0, rb1, rs0, re0, rs1, re1, rs2, re2;
};
__device__ __forceinline__ void plan_at(const Plan *pl, int i, int &s, int &e, int &kb) {
    const int rb0 = pl->rb0, rb1 = pl->rb1;
    if (i < rb0) {
        s = pl->rs0, e = pl->re0;
    } else if (i < rb0 + rb1) {
        s = pl->rs1, e = pl->re1, i -= rb0;
    } else {
        s = pl->rs2, e = pl->re2, i -= rb0 + rb1;
    }
    kb = (s / BN) * BN + i * BN;
}

/* producer warp: the key ranges of rows [q0, q1) into *pl (lane 0 writes): the merged union
 * of [0, head_end), the rows' windows (consecutive windows overlap or touch, so their union is
 * [min lo, max hi)) and [tail_start, N), as vdn_attn_tiles_make */
__device__ __forceinline__ void plan_unit(Plan *pl, const int *lohi, int q0, int q1, int N,
                                          int head_end, int tail_start) {
    const int lane = threadIdx.x & 31;
    const int lo0 = lohi[2 * q0], hi0 = lohi[2 * q0 + 1];
    int lo = INT_MAX, hi = INT_MIN, mixed = 0;
#pragma unroll 1
    for (int r = q0 + lane; r < q1; r += 32) {
        const int a = lohi[2 * r], b = lohi[2 * r + 1];
        lo = min(lo, a), hi = max(hi, b), mixed |= a != lo0 || b != hi0;
    }
    lo = __reduce_min_sync(0xffffffffu, lo), hi = __reduce_max_sync(0xffffffffu, hi);
    mixed = __reduce_or_sync(0xffffffffu, (unsigned)mixed);
    if (lane == 0) {
        /* the three candidates in start order, each merged into the last range when it starts
         * inside or right after it (registers only: no indexed arrays) */
        int n = 0, s0 = 0, e0 = 0, s1 = 0, e1 = 0, s2 = 0, e2 = 0;
        auto add = [&](int s, int e) {
            if (e <= s) return;
            if (n == 1 && s <= e0) {
                e0 = max(e0, e);
            } else if (n == 2 && s <= e1) {
                e1 = max(e1, e);
            } else if (n == 0) {
                s0 = s, e0 = e, n = 1;
            } else if (n == 1) {
                s1 = s, e1 = e, n = 2;
            } else {
                s2 = s, e2 = e, n = 3;
            }
        };
        add(0, head_end), add(lo, hi), add(tail_start, N);
        auto blocks = [](int s, int e) { return e > s ? (e - (s / BN) * BN + BN - 1) / BN : 0; };
        const int rb0 = blocks(s0, e0), rb1 = blocks(s1, e1), nb = rb0 + rb1 + blocks(s2, e2);
        pl->mixed = mixed, pl->nb = nb > 0 ? nb : 1, pl->rb0 = nb > 0 ? rb0 : 1, pl->rb1 = rb1;
        pl->rs0 = s0, pl->re0 = e0, pl->rs1 = s1, pl->re1 = e1, pl->rs2 = s2, pl->re2 = e2;
    }
}

/* this thread's first query row inside a unit (it owns that row and the row 8 below) */
__device__ __forceinline__ int first_row() {
    return (threadIdx.x >> 7) * 64 + ((threadIdx.x >> 5) & 3) * 16 + ((threadIdx.x & 31) >> 2);
}

/* One thread's two query rows of the current unit: windows (mixed units only), the online
 * softmax state, the normalise + gate + store. */
struct Rows64 {
    int row_a;
    float m_a, m_b, l_a, l_b, corr_a, corr_b;
    __device__ __forceinline__ void enter(int q0) {
        row_a = q0 + first_row();
        m_a = m_b = -INFINITY, l_a = l_b = 0.f, corr_a = corr_b = 1.f;
    }

    /* Softmax of key block i in place (s: raw scores, becoming probabilities); the scale folds
     * into exp2. Keys outside the block's range, past N, or (mixed units) outside a row's window
     * get -inf. */
    __device__ __forceinline__ void softmax(float *s, const Plan *pl, int i, const int *lohi, int N,
                                            int head_end, int tail_start, float sl2) {
        const int t4 = threadIdx.x & 3;
        int rs, re, kb;
        plan_at(pl, i, rs, re, kb);
        const int mixed = pl->mixed;
        if (mixed || kb < rs || kb + BN > re || kb + BN > N) {
            /* the rows' windows (read only in mixed units; cached) */
            int lo_a = 0, hi_a = 0, lo_b = 0, hi_b = 0;
            if (mixed) {
                const int row_b = row_a + 8;
                if (row_a < N) lo_a = __ldg(lohi + 2 * row_a), hi_a = __ldg(lohi + 2 * row_a + 1);
                if (row_b < N) lo_b = __ldg(lohi + 2 * row_b), hi_b = __ldg(lohi + 2 * row_b + 1);
            }
            if (!mixed || (kb >= head_end && kb + BN <= tail_start)) {
                /* every key of the block is in the windowed part (or the unit is not mixed):
                 * row a sees [la, ha), row b [lb, hb), relative to this thread's first column */
                const int e0 = min(re, N), c0 = kb + 2 * t4;
                int la = rs, ha = e0, lb = rs, hb = e0;
                if (mixed)
                    la = max(la, lo_a), ha = min(ha, hi_a), lb = max(lb, lo_b), hb = min(hb, hi_b);
                la -= c0, ha -= c0, lb -= c0, hb -= c0;
#pragma unroll
                for (int j = 0; j < BN / 8; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int c = j * 8 + e;
                        if (c < la || c >= ha) s[4 * j + e] = -INFINITY;
                        if (c < lb || c >= hb) s[4 * j + 2 + e] = -INFINITY;
                    }
            } else {
                /* the full rule (rare: mixed units where the head, tail or N cut the block),
                 * gathered into one bit per column and row by a rolled loop first: 64 separate
                 * conditions held at once would cost the registers the softmax needs */
                unsigned va = 0, vb = 0;
#pragma unroll 1
                for (int c = 0; c < BN / 4; c++) {
                    const int kx = kb + (c >> 1) * 8 + 2 * t4 + (c & 1);
                    const bool in = kx >= rs && kx < re && kx < N,
                               win = kx >= head_end && kx < tail_start;
                    va |= (unsigned)(in && (!win || (kx >= lo_a && kx < hi_a))) << c;
                    vb |= (unsigned)(in && (!win || (kx >= lo_b && kx < hi_b))) << c;
                }
#pragma unroll
                for (int j = 0; j < BN / 8; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        if (!((va >> (2 * j + e)) & 1)) s[4 * j + e] = -INFINITY;
                        if (!((vb >> (2 * j + e)) & 1)) s[4 * j + 2 + e] = -INFINITY;
                    }
            }
        }
        /* row maxima: two independent chains per row, then the quad */
        float ma0 = fmaxf(s[0], s[1]), mb0 = fmaxf(s[2], s[3]);
        float ma1 = fmaxf(s[4], s[5]), mb1 = fmaxf(s[6], s[7]);
#pragma unroll
        for (int j = 2; j < BN / 8; j += 2) {
            ma0 = fmaxf(ma0, fmaxf(s[4 * j], s[4 * j + 1]));
            mb0 = fmaxf(mb0, fmaxf(s[4 * j + 2], s[4 * j + 3]));
            ma1 = fmaxf(ma1, fmaxf(s[4 * j + 4], s[4 * j + 5]));
            mb1 = fmaxf(mb1, fmaxf(s[4 * j + 6], s[4 * j + 7]));
        }
        float mx_a = fmaxf(ma0, ma1), mx_b = fmaxf(mb0, mb1);
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
        const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
        const float base_a = mn_a == -INFINITY ? 0.f : mn_a * sl2;
        const float base_b = mn_b == -INFINITY ? 0.f : mn_b * sl2;
        corr_a = exp2f(m_a * sl2 - base_a), corr_b = exp2f(m_b * sl2 - base_b);
        m_a = mn_a, m_b = mn_b;
        float sa[2] = {0.f, 0.f}, sb[2] = {0.f, 0.f};
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            const float x0 = fmaf(s[4 * j], sl2, -base_a), x1 = fmaf(s[4 * j + 1], sl2, -base_a);
            const float x2 = fmaf(s[4 * j + 2], sl2, -base_b),
                        x3 = fmaf(s[4 * j + 3], sl2, -base_b);
            const float p0 = exp2f(x0), p1 = exp2f(x1), p2 = exp2f(x2), p3 = exp2f(x3);
            sa[j & 1] += p0 + p1, sb[j & 1] += p2 + p3;
            s[4 * j] = p0, s[4 * j + 1] = p1, s[4 * j + 2] = p2, s[4 * j + 3] = p3;
        }
        l_a = l_a * corr_a + (sa[0] + sa[1]), l_b = l_b * corr_b + (sb[0] + sb[1]);
    }
};

/* O / l (times the gate) of rows ra, ra + 8 of head h to bf16 rows of the output; la, lb are the
 * thread's partial sums (the quad adds them here) */
__device__ __forceinline__ void store64(const float *o, float la, float lb, int ra, int h,
                                        const float *gate, int heads, bf16 *O, int ldo, int N) {
    const int t4 = threadIdx.x & 3, rb = ra + 8;
    la += __shfl_xor_sync(0xffffffffu, la, 1);
    la += __shfl_xor_sync(0xffffffffu, la, 2);
    lb += __shfl_xor_sync(0xffffffffu, lb, 1);
    lb += __shfl_xor_sync(0xffffffffu, lb, 2);
    float ia = la > 0.f ? 1.f / la : 0.f, ib = lb > 0.f ? 1.f / lb : 0.f;
    if (gate) {
        if (ra < N) ia *= gate[(size_t)ra * heads + h];
        if (rb < N) ib *= gate[(size_t)rb * heads + h];
    }
#pragma unroll
    for (int c = 0; c < HD / 8; c++) {
        const int col = h * HD + c * 8 + 2 * t4;
        if (ra < N)
            *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)ra * ldo + col) =
                __floats2bfloat162_rn(o[4 * c] * ia, o[4 * c + 1] * ia);
        if (rb < N)
            *reinterpret_cast<__nv_bfloat162 *>(O + (size_t)rb * ldo + col) =
                __floats2bfloat162_rn(o[4 * c + 2] * ib, o[4 * c + 3] * ib);
    }
}

/* S = Q K^T of this warpgroup's 64 rows (qw: their first row in the Q tile) against a K block */
__device__ __forceinline__ void issue_qk64(float *s, const char *qw, const char *k_tile) {
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++)
        wgmma_ss(s, desc(qw + kk * 32), desc(k_tile + kk * 32), kk > 0);
}

} // namespace

__global__ void __launch_bounds__((NC + 1) * 128, 1)
    attn_p64_k(const __grid_constant__ CUtensorMap qmap, const __grid_constant__ CUtensorMap kmap,
               const __grid_constant__ CUtensorMap vmap, int N, const int *__restrict__ lohi,
               int head_end, int tail_start, int n_qt, int n_units, float sl2,
               const float *__restrict__ gate, int heads, bf16 *__restrict__ O, int ldo) {
    constexpr int NCT = NC * 128, NST = P64_STAGES, QB = BMQ * QROWB;
    constexpr int NO = HD / 2;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    char *base = (char *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    char *sQ = base, *sK = sQ + 2 * QB, *sV = sK + NST * TILE;
    __shared__ __align__(8) uint64_t full[NST], empty[NST], qfull[2], qempty[2];
    __shared__ Plan plan[2];
    if (threadIdx.x == 0) {
        for (int k = 0; k < NST; k++)
            mbar_init(&full[k], 1), mbar_init(&empty[k], NCT);
        for (int k = 0; k < 2; k++)
            mbar_init(&qfull[k], 1), mbar_init(&qempty[k], NCT);
    }
    __syncthreads();

    if (threadIdx.x >= NCT) { /* the producer warpgroup: its first warp issues the copies */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(P64_PRODUCER_REGS));
        if (threadIdx.x >= NCT + 32) return;
        const int lane = threadIdx.x & 31;
        int g = 0, lu = 0;
#pragma unroll 1
        for (int u = blockIdx.x; u < n_units; u += gridDim.x, lu++) {
            const int tile = u % n_qt, h = u / n_qt, q0 = tile * BMQ, b = lu & 1;
            if (lu >= 2) mbar_wait(&qempty[b], ((lu >> 1) - 1) & 1); /* unit lu - 2 is done */
            plan_unit(&plan[b], lohi, q0, min(q0 + BMQ, N), N, head_end, tail_start);
            __syncwarp();
            if (lane == 0) {
                mbar_expect_tx(&qfull[b], QB); /* also publishes plan[b] */
                tma3(sQ + b * QB, &qmap, 0, h, q0, &qfull[b]);
                const int nb = plan[b].nb;
#pragma unroll 1
                for (int i = 0; i < nb; i++, g++) {
                    int s_, e_, kb;
                    plan_at(&plan[b], i, s_, e_, kb);
                    const int st = g % NST;
                    if (g >= NST) mbar_wait(&empty[st], ((g / NST) - 1) & 1);
                    mbar_expect_tx(&full[st], 2 * TILE);
                    tma3(sK + st * TILE, &kmap, 0, h, kb, &full[st]);
                    tma3(sV + st * TILE, &vmap, kb, 0, h, &full[st]);
                    tma3(sV + st * TILE + HD * 128, &vmap, kb + 64, 0, h, &full[st]);
                }
            }
            __syncwarp();
        }
        return;
    }

    /* consumers */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(P64_CONSUMER_REGS));
    const int wg = threadIdx.x >> 7;
    int u = blockIdx.x, lu = 0, g = 0, i = 0;
    Rows64 rows;
    mbar_wait(&qfull[0], 0);
    rows.enter((u % n_qt) * BMQ);

    float o[NO], s[64];
#pragma unroll
    for (int k = 0; k < NO; k++)
        o[k] = 0.f;
    unsigned pf[BN / 16][4];

    /* the first block of the first unit: S and its softmax with nothing beside them */
    mbar_wait(&full[0], 0);
    wgmma_fence();
    issue_qk64(s, sQ + wg * 64 * QROWB, sK);
    wgmma_commit();
    wgmma_wait0();
    fence_regs<64>(s);
    rows.softmax(s, &plan[0], 0, lohi, N, head_end, tail_start, sl2);
    pack_p(s, pf);

    if (wg == NC - 1) named_arrive(1, 256); /* warpgroup 0 issues first */
    for (;;) {
        /* the next block: block i + 1 of this unit, or block 0 of the next */
        const bool newu = i + 1 >= plan[lu & 1].nb;
        const int nu = u + gridDim.x;
        if (newu && nu >= n_units) break;
        if (newu) mbar_wait(&qfull[(lu + 1) & 1], ((lu + 1) >> 1) & 1); /* its Q landed */
        const int ni = newu ? 0 : i + 1, lq = newu ? lu + 1 : lu;
        mbar_wait(&full[(g + 1) % NST], ((g + 1) / NST) & 1); /* block g + 1 landed */
        const char *qw = sQ + (lq & 1) * QB + wg * 64 * QROWB;
        const char *kn = sK + ((g + 1) % NST) * TILE, *vc = sV + (g % NST) * TILE;
        named_sync(1 + wg, 256); /* my turn on the tensor cores */
        wgmma_fence();
        issue_qk64(s, qw, kn);
        wgmma_commit();
        wgmma_fence(); /* a separate stage: the softmax below reads S while P V runs */
        issue_pv<HD>(o, pf, vc);
        wgmma_commit();
        named_arrive(1 + (wg + 1) % NC, 256); /* the next warpgroup's turn */
        wgmma_wait1();                        /* S is in; P V may still run */
        fence_regs<64>(s);
        if (newu) {
            /* the finished unit: its last P V first, then its store, then the new unit's
             * softmax (this one block without the overlap keeps the old row sums out of the
             * registers the softmax needs) */
            wgmma_wait0();
            fence_regs<NO>(o);
            store64(o, rows.l_a, rows.l_b, rows.row_a, u / n_qt, gate, heads, O, ldo, N);
#pragma unroll
            for (int k = 0; k < NO; k++)
                o[k] = 0.f;
            rows.enter((nu % n_qt) * BMQ);
        }
        rows.softmax(s, &plan[lq & 1], ni, lohi, N, head_end, tail_start, sl2);
        wgmma_wait0();
        fence_regs<NO>(o);
        fence_regs<4 * (BN / 16)>(&pf[0][0]);
        mbar_arrive(&empty[g % NST]); /* this thread is done with block g */
        if (newu) {
            mbar_arrive(&qempty[lu & 1]); /* and with the finished unit's Q */
            u = nu, lu++;
        } else {
#pragma unroll
            for (int c = 0; c < HD / 8; c++)
                o[4 * c] *= rows.corr_a, o[4 * c + 1] *= rows.corr_a, o[4 * c + 2] *= rows.corr_b,
                    o[4 * c + 3] *= rows.corr_b;
        }
        pack_p(s, pf);
        g++, i = ni;
    }
    /* the last block: only its P V product is left */
    named_sync(1 + wg, 256);
    wgmma_fence();
    issue_pv<HD>(o, pf, sV + (g % NST) * TILE);
    wgmma_commit();
    named_arrive(1 + (wg + 1) % NC, 256);
    wgmma_wait0();
    fence_regs<NO>(o);
    store64(o, rows.l_a, rows.l_b, rows.row_a, u / n_qt, gate, heads, O, ldo, N);
}

int attn_p64_launch(int max_ctas, const CUtensorMap &qm, const CUtensorMap &km,
                    const CUtensorMap &vm, int N, const int *lohi, int head_end, int tail_start,
                    float sl2, const float *gate, int heads, bf16 *O, int ldo, cudaStream_t st) {
    const int n_qt = (N + BMQ - 1) / BMQ, n_units = n_qt * heads;
    int dev = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    int grid = n_units < sms ? n_units : sms;
    if (max_ctas > 0 && grid > max_ctas) grid = max_ctas;
    static unsigned optin = 0;
    if (vdn_smem_optin(&optin, (const void *)attn_p64_k, P64_SMEM)) return -1;
    attn_p64_k<<<grid, (NC + 1) * 128, P64_SMEM, st>>>(qm, km, vm, N, lohi, head_end, tail_start,
                                                       n_qt, n_units, sl2, gate, heads, O, ldo);
    LAUNCH_CHECK("attention_p64");
    return 0;
}
