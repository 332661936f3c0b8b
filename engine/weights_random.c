/* Random DiT weights in the real shapes without a file (dit.h: vdn_weight_source_random), for
 * `vdn bench --whole`: the 50-block H3 is 66 GB as a float32 checkpoint, so the benchmark makes
 * its weights as the loader asks for them, one tensor at a time.
 *
 * Small tensors (norms, biases, gates, the VDA decay parameters, short convolutions) take exactly
 * the values `vdn ckpt init` would write (ckpt_init.h's generator, which follows the spec's
 * init). The large matrices keep that generator's mean and spread, measured on 4096 of its
 * values, but are drawn from a fast uniform hash on all cores: the generator's per-value
 * Box-Muller would take minutes for 19 billion values, and a benchmark needs realistic
 * magnitudes (never zeros, no overflow through 50 blocks), not the exact values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_init.h"
#include "dit.h"
#include "ops.h"
#include "vdn_util.h"

#define EXACT_MAX (1 << 20) /* tensors up to this many values: the exact generator */
#define SAMPLES 4096

typedef struct {
    uint64_t seed;
    void *buf; /* the tensor handed out last (released by the loader) */
} random_src;

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t name_key(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return splitmix(seed ^ h);
}

/* float32 -> bf16, round to nearest even (finite inputs only: ours are) */
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

typedef struct {
    uint16_t *out;
    int64_t n, chunk;
    uint64_t key;
    double lo, width; /* uniform in [lo, lo + width) */
} fill_job;

static void fill_chunk(void *ctx, int c) {
    const fill_job *j = ctx;
    int64_t i0 = (int64_t)c * j->chunk, i1 = i0 + j->chunk < j->n ? i0 + j->chunk : j->n;
    for (int64_t i = i0; i < i1; i++) {
        double u = (double)(splitmix(j->key ^ (uint64_t)i) >> 11) * (1.0 / 9007199254740992.0);
        j->out[i] = to_bf16((float)(j->lo + j->width * u));
    }
}

/* bf16 values with the generator's mean and standard deviation */
static void *large_tensor(const random_src *s, const char *name, int ndim, const int64_t *shape,
                          int64_t n) {
    double sum = 0, sum2 = 0;
    for (int k = 0; k < SAMPLES; k++) {
        double v = vdn_ckpt_init_value(s->seed, name, ndim, shape, (int64_t)k * (n / SAMPLES));
        sum += v, sum2 += v * v;
    }
    const double mean = sum / SAMPLES, var = sum2 / SAMPLES - mean * mean;
    const double half = sqrt(3.0 * (var > 0 ? var : 0)); /* uniform of that variance */
    uint16_t *out = vdn_xmalloc(sizeof(uint16_t) * (size_t)n);
    int chunks = vdn_ops_threads() * 4;
    fill_job j = {out, n, (n + chunks - 1) / chunks, name_key(s->seed, name), mean - half,
                  2 * half};
    vdn_parallel_for((int)((n + j.chunk - 1) / j.chunk), fill_chunk, &j);
    return out;
}

static const void *random_get(void *ctx, const char *name, int ndim, const int64_t *shape,
                              vdn_dtype *dtype, char *err, size_t errlen) {
    random_src *s = ctx;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (shape[d] > 0 && n > INT64_MAX / 4 / shape[d])) {
            vdn_fail(err, errlen, "random weights: %s: shape too large", name);
            return NULL;
        }
        n *= shape[d];
    }
    free(s->buf);
    if (n > EXACT_MAX) {
        s->buf = large_tensor(s, name, ndim, shape, n);
        *dtype = VDN_DT_BF16;
        return s->buf;
    }
    float *f = vdn_xmalloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        f[i] = vdn_ckpt_init_value(s->seed, name, ndim, shape, i);
    s->buf = f;
    *dtype = VDN_DT_F32;
    return f;
}

static void random_release(void *ctx, const char *name) {
    (void)name;
    random_src *s = ctx;
    free(s->buf);
    s->buf = NULL;
}

vdn_weight_source vdn_weight_source_random(uint64_t seed) {
    random_src *s = vdn_xcalloc(1, sizeof *s);
    s->seed = seed;
    return (vdn_weight_source){random_get, random_release, s};
}

void vdn_weight_source_random_free(vdn_weight_source *src) {
    random_src *s = src->ctx;
    if (s) free(s->buf);
    free(s);
    src->ctx = NULL;
}
