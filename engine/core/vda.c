/* Video Delta Attention, CPU reference; see vda.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "vda.h"
#include "vdn_util.h"

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
