/* Scheduler and noise; see sched.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "safetensors.h"
#include "sampler.h"
#include "vdn_util.h"

void vdn_linspace_f32(float *out, float start, float end, int n) {
    if (n == 1) {
        out[0] = start;
        return;
    }
    float step = (end - start) / (float)(n - 1);
    int half = n / 2;
    for (int i = 0; i < n; i++)
        out[i] = i < half ? start + step * (float)i : end - step * (float)(n - 1 - i);
}

int vdn_sigma_grid(float *sigma, int n_points, float shift) {
    float base[n_points];
    vdn_linspace_f32(base, 1.0f, 0.0f, n_points);
    float sm1 = (float)((double)shift - 1.0);
    int m = 0;
    for (int i = 0; i < n_points; i++) {
        float num = shift * base[i];
        float den = 1.0f + sm1 * base[i];
        float s = num / den;
        if (m == 0 || sigma[m - 1] != s) sigma[m++] = s;
    }
    return m;
}

/* ~10M values per NFE at the H3 size: split over vdn_parallel_for's threads; each value's
 * arithmetic is the same float32 expression whatever the split (bit-identical). */
enum { EULER_CHUNK = 1 << 16 };
typedef struct {
    float *x;
    const float *v;
    size_t n;
    float sig_t, r, one_minus_r;
} euler_job;

/* GCC's -O2 cost model leaves this loop scalar; vectorized it is the same float32 operations per
 * element (no contraction: -std=c11 keeps fp-contract off), only four or eight at a time. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("tree-vectorize")))
#endif
static void
euler_range(float *restrict x, const float *restrict v, size_t n, float sig_t, float r,
            float one_minus_r) {
    for (size_t i = 0; i < n; i++) {
        float x0 = x[i] + sig_t * v[i];
        x[i] = r * x[i] + one_minus_r * x0;
    }
}

static void euler_task(void *ctx, int c) {
    const euler_job *j = ctx;
    size_t i0 = (size_t)c * EULER_CHUNK, n = j->n - i0 < EULER_CHUNK ? j->n - i0 : EULER_CHUNK;
    euler_range(j->x + i0, j->v + i0, n, j->sig_t, j->r, j->one_minus_r);
}

void vdn_euler_step(float *x, const float *v, size_t n, float t, float sigma, float sigma_next) {
    float r = sigma_next / sigma;
    euler_job j = {x, v, n, 1.0f - t, r, 1.0f - r};
    if (n <= EULER_CHUNK) {
        euler_range(x, v, n, j.sig_t, j.r, j.one_minus_r);
        return;
    }
    vdn_parallel_for((int)((n + EULER_CHUNK - 1) / EULER_CHUNK), euler_task, &j);
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static uint64_t next_u64(vdn_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

void vdn_rng_seed(vdn_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    r->has_spare = 0;
    r->spare = 0.0;
}

/* uniform in (0, 1): 53 random bits, never 0 */
static double uniform(vdn_rng *r) {
    return ((next_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Box-Muller on one pair of uniforms; the float64 radius and angle of the sequential code. */
static void box_muller(double u1, double u2, double *c, double *s) {
    double rad = sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
    *c = rad * cos(th);
    *s = rad * sin(th);
}

/* The stream is sequential but cheap (a few ns per draw); log/sqrt/sincos are not (~40 ns per
 * pair) and depend only on their pair. So the uniforms of a block are drawn in order on this
 * thread and the pairs are transformed on vdn_parallel_for's threads: the same values, in the
 * same places, as one thread drawing pair by pair. */
enum { NOISE_BLOCK_PAIRS = 1 << 18, NOISE_TASKS = 64 };
typedef struct {
    const double *u; /* 2 per pair */
    float *out;      /* 2 per pair */
    size_t pairs;
    int tasks;
} noise_job;

static void noise_task(void *ctx, int i) {
    const noise_job *j = ctx;
    size_t p0 = j->pairs * i / j->tasks, p1 = j->pairs * (i + 1) / j->tasks;
    for (size_t p = p0; p < p1; p++) {
        double c, s;
        box_muller(j->u[2 * p], j->u[2 * p + 1], &c, &s);
        j->out[2 * p] = (float)c;
        j->out[2 * p + 1] = (float)s;
    }
}

void vdn_rng_normal(vdn_rng *r, float *out, size_t n) {
    size_t i = 0;
    if (n && r->has_spare) {
        r->has_spare = 0;
        out[i++] = (float)r->spare;
    }
    size_t pairs = (n - i) / 2;
    if (pairs) {
        size_t bp = pairs < NOISE_BLOCK_PAIRS ? pairs : NOISE_BLOCK_PAIRS;
        double *u = vdn_xmalloc(sizeof(double) * 2 * bp);
        for (size_t done = 0; done < pairs; done += bp) {
            noise_job j = {u, out + i + 2 * done, pairs - done < bp ? pairs - done : bp, 1};
            for (size_t p = 0; p < 2 * j.pairs; p++)
                u[p] = uniform(r);
            j.tasks = j.pairs < 4096 ? 1 : NOISE_TASKS;
            vdn_parallel_for(j.tasks, noise_task, &j);
        }
        free(u);
        i += 2 * pairs;
    }
    if (i < n) { /* an odd count: the sine half waits for the next call */
        double c, s, u1 = uniform(r), u2 = uniform(r); /* u1 first, as in a pair above */
        box_muller(u1, u2, &c, &s);
        out[i] = (float)c;
        r->spare = s;
        r->has_spare = 1;
    }
}

int vdn_noise_read(const struct vdn_st_file *f, int C, int F, int h, int w, int La, int ach, int nk,
                   float *video, float *audio, float *kf, int *have_kf, char *err, size_t errlen) {
    struct {
        const char *name;
        float *dst;
        int ndim;
        int64_t shape[5];
        int required;
    } want[3] = {{"noise_video", video, 4, {C, F, h, w}, 1},
                 {"noise_audio", audio, 2, {2 * (int64_t)La, ach}, 1},
                 {"noise_keyframes", kf, 5, {nk, C, 1, h, w}, 0}};
    if (have_kf) *have_kf = 0;
    for (int i = 0; i < 3; i++) {
        char shape[128] = "";
        for (int d = 0; d < want[i].ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? ", " : "",
                     (long long)want[i].shape[d]);
        const vdn_st_entry *e = vdn_st_find(f, want[i].name);
        if (!e) {
            if (!want[i].required) continue;
            return vdn_fail(err, errlen, "%s: no tensor '%s' (expected float [%s])", vdn_st_path(f),
                            want[i].name, shape);
        }
        if (i == 2 && nk == 0)
            return vdn_fail(err, errlen, "%s: tensor '%s' given but the prompt has no keyframes",
                            vdn_st_path(f), want[i].name);
        if (!vdn_dtype_is_float(e->dtype))
            return vdn_fail(err, errlen, "%s: tensor '%s' has dtype %s, expected F32, BF16 or F16",
                            vdn_st_path(f), want[i].name, vdn_dtype_name(e->dtype));
        if (vdn_st_check_shape(f, e, want[i].ndim, want[i].shape, err, errlen) != 0) return -1;
        if (vdn_st_to_f32(f, e, want[i].dst, err, errlen) != 0) return -1;
        for (int64_t j = 0; j < e->numel; j++)
            if (!isfinite(want[i].dst[j]))
                return vdn_fail(err, errlen, "%s: tensor '%s' holds a non-finite value at %lld",
                                vdn_st_path(f), want[i].name, (long long)j);
        if (i == 2 && have_kf) *have_kf = 1;
    }
    return 0;
}
