/* Hopper's asynchronous copies, shared by the kernels that use them (attn_pingpong.cu,
 * vda_prep.cu): mbarriers in shared memory (CTA scope), the bf16 pair pack, and the driver's
 * tensor-map encoder for TMA boxes. */
#ifndef VDN_TMA_CUH
#define VDN_TMA_CUH

#include <cudaTypedefs.h>
#include <stdio.h>

#include "cuda_util.cuh"

__device__ __forceinline__ unsigned pack_bf2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
}

/* mbarriers (shared memory, CTA scope) */
__device__ __forceinline__ uint32_t saddr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(saddr(b)), "r"(count)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(saddr(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, int parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(saddr(b)), "r"(parity)
                     : "memory");
}
/* arrive once and expect `bytes` of TMA data on the barrier's current phase */
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(saddr(b)),
                 "r"(bytes)
                 : "memory");
}

/* cuTensorMapEncodeTiled from the driver (looked up once), or NULL after a message naming who
 * asked */
static inline PFN_cuTensorMapEncodeTiled_v12000 tma_encoder(const char *who) {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL;
    if (!encode) {
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&encode, 12000,
                                             cudaEnableDefault, &q) != cudaSuccess ||
            !encode) {
            fprintf(stderr, "%s: cuTensorMapEncodeTiled is not available from the driver\n", who);
            encode = NULL;
        }
    }
    return encode;
}

#endif
