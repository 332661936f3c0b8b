/* Keyframe pictures for eval (pictures.h). Pictures are decoded with FFmpeg's libraries through
 * media/frames.c (a PNG, JPEG or WebP is a one-frame stream to libavformat), converted to RGB as
 * the file says, which for the 8-bit RGB PNGs `vdn eval suite keyframes` writes is the file's
 * bytes. */
#include "pictures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frames.h"
#include "prompt_pictures.h"
#include "vdn_util.h"

/* The first frame of the picture at path into *px ((3, H, W) floats), its size into *w, *h. */
static int decode(const char *path, float **px, int *w, int *h, char *err, size_t errlen) {
    struct stat sb;
    *px = NULL;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return vdn_fail(err, errlen, "%s: no such picture file", path);
    if (sb.st_size > VDN_PICTURE_MAX_BYTES)
        return vdn_fail(err, errlen, "%s: %lld bytes, above the %lld MiB a picture may have", path,
                        (long long)sb.st_size, VDN_PICTURE_MAX_BYTES >> 20);
    if (sb.st_size == 0) return vdn_fail(err, errlen, "%s: empty file; expected a picture", path);
    char e2[VDN_ERR_LEN];
    vdn_frames *f = vdn_frames_open_mp4(path, e2, sizeof e2);
    if (!f) return vdn_fail(err, errlen, "%s: not a picture FFmpeg decodes (%s)", path, e2);
    int T;
    vdn_frames_info(f, &T, h, w);
    int rc = 0;
    if ((long long)*w * *h > VDN_PICTURE_MAX_PIXELS) {
        rc = vdn_fail(err, errlen, "%s: %d x %d pixels, above the %lld a picture may have", path,
                      *w, *h, (long long)VDN_PICTURE_MAX_PIXELS);
    } else {
        *px = vdn_xmalloc((size_t)3 * *w * *h * sizeof **px);
        int got = vdn_frames_next(f, *px, e2, sizeof e2);
        if (got != 1)
            rc = vdn_fail(err, errlen, "%s: no picture decoded (%s)", path,
                          got < 0 ? e2 : "no frame in the file");
    }
    vdn_frames_close(f);
    if (rc) {
        free(*px);
        *px = NULL;
    }
    return rc;
}

int vdn_eval_picture_check(const char *path, vdn_eval_picture_info *info, char *err,
                           size_t errlen) {
    float *px;
    struct stat sb;
    memset(info, 0, sizeof *info);
    if (decode(path, &px, &info->width, &info->height, err, errlen)) return -1;
    free(px);
    if (stat(path, &sb) == 0) info->bytes = (long long)sb.st_size;
    return 0;
}

/* One picture onto the canvas. A picture of the canvas's size is taken as it is by the
 * release's recipe (stretch or cover-crop to the same size is the identity). */
static int on_canvas(const char *path, int height, int width, float **out, char *err,
                     size_t errlen) {
    int w, h;
    if (decode(path, out, &w, &h, err, errlen)) return -1;
    if (w == width && h == height) return 0;
    free(*out);
    *out = NULL;
    return vdn_fail(err, errlen,
                    "%s: %d x %d pixels on a %d x %d canvas: resizing onto the canvas (LANCZOS, as "
                    "the encoder does) is not in this build yet; give pictures of the render's "
                    "size",
                    path, w, h, width, height);
}

int vdn_eval_canvas(const char *first, const char *last, int height, int width, float **first_px,
                    float **last_px, char *err, size_t errlen) {
    *first_px = *last_px = NULL;
    if (first && on_canvas(first, height, width, first_px, err, errlen)) return -1;
    if (last && on_canvas(last, height, width, last_px, err, errlen)) {
        free(*first_px);
        *first_px = NULL;
        return -1;
    }
    return 0;
}
