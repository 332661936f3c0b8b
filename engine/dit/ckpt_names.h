/* Tensor names and the tensor schema of the released layouts (spec 0 and 5.4).
 * Canonical names are the diffusers names; the native (`MiniMaxH3DiTModel`) names map onto them,
 * with two structural conversions: the per-head interleaved fused qkv_proj ([h0_q, h0_k, h0_v,
 * h1_q, ...] rows of head_dim) splits into to_q/to_k/to_v, and mlp.fc1 rows [gate; up] become
 * ff.net.0.proj rows [up; gate]. */
#ifndef VDN_CKPT_NAMES_H
#define VDN_CKPT_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "config.h"

typedef enum {
    VDN_XF_COPY = 0, /* same values */
    VDN_XF_QKV = 1,  /* one of q/k/v (part 0/1/2) out of a per-head interleaved fused matrix */
    VDN_XF_SWAP = 2, /* row halves swapped */
} vdn_xform;

#define VDN_NAME_MAX 256

/* Native name -> canonical names. Returns the number of outputs: 1 (out[0]), 3 (qkv_proj ->
 * to_q, to_k, to_v in out[0..2]), 0 for a native tensor the canonical layout does not store
 * (rope.inv_freq), -1 for a name outside the native layout. */
int vdn_native_to_canonical(const char *native, char out[3][VDN_NAME_MAX], vdn_xform *xf);
/* Canonical -> native name (+ transform and q/k/v part). -1 when there is none. */
int vdn_canonical_to_native(const char *canon, char *out, size_t n, vdn_xform *xf, int *part);
/* Pre-v2 linear-branch names (.attn.far., .attn.far.gate., .attn.local_gate., .attn.w_o_far.)
 * -> v2 names. Returns 1 if renamed, 0 if already v2. */
int vdn_branch_name_v2(const char *name, char *out, size_t n);
/* A LoRA module name in canonical form: "base_model.model." prefix dropped, ".attn.orig." ->
 * ".attn.". Returns 0, or -1 when the result does not fit. */
int vdn_lora_module_canonical(const char *module, char *out, size_t n);

/* The tensors of a checkpoint, in a fixed order. which: VDN_SCHEMA_BASE and/or VDN_SCHEMA_VDN.
 * Base tensors carry the released dtypes (fp32 modules of spec 0, bf16 otherwise); the VDN branch
 * is bf16. Needs cfg->alpha_rank, gate_rank, conv_spatial, conv_temporal for VDN_SCHEMA_VDN. */
enum { VDN_SCHEMA_BASE = 1, VDN_SCHEMA_VDN = 2 };
typedef void (*vdn_schema_fn)(void *user, const char *name, int ndim, const int64_t *shape,
                              vdn_dtype dtype);
void vdn_ckpt_schema(const vdn_config *cfg, int which, vdn_schema_fn fn, void *user);

#endif
