/* Random DiT weights in the real shapes without a file (dit.h: vdn_weight_source_random), for
 * `vdn bench --whole`: the 50-block H3 is 66 GB in bf16, so the benchmark makes its weights as
 * the loader asks for them, one tensor at a time, on the device.
 *
 * Small tensors (norms, biases, gates, the VDA decay parameters, short convolutions) take exactly
 * the values `vdn ckpt init` would write (ckpt_init.h's generator, which follows the spec's
 * init), through the host. The large matrices keep that generator's spread, measured on 4096 of
 * its values, but are copied on the device from one pool of uniform values of unit variance
 * (made once, at a per-tensor offset) and scaled: the generator's per-value Box-Muller would take
 * minutes for 33 billion values and the upload of 66 GB as long again, while a benchmark needs
 * realistic magnitudes (never zeros, no overflow through 50 blocks), not the exact values. A
 * large matrix whose generator mean is not ~0 (none in the DiT) takes the host path. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_init.h"
#include "dit.h"
#include "op.h"
#include "ops.h"
#include "vdn_util.h"

#define EXACT_MAX (1 << 16) /* tensors up to this many values: the exact generator */
#define SAMPLES 4096

#define POOL_VALUES ((int64_t)1 << 28) /* bf16: 512 MB on the device, > the largest matrix */

typedef struct {
    uint64_t seed;
    void *buf;        /* the tensor handed out last (released by the loader) */
    vdn_tensor *pool; /* [POOL_VALUES] uniform, variance 1, on the device of the first fill */
    int64_t pool_n;   /* its length */
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

static void spread(const random_src *s, const char *name, int ndim, const int64_t *shape, int64_t n,
                   double *mean, double *sd);

/* bf16 values with the generator's mean and standard deviation, on the host */
static void *large_tensor(const random_src *s, const char *name, int ndim, const int64_t *shape,
                          int64_t n) {
    double mean, sd;
    spread(s, name, ndim, shape, n, &mean, &sd);
    const double half = sqrt(3.0) * sd; /* a uniform of that variance */
    uint16_t *out = vdn_xmalloc(sizeof(uint16_t) * (size_t)n);
    int chunks = vdn_ops_threads() * 4;
    fill_job j = {out,         n,       (n + chunks - 1) / chunks, name_key(s->seed, name),
                  mean - half, 2 * half};
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

/* the generator's mean and standard deviation for tensor `name`, from SAMPLES of its values */
static void spread(const random_src *s, const char *name, int ndim, const int64_t *shape, int64_t n,
                   double *mean, double *sd) {
    double sum = 0, sum2 = 0;
    for (int k = 0; k < SAMPLES; k++) {
        double v = vdn_ckpt_init_value(s->seed, name, ndim, shape, (int64_t)k * (n / SAMPLES));
        sum += v, sum2 += v * v;
    }
    *mean = sum / SAMPLES;
    const double var = sum2 / SAMPLES - *mean * *mean;
    *sd = sqrt(var > 0 ? var : 0);
}

/* the pool on dst's device, made on first use: uniform in [-sqrt 3, sqrt 3) */
static int make_pool(random_src *s, vdn_dev *d, int64_t need, char *err, size_t errlen) {
    if (s->pool && s->pool->dev == d && s->pool_n >= need) return 0;
    vdn_tensor_free(s->pool);
    s->pool_n = need > POOL_VALUES ? need : POOL_VALUES;
    const int64_t ne[1] = {s->pool_n};
    if (!(s->pool = vdn_tensor_new(d, VDN_DT_BF16, 1, ne)))
        return vdn_fail(err, errlen, "random weights: pool: %s", vdn_dev_error(d));
    uint16_t *host = vdn_xmalloc(sizeof(uint16_t) * (size_t)s->pool_n);
    int chunks = vdn_ops_threads() * 4;
    fill_job j = {
        host,       s->pool_n,    (s->pool_n + chunks - 1) / chunks, splitmix(s->seed ^ 0x9001),
        -sqrt(3.0), 2 * sqrt(3.0)};
    vdn_parallel_for((int)((s->pool_n + j.chunk - 1) / j.chunk), fill_chunk, &j);
    int rc = vdn_tensor_set(s->pool, host, VDN_DT_BF16);
    free(host);
    if (rc) return vdn_fail(err, errlen, "random weights: pool: %s", vdn_dev_error(d));
    return 0;
}

/* large matrices on the device: sd * pool[off : off + n] */
static int random_fill(void *ctx, const char *name, int ndim, const int64_t *shape, vdn_tensor *dst,
                       char *err, size_t errlen) {
    random_src *s = ctx;
    const int64_t n = vdn_tensor_numel(dst);
    if (n <= EXACT_MAX) return 0;
    double mean, sd;
    spread(s, name, ndim, shape, n, &mean, &sd);
    if (fabs(mean) > 0.05 * sd) return 0; /* not centred: the host path keeps its mean */
    if (make_pool(s, dst->dev, n, err, errlen)) return -1;
    const int64_t off = (int64_t)(name_key(s->seed, name) % (uint64_t)(s->pool_n - n + 1));
    /* the pool's elements [off, off + n) seen as dst's [rows, cols] (a contiguous view) */
    vdn_tensor src = *s->pool;
    src.ndim = 2;
    src.ne[0] = vdn_tensor_rows(dst), src.ne[1] = src.ld = vdn_tensor_cols(dst);
    src.ne[2] = src.ne[3] = 1;
    src.data = (char *)s->pool->data + (size_t)off * vdn_dtype_size(VDN_DT_BF16);
    src.owned = 0;
    if (vdn_tensor_copy(dst, &src) || vdn_op_scale(dst, sd))
        return vdn_fail(err, errlen, "random weights: %s: %s", name, vdn_dev_error(dst->dev));
    return 1;
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
    return (vdn_weight_source){random_get, random_release, s, random_fill};
}

void vdn_weight_source_random_free(vdn_weight_source *src) {
    random_src *s = src->ctx;
    if (s) {
        free(s->buf);
        vdn_tensor_free(s->pool);
    }
    free(s);
    src->ctx = NULL;
}
