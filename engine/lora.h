/* PEFT LoRA adapters, folded into the base at load: W += (B @ A) * alpha / r, the delta in fp32,
 * the sum rounded to the weight's stored dtype (spec 5.4 "Application").
 *
 * An adapter is a directory holding adapter_model.safetensors and adapter_spec.json or
 * adapter_config.json (either; with neither, alpha = rank), or a bare .safetensors file (alpha
 * from its __metadata__ "lora_alpha"/"alpha" when present, else alpha = rank). The JSON may hold
 * the PEFT keys at the top level or under "config": r / rank, lora_alpha / alpha, rank_pattern,
 * alpha_pattern (pattern keys match a module name exactly or as a dotted suffix).
 *
 * Tensor names: BASE.MODULE.lora_A[.ADAPTER].weight (r, in) and ...lora_B... (out, r), with an
 * optional "base_model.model." prefix. Targets come out in canonical (diffusers) module names:
 *   - "X.attn.orig.Y" (VDN wraps the DiT attention as `orig`) -> "X.attn.Y";
 *   - original-layout adapters (names under "blocks." / "final_layer." / "token_refiner.blocks.")
 *     are translated: fused attn.qkv_proj -> to_q/to_k/to_v sharing A with B chunked in three;
 *     mlp.fc1 -> ff.net.0.proj with B's halves swapped ([gate; up] -> [up; gate]); mlp.fc2 ->
 *     ff.net.2; attn.out_proj -> attn.to_out.0; q_norm/k_norm are not LoRA targets;
 *     blocks. -> transformer_blocks.; final_layer.adaln_proj.linear -> norm_out.linear. */
#ifndef VDN_LORA_H
#define VDN_LORA_H

#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"

typedef struct {
    char
        *target; /* canonical module, e.g. "transformer_blocks.3.attn.to_q" (weight = +".weight") */
    int rank;    /* r (rows of A actually used) */
    float scale; /* alpha / r */
    int64_t out, in; /* shape of the target weight */
    float *A;        /* (rank, in) fp32 */
    float *B;        /* (out, rank) fp32 */
} vdn_lora_pair;

typedef struct {
    char *name; /* adapter name (directory name, or file stem) */
    char *path;
    int n_pairs;
    vdn_lora_pair *pairs;
    int rank;         /* default r from the JSON (0 when unknown) */
    float alpha;      /* default alpha (0 when unknown) */
    char *json_text;  /* the adapter JSON ("" when none), for identity hashes */
    char *header_sha; /* sha256 of the adapter safetensors header (identity) */
} vdn_lora;

/* Load an adapter (dir or .safetensors file). name may be NULL (derived from the path). */
int vdn_lora_open(vdn_lora *l, const char *path, const char *name, char *err, size_t errlen);
void vdn_lora_free(vdn_lora *l);
/* The pair targeting `module` (canonical, without ".weight"), or NULL. */
const vdn_lora_pair *vdn_lora_find(const vdn_lora *l, const char *module);

/* W (out, in) += scale * B (out, r) @ A (r, in), accumulated in fp32 per element. */
void vdn_lora_delta_add(float *W, const vdn_lora_pair *p);

#endif
