/* Scheduler and noise; see sched.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

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

void vdn_euler_step(float *x, const float *v, size_t n, float t, float sigma, float sigma_next) {
    float sig_t = 1.0f - t;
    float r = sigma_next / sigma;
    float one_minus_r = 1.0f - r;
    for (size_t i = 0; i < n; i++) {
        float x0 = x[i] + sig_t * v[i];
        x[i] = r * x[i] + one_minus_r * x0;
    }
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

void vdn_rng_normal(vdn_rng *r, float *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (r->has_spare) {
            r->has_spare = 0;
            out[i] = (float)r->spare;
            continue;
        }
        double u1 = uniform(r), u2 = uniform(r);
        double rad = sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
        out[i] = (float)(rad * cos(th));
        r->spare = rad * sin(th);
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
