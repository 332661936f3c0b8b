/* Scheduler and noise; see sched.h. */
#include <math.h>

#include "sampler.h"

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
