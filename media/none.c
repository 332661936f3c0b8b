/* mp4.h and the PNG posters of still.h in a build without FFmpeg's libraries (a VDN_FARM=OFF
 * build where pkg-config finds no libav*, as on the GPU machine: ops/device/build.sh). Every call
 * fails and says why; a render then keeps its latents and sound (WAV) and writes no mp4. */
#include <stdio.h>

#include "image.h"
#include "media_util.h"
#include "mp4.h"
#include "still.h"

static const char *const NO_LIBAV = "this vdn was built without FFmpeg's libraries (libavformat, "
                                    "libavcodec, libavutil, libswscale): no mp4 or PNG output";

vdn_mp4 *vdn_mp4_open(const char *path, const vdn_mp4_opts *opts, char *err, size_t errlen) {
    (void)opts;
    vdn_media_fail(err, errlen, NO_LIBAV, path);
    return NULL;
}

int vdn_mp4_frame(vdn_mp4 *m, const float *r, const float *g, const float *b, char *err,
                  size_t errlen) {
    (void)m, (void)r, (void)g, (void)b;
    return vdn_media_fail(err, errlen, NO_LIBAV, "mp4");
}

int vdn_mp4_finish(vdn_mp4 *m, char *err, size_t errlen) {
    (void)m;
    return vdn_media_fail(err, errlen, NO_LIBAV, "mp4");
}

void vdn_mp4_abort(vdn_mp4 *m) {
    (void)m;
}

int vdn_mp4_available(void) {
    return 0;
}

int vdn_mp4_write(const char *path, const float *frames, int n_frames, const vdn_mp4_opts *opts,
                  char *err, size_t errlen) {
    (void)frames, (void)n_frames, (void)opts;
    return vdn_media_fail(err, errlen, NO_LIBAV, path);
}

int vdn_poster_png(const char *path, const float *frames, int T, int H, int W, const int *idx,
                   int n, char *err, size_t errlen) {
    (void)frames, (void)T, (void)H, (void)W, (void)idx, (void)n;
    return vdn_media_fail(err, errlen, NO_LIBAV, path);
}

int vdn_poster_png3(const char *path, const float *frames, int T, int H, int W, char *err,
                    size_t errlen) {
    (void)frames, (void)T, (void)H, (void)W;
    return vdn_media_fail(err, errlen, NO_LIBAV, path);
}

int vdn_image_decode(const void *data, size_t len, const char *name, const vdn_image_opts *opts,
                     vdn_image *out, char *err, size_t errlen) {
    (void)data, (void)len, (void)opts;
    *out = (vdn_image){0};
    return vdn_media_fail(err, errlen,
                          "this vdn was built without FFmpeg's libraries (libavcodec, "
                          "libswscale): it cannot decode pictures (keyframes)",
                          name ? name : "picture");
}
