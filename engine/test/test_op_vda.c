/* The VDA ops (op_vda.h) on the CPU backend against float64 references written here: the
 * formulas of spec 5.3 evaluated directly (products of alpha instead of log-sums, explicit
 * recurrences), and the solve by its defining identities T (I + A) = Diag(alpha), J (I + A) = B.
 * Odd sizes on purpose: 3x3 spatial and 3-tap temporal taps, hd 4, 2x3 grids. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "op_backend.h"
#include "op_vda.h"
#include "vdn_util.h"

static vdn_dev *D;
enum { F = 3, GH = 2, GW = 3, S = GH * GW, H = 2, HD = 4, C = H * HD, KS = 3, KT = 3 };

static vdn_tensor *held[64];
static int n_held;

static vdn_tensor *t_new(vdn_dtype dt, int64_t rows, int64_t cols) {
    vdn_tensor *t = vdn_tensor_new2(D, dt, rows, cols);
    VDN_ASSERT(t && n_held < 64);
    return held[n_held++] = t;
}
static vdn_tensor *t_rand(vdn_dtype dt, int64_t rows, int64_t cols, double scale, double offset,
                          double *host) {
    vdn_tensor *t = t_new(dt, rows, cols);
    for (int64_t i = 0; i < rows * cols; i++)
        host[i] = (float)(offset + scale * rnd()); /* float values: exact in every dtype used */
    vdn_tensor_set(t, host, VDN_DT_F64);
    return t;
}
static void get64(const vdn_tensor *t, double *out) {
    float *f = vdn_xmalloc(sizeof(float) * (size_t)vdn_tensor_numel(t));
    if (t->dtype == VDN_DT_F64)
        vdn_tensor_get_raw(t, out);
    else {
        vdn_tensor_get(t, f);
        for (int64_t i = 0; i < vdn_tensor_numel(t); i++)
            out[i] = f[i];
    }
    free(f);
}
static void near(const double *out, const double *ref, size_t n, double tol, const char *what) {
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(out[i] - ref[i]) / (1 + fabs(ref[i]));
        if (!(e <= worst)) worst = e, at = i;
    }
    CHECK(worst <= tol, "%s: error %.3g at %zu (%.12g vs %.12g)", what, worst, at, out[at],
          ref[at]);
}
static double silu(double x) {
    return x / (1 + exp(-x));
}
static void l2(double *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += x[i] * x[i];
    s = fmax(sqrt(s), 1e-6);
    for (int i = 0; i < n; i++)
        x[i] /= s;
}

static void test_prep(void) {
    const vdn_dtype st = vdn_vda_state_dtype(D), ft = vdn_vda_feat_dtype(D);
    static double qkv[F * S * 3 * C], wks[C * KS * KS], wkt[C * KT], wvs[C * KS * KS], wvt[C * KT],
        beta[F * S * H];
    /* q | k | v side by side in one [F S, 3C] tensor, like the fused projection */
    vdn_tensor *tqkv = t_rand(VDN_DT_F32, F * S, 3 * C, 1.5, 0, qkv);
    vdn_tensor q = vdn_view_cols(tqkv, 0, C), k = vdn_view_cols(tqkv, C, C),
               v = vdn_view_cols(tqkv, 2 * C, C);
    vdn_vda_conv conv = {
        t_rand(VDN_DT_F32, C, KS * KS, 0.5, 0, wks), t_rand(VDN_DT_F32, C, KT, 0.7, 0, wkt),
        t_rand(VDN_DT_F32, C, KS * KS, 0.5, 0, wvs), t_rand(VDN_DT_F32, C, KT, 0.7, 0, wvt)};
    vdn_tensor *tb = t_rand(VDN_DT_F32, F * S, H, 0.45, 0.5, beta);
    vdn_vda_feats o = {t_new(st, F * H * S, HD), t_new(ft, F * H * S, HD), t_new(ft, F * H * S, HD),
                       t_new(ft, F * H * S, HD)};
    CHECK(vdn_op_vda_prep(&o, &k, &v, &q, &conv, tb, F, GH, GW, H) == 0, "%s", vdn_dev_error(D));
    static double rks[F * H * S * HD], rkb[F * H * S * HD], rvt[F * H * S * HD],
        rqt[F * H * S * HD], out[F * H * S * HD];
    for (int which = 0; which < 2; which++) { /* k then v: spatial, temporal, SiLU (L2 for k) */
        const double *ws = which ? wvs : wks, *wt = which ? wvt : wkt;
        const int off = which ? 2 * C : C;
        static double sp[F * S * C];
        for (int f = 0; f < F; f++)
            for (int y = 0; y < GH; y++)
                for (int x = 0; x < GW; x++)
                    for (int c = 0; c < C; c++) {
                        double a = 0;
                        for (int i = -1; i <= 1; i++)
                            for (int j = -1; j <= 1; j++)
                                if (y + i >= 0 && y + i < GH && x + j >= 0 && x + j < GW)
                                    a += ws[c * 9 + (i + 1) * 3 + j + 1] *
                                         qkv[(f * S + (y + i) * GW + x + j) * 3 * C + off + c];
                        sp[(f * S + y * GW + x) * C + c] = a;
                    }
        for (int f = 0; f < F; f++)
            for (int s = 0; s < S; s++)
                for (int h = 0; h < H; h++) {
                    double vec[HD];
                    for (int i = 0; i < HD; i++) {
                        double a = 0;
                        for (int t = -1; t <= 1; t++)
                            if (f + t >= 0 && f + t < F)
                                a += wt[(h * HD + i) * 3 + t + 1] *
                                     sp[((f + t) * S + s) * C + h * HD + i];
                        vec[i] = silu(a);
                    }
                    if (!which) l2(vec, HD);
                    double b = beta[(f * S + s) * H + h];
                    for (int i = 0; i < HD; i++) {
                        int at = ((f * H + h) * S + s) * HD + i;
                        if (which)
                            rvt[at] = vec[i];
                        else
                            rks[at] = sqrt(b) * vec[i], rkb[at] = b * vec[i];
                    }
                }
    }
    for (int f = 0; f < F; f++)
        for (int s = 0; s < S; s++)
            for (int h = 0; h < H; h++) {
                double vec[HD];
                for (int i = 0; i < HD; i++)
                    vec[i] = silu(qkv[(f * S + s) * 3 * C + h * HD + i]);
                l2(vec, HD);
                for (int i = 0; i < HD; i++)
                    rqt[((f * H + h) * S + s) * HD + i] = vec[i];
            }
    const size_t n = F * H * S * HD;
    get64(o.ks, out), near(out, rks, n, 1e-6, "prep ks");
    get64(o.kb, out), near(out, rkb, n, 1e-6, "prep kb");
    get64(o.vt, out), near(out, rvt, n, 1e-6, "prep vt");
    get64(o.qt, out), near(out, rqt, n, 1e-6, "prep qt");

    /* without convolution (the text state), q skipped */
    vdn_vda_feats o2 = {o.ks, o.kb, o.vt, NULL};
    CHECK(vdn_op_vda_prep(&o2, &k, &v, NULL, NULL, tb, 1, 1, F * S, H) == 0, "%s",
          vdn_dev_error(D));
    get64(o.vt, out);
    int ok = 1;
    for (int r = 0; r < F * S; r++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < HD; i++)
                ok &= fabs(out[(h * F * S + r) * HD + i] -
                           silu(qkv[r * 3 * C + 2 * C + h * HD + i])) < 1e-6;
    CHECK(ok, "prep without conv: vt = SiLU(v) in [H, rows, hd]");
}

/* stats, solve (both rules), scans, gather, readout, epilogue, on nmat = F H matrices */
static void test_branch_ops(void) {
    const vdn_dtype st = vdn_vda_state_dtype(D), ft = vdn_vda_feat_dtype(D);
    const int nmat = F * H;
    static double ks[F * H * S * HD], kb[F * H * S * HD], vt[F * H * S * HD], qt[F * H * S * HD];
    vdn_tensor *tks = t_rand(st, nmat * S, HD, 0.5, 0, ks),
               *tkb = t_rand(ft, nmat * S, HD, 0.5, 0, kb);
    vdn_tensor *tvt = t_rand(ft, nmat * S, HD, 1, 0, vt), *tqt = t_rand(ft, nmat * S, HD, 1, 0, qt);
    vdn_tensor *A = t_new(st, nmat * HD, HD), *B = t_new(st, nmat * HD, HD);
    CHECK(vdn_op_vda_stats(A, B, tks, tkb, tvt, nmat) == 0, "%s", vdn_dev_error(D));
    static double a[F * H * HD * HD], b[F * H * HD * HD], ref[F * H * HD * HD], out[F * H * S * HD];
    memset(ref, 0, sizeof ref);
    for (int m = 0; m < nmat; m++)
        for (int s = 0; s < S; s++)
            for (int i = 0; i < HD; i++)
                for (int l = 0; l < HD; l++)
                    ref[(m * HD + i) * HD + l] +=
                        ks[(m * S + s) * HD + i] * ks[(m * S + s) * HD + l];
    get64(A, a), near(a, ref, sizeof ref / 8, 1e-12, "stats A");
    memset(ref, 0, sizeof ref);
    for (int m = 0; m < nmat; m++)
        for (int s = 0; s < S; s++)
            for (int i = 0; i < HD; i++)
                for (int l = 0; l < HD; l++)
                    ref[(m * HD + i) * HD + l] +=
                        vt[(m * S + s) * HD + i] * kb[(m * S + s) * HD + l];
    get64(B, b), near(b, ref, sizeof ref / 8, 1e-12, "stats B");

    /* solve by its identities */
    static double alpha[F * C];
    vdn_tensor *tal = t_rand(st, F, C, 0.3, 0.65, alpha); /* [F, C], read as [nmat, hd] */
    vdn_tensor *T = t_new(st, nmat * HD, HD), *J = t_new(st, nmat * HD, HD);
    CHECK(vdn_op_vda_solve(T, J, A, B, tal, 0) == 0, "%s", vdn_dev_error(D));
    static double t[F * H * HD * HD], jj[F * H * HD * HD];
    get64(T, t), get64(J, jj);
    double worst = 0;
    for (int m = 0; m < nmat; m++)
        for (int i = 0; i < HD; i++)
            for (int l = 0; l < HD; l++) {
                double ti = 0, ji = 0; /* (T (I + A))[i][l], (J (I + A))[i][l] */
                for (int k = 0; k < HD; k++) {
                    double ia = (k == l) + a[(m * HD + k) * HD + l];
                    ti += t[(m * HD + i) * HD + k] * ia;
                    ji += jj[(m * HD + i) * HD + k] * ia;
                }
                worst = fmax(worst, fabs(ti - (i == l ? alpha[m * HD + i] : 0)));
                worst = fmax(worst, fabs(ji - b[(m * HD + i) * HD + l]));
            }
    CHECK(worst < 1e-12, "solve: T (I+A) = Diag(alpha), J (I+A) = B off by %.3g", worst);
    /* SANA additive rule */
    vdn_tensor *T2 = t_new(st, nmat * HD, HD), *J2 = t_new(st, nmat * HD, HD);
    CHECK(vdn_op_vda_solve(T2, J2, A, B, tal, 7) == 0, "%s", vdn_dev_error(D));
    get64(T2, out);
    for (int m = 0; m < nmat; m++)
        for (int i = 0; i < HD; i++)
            for (int l = 0; l < HD; l++)
                ref[(m * HD + i) * HD + l] =
                    alpha[m * HD + i] * ((i == l) - a[(m * HD + i) * HD + l] / 7.0);
    near(out, ref, nmat * HD * HD, 1e-12, "solve additive T");
    get64(J2, out);
    for (int i = 0; i < nmat * HD * HD; i++)
        ref[i] = b[i] / sqrt(7.0);
    near(out, ref, nmat * HD * HD, 1e-12, "solve additive J");

    /* scans from S0 */
    static double s0[H * HD * HD], P[F * H * HD * HD], R[F * H * HD * HD];
    vdn_tensor *tS0 = t_rand(st, H * HD, HD, 0.5, 0, s0);
    vdn_tensor *tP = t_new(st, nmat * HD, HD), *tR = t_new(st, nmat * HD, HD);
    CHECK(vdn_op_vda_scans(tP, tR, T, J, tS0, F) == 0, "%s", vdn_dev_error(D));
    for (int dir = 0; dir < 2; dir++)
        for (int h = 0; h < H; h++) {
            double cur[HD * HD];
            memcpy(cur, s0 + h * HD * HD, sizeof cur);
            for (int n = 0; n < F; n++) {
                int f = dir ? F - 1 - n : n, m = f * H + h;
                double nx[HD * HD];
                for (int i = 0; i < HD; i++)
                    for (int l = 0; l < HD; l++) {
                        double s = jj[(m * HD + i) * HD + l];
                        for (int k = 0; k < HD; k++)
                            s += cur[i * HD + k] * t[(m * HD + k) * HD + l];
                        nx[i * HD + l] = s;
                    }
                memcpy(cur, nx, sizeof cur);
                memcpy((dir ? R : P) + m * HD * HD, cur, sizeof cur);
            }
        }
    get64(tP, out), near(out, P, nmat * HD * HD, 1e-12, "scans P");
    get64(tR, out), near(out, R, nmat * HD * HD, 1e-12, "scans R");

    /* gather: windows reaching past both ends, inside, and a one-frame one */
    int32_t win[F * 2] = {-2, 0, 0, 1, 2, 4};
    vdn_tensor *tw = t_new(VDN_DT_I32, F, 2);
    vdn_tensor_set(tw, win, VDN_DT_I32);
    vdn_tensor *Sl = t_new(ft, nmat * HD, HD);
    CHECK(vdn_op_vda_gather(Sl, tP, tR, tS0, tal, tw, F) == 0, "%s", vdn_dev_error(D));
    static double sl[F * H * HD * HD];
    for (int f = 0; f < F; f++)
        for (int h = 0; h < H; h++) {
            int lo = win[2 * f], hi = win[2 * f + 1];
            const double *left = lo >= 1 ? P + ((lo - 1) * H + h) * HD * HD : s0 + h * HD * HD;
            const double *right =
                hi + 1 <= F - 1 ? R + ((hi + 1) * H + h) * HD * HD : s0 + h * HD * HD;
            for (int l = 0; l < HD; l++) {
                double pl = 1, pr = 1;
                for (int u = lo < 0 ? 0 : lo; u <= f; u++)
                    pl *= alpha[u * C + h * HD + l];
                for (int u = f; u <= (hi < F - 1 ? hi : F - 1); u++)
                    pr *= alpha[u * C + h * HD + l];
                for (int i = 0; i < HD; i++)
                    sl[((f * H + h) * HD + i) * HD + l] =
                        left[i * HD + l] * pl + right[i * HD + l] * pr;
            }
        }
    get64(Sl, out), near(out, sl, nmat * HD * HD, 1e-12, "gather");

    /* readout */
    vdn_tensor *r = t_new(st, nmat * S, HD);
    CHECK(vdn_op_vda_readout(r, Sl, tqt, nmat) == 0, "%s", vdn_dev_error(D));
    static double rr[F * H * S * HD];
    for (int m = 0; m < nmat; m++)
        for (int s = 0; s < S; s++)
            for (int i = 0; i < HD; i++) {
                double acc = 0;
                for (int k = 0; k < HD; k++)
                    acc += sl[(m * HD + i) * HD + k] * qt[(m * S + s) * HD + k];
                rr[(m * S + s) * HD + i] = acc;
            }
    get64(r, out), near(out, rr, nmat * S * HD, 1e-12, "readout");

    /* epilogue into a column view of a wider output, gate from a view */
    static double g[F * S * 2 * C], wn[HD], ep[F * S * C];
    vdn_tensor *tg = t_rand(VDN_DT_F32, F * S, 2 * C, 2, 0, g),
               *twn = t_rand(VDN_DT_F32, 1, HD, 1, 0, wn);
    vdn_tensor *wide = t_new(VDN_DT_F32, F * S, C + 3);
    vdn_tensor ov = vdn_view_cols(wide, 3, C), gv = vdn_view_cols(tg, C, C);
    CHECK(vdn_op_vda_epilogue(&ov, r, twn, 1e-6, &gv, F, H) == 0, "%s", vdn_dev_error(D));
    for (int f = 0; f < F; f++)
        for (int s = 0; s < S; s++)
            for (int h = 0; h < H; h++) {
                const double *rv = rr + ((f * H + h) * S + s) * HD;
                double ss = 0;
                for (int i = 0; i < HD; i++)
                    ss += rv[i] * rv[i];
                for (int i = 0; i < HD; i++)
                    ep[(f * S + s) * C + h * HD + i] =
                        rv[i] / sqrt(ss / HD + 1e-6) * wn[i] /
                        (1 + exp(-g[(f * S + s) * 2 * C + C + h * HD + i]));
            }
    float fo[F * S * C];
    vdn_tensor_get(&ov, fo);
    for (int i = 0; i < F * S * C; i++)
        out[i] = fo[i];
    near(out, ep, F * S * C, 1e-6, "epilogue");
}

static void test_decay(void) {
    static double x[F * S * 10], u[F * C], dtb[C], alog[H];
    vdn_tensor *tx = t_rand(VDN_DT_F32, F * S, 10, 1, 0, x), *m = t_new(VDN_DT_F32, F, 10);
    CHECK(vdn_op_frame_means(m, tx, F) == 0, "%s", vdn_dev_error(D));
    double ref[F * C], out[F * C];
    for (int f = 0; f < F; f++)
        for (int c = 0; c < 10; c++) {
            double s = 0;
            for (int r = 0; r < S; r++)
                s += x[(f * S + r) * 10 + c];
            ref[f * 10 + c] = s / S;
        }
    get64(m, out), near(out, ref, F * 10, 1e-6, "frame_means");
    vdn_tensor *tu = t_rand(VDN_DT_F32, F, C, 2, 0, u), *td = t_rand(VDN_DT_F32, 1, C, 1, 0, dtb);
    vdn_tensor *tl = t_rand(VDN_DT_F32, 1, H, 1, 0, alog);
    vdn_tensor *al = t_new(vdn_vda_state_dtype(D), F, C);
    CHECK(vdn_op_alpha_finish(al, tu, td, tl) == 0, "%s", vdn_dev_error(D));
    for (int f = 0; f < F; f++)
        for (int c = 0; c < C; c++)
            ref[f * C + c] = exp(-exp(alog[c / HD]) * log1p(exp(u[f * C + c] + dtb[c])));
    get64(al, out), near(out, ref, F * C, 1e-12, "alpha_finish");
}

static void expect_err(int rc, const char *want) {
    CHECK(rc == -1 && strstr(vdn_dev_error(D), want), "want '%s', got rc %d '%s'", want, rc,
          vdn_dev_error(D));
}

static void test_errors(void) {
    const vdn_dtype st = vdn_vda_state_dtype(D);
    vdn_tensor *A = t_new(st, 2 * HD, HD), *B = t_new(st, 2 * HD, HD + 1);
    vdn_tensor *k = t_new(st, 2 * S, HD);
    expect_err(vdn_op_vda_stats(A, B, k, k, k, 2), "op vda_stats: B is F64[8,5], expected [8, 4]");
    expect_err(vdn_op_vda_stats(A, A, k, k, k, 5), "op vda_stats: A is F64[8,4], expected [20, 4]");
    vdn_tensor *w = t_new(VDN_DT_F32, 3, 2);
    expect_err(vdn_op_vda_gather(A, A, A, NULL, A, w, 2), "op vda_gather: alpha is F64[8,4]");
    /* I + A not positive definite */
    double bad[HD * HD] = {0};
    bad[0] = -2.0;
    vdn_tensor *Ab = t_new(st, HD, HD), *Jb = t_new(st, HD, HD);
    vdn_tensor_set(Ab, bad, VDN_DT_F64);
    expect_err(vdn_op_vda_solve(NULL, Jb, Ab, Ab, NULL, 0),
               "op vda_solve: I + A is not positive definite at matrix 0");
    /* a backend without the family */
    static vdn_dev_backend plain;
    plain = vdn_cpu_dev_backend;
    plain.name = "cpu-plain";
    plain.vda = NULL;
    vdn_dev_backend_register(&plain);
    char err[256];
    vdn_dev *d2 = vdn_dev_open("cpu-plain", 0, 1, err, sizeof err);
    CHECK(d2 != NULL, "%s", err);
    vdn_tensor *x = vdn_tensor_new2(d2, VDN_DT_F32, 4, 3),
               *m = vdn_tensor_new2(d2, VDN_DT_F32, 2, 3);
    CHECK(vdn_op_frame_means(m, x, 2) == -1 &&
              strstr(vdn_dev_error(d2), "op frame_means: not implemented on backend cpu-plain"),
          "%s", vdn_dev_error(d2));
    CHECK(vdn_vda_state_dtype(d2) == VDN_DT_F32);
    vdn_tensor_free(x);
    vdn_tensor_free(m);
    vdn_dev_close(d2);
}

int main(void) {
    char err[256];
    D = vdn_dev_open("cpu", 0, 2, err, sizeof err);
    if (!D) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    test_prep();
    test_branch_ops();
    test_decay();
    test_errors();
    for (int i = 0; i < n_held; i++)
        vdn_tensor_free(held[i]);
    vdn_dev_close(D);
    return test_done("test_op_vda");
}
