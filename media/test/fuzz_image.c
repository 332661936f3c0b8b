/* libFuzzer target for pictures in: the header checks, FFmpeg's decoders behind them and the
 * canvas (image.h, keyframes.h). Byte 0 picks the canvas (bit 0: the picture's own, else 64 x 32)
 * and whether the picture is also the last keyframe (bit 1); the rest is the file. A picture
 * that decodes must have its header's size and pixels, and must go onto the canvas (or be refused
 * for its aspect ratio). The pixel limit is small so that every input is quick. Corpus:
 * corpus_image/ (ops/fuzz.sh; replayed by ctest media_image_fuzz_replay). */
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
    vdn_image kf[2] = {im, im}, out[2];
    int n = data[0] & 2 ? 2 : 1, W = data[0] & 1 ? 0 : 64, H = data[0] & 1 ? 0 : 32, cw, ch;
    if (vdn_keyframes_prepare(kf, n, W, H, out, &cw, &ch, err, sizeof err) == 0) {
        if (cw < 32 || ch < 32 || cw % 32 || ch % 32) abort();
        for (int i = 0; i < n; i++) {
            if (out[i].width != cw || out[i].height != ch || !out[i].rgb) abort();
            vdn_image_free(&out[i]);
        }
    } else if (W) {
        abort(); /* an explicit canvas takes any decoded picture */
    }
    vdn_image_free(&im);
    return 0;
}
