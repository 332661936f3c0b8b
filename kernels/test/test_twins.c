/* The CPU twins against float64 references written independently here, on random inputs.
 * Always runs (no GPU needed): the twins are what the GPU kernels are checked against. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twin.h"
#include "vdn_util.h"

static int failures;
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* xorshift64*, uniform in [0,1) */
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static float nrand(void) {
    double u = urand() + 1e-12, v = urand();
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}
static float *randv(size_t n, float sc) { /* bf16-exact random values */
    float *a = vdn_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        a[i] = vdn_round_bf16(nrand() * sc);
    return a;
}
static double relerr(const float *out, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(out[i])) return INFINITY;
        num += (out[i] - ref[i]) * (out[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1e-300));
}
static void check(const char *what, double err, double tol) {
    int ok = err <= tol;
    printf("%-40s rel err %.3e (tol %.0e) %s\n", what, err, tol, ok ? "ok" : "FAIL");
    if (!ok) failures++;
}

static void test_norms(void) {
    int rows = 37, W = 96, T = 5;
    float *x = randv((size_t)rows * W, 1.5f), *w = randv(W, 1.f),
          *tab = randv((size_t)T * 3 * W, .3f);
    int idx[37];
    for (int r = 0; r < rows; r++)
        idx[r] = (int)(urand() * T);
    float *out = vdn_xmalloc(sizeof(float) * rows * W);
    double *ref = vdn_xmalloc(sizeof(double) * rows * W);
    twin_rmsnorm_modulate(x, w, tab, tab + W, idx, 3 * W, rows, W, 1e-5f, out);
    for (int r = 0; r < rows; r++) {
        double ms = 0;
        for (int c = 0; c < W; c++)
            ms += (double)x[r * W + c] * x[r * W + c];
        ms = 1.0 / sqrt(ms / W + 1e-5);
        for (int c = 0; c < W; c++)
            ref[r * W + c] = x[r * W + c] * ms * w[c] * (1.0 + tab[idx[r] * 3 * W + W + c]) +
                             tab[idx[r] * 3 * W + c];
    }
    check("rmsnorm+modulate", relerr(out, ref, (size_t)rows * W), 1e-2);

    float *y = randv((size_t)rows * W, 1.f), *x2 = vdn_xmalloc(sizeof(float) * rows * W);
    memcpy(x2, x, sizeof(float) * rows * W);
    twin_gate_residual(x2, y, tab + 2 * W, idx, 3 * W, rows, W);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < W; c++)
            ref[r * W + c] =
                (double)x[r * W + c] + (double)tab[idx[r] * 3 * W + 2 * W + c] * y[r * W + c];
    check("gate+residual", relerr(x2, ref, (size_t)rows * W), 1e-2);

    float *h = randv((size_t)rows * 2 * W, 2.f);
    twin_swiglu(h, rows, W, out);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < W; c++) {
            double v = h[r * 2 * W + c], g = h[r * 2 * W + W + c];
            ref[r * W + c] = v * g / (1.0 + exp(-g));
        }
    check("swiglu", relerr(out, ref, (size_t)rows * W), 1e-2);
    free(x), free(w), free(tab), free(out), free(ref), free(y), free(x2), free(h);
}

static void test_rope(void) {
    int rows = 23, H = 3, D = 128, nf = 16, ld = 3 * H * D;
    float *in = randv((size_t)rows * ld, 1.f), *w = randv(D, 1.f), invf[16];
    for (int j = 0; j < nf; j++)
        invf[j] = (float)pow(10000.0, -2.0 * j / 32.0);
    double *pos = vdn_xmalloc(sizeof(double) * rows * 3);
    for (int i = 0; i < rows * 3; i++)
        pos[i] = urand() * 600 - 50;
    float *out = vdn_xmalloc(sizeof(float) * rows * H * D);
    double *ref = vdn_xmalloc(sizeof(double) * rows * H * D);
    twin_qknorm_rope(in + H * D, ld, pos, invf, nf, w, rows, H, D, 1e-5f, out, H * D);
    /* torch form: x*cos(cat(th,th)) + rotate_half(x)*sin(cat(th,th)) on the first 96 channels */
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < H; h++) {
            const float *x = in + (size_t)r * ld + H * D + h * D;
            double n[128], th[96], ms = 0;
            for (int d = 0; d < D; d++)
                ms += (double)x[d] * x[d];
            ms = 1.0 / sqrt(ms / D + 1e-5);
            for (int d = 0; d < D; d++)
                n[d] = x[d] * ms * w[d];
            for (int a = 0; a < 3; a++)
                for (int j = 0; j < nf; j++)
                    th[a * nf + j] = th[48 + a * nf + j] = pos[r * 3 + a] * invf[j];
            double *o = ref + (size_t)r * H * D + h * D;
            for (int d = 0; d < 96; d++) {
                double rh = d < 48 ? -n[d + 48] : n[d - 48];
                o[d] = n[d] * cos(th[d]) + rh * sin(th[d]);
            }
            for (int d = 96; d < D; d++)
                o[d] = n[d];
        }
    check("qk-norm + rope", relerr(out, ref, (size_t)rows * H * D), 1e-2);
    free(in), free(w), free(pos), free(out), free(ref);
}

/* independent statement of the VDN mask (spec 5.2) */
static int keep_ref(int q, int k, int G, int F, int S, int window, int anchors) {
    if (!window || q < G || k < G) return 1;
    int fq = (q - G) / S, fk = (k - G) / S;
    if (anchors && (fq == 0 || fq == F - 1 || fk == 0 || fk == F - 1)) return 1;
    return abs(fk / 5 - fq / 5) <= 1;
}

static void test_attention(void) {
    int G = 9, F = 13, S = 7, H = 2, D = 32, N = G + F * S, ld = 3 * H * D;
    for (int variant = 0; variant < 3; variant++) {
        int window = variant > 0, anchors = variant == 1;
        vdn_attn_rows ar;
        if (vdn_attn_rows_make(&ar, G, F, S, window, anchors, 5, 1)) {
            check("attn rows make", INFINITY, 0);
            return;
        }
        /* rule == spec mask, and tile ranges cover exactly what the rows see */
        int bad = 0;
        for (int q = 0; q < N; q++)
            for (int k = 0; k < N; k++)
                bad += vdn_attn_rows_visible(&ar, q, k) != keep_ref(q, k, G, F, S, window, anchors);
        for (int bm = 4; bm <= 64; bm *= 4) {
            int nt;
            int *tl = vdn_attn_tiles_make(&ar, bm, &nt);
            for (int t = 0; t < nt; t++) {
                int *o = tl + t * VDN_TILE_INTS;
                for (int q = t * bm; q < N && q < (t + 1) * bm; q++)
                    for (int k = 0; k < N; k++) {
                        int in = 0;
                        for (int i = 0; i < o[0]; i++)
                            in |= k >= o[2 + 2 * i] && k < o[3 + 2 * i];
                        if (vdn_attn_rows_visible(&ar, q, k) && !in) bad++;
                        if (!o[1] && in && !vdn_attn_rows_visible(&ar, q, k)) bad++;
                    }
            }
            free(tl);
        }
        double pairs = 0;
        for (int q = 0; q < N; q++)
            for (int k = 0; k < N; k++)
                pairs += keep_ref(q, k, G, F, S, window, anchors);
        bad += fabs(pairs - vdn_attn_rows_pairs(&ar)) > 0.5;
        char name[64];
        snprintf(name, sizeof name, "attn mask rule/tiles (variant %d)", variant);
        check(name, bad, 0);

        float *qkv = randv((size_t)N * ld, 1.f), *gate = vdn_xmalloc(sizeof(float) * N * H);
        for (int i = 0; i < N * H; i++)
            gate[i] = (float)urand();
        float *out = vdn_xmalloc(sizeof(float) * N * H * D);
        double *ref = vdn_xmalloc(sizeof(double) * N * H * D);
        float sc = 1.f / sqrtf((float)D);
        twin_attention(qkv, qkv + H * D, qkv + 2 * H * D, ld, N, H, D, &ar, sc, gate, out, H * D);
        for (int h = 0; h < H; h++)
            for (int q = 0; q < N; q++) {
                double s[256], m = -1e300, l = 0, acc[32] = {0};
                for (int k = 0; k < N; k++) {
                    s[k] = -1e300;
                    if (!keep_ref(q, k, G, F, S, window, anchors)) continue;
                    double d = 0;
                    for (int c = 0; c < D; c++)
                        d += (double)qkv[(size_t)q * ld + h * D + c] *
                             qkv[(size_t)k * ld + H * D + h * D + c];
                    s[k] = d * sc;
                    if (s[k] > m) m = s[k];
                }
                for (int k = 0; k < N; k++) {
                    if (s[k] <= -1e300) continue;
                    double p = exp(s[k] - m);
                    l += p;
                    for (int c = 0; c < D; c++)
                        acc[c] += p * qkv[(size_t)k * ld + 2 * H * D + h * D + c];
                }
                for (int c = 0; c < D; c++)
                    ref[(size_t)q * H * D + h * D + c] = acc[c] / l * gate[q * H + h];
            }
        snprintf(name, sizeof name, "attention (variant %d)", variant);
        check(name, relerr(out, ref, (size_t)N * H * D), 1e-2);
        free(qkv), free(gate), free(out), free(ref);
        vdn_attn_rows_free(&ar);
    }
}

/* double helpers for the VDA references */
static void inv_gauss(int n, double *a, double *inv) { /* Gauss-Jordan with partial pivoting */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            inv[i * n + j] = i == j;
    for (int c = 0; c < n; c++) {
        int p = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(a[r * n + c]) > fabs(a[p * n + c])) p = r;
        for (int j = 0; j < n; j++) {
            double t = a[c * n + j];
            a[c * n + j] = a[p * n + j];
            a[p * n + j] = t;
            t = inv[c * n + j];
            inv[c * n + j] = inv[p * n + j];
            inv[p * n + j] = t;
        }
        double d = a[c * n + c];
        for (int j = 0; j < n; j++)
            a[c * n + j] /= d, inv[c * n + j] /= d;
        for (int r = 0; r < n; r++) {
            if (r == c) continue;
            double f = a[r * n + c];
            for (int j = 0; j < n; j++)
                a[r * n + j] -= f * a[c * n + j], inv[r * n + j] -= f * inv[c * n + j];
        }
    }
}

static void test_vda(void) {
    vdn_vda_shape sh = {.frames = 12, .gh = 3, .gw = 4, .heads = 2, .hd = 16};
    int F = sh.frames, S = 12, H = 2, D = 16, C = H * D, ld = 3 * C, hidden = 40, rank = 8;
    size_t nr = (size_t)F * S, fhsd = nr * C, mats = (size_t)F * H * D * D;
    float *qkv = randv(nr * ld, 1.f), *wspk = randv((size_t)C * 25, .2f),
          *wtmk = randv((size_t)C * 5, .45f);
    float *wspv = randv((size_t)C * 25, .2f), *wtmv = randv((size_t)C * 5, .45f);
    float *beta = vdn_xmalloc(sizeof(float) * nr * H);
    for (size_t i = 0; i < nr * H; i++)
        beta[i] = (float)urand();
    float *kt = vdn_xmalloc(4 * fhsd), *kb = vdn_xmalloc(4 * fhsd), *vt = vdn_xmalloc(4 * fhsd),
          *qt = vdn_xmalloc(4 * fhsd);
    twin_vda_prep(&sh, qkv + C, qkv + 2 * C, qkv, ld, wspk, wtmk, wspv, wtmv, beta, kt, kb, vt, qt);
    /* reference prep: direct 3-D (5x5x5) separable correlation in double */
    double *rk = vdn_xmalloc(8 * fhsd), *rv = vdn_xmalloc(8 * fhsd), *rq = vdn_xmalloc(8 * fhsd);
    for (int f = 0; f < F; f++)
        for (int s = 0; s < S; s++)
            for (int h = 0; h < H; h++) {
                double kk[16], vv[16], qq[16], nk = 0, nq = 0;
                int y = s / 4, x = s % 4;
                for (int d = 0; d < D; d++) {
                    int c = h * D + d;
                    double ak = 0, av = 0;
                    for (int dt = -2; dt <= 2; dt++)
                        for (int dy = -2; dy <= 2; dy++)
                            for (int dx = -2; dx <= 2; dx++) {
                                int ff = f + dt, yy = y + dy, xx = x + dx;
                                if (ff < 0 || ff >= F || yy < 0 || yy >= 3 || xx < 0 || xx >= 4)
                                    continue;
                                size_t row = (size_t)ff * S + yy * 4 + xx;
                                double wk = (double)wtmk[c * 5 + dt + 2] *
                                            wspk[c * 25 + (dy + 2) * 5 + dx + 2];
                                double wv = (double)wtmv[c * 5 + dt + 2] *
                                            wspv[c * 25 + (dy + 2) * 5 + dx + 2];
                                ak += wk * qkv[row * ld + C + c];
                                av += wv * qkv[row * ld + 2 * C + c];
                            }
                    double qv = qkv[((size_t)f * S + s) * ld + c];
                    kk[d] = ak / (1 + exp(-ak));
                    vv[d] = av / (1 + exp(-av));
                    qq[d] = qv / (1 + exp(-qv));
                    nk += kk[d] * kk[d], nq += qq[d] * qq[d];
                }
                size_t o = (((size_t)f * H + h) * S + s) * D;
                for (int d = 0; d < D; d++)
                    rk[o + d] = kk[d] / fmax(sqrt(nk), 1e-6), rv[o + d] = vv[d],
                           rq[o + d] = qq[d] / fmax(sqrt(nq), 1e-6);
            }
    check("vda prep k (conv, silu, l2)", relerr(kt, rk, fhsd), 2e-2);
    check("vda prep v (conv, silu)", relerr(vt, rv, fhsd), 2e-2);
    check("vda prep q (silu, l2)", relerr(qt, rq, fhsd), 1e-2);

    float *A = vdn_xmalloc(4 * mats), *B = vdn_xmalloc(4 * mats);
    twin_vda_stats(&sh, kt, kb, vt, A, B);
    double *rA = vdn_xmalloc(8 * mats), *rB = vdn_xmalloc(8 * mats);
    for (int m = 0; m < F * H; m++)
        for (int i = 0; i < D; i++)
            for (int j = 0; j < D; j++) {
                double a = 0, b = 0;
                int f = m / H, h = m % H;
                for (int s = 0; s < S; s++) {
                    size_t o = (size_t)m * S * D + (size_t)s * D;
                    double bt = beta[((size_t)f * S + s) * H + h];
                    a += bt * kt[o + i] * kt[o + j];
                    b += bt * vt[o + i] * kt[o + j];
                }
                rA[(size_t)m * D * D + i * D + j] = a, rB[(size_t)m * D * D + i * D + j] = b;
            }
    check("vda stats A (beta k k^T)", relerr(A, rA, mats), 1e-2); /* kb is bf16(beta k) */
    check("vda stats B (beta v k^T)", relerr(B, rB, mats), 1e-2);

    float *alpha = vdn_xmalloc(sizeof(float) * F * C);
    for (int i = 0; i < F * C; i++)
        alpha[i] = (float)(0.5 + 0.5 * urand());
    float *T = vdn_xmalloc(4 * mats), *J = vdn_xmalloc(4 * mats);
    twin_vda_solve(F * H, D, A, B, alpha, T, J);
    double *rT = vdn_xmalloc(8 * mats), *rJ = vdn_xmalloc(8 * mats), g[256], gi[256];
    for (int m = 0; m < F * H; m++) {
        for (int i = 0; i < D * D; i++)
            g[i] = A[(size_t)m * D * D + i] + (i / D == i % D);
        inv_gauss(D, g, gi);
        for (int i = 0; i < D; i++)
            for (int j = 0; j < D; j++) {
                double t = 0;
                for (int p = 0; p < D; p++)
                    t += (double)B[(size_t)m * D * D + i * D + p] * gi[p * D + j];
                rJ[(size_t)m * D * D + i * D + j] = t;
                rT[(size_t)m * D * D + i * D + j] = alpha[(size_t)m * D + i] * gi[i * D + j];
            }
    }
    check("vda solve T = Diag(a)(I+A)^-1", relerr(T, rT, mats), 1e-4);
    check("vda solve J = B (I+A)^-1", relerr(J, rJ, mats), 1e-4);

    float *S0 = randv((size_t)H * D * D, .5f);
    float *P = vdn_xmalloc(4 * mats), *R = vdn_xmalloc(4 * mats), *Sl = vdn_xmalloc(4 * mats);
    twin_vda_scans(&sh, T, J, S0, P, R);
    double *rP = vdn_xmalloc(8 * mats), *rR = vdn_xmalloc(8 * mats), *rS = vdn_xmalloc(8 * mats);
    size_t mm = (size_t)D * D;
    for (int h = 0; h < H; h++) /* step recurrence in double from the twin's T, J */
        for (int dir = 0; dir < 2; dir++)
            for (int n = 0; n < F; n++) {
                int t = dir ? F - 1 - n : n;
                size_t o = ((size_t)t * H + h) * mm;
                double *dst = dir ? rR : rP;
                for (int i = 0; i < D; i++)
                    for (int j = 0; j < D; j++) {
                        double acc = J[o + i * D + j];
                        for (int p = 0; p < D; p++) {
                            double prev =
                                n == 0
                                    ? S0[h * mm + i * D + p]
                                    : dst[((size_t)(dir ? t + 1 : t - 1) * H + h) * mm + i * D + p];
                            acc += prev * T[o + p * D + j];
                        }
                        dst[o + i * D + j] = acc;
                    }
            }
    check("vda forward scan", relerr(P, rP, mats), 1e-4);
    check("vda reverse scan", relerr(R, rR, mats), 1e-4);

    int wlo[64], whi[64];
    vdn_vda_windows(F + 2, 1, 5, 1, wlo, whi);
    int badw = 0;
    for (int t = 0; t < F; t++) { /* original frame t+1, chunk (t+1)/5, rebased by -1 */
        int c = (t + 1) / 5;
        badw += wlo[t] != 5 * c - 6 || whi[t] != 5 * c + 8;
    }
    check("vda rebased windows", badw, 0);
    twin_vda_gather(&sh, P, R, S0, alpha, wlo, whi, Sl);
    for (int t = 0; t < F; t++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < D; i++)
                for (int j = 0; j < D; j++) {
                    int lo = wlo[t], hi = whi[t];
                    double pl = 1, pr = 1;
                    for (int u = lo < 0 ? 0 : lo; u <= t; u++)
                        pl *= alpha[((size_t)u * H + h) * D + j];
                    for (int u = t; u <= hi && u < F; u++)
                        pr *= alpha[((size_t)u * H + h) * D + j];
                    double l = lo >= 1 ? rP[((size_t)(lo - 1) * H + h) * mm + i * D + j]
                                       : S0[h * mm + i * D + j];
                    double r = hi + 1 < F ? rR[((size_t)(hi + 1) * H + h) * mm + i * D + j]
                                          : S0[h * mm + i * D + j];
                    rS[((size_t)t * H + h) * mm + i * D + j] = l * pl + r * pr;
                }
    check("vda gather + alpha bridge", relerr(Sl, rS, mats), 1e-4);

    float *gpre = randv(nr * C, 1.f), *wn = randv(D, 1.f), *out = vdn_xmalloc(4 * nr * C);
    double *ro = vdn_xmalloc(8 * nr * C);
    twin_vda_readout(&sh, Sl, qt, wn, 1e-6f, gpre, C, out);
    for (int f = 0; f < F; f++)
        for (int h = 0; h < H; h++)
            for (int s = 0; s < S; s++) {
                double r[16], ms = 0;
                for (int i = 0; i < D; i++) {
                    r[i] = 0;
                    for (int j = 0; j < D; j++)
                        r[i] += rS[((size_t)f * H + h) * mm + i * D + j] *
                                qt[(((size_t)f * H + h) * S + s) * D + j];
                    ms += r[i] * r[i];
                }
                ms = 1 / sqrt(ms / D + 1e-6);
                for (int i = 0; i < D; i++) {
                    size_t row = (size_t)f * S + s;
                    double gg = 1 / (1 + exp(-(double)gpre[row * C + h * D + i]));
                    ro[row * C + h * D + i] = r[i] * ms * wn[i] * gg;
                }
            }
    check("vda readout (rmsnorm, gate)", relerr(out, ro, nr * C), 1e-2);

    float *xh = randv(nr * hidden, 1.f), *wd = randv((size_t)rank * hidden, .2f),
          *wu = randv((size_t)C * rank, .3f);
    float Alog[2] = {0.3f, -0.7f}, *dtb = randv(C, 1.f), *al = vdn_xmalloc(4 * (size_t)F * C);
    double *ral = vdn_xmalloc(8 * (size_t)F * C);
    twin_vda_alpha(&sh, xh, hidden, wd, rank, wu, Alog, dtb, al);
    for (int f = 0; f < F; f++) {
        double m[40], d[8];
        for (int c = 0; c < hidden; c++) {
            m[c] = 0;
            for (int s = 0; s < S; s++)
                m[c] += xh[((size_t)f * S + s) * hidden + c];
            m[c] /= S;
        }
        for (int i = 0; i < rank; i++) {
            d[i] = 0;
            for (int c = 0; c < hidden; c++)
                d[i] += wd[i * hidden + c] * m[c];
        }
        for (int c = 0; c < C; c++) {
            double u = dtb[c];
            for (int i = 0; i < rank; i++)
                u += wu[c * rank + i] * d[i];
            ral[(size_t)f * C + c] = exp(-exp(Alog[c / D]) * log(1 + exp(u)));
        }
    }
    check("vda alpha (frame means, softplus)", relerr(al, ral, (size_t)F * C), 1e-4);

    free(qkv), free(wspk), free(wtmk), free(wspv), free(wtmv), free(beta), free(kt), free(kb);
    free(vt), free(qt), free(rk), free(rv), free(rq), free(A), free(B), free(rA), free(rB);
    free(alpha), free(T), free(J), free(rT), free(rJ), free(S0), free(P), free(R), free(Sl);
    free(rP), free(rR), free(rS), free(gpre), free(wn), free(out), free(ro), free(xh), free(wd);
    free(wu), free(dtb), free(al), free(ral);
}

int main(void) {
    test_norms();
    test_rope();
    test_attention();
    test_vda();
    if (failures) {
        printf("%d check(s) FAILED\n", failures);
        return 1;
    }
    printf("all twin checks passed\n");
    return 0;
}
