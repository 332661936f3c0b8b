/* Metrics on the latent video itself and the fixed latent preview (see metrics.h). */
#include <math.h>
#include <stdlib.h>

#include "metrics.h"
#include "vdn_util.h"

void vdn_latent_preview(const float *video, int C, int F, int H, int W, int frame, int scale,
                        double *gray, uint8_t *rgb) {
    size_t plane = (size_t)H * W, fstride = (size_t)F * plane;
    int group_size[3] = {0, 0, 0};
    for (int c = 0; c < C; c++)
        group_size[3 * c / C]++;
    int ws = W * scale;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            double p[3] = {0, 0, 0};
            for (int c = 0; c < C; c++)
                p[3 * c / C] +=
                    video[(size_t)c * fstride + (size_t)frame * plane + (size_t)y * W + x];
            double v[3], g = 0;
            for (int k = 0; k < 3; k++) {
                double s = group_size[k] ? p[k] / sqrt((double)group_size[k]) : 0;
                double t = 0.5 + s / 6.0;
                v[k] = t < 0 ? 0 : t > 1 ? 1 : t;
                g += v[k] / 3.0;
            }
            for (int dy = 0; dy < scale; dy++)
                for (int dx = 0; dx < scale; dx++) {
                    size_t o = (size_t)(y * scale + dy) * ws + (size_t)(x * scale + dx);
                    if (gray) gray[o] = g;
                    if (rgb)
                        for (int k = 0; k < 3; k++)
                            rgb[3 * o + k] = (uint8_t)lround(v[k] * 255.0);
                }
        }
}

double vdn_rel_l2(const float *ref, const float *test, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)test[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : NAN;
}

double vdn_latent_psnr(const float *ref, const float *test, size_t n) {
    if (n == 0) return NAN;
    double lo = ref[0], hi = ref[0], se = 0;
    for (size_t i = 0; i < n; i++) {
        if (ref[i] < lo) lo = ref[i];
        if (ref[i] > hi) hi = ref[i];
        double d = (double)test[i] - (double)ref[i];
        se += d * d;
    }
    double mse = se / (double)n;
    if (mse == 0) return INFINITY;
    return 10.0 * log10((hi - lo) * (hi - lo) / mse);
}

double vdn_motion_mean_flow(const float *video, int C, int F, int H, int W) {
    if (F < 2) return NAN;
    const int s = vdn_preview_scale(H, W);
    int h = H * s, w = W * s;
    size_t n = (size_t)h * w;
    double *a = vdn_xmalloc(n * sizeof *a), *b = vdn_xmalloc(n * sizeof *b);
    double *flow = vdn_xmalloc(2 * n * sizeof *flow);
    double total = 0;
    vdn_latent_preview(video, C, F, H, W, 0, s, a, NULL);
    for (int t = 0; t + 1 < F; t++) {
        vdn_latent_preview(video, C, F, H, W, t + 1, s, b, NULL);
        vdn_flow_ilk(a, b, h, w, 7, 10, flow);
        double m = 0;
        for (size_t i = 0; i < n; i++)
            m += sqrt(flow[i] * flow[i] + flow[n + i] * flow[n + i]);
        total += m / (double)n;
        double *tmp = a;
        a = b;
        b = tmp;
    }
    free(a);
    free(b);
    free(flow);
    return total / (F - 1) / s;
}

double vdn_pixel_mean_flow(const float *rgb, int F, int H, int W) {
    if (F < 2) return NAN;
    const size_t n = (size_t)H * W, chan = n * (size_t)F;
    double *a = vdn_xmalloc(n * sizeof *a), *b = vdn_xmalloc(n * sizeof *b);
    double *flow = vdn_xmalloc(2 * n * sizeof *flow);
    double total = 0;
    for (int t = 0; t < F; t++) {
        for (size_t i = 0; i < n; i++) /* luminance as the mean of R, G, B */
            b[i] =
                ((double)rgb[t * n + i] + rgb[chan + t * n + i] + rgb[2 * chan + t * n + i]) / 3.0;
        if (t > 0) {
            vdn_flow_ilk(a, b, H, W, 7, 10, flow);
            double m = 0;
            for (size_t i = 0; i < n; i++)
                m += sqrt(flow[i] * flow[i] + flow[n + i] * flow[n + i]);
            total += m / (double)n;
        }
        double *tmp = a;
        a = b;
        b = tmp;
    }
    free(a);
    free(b);
    free(flow);
    return total / (F - 1);
}

void vdn_temporal_diff(const float *video, int C, int F, int H, int W, double *mean,
                       double *variance) {
    *mean = *variance = NAN;
    if (F < 2) return;
    size_t plane = (size_t)H * W, fstride = (size_t)F * plane;
    double *d = vdn_xmalloc((size_t)(F - 1) * sizeof *d), s = 0;
    for (int t = 0; t + 1 < F; t++) {
        double ss = 0;
        for (int c = 0; c < C; c++)
            for (size_t i = 0; i < plane; i++) {
                const float *base = video + (size_t)c * fstride + i;
                double e = (double)base[(size_t)(t + 1) * plane] - (double)base[(size_t)t * plane];
                ss += e * e;
            }
        d[t] = sqrt(ss / ((double)C * (double)plane));
        s += d[t];
    }
    *mean = s / (F - 1);
    double v = 0;
    for (int t = 0; t + 1 < F; t++)
        v += (d[t] - *mean) * (d[t] - *mean);
    *variance = v / (F - 1); /* population variance over the pairs */
    free(d);
}
