/* VDA invariants, and the whole linear branch as the DiT runs it (dit_vda.c over the CPU op
 * layer) against an independent float64 reference. */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "dit_internal.h"
#include "ops.h"
#include "host_weights.h"
#include "vda.h"
#include "vdn_util.h"

/* The linear branch's reference math in float64, which only this test uses: statistics of a
 * frame, both scans and the boundary gather (spec 5.3). The DiT runs these through the op layer
 * (dit_vda.c, op_vda.h), checked below against ref_branch. */
/* A_h = sum_r beta_rh k_rh k_rh^T (symmetrised), B_h = sum_r beta_rh v_rh k_rh^T over n rows.
 * k, v: (n, H*d) rows; beta: (n, H). A, B: (H, d, d). */
static void ref_vda_stats(double *A, double *B, const float *k, const float *v, const float *beta,
                          int n, int H, int d) {
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

/* Forward P_t = P_{t-1} T_t + J_t from P_{-1} = S0; reverse R_t = R_{t+1} T_t + J_t from
 * R_{F} = S0. T, J, P, R: (F, H, d, d); S0: (H, d, d). */
static void ref_vda_scans(double *P, double *R, const double *T, const double *J, const double *S0,
                          int F, int H, int d) {
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

/* Boundary gather with the alpha bridge (spec 5.3) for query frame t (0..F-1) with rebased,
 * unclamped window [lo, hi]: S = P_{lo-1} (or S0) * prod_{max(lo,0)..t} alpha
 *                               + R_{hi+1} (or S0) * prod_{t..min(hi,F-1)} alpha (along d_k).
 * alpha: (F, H, d). out: (H, d, d). */
static void ref_vda_gather(double *out, const double *P, const double *R, const double *S0,
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

/* Gauss-Jordan inverse with partial pivoting, float64 (the independent solver). */
static void gj_inverse(double *inv, const double *a, int d) {
    double m[32 * 64];
    for (int i = 0; i < d; i++)
        for (int j = 0; j < 2 * d; j++)
            m[i * 2 * d + j] = j < d ? a[i * d + j] : (j - d == i);
    for (int c = 0; c < d; c++) {
        int p = c;
        for (int r = c + 1; r < d; r++)
            if (fabs(m[r * 2 * d + c]) > fabs(m[p * 2 * d + c])) p = r;
        for (int j = 0; j < 2 * d; j++) {
            double t = m[c * 2 * d + j];
            m[c * 2 * d + j] = m[p * 2 * d + j];
            m[p * 2 * d + j] = t;
        }
        double pv = m[c * 2 * d + c];
        for (int j = 0; j < 2 * d; j++)
            m[c * 2 * d + j] /= pv;
        for (int r = 0; r < d; r++)
            if (r != c) {
                double f = m[r * 2 * d + c];
                for (int j = 0; j < 2 * d; j++)
                    m[r * 2 * d + j] -= f * m[c * 2 * d + j];
            }
    }
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            inv[i * d + j] = m[i * 2 * d + d + j];
}

static void unit(double *k, int d) {
    double s = 0;
    for (int i = 0; i < d; i++)
        k[i] = rnd(), s += k[i] * k[i];
    for (int i = 0; i < d; i++)
        k[i] /= sqrt(s);
}

/* A = sum beta k k^T over n random unit keys (some repeated: correlated keys) */
static void random_gram(double *A, int n, int d) {
    memset(A, 0, sizeof(double) * d * d);
    double k[32], kprev[32];
    for (int r = 0; r < n; r++) {
        if (r % 3 == 2)
            memcpy(k, kprev, sizeof k);
        else
            unit(k, d);
        memcpy(kprev, k, sizeof k);
        double b = 0.5 + 0.5 * rnd();
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                A[i * d + j] += b * k[i] * k[j];
    }
}

static void test_cholesky(void) {
    int d = 16;
    double A[256], M[256], G[256], IA[256];
    for (int trial = 0; trial < 5; trial++) {
        random_gram(A, 3 + 20 * trial, d);
        CHECK(vdn_chol_inverse(M, A, d) == 0, "cholesky failed on PSD input");
        for (int i = 0; i < d * d; i++)
            IA[i] = A[i] + (i % (d + 1) == 0);
        gj_inverse(G, IA, d);
        double e = 0, n = 0;
        for (int i = 0; i < d * d; i++)
            e += (M[i] - G[i]) * (M[i] - G[i]), n += G[i] * G[i];
        CHECK(sqrt(e / n) < 1e-12, "chol inverse vs gauss-jordan %g", sqrt(e / n));
    }
    for (int i = 0; i < d * d; i++)
        A[i] = (i % (d + 1) == 0) ? -2.0 : 0.0; /* I + A = -I */
    CHECK(vdn_chol_inverse(M, A, d) == -1, "non-PD input must be refused");
}

/* ||Diag(a)(I+A)^-1||_2 <= 1 (paper Prop. 1) by power iteration on T^T T */
static void test_nonexpansive(void) {
    int d = 12;
    double A[144], B[144], T[144], J[144], alpha[12];
    for (int trial = 0; trial < 20; trial++) {
        random_gram(A, 1 + trial * 7, d);
        memset(B, 0, sizeof B);
        for (int i = 0; i < d; i++)
            alpha[i] = 0.5 + 0.5 * fabs(rnd());
        if (trial == 0)
            for (int i = 0; i < d; i++)
                alpha[i] = 1.0;
        CHECK(vdn_vda_transition(T, J, A, B, alpha, d, 0, 4) == 0, "transition");
        double x[12], y[12], z[12], lam = 0;
        for (int i = 0; i < d; i++)
            x[i] = rnd();
        for (int it = 0; it < 500; it++) {
            for (int i = 0; i < d; i++) { /* y = T x, z = T^T y */
                y[i] = 0;
                for (int j = 0; j < d; j++)
                    y[i] += T[i * d + j] * x[j];
            }
            for (int j = 0; j < d; j++) {
                z[j] = 0;
                for (int i = 0; i < d; i++)
                    z[j] += T[i * d + j] * y[i];
            }
            double nz = 0;
            for (int i = 0; i < d; i++)
                nz += z[i] * z[i];
            nz = sqrt(nz);
            lam = nz;
            for (int i = 0; i < d; i++)
                x[i] = z[i] / nz;
        }
        CHECK(sqrt(lam) <= 1.0 + 1e-9, "||T||_2 = %.12f > 1", sqrt(lam));
    }
}

/* One token per frame: (I + b k k^T)^-1 = I - b/(1+b) k k^T for unit k, so the frame update is the
 * token delta rule S = S Diag(a) + b'(v - S Diag(a) k) k^T with b' = b/(1+b). */
static void test_one_token(void) {
    int d = 8, H = 1, F = 6;
    float kf[6 * 8], vf[6 * 8], bf[6];
    double alpha[6 * 8], A[6 * 64], B[6 * 64], T[6 * 64], J[6 * 64], P[6 * 64], R[6 * 64], S0[64];
    for (int t = 0; t < F; t++) {
        double k[8];
        unit(k, d);
        for (int i = 0; i < d; i++)
            kf[t * d + i] = (float)k[i], vf[t * d + i] = (float)rnd();
        bf[t] = (float)(0.2 + 0.7 * fabs(rnd()));
        for (int i = 0; i < d; i++)
            alpha[t * d + i] = 0.6 + 0.4 * fabs(rnd());
    }
    for (int i = 0; i < 64; i++)
        S0[i] = rnd();
    for (int t = 0; t < F; t++) {
        ref_vda_stats(A + t * 64, B + t * 64, kf + t * d, vf + t * d, bf + t, 1, H, d);
        vdn_vda_transition(T + t * 64, J + t * 64, A + t * 64, B + t * 64, alpha + t * d, d, 0, 1);
    }
    ref_vda_scans(P, R, T, J, S0, F, H, d);
    double S[64], Sb[64];
    memcpy(S, S0, sizeof S);
    double worst = 0;
    for (int t = 0; t < F; t++) {
        double b = bf[t] / (1.0 + bf[t]);
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                Sb[i * d + j] = S[i * d + j] * alpha[t * d + j];
        for (int i = 0; i < d; i++) {
            double pred = 0;
            for (int j = 0; j < d; j++)
                pred += Sb[i * d + j] * kf[t * d + j];
            for (int j = 0; j < d; j++)
                S[i * d + j] = Sb[i * d + j] + b * (vf[t * d + i] - pred) * kf[t * d + j];
        }
        for (int i = 0; i < 64; i++)
            worst = fmax(worst, fabs(S[i] - P[t * 64 + i]));
    }
    CHECK(worst < 1e-5, "one-token VDA vs token delta rule: max diff %g", worst);
}

static void test_scans_gather(void) {
    int d = 4, H = 2, F = 9;
    size_t fs = (size_t)H * d * d;
    double T[9 * 32], J[9 * 32], S0[32], P[9 * 32], R[9 * 32], alpha[9 * 8], out[32];
    for (size_t i = 0; i < F * fs; i++)
        T[i] = 0.5 * rnd(), J[i] = rnd();
    for (size_t i = 0; i < fs; i++)
        S0[i] = rnd();
    for (int i = 0; i < F * H * d; i++)
        alpha[i] = 0.3 + 0.7 * fabs(rnd());
    ref_vda_scans(P, R, T, J, S0, F, H, d);
    double worst = 0;
    for (int h = 0; h < H; h++) { /* step recurrence, written per element */
        double s[16], n[16];
        for (int back = 0; back < 2; back++) { /* the forward scan P, then the backward scan R */
            const double *want = back ? R : P;
            memcpy(s, S0 + h * 16, sizeof s);
            for (int k = 0; k < F; k++) {
                int t = back ? F - 1 - k : k;
                for (int i = 0; i < d; i++)
                    for (int j = 0; j < d; j++) {
                        n[i * d + j] = J[t * fs + h * 16 + i * d + j];
                        for (int l = 0; l < d; l++)
                            n[i * d + j] += s[i * d + l] * T[t * fs + h * 16 + l * d + j];
                    }
                memcpy(s, n, sizeof s);
                for (int i = 0; i < 16; i++)
                    worst = fmax(worst, fabs(s[i] - want[t * fs + h * 16 + i]));
            }
        }
    }
    CHECK(worst < 1e-12, "scans vs step recurrence %g", worst);
    /* gather vs a naive bridge: multiply the decays in one frame at a time */
    worst = 0;
    int cases[][3] = {{4, 2, 6}, {0, -3, 2}, {8, 5, 12}, {3, -1, 11}, {6, 6, 6}};
    for (int c = 0; c < 5; c++) {
        int t = cases[c][0], lo = cases[c][1], hi = cases[c][2];
        ref_vda_gather(out, P, R, S0, alpha, F, H, d, t, lo, hi);
        for (int h = 0; h < H; h++)
            for (int i = 0; i < d; i++)
                for (int j = 0; j < d; j++) {
                    double l = lo - 1 >= 0 ? P[(lo - 1) * fs + h * 16 + i * d + j]
                                           : S0[h * 16 + i * d + j];
                    double r = hi + 1 <= F - 1 ? R[(hi + 1) * fs + h * 16 + i * d + j]
                                               : S0[h * 16 + i * d + j];
                    for (int u = lo < 0 ? 0 : lo; u <= t; u++)
                        l *= alpha[(u * H + h) * d + j];
                    for (int u = t; u <= (hi > F - 1 ? F - 1 : hi); u++)
                        r *= alpha[(u * H + h) * d + j];
                    worst = fmax(worst, fabs(l + r - out[h * 16 + i * d + j]));
                }
    }
    CHECK(worst < 1e-12, "gather vs naive bridge %g", worst);
    /* text state counted once: no video on either side and alpha = 1 -> S0 + S0 = S_text */
    for (int i = 0; i < F * H * d; i++)
        alpha[i] = 1.0;
    ref_vda_gather(out, P, R, S0, alpha, F, H, d, 3, -5, 9);
    worst = 0;
    for (size_t i = 0; i < fs; i++)
        worst = fmax(worst, fabs(out[i] - 2 * S0[i]));
    CHECK(worst < 1e-15, "both sides missing must read S0 + S0 = S_text once, diff %g", worst);
}

static void test_window_plan(void) {
    vdn_config c = {0};
    c.has_vdn = 1, c.chunk = 5, c.radius = 1, c.anchors_both = 1, c.softmax_gate = 1;
    for (int F = 1; F <= 10; F++)
        CHECK(vdn_attn_plan_make(&c, VDN_ATTN_HYBRID, F).bypass == 1, "F=%d must bypass", F);
    vdn_attn_plan p = vdn_attn_plan_make(&c, VDN_ATTN_HYBRID, 11);
    CHECK(!p.bypass && p.linear && p.window && p.anchors && p.skip_ends && p.softmax_gate,
          "F=11 hybrid");
    p = vdn_attn_plan_make(&c, VDN_ATTN_NO_ANCHORS, 23);
    CHECK(p.linear && !p.anchors && !p.skip_ends, "no-anchors plan");
    p = vdn_attn_plan_make(&c, VDN_ATTN_WINDOW_ONLY, 23);
    CHECK(!p.linear && p.window && p.softmax_gate, "window-only plan");
    p = vdn_attn_plan_make(&c, VDN_ATTN_ADDITIVE, 23);
    CHECK(p.linear && p.additive, "additive plan");
    p = vdn_attn_plan_make(&c, VDN_ATTN_DENSE, 23);
    CHECK(!p.linear && !p.window && !p.softmax_gate, "dense plan");
    int lo, hi;
    vdn_window_bounds(&c, 0, &lo, &hi);
    CHECK(lo == -5 && hi == 9, "frame 0 window [%d,%d]", lo, hi);
    vdn_window_bounds(&c, 101, &lo, &hi);
    CHECK(lo == 95 && hi == 109, "frame 101 window [%d,%d]", lo, hi);
    /* density at the H3 workload as bench/h3_peers.py counts it: text 512, audio 575 rows,
     * 102 frames x 1008 tokens, over the whole N x N */
    vdn_layout L = {0};
    int S = 1008, F = 102;
    L.n_text = 512, L.cond_start = 512, L.audio_start = 512, L.n_audio = 575;
    L.video_start = 512 + 575, L.frames = F, L.tokens_per_frame = S, L.n_video = F * S;
    L.n_rows = L.video_start + L.n_video;
    p = vdn_attn_plan_make(&c, VDN_ATTN_HYBRID, F);
    double N = L.n_rows, glob = L.video_start, kept = 2 * glob * N - glob * glob, peer = kept;
    for (int fq = 0; fq < F; fq++)
        for (int fk = 0; fk < F; fk++) {
            kept += (double)S * S *
                    vdn_attn_keep(&c, &p, &L, L.video_start + fq * S, L.video_start + fk * S);
            int g = fq == 0 || fq == F - 1 || fk == 0 || fk == F - 1; /* peers' mask_mod */
            peer += (double)S * S * (g || abs(fq / 5 - fk / 5) <= 1);
        }
    double dens = kept / (N * N);
    CHECK(kept == peer, "mask differs from the peers' mask_mod");
    CHECK(dens > 0.194 && dens < 0.200, "window+anchor density %.4f", dens);
    printf("window+anchors density at 102 frames: %.2f%% (peers: 19.5%%)\n", 100 * dens);
}

/* ---- whole branch vs an independent naive float64 implementation ---- */

static double silu(double x) {
    return x / (1 + exp(-x));
}

static void ref_branch(double *out, const float *x, const float *qr, const float *kr,
                       const float *vr, const vdn_layout *L, const vdn_attn_plan *p,
                       const vdn_config *c, const vdn_vda_weights *w) {
    int H = c->heads, d = c->head_dim, C = H * d, hid = c->hidden, S = L->tokens_per_frame;
    int f0 = p->skip_ends, Fp = L->frames - 2 * f0, gh = L->grid_h, gw = L->grid_w;
    memset(out, 0, sizeof(double) * L->n_video * C);
    static double k[4096 * 8], v[4096 * 8], q[4096 * 8], beta[4096], al[64 * 8];
    /* features: 3D separable conv written as one loop nest */
    for (int f = 0; f < Fp; f++)
        for (int s = 0; s < S; s++)
            for (int ch = 0; ch < C; ch++) {
                double ak = 0, av = 0;
                for (int dt = 0; dt < 5; dt++) {
                    int ff = f + dt - 2;
                    if (ff < 0 || ff >= Fp) continue;
                    for (int i = 0; i < 5; i++)
                        for (int j = 0; j < 5; j++) {
                            int y = s / gw + i - 2, xx = s % gw + j - 2;
                            if (y < 0 || y >= gh || xx < 0 || xx >= gw) continue;
                            size_t src =
                                ((size_t)L->video_start + (ff + f0) * S + y * gw + xx) * C + ch;
                            ak += w->k_tm[ch * 5 + dt] * w->k_sp[ch * 25 + i * 5 + j] * kr[src];
                            av += w->v_tm[ch * 5 + dt] * w->v_sp[ch * 25 + i * 5 + j] * vr[src];
                        }
                }
                size_t r = (size_t)f * S + s;
                k[r * C + ch] = silu(ak);
                v[r * C + ch] = silu(av);
                q[r * C + ch] = silu(qr[((size_t)L->video_start + (f + f0) * S + s) * C + ch]);
            }
    for (int r = 0; r < Fp * S; r++)
        for (int h = 0; h < H; h++) {
            double nk = 0, nq = 0;
            for (int i = 0; i < d; i++)
                nk += k[r * C + h * d + i] * k[r * C + h * d + i],
                    nq += q[r * C + h * d + i] * q[r * C + h * d + i];
            for (int i = 0; i < d; i++)
                k[r * C + h * d + i] /= fmax(sqrt(nk), 1e-6),
                    q[r * C + h * d + i] /= fmax(sqrt(nq), 1e-6);
            double z = 0;
            const float *xr = x + ((size_t)L->video_start + f0 * S + r) * hid;
            for (int i = 0; i < hid; i++)
                z += w->beta_w[h * hid + i] * xr[i];
            beta[r * H + h] = 1 / (1 + exp(-z));
        }
    for (int f = 0; f < Fp; f++) { /* alpha from the frame mean */
        double m[64], dn[16];
        for (int i = 0; i < hid; i++) {
            m[i] = 0;
            for (int s = 0; s < S; s++)
                m[i] += x[((size_t)L->video_start + (f + f0) * S + s) * hid + i] / S;
        }
        for (int a = 0; a < c->alpha_rank; a++) {
            dn[a] = 0;
            for (int i = 0; i < hid; i++)
                dn[a] += w->alpha_down[a * hid + i] * m[i];
        }
        for (int ch = 0; ch < C; ch++) {
            double u = w->dt_bias[ch];
            for (int a = 0; a < c->alpha_rank; a++)
                u += w->alpha_up[ch * c->alpha_rank + a] * dn[a];
            al[f * C + ch] = exp(-exp(w->A_log[ch / d]) * log(1 + exp(u)));
        }
    }
    /* text state from the prompt rows, one chunk: S_text = B (I + A)^-1 */
    static double S0[8][16], Pf[64][8][16], Rf[64][8][16];
    for (int h = 0; h < H; h++) {
        double A[16] = {0}, B[16] = {0}, IA[16], M[16];
        for (int r = 0; r < L->n_text; r++) {
            double kk[4], vv[4], nk = 0, z = 0;
            for (int i = 0; i < d; i++)
                kk[i] = silu(kr[r * C + h * d + i]), vv[i] = silu(vr[r * C + h * d + i]),
                nk += kk[i] * kk[i];
            for (int i = 0; i < d; i++)
                kk[i] /= fmax(sqrt(nk), 1e-6);
            for (int i = 0; i < hid; i++)
                z += w->beta_w[h * hid + i] * x[r * hid + i];
            double b = 1 / (1 + exp(-z));
            for (int i = 0; i < d; i++)
                for (int j = 0; j < d; j++)
                    A[i * d + j] += b * kk[i] * kk[j], B[i * d + j] += b * vv[i] * kk[j];
        }
        for (int i = 0; i < 16; i++)
            IA[i] = A[i] + (i % 5 == 0);
        gj_inverse(M, IA, d);
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++) {
                double s = 0;
                for (int l = 0; l < d; l++)
                    s += B[i * d + l] * M[l * d + j];
                S0[h][i * d + j] = 0.5 * s;
            }
    }
    /* scans with the normal-equation form S_new = (S Diag(a) + B)(I + A)^-1 */
    for (int dir = 0; dir < 2; dir++)
        for (int h = 0; h < H; h++) {
            double Sc[16];
            memcpy(Sc, S0[h], sizeof Sc);
            for (int n = 0; n < Fp; n++) {
                int f = dir == 0 ? n : Fp - 1 - n;
                double A[16] = {0}, B[16] = {0}, IA[16], M[16], X[16];
                for (int s = 0; s < S; s++) {
                    size_t r = (size_t)f * S + s;
                    for (int i = 0; i < d; i++)
                        for (int j = 0; j < d; j++) {
                            A[i * d + j] +=
                                beta[r * H + h] * k[r * C + h * d + i] * k[r * C + h * d + j];
                            B[i * d + j] +=
                                beta[r * H + h] * v[r * C + h * d + i] * k[r * C + h * d + j];
                        }
                }
                for (int i = 0; i < 16; i++)
                    IA[i] = A[i] + (i % 5 == 0);
                gj_inverse(M, IA, d);
                for (int i = 0; i < d; i++)
                    for (int j = 0; j < d; j++)
                        X[i * d + j] = Sc[i * d + j] * al[f * C + h * d + j] + B[i * d + j];
                for (int i = 0; i < d; i++)
                    for (int j = 0; j < d; j++) {
                        double s = 0;
                        for (int l = 0; l < d; l++)
                            s += X[i * d + l] * M[l * d + j];
                        Sc[i * d + j] = s;
                    }
                memcpy(dir == 0 ? Pf[f][h] : Rf[f][h], Sc, sizeof Sc);
            }
        }
    for (int f = 0; f < Fp; f++) {
        int cchunk = (f + f0) / 5, lo = (cchunk - 1) * 5 - f0, hi = (cchunk + 2) * 5 - 1 - f0;
        for (int h = 0; h < H; h++) {
            double St[16];
            for (int i = 0; i < d; i++)
                for (int j = 0; j < d; j++) {
                    double l = lo >= 1 ? Pf[lo - 1][h][i * d + j] : S0[h][i * d + j];
                    double r = hi + 1 <= Fp - 1 ? Rf[hi + 1][h][i * d + j] : S0[h][i * d + j];
                    for (int u = lo > 0 ? lo : 0; u <= f; u++)
                        l *= al[u * C + h * d + j];
                    for (int u = f; u <= (hi < Fp - 1 ? hi : Fp - 1); u++)
                        r *= al[u * C + h * d + j];
                    St[i * d + j] = l + r;
                }
            for (int s = 0; s < S; s++) {
                size_t r = (size_t)f * S + s, row = (size_t)(f + f0) * S + s;
                double o[4], ss = 0;
                for (int i = 0; i < d; i++) {
                    o[i] = 0;
                    for (int j = 0; j < d; j++)
                        o[i] += St[i * d + j] * q[r * C + h * d + j];
                    ss += o[i] * o[i];
                }
                const float *xr = x + ((size_t)L->video_start + row) * hid;
                for (int i = 0; i < d; i++) {
                    double g = w->gate_up_b[h * d + i];
                    for (int a = 0; a < c->gate_rank; a++) {
                        double gd = 0;
                        for (int e = 0; e < hid; e++)
                            gd += w->gate_down[a * hid + e] * xr[e];
                        g += w->gate_up[(h * d + i) * c->gate_rank + a] * gd;
                    }
                    out[row * C + h * d + i] =
                        o[i] / sqrt(ss / d + 1e-6) * w->norm_w[i] / (1 + exp(-g));
                }
            }
        }
    }
}

/* The branch of dit_vda.c on the CPU op layer, from the host arrays of test_branch: the fused
 * projection [q | k | v | gate_down | softmax gate | beta] and the modulated input as the block
 * leaves them, to_out_linear = [I; 0] so the block output's first C columns are the branch
 * output itself. out: (n_video, C), zero rows for frames outside the branch. */
static int dit_branch(float *out, const float *x, const float *q, const float *k, const float *v,
                      const vdn_layout *L, const vdn_attn_plan *p, const vdn_config *cfg,
                      const vdn_vda_weights *vw) {
    char err[256];
    vdn_dev *d = vdn_dev_open("cpu", 0, 2, err, sizeof err);
    VDN_ASSERT(d);
    vdn_config c = *cfg;
    c.ffn = 4, c.freq_dim = 2, c.time_hidden = 2, c.time_embed_dim = 2; /* scratch sizes only */
    const int H = c.heads, hd = c.head_dim, C = H * hd, hid = c.hidden, n = L->n_rows;
    const int G = c.gate_rank, R = c.alpha_rank;
    vdn_dit_weights w = {0};
    w.cfg = c, w.dev = d;
    w.col_gate_down = 3 * C, w.col_sgate = 3 * C + G, w.col_beta = 3 * C + G + H;
    w.ldq = w.ldq_refiner = 3 * C + G + 2 * H;
    vdn_tensor *held[32];
    int nh = 0;
#define T2(r, cc, host)                                                                            \
    (held[nh] = vdn_tensor_new2(d, VDN_DT_F32, r, cc),                                             \
     (host) ? (void)vdn_tensor_set(held[nh], host, VDN_DT_F32) : (void)0, held[nh++])
    float *lin_w = vdn_xcalloc((size_t)hid * C, sizeof(float));
    for (int i = 0; i < C; i++)
        lin_w[i * C + i] = 1.0f;
    vdn_dit_block b = {0};
    b.k_sp = T2(C, 25, vw->k_sp), b.v_sp = T2(C, 25, vw->v_sp);
    b.k_tm = T2(C, 5, vw->k_tm), b.v_tm = T2(C, 5, vw->v_tm);
    b.gate_up = T2(C, G, vw->gate_up), b.gate_up_b = T2(1, C, vw->gate_up_b);
    b.lin_norm = T2(1, hd, vw->norm_w), b.alpha_down = T2(R, hid, vw->alpha_down);
    b.alpha_up = T2(C, R, vw->alpha_up), b.A_log = T2(1, H, vw->A_log);
    b.dt_bias = T2(1, C, vw->dt_bias), b.to_out_linear = T2(hid, C, lin_w);
    /* the fused projection's columns as the block's linear would make them */
    float *qkv = vdn_xcalloc((size_t)n * w.ldq, sizeof(float));
    for (int r = 0; r < n; r++) {
        float *row = qkv + (size_t)r * w.ldq;
        memcpy(row, q + (size_t)r * C, sizeof(float) * C);
        memcpy(row + C, k + (size_t)r * C, sizeof(float) * C);
        memcpy(row + 2 * C, v + (size_t)r * C, sizeof(float) * C);
        for (int o = 0; o < G + H; o++) { /* gate_down rows, then beta rows (gate cols stay 0) */
            const float *wr = o < G ? vw->gate_down + o * hid : vw->beta_w + (o - G) * hid;
            double acc = 0;
            for (int i = 0; i < hid; i++)
                acc += (double)x[(size_t)r * hid + i] * wr[i];
            row[o < G ? w.col_gate_down + o : w.col_beta + (o - G)] = (float)acc;
        }
    }
    vdn_dit_seq s;
    double *pos = vdn_xcalloc((size_t)n * 3, sizeof(double));
    int rc = vdn_dit_seq_init(&s, d, &c, L, p, pos);
    vdn_dit_buffers *buf = rc == 0 ? vdn_dit_buffers_new(&w, &s, NULL, NULL) : NULL;
    if (buf) {
        vdn_tensor_set(buf->qkv, qkv, VDN_DT_F32);
        vdn_tensor_set(buf->h, x, VDN_DT_F32);
        vdn_tensor_fill(buf->y, 0.0);
        rc = vdn_dit_vda_branch(&w, &b, &s, buf);
        float *y = vdn_xmalloc(sizeof(float) * (size_t)n * hid);
        vdn_tensor_get(buf->y, y);
        for (int r = 0; r < L->n_video; r++)
            memcpy(out + (size_t)r * C, y + ((size_t)L->video_start + r) * hid, sizeof(float) * C);
        free(y);
    }
    if (rc) fprintf(stderr, "dit branch: %s\n", vdn_dev_error(d));
    vdn_dit_buffers_free(buf);
    vdn_dit_seq_free(&s);
    for (int i = 0; i < nh; i++)
        vdn_tensor_free(held[i]);
#undef T2
    free(lin_w), free(qkv), free(pos);
    vdn_dev_close(d);
    return rc ? -1 : 0;
}

static void test_branch(void) {
    vdn_config c = {0};
    c.hidden = 12, c.heads = 2, c.head_dim = 4, c.has_vdn = 1, c.chunk = 5, c.radius = 1;
    c.anchors_both = 1, c.text_state = 1, c.linear_head_dim = 4, c.alpha_rank = 3, c.gate_rank = 3;
    c.conv_spatial = 5, c.conv_temporal = 5, c.linear_norm_eps = 1e-6f, c.text_state_scale = 0.5f;
    int C = 8, hid = 12;
    vdn_layout L = {0};
    L.n_text = 5, L.cond_start = 5, L.audio_start = 5, L.n_audio = 4, L.video_start = 9;
    L.frames = 13, L.grid_h = 2, L.grid_w = 3, L.tokens_per_frame = 6, L.n_video = 78;
    L.n_rows = 87;
    static float x[87 * 12], q[87 * 8], k[87 * 8], v[87 * 8], out[78 * 8];
    static float ksp[8 * 25], vsp[8 * 25], ktm[8 * 5], vtm[8 * 5], bw[2 * 12], ad[3 * 12],
        au[8 * 3];
    static float Al[2], dtb[8], gdn[3 * 12], gup[8 * 3], gub[8], nw[4];
    fill(x, 87 * 12, 1), fill(q, 87 * 8, 1), fill(k, 87 * 8, 1), fill(v, 87 * 8, 1);
    fill(ksp, 200, 0.4), fill(vsp, 200, 0.4), fill(ktm, 40, 0.6), fill(vtm, 40, 0.6);
    fill(bw, 24, 1), fill(ad, 36, 1), fill(au, 24, 1), fill(Al, 2, 1), fill(dtb, 8, 1);
    fill(gdn, 36, 1), fill(gup, 24, 1), fill(gub, 8, 1), fill(nw, 4, 1);
    vdn_vda_weights w = {ksp, vsp, ktm, vtm, bw, ad, au, Al, dtb, gdn, gup, gub, nw};
    static double ref[78 * 8];
    for (int anchors = 1; anchors >= 0; anchors--) {
        vdn_attn_plan p =
            vdn_attn_plan_make(&c, anchors ? VDN_ATTN_HYBRID : VDN_ATTN_NO_ANCHORS, 13);
        CHECK(dit_branch(out, x, q, k, v, &L, &p, &c, &w) == 0, "the DiT's branch failed");
        ref_branch(ref, x, q, k, v, &L, &p, &c, &w);
        CHECK_REL(ref, out, 78 * 8, 1e-5,
                  anchors ? "VDA branch (anchors, skip_ends)" : "VDA branch (no anchors)");
        if (anchors) {
            int nz = 0;
            for (int i = 0; i < 6 * 8; i++)
                nz += out[i] != 0 || out[(12 * 6) * 8 + i] != 0;
            CHECK(nz == 0, "anchor frames must get exact zeros (%d nonzero)", nz);
        }
    }
    /* additive rule: T = Diag(a)(I - A/S), J = B/sqrt(S) */
    double A[16], B[16], T[16], J[16], a[4] = {0.9, 0.8, 0.7, 1.0};
    random_gram(A, 6, 4);
    for (int i = 0; i < 16; i++)
        B[i] = rnd();
    vdn_vda_transition(T, J, A, B, a, 4, 1, 6);
    double worst = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            worst = fmax(worst, fabs(T[i * 4 + j] - a[i] * ((i == j) - A[i * 4 + j] / 6)));
            worst = fmax(worst, fabs(J[i * 4 + j] - B[i * 4 + j] / sqrt(6.0)));
        }
    CHECK(worst < 1e-14, "additive transition %g", worst);
    (void)C, (void)hid;
}

int main(void) {
    test_cholesky();
    test_nonexpansive();
    test_one_token();
    test_scans_gather();
    test_window_plan();
    test_branch();
    return test_done("test_vda");
}
