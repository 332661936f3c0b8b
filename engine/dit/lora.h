/* PEFT LoRA adapters, folded into the base at load: W += (B @ A) * alpha / r, the delta computed
 * in fp32 and rounded to the weight's dtype, then added in that dtype, exactly like the reference
 * merge `w.add_(delta.to(w.dtype))` (spec 5.4 "Application").
 *
 * An adapter is a directory holding adapter_model.safetensors and adapter_spec.json or
 * adapter_config.json (either; with neither, alpha = rank), or a bare .safetensors file (alpha
 * from its __metadata__ "alpha" or "lora_alpha" when present, else alpha = rank; one alpha over
 * mixed ranks is refused). The JSON may hold the keys at the top level or under "config":
 * r / rank, lora_alpha / alpha, rank_pattern, alpha_pattern (a pattern key matches a module name
 * exactly or as a dotted suffix). A pair contradicting its rank_pattern entry is refused; a
 * rank the config does not explain (no pattern, differs from r) folds at the configured alpha/r
 * with a warning.
 *
 * Tensor names: MODULE.lora_A[.ADAPTER].weight (r, in) and MODULE.lora_B[.ADAPTER].weight
 * (out, r). Targets come out in canonical (diffusers) module names:
 *   - prefixes "base_model.model.", "transformer.", "diffusion_model." dropped;
 *   - "X.attn.orig.Y" (VDN wraps the DiT attention as `orig`) -> "X.attn.Y";
 *   - original-layout adapters (modules under "blocks.", "token_refiner.blocks." or
 *     "final_layer.") are translated: the fused attn.qkv_proj pair becomes to_q/to_k/to_v pairs
 *     sharing A, with B row-chunked in three (q, k, v) as the reference translation does;
 *     mlp.fc1 -> ff.net.0.proj with B's halves swapped ([gate; up] -> [up; gate]); mlp.fc2 ->
 *     ff.net.2; attn.out_proj -> attn.to_out.0; blocks. -> transformer_blocks.;
 *     final_layer.adaln_proj.linear -> norm_out.linear. */
#ifndef VDN_LORA_H
#define VDN_LORA_H

#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"

typedef struct {
    char *target;          /* canonical module, e.g. "transformer_blocks.3.attn.to_q" */
    int rank;              /* r */
    float scale;           /* alpha / r */
    int64_t out, in;       /* shape of the target weight */
    const vdn_st_entry *A; /* (r, in) */
    const vdn_st_entry *B; /* (rows, r); this pair uses rows [b_row0, b_row0 + out) */
    int64_t b_row0;        /* nonzero for the k/v chunks of a fused qkv_proj B */
    int b_swap;            /* B's two row halves swapped (native mlp.fc1 -> ff.net.0.proj) */
} vdn_lora_pair;

typedef struct {
    char *name;        /* adapter name (directory name, or file stem) */
    char *path;        /* the safetensors file */
    vdn_st_file *file; /* A and B stay in the mapping until vdn_lora_free */
    int n_pairs;
    vdn_lora_pair *pairs; /* sorted by target */
    int rank;             /* default r from the JSON or metadata (0 when unknown) */
    float alpha;          /* default alpha (0 when unknown: alpha = r per pair) */
    int original_layout;  /* names were translated from the native layout */
    char *json_text;      /* the adapter JSON ("" when none), for identity hashes */
    char header_sha[65];  /* sha256 of the safetensors header */
} vdn_lora;

/* Load an adapter (dir or .safetensors file). name may be NULL (derived from the path). */
int vdn_lora_open(vdn_lora *l, const char *path, const char *name, char *err, size_t errlen);
void vdn_lora_free(vdn_lora *l);
/* The pair targeting `module` (canonical, without ".weight"), or NULL. */
const vdn_lora_pair *vdn_lora_find(const vdn_lora *l, const char *module);

/* Fold one pair into W (out x in), whose values are exactly representable in wdtype, as the
 * reference merge does: delta = (B @ A) * scale in fp32, rounded to wdtype, then
 * W = wdtype(W + delta). -1 (naming the adapter file and tensor) on a non-float A/B. A large
 * fold runs on `threads` threads (0: one per core, at most 64); each owns whole rows, so the
 * result does not depend on the count. */
int vdn_lora_fold(float *W, vdn_dtype wdtype, const vdn_lora *l, const vdn_lora_pair *p,
                  int threads, char *err, size_t errlen);
/* Parse an adapter JSON (adapter_spec.json / adapter_config.json) the way vdn_lora_open does;
 * 0 or -1 with an error naming label and key (tests, fuzzing). */
int vdn_lora_check_json(const char *label, const char *text, size_t len, int *rank, float *alpha,
                        char *err, size_t errlen);
/* Round a float to what dtype stores (identity for F32). */
float vdn_round_dtype(float x, vdn_dtype dt);

#endif
