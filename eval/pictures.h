/* Keyframe pictures of a suite, from eval's side: checked before a sweep (`vdn eval suite check`:
 * there, decodable, within the size limits the workers apply), and put back on the render's
 * canvas as the encoder prepared them, so the generated end frames can be compared with what the
 * request conditioned on (the paper's FL2VA PSNR / SSIM, docs/eval.md). */
#ifndef VDN_EVAL_PICTURES_H
#define VDN_EVAL_PICTURES_H

#include <stddef.h>

#include "suite.h"

/* The limits a worker applies to a picture (engine/pipeline/prompt_pictures.h). */
typedef struct {
    long long bytes;
    int width, height;
} vdn_eval_picture_info;

/* Decodes the picture at path (PNG, JPEG, WebP) and reports its size; refuses a file that is not
 * there, too large (bytes or pixels) or not a picture, naming it. 0 or -1. */
int vdn_eval_picture_check(const char *path, vdn_eval_picture_info *info, char *err, size_t errlen);

/* The pictures of a keyframe item on its canvas, height x width (the job's size, which the
 * farm asks the encoder for): (3, height, width) float planes in [0, 1], R, G, B, as the video
 * VAE's encoder saw them. first / last: local files or NULL (the mode's). *first_px and
 * *last_px are malloc'd (NULL where not asked). 0 or -1 with a message naming the picture. */
int vdn_eval_canvas(const char *first, const char *last, int height, int width, float **first_px,
                    float **last_px, char *err, size_t errlen);

#endif
