/* The engine struct, shared by engine.c (open/close) and render.c (render). Not public. */
#ifndef VDN_ENGINE_INTERNAL_H
#define VDN_ENGINE_INTERNAL_H

#include "backend.h"
#include "ckpt.h"
#include "config.h"
#include "dit.h"
#include "engine.h"
#include "op.h"
#include "seq.h"

struct vdn_engine {
    vdn_ckpt *ck;    /* NULL for an engine over another weight source */
    char label[128]; /* that source's name, in place of the checkpoint's identity */
    vdn_config cfg;
    vdn_dev *dev;            /* the op-layer device that renders (op.h) */
    vdn_dit_weights w;       /* the DiT's weights on it (dit.h) */
    vdn_precision precision; /* what the weights were opened in (fp8: quantised at load) */
    vdn_dit_opts dit;        /* the forward's switches for every render (vdn_engine_opts.dit) */
    /* --ranks P: the forward sharded over P virtual ranks (dit_shard.c); rank_dev[0] = dev, the
     * others more devices on the same memory (the CPU, the same GPU) sharing the weights */
    int ranks;
    vdn_dev *rank_dev[64];
    /* vdn_engine_inject_device_fault: a copy of the device's op table whose linear fails */
    struct vdn_dev_backend *faulty;
    /* the last render's per-NFE times on this engine (vdn_engine_nfe_times) */
    vdn_nfe_time *times;
    int n_times, cap_times;
};

/* What the sampling loop needs from the render's setup (render.c). Host arrays. */
typedef struct {
    const vdn_render_request *req;  /* steps, snapshot callback and cadence */
    vdn_seq *seq;                   /* layout, tags, positions; timesteps rewritten per NFE */
    const float *embeds;            /* prompt_embeds [n_text, text_dim] */
    float *video_rows;              /* [n_video, patch features] noise (or resume) in, latent out */
    float *audio_rows;              /* [n_audio, audio_channels] likewise */
    const float *cond_rows;         /* [n_cond, patch features] noised keyframes, or NULL */
    const float *sigma_v, *sigma_a; /* steps + 1 points each */
    int k0;                         /* the first NFE (a resume's step) */
    vdn_attn_plan plan;
    double *nfe_s; /* [steps] seconds per model evaluation */
    int done;      /* model evaluations done (k0 before the first) */
    vdn_progress_fn progress;
    void *user;
    /* one clip over several engines (vdn_engine_render_group): this rank's communicator, NULL
     * for a plain render. Every rank runs the same loop on its own latents (the sharded forward
     * gives each the full velocity, so they stay equal); rank 0 alone reports progress, takes
     * snapshots and reads the latents back. */
    struct vdn_comm *comm;
} vdn_render_loop;

/* Forget the devices' fault records (engine.c): vdn_engine_render calls it first. */
void vdn_engine_clear_faults(struct vdn_engine *eng);

/* The loop over the op layer (render_ops.c): latents and sampler state stay on the device. */
int vdn_render_loop_ops(struct vdn_engine *eng, vdn_render_loop *lp, char *err, size_t errlen);
/* The same loop as one rank per engine of engs (threads; rank 0 = engs[0] renders lp) over the
 * communicator vdn_engine_group_check names. */
int vdn_render_loop_group(struct vdn_engine *const *engs, int n, vdn_render_loop *lp, char *err,
                          size_t errlen);
/* Whether a snapshot is due after NFE `done` (render.c): every K-th NFE from the resume point,
 * or once snapshot_every_seconds passed since `last`; never after the last NFE. */
int vdn_render_snapshot_due(const vdn_render_request *req, int done, int k0, double last);

#endif
