/* Elementwise and per-row ops of the CUDA backend: act, swiglu, add, scale, gate_residual,
 * mul_groups, time_features, euler, and the bias + activation epilogue of the GEMMs without a
 * fused one. The bf16 fast paths are the fused kernels of norm.cu / cast.cu (16-byte loads);
 * the rest is one plain strided kernel per op over any float dtype, in float32 arithmetic. */
#include <math.h>

#include "op_cuda.h"

namespace {

__device__ __forceinline__ float apply_act(float x, int act) {
    switch (act) {
    case VDN_ACT_SILU:
        return x / (1.f + expf(-x));
    case VDN_ACT_GELU_TANH: {
        const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
        return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
    }
    case VDN_ACT_SIGMOID:
        return 1.f / (1.f + expf(-x));
    case VDN_ACT_GELU:
        return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    default:
        return x;
    }
}

#define GRID_LOOP(i, n)                                                                            \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

__global__ void act_k(FView y, FView x, int64_t rows, int64_t cols, int act) {
    GRID_LOOP(i, rows * cols) {
        const int64_t r = i / cols, c = i % cols;
        fv_set(y, r, c, apply_act(fv_get(x, r, c), act));
    }
}

__global__ void swiglu_k(FView y, FView v, FView g, int64_t rows, int64_t cols) {
    GRID_LOOP(i, rows * cols) {
        const int64_t r = i / cols, c = i % cols;
        const float gv = fv_get(g, r, c);
        fv_set(y, r, c, fv_get(v, r, c) * (gv / (1.f + expf(-gv))));
    }
}

__global__ void add_k(FView x, FView y, int64_t rows, int64_t cols) {
    GRID_LOOP(i, rows * cols) {
        const int64_t r = i / cols, c = i % cols;
        fv_set(x, r, c, fv_get(x, r, c) + fv_get(y, r, c));
    }
}

__global__ void scale_k(FView x, int64_t rows, int64_t cols, float s) {
    GRID_LOOP(i, rows * cols) {
        const int64_t r = i / cols, c = i % cols;
        fv_set(x, r, c, fv_get(x, r, c) * s);
    }
}

/* gate.p NULL: x += y; idx NULL: row r uses gate row r */
__global__ void gate_res_k(FView x, FView y, FView gate, const int *idx, int64_t rows,
                           int64_t cols) {
    GRID_LOOP(i, rows * cols) {
        const int64_t r = i / cols, c = i % cols;
        const float g = gate.p ? fv_get(gate, idx ? idx[r] : r, c) : 1.f;
        fv_set(x, r, c, fv_get(x, r, c) + g * fv_get(y, r, c));
    }
}

__global__ void mul_groups_k(FView x, FView s, int64_t rows, int64_t cols, int group) {
    GRID_LOOP(i, rows * cols) {
        const int64_t r = i / cols, c = i % cols;
        fv_set(x, r, c, fv_get(x, r, c) * fv_get(s, r, c / group));
    }
}

/* spec 2.3: exponent and argument in float32, cos / sin of that float evaluated in double */
__global__ void time_features_k(float *e, int64_t lde, const float *t, int M, int half) {
    GRID_LOOP(i, (int64_t)M * half) {
        const int m = (int)(i / half), j = (int)(i % half);
        /* -ln(1e4) * j / half, rounded as the CPU's float32 operations (not fast-math's) */
        const float expo = __fdiv_rn(__fmul_rn(-9.210340371976184f, (float)j), (float)half);
        const float f = (float)exp((double)expo);
        const float arg = __fmul_rn(t[m], f);
        e[m * lde + j] = (float)cos((double)arg);
        e[m * lde + half + j] = (float)sin((double)arg);
    }
}

/* x0 = x + (1 - t) v with t = 1 - sigma; x <- r x + (1 - r) x0, r = sigma_next / sigma; the
 * float32 operations of engine/sampler.c, unfused (no FMA contraction) */
__global__ void euler_k(FView x, FView v, int64_t rows, int64_t cols, float sig_t, float r,
                        float one_minus_r) {
    GRID_LOOP(i, rows * cols) {
        const int64_t rr = i / cols, c = i % cols;
        const float xv = fv_get(x, rr, c);
        const float x0 = __fadd_rn(xv, __fmul_rn(sig_t, fv_get(v, rr, c)));
        fv_set(x, rr, c, __fadd_rn(__fmul_rn(r, xv), __fmul_rn(one_minus_r, x0)));
    }
}

__global__ void bias_act_k(FView y, FView b, int64_t rows, int64_t cols, int act) {
    GRID_LOOP(i, rows * cols) {
        const int64_t r = i / cols, c = i % cols;
        float v = fv_get(y, r, c);
        if (b.p) v += fv_get(b, 0, c);
        fv_set(y, r, c, apply_act(v, act));
    }
}

FView none_view() {
    FView v = {NULL, VDN_DT_F32, 0};
    return v;
}

} // namespace

int op_cuda_bias_act(vdn_dev *d, const char *OP, FView y, int64_t rows, int64_t n,
                     const vdn_tensor *bias, vdn_act act) {
    if (rows * n == 0 || (!bias && act == VDN_ACT_NONE)) return 0;
    bias_act_k<<<op_grid(rows * n), 256, 0, cdev(d)->st>>>(y, bias ? fview(bias) : none_view(),
                                                           rows, n, (int)act);
    OPL();
    return 0;
}

int op_cuda_act(vdn_tensor *y, const vdn_tensor *x, vdn_act act) {
    vdn_dev *d = y->dev;
    const char *OP = "act";
    if (op_cuda_enter(d, OP, {y, x})) return -1;
    const int64_t rows = vdn_tensor_rows(y), cols = vdn_tensor_cols(y);
    if (rows * cols == 0) return 0;
    act_k<<<op_grid(rows * cols), 256, 0, cdev(d)->st>>>(fview(y), fview(x), rows, cols, (int)act);
    OPL();
    return 0;
}

int op_cuda_swiglu(vdn_tensor *y, const vdn_tensor *value, const vdn_tensor *gate) {
    vdn_dev *d = y->dev;
    const char *OP = "swiglu";
    if (op_cuda_enter(d, OP, {y, value, gate})) return -1;
    const int64_t rows = vdn_tensor_rows(y), f = vdn_tensor_cols(y);
    if (rows * f == 0) return 0;
    /* the fused kernel's layout: [value | gate] halves of one row, output packed */
    if (is_bf16(y) && is_bf16(value) && is_bf16(gate) && f % 8 == 0 && value->ld == 2 * f &&
        gate->ld == 2 * f && (bf16 *)gate->data == (bf16 *)value->data + f && contiguous(y) &&
        aligned16(value->data) && aligned16(y->data) && f <= INT32_MAX && rows <= INT32_MAX) {
        OPK(vdn_k_swiglu(value->data, (int)rows, (int)f, y->data, vst(d)));
        return 0;
    }
    swiglu_k<<<op_grid(rows * f), 256, 0, cdev(d)->st>>>(fview(y), fview(value), fview(gate), rows,
                                                         f);
    OPL();
    return 0;
}

int op_cuda_add(vdn_tensor *x, const vdn_tensor *y) {
    vdn_dev *d = x->dev;
    const char *OP = "add";
    if (op_cuda_enter(d, OP, {x, y})) return -1;
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    if (rows * cols == 0) return 0;
    if (is_bf16(x) && is_bf16(y) && contiguous(x) && contiguous(y) && (rows * cols) % 8 == 0 &&
        aligned16(x->data) && aligned16(y->data)) {
        OPK(vdn_k_add_bf16(x->data, y->data, (size_t)(rows * cols), vst(d)));
        return 0;
    }
    add_k<<<op_grid(rows * cols), 256, 0, cdev(d)->st>>>(fview(x), fview(y), rows, cols);
    OPL();
    return 0;
}

int op_cuda_scale(vdn_tensor *x, double s) {
    vdn_dev *d = x->dev;
    const char *OP = "scale";
    if (op_cuda_enter(d, OP, {x})) return -1;
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    if (rows * cols == 0) return 0;
    scale_k<<<op_grid(rows * cols), 256, 0, cdev(d)->st>>>(fview(x), rows, cols, (float)s);
    OPL();
    return 0;
}

int op_cuda_gate_residual(vdn_tensor *x, const vdn_tensor *y, const vdn_tensor *gate,
                          const vdn_tensor *idx) {
    vdn_dev *d = x->dev;
    const char *OP = "gate_residual";
    if (op_cuda_enter(d, OP, {x, y, gate})) return -1;
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    if (rows * cols == 0) return 0;
    /* the fused kernel: bf16 rows of x and y packed, gate rows picked by idx */
    if (is_bf16(x) && is_bf16(y) && is_bf16(gate) && idx && contiguous(x) && contiguous(y) &&
        cols % 8 == 0 && gate->ld % 8 == 0 && aligned16(x->data) && aligned16(y->data) &&
        aligned16(gate->data) && rows <= INT32_MAX) {
        OPK(vdn_k_gate_residual(x->data, y->data, gate->data, (const int *)idx->data, (int)gate->ld,
                                (int)rows, (int)cols, vst(d)));
        return 0;
    }
    gate_res_k<<<op_grid(rows * cols), 256, 0, cdev(d)->st>>>(
        fview(x), fview(y), gate ? fview(gate) : none_view(), idx ? (const int *)idx->data : NULL,
        rows, cols);
    OPL();
    return 0;
}

int op_cuda_mul_groups(vdn_tensor *x, const vdn_tensor *s, int group) {
    vdn_dev *d = x->dev;
    const char *OP = "mul_groups";
    if (op_cuda_enter(d, OP, {x, s})) return -1;
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    if (rows * cols == 0) return 0;
    mul_groups_k<<<op_grid(rows * cols), 256, 0, cdev(d)->st>>>(fview(x), fview(s), rows, cols,
                                                                group);
    OPL();
    return 0;
}

int op_cuda_time_features(vdn_tensor *e, const vdn_tensor *t) {
    vdn_dev *d = e->dev;
    const char *OP = "time_features";
    if (op_cuda_enter(d, OP)) return -1;
    const int M = (int)vdn_tensor_rows(e), half = (int)(vdn_tensor_cols(e) / 2);
    if (M * half == 0) return 0;
    time_features_k<<<op_grid((int64_t)M * half), 256, 0, cdev(d)->st>>>(
        (float *)e->data, e->ld, (const float *)t->data, M, half);
    OPL();
    return 0;
}

int op_cuda_euler(vdn_tensor *x, const vdn_tensor *v, double sigma, double sigma_next) {
    vdn_dev *d = x->dev;
    const char *OP = "euler";
    if (op_cuda_enter(d, OP, {x, v})) return -1;
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    if (rows * cols == 0) return 0;
    /* the step's scalars in float32, as vdn_euler_step forms them */
    const float t = 1.0f - (float)sigma, r = (float)sigma_next / (float)sigma;
    euler_k<<<op_grid(rows * cols), 256, 0, cdev(d)->st>>>(fview(x), fview(v), rows, cols, 1.0f - t,
                                                           r, 1.0f - r);
    OPL();
    return 0;
}
