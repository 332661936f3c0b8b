/* Keyframe pictures for eval (pictures.h): decoded by media/image.h (Pillow's convert("RGB")) and
 * put on the canvas by media/keyframes.h, the release's recipe the farm's encoder follows, with
 * the limits the pipeline applies (engine/pipeline/prompt_pictures.h). */
#include "pictures.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "image.h"
#include "keyframes.h"
#include "prompt_pictures.h"
#include "vdn_util.h"

static const vdn_image_opts limits = {.max_pixels = VDN_PICTURE_MAX_PIXELS,
                                      .max_bytes = (size_t)VDN_PICTURE_MAX_BYTES};

int vdn_eval_picture_check(const char *path, vdn_eval_picture_info *info, char *err,
                           size_t errlen) {
    struct stat sb;
    memset(info, 0, sizeof *info);
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return vdn_fail(err, errlen, "%s: no such picture file", path);
    vdn_image im;
    if (vdn_image_load(path, &limits, &im, err, errlen)) return -1;
    info->bytes = (long long)sb.st_size;
    info->width = im.width;
    info->height = im.height;
    vdn_image_free(&im);
    return 0;
}

/* 8-bit interleaved RGB -> (3, H, W) floats in [0, 1]. */
static float *planes_of(const vdn_image *im) {
    size_t n = (size_t)im->width * im->height;
    float *px = vdn_xmalloc(3 * n * sizeof *px);
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            px[c * n + i] = im->rgb[3 * i + c] / 255.0f;
    return px;
}

int vdn_eval_canvas(const char *first, const char *last, int height, int width, float **first_px,
                    float **last_px, char *err, size_t errlen) {
    *first_px = *last_px = NULL;
    /* the release packs the keyframes it has in the order first, last: keyframe 0 (stretched)
     * is the last frame for l2va */
    const char *paths[2];
    int n = 0;
    if (first) paths[n++] = first;
    if (last) paths[n++] = last;
    if (!n) return 0;
    vdn_image out[VDN_KEYFRAMES_MAX] = {{0}};
    int cw, ch;
    if (vdn_keyframes_load(paths, n, &limits, width, height, out, &cw, &ch, err, errlen)) return -1;
    int k = 0;
    if (first) *first_px = planes_of(&out[k++]);
    if (last) *last_px = planes_of(&out[k]);
    for (int i = 0; i < n; i++)
        vdn_image_free(&out[i]);
    return 0;
}
