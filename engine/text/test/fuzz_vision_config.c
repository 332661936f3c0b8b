/* libFuzzer target for the vision path's two config parsers: the first byte picks one.
 *   even: the rest is a processor/preprocessor_config.json (vdn_vision_proc_parse); an accepted
 *         one must have min_pixels <= max_pixels and give smart resize sizes that are positive
 *         multiples of patch x merge for a few picture sizes;
 *   odd:  the rest is a text_encoder/config.json (vdn_vision_config_parse, against a tiny text
 *         config); an accepted one must have DeepStack indexes ascending below depth, no more
 *         than the decoder's layers, and rope sections covering head_dim / 2.
 * Corpus: corpus_vision_config/. */
#include <stdint.h>
#include <stdlib.h>

#include "encoder_config.h"
#include "vdn_util.h"
#include "vision_preprocess.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char err[VDN_ERR_LEN];
    const char *json = (const char *)data + 1;
    if (data[0] % 2 == 0) {
        vdn_vision_proc p;
        if (vdn_vision_proc_parse(json, size - 1, "fuzz", &p, err, sizeof err)) return 0;
        if (p.min_pixels > p.max_pixels) abort();
        const int sizes[4][2] = {{1, 1}, {250, 333}, {768, 1344}, {9, 1800}};
        for (int i = 0; i < 4; i++) {
            int h, w, f = p.patch * p.merge;
            if (vdn_vision_smart_resize(&p, sizes[i][0], sizes[i][1], &h, &w, err, sizeof err))
                continue;
            if (h < f || w < f || h % f || w % f) abort();
        }
        return 0;
    }
    const vdn_text_config text = {.vocab = 151936,
                                  .hidden = 48,
                                  .intermediate = 144,
                                  .head_dim = 64,
                                  .layers = 4,
                                  .heads = 4,
                                  .kv_heads = 2,
                                  .rms_eps = 1e-6,
                                  .rope_theta = 5e6,
                                  .max_positions = 512};
    vdn_vision_config v;
    if (vdn_vision_config_parse(json, size - 1, "fuzz", &text, &v, err, sizeof err)) return 0;
    if (v.n_deepstack > text.layers || v.mrope[0] + v.mrope[1] + v.mrope[2] != 32) abort();
    for (int i = 0; i < v.n_deepstack; i++)
        if (v.deepstack[i] >= v.depth || (i && v.deepstack[i] <= v.deepstack[i - 1])) abort();
    return 0;
}
