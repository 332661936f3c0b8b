/* Norms of the CUDA backend: rmsnorm (+ the adaLN modulation), layernorm, and the per-head
 * q/k RMSNorm + RoPE. The DiT's shapes run the fused bf16 kernels (norm.cu, rope.cu); any other
 * call (head dim 64, GQA, other rotary sections, fp32, strided rows) runs the plain kernels here:
 * one block per row (norms), or a rotary table per (row, pair) then warps over (row, head)
 * vectors (qk_norm_rope). */
#include <math.h>

#include "op_cuda.h"

namespace {

__device__ float block_sum2(float v, float *sh) {
    v = warp_sum(v);
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    __syncthreads(); /* sh may still be read from the previous call */
    if (l == 0) sh[w] = v;
    __syncthreads();
    float t = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : 0.f;
    if (w == 0) t = warp_sum(t);
    if (threadIdx.x == 0) sh[32] = t;
    __syncthreads();
    return sh[32];
}

/* y[r] = x[r] / rms * w * (1 + scale[t]) + shift[t], t = idx ? idx[r] : r */
__global__ void rmsnorm_k(FView y, FView x, FView w, FView shift, FView scale, const int *idx,
                          int64_t cols, float eps) {
    __shared__ float sh[33];
    const int64_t r = blockIdx.x;
    float ss = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = fv_get(x, r, c);
        ss += v * v;
    }
    const float inv = rsqrtf(block_sum2(ss, sh) / (float)cols + eps);
    const int64_t t = idx ? idx[r] : r;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        float h = fv_get(x, r, c) * inv;
        if (w.p) h *= fv_get(w, 0, c);
        if (scale.p) h = h * (1.f + fv_get(scale, t, c)) + fv_get(shift, t, c);
        fv_set(y, r, c, h);
    }
}

/* RMSNorm of float32 rows held in registers: V float4 words a thread (cols <= 1024 V, cols % 4
 * == 0, 16-byte aligned rows), one read of x instead of the plain kernel's two strided passes
 * (the video decoder's [50,316 x 2,048] float32 residual stream into bf16: 0.37 ms a call, ~2.4x
 * its memory time). y float32 or bf16 (8-byte aligned rows), w any float dtype or none. */
template <int V>
__global__ void __launch_bounds__(256)
    rmsnorm_rows_k(const float *x, int64_t ldx, FView y, FView w, int cols, float eps) {
    __shared__ float sh[33];
    const int64_t r = blockIdx.x;
    const float4 *xr = (const float4 *)(x + r * ldx);
    float4 v[V];
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < V; i++) {
        const int c4 = threadIdx.x + i * 256;
        v[i] = c4 * 4 < cols ? xr[c4] : make_float4(0.f, 0.f, 0.f, 0.f);
        ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
    }
    const float inv = rsqrtf(block_sum2(ss, sh) / (float)cols + eps);
#pragma unroll
    for (int i = 0; i < V; i++) {
        const int c = (threadIdx.x + i * 256) * 4;
        if (c >= cols) break;
        float o[4] = {v[i].x * inv, v[i].y * inv, v[i].z * inv, v[i].w * inv};
        if (w.p)
#pragma unroll
            for (int e = 0; e < 4; e++)
                o[e] *= fv_get(w, 0, c + e);
        if (y.dt == VDN_DT_F32) {
            *(float4 *)((float *)y.p + r * y.ld + c) = make_float4(o[0], o[1], o[2], o[3]);
        } else {
            __nv_bfloat162 b[2] = {__floats2bfloat162_rn(o[0], o[1]),
                                   __floats2bfloat162_rn(o[2], o[3])};
            *(uint2 *)((bf16 *)y.p + r * y.ld + c) = *(const uint2 *)b;
        }
    }
}

__global__ void layernorm_k(FView y, FView x, FView w, FView b, int64_t cols, float eps) {
    __shared__ float sh[33];
    const int64_t r = blockIdx.x;
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        s += fv_get(x, r, c);
    const float mean = block_sum2(s, sh) / (float)cols;
    float ss = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = fv_get(x, r, c) - mean;
        ss += d * d;
    }
    const float inv = rsqrtf(block_sum2(ss, sh) / (float)cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        float h = (fv_get(x, r, c) - mean) * inv;
        if (w.p) h *= fv_get(w, 0, c);
        if (b.p) h += fv_get(b, 0, c);
        fv_set(y, r, c, h);
    }
}

#define QK_MAX_HD 256
#define QK_WARPS 8
#define QK_VALS 16 /* values a lane holds at once: QK_ITEMS vectors x QK_PER_LANE channels */

struct RopeArgs {
    const double *pos; /* [rows][pos_ld] or NULL */
    int64_t pos_ld;
    const float *inv; /* [n_rot / 2] */
    int n_rot, s0, s1, s2, interleaved;
};

/* One warp per QK_ITEMS = QK_VALS / QK_PER_LANE heads of one row at a time (grid-stride over
 * (row, group of heads)): every load of them is issued before any arithmetic, so a warp keeps
 * several heads' reads in flight (one head per warp at a time, its reads waited on before the
 * next head's, left this op ~10x its memory time). Per head: RMSNorm (w NULL: none), then the
 * rotary pairs with their (cos, sin) from tab (NULL: no rope); the partner channel of a pair
 * comes through the warp's shared rows. Float32 norm; the rotation in double from the float32
 * (cos, sin) table (rope_table_k). */
template <int QK_PER_LANE> /* ceil(hd / 32): 1, 2, 4 or 8 */
__global__ void __launch_bounds__(QK_WARPS * 32, 4)
    qk_norm_rope_k(FView out, FView in, FView w, int64_t rows, int heads, int hd, float eps,
                   const float2 *tab, int n_rot) {
    constexpr int QK_ITEMS = QK_VALS / QK_PER_LANE;
    extern __shared__ float qk_sh[]; /* [warps][QK_ITEMS][hd] */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    float *ys = qk_sh + (size_t)warp * QK_ITEMS * hd;
    const int half = n_rot / 2, groups = (heads + QK_ITEMS - 1) / QK_ITEMS;
    const int64_t units = rows * groups;
    for (int64_t u = (int64_t)blockIdx.x * warps + warp; u < units;
         u += (int64_t)gridDim.x * warps) {
        const int64_t r = u / groups;
        const int h0 = (int)(u - r * groups) * QK_ITEMS;
        const int nj = min(QK_ITEMS, heads - h0), c0 = h0 * hd;
        float v[QK_ITEMS][QK_PER_LANE];
#pragma unroll
        for (int j = 0; j < QK_ITEMS; j++)
#pragma unroll
            for (int k = 0; k < QK_PER_LANE; k++) {
                const int c = lane + 32 * k;
                v[j][k] = j < nj && c < hd ? fv_get(in, r, c0 + j * hd + c) : 0.f;
            }
#pragma unroll
        for (int j = 0; j < QK_ITEMS; j++) {
            if (w.p) {
                float ss = 0.f;
#pragma unroll
                for (int k = 0; k < QK_PER_LANE; k++)
                    if (lane + 32 * k < hd) ss += v[j][k] * v[j][k];
                ss = warp_sum(ss);
                const float inv = rsqrtf(ss / (float)hd + eps);
#pragma unroll
                for (int k = 0; k < QK_PER_LANE; k++) {
                    const int c = lane + 32 * k;
                    if (c < hd) v[j][k] = v[j][k] * inv * fv_get(w, 0, c);
                }
            }
#pragma unroll
            for (int k = 0; k < QK_PER_LANE; k++)
                if (lane + 32 * k < hd) ys[j * hd + lane + 32 * k] = v[j][k];
        }
        __syncwarp();
        const float2 *rt = tab ? tab + r * half : NULL;
#pragma unroll
        for (int j = 0; j < QK_ITEMS; j++) {
            if (j >= nj) break;
            const float *y = ys + j * hd;
#pragma unroll
            for (int k = 0; k < QK_PER_LANE; k++) {
                const int c = lane + 32 * k;
                if (c >= hd) break;
                float o = v[j][k];
                if (rt && c < n_rot) {
                    const int i = c < half ? c : c - half; /* the pair */
                    const float2 t = rt[i];
                    const double cs = t.x, sn = t.y;
                    o = c < half ? (float)(y[c] * cs - y[c + half] * sn)
                                 : (float)(y[c] * cs + y[c - half] * sn);
                }
                fv_set(out, r, c0 + j * hd + c, o);
            }
        }
        __syncwarp(); /* the next heads overwrite ys */
    }
}

/* tab[r][i] = (cos, sin) of pair i's angle at row r: float32(pos) * inv[i] rounded to float32,
 * then a double sincos (the CPU twin's) rounded once to float32. Once per row and pair for every
 * head of q and k, shared by both kernels below. */
__global__ void rope_table_k(float2 *tab, RopeArgs ra, int64_t rows) {
    const int half = ra.n_rot / 2;
    const int64_t n = rows * half;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / half;
        const int i = (int)(e - r * half);
        const int axis = vdn_rope_axis(i, ra.s0, ra.s1, ra.s2, ra.interleaved);
        const double ang = (double)__fmul_rn((float)ra.pos[r * ra.pos_ld + axis], ra.inv[i]);
        double sn, cs;
        sincos(ang, &sn, &cs);
        tab[e] = make_float2((float)cs, (float)sn);
    }
}

/* one side (q or k) of the vectorised kernel: packed bf16 rows, 16-byte aligned */
struct QkSide {
    const bf16 *in;
    bf16 *out;
    int64_t ld_in, ld_out;
    FView w; /* the norm's weight [hd] or p NULL (no norm) */
    int heads, chunks;
};

#define QKV_LOADS 8 /* 16-byte loads a lane issues before any arithmetic */

/* Vectorised q/k norm + rope for packed bf16 rows (the video decoder's 32 heads of 64, the text
 * encoder's, ...): G = hd / 8 lanes own a head, 8 channels (one 16-byte word) each, so a warp
 * covers 32 / G heads per load and QKV_LOADS loads in flight (a whole 2,048-wide row of q at hd
 * 64). The head's sum of squares is a G-lane shuffle; a rotary pair's partner channel sits
 * exactly half / 8 lanes away (half % 8 == 0), so it comes by one shuffle; the row's (cos, sin)
 * come from the float table, read once per row and pair group. The old per-element kernel was
 * ~5x this op's memory time on the decoder (2-byte strided loads). Float32 throughout, so it
 * differs from the CPU twin's double rotation by float rounding only (outputs are bf16). */
template <int G>
__global__ void __launch_bounds__(256)
    qk_norm_rope_vec_k(QkSide s0, QkSide s1, int64_t rows, float eps, const float2 *tab, int half) {
    constexpr int SLOTS = 32 / G, HPU = SLOTS * QKV_LOADS, HD = 8 * G;
    const int lane = threadIdx.x & 31, sub = lane % G, slot = lane / G;
    const int warps = blockDim.x >> 5;
    const int hp = half / 8; /* lanes of a head holding the first half of the pairs */
    const int chunks = s0.chunks + s1.chunks;
    const int64_t units = rows * chunks;
    const int rot = sub < 2 * hp;
    const int src = sub < hp ? lane + hp : (rot ? lane - hp : lane);
    const float sgn = sub < hp ? -1.f : 1.f;
    const int pair0 = 8 * (sub < hp ? sub : sub - hp);
    for (int64_t u = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); u < units;
         u += (int64_t)gridDim.x * warps) {
        const int64_t r = u / chunks;
        int j = (int)(u - r * chunks);
        const int side = j >= s0.chunks;
        if (side) j -= s0.chunks;
        /* field by field: selecting a whole parameter struct by reference puts it on the stack */
        const int heads = side ? s1.heads : s0.heads;
        const FView wv_ = side ? s1.w : s0.w;
        float v[QKV_LOADS][8];
        const bf16 *row = (side ? s1.in : s0.in) + r * (side ? s1.ld_in : s0.ld_in);
#pragma unroll
        for (int k = 0; k < QKV_LOADS; k++) {
            const int h = j * HPU + k * SLOTS + slot;
            if (h < heads)
                unpack8(*(const uint4 *)(row + (int64_t)h * HD + 8 * sub), v[k]);
            else
#pragma unroll
                for (int e = 0; e < 8; e++)
                    v[k][e] = 0.f;
        }
        if (wv_.p) {
            float wv[8];
#pragma unroll
            for (int e = 0; e < 8; e++)
                wv[e] = fv_get(wv_, 0, 8 * sub + e);
#pragma unroll
            for (int k = 0; k < QKV_LOADS; k++) {
                float ss = 0.f;
#pragma unroll
                for (int e = 0; e < 8; e++)
                    ss += v[k][e] * v[k][e];
#pragma unroll
                for (int o = 1; o < G; o <<= 1)
                    ss += __shfl_xor_sync(0xffffffffu, ss, o);
                const float inv = rsqrtf(ss / (float)HD + eps);
#pragma unroll
                for (int e = 0; e < 8; e++)
                    v[k][e] = v[k][e] * inv * wv[e];
            }
        }
        if (tab) {
            float cs[8], sn[8];
            if (rot) {
                const float4 *t = (const float4 *)(tab + r * half + pair0);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float4 q = t[e];
                    cs[2 * e] = q.x, sn[2 * e] = q.y, cs[2 * e + 1] = q.z, sn[2 * e + 1] = q.w;
                }
            }
#pragma unroll
            for (int k = 0; k < QKV_LOADS; k++)
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const float p = __shfl_sync(0xffffffffu, v[k][e], src);
                    if (rot) v[k][e] = fmaf(v[k][e], cs[e], sgn * p * sn[e]);
                }
        }
        bf16 *orow = (side ? s1.out : s0.out) + r * (side ? s1.ld_out : s0.ld_out);
#pragma unroll
        for (int k = 0; k < QKV_LOADS; k++) {
            const int h = j * HPU + k * SLOTS + slot;
            if (h < heads) *(uint4 *)(orow + (int64_t)h * HD + 8 * sub) = pack8(v[k]);
        }
    }
}

/* whether the vectorised kernel takes this side: packed 16-byte bf16 words in and out */
int qk_vec_side(const vdn_tensor *o, const vdn_tensor *x, const vdn_tensor *w) {
    if (!o || !x) return 1; /* an absent side does not stop the other */
    return is_bf16(o) && is_bf16(x) && aligned16(o->data) && aligned16(x->data) && o->ld % 8 == 0 &&
           x->ld % 8 == 0 && (!w || w->dtype == VDN_DT_F32 || w->dtype == VDN_DT_BF16);
}

FView view_or_none(const vdn_tensor *t) {
    FView v = {t ? (char *)t->data : NULL, t ? (int)t->dtype : VDN_DT_F32, t ? t->ld : 0};
    return v;
}

/* *tab = the (cos, sin) table of rope's pairs for `rows` rows in scratch, or NULL without
 * rotary pairs */
int rope_table(vdn_dev *d, const char *OP, const vdn_rope *rope, int64_t rows, const float2 **tab) {
    *tab = NULL;
    const int64_t n = rope ? rows * (rope->n_rot / 2) : 0;
    if (n == 0) return 0;
    const RopeArgs ra = {(const double *)rope->pos->data,
                         rope->pos->ld,
                         (const float *)rope->inv->data,
                         rope->n_rot,
                         rope->sections[0],
                         rope->sections[1],
                         rope->sections[2],
                         rope->interleaved};
    float2 *t = (float2 *)op_cuda_scratch(d, SCR_ROPE, sizeof(float2) * (size_t)n);
    if (!t) return -1;
    rope_table_k<<<op_grid(n), 256, 0, cdev(d)->st>>>(t, ra, rows);
    OPL();
    *tab = t;
    return 0;
}

/* the vectorised kernel over q and k (qk_vec_side holds for both) */
int qk_norm_rope_vec(vdn_dev *d, const char *OP, vdn_tensor *q_out, vdn_tensor *k_out,
                     const vdn_tensor *q_in, const vdn_tensor *k_in, const vdn_tensor *wq,
                     const vdn_tensor *wk, int hd, double eps, const vdn_rope *rope) {
    const int64_t rows = vdn_tensor_rows(q_out);
    const int G = hd / 8, hpu = 32 / G * QKV_LOADS;
    const float2 *tab = NULL;
    const int half = rope ? rope->n_rot / 2 : 0;
    if (rope_table(d, OP, rope, rows, &tab)) return -1;
    QkSide s[2];
    for (int i = 0; i < 2; i++) {
        vdn_tensor *o = i ? k_out : q_out;
        const vdn_tensor *x = i ? k_in : q_in, *w = i ? wk : wq;
        const int heads = o && x ? (int)(vdn_tensor_cols(x) / hd) : 0;
        s[i] = QkSide{x ? (const bf16 *)x->data : NULL,
                      o ? (bf16 *)o->data : NULL,
                      x ? x->ld : 0,
                      o ? o->ld : 0,
                      view_or_none(w),
                      heads,
                      (heads + hpu - 1) / hpu};
    }
    const int64_t units = rows * (s[0].chunks + s[1].chunks);
    const int grid = (int)((units + 7) / 8 < 65536 * 4 ? (units + 7) / 8 : 65536 * 4);
    const cudaStream_t st = cdev(d)->st;
#define QKV_LAUNCH(GG)                                                                             \
    qk_norm_rope_vec_k<GG><<<grid, 256, 0, st>>>(s[0], s[1], rows, (float)eps, tab, half)
    switch (G) {
    case 1:
        QKV_LAUNCH(1);
        break;
    case 2:
        QKV_LAUNCH(2);
        break;
    case 4:
        QKV_LAUNCH(4);
        break;
    case 8:
        QKV_LAUNCH(8);
        break;
    case 16:
        QKV_LAUNCH(16);
        break;
    default:
        QKV_LAUNCH(32);
        break;
    }
#undef QKV_LAUNCH
    OPL();
    return 0;
}

} // namespace

int op_cuda_rmsnorm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, double eps,
                    const vdn_tensor *shift, const vdn_tensor *scale, const vdn_tensor *idx) {
    vdn_dev *d = y->dev;
    const char *OP = "rmsnorm";
    if (op_cuda_enter(d, OP, {y, x, w, shift, scale})) return -1;
    const int64_t rows = vdn_tensor_rows(y), cols = vdn_tensor_cols(y);
    if (rows * cols == 0) return 0;
    /* the fused kernel: packed bf16 rows, shift and scale rows of one table picked by idx */
    const int mod = shift != NULL;
    if (is_bf16(y) && is_bf16(x) && (!w || is_bf16(w)) && contiguous(y) && contiguous(x) &&
        cols % 8 == 0 && aligned16(x->data) && aligned16(y->data) && (!w || aligned16(w->data)) &&
        (!mod || (idx && is_bf16(shift) && is_bf16(scale) && shift->ld == scale->ld &&
                  shift->ld % 8 == 0 && aligned16(shift->data) && aligned16(scale->data))) &&
        rows <= INT32_MAX) {
        OPK(vdn_k_rmsnorm_modulate(x->data, w ? w->data : NULL, mod ? shift->data : NULL,
                                   mod ? scale->data : NULL, mod ? (const int *)idx->data : NULL,
                                   mod ? (int)shift->ld : 0, (int)rows, (int)cols, (float)eps,
                                   y->data, vst(d)));
        return 0;
    }
    /* float32 rows into float32 or bf16, no modulation: the register kernel */
    const int v4 = (int)((cols + 1023) / 1024);
    if (!mod && !idx && x->dtype == VDN_DT_F32 && cols % 4 == 0 && x->ld % 4 == 0 &&
        aligned16(x->data) && v4 <= 8 && rows <= INT32_MAX &&
        ((y->dtype == VDN_DT_F32 && y->ld % 4 == 0 && aligned16(y->data)) ||
         (is_bf16(y) && y->ld % 4 == 0 && ((uintptr_t)y->data & 7) == 0))) {
        const int v = v4 <= 1 ? 1 : v4 <= 2 ? 2 : v4 <= 4 ? 4 : 8;
        const cudaStream_t st = cdev(d)->st;
#define RMS_LAUNCH(V)                                                                              \
    rmsnorm_rows_k<V><<<(unsigned)rows, 256, 0, st>>>((const float *)x->data, x->ld, fview(y),     \
                                                      view_or_none(w), (int)cols, (float)eps)
        if (v == 1)
            RMS_LAUNCH(1);
        else if (v == 2)
            RMS_LAUNCH(2);
        else if (v == 4)
            RMS_LAUNCH(4);
        else
            RMS_LAUNCH(8);
#undef RMS_LAUNCH
        OPL();
        return 0;
    }
    rmsnorm_k<<<(unsigned)rows, 256, 0, cdev(d)->st>>>(
        fview(y), fview(x), view_or_none(w), view_or_none(shift), view_or_none(scale),
        idx ? (const int *)idx->data : NULL, cols, (float)eps);
    OPL();
    return 0;
}

int op_cuda_layernorm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                      double eps) {
    vdn_dev *d = y->dev;
    const char *OP = "layernorm";
    if (op_cuda_enter(d, OP, {y, x, w, b})) return -1;
    const int64_t rows = vdn_tensor_rows(y), cols = vdn_tensor_cols(y);
    if (rows * cols == 0) return 0;
    layernorm_k<<<(unsigned)rows, 256, 0, cdev(d)->st>>>(fview(y), fview(x), view_or_none(w),
                                                         view_or_none(b), cols, (float)eps);
    OPL();
    return 0;
}

int op_cuda_qk_norm_rope(vdn_tensor *q_out, vdn_tensor *k_out, const vdn_tensor *q_in,
                         const vdn_tensor *k_in, const vdn_tensor *wq, const vdn_tensor *wk,
                         int head_dim, double eps, const vdn_rope *rope) {
    vdn_dev *d = q_out->dev;
    const char *OP = "qk_norm_rope";
    if (op_cuda_enter(d, OP, {q_out, k_out, q_in, k_in, wq, wk})) return -1;
    const int64_t rows = vdn_tensor_rows(q_out);
    if (rows == 0) return 0;
    const int hq = (int)(vdn_tensor_cols(q_in) / head_dim);
    const int hk = k_in ? (int)(vdn_tensor_cols(k_in) / head_dim) : 0;
    if (head_dim > QK_MAX_HD)
        return vdn_dev_fail(d, "op %s: head_dim %d over the %d this backend handles", OP, head_dim,
                            QK_MAX_HD);
    /* the fused kernel (rope.cu): H3's heads of 128, 16 + 16 + 16 rotary pairs over 96 channels,
     * q and k of one layer side by side (same heads, one stride in, one stride out) */
    const int h3_rope =
        !rope || (rope->n_rot == 96 && rope->sections[0] == 16 && rope->sections[1] == 16 &&
                  rope->sections[2] == 16 && !rope->interleaved && rope->pos->ld == 3 &&
                  contiguous(rope->pos));
    if (head_dim == 128 && h3_rope && k_in && k_out && hq == hk && wq && wk && is_bf16(q_in) &&
        is_bf16(k_in) && is_bf16(q_out) && is_bf16(k_out) && is_bf16(wq) && is_bf16(wk) &&
        q_in->ld == k_in->ld && q_out->ld == k_out->ld && q_in->ld % 4 == 0 && q_out->ld % 4 == 0 &&
        ((uintptr_t)q_in->data | (uintptr_t)k_in->data | (uintptr_t)q_out->data |
         (uintptr_t)k_out->data) %
                8 ==
            0 &&
        rows <= INT32_MAX) {
        OPK(vdn_k_qknorm_rope(
            q_in->data, k_in->data, (int)q_in->ld, rope ? (const double *)rope->pos->data : NULL,
            rope ? (const float *)rope->inv->data : NULL, wq->data, wk->data, (int)rows, hq,
            (float)eps, q_out->data, k_out->data, (int)q_out->ld, vst(d)));
        return 0;
    }
    const int half = rope ? rope->n_rot / 2 : 0;
    if (head_dim % 8 == 0 && 32 % (head_dim / 8) == 0 && half % 8 == 0 &&
        qk_vec_side(q_out, q_in, wq) && qk_vec_side(k_out, k_in, wk))
        return qk_norm_rope_vec(d, OP, q_out, k_out, q_in, k_in, wq, wk, head_dim, eps, rope);
    const float2 *tab = NULL;
    if (rope_table(d, OP, rope, rows, &tab)) return -1;
    const int rot = rope ? rope->n_rot : 0;
    const int nv = head_dim <= 32 ? 1 : head_dim <= 64 ? 2 : head_dim <= 128 ? 4 : 8;
    const int items = QK_VALS / nv; /* heads a warp holds */
    const size_t shb = sizeof(float) * QK_WARPS * items * (size_t)head_dim;
    for (int side = 0; side < 2; side++) {
        vdn_tensor *o = side ? k_out : q_out;
        const vdn_tensor *x = side ? k_in : q_in, *w = side ? wk : wq;
        const int heads = side ? hk : hq;
        if (!o || !x || !heads) continue;
        const int grid = op_grid(rows * ((heads + items - 1) / items), QK_WARPS);
        const cudaStream_t st = cdev(d)->st;
#define QK_LAUNCH(NV)                                                                              \
    qk_norm_rope_k<NV><<<grid, QK_WARPS * 32, shb, st>>>(                                          \
        fview(o), fview(x), view_or_none(w), rows, heads, head_dim, (float)eps, tab, rot)
        if (nv == 1)
            QK_LAUNCH(1);
        else if (nv == 2)
            QK_LAUNCH(2);
        else if (nv == 4)
            QK_LAUNCH(4);
        else
            QK_LAUNCH(8);
#undef QK_LAUNCH
        OPL();
    }
    return 0;
}
