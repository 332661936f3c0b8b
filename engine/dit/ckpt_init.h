/* `vdn ckpt init`: random checkpoints in exactly the released layouts (docs/formats.md), for
 * tests and demos. Values are counter-based (value i of a tensor is a hash of seed, canonical
 * tensor name and i), so the diffusers and native layouts of one seed hold the same values, any
 * tensor can be written in streamed chunks, and a test can recompute any value. */
#ifndef VDN_CKPT_INIT_H
#define VDN_CKPT_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct {
    const char *preset; /* "tiny" | "small" (head_dim 128) | "h3" */
    const char *out;    /* output directory (created) */
    uint64_t seed;
    int vdn;              /* also a VDN checkpoint dir around the base (base in OUT/base) */
    const char *adapters; /* comma list of "default", "turbo" ("none" or NULL: default when vdn) */
    int native;           /* base in the native MiniMaxH3DiTModel layout */
    int layers;           /* 0 = the preset's */
    int heads;            /* 0 = the preset's (tests of heads that do not divide over ranks) */
    double shard_mb;      /* shard the base above this size (0 = 10000 MB, like diffusers) */
    int prompt_tokens;    /* 0 = preset's */
} vdn_ckpt_init_opts;

/* The preset's config (layers override applied when > 0). -1 for an unknown preset. */
int vdn_ckpt_preset(const char *preset, int layers, vdn_config *cfg, char *err, size_t errlen);
int vdn_ckpt_init(const vdn_ckpt_init_opts *o, char *err, size_t errlen);

/* The generator: value i (row-major) of the canonical tensor `name` of that shape under seed,
 * before rounding to the stored dtype. Init per spec: std 1/sqrt(fan_in) linears, norms ~1,
 * adaLN projections 0.5/sqrt(fan_in), small biases, KDA A_log = log U(1, 16) and dt_bias =
 * softplus^-1(dt), dt log-uniform in [1e-3, 1e-1], softmax gate bias logit(0.99), short-conv
 * std 1/5 (spatial) and 1/sqrt(5) (temporal). LoRA factors and prompt tensors use the same
 * generator under their own names. */
float vdn_ckpt_init_value(uint64_t seed, const char *name, int ndim, const int64_t *shape,
                          int64_t i);

#endif
