/* Stills and sound files beside the mp4: a poster PNG (frames side by side) through libavcodec's
 * PNG encoder, and a float32 WAV (lossless, for comparing waveforms with other implementations). */
#ifndef VDN_STILL_H
#define VDN_STILL_H

#include <stddef.h>
#include <stdint.h>

/* The poster: frames idx[0..n) of a (3, T, H, W) float32 [0, 1] clip side by side, as an RGB PNG
 * of width n W, written as PATH.partial then renamed. */
int vdn_poster_png(const char *path, const float *frames, int T, int H, int W, const int *idx,
                   int n, char *err, size_t errlen);
/* The usual poster: first, middle and last frame. */
int vdn_poster_png3(const char *path, const float *frames, int T, int H, int W, char *err,
                    size_t errlen);

/* WAV, IEEE float32 little-endian, channels interleaved from planar input ch[c][n]. */
int vdn_wav_write_f32(const char *path, const float *const *ch, int channels, int64_t n,
                      int sample_rate, char *err, size_t errlen);

#endif
