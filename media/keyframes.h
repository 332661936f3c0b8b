/* Keyframe pictures onto MiniMax-H3's canvas, as the release does it (encode_keyframes.py's
 * put_on_canvas = diffusers' MiniMaxH3ResizeStep, docs/formats.md "Pictures"):
 *
 * - the canvas follows the aspect ratio of keyframe 0 (resolve_canvas_size: short edge 768,
 *   area at most 768 x 1344, both sides rounded to the nearest multiple of 32, aspect between
 *   1:4 and 4:1), unless the caller gives width and height (diffusers' height/width);
 * - keyframe 0, the geometry anchor, is stretched onto the canvas (LANCZOS);
 * - every later keyframe is cover-cropped: scaled by max(W / w, H / h) with the sides rounded
 *   (Python's round, half to even), LANCZOS, then the centre W x H cut out with the offsets
 *   floor((w' - W) / 2), floor((h' - H) / 2);
 * - a keyframe already of the canvas size is taken as it is.
 *
 * Keyframe 0 is the first keyframe for I2VA and FL2VA and the last one for L2VA (the release
 * packs the keyframes it has in the order first, last). */
#ifndef VDN_MEDIA_KEYFRAMES_H
#define VDN_MEDIA_KEYFRAMES_H

#include "image.h"

/* The released checkpoint's canvas (diffusers: canvas_multiple, canvas_short_edge,
 * canvas_max_pixels, MINIMAX_H3_MIN/MAX_ASPECT_RATIO). */
#define VDN_CANVAS_MULTIPLE 32
#define VDN_CANVAS_SHORT_EDGE 768
#define VDN_CANVAS_MAX_PIXELS (768 * 1344)
#define VDN_KEYFRAMES_MAX 2
/* The most multiply-adds one keyframe's resize may take (resample.h vdn_resample_work): about a
 * second of one core. A 50-megapixel photo onto the canvas takes ~1e9; what is refused is a
 * picture stretched far out of its aspect (1 x 1,000,000 onto 1344 x 768 with --width/--height),
 * which would take minutes to hours. */
#define VDN_KEYFRAME_MAX_WORK 4e9
/* The largest explicit canvas side (a user's --width/--height) */
#define VDN_CANVAS_MAX_SIDE 4096

/* resolve_canvas_size(aspect_w, aspect_h, 32, 768, 768 * 1344): the canvas of an aspect ratio
 * (a picture's width and height, or 16, 9). 0, or -1 when the ratio is not positive or outside
 * 1:4 .. 4:1 (the message says which). */
int vdn_canvas_size(double aspect_w, double aspect_h, int *height, int *width, char *err,
                    size_t errlen);

/* Put n (1..VDN_KEYFRAMES_MAX) decoded keyframes onto the canvas. width = height = 0: the canvas
 * of keyframe 0's aspect; else both positive multiples of 32 (a user's --width/--height), and
 * keyframe 0 is stretched onto that (sides up to VDN_CANVAS_MAX_SIDE). out[0..n) get canvas-sized
 * RGB pictures (named after their sources; vdn_image_free each); *canvas_w, *canvas_h the canvas.
 * 0, or -1 with a message naming the picture (also one whose resize would exceed
 * VDN_KEYFRAME_MAX_WORK). */
int vdn_keyframes_prepare(const vdn_image *keyframes, int n, int width, int height, vdn_image *out,
                          int *canvas_w, int *canvas_h, char *err, size_t errlen);

/* The same from files: each decoded (image.h, with opts' limits), then put on the canvas. */
int vdn_keyframes_load(const char *const *paths, int n, const vdn_image_opts *opts, int width,
                       int height, vdn_image *out, int *canvas_w, int *canvas_h, char *err,
                       size_t errlen);

#endif
