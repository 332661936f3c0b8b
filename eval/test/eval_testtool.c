/* Exposes eval's numerical functions to the Python reference checks (scipy, scikit-image,
 * numpy): each subcommand reads raw inputs, computes with our C code, and prints or writes the
 * results; the Python side computes the same quantities independently and compares. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "stats.h"
#include "vdn_util.h"

static void jnum(const char *name, double v, int last) {
    if (isnan(v))
        printf("\"%s\": null%s", name, last ? "" : ", ");
    else if (isinf(v))
        printf("\"%s\": \"%sinf\"%s", name, v > 0 ? "" : "-", last ? "" : ", ");
    else
        printf("\"%s\": %.17g%s", name, v, last ? "" : ", ");
}

/* stdin: repeated cases "n a_1..a_n b_1..b_n"; stdout: one JSON object per case. */
static int cmd_stats(void) {
    size_t n;
    while (scanf("%zu", &n) == 1) {
        double *a = vdn_xmalloc((n + 1) * sizeof *a), *b = vdn_xmalloc((n + 1) * sizeof *b);
        for (size_t i = 0; i < n; i++)
            if (scanf("%lf", &a[i]) != 1) return 1;
        for (size_t i = 0; i < n; i++)
            if (scanf("%lf", &b[i]) != 1) return 1;
        vdn_paired p = vdn_paired_compare(a, b, n, 0.05, 20000, 1234);
        printf("{");
        jnum("mean_diff", p.mean_diff, 0);
        jnum("t", p.ttest.t, 0);
        jnum("t_p", p.ttest.p, 0);
        jnum("w_stat", p.wilcoxon.statistic, 0);
        jnum("w_p", p.wilcoxon.p, 0);
        jnum("w_z", p.wilcoxon.z, 0);
        printf("\"w_exact\": %d, ", p.wilcoxon.exact);
        jnum("ci_lo", p.ci.lo, 0);
        jnum("ci_hi", p.ci.hi, 0);
        printf("\"significant\": %d}\n", p.significant);
        free(a);
        free(b);
    }
    return 0;
}

/* stdin: "a b x" triples (betainc) or "t df" pairs with --tcdf. */
static int cmd_special(int tcdf) {
    double a, b, x;
    if (tcdf) {
        while (scanf("%lf %lf", &a, &b) == 2)
            printf("%.17g\n", vdn_t_cdf(a, b));
    } else {
        while (scanf("%lf %lf %lf", &a, &b, &x) == 3)
            printf("%.17g\n", vdn_betainc(a, b, x));
    }
    return 0;
}

static double *read_doubles(FILE *f, size_t n) {
    double *v = vdn_xmalloc(n * sizeof *v);
    if (fread(v, sizeof *v, n, f) != n) {
        fprintf(stderr, "short read\n");
        exit(1);
    }
    return v;
}

/* file: int32 h, w, then ref and test as float64 (h*w each). Prints PSNR and SSIM. */
static int cmd_image(const char *path, double range) {
    FILE *f = fopen(path, "rb");
    int32_t hw[2];
    if (!f || fread(hw, 4, 2, f) != 2) return 1;
    size_t n = (size_t)hw[0] * hw[1];
    double *a = read_doubles(f, n), *b = read_doubles(f, n);
    fclose(f);
    printf("{");
    jnum("psnr", vdn_psnr(a, b, n, range), 0);
    jnum("ssim", vdn_ssim(a, b, hw[0], hw[1], range), 1);
    printf("}\n");
    free(a);
    free(b);
    return 0;
}

/* file: int32 h, w, ref, moving (float64); writes flow (2,h,w) float64 to out. */
static int cmd_flow(const char *path, const char *out) {
    FILE *f = fopen(path, "rb");
    int32_t hw[2];
    if (!f || fread(hw, 4, 2, f) != 2) return 1;
    size_t n = (size_t)hw[0] * hw[1];
    double *a = read_doubles(f, n), *b = read_doubles(f, n), *flow = vdn_xmalloc(2 * n * 8);
    fclose(f);
    vdn_flow_ilk(a, b, hw[0], hw[1], 7, 10, flow);
    f = fopen(out, "wb");
    if (!f || fwrite(flow, 8, 2 * n, f) != 2 * n) return 1;
    fclose(f);
    free(a);
    free(b);
    free(flow);
    return 0;
}

/* file: int32 C, F, H, W, then ref and test videos float32. Writes the gray and RGB preview of
 * every frame of ref to out (float64 then uint8) and prints the latent metrics. */
static int cmd_latent(const char *path, const char *out) {
    FILE *f = fopen(path, "rb");
    int32_t d[4];
    if (!f || fread(d, 4, 4, f) != 4) return 1;
    size_t n = (size_t)d[0] * d[1] * d[2] * d[3];
    float *a = vdn_xmalloc(n * 4), *b = vdn_xmalloc(n * 4);
    if (fread(a, 4, n, f) != n || fread(b, 4, n, f) != n) return 1;
    fclose(f);
    int s = vdn_preview_scale(d[2], d[3]);
    size_t pn = (size_t)d[2] * s * d[3] * s;
    double *g = vdn_xmalloc(pn * 8);
    uint8_t *rgb = vdn_xmalloc(pn * 3);
    FILE *o = fopen(out, "wb");
    for (int t = 0; t < d[1]; t++) {
        vdn_latent_preview(a, d[0], d[1], d[2], d[3], t, s, g, rgb);
        fwrite(g, 8, pn, o);
        fwrite(rgb, 1, pn * 3, o);
    }
    fclose(o);
    double m, v;
    vdn_temporal_diff(a, d[0], d[1], d[2], d[3], &m, &v);
    printf("{");
    jnum("rel_l2", vdn_rel_l2(a, b, n), 0);
    jnum("latent_psnr", vdn_latent_psnr(a, b, n), 0);
    jnum("tdiff_mean", m, 0);
    jnum("tdiff_var", v, 0);
    jnum("motion", vdn_motion_mean_flow(a, d[0], d[1], d[2], d[3]), 1);
    printf("}\n");
    free(a);
    free(b);
    free(g);
    free(rgb);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "stats")) return cmd_stats();
    if (argc >= 2 && !strcmp(argv[1], "betainc")) return cmd_special(0);
    if (argc >= 2 && !strcmp(argv[1], "tcdf")) return cmd_special(1);
    if (argc >= 4 && !strcmp(argv[1], "image")) return cmd_image(argv[2], atof(argv[3]));
    if (argc >= 4 && !strcmp(argv[1], "flow")) return cmd_flow(argv[2], argv[3]);
    if (argc >= 4 && !strcmp(argv[1], "latent")) return cmd_latent(argv[2], argv[3]);
    fprintf(stderr,
            "usage: eval_testtool stats|betainc|tcdf|image FILE RANGE|flow IN OUT|latent IN OUT\n");
    return 2;
}
