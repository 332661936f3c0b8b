/* The H3 / VDN-H3 forward on the CPU; see model.h and spec sections 2-5. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "ops.h"
#include "vdn_util.h"

/* ---- attention ---- */

typedef struct {
    const vdn_config *cfg;
    const vdn_attn_plan *plan;
    const vdn_layout *lay;
} mask_ctx;

static int keep_pair(const void *user, int qi, int kj) {
    const mask_ctx *m = user;
    return vdn_attn_keep(m->cfg, m->plan, m->lay, qi, kj);
}

typedef struct {
    float *o;
    const float *q, *k, *v;
    int n, C, d;
    vdn_keep_fn keep;
    const void *mask;
} sdpa_job;

static void sdpa_one_head(void *ctx, int h) {
    const sdpa_job *j = ctx;
    size_t off = (size_t)h * j->d;
    vdn_sdpa_head(j->o + off, j->q + off, j->k + off, j->v + off, j->n, 0, j->n, j->C, j->d,
                  1.0 / sqrt((double)j->d), j->keep, j->mask);
}

/* Per-head QK RMSNorm (before RoPE) and, when pos is given, partial RoPE; in place. */
static void qk_prepare(float *x, int n, const float *norm_w, const double *pos, const double *inv,
                       const vdn_config *c) {
    const int H = c->heads, d = c->head_dim;
    vdn_rmsnorm(x, x, norm_w, n * H, d, c->norm_eps);
    if (!pos) return;
    for (int r = 0; r < n; r++)
        for (int h = 0; h < H; h++)
            vdn_rope_apply(x + ((size_t)r * H + h) * d, pos + 3 * (size_t)r, inv, c->rope_freq_dim,
                           d);
}

/* out (n, hidden) = attention of the block on its normalised input h (n, hidden). pos NULL: no
 * RoPE (refiner); plan NULL or lay NULL: plain dense, no hybrid (refiner). */
static int attention(float *out, const float *h, int n, const vdn_block_weights *b,
                     const vdn_config *c, const double *pos, const vdn_attn_plan *plan,
                     const vdn_layout *lay, char *err, size_t errlen) {
    const int H = c->heads, d = c->head_dim, C = H * d, hid = c->hidden;
    float *q = vdn_xmalloc(sizeof(float) * n * C), *k = vdn_xmalloc(sizeof(float) * n * C);
    float *v = vdn_xmalloc(sizeof(float) * n * C), *o = vdn_xmalloc(sizeof(float) * n * C);
    float *q_raw = NULL, *k_raw = NULL;
    vdn_linear(q, h, b->to_q, NULL, n, hid, C);
    vdn_linear(k, h, b->to_k, NULL, n, hid, C);
    vdn_linear(v, h, b->to_v, NULL, n, hid, C);
    int linear = plan && plan->linear;
    if (linear) { /* the linear branch reads the raw (pre-norm, pre-RoPE) projections */
        q_raw = vdn_xmalloc(sizeof(float) * n * C);
        k_raw = vdn_xmalloc(sizeof(float) * n * C);
        memcpy(q_raw, q, sizeof(float) * n * C);
        memcpy(k_raw, k, sizeof(float) * n * C);
    }
    double inv[64];
    VDN_ASSERT(c->rope_freq_dim <= 64);
    vdn_rope_inv_freq(inv, c->rope_freq_dim, c->rope_theta);
    qk_prepare(q, n, b->norm_q, pos, inv, c);
    qk_prepare(k, n, b->norm_k, pos, inv, c);
    mask_ctx m = {c, plan, lay};
    sdpa_job job = {o, q, k, v, n, C, d, (plan && plan->window) ? keep_pair : NULL, &m};
    vdn_parallel_for(H, sdpa_one_head, &job);
    if (plan && plan->softmax_gate) { /* per-head sigmoid gate on every row */
        float *g = vdn_xmalloc(sizeof(float) * n * H);
        vdn_linear(g, h, b->sg_w, b->sg_b, n, hid, H);
        for (int r = 0; r < n; r++)
            for (int hh = 0; hh < H; hh++) {
                float gv = vdn_sigmoid(g[(size_t)r * H + hh]);
                float *orow = o + (size_t)r * C + (size_t)hh * d;
                for (int i = 0; i < d; i++)
                    orow[i] *= gv;
            }
        free(g);
    }
    vdn_linear(out, o, b->to_out, NULL, n, C, hid);
    int rc = 0;
    if (linear) {
        float *lin = vdn_xmalloc(sizeof(float) * (size_t)lay->n_video * C);
        float *y = vdn_xmalloc(sizeof(float) * (size_t)lay->n_video * hid);
        rc = vdn_vda_branch(lin, h, q_raw, k_raw, v, lay, plan, c, &b->vda, err, errlen);
        if (rc == 0) {
            vdn_linear(y, lin, b->to_out_linear, NULL, lay->n_video, C, hid);
            float *dst = out + (size_t)lay->video_start * hid;
            for (size_t i = 0; i < (size_t)lay->n_video * hid; i++)
                dst[i] += y[i];
        }
        free(lin);
        free(y);
    }
    free(q);
    free(k);
    free(v);
    free(o);
    free(q_raw);
    free(k_raw);
    return rc;
}

/* ---- feed-forward ---- */

static void feed_forward(float *out, const float *h, int n, const vdn_block_weights *b,
                         const vdn_config *c) {
    float *u = vdn_xmalloc(sizeof(float) * n * 2 * c->ffn);
    float *a = vdn_xmalloc(sizeof(float) * n * c->ffn);
    vdn_linear(u, h, b->ff_in, NULL, n, c->hidden, 2 * c->ffn);
    vdn_swiglu(a, u, n, c->ffn);
    vdn_linear(out, a, b->ff_out, NULL, n, c->ffn, c->hidden);
    free(u);
    free(a);
}

/* ---- text ---- */

void vdn_model_refine_text(float *out, const float *embeds, int L, const vdn_weights *w,
                           const vdn_config *c) {
    const int hid = c->hidden;
    float *h = vdn_xmalloc(sizeof(float) * L * hid), *y = vdn_xmalloc(sizeof(float) * L * hid);
    vdn_linear(out, embeds, w->ctx_w, w->ctx_b, L, c->text_dim, hid);
    for (int i = 0; i < c->refiner_layers; i++) { /* pre-norm block: no adaLN, no RoPE */
        const vdn_block_weights *b = &w->refiner[i];
        vdn_rmsnorm(h, out, b->norm1, L, hid, c->norm_eps);
        attention(y, h, L, b, c, NULL, NULL, NULL, NULL, 0);
        for (size_t j = 0; j < (size_t)L * hid; j++)
            out[j] += y[j];
        vdn_rmsnorm(h, out, b->norm2, L, hid, c->norm_eps);
        feed_forward(y, h, L, b, c);
        for (size_t j = 0; j < (size_t)L * hid; j++)
            out[j] += y[j];
    }
    vdn_rmsnorm(out, out, w->refiner_final_norm, L, hid, c->norm_eps);
    free(h);
    free(y);
}

/* ---- time ---- */

void vdn_model_time_embed(float *silu_temb, float t, const vdn_weights *w, const vdn_config *c) {
    float *e = vdn_xmalloc(sizeof(float) * c->freq_dim);
    float *hmid = vdn_xmalloc(sizeof(float) * c->time_hidden);
    vdn_time_features(e, t, c->freq_dim);
    vdn_linear(hmid, e, w->t1_w, w->t1_b, 1, c->freq_dim, c->time_hidden);
    for (int i = 0; i < c->time_hidden; i++)
        hmid[i] = vdn_silu(hmid[i]);
    vdn_linear(silu_temb, hmid, w->t2_w, w->t2_b, 1, c->time_hidden, c->time_embed_dim);
    for (int i = 0; i < c->time_embed_dim; i++)
        silu_temb[i] = vdn_silu(silu_temb[i]);
    free(e);
    free(hmid);
}

/* ---- the model ---- */

int vdn_model_forward(const vdn_weights *w, const vdn_config *c, const float *text,
                      const vdn_step_inputs *in, float *video_v, float *audio_v, char *err,
                      size_t errlen) {
    const vdn_layout *lay = in->layout;
    const int n = lay->n_rows, hid = c->hidden, M = in->n_t;
    const int pf = c->in_channels * c->patch_t * c->patch_h * c->patch_w;
    for (int r = 0; r < n; r++)
        if (in->t_index[r] < 0 || in->t_index[r] >= M || in->tags[r] > 2)
            return vdn_fail(err, errlen, "forward: row %d has timestep index %d (of %d) tag %d", r,
                            in->t_index[r], M, in->tags[r]);
    float *x = vdn_xmalloc(sizeof(float) * n * hid);
    memcpy(x, text, sizeof(float) * lay->n_text * hid);
    if (lay->n_cond)
        vdn_linear(x + (size_t)lay->cond_start * hid, in->cond_x, w->proj_in_w, w->proj_in_b,
                   lay->n_cond, pf, hid);
    vdn_linear(x + (size_t)lay->audio_start * hid, in->audio_x, w->audio_in_w, w->audio_in_b,
               lay->n_audio, c->audio_channels, hid);
    vdn_linear(x + (size_t)lay->video_start * hid, in->video_x, w->proj_in_w, w->proj_in_b,
               lay->n_video, pf, hid);

    float *st = vdn_xmalloc(sizeof(float) * M * c->time_embed_dim); /* SiLU(temb) per value */
    for (int m = 0; m < M; m++)
        vdn_model_time_embed(st + (size_t)m * c->time_embed_dim, in->t_values[m], w, c);

    float *P = vdn_xmalloc(sizeof(float) * M * 18 * hid);
    float *h = vdn_xmalloc(sizeof(float) * n * hid), *y = vdn_xmalloc(sizeof(float) * n * hid);
    int rc = 0;
    for (int l = 0; l < c->layers && rc == 0; l++) {
        const vdn_block_weights *b = &w->blocks[l];
        vdn_linear(P, st, b->ada_w, b->ada_b, M, c->time_embed_dim, 18 * hid);
#define ADA(r, k)                                                                                  \
    vdn_adaln_slice(P + (size_t)in->t_index[r] * 18 * hid, in->tags[r] < 0 ? 0 : in->tags[r], k,   \
                    hid)
        vdn_rmsnorm(h, x, b->norm1, n, hid, c->norm_eps);
        for (int r = 0; r < n; r++)
            vdn_modulate(h + (size_t)r * hid, ADA(r, 0), ADA(r, 1), hid);
        rc = attention(y, h, n, b, c, in->pos, &in->plan, lay, err, errlen);
        for (int r = 0; r < n; r++) {
            const float *g = ADA(r, 2);
            for (int i = 0; i < hid; i++)
                x[(size_t)r * hid + i] += (float)((double)g[i] * y[(size_t)r * hid + i]);
        }
        vdn_rmsnorm(h, x, b->norm2, n, hid, c->norm_eps);
        for (int r = 0; r < n; r++)
            vdn_modulate(h + (size_t)r * hid, ADA(r, 3), ADA(r, 4), hid);
        feed_forward(y, h, n, b, c);
        for (int r = 0; r < n; r++) {
            const float *g = ADA(r, 5);
            for (int i = 0; i < hid; i++)
                x[(size_t)r * hid + i] += (float)((double)g[i] * y[(size_t)r * hid + i]);
        }
#undef ADA
    }
    if (rc == 0) { /* final layer: (shift, scale) per timestep, no modality; heads on the rows */
        float *F2 = vdn_xmalloc(sizeof(float) * M * 2 * hid);
        vdn_linear(F2, st, w->norm_out_lin_w, w->norm_out_lin_b, M, c->time_embed_dim, 2 * hid);
        vdn_rmsnorm(h, x, w->norm_out_w, n, hid, c->norm_eps);
        for (int r = 0; r < n; r++) {
            const float *shift = F2 + (size_t)in->t_index[r] * 2 * hid;
            vdn_modulate(h + (size_t)r * hid, shift, shift + hid, hid);
        }
        vdn_linear(video_v, h + (size_t)lay->video_start * hid, w->proj_out_w, w->proj_out_b,
                   lay->n_video, hid, pf);
        vdn_linear(audio_v, h + (size_t)lay->audio_start * hid, w->audio_out_w, w->audio_out_b,
                   lay->n_audio, hid, c->audio_channels);
        free(F2);
    }
    free(x);
    free(st);
    free(P);
    free(h);
    free(y);
    return rc;
}
