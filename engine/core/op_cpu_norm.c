/* CPU norms: RMSNorm with the adaLN modulation, LayerNorm, and the per-head q/k RMSNorm + RoPE.
 * Sums of squares in float64; the normalised value is rounded to float32 before the modulation
 * and before the rotation, as the model's float32 stages do. */
#include <math.h>
#include <stdlib.h>

#include "op_cpu.h"

int vdn_cpu_rmsnorm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, double eps,
                    const vdn_tensor *shift, const vdn_tensor *scale, const vdn_tensor *idx) {
    const int64_t rows = vdn_tensor_rows(x), d = vdn_tensor_cols(x);
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0.0;
        for (int64_t i = 0; i < d; i++) {
            double v = cpu_at(x, r, i);
            ss += v * v;
        }
        double inv = 1.0 / sqrt(ss / (double)d + eps);
        int64_t tr = idx ? cpu_idx(idx, r) : r;
        for (int64_t i = 0; i < d; i++) {
            float h = (float)(cpu_at(x, r, i) * inv * (w ? cpu_at(w, 0, i) : 1.0));
            double out = h;
            if (shift) out = (double)h * (1.0 + cpu_at(scale, tr, i)) + cpu_at(shift, tr, i);
            cpu_put(y, r, i, out);
        }
    }
    return 0;
}

int vdn_cpu_layernorm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                      double eps) {
    const int64_t rows = vdn_tensor_rows(x), d = vdn_tensor_cols(x);
    for (int64_t r = 0; r < rows; r++) {
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < d; i++)
            mean += cpu_at(x, r, i);
        mean /= (double)d;
        for (int64_t i = 0; i < d; i++) {
            double c = cpu_at(x, r, i) - mean;
            var += c * c;
        }
        double inv = 1.0 / sqrt(var / (double)d + eps); /* biased variance, like torch */
        for (int64_t i = 0; i < d; i++) {
            double v = (cpu_at(x, r, i) - mean) * inv;
            if (w) v *= cpu_at(w, 0, i);
            if (b) v += cpu_at(b, 0, i);
            cpu_put(y, r, i, v);
        }
    }
    return 0;
}

/* one head vector h (float32, width hd) of row r: norm then rotate, in place */
static void norm_rope_head(float *h, int hd, const vdn_tensor *w, double eps, const vdn_rope *rope,
                           int64_t r) {
    if (w) {
        double ss = 0.0;
        for (int i = 0; i < hd; i++)
            ss += (double)h[i] * h[i];
        double inv = 1.0 / sqrt(ss / hd + eps);
        for (int i = 0; i < hd; i++)
            h[i] = (float)(h[i] * inv * cpu_at(w, 0, i));
    }
    if (!rope) return;
    const int half = rope->n_rot / 2;
    for (int i = 0; i < half; i++) {
        int axis = vdn_rope_axis(i, rope->sections[0], rope->sections[1], rope->sections[2],
                                 rope->interleaved);
        float ang32 = (float)cpu_at(rope->pos, r, axis) * (float)cpu_at(rope->inv, 0, i);
        double cs = cos((double)ang32), sn = sin((double)ang32);
        float a = h[i], b = h[i + half];
        h[i] = (float)(a * cs - b * sn);
        h[i + half] = (float)(b * cs + a * sn);
    }
}

static void norm_rope_tensor(vdn_tensor *out, const vdn_tensor *in, const vdn_tensor *w, int hd,
                             double eps, const vdn_rope *rope) {
    const int64_t rows = vdn_tensor_rows(in), heads = vdn_tensor_cols(in) / hd;
    float *h = vdn_xmalloc(sizeof(float) * (size_t)hd);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t g = 0; g < heads; g++) {
            for (int i = 0; i < hd; i++)
                h[i] = (float)cpu_at(in, r, g * hd + i);
            norm_rope_head(h, hd, w, eps, rope, r);
            for (int i = 0; i < hd; i++)
                cpu_put(out, r, g * hd + i, h[i]);
        }
    free(h);
}

int vdn_cpu_qk_norm_rope(vdn_tensor *q_out, vdn_tensor *k_out, const vdn_tensor *q_in,
                         const vdn_tensor *k_in, const vdn_tensor *wq, const vdn_tensor *wk,
                         int head_dim, double eps, const vdn_rope *rope) {
    norm_rope_tensor(q_out, q_in, wq, head_dim, eps, rope);
    if (k_in) norm_rope_tensor(k_out, k_in, wk, head_dim, eps, rope);
    return 0;
}
