/* Shared helpers of the CPU backend (engine/op_cpu*.c): element access in any dtype, float32
 * matrix views of tensors, mask visibility. The CPU backend holds host memory; every op reads its
 * inputs as float64 (exact for every float dtype), accumulates in float64 and rounds once at its
 * output, except where an op's contract names an intermediate float32 rounding. */
#ifndef VDN_OP_CPU_H
#define VDN_OP_CPU_H

#include <math.h>
#include <stdint.h>

#include "op_backend.h"
#include "vdn_util.h"

static inline size_t cpu_esize(vdn_dtype dt) { /* vdn_dtype_size, inlined for the hot loops */
    switch (dt) {
    case VDN_DT_F64:
        return 8;
    case VDN_DT_BF16:
    case VDN_DT_F16:
        return 2;
    case VDN_DT_U8:
    case VDN_DT_F8_E4M3:
        return 1;
    default:
        return 4;
    }
}

static inline void *cpu_addr(const vdn_tensor *t, int64_t r, int64_t c) {
    return (char *)t->data + ((size_t)r * (size_t)t->ld + (size_t)c) * cpu_esize(t->dtype);
}

/* element (r, c) of the 2-D form as a double */
static inline double cpu_at(const vdn_tensor *t, int64_t r, int64_t c) {
    const void *p = cpu_addr(t, r, c);
    switch (t->dtype) {
    case VDN_DT_F32:
        return *(const float *)p;
    case VDN_DT_BF16:
        return vdn_bf16_to_f32(*(const uint16_t *)p);
    case VDN_DT_F16:
        return vdn_f16_to_f32(*(const uint16_t *)p);
    case VDN_DT_F64:
        return *(const double *)p;
    case VDN_DT_I32:
        return *(const int32_t *)p;
    case VDN_DT_U8:
        return *(const uint8_t *)p;
    case VDN_DT_F8_E4M3: /* the stored e4m3 value, without its row's scale */
        return vdn_e4m3_to_f32(*(const uint8_t *)p);
    default:
        return NAN;
    }
}

/* store v rounded to t's dtype (bf16/f16 through float32, nearest even) */
static inline void cpu_put(const vdn_tensor *t, int64_t r, int64_t c, double v) {
    void *p = cpu_addr(t, r, c);
    switch (t->dtype) {
    case VDN_DT_F32:
        *(float *)p = (float)v;
        break;
    case VDN_DT_BF16:
        *(uint16_t *)p = vdn_f32_to_bf16((float)v);
        break;
    case VDN_DT_F16:
        *(uint16_t *)p = vdn_f32_to_f16((float)v);
        break;
    case VDN_DT_F64:
        *(double *)p = v;
        break;
    case VDN_DT_I32:
        *(int32_t *)p = (int32_t)v;
        break;
    case VDN_DT_U8:
        *(uint8_t *)p = (uint8_t)v;
        break;
    default:
        break;
    }
}

static inline int32_t cpu_idx(const vdn_tensor *idx, int64_t r) {
    return ((const int32_t *)idx->data)[r];
}

/* A tensor read as a float32 matrix: the tensor's own memory when it is F32, else a converted
 * packed copy (freed by cpu_fmat_done). */
typedef struct {
    const float *p;
    int64_t ld;
    float *copy;
} cpu_fmat;
cpu_fmat cpu_fmat_of(const vdn_tensor *t);
/* One row of the fp8 rule (op.h, vdn_op_quantize_rows): x[0..n) of dtype dt (any float) ->
 * q[0..n) e4m3 bytes; returns the row's scale. */
float vdn_cpu_quantize_row(const void *x, vdn_dtype dt, int64_t n, uint8_t *q);
void cpu_fmat_done(cpu_fmat *m);
static inline const float *cpu_frow(const cpu_fmat *m, int64_t r) {
    return m->p + (size_t)r * (size_t)m->ld;
}

/* whether query row r sees key k */
static inline int cpu_mask_visible(const vdn_attn_mask *m, int r, int k) {
    switch (m->kind) {
    case VDN_MASK_CAUSAL:
        return k <= r;
    case VDN_MASK_ROWS:
        return k < m->head_end || k >= m->tail_start || (k >= m->lo[r] && k < m->hi[r]);
    default:
        return 1;
    }
}

static inline double cpu_act(double x, vdn_act act) {
    switch (act) {
    case VDN_ACT_SILU:
        return x / (1.0 + exp(-x));
    case VDN_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case VDN_ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case VDN_ACT_GELU:
        return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
    default:
        return x;
    }
}

/* the VDA family (op_cpu_vda.c) */
extern const struct vdn_vda_backend vdn_cpu_vda_backend;
/* the convolution family (op_cpu_conv.c) */
extern const struct vdn_conv_backend vdn_cpu_conv_backend;
extern const struct vdn_pixel_backend vdn_cpu_pixel_backend;

/* the op groups (op_cpu_*.c) */
int vdn_cpu_linear(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                   vdn_act act, int accumulate);
int vdn_cpu_quantize_rows(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x);
int vdn_cpu_rmsnorm_quant(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x,
                          const vdn_tensor *w, double eps);
int vdn_cpu_linear_swiglu_quant(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x,
                                const vdn_tensor *w, const vdn_tensor *b);
int vdn_cpu_matmul_bt(vdn_tensor *y, const vdn_tensor *a, const vdn_tensor *b, int accumulate);
int vdn_cpu_act(vdn_tensor *y, const vdn_tensor *x, vdn_act act);
int vdn_cpu_swiglu(vdn_tensor *y, const vdn_tensor *value, const vdn_tensor *gate);
int vdn_cpu_add(vdn_tensor *x, const vdn_tensor *y);
int vdn_cpu_scale(vdn_tensor *x, double s);
int vdn_cpu_gate_residual(vdn_tensor *x, const vdn_tensor *y, const vdn_tensor *gate,
                          const vdn_tensor *idx);
int vdn_cpu_mul_groups(vdn_tensor *x, const vdn_tensor *s, int group);
int vdn_cpu_rmsnorm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, double eps,
                    const vdn_tensor *shift, const vdn_tensor *scale, const vdn_tensor *idx);
int vdn_cpu_layernorm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                      double eps);
int vdn_cpu_qk_norm_rope(vdn_tensor *q_out, vdn_tensor *k_out, const vdn_tensor *q_in,
                         const vdn_tensor *k_in, const vdn_tensor *wq, const vdn_tensor *wk,
                         int head_dim, double eps, const vdn_rope *rope);
int vdn_cpu_attention(vdn_tensor *o, const vdn_tensor *q, const vdn_tensor *k, const vdn_tensor *v,
                      int head_dim, double scale, const vdn_attn_mask *mask,
                      const vdn_tensor *gate);
int vdn_cpu_time_features(vdn_tensor *e, const vdn_tensor *t);
int vdn_cpu_euler(vdn_tensor *x, const vdn_tensor *v, double sigma, double sigma_next);

#endif
