/* Test driver for media/'s readers and PNG writer, so an independent decoder can check them:
 *   media_read_tool frames IN.mp4 OUT.f32   the mp4's frames through vdn_frames (frames.h) as
 *                                           float32 (T, 3, H, W); prints "T H W" (T: the
 *                                           container's count, then the frames read)
 *   media_read_tool png OUT.png W H         a fixed RGB pattern through vdn_png_write_file, and
 *                                           OUT.png.b64: vdn_base64 of vdn_png_encode's bytes
 * Exit 1 with the library's message on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "png_write.h"

static int read_frames(const char *in, const char *out) {
    char err[1024];
    vdn_frames *f = vdn_frames_open_mp4(in, err, sizeof err);
    if (!f) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int T, H, W, n = 0, got;
    vdn_frames_info(f, &T, &H, &W);
    float *rgb = malloc(sizeof(float) * 3 * (size_t)H * W);
    FILE *o = fopen(out, "wb");
    while (rgb && o && (got = vdn_frames_next(f, rgb, err, sizeof err)) == 1) {
        fwrite(rgb, sizeof(float), 3 * (size_t)H * W, o);
        n++;
    }
    int rc = rgb && o && got == 0 ? 0 : 1;
    if (rc) fprintf(stderr, "%s\n", rgb && o ? err : "cannot allocate or create the output");
    if (o) fclose(o);
    free(rgb);
    vdn_frames_close(f);
    printf("%d %d %d %d\n", T, H, W, n);
    return rc;
}

/* The pattern the test recomputes: R = x, G = y, B = x ^ y (mod 256). */
static int write_png(const char *out, int w, int h) {
    unsigned char *rgb = malloc((size_t)w * h * 3);
    if (!rgb) return 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            unsigned char *p = rgb + ((size_t)y * w + x) * 3;
            p[0] = (unsigned char)x, p[1] = (unsigned char)y, p[2] = (unsigned char)(x ^ y);
        }
    char err[1024], path[4096];
    uint8_t *png = NULL;
    size_t len = 0;
    int rc = vdn_png_write_file(out, rgb, w, h, err, sizeof err) ||
             vdn_png_encode(rgb, w, h, &png, &len, err, sizeof err);
    if (!rc) {
        char *b64 = vdn_base64(png, len);
        snprintf(path, sizeof path, "%s.b64", out);
        FILE *f = fopen(path, "w");
        rc = !f || fputs(b64, f) < 0;
        if (f) fclose(f);
        free(b64);
    } else
        fprintf(stderr, "%s\n", err);
    free(png);
    free(rgb);
    return rc ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "frames")) return read_frames(argv[2], argv[3]);
    if (argc == 5 && !strcmp(argv[1], "png"))
        return write_png(argv[2], atoi(argv[3]), atoi(argv[4]));
    fprintf(stderr, "usage: %s frames IN.mp4 OUT.f32 | png OUT.png W H\n", argv[0]);
    return 2;
}
