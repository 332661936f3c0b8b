/* Norms of the CUDA backend: rmsnorm (+ the adaLN modulation), layernorm, and the per-head
 * q/k RMSNorm + RoPE. The DiT's shapes run the fused bf16 kernels (norm.cu, rope.cu); any other
 * call (head dim 64, GQA, other rotary sections, fp32, strided rows) runs the plain kernels here:
 * one block per row (norms) or one warp per (row, head), float32 arithmetic. */
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

struct RopeArgs {
    const double *pos; /* [rows][pos_ld] or NULL */
    int64_t pos_ld;
    const float *inv; /* [n_rot / 2] */
    int n_rot, s0, s1;
};

/* One block per row (grid-stride), one warp per head of it: RMSNorm over the head (w NULL: none),
 * then the rotary pairs. A pair's angle depends on the row and the pair only, so its sine and
 * cosine (double, as the CPU twin's) are computed once per row for all heads (the video
 * decoder's 32 heads of 64: 1/32 of the sincos calls of one per (row, head, channel), which made
 * this op ~20x its memory time on the H200). */
__global__ void qk_norm_rope_k(FView out, FView in, FView w, int64_t rows, int heads, int hd,
                               float eps, RopeArgs ra) {
    __shared__ float buf[QK_WARPS][QK_MAX_HD];
    __shared__ double rcs[QK_MAX_HD / 2], rsn[QK_MAX_HD / 2];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *y = buf[warp];
    const int half = ra.n_rot / 2;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        if (ra.pos) {
            __syncthreads(); /* the previous row's heads are done with the table */
            for (int i = threadIdx.x; i < half; i += blockDim.x) {
                const int axis = i < ra.s0 ? 0 : (i < ra.s0 + ra.s1 ? 1 : 2);
                const double ang =
                    (double)__fmul_rn((float)ra.pos[r * ra.pos_ld + axis], ra.inv[i]);
                sincos(ang, &rsn[i], &rcs[i]);
            }
            __syncthreads();
        }
        for (int h = warp; h < heads; h += QK_WARPS) {
            const int64_t c0 = (int64_t)h * hd;
            float ss = 0.f;
            for (int c = lane; c < hd; c += 32) {
                const float v = fv_get(in, r, c0 + c);
                y[c] = v;
                ss += v * v;
            }
            ss = warp_sum(ss);
            if (w.p) {
                const float inv = rsqrtf(ss / (float)hd + eps);
                for (int c = lane; c < hd; c += 32)
                    y[c] = y[c] * inv * fv_get(w, 0, c);
            }
            __syncwarp();
            for (int c = lane; c < hd; c += 32) {
                float o = y[c];
                if (ra.pos && c < ra.n_rot) {
                    const int i = c < half ? c : c - half; /* the pair */
                    const double cs = rcs[i], sn = rsn[i];
                    o = c < half ? (float)(y[c] * cs - y[c + half] * sn)
                                 : (float)(y[c] * cs + y[c - half] * sn);
                }
                fv_set(out, r, c0 + c, o);
            }
            __syncwarp();
        }
    }
}

FView view_or_none(const vdn_tensor *t) {
    FView v = {t ? (char *)t->data : NULL, t ? (int)t->dtype : VDN_DT_F32, t ? t->ld : 0};
    return v;
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
                  rope->sections[2] == 16 && rope->pos->ld == 3 && contiguous(rope->pos));
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
    RopeArgs ra = {NULL, 0, NULL, 0, 0, 0};
    if (rope)
        ra = {(const double *)rope->pos->data,
              rope->pos->ld,
              (const float *)rope->inv->data,
              rope->n_rot,
              rope->sections[0],
              rope->sections[1]};
    qk_norm_rope_k<<<op_grid(rows, 1), QK_WARPS * 32, 0, cdev(d)->st>>>(
        fview(q_out), fview(q_in), view_or_none(wq), rows, hq, head_dim, (float)eps, ra);
    OPL();
    if (k_in && k_out && hk) {
        qk_norm_rope_k<<<op_grid(rows, 1), QK_WARPS * 32, 0, cdev(d)->st>>>(
            fview(k_out), fview(k_in), view_or_none(wk), rows, hk, head_dim, (float)eps, ra);
        OPL();
    }
    return 0;
}
