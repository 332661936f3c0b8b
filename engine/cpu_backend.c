/* The model-level "cpu" backend (backend.h) over the DiT on the CPU op layer (dit.h): the oracle
 * that engine/test/backend_compare and the CUDA backend's test compare the model-level CUDA
 * backend with, computing exactly what `vdn render` computes on the CPU. Goes with backend.h
 * once the CUDA render runs over its op table. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "dit.h"
#include "vdn_util.h"

struct vdn_backend {
    vdn_dev *dev;
    vdn_dit_weights w;
    float *text; /* refined text rows (n_text, hidden) */
    int n_text;
};

static int cpu_available(char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    return 1;
}

static void cpu_destroy(vdn_backend *be) {
    if (!be) return;
    if (be->dev) {
        vdn_dit_weights_free(&be->w);
        vdn_dev_close(be->dev);
    }
    free(be->text);
    free(be);
}

static vdn_backend *cpu_create(vdn_ckpt *ck, const vdn_config *cfg, int threads, char *err,
                               size_t errlen) {
    vdn_backend *be = vdn_xcalloc(1, sizeof *be);
    be->dev = vdn_dev_open("cpu", 0, threads > 0 ? threads : 2, err, errlen);
    vdn_weight_source src = vdn_weight_source_ckpt(ck);
    if (!be->dev || vdn_dit_weights_load(&be->w, be->dev, cfg, &src, err, errlen) != 0) {
        if (be->dev) vdn_dev_close(be->dev);
        be->dev = NULL;
        cpu_destroy(be);
        return NULL;
    }
    return be;
}

static int cpu_reserve(vdn_backend *be, const vdn_layout *lay, char *err, size_t errlen) {
    (void)be;
    if (lay->n_rows != lay->n_text + lay->n_cond + lay->n_audio + lay->n_video ||
        lay->n_video != lay->frames * lay->tokens_per_frame)
        return vdn_fail(err, errlen, "cpu backend: inconsistent layout (%d rows)", lay->n_rows);
    return 0;
}

static int cpu_set_text(vdn_backend *be, const float *embeds, int n_text, char *err,
                        size_t errlen) {
    if (n_text < 1) return vdn_fail(err, errlen, "cpu backend: empty prompt");
    free(be->text);
    be->text = vdn_xmalloc(sizeof(float) * (size_t)n_text * be->w.cfg.hidden);
    be->n_text = n_text;
    return vdn_dit_refine_text_host(&be->w, embeds, n_text, be->text, err, errlen);
}

static int cpu_forward(vdn_backend *be, const vdn_step_inputs *in, float *video_v, float *audio_v,
                       char *err, size_t errlen) {
    if (!be->text || be->n_text != in->layout->n_text)
        return vdn_fail(err, errlen, "cpu backend: set_text not called for this layout");
    return vdn_dit_forward_host(&be->w, be->text, in, video_v, audio_v, err, errlen);
}

static const vdn_backend_ops cpu_ops = {"cpu",        cpu_available, cpu_create, cpu_reserve,
                                        cpu_set_text, cpu_forward,   cpu_destroy};

const vdn_backend_ops *vdn_cpu_backend_ops(void) {
    return &cpu_ops;
}
