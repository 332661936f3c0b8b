/* mp4 files out of decoded frames and waveforms, through Debian's FFmpeg libraries
 * (libavformat, libavcodec, libswscale, libswresample): H.264 yuv420p (libx264, CRF), AAC
 * stereo, `+faststart` so a player can start before the whole file arrives.
 *
 * The file is written as PATH.partial and renamed to PATH only when the trailer is written, so a
 * half file never sits under the final name (the official stack does the same); any failure and
 * vdn_mp4_abort remove the partial file.
 *
 * Frames come one at a time as three float planes (R, G, B; H*W each, values in [0, 1], clamped),
 * which is one time step of the decoders' (3, T, H, W) output. The waveform is given whole at
 * open (it is small: 2 x 32,000 floats a second) and interleaved with the frames as they come. */
#ifndef VDN_MP4_H
#define VDN_MP4_H

#include <stddef.h>
#include <stdint.h>

#define VDN_MP4_DEFAULT_CRF 18 /* x264's "visually lossless" end; 0 = lossless, 51 = worst */
#define VDN_MP4_DEFAULT_FPS 24

typedef struct {
    int width, height;  /* even: yuv420p halves the chroma planes */
    int fps;            /* frames per second (0: 24) */
    int crf;            /* -1: VDN_MP4_DEFAULT_CRF */
    const char *preset; /* x264 preset (NULL: "medium") */
    /* audio: NULL left = a video without sound. left/right: n_samples floats each in [-1, 1]
     * (mono: right = left). Not copied: they must stay valid until finish/abort. */
    const float *left, *right;
    int64_t n_samples;
    int sample_rate; /* e.g. 32000 */
} vdn_mp4_opts;

typedef struct vdn_mp4 vdn_mp4;

/* Opens PATH.partial and writes the header. NULL with a message naming the file on failure
 * (unwritable folder, bad options); nothing is left behind then. */
vdn_mp4 *vdn_mp4_open(const char *path, const vdn_mp4_opts *opts, char *err, size_t errlen);
/* One frame: planes r, g, b of width*height floats. */
int vdn_mp4_frame(vdn_mp4 *m, const float *r, const float *g, const float *b, char *err,
                  size_t errlen);
/* Flush the encoders, write the trailer (moov moved to the front), rename PATH.partial to PATH.
 * Frees m. On failure the partial file is removed. */
int vdn_mp4_finish(vdn_mp4 *m, char *err, size_t errlen);
void vdn_mp4_abort(vdn_mp4 *m); /* frees m, removes the partial file */

/* 1 where this build writes mp4 files, 0 in a build without FFmpeg's libraries (media/none.c),
 * where every call above fails saying so: a caller that only times the mux asks first. */
int vdn_mp4_available(void);

/* The whole clip at once: frames (3, T, H, W) float32 in [0, 1]. */
int vdn_mp4_write(const char *path, const float *frames, int n_frames, const vdn_mp4_opts *opts,
                  char *err, size_t errlen);

#endif
