/* Qwen3-VL's vision tower over the op layer (transformers' Qwen3VLVisionModel): pixel_values rows
 * -> the merged features that replace a vision block's <|image_pad|> rows, and the DeepStack
 * features added to those rows after the first decoder layers.
 *
 *   patch embedding (the Conv3d over [3, 2, 16, 16] as a Linear over the row) + the 48 x 48
 *   position table bilinearly interpolated to each picture's grid (fast_pos_embed_interpolate),
 *   blocks of LayerNorm, attention with the 2-D rope (each picture attends to itself), LayerNorm,
 *   GELU-tanh MLP; after the blocks of deepstack_visual_indexes a DeepStack merger (LayerNorm over
 *   2 x 2 patches, Linear, GELU, Linear), at the end the merger (LayerNorm per patch, then the
 *   same over 2 x 2 patches).
 *
 * Heads are padded to 64 or 128 channels (72 in Qwen3-VL: 1152 / 16) with zero rows of the qkv
 * weight and zero columns of proj's, so every backend's attention takes them; the zeros change
 * no sum. Weights keep the device's dtype (fp32 on the CPU, bf16 on a GPU) at every precision. */
#ifndef VDN_TEXT_VISION_H
#define VDN_TEXT_VISION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "encoder_config.h"
#include "op.h"
#include "safetensors.h"

typedef struct vdn_vision vdn_vision;

/* The model.visual.* weights of st onto dev; errors name the tensor (a text-only checkpoint has
 * none: "tensor model.visual.patch_embed.proj.weight is missing"). */
vdn_vision *vdn_vision_open(const vdn_st_set *st, const vdn_vision_config *c, vdn_dev *dev,
                            char *err, size_t errlen);
/* Random weights of c's shapes (benchmarks at the real size without the checkpoint). */
vdn_vision *vdn_vision_random(const vdn_vision_config *c, vdn_dev *dev, uint64_t seed, char *err,
                              size_t errlen);
void vdn_vision_close(vdn_vision *v);

/* rows: host float32 [sum of t h w, 3 temporal_patch patch^2] (vision_preprocess.h), grids[i] =
 * (t, h, w) of picture i. On success *feat = [tokens, out_hidden] and ds[j] (j <
 * c->n_deepstack) = [tokens, out_hidden], new device tensors the caller frees, tokens = sum of
 * t h w / merge^2 in the pictures' order. cancel (core/cancel.h; NULL: none) is checked before
 * every block: a set flag ends the run with "vision tower: cancelled ...", everything freed. */
int vdn_vision_run(vdn_vision *v, const float *rows, const int64_t (*grids)[3], int n_pics,
                   const atomic_int *cancel, vdn_tensor **feat, vdn_tensor **ds, char *err,
                   size_t errlen);

#endif
