/* CPU twins of the VDA kernels (the VDN linear branch, spec 5.3), fp32 like the kernels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "twin.h"
#include "vdn_util.h"

static float silu(float x) {
    return x / (1.f + expf(-x));
}

/* SiLU then L2-normalise one head's vector in place (F.normalize, eps 1e-6), rounding to bf16. */
static void silu_l2(float *x, int n, int l2) {
    float ss = 0.f;
    for (int i = 0; i < n; i++) {
        x[i] = silu(x[i]);
        ss += x[i] * x[i];
    }
    float nrm = sqrtf(ss);
    float inv = l2 ? 1.f / (nrm > 1e-6f ? nrm : 1e-6f) : 1.f;
    for (int i = 0; i < n; i++)
        x[i] = vdn_round_bf16(x[i] * inv);
}

/* dst (FHSD) <- TConv(SConv(src rows)) rounded like the reference modules; no conv when wsp NULL.
 */
static void conv_kv(const vdn_vda_shape *sh, const float *src, int ld, const float *wsp,
                    const float *wtm, float *dst_rows /* [frames*S, C] */) {
    int F = sh->frames, gh = sh->gh, gw = sh->gw, S = gh * gw, C = sh->heads * sh->hd;
    if (!wsp) {
        for (int r = 0; r < F * S; r++)
            for (int c = 0; c < C; c++)
                dst_rows[(size_t)r * C + c] = src[(size_t)r * ld + c];
        return;
    }
    float *sp = vdn_xmalloc(sizeof(float) * (size_t)F * S * C);
    for (int f = 0; f < F; f++)
        for (int y = 0; y < gh; y++)
            for (int x = 0; x < gw; x++)
                for (int c = 0; c < C; c++) {
                    float a = 0.f;
                    for (int i = 0; i < 5; i++)
                        for (int j = 0; j < 5; j++) {
                            int yy = y + i - 2, xx = x + j - 2;
                            if (yy < 0 || yy >= gh || xx < 0 || xx >= gw) continue;
                            a += wsp[(size_t)c * 25 + i * 5 + j] *
                                 src[(size_t)(f * S + yy * gw + xx) * ld + c];
                        }
                    sp[(size_t)(f * S + y * gw + x) * C + c] = vdn_round_bf16(a);
                }
    for (int f = 0; f < F; f++)
        for (int s = 0; s < S; s++)
            for (int c = 0; c < C; c++) {
                float a = 0.f;
                for (int d = 0; d < 5; d++) {
                    int ff = f + d - 2;
                    if (ff < 0 || ff >= F) continue;
                    a += wtm[(size_t)c * 5 + d] * sp[(size_t)(ff * S + s) * C + c];
                }
                dst_rows[(size_t)(f * S + s) * C + c] = vdn_round_bf16(a);
            }
    free(sp);
}

void twin_vda_prep(const vdn_vda_shape *sh, const float *kraw, const float *vraw, const float *qraw,
                   int ld, const float *wsp_k, const float *wtm_k, const float *wsp_v,
                   const float *wtm_v, const float *beta, float *kt, float *kb, float *vt,
                   float *qt) {
    int F = sh->frames, S = sh->gh * sh->gw, H = sh->heads, D = sh->hd, C = H * D;
    float *kc = vdn_xmalloc(sizeof(float) * (size_t)F * S * C);
    float *vc = vdn_xmalloc(sizeof(float) * (size_t)F * S * C);
    conv_kv(sh, kraw, ld, wsp_k, wtm_k, kc);
    conv_kv(sh, vraw, ld, wsp_v, wtm_v, vc);
    float buf[1024];
    for (int f = 0; f < F; f++)
        for (int s = 0; s < S; s++)
            for (int h = 0; h < H; h++) {
                size_t row = (size_t)f * S + s;
                size_t o = (((size_t)f * H + h) * S + s) * D;
                memcpy(buf, kc + row * C + (size_t)h * D, sizeof(float) * D);
                silu_l2(buf, D, 1);
                float b = beta[row * H + h];
                for (int d = 0; d < D; d++)
                    kt[o + d] = buf[d], kb[o + d] = vdn_round_bf16(b * buf[d]);
                memcpy(buf, vc + row * C + (size_t)h * D, sizeof(float) * D);
                silu_l2(buf, D, 0);
                memcpy(vt + o, buf, sizeof(float) * D);
                if (qraw && qt) {
                    for (int d = 0; d < D; d++)
                        buf[d] = qraw[row * ld + (size_t)h * D + d];
                    silu_l2(buf, D, 1);
                    memcpy(qt + o, buf, sizeof(float) * D);
                }
            }
    free(kc);
    free(vc);
}

void twin_vda_stats(const vdn_vda_shape *sh, const float *kt, const float *kb, const float *vt,
                    float *A, float *B) {
    int F = sh->frames, S = sh->gh * sh->gw, H = sh->heads, D = sh->hd;
    for (int m = 0; m < F * H; m++) {
        const float *k = kt + (size_t)m * S * D, *b = kb + (size_t)m * S * D,
                    *v = vt + (size_t)m * S * D;
        float *a = A + (size_t)m * D * D, *bb = B + (size_t)m * D * D;
        memset(a, 0, sizeof(float) * D * D);
        memset(bb, 0, sizeof(float) * D * D);
        for (int s = 0; s < S; s++)
            for (int i = 0; i < D; i++) {
                float bi = b[(size_t)s * D + i], vi = v[(size_t)s * D + i];
                for (int j = 0; j < D; j++) {
                    a[i * D + j] += bi * k[(size_t)s * D + j];
                    bb[i * D + j] += vi * b[(size_t)s * D + j];
                }
            }
        for (int i = 0; i < D; i++)
            for (int j = 0; j < i; j++) {
                float t = 0.5f * (a[i * D + j] + a[j * D + i]);
                a[i * D + j] = a[j * D + i] = t;
            }
    }
}

void twin_vda_solve(int nmat, int hd, const float *A, const float *B, const float *alpha, float *T,
                    float *J) {
    int D = hd;
    float *L = vdn_xmalloc(sizeof(float) * D * D), *Li = vdn_xmalloc(sizeof(float) * D * D),
          *M = vdn_xmalloc(sizeof(float) * D * D);
    for (int m = 0; m < nmat; m++) {
        const float *a = A + (size_t)m * D * D;
        /* L L^T = I + A */
        memset(L, 0, sizeof(float) * D * D);
        for (int j = 0; j < D; j++) {
            float s = 1.f + a[j * D + j];
            for (int p = 0; p < j; p++)
                s -= L[j * D + p] * L[j * D + p];
            float ljj = sqrtf(s);
            L[j * D + j] = ljj;
            for (int i = j + 1; i < D; i++) {
                float t = a[i * D + j];
                for (int p = 0; p < j; p++)
                    t -= L[i * D + p] * L[j * D + p];
                L[i * D + j] = t / ljj;
            }
        }
        /* Li = L^-1 by forward substitution, column by column */
        memset(Li, 0, sizeof(float) * D * D);
        for (int c = 0; c < D; c++)
            for (int i = c; i < D; i++) {
                float t = (i == c) ? 1.f : 0.f;
                for (int p = c; p < i; p++)
                    t -= L[i * D + p] * Li[p * D + c];
                Li[i * D + c] = t / L[i * D + i];
            }
        /* M = Li^T Li */
        for (int i = 0; i < D; i++)
            for (int j = 0; j < D; j++) {
                float t = 0.f;
                for (int p = (i > j ? i : j); p < D; p++)
                    t += Li[p * D + i] * Li[p * D + j];
                M[i * D + j] = t;
            }
        const float *al = alpha ? alpha + (size_t)m * D : NULL;
        if (T)
            for (int i = 0; i < D; i++)
                for (int j = 0; j < D; j++)
                    T[(size_t)m * D * D + i * D + j] = (al ? al[i] : 1.f) * M[i * D + j];
        const float *b = B + (size_t)m * D * D;
        for (int i = 0; i < D; i++)
            for (int j = 0; j < D; j++) {
                float t = 0.f;
                for (int p = 0; p < D; p++)
                    t += b[i * D + p] * M[p * D + j];
                J[(size_t)m * D * D + i * D + j] = t;
            }
    }
    free(L);
    free(Li);
    free(M);
}

/* out = in T + Jm (D x D, row-major) */
static void affine(int D, const float *in, const float *T, const float *Jm, float *out) {
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
            float t = Jm[i * D + j];
            for (int p = 0; p < D; p++)
                t += in[i * D + p] * T[p * D + j];
            out[i * D + j] = t;
        }
}

void twin_vda_scans(const vdn_vda_shape *sh, const float *T, const float *J, const float *S0,
                    float *P, float *R) {
    int F = sh->frames, H = sh->heads, D = sh->hd;
    size_t mm = (size_t)D * D;
    float *zero = vdn_xcalloc(mm, sizeof(float));
    for (int h = 0; h < H; h++) {
        const float *s0 = S0 ? S0 + h * mm : zero;
        for (int t = 0; t < F; t++) {
            size_t o = ((size_t)t * H + h) * mm;
            affine(D, t == 0 ? s0 : P + ((size_t)(t - 1) * H + h) * mm, T + o, J + o, P + o);
        }
        for (int t = F - 1; t >= 0; t--) {
            size_t o = ((size_t)t * H + h) * mm;
            affine(D, t == F - 1 ? s0 : R + ((size_t)(t + 1) * H + h) * mm, T + o, J + o, R + o);
        }
    }
    free(zero);
}

void twin_vda_gather(const vdn_vda_shape *sh, const float *P, const float *R, const float *S0,
                     const float *alpha, const int *win_lo, const int *win_hi, float *Slin) {
    int F = sh->frames, H = sh->heads, D = sh->hd;
    size_t mm = (size_t)D * D;
    for (int t = 0; t < F; t++)
        for (int h = 0; h < H; h++) {
            int lo = win_lo[t], hi = win_hi[t];
            const float *left =
                lo - 1 >= 0 ? P + ((size_t)(lo - 1) * H + h) * mm : (S0 ? S0 + h * mm : NULL);
            const float *right =
                hi + 1 <= F - 1 ? R + ((size_t)(hi + 1) * H + h) * mm : (S0 ? S0 + h * mm : NULL);
            float *o = Slin + ((size_t)t * H + h) * mm;
            for (int j = 0; j < D; j++) {
                double ll = 0, lr = 0; /* log products of alpha over the bridge */
                for (int u = lo > 0 ? lo : 0; u <= t; u++)
                    ll += logf(fmaxf(alpha[((size_t)u * H + h) * D + j], 1e-12f));
                for (int u = t; u <= (hi < F - 1 ? hi : F - 1); u++)
                    lr += logf(fmaxf(alpha[((size_t)u * H + h) * D + j], 1e-12f));
                float sl = expf((float)ll), sr = expf((float)lr);
                for (int i = 0; i < D; i++)
                    o[i * D + j] =
                        (left ? left[i * D + j] * sl : 0.f) + (right ? right[i * D + j] * sr : 0.f);
            }
        }
}

void twin_vda_readout(const vdn_vda_shape *sh, const float *Slin, const float *qt, const float *wn,
                      float eps, const float *gpre, int ld_g, float *out) {
    int F = sh->frames, S = sh->gh * sh->gw, H = sh->heads, D = sh->hd;
    size_t mm = (size_t)D * D;
    float *sb = vdn_xmalloc(sizeof(float) * mm);
    float r[1024];
    for (int f = 0; f < F; f++)
        for (int h = 0; h < H; h++) {
            const float *sl = Slin + ((size_t)f * H + h) * mm;
            for (size_t i = 0; i < mm; i++)
                sb[i] = vdn_round_bf16(sl[i]);
            for (int s = 0; s < S; s++) {
                const float *q = qt + (((size_t)f * H + h) * S + s) * D;
                float ss = 0.f;
                for (int i = 0; i < D; i++) {
                    float t = 0.f;
                    for (int j = 0; j < D; j++)
                        t += sb[i * D + j] * q[j];
                    r[i] = t;
                    ss += t * t;
                }
                float inv = 1.f / sqrtf(ss / (float)D + eps);
                size_t row = (size_t)f * S + s;
                for (int i = 0; i < D; i++) {
                    float g = gpre[row * ld_g + (size_t)h * D + i];
                    g = 1.f / (1.f + expf(-g));
                    out[row * H * D + (size_t)h * D + i] = vdn_round_bf16(r[i] * inv * wn[i] * g);
                }
            }
        }
    free(sb);
}

void twin_vda_alpha(const vdn_vda_shape *sh, const float *x, int hidden, const float *wdown,
                    int rank, const float *wup, const float *A_log, const float *dt_bias,
                    float *alpha) {
    int F = sh->frames, S = sh->gh * sh->gw, C = sh->heads * sh->hd;
    float *m = vdn_xmalloc(sizeof(float) * hidden), *d = vdn_xmalloc(sizeof(float) * rank);
    for (int f = 0; f < F; f++) {
        for (int c = 0; c < hidden; c++) {
            float s = 0.f;
            for (int t = 0; t < S; t++)
                s += x[((size_t)f * S + t) * hidden + c];
            m[c] = s / (float)S;
        }
        for (int i = 0; i < rank; i++) {
            float s = 0.f;
            for (int c = 0; c < hidden; c++)
                s += wdown[(size_t)i * hidden + c] * m[c];
            d[i] = s;
        }
        for (int c = 0; c < C; c++) {
            float u = dt_bias[c];
            for (int i = 0; i < rank; i++)
                u += wup[(size_t)c * rank + i] * d[i];
            float sp = u > 20.f ? u : log1pf(expf(u));
            alpha[(size_t)f * C + c] = expf(-expf(A_log[c / sh->hd]) * sp);
        }
    }
    free(m);
    free(d);
}

void vdn_vda_windows(int frames_total, int skip_ends, int chunk, int radius, int *win_lo,
                     int *win_hi) {
    int off = skip_ends ? 1 : 0, n = frames_total - 2 * off;
    for (int t = 0; t < n; t++) {
        int c = (t + off) / chunk;
        win_lo[t] = (c - radius) * chunk - off;
        win_hi[t] = (c + radius + 1) * chunk - 1 - off;
    }
}
