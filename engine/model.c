/* The H3 / VDN-H3 forward on the CPU; see model.h and spec sections 2-5. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "ops.h"
#include "vdn_util.h"

/* ---- weights ---- */

typedef struct {
    vdn_ckpt *ck;
    char *err;
    size_t errlen;
    int failed;
} loader;

static const float *get(loader *ld, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                        int64_t d3) {
    if (ld->failed) return NULL;
    int64_t shape[4] = {d0, d1, d2, d3};
    const float *p = vdn_ckpt_f32(ld->ck, name, ndim, shape, ld->err, ld->errlen);
    if (!p) ld->failed = 1;
    return p;
}

#define GET1(n, a) get(ld, n, 1, a, 0, 0, 0)
#define GET2(n, a, b) get(ld, n, 2, a, b, 0, 0)

static void load_block(loader *ld, vdn_block_weights *b, const char *prefix, const vdn_config *c,
                       int dit) {
    char n[256];
    const int64_t hid = c->hidden, inner = (int64_t)c->heads * c->head_dim;
#define NAME(suffix) (snprintf(n, sizeof n, "%s.%s", prefix, suffix), n)
    b->norm1 = GET1(NAME("norm1.weight"), hid);
    b->norm2 = GET1(NAME("norm2.weight"), hid);
    b->to_q = GET2(NAME("attn.to_q.weight"), inner, hid);
    b->to_k = GET2(NAME("attn.to_k.weight"), inner, hid);
    b->to_v = GET2(NAME("attn.to_v.weight"), inner, hid);
    b->norm_q = GET1(NAME("attn.norm_q.weight"), c->head_dim);
    b->norm_k = GET1(NAME("attn.norm_k.weight"), c->head_dim);
    b->to_out = GET2(NAME("attn.to_out.0.weight"), hid, inner);
    b->ff_in = GET2(NAME("ff.net.0.proj.weight"), 2 * (int64_t)c->ffn, hid);
    b->ff_out = GET2(NAME("ff.net.2.weight"), hid, c->ffn);
    if (!dit) return;
    b->ada_w = GET2(NAME("adaln_proj.linear.weight"), 18 * hid, c->time_embed_dim);
    b->ada_b = GET1(NAME("adaln_proj.linear.bias"), 18 * hid);
    if (!c->has_vdn) return;
    const int64_t H = c->heads;
    b->sg_w = GET2(NAME("attn.softmax_gate.up.weight"), H, hid);
    b->sg_b = GET1(NAME("attn.softmax_gate.up.bias"), H);
    b->to_out_linear = GET2(NAME("attn.to_out_linear.weight"), hid, inner);
    vdn_vda_weights *v = &b->vda;
    const int64_t ks = c->conv_spatial, kt = c->conv_temporal;
    v->k_sp = get(ld, NAME("attn.linear_attention.short_conv.k_sp.weight"), 4, inner, 1, ks, ks);
    v->v_sp = get(ld, NAME("attn.linear_attention.short_conv.v_sp.weight"), 4, inner, 1, ks, ks);
    v->k_tm = get(ld, NAME("attn.linear_attention.short_conv.k_tm.weight"), 3, inner, 1, kt, 0);
    v->v_tm = get(ld, NAME("attn.linear_attention.short_conv.v_tm.weight"), 3, inner, 1, kt, 0);
    v->beta_w = GET2(NAME("attn.linear_attention.beta_proj.weight"), H, hid);
    v->alpha_down = GET2(NAME("attn.linear_attention.alpha.down.weight"), c->alpha_rank, hid);
    v->alpha_up = GET2(NAME("attn.linear_attention.alpha.up.weight"), inner, c->alpha_rank);
    v->A_log = GET1(NAME("attn.linear_attention.alpha.A_log"), H);
    v->dt_bias = GET1(NAME("attn.linear_attention.alpha.dt_bias"), inner);
    v->gate_down = GET2(NAME("attn.linear_attention.output_gate.down.weight"), c->gate_rank, hid);
    v->gate_up = GET2(NAME("attn.linear_attention.output_gate.up.weight"), inner, c->gate_rank);
    v->gate_up_b = GET1(NAME("attn.linear_attention.output_gate.up.bias"), inner);
    v->norm_w = GET1(NAME("attn.linear_attention.norm.weight"), c->linear_head_dim);
#undef NAME
}

int vdn_weights_load(vdn_weights *w, vdn_ckpt *ck, const vdn_config *c, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    if (c->has_vdn && c->linear_head_dim != c->head_dim)
        return vdn_fail(err, errlen, "config: linear_head_dim %d != head_dim %d (unsupported)",
                        c->linear_head_dim, c->head_dim);
    if (6 * c->rope_freq_dim > c->head_dim)
        return vdn_fail(err, errlen, "config: 6*rope_freq_dim = %d exceeds head_dim %d",
                        6 * c->rope_freq_dim, c->head_dim);
    loader L = {ck, err, errlen, 0}, *ld = &L;
    const int64_t hid = c->hidden,
                  pf = (int64_t)c->in_channels * c->patch_t * c->patch_h * c->patch_w;
    w->proj_in_w = GET2("proj_in.weight", hid, pf);
    w->proj_in_b = GET1("proj_in.bias", hid);
    w->audio_in_w = GET2("audio_proj_in.weight", hid, c->audio_channels);
    w->audio_in_b = GET1("audio_proj_in.bias", hid);
    w->ctx_w = GET2("context_embedder.weight", hid, c->text_dim);
    w->ctx_b = GET1("context_embedder.bias", hid);
    w->t1_w = GET2("time_embedder.linear_1.weight", c->time_hidden, c->freq_dim);
    w->t1_b = GET1("time_embedder.linear_1.bias", c->time_hidden);
    w->t2_w = GET2("time_embedder.linear_2.weight", c->time_embed_dim, c->time_hidden);
    w->t2_b = GET1("time_embedder.linear_2.bias", c->time_embed_dim);
    w->refiner_final_norm = GET1("token_refiner.final_norm.weight", hid);
    w->norm_out_w = GET1("norm_out.norm.weight", hid);
    w->norm_out_lin_w = GET2("norm_out.linear.weight", 2 * hid, c->time_embed_dim);
    w->norm_out_lin_b = GET1("norm_out.linear.bias", 2 * hid);
    w->proj_out_w = GET2("proj_out.weight", pf, hid);
    w->proj_out_b = GET1("proj_out.bias", pf);
    w->audio_out_w = GET2("audio_proj_out.weight", c->audio_channels, hid);
    w->audio_out_b = GET1("audio_proj_out.bias", c->audio_channels);
    w->refiner = vdn_xcalloc((size_t)c->refiner_layers + 1, sizeof(vdn_block_weights));
    w->blocks = vdn_xcalloc((size_t)c->layers + 1, sizeof(vdn_block_weights));
    char prefix[128];
    for (int i = 0; i < c->refiner_layers; i++) {
        snprintf(prefix, sizeof prefix, "token_refiner.refiner_blocks.%d", i);
        load_block(ld, &w->refiner[i], prefix, c, 0);
    }
    for (int i = 0; i < c->layers; i++) {
        snprintf(prefix, sizeof prefix, "transformer_blocks.%d", i);
        load_block(ld, &w->blocks[i], prefix, c, 1);
    }
    if (L.failed) {
        vdn_weights_free(w);
        return -1;
    }
    return 0;
}

void vdn_weights_free(vdn_weights *w) {
    free(w->refiner);
    free(w->blocks);
    memset(w, 0, sizeof *w);
}

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
    int masked = plan && plan->window;
    for (int hh = 0; hh < H; hh++)
        vdn_sdpa_head(o + (size_t)hh * d, q + (size_t)hh * d, k + (size_t)hh * d,
                      v + (size_t)hh * d, n, 0, n, C, d, 1.0 / sqrt((double)d),
                      masked ? keep_pair : NULL, &m);
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
