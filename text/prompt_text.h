/* Text prompts into prompt caches: tokenizer + text encoder of one checkpoint, and the farm's
 * content-addressed cache of encoded prompts in the object store.
 *
 * A cache entry's key is the SHA-256 of the encoder's identity (config, shard headers, layer) and
 * the prompt's token ids: "prompt-cache/<sha>.safetensors". The same prompt under the same
 * encoder is encoded once and reused by every later job, in any batch; a different encoder or a
 * different tokenization is a different key. The file is an ordinary prompt cache (prompt_embeds
 * bf16 [L, hidden], text_token_tags all 1, the prompt in the metadata). */
#ifndef VDN_PROMPT_TEXT_H
#define VDN_PROMPT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

#define VDN_PROMPT_CACHE_PREFIX "prompt-cache/"

typedef struct vdn_text_prompts vdn_text_prompts;

/* ckpt: a checkpoint holding tokenizer/ and text_encoder/ (directly, or in base/ for a VDN
 * checkpoint). backend: "cpu", "cuda" or NULL (the GPU when there is one). The encoder's weights
 * are loaded on the first encode, not here. layer 0: the default (hidden_states[50]). */
vdn_text_prompts *vdn_text_prompts_open(const char *ckpt, const char *backend, int layer, char *err,
                                        size_t errlen);
void vdn_text_prompts_close(vdn_text_prompts *p);
const char *vdn_text_prompts_identity(const vdn_text_prompts *p); /* the encoder's */
/* The longest prompt the encoder takes (text_config.max_position_embeddings), in tokens. */
int64_t vdn_text_prompts_max_tokens(const vdn_text_prompts *p);

/* The store key of text's cache entry; *tokens (optional) gets its token count. */
int vdn_text_prompts_key(vdn_text_prompts *p, const char *text, char *key, size_t keylen,
                         int *tokens, char *err, size_t errlen);
/* Encode text into a prompt cache file at path. */
int vdn_text_prompts_write(vdn_text_prompts *p, const char *text, const char *path, char *err,
                           size_t errlen);

/* What the farm did for one job's text prompt (goes into its run record). */
typedef struct {
    char key[160];
    int hit; /* 1: reused from the store, 0: encoded here and stored */
    int tokens;
    double seconds; /* tokenize + fetch or encode + upload */
} vdn_text_cache_info;

/* The cache entry of text in st, fetched to local_path; on a miss, encoded to local_path and
 * uploaded. Calls are serialised in this process, so concurrent jobs with one prompt encode it
 * once. */
int vdn_text_prompts_cached(vdn_text_prompts *p, vdn_store *st, const char *text,
                            const char *local_path, vdn_text_cache_info *info, char *err,
                            size_t errlen);
long vdn_text_prompts_encodes(const vdn_text_prompts *p); /* encodes run by this instance */

/* Adds {"text_prompt": {"cache": "hit"|"miss", "key", "tokens", "encoder", "seconds"}} to a
 * run record JSON file in place. */
int vdn_text_cache_info_to_record(const char *record_path, const vdn_text_cache_info *info,
                                  const char *encoder_identity, char *err, size_t errlen);

#endif
