/* Test helper: every canonical tensor of an assembled checkpoint (base + branch + folded
 * adapters) as F32 into one safetensors file, for the numpy reference tests.
 * Usage: ckpt_dump CKPT OUT.safetensors [--adapter PATH]... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "safetensors.h"
#include "vdn_util.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: ckpt_dump CKPT OUT.safetensors [--adapter PATH]...\n");
        return 2;
    }
    const char *extra[32];
    int n_extra = 0;
    for (int i = 3; i + 1 < argc && n_extra < 32; i += 2)
        if (!strcmp(argv[i], "--adapter")) extra[n_extra++] = argv[i + 1];
    char err[VDN_ERR_LEN];
    vdn_ckpt *ck = vdn_ckpt_open(argv[1], extra, n_extra, NULL, err, sizeof err);
    if (!ck) {
        fprintf(stderr, "ckpt_dump: %s\n", err);
        return 1;
    }
    int n = vdn_ckpt_count(ck);
    vdn_st_tensor *t = vdn_xcalloc(n, sizeof *t);
    for (int i = 0; i < n; i++) {
        const char *name = vdn_ckpt_name(ck, i);
        int64_t shape[8];
        int nd = vdn_ckpt_shape(ck, name, shape);
        t[i].name = name;
        t[i].dtype = VDN_DT_F32;
        t[i].ndim = nd;
        memcpy(t[i].shape, shape, sizeof shape);
        t[i].data = vdn_ckpt_f32(ck, name, nd, shape, err, sizeof err);
        if (!t[i].data) {
            fprintf(stderr, "ckpt_dump: %s\n", err);
            return 1;
        }
    }
    char id[80];
    snprintf(id, sizeof id, "%s", vdn_ckpt_identity(ck));
    vdn_st_kv meta[2] = {{"identity", id}, {"layout", vdn_ckpt_layout(ck)}};
    int rc = vdn_st_write(argv[2], t, n, meta, 2, err, sizeof err);
    if (rc) fprintf(stderr, "ckpt_dump: %s\n", err);
    free(t);
    vdn_ckpt_close(ck);
    return rc ? 1 : 0;
}
