/* The packed sequence of one request (spec 1.2-1.5): row layout, tags, 3-axis RoPE positions in
 * float64, per-row timesteps and their unique sorted values; patchify/unpatchify and the audio
 * row packing. Shared by every backend: a backend only ever sees the result (vdn_step_inputs). */
#ifndef VDN_SEQ_H
#define VDN_SEQ_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "config.h"

enum { VDN_KF_FIRST = 0, VDN_KF_LAST = 1 };

/* Largest packed sequence the engine accepts: 16x the H3 workload (~104k rows). */
#define VDN_SEQ_MAX_ROWS (1 << 21)

typedef struct {
    vdn_layout lay;
    int n_keyframes;
    int kf_anchor[8];  /* VDN_KF_FIRST / VDN_KF_LAST per keyframe, in row order */
    int8_t *tags;      /* (n_rows) */
    double *pos;       /* (n_rows, 3) */
    int *t_index;      /* (n_rows), filled by vdn_seq_timesteps */
    float t_values[4]; /* unique sorted timesteps of the current step */
    int n_t;
    int t_group[3]; /* t_index of text+video, keyframe and audio rows last written; -1 = never */
} vdn_seq;

/* text_tags: (n_text) tags of the prompt rows (1 text, 0 vision-block rows). lat_h, lat_w: video
 * latent size (pixels / 16). audio_latents: La. kf_anchor: n_keyframes entries. */
int vdn_seq_build(vdn_seq *s, const vdn_config *cfg, const int8_t *text_tags, int n_text,
                  int frames, int lat_h, int lat_w, int audio_latents, int n_keyframes,
                  const int *kf_anchor, char *err, size_t errlen);
/* Per-row timesteps for one step: text and video t_v, keyframe rows max(t_v, 0.999), audio t_a;
 * then unique ascending values + per-row indices (torch.unique(return_inverse=True)). The rows
 * are rewritten only when a group's index changes (most steps keep them: ~0.1M rows at H3). */
void vdn_seq_timesteps(vdn_seq *s, float t_v, float t_a);
void vdn_seq_free(vdn_seq *s);

/* Time of target latent frame k after the media origin: sum_{j<k} (5/3) p[j mod 5], p=(1,4,4,4,4).
 */
double vdn_frame_time(int k);
/* Total rotary time of `frames` latent frames, summed as numpy does (pairwise): the "last"
 * keyframe sits at L_text + span - 5/3 and the reference's summation order shows from 16 frames. */
double vdn_frame_span(int frames);
/* Spatial RoPE grid of an axis of latent length D against the other axis: D/patch points of
 * np.linspace(left, left + ratio, D/patch, endpoint=False) * 32, ratio = D / sqrt(lat_h*lat_w). */
void vdn_rope_grid(double *out, int D, int patch, int lat_h, int lat_w);

/* (C, F, H, W) latent -> (F*(H/ph)*(W/pw), C*ph*pw) rows; features ordered (c, ph, pw). */
void vdn_patchify(float *rows, const float *lat, int C, int F, int H, int W, int ph, int pw);
void vdn_unpatchify(float *lat, const float *rows, int C, int F, int H, int W, int ph, int pw);
/* (2, ch, La) audio -> (2*La, ch) channel-major rows, and back. */
void vdn_audio_to_rows(float *rows, const float *audio, int ch, int La);
void vdn_rows_to_audio(float *audio, const float *rows, int ch, int La);

/* Official frame/audio arithmetic (DIFF-MP): 17n+5 pixel frames, latent = (n-5)/17*5+2,
 * audio latents = round(frames/24*40). */
int vdn_snap_frames(int pixel_frames);
int vdn_latent_frames(int pixel_frames);
int vdn_audio_latents(int pixel_frames);

#endif
