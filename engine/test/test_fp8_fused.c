/* The fused fp8 producers on the CPU oracle (op.h vdn_op_rmsnorm_quant,
 * vdn_op_linear_swiglu_quant) and vdn_op_linear with an already-quantised e4m3 x, against
 * float64 computations written here from the definitions: the RMSNorm and the fp8 Linear in
 * float64 rounded once to float32, SwiGLU in float64 rounded once, then the row rule with an
 * e4m3 encoder of our own (nearest code of the OCP e4m3fn grid, ties to the even code, saturated
 * at 448). The scales must match exactly (amax / 448 in float32 is exact arithmetic on equal
 * float32 values) and so must every byte. Plus the invariants that make the fusion safe (each op
 * gives the unfused sequence's bytes) and the front end's refusals. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op.h"
#include "vdn_util.h"

/* e4m3 decoded from the definition (bias 7, 3 mantissa bits; 0x7f NaN) */
static double dec(uint8_t q) {
    const int s = q >> 7, e = (q >> 3) & 15, m = q & 7;
    if (e == 15 && m == 7) return NAN;
    const double v = e ? (1.0 + m / 8.0) * pow(2.0, e - 7) : m / 8.0 * pow(2.0, -6);
    return s ? -v : v;
}

/* the nearest e4m3 code to v (ties to the even code, |v| past 448 saturates), by search */
static uint8_t enc(float v) {
    const double a = fabs((double)v);
    int best = 0;
    for (int c = 1; c <= 0x7e; c++) {
        const double d = fabs(dec((uint8_t)c) - a), db = fabs(dec((uint8_t)best) - a);
        if (d < db || (d == db && (c & 1) == 0)) best = c;
    }
    return (uint8_t)(best | (signbit(v) ? 0x80 : 0)); /* a zero keeps its sign, as cvt's */
}

/* the row rule on float32 values h[0..n): scale, then bytes */
static float ref_quant_row(const float *h, int64_t n, uint8_t *q) {
    float amax = 0.f;
    for (int64_t c = 0; c < n; c++)
        amax = fmaxf(amax, fabsf(h[c]));
    const float s = amax > 0.f ? amax / 448.f : 1.f;
    for (int64_t c = 0; c < n; c++)
        q[c] = enc(h[c] / s);
    return s;
}

/* rows for the tests: row 0 zero, row 1 large (1e4), row 2 tiny (1e-4), the rest spread */
static float *make_rows(int rows, int cols) {
    float *x = malloc(sizeof(float) * (size_t)rows * cols);
    for (int r = 0; r < rows; r++) {
        const double mag = r == 0 ? 0.0 : r == 1 ? 1e4 : r == 2 ? 1e-4 : pow(10.0, r % 5 - 2.0);
        for (int c = 0; c < cols; c++)
            x[(size_t)r * cols + c] = (float)(mag * rnd());
    }
    return x;
}

/* q and scale of `rows` rows against the reference's, exactly; returns the differences */
static int64_t diff_q(vdn_tensor *q, vdn_tensor *sc, const uint8_t *rq, const float *rs,
                      int64_t rows, int64_t cols, int64_t *bad_scales) {
    uint8_t *b = malloc((size_t)(rows * cols));
    float *s = malloc(sizeof(float) * (size_t)rows);
    CHECK(vdn_tensor_get_raw(q, b) == 0 && vdn_tensor_get(sc, s) == 0);
    int64_t bad = 0;
    *bad_scales = 0;
    for (int64_t i = 0; i < rows * cols; i++)
        bad += b[i] != rq[i];
    for (int64_t r = 0; r < rows; r++)
        *bad_scales += memcmp(&s[r], &rs[r], sizeof(float)) != 0;
    free(b), free(s);
    return bad;
}

static void test_rmsnorm_quant(vdn_dev *d, int rows, int cols, vdn_dtype dt, int with_w) {
    const double eps = 1e-6;
    float *x = make_rows(rows, cols), *w = malloc(sizeof(float) * cols);
    for (int c = 0; c < cols; c++)
        w[c] = (float)(1.0 + 0.5 * rnd());
    /* x as the device holds it, a view inside a wider parent */
    vdn_tensor *xp = vdn_tensor_new2(d, dt, rows, cols + 2), *wt = vdn_tensor_new2(d, dt, 1, cols);
    vdn_tensor xv = vdn_view_cols(xp, 1, cols);
    CHECK(vdn_tensor_set(&xv, x, VDN_DT_F32) == 0 && vdn_tensor_get(&xv, x) == 0 &&
          vdn_tensor_set(wt, w, VDN_DT_F32) == 0 && vdn_tensor_get(wt, w) == 0);
    vdn_tensor *q = vdn_tensor_new2(d, VDN_DT_F8_E4M3, rows, cols),
               *sc = vdn_tensor_new2(d, VDN_DT_F32, rows, 1);
    CHECK(vdn_op_rmsnorm_quant(q, sc, &xv, with_w ? wt : NULL, eps) == 0, "rmsnorm_quant: %s",
          vdn_dev_error(d));
    CHECK(q->scale == (const float *)sc->data, "rmsnorm_quant: q->scale not set");
    /* float64: h = x / sqrt(mean x^2 + eps) * w, rounded once to float32 */
    uint8_t *rq = malloc((size_t)rows * cols);
    float *rs = malloc(sizeof(float) * rows), *h = malloc(sizeof(float) * cols);
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int c = 0; c < cols; c++)
            ss += (double)x[(size_t)r * cols + c] * x[(size_t)r * cols + c];
        const double inv = 1.0 / sqrt(ss / cols + eps);
        for (int c = 0; c < cols; c++)
            h[c] = (float)((double)x[(size_t)r * cols + c] * inv * (with_w ? w[c] : 1.0));
        rs[r] = ref_quant_row(h, cols, rq + (size_t)r * cols);
    }
    int64_t bad_s = 0;
    const int64_t bad = diff_q(q, sc, rq, rs, rows, cols, &bad_s);
    printf("rmsnorm_quant %s [%d,%d]%s: %lld of %lld bytes, %lld scales differ from float64\n",
           vdn_dtype_name(dt), rows, cols, with_w ? " w" : "", (long long)bad,
           (long long)rows * cols, (long long)bad_s);
    CHECK(bad == 0 && bad_s == 0, "rmsnorm_quant: %lld bytes, %lld scales differ", (long long)bad,
          (long long)bad_s);
    CHECK(rs[0] == 1.f, "the zero row's scale %g, expected 1", (double)rs[0]);
    /* the unfused sequence (rmsnorm into float32, quantize_rows) gives the same bytes */
    vdn_tensor *y = vdn_tensor_new2(d, VDN_DT_F32, rows, cols),
               *q2 = vdn_tensor_new2(d, VDN_DT_F8_E4M3, rows, cols),
               *s2 = vdn_tensor_new2(d, VDN_DT_F32, rows, 1);
    CHECK(vdn_op_rmsnorm(y, &xv, with_w ? wt : NULL, eps, NULL, NULL, NULL) == 0 &&
          vdn_op_quantize_rows(q2, s2, y) == 0);
    float *s2h = malloc(sizeof(float) * rows);
    uint8_t *q2h = malloc((size_t)rows * cols);
    CHECK(vdn_tensor_get_raw(q2, q2h) == 0 && vdn_tensor_get(s2, s2h) == 0);
    int64_t bad_s2 = 0;
    CHECK(diff_q(q, sc, q2h, s2h, rows, cols, &bad_s2) == 0 && bad_s2 == 0,
          "rmsnorm_quant differs from rmsnorm + quantize_rows");
    vdn_tensor_free(xp), vdn_tensor_free(wt), vdn_tensor_free(q), vdn_tensor_free(sc);
    vdn_tensor_free(y), vdn_tensor_free(q2), vdn_tensor_free(s2);
    free(x), free(w), free(rq), free(rs), free(h), free(s2h), free(q2h);
}

/* linear_swiglu_quant with x float (quantised inside) or e4m3 (x8 given), against float64 from
 * the quantised bytes: h = float32(sx sw sum x8 w8 + b), y = float32(h_v silu(h_g)), the rule */
static void test_linear_swiglu_quant(vdn_dev *d, int rows, int in, int f, int x_e4m3, int bias) {
    const int out = 2 * f;
    float *x = make_rows(rows, in), *w = malloc(sizeof(float) * (size_t)out * in);
    float *b = malloc(sizeof(float) * out);
    fill(w, (size_t)out * in, 1.0 / sqrt(in));
    fill(b, out, 0.5);
    vdn_tensor *xt = vdn_tensor_new2(d, VDN_DT_F32, rows, in), *wt;
    vdn_tensor *bt = vdn_tensor_new2(d, VDN_DT_F32, 1, out), *w8 = NULL, *sw = NULL;
    wt = vdn_tensor_new2(d, VDN_DT_F32, out, in);
    CHECK(vdn_tensor_set(xt, x, VDN_DT_F32) == 0 && vdn_tensor_set(wt, w, VDN_DT_F32) == 0 &&
          vdn_tensor_set(bt, b, VDN_DT_F32) == 0);
    CHECK(vdn_quantize_weight_fp8(wt, &w8, &sw) == 0, "%s", vdn_dev_error(d));
    vdn_tensor *x8 = vdn_tensor_new2(d, VDN_DT_F8_E4M3, rows, in),
               *sx = vdn_tensor_new2(d, VDN_DT_F32, rows, 1);
    CHECK(vdn_op_quantize_rows(x8, sx, xt) == 0);
    vdn_tensor *q = vdn_tensor_new2(d, VDN_DT_F8_E4M3, rows, f),
               *sc = vdn_tensor_new2(d, VDN_DT_F32, rows, 1);
    CHECK(vdn_op_linear_swiglu_quant(q, sc, x_e4m3 ? x8 : xt, w8, bias ? bt : NULL) == 0,
          "linear_swiglu_quant: %s", vdn_dev_error(d));
    CHECK(q->scale == (const float *)sc->data, "linear_swiglu_quant: q->scale not set");
    uint8_t *xq = malloc((size_t)rows * in), *wq = malloc((size_t)out * in);
    float *sxh = malloc(sizeof(float) * rows), *swh = malloc(sizeof(float) * out);
    CHECK(vdn_tensor_get_raw(x8, xq) == 0 && vdn_tensor_get_raw(w8, wq) == 0 &&
          vdn_tensor_get(sx, sxh) == 0 && vdn_tensor_get(sw, swh) == 0);
    uint8_t *rq = malloc((size_t)rows * f);
    float *rs = malloc(sizeof(float) * rows), *h = malloc(sizeof(float) * out),
          *y = malloc(sizeof(float) * f);
    for (int r = 0; r < rows; r++) {
        for (int o = 0; o < out; o++) {
            double acc = 0;
            for (int i = 0; i < in; i++)
                acc += dec(xq[(size_t)r * in + i]) * dec(wq[(size_t)o * in + i]);
            h[o] = (float)((double)sxh[r] * swh[o] * acc + (bias ? b[o] : 0.0));
        }
        for (int c = 0; c < f; c++) {
            const double g = h[f + c];
            y[c] = (float)(h[c] * (g / (1.0 + exp(-g))));
        }
        rs[r] = ref_quant_row(y, f, rq + (size_t)r * f);
    }
    int64_t bad_s = 0;
    const int64_t bad = diff_q(q, sc, rq, rs, rows, f, &bad_s);
    printf("linear_swiglu_quant %s x [%d,%d] f %d%s: %lld of %lld bytes, %lld scales differ from "
           "float64\n",
           x_e4m3 ? "e4m3" : "f32", rows, in, f, bias ? " b" : "", (long long)bad,
           (long long)rows * f, (long long)bad_s);
    CHECK(bad == 0 && bad_s == 0, "linear_swiglu_quant: %lld bytes, %lld scales differ",
          (long long)bad, (long long)bad_s);
    if (!bias) CHECK(rs[0] == 1.f, "the zero row's scale %g, expected 1", (double)rs[0]);
    /* an e4m3 x in linear: the same output as the float x it was quantised from, bit for bit */
    vdn_tensor *y1 = vdn_tensor_new2(d, VDN_DT_F32, rows, out),
               *y2 = vdn_tensor_new2(d, VDN_DT_F32, rows, out);
    CHECK(vdn_op_linear(y1, xt, w8, bias ? bt : NULL, VDN_ACT_NONE, 0) == 0 &&
              vdn_op_linear(y2, x8, w8, bias ? bt : NULL, VDN_ACT_NONE, 0) == 0,
          "linear: %s", vdn_dev_error(d));
    float *h1 = malloc(sizeof(float) * (size_t)rows * out),
          *h2 = malloc(sizeof(float) * (size_t)rows * out);
    CHECK(vdn_tensor_get(y1, h1) == 0 && vdn_tensor_get(y2, h2) == 0);
    CHECK(memcmp(h1, h2, sizeof(float) * (size_t)rows * out) == 0,
          "linear with the e4m3 x differs from linear with the float x it came from");
    vdn_tensor_free(xt), vdn_tensor_free(wt), vdn_tensor_free(bt), vdn_tensor_free(w8);
    vdn_tensor_free(sw), vdn_tensor_free(x8), vdn_tensor_free(sx), vdn_tensor_free(q);
    vdn_tensor_free(sc), vdn_tensor_free(y1), vdn_tensor_free(y2);
    free(x), free(w), free(b), free(xq), free(wq), free(sxh), free(swh), free(rq), free(rs);
    free(h), free(y), free(h1), free(h2);
}

static void test_refusals(vdn_dev *d) {
    vdn_tensor *x = vdn_tensor_new2(d, VDN_DT_F32, 4, 8), *w = vdn_tensor_new2(d, VDN_DT_F32, 6, 8);
    vdn_tensor *w8 = vdn_tensor_new2(d, VDN_DT_F8_E4M3, 6, 8),
               *s6 = vdn_tensor_new2(d, VDN_DT_F32, 6, 1);
    vdn_tensor *x8 = vdn_tensor_new2(d, VDN_DT_F8_E4M3, 4, 8),
               *s4 = vdn_tensor_new2(d, VDN_DT_F32, 4, 1);
    vdn_tensor *q3 = vdn_tensor_new2(d, VDN_DT_F8_E4M3, 4, 3),
               *y = vdn_tensor_new2(d, VDN_DT_F32, 4, 6);
    vdn_tensor *w5 = vdn_tensor_new2(d, VDN_DT_F8_E4M3, 5, 8),
               *s5 = vdn_tensor_new2(d, VDN_DT_F32, 5, 1);
    vdn_tensor *qf = vdn_tensor_new2(d, VDN_DT_F32, 4, 8), w5f = vdn_view_rows(w, 0, 5);
    CHECK(vdn_tensor_fill(x, 1.0) == 0 && vdn_tensor_fill(w, 0.5) == 0);
    CHECK(vdn_op_quantize_rows(w8, s6, w) == 0 && vdn_op_quantize_rows(w5, s5, &w5f) == 0);
#define REFUSE(call, needle)                                                                       \
    CHECK((call) == -1 && strstr(vdn_dev_error(d), needle), "%s: message '%s', expected '%s'",     \
          #call, vdn_dev_error(d), needle)
    /* an e4m3 x without scales, beside a float weight; a float x with scales */
    REFUSE(vdn_op_linear(y, x8, w8, NULL, VDN_ACT_NONE, 0), "x is F8_E4M3[4,8] without per-row");
    CHECK(vdn_op_quantize_rows(x8, s4, x) == 0);
    REFUSE(vdn_op_linear(y, x8, w, NULL, VDN_ACT_NONE, 0), "an fp8 x needs an fp8 weight");
    vdn_tensor xs = *x;
    xs.scale = x8->scale;
    REFUSE(vdn_op_linear(y, &xs, w8, NULL, VDN_ACT_NONE, 0), "only F8_E4M3 tensors carry scales");
    CHECK(vdn_op_linear(y, x8, w8, NULL, VDN_ACT_NONE, 0) == 0, "%s", vdn_dev_error(d));
    /* rmsnorm_quant: the outputs' dtypes and shapes, eps */
    REFUSE(vdn_op_rmsnorm_quant(qf, s4, x, NULL, 1e-6), "q is F32[4,8], expected F8_E4M3");
    REFUSE(vdn_op_rmsnorm_quant(x8, s6, x, NULL, 1e-6), "expected 4 contiguous F32 values");
    REFUSE(vdn_op_rmsnorm_quant(q3, s4, x, NULL, 1e-6), "q is F8_E4M3[4,3], expected [4, 8]");
    REFUSE(vdn_op_rmsnorm_quant(x8, s4, x, NULL, 0.0), "eps 0, expected > 0");
    REFUSE(vdn_op_rmsnorm_quant(x8, s4, x8, NULL, 1e-6), "expected a float tensor");
    REFUSE(vdn_op_rmsnorm_quant(x8, s4, x, w, 1e-6), "w is F32[6,8], expected [1, 8]");
    /* linear_swiglu_quant: a float or odd weight, the output's width, overlap */
    REFUSE(vdn_op_linear_swiglu_quant(q3, s4, x, w, NULL), "expected an F8_E4M3 weight");
    REFUSE(vdn_op_linear_swiglu_quant(q3, s4, x, w5, NULL), "expected an even number of rows");
    REFUSE(vdn_op_linear_swiglu_quant(x8, s4, x, w8, NULL), "q is F8_E4M3[4,8], expected [4, 3]");
    REFUSE(vdn_op_linear_swiglu_quant(q3, s6, x, w8, NULL), "expected 4 contiguous F32 values");
    vdn_tensor qv = vdn_view_cols(x8, 0, 3);
    REFUSE(vdn_op_linear_swiglu_quant(&qv, s4, x8, w8, NULL), "q and x overlap");
    CHECK(vdn_op_linear_swiglu_quant(q3, s4, x8, w8, NULL) == 0, "%s", vdn_dev_error(d));
    vdn_tensor_free(x), vdn_tensor_free(w), vdn_tensor_free(w8), vdn_tensor_free(s6);
    vdn_tensor_free(x8), vdn_tensor_free(s4), vdn_tensor_free(q3), vdn_tensor_free(y);
    vdn_tensor_free(w5), vdn_tensor_free(s5), vdn_tensor_free(qf);
}

int main(void) {
    char err[256];
    vdn_dev *d = vdn_dev_open("cpu", 0, 2, err, sizeof err);
    if (!d) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* the encoder written here against the format's grid: every code round-trips */
    int bad_enc = 0;
    for (int c = 0; c < 256; c++)
        if ((c & 0x7f) != 0x7f && enc((float)dec((uint8_t)c)) != c) bad_enc++;
    CHECK(bad_enc == 0, "the test's own e4m3 encoder: %d codes do not round-trip", bad_enc);
    test_rmsnorm_quant(d, 9, 40, VDN_DT_F32, 1);
    test_rmsnorm_quant(d, 300, 77, VDN_DT_BF16, 1); /* past the oracle's 256-row slab */
    test_rmsnorm_quant(d, 5, 16, VDN_DT_F32, 0);
    test_linear_swiglu_quant(d, 7, 40, 12, 0, 1);
    test_linear_swiglu_quant(d, 261, 32, 8, 1, 0);
    test_linear_swiglu_quant(d, 5, 24, 5, 1, 1);
    test_refusals(d);
    vdn_dev_close(d);
    return test_done("engine_fp8_fused");
}
