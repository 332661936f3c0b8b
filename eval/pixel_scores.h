/* Pixel metrics of one output in one streaming pass over its decoded frames (frames.h), and,
 * when the baseline's frames are given too, its fidelity to them, read in lockstep. Only two
 * frames of each clip are held at a time (plus the endpoints), so a 768p clip costs tens of
 * MB, not the 4.3 GB of the whole clip. Definitions: docs/eval.md "Metrics". */
#ifndef VDN_EVAL_PIXEL_SCORES_H
#define VDN_EVAL_PIXEL_SCORES_H

#include <stddef.h>
#include <stdint.h>

#include "frames.h"

typedef struct {
    /* Endpoint frames compared with the baseline's (keyframe modes): the first (i2va, fl2va)
     * and/or the last (l2va, fl2va). */
    int first, last;
    /* The keyframe pictures on the canvas ((3, H, W) in [0, 1], pictures.h), NULL where the
     * item has none: the generated first / last frame is compared with them (FL2VA fidelity). */
    const float *kf_first, *kf_last;
    int kf_h, kf_w; /* their size: the clip's must be the same */
    /* Frame strip: strip_cols evenly spaced frames, each sampled (nearest) to tile_w x tile_h
     * RGB bytes. 0 columns: none. Needs the frame count from vdn_frames_info. */
    int strip_cols, tile_w, tile_h;
} vdn_pixel_opts;

typedef struct {
    int T, H, W; /* frames read, size */
    /* the clip's own (NAN with fewer than 2 frames): */
    double flow;      /* mean ILK flow magnitude of consecutive luminance frames, pixels */
    double tdiff;     /* RMS change between consecutive frames, mean over the T-1 pairs */
    double tdiff_var; /* and its population variance */
    /* against the baseline (NAN without one; endpoints also NAN unless first/last asked): */
    double psnr;     /* 10 log10(1 / MSE) over every frame, capped at 100 dB */
    double end_psnr; /* mean over the endpoint frames of PSNR on (3, H, W), data range 1 */
    double end_ssim; /* mean over the endpoint frames of the mean SSIM of R, G and B */
    /* against the keyframe pictures (NAN without): the same measures of frame 0 against
     * kf_first and frame T-1 against kf_last, mean over the pictures given */
    double kf_psnr, kf_ssim;
    uint8_t *strip; /* strip_cols tiles of tile_h x tile_w x 3 bytes, one after another */
    int strip_cols; /* tiles filled (fewer when the clip has fewer frames than announced) */
} vdn_pixel_scores;

/* clip: the output's frames; base: the baseline's (NULL: own metrics only). Both are read to
 * their end. A different size or frame count from the baseline's is an error. */
int vdn_pixel_scores_run(vdn_frames *clip, vdn_frames *base, const vdn_pixel_opts *o,
                         vdn_pixel_scores *s, char *err, size_t errlen);
void vdn_pixel_scores_free(vdn_pixel_scores *s);

#endif
