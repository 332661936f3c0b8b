/* Glue between the fp32 parts of the forward (time embedder, patch projections, heads, alpha)
 * and the bf16 residual stream: bias + activation, casts, plain residual adds, scaling. */
#include <cuda_fp16.h>

#include "cuda_util.cuh"

static int grid_of(size_t n) {
    size_t g = (n + 255) / 256;
    return (int)(g > 1048576 ? 1048576 : (g ? g : 1));
}

/* y[r, c] (+ bias[c]) then act (0 none, 1 SiLU); to fp32 (ld_f) and/or bf16 (ld_b) outputs */
__global__ void bias_act_k(const float *y, int ldy, const float *bias, int rows, int n, int act,
                           float *of, int ldf, bf16 *ob, int ldb) {
    size_t total = (size_t)rows * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / n;
        int c = (int)(i % n);
        float v = y[r * ldy + c] + (bias ? bias[c] : 0.f);
        if (act == 1) v = v / (1.f + expf(-v));
        if (of) of[r * ldf + c] = v;
        if (ob) ob[r * ldb + c] = f2bf(v);
    }
}

extern "C" int vdn_k_bias_act(const float *y, int ldy, const float *bias, int rows, int n, int act,
                              float *out_f32, int ld_f, void *out_bf16, int ld_b, vdn_stream st) {
    bias_act_k<<<grid_of((size_t)rows * n), 256, 0, S_(st)>>>(y, ldy, bias, rows, n, act, out_f32,
                                                              ld_f, (bf16 *)out_bf16, ld_b);
    LAUNCH_CHECK("bias_act");
    return 0;
}

__global__ void bf16_to_f32_k(const bf16 *x, int ldx, int rows, int n, float *y, int ldy) {
    size_t total = (size_t)rows * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / n;
        int c = (int)(i % n);
        y[r * ldy + c] = bf2f(x[r * ldx + c]);
    }
}

extern "C" int vdn_k_bf16_to_f32(const void *x, int ldx, int rows, int n, float *y, int ldy,
                                 vdn_stream st) {
    bf16_to_f32_k<<<grid_of((size_t)rows * n), 256, 0, S_(st)>>>((const bf16 *)x, ldx, rows, n, y,
                                                                 ldy);
    LAUNCH_CHECK("bf16_to_f32");
    return 0;
}

__global__ void add_bf16_k(bf16 *x, const bf16 *y, size_t n8) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n8;
         i += (size_t)gridDim.x * blockDim.x) {
        float a[8], b[8];
        unpack8(reinterpret_cast<uint4 *>(x)[i], a);
        unpack8(reinterpret_cast<const uint4 *>(y)[i], b);
#pragma unroll
        for (int j = 0; j < 8; j++)
            a[j] += b[j];
        reinterpret_cast<uint4 *>(x)[i] = pack8(a);
    }
}

extern "C" int vdn_k_add_bf16(void *x, const void *y, size_t n, vdn_stream st) {
    if (n % 8) {
        fprintf(stderr, "vdn_k_add_bf16: %zu elements, expected a multiple of 8\n", n);
        return -1;
    }
    add_bf16_k<<<grid_of(n / 8), 256, 0, S_(st)>>>((bf16 *)x, (const bf16 *)y, n / 8);
    LAUNCH_CHECK("add_bf16");
    return 0;
}

__global__ void scale_f32_k(float *x, size_t n, float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

extern "C" int vdn_k_scale_f32(float *x, size_t n, float s, vdn_stream st) {
    scale_f32_k<<<grid_of(n), 256, 0, S_(st)>>>(x, n, s);
    LAUNCH_CHECK("scale_f32");
    return 0;
}

/* weight upload (upload.h): dtype codes of ckpt.h, 0 F32, 1 BF16, 2 F16 in; F32 or BF16 out */
__global__ void convert_k(void *dst, int want, const void *src, int have, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = have == 0   ? ((const float *)src)[i]
                  : have == 1 ? __bfloat162float(((const bf16 *)src)[i])
                              : __half2float(((const __half *)src)[i]);
        if (want == 0)
            ((float *)dst)[i] = v;
        else
            ((bf16 *)dst)[i] = __float2bfloat16_rn(v);
    }
}

extern "C" int vdn_k_convert(void *dst, int want, const void *src, int have, size_t n,
                             vdn_stream st) {
    if (want < 0 || want > 1 || have < 0 || have > 2) {
        fprintf(stderr, "vdn_k_convert: dtype %d -> %d, expected F32/BF16/F16 -> F32/BF16\n", have,
                want);
        return -1;
    }
    if (n == 0) return 0;
    convert_k<<<grid_of(n), 256, 0, S_(st)>>>(dst, want, src, have, n);
    LAUNCH_CHECK("convert");
    return 0;
}
