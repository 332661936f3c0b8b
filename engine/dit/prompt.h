/* Prompt caches: what the 63 GB text encoder produced for one prompt, as a safetensors file
 * (docs/formats.md; ops/convert-prompt-cache.py converts the official torch.save .pt caches).
 *
 *   prompt_embeds    (L, text_dim)        BF16 | F16 | F32
 *   text_token_tags  (L,)                 I64 (I32 accepted), each 0 (keyframe vision-block row)
 *                                         or 1 (text row)
 *   keyframe_first   (24, 1, h, w) or (1, 24, 1, h, w)  F32 | BF16 | F16, optional
 *   keyframe_last    same shape as keyframe_first, optional
 *   __metadata__: "prompt" (text, optional), "height"/"width" (pixels, optional; required when a
 *                 keyframe is present, and then h = height/16, w = width/16),
 *                 "keyframe_anchors" (optional, "first", "last" or "first,last"; when present it
 *                 must match the keyframe tensors present)
 *
 * Keyframes are held in anchor order (first before last), the order the official packer puts
 * their conditioning rows in. */
#ifndef VDN_PROMPT_H
#define VDN_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#define VDN_LATENT_CHANNELS 24

typedef struct {
    int n_text; /* L */
    int text_dim;
    float *embeds;      /* (L, text_dim), widened to float */
    int *tags;          /* (L), 0 or 1 */
    int n_keyframes;    /* 0, 1 or 2 */
    int anchor_last[2]; /* per keyframe: 0 = "first" (frame 0), 1 = "last" (frame F-1) */
    int kf_h, kf_w;     /* latent size of each keyframe (height/16, width/16) */
    float *keyframes;   /* (n_keyframes, 24, kf_h, kf_w) */
    int height, width;  /* pixels from metadata, 0 when absent */
    char *prompt;       /* metadata "prompt" or NULL */
} vdn_prompt;

/* The most rows and the widest row a prompt cache may have, checked from the file's header before
 * anything is allocated (the embeddings are widened to float: 16384 x 5120 rows of the real
 * encoder are 320 MiB; MiniMax-H3 prompts are at most a few thousand rows). */
#define VDN_PROMPT_MAX_ROWS 16384
#define VDN_PROMPT_MAX_DIM 16384

/* text_dim: the checkpoint's prompt width (0 = accept any up to VDN_PROMPT_MAX_DIM). Every problem
 * (missing file or tensor, wrong dtype/shape, a tag other than 0/1, keyframes that disagree) fails
 * with a message naming the file and the tensor or key. */
int vdn_prompt_load(const char *path, int text_dim, vdn_prompt *out, char *err, size_t errlen);
void vdn_prompt_free(vdn_prompt *p);
/* The same checks on an already open file (tests, fuzzing: vdn_st_open_mem). */
struct vdn_st_file;
int vdn_prompt_from_st(struct vdn_st_file *f, int text_dim, vdn_prompt *out, char *err,
                       size_t errlen);

#endif
