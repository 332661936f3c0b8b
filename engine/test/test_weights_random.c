/* The random weight source of `vdn bench --whole` (weights_random.c): small tensors hold exactly
 * `vdn ckpt init`'s values; large matrices have the spec's init spread (std 1/sqrt(fan_in) for
 * linears, checked here against that formula, not against the source's own estimate), no zeros,
 * no non-finite values, and the same values for the same seed. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "ckpt_init.h"
#include "dit.h"
#include "op.h"

static float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void small_exact(vdn_weight_source *src) {
    const int64_t shape[1] = {5376};
    const char *name = "transformer_blocks.3.norm1.weight";
    vdn_dtype dt;
    char err[256];
    const float *p = src->get(src->ctx, name, 1, shape, &dt, err, sizeof err);
    CHECK(p && dt == VDN_DT_F32, "small tensor: %s", p ? "wrong dtype" : err);
    if (!p) return;
    int same = 1;
    for (int64_t i = 0; i < shape[0]; i++)
        same &= p[i] == vdn_ckpt_init_value(7, name, 1, shape, i);
    CHECK(same, "small tensor differs from vdn ckpt init's values");
    src->release(src->ctx, name);
}

/* a [out, in] linear: mean ~0, std ~1/sqrt(in) (spec init), finite, nonzero, reproducible */
static void large_spread(vdn_weight_source *src, vdn_weight_source *again) {
    const int64_t shape[2] = {2048, 1024};
    const char *name = "transformer_blocks.0.ff.net.0.proj.weight";
    vdn_dtype dt, dt2;
    char err[256];
    const uint16_t *p = src->get(src->ctx, name, 2, shape, &dt, err, sizeof err);
    CHECK(p && dt == VDN_DT_BF16, "large tensor: %s", p ? "wrong dtype" : err);
    if (!p) return;
    const int64_t n = shape[0] * shape[1];
    double sum = 0, sum2 = 0;
    int64_t zeros = 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = bf16_to_f32(p[i]);
        bad += !isfinite(v);
        zeros += v == 0;
        sum += v, sum2 += v * v;
    }
    const double mean = sum / n, sd = sqrt(sum2 / n - mean * mean), want = 1.0 / sqrt(1024.0);
    CHECK(bad == 0 && zeros < n / 1000, "large tensor: %lld non-finite, %lld zeros", (long long)bad,
          (long long)zeros);
    CHECK(fabs(mean) < 0.05 * want, "large tensor: mean %.3g, expected ~0", mean);
    CHECK(fabs(sd / want - 1) < 0.05, "large tensor: std %.4g, spec init 1/sqrt(1024) = %.4g", sd,
          want);
    const uint16_t *q = again->get(again->ctx, name, 2, shape, &dt2, err, sizeof err);
    CHECK(q && !memcmp(p, q, sizeof(uint16_t) * (size_t)n), "same seed, different values");
    src->release(src->ctx, name);
    again->release(again->ctx, name);
}

/* the device path: a large matrix written into a column view of a wider (fused) tensor on the
 * CPU device has the spec's spread; the columns around it stay as they were; small tensors are
 * left to the host path */
static void device_fill(uint64_t seed) {
    vdn_weight_source s = vdn_weight_source_random(seed), *src = &s;
    char err[256];
    vdn_dev *d = vdn_dev_open("cpu", 0, 2, err, sizeof err);
    CHECK(d != NULL, "cpu device: %s", err);
    if (!d) return;
    const int64_t rows = 2048, in = 1024, shape[2] = {rows, in};
    vdn_tensor *wide = vdn_tensor_new2(d, VDN_DT_F32, rows, in + 64);
    vdn_tensor_fill(wide, 7.0);
    vdn_tensor dst = vdn_view_cols(wide, 32, in);
    int done = src->fill(src->ctx, "transformer_blocks.1.attn.to_out.0.weight", 2, shape, &dst, err,
                         sizeof err);
    CHECK(done == 1, "large fill: %d %s", done, err);
    float *h = malloc(sizeof(float) * (size_t)rows * (in + 64));
    vdn_tensor_get(wide, h);
    double sum = 0, sum2 = 0;
    int64_t outside = 0, zeros = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < in + 64; c++) {
            double v = h[r * (in + 64) + c];
            if (c < 32 || c >= 32 + in) {
                outside += v != 7.0;
                continue;
            }
            zeros += v == 0 || !isfinite(v);
            sum += v, sum2 += v * v;
        }
    const double n = (double)rows * in, mean = sum / n, sd = sqrt(sum2 / n - mean * mean);
    const double want = 1.0 / sqrt((double)in);
    CHECK(outside == 0, "fill wrote %lld values outside its view", (long long)outside);
    CHECK(zeros < rows * in / 1000, "fill: %lld zero or non-finite values", (long long)zeros);
    CHECK(fabs(mean) < 0.05 * want && fabs(sd / want - 1) < 0.05,
          "fill: mean %.3g std %.4g, spec init std %.4g", mean, sd, want);
    const int64_t small[1] = {5376};
    vdn_tensor *nv = vdn_tensor_new2(d, VDN_DT_F32, 1, 5376);
    CHECK(src->fill(src->ctx, "transformer_blocks.1.norm1.weight", 1, small, nv, err, sizeof err) ==
              0,
          "a small tensor should take the host path");
    free(h);
    vdn_tensor_free(nv);
    vdn_tensor_free(wide);
    vdn_weight_source_random_free(src); /* its pool lives on d */
    vdn_dev_close(d);
}

int main(void) {
    vdn_weight_source a = vdn_weight_source_random(7), b = vdn_weight_source_random(7);
    small_exact(&a);
    large_spread(&a, &b);
    device_fill(7);
    vdn_weight_source_random_free(&a);
    vdn_weight_source_random_free(&b);
    return check_report("engine_weights_random");
}
