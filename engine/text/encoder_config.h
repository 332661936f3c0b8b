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

/* dir: the text_encoder/ folder. Every field checked (present, positive, heads % kv_heads == 0,
 * head_dim even); errors name the file and field. */
int vdn_text_config_load(const char *dir, vdn_text_config *c, char *err, size_t errlen);

/* hidden_states[k] is taken: 50, or for a checkpoint of fewer layers (tiny test checkpoints) the
 * output of the last layer but one. */
int vdn_text_encoder_default_layer(const vdn_text_config *c);

/* "model.language_model.layers.7.self_attn.q_proj.weight" for layer 7, "self_attn.q_proj" */
void vdn_text_weight_name(char *out, size_t n, int layer, const char *what);

#endif
