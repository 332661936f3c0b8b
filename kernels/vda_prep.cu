/* VDA Prep (spec 5.3 "Features"): spatial depthwise 5x5 per frame, then temporal 5-tap across
 * frames, SiLU, L2 per head (k, q), beta, and the frame-major FHSD layout the statistics read.
 * vdn_k_vda_prep does all of it for the video frames in one pass (below); vdn_k_vda_act, a
 * warp-per-(token, head) pass, serves the text rows (no conv). Until run 32 the video path was a
 * separate spatial-conv kernel writing bf16 spk/spv plus vdn_k_vda_act with the temporal taps
 * (7.8 + 5.8 ms at H3 size; docs/PERF.md). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cudaTypedefs.h>

#include "cuda_util.cuh"
#include "tma.cuh"

__device__ __forceinline__ void ld4(const bf16 *p, float *v) {
    uint2 u = *reinterpret_cast<const uint2 *>(p);
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
    float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
__device__ __forceinline__ void st4(bf16 *p, const float *v) {
    uint2 u;
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);
    h[0] = __floats2bfloat162_rn(v[0], v[1]);
    h[1] = __floats2bfloat162_rn(v[2], v[3]);
    *reinterpret_cast<uint2 *>(p) = u;
}
__device__ __forceinline__ float rbf(float x) {
    return __bfloat162float(__float2bfloat16(x));
}
__device__ __forceinline__ float silu(float x) {
    return x / (1.f + __expf(-x));
}

/* temporal conv (if taps) of one lane's 4 channels, then SiLU, optional L2 over the warp */
__device__ __forceinline__ void finish4(float *v, bool l2) {
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        v[j] = silu(v[j]);
        ss += v[j] * v[j];
    }
    if (l2) {
        ss = warp_sum(ss);
        float inv = 1.f / fmaxf(sqrtf(ss), 1e-6f);
#pragma unroll
        for (int j = 0; j < 4; j++)
            v[j] *= inv;
    }
}

/* one warp = (token s, head h, a segment of FSEG frames): the segment preloads the two frames
 * before it, then slides the 5-tap window; segments give the GPU enough independent warps. */
#define FSEG 8
/* PART 1: k (and q), PART 2: v; one launch each, so each variant needs half the registers */
template <int PART>
__global__ void __launch_bounds__(256)
    act_k(const bf16 *kin, int ldk, const bf16 *vin, int ldv, const bf16 *qin, int ldq,
          const bf16 *wtk, const bf16 *wtv, const float *beta, int F, int S, int H, bf16 *kt,
          bf16 *kb, bf16 *vt, bf16 *qt, float *ks) {
    if (PART == 1)
        vin = NULL, wtv = NULL;
    else
        kin = NULL, qin = NULL, wtk = NULL;
    long warp = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    int nseg = (F + FSEG - 1) / FSEG;
    if (warp >= (long)S * H * nseg) return;
    int seg = (int)(warp % nseg);
    long sh = warp / nseg;
    int s = (int)(sh / H), h = (int)(sh % H), c0 = h * 128 + lane * 4;
    int t0 = seg * FSEG, t1 = t0 + FSEG < F ? t0 + FSEG : F;
    const bool conv = wtk || wtv;
    float tk[4][5], tv[4][5];
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int d = 0; d < 5; d++) {
            tk[j][d] = wtk ? bf2f(wtk[(size_t)(c0 + j) * 5 + d]) : 0.f;
            tv[j][d] = wtv ? bf2f(wtv[(size_t)(c0 + j) * 5 + d]) : 0.f;
        }
    /* rolling windows: wk[d] holds frame t + d - 2 */
    float wk[5][4], wv[5][4];
#pragma unroll
    for (int d = 0; d < 5; d++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            wk[d][j] = wv[d][j] = 0.f;
    auto load_frame = [&](int t, float *k4, float *v4) {
        if (t >= 0 && t < F) {
            if (kin) ld4(kin + (size_t)(t * S + s) * ldk + c0, k4);
            if (vin) ld4(vin + (size_t)(t * S + s) * ldv + c0, v4);
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++)
                k4[j] = v4[j] = 0.f;
        }
    };
    if (conv) {
        load_frame(t0 - 2, wk[1], wv[1]);
        load_frame(t0 - 1, wk[2], wv[2]);
        load_frame(t0, wk[3], wv[3]);
        load_frame(t0 + 1, wk[4], wv[4]);
    }
    for (int t = t0; t < t1; t++) {
        size_t o = (((size_t)t * H + h) * S + s) * 128 + lane * 4;
        size_t row = (size_t)t * S + s;
        float ck[4], cv[4];
        if (conv) {
#pragma unroll
            for (int d = 0; d < 4; d++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    wk[d][j] = wk[d + 1][j], wv[d][j] = wv[d + 1][j];
            load_frame(t + 2, wk[4], wv[4]);
        } else {
            load_frame(t, wk[2], wv[2]);
        }
        if (kin) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float a = 0.f;
                if (wtk) {
#pragma unroll
                    for (int d = 0; d < 5; d++)
                        a += tk[j][d] * wk[d][j];
                } else {
                    a = wk[2][j];
                }
                ck[j] = rbf(a);
            }
            finish4(ck, true);
            if (kt) st4(kt + o, ck);
            float b = beta[row * H + h];
            if (ks) { /* fp32 sqrt(beta) k~ (k~ in bf16 as the reference's activations) for
                       * A = sum beta k~ k~^T in fp32 (spec 5.3), without kb's bf16 rounding */
                float sb = sqrtf(b);
                *reinterpret_cast<float4 *>(ks + o) =
                    make_float4(sb * rbf(ck[0]), sb * rbf(ck[1]), sb * rbf(ck[2]), sb * rbf(ck[3]));
            }
            float kbv[4];
#pragma unroll
            for (int j = 0; j < 4; j++)
                kbv[j] = b * rbf(ck[j]);
            st4(kb + o, kbv);
        }
        if (vin) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float a = 0.f;
                if (wtv) {
#pragma unroll
                    for (int d = 0; d < 5; d++)
                        a += tv[j][d] * wv[d][j];
                } else {
                    a = wv[2][j];
                }
                cv[j] = rbf(a);
            }
            finish4(cv, false);
            st4(vt + o, cv);
        }
        if (qin) {
            float q4[4];
            ld4(qin + row * ldq + c0, q4);
            finish4(q4, true);
            st4(qt + o, q4);
        }
    }
}

extern "C" int vdn_k_vda_act(const void *kin, int ldk, const void *vin, int ldv, const void *qin,
                             int ldq, const void *wtm_k, const void *wtm_v, const float *beta,
                             int frames, int S, int heads, void *kt, void *kb, void *vt, void *qt,
                             float *ks, vdn_stream st) {
    if ((ldk | ldv | ldq) % 4) {
        fprintf(stderr, "vdn_k_vda_act: row strides must be multiples of 4\n");
        return -1;
    }
    long threads = (long)S * heads * ((frames + FSEG - 1) / FSEG) * 32;
    const unsigned blocks = (unsigned)((threads + 255) / 256);
    if (kin || qin)
        act_k<1><<<blocks, 256, 0, S_(st)>>>((const bf16 *)kin, ldk, NULL, ldv, (const bf16 *)qin,
                                             ldq, (const bf16 *)wtm_k, NULL, beta, frames, S, heads,
                                             (bf16 *)kt, (bf16 *)kb, NULL, (bf16 *)qt, ks);
    if (vin)
        act_k<2><<<blocks, 256, 0, S_(st)>>>(NULL, ldk, (const bf16 *)vin, ldv, NULL, ldq, NULL,
                                             (const bf16 *)wtm_v, beta, frames, S, heads, NULL,
                                             NULL, (bf16 *)vt, NULL, NULL);
    LAUNCH_CHECK("vda_act");
    return 0;
}

/* ---- the fused prep: one pass over k, v, q, fed by TMA ----
 * Bytes at H3 size (100 frames x 1008 tokens x 56 heads x 128): read k, v, q 3 x 1.45 GB, write
 * beta k~, v~, q~ (bf16) 3 x 1.45 GB and sqrt(beta) k~ (fp32) 2.89 GB: 11.6 GB, 2.7 ms at
 * 4.3 TB/s (docs/PERF.md). The former kernel (13.0 ms) was latency-bound: one CTA per SM in
 * lockstep, a CTA barrier per frame and two global loads (q, beta) on every frame's critical path.
 *
 * Here a CTA owns a PT_TY x PT_TX patch of tokens of one head of k (blockIdx.z 0) or of v (1) and
 * walks all frames. Nothing on a frame step waits on global memory: per frame one TMA box brings
 * the patch's input with its 2-token halo (zero-filled outside the grid and for negative
 * coordinates: the convolution's padding), and the same stage carries the epilogue frame's
 * (t - 2) auxiliaries, q (one more TMA box, v CTAs) or beta (cp.async, k CTAs). The stages are a
 * ring of PT_NS full/empty mbarriers, so warps drift apart by up to a few frames instead of
 * meeting at a CTA barrier; the only other synchronisation is the 64-thread pair barrier of the
 * per-head L2 sums. Thread = (channel pair, patch column, group of PT_R rows): 25 + 5 tap pairs
 * in registers, PT_R spatial outputs per frame, the last 5 of each kept as bf16 pairs (the
 * reference rounds the spatial module's output) for the temporal taps; frame t - 2 finishes
 * (temporal taps, SiLU, L2, beta) and goes straight to the FHSD outputs. */
#define PT_TY 8                               /* patch rows */
#define PT_TX 4                               /* patch columns */
#define PT_R 4                                /* rows per thread */
#define PT_IY (PT_TY + 4)                     /* input rows with halo */
#define PT_IX (PT_TX + 4)                     /* input columns with halo */
#define PT_GROUPS (PT_TX * (PT_TY / PT_R))    /* 64-thread groups (column, row group) */
#define PT_THREADS (64 * PT_GROUPS)           /* 512: 128 registers each fill the SM */
#define PT_NS 4                               /* stages in the ring */
#define PT_TILE (PT_IY * PT_IX * 256)         /* input box bytes (24 KB) */
#define PT_AUX (PT_TY * PT_TX * 256)          /* q box bytes (8 KB), or the patch's beta */
#define PT_STAGE (PT_TILE + PT_AUX)           /* 32 KB, a multiple of 128 (TMA alignment) */
#define PT_XCH (2 * PT_GROUPS * 2 * PT_R * 4) /* L2 partial sums: parity, group, warp, row */
#define PT_SMEM (PT_NS * PT_STAGE + PT_XCH + 2 * PT_NS * 8)
#define PT_FULL_ARRIVALS 33 /* the producer's expect_tx + warp 0's 32 cp.async arrivals */

__device__ __forceinline__ float2 bf2x2(unsigned u) {
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}
/* a 4-D box (channels, x, y, frame) of a tensor map into shared memory, completing on bar */
__device__ __forceinline__ void tma4(void *dst, const CUtensorMap *map, int c0, int c1, int c2,
                                     int c3, uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(saddr(dst)),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(saddr(bar))
                 : "memory");
}
__device__ __forceinline__ void cp_async4(void *dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(saddr(dst)), "l"(src)
                 : "memory");
}
/* one arrival on bar once this thread's earlier cp.async copies have landed (counted in init) */
__device__ __forceinline__ void cp_async_arrive(uint64_t *bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(saddr(bar))
                 : "memory");
}

/* ss[r] <- the head's sum over its 128 channels (the pair's two warps). A reduce-scatter
 * butterfly leaves lane l with its warp's sum of row (l >> 3) & 3 in 6 shuffles (instead of 20);
 * lanes 0, 8, 16, 24 publish them, and after the pair barrier every thread adds the two warps'
 * rows in the same order, so all 128 channels of a token see the same sum. Slots alternate with
 * the step's parity: a warp a step ahead cannot overwrite sums its partner has yet to read. */
__device__ __forceinline__ void pair_sums(float *ss, float *xch, int par, int grp, int wp,
                                          int lane) {
    static_assert(PT_R == 4, "the butterfly reduces 4 rows");
    const bool h16 = lane & 16, h8 = lane & 8;
    const float a0 = (h16 ? ss[2] : ss[0]) + __shfl_xor_sync(~0u, h16 ? ss[0] : ss[2], 16);
    const float a1 = (h16 ? ss[3] : ss[1]) + __shfl_xor_sync(~0u, h16 ? ss[1] : ss[3], 16);
    float b = (h8 ? a1 : a0) + __shfl_xor_sync(~0u, h8 ? a0 : a1, 8);
    b += __shfl_xor_sync(~0u, b, 4);
    b += __shfl_xor_sync(~0u, b, 2);
    b += __shfl_xor_sync(~0u, b, 1);
    float *slot = xch + (par * PT_GROUPS + grp) * 2 * PT_R;
    if ((lane & 7) == 0) slot[wp * PT_R + (lane >> 3)] = b;
    asm volatile("bar.sync %0, %1;\n" ::"r"(1 + grp), "r"(64) : "memory");
    const float4 s0 = *reinterpret_cast<const float4 *>(slot);
    const float4 s1 = *reinterpret_cast<const float4 *>(slot + PT_R);
    ss[0] = s0.x + s1.x, ss[1] = s0.y + s1.y, ss[2] = s0.z + s1.z, ss[3] = s0.w + s1.w;
}

__device__ __forceinline__ float silu_rbf(float a) { /* the module output in bf16, then SiLU */
    return silu(rbf(a));
}

__global__ void __launch_bounds__(PT_THREADS, 1)
    prep_k(const __grid_constant__ CUtensorMap mk, const __grid_constant__ CUtensorMap mv,
           const __grid_constant__ CUtensorMap mq, int has_q, int F, int gh, int gw, int H,
           const bf16 *__restrict__ wsk, const bf16 *__restrict__ wtk, const bf16 *__restrict__ wsv,
           const bf16 *__restrict__ wtv, const float *__restrict__ beta, bf16 *kt, bf16 *kb,
           bf16 *vt, bf16 *qt, float *ks) {
    extern __shared__ __align__(1024) unsigned char pt_smem[];
    float *xch = reinterpret_cast<float *>(pt_smem + PT_NS * PT_STAGE);
    uint64_t *full = reinterpret_cast<uint64_t *>(pt_smem + PT_NS * PT_STAGE + PT_XCH);
    uint64_t *empty = full + PT_NS;
    const bool isk = blockIdx.z == 0; /* CTA-uniform: k (+ beta k~, sqrt(beta) k~) or v (+ q) */
    const int h = blockIdx.y, S = gh * gw, ntx = (gw + PT_TX - 1) / PT_TX;
    const int y0 = (int)(blockIdx.x / ntx) * PT_TY, x0 = (int)(blockIdx.x % ntx) * PT_TX;
    const int tid = threadIdx.x, cp = tid & 63, grp = tid >> 6, lane = tid & 31, wp = cp >> 5;
    const int tx = grp % PT_TX, gy = (grp / PT_TX) * PT_R; /* column, first row in the patch */
    const int warp = tid >> 5, steps = F + 2;
    const bool do_q = !isk && has_q;
    const CUtensorMap *min = isk ? &mk : &mv;

    if (tid == 0) {
        for (int s = 0; s < PT_NS; s++)
            mbar_init(&full[s], PT_FULL_ARRIVALS), mbar_init(&empty[s], PT_THREADS / 32);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    /* warp 0: step j's stage = frame j's input box (j < F) and the auxiliaries of frame j - 2;
     * its previous use (step j - PT_NS) must be released by all 16 warps first */
    auto issue = [&](int j) {
        const int st = j % PT_NS, of = j - 2;
        unsigned char *stage = pt_smem + st * PT_STAGE;
        if (j >= PT_NS) mbar_wait(&empty[st], ((j / PT_NS) - 1) & 1);
        if (isk && of >= 0 && lane < PT_TY * PT_TX) {
            const int yy = y0 + lane / PT_TX, xx = x0 + lane % PT_TX;
            if (yy < gh && xx < gw)
                cp_async4(stage + PT_TILE + lane * 4,
                          beta + ((size_t)of * S + yy * gw + xx) * H + h);
        }
        cp_async_arrive(&full[st]); /* every lane, every step: the count stays 33 */
        if (lane == 0) {
            const bool in = j < F, q = do_q && of >= 0;
            mbar_expect_tx(&full[st], (in ? PT_TILE : 0) + (q ? PT_AUX : 0));
            if (in) tma4(stage, min, h * 128, x0 - 2, y0 - 2, j, &full[st]);
            if (q) tma4(stage + PT_TILE, &mq, h * 128, x0, y0, of, &full[st]);
        }
        __syncwarp();
    };
    if (warp == 0)
        for (int j = 0; j < PT_NS - 1 && j < steps; j++)
            issue(j);

    const int c = h * 128 + cp * 2;
    const bf16 *wsp = isk ? wsk : wsv, *wtm = isk ? wtk : wtv;
    float2 w[25], wt[5];
#pragma unroll
    for (int i = 0; i < 25; i++)
        w[i] = make_float2(bf2f(wsp[(size_t)c * 25 + i]), bf2f(wsp[(size_t)(c + 1) * 25 + i]));
#pragma unroll
    for (int d = 0; d < 5; d++)
        wt[d] = make_float2(bf2f(wtm[(size_t)c * 5 + d]), bf2f(wtm[(size_t)(c + 1) * 5 + d]));

    /* this thread's tokens: rows y0 + gy + r of column x0 + tx; FHSD offset of row 0 at frame 0,
     * rows gw tokens apart, frames H S tokens apart */
    unsigned live = 0;
#pragma unroll
    for (int r = 0; r < PT_R; r++)
        live |= (y0 + gy + r < gh && x0 + tx < gw) ? 1u << r : 0u;
    const size_t o0 = ((size_t)h * S + (size_t)(y0 + gy) * gw + x0 + tx) * 128 + cp * 2;
    const size_t rstep = (size_t)gw * 128, fstep = (size_t)H * S * 128;
    const int aux_tok = gy * PT_TX + tx; /* row 0's token index in the patch's q box / beta */

    /* ring[r][d]: spatial output (bf16 pair) of row r at frame t - 4 + d */
    unsigned ring[PT_R][5];
#pragma unroll
    for (int r = 0; r < PT_R; r++)
#pragma unroll
        for (int d = 0; d < 5; d++)
            ring[r][d] = 0u;

    for (int t = 0; t < steps; t++) {
        if (warp == 0 && t + PT_NS - 1 < steps) issue(t + PT_NS - 1);
        const int st = t % PT_NS;
        const unsigned char *stage = pt_smem + st * PT_STAGE;
        mbar_wait(&full[st], (t / PT_NS) & 1);

        /* spatial 5x5 of frame t (zero past the last frame: the temporal padding); the loop
         * visits taps (i, j) of each output in the reference's order */
        float2 acc[PT_R];
#pragma unroll
        for (int r = 0; r < PT_R; r++)
            acc[r] = make_float2(0.f, 0.f);
        if (t < F) {
            const unsigned *tl =
                reinterpret_cast<const unsigned *>(stage) + (gy * PT_IX + tx) * 64 + cp;
#pragma unroll
            for (int iy = 0; iy < PT_R + 4; iy++)
#pragma unroll
                for (int dx = 0; dx < 5; dx++) {
                    const float2 v = bf2x2(tl[(iy * PT_IX + dx) * 64]);
#pragma unroll
                    for (int r = 0; r < PT_R; r++) {
                        const int i = iy - r;
                        if (i >= 0 && i < 5) {
                            acc[r].x = fmaf(w[i * 5 + dx].x, v.x, acc[r].x);
                            acc[r].y = fmaf(w[i * 5 + dx].y, v.y, acc[r].y);
                        }
                    }
                }
        }
#pragma unroll
        for (int r = 0; r < PT_R; r++) {
#pragma unroll
            for (int d = 0; d < 4; d++)
                ring[r][d] = ring[r][d + 1];
            ring[r][4] = pack_bf2(acc[r].x, acc[r].y);
        }

        if (t >= 2) { /* temporal 5 taps, SiLU (+ L2, beta) of frame t - 2 */
            const size_t ofs = o0 + (size_t)(t - 2) * fstep;
            float2 o[PT_R];
            float ss[PT_R];
#pragma unroll
            for (int r = 0; r < PT_R; r++) {
                float a = 0.f, b = 0.f;
#pragma unroll
                for (int d = 0; d < 5; d++) {
                    const float2 x = bf2x2(ring[r][d]);
                    a = fmaf(wt[d].x, x.x, a);
                    b = fmaf(wt[d].y, x.y, b);
                }
                o[r] = make_float2(silu_rbf(a), silu_rbf(b));
                ss[r] = o[r].x * o[r].x + o[r].y * o[r].y;
            }
            if (isk) {
                pair_sums(ss, xch, t & 1, grp, wp, lane);
                const float *bt = reinterpret_cast<const float *>(stage + PT_TILE) + aux_tok;
#pragma unroll
                for (int r = 0; r < PT_R; r++) {
                    if (!(live >> r & 1)) continue;
                    const float inv = 1.f / fmaxf(sqrtf(ss[r]), 1e-6f);
                    const float ka = rbf(o[r].x * inv), kc = rbf(o[r].y * inv);
                    const float b = bt[r * PT_TX];
                    const size_t at = ofs + r * rstep;
                    if (kt) *reinterpret_cast<unsigned *>(kt + at) = pack_bf2(ka, kc);
                    *reinterpret_cast<unsigned *>(kb + at) = pack_bf2(b * ka, b * kc);
                    if (ks) {
                        const float sb = sqrtf(b);
                        *reinterpret_cast<float2 *>(ks + at) = make_float2(sb * ka, sb * kc);
                    }
                }
            } else {
#pragma unroll
                for (int r = 0; r < PT_R; r++)
                    if (live >> r & 1)
                        *reinterpret_cast<unsigned *>(vt + ofs + r * rstep) =
                            pack_bf2(o[r].x, o[r].y);
                if (do_q) { /* SiLU + L2 of q, frame t - 2, from the stage's q box */
                    const unsigned *qb =
                        reinterpret_cast<const unsigned *>(stage + PT_TILE) + aux_tok * 64 + cp;
#pragma unroll
                    for (int r = 0; r < PT_R; r++) {
                        const float2 x = bf2x2(qb[r * PT_TX * 64]);
                        o[r] = make_float2(silu(x.x), silu(x.y));
                        ss[r] = o[r].x * o[r].x + o[r].y * o[r].y;
                    }
                    pair_sums(ss, xch, t & 1, grp, wp, lane);
#pragma unroll
                    for (int r = 0; r < PT_R; r++) {
                        if (!(live >> r & 1)) continue;
                        const float inv = 1.f / fmaxf(sqrtf(ss[r]), 1e-6f);
                        *reinterpret_cast<unsigned *>(qt + ofs + r * rstep) =
                            pack_bf2(o[r].x * inv, o[r].y * inv);
                    }
                }
            }
        }
        __syncwarp(); /* the warp's reads of this stage are done */
        if (lane == 0) mbar_arrive(&empty[st]);
    }
}

/* 4-D bf16 tensor map (channels, x, y, frame) over rows of stride ld: boxes of box_x x box_y
 * tokens x 128 channels, no swizzle (a token's 256 bytes stay contiguous), zero fill outside */
static int prep_map(CUtensorMap *m, const void *base, int C, int ld, int gw, int gh, int F,
                    int box_x, int box_y) {
    PFN_cuTensorMapEncodeTiled_v12000 encode = tma_encoder("vdn_k_vda_prep");
    if (!encode) return -1;
    const size_t row = (size_t)ld * 2;
    const cuuint64_t dims[4] = {(cuuint64_t)C, (cuuint64_t)gw, (cuuint64_t)gh, (cuuint64_t)F};
    const cuuint64_t strides[3] = {row, row * gw, row * gw * gh};
    const cuuint32_t box[4] = {128, (cuuint32_t)box_x, (cuuint32_t)box_y, 1};
    const cuuint32_t es[4] = {1, 1, 1, 1};
    CUresult r = encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, (void *)base, dims, strides, box,
                        es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "vdn_k_vda_prep: cuTensorMapEncodeTiled failed (%d)\n", (int)r);
        return -1;
    }
    return 0;
}

extern "C" int vdn_k_vda_prep(const void *kin, const void *vin, const void *qin, int ld, int frames,
                              int gh, int gw, int heads, const void *wsk, const void *wtk,
                              const void *wsv, const void *wtv, const float *beta, void *kt,
                              void *kb, void *vt, void *qt, float *ks, vdn_stream st) {
    if (!kin || !vin || !wsk || !wtk || !wsv || !wtv || !beta || !kb || !vt) {
        fprintf(stderr, "vdn_k_vda_prep: k, v, their spatial and temporal taps, beta, kb and vt "
                        "are required\n");
        return -1;
    }
    const int has_q = qin && qt;
    if (ld % 8 || ((uintptr_t)kin | (uintptr_t)vin | (has_q ? (uintptr_t)qin : 0)) % 16) {
        fprintf(stderr,
                "vdn_k_vda_prep: row stride %d must be a multiple of 8 elements and k, v, q "
                "16-byte aligned (TMA boxes)\n",
                ld);
        return -1;
    }
    if (frames <= 0 || gh <= 0 || gw <= 0 || heads <= 0) return 0;
    const int C = heads * 128;
    CUtensorMap mk, mv, mq;
    if (prep_map(&mk, kin, C, ld, gw, gh, frames, PT_IX, PT_IY) ||
        prep_map(&mv, vin, C, ld, gw, gh, frames, PT_IX, PT_IY) ||
        prep_map(&mq, has_q ? qin : kin, C, ld, gw, gh, frames, PT_TX, PT_TY))
        return -1;
    static unsigned optin = 0;
    if (vdn_smem_optin(&optin, (const void *)prep_k, PT_SMEM)) return -1;
    const int tiles = ((gh + PT_TY - 1) / PT_TY) * ((gw + PT_TX - 1) / PT_TX);
    dim3 grid(tiles, heads, 2);
    prep_k<<<grid, PT_THREADS, PT_SMEM, S_(st)>>>(
        mk, mv, mq, has_q, frames, gh, gw, heads, (const bf16 *)wsk, (const bf16 *)wtk,
        (const bf16 *)wsv, (const bf16 *)wtv, beta, (bf16 *)kt, (bf16 *)kb, (bf16 *)vt, (bf16 *)qt,
        ks);
    LAUNCH_CHECK("vda_prep");
    return 0;
}
