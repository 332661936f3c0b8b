/* The video decoder's pixel ops (engine/op_pixels.h) on CUDA: one thread per output pixel,
 * grid-stride. The blends and the de-normalisation round each float32 operation as the CPU
 * oracle does (__fdiv_rn / __fmul_rn / __fadd_rn: no fused multiply-add, no fast-math
 * division), so a decode's frames are the CPU's bits for the same ViT output. */
#include "op_cuda.h"
extern "C" {
#include "op_pixels.h"
}

namespace {

#define GRID_LOOP(i, n)                                                                            \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

/* a (1 - q/e) + b (q/e), rounded as the CPU's float32 operations */
__device__ __forceinline__ float blend1(float a, float b, int q, int e) {
    const float f = __fdiv_rn((float)q, (float)e);
    const float wa = __fsub_rn(1.0f, f);
    return __fadd_rn(__fmul_rn(a, wa), __fmul_rn(b, f));
}

struct UnpatchGeom {
    int64_t stride;
    int T, Hl, Wl, C, pt, p;
};

/* element i of y: plane (b, ch, f), pixel (Y, X) */
__global__ void unpatchify_k(FView y, FView x, UnpatchGeom g, int64_t planes) {
    const int F = g.T * g.pt, H = g.Hl * g.p, W = g.Wl * g.p;
    const int64_t plane_px = (int64_t)H * W;
    GRID_LOOP(i, planes * plane_px) {
        const int64_t plane = i / plane_px, px = i % plane_px;
        const int Y = (int)(px / W), X = (int)(px % W);
        const int f = (int)(plane % F), ch = (int)(plane / F % g.C);
        const int64_t b = plane / F / g.C;
        const int t = f / g.pt, dt = f % g.pt;
        const int64_t r = b * g.stride + ((int64_t)t * g.Hl + Y / g.p) * g.Wl + X / g.p;
        const int64_t c = ((ch * g.pt + dt) * g.p + Y % g.p) * g.p + X % g.p;
        fv_set(y, plane, px, fv_get(x, r, c));
    }
}

int unpatchify(vdn_tensor *y, const vdn_tensor *x, int tiles, int64_t stride, int T, int Hl, int Wl,
               int C, int pt, int p) {
    vdn_dev *d = y->dev;
    const char *OP = "unpatchify";
    if (op_cuda_enter(d, OP, {y, x})) return -1;
    const int64_t planes = vdn_tensor_rows(y), n = planes * vdn_tensor_cols(y);
    if (n == 0) return 0;
    const UnpatchGeom g = {stride, T, Hl, Wl, C, pt, p};
    unpatchify_k<<<op_grid(n), 256, 0, cdev(d)->st>>>(fview(y), fview(x), g, planes);
    OPL();
    return 0;
}

/* the tile along one axis whose kept span holds pixel v: tile i keeps [s[i], s[i] + len - o[i])
 * (the last keeps all) */
__device__ __forceinline__ int kept_tile(int v, int n, const int *s, const int *o, int len) {
    int i = 0;
    while (i < n - 1 && v >= s[i] + len - o[i])
        i++;
    return i;
}

__global__ void tile_stitch_k(FView y, FView tiles, vdn_tile_grid g, int64_t P) {
    const int H = g.y0[g.ny - 1] + g.th, W = g.x0[g.nx - 1] + g.tw;
    const int64_t plane_px = (int64_t)H * W;
    GRID_LOOP(n, P * plane_px) {
        const int64_t q = n / plane_px, px = n % plane_px;
        const int Y = (int)(px / W), X = (int)(px % W);
        const int i = kept_tile(Y, g.ny, g.y0, g.oy, g.th),
                  j = kept_tile(X, g.nx, g.x0, g.ox, g.tw);
        const int ty = Y - g.y0[i], tx = X - g.x0[j];
        const int eh = i > 0 ? g.oy[i - 1] : 0, ew = j > 0 ? g.ox[j - 1] : 0;
        const int64_t tw = g.tw;
        float v = fv_get(tiles, (int64_t)(i * g.nx + j) * P + q, ty * tw + tx);
        if (ty < eh) {
            const float a = fv_get(tiles, (int64_t)((i - 1) * g.nx + j) * P + q,
                                   (int64_t)(g.th - eh + ty) * tw + tx);
            v = blend1(a, v, ty, eh);
        }
        if (tx < ew) {
            const float a =
                fv_get(tiles, (int64_t)(i * g.nx + j - 1) * P + q, ty * tw + g.tw - ew + tx);
            v = blend1(a, v, tx, ew);
        }
        fv_set(y, q, px, v);
    }
}

int tile_stitch(vdn_tensor *y, const vdn_tensor *tiles, const vdn_tile_grid *g) {
    vdn_dev *d = y->dev;
    const char *OP = "tile_stitch";
    if (op_cuda_enter(d, OP, {y, tiles})) return -1;
    const int64_t P = vdn_tensor_rows(y), n = P * vdn_tensor_cols(y);
    if (n == 0) return 0;
    tile_stitch_k<<<op_grid(n), 256, 0, cdev(d)->st>>>(fview(y), fview(tiles), *g, P);
    OPL();
    return 0;
}

__global__ void crossfade_k(FView x, FView y, int64_t e, int64_t cols) {
    GRID_LOOP(i, e * cols) {
        const int64_t t = i / cols, c = i % cols;
        fv_set(x, t, c, blend1(fv_get(x, t, c), fv_get(y, t, c), (int)t, (int)e));
    }
}

int crossfade(vdn_tensor *x, const vdn_tensor *y) {
    vdn_dev *d = x->dev;
    const char *OP = "crossfade";
    if (op_cuda_enter(d, OP, {x, y})) return -1;
    const int64_t e = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    if (e * cols == 0) return 0;
    crossfade_k<<<op_grid(e * cols), 256, 0, cdev(d)->st>>>(fview(x), fview(y), e, cols);
    OPL();
    return 0;
}

__global__ void ssc_k(FView y, FView x, int64_t rows, int64_t cols, float scale, float shift,
                      float lo, float hi) {
    GRID_LOOP(i, rows * cols) {
        const int64_t r = i / cols, c = i % cols;
        const float v = __fadd_rn(__fmul_rn(fv_get(x, r, c), scale), shift);
        fv_set(y, r, c, v < lo ? lo : v > hi ? hi : v); /* NaN stays NaN, as on the CPU */
    }
}

int scale_shift_clamp(vdn_tensor *y, const vdn_tensor *x, double scale, double shift, double lo,
                      double hi) {
    vdn_dev *d = y->dev;
    const char *OP = "scale_shift_clamp";
    if (op_cuda_enter(d, OP, {y, x})) return -1;
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    if (rows * cols == 0) return 0;
    ssc_k<<<op_grid(rows * cols), 256, 0, cdev(d)->st>>>(
        fview(y), fview(x), rows, cols, (float)scale, (float)shift, (float)lo, (float)hi);
    OPL();
    return 0;
}

} // namespace

extern "C" const struct vdn_pixel_backend op_cuda_pixels = {unpatchify, tile_stitch, crossfade,
                                                            scale_shift_clamp};
