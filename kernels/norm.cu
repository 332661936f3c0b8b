/* Per-row kernels of a DiT block (spec 3): RMSNorm + adaLN modulate, gate + residual, SwiGLU,
 * the plain residual add, and sigmoid of a few projection columns. 16-byte loads; widths are
 * multiples of 8. */
#include "cuda_util.cuh"

__device__ float block_sum(float v, float *sh) {
    v = warp_sum(v);
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    if (l == 0) sh[w] = v;
    __syncthreads();
    float t = (threadIdx.x < (blockDim.x >> 5)) ? sh[threadIdx.x] : 0.f;
    if (w == 0) t = warp_sum(t);
    if (threadIdx.x == 0) sh[32] = t;
    __syncthreads();
    return sh[32];
}

__global__ void rmsnorm_mod_k(const bf16 *x, const bf16 *w, const bf16 *shift, const bf16 *scale,
                              const int *idx, int tstride, int width, float eps, bf16 *out) {
    __shared__ float sh[33];
    int r = blockIdx.x, n8 = width / 8;
    const uint4 *xr = reinterpret_cast<const uint4 *>(x + (size_t)r * width);
    float ss = 0.f, f[8];
    for (int i = threadIdx.x; i < n8; i += blockDim.x) {
        unpack8(xr[i], f);
#pragma unroll
        for (int j = 0; j < 8; j++)
            ss += f[j] * f[j];
    }
    float inv = rsqrtf(block_sum(ss, sh) / (float)width + eps);
    size_t trow = idx ? (size_t)idx[r] * tstride : 0;
    uint4 *o = reinterpret_cast<uint4 *>(out + (size_t)r * width);
    for (int i = threadIdx.x; i < n8; i += blockDim.x) {
        unpack8(xr[i], f);
        float ww[8], sc[8], sf[8];
        if (w) unpack8(reinterpret_cast<const uint4 *>(w)[i], ww);
        if (scale) unpack8(reinterpret_cast<const uint4 *>(scale + trow)[i], sc);
        if (shift) unpack8(reinterpret_cast<const uint4 *>(shift + trow)[i], sf);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float h = f[j] * inv;
            if (w) h *= ww[j];
            if (scale) h *= 1.f + sc[j];
            if (shift) h += sf[j];
            f[j] = h;
        }
        o[i] = pack8(f);
    }
}

extern "C" int vdn_k_rmsnorm_modulate(const void *x, const void *w, const void *shift,
                                      const void *scale, const int *idx, int tstride, int rows,
                                      int width, float eps, void *out, vdn_stream st) {
    if (width % 8 || tstride % 8 || rows <= 0) {
        fprintf(stderr,
                "vdn_k_rmsnorm_modulate: width %d / table stride %d must be multiples of 8\n",
                width, tstride);
        return -1;
    }
    rmsnorm_mod_k<<<rows, 256, 0, S_(st)>>>((const bf16 *)x, (const bf16 *)w, (const bf16 *)shift,
                                            (const bf16 *)scale, idx, tstride, width, eps,
                                            (bf16 *)out);
    LAUNCH_CHECK("rmsnorm_modulate");
    return 0;
}

__global__ void gate_res_k(bf16 *x, const bf16 *y, const bf16 *gate, const int *idx, int tstride,
                           int rows, int width) {
    int n8 = width / 8;
    size_t total = (size_t)rows * n8;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(i / n8), c = (int)(i % n8);
        float a[8], b[8], g[8];
        uint4 *xp = reinterpret_cast<uint4 *>(x) + i;
        unpack8(*xp, a);
        unpack8(reinterpret_cast<const uint4 *>(y)[i], b);
        unpack8(reinterpret_cast<const uint4 *>(gate + (size_t)idx[r] * tstride)[c], g);
#pragma unroll
        for (int j = 0; j < 8; j++)
            a[j] += g[j] * b[j];
        *xp = pack8(a);
    }
}

extern "C" int vdn_k_gate_residual(void *x, const void *y, const void *gate, const int *idx,
                                   int tstride, int rows, int width, vdn_stream st) {
    if (width % 8 || tstride % 8) {
        fprintf(stderr, "vdn_k_gate_residual: width/stride must be multiples of 8\n");
        return -1;
    }
    size_t n = (size_t)rows * (width / 8);
    int grid = (int)((n + 255) / 256 > 1048576 ? 1048576 : (n + 255) / 256);
    gate_res_k<<<grid, 256, 0, S_(st)>>>((bf16 *)x, (const bf16 *)y, (const bf16 *)gate, idx,
                                         tstride, rows, width);
    LAUNCH_CHECK("gate_residual");
    return 0;
}

__global__ void swiglu_k(const bf16 *h, int rows, int width, bf16 *out) {
    int n8 = width / 8;
    size_t total = (size_t)rows * n8;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / n8;
        int c = (int)(i % n8);
        const uint4 *hr = reinterpret_cast<const uint4 *>(h + r * 2 * width);
        float v[8], g[8];
        unpack8(hr[c], v);
        unpack8(hr[n8 + c], g);
#pragma unroll
        for (int j = 0; j < 8; j++)
            v[j] = v[j] * (g[j] / (1.f + __expf(-g[j])));
        reinterpret_cast<uint4 *>(out)[i] = pack8(v);
    }
}

extern "C" int vdn_k_swiglu(const void *h, int rows, int width, void *out, vdn_stream st) {
    if (width % 8) {
        fprintf(stderr, "vdn_k_swiglu: width %d must be a multiple of 8\n", width);
        return -1;
    }
    size_t n = (size_t)rows * (width / 8);
    int grid = (int)((n + 255) / 256 > 1048576 ? 1048576 : (n + 255) / 256);
    swiglu_k<<<grid, 256, 0, S_(st)>>>((const bf16 *)h, rows, width, (bf16 *)out);
    LAUNCH_CHECK("swiglu");
    return 0;
}

__global__ void sigmoid_cols_k(const bf16 *x, int ld, int c0, int n, int rows, const float *bias,
                               float *out) {
    size_t total = (size_t)rows * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / n;
        int c = (int)(i % n);
        float v = bf2f(x[r * ld + c0 + c]) + (bias ? bias[c] : 0.f);
        out[i] = 1.f / (1.f + __expf(-v));
    }
}

extern "C" int vdn_k_sigmoid_cols(const void *x, int ld, int c0, int n, int rows, const float *bias,
                                  float *out, vdn_stream st) {
    size_t tot = (size_t)rows * n;
    int grid = (int)((tot + 255) / 256 > 65536 ? 65536 : (tot + 255) / 256);
    sigmoid_cols_k<<<grid ? grid : 1, 256, 0, S_(st)>>>((const bf16 *)x, ld, c0, n, rows, bias,
                                                        out);
    LAUNCH_CHECK("sigmoid_cols");
    return 0;
}

static int grid_of8(size_t n8) {
    size_t g = (n8 + 255) / 256;
    return (int)(g > 1048576 ? 1048576 : (g ? g : 1));
}

/* x += y over n bf16 values (the refiner's residuals) */
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
    add_bf16_k<<<grid_of8(n / 8), 256, 0, S_(st)>>>((bf16 *)x, (const bf16 *)y, n / 8);
    LAUNCH_CHECK("add_bf16");
    return 0;
}
