/* CPU twins of the CUDA kernels: the same function, in plain C on float arrays, written so a
 * reader can check each kernel against it. Values that the GPU holds in bf16 are passed as floats
 * that are exactly bf16 values; where a kernel rounds an intermediate to bf16 before using it
 * again, the twin rounds it too (vdn_round_bf16), so kernel and twin compute the same function.
 *
 * Layout conventions shared with kernels.h:
 *   residual stream / activations: row-major [rows, width];
 *   q, k, v of one layer: [rows, heads * head_dim] with a row stride `ld` (they may sit inside a
 *   wider fused projection output);
 *   adaLN tables: row `idx[r]` of a table with row stride `tstride` floats;
 *   VDA per-frame tensors: frame-major [frames, heads, tokens, head_dim] ("FHSD"), per-frame
 *   matrices [frames, heads, d, d] row-major. */
#ifndef VDN_TWIN_H
#define VDN_TWIN_H

#include <stddef.h>
#include <stdint.h>

#include "attn_tiles.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[r,c] = rms(x[r,:]) * w[c] * (1 + scale[idx[r],c]) + shift[idx[r],c]; shift/scale may be NULL
 * (plain RMSNorm), w may be NULL (no weight). Output rounded to bf16. */
void twin_rmsnorm_modulate(const float *x, const float *w, const float *shift, const float *scale,
                           const int *idx, int tstride, int rows, int width, float eps, float *out);
/* x[r,c] = bf16(x[r,c] + gate[idx[r],c] * y[r,c]) */
void twin_gate_residual(float *x, const float *y, const float *gate, const int *idx, int tstride,
                        int rows, int width);
/* out[r,c] = bf16(value * silu(gate)), h[r] = [value (width) | gate (width)] (diffusers order) */
void twin_swiglu(const float *h, int rows, int width, float *out);
/* Per head: RMSNorm over head_dim (weight w, eps), then half-split RoPE on the first `rot`
 * channels: angles concat(t*f, h*f, w*f) for f = inv_freq[0..nfreq), rot = 6 * nfreq.
 * in: [rows, heads*hd] stride ld_in; out: stride ld_out; bf16-rounded. */
void twin_qknorm_rope(const float *in, int ld_in, const double *pos, const float *inv_freq,
                      int nfreq, const float *w, int rows, int heads, int hd, float eps, float *out,
                      int ld_out);

/* Exact softmax attention over the keys that rule `ar` keeps, fp32; o = softmax(q k^T * scale) v
 * times gate[r*heads + h] when gate != NULL; out [rows, heads*hd] (stride ld_o), bf16-rounded. */
void twin_attention(const float *q, const float *k, const float *v, int ld_qkv, int rows, int heads,
                    int hd, const vdn_attn_rows *ar, float scale, const float *gate, float *out,
                    int ld_o);

/* ---- VDA (VDN linear branch), spec 5.3 ---- */
typedef struct {
    int frames;    /* F': interior frames the branch runs on */
    int gh, gw;    /* patch grid of one frame; tokens S = gh * gw */
    int heads, hd; /* 56, 128 */
} vdn_vda_shape;

/* kraw, vraw, qraw: [frames*S, heads*hd] (stride ld) video rows of the branch's frames.
 * wsp: [heads*hd, 25] spatial 5x5 taps, wtm: [heads*hd, 5] temporal taps, beta: [frames*S, heads].
 * kt = L2(SiLU(TConv(SConv(k)))), kb = beta * kt, vt = SiLU(TConv(SConv(v))), qt = L2(SiLU(q)),
 * all FHSD, bf16-rounded. The spatial conv's output is rounded to bf16 before the temporal one
 * (they are two modules in the reference). wsp/wtm NULL: no conv (text state). */
void twin_vda_prep(const vdn_vda_shape *sh, const float *kraw, const float *vraw, const float *qraw,
                   int ld, const float *wsp_k, const float *wtm_k, const float *wsp_v,
                   const float *wtm_v, const float *beta, float *kt, float *kb, float *vt,
                   float *qt);
/* A[f,h] = sym(sum_s kb_s kt_s^T), B[f,h] = sum_s vt_s kb_s^T (d_v x d_k), fp32. */
void twin_vda_stats(const vdn_vda_shape *sh, const float *kt, const float *kb, const float *vt,
                    float *A, float *B);
/* M = (I + A)^-1 (Cholesky), T = Diag(alpha) M, J = B M. alpha [frames, heads, hd] or NULL
 * (= 1). T may be NULL. */
void twin_vda_solve(int nmat, int hd, const float *A, const float *B, const float *alpha, float *T,
                    float *J);
/* Forward P_t = P_{t-1} T_t + J_t from P_{-1} = S0, reverse R_t = R_{t+1} T_t + J_t from
 * R_{F'} = S0. S0: [heads, hd, hd] (NULL = zeros). P, R: [frames, heads, hd, hd]. */
void twin_vda_scans(const vdn_vda_shape *sh, const float *T, const float *J, const float *S0,
                    float *P, float *R);
/* Boundary gather with the alpha bridge for every frame t: window [lo, hi] = the rebased window
 * (lo = win_lo[t], hi = win_hi[t], unclamped); S_lin(t) = left + right as spec 5.3. */
void twin_vda_gather(const vdn_vda_shape *sh, const float *P, const float *R, const float *S0,
                     const float *alpha, const int *win_lo, const int *win_hi, float *Slin);
/* r = S_lin(f)[h] qt, RMSNorm over hd (eps) * wn, * sigmoid(gpre[row, h*hd+d]); out row-major
 * [frames*S, heads*hd] bf16-rounded. Slin is rounded to bf16 first (the kernel's readout GEMM
 * takes bf16 operands). */
void twin_vda_readout(const vdn_vda_shape *sh, const float *Slin, const float *qt, const float *wn,
                      float eps, const float *gpre, int ld_g, float *out);
/* alpha[f, c] = exp(-exp(A_log[c / hd]) * softplus(Wup (Wdown m_f) + dt_bias)[c]), m_f = mean of
 * x over the S rows of frame f (x: [frames*S, hidden]). Wdown [rank, hidden], Wup [heads*hd, rank].
 * All fp32 (spec 5.3 "Decay"). */
void twin_vda_alpha(const vdn_vda_shape *sh, const float *x, int hidden, const float *wdown,
                    int rank, const float *wup, const float *A_log, const float *dt_bias,
                    float *alpha);
/* Windows of the branch's frames (rebased when skip_ends), spec 5.3. */
void vdn_vda_windows(int frames_total, int skip_ends, int chunk, int radius, int *win_lo,
                     int *win_hi);

#ifdef __cplusplus
}
#endif
#endif
