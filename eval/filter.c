/* Border handling follows scipy.ndimage's documented modes exactly, so filters here agree
 * with the numpy/scipy references used in tests. */
#include "filter.h"

#include <math.h>
#include <string.h>

#include "vdn_util.h"

int vdn_border_index(int i, int n, vdn_border mode) {
    if (i >= 0 && i < n) return i;
    if (n == 1) return 0;
    switch (mode) {
    case VDN_BORDER_NEAREST:
        return i < 0 ? 0 : n - 1;
    case VDN_BORDER_REFLECT: {
        int p = 2 * n;
        i %= p;
        if (i < 0) i += p;
        return i < n ? i : p - 1 - i;
    }
    case VDN_BORDER_MIRROR:
    default: {
        int p = 2 * n - 2;
        i %= p;
        if (i < 0) i += p;
        return i < n ? i : p - i;
    }
    }
}

void vdn_filter_sep(const double *img, int h, int w, const double *k, int r, vdn_border mode,
                    double *out) {
    int m = h > w ? h : w;
    double *line = vdn_xmalloc((size_t)m * sizeof *line);
    double *tmp = vdn_xmalloc((size_t)h * (size_t)w * sizeof *tmp);
    /* ndimage filters the last axis... order does not matter mathematically; rows first. */
    for (int y = 0; y < h; y++) {
        const double *src = img + (size_t)y * w;
        for (int x = 0; x < w; x++) {
            double s = 0;
            for (int j = -r; j <= r; j++)
                s += k[j + r] * src[vdn_border_index(x + j, w, mode)];
            line[x] = s;
        }
        memcpy(tmp + (size_t)y * w, line, (size_t)w * sizeof *line);
    }
    for (int x = 0; x < w; x++) {
        for (int y = 0; y < h; y++) {
            double s = 0;
            for (int j = -r; j <= r; j++)
                s += k[j + r] * tmp[(size_t)vdn_border_index(y + j, h, mode) * w + x];
            line[y] = s;
        }
        for (int y = 0; y < h; y++)
            out[(size_t)y * w + x] = line[y];
    }
    free(tmp);
    free(line);
}

int vdn_gaussian_kernel(double sigma, double truncate, double *k, int kmax) {
    int r = (int)(truncate * sigma + 0.5);
    if (2 * r + 1 > kmax) r = (kmax - 1) / 2;
    double s = 0;
    for (int i = -r; i <= r; i++)
        s += k[i + r] = exp(-0.5 * i * i / (sigma * sigma));
    for (int i = 0; i < 2 * r + 1; i++)
        k[i] /= s;
    return r;
}
