/* Video Delta Attention: the VDN-H3 linear branch's math (spec 5.3, paper section 3 and appendix
 * A.4) in float64, used by the CPU op layer (op_cpu_vda.c); the branch itself is dit_vda.c. State
 * matrices are float64, row-major [d_v][d_k]: the readout is r = S q, a frame update is S <- S T_f
 * + J_f with T_f = Diag(alpha_f) M_f (row l of M scaled by alpha_l). The pieces are exported
 * separately so the tests can check each against an independent form. */
#ifndef VDN_VDA_H
#define VDN_VDA_H

/* A_h = sum_r beta_rh k_rh k_rh^T (symmetrised), B_h = sum_r beta_rh v_rh k_rh^T over n rows.
 * k, v: (n, H*d) rows; beta: (n, H). A, B: (H, d, d). */
void vdn_vda_stats(double *A, double *B, const float *k, const float *v, const float *beta, int n,
                   int H, int d);

/* M = (I + A)^{-1} for symmetric PSD A (d x d) by Cholesky: L = chol(I + A), M = L^-T L^-1.
 * Returns -1 when I + A is not positive definite (only possible with bad inputs). */
int vdn_chol_inverse(double *M, const double *A, int d);

/* Per frame/head transition and injection. solve: T = Diag(a)(I+A)^-1, J = B (I+A)^-1.
 * additive (SANA): T = Diag(a)(I - A/S), J = B/sqrt(S). alpha: (H, d) for this frame. */
int vdn_vda_transition(double *T, double *J, const double *A, const double *B, const double *alpha,
                       int d, int additive, int S);

/* Forward P_t = P_{t-1} T_t + J_t from P_{-1} = S0; reverse R_t = R_{t+1} T_t + J_t from
 * R_{F} = S0. T, J, P, R: (F, H, d, d); S0: (H, d, d). */
void vdn_vda_scans(double *P, double *R, const double *T, const double *J, const double *S0, int F,
                   int H, int d);

/* Boundary gather with the alpha bridge (spec 5.3) for query frame t (0..F-1) with rebased,
 * unclamped window [lo, hi]: S = P_{lo-1} (or S0) * prod_{max(lo,0)..t} alpha
 *                               + R_{hi+1} (or S0) * prod_{t..min(hi,F-1)} alpha (along d_k).
 * alpha: (F, H, d). out: (H, d, d). */
void vdn_vda_gather(double *out, const double *P, const double *R, const double *S0,
                    const double *alpha, int F, int H, int d, int t, int lo, int hi);

#endif
