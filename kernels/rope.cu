/* QK-norm + partial half-split RoPE in one pass (spec 3). One warp per row: each lane holds 4 of
 * a head's 128 channels; the lane's 4 (cos, sin) pairs are computed once per row and reused for
 * every head of q and k (the angles depend on the row only). Per head: RMSNorm over the 128
 * channels (warp sum), then channel i < 48 pairs with i + 48 (12 lanes away); channels 96..127
 * pass through. Angles are the reference's float32 products, reduced in float64 before the float
 * sin/cos, because positions reach several hundred radians. pos == NULL: the QK-norm alone (token
 * refiner). */
#include "cuda_util.cuh"

__device__ __forceinline__ void norm_rope_head(const bf16 *src, bf16 *dst, const float *w4,
                                               const float *c4, const float *s4, int lane,
                                               bool rope, float eps) {
    uint2 raw = *reinterpret_cast<const uint2 *>(src);
    const __nv_bfloat162 *p2 = reinterpret_cast<const __nv_bfloat162 *>(&raw);
    float2 a = __bfloat1622float2(p2[0]), b = __bfloat1622float2(p2[1]);
    float x[4] = {a.x, a.y, b.x, b.y};
    float ss = warp_sum(x[0] * x[0] + x[1] * x[1] + x[2] * x[2] + x[3] * x[3]);
    float inv = rsqrtf(ss / 128.f + eps);
    float y[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        y[j] = x[j] * inv * w4[j];
    /* partner values for the rotation: lanes 0..11 <-> 12..23 */
    int partner = lane < 12 ? lane + 12 : (lane < 24 ? lane - 12 : lane);
    float z[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        z[j] = __shfl_sync(0xffffffffu, y[j], partner);
    float o[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        if (rope && lane < 24) /* first half: a c - b s; second half: b c + a s */
            o[j] = lane < 12 ? y[j] * c4[j] - z[j] * s4[j] : y[j] * c4[j] + z[j] * s4[j];
        else
            o[j] = y[j];
    }
    uint2 ov;
    __nv_bfloat162 *op = reinterpret_cast<__nv_bfloat162 *>(&ov);
    op[0] = __floats2bfloat162_rn(o[0], o[1]);
    op[1] = __floats2bfloat162_rn(o[2], o[3]);
    *reinterpret_cast<uint2 *>(dst) = ov;
}

__global__ void qknorm_rope_k(const bf16 *qin, const bf16 *kin, int ld_in, const double *pos,
                              const float *inv_freq, const bf16 *wq, const bf16 *wk, int rows,
                              int heads, float eps, bf16 *qout, bf16 *kout, int ld_out) {
    int r = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (r >= rows) return;
    float c4[4] = {1.f, 1.f, 1.f, 1.f}, s4[4] = {0.f, 0.f, 0.f, 0.f};
    if (pos && lane < 24) {
        int base = (lane < 12 ? lane : lane - 12) * 4; /* angle index 0..47 */
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int i = base + j;
            /* the reference's float32 angle float32(pos) * inv (spec 3), reduced in double */
            double ang = (double)__fmul_rn((float)pos[(size_t)r * 3 + (i >> 4)], inv_freq[i]);
            ang -= 6.283185307179586 * floor(ang * 0.15915494309189535);
            sincosf((float)ang, &s4[j], &c4[j]);
        }
    }
    float wq4[4], wk4[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        wq4[j] = bf2f(wq[lane * 4 + j]), wk4[j] = bf2f(wk[lane * 4 + j]);
    const size_t ri = (size_t)r * ld_in + lane * 4, ro = (size_t)r * ld_out + lane * 4;
#pragma unroll 4
    for (int h = 0; h < heads; h++) {
        norm_rope_head(qin + ri + h * 128, qout + ro + h * 128, wq4, c4, s4, lane, pos != NULL,
                       eps);
        norm_rope_head(kin + ri + h * 128, kout + ro + h * 128, wk4, c4, s4, lane, pos != NULL,
                       eps);
    }
}

extern "C" int vdn_k_qknorm_rope(const void *qin, const void *kin, int ld_in, const double *pos,
                                 const float *inv_freq, const void *wq, const void *wk, int rows,
                                 int heads, float eps, void *qout, void *kout, int ld_out,
                                 vdn_stream st) {
    if (ld_in % 4 || ld_out % 4) {
        fprintf(stderr, "vdn_k_qknorm_rope: strides must be multiples of 4\n");
        return -1;
    }
    long threads = (long)rows * 32;
    qknorm_rope_k<<<(unsigned)((threads + 255) / 256), 256, 0, S_(st)>>>(
        (const bf16 *)qin, (const bf16 *)kin, ld_in, pos, inv_freq, (const bf16 *)wq,
        (const bf16 *)wk, rows, heads, eps, (bf16 *)qout, (bf16 *)kout, ld_out);
    LAUNCH_CHECK("qknorm_rope");
    return 0;
}
