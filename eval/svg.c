#include "svg.h"

#include <math.h>
#include <stdio.h>

static const char *palette[] = {"#4c72b0", "#dd8452", "#55a868", "#c44e52",
                                "#8172b3", "#937860", "#da8bc3", "#8c8c8c"};

/* A "nice" tick step near range/4 (1, 2 or 5 times a power of ten). */
static double tick_step(double range) {
    double raw = range / 4, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

static void axis_range(const double *v, int n, double *lo, double *hi) {
    double a = INFINITY, z = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) {
            if (v[i] < a) a = v[i];
            if (v[i] > z) z = v[i];
        }
    if (!isfinite(a)) a = 0, z = 1;
    if (z - a < 1e-12 * (fabs(a) + 1)) a -= 0.5 * (fabs(a) + 1e-3), z += 0.5 * (fabs(z) + 1e-3);
    double pad = 0.12 * (z - a);
    *lo = a - pad;
    *hi = z + pad;
    /* a truncated scale is clearer than one squashed against zero, but keep zero when near */
    if (*lo > 0 && *lo < 0.25 * (*hi - *lo)) *lo = 0;
}

void vdn_svg_bars(vdn_sb *b, const char *title, const char *unit, int n, char *const *names,
                  const double *mean, const double *lo, const double *hi, const int *sig,
                  int baseline) {
    const int W = 330, H = 240, L = 52, R = 10, T = 28, B = 66;
    double all[3 * 64];
    int k = 0;
    for (int i = 0; i < n && k + 3 <= 3 * 64; i++) {
        all[k++] = mean[i];
        all[k++] = lo ? lo[i] : NAN;
        all[k++] = hi ? hi[i] : NAN;
    }
    double y0, y1;
    axis_range(all, k, &y0, &y1);
    double ph = H - T - B, pw = W - L - R;
#define YPIX(v) (T + ph * (1 - ((v)-y0) / (y1 - y0)))
    vdn_sb_printf(b,
                  "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                  "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">",
                  W, H, W, H);
    vdn_sb_printf(b, "<text x=\"%d\" y=\"16\" font-size=\"12\" font-weight=\"bold\">", 8);
    vdn_sb_escape(b, title);
    if (unit && unit[0]) {
        vdn_sb_printf(b, " (");
        vdn_sb_escape(b, unit);
        vdn_sb_printf(b, ")");
    }
    vdn_sb_printf(b, "</text>");
    double step = tick_step(y1 - y0);
    for (double t = ceil(y0 / step) * step; t <= y1 + 1e-12; t += step) {
        double y = YPIX(t);
        vdn_sb_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>",
                      L, W - R, y, y);
        vdn_sb_printf(b,
                      "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%.4g</text>",
                      L - 4, y + 3, fabs(t) < 1e-12 * step ? 0.0 : t);
    }
    vdn_sb_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#333\"/>", L, L, T,
                  H - B);
    double slot = pw / (n > 0 ? n : 1), bw = slot * 0.6;
    double base = y0 > 0 ? y0 : (y1 < 0 ? y1 : 0);
    for (int i = 0; i < n; i++) {
        double cx = L + slot * (i + 0.5);
        const char *col = palette[i % 8];
        if (isfinite(mean[i])) {
            double ya = YPIX(mean[i]), yb = YPIX(base);
            double top = ya < yb ? ya : yb, hgt = fabs(yb - ya);
            vdn_sb_printf(
                b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>",
                cx - bw / 2, top, bw, hgt < 1 ? 1 : hgt, col);
            vdn_sb_escape(b, names[i]);
            vdn_sb_printf(b, ": %.6g</title></rect>", mean[i]);
            if (lo && hi && isfinite(lo[i]) && isfinite(hi[i])) {
                double l = YPIX(lo[i]), h = YPIX(hi[i]);
                vdn_sb_printf(
                    b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#222\"/>",
                    cx, cx, l, h);
                vdn_sb_printf(
                    b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#222\"/>",
                    cx - 4, cx + 4, l, l);
                vdn_sb_printf(
                    b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#222\"/>",
                    cx - 4, cx + 4, h, h);
            }
            if (sig && sig[i]) {
                double ytop = YPIX(hi && isfinite(hi[i]) ? hi[i] : mean[i]);
                vdn_sb_printf(
                    b,
                    "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" text-anchor=\"middle\">*</text>",
                    cx, ytop - 3 < T + 10 ? T + 10 : ytop - 3);
            }
        } else {
            vdn_sb_printf(b,
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\" "
                          "fill=\"#888\">n/a</text>",
                          cx, T + ph / 2);
        }
        vdn_sb_printf(b,
                      "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"end\" "
                      "transform=\"rotate(-30 %.1f %d)\">",
                      cx + 4, H - B + 14, cx + 4, H - B + 14);
        vdn_sb_escape(b, names[i]);
        vdn_sb_printf(b, "</text>");
    }
    if (baseline >= 0 && baseline < n && isfinite(mean[baseline])) {
        double y = YPIX(mean[baseline]);
        vdn_sb_printf(b,
                      "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#444\" "
                      "stroke-dasharray=\"4 3\"/>",
                      L, W - R, y, y);
    }
    vdn_sb_printf(b, "</svg>\n");
#undef YPIX
}

void vdn_svg_lines(vdn_sb *b, const char *title, int n, char *const *names, const double *const *ys,
                   const int *lens) {
    const int W = 420, H = 240, L = 56, R = 110, T = 28, B = 34;
    double y0 = INFINITY, y1 = -INFINITY;
    int xmax = 1;
    for (int i = 0; i < n; i++) {
        if (lens[i] > xmax) xmax = lens[i];
        for (int j = 0; ys[i] && j < lens[i]; j++)
            if (isfinite(ys[i][j])) {
                if (ys[i][j] < y0) y0 = ys[i][j];
                if (ys[i][j] > y1) y1 = ys[i][j];
            }
    }
    if (!isfinite(y0)) y0 = 0, y1 = 1;
    double v2[2] = {y0, y1};
    axis_range(v2, 2, &y0, &y1);
    double ph = H - T - B, pw = W - L - R;
    vdn_sb_printf(b,
                  "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                  "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">",
                  W, H, W, H);
    vdn_sb_printf(b, "<text x=\"%d\" y=\"16\" font-size=\"13\" font-weight=\"bold\">", L);
    vdn_sb_escape(b, title);
    vdn_sb_printf(b, "</text>");
    double step = tick_step(y1 - y0);
    for (double t = ceil(y0 / step) * step; t <= y1 + 1e-12; t += step) {
        double y = T + ph * (1 - (t - y0) / (y1 - y0));
        vdn_sb_printf(b,
                      "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/><text "
                      "x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%.4g</text>",
                      L, W - R, y, y, L - 4, y + 3, fabs(t) < 1e-12 * step ? 0.0 : t);
    }
    vdn_sb_printf(
        b, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">latent frame</text>",
        L + pw / 2, H - 6);
    for (int i = 0; i < n; i++) {
        if (!ys[i] || lens[i] < 1) continue;
        vdn_sb_printf(b, "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"%s\" points=\"",
                      palette[i % 8]);
        for (int j = 0; j < lens[i]; j++) {
            if (!isfinite(ys[i][j])) continue;
            double x = L + (xmax > 1 ? pw * j / (xmax - 1) : pw / 2);
            double y = T + ph * (1 - (ys[i][j] - y0) / (y1 - y0));
            vdn_sb_printf(b, "%.1f,%.1f ", x, y);
        }
        vdn_sb_printf(b, "\"/><text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"%s\">", W - R + 6,
                      T + 12 + 14 * i, palette[i % 8]);
        vdn_sb_escape(b, names[i]);
        vdn_sb_printf(b, "</text>");
    }
    vdn_sb_printf(b, "</svg>\n");
}
