/* Keyframe pictures into prompt caches: the image-to-video modes of MiniMax H3 (I2VA: a first
 * frame, L2VA: a last frame, FL2VA: both). The release's keyframe recipe, composed from the
 * models: the pictures decoded and drawn on one canvas (media/image.h), each keyframe through
 * the video VAE's encoder into condition latents (engine/vae), and the prompt with the pictures
 * through Qwen3-VL's vision tower and text model into prompt_embeds (engine/text). The result is
 * an ordinary keyframe prompt cache (docs/formats.md "Prompt caches"). prompt_text.c calls this
 * on a cache miss of a prompt with pictures. */
#ifndef VDN_PROMPT_PICTURES_H
#define VDN_PROMPT_PICTURES_H

#include <stddef.h>

#include "encoder.h"
#include "image.h"
#include "precision.h"
#include "tokenizer.h"

struct cJSON;
struct vdn_dev;

/* A prompt: its text and, for the keyframe modes, pictures (local image files): the first frame
 * only is I2VA, the last only L2VA, both FL2VA. The pictures are drawn on one canvas, height x
 * width pixels when both are given, else the release's canvas of the first keyframe (short edge
 * 768, multiples of 32, at most 768 x 1344 pixels, the first keyframe's aspect). */
typedef struct {
    const char *text;
    const char *first_frame, *last_frame; /* NULL: none */
    int height, width;                    /* 0: the release's canvas */
} vdn_prompt_input;

/* The largest picture file read (bytes) and decoded (pixels): a file past either is refused,
 * naming it, before its pixels are decoded. */
#define VDN_PICTURE_MAX_BYTES (256ll << 20)
#define VDN_PICTURE_MAX_PIXELS 50000000ll

/* A prompt's pictures, read once per job (vdn_pictures_of) and passed to every step after it:
 * the cache key and the run record take the identity (hashes, canvas asked, the VAE's and the
 * image processor's identities), a miss's encode takes the pictures already on the canvas. */
typedef struct {
    int n;               /* 0 (a text prompt), 1 or 2 */
    const char *path[2]; /* the local files, first keyframe before last (the input's) */
    int anchor_last[2];  /* 0: the first frame, 1: the last */
    char sha256[2][65];  /* of each file's bytes */
    int height, width;   /* the canvas asked for (0: the release's) */
    char vae[65];        /* the video VAE's identity (config.json and shard headers) */
    char processor[65];  /* SHA-256 of processor/preprocessor_config.json (the image processor's
                            min/max pixels, patch, merge, mean and std) */
    /* The pictures decoded once and put on the canvas (media/keyframes.h), in the order above:
     * what a miss encodes. Owned: vdn_pictures_free. A copy for a record leaves them out
     * (vdn_pictures_identity). */
    vdn_image canvas[2];
    int canvas_w, canvas_h;
} vdn_pictures;

/* The input's pictures: decodes each file once (its bytes' hash, then the canvas), and reads the
 * VAE's identity from ckpt_root/vae and the processor's from ckpt_root/processor. A prompt
 * without pictures gives n = 0 and touches nothing. Errors name the file (missing, unreadable,
 * too large, not a picture, refused by the canvas) or the missing VAE or processor settings. On
 * failure *out holds nothing to free. */
int vdn_pictures_of(const char *ckpt_root, const vdn_prompt_input *in, vdn_pictures *out, char *err,
                    size_t errlen);
void vdn_pictures_free(vdn_pictures *pics);
/* pics without its canvas pictures (a plain copy, nothing to free): what records keep. */
vdn_pictures vdn_pictures_identity(const vdn_pictures *pics);

/* What the cache's metadata says of the text encoder, and of the entry itself (what a hit is
 * checked against: prompt_text.c). */
typedef struct {
    const char *identity; /* the text encoder's identity */
    vdn_precision precision;
    const char *tokenizer_sha256;
    const char *cache_key; /* the store key the entry is written for */
    int tokens;            /* the text's token count (the prompt without its pictures) */
} vdn_pictures_meta;

/* A cache entry's content_sha256: SHA-256 of its parts' bytes in order (prompt_embeds,
 * text_token_tags, then keyframe_first and keyframe_last where present). */
void vdn_prompt_content_sha256(const void *const *parts, const size_t *sizes, int n, char hex[65]);

/* Encodes text with pictures (their canvas pictures, vdn_pictures_of) into a keyframe prompt
 * cache at path: the VAE encoder (ckpt_root/vae, loaded on dev for the call) and the text encoder
 * enc (on dev, with its vision tower). */
int vdn_pictures_write_cache(const char *ckpt_root, vdn_text_encoder *enc, struct vdn_dev *dev,
                             const vdn_tokenizer *tok, const char *text, const vdn_pictures *pics,
                             const vdn_pictures_meta *meta, const char *path, char *err,
                             size_t errlen);

/* Adds "keyframes": [{"anchor", "sha256", "file"}...], "vae", "processor" and "canvas_asked" to
 * a run record's text_prompt object. */
void vdn_pictures_to_json(const vdn_pictures *pics, struct cJSON *o);

#endif
