/* The whole forward on synthetic tiny weights: one DiT block + heads against a float64 reference
 * written here (adaLN indexing, modulate, QK-norm, RoPE, SDPA, gates, SwiGLU, final layer), and the
 * hybrid variants: deterministic, each different from the others, bypass when F <= 10. */
#include <math.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "ops.h"
#include "seq.h"
#include "vdn_util.h"
#include "tiny_model.h"
#include "tiny_forward.h"

/* ---- float64 reference of a dense (stock H3) forward with one DiT block ---- */

static void rms64(double *y, const double *x, const float *w, int d, double eps) {
    double ms = 0;
    for (int i = 0; i < d; i++)
        ms += x[i] * x[i] / d;
    for (int i = 0; i < d; i++)
        y[i] = x[i] / sqrt(ms + eps) * w[i];
}
static void lin64(double *y, const double *x, const float *w, const float *b, int in, int out) {
    for (int o = 0; o < out; o++) {
        y[o] = b ? b[o] : 0;
        for (int i = 0; i < in; i++)
            y[o] += w[o * in + i] * x[i];
    }
}
static double silu64(double x) {
    return x / (1 + exp(-x));
}

#define MAXR 160
static void attn64(double (*out)[16], double (*h)[16], int n, const vdn_block_weights *b,
                   const vdn_config *c, const double *pos) {
    static double q[MAXR][16], k[MAXR][16], v[MAXR][16], o[MAXR][16];
    int H = c->heads, d = c->head_dim;
    for (int r = 0; r < n; r++) {
        lin64(q[r], h[r], b->to_q, NULL, 16, 16);
        lin64(k[r], h[r], b->to_k, NULL, 16, 16);
        lin64(v[r], h[r], b->to_v, NULL, 16, 16);
        for (int hh = 0; hh < H; hh++) {
            rms64(q[r] + hh * d, q[r] + hh * d, b->norm_q, d, 1e-5);
            rms64(k[r] + hh * d, k[r] + hh * d, b->norm_k, d, 1e-5);
            if (!pos) continue;
            for (int pass = 0; pass < 2; pass++) { /* 6 rotated channels: pairs (i, i+3), nf = 1 */
                double *x = pass ? k[r] + hh * d : q[r] + hh * d, t[6];
                memcpy(t, x, sizeof t);
                for (int i = 0; i < 3; i++) {
                    double ang = pos[3 * r + i]; /* inv_freq[0] = 1 */
                    x[i] = t[i] * cos(ang) - t[i + 3] * sin(ang);
                    x[i + 3] = t[i + 3] * cos(ang) + t[i] * sin(ang);
                }
            }
        }
    }
    for (int hh = 0; hh < H; hh++)
        for (int i = 0; i < n; i++) {
            double s[MAXR], mx = -1e300, den = 0;
            for (int j = 0; j < n; j++) {
                s[j] = 0;
                for (int e = 0; e < d; e++)
                    s[j] += q[i][hh * d + e] * k[j][hh * d + e];
                s[j] /= sqrt(d);
                mx = fmax(mx, s[j]);
            }
            for (int e = 0; e < d; e++)
                o[i][hh * d + e] = 0;
            for (int j = 0; j < n; j++) {
                double p = exp(s[j] - mx);
                den += p;
                for (int e = 0; e < d; e++)
                    o[i][hh * d + e] += p * v[j][hh * d + e];
            }
            for (int e = 0; e < d; e++)
                o[i][hh * d + e] /= den;
        }
    for (int r = 0; r < n; r++)
        lin64(out[r], o[r], b->to_out, NULL, 16, 16);
}

static void ff64(double *out, const double *h, const vdn_block_weights *b, const vdn_config *c) {
    double u[48], a[24];
    lin64(u, h, b->ff_in, NULL, 16, 2 * c->ffn);
    for (int i = 0; i < c->ffn; i++)
        a[i] = u[i] * silu64(u[c->ffn + i]);
    lin64(out, a, b->ff_out, NULL, c->ffn, 16);
}

static void test_dense_forward(void) {
    vdn_config c = tiny_config(0);
    vdn_weights w;
    random_weights(&w, &c);
    int L = 5, F = 3, lh = 4, lw = 4, La = 6;
    int8_t tags[5] = {1, 1, 0, 1, 1};
    vdn_seq s;
    char err[256];
    CHECK(vdn_seq_build(&s, &c, tags, L, F, lh, lw, La, 0, NULL, err, sizeof err) == 0, "%s", err);
    vdn_seq_timesteps(&s, 0.3f, 0.6f);
    const vdn_layout *lay = &s.lay;
    int n = lay->n_rows, pf = 12;
    VDN_ASSERT(n <= MAXR);
    float *emb = rnd_arr(L * c.text_dim, 1), *vx = rnd_arr(lay->n_video * pf, 1);
    float *ax = rnd_arr(lay->n_audio * 4, 1);
    float *text = vdn_xmalloc(sizeof(float) * L * 16),
          *vv = vdn_xmalloc(sizeof(float) * lay->n_video * pf);
    float *av = vdn_xmalloc(sizeof(float) * lay->n_audio * 4);
    tiny_refine_text(text, emb, L, &w, &c);
    vdn_step_inputs in = {
        lay,   vx,        NULL,       ax,    s.tags,
        s.pos, s.t_index, s.t_values, s.n_t, vdn_attn_plan_make(&c, VDN_ATTN_DENSE, F)};
    CHECK(tiny_forward(&w, &c, text, &in, vv, av, err, sizeof err) == 0, "%s", err);

    static double x[MAXR][16], h[MAXR][16], y[MAXR][16];
    /* text: context_embedder, refiner block (no adaLN, no RoPE), final norm */
    for (int r = 0; r < L; r++) {
        double e[12];
        for (int i = 0; i < 12; i++)
            e[i] = emb[r * 12 + i];
        lin64(x[r], e, w.ctx_w, w.ctx_b, 12, 16);
    }
    const vdn_block_weights *rb = &w.refiner[0];
    for (int r = 0; r < L; r++)
        rms64(h[r], x[r], rb->norm1, 16, 1e-5);
    attn64(y, h, L, rb, &c, NULL);
    for (int r = 0; r < L; r++) {
        for (int i = 0; i < 16; i++)
            x[r][i] += y[r][i];
        double t[16];
        rms64(h[r], x[r], rb->norm2, 16, 1e-5);
        ff64(t, h[r], rb, &c);
        for (int i = 0; i < 16; i++)
            x[r][i] += t[i];
        rms64(x[r], x[r], w.refiner_final_norm, 16, 1e-5);
    }
    for (int r = lay->audio_start; r < n; r++) {
        double p[12];
        int video = r >= lay->video_start, vr = r - lay->video_start, ar = r - lay->audio_start;
        for (int i = 0; i < (video ? 12 : 4); i++)
            p[i] = video ? vx[vr * 12 + i] : ax[ar * 4 + i];
        lin64(x[r], p, video ? w.proj_in_w : w.audio_in_w, video ? w.proj_in_b : w.audio_in_b,
              video ? 12 : 4, 16);
    }
    /* timestep -> SiLU(temb) -> adaLN table P[m] (18*hidden), row m*3+tag, (shift,scale,gate)x2 */
    double ada[4][288], fin[4][32], st[4][10];
    for (int m = 0; m < s.n_t; m++) {
        double e[8], hm[14];
        for (int j = 0; j < 4; j++) {
            double f = exp(-log(10000.0) * j / 4);
            e[j] = cos(s.t_values[m] * f), e[4 + j] = sin(s.t_values[m] * f);
        }
        lin64(hm, e, w.t1_w, w.t1_b, 8, 14);
        for (int i = 0; i < 14; i++)
            hm[i] = silu64(hm[i]);
        lin64(st[m], hm, w.t2_w, w.t2_b, 14, 10);
        for (int i = 0; i < 10; i++)
            st[m][i] = silu64(st[m][i]);
        lin64(ada[m], st[m], w.blocks[0].ada_w, w.blocks[0].ada_b, 10, 288);
        lin64(fin[m], st[m], w.norm_out_lin_w, w.norm_out_lin_b, 10, 32);
    }
    const vdn_block_weights *b = &w.blocks[0];
#define MOD(r, k, i) ada[s.t_index[r]][(s.tags[r] * 6 + (k)) * 16 + (i)]
    for (int r = 0; r < n; r++) {
        rms64(h[r], x[r], b->norm1, 16, 1e-5);
        for (int i = 0; i < 16; i++)
            h[r][i] = h[r][i] * (1 + MOD(r, 1, i)) + MOD(r, 0, i);
    }
    attn64(y, h, n, b, &c, s.pos);
    for (int r = 0; r < n; r++) {
        double t[16];
        for (int i = 0; i < 16; i++)
            x[r][i] += MOD(r, 2, i) * y[r][i];
        rms64(h[r], x[r], b->norm2, 16, 1e-5);
        for (int i = 0; i < 16; i++)
            h[r][i] = h[r][i] * (1 + MOD(r, 4, i)) + MOD(r, 3, i);
        ff64(t, h[r], b, &c);
        for (int i = 0; i < 16; i++)
            x[r][i] += MOD(r, 5, i) * t[i];
    }
    double *rv = vdn_xmalloc(sizeof(double) * lay->n_video * pf),
           *ra = vdn_xmalloc(sizeof(double) * lay->n_audio * 4);
    for (int r = lay->audio_start; r < n; r++) {
        double hf[16];
        const double *sh = fin[s.t_index[r]], *sc = sh + 16; /* shift then scale */
        rms64(hf, x[r], w.norm_out_w, 16, 1e-5);
        for (int i = 0; i < 16; i++)
            hf[i] = hf[i] * (1 + sc[i]) + sh[i];
        if (r >= lay->video_start)
            lin64(rv + (r - lay->video_start) * pf, hf, w.proj_out_w, w.proj_out_b, 16, pf);
        else
            lin64(ra + (r - lay->audio_start) * 4, hf, w.audio_out_w, w.audio_out_b, 16, 4);
    }
    CHECK_REL(rv, vv, lay->n_video * pf, 1e-5, "dense forward: video velocity");
    CHECK_REL(ra, av, lay->n_audio * 4, 1e-5, "dense forward: audio velocity");
    vdn_seq_free(&s);
}

static void run_variant(float *vv, float *av, const vdn_weights *w, const vdn_config *c,
                        const vdn_seq *s, const float *text, const float *vx, const float *ax,
                        vdn_attn_mode mode) {
    vdn_step_inputs in = {
        &s->lay, vx,         NULL,        ax,     s->tags,
        s->pos,  s->t_index, s->t_values, s->n_t, vdn_attn_plan_make(c, mode, s->lay.frames)};
    char err[256];
    CHECK(tiny_forward(w, c, text, &in, vv, av, err, sizeof err) == 0, "%s", err);
}

static void test_variants(void) {
    vdn_config c = tiny_config(1);
    c.layers = 2;
    vdn_weights w;
    random_weights(&w, &c);
    for (int F = 10; F <= 17; F += 7) {
        int L = 4, La = 5;
        int8_t tags[4] = {1, 1, 1, 1};
        vdn_seq s;
        char err[256];
        CHECK(vdn_seq_build(&s, &c, tags, L, F, 4, 4, La, 0, NULL, err, sizeof err) == 0, "%s",
              err);
        vdn_seq_timesteps(&s, 0.2f, 0.4f);
        int nv = s.lay.n_video * 12, na = s.lay.n_audio * 4;
        float *emb = rnd_arr(L * 12, 1), *vx = rnd_arr(nv, 1), *ax = rnd_arr(na, 1);
        float *text = vdn_xmalloc(sizeof(float) * L * 16);
        tiny_refine_text(text, emb, L, &w, &c);
        float *out[5], *aout[5];
        for (int m = 0; m < 5; m++) {
            out[m] = vdn_xmalloc(sizeof(float) * nv), aout[m] = vdn_xmalloc(sizeof(float) * na);
            run_variant(out[m], aout[m], &w, &c, &s, text, vx, ax, (vdn_attn_mode)m);
        }
        float *again = vdn_xmalloc(sizeof(float) * nv), *aa = vdn_xmalloc(sizeof(float) * na);
        run_variant(again, aa, &w, &c, &s, text, vx, ax, VDN_ATTN_HYBRID);
        CHECK(memcmp(again, out[VDN_ATTN_HYBRID], sizeof(float) * nv) == 0,
              "forward not deterministic");
        vdn_ops_set_threads(2); /* the threaded forward must give the same bits */
        run_variant(again, aa, &w, &c, &s, text, vx, ax, VDN_ATTN_HYBRID);
        vdn_ops_set_threads(1);
        CHECK(memcmp(again, out[VDN_ATTN_HYBRID], sizeof(float) * nv) == 0, "2 threads differ");
        for (int a = 0; a < 5; a++)
            for (int b2 = a + 1; b2 < 5; b2++) {
                int same = memcmp(out[a], out[b2], sizeof(float) * nv) == 0;
                /* at F = 10 the window covers the clip: every hybrid variant is dense + gate */
                int expect_same = F == 10 && a != VDN_ATTN_DENSE && b2 != VDN_ATTN_DENSE;
                CHECK(same == expect_same, "F=%d variants %s and %s: %s", F, vdn_attn_mode_name(a),
                      vdn_attn_mode_name(b2), same ? "identical" : "differ");
            }
        for (int m = 0; m < 5; m++)
            free(out[m]), free(aout[m]);
        free(again), free(aa), free(emb), free(vx), free(ax), free(text);
        vdn_seq_free(&s);
    }
}

int main(void) {
    test_dense_forward();
    test_variants();
    return test_done("test_model");
}
