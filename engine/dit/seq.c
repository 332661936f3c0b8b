/* Packed sequence builder; see seq.h and spec sections 1.2-1.5. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "seq.h"
#include "vdn_util.h"

static const int frame_pattern[5] = {1, 4, 4, 4, 4}; /* pixel frames per latent in a VAE chunk */

double vdn_frame_time(int k) {
    double t = 0.0;
    for (int j = 0; j < k; j++)
        t += (5.0 / 3.0) * frame_pattern[j % 5];
    return t;
}

/* numpy's pairwise summation of a float64 array (the add.reduce inner loop): blocks of 8
 * accumulators up to 128 elements, halves (rounded to a multiple of 8) above. */
static double np_pairwise(const double *a, long n) {
    if (n < 8) {
        double r = -0.0;
        for (long i = 0; i < n; i++)
            r += a[i];
        return r;
    }
    if (n <= 128) {
        double r[8];
        long i;
        for (int j = 0; j < 8; j++)
            r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    long n2 = n / 2;
    n2 -= n2 % 8;
    return np_pairwise(a, n2) + np_pairwise(a + n2, n - n2);
}

double vdn_frame_span(int frames) {
    if (frames < 1) return 0.0;
    double *s = vdn_xmalloc(sizeof(double) * frames);
    for (int j = 0; j < frames; j++)
        s[j] = (5.0 / 3.0) * frame_pattern[j % 5];
    /* np.sum over a contiguous float64 array: one pairwise pass over all elements */
    double r = np_pairwise(s, frames);
    free(s);
    return r;
}

void vdn_rope_grid(double *out, int D, int patch, int lat_h, int lat_w) {
    int num = D / patch;
    double ratio = D / sqrt((double)lat_h * lat_w);
    double left = (1.0 - ratio) / 2.0, stop = left + ratio;
    double step = (stop - left) / num; /* numpy: delta / div, then i*step + start */
    for (int i = 0; i < num; i++)
        out[i] = (i * step + left) * 32.0;
}

int vdn_seq_build(vdn_seq *s, const vdn_config *cfg, const int8_t *text_tags, int n_text,
                  int frames, int lat_h, int lat_w, int audio_latents, int n_keyframes,
                  const int *kf_anchor, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    if (cfg->patch_t != 1)
        return vdn_fail(err, errlen, "config: patch_t = %d, expected 1", cfg->patch_t);
    if (n_text < 1) return vdn_fail(err, errlen, "prompt: no text rows (expected L >= 1)");
    if (frames < 1 || lat_h < cfg->patch_h || lat_w < cfg->patch_w || lat_h % cfg->patch_h ||
        lat_w % cfg->patch_w)
        return vdn_fail(err, errlen,
                        "request: latent size %d x %d x %d is not a positive multiple of the "
                        "patch %d x %d",
                        frames, lat_h, lat_w, cfg->patch_h, cfg->patch_w);
    if (n_keyframes < 0 || n_keyframes > 8)
        return vdn_fail(err, errlen, "request: %d keyframes, expected 0..8", n_keyframes);
    { /* refuse sizes whose row count would overflow or exhaust memory, before allocating */
        int64_t S64 = (int64_t)(lat_h / cfg->patch_h) * (lat_w / cfg->patch_w);
        int64_t rows = (int64_t)n_text + (int64_t)n_keyframes * S64 + 2 * (int64_t)audio_latents +
                       (int64_t)frames * S64;
        if (audio_latents < 0 || rows > VDN_SEQ_MAX_ROWS)
            return vdn_fail(err, errlen,
                            "request: %d latent frames of %d x %d latents make %lld sequence rows, "
                            "above the engine's limit of %d",
                            frames, lat_h, lat_w, (long long)rows, VDN_SEQ_MAX_ROWS);
    }
    vdn_layout *L = &s->lay;
    L->frames = frames;
    L->grid_h = lat_h / cfg->patch_h;
    L->grid_w = lat_w / cfg->patch_w;
    L->tokens_per_frame = L->grid_h * L->grid_w;
    L->n_text = n_text;
    L->cond_start = n_text;
    L->n_cond = n_keyframes * L->tokens_per_frame;
    L->audio_start = L->cond_start + L->n_cond;
    L->n_audio = 2 * audio_latents;
    L->video_start = L->audio_start + L->n_audio;
    L->n_video = frames * L->tokens_per_frame;
    L->n_rows = L->video_start + L->n_video;
    s->n_keyframes = n_keyframes;
    for (int i = 0; i < n_keyframes; i++)
        s->kf_anchor[i] = kf_anchor[i];

    s->tags = vdn_xmalloc((size_t)L->n_rows);
    s->pos = vdn_xcalloc((size_t)L->n_rows * 3, sizeof(double));
    s->t_index = vdn_xcalloc((size_t)L->n_rows, sizeof(int));
    s->t_group[0] = s->t_group[1] = s->t_group[2] = -1;
    double *gh = vdn_xmalloc(sizeof(double) * L->grid_h),
           *gw = vdn_xmalloc(sizeof(double) * L->grid_w);
    vdn_rope_grid(gh, lat_h, cfg->patch_h, lat_h, lat_w);
    vdn_rope_grid(gw, lat_w, cfg->patch_w, lat_h, lat_w);
    const double origin = n_text;
    const int S = L->tokens_per_frame;

    for (int i = 0; i < n_text; i++) { /* text row i: (i, 0, 0) */
        s->tags[i] = text_tags[i];
        s->pos[3 * i] = i;
    }
    for (int k = 0; k < n_keyframes; k++) { /* keyframe rows: first at origin, last at span - 5/3 */
        double t =
            kf_anchor[k] == VDN_KF_LAST ? origin + vdn_frame_span(frames) - 5.0 / 3.0 : origin;
        for (int r = 0; r < S; r++) {
            size_t row = (size_t)L->cond_start + (size_t)k * S + r;
            s->tags[row] = VDN_TAG_VIDEO;
            s->pos[3 * row] = t;
            s->pos[3 * row + 1] = gh[r / L->grid_w];
            s->pos[3 * row + 2] = gw[r % L->grid_w];
        }
    }
    for (int c = 0; c < 2; c++) /* audio: channel-major, one rotary unit per latent */
        for (int a = 0; a < audio_latents; a++) {
            size_t row = (size_t)L->audio_start + (size_t)c * audio_latents + a;
            s->tags[row] = VDN_TAG_AUDIO;
            s->pos[3 * row] = origin + a;
            s->pos[3 * row + 1] = 0.0;
            s->pos[3 * row + 2] = c == 0 ? gw[0] : gw[L->grid_w - 1];
        }
    for (int f = 0; f < frames; f++) {
        double t = origin + vdn_frame_time(f);
        for (int r = 0; r < S; r++) {
            size_t row = (size_t)L->video_start + (size_t)f * S + r;
            s->tags[row] = VDN_TAG_VIDEO;
            s->pos[3 * row] = t;
            s->pos[3 * row + 1] = gh[r / L->grid_w];
            s->pos[3 * row + 2] = gw[r % L->grid_w];
        }
    }
    free(gh);
    free(gw);
    return 0;
}

void vdn_seq_timesteps(vdn_seq *s, float t_v, float t_a) {
    const vdn_layout *L = &s->lay;
    float t_kf = t_v > 0.999f ? t_v : 0.999f;
    float cand[3] = {t_v, t_kf, t_a};
    int used[3] = {1, L->n_cond > 0, L->n_audio > 0};
    s->n_t = 0;
    for (int i = 0; i < 3; i++) { /* unique ascending values */
        if (!used[i]) continue;
        int dup = 0;
        for (int j = 0; j < s->n_t; j++)
            dup |= s->t_values[j] == cand[i];
        if (!dup) s->t_values[s->n_t++] = cand[i];
    }
    for (int i = 1; i < s->n_t; i++)
        for (int j = i; j > 0 && s->t_values[j - 1] > s->t_values[j]; j--) {
            float tmp = s->t_values[j];
            s->t_values[j] = s->t_values[j - 1];
            s->t_values[j - 1] = tmp;
        }
    int idx[3] = {0, 0, 0}; /* an unused group (no keyframes, no audio) keeps 0 */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < s->n_t; j++)
            if (s->t_values[j] == cand[i]) idx[i] = j;
    /* row groups: text [0, cond_start) and video [video_start, n_rows) read idx[0], keyframes
     * idx[1], audio idx[2]; rewrite a group only when its index moved */
    if (idx[0] != s->t_group[0]) {
        for (int r = 0; r < L->cond_start; r++)
            s->t_index[r] = idx[0];
        for (int r = L->video_start; r < L->n_rows; r++)
            s->t_index[r] = idx[0];
    }
    if (idx[1] != s->t_group[1])
        for (int r = L->cond_start; r < L->audio_start; r++)
            s->t_index[r] = idx[1];
    if (idx[2] != s->t_group[2])
        for (int r = L->audio_start; r < L->video_start; r++)
            s->t_index[r] = idx[2];
    for (int i = 0; i < 3; i++)
        s->t_group[i] = idx[i];
}

void vdn_seq_free(vdn_seq *s) {
    free(s->tags);
    free(s->pos);
    free(s->t_index);
    memset(s, 0, sizeof *s);
}

void vdn_patchify(float *rows, const float *lat, int C, int F, int H, int W, int ph, int pw) {
    int hp = H / ph, wp = W / pw, feat = C * ph * pw;
    for (int f = 0; f < F; f++)
        for (int y = 0; y < hp; y++)
            for (int x = 0; x < wp; x++) {
                float *r = rows + (((size_t)f * hp + y) * wp + x) * feat;
                for (int c = 0; c < C; c++)
                    for (int i = 0; i < ph; i++)
                        for (int j = 0; j < pw; j++)
                            r[(c * ph + i) * pw + j] =
                                lat[(((size_t)c * F + f) * H + y * ph + i) * W + x * pw + j];
            }
}

void vdn_unpatchify(float *lat, const float *rows, int C, int F, int H, int W, int ph, int pw) {
    int hp = H / ph, wp = W / pw, feat = C * ph * pw;
    for (int f = 0; f < F; f++)
        for (int y = 0; y < hp; y++)
            for (int x = 0; x < wp; x++) {
                const float *r = rows + (((size_t)f * hp + y) * wp + x) * feat;
                for (int c = 0; c < C; c++)
                    for (int i = 0; i < ph; i++)
                        for (int j = 0; j < pw; j++)
                            lat[(((size_t)c * F + f) * H + y * ph + i) * W + x * pw + j] =
                                r[(c * ph + i) * pw + j];
            }
}

void vdn_audio_to_rows(float *rows, const float *audio, int ch, int La) {
    for (int c = 0; c < 2; c++)
        for (int t = 0; t < La; t++)
            for (int k = 0; k < ch; k++)
                rows[((size_t)c * La + t) * ch + k] = audio[((size_t)c * ch + k) * La + t];
}

void vdn_rows_to_audio(float *audio, const float *rows, int ch, int La) {
    for (int c = 0; c < 2; c++)
        for (int t = 0; t < La; t++)
            for (int k = 0; k < ch; k++)
                audio[((size_t)c * ch + k) * La + t] = rows[((size_t)c * La + t) * ch + k];
}

/* ---- frame arithmetic (DIFF-MP align_num_frames etc.; declared in engine.h) ---- */

int vdn_snap_frames(int pixel_frames) {
    if (pixel_frames <= 5) return 5;
    int n = (pixel_frames - 5 + 16) / 17; /* round up to 17n + 5 */
    return 17 * n + 5;
}

int vdn_latent_frames(int pixel_frames) {
    int f = vdn_snap_frames(pixel_frames);
    return (f - 5) / 17 * 5 + 2;
}

int vdn_audio_latents(int pixel_frames) {
    return (int)llround(vdn_snap_frames(pixel_frames) / 24.0 * 40.0);
}
