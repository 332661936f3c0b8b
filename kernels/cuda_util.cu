/* Random fills (bench weights, test inputs), cuBLAS handle helpers. */
#include <cublas_v2.h>

#include "cuda_util.cuh"

/* counter-based: splitmix64 of (seed, index) -> two uniforms -> Box-Muller */
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ float unif(uint64_t seed, size_t i, int k) {
    uint64_t z = mix64(seed * 0x100000001B3ull + 2 * i + k);
    return ((float)(z >> 40) + 0.5f) * (1.0f / 16777216.0f);
}
__device__ __forceinline__ float gauss(uint64_t seed, size_t i) {
    float u = unif(seed, i, 0), v = unif(seed, i, 1);
    return sqrtf(-2.f * logf(u)) * cospif(2.f * v);
}

__global__ void randn_bf16_k(bf16 *d, size_t n, uint64_t seed, float sc) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        d[i] = f2bf(gauss(seed, i) * sc);
}
__global__ void randn_f32_k(float *d, size_t n, uint64_t seed, float sc, float off) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        d[i] = gauss(seed, i) * sc + off;
}
__global__ void unif_f32_k(float *d, size_t n, uint64_t seed, float lo, float hi) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        d[i] = lo + (hi - lo) * unif(seed, i, 0);
}

static int grid_for(size_t n) {
    size_t g = (n + 255) / 256;
    return (int)(g > 65536 ? 65536 : (g ? g : 1));
}

extern "C" int vdn_k_randn_bf16(void *dst, size_t n, uint64_t seed, float scale, vdn_stream st) {
    randn_bf16_k<<<grid_for(n), 256, 0, S_(st)>>>((bf16 *)dst, n, seed, scale);
    LAUNCH_CHECK("randn_bf16");
    return 0;
}
extern "C" int vdn_k_randn_f32(float *dst, size_t n, uint64_t seed, float scale, float offset,
                               vdn_stream st) {
    randn_f32_k<<<grid_for(n), 256, 0, S_(st)>>>(dst, n, seed, scale, offset);
    LAUNCH_CHECK("randn_f32");
    return 0;
}
extern "C" int vdn_k_rand_uniform_f32(float *dst, size_t n, uint64_t seed, float lo, float hi,
                                      vdn_stream st) {
    unif_f32_k<<<grid_for(n), 256, 0, S_(st)>>>(dst, n, seed, lo, hi);
    LAUNCH_CHECK("rand_uniform_f32");
    return 0;
}

extern "C" void *vdn_cublas_create(void) {
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return NULL;
    return h;
}
extern "C" void vdn_cublas_destroy(void *h) {
    if (h) cublasDestroy((cublasHandle_t)h);
}
