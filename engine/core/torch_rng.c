/* torch.randn on the CPU, bit for bit (torch_rng.h says what torch does). Compiled with
 * -ffp-contract=off: every fused multiply-add below is an explicit fmaf, placed where GCC fuses
 * the pair in torch's AVX2 kernel, and nothing else may be fused. */
#include "torch_rng.h"

#include <math.h>
#include <string.h>

#include "vdn_util.h"

#define MT_N 624
#define MT_M 397

void vdn_mt19937_seed(vdn_mt19937 *g, uint64_t seed) {
    g->state[0] = (uint32_t)(seed & 0xffffffffu);
    for (int i = 1; i < MT_N; i++)
        g->state[i] = 1812433253u * (g->state[i - 1] ^ (g->state[i - 1] >> 30)) + (uint32_t)i;
    g->next = MT_N;
}

static void mt_twist(vdn_mt19937 *g) {
    for (int i = 0; i < MT_N; i++) {
        const uint32_t y = (g->state[i] & 0x80000000u) | (g->state[(i + 1) % MT_N] & 0x7fffffffu);
        g->state[i] = g->state[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    g->next = 0;
}

uint32_t vdn_mt19937_next(vdn_mt19937 *g) {
    if (g->next >= MT_N) mt_twist(g);
    uint32_t y = g->state[g->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* uniform_real_distribution<float>(0, 1): the low 24 bits over 2^24 (exact in float) */
static float uniform01(vdn_mt19937 *g) {
    return (float)(vdn_mt19937_next(g) & 0xffffffu) * 0x1.0p-24f;
}

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* avx_mathfun's log256_ps on one lane (Cephes logf: exponent split, a degree-8 polynomial on the
 * mantissa in [sqrt(1/2) - 1, sqrt(2) - 1)), the multiply-adds fused as torch's build fuses them.
 * Only called with x in (0, 1]. */
static float cephes_log(float x) {
    if (x < 0x1.0p-126f) x = 0x1.0p-126f; /* the smallest normal float */
    const int32_t ex = (int32_t)(f_bits(x) >> 23) - 0x7f;
    x = bits_f((f_bits(x) & ~0x7f800000u) | f_bits(0.5f)); /* mantissa in [0.5, 1) */
    float e = (float)ex + 1.0f;
    const int below = x < 0.707106781186547524f;
    const float keep = below ? x : 0.0f;
    x = x - 1.0f;
    if (below) e = e - 1.0f;
    x = x + keep;
    const float z = x * x;
    float y = 7.0376836292E-2f;
    y = fmaf(y, x, -1.1514610310E-1f);
    y = fmaf(y, x, 1.1676998740E-1f);
    y = fmaf(y, x, -1.2420140846E-1f);
    y = fmaf(y, x, 1.4249322787E-1f);
    y = fmaf(y, x, -1.6668057665E-1f);
    y = fmaf(y, x, 2.0000714765E-1f);
    y = fmaf(y, x, -2.4999993993E-1f);
    y = fmaf(y, x, 3.3333331174E-1f);
    y = y * x;
    y = fmaf(y, z, e * -2.12194440e-4f);
    y = fmaf(z, -0.5f, y);
    x = x + y;
    return fmaf(e, 0.693359375f, x);
}

/* avx_mathfun's sincos256_ps on one lane (Cephes sinf/cosf: reduction by multiples of pi/4 in
 * three parts, then the sine or cosine polynomial by octant), fused as torch's build fuses it. */
static void cephes_sincos(float a, float *s, float *c) {
    uint32_t sign_sin = f_bits(a) & 0x80000000u;
    float x = fabsf(a);
    int32_t j = (int32_t)(x * 1.27323954473516f); /* 4 / pi, truncated */
    j = (j + 1) & ~1;
    const float y = (float)j;
    sign_sin ^= (uint32_t)(j & 4) << 29;
    const uint32_t sign_cos = (uint32_t)(~(j - 2) & 4) << 29;
    const int sine_poly = (j & 2) == 0;
    x = fmaf(y, -0.78515625f, x);
    x = fmaf(y, -2.4187564849853515625e-4f, x);
    x = fmaf(y, -3.77489497744594108e-8f, x);
    const float z = x * x;
    float yc = fmaf(2.443315711809948E-005f, z, -1.388731625493765E-003f);
    yc = fmaf(yc, z, 4.166664568298827E-002f);
    yc = yc * z;
    yc = fmaf(yc, z, -(z * 0.5f));
    yc = yc + 1.0f;
    float ys = fmaf(-1.9515295891E-4f, z, 8.3321608736E-3f);
    ys = fmaf(ys, z, -1.6666654611E-1f);
    ys = ys * z;
    ys = fmaf(ys, x, x);
    *s = bits_f(f_bits(sine_poly ? ys : yc) ^ sign_sin);
    *c = bits_f(f_bits(sine_poly ? yc : ys) ^ sign_cos);
}

/* Box-Muller on one block of 16 uniforms, in place (pairs j, j + 8) */
static void box_muller16(float *d, vdn_torch_randn_path path) {
    for (int j = 0; j < 8; j++) {
        const float u1 = 1.0f - d[j], u2 = d[j + 8];
        if (path == VDN_TORCH_RANDN_AVX2) {
            const float radius = sqrtf(-2.0f * cephes_log(u1));
            const float two_pi = (float)(2.0 * M_PI);
            float s, c;
            cephes_sincos(two_pi * u2, &s, &c);
            d[j] = radius * c;
            d[j + 8] = radius * s;
        } else {
            const float radius = sqrtf(-2.0f * logf(u1));
            const float theta = (float)(2.0 * M_PI * (double)u2);
            d[j] = radius * cosf(theta);
            d[j + 8] = radius * sinf(theta);
        }
    }
}

int vdn_torch_randn(float *out, int64_t n, uint64_t seed, vdn_torch_randn_path path, char *err,
                    size_t errlen) {
    if (n < 16)
        return vdn_fail(err, errlen,
                        "torch randn: %lld values requested; only draws of 16 or more (torch's "
                        "normal_fill) are reproduced",
                        (long long)n);
    if (path != VDN_TORCH_RANDN_SCALAR && path != VDN_TORCH_RANDN_AVX2)
        return vdn_fail(err, errlen, "torch randn: unknown kernel path %d", (int)path);
    vdn_mt19937 g;
    vdn_mt19937_seed(&g, seed);
    for (int64_t i = 0; i < n; i++)
        out[i] = uniform01(&g);
    for (int64_t i = 0; i + 16 <= n; i += 16)
        box_muller16(out + i, path);
    if (n % 16) { /* torch redraws the last 16 and transforms them again */
        float *tail = out + n - 16;
        for (int i = 0; i < 16; i++)
            tail[i] = uniform01(&g);
        box_muller16(tail, path);
    }
    return 0;
}

const char *vdn_torch_randn_path_name(vdn_torch_randn_path path) {
    return path == VDN_TORCH_RANDN_AVX2 ? "avx2" : "scalar";
}

int vdn_torch_randn_path_parse(const char *name, vdn_torch_randn_path *path) {
    if (!strcmp(name, "scalar"))
        *path = VDN_TORCH_RANDN_SCALAR;
    else if (!strcmp(name, "avx2"))
        *path = VDN_TORCH_RANDN_AVX2;
    else
        return -1;
    return 0;
}
