/* The wgmma primitives the Hopper kernels share (attention: attn_wgmma.cuh; convolutions:
 * conv_wgmma.cuh): issue fences, group commit and waits, register pinning across an in-flight
 * wgmma, the generic-to-async proxy fence for ordinary shared-memory stores, and the descriptor of
 * a 128-byte-swizzled K-major tile. sm_90a only. */
#ifndef VDN_WGMMA_CUH
#define VDN_WGMMA_CUH

#include <stdint.h>

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait0() {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait1() {
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}
/* Registers an in-flight wgmma reads or writes must not be touched (or reused) by the compiler
 * before the matching wait: an empty asm that "modifies" them pins them after it. */
template <int N> __device__ __forceinline__ void fence_regs(float *r) {
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> __device__ __forceinline__ void fence_regs(unsigned *r) {
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+r"(r[i])::"memory");
}
__device__ __forceinline__ void fence_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* shared-memory matrix descriptor: 128B swizzle, 8-row groups 1024 bytes apart */
__device__ __forceinline__ uint64_t desc(const void *p) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

#endif
