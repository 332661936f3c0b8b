/* The official pipeline's request range (spec 1.1, diffusers MiniMaxH3 layout step), as
 * warnings: vdn renders outside it (tests render 2-second thumbnails), but says so. */
#include <stdio.h>

#include "engine.h"

#define OFFICIAL_FPS 24
#define OFFICIAL_MIN_SECONDS 5
#define OFFICIAL_MAX_SECONDS 15
#define OFFICIAL_MAX_PIXELS (768L * 1344L)

int vdn_request_warnings(const vdn_render_request *req, char (*msgs)[VDN_REQ_WARN_LEN], int max) {
    int n = 0;
#define WARN(...)                                                                                  \
    do {                                                                                           \
        if (n < max) snprintf(msgs[n], VDN_REQ_WARN_LEN, __VA_ARGS__);                             \
        n++;                                                                                       \
    } while (0)
    const int px = vdn_snap_frames(req->frames);
    if (px != req->frames)
        WARN("request: frames = %d is not 17n+5; %d frames are rendered (rounded up, as the "
             "official pipeline does)",
             req->frames, px);
    /* the official check is on the rounded count: 346 frames would pass and become 362 (15.08 s) */
    if (px < OFFICIAL_MIN_SECONDS * OFFICIAL_FPS || px > OFFICIAL_MAX_SECONDS * OFFICIAL_FPS)
        WARN("request: %d frames last %.2f s at %d fps, outside the official %d-%d s (%d-%d frames "
             "after rounding to 17n+5); the model was not trained for this duration",
             px, (double)px / OFFICIAL_FPS, OFFICIAL_FPS, OFFICIAL_MIN_SECONDS,
             OFFICIAL_MAX_SECONDS, OFFICIAL_MIN_SECONDS * OFFICIAL_FPS,
             OFFICIAL_MAX_SECONDS * OFFICIAL_FPS);
    const long area = (long)req->height * req->width;
    if (area > OFFICIAL_MAX_PIXELS)
        WARN("request: canvas %d x %d = %ld pixels is above the official area cap 768 x 1344 = "
             "%ld pixels",
             req->height, req->width, area, OFFICIAL_MAX_PIXELS);
    if (req->height > 0 && req->width > 0 &&
        (req->width > 4L * req->height || req->height > 4L * req->width))
        WARN("request: canvas %d x %d (height x width) has an aspect ratio outside the official "
             "1:4 to 4:1",
             req->height, req->width);
#undef WARN
    return n < max ? n : max;
}
