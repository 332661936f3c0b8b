/* Hopper warpgroup MMA on TF32 operands for the convolutions (op_cuda_conv.cu conv_tap_k): wgmma
 * m64n64k8, A and B both from shared memory, K-major (the only layout wgmma takes for TF32),
 * unswizzled: 8 x 16-byte core matrices (8 rows of 4 floats, 128 contiguous bytes), described by
 * desc_plain with the strides between core matrices along K and along M/N; such a start needs only
 * 16-byte alignment, so a B operand can begin at any row (a convolution tap's shift). cp.async
 * wrappers for the tiles' loads. (The attention kernels' bf16 wrappers, attn_wgmma.cuh, use the
 * 128-byte-swizzled layout.) */
#ifndef VDN_CONV_WGMMA_CUH
#define VDN_CONV_WGMMA_CUH

#include <stdint.h>

#include "wgmma.cuh"

/* d (+)= A B: 64 x 64 outputs of a warpgroup, A 64 x 8 and B 8 x 64 (stored as 64 rows of 8) */
__device__ __forceinline__ void wg_tf32(float (&d)[32], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%"
                 "22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(accumulate));
}

/* 16 bytes global -> shared without registers (cp.async, L2 only: the weights are re-read by
 * every column tile); cp_wait0 makes this thread's copies complete and visible to it */
__device__ __forceinline__ void cp16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(dst)),
                 "l"(src)
                 : "memory");
}
__device__ __forceinline__ void cp_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_wait0() {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
/* all but this thread's n (0, 1 or 2; more counts as 2) most recent groups complete */
__device__ __forceinline__ void cp_wait_upto(int n) {
    if (n <= 0)
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    else if (n == 1)
        asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    else
        asm volatile("cp.async.wait_group 2;\n" ::: "memory");
}
/* 4 bytes global -> shared, or 4 zero bytes where !valid (src is then not read) */
__device__ __forceinline__ void cp4_or_zero(void *dst, const void *src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(dst)),
                 "l"(src), "r"(valid ? 4 : 0)
                 : "memory");
}

/* descriptor of an unswizzled K-major operand: 8 x 16-byte core matrices (8 rows of 4 floats,
 * 128 contiguous bytes), the next core matrix along K lbo bytes on, along M/N sbo bytes on; the
 * start only 16-byte aligned, so it can begin at any row */
__device__ __forceinline__ uint64_t desc_plain(const void *p, uint32_t lbo, uint32_t sbo) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
           ((uint64_t)(sbo >> 4) << 32);
}

#endif
