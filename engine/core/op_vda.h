/* The VDN linear branch (Video Delta Attention, spec 5.3) as ops of the op layer: a model family
 * with its own table (struct vdn_vda_backend, pointed to by vdn_dev_backend.vda). Each op is one
 * fused CUDA kernel of kernels/kernels.h (named beside it) and one CPU function
 * (engine/op_cpu_vda.c); the front end (engine/op_vda.c) checks every call.
 *
 * Shapes. H heads of width hd (C = H hd), S tokens per frame, F frames (the branch's frames:
 * interior ones when the anchors are skipped), nmat = F H matrices. Per-frame, per-head tensors
 * are "FHSD": [F, H, S, hd] stored as 2-D [F H S, hd]; per-matrix tensors are [nmat hd, hd]
 * (row-major d x d blocks, matrix m at rows [m hd, (m+1) hd)).
 *
 * Dtypes. The backend says which dtypes it keeps the branch in (the table's two fields below);
 * the model allocates the intermediates with vdn_vda_feat_dtype / vdn_vda_state_dtype and never
 * assumes one. CPU: features and states F64 (the oracle); CUDA: features BF16, states F32.
 *   feature tensors: kb, vt, qt, Slin        state tensors: ks, A, B, T, J, P, R, S0, alpha, r
 * State orientation: the readout is r = S q, a frame update S <- S T + J, T = Diag(alpha) M (row
 * l of M scaled by alpha_l), so S is [d_v, d_k] and alpha runs along d_k. */
#ifndef VDN_OP_VDA_H
#define VDN_OP_VDA_H

#include "op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The depthwise short convolutions of k and v (NULL, NULL: no convolution, as for the text
 * state): spatial taps [C, ks*ks] over each frame's (gh, gw) grid, zero padded ks/2,
 * cross-correlation like torch conv2d; temporal taps [C, kt] over the F frames, zero padded. */
typedef struct {
    const vdn_tensor *k_sp, *k_tm, *v_sp, *v_tm;
} vdn_vda_conv;

/* Outputs of the feature pass, FHSD [F H S, hd] each: ks = sqrt(beta) k~ (state dtype, for
 * A = ks ks^T), kb = beta k~, vt = v~, qt = q~ (feature dtype; qt NULL: q skipped), where
 * k~ = L2(SiLU(conv(k))), v~ = SiLU(conv(v)), q~ = L2(SiLU(q)), L2 = x / max(||x||, 1e-6). */
typedef struct {
    vdn_tensor *ks, *kb, *vt, *qt;
} vdn_vda_feats;

/* ---- the ops ---- */

/* features (vdn_k_vda_prep; vdn_k_vda_act without convolution). k, v, q: [F S, C] (column views
 * of the fused projection; q may be NULL), rows t-major then (h, w) row-major; beta F32 [F S, H]
 * (sigmoid already applied); geometry F x gh x gw with S = gh gw. */
int vdn_op_vda_prep(const vdn_vda_feats *out, const vdn_tensor *k, const vdn_tensor *v,
                    const vdn_tensor *q, const vdn_vda_conv *conv, const vdn_tensor *beta,
                    int frames, int gh, int gw, int heads);

/* per matrix m: A = ks_m^T ks_m summed over its S rows (= sum_s beta k~ k~^T), B = sum_s vt kb^T
 * ([d_v, d_k]) (vdn_k_vda_stats). ks, kb, vt [nmat S, hd]; A, B [nmat hd, hd]. A may come out
 * unsymmetrised by rounding; solve symmetrises it. */
int vdn_op_vda_stats(vdn_tensor *A, vdn_tensor *B, const vdn_tensor *ks, const vdn_tensor *kb,
                     const vdn_tensor *vt, int nmat);

/* per matrix: M = (I + sym(A))^-1, T = Diag(alpha) M, J = B M; or, additive_S > 0, the SANA rule
 * T = Diag(alpha)(I - sym(A)/S), J = B / sqrt(S) (vdn_k_vda_solve). alpha: nmat hd contiguous
 * values, [nmat, hd] or [F, C] (state dtype), or NULL (= 1); T may be NULL (only J). Fails naming
 * the matrix when I + A is not positive definite (non-finite inputs). */
int vdn_op_vda_solve(vdn_tensor *T, vdn_tensor *J, const vdn_tensor *A, const vdn_tensor *B,
                     const vdn_tensor *alpha, int additive_S);

/* P_t = P_{t-1} T_t + J_t from P_{-1} = S0, R_t = R_{t+1} T_t + J_t from R_F = S0, per head
 * (vdn_k_vda_scans). T, J, P, R [F H hd, hd]; S0 [H hd, hd] or NULL (zeros); R NULL: forward
 * only. */
int vdn_op_vda_scans(vdn_tensor *P, vdn_tensor *R, const vdn_tensor *T, const vdn_tensor *J,
                     const vdn_tensor *S0, int frames);

/* the state each frame t reads, with the alpha bridge (vdn_k_vda_gather):
 *   Slin_t = P_{lo-1} (or S0) * prod_{u=max(lo,0)..t} alpha_u
 *          + R_{hi+1} (or S0) * prod_{u=t..min(hi,F-1)} alpha_u   (alpha along d_k, >= 1e-12)
 * win I32 [F, 2]: (lo, hi) of frame t's window, rebased to the branch's frames, unclamped.
 * P, R [F H hd, hd], S0 [H hd, hd] or NULL, alpha [F, C] (state). Slin [F H hd, hd]. */
int vdn_op_vda_gather(vdn_tensor *Slin, const vdn_tensor *P, const vdn_tensor *R,
                      const vdn_tensor *S0, const vdn_tensor *alpha, const vdn_tensor *win,
                      int frames);

/* r[m, s] = Slin_m qt[m, s] for every token (vdn_k_vda_readout). Slin [nmat hd, hd], qt, r
 * [nmat S, hd]. */
int vdn_op_vda_readout(vdn_tensor *r, const vdn_tensor *Slin, const vdn_tensor *qt, int nmat);

/* out[f S + s, h hd + i] = RMSNorm_hd(r[f, h, s])(eps) * wn[i] * sigmoid(gpre[f S + s, h hd + i])
 * (vdn_k_vda_epilogue). r FHSD [F H S, hd]; wn [hd]; gpre, out [F S, C] (views). */
int vdn_op_vda_epilogue(vdn_tensor *out, const vdn_tensor *r, const vdn_tensor *wn, double eps,
                        const vdn_tensor *gpre, int frames, int heads);

/* m[f] = mean of x's S rows of frame f (vdn_k_frame_means). x [F S, hidden], m F32 [F, hidden]. */
int vdn_op_frame_means(vdn_tensor *m, const vdn_tensor *x, int frames);

/* alpha[f, c] = exp(-exp(A_log[c / hd]) softplus(u[f, c] + dt_bias[c])) (vdn_k_alpha_finish).
 * u F32 [F, C] (the alpha projections' output, without bias), dt_bias [C], A_log [H], alpha
 * [F, C] (state). */
int vdn_op_alpha_finish(vdn_tensor *alpha, const vdn_tensor *u, const vdn_tensor *dt_bias,
                        const vdn_tensor *A_log);

/* The dtypes the device keeps the branch in (see the top); F32 when the backend has no branch. */
vdn_dtype vdn_vda_feat_dtype(const vdn_dev *d);
vdn_dtype vdn_vda_state_dtype(const vdn_dev *d);

/* ---- what a backend implements (checked calls only; see op_backend.h) ---- */

struct vdn_vda_backend {
    vdn_dtype feat_dtype, state_dtype;
    int (*prep)(const vdn_vda_feats *out, const vdn_tensor *k, const vdn_tensor *v,
                const vdn_tensor *q, const vdn_vda_conv *conv, const vdn_tensor *beta, int frames,
                int gh, int gw, int heads);
    int (*stats)(vdn_tensor *A, vdn_tensor *B, const vdn_tensor *ks, const vdn_tensor *kb,
                 const vdn_tensor *vt, int nmat);
    int (*solve)(vdn_tensor *T, vdn_tensor *J, const vdn_tensor *A, const vdn_tensor *B,
                 const vdn_tensor *alpha, int additive_S);
    int (*scans)(vdn_tensor *P, vdn_tensor *R, const vdn_tensor *T, const vdn_tensor *J,
                 const vdn_tensor *S0, int frames);
    int (*gather)(vdn_tensor *Slin, const vdn_tensor *P, const vdn_tensor *R, const vdn_tensor *S0,
                  const vdn_tensor *alpha, const vdn_tensor *win, int frames);
    int (*readout)(vdn_tensor *r, const vdn_tensor *Slin, const vdn_tensor *qt, int nmat);
    int (*epilogue)(vdn_tensor *out, const vdn_tensor *r, const vdn_tensor *wn, double eps,
                    const vdn_tensor *gpre, int frames, int heads);
    int (*frame_means)(vdn_tensor *m, const vdn_tensor *x, int frames);
    int (*alpha_finish)(vdn_tensor *alpha, const vdn_tensor *u, const vdn_tensor *dt_bias,
                        const vdn_tensor *A_log);
};

#ifdef __cplusplus
}
#endif
#endif
