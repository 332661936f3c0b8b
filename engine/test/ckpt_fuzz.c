/* Fuzz target for the outside-data parsers of the checkpoint code: the safetensors header
 * (validation, lookups, widening), the base config, the VDN transform config, the scheduler
 * shift, the prompt-cache reader and the adapter JSON. The first byte picks the parser (mod 6:
 * safetensors, base config, transform, shift, prompt cache, adapter JSON), the rest is its
 * input.
 *
 * Built as a libFuzzer target with -DVDN_FUZZ=ON under clang (LLVMFuzzerTestOneInput), and
 * linked into ckpt_fuzz_replay, which CI runs over test/ckpt_corpus/ plus deterministic
 * mutations of valid inputs. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_config.h"
#include "lora.h"
#include "prompt.h"
#include "safetensors.h"
#include "vdn_util.h"

int ckpt_fuzz_one(const uint8_t *data, size_t size);

int ckpt_fuzz_one(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char err[VDN_ERR_LEN];
    const uint8_t kind = data[0] % 6;
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    if (kind == 0 || kind == 4) {
        /* copy so the parser sees exactly n bytes (no readable slack after the buffer) */
        uint8_t *buf = malloc(n ? n : 1);
        if (n) memcpy(buf, in, n);
        vdn_st_file *f = vdn_st_open_mem(buf, n, "fuzz.safetensors", err, sizeof err);
        if (f && kind == 4) { /* as a prompt cache */
            vdn_prompt p;
            if (vdn_prompt_from_st(f, 0, &p, err, sizeof err) == 0) {
                VDN_ASSERT(p.n_text >= 1 && p.text_dim >= 1 && p.n_keyframes <= 2);
                vdn_prompt_free(&p);
            }
            vdn_st_close(f);
            f = NULL;
        }
        if (f) {
            for (int i = 0; i < vdn_st_count(f); i++) {
                const vdn_st_entry *e = vdn_st_at(f, i);
                VDN_ASSERT(vdn_st_find(f, e->name) == e);
                VDN_ASSERT(e->offset + e->nbytes <= n);
                if (vdn_dtype_is_float(e->dtype) && e->numel <= (1 << 16)) {
                    float *out = malloc((size_t)(e->numel ? e->numel : 1) * sizeof(float));
                    VDN_ASSERT(vdn_st_to_f32(f, e, out, err, sizeof err) == 0);
                    free(out);
                }
            }
            for (int i = 0; i < vdn_st_meta_count(f); i++) {
                const char *k, *v;
                vdn_st_meta_at(f, i, &k, &v);
                VDN_ASSERT(vdn_st_meta(f, k) != NULL);
            }
            vdn_st_close(f);
        }
        free(buf);
        return 0;
    }
    /* JSON parsers take a length; give them a copy without a terminator past it */
    char *text = malloc(n ? n : 1);
    if (n) memcpy(text, in, n);
    vdn_config cfg;
    memset(&cfg, 0, sizeof cfg);
    vdn_layout_kind layout;
    float shift = 12.0f;
    if (kind == 1)
        (void)vdn_config_parse_base("fuzz/config.json", text, n, &cfg, &layout, err, sizeof err);
    else if (kind == 5) {
        int rank;
        float alpha;
        (void)vdn_lora_check_json("fuzz/adapter_spec.json", text, n, &rank, &alpha, err,
                                  sizeof err);
    } else if (kind == 2)
        (void)vdn_config_parse_transform("fuzz/model_spec.json", text, n, &cfg, err, sizeof err);
    else
        (void)vdn_config_parse_shift("fuzz/scheduler_config.json", text, n, &shift, err,
                                     sizeof err);
    free(text);
    return 0;
}

#ifdef VDN_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return ckpt_fuzz_one(data, size);
}
#endif
