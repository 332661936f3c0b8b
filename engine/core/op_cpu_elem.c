/* CPU elementwise and per-row ops: activations, SwiGLU, add, scale, gated residual, per-group
 * scaling, timestep features, the Euler step. Where the model's float32 arithmetic is the
 * contract (residual adds, gates, the sampler), the ops compute in float32 exactly as written. */
#include <math.h>

#include "op_cpu.h"

#define FOR_EACH(t)                                                                                \
    for (int64_t r = 0, rows_ = vdn_tensor_rows(t), cols_ = vdn_tensor_cols(t); r < rows_; r++)    \
        for (int64_t c = 0; c < cols_; c++)

int vdn_cpu_act(vdn_tensor *y, const vdn_tensor *x, vdn_act act) {
    FOR_EACH(y) cpu_put(y, r, c, cpu_act(cpu_at(x, r, c), act));
    return 0;
}

/* y = value * silu(gate), one rounding */
int vdn_cpu_swiglu(vdn_tensor *y, const vdn_tensor *value, const vdn_tensor *gate) {
    FOR_EACH(y) {
        double g = cpu_at(gate, r, c);
        cpu_put(y, r, c, cpu_at(value, r, c) * (g / (1.0 + exp(-g))));
    }
    return 0;
}

int vdn_cpu_add(vdn_tensor *x, const vdn_tensor *y) {
    FOR_EACH(x) cpu_put(x, r, c, (float)cpu_at(x, r, c) + (float)cpu_at(y, r, c));
    return 0;
}

int vdn_cpu_scale(vdn_tensor *x, double s) {
    FOR_EACH(x) cpu_put(x, r, c, cpu_at(x, r, c) * s);
    return 0;
}

/* x += float32(gate * y), the add in float32 */
int vdn_cpu_gate_residual(vdn_tensor *x, const vdn_tensor *y, const vdn_tensor *gate,
                          const vdn_tensor *idx) {
    FOR_EACH(x) {
        float p = (float)cpu_at(y, r, c);
        if (gate) p = (float)(cpu_at(gate, idx ? cpu_idx(idx, r) : r, c) * p);
        cpu_put(x, r, c, (float)cpu_at(x, r, c) + p);
    }
    return 0;
}

int vdn_cpu_mul_groups(vdn_tensor *x, const vdn_tensor *s, int group) {
    FOR_EACH(x) cpu_put(x, r, c, (float)cpu_at(x, r, c) * (float)cpu_at(s, r, c / group));
    return 0;
}

/* e[m] = [cos(t f_j), sin(t f_j)], exponent and argument in float32 like the reference */
int vdn_cpu_time_features(vdn_tensor *e, const vdn_tensor *t) {
    const int64_t half = vdn_tensor_cols(e) / 2;
    const float neg_log_period = (float)-log(10000.0);
    for (int64_t m = 0; m < vdn_tensor_rows(e); m++) {
        float tm = ((const float *)t->data)[m];
        for (int64_t j = 0; j < half; j++) {
            float expo = neg_log_period * (float)j / (float)half;
            float f = (float)exp((double)expo);
            float arg = tm * f;
            cpu_put(e, m, j, (float)cos((double)arg));
            cpu_put(e, m, half + j, (float)sin((double)arg));
        }
    }
    return 0;
}

/* x0 = x + (1 - t) v, t = 1 - sigma; x <- r x + (1 - r) x0, r = sigma_next / sigma; float32 */
int vdn_cpu_euler(vdn_tensor *x, const vdn_tensor *v, double sigma, double sigma_next) {
    const float s = (float)sigma, sn = (float)sigma_next;
    const float t = 1.0f - s, sig_t = 1.0f - t, ratio = sn / s, one_minus_r = 1.0f - ratio;
    if (x->dtype == VDN_DT_F32 && v->dtype == VDN_DT_F32) { /* the latents: plain float rows */
        const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
        for (int64_t r = 0; r < rows; r++) {
            float *xr = (float *)x->data + (size_t)r * x->ld;
            const float *vr = (const float *)v->data + (size_t)r * v->ld;
            for (int64_t c = 0; c < cols; c++) {
                float x0 = xr[c] + sig_t * vr[c];
                xr[c] = ratio * xr[c] + one_minus_r * x0;
            }
        }
        return 0;
    }
    FOR_EACH(x) {
        float xv = (float)cpu_at(x, r, c), vv = (float)cpu_at(v, r, c);
        float x0 = xv + sig_t * vv;
        cpu_put(x, r, c, ratio * xv + one_minus_r * x0);
    }
    return 0;
}
