/* A test-only backend: forward returns zero velocities at once, so a render costs only the
 * engine's own work. Registered under the name "cuda" (as kernels/ registers its backend) and
 * opened with VDN_BACKEND_CUDA. It checks what it is given on every NFE: the layout of
 * reserve(), the same tags and positions (and pointers) as the first NFE, ascending unique
 * timesteps, and each row group's timestep. Include once per test program (after check.h). */
#ifndef VDN_TEST_NULL_BACKEND_H
#define VDN_TEST_NULL_BACKEND_H

#include <string.h>

#include "backend.h"
#include "vdn_util.h"

struct vdn_backend {
    vdn_layout lay;
    int calls;
    double forward_s; /* time spent inside forward (the zero fill), subtracted from the NFE */
    const int8_t *tags0;
    const double *pos0;
    int8_t *tags_copy;
    double *pos_copy;
    int n_rows;
    int pf, ach;
};

static vdn_backend *g_be; /* the one null backend, for the timing report */

static int null_available(char *err, size_t errlen) {
    (void)err, (void)errlen;
    return 1;
}

static vdn_backend *null_create(vdn_ckpt *ck, const vdn_config *cfg, int threads, char *err,
                                size_t errlen) {
    (void)ck, (void)threads, (void)err, (void)errlen;
    vdn_backend *be = vdn_xcalloc(1, sizeof *be);
    be->pf = cfg->in_channels * cfg->patch_t * cfg->patch_h * cfg->patch_w;
    be->ach = cfg->audio_channels;
    g_be = be;
    return be;
}

static int null_reserve(vdn_backend *be, const vdn_layout *lay, char *err, size_t errlen) {
    (void)err, (void)errlen;
    be->lay = *lay;
    be->calls = 0;
    be->tags0 = NULL, be->pos0 = NULL;
    free(be->tags_copy), free(be->pos_copy);
    be->tags_copy = NULL, be->pos_copy = NULL;
    return 0;
}

static int null_set_text(vdn_backend *be, const float *embeds, int n_text, char *err,
                         size_t errlen) {
    (void)be, (void)embeds, (void)n_text, (void)err, (void)errlen;
    return 0;
}

static int null_forward(vdn_backend *be, const vdn_step_inputs *in, float *video_v, float *audio_v,
                        char *err, size_t errlen) {
    double t0 = vdn_now();
    const vdn_layout *L = in->layout;
    if (memcmp(L, &be->lay, sizeof *L) != 0)
        return vdn_fail(err, errlen, "null backend: layout differs from reserve()");
    const size_t n = (size_t)L->n_rows;
    if (be->calls == 0) { /* keep the first NFE's tags and positions to compare later ones */
        be->tags0 = in->tags, be->pos0 = in->pos;
        be->tags_copy = vdn_xmalloc(n);
        be->pos_copy = vdn_xmalloc(n * 3 * sizeof(double));
        memcpy(be->tags_copy, in->tags, n);
        memcpy(be->pos_copy, in->pos, n * 3 * sizeof(double));
    } else {
        CHECK(in->tags == be->tags0 && in->pos == be->pos0, "NFE %d: tags/pos moved", be->calls);
        CHECK(!memcmp(in->tags, be->tags_copy, n) &&
                  !memcmp(in->pos, be->pos_copy, n * 3 * sizeof(double)),
              "NFE %d: tags/pos changed between evaluations", be->calls);
    }
    CHECK(in->n_t >= 1 && in->n_t <= 3, "n_t %d", in->n_t);
    for (int i = 1; i < in->n_t; i++)
        CHECK(in->t_values[i - 1] < in->t_values[i], "t_values not ascending");
    /* one representative row per group: text and video share t_v, keyframes max(t_v, 0.999) */
    float tv = in->t_values[in->t_index[0]];
    CHECK(in->t_index[L->video_start] == in->t_index[0], "video row timestep != text row's");
    if (L->n_audio) {
        int ia = in->t_index[L->audio_start];
        CHECK(ia >= 0 && ia < in->n_t && in->t_index[L->video_start - 1] == ia,
              "audio rows' timestep index %d", ia);
    }
    if (L->n_cond)
        CHECK(in->t_values[in->t_index[L->cond_start]] == (tv > 0.999f ? tv : 0.999f),
              "keyframe timestep");
    for (size_t r = 0; r < n; r += 997) /* sparse sweep: every index in range */
        CHECK(in->t_index[r] >= 0 && in->t_index[r] < in->n_t, "row %zu index %d", r,
              in->t_index[r]);
    memset(video_v, 0, sizeof(float) * (size_t)L->n_video * be->pf);
    memset(audio_v, 0, sizeof(float) * (size_t)L->n_audio * be->ach);
    be->calls++;
    be->forward_s += vdn_now() - t0;
    return 0;
}

static void null_destroy(vdn_backend *be) {
    if (!be) return;
    free(be->tags_copy), free(be->pos_copy);
    free(be);
}

static const vdn_backend_ops null_ops = {"cuda",        null_available, null_create, null_reserve,
                                         null_set_text, null_forward,   null_destroy};

#endif
