/* The VDA ops on the CPU (op_vda.h): the oracle of the linear branch, in float64 throughout
 * (features and states are F64 tensors here), with the math of engine/vda.c: Cholesky inverse,
 * transition, scans, the alpha bridge. Per-matrix and per-frame work runs on vdn_parallel_for. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_cpu.h"
#include "op_vda.h"
#include "ops.h"
#include "vda.h"

/* ---- features ---- */

typedef struct {
    const vdn_vda_feats *o;
    const vdn_tensor *k, *v, *q, *beta;
    const vdn_vda_conv *conv;
    int F, gh, gw, H, hd;
    float *kc, *vc, *tmp; /* conv outputs [F S, C] */
} prep_job;

/* depthwise spatial then temporal conv of src's rows into dst (float32 between and after, as
 * the model's two modules); no conv: a float32 copy */
static void conv_rows(const prep_job *j, const vdn_tensor *src, const vdn_tensor *wsp,
                      const vdn_tensor *wtm, float *dst, float *tmp) {
    const int S = j->gh * j->gw, C = j->H * j->hd, F = j->F;
    if (!wsp) {
        for (int r = 0; r < F * S; r++)
            for (int c = 0; c < C; c++)
                dst[(size_t)r * C + c] = (float)cpu_at(src, r, c);
        return;
    }
    const int taps = (int)vdn_tensor_cols(wsp), kt = (int)vdn_tensor_cols(wtm);
    int ks = 1;
    while (ks * ks < taps)
        ks++;
    const int p = ks / 2, pt = kt / 2;
    for (int f = 0; f < F; f++)
        for (int y = 0; y < j->gh; y++)
            for (int x = 0; x < j->gw; x++)
                for (int c = 0; c < C; c++) {
                    double acc = 0.0;
                    for (int a = 0; a < ks; a++)
                        for (int b = 0; b < ks; b++) {
                            int yy = y + a - p, xx = x + b - p;
                            if (yy < 0 || yy >= j->gh || xx < 0 || xx >= j->gw) continue;
                            acc += cpu_at(wsp, c, a * ks + b) *
                                   cpu_at(src, (int64_t)f * S + yy * j->gw + xx, c);
                        }
                    tmp[((size_t)f * S + y * j->gw + x) * C + c] = (float)acc;
                }
    for (int f = 0; f < F; f++)
        for (int s = 0; s < S; s++)
            for (int c = 0; c < C; c++) {
                double acc = 0.0;
                for (int t = 0; t < kt; t++) {
                    int ff = f + t - pt;
                    if (ff < 0 || ff >= F) continue;
                    acc += cpu_at(wtm, c, t) * tmp[((size_t)ff * S + s) * C + c];
                }
                dst[((size_t)f * S + s) * C + c] = (float)acc;
            }
}

/* SiLU (float32) then, when l2, x / max(||x||, 1e-6), as the model */
static void silu_l2(float *x, int n, int l2) {
    for (int i = 0; i < n; i++)
        x[i] = vdn_silu(x[i]);
    if (l2) vdn_l2norm(x, n, 1e-6f);
}

static void prep_frame(void *ctx, int f) {
    const prep_job *j = ctx;
    const int S = j->gh * j->gw, H = j->H, hd = j->hd, C = H * hd;
    float *buf = vdn_xmalloc(sizeof(float) * (size_t)hd);
    for (int s = 0; s < S; s++) {
        const int64_t row = (int64_t)f * S + s;
        for (int h = 0; h < H; h++) {
            const int64_t o = (((int64_t)f * H + h) * S + s);
            const double b = cpu_at(j->beta, row, h), sb = sqrt(b);
            memcpy(buf, j->kc + (size_t)row * C + (size_t)h * hd, sizeof(float) * hd);
            silu_l2(buf, hd, 1);
            for (int i = 0; i < hd; i++) {
                cpu_put(j->o->ks, o, i, sb * buf[i]);
                cpu_put(j->o->kb, o, i, b * buf[i]);
            }
            memcpy(buf, j->vc + (size_t)row * C + (size_t)h * hd, sizeof(float) * hd);
            silu_l2(buf, hd, 0);
            for (int i = 0; i < hd; i++)
                cpu_put(j->o->vt, o, i, buf[i]);
            if (!j->q) continue;
            for (int i = 0; i < hd; i++)
                buf[i] = (float)cpu_at(j->q, row, (int64_t)h * hd + i);
            silu_l2(buf, hd, 1);
            for (int i = 0; i < hd; i++)
                cpu_put(j->o->qt, o, i, buf[i]);
        }
    }
    free(buf);
}

static int cpu_vda_prep(const vdn_vda_feats *o, const vdn_tensor *k, const vdn_tensor *v,
                        const vdn_tensor *q, const vdn_vda_conv *conv, const vdn_tensor *beta,
                        int frames, int gh, int gw, int heads) {
    const int S = gh * gw, C = (int)vdn_tensor_cols(k);
    prep_job j = {o, k, v, q, beta, conv, frames, gh, gw, heads, C / heads, NULL, NULL, NULL};
    const size_t n = (size_t)frames * S * C;
    j.kc = vdn_xmalloc(sizeof(float) * n);
    j.vc = vdn_xmalloc(sizeof(float) * n);
    j.tmp = vdn_xmalloc(sizeof(float) * n);
    const int has_conv = conv && conv->k_sp;
    conv_rows(&j, k, has_conv ? conv->k_sp : NULL, has_conv ? conv->k_tm : NULL, j.kc, j.tmp);
    conv_rows(&j, v, has_conv ? conv->v_sp : NULL, has_conv ? conv->v_tm : NULL, j.vc, j.tmp);
    vdn_parallel_for(frames, prep_frame, &j);
    free(j.kc);
    free(j.vc);
    free(j.tmp);
    return 0;
}

/* ---- statistics ---- */

typedef struct {
    vdn_tensor *A, *B;
    const vdn_tensor *ks, *kb, *vt;
    int64_t S, hd;
} stats_job;

static void stats_one(void *ctx, int m) {
    const stats_job *j = ctx;
    const int64_t hd = j->hd, r0 = (int64_t)m * j->S;
    double *a = vdn_xcalloc((size_t)(hd * hd), sizeof(double));
    double *b = vdn_xcalloc((size_t)(hd * hd), sizeof(double));
    double *ks = vdn_xmalloc(sizeof(double) * (size_t)hd);
    double *kb = vdn_xmalloc(sizeof(double) * (size_t)hd);
    for (int64_t s = 0; s < j->S; s++) {
        for (int64_t i = 0; i < hd; i++)
            ks[i] = cpu_at(j->ks, r0 + s, i), kb[i] = cpu_at(j->kb, r0 + s, i);
        for (int64_t i = 0; i < hd; i++) {
            const double vi = cpu_at(j->vt, r0 + s, i);
            for (int64_t l = 0; l < hd; l++) {
                a[i * hd + l] += ks[i] * ks[l];
                b[i * hd + l] += vi * kb[l];
            }
        }
    }
    for (int64_t i = 0; i < hd; i++)
        for (int64_t l = 0; l < hd; l++) {
            cpu_put(j->A, (int64_t)m * hd + i, l, a[i * hd + l]);
            cpu_put(j->B, (int64_t)m * hd + i, l, b[i * hd + l]);
        }
    free(a);
    free(b);
    free(ks);
    free(kb);
}

static int cpu_vda_stats(vdn_tensor *A, vdn_tensor *B, const vdn_tensor *ks, const vdn_tensor *kb,
                         const vdn_tensor *vt, int nmat) {
    stats_job j = {A, B, ks, kb, vt, vdn_tensor_rows(ks) / nmat, vdn_tensor_cols(ks)};
    vdn_parallel_for(nmat, stats_one, &j);
    return 0;
}

/* ---- solve ---- */

typedef struct {
    vdn_tensor *T, *J;
    const vdn_tensor *A, *B, *alpha;
    int additive_S, hd;
    int *failed;
} solve_job;

static void solve_one(void *ctx, int m) {
    const solve_job *j = ctx;
    const int hd = j->hd;
    const size_t dd = (size_t)hd * hd;
    double *a = vdn_xmalloc(sizeof(double) * dd), *b = vdn_xmalloc(sizeof(double) * dd);
    double *t = vdn_xmalloc(sizeof(double) * dd), *jj = vdn_xmalloc(sizeof(double) * dd);
    double *al = vdn_xmalloc(sizeof(double) * (size_t)hd);
    for (int i = 0; i < hd; i++) {
        for (int l = 0; l < hd; l++) { /* symmetrised as the release does */
            a[(size_t)i * hd + l] =
                0.5 * (cpu_at(j->A, (int64_t)m * hd + i, l) + cpu_at(j->A, (int64_t)m * hd + l, i));
            b[(size_t)i * hd + l] = cpu_at(j->B, (int64_t)m * hd + i, l);
        }
        al[i] = j->alpha ? cpu_at(j->alpha, 0, (int64_t)m * hd + i) : 1.0; /* contiguous */
    }
    j->failed[m] = vdn_vda_transition(t, jj, a, b, al, hd, j->additive_S > 0, j->additive_S) != 0;
    for (int i = 0; i < hd && !j->failed[m]; i++)
        for (int l = 0; l < hd; l++) {
            if (j->T) cpu_put(j->T, (int64_t)m * hd + i, l, t[(size_t)i * hd + l]);
            cpu_put(j->J, (int64_t)m * hd + i, l, jj[(size_t)i * hd + l]);
        }
    free(a);
    free(b);
    free(t);
    free(jj);
    free(al);
}

static int cpu_vda_solve(vdn_tensor *T, vdn_tensor *J, const vdn_tensor *A, const vdn_tensor *B,
                         const vdn_tensor *alpha, int additive_S) {
    const int hd = (int)vdn_tensor_cols(A), nmat = (int)(vdn_tensor_rows(A) / hd);
    solve_job j = {T, J, A, B, alpha, additive_S, hd, vdn_xcalloc((size_t)nmat, sizeof(int))};
    vdn_parallel_for(nmat, solve_one, &j);
    int rc = 0;
    for (int m = 0; m < nmat && rc == 0; m++)
        if (j.failed[m])
            rc = vdn_dev_fail(J->dev,
                              "op vda_solve: I + A is not positive definite at matrix %d "
                              "(non-finite activations?)",
                              m);
    free(j.failed);
    return rc;
}

/* ---- scans ---- */

typedef struct {
    vdn_tensor *P, *R;
    const vdn_tensor *T, *J, *S0;
    int F, H, hd;
} scans_job;

/* out's matrix m = S T_m + J_m into next (S, next: host d x d; t: scratch for T_m) */
static void step(vdn_tensor *out, int64_t m, const double *S, const vdn_tensor *T,
                 const vdn_tensor *J, int hd, double *next, double *t) {
    for (int k = 0; k < hd; k++)
        for (int l = 0; l < hd; l++)
            t[(size_t)k * hd + l] = cpu_at(T, m * hd + k, l);
    for (int i = 0; i < hd; i++)
        for (int l = 0; l < hd; l++) {
            double s = cpu_at(J, m * hd + i, l);
            for (int k = 0; k < hd; k++)
                s += S[(size_t)i * hd + k] * t[(size_t)k * hd + l];
            next[(size_t)i * hd + l] = s;
        }
    for (int i = 0; i < hd; i++)
        for (int l = 0; l < hd; l++)
            cpu_put(out, m * hd + i, l, next[(size_t)i * hd + l]);
}

static void scans_head(void *ctx, int h) {
    const scans_job *j = ctx;
    const int hd = j->hd;
    const size_t dd = (size_t)hd * hd;
    double *s = vdn_xmalloc(sizeof(double) * dd), *next = vdn_xmalloc(sizeof(double) * dd);
    double *t_m = vdn_xmalloc(sizeof(double) * dd);
    for (int dir = 0; dir < (j->R ? 2 : 1); dir++) {
        for (int i = 0; i < hd; i++)
            for (int l = 0; l < hd; l++)
                s[(size_t)i * hd + l] = j->S0 ? cpu_at(j->S0, (int64_t)h * hd + i, l) : 0.0;
        for (int n = 0; n < j->F; n++) {
            int t = dir == 0 ? n : j->F - 1 - n;
            int64_t m = (int64_t)t * j->H + h;
            step(dir == 0 ? j->P : j->R, m, s, j->T, j->J, hd, next, t_m);
            memcpy(s, next, sizeof(double) * dd); /* carried in float64 between frames */
        }
    }
    free(s);
    free(next);
    free(t_m);
}

static int cpu_vda_scans(vdn_tensor *P, vdn_tensor *R, const vdn_tensor *T, const vdn_tensor *J,
                         const vdn_tensor *S0, int frames) {
    const int hd = (int)vdn_tensor_cols(P);
    scans_job j = {P, R, T, J, S0, frames, (int)(vdn_tensor_rows(P) / ((int64_t)frames * hd)), hd};
    vdn_parallel_for(j.H, scans_head, &j);
    return 0;
}

/* ---- gather with the alpha bridge ---- */

typedef struct {
    vdn_tensor *Slin;
    const vdn_tensor *P, *R, *S0, *alpha, *win;
    int F, H, hd;
} gather_job;

static double state_at(const vdn_tensor *X, int64_t m, int hd, int i, int l) {
    return X ? cpu_at(X, m * hd + i, l) : 0.0;
}

static void gather_one(void *ctx, int job) {
    const gather_job *j = ctx;
    const int t = job / j->H, h = job % j->H, hd = j->hd, F = j->F;
    const int32_t *w = j->win->data;
    const int lo = w[2 * t], hi = w[2 * t + 1];
    const int l0 = lo > 0 ? lo : 0, h1 = hi < F - 1 ? hi : F - 1;
    /* left: P_{lo-1} or S0; right: R_{hi+1} or S0 */
    const vdn_tensor *left = lo - 1 >= 0 ? j->P : j->S0, *right = hi + 1 <= F - 1 ? j->R : j->S0;
    const int64_t ml = lo - 1 >= 0 ? (int64_t)(lo - 1) * j->H + h : h;
    const int64_t mr = hi + 1 <= F - 1 ? (int64_t)(hi + 1) * j->H + h : h;
    double *pl = vdn_xmalloc(sizeof(double) * (size_t)hd), *pr = vdn_xmalloc(sizeof(double) * hd);
    for (int l = 0; l < hd; l++) { /* log-sums with the release's clamp alpha >= 1e-12 */
        double sl = 0.0, sr = 0.0;
        for (int u = l0; u <= t; u++)
            sl += log(fmax(cpu_at(j->alpha, u, (int64_t)h * hd + l), 1e-12));
        for (int u = t; u <= h1; u++)
            sr += log(fmax(cpu_at(j->alpha, u, (int64_t)h * hd + l), 1e-12));
        pl[l] = exp(sl);
        pr[l] = exp(sr);
    }
    const int64_t mo = (int64_t)t * j->H + h;
    for (int i = 0; i < hd; i++)
        for (int l = 0; l < hd; l++)
            cpu_put(j->Slin, mo * hd + i, l,
                    state_at(left, ml, hd, i, l) * pl[l] + state_at(right, mr, hd, i, l) * pr[l]);
    free(pl);
    free(pr);
}

static int cpu_vda_gather(vdn_tensor *Slin, const vdn_tensor *P, const vdn_tensor *R,
                          const vdn_tensor *S0, const vdn_tensor *alpha, const vdn_tensor *win,
                          int frames) {
    const int hd = (int)vdn_tensor_cols(P);
    gather_job j = {
        Slin, P, R, S0, alpha, win, frames, (int)(vdn_tensor_rows(P) / ((int64_t)frames * hd)), hd};
    vdn_parallel_for(frames * j.H, gather_one, &j);
    return 0;
}

/* ---- readout and epilogue ---- */

typedef struct {
    vdn_tensor *r;
    const vdn_tensor *Slin, *qt;
    int64_t S, hd;
} readout_job;

static void readout_one(void *ctx, int m) {
    const readout_job *j = ctx;
    const int64_t hd = j->hd;
    double *Sm = vdn_xmalloc(sizeof(double) * (size_t)(hd * hd));
    double *q = vdn_xmalloc(sizeof(double) * (size_t)hd);
    for (int64_t i = 0; i < hd; i++)
        for (int64_t k = 0; k < hd; k++)
            Sm[i * hd + k] = cpu_at(j->Slin, (int64_t)m * hd + i, k);
    for (int64_t s = 0; s < j->S; s++) {
        const int64_t row = (int64_t)m * j->S + s;
        for (int64_t k = 0; k < hd; k++)
            q[k] = cpu_at(j->qt, row, k);
        for (int64_t i = 0; i < hd; i++) {
            double a = 0.0;
            for (int64_t k = 0; k < hd; k++)
                a += Sm[i * hd + k] * q[k];
            cpu_put(j->r, row, i, a);
        }
    }
    free(Sm);
    free(q);
}

static int cpu_vda_readout(vdn_tensor *r, const vdn_tensor *Slin, const vdn_tensor *qt, int nmat) {
    readout_job j = {r, Slin, qt, vdn_tensor_rows(qt) / nmat, vdn_tensor_cols(qt)};
    vdn_parallel_for(nmat, readout_one, &j);
    return 0;
}

static int cpu_vda_epilogue(vdn_tensor *out, const vdn_tensor *r, const vdn_tensor *wn, double eps,
                            const vdn_tensor *gpre, int frames, int heads) {
    const int64_t hd = vdn_tensor_cols(r), S = vdn_tensor_rows(out) / frames;
    for (int64_t f = 0; f < frames; f++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < heads; h++) {
                const int64_t rr = (f * heads + h) * S + s, row = f * S + s;
                double ss = 0.0;
                for (int64_t i = 0; i < hd; i++) {
                    double a = cpu_at(r, rr, i);
                    ss += a * a;
                }
                const double inv = 1.0 / sqrt(ss / (double)hd + eps);
                for (int64_t i = 0; i < hd; i++) {
                    double g = 1.0 / (1.0 + exp(-cpu_at(gpre, row, h * hd + i)));
                    cpu_put(out, row, h * hd + i, cpu_at(r, rr, i) * inv * cpu_at(wn, 0, i) * g);
                }
            }
    return 0;
}

/* ---- decay ---- */

static int cpu_frame_means(vdn_tensor *m, const vdn_tensor *x, int frames) {
    const int64_t S = vdn_tensor_rows(x) / frames, hid = vdn_tensor_cols(x);
    for (int64_t f = 0; f < frames; f++)
        for (int64_t c = 0; c < hid; c++) {
            double s = 0.0;
            for (int64_t r = 0; r < S; r++)
                s += cpu_at(x, f * S + r, c);
            cpu_put(m, f, c, (float)(s / (double)S));
        }
    return 0;
}

static int cpu_alpha_finish(vdn_tensor *alpha, const vdn_tensor *u, const vdn_tensor *dt_bias,
                            const vdn_tensor *A_log) {
    const int64_t F = vdn_tensor_rows(alpha), C = vdn_tensor_cols(alpha);
    const int64_t hd = C / vdn_tensor_numel(A_log);
    for (int64_t f = 0; f < F; f++)
        for (int64_t c = 0; c < C; c++) {
            double pre = cpu_at(u, f, c) + cpu_at(dt_bias, 0, c);
            cpu_put(alpha, f, c, exp(-exp(cpu_at(A_log, 0, c / hd)) * vdn_softplus(pre)));
        }
    return 0;
}

const struct vdn_vda_backend vdn_cpu_vda_backend = {
    .feat_dtype = VDN_DT_F64,
    .state_dtype = VDN_DT_F64,
    .prep = cpu_vda_prep,
    .stats = cpu_vda_stats,
    .solve = cpu_vda_solve,
    .scans = cpu_vda_scans,
    .gather = cpu_vda_gather,
    .readout = cpu_vda_readout,
    .epilogue = cpu_vda_epilogue,
    .frame_means = cpu_frame_means,
    .alpha_finish = cpu_alpha_finish,
};
