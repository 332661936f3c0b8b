/* The tensor schema at the real H3 config against the numbers of the released checkpoints
 * (spec 0 and 5.4, read from MiniMax-H3's index files): 638 diffusers tensors of 66,280,430,080
 * bytes, 535 native tensors of 66,280,430,144 bytes (+ rope.inv_freq), 33,105,770,752 bf16 and
 * 17,222,144 fp32 parameters, and 42.79 M VDN branch parameters per block (4.28 GB over 50). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ckpt_init.h"
#include "ckpt_names.h"
#include "safetensors.h"
#include "vdn_util.h"
#include "../../ops/test/check.h"

typedef struct {
    int map_native; /* base tensors: also check the native name map both ways */
    int count, native_count;
    uint64_t params[6], bytes;
    char last_native[VDN_NAME_MAX];
} tally;

static void add(void *user, const char *name, int ndim, const int64_t *shape, vdn_dtype dt) {
    tally *t = user;
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= (uint64_t)shape[d];
    t->count++;
    t->params[dt] += n;
    t->bytes += n * vdn_dtype_size(dt);
    if (!t->map_native) return;
    char native[VDN_NAME_MAX];
    vdn_xform xf;
    int part;
    if (vdn_canonical_to_native(name, native, sizeof native, &xf, &part) != 0) {
        fprintf(stderr, "FAIL: no native name for %s\n", name);
        failures++;
        return;
    }
    char back[3][VDN_NAME_MAX];
    vdn_xform xf2;
    int k = vdn_native_to_canonical(native, back, &xf2);
    CHECK(k >= 1 && xf2 == xf && !strcmp(back[xf == VDN_XF_QKV ? part : 0], name),
          "%s -> %s does not map back", name, native);
    if (strcmp(native, t->last_native) != 0) t->native_count++; /* q/k/v are one native tensor */
    snprintf(t->last_native, sizeof t->last_native, "%s", native);
}

int main(void) {
    vdn_config c;
    char err[VDN_ERR_LEN];
    CHECK(vdn_ckpt_preset("h3", 0, &c, err, sizeof err) == 0, "%s", err);
    tally t = {.map_native = 1};
    vdn_ckpt_schema(&c, VDN_SCHEMA_BASE, add, &t);
    CHECK(t.count == 638, "diffusers tensors %d, released 638", t.count);
    CHECK(t.native_count + 1 == 535, "native tensors %d (+ rope.inv_freq), released 535",
          t.native_count);
    CHECK(t.bytes == UINT64_C(66280430080), "diffusers bytes %" PRIu64 ", released 66280430080",
          t.bytes);
    CHECK(t.bytes + 16 * 4 == UINT64_C(66280430144),
          "native bytes %" PRIu64 ", released "
          "66280430144",
          t.bytes + 64);
    CHECK(t.params[VDN_DT_BF16] == UINT64_C(33105770752), "bf16 params %" PRIu64,
          t.params[VDN_DT_BF16]);
    CHECK(t.params[VDN_DT_F32] == UINT64_C(17222144), "fp32 params %" PRIu64, t.params[VDN_DT_F32]);

    tally v = {0};
    vdn_ckpt_schema(&c, VDN_SCHEMA_VDN, add, &v);
    double per_block = (double)v.params[VDN_DT_BF16] / c.layers;
    CHECK(v.count == 16 * 50, "vdn tensors %d", v.count);
    CHECK(per_block > 42.785e6 && per_block < 42.795e6, "vdn params per block %.0f, spec 42.79 M",
          per_block);
    CHECK(v.bytes > 4.275e9 && v.bytes < 4.285e9, "vdn bytes %" PRIu64 ", spec 4.28 GB", v.bytes);
    printf("h3 schema: %d tensors, %" PRIu64 " bytes; vdn %.0f params/block; %d failures\n",
           t.count, t.bytes, per_block, failures);
    return failures ? 1 : 0;
}
