/* Iterative Lucas-Kanade optical flow (Le Besnerais & Champagnat 2005), structured like
 * scikit-image's optical_flow_ilk so its output can be checked against it: per level, warp
 * the moving image by the current flow, linearize, solve a 2x2 system per pixel from
 * box-filtered (15x15, mirror border) gradient products; coarse to fine over a Gaussian
 * pyramid. A classical method: no learned weights, unlike the paper's RAFT. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "metrics.h"
#include "vdn_util.h"

/* Bilinear sample with coordinates clamped to the image (ndimage map_coordinates order=1,
 * mode='nearest'). */
static double sample(const double *img, int h, int w, double y, double x) {
    if (y < 0) y = 0;
    if (y > h - 1) y = h - 1;
    if (x < 0) x = 0;
    if (x > w - 1) x = w - 1;
    int y0 = (int)floor(y), x0 = (int)floor(x);
    int y1 = y0 + 1 < h ? y0 + 1 : y0, x1 = x0 + 1 < w ? x0 + 1 : x0;
    double fy = y - y0, fx = x - x0;
    return (1 - fy) * ((1 - fx) * img[(size_t)y0 * w + x0] + fx * img[(size_t)y0 * w + x1]) +
           fy * ((1 - fx) * img[(size_t)y1 * w + x0] + fx * img[(size_t)y1 * w + x1]);
}

/* numpy.gradient, edge_order=1: central inside, one-sided at the ends. */
static double grad_at(const double *img, int n, size_t stride, int i) {
    if (n == 1) return 0;
    if (i == 0) return img[stride] - img[0];
    if (i == n - 1) return img[(size_t)(n - 1) * stride] - img[(size_t)(n - 2) * stride];
    return 0.5 * (img[(size_t)(i + 1) * stride] - img[(size_t)(i - 1) * stride]);
}

static void ilk_level(const double *ref, const double *mov, int h, int w, int radius, int num_warp,
                      double *flow) {
    size_t n = (size_t)h * w;
    double *buf = vdn_xmalloc(8 * n * sizeof *buf);
    double *warped = buf, *g0 = buf + n, *g1 = buf + 2 * n, *a00 = buf + 3 * n, *a01 = buf + 4 * n,
           *a11 = buf + 5 * n, *b0 = buf + 6 * n, *b1 = buf + 7 * n;
    int size = 2 * radius + 1;
    double *k = vdn_xmalloc((size_t)size * sizeof *k);
    for (int i = 0; i < size; i++)
        k[i] = 1.0 / size;
    double *u = flow, *v = flow + n;
    for (int it = 0; it < num_warp; it++) {
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                size_t i = (size_t)y * w + x;
                warped[i] = sample(mov, h, w, y + u[i], x + v[i]);
            }
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                size_t i = (size_t)y * w + x;
                g0[i] = grad_at(warped + x, h, (size_t)w, y);
                g1[i] = grad_at(warped + (size_t)y * w, w, 1, x);
                double err = g0[i] * u[i] + g1[i] * v[i] + ref[i] - warped[i];
                a00[i] = g0[i] * g0[i];
                a01[i] = g0[i] * g1[i];
                a11[i] = g1[i] * g1[i];
                b0[i] = g0[i] * err;
                b1[i] = g1[i] * err;
            }
        double *prods[5] = {a00, a01, a11, b0, b1};
        for (int p = 0; p < 5; p++)
            vdn_filter_sep(prods[p], h, w, k, radius, VDN_BORDER_MIRROR, prods[p]);
        for (size_t i = 0; i < n; i++) {
            double det = a00[i] * a11[i] - a01[i] * a01[i];
            if (fabs(det) < 1e-14) { /* badly conditioned: no motion there, like skimage */
                u[i] = v[i] = 0;
                continue;
            }
            u[i] = (a11[i] * b0[i] - a01[i] * b1[i]) / det;
            v[i] = (a00[i] * b1[i] - a01[i] * b0[i]) / det;
        }
    }
    free(k);
    free(buf);
}

/* Gaussian blur (sigma 2/3, ndimage 'mirror' border) then bilinear resize to ceil(n/2), the
 * sample positions of skimage's resize ((o + 0.5) * scale - 0.5). */
static double *reduce(const double *img, int h, int w, int *oh, int *ow) {
    double k[32];
    int r = vdn_gaussian_kernel(2.0 / 3.0, 4.0, k, 32);
    size_t n = (size_t)h * w;
    double *sm = vdn_xmalloc(n * sizeof *sm);
    vdn_filter_sep(img, h, w, k, r, VDN_BORDER_MIRROR, sm);
    *oh = (h + 1) / 2;
    *ow = (w + 1) / 2;
    double sy = (double)h / *oh, sx = (double)w / *ow;
    double *out = vdn_xmalloc((size_t)*oh * *ow * sizeof *out);
    for (int y = 0; y < *oh; y++)
        for (int x = 0; x < *ow; x++)
            out[(size_t)y * *ow + x] = sample(sm, h, w, (y + 0.5) * sy - 0.5, (x + 0.5) * sx - 0.5);
    free(sm);
    return out;
}

void vdn_flow_ilk(const double *ref, const double *moving, int h, int w, int radius, int num_warp,
                  double *flow) {
    enum { MAX_LEVELS = 10 };
    const double *r_lv[MAX_LEVELS], *m_lv[MAX_LEVELS];
    int hs[MAX_LEVELS], ws[MAX_LEVELS], levels = 1;
    r_lv[0] = ref;
    m_lv[0] = moving;
    hs[0] = h;
    ws[0] = w;
    while (levels < MAX_LEVELS &&
           (hs[levels - 1] < ws[levels - 1] ? hs[levels - 1] : ws[levels - 1]) > 32) {
        int l = levels;
        r_lv[l] = reduce(r_lv[l - 1], hs[l - 1], ws[l - 1], &hs[l], &ws[l]);
        m_lv[l] = reduce(m_lv[l - 1], hs[l - 1], ws[l - 1], &hs[l], &ws[l]);
        levels++;
    }
    int top = levels - 1;
    double *cur = vdn_xcalloc(2 * (size_t)hs[top] * ws[top], sizeof *cur);
    ilk_level(r_lv[top], m_lv[top], hs[top], ws[top], radius, num_warp, cur);
    for (int l = top - 1; l >= 0; l--) {
        /* nearest-neighbour upsampling of the flow (ndimage.zoom order 0, corner-aligned),
         * scaled by the size ratio */
        int ph = hs[l + 1], pw = ws[l + 1], nh = hs[l], nw = ws[l];
        size_t pn = (size_t)ph * pw, nn = (size_t)nh * nw;
        double *up = vdn_xmalloc(2 * nn * sizeof *up);
        double fy = (double)nh / ph, fx = (double)nw / pw;
        for (int y = 0; y < nh; y++)
            for (int x = 0; x < nw; x++) {
                int sy = nh > 1 ? (int)floor(y * (double)(ph - 1) / (nh - 1) + 0.5) : 0;
                int sx = nw > 1 ? (int)floor(x * (double)(pw - 1) / (nw - 1) + 0.5) : 0;
                up[(size_t)y * nw + x] = fy * cur[(size_t)sy * pw + sx];
                up[nn + (size_t)y * nw + x] = fx * cur[pn + (size_t)sy * pw + sx];
            }
        free(cur);
        cur = up;
        ilk_level(r_lv[l], m_lv[l], nh, nw, radius, num_warp, cur);
    }
    memcpy(flow, cur, 2 * (size_t)h * w * sizeof *flow);
    free(cur);
    for (int l = 1; l < levels; l++) {
        free((void *)r_lv[l]);
        free((void *)m_lv[l]);
    }
}
