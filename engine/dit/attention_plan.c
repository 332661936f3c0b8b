/* Which pairs the softmax branch keeps and which parts of the VDN hybrid run, per variant.
 * Shared by every backend so that they cannot disagree on the mask (spec 5.2, 5.3). */
#include <string.h>

#include "backend.h"

static const char *const mode_names[] = {"dense", "vdn", "vdn-no-anchors", "window-only",
                                         "vdn-additive"};

int vdn_attn_mode_parse(const char *name, vdn_attn_mode *mode) {
    for (int i = 0; i < (int)(sizeof mode_names / sizeof mode_names[0]); i++)
        if (strcmp(name, mode_names[i]) == 0) {
            *mode = (vdn_attn_mode)i;
            return 0;
        }
    return -1;
}

const char *vdn_attn_mode_name(vdn_attn_mode mode) {
    if ((int)mode < 0 || (int)mode >= (int)(sizeof mode_names / sizeof mode_names[0])) return "?";
    return mode_names[mode];
}

void vdn_window_bounds(const vdn_config *cfg, int t, int *lo, int *hi) {
    int c = t / cfg->chunk;
    *lo = (c - cfg->radius) * cfg->chunk;
    *hi = (c + cfg->radius + 1) * cfg->chunk - 1;
}

/* The window covers the clip when every frame's window spans [0, F-1]. */
static int window_covers_clip(const vdn_config *cfg, int frames) {
    for (int t = 0; t < frames; t++) {
        int lo, hi;
        vdn_window_bounds(cfg, t, &lo, &hi);
        if (lo > 0 || hi < frames - 1) return 0;
    }
    return 1;
}

vdn_attn_plan vdn_attn_plan_make(const vdn_config *cfg, vdn_attn_mode mode, int frames) {
    vdn_attn_plan p;
    memset(&p, 0, sizeof p);
    p.mode = mode;
    if (!cfg->has_vdn || mode == VDN_ATTN_DENSE) return p; /* stock H3 attention */
    p.softmax_gate = cfg->softmax_gate;
    if (window_covers_clip(cfg, frames)) { /* full cover: dense softmax, gate kept */
        p.bypass = 1;
        return p;
    }
    p.window = 1;
    p.anchors = (mode != VDN_ATTN_NO_ANCHORS) && cfg->anchors_both;
    p.linear = (mode != VDN_ATTN_WINDOW_ONLY);
    p.skip_ends = p.linear && p.anchors;
    p.additive = (mode == VDN_ATTN_ADDITIVE);
    return p;
}

int vdn_attn_keep(const vdn_config *cfg, const vdn_attn_plan *plan, const vdn_layout *lay, int qr,
                  int kr) {
    if (!plan->window) return 1;
    int S = lay->tokens_per_frame, F = lay->frames;
    if (qr < lay->video_start || kr < lay->video_start) return 1; /* a global row: dense */
    int fq = (qr - lay->video_start) / S, fk = (kr - lay->video_start) / S;
    if (plan->anchors && (fq == 0 || fq == F - 1 || fk == 0 || fk == F - 1)) return 1;
    int lo, hi;
    vdn_window_bounds(cfg, fq, &lo, &hi);
    return fk >= lo && fk <= hi;
}
