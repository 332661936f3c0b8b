/* An evaluation suite: a JSONL manifest, one prompt per line.
 *
 *   {"id": "p001", "mode": "fl2va", "prompt": "A red kite ...",
 *    "prompt_cache": "caches/p001.safetensors", "keyframes": "caches/p001.safetensors",
 *    "seed": 1001, "frames": 22, "height": 32, "width": 32}
 *
 * id: 1..63 characters of [A-Za-z0-9._-], unique (it becomes part of store keys).
 * mode: t2va | i2va | l2va | fl2va. prompt: the text; without a prompt_cache it is what renders
 *   (the farm encodes it, with the pictures for the keyframe modes).
 * first_frame, last_frame: the keyframe pictures (PNG, JPEG, WebP): a path relative to the
 *   manifest's folder, an absolute path, a store key or a URI ("scheme://..."). i2va takes the
 *   first, l2va the last, fl2va both; they go with the text, never with a prompt_cache (which
 *   carries its keyframes already); refused for t2va.
 * prompt_cache: optional: a safetensors path or store URI holding prompt_embeds (L, text_dim)
 *   and text_token_tags (L,) exactly as the official Qwen3-VL caches do (engine/prompt.h); then
 *   it renders and the text is informational. A keyframe line needs pictures or a cache.
 * keyframes: (cache lines only) a safetensors file holding the conditioning latents
 *   "keyframe_first" and/or "keyframe_last" ((24,1,h,w) or (1,24,1,h,w), the prompt-cache
 *   names), for the latent endpoint metrics; optional (default: the prompt cache itself).
 * seed: integer 0..2^53. frames: pixel frames >= 1. height, width: positive multiples of 32.
 * Unknown fields are errors (a typo must not silently fall back to a default). */
#ifndef VDN_EVAL_SUITE_H
#define VDN_EVAL_SUITE_H

#include <stddef.h>
#include <stdint.h>

typedef enum { VDN_MODE_T2VA = 0, VDN_MODE_I2VA, VDN_MODE_L2VA, VDN_MODE_FL2VA } vdn_suite_mode;

typedef struct {
    char id[64];
    vdn_suite_mode mode;
    char *prompt;
    char *prompt_cache; /* as written; NULL: a text prompt (the farm encodes `prompt`) */
    char *first_frame;  /* keyframe pictures as written, NULL when absent */
    char *last_frame;
    char *keyframes; /* as written, NULL when absent */
    uint64_t seed;
    int frames, height, width;
    int line; /* 1-based line in the manifest */
} vdn_suite_item;

typedef struct {
    char *path;     /* manifest path as opened ("<memory>" for text) */
    char *base_dir; /* folder relative paths resolve against */
    vdn_suite_item *items;
    int n;
} vdn_suite;

const char *vdn_suite_mode_name(vdn_suite_mode m);
/* Keyframes a mode conditions on (0, 1 or 2). */
int vdn_suite_mode_keyframes(vdn_suite_mode m);
/* Whether the mode conditions on the first (i2va, fl2va) / last (l2va, fl2va) frame. */
int vdn_suite_mode_first(vdn_suite_mode m);
int vdn_suite_mode_last(vdn_suite_mode m);

/* Parse manifest text. 0, or -1 with "PATH:LINE: field 'x': expected ..., got ..." in err
 * (the first problem). Blank lines and lines starting with '#' are skipped. */
int vdn_suite_parse(const char *text, size_t len, const char *path, vdn_suite *s, char *err,
                    size_t errlen);
int vdn_suite_load(const char *path, vdn_suite *s, char *err, size_t errlen);
void vdn_suite_free(vdn_suite *s);

/* A manifest path resolved against the suite folder (URIs and absolute paths unchanged).
 * malloc'd. */
char *vdn_suite_resolve(const vdn_suite *s, const char *p);

/* Keeps only the keyframe-mode lines that have text, as text alone (t2va: no pictures, cache or
 * keyframes): what `vdn eval sweep --for-keyframes` renders. Returns the lines kept. */
int vdn_suite_keyframe_texts(vdn_suite *s);

/* One manifest line for item (no trailing newline), malloc'd; used by `suite init`. */
char *vdn_suite_item_json(const vdn_suite_item *it);

#endif
