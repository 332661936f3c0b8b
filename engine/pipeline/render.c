/* vdn_engine_render: one request from prompt cache to PREFIX.safetensors + PREFIX.json.
 * Shared by every backend: sequence, noise, sampler loop and I/O live here (backend.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "comm.h"
#include "engine_internal.h"
#include "prompt.h"
#include "record.h"
#include "safetensors.h"
#include "sampler.h"
#include "seq.h"
#include "vdn_util.h"

/* The outputs' folder is made and checked writable before any work, so a render is never
 * computed only to be lost when its result cannot be written. */
static int prepare_out_dir(const char *prefix, char *err, size_t errlen) {
    char dir[4096];
    size_t n = strlen(prefix);
    if (n >= sizeof dir)
        return vdn_fail(err, errlen, "request: out_prefix is too long (%zu bytes)", n);
    memcpy(dir, prefix, n + 1);
    char *slash = strrchr(dir, '/');
    if (slash == dir) return 0; /* "/name": the root folder */
    if (slash) {
        *slash = 0;
        if (vdn_mkdir_p(dir, err, errlen) != 0) return -1;
    } else {
        strcpy(dir, ".");
    }
    if (access(dir, W_OK) != 0)
        return vdn_fail(err, errlen, "%s: output folder is not writable (%s)", dir,
                        strerror(errno));
    return 0;
}

/* A resume must come from a render of this very request: same steps, same latent sizes. */
static int resume_state(const vdn_render_request *req, size_t n_video, size_t n_audio, float *video,
                        float *audio, char *err, size_t errlen) {
    const vdn_render_state *r = req->resume;
    if (r->steps != req->steps || r->step < 0 || r->step >= req->steps)
        return vdn_fail(err, errlen,
                        "resume: snapshot at step %d of %d, the request has %d steps (expected "
                        "0 <= step < steps of the same request)",
                        r->step, r->steps, req->steps);
    if (r->n_video != n_video || r->n_audio != n_audio || !r->video || !r->audio)
        return vdn_fail(err, errlen,
                        "resume: snapshot holds %zu video / %zu audio latents, the request "
                        "needs %zu / %zu (a snapshot of another request?)",
                        r->n_video, r->n_audio, n_video, n_audio);
    memcpy(video, r->video, sizeof(float) * n_video);
    memcpy(audio, r->audio, sizeof(float) * n_audio);
    return 0;
}

/* After NFE `done` (never the last): every K-th NFE counted from the resume point, or once the
 * time since the last snapshot reaches snapshot_every_seconds. */
int vdn_render_snapshot_due(const vdn_render_request *req, int done, int k0, double last) {
    if (!req->snapshot || done >= req->steps) return 0;
    if (req->snapshot_every_nfe > 0 && (done - k0) % req->snapshot_every_nfe == 0) return 1;
    return req->snapshot_every_seconds > 0 && vdn_now() - last >= req->snapshot_every_seconds;
}

/* A render on engs[0], its forward sharded over all n engines when n > 1 (render_ops.c). */
static int render_on(vdn_engine *const *engs, int n, const vdn_render_request *req,
                     vdn_progress_fn progress, void *user, char *err, size_t errlen) {
    vdn_engine *eng = engs[0];
    const vdn_config *c = &eng->cfg;
    double wall_start = vdn_wall(), t_start = vdn_now();
    for (int r = 0; r < n; r++) /* vdn_engine_last_fault speaks of this render only */
        vdn_engine_clear_faults(engs[r]);
    if (!req->out_prefix || !req->out_prefix[0])
        return vdn_fail(err, errlen, "request: out_prefix is empty (expected PREFIX)");
    if (!req->prompt_cache && !req->prompt)
        return vdn_fail(err, errlen, "request: prompt_cache is missing");
    if (req->frames < 1 || req->frames > 100000)
        return vdn_fail(err, errlen, "request: frames = %d, expected a positive pixel frame count",
                        req->frames);
    if (req->height < 32 || req->width < 32 || req->height % 32 || req->width % 32 ||
        req->height > 16384 || req->width > 16384)
        return vdn_fail(err, errlen,
                        "request: height x width = %d x %d, expected multiples of 32 (>= 32)",
                        req->height, req->width);
    if (req->steps < 1 || req->steps > 1000)
        return vdn_fail(err, errlen, "request: steps = %d, expected 1..1000 model evaluations",
                        req->steps);
    if (!(req->video_shift >= 0) || !(req->audio_shift >= 0) || req->video_shift > 1e6 ||
        req->audio_shift > 1e6)
        return vdn_fail(err, errlen,
                        "request: video_shift %g / audio_shift %g, expected positive shifts (0 = "
                        "checkpoint default)",
                        req->video_shift, req->audio_shift);
    if (prepare_out_dir(req->out_prefix, err, errlen) != 0) return -1;
    vdn_attn_mode mode = c->has_vdn ? VDN_ATTN_HYBRID : VDN_ATTN_DENSE;
    if (req->variant && req->variant[0] && vdn_attn_mode_parse(req->variant, &mode) != 0)
        return vdn_fail(err, errlen,
                        "request: variant '%s' unknown, expected dense, vdn, vdn-no-anchors, "
                        "window-only or vdn-additive",
                        req->variant);
    if (mode != VDN_ATTN_DENSE && !c->has_vdn)
        return vdn_fail(err, errlen,
                        "request: variant '%s' needs a VDN checkpoint (this one has no linear "
                        "branch); use dense",
                        vdn_attn_mode_name(mode));

    char warn[4][VDN_REQ_WARN_LEN];
    const int n_warn = vdn_request_warnings(req, warn, 4);
    const char *warn_ptr[4];
    for (int i = 0; i < n_warn; i++) {
        VDN_WARN("WARNING %s", warn[i]);
        warn_ptr[i] = warn[i];
    }

    const int px = vdn_snap_frames(req->frames), F = vdn_latent_frames(req->frames);
    const int La = vdn_audio_latents(req->frames), lh = req->height / 16, lw = req->width / 16;
    const int Cv = c->in_channels, Ca = c->audio_channels;
    const char *pc_name = req->prompt_cache ? req->prompt_cache : "the request's prompt";
    vdn_prompt loaded = {0}; /* the prompt read here when the caller did not pass it */
    if (req->prompt && req->prompt->text_dim != c->text_dim)
        return vdn_fail(err, errlen, "%s: prompt rows of %d, the checkpoint takes %d", pc_name,
                        req->prompt->text_dim, c->text_dim);
    if (!req->prompt && vdn_prompt_load(req->prompt_cache, c->text_dim, &loaded, err, errlen) != 0)
        return -1;
    const vdn_prompt pr = req->prompt ? *req->prompt : loaded; /* a view: never freed */
    if (pr.n_keyframes && (pr.kf_h != lh || pr.kf_w != lw)) {
        vdn_fail(err, errlen,
                 "%s: keyframes are %d x %d latents, the request needs %d x %d (%d x %d px)",
                 pc_name, pr.kf_h, pr.kf_w, lh, lw, req->height, req->width);
        vdn_prompt_free(&loaded);
        return -1;
    }
    if (pr.n_keyframes && Cv != VDN_LATENT_CHANNELS) {
        vdn_fail(err, errlen, "%s: keyframes have %d latent channels, the checkpoint takes %d",
                 pc_name, VDN_LATENT_CHANNELS, Cv);
        vdn_prompt_free(&loaded);
        return -1;
    }
    int8_t *tags = vdn_xmalloc((size_t)pr.n_text);
    for (int i = 0; i < pr.n_text; i++)
        tags[i] = (int8_t)pr.tags[i];
    int anchors[2] = {pr.anchor_last[0] ? VDN_KF_LAST : VDN_KF_FIRST,
                      pr.anchor_last[1] ? VDN_KF_LAST : VDN_KF_FIRST};
    vdn_seq seq;
    int rc = vdn_seq_build(&seq, c, tags, pr.n_text, F, lh, lw, La, pr.n_keyframes, anchors, err,
                           errlen);
    free(tags);
    if (rc != 0) {
        vdn_prompt_free(&loaded);
        return -1;
    }
    const vdn_layout *L = &seq.lay;
    const int pf = Cv * c->patch_t * c->patch_h * c->patch_w;
    const size_t nv = (size_t)Cv * F * lh * lw, na = (size_t)2 * La * Ca;
    const size_t nkf = (size_t)pr.n_keyframes * Cv * lh * lw;
    float *video = vdn_xmalloc(sizeof(float) * nv), *audio_rows = vdn_xmalloc(sizeof(float) * na);
    float *kf_noise = vdn_xmalloc(sizeof(float) * (nkf + 1));
    /* noise: seeded stream in the official draw order (keyframes, video, audio), or a file */
    vdn_rng rng;
    vdn_rng_seed(&rng, req->seed);
    vdn_rng_normal(&rng, kf_noise, nkf);
    /* a noise file replaces video and audio noise whole (only keyframe noise falls back) */
    if (!req->noise_file) {
        vdn_rng_normal(&rng, video, nv);
        vdn_rng_normal(&rng, audio_rows, na);
    } else {
        vdn_st_file *nf = vdn_st_open(req->noise_file, err, errlen);
        if (!nf || vdn_noise_read(nf, Cv, F, lh, lw, La, Ca, pr.n_keyframes, video, audio_rows,
                                  kf_noise, NULL, err, errlen) != 0)
            rc = -1;
        vdn_st_close(nf);
    }
    float *vx = vdn_xmalloc(sizeof(float) * L->n_video * pf);
    float *cond = L->n_cond ? vdn_xmalloc(sizeof(float) * L->n_cond * pf) : NULL;
    if (L->n_cond) { /* keyframes noised to t = 0.999: x = 0.999 x0 + 0.001 eps, never stepped */
        float *tmp = vdn_xmalloc(sizeof(float) * nkf);
        for (size_t i = 0; i < nkf; i++)
            tmp[i] = 0.999f * pr.keyframes[i] + 0.001f * kf_noise[i];
        for (int k = 0; k < pr.n_keyframes; k++)
            vdn_patchify(cond + (size_t)k * L->tokens_per_frame * pf,
                         tmp + (size_t)k * Cv * lh * lw, Cv, 1, lh, lw, c->patch_h, c->patch_w);
        free(tmp);
    }
    vdn_patchify(vx, video, Cv, F, lh, lw, c->patch_h, c->patch_w);

    float vshift =
        req->video_shift > 0 ? req->video_shift : (c->video_shift > 0 ? c->video_shift : 12.0f);
    float ashift =
        req->audio_shift > 0 ? req->audio_shift : (c->audio_shift > 0 ? c->audio_shift : 3.0f);
    float *sv = vdn_xmalloc(sizeof(float) * (req->steps + 1));
    float *sa = vdn_xmalloc(sizeof(float) * (req->steps + 1));
    int nsv = vdn_sigma_grid(sv, req->steps + 1, vshift),
        nsa = vdn_sigma_grid(sa, req->steps + 1, ashift);
    if (rc == 0 && (nsv != req->steps + 1 || nsa != req->steps + 1))
        rc =
            vdn_fail(err, errlen,
                     "request: %d steps collapse the shifted sigma grid (video %d, audio %d unique "
                     "points of %d); use fewer steps",
                     req->steps, nsv, nsa, req->steps + 1);
    vdn_attn_plan plan = vdn_attn_plan_make(c, mode, F);
    double *nfe_s = vdn_xcalloc((size_t)req->steps, sizeof(double));
    int done = 0;
    const size_t n_vrows = (size_t)L->n_video * pf;
    if (rc == 0 && req->resume) rc = resume_state(req, n_vrows, na, vx, audio_rows, err, errlen);
    const int k0 = rc == 0 && req->resume ? req->resume->step : 0;
    done = k0;
    vdn_render_loop lp = {.req = req,
                          .seq = &seq,
                          .embeds = pr.embeds,
                          .video_rows = vx,
                          .audio_rows = audio_rows,
                          .cond_rows = cond,
                          .sigma_v = sv,
                          .sigma_a = sa,
                          .k0 = k0,
                          .plan = plan,
                          .nfe_s = nfe_s,
                          .done = k0,
                          .progress = progress,
                          .user = user};
    const double t_loop = vdn_now(); /* setup: prompt, sequence, noise, patchify */
    if (rc == 0)
        rc = n > 1 ? vdn_render_loop_group(engs, n, &lp, err, errlen)
                   : vdn_render_loop_ops(eng, &lp, err, errlen);
    done = lp.done;
    if (rc == 0) { /* outputs: video (24,F,H,W), audio (2,32,La) float32; then the record */
        const double t_out = vdn_now();
        float *audio = vdn_xmalloc(sizeof(float) * na);
        vdn_unpatchify(video, vx, Cv, F, lh, lw, c->patch_h, c->patch_w);
        vdn_rows_to_audio(audio, audio_rows, Ca, La);
        size_t plen = strlen(req->out_prefix) + 32;
        char *st_path = vdn_xmalloc(plen), *js_path = vdn_xmalloc(plen);
        snprintf(st_path, plen, "%s.safetensors", req->out_prefix);
        snprintf(js_path, plen, "%s.json", req->out_prefix);
        vdn_st_tensor t[2] = {{"video", VDN_DT_F32, 4, {Cv, F, lh, lw}, video},
                              {"audio", VDN_DT_F32, 3, {2, Ca, La}, audio}};
        vdn_st_kv meta[2] = {{"engine", "vdn " VDN_ENGINE_VERSION},
                             {"variant", vdn_attn_mode_name(mode)}};
        rc = vdn_st_write(st_path, t, 2, meta, 2, err, errlen);
        if (rc == 0) {
            int nad = eng->ck ? vdn_ckpt_adapter_count(eng->ck) : 0;
            const char **ad = vdn_xcalloc((size_t)nad + 1, sizeof(char *));
            for (int i = 0; i < nad; i++)
                ad[i] = vdn_ckpt_adapter_name(eng->ck, i);
            vdn_record rec = {.backend = vdn_engine_backend_name(eng),
                              .precision = vdn_precision_name(eng->precision),
                              .ckpt_identity = vdn_engine_identity(eng),
                              .ckpt_layout = eng->ck ? vdn_ckpt_layout(eng->ck) : "generated",
                              .n_adapters = nad,
                              .adapters = ad,
                              .cfg = c,
                              .req = req,
                              .pixel_frames = px,
                              .latent_frames = F,
                              .audio_latents = La,
                              .lat_h = lh,
                              .lat_w = lw,
                              .n_text = pr.n_text,
                              .n_keyframes = pr.n_keyframes,
                              .plan = &plan,
                              .noise_source = req->noise_file ? req->noise_file : "seed",
                              .video_shift = vshift,
                              .audio_shift = ashift,
                              .sigma_video = sv,
                              .sigma_audio = sa,
                              .n_sigma = req->steps + 1,
                              .nfe_seconds = nfe_s,
                              .n_nfe = done,
                              .resumed_from_step = k0,
                              .setup_seconds = t_loop - t_start,
                              .output_seconds = vdn_now() - t_out,
                              .warnings = warn_ptr,
                              .n_warnings = n_warn,
                              .total_seconds = vdn_now() - t_start,
                              .wall_start = wall_start,
                              .wall_end = vdn_wall(),
                              .output = st_path};
            rc = vdn_record_write(js_path, &rec, err, errlen);
            free(ad);
        }
        free(audio);
        free(st_path);
        free(js_path);
    }
    free(video);
    free(audio_rows);
    free(kf_noise);
    free(vx);
    free(cond);
    free(sv);
    free(sa);
    free(nfe_s);
    vdn_seq_free(&seq);
    vdn_prompt_free(&loaded);
    return rc;
}

int vdn_engine_render(vdn_engine *eng, const vdn_render_request *req, vdn_progress_fn progress,
                      void *user, char *err, size_t errlen) {
    return render_on(&eng, 1, req, progress, user, err, errlen);
}

int vdn_engine_render_group(vdn_engine *const *engs, int n, const vdn_render_request *req,
                            vdn_progress_fn progress, void *user, char *err, size_t errlen) {
    if (n < 1 || n > VDN_COMM_MAX_RANKS)
        return vdn_fail(err, errlen, "render group: %d engines, expected 1..%d", n,
                        VDN_COMM_MAX_RANKS);
    char why[VDN_ERR_LEN];
    if (n > 1 && !vdn_engine_group_check(engs, n, why, sizeof why))
        return vdn_fail(err, errlen, "a render over %d GPUs: %s", n, why);
    return render_on(engs, n, req, progress, user, err, errlen);
}
