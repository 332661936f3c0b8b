/* PSNR and SSIM on grayscale images in doubles, matching scikit-image's definitions. */
#include <math.h>
#include <stdlib.h>

#include "filter.h"
#include "metrics.h"
#include "vdn_util.h"

double vdn_psnr(const double *ref, const double *test, size_t n, double data_range) {
    double se = 0;
    for (size_t i = 0; i < n; i++) {
        double d = ref[i] - test[i];
        se += d * d;
    }
    if (n == 0) return NAN;
    double mse = se / (double)n;
    if (mse == 0) return INFINITY;
    return 10.0 * log10(data_range * data_range / mse);
}

double vdn_ssim(const double *ref, const double *test, int h, int w, double data_range) {
    const int win = 11, pad = (win - 1) / 2;
    if (h < win || w < win) return NAN;
    double k[64];
    int r = vdn_gaussian_kernel(1.5, 3.5, k, 64); /* radius 5: the 11-pixel window */
    size_t n = (size_t)h * (size_t)w;
    double *buf = vdn_xmalloc(5 * n * sizeof *buf);
    double *ux = buf, *uy = buf + n, *uxx = buf + 2 * n, *uyy = buf + 3 * n, *uxy = buf + 4 * n;
    for (size_t i = 0; i < n; i++) {
        uxx[i] = ref[i] * ref[i];
        uyy[i] = test[i] * test[i];
        uxy[i] = ref[i] * test[i];
    }
    vdn_filter_sep(ref, h, w, k, r, VDN_BORDER_REFLECT, ux);
    vdn_filter_sep(test, h, w, k, r, VDN_BORDER_REFLECT, uy);
    vdn_filter_sep(uxx, h, w, k, r, VDN_BORDER_REFLECT, uxx);
    vdn_filter_sep(uyy, h, w, k, r, VDN_BORDER_REFLECT, uyy);
    vdn_filter_sep(uxy, h, w, k, r, VDN_BORDER_REFLECT, uxy);
    const double c1 = (0.01 * data_range) * (0.01 * data_range);
    const double c2 = (0.03 * data_range) * (0.03 * data_range);
    double sum = 0;
    size_t cnt = 0;
    for (int y = pad; y < h - pad; y++)
        for (int x = pad; x < w - pad; x++) {
            size_t i = (size_t)y * w + x;
            double vx = uxx[i] - ux[i] * ux[i], vy = uyy[i] - uy[i] * uy[i];
            double vxy = uxy[i] - ux[i] * uy[i];
            double a1 = 2 * ux[i] * uy[i] + c1, a2 = 2 * vxy + c2;
            double b1 = ux[i] * ux[i] + uy[i] * uy[i] + c1, b2 = vx + vy + c2;
            sum += (a1 * a2) / (b1 * b2);
            cnt++;
        }
    free(buf);
    return sum / (double)cnt;
}
