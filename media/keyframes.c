/* Keyframes onto the canvas (keyframes.h). The arithmetic is the release's Python, step for
 * step in double: Python's float division and `**` (libm's pow), round() half to even
 * (nearbyint in the default rounding mode), // on non-negative ints. */
#include "keyframes.h"

#include <math.h>
#include <string.h>

#include "resample.h"
#include "vdn_util.h"

int vdn_canvas_size(double aspect_w, double aspect_h, int *height, int *width, char *err,
                    size_t errlen) {
    if (!(aspect_w > 0) || !(aspect_h > 0))
        return vdn_fail(err, errlen, "the aspect ratio must be positive, got %g:%g", aspect_w,
                        aspect_h);
    double ratio = aspect_w / aspect_h;
    if (!(ratio >= 1.0 / 4 && ratio <= 4))
        return vdn_fail(err, errlen,
                        "MiniMax-H3 supports aspect ratios from 1:4 to 4:1, got %g:%g (%g)",
                        aspect_w, aspect_h, ratio);
    const double edge = VDN_CANVAS_SHORT_EDGE;
    double w, h;
    if (ratio >= 1.0)
        w = edge * ratio, h = edge;
    else
        w = edge, h = edge / ratio;
    double area = w * h;
    if (area > VDN_CANVAS_MAX_PIXELS) {
        double scale = pow(VDN_CANVAS_MAX_PIXELS / area, 0.5);
        w = w * scale, h = h * scale;
    }
    const int m = VDN_CANVAS_MULTIPLE;
    int hh = (int)nearbyint(h / m) * m, ww = (int)nearbyint(w / m) * m;
    *height = hh > m ? hh : m;
    *width = ww > m ? ww : m;
    return 0;
}

/* One keyframe onto the W x H canvas: stretched (the anchor) or cover-cropped. */
static int put_on_canvas(const vdn_image *k, int anchor, int W, int H, vdn_image *o, char *err,
                         size_t errlen) {
    const char *name = k->name ? k->name : "keyframe";
    o->width = W, o->height = H, o->info = k->info;
    o->name = vdn_xstrdup(name);
    o->rgb = vdn_xmalloc((size_t)W * H * 3);
    if (k->width == W && k->height == H) {
        memcpy(o->rgb, k->rgb, (size_t)W * H * 3);
        return 0;
    }
    char e[VDN_ERR_LEN];
    int rc, rw = W, rh = H, left = 0, top = 0;
    if (!anchor) {
        double sw = (double)W / k->width, sh = (double)H / k->height;
        double scale = sw > sh ? sw : sh;
        double rw_f = nearbyint(k->width * scale), rh_f = nearbyint(k->height * scale);
        if (!(rw_f < 1 << 24 && rh_f < 1 << 24))
            return vdn_fail(err, errlen, "%s: a %dx%d picture cannot be cover-cropped onto %dx%d",
                            name, k->width, k->height, W, H);
        rw = (int)rw_f > W ? (int)rw_f : W, rh = (int)rh_f > H ? (int)rh_f : H;
        left = (rw - W) / 2, top = (rh - H) / 2;
    }
    double work = vdn_resample_work(k->width, k->height, 3, rw, rh, VDN_RESAMPLE_LANCZOS, NULL,
                                    left, top, W, H);
    if (work > VDN_KEYFRAME_MAX_WORK)
        return vdn_fail(err, errlen,
                        "%s: resizing this %dx%d picture for the %dx%d canvas is %.0e "
                        "multiply-adds, over the limit of %.0e: its aspect ratio is too far from "
                        "the canvas's (crop it first)",
                        name, k->width, k->height, W, H, work, VDN_KEYFRAME_MAX_WORK);
    rc = vdn_resample_u8_window(k->rgb, k->width, k->height, 0, 3, rw, rh, VDN_RESAMPLE_LANCZOS,
                                NULL, left, top, W, H, o->rgb, e, sizeof e);
    if (rc) return vdn_fail(err, errlen, "%s: %s", name, e);
    return 0;
}

int vdn_keyframes_prepare(const vdn_image *keyframes, int n, int width, int height, vdn_image *out,
                          int *canvas_w, int *canvas_h, char *err, size_t errlen) {
    if (n < 1 || n > VDN_KEYFRAMES_MAX)
        return vdn_fail(err, errlen, "keyframes: %d pictures; expected 1 or %d", n,
                        VDN_KEYFRAMES_MAX);
    memset(out, 0, (size_t)n * sizeof *out);
    for (int i = 0; i < n; i++)
        if (!keyframes[i].rgb || keyframes[i].width < 1 || keyframes[i].height < 1)
            return vdn_fail(err, errlen, "keyframes: picture %d is empty", i);
    if ((width == 0) != (height == 0))
        return vdn_fail(err, errlen,
                        "keyframes: a canvas needs both width and height, or neither (got "
                        "width %d, height %d)",
                        width, height);
    if (width == 0) {
        char e[VDN_ERR_LEN];
        if (vdn_canvas_size(keyframes[0].width, keyframes[0].height, &height, &width, e, sizeof e))
            return vdn_fail(err, errlen, "%s: %dx%d: %s",
                            keyframes[0].name ? keyframes[0].name : "keyframe", keyframes[0].width,
                            keyframes[0].height, e);
    } else if (width < 0 || height < 0 || width % VDN_CANVAS_MULTIPLE ||
               height % VDN_CANVAS_MULTIPLE || width > VDN_CANVAS_MAX_SIDE ||
               height > VDN_CANVAS_MAX_SIDE) {
        return vdn_fail(err, errlen,
                        "keyframes: canvas %dx%d; width and height must be positive multiples "
                        "of %d (at most %d)",
                        width, height, VDN_CANVAS_MULTIPLE, VDN_CANVAS_MAX_SIDE);
    }
    for (int i = 0; i < n; i++) {
        if (put_on_canvas(&keyframes[i], i == 0, width, height, &out[i], err, errlen)) {
            for (int j = 0; j <= i; j++)
                vdn_image_free(&out[j]);
            return -1;
        }
    }
    *canvas_w = width;
    *canvas_h = height;
    return 0;
}

int vdn_keyframes_load(const char *const *paths, int n, const vdn_image_opts *opts, int width,
                       int height, vdn_image *out, int *canvas_w, int *canvas_h, char *err,
                       size_t errlen) {
    if (n < 1 || n > VDN_KEYFRAMES_MAX)
        return vdn_fail(err, errlen, "keyframes: %d pictures; expected 1 or %d", n,
                        VDN_KEYFRAMES_MAX);
    vdn_image in[VDN_KEYFRAMES_MAX] = {{0}};
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = vdn_image_load(paths[i], opts, &in[i], err, errlen);
    if (rc == 0)
        rc = vdn_keyframes_prepare(in, n, width, height, out, canvas_w, canvas_h, err, errlen);
    for (int i = 0; i < n; i++)
        vdn_image_free(&in[i]);
    return rc;
}
