/* Video Delta Attention, CPU reference; see vda.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "vda.h"
#include "vdn_util.h"

void vdn_vda_conv_spatial(float *out, const float *in, const float *w, int frames, int gh, int gw,
                          int C, int ks) {
    int p = ks / 2, S = gh * gw;
    for (int f = 0; f < frames; f++)
        for (int y = 0; y < gh; y++)
            for (int x = 0; x < gw; x++) {
                float *o = out + ((size_t)f * S + (size_t)y * gw + x) * C;
                for (int c = 0; c < C; c++) {
                    double acc = 0.0;
                    for (int i = 0; i < ks; i++) {
                        int yy = y + i - p;
                        if (yy < 0 || yy >= gh) continue;
                        for (int j = 0; j < ks; j++) {
                            int xx = x + j - p;
                            if (xx < 0 || xx >= gw) continue;
                            acc += (double)w[(size_t)c * ks * ks + i * ks + j] *
                                   in[((size_t)f * S + (size_t)yy * gw + xx) * C + c];
                        }
                    }
                    o[c] = (float)acc;
                }
            }
}

void vdn_vda_conv_temporal(float *out, const float *in, const float *w, int frames, int S, int C,
                           int kt) {
    int p = kt / 2;
    for (int f = 0; f < frames; f++)
        for (int s = 0; s < S; s++)
            for (int c = 0; c < C; c++) {
                double acc = 0.0;
                for (int d = 0; d < kt; d++) {
                    int ff = f + d - p;
                    if (ff < 0 || ff >= frames) continue;
                    acc += (double)w[(size_t)c * kt + d] * in[((size_t)ff * S + s) * C + c];
                }
                out[((size_t)f * S + s) * C + c] = (float)acc;
            }
}

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

/* SiLU then (for q, k) L2 per head, in place over n rows of H*d. */
static void activate(float *x, int n, int H, int d, int l2, float eps) {
    for (size_t i = 0; i < (size_t)n * H * d; i++)
        x[i] = vdn_silu(x[i]);
    if (l2)
        for (size_t r = 0; r < (size_t)n * H; r++)
            vdn_l2norm(x + r * d, d, eps);
}

static void beta_rows(float *beta, const float *x, const float *w, int n, int hidden, int H) {
    vdn_linear(beta, x, w, NULL, n, hidden, H);
    for (size_t i = 0; i < (size_t)n * H; i++)
        beta[i] = vdn_sigmoid(beta[i]);
}

/* Shared state of one branch evaluation, for the per-frame jobs run by vdn_parallel_for. */
typedef struct {
    double *A, *B, *T, *J, *P, *R;
    const double *S0, *alpha;
    const float *k, *v, *q, *beta, *g, *norm_w;
    float *out;
    const vdn_config *cfg;
    int S, H, d, C, f0, Fp, additive;
    int *fail;
} branch_job;

static void stats_frame(void *ctx, int f) {
    branch_job *j = ctx;
    size_t fs = (size_t)j->H * j->d * j->d;
    vdn_vda_stats(j->A + f * fs, j->B + f * fs, j->k + (size_t)f * j->S * j->C,
                  j->v + (size_t)f * j->S * j->C, j->beta + (size_t)f * j->S * j->H, j->S, j->H,
                  j->d);
}

static void transition_fh(void *ctx, int i) {
    branch_job *j = ctx;
    size_t dd = (size_t)j->d * j->d, at = (size_t)i * dd;
    int f = i / j->H, h = i % j->H;
    j->fail[i] = vdn_vda_transition(j->T + at, j->J + at, j->A + at, j->B + at,
                                    j->alpha + (size_t)f * j->C + (size_t)h * j->d, j->d,
                                    j->additive, j->S) != 0;
}

/* gather the frame's state, read it with each query, RMSNorm, gate */
static void readout_frame(void *ctx, int t) {
    branch_job *j = ctx;
    const int H = j->H, d = j->d, C = j->C, S = j->S;
    const size_t dd = (size_t)d * d;
    double *St = vdn_xmalloc(sizeof(double) * H * dd), *r = vdn_xmalloc(sizeof(double) * d);
    int lo, hi;
    vdn_window_bounds(j->cfg, t + j->f0, &lo, &hi);
    vdn_vda_gather(St, j->P, j->R, j->S0, j->alpha, j->Fp, H, d, t, lo - j->f0, hi - j->f0);
    for (int s = 0; s < S; s++) {
        size_t row = (size_t)t * S + s;
        float *o = j->out + ((size_t)(t + j->f0) * S + s) * C;
        for (int h = 0; h < H; h++) {
            const float *qh = j->q + row * C + (size_t)h * d;
            const double *Sh = St + h * dd;
            double ss = 0.0;
            for (int i = 0; i < d; i++) {
                double a = 0.0;
                for (int k = 0; k < d; k++)
                    a += Sh[(size_t)i * d + k] * qh[k];
                r[i] = a;
                ss += a * a;
            }
            double inv = 1.0 / sqrt(ss / d + (double)j->cfg->linear_norm_eps);
            for (int i = 0; i < d; i++) {
                double gi = 1.0 / (1.0 + exp(-(double)j->g[row * C + (size_t)h * d + i]));
                o[(size_t)h * d + i] = (float)(r[i] * inv * j->norm_w[i] * gi);
            }
        }
    }
    free(St);
    free(r);
}

int vdn_vda_branch(float *out, const float *x, const float *q_raw, const float *k_raw,
                   const float *v_raw, const vdn_layout *lay, const vdn_attn_plan *plan,
                   const vdn_config *cfg, const vdn_vda_weights *w, char *err, size_t errlen) {
    const int H = cfg->heads, d = cfg->head_dim, C = H * d, hid = cfg->hidden;
    const int S = lay->tokens_per_frame, F = lay->frames;
    const int f0 = plan->skip_ends ? 1 : 0, Fp = F - 2 * f0, n = Fp * S;
    const float eps = 1e-6f; /* F.normalize eps of the release */
    memset(out, 0, sizeof(float) * (size_t)lay->n_video * C);
    if (Fp <= 0) return 0; /* a clip of anchors only: no linear output */
    const size_t row0 = (size_t)lay->video_start + (size_t)f0 * S;
    const float *xv = x + row0 * hid;
    const size_t dd = (size_t)d * d, fs = (size_t)H * dd;

    float *q = vdn_xmalloc(sizeof(float) * n * C), *k = vdn_xmalloc(sizeof(float) * n * C);
    float *v = vdn_xmalloc(sizeof(float) * n * C), *tmp = vdn_xmalloc(sizeof(float) * n * C);
    memcpy(q, q_raw + row0 * C, sizeof(float) * n * C);
    vdn_vda_conv_spatial(tmp, k_raw + row0 * C, w->k_sp, Fp, lay->grid_h, lay->grid_w, C,
                         cfg->conv_spatial);
    vdn_vda_conv_temporal(k, tmp, w->k_tm, Fp, S, C, cfg->conv_temporal);
    vdn_vda_conv_spatial(tmp, v_raw + row0 * C, w->v_sp, Fp, lay->grid_h, lay->grid_w, C,
                         cfg->conv_spatial);
    vdn_vda_conv_temporal(v, tmp, w->v_tm, Fp, S, C, cfg->conv_temporal);
    activate(q, n, H, d, 1, eps);
    activate(k, n, H, d, 1, eps);
    activate(v, n, H, d, 0, eps);
    float *beta = vdn_xmalloc(sizeof(float) * n * H);
    beta_rows(beta, xv, w->beta_w, n, hid, H);

    /* alpha_f = exp(-exp(A_log_h) softplus(W_up W_down m_f + dt_bias)), m_f the frame mean */
    double *alpha = vdn_xmalloc(sizeof(double) * Fp * C);
    {
        float *m = vdn_xmalloc(sizeof(float) * Fp * hid);
        float *down = vdn_xmalloc(sizeof(float) * Fp * cfg->alpha_rank);
        float *up = vdn_xmalloc(sizeof(float) * Fp * C);
        for (int f = 0; f < Fp; f++)
            for (int c = 0; c < hid; c++) {
                double s = 0.0;
                for (int r = 0; r < S; r++)
                    s += xv[((size_t)f * S + r) * hid + c];
                m[(size_t)f * hid + c] = (float)(s / S);
            }
        vdn_linear(down, m, w->alpha_down, NULL, Fp, hid, cfg->alpha_rank);
        vdn_linear(up, down, w->alpha_up, w->dt_bias, Fp, cfg->alpha_rank, C);
        for (int f = 0; f < Fp; f++)
            for (int c = 0; c < C; c++)
                alpha[(size_t)f * C + c] =
                    exp(-exp((double)w->A_log[c / d]) * vdn_softplus(up[(size_t)f * C + c]));
        free(m);
        free(down);
        free(up);
    }

    double *A = vdn_xmalloc(sizeof(double) * Fp * fs), *B = vdn_xmalloc(sizeof(double) * Fp * fs);
    branch_job job = {.A = A,
                      .B = B,
                      .k = k,
                      .v = v,
                      .beta = beta,
                      .alpha = alpha,
                      .S = S,
                      .H = H,
                      .d = d,
                      .C = C,
                      .f0 = f0,
                      .Fp = Fp,
                      .additive = plan->additive};
    vdn_parallel_for(Fp, stats_frame, &job);

    /* text state S0 = scale * S_text, S_text = B_text (I + A_text)^-1 over all prompt rows */
    double *S0 = vdn_xcalloc(fs, sizeof(double));
    int L = lay->n_text;
    if (cfg->text_state && L > 0) {
        float *kt = vdn_xmalloc(sizeof(float) * L * C), *vt = vdn_xmalloc(sizeof(float) * L * C);
        float *bt = vdn_xmalloc(sizeof(float) * L * H);
        memcpy(kt, k_raw, sizeof(float) * L * C);
        memcpy(vt, v_raw, sizeof(float) * L * C);
        activate(kt, L, H, d, 1, eps);
        activate(vt, L, H, d, 0, eps);
        beta_rows(bt, x, w->beta_w, L, hid, H);
        double *At = vdn_xmalloc(sizeof(double) * fs), *Bt = vdn_xmalloc(sizeof(double) * fs);
        double *Tt = vdn_xmalloc(sizeof(double) * dd), *ones = vdn_xmalloc(sizeof(double) * d);
        vdn_vda_stats(At, Bt, kt, vt, bt, L, H, d);
        for (int j = 0; j < d; j++)
            ones[j] = 1.0;
        for (int h = 0; h < H; h++) {
            if (vdn_vda_transition(Tt, S0 + h * dd, At + h * dd, Bt + h * dd, ones, d,
                                   plan->additive, L) != 0)
                VDN_ASSERT(0 && "I + A_text not positive definite");
            for (size_t i = 0; i < dd; i++)
                S0[h * dd + i] *= cfg->text_state_scale;
        }
        free(kt);
        free(vt);
        free(bt);
        free(At);
        free(Bt);
        free(Tt);
        free(ones);
    }

    double *T = vdn_xmalloc(sizeof(double) * Fp * fs), *J = vdn_xmalloc(sizeof(double) * Fp * fs);
    int rc = 0;
    job.T = T, job.J = J, job.fail = vdn_xcalloc((size_t)Fp * H, sizeof(int));
    vdn_parallel_for(Fp * H, transition_fh, &job);
    for (int i = 0; i < Fp * H && rc == 0; i++)
        if (job.fail[i])
            rc = vdn_fail(err, errlen,
                          "VDA: I + A is not positive definite at frame %d head %d "
                          "(non-finite activations?)",
                          i / H + f0, i % H);
    free(job.fail);
    free(A);
    free(B);
    if (rc == 0) {
        double *P = vdn_xmalloc(sizeof(double) * Fp * fs),
               *R = vdn_xmalloc(sizeof(double) * Fp * fs);
        vdn_vda_scans(P, R, T, J, S0, Fp, H, d);
        /* output gate g = sigmoid(W_gup W_gdown x + b) */
        float *gd = vdn_xmalloc(sizeof(float) * n * cfg->gate_rank);
        float *g = vdn_xmalloc(sizeof(float) * n * C);
        vdn_linear(gd, xv, w->gate_down, NULL, n, hid, cfg->gate_rank);
        vdn_linear(g, gd, w->gate_up, w->gate_up_b, n, cfg->gate_rank, C);
        job.P = P, job.R = R, job.S0 = S0, job.q = q, job.g = g, job.out = out, job.cfg = cfg;
        job.norm_w = w->norm_w;
        vdn_parallel_for(Fp, readout_frame, &job);
        free(P);
        free(R);
        free(gd);
        free(g);
    }
    free(T);
    free(J);
    free(S0);
    free(q);
    free(k);
    free(v);
    free(tmp);
    free(beta);
    free(alpha);
    return rc;
}
