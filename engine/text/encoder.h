/* The Qwen3-VL text encoder, written once over the op layer (engine/op.h): token embeddings, then
 * decoder layers of RMSNorm, causal GQA attention with per-head q/k RMSNorm and RoPE (Qwen3-VL's
 * multimodal RoPE with all three position axes equal, as for text tokens), residual, RMSNorm,
 * SwiGLU MLP, residual. The output is hidden_states[layer]: the output of decoder layer `layer`,
 * with no final norm (what a prompt cache's prompt_embeds holds).
 *
 * Only the embeddings and the first `layer` layers are read from the safetensors shards (by the
 * released names); the embedding table stays in the file mapping and only the prompt's rows are
 * gathered. fp32 weights on the CPU (the oracle), bf16 where the device is a GPU.
 *
 * Precision (engine.h vdn_precision): bf16, the default, keeps those weights; fp8 quantises each
 * layer's four Linears (the fused q/k/v, o_proj, the fused gate/up, down_proj) to e4m3 with one
 * fp32 scale a row as the layer is loaded (vdn_op_quantize_rows), and each product quantises its
 * input per row by the same rule (vdn_op_linear). Embeddings, norms and activations keep their
 * dtype. On the CPU fp8 runs the quantised oracle (the bytes and scales CUDA makes, float64
 * sums). */
#ifndef VDN_TEXT_ENCODER_H
#define VDN_TEXT_ENCODER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "encoder_config.h"
#include "op.h"
#include "precision.h"
#include "tokenizer.h"

typedef struct vdn_text_encoder vdn_text_encoder;

/* dir: the text_encoder/ folder (config.json + model.safetensors[.index.json]). layer: 0 = the
 * default (vdn_text_encoder_default_layer), else 1..num_hidden_layers. Errors name the file and
 * tensor. At fp8 each Linear is quantised as soon as it is uploaded: the device never holds
 * more than one float matrix beside the fp8 ones. */
vdn_text_encoder *vdn_text_encoder_open(const char *dir, vdn_dev *dev, int layer,
                                        vdn_precision precision, char *err, size_t errlen);
void vdn_text_encoder_close(vdn_text_encoder *e);
/* Random weights of the given shapes, made on the host and uploaded, for benchmarks at the real
 * size without a 63 GB file (one random matrix per weight shape, shared by every layer; 4096
 * random embedding rows, token i reading row i mod 4096). */
vdn_text_encoder *vdn_text_encoder_random(const vdn_text_config *cfg, int layer,
                                          vdn_precision precision, vdn_dev *dev, uint64_t seed,
                                          char *err, size_t errlen);

const vdn_text_config *vdn_text_encoder_config(const vdn_text_encoder *e);
int vdn_text_encoder_layer(const vdn_text_encoder *e);
vdn_precision vdn_text_encoder_precision(const vdn_text_encoder *e);
int vdn_text_encoder_fp8_linears(const vdn_text_encoder *e); /* 4 a layer at fp8, else 0 */
/* SHA-256 hex of the checkpoint's part in the output: config.json, the shard headers (names,
 * dtypes, shapes, offsets) and the layer. Not the weight values (63 GB): a changed checkpoint is
 * a new folder in practice, and the headers pin its layout. Not the precision either, which
 * the prompt cache's key adds (prompt_text.h): the identity names the checkpoint alike at both. */
const char *vdn_text_encoder_identity(const vdn_text_encoder *e);
/* The same without loading the weights (layer 0 = the default). */
int vdn_text_encoder_identity_of(const char *dir, int layer, char out[65], char *err,
                                 size_t errlen);

/* out[n, hidden] (host float32) = hidden_states[layer] for ids[n]. A prompt longer than
 * text_config.max_position_embeddings, an empty one, or an id outside the vocabulary is refused
 * naming the limit. One run at a time per encoder: the activations of the last run stay on the
 * device for the next prompt of the same length (about 0.2 MB a token at the 32B shapes), until
 * a run of another length or vdn_text_encoder_close. */
int vdn_text_encoder_run(vdn_text_encoder *e, const int32_t *ids, int n, float *out, char *err,
                         size_t errlen);

/* Options of the runs that follow on this encoder (one run at a time; a resident encoder is
 * shared by jobs one after the other, so each sets its own and clears them after):
 * cancel (core/cancel.h) is checked before every decoder layer and vision block, and a set flag
 * ends the run at once with "text encoder: cancelled ..." and its activations freed, so a
 * cancelled job's encode stops within a layer's time, not the whole forward's. test_delay_ms
 * (tests: a long encode on a tiny checkpoint) makes a run take at least that long, spread over
 * its decoder layers, waiting in slices of at most 20 ms that each check cancel. NULL: none. */
typedef struct {
    const atomic_int *cancel;
    int test_delay_ms;
} vdn_text_run_opts;
void vdn_text_encoder_set_run_opts(vdn_text_encoder *e, const vdn_text_run_opts *o);

/* ---- pictures (MiniMax-H3's keyframe modes: fl2va, i2va) ----
 * The release's presentation (diffusers MiniMaxH3FL2VATextEncoderStep, encode_keyframes.py): for
 * picture i (from 1) the label "<Picture i>: " tokenized as text, then a vision block
 * <|vision_start|> <|image_pad|> x (t h w / 4) <|vision_end|>, after all pictures the prompt
 * verbatim; no chat template, no special tokens. Every row of a vision block is tagged
 * VDN_TEXT_TAG_VISION (0, the packed sequence's video tag VDN_TAG_VIDEO of engine/dit/config.h),
 * every other row VDN_TEXT_TAG_TEXT (1, VDN_TAG_TEXT), and
 * every row is kept in prompt_embeds. The pad rows take the vision tower's merged features
 * (vision.h), the first decoder layers add its DeepStack features to them, and the positions are
 * Qwen3-VL's multimodal ones (interleaved T/H/W rope).
 * The vision tower is read from the checkpoint on the first picture (a released-layout encoder
 * without model.visual.* weights still encodes text; pictures are then refused saying so), the
 * processor's settings from processor/preprocessor_config.json beside text_encoder/. Its
 * Linears stay in the device's float dtype at fp8 precision too. */
enum { VDN_TEXT_TAG_VISION = 0, VDN_TEXT_TAG_TEXT = 1 };

typedef struct {
    const uint8_t *rgb; /* height rows of `stride` bytes, width x (R, G, B) 8-bit each */
    int width, height;
    size_t stride;
} vdn_picture;

/* The presentation's ids and tags (malloc'd, *n of each) for pictures of the given grids
 * (image_grid_thw: (t, h, w) in patches). n_pics 0: the prompt's ids alone, all text. */
int vdn_text_presentation(vdn_text_encoder *e, const vdn_tokenizer *tok, const char *prompt,
                          size_t len, const int64_t (*grids)[3], int n_pics, int32_t **ids,
                          uint8_t **tags, int *n, char *err, size_t errlen);
/* out[n, hidden] = hidden_states[layer] for ids holding n_pics runs of <|image_pad|> (in order,
 * each exactly its grid's t h w / 4 long) with the pictures' pixel_values rows (host float32,
 * [sum of t h w, 3 x 2 x 16 x 16], vision_preprocess.h) in. n_pics 0: vdn_text_encoder_run. */
int vdn_text_encoder_run_pictures(vdn_text_encoder *e, const int32_t *ids, int n,
                                  const float *pixel_rows, const int64_t (*grids)[3], int n_pics,
                                  float *out, char *err, size_t errlen);
/* Benchmarks: random vision weights of vc's shapes on a random encoder (the processor's settings
 * the release's). */
int vdn_text_encoder_random_vision(vdn_text_encoder *e, const vdn_vision_config *vc, uint64_t seed,
                                   char *err, size_t errlen);
/* The whole keyframe step: the processor on each picture (vision_preprocess.h), the
 * presentation, the run. *rows [*n, hidden] and *tags [*n] are malloc'd. */
int vdn_text_encode_pictures(vdn_text_encoder *e, const vdn_tokenizer *tok, const char *prompt,
                             size_t len, const vdn_picture *pics, int n_pics, float **rows,
                             uint8_t **tags, int *n, char *err, size_t errlen);

#endif
