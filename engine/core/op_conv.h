/* The VAEs' convolutions as ops of the op layer: a model family with its own table (struct
 * vdn_conv_backend, pointed to by vdn_dev_backend.conv). The audio VAE's BigVGAN decoder is
 * written with the 1-D ones (vae/audio_vae.c), the video VAE's encoder with conv2d and
 * group_norm (vae/video_encoder.c); the CPU implementation is engine/op_cpu_conv.c (the
 * oracle: float64 sums, one rounding at the output); the front end engine/op_conv.c checks every
 * call, so every backend refuses the same calls with the same words.
 *
 * Layout. A batch of B signals per call, channels-major: x [B*C, L], rows b*C .. b*C + C - 1
 * holding signal b's channels (torch's [B, C, L] with the outer dims flattened). B is not passed:
 * it is x's rows over the weight's input channels (or over C for snake_aa), and each signal of
 * the batch is computed exactly as it would be alone, so one weight read serves all B (the audio
 * VAE decodes both stereo channels as one batch). Weights are torch's, flattened to 2-D: a Conv1d
 * weight [Cout, Cin, K] is [Cout, Cin*K]; a ConvTranspose1d weight [Cin, Cout, K] is
 * [Cin, Cout*K]. */
#ifndef VDN_OP_CONV_H
#define VDN_OP_CONV_H

#include "op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.nn.functional.conv1d (cross-correlation, zero padding `pad` on both sides):
 * v[o, n] = b[o] + sum_{i,k} w[o, i*K + k] x[i, n*stride + k*dilation - pad].
 * x [B*Cin, Lin], w [Cout, Cin*K], b [Cout] or NULL, y [B*Cout, Lout] with
 * Lout = (Lin + 2 pad - dilation (K - 1) - 1) / stride + 1.
 * accumulate == 0: y = v. accumulate != 0: y = y + v, a residual add folded into the conv: v
 * rounded to float32 first, then added to y's old value in float32 (one rounding), then stored
 * in y's dtype; y must not overlap x. */
int vdn_op_conv1d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                  int K, int stride, int pad, int dilation, int accumulate);

/* torch.nn.functional.conv_transpose1d: y[o, n] = b[o] + sum over (i, m, k) with
 * n = m*stride + k - pad of x[i, m] w[i, o*K + k]. x [B*Cin, Lin], w [Cin, Cout*K], b [Cout] or
 * NULL, y [B*Cout, Lout], Lout = (Lin - 1) stride - 2 pad + K. */
int vdn_op_conv_transpose1d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w,
                            const vdn_tensor *b, int K, int stride, int pad);

/* BigVGAN's anti-aliased SnakeBeta (alias-free-torch Activation1d around SnakeBeta), per channel:
 *   up   = ratio * conv_transpose1d(replicate_pad(x, K/ratio - 1), up_filter, stride ratio),
 *          cropped by (K/ratio - 1) ratio + (K - ratio)/2 on the left and
 *          (K/ratio - 1) ratio + (K - ratio + 1)/2 on the right (length ratio L);
 *   act  = up + sin(exp(alpha[c]) up)^2 / (exp(beta[c]) + 1e-9);
 *   y    = conv1d(replicate_pad(act, K/2 - (K even), K/2), down_filter, stride ratio) (length L).
 * x, y [B*C, L]; alpha, beta [C] (log scale, as stored; row r uses channel r mod C);
 * up_filter, down_filter [K], 1 <= ratio <= K <= VDN_SNAKE_AA_MAX_TAPS. */
#define VDN_SNAKE_AA_MAX_TAPS 64
int vdn_op_snake_aa(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *alpha,
                    const vdn_tensor *beta, const vdn_tensor *up_filter,
                    const vdn_tensor *down_filter, int ratio);

/* ---- the video VAE encoder's ops (a keyframe: one frame, so the causal 3-D CNN is 2-D) ----
 * Images channels-major as above: x [B*C, H*W], rows b*C .. b*C + C - 1 holding image b's
 * channels, each channel's H*W pixels row-major (torch's [B, C, H, W] flattened). */

/* torch.nn.functional.conv2d (cross-correlation) of the image padded by pad = {top, bottom,
 * left, right}: reflect != 0 mirrors about the edge without repeating it (F.pad mode "reflect";
 * every pad smaller than its side), else zeros. w [Cout, Cin*K*K] (torch's [Cout, Cin, K, K]),
 * b [Cout] or NULL, x [B*Cin, H*W], y [B*Cout, Ho*Wo] with Ho = (H + top + bottom - K) / stride
 * + 1 and Wo likewise. accumulate as conv1d's (y = y + v, v rounded to float32 first, then one
 * float32 add: the resnet's residual add). y must not overlap x. */
int vdn_op_conv2d(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                  int H, int W, int K, int stride, const int pad[4], int reflect, int accumulate);

/* torch.nn.GroupNorm (affine) per image, then act (VDN_ACT_NONE or VDN_ACT_SILU):
 * y[c, n] = act(float32((x[c, n] - mean_g) / sqrt(var_g + eps) * w[c] + b[c])), mean_g and the
 * biased var_g over the C/groups channels of group g and all their columns. x, y [B*C, L];
 * w, b [C]; groups divides C. y may be x (in place). */
int vdn_op_group_norm(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                      int groups, double eps, vdn_act act);

/* ---- the table a backend implements (calls already checked) ---- */
struct vdn_conv_backend {
    int (*conv1d)(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                  int K, int stride, int pad, int dilation, int accumulate);
    int (*conv_transpose1d)(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w,
                            const vdn_tensor *b, int K, int stride, int pad);
    int (*snake_aa)(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *alpha,
                    const vdn_tensor *beta, const vdn_tensor *up_filter,
                    const vdn_tensor *down_filter, int ratio);
    int (*conv2d)(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                  int H, int W, int K, int stride, const int pad[4], int reflect, int accumulate);
    int (*group_norm)(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                      int groups, double eps, vdn_act act);
};

#ifdef __cplusplus
}
#endif
#endif
