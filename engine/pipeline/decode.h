/* Latents file -> mp4 (and, on request, lossless frames, a WAV, a poster PNG): what `vdn decode`,
 * `vdn render` and the farm worker call. */
#ifndef VDN_VAE_DECODE_H
#define VDN_VAE_DECODE_H

#include <stddef.h>

#include "cancel.h"
#include "vae.h" /* vdn_vae_share; vdn_vae_find locates the VAE folders beside transformer/ */

typedef struct {
    const char *latents;       /* safetensors: video (C,T,h,w) or latents (1,C,T,h,w); optional
                                  audio / audio_latents (channels, C, La) */
    const char *mp4;           /* output (NULL: none) */
    const char *vae_dir;       /* video VAE folder (config.json + safetensors) */
    const char *audio_vae_dir; /* NULL: a video without sound */
    const char *frames_out;    /* NULL, or safetensors "frames" F32 (3, T, H, W) in [0, 1] */
    const char *wav;           /* NULL, or float32 WAV of the decoded waveform */
    const char *poster;        /* NULL, or PNG of the first, middle and last frame */
    const char *backend;       /* "cpu", "cuda", or NULL / "auto": cuda when a GPU is there */
    int devices;               /* vdn_decode_file: over this many devices of the backend (cuda:
                                  GPUs 0 .. devices-1; cpu: host devices); 0 or 1: one */
    int crf;                   /* -1: the mp4 writer's default */
    vdn_precision precision;   /* vdn_decode_file: the video decoder's (vae.h
                                  vdn_video_vae_load_precision); 0: bf16 */
    int quiet;                 /* no progress on stderr */
    /* the caller's stop request (cancel.h): the decoders stop at their next tile or audio
     * batch and the decode fails with "cancelled". NULL: never. */
    const atomic_int *cancel;
} vdn_decode_opts;

/* 0, or -1 with a message naming the file, tensor or field; no output file is left on failure.
 * Opens a device (o->backend) and loads the VAEs for this one call. */
int vdn_decode_file(const vdn_decode_opts *o, char *err, size_t errlen);

/* The VAEs loaded once on a device, for many decodes: a farm worker keeps one beside each GPU's
 * engine, on that engine's device, so a job decodes on its own GPU without reading the VAEs from
 * disk again. audio_vae_dir NULL: videos without sound. The device must outlive the decoder and
 * be used by one thread at a time. NULL + err when a VAE does not load. precision: the video
 * decoder's (vae.h vdn_video_vae_load_precision; the audio VAE has one precision). */
typedef struct vdn_decoder vdn_decoder;
struct vdn_dev;
vdn_decoder *vdn_decoder_open(struct vdn_dev *dev, const char *vae_dir, const char *audio_vae_dir,
                              vdn_precision precision, char *err, size_t errlen);
vdn_precision vdn_decoder_precision(const vdn_decoder *d);
void vdn_decoder_close(vdn_decoder *d);
/* vdn_decode_file with d's VAEs on d's device (o->vae_dir, audio_vae_dir, backend and devices
 * are not read). vdn_decoder_decode_group with d alone. */
int vdn_decoder_decode(vdn_decoder *d, const vdn_decode_opts *o, char *err, size_t errlen);

/* What each decoder of a group decoded: video tiles and audio channels (vae.h vdn_vae_share),
 * and whose share failed; and the wall seconds of the decode's parts (`vdn bench --clip` reports
 * the decoders and the mux apart): the video decoders, the audio decoders, and the files written
 * (mp4, frames, WAV, poster: the mux, for a render's decode). */
typedef struct {
    vdn_vae_share video, audio;
    double video_s, audio_s, write_s;
} vdn_decode_share;
/* One clip over the n decoders d[0..n) (a farm worker's decoders of a k-GPU job's GPUs): copies
 * of the same VAEs, each on its own device. The video's ViT passes and the audio's channels are
 * dealt over them, each decoder on a thread of its own (vae.h "one clip over several devices");
 * the frames, waveform and files are those of a decode on d[0] alone (bit for bit on the CPU
 * backend). Clears each device's fault record first (op.h vdn_dev_faulted then says which
 * devices failed in this decode). share: NULL, or filled (also on failure). n = 1 is
 * vdn_decoder_decode. */
int vdn_decoder_decode_group(vdn_decoder *const *d, int n, const vdn_decode_opts *o,
                             vdn_decode_share *share, char *err, size_t errlen);

#endif
