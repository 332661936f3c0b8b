/* Renders a report from synthetic results (no engine needed): 3 variants x 14 prompts, a paired
 * metric with a clear effect, one with none, a reference metric, one output that failed, a
 * frame strip. check_report.py then re-derives every statistic in report.json with scipy and
 * check_chromium.sh renders the page. Usage: make_report OUT_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "png_write.h"
#include "results.h"
#include "vdn_util.h"

static double noise(uint64_t *s) { /* uniform(-0.5, 0.5), a fixed LCG: reproducible */
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) * 0x1p-53 - 0.5;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char err[VDN_ERR_LEN];
    vdn_results r;
    const int np = 14, nv = 3;
    vdn_results_init(&r, np, nv, 0);
    const char *vn[] = {"dense@50", "vdn@8", "window-only@8"};
    for (int v = 0; v < nv; v++)
        r.variants[v] = vdn_xstrdup(vn[v]);
    r.baseline = 0;
    r.title = vdn_xstrdup("synthetic <report> & test");
    r.store_uri = vdn_xstrdup("file:///tmp/store");
    char id[32];
    for (int p = 0; p < np; p++) {
        snprintf(id, sizeof id, "p%03d", p + 1);
        r.prompt_ids[p] = vdn_xstrdup(id);
        r.prompt_modes[p] = vdn_xstrdup(p % 3 ? "t2va" : "fl2va");
        r.prompt_texts[p] = vdn_xstrdup("a prompt");
    }
    int m_q = vdn_results_add_metric(&r, "quality", "Quality", "", 1, VDN_METRIC_PAIRED);
    int m_flat = vdn_results_add_metric(&r, "motion", "Mean flow", "px", 0, VDN_METRIC_PAIRED);
    int m_fid = vdn_results_add_metric(&r, "fidelity_rel_l2", "Rel. L2 to dense", "", -1,
                                       VDN_METRIC_REFERENCE);
    uint64_t s = 99;
    for (int p = 0; p < np; p++) {
        double base = 50 + 10 * noise(&s);
        *vdn_results_at(&r, m_q, 0, p) = base;
        *vdn_results_at(&r, m_q, 1, p) = base - 2.0 + 0.5 * noise(&s); /* clearly worse */
        *vdn_results_at(&r, m_q, 2, p) = base + noise(&s);             /* no effect */
        for (int v = 0; v < nv; v++)
            *vdn_results_at(&r, m_flat, v, p) = 1 + 0.1 * noise(&s);
        *vdn_results_at(&r, m_fid, 1, p) = 0.1 + 0.02 * noise(&s);
        *vdn_results_at(&r, m_fid, 2, p) = 0.3 + 0.05 * noise(&s);
        for (int v = 0; v < nv; v++) {
            r.s_per_nfe[(size_t)v * np + p] = v == 0 ? 2.0 : 0.7;
            r.seconds_total[(size_t)v * np + p] = v == 0 ? 100.0 : 6.0;
            if (v > 0) {
                size_t i = (size_t)v * np + p;
                r.frame_count[i] = 7;
                r.frame_rel_l2[i] = vdn_xmalloc(7 * sizeof(double));
                for (int f = 0; f < 7; f++)
                    r.frame_rel_l2[i][f] = 0.05 * v * (1 + f) + 0.01 * noise(&s);
                r.frame_psnr[i] = vdn_xmalloc(7 * sizeof(double));
                for (int f = 0; f < 7; f++)
                    r.frame_psnr[i][f] = 40 - 3 * v - f + noise(&s);
            }
        }
    }
    /* one failed output: no values, an error */
    for (int m = 0; m < r.n_metrics; m++)
        *vdn_results_at(&r, m, 2, 5) = NAN;
    vdn_results_set_error(&r, 2, 5,
                          "store: key eval/x/p006/window-only@8/out.safetensors: not found");
    /* a strip: 3 frames of 16x16 tiles per variant, a gradient that differs per variant */
    r.n_strips = 1;
    r.strips = vdn_xcalloc(1, sizeof *r.strips);
    vdn_strip *st = &r.strips[0];
    st->prompt = 0;
    st->frames = 3;
    st->tile_w = st->tile_h = 16;
    st->rgb = vdn_xcalloc(nv, sizeof *st->rgb);
    int w = 48, h = 16;
    for (int v = 0; v < nv; v++) {
        st->rgb[v] = vdn_xmalloc((size_t)w * h * 3);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                uint8_t *px = st->rgb[v] + ((size_t)y * w + x) * 3;
                px[0] = (uint8_t)(x * 5);
                px[1] = (uint8_t)(y * 15);
                px[2] = (uint8_t)(80 * v);
            }
    }
    if (vdn_report_write(&r, argv[1], err, sizeof err)) {
        fprintf(stderr, "report: %s\n", err);
        return 1;
    }
    /* the PNG writer on its own, for an independent decode (cv2) */
    char path[4096];
    snprintf(path, sizeof path, "%s/strip.png", argv[1]);
    if (vdn_png_write_file(path, st->rgb[1], w, h, err, sizeof err)) {
        fprintf(stderr, "png: %s\n", err);
        return 1;
    }
    snprintf(path, sizeof path, "%s/strip.rgb", argv[1]);
    if (vdn_write_file_atomic(path, st->rgb[1], (size_t)w * h * 3, err, sizeof err)) return 1;
    vdn_results_free(&r);
    printf("report written to %s\n", argv[1]);
    return 0;
}
