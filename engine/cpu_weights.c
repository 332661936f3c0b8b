/* Weights of the CPU forward: every canonical tensor looked up in the checkpoint (ckpt.h), shape
 * checked, as float32 views that live as long as the checkpoint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
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
