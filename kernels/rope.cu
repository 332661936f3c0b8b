/* QK-norm + partial half-split RoPE in one pass (spec 3): per (row, head) one warp holds the 128
 * channels, 4 per lane; RMSNorm over them, then channel i < 48 pairs with i + 48 (12 lanes away)
 * under angles (t, h, w) x inv_freq; channels 96..127 pass through. Angles in float64, reduced
 * before the float sin/cos, because positions reach several hundred radians. pos == NULL: the
 * QK-norm alone (token refiner). */
#include "cuda_util.cuh"

__global__ void qknorm_rope_k(const bf16 *qin, const bf16 *kin, int ld_in, const double *pos,
                              const float *inv_freq, const bf16 *wq, const bf16 *wk, int rows,
                              int heads, float eps, bf16 *qout, bf16 *kout, int ld_out) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (warp >= rows * heads) return;
    int r = warp / heads, h = warp % heads;
    const bf16 *in = blockIdx.y ? kin : qin;
    const bf16 *w = blockIdx.y ? wk : wq;
    bf16 *out = blockIdx.y ? kout : qout;
    const bf16 *src = in + (size_t)r * ld_in + h * 128 + lane * 4;
    uint2 raw = *reinterpret_cast<const uint2 *>(src);
    const __nv_bfloat162 *p2 = reinterpret_cast<const __nv_bfloat162 *>(&raw);
    float x[4];
    float2 a = __bfloat1622float2(p2[0]), b = __bfloat1622float2(p2[1]);
    x[0] = a.x, x[1] = a.y, x[2] = b.x, x[3] = b.y;
    float ss = warp_sum(x[0] * x[0] + x[1] * x[1] + x[2] * x[2] + x[3] * x[3]);
    float inv = rsqrtf(ss / 128.f + eps);
    uint2 wr = *reinterpret_cast<const uint2 *>(w + lane * 4);
    const __nv_bfloat162 *w2 = reinterpret_cast<const __nv_bfloat162 *>(&wr);
    float2 wa = __bfloat1622float2(w2[0]), wb = __bfloat1622float2(w2[1]);
    float y[4] = {x[0] * inv * wa.x, x[1] * inv * wa.y, x[2] * inv * wb.x, x[3] * inv * wb.y};
    /* partner values for the rotation: lanes 0..11 <-> 12..23 */
    int partner = lane < 12 ? lane + 12 : (lane < 24 ? lane - 12 : lane);
    float z[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        z[j] = __shfl_sync(0xffffffffu, y[j], partner);
    float o[4];
    if (pos && lane < 24) { /* pos NULL: QK-norm only (token refiner, no RoPE) */
        int base = (lane < 12 ? lane : lane - 12) * 4; /* angle index 0..47 */
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int i = base + j, axis = i >> 4;
            double ang = pos[(size_t)r * 3 + axis] * (double)inv_freq[i & 15];
            ang -= 6.283185307179586 * floor(ang * 0.15915494309189535);
            float s, c;
            sincosf((float)ang, &s, &c);
            /* first half: a*c - b*s ; second half: b*c + a*s (a = first-half channel) */
            o[j] = lane < 12 ? y[j] * c - z[j] * s : y[j] * c + z[j] * s;
        }
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++)
            o[j] = y[j];
    }
    uint2 ov;
    __nv_bfloat162 *op = reinterpret_cast<__nv_bfloat162 *>(&ov);
    op[0] = __floats2bfloat162_rn(o[0], o[1]);
    op[1] = __floats2bfloat162_rn(o[2], o[3]);
    *reinterpret_cast<uint2 *>(out + (size_t)r * ld_out + h * 128 + lane * 4) = ov;
}

extern "C" int vdn_k_qknorm_rope(const void *qin, const void *kin, int ld_in, const double *pos,
                                 const float *inv_freq, const void *wq, const void *wk, int rows,
                                 int heads, float eps, void *qout, void *kout, int ld_out,
                                 vdn_stream st) {
    if (ld_in % 4 || ld_out % 4) {
        fprintf(stderr, "vdn_k_qknorm_rope: strides must be multiples of 4\n");
        return -1;
    }
    long warps = (long)rows * heads;
    dim3 grid((unsigned)((warps * 32 + 255) / 256), 2);
    qknorm_rope_k<<<grid, 256, 0, S_(st)>>>((const bf16 *)qin, (const bf16 *)kin, ld_in, pos,
                                            inv_freq, (const bf16 *)wq, (const bf16 *)wk, rows,
                                            heads, eps, (bf16 *)qout, (bf16 *)kout, ld_out);
    LAUNCH_CHECK("qknorm_rope");
    return 0;
}
