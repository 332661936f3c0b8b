/* The convolution ops on the CPU (op_conv.h): the oracle, float64 sums and one rounding at each
 * output, written for clarity; output rows (batch x channels) run in parallel
 * (vdn_parallel_for), each summing in the same order, so the result depends neither on the thread
 * count nor on the batch a signal comes in. */
#include <math.h>
#include <stdlib.h>

#include "op_conv.h"
#include "op_cpu.h"
#include "ops.h" /* vdn_parallel_for */

/* x as a float64 array [rows, cols] (one conversion instead of one per product) */
static double *to_f64(const vdn_tensor *x) {
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    double *d = vdn_xmalloc(sizeof(double) * (size_t)(rows * cols > 0 ? rows * cols : 1));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            d[r * cols + c] = cpu_at(x, r, c);
    return d;
}

typedef struct {
    vdn_tensor *y;
    const vdn_tensor *w, *b;
    const double *x;
    int64_t cin, cout, lin, lout;
    int K, stride, pad, dilation, transpose, accumulate;
} conv_job;

/* output row (signal b, channel o); the sum runs over (i, k) in order, so threading never changes
 * a bit */
static void conv_channel(void *ctx, int row) {
    const conv_job *j = ctx;
    const int64_t o = row % j->cout, b = row / j->cout;
    double *acc = vdn_xmalloc(sizeof(double) * (size_t)j->lout);
    for (int64_t n = 0; n < j->lout; n++)
        acc[n] = j->b ? cpu_at(j->b, 0, o) : 0.0;
    for (int64_t i = 0; i < j->cin; i++) {
        const double *xi = j->x + (b * j->cin + i) * j->lin;
        for (int k = 0; k < j->K; k++) {
            if (!j->transpose) { /* n with 0 <= n stride + k dilation - pad < lin */
                const double wv = cpu_at(j->w, o, i * j->K + k);
                const int64_t off = (int64_t)k * j->dilation - j->pad;
                for (int64_t n = 0; n < j->lout; n++) {
                    const int64_t s = n * j->stride + off;
                    if (s >= 0 && s < j->lin) acc[n] += wv * xi[s];
                }
            } else { /* n = m stride + k - pad */
                const double wv = cpu_at(j->w, i, (int64_t)o * j->K + k);
                for (int64_t m = 0; m < j->lin; m++) {
                    const int64_t n = m * j->stride + k - j->pad;
                    if (n >= 0 && n < j->lout) acc[n] += wv * xi[m];
                }
            }
        }
    }
    for (int64_t n = 0; n < j->lout; n++) {
        if (j->accumulate) { /* the sum in float32, then one float32 add (op_conv.h) */
            const float v = (float)acc[n], old = (float)cpu_at(j->y, row, n);
            cpu_put(j->y, row, n, (double)(float)(old + v));
        } else {
            cpu_put(j->y, row, n, acc[n]);
        }
    }
    free(acc);
}

static int run_conv(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                    int K, int stride, int pad, int dilation, int transpose, int accumulate) {
    /* one signal's channels: the weight's (the front end checked x holds whole signals) */
    const int64_t cin = transpose ? vdn_tensor_rows(w) : vdn_tensor_cols(w) / K;
    const int64_t cout = transpose ? vdn_tensor_cols(w) / K : vdn_tensor_rows(w);
    conv_job j = {.y = y,
                  .w = w,
                  .b = b,
                  .x = to_f64(x),
                  .cin = cin,
                  .cout = cout,
                  .lin = vdn_tensor_cols(x),
                  .lout = vdn_tensor_cols(y),
                  .K = K,
                  .stride = stride,
                  .pad = pad,
                  .dilation = dilation,
                  .transpose = transpose,
                  .accumulate = accumulate};
    vdn_parallel_for((int)vdn_tensor_rows(y), conv_channel, &j);
    free((void *)j.x);
    return 0;
}

static int cpu_conv1d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                      int K, int stride, int pad, int dilation, int accumulate) {
    return run_conv(y, x, w, b, K, stride, pad, dilation, 0, accumulate);
}

static int cpu_conv_transpose1d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w,
                                const vdn_tensor *b, int K, int stride, int pad) {
    return run_conv(y, x, w, b, K, stride, pad, 1, 1, 0);
}

static int64_t clampi(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

typedef struct {
    vdn_tensor *y;
    const vdn_tensor *x, *alpha, *beta;
    double fu[VDN_SNAKE_AA_MAX_TAPS], fd[VDN_SNAKE_AA_MAX_TAPS];
    int64_t C, L;
    int K, ratio;
} snake_job;

/* one row (channel row mod C of its signal), through the intermediate arrays of the definition */
static void snake_row(void *ctx, int c) {
    const snake_job *j = ctx;
    const int64_t L = j->L;
    const int K = j->K, ratio = j->ratio;
    const int pad = K / ratio - 1;
    const int crop_left = pad * ratio + (K - ratio) / 2;
    /* the down filter's replicate pad: K/2 - (K even) on the left (the right pad, K/2, only
     * completes the last window and is covered by the clamp) */
    const int dpad_left = K / 2 - (K % 2 == 0);
    const int64_t lp = L + 2 * pad;           /* replicate-padded input */
    const int64_t lup = (lp - 1) * ratio + K; /* transposed convolution output */
    const int64_t lact = L * ratio;           /* after the crop */
    double *up = vdn_xmalloc(sizeof(double) * (size_t)lup);
    double *act = vdn_xmalloc(sizeof(double) * (size_t)lact);
    const double a = exp(cpu_at(j->alpha, 0, c % j->C)),
                 inv_b = 1.0 / (exp(cpu_at(j->beta, 0, c % j->C)) + 1e-9);
    for (int64_t n = 0; n < lup; n++)
        up[n] = 0.0;
    for (int64_t m = 0; m < lp; m++) {
        const double v = cpu_at(j->x, c, clampi(m - pad, 0, L - 1));
        for (int k = 0; k < K; k++)
            up[m * ratio + k] += v * j->fu[k];
    }
    for (int64_t n = 0; n < lact; n++) {
        const double u = ratio * up[n + crop_left];
        const double s = sin(a * u);
        act[n] = u + inv_b * s * s;
    }
    for (int64_t n = 0; n < L; n++) {
        double acc = 0.0;
        for (int k = 0; k < K; k++)
            acc += j->fd[k] * act[clampi(n * ratio + k - dpad_left, 0, lact - 1)];
        cpu_put(j->y, c, n, acc);
    }
    free(up);
    free(act);
}

static int cpu_snake_aa(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *alpha,
                        const vdn_tensor *beta, const vdn_tensor *up_filter,
                        const vdn_tensor *down_filter, int ratio) {
    snake_job j = {.y = y,
                   .x = x,
                   .alpha = alpha,
                   .beta = beta,
                   .C = vdn_tensor_numel(alpha),
                   .L = vdn_tensor_cols(x),
                   .K = (int)vdn_tensor_numel(up_filter),
                   .ratio = ratio};
    for (int k = 0; k < j.K; k++) { /* K <= VDN_SNAKE_AA_MAX_TAPS: the front end checked */
        j.fu[k] = cpu_at(up_filter, 0, k);
        j.fd[k] = cpu_at(down_filter, 0, k);
    }
    vdn_parallel_for((int)vdn_tensor_rows(x), snake_row, &j);
    return 0;
}

typedef struct {
    vdn_tensor *y;
    const vdn_tensor *w, *b;
    const double *x;
    int64_t cin, cout;
    int H, W, Ho, Wo, K, stride, top, left, reflect, accumulate;
} conv2d_job;

/* source row/column s of a side of n for a padded position, or -1 for a zero pad */
static int64_t src_index(int64_t s, int64_t n, int reflect) {
    if (s >= 0 && s < n) return s;
    if (!reflect) return -1;
    return s < 0 ? -s : 2 * (n - 1) - s; /* the front end keeps pads below n: one reflection */
}

/* output row (image b, channel o): the sum over (i, kh, kw) in that order at every pixel */
static void conv2d_channel(void *ctx, int row) {
    const conv2d_job *j = ctx;
    const int64_t o = row % j->cout, b = row / j->cout, npix = (int64_t)j->Ho * j->Wo;
    double *acc = vdn_xmalloc(sizeof(double) * (size_t)npix);
    int64_t *cols = vdn_xmalloc(sizeof(int64_t) * (size_t)j->Wo);
    for (int64_t n = 0; n < npix; n++)
        acc[n] = j->b ? cpu_at(j->b, 0, o) : 0.0;
    for (int64_t i = 0; i < j->cin; i++) {
        const double *xi = j->x + (b * j->cin + i) * (int64_t)j->H * j->W;
        for (int kh = 0; kh < j->K; kh++)
            for (int kw = 0; kw < j->K; kw++) {
                const double wv = cpu_at(j->w, o, (i * j->K + kh) * j->K + kw);
                for (int ow = 0; ow < j->Wo; ow++)
                    cols[ow] = src_index((int64_t)ow * j->stride + kw - j->left, j->W, j->reflect);
                for (int oh = 0; oh < j->Ho; oh++) {
                    const int64_t r =
                        src_index((int64_t)oh * j->stride + kh - j->top, j->H, j->reflect);
                    if (r < 0) continue;
                    double *a = acc + (int64_t)oh * j->Wo;
                    for (int ow = 0; ow < j->Wo; ow++)
                        if (cols[ow] >= 0) a[ow] += wv * xi[r * j->W + cols[ow]];
                }
            }
    }
    for (int64_t n = 0; n < npix; n++) {
        if (j->accumulate) { /* the sum in float32, then one float32 add (op_conv.h) */
            const float v = (float)acc[n], old = (float)cpu_at(j->y, row, n);
            cpu_put(j->y, row, n, (double)(float)(old + v));
        } else {
            cpu_put(j->y, row, n, acc[n]);
        }
    }
    free(cols);
    free(acc);
}

static int cpu_conv2d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                      int H, int W, int K, int stride, const int pad[4], int reflect,
                      int accumulate) {
    conv2d_job j = {.y = y,
                    .w = w,
                    .b = b,
                    .x = to_f64(x),
                    .cin = vdn_tensor_cols(w) / ((int64_t)K * K),
                    .cout = vdn_tensor_rows(w),
                    .H = H,
                    .W = W,
                    .Ho = (H + pad[0] + pad[1] - K) / stride + 1,
                    .Wo = (W + pad[2] + pad[3] - K) / stride + 1,
                    .K = K,
                    .stride = stride,
                    .top = pad[0],
                    .left = pad[2],
                    .reflect = reflect,
                    .accumulate = accumulate};
    vdn_parallel_for((int)vdn_tensor_rows(y), conv2d_channel, &j);
    free((void *)j.x);
    return 0;
}

typedef struct {
    vdn_tensor *y;
    const vdn_tensor *x, *w, *b;
    int64_t C, L, cpg;
    int groups;
    double eps;
    vdn_act act;
} gn_job;

/* one group of one image: float64 mean and (biased) variance in two passes, then the rows */
static void gn_group(void *ctx, int job) {
    const gn_job *j = ctx;
    const int64_t img = job / j->groups, c0 = (job % j->groups) * j->cpg, r0 = img * j->C + c0;
    double sum = 0.0, sq = 0.0;
    for (int64_t r = 0; r < j->cpg; r++)
        for (int64_t n = 0; n < j->L; n++)
            sum += cpu_at(j->x, r0 + r, n);
    const double count = (double)(j->cpg * j->L), mean = sum / count;
    for (int64_t r = 0; r < j->cpg; r++)
        for (int64_t n = 0; n < j->L; n++) {
            const double dv = cpu_at(j->x, r0 + r, n) - mean;
            sq += dv * dv;
        }
    const double inv = 1.0 / sqrt(sq / count + j->eps);
    for (int64_t r = 0; r < j->cpg; r++) {
        const double wc = cpu_at(j->w, 0, c0 + r), bc = cpu_at(j->b, 0, c0 + r);
        for (int64_t n = 0; n < j->L; n++) {
            const double v = (float)((cpu_at(j->x, r0 + r, n) - mean) * inv * wc + bc);
            cpu_put(j->y, r0 + r, n, j->act == VDN_ACT_SILU ? v / (1.0 + exp(-v)) : v);
        }
    }
}

static int cpu_group_norm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w,
                          const vdn_tensor *b, int groups, double eps, vdn_act act) {
    const int64_t C = vdn_tensor_numel(w);
    gn_job j = {.y = y,
                .x = x,
                .w = w,
                .b = b,
                .C = C,
                .L = vdn_tensor_cols(x),
                .cpg = C / groups,
                .groups = groups,
                .eps = eps,
                .act = act};
    vdn_parallel_for((int)(vdn_tensor_rows(x) / C * groups), gn_group, &j);
    return 0;
}

const struct vdn_conv_backend vdn_cpu_conv_backend = {
    .conv1d = cpu_conv1d,
    .conv_transpose1d = cpu_conv_transpose1d,
    .snake_aa = cpu_snake_aa,
    .conv2d = cpu_conv2d,
    .group_norm = cpu_group_norm,
};
