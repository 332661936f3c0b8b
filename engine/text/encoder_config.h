/* The Qwen3-VL text encoder's shapes, from the release's text_encoder/config.json (text_config),
 * and the released tensor names of its language model. */
#ifndef VDN_ENCODER_CONFIG_H
#define VDN_ENCODER_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* MiniMax-H3 conditions on hidden_states[50] of Qwen3-VL-32B: the output of decoder layer 50,
 * before the last layers and the final norm (spec 1.1). */
#define VDN_TEXT_ENCODER_LAYER 50

typedef struct {
    int64_t vocab, hidden, intermediate, head_dim;
    int layers, heads, kv_heads;
    double rms_eps, rope_theta;
    int64_t max_positions; /* max_position_embeddings: the longest prompt */
} vdn_text_config;

/* Qwen3-VL-32B's text_config (the release's text_encoder/config.json): the shapes the benchmarks
 * give random weights (encoder.h vdn_text_encoder_random) when no config.json is at hand. */
extern const vdn_text_config vdn_text_qwen3_vl_32b;

/* dir: the text_encoder/ folder. Every field checked (present, positive, heads % kv_heads == 0,
 * head_dim even); errors name the file and field. */
int vdn_text_config_load(const char *dir, vdn_text_config *c, char *err, size_t errlen);

/* hidden_states[k] is taken: 50, or for a checkpoint of fewer layers (tiny test checkpoints) the
 * output of the last layer but one. */
int vdn_text_encoder_default_layer(const vdn_text_config *c);

/* "model.language_model.layers.7.self_attn.q_proj.weight" for layer 7, "self_attn.q_proj" */
void vdn_text_weight_name(char *out, size_t n, int layer, const char *what);

/* The vision tower's shapes (config.json vision_config, Qwen3-VL's Qwen3VLVisionConfig), the
 * special tokens of a vision block (image_token_id, vision_start_token_id, vision_end_token_id at
 * the top level) and the text decoder's multimodal rope sections (text_config.rope_scaling or
 * rope_parameters .mrope_section, pairs of the T, H, W axes, interleaved). */
#define VDN_VISION_MAX_DEEPSTACK 8
typedef struct {
    int depth, heads, patch, temporal_patch, merge, in_channels;
    int64_t hidden, intermediate, out_hidden, n_pos_embed; /* n_pos_embed: a square grid */
    int n_deepstack, deepstack[VDN_VISION_MAX_DEEPSTACK];  /* block indexes, ascending */
    int32_t image_token, vision_start_token, vision_end_token;
    int mrope[3];
} vdn_vision_config;

/* 0, or 1 when config.json has no vision_config (a text-only encoder), or -1 with an error
 * naming the file and field. text: the text config already loaded (the mrope sections must cover
 * head_dim / 2 pairs, the output width its hidden size). */
int vdn_vision_config_load(const char *dir, const vdn_text_config *text, vdn_vision_config *v,
                           char *err, size_t errlen);
/* The same from len bytes of config.json; file names them in errors. */
int vdn_vision_config_parse(const char *json, size_t len, const char *file,
                            const vdn_text_config *text, vdn_vision_config *v, char *err,
                            size_t errlen);

/* "model.visual.blocks.3.attn.qkv.weight" for block 3, "attn.qkv.weight"; block -1: no block
 * ("model.visual.merger.norm.weight" for "merger.norm.weight") */
void vdn_vision_weight_name(char *out, size_t n, int block, const char *what);

#endif
