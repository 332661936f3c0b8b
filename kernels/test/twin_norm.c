/* CPU twins of the per-row kernels: RMSNorm + adaLN modulate, gate + residual, SwiGLU,
 * QK-norm + partial half-split RoPE (spec sections 3, 2.4). */
#include <math.h>

#include "twin.h"
#include "vdn_util.h"

void twin_rmsnorm_modulate(const float *x, const float *w, const float *shift, const float *scale,
                           const int *idx, int tstride, int rows, int width, float eps,
                           float *out) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * width;
        float ss = 0.f;
        for (int c = 0; c < width; c++)
            ss += xr[c] * xr[c];
        float inv = 1.f / sqrtf(ss / (float)width + eps);
        const float *sh = shift ? shift + (size_t)idx[r] * tstride : NULL;
        const float *sc = scale ? scale + (size_t)idx[r] * tstride : NULL;
        for (int c = 0; c < width; c++) {
            float h = xr[c] * inv * (w ? w[c] : 1.f);
            if (sc) h = h * (1.f + sc[c]);
            if (sh) h = h + sh[c];
            out[(size_t)r * width + c] = vdn_round_bf16(h);
        }
    }
}

void twin_gate_residual(float *x, const float *y, const float *gate, const int *idx, int tstride,
                        int rows, int width) {
    for (int r = 0; r < rows; r++) {
        const float *g = gate + (size_t)idx[r] * tstride;
        for (int c = 0; c < width; c++) {
            size_t i = (size_t)r * width + c;
            x[i] = vdn_round_bf16(x[i] + g[c] * y[i]);
        }
    }
}

void twin_swiglu(const float *h, int rows, int width, float *out) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < width; c++) {
            float v = h[(size_t)r * 2 * width + c], g = h[(size_t)r * 2 * width + width + c];
            out[(size_t)r * width + c] = vdn_round_bf16(v * (g / (1.f + expf(-g))));
        }
}

void twin_qknorm_rope(const float *in, int ld_in, const double *pos, const float *inv_freq,
                      int nfreq, const float *w, int rows, int heads, int hd, float eps, float *out,
                      int ld_out) {
    int half = 3 * nfreq; /* rotated channels = 2 * half */
    float y[1024];
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < heads; h++) {
            const float *xi = in + (size_t)r * ld_in + (size_t)h * hd;
            float ss = 0.f;
            for (int d = 0; d < hd; d++)
                ss += xi[d] * xi[d];
            float inv = 1.f / sqrtf(ss / (float)hd + eps);
            for (int d = 0; d < hd; d++)
                y[d] = xi[d] * inv * w[d];
            float *o = out + (size_t)r * ld_out + (size_t)h * hd;
            for (int i = 0; i < half; i++) {
                int axis = i / nfreq, j = i % nfreq;
                double ang = pos[(size_t)r * 3 + axis] * (double)inv_freq[j];
                float c = (float)cos(ang), s = (float)sin(ang);
                float a = y[i], b = y[i + half];
                o[i] = vdn_round_bf16(a * c - b * s);
                o[i + half] = vdn_round_bf16(b * c + a * s);
            }
            for (int d = 2 * half; d < hd; d++)
                o[d] = vdn_round_bf16(y[d]);
        }
}
