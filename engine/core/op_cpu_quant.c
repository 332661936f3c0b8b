/* The CPU oracle of the fused fp8 producers (op.h vdn_op_rmsnorm_quant and
 * vdn_op_linear_swiglu_quant): each is the composition of the ops it fuses on float32 host
 * buffers (rmsnorm into a float32 h, then quantize_rows; linear into a float32 h, swiglu into a
 * float32 y, then quantize_rows), so the fused op gives exactly the bytes and scales the unfused
 * sequence gives on this backend. Rows go in slabs so the float32 intermediates stay small. */
#include <stdlib.h>

#include "op_cpu.h"

#define SLAB 256 /* rows a slab: a few MB of float32 intermediates at the decoder's widths */

/* a packed float32 host matrix as a tensor */
static vdn_tensor host_f32(float *p, int64_t rows, int64_t cols, int64_t ld) {
    vdn_tensor t = {.dtype = VDN_DT_F32, .ndim = 2, .ne = {rows, cols, 1, 1}, .ld = ld, .data = p};
    return t;
}

/* rows [r0, r0 + n) of t, its row scales following (the front end checked t) */
static vdn_tensor rows_of(const vdn_tensor *t, int64_t r0, int64_t n) {
    vdn_tensor v = *t;
    v.ndim = 2;
    v.ne[0] = n;
    v.ne[1] = vdn_tensor_cols(t);
    v.ne[2] = v.ne[3] = 1;
    v.data = cpu_addr(t, r0, 0);
    v.scale = t->scale ? t->scale + r0 : NULL;
    v.owned = 0;
    return v;
}

int vdn_cpu_rmsnorm_quant(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x,
                          const vdn_tensor *w, double eps) {
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    float *h = vdn_xmalloc(sizeof(float) * (size_t)(SLAB * cols));
    for (int64_t r0 = 0; r0 < rows; r0 += SLAB) {
        const int64_t n = rows - r0 < SLAB ? rows - r0 : SLAB;
        vdn_tensor xs = rows_of(x, r0, n), qs = rows_of(q, r0, n), hs = host_f32(h, n, cols, cols);
        vdn_tensor ss = host_f32((float *)scale->data + r0, n, 1, 1);
        vdn_cpu_rmsnorm(&hs, &xs, w, eps, NULL, NULL, NULL);
        vdn_cpu_quantize_rows(&qs, &ss, &hs);
    }
    free(h);
    return 0;
}

int vdn_cpu_linear_swiglu_quant(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x,
                                const vdn_tensor *w, const vdn_tensor *b) {
    const int64_t rows = vdn_tensor_rows(x), f = vdn_tensor_rows(w) / 2;
    float *h = vdn_xmalloc(sizeof(float) * (size_t)(SLAB * 2 * f));
    float *y = vdn_xmalloc(sizeof(float) * (size_t)(SLAB * f));
    for (int64_t r0 = 0; r0 < rows; r0 += SLAB) {
        const int64_t n = rows - r0 < SLAB ? rows - r0 : SLAB;
        vdn_tensor xs = rows_of(x, r0, n), qs = rows_of(q, r0, n);
        vdn_tensor hs = host_f32(h, n, 2 * f, 2 * f), value = host_f32(h, n, f, 2 * f),
                   gate = host_f32(h + f, n, f, 2 * f), ys = host_f32(y, n, f, f);
        vdn_tensor ss = host_f32((float *)scale->data + r0, n, 1, 1);
        vdn_cpu_linear(&hs, &xs, w, b, VDN_ACT_NONE, 0);
        vdn_cpu_swiglu(&ys, &value, &gate);
        vdn_cpu_quantize_rows(&qs, &ss, &ys);
    }
    free(h);
    free(y);
    return 0;
}
