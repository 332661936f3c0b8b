/* Video Delta Attention, CPU reference; see vda.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "vda.h"
#include "vdn_util.h"

void vdn_vda_stats(double *A, double *B, const float *k, const float *v, const float *beta, int n,
                   int H, int d) {
    size_t dd = (size_t)d * d;
    memset(A, 0, sizeof(double) * H * dd);
    memset(B, 0, sizeof(double) * H * dd);
    for (int r = 0; r < n; r++)
        for (int h = 0; h < H; h++) {
            const float *kr = k + (size_t)r * H * d + (size_t)h * d;
            const float *vr = v + (size_t)r * H * d + (size_t)h * d;
            double b = beta[(size_t)r * H + h];
            double *Ah = A + h * dd, *Bh = B + h * dd;
            for (int i = 0; i < d; i++) {
                double bki = b * kr[i], bvi = b * vr[i];
                for (int j = 0; j < d; j++) {
                    Ah[(size_t)i * d + j] += bki * kr[j];
                    Bh[(size_t)i * d + j] += bvi * kr[j];
                }
            }
        }
    for (int h = 0; h < H; h++) { /* symmetrise as the release does: A <- (A + A^T)/2 */
        double *Ah = A + h * dd;
        for (int i = 0; i < d; i++)
            for (int j = i + 1; j < d; j++) {
                double m = 0.5 * (Ah[(size_t)i * d + j] + Ah[(size_t)j * d + i]);
                Ah[(size_t)i * d + j] = Ah[(size_t)j * d + i] = m;
            }
    }
}

int vdn_chol_inverse(double *M, const double *A, int d) {
    size_t dd = (size_t)d * d;
    double *L = vdn_xcalloc(dd, sizeof(double)), *Li = vdn_xcalloc(dd, sizeof(double));
    int rc = 0;
    for (int i = 0; i < d && rc == 0; i++) /* L L^T = I + A */
        for (int j = 0; j <= i; j++) {
            double s = A[(size_t)i * d + j] + (i == j ? 1.0 : 0.0);
            for (int k = 0; k < j; k++)
                s -= L[(size_t)i * d + k] * L[(size_t)j * d + k];
            if (i == j) {
                if (!(s > 0.0)) {
                    rc = -1;
                    break;
                }
                L[(size_t)i * d + i] = sqrt(s);
            } else {
                L[(size_t)i * d + j] = s / L[(size_t)j * d + j];
            }
        }
    if (rc == 0) {
        for (int c = 0; c < d; c++) /* Li = L^-1 by forward substitution, column by column */
            for (int i = c; i < d; i++) {
                double s = (i == c) ? 1.0 : 0.0;
                for (int k = c; k < i; k++)
                    s -= L[(size_t)i * d + k] * Li[(size_t)k * d + c];
                Li[(size_t)i * d + c] = s / L[(size_t)i * d + i];
            }
        for (int i = 0; i < d; i++) /* M = Li^T Li */
            for (int j = 0; j < d; j++) {
                double s = 0.0;
                for (int k = (i > j ? i : j); k < d; k++)
                    s += Li[(size_t)k * d + i] * Li[(size_t)k * d + j];
                M[(size_t)i * d + j] = s;
            }
    }
    free(L);
    free(Li);
    return rc;
}

int vdn_vda_transition(double *T, double *J, const double *A, const double *B, const double *alpha,
                       int d, int additive, int S) {
    size_t dd = (size_t)d * d;
    if (additive) {
        double inv_s = 1.0 / S, inv_sqrt = 1.0 / sqrt((double)S);
        for (int l = 0; l < d; l++)
            for (int j = 0; j < d; j++) {
                double x = (l == j ? 1.0 : 0.0) - inv_s * A[(size_t)l * d + j];
                T[(size_t)l * d + j] = alpha[l] * x;
                J[(size_t)l * d + j] = inv_sqrt * B[(size_t)l * d + j];
            }
        return 0;
    }
    double *M = vdn_xmalloc(sizeof(double) * dd);
    if (vdn_chol_inverse(M, A, d) != 0) {
        free(M);
        return -1;
    }
    for (int l = 0; l < d; l++)
        for (int j = 0; j < d; j++)
            T[(size_t)l * d + j] = alpha[l] * M[(size_t)l * d + j];
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) {
            double s = 0.0;
            for (int l = 0; l < d; l++)
                s += B[(size_t)i * d + l] * M[(size_t)l * d + j];
            J[(size_t)i * d + j] = s;
        }
    free(M);
    return 0;
}

/* out = S T + J for one d x d head. */
static void state_step(double *out, const double *S, const double *T, const double *J, int d) {
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) {
            double s = J[(size_t)i * d + j];
            for (int l = 0; l < d; l++)
                s += S[(size_t)i * d + l] * T[(size_t)l * d + j];
            out[(size_t)i * d + j] = s;
        }
}

void vdn_vda_scans(double *P, double *R, const double *T, const double *J, const double *S0, int F,
                   int H, int d) {
    size_t dd = (size_t)d * d, fs = (size_t)H * dd;
    for (int t = 0; t < F; t++)
        for (int h = 0; h < H; h++) {
            const double *prev = t == 0 ? S0 + h * dd : P + (t - 1) * fs + h * dd;
            state_step(P + t * fs + h * dd, prev, T + t * fs + h * dd, J + t * fs + h * dd, d);
        }
    for (int t = F - 1; t >= 0; t--)
        for (int h = 0; h < H; h++) {
            const double *next = t == F - 1 ? S0 + h * dd : R + (t + 1) * fs + h * dd;
            state_step(R + t * fs + h * dd, next, T + t * fs + h * dd, J + t * fs + h * dd, d);
        }
}

void vdn_vda_gather(double *out, const double *P, const double *R, const double *S0,
                    const double *alpha, int F, int H, int d, int t, int lo, int hi) {
    size_t dd = (size_t)d * d, fs = (size_t)H * dd;
    const double *left = (lo - 1 >= 0) ? P + (size_t)(lo - 1) * fs : S0;
    const double *right = (hi + 1 <= F - 1) ? R + (size_t)(hi + 1) * fs : S0;
    int l0 = lo > 0 ? lo : 0, h1 = hi < F - 1 ? hi : F - 1;
    double *pl = vdn_xmalloc(sizeof(double) * d), *pr = vdn_xmalloc(sizeof(double) * d);
    for (int h = 0; h < H; h++) {
        for (int j = 0; j < d; j++) {
            /* log-sum with the release's clamp alpha >= 1e-12 */
            double sl = 0.0, sr = 0.0;
            for (int u = l0; u <= t; u++)
                sl += log(fmax(alpha[((size_t)u * H + h) * d + j], 1e-12));
            for (int u = t; u <= h1; u++)
                sr += log(fmax(alpha[((size_t)u * H + h) * d + j], 1e-12));
            pl[j] = exp(sl);
            pr[j] = exp(sr);
        }
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                out[h * dd + (size_t)i * d + j] = left[h * dd + (size_t)i * d + j] * pl[j] +
                                                  right[h * dd + (size_t)i * d + j] * pr[j];
    }
    free(pl);
    free(pr);
}
