/* The tiny random model (tiny_model.h) as a weight source for the DiT over the op layer
 * (dit.h): its host arrays under their canonical checkpoint names. Include after tiny_model.h. */
#ifndef VDN_TEST_TINY_SOURCE_H
#define VDN_TEST_TINY_SOURCE_H

#include <stdio.h>
#include <string.h>

#include "dit.h"

typedef struct {
    char name[256];
    const float *p;
} tiny_entry;

typedef struct {
    tiny_entry e[512];
    int n;
} tiny_source;

static inline void tiny_add(tiny_source *s, const char *pre, const char *name, const float *p) {
    VDN_ASSERT(s->n < 512);
    int len = snprintf(s->e[s->n].name, sizeof s->e[s->n].name, "%.100s%s%.100s", pre,
                       pre[0] ? "." : "", name);
    VDN_ASSERT(len > 0 && len < (int)sizeof s->e[s->n].name);
    s->e[s->n++].p = p;
}

static inline void tiny_add_block(tiny_source *s, const char *pre, const vdn_block_weights *b) {
    const char *la = "attn.linear_attention.";
    char n[128];
    tiny_add(s, pre, "norm1.weight", b->norm1), tiny_add(s, pre, "norm2.weight", b->norm2);
    tiny_add(s, pre, "attn.to_q.weight", b->to_q), tiny_add(s, pre, "attn.to_k.weight", b->to_k);
    tiny_add(s, pre, "attn.to_v.weight", b->to_v);
    tiny_add(s, pre, "attn.norm_q.weight", b->norm_q);
    tiny_add(s, pre, "attn.norm_k.weight", b->norm_k);
    tiny_add(s, pre, "attn.to_out.0.weight", b->to_out);
    tiny_add(s, pre, "ff.net.0.proj.weight", b->ff_in),
        tiny_add(s, pre, "ff.net.2.weight", b->ff_out);
    tiny_add(s, pre, "adaln_proj.linear.weight", b->ada_w);
    tiny_add(s, pre, "adaln_proj.linear.bias", b->ada_b);
    tiny_add(s, pre, "attn.softmax_gate.up.weight", b->sg_w);
    tiny_add(s, pre, "attn.softmax_gate.up.bias", b->sg_b);
    tiny_add(s, pre, "attn.to_out_linear.weight", b->to_out_linear);
    const vdn_vda_weights *v = &b->vda;
    const struct {
        const char *n;
        const float *p;
    } vda[] = {{"short_conv.k_sp.weight", v->k_sp},
               {"short_conv.v_sp.weight", v->v_sp},
               {"short_conv.k_tm.weight", v->k_tm},
               {"short_conv.v_tm.weight", v->v_tm},
               {"beta_proj.weight", v->beta_w},
               {"alpha.down.weight", v->alpha_down},
               {"alpha.up.weight", v->alpha_up},
               {"alpha.A_log", v->A_log},
               {"alpha.dt_bias", v->dt_bias},
               {"output_gate.down.weight", v->gate_down},
               {"output_gate.up.weight", v->gate_up},
               {"output_gate.up.bias", v->gate_up_b},
               {"norm.weight", v->norm_w}};
    for (size_t i = 0; i < sizeof vda / sizeof vda[0]; i++) {
        snprintf(n, sizeof n, "%s%s", la, vda[i].n);
        tiny_add(s, pre, n, vda[i].p);
    }
}

static inline void tiny_source_make(tiny_source *s, const vdn_weights *w, const vdn_config *c) {
    s->n = 0;
    const struct {
        const char *n;
        const float *p;
    } top[] = {{"proj_in.weight", w->proj_in_w},
               {"proj_in.bias", w->proj_in_b},
               {"audio_proj_in.weight", w->audio_in_w},
               {"audio_proj_in.bias", w->audio_in_b},
               {"context_embedder.weight", w->ctx_w},
               {"context_embedder.bias", w->ctx_b},
               {"time_embedder.linear_1.weight", w->t1_w},
               {"time_embedder.linear_1.bias", w->t1_b},
               {"time_embedder.linear_2.weight", w->t2_w},
               {"time_embedder.linear_2.bias", w->t2_b},
               {"token_refiner.final_norm.weight", w->refiner_final_norm},
               {"norm_out.norm.weight", w->norm_out_w},
               {"norm_out.linear.weight", w->norm_out_lin_w},
               {"norm_out.linear.bias", w->norm_out_lin_b},
               {"proj_out.weight", w->proj_out_w},
               {"proj_out.bias", w->proj_out_b},
               {"audio_proj_out.weight", w->audio_out_w},
               {"audio_proj_out.bias", w->audio_out_b}};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        tiny_add(s, "", top[i].n, top[i].p);
    char pre[64];
    for (int i = 0; i < c->refiner_layers; i++) {
        snprintf(pre, sizeof pre, "token_refiner.refiner_blocks.%d", i);
        tiny_add_block(s, pre, &w->refiner[i]);
    }
    for (int i = 0; i < c->layers; i++) {
        snprintf(pre, sizeof pre, "transformer_blocks.%d", i);
        tiny_add_block(s, pre, &w->blocks[i]);
    }
}

static const void *tiny_get(void *ctx, const char *name, int ndim, const int64_t *shape,
                            vdn_dtype *dt, char *err, size_t errlen) {
    (void)ndim, (void)shape;
    const tiny_source *s = ctx;
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->e[i].name, name) == 0 && s->e[i].p) {
            *dt = VDN_DT_F32;
            return s->e[i].p;
        }
    vdn_fail(err, errlen, "tiny model: no tensor %s", name);
    return NULL;
}

static inline vdn_weight_source tiny_weight_source(tiny_source *s) {
    return (vdn_weight_source){tiny_get, NULL, s, NULL};
}

#endif
