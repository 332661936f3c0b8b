/* libFuzzer target for sampler snapshots as a worker downloads them from the store (outside
 * data: any bytes a store may hold under the key): read with the fingerprint the corpus files
 * were made for, must give a state or an error, never crash; a state read must be consistent. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "snapshot.h"
#include "vdn_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[VDN_ERR_LEN];
    vdn_render_state st;
    if (vdn_snapshot_read_mem(data, size, "fuzz.safetensors", "fuzz-fingerprint", &st, err,
                              sizeof err) == 0) {
        if (!(st.step >= 1 && st.step < st.steps && st.video && st.audio && st.n_video >= 1 &&
              st.n_audio >= 1))
            abort();
        volatile float sink = st.video[st.n_video - 1] + st.audio[st.n_audio - 1];
        (void)sink;
        vdn_snapshot_free(&st);
    }
    return 0;
}
