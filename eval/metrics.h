/* Metrics that need no learned weights: image fidelity (PSNR, SSIM), latent fidelity to the
 * dense reference, a classical optical-flow motion diagnostic and temporal stability.
 *
 * Until decoders land, image metrics run on the LATENT PREVIEW: a fixed projection of the C
 * latent channels of one frame to RGB and grayscale in [0,1], each latent pixel drawn as an
 * s x s block, s = vdn_preview_scale(H, W) = max(1, ceil(16 / min(H, W))), so that an 11x11 SSIM
 * window and a 15x15 flow window fit even a tiny 2x2 latent while a full-size latent (48x84)
 * is used as it is:
 *   channel c belongs to group k = floor(3c / C) (k = R, G, B);
 *   p_k = sum_{c in k} x_c / sqrt(|k|)         (unit variance for unit-normal channels)
 *   rgb_k = clamp(0.5 + p_k / 6, 0, 1)          (+-3 sigma spans the range)
 *   gray = (R + G + B) / 3 */
#ifndef VDN_EVAL_METRICS_H
#define VDN_EVAL_METRICS_H

#include <stddef.h>
#include <stdint.h>

static inline int vdn_preview_scale(int H, int W) {
    int m = H < W ? H : W;
    return m >= 16 ? 1 : (16 + m - 1) / m;
}

/* Latent video (C, F, H, W) float32. gray: (H*s, W*s) doubles; rgb: (H*s, W*s, 3) bytes; either
 * may be NULL. */
void vdn_latent_preview(const float *video, int C, int F, int H, int W, int frame, int scale,
                        double *gray, uint8_t *rgb);
/* A single-frame latent (C, 1, H, W) uses frame 0. */

/* skimage.metrics.peak_signal_noise_ratio: 10 log10(range^2 / MSE); +inf when equal. */
double vdn_psnr(const double *ref, const double *test, size_t n, double data_range);

/* skimage.metrics.structural_similarity(ref, test, data_range=R, gaussian_weights=True,
 * sigma=1.5, use_sample_covariance=False): 11x11 Gaussian window, reflect borders, mean SSIM
 * over the image with a 5-pixel border cropped. Returns NAN when h or w < 11. */
double vdn_ssim(const double *ref, const double *test, int h, int w, double data_range);

/* Relative L2 ||test - ref|| / ||ref|| over n values (NAN when ref is all zero). */
double vdn_rel_l2(const float *ref, const float *test, size_t n);
/* Latent PSNR against the reference with the reference's own max - min as peak. */
double vdn_latent_psnr(const float *ref, const float *test, size_t n);

/* Iterative Lucas-Kanade flow like skimage.registration.optical_flow_ilk(ref, moving,
 * radius, num_warp, gaussian=False, prefilter=False, dtype=float64): coarse-to-fine over a
 * factor-2 pyramid while the smaller side exceeds 32 pixels. flow: (2, h, w), row then column
 * component, in pixels. */
void vdn_flow_ilk(const double *ref, const double *moving, int h, int w, int radius, int num_warp,
                  double *flow);

/* Mean flow magnitude between consecutive gray preview frames (radius 7, 10 warps), in latent
 * pixels (preview pixels / vdn_preview_scale). NAN for F < 2. */
double vdn_motion_mean_flow(const float *video, int C, int F, int H, int W);

/* Motion on decoded frames: rgb (3, F, H, W) in [0, 1]; the mean ILK flow magnitude (radius 7,
 * 10 warps, as skimage's optical_flow_ilk) between consecutive frames of the luminance
 * (R + G + B) / 3, in pixels. */
double vdn_pixel_mean_flow(const float *rgb, int F, int H, int W);

/* Temporal stability: RMS latent difference between consecutive frames, mean and variance
 * over the F-1 pairs. */
void vdn_temporal_diff(const float *video, int C, int F, int H, int W, double *mean,
                       double *variance);

#endif
