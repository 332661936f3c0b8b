/* VDA Prep (spec 5.3 "Features"): spatial depthwise 5x5 per frame, then temporal 5-tap across
 * frames, SiLU, L2 per head (k, q), beta, and the frame-major FHSD layout the statistics read.
 * vdn_k_vda_prep does all of it for the video frames in one pass (below); vdn_k_vda_act, a
 * warp-per-(token, head) pass, serves the text rows (no conv). Until run 32 the video path was a
 * separate spatial-conv kernel writing bf16 spk/spv plus vdn_k_vda_act with the temporal taps
 * (7.8 + 5.8 ms at H3 size; docs/PERF.md). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_util.cuh"

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

/* ---- the fused prep: one pass over k, v, q ----
 * The former split path moved every element through global memory three times (sconv read k/v
 * and wrote spk/spv, act read them back): 13.6 ms at H3 size for ~12 GB of traffic. Here one CTA
 * owns a (PF_TY x PF_TX) patch of tokens of one head (128 channels) of k or of v, and walks all
 * frames: the patch's input rows with the 2-token halo come in by cp.async (16-byte pieces, three
 * frames in flight), each thread (a channel pair, one column of the patch) convolves PF_TY
 * outputs with its 25 spatial taps held in registers (weights are read once per CTA, not per
 * output), keeps the last 5 spatial outputs of its tokens in registers (bf16 pairs, as the
 * reference rounds the module output) for the temporal taps, and writes frame t - 2's finished
 * k~ / v~ straight into the FHSD layout. The k CTAs also write beta k~ and sqrt(beta) k~ (fp32);
 * the v CTAs also finish q (SiLU, L2), so both kinds move about the same bytes. Per-head L2 sums
 * cross the two warps of a column through shared memory under a 64-thread named barrier. */
#define PF_TY 4                 /* output rows of a patch (each thread computes all of them) */
#define PF_TX 7                 /* output columns of a patch (one 64-thread group each) */
#define PF_IY (PF_TY + 4)       /* input rows with halo */
#define PF_IX (PF_TX + 4)       /* input columns with halo */
#define PF_POS (PF_IY * PF_IX)  /* input token positions per frame */
#define PF_STAGES 3             /* frames in the cp.async ring */
#define PF_THREADS (64 * PF_TX) /* 448 */
#define PF_TILE_BYTES (PF_POS * 256)
#define PF_SMEM (PF_STAGES * PF_TILE_BYTES + 2 * PF_TX * 2 * PF_TY * 4)

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    const int n = valid ? 16 : 0; /* src-size 0: the 16 bytes are zero-filled (conv padding) */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ float2 bf2x2(unsigned u) {
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}
__device__ __forceinline__ unsigned pack_bf2(float a, float b) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<unsigned *>(&h);
}

/* ss[r] <- the head's sum over its 128 channels: the warp's 64 channels by shuffles, the other
 * warp of the column through xch (one slot per frame parity, so a fast warp writing the next
 * frame's sums cannot overwrite ones its partner has yet to read) */
__device__ __forceinline__ void head_sums(float *ss, float *xch, int par, int tx, int wp,
                                          int lane) {
    float *slot = xch + ((par * PF_TX + tx) * 2) * PF_TY;
#pragma unroll
    for (int r = 0; r < PF_TY; r++) {
        ss[r] = warp_sum(ss[r]);
        if (lane == 0) slot[wp * PF_TY + r] = ss[r];
    }
    asm volatile("bar.sync %0, %1;\n" ::"r"(1 + tx), "r"(64) : "memory");
#pragma unroll
    for (int r = 0; r < PF_TY; r++)
        ss[r] += slot[(wp ^ 1) * PF_TY + r];
}

__global__ void __launch_bounds__(PF_THREADS, 1)
    prep_k(const bf16 *kin, const bf16 *vin, const bf16 *qin, int ld, int F, int gh, int gw, int H,
           const bf16 *wsk, const bf16 *wtk, const bf16 *wsv, const bf16 *wtv, const float *beta,
           bf16 *kt, bf16 *kb, bf16 *vt, bf16 *qt, float *ks) {
    extern __shared__ __align__(16) unsigned char pf_smem[];
    uint4 *tile = reinterpret_cast<uint4 *>(pf_smem);
    float *xch = reinterpret_cast<float *>(pf_smem + PF_STAGES * PF_TILE_BYTES);
    const bool isk = blockIdx.z == 0; /* CTA-uniform: k (+beta, ks) or v (+q) */
    const int h = blockIdx.y, S = gh * gw;
    const int ntx = (gw + PF_TX - 1) / PF_TX;
    const int y0 = (int)(blockIdx.x / ntx) * PF_TY, x0 = (int)(blockIdx.x % ntx) * PF_TX;
    const int cp = threadIdx.x & 63, tx = threadIdx.x >> 6, wp = cp >> 5, lane = threadIdx.x & 31;
    const int c = h * 128 + cp * 2;
    const bf16 *in = (isk ? kin : vin) + h * 128;
    const bf16 *wsp = isk ? wsk : wsv, *wtm = isk ? wtk : wtv;
    const bool do_q = !isk && qin && qt;

    float2 w[25], wt[5];
#pragma unroll
    for (int i = 0; i < 25; i++)
        w[i] = make_float2(bf2f(wsp[(size_t)c * 25 + i]), bf2f(wsp[(size_t)(c + 1) * 25 + i]));
#pragma unroll
    for (int d = 0; d < 5; d++)
        wt[d] = make_float2(bf2f(wtm[(size_t)c * 5 + d]), bf2f(wtm[(size_t)(c + 1) * 5 + d]));

    auto load = [&](int f) {
        uint4 *dst = tile + (f % PF_STAGES) * (PF_POS * 16);
        for (int e = threadIdx.x; e < PF_POS * 16; e += PF_THREADS) {
            const int pos = e >> 4, piece = e & 15;
            const int yy = y0 + pos / PF_IX - 2, xx = x0 + pos % PF_IX - 2;
            const bool ok = yy >= 0 && yy < gh && xx >= 0 && xx < gw;
            const bf16 *src = ok ? in + ((size_t)f * S + yy * gw + xx) * ld + piece * 8 : in;
            cp_async16(dst + e, src, ok);
        }
    };
    /* ring[r][d]: spatial output (bf16 pair) of token r at frame t - 4 + d */
    unsigned ring[PF_TY][5];
#pragma unroll
    for (int r = 0; r < PF_TY; r++)
#pragma unroll
        for (int d = 0; d < 5; d++)
            ring[r][d] = 0u;
    int s_of[PF_TY];
    bool live[PF_TY];
#pragma unroll
    for (int r = 0; r < PF_TY; r++) {
        live[r] = y0 + r < gh && x0 + tx < gw;
        s_of[r] = (y0 + r) * gw + x0 + tx;
    }

    load(0);
    asm volatile("cp.async.commit_group;\n" ::);
    if (F > 1) load(1);
    asm volatile("cp.async.commit_group;\n" ::);
    for (int t = 0; t < F + 2; t++) {
        asm volatile("cp.async.wait_group 1;\n" ::);
        __syncthreads(); /* frame t has landed; every thread is done with frame t - 1's stage */
        if (t + 2 < F) load(t + 2);
        asm volatile("cp.async.commit_group;\n" ::);

        /* q of frame t (v CTAs): its load goes out before the convolution's shared loads */
        unsigned qraw[PF_TY] = {0u};
        if (do_q && t < F) {
#pragma unroll
            for (int r = 0; r < PF_TY; r++)
                qraw[r] = live[r] ? __ldg(reinterpret_cast<const unsigned *>(
                                        qin + ((size_t)t * S + s_of[r]) * ld + c))
                                  : 0u;
        }

        /* spatial 5x5 of frame t (zero beyond the last frame: the temporal padding) */
        float2 acc[PF_TY];
#pragma unroll
        for (int r = 0; r < PF_TY; r++)
            acc[r] = make_float2(0.f, 0.f);
        if (t < F) {
            const unsigned *tl =
                reinterpret_cast<const unsigned *>(tile + (t % PF_STAGES) * (PF_POS * 16));
#pragma unroll
            for (int iy = 0; iy < PF_IY; iy++)
#pragma unroll
                for (int dx = 0; dx < 5; dx++) {
                    const float2 v = bf2x2(tl[(iy * PF_IX + tx + dx) * 64 + cp]);
#pragma unroll
                    for (int r = 0; r < PF_TY; r++) {
                        const int i = iy - r;
                        if (i >= 0 && i < 5) {
                            acc[r].x += w[i * 5 + dx].x * v.x;
                            acc[r].y += w[i * 5 + dx].y * v.y;
                        }
                    }
                }
        }
#pragma unroll
        for (int r = 0; r < PF_TY; r++) {
#pragma unroll
            for (int d = 0; d < 4; d++)
                ring[r][d] = ring[r][d + 1];
            ring[r][4] = pack_bf2(acc[r].x, acc[r].y);
        }

        if (t >= 2) { /* temporal 5 taps, SiLU (+ L2) of frame t - 2 */
            const int of = t - 2;
            float2 o[PF_TY];
            float ss[PF_TY];
#pragma unroll
            for (int r = 0; r < PF_TY; r++) {
                float a = 0.f, b = 0.f;
#pragma unroll
                for (int d = 0; d < 5; d++) {
                    const float2 x = bf2x2(ring[r][d]);
                    a += wt[d].x * x.x;
                    b += wt[d].y * x.y;
                }
                o[r] = make_float2(silu(rbf(a)), silu(rbf(b)));
                ss[r] = o[r].x * o[r].x + o[r].y * o[r].y;
            }
            if (isk) {
                head_sums(ss, xch, t & 1, tx, wp, lane);
#pragma unroll
                for (int r = 0; r < PF_TY; r++) {
                    if (!live[r]) continue;
                    const float inv = 1.f / fmaxf(sqrtf(ss[r]), 1e-6f);
                    const float ka = rbf(o[r].x * inv), kc = rbf(o[r].y * inv);
                    const size_t row = (size_t)of * S + s_of[r];
                    const size_t ofs = (((size_t)of * H + h) * S + s_of[r]) * 128 + cp * 2;
                    const float bt = beta[row * H + h];
                    if (kt) *reinterpret_cast<unsigned *>(kt + ofs) = pack_bf2(ka, kc);
                    *reinterpret_cast<unsigned *>(kb + ofs) = pack_bf2(bt * ka, bt * kc);
                    if (ks) {
                        const float sb = sqrtf(bt);
                        *reinterpret_cast<float2 *>(ks + ofs) = make_float2(sb * ka, sb * kc);
                    }
                }
            } else {
#pragma unroll
                for (int r = 0; r < PF_TY; r++)
                    if (live[r])
                        *reinterpret_cast<unsigned *>(
                            vt + (((size_t)of * H + h) * S + s_of[r]) * 128 + cp * 2) =
                            pack_bf2(o[r].x, o[r].y);
            }
        }
        if (do_q && t < F) { /* SiLU + L2 of q, frame t */
            float2 qv[PF_TY];
            float ss[PF_TY];
#pragma unroll
            for (int r = 0; r < PF_TY; r++) {
                const float2 x = bf2x2(qraw[r]);
                qv[r] = make_float2(silu(x.x), silu(x.y));
                ss[r] = qv[r].x * qv[r].x + qv[r].y * qv[r].y;
            }
            head_sums(ss, xch, t & 1, tx, wp, lane);
#pragma unroll
            for (int r = 0; r < PF_TY; r++) {
                if (!live[r]) continue;
                const float inv = 1.f / fmaxf(sqrtf(ss[r]), 1e-6f);
                *reinterpret_cast<unsigned *>(qt + (((size_t)t * H + h) * S + s_of[r]) * 128 +
                                              cp * 2) = pack_bf2(qv[r].x * inv, qv[r].y * inv);
            }
        }
    }
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
    if (ld % 8 || ((uintptr_t)kin | (uintptr_t)vin) % 16 || (uintptr_t)qin % 4) {
        fprintf(stderr,
                "vdn_k_vda_prep: row stride %d must be a multiple of 8 elements and k, v 16-byte "
                "aligned (cp.async pieces)\n",
                ld);
        return -1;
    }
    if (frames <= 0 || gh <= 0 || gw <= 0) return 0;
    static unsigned optin = 0;
    if (vdn_smem_optin(&optin, (const void *)prep_k, PF_SMEM)) return -1;
    const int tiles = ((gh + PF_TY - 1) / PF_TY) * ((gw + PF_TX - 1) / PF_TX);
    dim3 grid(tiles, heads, 2);
    prep_k<<<grid, PF_THREADS, PF_SMEM, S_(st)>>>(
        (const bf16 *)kin, (const bf16 *)vin, (const bf16 *)qin, ld, frames, gh, gw, heads,
        (const bf16 *)wsk, (const bf16 *)wtk, (const bf16 *)wsv, (const bf16 *)wtv, beta,
        (bf16 *)kt, (bf16 *)kb, (bf16 *)vt, (bf16 *)qt, ks);
    LAUNCH_CHECK("vda_prep");
    return 0;
}
