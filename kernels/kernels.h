/* Host launchers of the CUDA kernels, callable from C. Device pointers are plain `void *`
 * (bf16 = 16-bit words, fp32 = float); every launcher checks its launch and returns 0, or -1
 * after printing which kernel failed and why. The CPU twin of each family is in test/twin.h (the
 * kernel tests' references) and the
 * layouts are the same. Head dimension is 128 wherever a kernel says "hd". */
#ifndef VDN_KERNELS_H
#define VDN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *vdn_stream; /* = cudaStream_t */

/* ---- random fill (bench weights and test inputs made on the GPU) ---- */
int vdn_k_randn_bf16(void *dst, size_t n, uint64_t seed, float scale, vdn_stream st);
int vdn_k_randn_f32(float *dst, size_t n, uint64_t seed, float scale, float offset, vdn_stream st);
int vdn_k_rand_uniform_f32(float *dst, size_t n, uint64_t seed, float lo, float hi, vdn_stream st);

/* ---- GEMM through cuBLASLt: Y[rows, n_out] (stride ldy) = X[rows, k] W^T (+ bias) (+ Y if
 * accumulate), W row-major [n_out, k] as torch stores a Linear. bf16 in/out, fp32 accumulate. */
typedef struct vdn_gemm_ctx vdn_gemm_ctx;
vdn_gemm_ctx *vdn_gemm_create(size_t workspace_bytes);
void vdn_gemm_destroy(vdn_gemm_ctx *g);
int vdn_gemm_bf16(vdn_gemm_ctx *g, const void *X, int ldx, const void *W, int ldw, void *Y, int ldy,
                  int rows, int n_out, int k, const void *bias, int accumulate, vdn_stream st);
/* The same with a float32 Y (and a float32 bias): bf16 operands, fp32 accumulation, fp32 output,
 * so a product accumulates into an fp32 residual stream in one pass (ldy in floats). 0, -1 on a
 * failure (printed), 1 when cuBLASLt has no algorithm for the shape (the caller falls back). */
int vdn_gemm_bf16_f32(vdn_gemm_ctx *g, const void *X, int ldx, const void *W, int ldw, float *Y,
                      int ldy, int rows, int n_out, int k, const float *bias, int accumulate,
                      vdn_stream st);
/* The plain product of e4m3 X8 [rows, k] and W8 [n_out, k] into bf16 D: D = bf16(X8 W8^T)
 * (fp32 accumulation; the caller applies scales, bias and accumulation). Needs k and the lds
 * multiples of 16 and 16-byte aligned operands (the caller checks). 0, -1 on a failure
 * (printed), 1 when cuBLASLt has no algorithm for the shape (the caller falls back; remembered
 * per shape). */
int vdn_gemm_fp8(vdn_gemm_ctx *g, const void *X8, int ldx, const void *W8, int ldw, void *D,
                 int ldd, int rows, int n_out, int k, vdn_stream st);

/* ---- per-row kernels (test/twin_norm.c) ---- */
int vdn_k_rmsnorm_modulate(const void *x, const void *w, const void *shift, const void *scale,
                           const int *idx, int tstride, int rows, int width, float eps, void *out,
                           vdn_stream st);
int vdn_k_gate_residual(void *x, const void *y, const void *gate, const int *idx, int tstride,
                        int rows, int width, vdn_stream st);
int vdn_k_swiglu(const void *h, int rows, int width, void *out, vdn_stream st);
/* q and k of one layer in one launch: inputs at qin/kin (stride ld_in), outputs qout/kout
 * (stride ld_out); pos [rows, 3] float64 (NULL: norm only, no RoPE); inv_freq [48] fp32, one per
 * rotated pair (pairs 16a..16a+15 turn with position axis a; H3: the 16 frequencies thrice);
 * wq/wk [128] bf16. */
int vdn_k_qknorm_rope(const void *qin, const void *kin, int ld_in, const double *pos,
                      const float *inv_freq, const void *wq, const void *wk, int rows, int heads,
                      float eps, void *qout, void *kout, int ld_out, vdn_stream st);

/* ---- block-sparse flash attention (test/twin_attn.c), bf16, hd 128, fp32 accumulation.
 * lohi: device int [rows][2] per-row window; tiles: device ints from vdn_attn_tiles_make with
 * bm = VDN_ATTN_BM; gate: device fp32 [rows, heads] multiplied into the output, or NULL. */
#define VDN_ATTN_BM 128
int vdn_k_attention(const void *q, int ldq, const void *k, int ldk, const void *v, int ldv,
                    int rows, int heads, const int *lohi, int head_end, int tail_start,
                    const int *tiles, int n_tiles, float scale, const float *gate, void *out,
                    int ld_o, vdn_stream st);

/* The general form of the mma.sync kernel: `rows` query rows against `keys` key rows (tiles and
 * lohi per query row), head dim 64 or 128, query head h reading key/value head h / group (GQA),
 * gate [rows][ld_gate]. q, k, v 16-byte aligned. */
int vdn_k_attention_ex(const void *q, int ldq, const void *k, int ldk, const void *v, int ldv,
                       int rows, int keys, int heads, int group, int head_dim, const int *lohi,
                       int head_end, int tail_start, const int *tiles, int n_tiles, float scale,
                       const float *gate, int ld_gate, void *out, int ld_o, vdn_stream st);

/* The same attention on Hopper's wgmma (the engine's kernels; vdn_k_attention is the portable
 * fallback): head dim 128 through attn_pingpong.cu (TMA stage ring, FA3 ping-pong), head dim 64
 * through attn_pp64.cu (persistent, 192-row query tiles planned from lohi: `tiles` is not read
 * there, n_tiles is still checked); keys = the query rows, one key/value head per query head; v
 * is first transposed per head into vt_scratch, which must hold
 * vdn_attention_vt_elems(rows, heads, head_dim) bf16 values. */
size_t vdn_attention_vt_elems(int rows, int heads, int head_dim);
int vdn_k_attention_wgmma(const void *q, int ldq, const void *k, int ldk, const void *v, int ldv,
                          void *vt_scratch, int rows, int heads, int head_dim, const int *lohi,
                          int head_end, int tail_start, const int *tiles, int n_tiles, float scale,
                          const float *gate, void *out, int ld_o, vdn_stream st);
/* Head dim 64 runs a persistent kernel (attn_pp64.cu) on at most one CTA per SM; tests cap its
 * grid here (max_ctas > 0, process-wide; 0 = no cap) so that each CTA walks many work units. -1
 * on a negative count. */
int vdn_attention_hd64_grid_cap(int max_ctas);

/* ---- VDA (test/twin_vda.c), hd 128 ---- */
/* temporal 5-tap (wtm != NULL) + SiLU (+ L2 for k, q) + beta, to FHSD bf16 outputs. Any of the
 * three inputs may be NULL to skip it. beta fp32 [frames*S, heads]. kt (bf16 k~) and ks (fp32
 * sqrt(beta) k~, FHSD, for the stats' A in fp32) may each be NULL. */
int vdn_k_vda_act(const void *kin, int ldk, const void *vin, int ldv, const void *qin, int ldq,
                  const void *wtm_k, const void *wtm_v, const float *beta, int frames, int S,
                  int heads, void *kt, void *kb, void *vt, void *qt, float *ks, vdn_stream st);
/* the video frames' prep in one pass: spatial 5x5 + temporal 5-tap + SiLU (+ L2) of k and v,
 * SiLU + L2 of q, beta, FHSD layout (twin_vda_prep). k, v, q rows share the stride ld (a multiple
 * of 8; k, v 16-byte aligned). Required: k, v, all four tap sets, beta, kb, vt; optional (NULL =
 * skip): q with qt, kt, ks. */
int vdn_k_vda_prep(const void *kin, const void *vin, const void *qin, int ld, int frames, int gh,
                   int gw, int heads, const void *wsk, const void *wtk, const void *wsv,
                   const void *wtv, const float *beta, void *kt, void *kb, void *vt, void *qt,
                   float *ks, vdn_stream st);
/* A = ks ks^T (fp32 in, TF32 tensor cores), B = vt^T kb (bf16 in) per (frame, head) through
 * batched cuBLAS; fp32 outputs, A unsymmetrised (the solve symmetrises). */
int vdn_k_vda_stats(void *cublas, const float *ks, const void *kb, const void *vt, int nmat, int S,
                    float *A, float *B, vdn_stream st);
/* M = (I + A)^-1 (a sweep in registers; variants below), T = Diag(alpha) M (alpha NULL = 1, T NULL
 * = skip), J = B M. additive_S > 0 selects the SANA rule T = Diag(alpha)(I - A/S), J = B/sqrt(S).
 */
int vdn_k_vda_solve(const float *A, const float *B, const float *alpha, int nmat, float *T,
                    float *J, int additive_S, vdn_stream st); /* J NULL: no J (not additive) */
/* both scans; S0 [heads, 128, 128] or NULL (zero); P, R [frames, heads, 128, 128]. */
int vdn_k_vda_scans(const float *T, const float *J, const float *S0, int frames, int heads,
                    float *P, float *R, vdn_stream st); /* R NULL: forward only */
/* gather + alpha bridge; win: device int [frames][2] (lo, hi) rebased; Slin bf16. */
int vdn_k_vda_gather(const float *P, const float *R, const float *S0, const float *alpha,
                     const int *win, int frames, int heads, void *Slin, vdn_stream st);
/* r[f,h,s,:] = Slin(f,h) qt[f,h,s,:] (batched cuBLAS, fp32 out). */
int vdn_k_vda_readout(void *cublas, const void *Slin, const void *qt, int nmat, int S, float *r,
                      vdn_stream st);
/* out[row, h*128+i] = RMSNorm(r)(eps) * wn[i] * sigmoid(gpre[row, h*128+i]), bf16. */
int vdn_k_vda_epilogue(const float *r, const void *wn, float eps, const void *gpre, int ld_g,
                       int frames, int S, int heads, void *out, int ld_out, vdn_stream st);
/* frame means of x (bf16 [frames*S, hidden]) -> fp32 [frames, hidden] */
int vdn_k_frame_means(const void *x, int ld, int frames, int S, int hidden, float *m,
                      vdn_stream st);
/* alpha = exp(-exp(A_log[c/128]) softplus(u + dt_bias)), u fp32 [frames, C] -> alpha fp32 */
int vdn_k_alpha_finish(const float *u, const float *dt_bias, const float *A_log, int frames, int C,
                       float *alpha, vdn_stream st);
/* y fp32 [rows, n] = x fp32 [rows, k] W^T, W fp32 [n, k]: the small fp32 projections of alpha. */
int vdn_sgemm_f32(void *cublas, const float *x, const float *W, float *y, int rows, int n, int k,
                  vdn_stream st);
/* fp32 -> sigmoid(fp32) of a bf16 matrix's columns [c0, c0+n) (beta, softmax gate) */
int vdn_k_sigmoid_cols(const void *x, int ld, int c0, int n, int rows, const float *bias,
                       float *out, vdn_stream st);

/* x += y over n bf16 values, n % 8 == 0, 16-byte aligned (norm.cu) */
int vdn_k_add_bf16(void *x, const void *y, size_t n, vdn_stream st);

void *vdn_cublas_create(void);
void vdn_cublas_destroy(void *h);

#ifdef __cplusplus
}
#endif
#endif
