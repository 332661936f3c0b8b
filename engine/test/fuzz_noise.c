/* libFuzzer target: a --noise file (safetensors bytes) through the reader and vdn_noise_read.
 * Must never crash; any outcome other than success must come with an error message. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "safetensors.h"
#include "sampler.h"
#include "vdn_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[VDN_ERR_LEN] = "";
    vdn_st_file *f = vdn_st_open_mem(data, size, "fuzz.safetensors", err, sizeof err);
    if (!f) {
        VDN_ASSERT(err[0]);
        return 0;
    }
    /* geometry of the corpus files: C=3, F=2, h=2, w=4, La=3, ach=4, one keyframe */
    static float video[3 * 2 * 2 * 4], audio[6 * 4], kf[3 * 2 * 4];
    err[0] = 0;
    if (vdn_noise_read(f, 3, 2, 2, 4, 3, 4, 1, video, audio, kf, NULL, err, sizeof err) != 0)
        VDN_ASSERT(err[0]);
    vdn_st_close(f);
    return 0;
}
