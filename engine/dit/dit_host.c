/* The DiT over the op layer from host arrays (dit.h): upload, one evaluation (one rank's part of
 * a sharded one over a communicator), download. For the tests and benchmarks; the render loop
 * (render_ops.c) keeps everything on the device instead. */
#include <stdlib.h>

#include "comm.h"
#include "dit.h"
#include "vdn_util.h"

static vdn_tensor *upload(vdn_dev *d, const float *host, int64_t rows, int64_t cols) {
    if (rows < 1) return NULL;
    vdn_tensor *t = vdn_tensor_new2(d, VDN_DT_F32, rows, cols);
    if (t && host && vdn_tensor_set(t, host, VDN_DT_F32) != 0) {
        vdn_tensor_free(t);
        return NULL;
    }
    return t;
}

int vdn_dit_refine_text_host(const vdn_dit_weights *w, const float *embeds, int n_text, float *text,
                             char *err, size_t errlen) {
    vdn_dev *d = w->dev;
    vdn_tensor *e = upload(d, embeds, n_text, w->cfg.text_dim);
    vdn_tensor *t = e ? vdn_tensor_new2(d, vdn_dev_act_dtype(d), n_text, w->cfg.hidden) : NULL;
    int rc = t && vdn_dit_refine_text(w, e, t) == 0 && vdn_tensor_get(t, text) == 0 ? 0 : -1;
    if (rc) vdn_fail(err, errlen, "%s: %s", vdn_dev_name(d), vdn_dev_error(d));
    vdn_tensor_free(e);
    vdn_tensor_free(t);
    return rc;
}

/* upload the host rows, or an uninitialised tensor (host NULL); rows < 1: none */
static vdn_tensor *up(vdn_dev *d, const float *host, int64_t rows, int64_t cols, int *fail) {
    if (rows < 1 || *fail) return NULL;
    vdn_tensor *t = upload(d, host, rows, cols);
    if (!t) *fail = 1;
    return t;
}

/* the evaluation (and reps timed ones) over buffers made once, as a render makes them */
static int evaluate(const vdn_dit_weights *w, vdn_dit_seq *s, vdn_comm *comm,
                    const vdn_dit_opts *opts, vdn_tensor *const t[6], int reps, double *seconds) {
    vdn_dit_buffers *buf = vdn_dit_buffers_new(w, s, comm, opts);
    if (!buf) return comm ? vdn_comm_abort(comm) : -1;
    int rc = 0;
    double t0 = 0;
    for (int i = 0; i <= reps && rc == 0; i++) { /* i = 0: the one evaluation, or a warm-up */
        if (i == 1) t0 = vdn_now();
        rc = vdn_dit_forward(w, s, buf, t[0], t[1], t[2], t[3], t[4], t[5]);
        if (rc == 0) rc = vdn_dev_sync(w->dev);
    }
    if (rc == 0 && seconds && reps > 0) *seconds = (vdn_now() - t0) / reps;
    vdn_dit_buffers_free(buf);
    return rc;
}

int vdn_dit_forward_host(const vdn_dit_weights *w, vdn_comm *comm, const vdn_dit_opts *opts,
                         const float *text, const vdn_step_inputs *in, float *video_v,
                         float *audio_v, int reps, double *seconds, char *err, size_t errlen) {
    vdn_dev *d = w->dev;
    const vdn_config *c = &w->cfg;
    const vdn_layout *L = in->layout;
    const int pf = c->in_channels * c->patch_t * c->patch_h * c->patch_w;
    vdn_dit_seq s;
    int fail = vdn_dit_seq_init(&s, d, c, L, &in->plan, in->pos) != 0;
    vdn_tensor *t[6]; /* text, video_x, cond_x, audio_x, video_v, audio_v */
    t[0] = up(d, text, L->n_text, c->hidden, &fail);
    t[1] = up(d, in->video_x, L->n_video, pf, &fail);
    t[2] = up(d, in->cond_x, L->n_cond, pf, &fail);
    t[3] = up(d, in->audio_x, L->n_audio, c->audio_channels, &fail);
    t[4] = up(d, NULL, L->n_video, pf, &fail);
    t[5] = up(d, NULL, L->n_audio, c->audio_channels, &fail);
    if (!fail) fail = vdn_dit_seq_timesteps(&s, in->tags, in->t_index, in->t_values, in->n_t) != 0;
    /* every rank reaches the collectives; a rank that failed its setup fails the first one */
    int rc =
        fail ? (comm ? vdn_comm_abort(comm) : -1) : evaluate(w, &s, comm, opts, t, reps, seconds);
    if (rc == 0 && video_v) rc = vdn_tensor_get(t[4], video_v);
    if (rc == 0 && t[5] && audio_v) rc = vdn_tensor_get(t[5], audio_v);
    if (rc) vdn_fail(err, errlen, "%s: %s", vdn_dev_name(d), vdn_dev_error(d));
    for (int i = 0; i < 6; i++)
        vdn_tensor_free(t[i]);
    if (s.pos) vdn_dit_seq_free(&s);
    return rc;
}
