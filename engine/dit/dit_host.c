/* The DiT over the op layer from host arrays (dit.h): upload, one evaluation, download. For the
 * model-level "cpu" backend (cpu_backend.c) and the tests; the render loop (render_ops.c) keeps
 * everything on the device instead. */
#include <stdlib.h>

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

int vdn_dit_forward_host(const vdn_dit_weights *w, const float *text, const vdn_step_inputs *in,
                         float *video_v, float *audio_v, char *err, size_t errlen) {
    vdn_dev *d = w->dev;
    const vdn_config *c = &w->cfg;
    const vdn_layout *L = in->layout;
    const int pf = c->in_channels * c->patch_t * c->patch_h * c->patch_w;
    vdn_dit_seq s;
    if (vdn_dit_seq_init(&s, d, c, L, &in->plan, in->pos) != 0)
        return vdn_fail(err, errlen, "%s: %s", vdn_dev_name(d), vdn_dev_error(d));
    vdn_tensor *tt = vdn_tensor_new2(d, VDN_DT_F32, L->n_text, c->hidden);
    vdn_tensor *vx = upload(d, in->video_x, L->n_video, pf);
    vdn_tensor *cx = L->n_cond ? upload(d, in->cond_x, L->n_cond, pf) : NULL;
    vdn_tensor *ax = upload(d, in->audio_x, L->n_audio, c->audio_channels);
    vdn_tensor *vv = upload(d, NULL, L->n_video, pf);
    vdn_tensor *av = upload(d, NULL, L->n_audio, c->audio_channels);
    int rc = tt && vx && (cx || !L->n_cond) && (ax || !L->n_audio) && vv && (av || !L->n_audio) &&
                     vdn_tensor_set(tt, text, VDN_DT_F32) == 0 &&
                     vdn_dit_seq_timesteps(&s, in->tags, in->t_index, in->t_values, in->n_t) == 0 &&
                     vdn_dit_forward(w, &s, NULL, tt, vx, cx, ax, vv, av) == 0 &&
                     vdn_tensor_get(vv, video_v) == 0 && (!av || vdn_tensor_get(av, audio_v) == 0)
                 ? 0
                 : -1;
    if (rc) vdn_fail(err, errlen, "%s: %s", vdn_dev_name(d), vdn_dev_error(d));
    vdn_tensor *all[] = {tt, vx, cx, ax, vv, av};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        vdn_tensor_free(all[i]);
    vdn_dit_seq_free(&s);
    return rc;
}
