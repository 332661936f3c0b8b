/* The DiT's per-render inputs on the device (dit.h): RoPE positions, the softmax branch's mask
 * and the VDA windows once per render; per NFE only the per-row timestep indices that changed
 * and the few unique timestep values. */
#include <stdlib.h>
#include <string.h>

#include "attn_tiles.h"
#include "dit.h"
#include "vdn_util.h"

static int fail_dev(vdn_dit_seq *s, vdn_dev *d) {
    (void)d;
    vdn_dit_seq_free(s);
    return -1;
}

int vdn_dit_seq_init(vdn_dit_seq *s, vdn_dev *d, const vdn_config *c, const vdn_layout *lay,
                     const vdn_attn_plan *plan, const double *pos) {
    memset(s, 0, sizeof *s);
    s->lay = *lay;
    s->plan = *plan;
    const int n = lay->n_rows;
    s->pos = vdn_tensor_new2(d, VDN_DT_F64, n, 3);
    s->ada_idx = vdn_tensor_new2(d, VDN_DT_I32, 1, n);
    s->t_idx = vdn_tensor_new2(d, VDN_DT_I32, 1, n);
    s->t_values = vdn_tensor_new2(d, VDN_DT_F32, 1, 4);
    if (!s->pos || !s->ada_idx || !s->t_idx || !s->t_values) return fail_dev(s, d);
    if (vdn_tensor_set(s->pos, pos, VDN_DT_F64) != 0) return fail_dev(s, d);
    s->h_ada = vdn_xmalloc(sizeof(int) * (size_t)n);
    s->h_tidx = vdn_xmalloc(sizeof(int) * (size_t)n);
    for (int r = 0; r < n; r++)
        s->h_ada[r] = s->h_tidx[r] = -1; /* nothing sent yet */
    /* the mask of the softmax branch (attn_tiles.h): globals, anchors, chunk windows */
    vdn_attn_rows ar;
    if (vdn_attn_rows_make(&ar, lay->video_start, lay->frames, lay->tokens_per_frame, plan->window,
                           plan->anchors, c->chunk > 0 ? c->chunk : 1, c->radius) != 0 ||
        ar.rows != n) {
        vdn_attn_rows_free(&ar);
        vdn_dev_fail(d, "dit: the attention rows of a %d-row layout could not be made", n);
        return fail_dev(s, d);
    }
    s->mask = plan->window ? vdn_attn_mask_rows(d, n, ar.head_end, ar.tail_start, ar.lo, ar.hi)
                           : vdn_attn_mask_dense(d, n, n);
    vdn_attn_rows_free(&ar);
    if (!s->mask) return fail_dev(s, d);
    /* the VDA windows of the branch's frames, rebased when the anchors are skipped */
    const int f0 = plan->skip_ends ? 1 : 0, Fp = lay->frames - 2 * f0;
    if (plan->linear && Fp > 0) {
        int32_t *win = vdn_xmalloc(sizeof(int32_t) * 2 * (size_t)Fp);
        for (int t = 0; t < Fp; t++) {
            int lo, hi;
            vdn_window_bounds(c, t + f0, &lo, &hi);
            win[2 * t] = lo - f0, win[2 * t + 1] = hi - f0;
        }
        s->vda_win = vdn_tensor_new2(d, VDN_DT_I32, Fp, 2);
        int rc = s->vda_win ? vdn_tensor_set(s->vda_win, win, VDN_DT_I32) : -1;
        free(win);
        if (rc != 0) return fail_dev(s, d);
    }
    return 0;
}

/* send rows [r0, r1) of host idx when they differ from what the device holds */
static int send_changed(vdn_tensor *t, int *held, const int *want, int n) {
    for (int r = 0; r < n;) {
        if (held[r] == want[r]) {
            r++;
            continue;
        }
        int e = r;
        while (e < n && held[e] != want[e])
            e++;
        vdn_tensor v = vdn_view_cols(t, r, e - r);
        if (vdn_tensor_set(&v, want + r, VDN_DT_I32) != 0) return -1;
        memcpy(held + r, want + r, sizeof(int) * (size_t)(e - r));
        r = e;
    }
    return 0;
}

int vdn_dit_seq_timesteps(vdn_dit_seq *s, const int8_t *tags, const int *t_index,
                          const float *t_values, int n_t) {
    const int n = s->lay.n_rows;
    vdn_dev *d = s->pos->dev;
    if (n_t < 1 || n_t > 4)
        return vdn_dev_fail(d, "dit: %d distinct timesteps, expected 1..4", n_t);
    int *ada = vdn_xmalloc(sizeof(int) * (size_t)n);
    for (int r = 0; r < n; r++) {
        if (t_index[r] < 0 || t_index[r] >= n_t || tags[r] > 2) {
            free(ada);
            return vdn_dev_fail(d, "forward: row %d has timestep index %d (of %d) tag %d", r,
                                t_index[r], n_t, tags[r]);
        }
        ada[r] = t_index[r] * 3 + (tags[r] < 0 ? 0 : tags[r]);
    }
    int rc = send_changed(s->ada_idx, s->h_ada, ada, n);
    free(ada);
    if (rc == 0) rc = send_changed(s->t_idx, s->h_tidx, t_index, n);
    if (rc != 0) return -1;
    s->n_t = n_t;
    vdn_tensor tv = vdn_view_cols(s->t_values, 0, n_t);
    return vdn_tensor_set(&tv, t_values, VDN_DT_F32);
}

void vdn_dit_seq_free(vdn_dit_seq *s) {
    vdn_tensor_free(s->pos);
    vdn_tensor_free(s->ada_idx);
    vdn_tensor_free(s->t_idx);
    vdn_tensor_free(s->t_values);
    vdn_attn_mask_free(s->mask);
    vdn_tensor_free(s->vda_win);
    free(s->h_ada);
    free(s->h_tidx);
    memset(s, 0, sizeof *s);
}
