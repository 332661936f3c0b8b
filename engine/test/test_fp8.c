/* fp8 (e4m3) on the CPU oracle: the conversions, vdn_op_quantize_rows and vdn_op_linear with an
 * fp8 weight, against references written here from the format's definition (OCP e4m3fn: bias 7,
 * 3 mantissa bits, max 448, 0x7f NaN) and float64 sums of the dequantised operands; plus the
 * invariants (error within half an e4m3 step, saturation, zero rows) and the refusals. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op.h"
#include "vdn_util.h"

/* e4m3 decoded from the definition, independently of vdn_e4m3_to_f32 */
static double dec(uint8_t q) {
    const int s = q >> 7, e = (q >> 3) & 15, m = q & 7;
    if (e == 15 && m == 7) return NAN;
    const double v = e ? (1.0 + m / 8.0) * pow(2.0, e - 7) : m / 8.0 * pow(2.0, -6);
    return s ? -v : v;
}

/* the spacing of e4m3 values at magnitude a (a <= 448) */
static double e4m3_ulp(double a) {
    if (a < 0.015625) return 0.001953125; /* subnormals: 2^-9 */
    return pow(2.0, floor(log2(a)) - 3);
}

static void test_conversions(void) {
    int bad_dec = 0, bad_round_trip = 0, bad_tie = 0, bad_mid = 0;
    for (int c = 0; c < 256; c++) {
        const double v = dec((uint8_t)c);
        const float f = vdn_e4m3_to_f32((uint8_t)c);
        if (isnan(v) ? !isnan(f) : (double)f != v) bad_dec++;
        if (isnan(v)) continue;
        const uint8_t back = vdn_f32_to_e4m3(f);
        if (back != c && !(v == 0 && (back & 0x7f) == 0)) bad_round_trip++;
    }
    /* between adjacent positive codes: the exact midpoint goes to the even code (nearest even),
     * points a quarter step either side go to the nearer code */
    for (int c = 0; c < 0x7e; c++) {
        const double lo = dec((uint8_t)c), hi = dec((uint8_t)(c + 1)), mid = 0.5 * (lo + hi);
        const uint8_t even = (c & 1) ? (uint8_t)(c + 1) : (uint8_t)c;
        for (int sgn = 0; sgn < 2; sgn++) {
            const float m = (float)(sgn ? -mid : mid), sb = sgn ? 0x80 : 0;
            if (vdn_f32_to_e4m3(m) != (uint8_t)(even | (uint8_t)sb)) bad_tie++;
            const float below = (float)((sgn ? -1 : 1) * (lo + 0.25 * (hi - lo)));
            const float above = (float)((sgn ? -1 : 1) * (hi - 0.25 * (hi - lo)));
            if (vdn_f32_to_e4m3(below) != (uint8_t)(c | (uint8_t)sb) ||
                vdn_f32_to_e4m3(above) != (uint8_t)((c + 1) | (uint8_t)sb))
                bad_mid++;
        }
    }
    CHECK(bad_dec == 0, "e4m3 decode: %d of 256 codes differ from the definition", bad_dec);
    CHECK(bad_round_trip == 0, "e4m3 encode(decode(c)) != c for %d codes", bad_round_trip);
    CHECK(bad_tie == 0, "e4m3: %d midpoints not rounded to the even code", bad_tie);
    CHECK(bad_mid == 0, "e4m3: %d off-midpoint values not rounded to the nearer code", bad_mid);
    /* saturation (satfinite): past 448, infinities included, to +-448; NaN stays NaN */
    const float big[] = {448.f, 460.f, 464.f, 500.f, 1e6f, INFINITY};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        CHECK(vdn_f32_to_e4m3(big[i]) == 0x7e, "e4m3(%g) = 0x%02x, expected 0x7e (448)",
              (double)big[i], vdn_f32_to_e4m3(big[i]));
        CHECK(vdn_f32_to_e4m3(-big[i]) == 0xfe, "e4m3(%g) = 0x%02x, expected 0xfe (-448)",
              -(double)big[i], vdn_f32_to_e4m3(-big[i]));
    }
    CHECK((vdn_f32_to_e4m3(NAN) & 0x7f) == 0x7f, "e4m3(NaN) is not NaN");
    CHECK(vdn_f32_to_e4m3(1e-30f) == 0 && vdn_f32_to_e4m3(0x1p-10f) == 0 &&
              vdn_f32_to_e4m3(0x1.01p-10f) == 1,
          "e4m3 below the smallest subnormal: 2^-10 ties to 0, just above it to 2^-9");
}

/* x [rows, cols] (row 0 zero, row 1 one nonzero value, the rest normal with rows of widely
 * different magnitude and some tiny values) */
static float *make_x(int rows, int cols) {
    float *x = malloc(sizeof(float) * (size_t)rows * cols);
    for (int r = 0; r < rows; r++) {
        const double mag = pow(10.0, (r % 7) - 3);
        for (int c = 0; c < cols; c++) {
            double v = rnd() * mag;
            if (c % 5 == 3) v *= 1e-3; /* into e4m3's subnormal range relative to the row max */
            x[(size_t)r * cols + c] = r == 0 ? 0.f : r == 1 ? (c == 2 ? -3.5f : 0.f) : (float)v;
        }
    }
    return x;
}

static void test_quantize(vdn_dev *d, int rows, int cols, vdn_dtype dt) {
    float *x = make_x(rows, cols);
    /* the input as the device holds it (bf16 rounds) inside a wider parent: ld > cols */
    vdn_tensor *xp = vdn_tensor_new2(d, dt, rows, cols + 3);
    vdn_tensor xv = vdn_view_cols(xp, 1, cols);
    CHECK(vdn_tensor_set(&xv, x, VDN_DT_F32) == 0, "set: %s", vdn_dev_error(d));
    CHECK(vdn_tensor_get(&xv, x) == 0);
    vdn_tensor *q = vdn_tensor_new2(d, VDN_DT_F8_E4M3, rows, cols);
    vdn_tensor *s = vdn_tensor_new2(d, VDN_DT_F32, rows, 1);
    CHECK(vdn_op_quantize_rows(q, s, &xv) == 0, "quantize_rows: %s", vdn_dev_error(d));
    CHECK(q->scale == (const float *)s->data, "q->scale does not point at the scales");
    uint8_t *qb = malloc((size_t)rows * cols);
    float *sc = malloc(sizeof(float) * rows);
    CHECK(vdn_tensor_get_raw(q, qb) == 0 && vdn_tensor_get(s, sc) == 0);
    int bad_scale = 0, bad_err = 0, bad_zero = 0, saturated = 0;
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        float amax = 0.f;
        for (int c = 0; c < cols; c++)
            amax = fmaxf(amax, fabsf(x[(size_t)r * cols + c]));
        const float want = amax > 0.f ? amax / 448.f : 1.f;
        if (sc[r] != want) bad_scale++;
        for (int c = 0; c < cols; c++) {
            const uint8_t b = qb[(size_t)r * cols + c];
            const double v = (double)x[(size_t)r * cols + c] / sc[r], got = dec(b);
            if (amax == 0.f && b != 0) bad_zero++;
            if ((b & 0x7f) == 0x7e) saturated++;
            /* half a step of the e4m3 grid where the value lies, plus float32's rounding of
             * x / s (2^-24 relative) */
            const double err = fabs(got - v), lim = 0.5 * e4m3_ulp(fabs(got)) + fabs(v) * 0x1p-23;
            if (!(err <= lim)) bad_err++;
            if (err / e4m3_ulp(fabs(got)) > worst) worst = err / e4m3_ulp(fabs(got));
        }
    }
    CHECK(bad_scale == 0, "quantize %s [%d,%d]: %d scales != amax/448 (1 for a zero row)",
          vdn_dtype_name(dt), rows, cols, bad_scale);
    CHECK(bad_err == 0, "quantize %s [%d,%d]: %d elements off by more than half an e4m3 step",
          vdn_dtype_name(dt), rows, cols, bad_err);
    CHECK(bad_zero == 0, "quantize: %d nonzero bytes in the zero row", bad_zero);
    CHECK(sc[0] == 1.f && sc[1] == 3.5f / 448.f, "zero row scale %g, one-value row scale %g",
          (double)sc[0], (double)sc[1]);
    CHECK(qb[(size_t)cols + 2] == 0xfe, "the one-value row's max -3.5 -> 0x%02x, expected 0xfe",
          qb[(size_t)cols + 2]);
    /* each nonzero row's max maps to +-448 */
    CHECK(saturated >= rows - 1, "only %d elements at +-448 for %d nonzero rows", saturated,
          rows - 1);
    printf("quantize %s [%d,%d]: worst error %.3f of an e4m3 step, %d at +-448\n",
           vdn_dtype_name(dt), rows, cols, worst, saturated);
    vdn_tensor_free(q), vdn_tensor_free(s), vdn_tensor_free(xp);
    free(x), free(qb), free(sc);
}

/* vdn_op_linear with an fp8 weight against sx sw sum(x8 w8) + b in float64, the operands
 * dequantised here from the quantised bytes (x quantised through the op by the same rule) */
static void test_linear(vdn_dev *d, int rows, int in, int out, vdn_dtype xdt, int bias, vdn_act act,
                        int accumulate) {
    char what[128];
    snprintf(what, sizeof what, "fp8 linear %s [%d,%d]x[%d,%d]^T bias %d act %d%s",
             vdn_dtype_name(xdt), rows, in, out, in, bias, (int)act, accumulate ? " +=" : "");
    float *xh = make_x(rows, in), *wh = malloc(sizeof(float) * (size_t)out * in);
    float *bh = malloc(sizeof(float) * out), *y0 = malloc(sizeof(float) * (size_t)rows * out);
    fill(wh, (size_t)out * in, 1.0 / sqrt(in));
    for (int o = 0; o < out; o++) /* a zero weight row too */
        if (o == 1)
            for (int i = 0; i < in; i++)
                wh[(size_t)o * in + i] = 0.f;
    fill(bh, out, 0.5);
    fill(y0, (size_t)rows * out, 1.0);
    vdn_tensor *xp = vdn_tensor_new2(d, xdt, rows, in + 2),
               *w = vdn_tensor_new2(d, VDN_DT_F32, out, in);
    vdn_tensor xv = vdn_view_cols(xp, 2, in);
    vdn_tensor *w8 = vdn_tensor_new2(d, VDN_DT_F8_E4M3, out, in),
               *sw = vdn_tensor_new2(d, VDN_DT_F32, out, 1);
    vdn_tensor *x8 = vdn_tensor_new2(d, VDN_DT_F8_E4M3, rows, in),
               *sx = vdn_tensor_new2(d, VDN_DT_F32, rows, 1);
    vdn_tensor *b = vdn_tensor_new2(d, VDN_DT_F32, 1, out);
    vdn_tensor *yp = vdn_tensor_new2(d, VDN_DT_F32, rows, out + 5), yv = vdn_view_cols(yp, 1, out);
    vdn_tensor *yf = vdn_tensor_new2(d, VDN_DT_F32, rows, out);
    CHECK(vdn_tensor_fill(yp, 7.0) == 0); /* a sentinel around the output view */
    CHECK(vdn_tensor_set(&xv, xh, VDN_DT_F32) == 0 && vdn_tensor_get(&xv, xh) == 0 &&
          vdn_tensor_set(w, wh, VDN_DT_F32) == 0 && vdn_tensor_set(b, bh, VDN_DT_F32) == 0 &&
          vdn_tensor_set(&yv, y0, VDN_DT_F32) == 0 && vdn_tensor_set(yf, y0, VDN_DT_F32) == 0);
    CHECK(vdn_op_quantize_rows(w8, sw, w) == 0 && vdn_op_quantize_rows(x8, sx, &xv) == 0,
          "quantize: %s", vdn_dev_error(d));
    CHECK(vdn_op_linear(&yv, &xv, w8, bias ? b : NULL, act, accumulate) == 0, "%s: %s", what,
          vdn_dev_error(d));
    CHECK(vdn_op_linear(yf, &xv, w, bias ? b : NULL, act, accumulate) == 0, "%s (f32): %s", what,
          vdn_dev_error(d));
    uint8_t *xq = malloc((size_t)rows * in), *wq = malloc((size_t)out * in);
    float *sxh = malloc(sizeof(float) * rows), *swh = malloc(sizeof(float) * out);
    float *got = malloc(sizeof(float) * (size_t)rows * out),
          *f32 = malloc(sizeof(float) * (size_t)rows * out);
    CHECK(vdn_tensor_get_raw(x8, xq) == 0 && vdn_tensor_get_raw(w8, wq) == 0 &&
          vdn_tensor_get(sx, sxh) == 0 && vdn_tensor_get(sw, swh) == 0 &&
          vdn_tensor_get(&yv, got) == 0 && vdn_tensor_get(yf, f32) == 0);
    double *ref = malloc(sizeof(double) * (size_t)rows * out);
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            double acc = 0;
            for (int i = 0; i < in; i++)
                acc += dec(xq[(size_t)r * in + i]) * dec(wq[(size_t)o * in + i]);
            double v = (double)sxh[r] * swh[o] * acc + (bias ? bh[o] : 0.0);
            v = (float)v; /* the product's float32 value, as for every dtype */
            if (act == VDN_ACT_SILU) v = v / (1 + exp(-v));
            if (accumulate) v = (float)(y0[(size_t)r * out + o] + (float)v);
            ref[(size_t)r * out + o] = v;
        }
    const double e = rel_err(ref, got, (size_t)rows * out);
    /* the fp8 result against the float32 weights' product: the quantisation's own error, which
     * must show (the fp8 path really ran) and stay within what e4m3's 3 mantissa bits allow: each
     * operand element off by at most 2^-4 relative (half a step), so a product term by at most
     * ~1.3e-1, and a sum of independent errors by less in L2 (a few % measured) */
    double *f64 = malloc(sizeof(double) * (size_t)rows * out);
    for (size_t i = 0; i < (size_t)rows * out; i++)
        f64[i] = f32[i];
    const double eq = rel_err(f64, got, (size_t)rows * out);
    printf("%-60s vs float64 of the dequantised operands %.2e, vs unquantised %.2e\n", what, e, eq);
    CHECK(e <= 1e-6, "%s: %.3e from the float64 reference of the quantised operands", what, e);
    CHECK(eq > 1e-3 && eq < 1.3e-1, "%s: %.3e from the unquantised product (expected 1e-3..0.13)",
          what, eq);
    /* the parent's columns outside the view untouched */
    float *all = malloc(sizeof(float) * (size_t)rows * (out + 5));
    CHECK(vdn_tensor_get(yp, all) == 0);
    int outside = 0;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < out + 5; j++)
            outside += (j < 1 || j > out) && all[(size_t)r * (out + 5) + j] != 7.f;
    free(all);
    CHECK(outside == 0, "%s: %d elements outside the output view changed", what, outside);
    vdn_tensor_free(xp), vdn_tensor_free(w), vdn_tensor_free(w8), vdn_tensor_free(sw);
    vdn_tensor_free(x8), vdn_tensor_free(sx), vdn_tensor_free(b), vdn_tensor_free(yp);
    vdn_tensor_free(yf);
    free(xh), free(wh), free(bh), free(y0), free(xq), free(wq), free(sxh), free(swh), free(got);
    free(f32), free(ref), free(f64);
}

static void test_refusals(vdn_dev *d) {
    vdn_tensor *x = vdn_tensor_new2(d, VDN_DT_F32, 4, 8), *w = vdn_tensor_new2(d, VDN_DT_F32, 6, 8);
    vdn_tensor *w8 = vdn_tensor_new2(d, VDN_DT_F8_E4M3, 6, 8),
               *s = vdn_tensor_new2(d, VDN_DT_F32, 6, 1);
    vdn_tensor *s5 = vdn_tensor_new2(d, VDN_DT_F32, 5, 1),
               *y = vdn_tensor_new2(d, VDN_DT_F32, 4, 6);
    vdn_tensor *xb = vdn_tensor_new2(d, VDN_DT_BF16, 6, 8);
    CHECK(vdn_tensor_fill(x, 1.0) == 0 && vdn_tensor_fill(w, 0.5) == 0);
#define REFUSE(call, needle)                                                                       \
    CHECK((call) == -1 && strstr(vdn_dev_error(d), needle), "%s: message '%s', expected '%s'",     \
          #call, vdn_dev_error(d), needle)
    REFUSE(vdn_op_linear(y, x, w8, NULL, VDN_ACT_NONE, 0), "without per-row scales");
    REFUSE(vdn_op_quantize_rows(w8, s5, w), "expected 6 contiguous F32 values");
    REFUSE(vdn_op_quantize_rows(xb, s, w), "expected F8_E4M3");
    REFUSE(vdn_op_quantize_rows(w8, s, x), "expected [4, 8]");
    REFUSE(vdn_tensor_set(w8, (float[48]){0}, VDN_DT_F32), "raw F8_E4M3 bytes");
    REFUSE(vdn_tensor_fill(w8, 0.0), "fp8 tensors are written by vdn_op_quantize_rows");
    REFUSE(vdn_tensor_get(w8, (float[48]){0}), "not a float tensor");
    REFUSE(vdn_tensor_copy(w, w8), "fp8 copies only to fp8");
    /* a float weight carrying scales is refused too */
    CHECK(vdn_op_quantize_rows(w8, s, w) == 0);
    vdn_tensor wf = *w;
    wf.scale = w8->scale;
    CHECK(vdn_op_linear(y, x, &wf, NULL, VDN_ACT_NONE, 0) == -1 &&
              strstr(vdn_dev_error(d), "only F8_E4M3 weights carry scales"),
          "float weight with scales: '%s'", vdn_dev_error(d));
    /* and the scales follow a row view of the weight */
    vdn_tensor wr = vdn_view_rows(w8, 2, 3);
    CHECK(wr.scale == w8->scale + 2, "view_rows of an fp8 weight moves its scales");
    vdn_tensor_free(x), vdn_tensor_free(w), vdn_tensor_free(w8), vdn_tensor_free(s);
    vdn_tensor_free(s5), vdn_tensor_free(y), vdn_tensor_free(xb);
}

int main(void) {
    char err[256];
    vdn_dev *d = vdn_dev_open("cpu", 0, 2, err, sizeof err);
    if (!d) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    test_conversions();
    test_quantize(d, 9, 37, VDN_DT_F32);
    test_quantize(d, 12, 64, VDN_DT_BF16);
    test_linear(d, 7, 40, 9, VDN_DT_F32, 1, VDN_ACT_NONE, 0);
    test_linear(d, 13, 64, 48, VDN_DT_BF16, 0, VDN_ACT_NONE, 1);
    test_linear(d, 5, 33, 17, VDN_DT_F32, 1, VDN_ACT_SILU, 0);
    test_refusals(d);
    vdn_dev_close(d);
    return test_done("engine_fp8");
}
