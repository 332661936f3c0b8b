/* Pillow-compatible separable resampling (resample.h). Every floating-point expression below is
 * evaluated in the order and precision Pillow evaluates it (the box in float, the weights in
 * double), because one weight rounded differently to fixed point moves an output pixel by one
 * level. */
#include "resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vdn_util.h"

/* 32 bits of sum = 8 bits of pixel + 22 bits of weight + 2 bits for lobes above 1 and below 0 */
#define PRECISION_BITS 22
#define MAX_SIDE (1 << 24)

static double filter_box(double x) {
    return x > -0.5 && x <= 0.5 ? 1.0 : 0.0;
}

static double filter_bilinear(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double filter_hamming(double x) {
    if (x < 0.0) x = -x;
    if (x == 0.0) return 1.0;
    if (x >= 1.0) return 0.0;
    x = x * M_PI;
    return sin(x) / x * (0.54f + 0.46f * cos(x)); /* float constants, as Pillow writes them */
}

static double filter_bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x = x * M_PI;
    return sin(x) / x;
}

static double filter_lanczos(double x) {
    return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0;
}

typedef struct {
    double (*fn)(double);
    double support;
    const char *name;
} filter_def;

static const filter_def FILTERS[] = {
    [VDN_RESAMPLE_BOX] = {filter_box, 0.5, "box"},
    [VDN_RESAMPLE_BILINEAR] = {filter_bilinear, 1.0, "bilinear"},
    [VDN_RESAMPLE_HAMMING] = {filter_hamming, 1.0, "hamming"},
    [VDN_RESAMPLE_BICUBIC] = {filter_bicubic, 2.0, "bicubic"},
    [VDN_RESAMPLE_LANCZOS] = {filter_lanczos, 3.0, "lanczos"},
};
#define N_FILTERS ((int)(sizeof FILTERS / sizeof FILTERS[0]))

int vdn_resample_filter_parse(const char *name) {
    for (int i = 0; i < N_FILTERS; i++)
        if (name && strcmp(name, FILTERS[i].name) == 0) return i;
    return -1;
}

/* One axis: for output pixel i, the first input pixel `first[i]`, the count `count[i]` and the
 * fixed-point weights `w[i * ksize ...]`. */
typedef struct {
    int ksize;
    int *first, *count;
    int32_t *w;
} axis_coeffs;

static void axis_free(axis_coeffs *a) {
    free(a->first);
    free(a->count);
    free(a->w);
}

/* Pillow's precompute_coeffs followed by normalize_coeffs_8bpc. */
static void axis_make(int in_size, float in0, float in1, int out_size, const filter_def *f,
                      axis_coeffs *a) {
    float span = in1 - in0; /* float, as Pillow subtracts its float box */
    double scale = (double)span / out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = f->support * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    double *k = vdn_xmalloc((size_t)ksize * sizeof *k);
    a->ksize = ksize;
    a->first = vdn_xmalloc((size_t)out_size * sizeof *a->first);
    a->count = vdn_xmalloc((size_t)out_size * sizeof *a->count);
    a->w = vdn_xcalloc((size_t)out_size * ksize, sizeof *a->w);
    double inv_filterscale = 1.0 / filterscale;
    for (int i = 0; i < out_size; i++) {
        double center = in0 + (i + 0.5) * scale;
        int lo = (int)(center - support + 0.5);
        if (lo < 0) lo = 0;
        int hi = (int)(center + support + 0.5);
        if (hi > in_size) hi = in_size;
        int n = hi - lo;
        double sum = 0.0;
        for (int x = 0; x < n; x++) {
            k[x] = f->fn((x + lo - center + 0.5) * inv_filterscale);
            sum += k[x];
        }
        if (sum != 0.0)
            for (int x = 0; x < n; x++)
                k[x] /= sum;
        int32_t *w = a->w + (size_t)i * ksize;
        for (int x = 0; x < n; x++)
            w[x] = k[x] < 0 ? (int32_t)(-0.5 + k[x] * (1 << PRECISION_BITS))
                            : (int32_t)(0.5 + k[x] * (1 << PRECISION_BITS));
        a->first[i] = lo;
        a->count[i] = n < 0 ? 0 : n;
    }
    free(k);
}

static inline uint8_t clip8(int32_t s) {
    int32_t v = s >> PRECISION_BITS; /* arithmetic shift, as Pillow's table index */
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* out[x] for x in the window of one row: the horizontal sums of one input row (three channels
 * summed in one loop, as Pillow does, for speed; the sums are the same integers either way) */
static void pass_h(const uint8_t *in, const axis_coeffs *a, int x0, int nx, int ch, uint8_t *out) {
    for (int x = 0; x < nx; x++) {
        const int32_t *w = a->w + (size_t)(x0 + x) * a->ksize;
        const uint8_t *p = in + (size_t)a->first[x0 + x] * ch;
        int n = a->count[x0 + x];
        if (ch == 3) {
            int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
            for (int j = 0; j < n; j++, p += 3) {
                s0 += p[0] * w[j];
                s1 += p[1] * w[j];
                s2 += p[2] * w[j];
            }
            out[3 * x] = clip8(s0), out[3 * x + 1] = clip8(s1), out[3 * x + 2] = clip8(s2);
            continue;
        }
        for (int c = 0; c < ch; c++) {
            int32_t s = 1 << (PRECISION_BITS - 1);
            for (int j = 0; j < n; j++)
                s += p[(size_t)j * ch + c] * w[j];
            out[(size_t)x * ch + c] = clip8(s);
        }
    }
}

/* One output row of the vertical pass: rows p, p + stride, ... weighted, summed row-wise into
 * acc (a loop the compiler vectorises), then clipped. */
static void pass_v(const uint8_t *p, size_t stride, const int32_t *w, int n, size_t len,
                   int32_t *acc, uint8_t *out) {
    for (size_t x = 0; x < len; x++)
        acc[x] = 1 << (PRECISION_BITS - 1);
    for (int j = 0; j < n; j++) {
        const uint8_t *r = p + (size_t)j * stride;
        int32_t wj = w[j];
        for (size_t x = 0; x < len; x++)
            acc[x] += r[x] * wj;
    }
    for (size_t x = 0; x < len; x++)
        out[x] = clip8(acc[x]);
}

static int check_args(int src_w, int src_h, int channels, int out_w, int out_h,
                      vdn_resample_filter filter, const vdn_resample_box *b, int win_x, int win_y,
                      int win_w, int win_h, char *err, size_t errlen) {
    if (src_w < 1 || src_h < 1 || src_w > MAX_SIDE || src_h > MAX_SIDE)
        return vdn_fail(err, errlen, "resample: input size %dx%d out of range (1..%d a side)",
                        src_w, src_h, MAX_SIDE);
    if (out_w < 1 || out_h < 1 || out_w > MAX_SIDE || out_h > MAX_SIDE)
        return vdn_fail(err, errlen, "resample: output size %dx%d out of range (1..%d a side)",
                        out_w, out_h, MAX_SIDE);
    if (channels < 1 || channels > 4)
        return vdn_fail(err, errlen, "resample: %d channels (expected 1 to 4)", channels);
    if ((int)filter < 0 || (int)filter >= N_FILTERS)
        return vdn_fail(err, errlen, "resample: unknown filter %d", (int)filter);
    if (!(b->x0 >= 0 && b->y0 >= 0 && b->x1 <= src_w && b->y1 <= src_h && b->x1 > b->x0 &&
          b->y1 > b->y0))
        return vdn_fail(err, errlen,
                        "resample: box (%g, %g, %g, %g) is not a non-empty region of the %dx%d "
                        "input",
                        b->x0, b->y0, b->x1, b->y1, src_w, src_h);
    if (win_x < 0 || win_y < 0 || win_w < 1 || win_h < 1 || win_w > out_w - win_x ||
        win_h > out_h - win_y)
        return vdn_fail(err, errlen,
                        "resample: window %dx%d at (%d, %d) is not inside the %dx%d output", win_w,
                        win_h, win_x, win_y, out_w, out_h);
    return 0;
}

int vdn_resample_u8_window(const uint8_t *src, int src_w, int src_h, size_t src_stride,
                           int channels, int out_w, int out_h, vdn_resample_filter filter,
                           const vdn_resample_box *box, int win_x, int win_y, int win_w, int win_h,
                           uint8_t *dst, char *err, size_t errlen) {
    vdn_resample_box whole = {0, 0, (float)src_w, (float)src_h};
    const vdn_resample_box *b = box ? box : &whole;
    if (check_args(src_w, src_h, channels, out_w, out_h, filter, b, win_x, win_y, win_w, win_h, err,
                   errlen))
        return -1;
    if (!src_stride) src_stride = (size_t)src_w * channels;
    const filter_def *f = &FILTERS[filter];
    /* Pillow skips an axis whose size and box stay the same (then no rounding at all) */
    int need_h = out_w != src_w || b->x0 != 0 || b->x1 != out_w;
    int need_v = out_h != src_h || b->y0 != 0 || b->y1 != out_h;
    size_t row_out = (size_t)win_w * channels;

    axis_coeffs v = {0}, h = {0};
    if (need_v) axis_make(src_h, b->y0, b->y1, out_h, f, &v);
    if (need_h) axis_make(src_w, b->x0, b->x1, out_w, f, &h);
    /* the input rows the window's output rows read */
    int r0 = win_y, r1 = win_y + win_h;
    if (need_v) {
        r0 = src_h, r1 = 0;
        for (int y = win_y; y < win_y + win_h; y++) {
            if (v.count[y] == 0) continue;
            if (v.first[y] < r0) r0 = v.first[y];
            if (v.first[y] + v.count[y] > r1) r1 = v.first[y] + v.count[y];
        }
        if (r1 < r0) r0 = r1 = 0;
    }
    /* horizontal pass into rows r0..r1 of a temporary (or the input's own columns) */
    uint8_t *tmp = NULL;
    const uint8_t *rows;
    size_t rows_stride;
    if (need_h) {
        tmp = vdn_xmalloc((size_t)(r1 - r0 > 0 ? r1 - r0 : 1) * row_out);
        for (int y = r0; y < r1; y++)
            pass_h(src + (size_t)y * src_stride, &h, win_x, win_w, channels,
                   tmp + (size_t)(y - r0) * row_out);
        rows = tmp;
        rows_stride = row_out;
    } else {
        rows = src + (size_t)r0 * src_stride + (size_t)win_x * channels;
        rows_stride = src_stride;
    }
    /* vertical pass (or the rows as they are) */
    int32_t *acc = need_v ? vdn_xmalloc(row_out * sizeof *acc) : NULL;
    for (int y = 0; y < win_h; y++) {
        uint8_t *o = dst + (size_t)y * row_out;
        if (!need_v) {
            memcpy(o, rows + (size_t)y * rows_stride, row_out);
            continue;
        }
        int n = v.count[win_y + y];
        const uint8_t *p = n ? rows + (size_t)(v.first[win_y + y] - r0) * rows_stride : rows;
        pass_v(p, rows_stride, v.w + (size_t)(win_y + y) * v.ksize, n, row_out, acc, o);
    }
    free(acc);
    free(tmp);
    axis_free(&v);
    axis_free(&h);
    return 0;
}

/* axis_make's window of output pixel i, without the weights: first input pixel and count; the
 * result is the most pixels any window of the axis reads */
static int axis_window(int in_size, float in0, float in1, int out_size, const filter_def *f, int i,
                       int *first, int *count) {
    float span = in1 - in0;
    double scale = (double)span / out_size;
    double support = f->support * (scale < 1.0 ? 1.0 : scale);
    double center = in0 + (i + 0.5) * scale;
    int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
    if (lo < 0) lo = 0;
    if (hi > in_size) hi = in_size;
    *first = lo;
    *count = hi > lo ? hi - lo : 0;
    double k = ceil(support) * 2 + 1;
    return k < in_size ? (int)k : in_size;
}

double vdn_resample_work(int src_w, int src_h, int channels, int out_w, int out_h,
                         vdn_resample_filter filter, const vdn_resample_box *box, int win_x,
                         int win_y, int win_w, int win_h) {
    vdn_resample_box whole = {0, 0, (float)src_w, (float)src_h};
    const vdn_resample_box *b = box ? box : &whole;
    char err[8];
    if (check_args(src_w, src_h, channels, out_w, out_h, filter, b, win_x, win_y, win_w, win_h, err,
                   sizeof err))
        return -1;
    const filter_def *f = &FILTERS[filter];
    int need_h = out_w != src_w || b->x0 != 0 || b->x1 != out_w;
    int need_v = out_h != src_h || b->y0 != 0 || b->y1 != out_h;
    double rows = win_h, taps_v = 0, taps_h = 0;
    if (need_v) { /* windows move monotonically: the first and last rows bound the rows read */
        int f0, c0, f1, c1;
        taps_v = axis_window(src_h, b->y0, b->y1, out_h, f, win_y, &f0, &c0);
        axis_window(src_h, b->y0, b->y1, out_h, f, win_y + win_h - 1, &f1, &c1);
        rows = f1 + c1 - f0 > 0 ? f1 + c1 - f0 : 0;
    }
    if (need_h) {
        int f0, c0;
        taps_h = axis_window(src_w, b->x0, b->x1, out_w, f, win_x, &f0, &c0);
    }
    return (double)channels * win_w * (rows * taps_h + (double)win_h * taps_v);
}

int vdn_resample_u8(const uint8_t *src, int src_w, int src_h, size_t src_stride, int channels,
                    int out_w, int out_h, vdn_resample_filter filter, const vdn_resample_box *box,
                    uint8_t *dst, char *err, size_t errlen) {
    return vdn_resample_u8_window(src, src_w, src_h, src_stride, channels, out_w, out_h, filter,
                                  box, 0, 0, out_w, out_h, dst, err, errlen);
}
