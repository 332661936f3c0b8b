/* The DiT's weights as device tensors (dit.h): looked up by canonical name through a source
 * (the checkpoint, or a test's arrays), shape-checked there, uploaded once in the device's dtype
 * (activation dtype for the big matrices and norms, float32 where the contract keeps it), the
 * per-block q/k/v/gates fused into one matrix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "dit.h"
#include "ops.h"
#include "vdn_util.h"

/* ---- the checkpoint as a source ---- */

static const void *ckpt_get(void *ctx, const char *name, int ndim, const int64_t *shape,
                            vdn_dtype *dtype, char *err, size_t errlen) {
    return vdn_ckpt_stored(ctx, name, ndim, shape, dtype, err, errlen);
}
static void ckpt_release(void *ctx, const char *name) {
    vdn_ckpt_release(ctx, name);
}
vdn_weight_source vdn_weight_source_ckpt(vdn_ckpt *ck) {
    return (vdn_weight_source){ckpt_get, ckpt_release, ck, NULL};
}

/* ---- loader ---- */

typedef struct {
    vdn_dit_weights *w;
    const vdn_weight_source *src;
    char *err;
    size_t errlen;
    int failed;
} loader;

static void dev_failed(loader *L, const char *what) {
    if (!L->failed) vdn_fail(L->err, L->errlen, "weights: %s: %s", what, vdn_dev_error(L->w->dev));
    L->failed = 1;
}

static vdn_tensor *keep(loader *L, vdn_tensor *t) {
    vdn_dit_weights *w = L->w;
    if (!t) {
        if (!L->failed) vdn_fail(L->err, L->errlen, "weights: %s", vdn_dev_error(w->dev));
        L->failed = 1;
        return NULL;
    }
    if (w->n_owned == w->cap_owned) {
        w->cap_owned = w->cap_owned ? 2 * w->cap_owned : 64;
        vdn_tensor **n = vdn_xmalloc(sizeof(vdn_tensor *) * (size_t)w->cap_owned);
        if (w->n_owned) memcpy(n, w->owned, sizeof(vdn_tensor *) * (size_t)w->n_owned);
        free(w->owned);
        w->owned = n;
    }
    return w->owned[w->n_owned++] = t;
}

/* source tensor `name` of the canonical shape into dst (a view of matching element count) */
static void fill_from(loader *L, vdn_tensor *dst, const char *name, int ndim,
                      const int64_t *shape) {
    if (L->failed || !dst) return;
    if (L->src->fill) {
        int done = L->src->fill(L->src->ctx, name, ndim, shape, dst, L->err, L->errlen);
        if (done) {
            L->failed = done < 0;
            return;
        }
    }
    vdn_dtype dt;
    const void *p = L->src->get(L->src->ctx, name, ndim, shape, &dt, L->err, L->errlen);
    if (!p) {
        L->failed = 1;
        return;
    }
    if (vdn_tensor_set(dst, p, dt) != 0) {
        vdn_fail(L->err, L->errlen, "weights: %s: %s", name, vdn_dev_error(L->w->dev));
        L->failed = 1;
    }
    if (L->src->release) L->src->release(L->src->ctx, name);
}

/* a new [rows, cols] device tensor of dtype dt holding source tensor `name` (canonical shape
 * d0..d3, ndim of them; rows * cols elements) */
static vdn_tensor *up(loader *L, const char *name, vdn_dtype dt, int ndim, int64_t d0, int64_t d1,
                      int64_t d2, int64_t d3) {
    if (L->failed) return NULL;
    const int64_t shape[4] = {d0, d1, d2, d3};
    int64_t cols = shape[ndim - 1], rows = 1;
    for (int i = 0; i < ndim - 1; i++)
        rows *= shape[i];
    if (ndim == 4) /* depthwise conv taps (C, 1, ks, ks) -> [C, ks*ks] */
        rows = d0, cols = d1 * d2 * d3;
    if (ndim == 3) rows = d0, cols = d1 * d2;
    vdn_tensor *t = keep(L, vdn_tensor_new2(L->w->dev, dt, rows, cols));
    fill_from(L, t, name, ndim, shape);
    return t;
}

#define UP1(n, dt, a) up(L, n, dt, 1, a, 0, 0, 0)
#define UP2(n, dt, a, b) up(L, n, dt, 2, a, b, 0, 0)

static int64_t round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

static void load_block(loader *L, vdn_dit_block *b, const char *prefix, int dit) {
    const vdn_dit_weights *w = L->w;
    const vdn_config *c = &w->cfg;
    const vdn_dtype A = vdn_dev_act_dtype(w->dev), F32 = VDN_DT_F32;
    const int64_t hid = c->hidden, C = (int64_t)c->heads * c->head_dim, H = c->heads;
    const int vdn = dit && c->has_vdn;
    char n[256];
#define NAME(suffix) (snprintf(n, sizeof n, "%s.%s", prefix, suffix), n)
    b->norm1 = UP1(NAME("norm1.weight"), A, hid);
    b->norm2 = UP1(NAME("norm2.weight"), A, hid);
    /* [q; k; v; (gate_down; softmax_gate; beta)] with zero rows to ld */
    const int64_t ld = dit ? w->ldq : w->ldq_refiner;
    b->wqkv = keep(L, L->failed ? NULL : vdn_tensor_new2(w->dev, A, ld, hid));
    if (b->wqkv && vdn_tensor_fill(b->wqkv, 0.0) != 0) dev_failed(L, "fused q/k/v weight");
    const char *part[6] = {"attn.to_q.weight",
                           "attn.to_k.weight",
                           "attn.to_v.weight",
                           "attn.linear_attention.output_gate.down.weight",
                           "attn.softmax_gate.up.weight",
                           "attn.linear_attention.beta_proj.weight"};
    const int64_t rows[6] = {C, C, C, c->gate_rank, H, H};
    for (int i = 0, off = 0; i < (vdn ? 6 : 3) && !L->failed; off += (int)rows[i], i++) {
        vdn_tensor v = vdn_view_rows(b->wqkv, off, rows[i]);
        const int64_t shape[2] = {rows[i], hid};
        fill_from(L, &v, NAME(part[i]), 2, shape);
    }
    b->norm_q = UP1(NAME("attn.norm_q.weight"), A, c->head_dim);
    b->norm_k = UP1(NAME("attn.norm_k.weight"), A, c->head_dim);
    b->to_out = UP2(NAME("attn.to_out.0.weight"), A, hid, C);
    b->ff_in = UP2(NAME("ff.net.0.proj.weight"), A, 2 * (int64_t)c->ffn, hid);
    b->ff_out = UP2(NAME("ff.net.2.weight"), A, hid, c->ffn);
    if (!dit) return;
    b->ada_w = UP2(NAME("adaln_proj.linear.weight"), A, 18 * hid, c->time_embed_dim);
    b->ada_b = UP1(NAME("adaln_proj.linear.bias"), A, 18 * hid);
    if (!vdn) return;
    /* the softmax gate's bias inside the fused bias, zero elsewhere */
    b->bqkv = keep(L, L->failed ? NULL : vdn_tensor_new2(w->dev, F32, 1, ld));
    if (b->bqkv && vdn_tensor_fill(b->bqkv, 0.0) != 0) dev_failed(L, "fused bias");
    if (!L->failed) {
        vdn_tensor v = vdn_view_cols(b->bqkv, w->col_sgate, H);
        const int64_t shape[1] = {H};
        fill_from(L, &v, NAME("attn.softmax_gate.up.bias"), 1, shape);
    }
    const int64_t ks = c->conv_spatial, kt = c->conv_temporal, R = c->alpha_rank;
    b->to_out_linear = UP2(NAME("attn.to_out_linear.weight"), A, hid, C);
    b->k_sp = up(L, NAME("attn.linear_attention.short_conv.k_sp.weight"), A, 4, C, 1, ks, ks);
    b->v_sp = up(L, NAME("attn.linear_attention.short_conv.v_sp.weight"), A, 4, C, 1, ks, ks);
    b->k_tm = up(L, NAME("attn.linear_attention.short_conv.k_tm.weight"), A, 3, C, 1, kt, 0);
    b->v_tm = up(L, NAME("attn.linear_attention.short_conv.v_tm.weight"), A, 3, C, 1, kt, 0);
    b->gate_up = UP2(NAME("attn.linear_attention.output_gate.up.weight"), A, C, c->gate_rank);
    b->gate_up_b = UP1(NAME("attn.linear_attention.output_gate.up.bias"), A, C);
    b->lin_norm = UP1(NAME("attn.linear_attention.norm.weight"), A, c->linear_head_dim);
    b->alpha_down = UP2(NAME("attn.linear_attention.alpha.down.weight"), F32, R, hid);
    b->alpha_up = UP2(NAME("attn.linear_attention.alpha.up.weight"), F32, C, R);
    b->A_log = UP1(NAME("attn.linear_attention.alpha.A_log"), F32, H);
    b->dt_bias = UP1(NAME("attn.linear_attention.alpha.dt_bias"), F32, C);
#undef NAME
}

static int quantize_block(vdn_dit_weights *w, vdn_dit_block *b, char *err, size_t errlen);

int vdn_dit_weights_load(vdn_dit_weights *w, vdn_dev *d, const vdn_config *c,
                         const vdn_weight_source *src, char *err, size_t errlen) {
    return vdn_dit_weights_load_as(w, d, c, src, 0, err, errlen);
}

int vdn_dit_weights_load_as(vdn_dit_weights *w, vdn_dev *d, const vdn_config *c,
                            const vdn_weight_source *src, int fp8, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    if (c->has_vdn && c->linear_head_dim != c->head_dim)
        return vdn_fail(err, errlen, "config: linear_head_dim %d != head_dim %d (unsupported)",
                        c->linear_head_dim, c->head_dim);
    if (6 * c->rope_freq_dim > c->head_dim || c->rope_freq_dim > 64)
        return vdn_fail(err, errlen, "config: 6*rope_freq_dim = %d exceeds head_dim %d",
                        6 * c->rope_freq_dim, c->head_dim);
    w->cfg = *c;
    w->dev = d;
    const int64_t C = (int64_t)c->heads * c->head_dim, H = c->heads;
    w->col_gate_down = (int)(3 * C);
    w->col_sgate = w->col_gate_down + (c->has_vdn ? c->gate_rank : 0);
    w->col_beta = w->col_sgate + (int)H;
    w->ldq = (int)round_up(3 * C + (c->has_vdn ? c->gate_rank + 2 * H : 0), 64);
    w->ldq_refiner = (int)round_up(3 * C, 64);
    loader Ld = {w, src, err, errlen, 0}, *L = &Ld;
    const vdn_dtype A = vdn_dev_act_dtype(d), F32 = VDN_DT_F32;
    const int64_t hid = c->hidden,
                  pf = (int64_t)c->in_channels * c->patch_t * c->patch_h * c->patch_w;
    w->proj_in_w = UP2("proj_in.weight", F32, hid, pf);
    w->proj_in_b = UP1("proj_in.bias", F32, hid);
    w->audio_in_w = UP2("audio_proj_in.weight", F32, hid, c->audio_channels);
    w->audio_in_b = UP1("audio_proj_in.bias", F32, hid);
    w->ctx_w = UP2("context_embedder.weight", A, hid, c->text_dim);
    w->ctx_b = UP1("context_embedder.bias", A, hid);
    w->t1_w = UP2("time_embedder.linear_1.weight", F32, c->time_hidden, c->freq_dim);
    w->t1_b = UP1("time_embedder.linear_1.bias", F32, c->time_hidden);
    w->t2_w = UP2("time_embedder.linear_2.weight", F32, c->time_embed_dim, c->time_hidden);
    w->t2_b = UP1("time_embedder.linear_2.bias", F32, c->time_embed_dim);
    w->refiner_final_norm = UP1("token_refiner.final_norm.weight", A, hid);
    w->norm_out_w = UP1("norm_out.norm.weight", A, hid);
    w->norm_out_lin_w = UP2("norm_out.linear.weight", A, 2 * hid, c->time_embed_dim);
    w->norm_out_lin_b = UP1("norm_out.linear.bias", A, 2 * hid);
    w->proj_out_w = UP2("proj_out.weight", F32, pf, hid);
    w->proj_out_b = UP1("proj_out.bias", F32, pf);
    w->audio_out_w = UP2("audio_proj_out.weight", F32, c->audio_channels, hid);
    w->audio_out_b = UP1("audio_proj_out.bias", F32, c->audio_channels);
    /* RoPE: the reference's float32 inv_freq, repeated for the three axes' pairs */
    const int nf = c->rope_freq_dim;
    double inv[64];
    float invf[192];
    vdn_rope_inv_freq(inv, nf, c->rope_theta);
    for (int i = 0; i < 3 * nf; i++)
        invf[i] = (float)inv[i % nf];
    w->rope_inv = keep(L, L->failed ? NULL : vdn_tensor_new2(d, F32, 1, 3 * nf));
    if (w->rope_inv && vdn_tensor_set(w->rope_inv, invf, VDN_DT_F32) != 0)
        dev_failed(L, "RoPE frequencies");
    w->refiner = vdn_xcalloc((size_t)c->refiner_layers + 1, sizeof(vdn_dit_block));
    w->blocks = vdn_xcalloc((size_t)c->layers + 1, sizeof(vdn_dit_block));
    char prefix[128];
    /* fp8: each block quantised as soon as it is loaded, so the device never holds more than
     * one block in bf16 beside the fp8 ones (all of H3 in bf16 would be 66 GB at load) */
    for (int i = 0; i < c->refiner_layers && !L->failed; i++) {
        snprintf(prefix, sizeof prefix, "token_refiner.refiner_blocks.%d", i);
        load_block(L, &w->refiner[i], prefix, 0);
        if (fp8 && !L->failed && quantize_block(w, &w->refiner[i], err, errlen)) L->failed = 1;
    }
    for (int i = 0; i < c->layers && !L->failed; i++) {
        snprintf(prefix, sizeof prefix, "transformer_blocks.%d", i);
        load_block(L, &w->blocks[i], prefix, 1);
        if (fp8 && !L->failed && quantize_block(w, &w->blocks[i], err, errlen)) L->failed = 1;
    }
    if (fp8 && !L->failed && vdn_dit_weights_quantize_fp8(w, err, errlen)) L->failed = 1;
    if (L->failed) {
        vdn_dit_weights_free(w);
        return -1;
    }
    return 0;
}

/* ---- fp8 ---- */

/* *slot (an owned float weight) replaced by its fp8 form; the scales join the owned tensors */
static int quantize_slot(vdn_dit_weights *w, vdn_tensor **slot, const char *what, char *err,
                         size_t errlen) {
    vdn_tensor *t = *slot;
    if (!t || t->dtype == VDN_DT_F8_E4M3) return 0;
    int i = 0;
    while (i < w->n_owned && w->owned[i] != t)
        i++;
    VDN_ASSERT(i < w->n_owned && "an fp8 candidate the loader does not own");
    vdn_tensor *q, *s;
    if (vdn_quantize_weight_fp8(t, &q, &s) != 0)
        return vdn_fail(err, errlen, "weights: fp8 %s: %s", what, vdn_dev_error(w->dev));
    vdn_tensor_free(t);
    w->owned[i] = q;
    if (w->n_owned == w->cap_owned) {
        w->cap_owned = 2 * w->cap_owned + 1;
        vdn_tensor **n = vdn_xmalloc(sizeof(vdn_tensor *) * (size_t)w->cap_owned);
        memcpy(n, w->owned, sizeof(vdn_tensor *) * (size_t)w->n_owned);
        free(w->owned);
        w->owned = n;
    }
    w->owned[w->n_owned++] = s;
    *slot = q;
    w->n_fp8++;
    return 0;
}

static int quantize_block(vdn_dit_weights *w, vdn_dit_block *b, char *err, size_t errlen) {
    return quantize_slot(w, &b->wqkv, "fused q/k/v", err, errlen) ||
           quantize_slot(w, &b->to_out, "to_out", err, errlen) ||
           quantize_slot(w, &b->ff_in, "ff_in", err, errlen) ||
           quantize_slot(w, &b->ff_out, "ff_out", err, errlen) ||
           quantize_slot(w, &b->to_out_linear, "to_out_linear", err, errlen) ||
           quantize_slot(w, &b->ada_w, "adaLN projection", err, errlen);
}

int vdn_dit_weights_quantize_fp8(vdn_dit_weights *w, char *err, size_t errlen) {
    if (quantize_slot(w, &w->ctx_w, "context_embedder", err, errlen) ||
        quantize_slot(w, &w->norm_out_lin_w, "final adaLN projection", err, errlen))
        return -1;
    for (int i = 0; i < w->cfg.refiner_layers; i++)
        if (quantize_block(w, &w->refiner[i], err, errlen)) return -1;
    for (int i = 0; i < w->cfg.layers; i++)
        if (quantize_block(w, &w->blocks[i], err, errlen)) return -1;
    return 0;
}

void vdn_dit_weights_free(vdn_dit_weights *w) {
    for (int i = 0; i < w->n_owned; i++)
        vdn_tensor_free(w->owned[i]);
    free(w->owned);
    free(w->refiner);
    free(w->blocks);
    memset(w, 0, sizeof *w);
}
