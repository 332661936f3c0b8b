/* Tiny test helpers for engine tests: a seeded float64 random source and tolerance checks. */
#ifndef VDN_TEST_CHECK_H
#define VDN_TEST_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../ops/test/check.h"

static uint64_t g_rs = 0x1234567887654321ULL;

static inline double rnd(void) { /* uniform [-1, 1) */
    g_rs ^= g_rs << 13;
    g_rs ^= g_rs >> 7;
    g_rs ^= g_rs << 17;
    return (double)(g_rs >> 11) / 4503599627370496.0 - 1.0;
}

static inline void fill(float *x, size_t n, double scale) {
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(rnd() * scale);
}

/* relative RMS error ||ref - out|| / ||ref|| against a float64 reference */
static inline double rel_err(const double *ref, const float *out, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (ref[i] - out[i]) * (ref[i] - out[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#define CHECK_REL(ref, out, n, tol, what)                                                          \
    do {                                                                                           \
        double e_ = rel_err(ref, out, n);                                                          \
        CHECK(e_ <= (tol), "%s: relative error %.3g > %.3g", what, e_, (double)(tol));             \
    } while (0)

#define CHECK_NEAR(a, b, tol, what)                                                                \
    CHECK(fabs((double)(a) - (double)(b)) <= (tol), "%s: %.10g vs %.10g", what, (double)(a),       \
          (double)(b))

static inline int test_done(const char *name) {
    if (failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

#endif
