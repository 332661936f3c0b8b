/* The prompt tokenizer: a Hugging Face `tokenizer.json` of the Qwen2 kind (Qwen2TokenizerFast, as
 * the release's tokenizer/ folder holds it), producing exactly the ids of the public `tokenizers`
 * library with add_special_tokens=False (MiniMax-H3 tokenizes the prompt verbatim):
 *
 *   added tokens matched first (leftmost, then longest) -> NFC (utf8proc) -> the split regex
 *   (PCRE2 with UTF + UCP, "Isolated") -> byte-level BPE with ranked merges.
 *
 * Only what that pipeline uses is accepted; anything else in the file is refused with an error
 * naming the field, so a different tokenizer never silently gives different ids. */
#ifndef VDN_TOKENIZER_H
#define VDN_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct vdn_tokenizer vdn_tokenizer;

/* path: a tokenizer.json file, or a folder holding one. NULL and an error naming the file and
 * field on failure. */
vdn_tokenizer *vdn_tokenizer_load(const char *path, char *err, size_t errlen);
/* The same from bytes already in memory; `name` is used in messages. */
vdn_tokenizer *vdn_tokenizer_parse(const char *json, size_t len, const char *name, char *err,
                                   size_t errlen);
void vdn_tokenizer_free(vdn_tokenizer *t);

/* Ids of `text` (len bytes of UTF-8; NUL bytes are ordinary characters). *ids is malloc'd (the
 * caller frees it; NULL when *n == 0). Invalid UTF-8 is refused with the byte offset. 0 or -1. */
int vdn_tokenize(const vdn_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n,
                 char *err, size_t errlen);

/* Number of ids the model's vocabulary and added tokens use (the largest id + 1). */
int32_t vdn_tokenizer_n_ids(const vdn_tokenizer *t);
/* SHA-256 of the tokenizer.json bytes, 64 hex chars: part of a prompt cache's identity. */
const char *vdn_tokenizer_sha256(const vdn_tokenizer *t);

#endif
