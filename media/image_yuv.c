/* YUV planes to RGB the way the libraries behind Pillow do it, so that a picture decoded by
 * FFmpeg comes out as Pillow's Image.open gives it (image_yuv.h):
 *
 * - JPEG (libjpeg-turbo, Pillow's defaults): "fancy" upsampling of subsampled chroma (a
 *   triangle filter, 3/4 of the nearer sample and 1/4 of the farther, with libjpeg's biases
 *   alternating between output columns and rows; edge samples repeated; plain replication where
 *   a horizontally subsampled plane is at most 2 samples wide, as libjpeg does), then YCbCr -> RGB
 * in 16-bit fixed point with libjpeg's constants FIX(1.40200), FIX(0.34414), FIX(0.71414),
 *   FIX(1.77200) and ONE_HALF rounding. What remains is the IDCT: FFmpeg's integer IDCT and
 *   libjpeg-turbo's islow differ by one level on about one sample in a hundred.
 * - WebP (libwebp): the VP8 planes are the same in every decoder (VP8 decoding is exact); the
 *   chroma is upsampled by libwebp's fancy upsampler (9-3-3-1 weights between a pair of luma rows,
 *   the first row and an even picture's last row with their own chroma row alone), then
 *   BT.601 limited range -> RGB in libwebp's 14-bit fixed point (YUV_FIX2 = 6). */
#include "image_yuv.h"

#include <stdlib.h>

#include "vdn_util.h"

/* ---- JPEG ---- */

#define JFIX(x) ((int32_t)((x) * (1 << 16) + 0.5))
#define JHALF ((int32_t)1 << 15)

static uint8_t clamp8(int v) {
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

static void ycc_pixel(int y, int cb, int cr, uint8_t *o) {
    cb -= 128, cr -= 128;
    o[0] = clamp8(y + ((JFIX(1.40200) * cr + JHALF) >> 16));
    o[1] = clamp8(y + ((-JFIX(0.34414) * cb + JHALF + -JFIX(0.71414) * cr) >> 16));
    o[2] = clamp8(y + ((JFIX(1.77200) * cb + JHALF) >> 16));
}

/* libjpeg's h2v1 fancy upsampling of one row of n samples into 2n */
static void jpeg_up_h(const uint8_t *in, int n, uint8_t *out) {
    if (n == 1) {
        out[0] = out[1] = in[0];
        return;
    }
    out[0] = in[0];
    out[1] = (uint8_t)((in[0] * 3 + in[1] + 2) >> 2);
    for (int j = 1; j < n - 1; j++) {
        out[2 * j] = (uint8_t)((in[j] * 3 + in[j - 1] + 1) >> 2);
        out[2 * j + 1] = (uint8_t)((in[j] * 3 + in[j + 1] + 2) >> 2);
    }
    out[2 * n - 2] = (uint8_t)((in[n - 1] * 3 + in[n - 2] + 1) >> 2);
    out[2 * n - 1] = in[n - 1];
}

/* libjpeg's h2v2 fancy upsampling: column sums 3 near + far, then 3:1 across with biases 8/7 */
static void jpeg_up_hv(const uint8_t *near, const uint8_t *far, int n, int *sum, uint8_t *out) {
    for (int j = 0; j < n; j++)
        sum[j] = near[j] * 3 + far[j];
    if (n == 1) {
        out[0] = (uint8_t)((sum[0] * 4 + 8) >> 4);
        out[1] = (uint8_t)((sum[0] * 4 + 7) >> 4);
        return;
    }
    out[0] = (uint8_t)((sum[0] * 4 + 8) >> 4);
    out[1] = (uint8_t)((sum[0] * 3 + sum[1] + 7) >> 4);
    for (int j = 1; j < n - 1; j++) {
        out[2 * j] = (uint8_t)((sum[j] * 3 + sum[j - 1] + 8) >> 4);
        out[2 * j + 1] = (uint8_t)((sum[j] * 3 + sum[j + 1] + 7) >> 4);
    }
    out[2 * n - 2] = (uint8_t)((sum[n - 1] * 3 + sum[n - 2] + 8) >> 4);
    out[2 * n - 1] = (uint8_t)((sum[n - 1] * 4 + 7) >> 4);
}

/* libjpeg-turbo's h1v2 fancy upsampling: 3 near + far, bias 1 on even rows, 2 on odd */
static void jpeg_up_v(const uint8_t *near, const uint8_t *far, int n, int bias, uint8_t *out) {
    for (int j = 0; j < n; j++)
        out[j] = (uint8_t)((near[j] * 3 + far[j] + bias) >> 2);
}

int vdn_jpeg_ycc_to_rgb(const vdn_yuv_planes *p, uint8_t *rgb) {
    if (p->hsub < 0 || p->hsub > 1 || p->vsub < 0 || p->vsub > 1) return -1;
    int cw = (p->w + p->hsub) >> p->hsub, chh = (p->h + p->vsub) >> p->vsub;
    uint8_t *cb = vdn_xmalloc((size_t)2 * cw + 2), *cr = vdn_xmalloc((size_t)2 * cw + 2);
    uint8_t *tb = vdn_xmalloc((size_t)cw + 1), *tr = vdn_xmalloc((size_t)cw + 1);
    int *sum = vdn_xmalloc(((size_t)cw + 1) * sizeof *sum);
    for (int y = 0; y < p->h; y++) {
        const uint8_t *ys = p->y + (size_t)y * p->ys;
        int i = y >> p->vsub;
        const uint8_t *nb = p->u + (size_t)i * p->us, *nr = p->v + (size_t)i * p->vs;
        const uint8_t *fb = nb, *fr = nr;
        if (p->vsub) { /* the farther chroma row: above on even rows, below on odd ones */
            int k = y & 1 ? (i + 1 < chh ? i + 1 : i) : (i > 0 ? i - 1 : 0);
            fb = p->u + (size_t)k * p->us, fr = p->v + (size_t)k * p->vs;
        }
        const uint8_t *rb = nb, *rr = nr;
        if (p->hsub && cw <= 2) { /* libjpeg upsamples so narrow a chroma plane by replication */
            for (int j = 0; j < cw; j++)
                cb[2 * j] = cb[2 * j + 1] = nb[j];
            for (int j = 0; j < cw; j++)
                cr[2 * j] = cr[2 * j + 1] = nr[j];
            rb = cb, rr = cr;
        } else if (p->hsub && p->vsub) {
            jpeg_up_hv(nb, fb, cw, sum, cb);
            jpeg_up_hv(nr, fr, cw, sum, cr);
            rb = cb, rr = cr;
        } else if (p->hsub) {
            jpeg_up_h(nb, cw, cb);
            jpeg_up_h(nr, cw, cr);
            rb = cb, rr = cr;
        } else if (p->vsub) {
            jpeg_up_v(nb, fb, cw, y & 1 ? 2 : 1, tb);
            jpeg_up_v(nr, fr, cw, y & 1 ? 2 : 1, tr);
            rb = tb, rr = tr;
        }
        uint8_t *o = rgb + (size_t)y * p->w * 3;
        for (int x = 0; x < p->w; x++)
            ycc_pixel(ys[x], rb[x], rr[x], o + 3 * x);
    }
    free(cb), free(cr), free(tb), free(tr), free(sum);
    return 0;
}

/* ---- WebP ---- */

static int mult_hi(int v, int c) {
    return (v * c) >> 8;
}

static uint8_t webp_clip8(int v) {
    return (v & ~16383) == 0 ? (uint8_t)(v >> 6) : v < 0 ? 0 : 255;
}

static void webp_pixel(int y, int u, int v, uint8_t *o) {
    o[0] = webp_clip8(mult_hi(y, 19077) + mult_hi(v, 26149) - 14234);
    o[1] = webp_clip8(mult_hi(y, 19077) - mult_hi(u, 6419) - mult_hi(v, 13320) + 8708);
    o[2] = webp_clip8(mult_hi(y, 19077) + mult_hi(u, 33050) - 17685);
}

/* libwebp's fancy upsampler for one pair of luma rows (bottom may be NULL) between the chroma
 * rows tu/tv (nearer the top row) and cu/cv (nearer the bottom row); u and v each alone. */
static void webp_pair(const uint8_t *top_y, const uint8_t *bot_y, const uint8_t *tu,
                      const uint8_t *tv, const uint8_t *cu, const uint8_t *cv, uint8_t *top,
                      uint8_t *bot, int len) {
    int tl[2] = {tu[0], tv[0]}, l[2] = {cu[0], cv[0]};
    int a[2], b[2];
    for (int c = 0; c < 2; c++)
        a[c] = (3 * tl[c] + l[c] + 2) >> 2, b[c] = (3 * l[c] + tl[c] + 2) >> 2;
    webp_pixel(top_y[0], a[0], a[1], top);
    if (bot_y) webp_pixel(bot_y[0], b[0], b[1], bot);
    int last_pair = (len - 1) >> 1;
    for (int x = 1; x <= last_pair; x++) {
        int t[2] = {tu[x], tv[x]}, s[2] = {cu[x], cv[x]};
        int u0[2], u1[2], d0[2], d1[2];
        for (int c = 0; c < 2; c++) {
            int avg = tl[c] + t[c] + l[c] + s[c] + 8;
            int diag_12 = (avg + 2 * (t[c] + l[c])) >> 3;
            int diag_03 = (avg + 2 * (tl[c] + s[c])) >> 3;
            u0[c] = (diag_12 + tl[c]) >> 1, u1[c] = (diag_03 + t[c]) >> 1;
            d0[c] = (diag_03 + l[c]) >> 1, d1[c] = (diag_12 + s[c]) >> 1;
            tl[c] = t[c], l[c] = s[c];
        }
        webp_pixel(top_y[2 * x - 1], u0[0], u0[1], top + 3 * (2 * x - 1));
        webp_pixel(top_y[2 * x], u1[0], u1[1], top + 3 * (2 * x));
        if (bot_y) {
            webp_pixel(bot_y[2 * x - 1], d0[0], d0[1], bot + 3 * (2 * x - 1));
            webp_pixel(bot_y[2 * x], d1[0], d1[1], bot + 3 * (2 * x));
        }
    }
    if (!(len & 1)) {
        for (int c = 0; c < 2; c++)
            a[c] = (3 * tl[c] + l[c] + 2) >> 2, b[c] = (3 * l[c] + tl[c] + 2) >> 2;
        webp_pixel(top_y[len - 1], a[0], a[1], top + 3 * (len - 1));
        if (bot_y) webp_pixel(bot_y[len - 1], b[0], b[1], bot + 3 * (len - 1));
    }
}

int vdn_webp_yuv_to_rgb(const vdn_yuv_planes *p, uint8_t *rgb) {
    if (p->hsub != 1 || p->vsub != 1) return -1;
    size_t row = (size_t)p->w * 3;
#define Y(r) (p->y + (size_t)(r)*p->ys)
#define U(r) (p->u + (size_t)(r)*p->us)
#define V(r) (p->v + (size_t)(r)*p->vs)
    /* the first row with chroma row 0 alone; rows 2j-1, 2j between chroma rows j-1 and j */
    webp_pair(Y(0), NULL, U(0), V(0), U(0), V(0), rgb, NULL, p->w);
    int y = 1;
    for (; y + 1 < p->h; y += 2) {
        int j = (y + 1) / 2;
        webp_pair(Y(y), Y(y + 1), U(j - 1), V(j - 1), U(j), V(j), rgb + y * row,
                  rgb + (y + 1) * row, p->w);
    }
    if (y < p->h) { /* an even height's last row, with the last chroma row alone */
        int j = (p->h - 1) / 2;
        webp_pair(Y(y), NULL, U(j), V(j), U(j), V(j), rgb + y * row, NULL, p->w);
    }
#undef Y
#undef U
#undef V
    return 0;
}
