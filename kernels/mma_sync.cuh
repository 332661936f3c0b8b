/* The sm_80-style tensor-core building blocks the bf16 kernels share (the window attention in
 * attn.cu, the VAE encoder's implicit-GEMM conv2d in op_cuda_conv2d.cu): asynchronous 16-byte
 * copies into shared memory, ldmatrix loads of 8 x 8 b16 fragments, and the m16n8k16
 * bf16 x bf16 -> f32 mma.sync. Inline PTX, one wrapper per instruction. */
#ifndef VDN_MMA_SYNC_CUH
#define VDN_MMA_SYNC_CUH

/* 16 bytes global -> shared, the first `bytes` of them read (the rest zero-filled) */
static __device__ __forceinline__ void cp_async16(void *smem, const void *g, int bytes) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(g), "r"(bytes));
}
static __device__ __forceinline__ void cp_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
/* waits until at most N committed groups are still in flight */
template <int N> static __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
static __device__ __forceinline__ void ldsm_x4(unsigned &r0, unsigned &r1, unsigned &r2,
                                               unsigned &r3, const void *p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
}
static __device__ __forceinline__ void ldsm_x4_t(unsigned &r0, unsigned &r1, unsigned &r2,
                                                 unsigned &r3, const void *p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(s));
}
/* c (4 floats) += a (16 x 16, 4 registers) * b (16 x 8, 2 registers) */
static __device__ __forceinline__ void mma16816(float *c, const unsigned *a, unsigned b0,
                                                unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#endif
