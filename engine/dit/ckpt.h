/* An assembled checkpoint: base transformer (diffusers or native layout), optional VDN linear
 * branch, every PEFT adapter folded in. The forward reads tensors from here by their canonical
 * (diffusers) names, e.g. "transformer_blocks.3.attn.to_q.weight",
 * "transformer_blocks.3.attn.linear_attention.alpha.A_log". Native-layout checkpoints are
 * converted at load (per-head fused QKV split, fc1 [gate; up] -> [up; gate]) so the forward
 * never sees the native names.
 *
 * Values are exposed as float32 arrays holding exactly the values the released stack computes
 * with: a bf16 tensor is widened; a LoRA-merged bf16 tensor is bf16(W + bf16((B A) * alpha / r)),
 * the delta computed in fp32 and added in the weight dtype like the reference merge.
 * `vdn_ckpt_dtype` tells the stored dtype (fp32 modules stay fp32). */
#ifndef VDN_CKPT_H
#define VDN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "dtype.h"

typedef struct vdn_ckpt vdn_ckpt;

/* dir: a diffusers base dir (config.json + diffusion_pytorch_model*.safetensors [+ index]), a
 * pipeline dir with transformer/, a native dir, or a VDN checkpoint dir (model_spec.json,
 * linear_branch/, adapters/<name>/). extra_adapters: more PEFT adapter dirs/files to fold.
 * base_dir: where a VDN checkpoint's base is looked for when model_spec.json's base.source is not
 * there (the vdn command gives VDN_BASE_DIR), before the sibling h3-base; NULL: not there. */
vdn_ckpt *vdn_ckpt_open(const char *dir, const char *const *extra_adapters, int n_extra,
                        const char *base_dir, char *err, size_t errlen);
void vdn_ckpt_close(vdn_ckpt *ck);

const vdn_config *vdn_ckpt_config(const vdn_ckpt *ck);

/* Canonical tensor as float32, shape-checked (ndim/shape must match exactly; the error names
 * the checkpoint file and tensor). The pointer lives as long as the checkpoint. */
const float *vdn_ckpt_f32(vdn_ckpt *ck, const char *name, int ndim, const int64_t *shape, char *err,
                          size_t errlen);
int vdn_ckpt_has(const vdn_ckpt *ck, const char *name);
vdn_dtype vdn_ckpt_dtype(const vdn_ckpt *ck, const char *name);

/* Identity for run records and worker READY: sha256 over the config files, each safetensors
 * file's header and first MiB of data (cheap), the layout, and the folded adapters. */
const char *vdn_ckpt_identity(const vdn_ckpt *ck);
const char *vdn_ckpt_layout(const vdn_ckpt *ck); /* "diffusers" | "native" */
int vdn_ckpt_adapter_count(const vdn_ckpt *ck);
const char *vdn_ckpt_adapter_name(const vdn_ckpt *ck, int i);

/* ---- added by the checkpoint code (e1) ---- */
/* Every canonical tensor, sorted by name (for `vdn inspect`, uploads, tests). */
int vdn_ckpt_count(const vdn_ckpt *ck);
const char *vdn_ckpt_name(const vdn_ckpt *ck, int i);
/* ndim (shape filled, up to 8 dims) or -1 if the tensor is absent. */
int vdn_ckpt_shape(const vdn_ckpt *ck, const char *name, int64_t shape[8]);
/* Drop the copies made by vdn_ckpt_f32 / vdn_ckpt_stored (e.g. once uploaded to a GPU);
 * asking again rebuilds them. */
void vdn_ckpt_release(vdn_ckpt *ck, const char *name);
/* Folded adapter i: rank (default r of its JSON, or the most common pair rank) and targets. */
int vdn_ckpt_adapter_rank(const vdn_ckpt *ck, int i);
int vdn_ckpt_adapter_targets(const vdn_ckpt *ck, int i);
/* The tensor in its stored dtype (*dtype says which; bf16 stays 2 bytes): for a GPU upload of
 * the real model, 66 GB instead of 132 GB of float32. Zero-copy from the mapping when the
 * tensor needs no layout conversion and no LoRA fold (then possibly unaligned: copy or use
 * unaligned loads); otherwise built once (conversion, folds) and kept until vdn_ckpt_release.
 * Shape-checked like vdn_ckpt_f32. */
const void *vdn_ckpt_stored(vdn_ckpt *ck, const char *name, int ndim, const int64_t *shape,
                            vdn_dtype *dtype, char *err, size_t errlen);
/* Stored bytes by dtype over all canonical tensors (index = vdn_dtype). */
void vdn_ckpt_bytes_by_dtype(const vdn_ckpt *ck, uint64_t bytes[VDN_DT_COUNT]);

#endif
