/* Video Delta Attention: the VDN-H3 linear branch's math (spec 5.3, paper section 3 and appendix
 * A.4) in float64, used by the CPU op layer (op_cpu_vda.c); the branch itself is dit_vda.c. State
 * matrices are float64, row-major [d_v][d_k]: the readout is r = S q, a frame update is S <- S T_f
 * + J_f with T_f = Diag(alpha_f) M_f (row l of M scaled by alpha_l). (The statistics, scans and
 * gather in float64 live in engine/test/test_vda.c, their only user.) */
#ifndef VDN_VDA_H
#define VDN_VDA_H

/* M = (I + A)^{-1} for symmetric PSD A (d x d) by Cholesky: L = chol(I + A), M = L^-T L^-1.
 * Returns -1 when I + A is not positive definite (only possible with bad inputs). */
int vdn_chol_inverse(double *M, const double *A, int d);

/* Per frame/head transition and injection. solve: T = Diag(a)(I+A)^-1, J = B (I+A)^-1.
 * additive (SANA): T = Diag(a)(I - A/S), J = B/sqrt(S). alpha: (H, d) for this frame. */
int vdn_vda_transition(double *T, double *J, const double *A, const double *B, const double *alpha,
                       int d, int additive, int S);

#endif
