/* One streaming pass of pixel metrics (pixel_scores.h). */
#include "pixel_scores.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "vdn_util.h"

#define PIXEL_PSNR_CAP 100.0 /* identical frames give +inf; capped as the latent PSNRs are */

static double cap(double x) {
    return x > PIXEL_PSNR_CAP ? PIXEL_PSNR_CAP : x;
}

/* luminance as the mean of R, G, B (the documented gray of the flow metric) */
static void gray_of(const float *rgb, size_t n, double *g) {
    for (size_t i = 0; i < n; i++)
        g[i] = ((double)rgb[i] + rgb[n + i] + rgb[2 * n + i]) / 3.0;
}

static double mean_flow(const double *a, const double *b, int H, int W, double *flow) {
    size_t n = (size_t)H * W;
    vdn_flow_ilk(a, b, H, W, 7, 10, flow);
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m += sqrt(flow[i] * flow[i] + flow[n + i] * flow[n + i]);
    return m / (double)n;
}

static double sq_err(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        s += d * d;
    }
    return s;
}

/* PSNR over the RGB frame, and SSIM as skimage's structural_similarity(..., channel_axis=0):
 * the mean of the per-channel SSIMs. */
static void endpoint(const float *x, const float *ref, int H, int W, double *psnr, double *ssim,
                     double *bufa, double *bufb) {
    size_t n = (size_t)H * W;
    double mse = sq_err(x, ref, 3 * n) / (double)(3 * n);
    *psnr = mse > 0 ? cap(-10 * log10(mse)) : PIXEL_PSNR_CAP;
    double s = 0;
    for (int c = 0; c < 3; c++) {
        for (size_t i = 0; i < n; i++) {
            bufa[i] = ref[c * n + i];
            bufb[i] = x[c * n + i];
        }
        s += vdn_ssim(bufa, bufb, H, W, 1.0);
    }
    *ssim = s / 3;
}

static void strip_tile(const float *rgb, int H, int W, int th, int tw, uint8_t *t) {
    size_t n = (size_t)H * W;
    for (int y = 0; y < th; y++)
        for (int x = 0; x < tw; x++) {
            size_t sy = (size_t)y * H / th, sx = (size_t)x * W / tw;
            for (int c = 0; c < 3; c++) {
                float v = rgb[c * n + sy * W + sx];
                v = v < 0 ? 0 : v > 1 ? 1 : v;
                t[((size_t)y * tw + x) * 3 + c] = (uint8_t)lrintf(v * 255.0f);
            }
        }
}

void vdn_pixel_scores_free(vdn_pixel_scores *s) {
    free(s->strip);
    s->strip = NULL;
}

int vdn_pixel_scores_run(vdn_frames *clip, vdn_frames *base, const vdn_pixel_opts *o,
                         vdn_pixel_scores *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->flow = s->tdiff = s->tdiff_var = s->psnr = s->end_psnr = s->end_ssim = NAN;
    s->kf_psnr = s->kf_ssim = NAN;
    int T0, H, W, bT, bH, bW;
    vdn_frames_info(clip, &T0, &H, &W);
    if (base) {
        vdn_frames_info(base, &bT, &bH, &bW);
        if (bH != H || bW != W)
            return vdn_fail(err, errlen, "frames of %dx%d, the baseline's are %dx%d", W, H, bW, bH);
    }
    if ((o->kf_first || o->kf_last) && (o->kf_h != H || o->kf_w != W))
        return vdn_fail(err, errlen, "frames of %dx%d, the keyframe pictures' canvas is %dx%d", W,
                        H, o->kf_w, o->kf_h);
    size_t n = (size_t)H * W, fn = 3 * n;
    float *cur = vdn_xmalloc(fn * sizeof *cur), *prev = vdn_xmalloc(fn * sizeof *prev);
    float *bcur = base ? vdn_xmalloc(fn * sizeof *bcur) : NULL;
    float *bprev = base ? vdn_xmalloc(fn * sizeof *bprev) : NULL;
    double *d = NULL; /* the frame-to-frame changes, for a two-pass variance */
    int d_cap = 0;
    double *g = vdn_xmalloc(n * sizeof *g), *pg = vdn_xmalloc(n * sizeof *pg);
    double *flow = vdn_xmalloc(2 * n * sizeof *flow);
    int cols = o->strip_cols > 0 && T0 > 0 ? (T0 < o->strip_cols ? T0 : o->strip_cols) : 0;
    size_t tile = (size_t)o->tile_w * o->tile_h * 3;
    if (cols) s->strip = vdn_xcalloc((size_t)cols, tile);
    double flow_sum = 0, se = 0, ep = 0, es = 0, kp = 0, ks = 0;
    int n_end = 0, n_kf = 0, rc = 0, t = 0;
    for (;; t++) {
        int got = vdn_frames_next(clip, cur, err, errlen);
        if (got < 0) goto fail;
        int bgot = base ? vdn_frames_next(base, bcur, err, errlen) : got;
        if (bgot < 0) goto fail;
        if (got != bgot) {
            vdn_fail(err, errlen, "%d frames or more, the baseline has %d", got ? t + 1 : t,
                     got ? t : t + 1);
            goto fail;
        }
        if (!got) break;
        gray_of(cur, n, g);
        if (t > 0) {
            flow_sum += mean_flow(pg, g, H, W, flow);
            if (t > d_cap) {
                d_cap = 2 * t + 16;
                d = realloc(d, (size_t)d_cap * sizeof *d);
                VDN_ASSERT(d);
            }
            d[t - 1] = sqrt(sq_err(cur, prev, fn) / (double)fn);
        }
        if (base) se += sq_err(cur, bcur, fn);
        if (base && t == 0 && o->first) {
            double a, b;
            endpoint(cur, bcur, H, W, &a, &b, flow, flow + n);
            ep += a, es += b, n_end++;
        }
        if (t == 0 && o->kf_first) {
            double a, b;
            endpoint(cur, o->kf_first, H, W, &a, &b, flow, flow + n);
            kp += a, ks += b, n_kf++;
        }
        for (int k = 0; k < cols; k++)
            if ((cols > 1 ? (int)lround((double)k * (T0 - 1) / (cols - 1)) : 0) == t) {
                strip_tile(cur, H, W, o->tile_h, o->tile_w, s->strip + (size_t)k * tile);
                s->strip_cols = k + 1;
            }
        float *ft = prev;
        prev = cur, cur = ft;
        double *gt = pg;
        pg = g, g = gt;
        if (base) {
            ft = bprev;
            bprev = bcur, bcur = ft;
        }
    }
    s->T = t, s->H = H, s->W = W;
    if (t >= 2) {
        double m = 0, v = 0;
        for (int k = 0; k + 1 < t; k++)
            m += d[k];
        m /= t - 1;
        for (int k = 0; k + 1 < t; k++)
            v += (d[k] - m) * (d[k] - m);
        s->flow = flow_sum / (t - 1);
        s->tdiff = m;
        s->tdiff_var = v / (t - 1); /* population variance over the pairs */
    }
    if (o->kf_last && t > 0) { /* prev: the last frame read */
        double a, b;
        endpoint(prev, o->kf_last, H, W, &a, &b, flow, flow + n);
        kp += a, ks += b, n_kf++;
    }
    if (n_kf) s->kf_psnr = kp / n_kf, s->kf_ssim = ks / n_kf;
    if (base && t > 0) {
        double mse = se / ((double)fn * t);
        s->psnr = mse > 0 ? cap(-10 * log10(mse)) : PIXEL_PSNR_CAP;
        if (o->last) { /* prev, bprev: the last frames read */
            double a, b;
            endpoint(prev, bprev, H, W, &a, &b, flow, flow + n);
            ep += a, es += b, n_end++;
        }
        if (n_end) s->end_psnr = ep / n_end, s->end_ssim = es / n_end;
    }
    goto done;
fail:
    rc = -1;
    vdn_pixel_scores_free(s);
done:
    free(cur);
    free(prev);
    free(bcur);
    free(bprev);
    free(d);
    free(g);
    free(pg);
    free(flow);
    return rc;
}
