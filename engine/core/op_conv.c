/* Front end of the convolution ops (op_conv.h): shape and dtype checks, then the device's table. */
#include "op_conv.h"
#include "op_check.h"
#include "op_profile.h"

#define CONV_TABLE(d, op)                                                                          \
    const struct vdn_conv_backend *ct_ = (d)->be->conv;                                            \
    if (vdn_chk_family(d, op, ct_)) return -1

/* B = x's rows over the ch channels of one signal: -1 with a message unless a whole number >= 1 */
static int64_t batch_of(vdn_dev *d, const char *op, const vdn_tensor *x, int64_t ch) {
    const int64_t rows = vdn_tensor_rows(x);
    if (ch < 1 || rows < ch || rows % ch)
        return vdn_dev_fail(d,
                            "op %s: x has %lld rows, expected a batch of whole signals of %lld "
                            "channels each (rows = B x %lld, B >= 1)",
                            op, (long long)rows, (long long)ch, (long long)ch);
    return rows / ch;
}

static int chk(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t, int64_t rows,
               int64_t cols) {
    return vdn_chk_float(d, op, name, t) || vdn_chk_2d(d, op, name, t, rows, cols) ? -1 : 0;
}

int vdn_op_conv1d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                  int K, int stride, int pad, int dilation, int accumulate) {
    if (!y || !x || !w) return -1;
    vdn_dev *d = y->dev;
    const char *op = "conv1d";
    CONV_TABLE(d, op);
    if (K < 1 || stride < 1 || pad < 0 || dilation < 1)
        return vdn_dev_fail(d,
                            "op conv1d: kernel %d, stride %d, pad %d, dilation %d (expected "
                            "K, stride, dilation >= 1, pad >= 0)",
                            K, stride, pad, dilation);
    if (vdn_tensor_cols(w) % K)
        return vdn_dev_fail(d, "op conv1d: w has %lld columns, not a multiple of the kernel %d",
                            (long long)vdn_tensor_cols(w), K);
    const int64_t cin = vdn_tensor_cols(w) / K, lin = vdn_tensor_cols(x), cout = vdn_tensor_rows(w);
    const int64_t B = batch_of(d, op, x, cin);
    if (B < 0) return -1;
    const int64_t span = (int64_t)dilation * (K - 1) + 1;
    if (lin + 2 * pad < span)
        return vdn_dev_fail(d,
                            "op conv1d: %lld samples + 2 x %d padding are shorter than the "
                            "kernel's span %lld",
                            (long long)lin, pad, (long long)span);
    const int64_t lout = (lin + 2 * pad - span) / stride + 1;
    if (vdn_chk_float(d, op, "x", x) || chk(d, op, "w", w, cout, cin * K) ||
        (b && chk(d, op, "b", b, 1, cout)) || chk(d, op, "y", y, B * cout, lout))
        return -1;
    if (y->data == x->data) /* every output reads K inputs around it, and accumulate reads y */
        return vdn_dev_fail(d, "op conv1d: y and x overlap (the conv needs a separate output)");
    return VDN_PROF(d, "conv1d", x, w,
                    2.0 * (double)B * (double)cout * (double)lout * (double)cin * K,
                    ct_->conv1d(y, x, w, b, K, stride, pad, dilation, accumulate != 0));
}

int vdn_op_conv_transpose1d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w,
                            const vdn_tensor *b, int K, int stride, int pad) {
    if (!y || !x || !w) return -1;
    vdn_dev *d = y->dev;
    const char *op = "conv_transpose1d";
    CONV_TABLE(d, op);
    if (K < 1 || stride < 1 || pad < 0)
        return vdn_dev_fail(d,
                            "op conv_transpose1d: kernel %d, stride %d, pad %d (expected K, "
                            "stride >= 1, pad >= 0)",
                            K, stride, pad);
    const int64_t cin = vdn_tensor_rows(w), lin = vdn_tensor_cols(x);
    const int64_t B = batch_of(d, op, x, cin);
    if (B < 0) return -1;
    const int64_t lout = (lin - 1) * stride - 2 * (int64_t)pad + K;
    if (lout < 1)
        return vdn_dev_fail(d,
                            "op conv_transpose1d: %lld samples give no output with kernel %d, "
                            "stride %d, pad %d",
                            (long long)lin, K, stride, pad);
    if (vdn_tensor_cols(w) % K)
        return vdn_dev_fail(d,
                            "op conv_transpose1d: w has %lld columns, not a multiple of the "
                            "kernel %d",
                            (long long)vdn_tensor_cols(w), K);
    const int64_t cout = vdn_tensor_cols(w) / K;
    if (vdn_chk_float(d, op, "x", x) || chk(d, op, "w", w, cin, cout * K) ||
        (b && chk(d, op, "b", b, 1, cout)) || chk(d, op, "y", y, B * cout, lout))
        return -1;
    return VDN_PROF(d, "conv_transpose1d", x, w,
                    2.0 * (double)B * (double)cin * (double)lin * (double)cout * K,
                    ct_->conv_transpose1d(y, x, w, b, K, stride, pad));
}

int vdn_op_snake_aa(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *alpha,
                    const vdn_tensor *beta, const vdn_tensor *up_filter,
                    const vdn_tensor *down_filter, int ratio) {
    if (!y || !x || !alpha || !beta || !up_filter || !down_filter) return -1;
    vdn_dev *d = y->dev;
    const char *op = "snake_aa";
    CONV_TABLE(d, op);
    const int64_t C = vdn_tensor_numel(alpha), rows = vdn_tensor_rows(x), L = vdn_tensor_cols(x);
    const int64_t K = vdn_tensor_numel(up_filter);
    if (ratio < 1 || K < ratio || K > VDN_SNAKE_AA_MAX_TAPS)
        return vdn_dev_fail(d,
                            "op snake_aa: ratio %d with a %lld-tap filter (expected %d >= taps "
                            ">= ratio >= 1)",
                            ratio, (long long)K, VDN_SNAKE_AA_MAX_TAPS);
    if (batch_of(d, op, x, C) < 0) return -1;
    if (vdn_chk_float(d, op, "x", x) || chk(d, op, "y", y, rows, L) ||
        chk(d, op, "alpha", alpha, 1, C) || chk(d, op, "beta", beta, 1, C) ||
        chk(d, op, "up_filter", up_filter, 1, K) || chk(d, op, "down_filter", down_filter, 1, K))
        return -1;
    return VDN_PROF(d, "snake_aa", x, NULL, 0,
                    ct_->snake_aa(y, x, alpha, beta, up_filter, down_filter, ratio));
}

int vdn_op_conv2d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                  int H, int W, int K, int stride, const int pad[4], int reflect, int accumulate) {
    if (!y || !x || !w || !pad) return -1;
    vdn_dev *d = y->dev;
    const char *op = "conv2d";
    CONV_TABLE(d, op);
    if (K < 1 || stride < 1 || H < 1 || W < 1 || pad[0] < 0 || pad[1] < 0 || pad[2] < 0 ||
        pad[3] < 0)
        return vdn_dev_fail(d,
                            "op conv2d: %dx%d image, kernel %d, stride %d, pads %d %d %d %d "
                            "(expected sizes, K, stride >= 1, pads >= 0)",
                            H, W, K, stride, pad[0], pad[1], pad[2], pad[3]);
    if (reflect && (pad[0] >= H || pad[1] >= H || pad[2] >= W || pad[3] >= W))
        return vdn_dev_fail(d,
                            "op conv2d: reflect pads %d %d %d %d of a %dx%d image (expected each "
                            "smaller than its side)",
                            pad[0], pad[1], pad[2], pad[3], H, W);
    const int64_t hp = (int64_t)H + pad[0] + pad[1], wp = (int64_t)W + pad[2] + pad[3];
    if (hp < K || wp < K)
        return vdn_dev_fail(d, "op conv2d: the padded %lldx%lld image is smaller than kernel %d",
                            (long long)hp, (long long)wp, K);
    if (vdn_tensor_cols(x) != (int64_t)H * W)
        return vdn_dev_fail(d, "op conv2d: x has %lld columns, expected H x W = %lld",
                            (long long)vdn_tensor_cols(x), (long long)H * W);
    if (vdn_tensor_cols(w) % ((int64_t)K * K))
        return vdn_dev_fail(d, "op conv2d: w has %lld columns, not a multiple of K x K = %d",
                            (long long)vdn_tensor_cols(w), K * K);
    const int64_t cin = vdn_tensor_cols(w) / ((int64_t)K * K), cout = vdn_tensor_rows(w);
    const int64_t B = batch_of(d, op, x, cin);
    if (B < 0) return -1;
    const int64_t ho = (hp - K) / stride + 1, wo = (wp - K) / stride + 1;
    if (vdn_chk_float(d, op, "x", x) || chk(d, op, "w", w, cout, cin * K * K) ||
        (b && chk(d, op, "b", b, 1, cout)) || chk(d, op, "y", y, B * cout, ho * wo))
        return -1;
    if (y->data == x->data)
        return vdn_dev_fail(d, "op conv2d: y and x overlap (the conv needs a separate output)");
    return VDN_PROF(d, "conv2d", x, w,
                    2.0 * (double)B * (double)cout * (double)(ho * wo) * (double)cin * K * K,
                    ct_->conv2d(y, x, w, b, H, W, K, stride, pad, reflect != 0, accumulate != 0));
}

int vdn_op_group_norm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                      int groups, double eps, vdn_act act) {
    if (!y || !x || !w || !b) return -1;
    vdn_dev *d = y->dev;
    const char *op = "group_norm";
    CONV_TABLE(d, op);
    const int64_t C = vdn_tensor_numel(w), L = vdn_tensor_cols(x);
    if (groups < 1 || C % groups)
        return vdn_dev_fail(d, "op group_norm: %d groups of %lld channels (expected a divisor)",
                            groups, (long long)C);
    if (act != VDN_ACT_NONE && act != VDN_ACT_SILU)
        return vdn_dev_fail(d, "op group_norm: activation %d (expected none or SiLU)", (int)act);
    if (!(eps >= 0)) return vdn_dev_fail(d, "op group_norm: eps %g (expected >= 0)", eps);
    if (batch_of(d, op, x, C) < 0) return -1;
    if (vdn_chk_float(d, op, "x", x) || chk(d, op, "y", y, vdn_tensor_rows(x), L) ||
        chk(d, op, "w", w, 1, C) || chk(d, op, "b", b, 1, C))
        return -1;
    return VDN_PROF(d, "group_norm", x, NULL, 0, ct_->group_norm(y, x, w, b, groups, eps, act));
}
