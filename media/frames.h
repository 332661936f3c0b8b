/* Decoded frames, one frame at a time, for eval's pixel metrics: from an mp4 (the farm's
 * product, decoded with FFmpeg's libraries: media/ owns media I/O) or from frames already in
 * memory (outputs with latents only, decoded with `--vae`). One frame is (3, H, W) float32 in
 * [0, 1], R, G, B planes, which is one time step of the VAE's (3, T, H, W) output, so both
 * sources feed the same code. Streaming matters: a 768x1344 clip of 345 frames is 4.3 GB as
 * floats. */
#ifndef VDN_MEDIA_FRAMES_H
#define VDN_MEDIA_FRAMES_H

#include <stddef.h>

typedef struct vdn_frames vdn_frames;

/* The mp4's first video stream, converted to RGB as the file's tags say (BT.709 limited range
 * for vdn's mp4s; untagged: BT.601, as FFmpeg assumes), so the frames are what `ffmpeg -i F
 * -pix_fmt rgb24` gives, divided by 255. NULL with a message naming the file on failure. */
vdn_frames *vdn_frames_open_mp4(const char *path, char *err, size_t errlen);
/* px: (3, T, H, W), not copied: it must outlive the reader. */
vdn_frames *vdn_frames_from_buffer(const float *px, int T, int H, int W);
/* Size, and the frame count: the container's (mp4) or the buffer's; 0 = unknown. */
void vdn_frames_info(const vdn_frames *f, int *T, int *H, int *W);
/* The next frame into rgb (3 * H * W floats): 1, 0 after the last, -1 with a message. */
int vdn_frames_next(vdn_frames *f, float *rgb, char *err, size_t errlen);
void vdn_frames_close(vdn_frames *f);

#endif
