/* Compare the DiT over the op layer on one device (default "cuda") with the CPU device, the
 * oracle, on one checkpoint: every attention variant, t2va and (when the prompt has keyframes)
 * fl2va sequences, two timesteps, relative RMS error of the video and audio velocities. Exit 77
 * (ctest skip) when the backend is not linked in or not available here (no GPU).
 *
 *   backend_compare CKPT_DIR PROMPT [PROMPT...] [--backend NAME] [--tol X]
 *
 * Prompt caches from `vdn ckpt init` carry height/width for keyframes; t2va prompts render at
 * 64 x 96 pixels. 56 pixel frames = 17 latent frames, so the linear branch runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backends.h"
#include "dit.h"
#include "op_backend.h"
#include "ckpt.h"
#include "engine.h"
#include "prompt.h"
#include "sampler.h"
#include "seq.h"
#include "vdn_util.h"

static double rel(const float *ref, const float *out, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)ref[i] - out[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

int main(int argc, char **argv) {
    vdn_backends_register(); /* "cuda" where this build has it */
    const char *name = "cuda", *ckdir = NULL, *prompts[8];
    int np = 0;
    double tol = 2e-2; /* bf16 activations against the float64-accumulating oracle */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            name = argv[++i];
        else if (!strcmp(argv[i], "--tol") && i + 1 < argc)
            tol = atof(argv[++i]);
        else if (!ckdir)
            ckdir = argv[i];
        else if (np < 8)
            prompts[np++] = argv[i];
    }
    if (!ckdir || np == 0) {
        fprintf(stderr, "usage: backend_compare CKPT_DIR PROMPT... [--backend NAME] [--tol X]\n");
        return 2;
    }
    char err[VDN_ERR_LEN] = "";
    const vdn_dev_backend *test = vdn_dev_backend_find(name);
    if (!test) {
        printf("skip: backend '%s' is not linked into this binary\n", name);
        return 77;
    }
    if (test->available && !test->available(err, sizeof err)) {
        printf("skip: backend '%s' not available here: %s\n", name, err);
        return 77;
    }
    vdn_ckpt *ck = vdn_ckpt_open(ckdir, NULL, 0, NULL, err, sizeof err);
    if (!ck) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const vdn_config *c = vdn_ckpt_config(ck);
    vdn_dev *dr = vdn_dev_open("cpu", 0, 2, err, sizeof err);
    vdn_dev *dt = dr ? vdn_dev_open(name, 0, 2, err, sizeof err) : NULL;
    vdn_weight_source src = vdn_weight_source_ckpt(ck);
    vdn_dit_weights wr, wt;
    if (!dt || vdn_dit_weights_load(&wr, dr, c, &src, err, sizeof err) != 0 ||
        vdn_dit_weights_load(&wt, dt, c, &src, err, sizeof err) != 0) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    int fails = 0;
    for (int p = 0; p < np; p++) {
        vdn_prompt pr;
        if (vdn_prompt_load(prompts[p], c->text_dim, &pr, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        int lh = pr.n_keyframes ? pr.kf_h : 4, lw = pr.n_keyframes ? pr.kf_w : 6, F = 17, La = 93;
        int8_t *tags = vdn_xmalloc(pr.n_text);
        for (int i = 0; i < pr.n_text; i++)
            tags[i] = (int8_t)pr.tags[i];
        int anchors[2] = {pr.anchor_last[0], pr.anchor_last[1]};
        vdn_seq s;
        if (vdn_seq_build(&s, c, tags, pr.n_text, F, lh, lw, La, pr.n_keyframes, anchors, err,
                          sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        const vdn_layout *L = &s.lay;
        int pf = c->in_channels * c->patch_h * c->patch_w, ac = c->audio_channels;
        float *vx = vdn_xmalloc(sizeof(float) * L->n_video * pf);
        float *ax = vdn_xmalloc(sizeof(float) * L->n_audio * ac);
        float *cx = vdn_xmalloc(sizeof(float) * (L->n_cond + 1) * pf);
        vdn_rng rng;
        vdn_rng_seed(&rng, 1234 + p);
        vdn_rng_normal(&rng, vx, (size_t)L->n_video * pf);
        vdn_rng_normal(&rng, ax, (size_t)L->n_audio * ac);
        vdn_rng_normal(&rng, cx, (size_t)L->n_cond * pf);
        float *rv = vdn_xmalloc(sizeof(float) * L->n_video * pf),
              *ra = vdn_xmalloc(sizeof(float) * L->n_audio * ac);
        float *tv = vdn_xmalloc(sizeof(float) * L->n_video * pf),
              *ta = vdn_xmalloc(sizeof(float) * L->n_audio * ac);
        float *text_r = vdn_xmalloc(sizeof(float) * pr.n_text * c->hidden);
        float *text_t = vdn_xmalloc(sizeof(float) * pr.n_text * c->hidden);
        if (vdn_dit_refine_text_host(&wr, pr.embeds, pr.n_text, text_r, err, sizeof err) ||
            vdn_dit_refine_text_host(&wt, pr.embeds, pr.n_text, text_t, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        const float steps[2][2] = {{0.0f, 0.0f}, {0.63f, 0.41f}};
        for (int m = 0; m < 5; m++) {
            vdn_attn_mode mode = (vdn_attn_mode)m;
            if (mode != VDN_ATTN_DENSE && !c->has_vdn) continue;
            for (int k = 0; k < 2; k++) {
                vdn_seq_timesteps(&s, steps[k][0], steps[k][1]);
                vdn_step_inputs in = {
                    L,          vx,    L->n_cond ? cx : NULL,         ax, s.tags, s.pos, s.t_index,
                    s.t_values, s.n_t, vdn_attn_plan_make(c, mode, F)};
                if (vdn_dit_forward_host(&wr, NULL, NULL, text_r, &in, rv, ra, 0, NULL, err,
                                         sizeof err) ||
                    vdn_dit_forward_host(&wt, NULL, NULL, text_t, &in, tv, ta, 0, NULL, err,
                                         sizeof err)) {
                    fprintf(stderr, "forward: %s\n", err);
                    return 1;
                }
                double ev = rel(rv, tv, (size_t)L->n_video * pf),
                       ea = rel(ra, ta, (size_t)L->n_audio * ac);
                int ok = ev <= tol && ea <= tol && isfinite(ev) && isfinite(ea);
                fails += !ok;
                printf("%-28s %-15s t_v %.2f: video %.2e audio %.2e %s\n", prompts[p],
                       vdn_attn_mode_name(mode), steps[k][0], ev, ea, ok ? "ok" : "FAIL");
            }
        }
        free(vx), free(ax), free(cx), free(rv), free(ra), free(tv), free(ta), free(tags);
        free(text_r), free(text_t);
        vdn_seq_free(&s);
        vdn_prompt_free(&pr);
    }
    vdn_dit_weights_free(&wt);
    vdn_dit_weights_free(&wr);
    vdn_dev_close(dt);
    vdn_dev_close(dr);
    vdn_ckpt_close(ck);
    printf("backend_compare %s vs cpu: %s\n", name, fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
