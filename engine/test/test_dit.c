/* Invariants of the DiT over the op layer (dit.h) on the CPU backend, every attention variant,
 * text-to-video+audio and first/last-keyframe layouts, the F <= 10 bypass: the softmax mask of
 * vdn_dit_seq equals vdn_attn_keep on every pair; the render loop's way (buffers and sequence
 * reused across NFEs, only changed indices sent) gives the bits of a fresh evaluation from host
 * arrays; 1 and 2 threads agree bit for bit; dense and window-only ignore the VDN-only weights.
 * The values themselves are checked by engine_model (float64 reference), engine_forward_numpy
 * (numpy, every variant) and engine_vs_official_reference (the public PyTorch code). */
#include <math.h>
#include <string.h>

#include "check.h"
#include "dit.h"
#include "op_backend.h" /* the mask's host form */
#include "ops.h"
#include "seq.h"
#include "tiny_model.h"
#include "tiny_source.h"
#include "tiny_forward.h"

static vdn_dev *D;

static double max_rel(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return num / (den > 0 ? den : 1);
}

static vdn_tensor *up(const float *host, int64_t rows, int64_t cols) {
    vdn_tensor *t = vdn_tensor_new2(D, VDN_DT_F32, rows, cols);
    VDN_ASSERT(t && vdn_tensor_set(t, host, VDN_DT_F32) == 0);
    return t;
}

/* the mask the DiT builds equals the rule every backend follows (attention_plan.c) */
static void check_mask(const vdn_config *c, const vdn_dit_seq *s) {
    const vdn_layout *L = &s->lay;
    const vdn_attn_mask *m = s->mask;
    int bad = 0;
    for (int q = 0; q < L->n_rows; q++)
        for (int k = 0; k < L->n_rows; k++) {
            int vis = m->kind == VDN_MASK_DENSE ? 1
                                                : (k < m->head_end || k >= m->tail_start ||
                                                   (k >= m->lo[q] && k < m->hi[q]));
            bad += vis != vdn_attn_keep(c, &s->plan, L, q, k);
        }
    CHECK(bad == 0, "mask differs from vdn_attn_keep on %d pairs (%s)", bad,
          vdn_attn_mode_name(s->plan.mode));
}

/* one layout: every variant, the loop's way against the host path */
static void run_layout(const vdn_config *c, const vdn_weights *hw, const vdn_dit_weights *w, int F,
                       int n_kf) {
    const int L = 5, lh = 4, lw = 6, La = 7, anchors[2] = {VDN_KF_FIRST, VDN_KF_LAST};
    int8_t tags[5] = {1, 0, 0, 1, 1};
    vdn_seq s;
    char err[VDN_ERR_LEN];
    CHECK(vdn_seq_build(&s, c, tags, L, F, lh, lw, La, n_kf, anchors, err, sizeof err) == 0, "%s",
          err);
    const vdn_layout *lay = &s.lay;
    const int pf = 12, nv = lay->n_video * pf, na = lay->n_audio * 4, nc = lay->n_cond * pf;
    float *emb = rnd_arr((size_t)L * c->text_dim, 1), *vx = rnd_arr(nv, 1), *ax = rnd_arr(na, 1);
    float *cx = rnd_arr(nc + 1, 1), *text = vdn_xmalloc(sizeof(float) * L * c->hidden);
    tiny_refine_text(text, emb, L, hw, c);
    vdn_tensor *ttext = up(text, L, c->hidden), *tvx = up(vx, lay->n_video, pf);
    vdn_tensor *tax = up(ax, lay->n_audio, 4), *tcx = n_kf ? up(cx, lay->n_cond, pf) : NULL;
    vdn_tensor *vv = vdn_tensor_new2(D, VDN_DT_F32, lay->n_video, pf);
    vdn_tensor *av = vdn_tensor_new2(D, VDN_DT_F32, lay->n_audio, 4);
    float *ref_v = vdn_xmalloc(sizeof(float) * nv), *ref_a = vdn_xmalloc(sizeof(float) * na);
    float *got_v = vdn_xmalloc(sizeof(float) * nv), *got_a = vdn_xmalloc(sizeof(float) * na);
    float *dense_v = vdn_xmalloc(sizeof(float) * nv);
    const float steps[3][2] = {{0.3f, 0.55f}, {0.3f, 0.3f}, {0.8f, 0.1f}}; /* t_v, t_a */
    for (int m = 0; m < 5; m++) {
        vdn_attn_plan plan = vdn_attn_plan_make(c, (vdn_attn_mode)m, F);
        vdn_dit_seq ds;
        CHECK(vdn_dit_seq_init(&ds, D, c, lay, &plan, s.pos) == 0, "%s", vdn_dev_error(D));
        check_mask(c, &ds);
        vdn_dit_buffers *buf = vdn_dit_buffers_new(w, &ds, NULL, NULL);
        CHECK(buf != NULL, "%s", vdn_dev_error(D));
        for (int k = 0; k < 3; k++) { /* NFEs: indices change, collapse (t_v = t_a), change */
            vdn_seq_timesteps(&s, steps[k][0], steps[k][1]);
            CHECK(vdn_dit_seq_timesteps(&ds, s.tags, s.t_index, s.t_values, s.n_t) == 0, "%s",
                  vdn_dev_error(D));
            CHECK(vdn_dit_forward(w, &ds, buf, ttext, tvx, tcx, tax, vv, av) == 0, "%s",
                  vdn_dev_error(D));
            vdn_tensor_get(vv, got_v), vdn_tensor_get(av, got_a);
            vdn_step_inputs in = {lay,   vx,        n_kf ? cx : NULL, ax,    s.tags,
                                  s.pos, s.t_index, s.t_values,       s.n_t, plan};
            CHECK(vdn_dit_forward_host(w, NULL, NULL, text, &in, ref_v, ref_a, 0, NULL, err,
                                       sizeof err) == 0,
                  "%s", err);
            CHECK(memcmp(got_v, ref_v, sizeof(float) * nv) == 0 &&
                      memcmp(got_a, ref_a, sizeof(float) * na) == 0,
                  "%s F %d NFE %d: the loop's evaluation differs from a fresh one (%.3g)",
                  vdn_attn_mode_name((vdn_attn_mode)m), F, k, max_rel(got_v, ref_v, nv));
        }
        /* threads: same bits */
        vdn_ops_set_threads(1);
        CHECK(vdn_dit_forward(w, &ds, buf, ttext, tvx, tcx, tax, vv, av) == 0);
        vdn_ops_set_threads(2);
        vdn_tensor_get(vv, got_v);
        CHECK(memcmp(got_v, ref_v, sizeof(float) * nv) == 0, "1 thread differs from 2 (%s)",
              vdn_attn_mode_name((vdn_attn_mode)m));
        if (m == VDN_ATTN_DENSE) memcpy(dense_v, got_v, sizeof(float) * nv);
        int same_as_dense = memcmp(got_v, dense_v, sizeof(float) * nv) == 0;
        int expect_same = m == VDN_ATTN_DENSE || !c->has_vdn;
        CHECK(same_as_dense == expect_same, "%s F %d: %s dense",
              vdn_attn_mode_name((vdn_attn_mode)m), F, same_as_dense ? "equals" : "differs from");
        printf("F %2d keyframes %d %-15s ok%s\n", F, n_kf, vdn_attn_mode_name((vdn_attn_mode)m),
               plan.bypass ? " (bypass)" : "");
        vdn_dit_buffers_free(buf);
        vdn_dit_seq_free(&ds);
    }
    vdn_tensor *all[] = {ttext, tvx, tax, tcx, vv, av};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        vdn_tensor_free(all[i]);
    free(emb), free(vx), free(ax), free(cx), free(text), free(dense_v);
    free(ref_v), free(ref_a), free(got_v), free(got_a);
    vdn_seq_free(&s);
}

int main(void) {
    char err[VDN_ERR_LEN];
    D = vdn_dev_open("cpu", 0, 2, err, sizeof err);
    CHECK(D != NULL, "%s", err);
    for (int has_vdn = 0; has_vdn < 2; has_vdn++) {
        vdn_config c = tiny_config(has_vdn);
        c.layers = 2;
        vdn_weights hw;
        random_weights(&hw, &c);
        tiny_source src;
        tiny_source_make(&src, &hw, &c);
        vdn_weight_source ws = tiny_weight_source(&src);
        vdn_dit_weights w;
        CHECK(vdn_dit_weights_load(&w, D, &c, &ws, err, sizeof err) == 0, "%s", err);
        run_layout(&c, &hw, &w, 13, 0);
        run_layout(&c, &hw, &w, 13, 2);
        if (has_vdn) run_layout(&c, &hw, &w, 6, 0); /* bypass */
        vdn_dit_weights_free(&w);
        /* a missing tensor is named */
        src.e[3].p = NULL;
        CHECK(vdn_dit_weights_load(&w, D, &c, &ws, err, sizeof err) == -1 &&
                  strstr(err, "no tensor audio_proj_in.bias"),
              "%s", err);
    }
    size_t in_use;
    vdn_dev_memory(D, &in_use, NULL); /* (the tiny_forward device is another one) */
    CHECK(in_use == 0, "%zu bytes still allocated on the device", in_use);
    vdn_dev_close(D);
    return test_done("test_dit");
}
