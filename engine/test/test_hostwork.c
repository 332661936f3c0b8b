/* The render loop's host work after its speed-ups gives the same bits as the plain sequential
 * code, written again here independently:
 *  - noise: xoshiro256** seeded by splitmix64, Box-Muller pair by pair (cos, then sin), over
 *    calls of odd and even lengths (the sine half carries over) and blocks larger than the
 *    engine's transform block, at 1, 2, 3 and 8 threads;
 *  - Euler: threaded chunks and the vectorized loop equal the scalar float32 expression;
 *  - per-row timesteps, rewritten only when a row group's index moves, equal a fresh per-row
 *    computation after every step of sequences that merge and split the groups. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "sampler.h"
#include "seq.h"
#include "vdn_util.h"

/* ---- independent sequential noise ---- */
typedef struct {
    uint64_t s[4];
    int spare_ok;
    double spare;
} ref_rng;

static uint64_t ref_sm64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t ref_next(ref_rng *r) {
    uint64_t *s = r->s, res = s[1] * 5;
    res = ((res << 7) | (res >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return res;
}

static double ref_u(ref_rng *r) {
    return ((double)(ref_next(r) >> 11) + 0.5) / 9007199254740992.0;
}

static float ref_normal(ref_rng *r) {
    if (r->spare_ok) {
        r->spare_ok = 0;
        return (float)r->spare;
    }
    double a = ref_u(r);
    double b = ref_u(r);
    double m = sqrt(-2.0 * log(a));
    r->spare = m * sin(2.0 * M_PI * b);
    r->spare_ok = 1;
    return (float)(m * cos(2.0 * M_PI * b));
}

static void check_noise(int threads) {
    vdn_ops_set_threads(threads);
    const size_t total = 1300001; /* crosses the engine's 2^18-pair block twice */
    const size_t cuts[] = {0, 1, 4, 7, 4096, 8193, 600001, 600002, total};
    float *got = vdn_xmalloc(sizeof(float) * total), *want = vdn_xmalloc(sizeof(float) * total);
    const uint64_t seeds[2] = {0, 0xdeadbeefcafef00dULL};
    for (int si = 0; si < 2; si++) {
        vdn_rng r;
        vdn_rng_seed(&r, seeds[si]);
        for (size_t c = 0; c + 1 < sizeof cuts / sizeof *cuts; c++)
            vdn_rng_normal(&r, got + cuts[c], cuts[c + 1] - cuts[c]);
        ref_rng q = {{0}, 0, 0};
        uint64_t x = seeds[si];
        for (int i = 0; i < 4; i++)
            q.s[i] = ref_sm64(&x);
        for (size_t i = 0; i < total; i++)
            want[i] = ref_normal(&q);
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < total; i++)
            if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && !bad++) first = i;
        CHECK(bad == 0,
              "noise at %d threads, seed %d: %zu values differ, first at %zu (%.9g vs %.9g)",
              threads, si, bad, first, bad ? got[first] : 0.0, bad ? want[first] : 0.0);
    }
    free(got);
    free(want);
}

static void check_euler(int threads) {
    vdn_ops_set_threads(threads);
    const size_t n = 1000003; /* not a multiple of the chunk or of a vector */
    float *x = vdn_xmalloc(sizeof(float) * n), *v = vdn_xmalloc(sizeof(float) * n);
    float *ref = vdn_xmalloc(sizeof(float) * n);
    fill(x, n, 3.0);
    fill(v, n, 2.0);
    const float t = 0.2831f, sigma = 1.0f - t, sigma_next = 0.51234f;
    const float r = sigma_next / sigma, omr = 1.0f - r;
    for (size_t i = 0; i < n; i++) {
        volatile float x0 = x[i] + sigma * v[i]; /* volatile: no contraction into an FMA here */
        volatile float a = r * x[i];
        volatile float b = omr * x0;
        ref[i] = a + b;
    }
    vdn_euler_step(x, v, n, t, sigma, sigma_next);
    CHECK(memcmp(x, ref, sizeof(float) * n) == 0, "euler at %d threads differs from scalar",
          threads);
    free(x), free(v), free(ref);
}

static void check_timesteps(void) {
    vdn_config c = {.patch_t = 1, .patch_h = 2, .patch_w = 2};
    int8_t tags[5] = {1, 1, 0, 1, 1};
    int anchors[2] = {VDN_KF_FIRST, VDN_KF_LAST};
    for (int nk = 0; nk <= 2; nk += 2)
        for (int La = 0; La <= 3; La += 3) {
            vdn_seq s;
            char err[VDN_ERR_LEN];
            CHECK(vdn_seq_build(&s, &c, tags, 5, 3, 4, 6, La, nk, anchors, err, sizeof err) == 0,
                  "build: %s", err);
            /* merges and splits: t_a = t_v, t_v above 0.999 (keyframes join video), back apart */
            const float steps[][2] = {{0.0f, 0.0f},   {0.2f, 0.5f},    {0.5f, 0.2f},
                                      {0.7f, 0.7f},   {0.9995f, 0.3f}, {0.9995f, 0.9995f},
                                      {0.3f, 0.999f}, {0.999f, 0.1f},  {0.6f, 0.4f}};
            for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
                float tv = steps[k][0], ta = steps[k][1];
                vdn_seq_timesteps(&s, tv, ta);
                const vdn_layout *L = &s.lay;
                for (int row = 0; row < L->n_rows; row++) {
                    float want = row >= L->cond_start && row < L->audio_start
                                     ? (tv > 0.999f ? tv : 0.999f)
                                 : row >= L->audio_start && row < L->video_start ? ta
                                                                                 : tv;
                    int ix = s.t_index[row];
                    CHECK(ix >= 0 && ix < s.n_t && s.t_values[ix] == want,
                          "nk %d La %d step %zu row %d: index %d (value %g), want %g", nk, La, k,
                          row, ix, ix >= 0 && ix < s.n_t ? s.t_values[ix] : -1.0, want);
                }
                for (int i = 1; i < s.n_t; i++)
                    CHECK(s.t_values[i - 1] < s.t_values[i], "unique values not ascending");
            }
            vdn_seq_free(&s);
        }
}

int main(void) {
    const int threads[4] = {1, 2, 3, 8};
    for (int i = 0; i < 4; i++) {
        check_noise(threads[i]);
        check_euler(threads[i]);
    }
    check_timesteps();
    return test_done("engine_hostwork");
}
