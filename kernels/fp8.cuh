/* The fp8 (e4m3) rule on the device, shared by op_cuda_fp8.cu (quantize_rows, linear) and
 * op_cuda_fp8_fused.cu (rmsnorm_quant, linear_swiglu_quant): the conversions and the block
 * reductions of the per-row kernels. The rule (op.h) is the CPU oracle's bit for bit:
 * scale = amax / 448 in float32 (1 for an all-zero row), q = e4m3(x / scale) rounded to nearest
 * even and saturated (cvt.rn.satfinite); both divisions are __fdiv_rn, so the rule holds under
 * --use_fast_math too. */
#ifndef VDN_FP8_CUH
#define VDN_FP8_CUH

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "op_cuda.h"

namespace fp8 {

__device__ __forceinline__ uint8_t to_e4m3(float v) {
    return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ float from_e4m3(uint8_t q) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)q, __NV_E4M3)));
}

/* the row's scale from its float32 amax */
__device__ __forceinline__ float row_scale(float amax) {
    return amax > 0.f ? __fdiv_rn(amax, 448.f) : 1.f;
}

/* The block's maximum (SUM = 0) or sum (SUM = 1) of v, every thread gets it; NT threads. The
 * shared slots are free again when it returns (the next row may call it at once). */
template <int NT, int SUM> __device__ float block_reduce(float v) {
    __shared__ float part[NT / 32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = SUM ? v + u : fmaxf(v, u);
    }
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    float m = part[0];
#pragma unroll
    for (int i = 1; i < NT / 32; i++)
        m = SUM ? m + part[i] : fmaxf(m, part[i]);
    __syncthreads();
    return m;
}

/* 8 e4m3 bytes of f / s as one 8-byte word */
__device__ __forceinline__ uint2 quant8(const float *f, float s) {
    uint2 o;
    uint8_t *b = (uint8_t *)&o;
#pragma unroll
    for (int i = 0; i < 8; i++)
        b[i] = to_e4m3(__fdiv_rn(f[i], s));
    return o;
}

/* 8 e4m3 bytes of f * inv (inv = 1 / the row's scale, for the fused kernels: within an ulp of f /
 * scale, so a code can differ from the division's only where f / scale sits within an ulp of a
 * rounding midpoint), converted two at a time (x.x is the low byte of each pair: memory order) */
__device__ __forceinline__ uint2 quant8_mul(const float *f, float inv) {
    uint32_t w[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const uint32_t lo = __nv_cvt_float2_to_fp8x2(
            make_float2(f[4 * i] * inv, f[4 * i + 1] * inv), __NV_SATFINITE, __NV_E4M3);
        const uint32_t hi = __nv_cvt_float2_to_fp8x2(
            make_float2(f[4 * i + 2] * inv, f[4 * i + 3] * inv), __NV_SATFINITE, __NV_E4M3);
        w[i] = lo | hi << 16;
    }
    return make_uint2(w[0], w[1]);
}

/* 8 floats from a 16-byte aligned p */
__device__ __forceinline__ void load8f(const float *p, float *f) {
    const float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}

/* 8 floats of a vector p: 16-byte loads when vec (p 16-byte aligned), else one at a time */
__device__ __forceinline__ void load8v(const float *p, int vec, float *f) {
    if (vec) {
        load8f(p, f);
        return;
    }
#pragma unroll
    for (int j = 0; j < 8; j++)
        f[j] = p[j];
}

} // namespace fp8

#endif
