/* A tiny random model for the forward tests (test_model.c, forward_dump.c): sizes small enough
 * for float64 references, large enough that every head, channel and frame path runs. */
#ifndef VDN_TEST_TINY_MODEL_H
#define VDN_TEST_TINY_MODEL_H

#include <math.h>

#include "check.h"
#include "host_weights.h"
#include "vdn_util.h"

static inline float *rnd_arr(size_t n, double scale) {
    float *p = vdn_xmalloc(sizeof(float) * n);
    fill(p, n, scale);
    return p;
}

static inline vdn_config tiny_config(int has_vdn) {
    vdn_config c = {0};
    c.hidden = 16, c.heads = 2, c.head_dim = 8, c.ffn = 24, c.layers = 1, c.refiner_layers = 1;
    c.text_dim = 12, c.in_channels = 3, c.audio_channels = 4, c.patch_t = 1, c.patch_h = 2;
    c.patch_w = 2, c.freq_dim = 8, c.time_embed_dim = 10, c.time_hidden = 14, c.rope_freq_dim = 1;
    c.rope_theta = 10000.0, c.norm_eps = 1e-5f;
    c.has_vdn = has_vdn, c.chunk = 5, c.radius = 1, c.anchors_both = 1, c.softmax_gate = 1;
    c.text_state = 1, c.linear_head_dim = 8, c.alpha_rank = 4, c.gate_rank = 4;
    c.conv_spatial = 5, c.conv_temporal = 5, c.linear_norm_eps = 1e-6f, c.text_state_scale = 0.5f;
    return c;
}

static inline void random_block(vdn_block_weights *b, const vdn_config *c) {
    int hid = c->hidden, C = c->heads * c->head_dim;
    double s = 1.0 / sqrt(hid);
    b->norm1 = rnd_arr(hid, 1), b->norm2 = rnd_arr(hid, 1);
    b->to_q = rnd_arr(C * hid, s), b->to_k = rnd_arr(C * hid, s), b->to_v = rnd_arr(C * hid, s);
    b->norm_q = rnd_arr(c->head_dim, 1), b->norm_k = rnd_arr(c->head_dim, 1);
    b->to_out = rnd_arr(hid * C, 1.0 / sqrt(C));
    b->ff_in = rnd_arr(2 * c->ffn * hid, s), b->ff_out = rnd_arr(hid * c->ffn, 1.0 / sqrt(c->ffn));
    b->ada_w = rnd_arr(18 * hid * c->time_embed_dim, 0.3), b->ada_b = rnd_arr(18 * hid, 0.3);
    b->sg_w = rnd_arr(c->heads * hid, s), b->sg_b = rnd_arr(c->heads, 1);
    b->to_out_linear = rnd_arr(hid * C, 1.0 / sqrt(C));
    vdn_vda_weights *v = &b->vda;
    v->k_sp = rnd_arr(C * 25, 0.2), v->v_sp = rnd_arr(C * 25, 0.2);
    v->k_tm = rnd_arr(C * 5, 0.45), v->v_tm = rnd_arr(C * 5, 0.45);
    v->beta_w = rnd_arr(c->heads * hid, s), v->alpha_down = rnd_arr(c->alpha_rank * hid, s);
    v->alpha_up = rnd_arr(C * c->alpha_rank, 0.5), v->A_log = rnd_arr(c->heads, 1);
    v->dt_bias = rnd_arr(C, 1), v->gate_down = rnd_arr(c->gate_rank * hid, s);
    v->gate_up = rnd_arr(C * c->gate_rank, 0.5), v->gate_up_b = rnd_arr(C, 1);
    v->norm_w = rnd_arr(c->head_dim, 1);
}

static inline void random_weights(vdn_weights *w, const vdn_config *c) {
    int hid = c->hidden, pf = c->in_channels * 4;
    w->proj_in_w = rnd_arr(hid * pf, 0.3), w->proj_in_b = rnd_arr(hid, 0.3);
    w->audio_in_w = rnd_arr(hid * c->audio_channels, 0.3), w->audio_in_b = rnd_arr(hid, 0.3);
    w->ctx_w = rnd_arr(hid * c->text_dim, 0.3), w->ctx_b = rnd_arr(hid, 0.3);
    w->t1_w = rnd_arr(c->time_hidden * c->freq_dim, 0.5), w->t1_b = rnd_arr(c->time_hidden, 0.5);
    w->t2_w = rnd_arr(c->time_embed_dim * c->time_hidden, 0.3);
    w->t2_b = rnd_arr(c->time_embed_dim, 0.3);
    w->refiner_final_norm = rnd_arr(hid, 1), w->norm_out_w = rnd_arr(hid, 1);
    w->norm_out_lin_w = rnd_arr(2 * hid * c->time_embed_dim, 0.3);
    w->norm_out_lin_b = rnd_arr(2 * hid, 0.3);
    w->proj_out_w = rnd_arr(pf * hid, 0.3), w->proj_out_b = rnd_arr(pf, 0.3);
    w->audio_out_w = rnd_arr(c->audio_channels * hid, 0.3),
    w->audio_out_b = rnd_arr(c->audio_channels, 0.3);
    w->refiner = vdn_xcalloc(c->refiner_layers, sizeof(vdn_block_weights));
    w->blocks = vdn_xcalloc(c->layers, sizeof(vdn_block_weights));
    for (int i = 0; i < c->refiner_layers; i++)
        random_block(&w->refiner[i], c);
    for (int i = 0; i < c->layers; i++)
        random_block(&w->blocks[i], c);
}

#endif
