/* Error checks and small device helpers shared by the .cu files. */
#ifndef VDN_CUDA_UTIL_CUH
#define VDN_CUDA_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "kernels.h"

/* For launchers returning int: report and return -1. */
#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
/* After every launch: a bad configuration shows up here, not at some later call. */
#define LAUNCH_CHECK(name) CUDA_CHECK(cudaGetLastError())
/* The same for cuBLAS and cuBLASLt calls (the files using it include cublas_v2.h). */
#define CUBLAS_CHECK(call)                                                                         \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #call, (int)s_);  \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

/* Opt a kernel into more than 48 KiB of dynamic shared memory, once per GPU (the attribute
 * belongs to the device's context, so a process driving several GPUs sets it on each); `done` is
 * the call site's static bit set of devices. 0 or -1 after printing why. */
static inline int vdn_smem_optin(unsigned *done, const void *kernel, int smem) {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < 32 && ((*done >> dev) & 1u)) return 0;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    if (dev < 32) *done |= 1u << dev;
    return 0;
}

typedef __nv_bfloat16 bf16;
static inline cudaStream_t S_(vdn_stream s) {
    return (cudaStream_t)s;
}

__device__ __forceinline__ float bf2f(bf16 x) {
    return __bfloat162float(x);
}
__device__ __forceinline__ bf16 f2bf(float x) {
    return __float2bfloat16(x);
}

/* 8 bf16 in one 16-byte word */
__device__ __forceinline__ void unpack8(uint4 u, float *f) {
    const __nv_bfloat162 *p = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 t = __bfloat1622float2(p[i]);
        f[2 * i] = t.x, f[2 * i + 1] = t.y;
    }
}
__device__ __forceinline__ uint4 pack8(const float *f) {
    uint4 u;
    __nv_bfloat162 *p = reinterpret_cast<__nv_bfloat162 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++)
        p[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    return u;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

#endif
