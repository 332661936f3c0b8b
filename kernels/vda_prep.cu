/* VDA Prep (spec 5.3 "Features"): spatial depthwise 5x5 per frame, then temporal 5-tap across
 * frames, SiLU, L2 per head (k, q), beta, and the frame-major FHSD layout the statistics read.
 * Two kernels: the spatial conv (its output is a bf16 module output in the reference), and a
 * warp-per-(token, head) pass that walks the frames with the 5 temporal taps in registers, so
 * every input is read once. */
#include "cuda_util.cuh"

/* CTA = (4 grid rows, frame f, 128 channels); thread = a channel pair (4-byte loads, 256 bytes
 * per warp row); each thread slides a 5x5 window along x. */
__global__ void __launch_bounds__(256, 4)
    sconv_k(const bf16 *in, int ld, int gh, int gw, int C, const bf16 *w, bf16 *out) {
    const int y = blockIdx.x * 4 + threadIdx.y, f = blockIdx.y;
    const int c = blockIdx.z * 128 + threadIdx.x * 2;
    const bool live = c < C && y < gh;
    const int S = gh * gw;
    /* taps in shared memory (not registers) keep the register count, and so occupancy, up */
    __shared__ float2 wt_s[25][64];
    for (int e = threadIdx.y * 64 + threadIdx.x; e < 25 * 64; e += 256) {
        int i = e / 64, cc = blockIdx.z * 128 + (e % 64) * 2;
        wt_s[i][e % 64] =
            cc < C ? make_float2(bf2f(w[(size_t)cc * 25 + i]), bf2f(w[(size_t)(cc + 1) * 25 + i]))
                   : make_float2(0.f, 0.f);
    }
    __syncthreads();
    const float2 *wt = &wt_s[0][threadIdx.x];
    if (!live) return;
    float2 win[5][5]; /* [dy][dx] for columns x-2..x+2 */
#pragma unroll
    for (int i = 0; i < 5; i++)
#pragma unroll
        for (int j = 0; j < 5; j++)
            win[i][j] = make_float2(0.f, 0.f);
    auto col = [&](int xx, float2 *v) {
#pragma unroll
        for (int i = 0; i < 5; i++) {
            int yy = y + i - 2;
            v[i] = (xx >= 0 && xx < gw && yy >= 0 && yy < gh)
                       ? __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(
                             in + (size_t)(f * S + yy * gw + xx) * ld + c))
                       : make_float2(0.f, 0.f);
        }
    };
    float2 nv[5];
    col(0, nv);
#pragma unroll
    for (int i = 0; i < 5; i++)
        win[i][3] = nv[i];
    col(1, nv);
#pragma unroll
    for (int i = 0; i < 5; i++)
        win[i][4] = nv[i];
    for (int x = 0; x < gw; x++) {
        col(x + 2, nv);
#pragma unroll
        for (int i = 0; i < 5; i++) {
#pragma unroll
            for (int j = 0; j < 4; j++)
                win[i][j] = win[i][j + 1];
            win[i][4] = nv[i];
        }
        float a = 0.f, b = 0.f;
#pragma unroll
        for (int i = 0; i < 5; i++)
#pragma unroll
            for (int j = 0; j < 5; j++) {
                const float2 tap = wt[(i * 5 + j) * 64];
                a += tap.x * win[i][j].x;
                b += tap.y * win[i][j].y;
            }
        *reinterpret_cast<__nv_bfloat162 *>(out + (size_t)(f * S + y * gw + x) * C + c) =
            __floats2bfloat162_rn(a, b);
    }
}

extern "C" int vdn_k_vda_sconv(const void *in, int ld, int frames, int gh, int gw, int C,
                               const void *w, void *out, vdn_stream st) {
    if (ld % 2 || C % 2) {
        fprintf(stderr, "vdn_k_vda_sconv: stride %d and channels %d must be even\n", ld, C);
        return -1;
    }
    dim3 grid((gh + 3) / 4, frames, (C + 127) / 128), block(64, 4);
    sconv_k<<<grid, block, 0, S_(st)>>>((const bf16 *)in, ld, gh, gw, C, (const bf16 *)w,
                                        (bf16 *)out);
    LAUNCH_CHECK("vda_sconv");
    return 0;
}

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
