/* The tiny random model (tiny_model.h) through the DiT over the CPU op layer (dit.h), with the
 * host-array calls the forward tests use: tiny_refine_text and tiny_forward load the weights
 * onto a CPU device on first use (per weights struct). Include after tiny_model.h. */
#ifndef VDN_TEST_TINY_FORWARD_H
#define VDN_TEST_TINY_FORWARD_H

#include "dit.h"
#include "tiny_source.h"

typedef struct {
    const vdn_weights *hw;
    vdn_config cfg;
    vdn_dit_weights w;
} tiny_loaded;

static vdn_dev *g_tiny_dev;
static tiny_loaded g_tiny[8];
static int g_n_tiny;

static inline const vdn_dit_weights *tiny_dit(const vdn_weights *hw, const vdn_config *c) {
    for (int i = 0; i < g_n_tiny; i++)
        if (g_tiny[i].hw == hw && memcmp(&g_tiny[i].cfg, c, sizeof *c) == 0) return &g_tiny[i].w;
    char err[VDN_ERR_LEN];
    if (!g_tiny_dev) g_tiny_dev = vdn_dev_open("cpu", 0, 1, err, sizeof err);
    VDN_ASSERT(g_tiny_dev && g_n_tiny < 8);
    static tiny_source src; /* read during the load only */
    tiny_source_make(&src, hw, c);
    vdn_weight_source ws = tiny_weight_source(&src);
    tiny_loaded *t = &g_tiny[g_n_tiny];
    if (vdn_dit_weights_load(&t->w, g_tiny_dev, c, &ws, err, sizeof err) != 0) {
        fprintf(stderr, "tiny model: %s\n", err);
        abort();
    }
    t->hw = hw, t->cfg = *c;
    return &g_tiny[g_n_tiny++].w;
}

static inline void tiny_refine_text(float *text, const float *emb, int L, const vdn_weights *hw,
                                    const vdn_config *c) {
    char err[VDN_ERR_LEN];
    if (vdn_dit_refine_text_host(tiny_dit(hw, c), emb, L, text, err, sizeof err) != 0) {
        fprintf(stderr, "tiny model: %s\n", err);
        abort();
    }
}

static inline int tiny_forward(const vdn_weights *hw, const vdn_config *c, const float *text,
                               const vdn_step_inputs *in, float *vv, float *av, char *err,
                               size_t errlen) {
    return vdn_dit_forward_host(tiny_dit(hw, c), NULL, NULL, text, in, vv, av, 0, NULL, err,
                                errlen);
}

#endif
