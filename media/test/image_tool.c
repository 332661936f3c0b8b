/* The picture code from the command line, for test_image.py (which compares it with Pillow):
 *
 *   image_tool resample IN.raw W H C OUT_W OUT_H FILTER OUT.raw [X0 Y0 X1 Y1 [WX WY WW WH]]
 *       raw packed 8-bit pixels in, the resized (box, window) pixels out
 *   image_tool decode [--max-pixels N] [--max-bytes N] PICTURE OUT.raw      prints "W H"
 *   image_tool probe [--max-pixels N] PICTURE               prints "format W H depth channels"
 *   image_tool canvas [--size W H] OUT_PREFIX PICTURE [PICTURE]
 *       writes OUT_PREFIX0.raw (and 1), prints the canvas "W H"
 *   image_tool sha256 PICTURE
 *   image_tool sizes FILE      lines "W H" -> the canvas "H W" (vdn_canvas_size) or "error: ..."
 *
 * Exit 0, or 1 with the error message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "keyframes.h"
#include "resample.h"
#include "vdn_util.h"

static int fail(const char *msg) {
    fprintf(stderr, "%s\n", msg);
    return 1;
}

static int write_raw(const char *path, const void *p, size_t n) {
    char err[VDN_ERR_LEN];
    if (vdn_write_file_atomic(path, p, n, err, sizeof err)) return fail(err);
    return 0;
}

static int cmd_resample(int argc, char **argv) {
    if (argc != 9 && argc != 13 && argc != 17) return fail("resample: bad arguments");
    int w = atoi(argv[2]), h = atoi(argv[3]), c = atoi(argv[4]);
    int ow = atoi(argv[5]), oh = atoi(argv[6]), filter = vdn_resample_filter_parse(argv[7]);
    if (filter < 0) return fail("resample: unknown filter");
    char err[VDN_ERR_LEN];
    size_t len;
    uint8_t *in = (uint8_t *)vdn_read_file(argv[1], &len, err, sizeof err);
    if (!in) return fail(err);
    if (len != (size_t)w * h * c) return fail("resample: input size does not match W H C");
    vdn_resample_box box, *bp = NULL;
    int wx = 0, wy = 0, ww = ow, wh = oh;
    if (argc >= 13) {
        box = (vdn_resample_box){strtof(argv[9], NULL), strtof(argv[10], NULL),
                                 strtof(argv[11], NULL), strtof(argv[12], NULL)};
        bp = &box;
    }
    if (argc == 17)
        wx = atoi(argv[13]), wy = atoi(argv[14]), ww = atoi(argv[15]), wh = atoi(argv[16]);
    uint8_t *out = vdn_xmalloc((size_t)(ww > 0 ? ww : 1) * (wh > 0 ? wh : 1) * c);
    int rc = vdn_resample_u8_window(in, w, h, 0, c, ow, oh, (vdn_resample_filter)filter, bp, wx, wy,
                                    ww, wh, out, err, sizeof err);
    rc = rc ? fail(err) : write_raw(argv[8], out, (size_t)ww * wh * c);
    free(in);
    free(out);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) return fail("usage: image_tool resample|decode|probe|canvas|sha256 ...");
    const char *cmd = argv[1];
    argc--, argv++;
    if (!strcmp(cmd, "resample")) return cmd_resample(argc, argv);
    vdn_image_opts opts = {0};
    int cw = 0, ch = 0;
    while (argc > 1 && argv[1][0] == '-') {
        if (!strcmp(argv[1], "--max-pixels") && argc > 2) {
            opts.max_pixels = atoll(argv[2]);
            argc -= 2, argv += 2;
        } else if (!strcmp(argv[1], "--max-bytes") && argc > 2) {
            opts.max_bytes = (size_t)atoll(argv[2]);
            argc -= 2, argv += 2;
        } else if (!strcmp(argv[1], "--size") && argc > 3) {
            cw = atoi(argv[2]), ch = atoi(argv[3]);
            argc -= 3, argv += 3;
        } else {
            return fail("unknown option");
        }
    }
    char err[VDN_ERR_LEN];
    if (!strcmp(cmd, "decode") && argc == 3) {
        vdn_image im;
        if (vdn_image_load(argv[1], &opts, &im, err, sizeof err)) return fail(err);
        printf("%d %d\n", im.width, im.height);
        int rc = write_raw(argv[2], im.rgb, (size_t)im.width * im.height * 3);
        vdn_image_free(&im);
        return rc;
    }
    if (!strcmp(cmd, "probe") && argc == 2) {
        size_t len;
        char *data = vdn_read_file(argv[1], &len, err, sizeof err);
        if (!data) return fail(err);
        vdn_image_info in;
        int rc = vdn_image_probe(data, len, argv[1], &opts, &in, err, sizeof err);
        free(data);
        if (rc) return fail(err);
        printf("%s %d %d %d %d\n", vdn_image_format_name(in.format), in.width, in.height,
               in.bit_depth, in.channels);
        return 0;
    }
    if (!strcmp(cmd, "canvas") && (argc == 3 || argc == 4)) {
        int n = argc - 2, W, H;
        vdn_image out[VDN_KEYFRAMES_MAX];
        if (vdn_keyframes_load((const char *const *)argv + 2, n, &opts, cw, ch, out, &W, &H, err,
                               sizeof err))
            return fail(err);
        int rc = 0;
        for (int i = 0; i < n; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s%d.raw", argv[1], i);
            rc |= write_raw(path, out[i].rgb, (size_t)W * H * 3);
            vdn_image_free(&out[i]);
        }
        printf("%d %d\n", W, H);
        return rc;
    }
    if (!strcmp(cmd, "sizes") && argc == 2) {
        FILE *f = fopen(argv[1], "r");
        if (!f) return fail("sizes: cannot open the file");
        double a, b;
        while (fscanf(f, "%lf %lf", &a, &b) == 2) {
            int h, w;
            if (vdn_canvas_size(a, b, &h, &w, err, sizeof err))
                printf("error: %s\n", err);
            else
                printf("%d %d\n", h, w);
        }
        fclose(f);
        return 0;
    }
    if (!strcmp(cmd, "sha256") && argc == 2) {
        char hex[65];
        if (vdn_image_file_sha256(argv[1], &opts, hex, err, sizeof err)) return fail(err);
        printf("%s\n", hex);
        return 0;
    }
    return fail("image_tool: bad arguments (see the comment at the top of image_tool.c)");
}
