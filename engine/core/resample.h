/* Separable resampling of 8-bit pictures, computing what Pillow's Image.resize computes
 * (libImaging/Resample.c, the same in Pillow 9.4 and 12): for each axis, a filter whose support
 * grows with the downscale factor; for each output pixel a window of input pixels whose weights
 * are normalised to sum to 1 in double, then rounded to 22-bit fixed point; integer sums with a
 * rounding half added, shifted and clipped to 0..255. The horizontal pass runs first (over the
 * input rows the vertical pass will read), then the vertical pass; an axis whose size and box
 * do not change is not resampled at all, as in Pillow. Channels are resampled independently (as
 * Pillow's core does for L, La, RGB, RGBa; Image.resize premultiplies an RGBA or LA picture's
 * colour by its alpha first, which is its caller's business). With the same filter, sizes and box
 * the output equals Pillow's byte for byte (media/test/test_image.py checks it).
 *
 * Pure C for every room: media/ puts keyframes on the canvas with it, a model's image
 * processor (Qwen3-VL's) may resize with it. */
#ifndef VDN_RESAMPLE_H
#define VDN_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

/* Pillow's Image.Resampling names; NEAREST is another code path in Pillow and is not here. */
typedef enum {
    VDN_RESAMPLE_BOX,      /* support 0.5 */
    VDN_RESAMPLE_BILINEAR, /* triangle, support 1 */
    VDN_RESAMPLE_HAMMING,  /* support 1 */
    VDN_RESAMPLE_BICUBIC,  /* Keys cubic with a = -0.5, support 2 */
    VDN_RESAMPLE_LANCZOS,  /* sinc windowed by sinc(x/3), support 3 */
} vdn_resample_filter;

/* "lanczos" -> VDN_RESAMPLE_LANCZOS etc. (Pillow's lower-case names); -1 when unknown. */
int vdn_resample_filter_parse(const char *name);

/* The region of the input a resize reads, in input pixels (Pillow's `box`: left, upper, right,
 * lower as single-precision floats, fractions allowed). */
typedef struct {
    float x0, y0, x1, y1;
} vdn_resample_box;

/* Resize src (src_w x src_h pixels of `channels` (1..4) interleaved bytes, rows src_stride
 * bytes apart; 0 = packed) to out_w x out_h over `box` (NULL: the whole input) and write the
 * window [win_x, win_x + win_w) x [win_y, win_y + win_h) of that output into dst, packed
 * (win_w * channels bytes a row). A window is what a crop of the resized picture would give,
 * pixel for pixel, without resizing what the crop throws away. 0, or -1 with a message in err
 * (sizes, box or window out of range). */
int vdn_resample_u8_window(const uint8_t *src, int src_w, int src_h, size_t src_stride,
                           int channels, int out_w, int out_h, vdn_resample_filter filter,
                           const vdn_resample_box *box, int win_x, int win_y, int win_w, int win_h,
                           uint8_t *dst, char *err, size_t errlen);

/* The multiply-adds vdn_resample_u8_window would do for these arguments (both passes, every
 * channel), computed without doing them: what a caller bounds to refuse a pathological resize
 * (a 1 x 50,000,000 picture stretched onto 1344 x 768 would take an hour) before starting it.
 * -1 when the arguments are invalid. */
double vdn_resample_work(int src_w, int src_h, int channels, int out_w, int out_h,
                         vdn_resample_filter filter, const vdn_resample_box *box, int win_x,
                         int win_y, int win_w, int win_h);

/* The whole output: Pillow's im.resize((out_w, out_h), filter, box). */
int vdn_resample_u8(const uint8_t *src, int src_w, int src_h, size_t src_stride, int channels,
                    int out_w, int out_h, vdn_resample_filter filter, const vdn_resample_box *box,
                    uint8_t *dst, char *err, size_t errlen);

#endif
