/* libFuzzer target for pictures in: the header checks, FFmpeg's decoders behind them and the
 * canvas (image.h, keyframes.h). Byte 0 picks the canvas (bit 0: 64 x 32, else 32 x 96) and
 * whether the picture is also the last keyframe, cover-cropped (bit 1); the rest is the file. A
 * picture that decodes must have its header's size and pixels, its own canvas (the release's
 * size rule) must be multiples of 32 within the area cap or an aspect-ratio refusal, and it must
 * go onto the small canvas. The pixel limit and the canvas are small so that every input is
 * quick under the sanitizers. Corpus: corpus_image/ (ops/fuzz.sh; replayed by ctest
 * media_image_fuzz_replay). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "keyframes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char err[1024];
    vdn_image_opts opts = {.max_pixels = 1 << 16, .max_bytes = 1 << 20};
    vdn_image im;
    if (vdn_image_decode(data + 1, size - 1, "fuzz", &opts, &im, err, sizeof err)) {
        if (!err[0] || im.rgb) abort();
        return 0;
    }
    if (im.width < 1 || im.height < 1 || !im.rgb || (long long)im.width * im.height > 1 << 16 ||
        im.width != im.info.width || im.height != im.info.height)
        abort();
    int cw, ch;
    if (vdn_canvas_size(im.width, im.height, &ch, &cw, err, sizeof err) == 0 &&
        (cw < 32 || ch < 32 || cw % 32 || ch % 32 ||
         (long long)cw * ch > 2 * VDN_CANVAS_MAX_PIXELS))
        abort();
    vdn_image kf[2] = {im, im}, out[2];
    int n = data[0] & 2 ? 2 : 1, W = data[0] & 1 ? 64 : 32, H = data[0] & 1 ? 32 : 96;
    if (vdn_keyframes_prepare(kf, n, W, H, out, &cw, &ch, err, sizeof err) == 0) {
        if (cw != W || ch != H) abort();
        for (int i = 0; i < n; i++) {
            if (out[i].width != cw || out[i].height != ch || !out[i].rgb) abort();
            vdn_image_free(&out[i]);
        }
    } else if (!strstr(err, "too far from the canvas")) {
        abort(); /* an explicit canvas takes any decoded picture it can afford */
    }
    vdn_image_free(&im);
    return 0;
}
