/* `vdn bench attn-vae`: the video VAE decoder's attention at its shape (one chunk of 28 tiles of
 * 1,797 rows at 768x1344 = 50,316 rows, 32 heads of 64, each row attending within its own tile
 * through the block-diagonal rows mask), on both kernels that can serve it: the portable
 * mma.sync kernel (attn.cu) and the wgmma path's persistent head-dim-64 kernel (attn_pp64.cu).
 * Random bf16 q/k/v made on the GPU, CUDA events, warm-up then the median of the repeats; the two
 * outputs are also compared (relative RMS difference), so a wrong fast kernel shows here too. */
#include <algorithm>
#include <math.h>
#include <vector>

#include "attn_tiles.h"
#include "bench.h"
#include "bench_time.cuh"
#include "cuda_util.cuh"

namespace {

/* sum of squares of (a - b) and of a, over n bf16 values, into acc[0], acc[1] */
__global__ void diff_k(const bf16 *a, const bf16 *b, size_t n, double *acc) {
    double d2 = 0, a2 = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const double x = __bfloat162float(a[i]), y = __bfloat162float(b[i]);
        d2 += (x - y) * (x - y), a2 += x * x;
    }
    atomicAdd(&acc[0], d2), atomicAdd(&acc[1], a2);
}

} // namespace

#define BCK(call)                                                                                  \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "vdn bench attn-vae: %s: %s\n", #call, cudaGetErrorString(e_));        \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

extern "C" int vdn_bench_attn_vae(int reps) {
    const int TILES = 28, TR = 1797, H = 32, D = 64, N = TILES * TR, C = H * D, LD = 3 * C;
    vdn_attn_rows ar;
    if (vdn_attn_rows_make(&ar, 0, TILES, TR, 1, 0, 1, 0)) return -1;
    int nt = 0;
    int *tl = vdn_attn_tiles_make(&ar, VDN_ATTN_BM, &nt);
    std::vector<int> lohi((size_t)N * 2);
    for (int r = 0; r < N; r++)
        lohi[2 * r] = ar.lo[r], lohi[2 * r + 1] = ar.hi[r];
    const double flop = 4.0 * vdn_attn_rows_pairs(&ar) * H * D;
    vdn_attn_rows_free(&ar);
    if (!tl) return -1;
    bf16 *qkv, *o1, *o2, *vt;
    int *dl, *dt;
    double *acc;
    BCK(cudaMalloc(&qkv, (size_t)N * LD * 2));
    BCK(cudaMalloc(&o1, (size_t)N * C * 2));
    BCK(cudaMalloc(&o2, (size_t)N * C * 2));
    BCK(cudaMalloc(&vt, vdn_attention_vt_elems(N, H, D) * 2));
    BCK(cudaMalloc(&dl, lohi.size() * 4));
    BCK(cudaMalloc(&dt, (size_t)nt * VDN_TILE_INTS * 4));
    BCK(cudaMalloc(&acc, 2 * sizeof(double)));
    BCK(cudaMemcpy(dl, lohi.data(), lohi.size() * 4, cudaMemcpyHostToDevice));
    BCK(cudaMemcpy(dt, tl, (size_t)nt * VDN_TILE_INTS * 4, cudaMemcpyHostToDevice));
    free(tl);
    int err = vdn_k_randn_bf16(qkv, (size_t)N * LD, 7, 1.f, 0);
    const float sc = 1.f / sqrtf((float)D);
    const bf16 *q = qkv, *k = qkv + C, *v = qkv + 2 * C;
    printf("-- the video VAE decoder's attention: %d rows (%d tiles of %d), %d heads x %d, "
           "block-diagonal --\n",
           N, TILES, TR, H, D);
    const float ms1 = (float)time_ms(
        [&] {
            return vdn_k_attention_ex(q, LD, k, LD, v, LD, N, N, H, 1, D, dl, 0, N, dt, nt, sc,
                                      NULL, H, o1, C, 0);
        },
        1, reps, &err);
    printf("%-50s %10.3f ms %8.1f TFLOP/s\n", "attention hd64 block-diag (mma.sync)", ms1,
           flop / ms1 / 1e9);
    const float ms2 = (float)time_ms(
        [&] {
            return vdn_k_attention_wgmma(q, LD, k, LD, v, LD, vt, N, H, D, dl, 0, N, dt, nt, sc,
                                         NULL, o2, C, 0);
        },
        1, reps, &err);
    BCK(cudaMemset(acc, 0, 2 * sizeof(double)));
    diff_k<<<264, 256>>>(o1, o2, (size_t)N * C, acc);
    double h[2] = {0, 0};
    BCK(cudaMemcpy(h, acc, sizeof h, cudaMemcpyDeviceToHost));
    BCK(cudaGetLastError());
    printf("%-50s %10.3f ms %8.1f TFLOP/s  %.2fx\n", "attention hd64 block-diag (wgmma persistent)",
           ms2, flop / ms2 / 1e9, ms1 / ms2);
    const double rel = h[1] > 0 ? sqrt(h[0] / h[1]) : NAN;
    printf("wgmma vs mma.sync output: relative RMS difference %.3e\n", rel);
    cudaFree(qkv), cudaFree(o1), cudaFree(o2), cudaFree(vt), cudaFree(dl), cudaFree(dt);
    cudaFree(acc);
    if (err) fprintf(stderr, "vdn bench attn-vae: a kernel failed\n");
    return err || !(rel < 1e-2) ? -1 : 0;
}
