/* YUV planes to RGB as libjpeg-turbo (JPEG) and libwebp (lossy WebP) convert them, the
 * libraries Pillow decodes with (image_yuv.c). Not part of media/'s interface. */
#ifndef VDN_MEDIA_IMAGE_YUV_H
#define VDN_MEDIA_IMAGE_YUV_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const uint8_t *y, *u, *v; /* JPEG: Y, Cb, Cr (full range); WebP: Y, U, V of VP8 */
    size_t ys, us, vs;        /* bytes between rows */
    int w, h;                 /* the picture's (luma) size */
    int hsub, vsub;           /* log2 of the chroma subsampling: 0 or 1 */
} vdn_yuv_planes;

/* rgb: w * h * 3. 0, or -1 for a subsampling the routine does not do (the caller then falls
 * back to libswscale). */
int vdn_jpeg_ycc_to_rgb(const vdn_yuv_planes *p, uint8_t *rgb);
int vdn_webp_yuv_to_rgb(const vdn_yuv_planes *p, uint8_t *rgb);

#endif
