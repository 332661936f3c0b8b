/* The backend-ops test (ggml's test-backend-ops in spirit): every op of engine/op.h and of the
 * model families' tables (engine/op_vda.h, engine/op_conv.h) on the CUDA backend against the CPU
 * backend (the oracle), on fresh random inputs of several shapes, odd ones included, through
 * strided views where an op takes views.
 *
 * How a case works: each operand is a "pair", one tensor per device holding the same values
 * (inputs are rounded to the GPU tensor's dtype first, so the comparison measures the op, not
 * the input rounding). Outputs start as NaN on the GPU (an element the op does not write stays
 * NaN and fails the case) and sit inside a wider parent tensor whose other columns hold a
 * sentinel that must survive. RUN(call) evaluates the call once per device, with P(x) naming
 * the operand on the device being run. The GPU output is then compared with the CPU's by
 * relative L2 error ||gpu - cpu|| / ||cpu|| against a tolerance per op and dtype.
 *
 * Adding an op: write case_<op>(shape..., dtype...) below in the pattern of its neighbours (make
 * inputs with in(), outputs with out(), RUN() the op, cmp() with a tolerance that says why), and
 * call it from main for a few shapes, at least one of them odd.
 *
 * Needs a GPU: without one (or without the CUDA backend) it exits 77, saying why.
 * VDN_BACKEND_OPS_SELFTEST=1 runs the CPU against itself (checks the harness, no GPU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_tiles.h"
#include "backends.h"
#include "../../ops/test/check.h"
#include "op.h"
#include "op_conv.h"
#include "op_pixels.h"
#include "op_vda.h"
#include "vdn_util.h"

static vdn_dev *dev[2]; /* 0: cpu (the oracle), 1: cuda */
static int side;        /* the device RUN is evaluating on */

/* ---- random numbers (splitmix64; normal by Box-Muller) ---- */
static uint64_t rng = 0x5eed;
static double urand(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand(void) {
    double u = urand() + 1e-12, v = urand();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* ---- pairs of tensors ---- */

#define PAD 3            /* extra columns left and right of a view inside its parent */
#define SENTINEL 7.0     /* exact in every float dtype */
#define MAX_TENSORS 1024 /* parents held until the case ends */

typedef struct {
    vdn_tensor v[2];       /* the operand on each device (a view) */
    vdn_tensor *parent[2]; /* what was allocated */
    int pad;               /* column offset of the view in the parent */
} pair;

static vdn_tensor *held[MAX_TENSORS];
static int n_held;

static vdn_tensor *alloc_on(int s, vdn_dtype dt, int64_t rows, int64_t cols) {
    vdn_tensor *t = vdn_tensor_new2(dev[s], dt, rows, cols);
    if (!t || n_held == MAX_TENSORS) {
        fprintf(stderr, "tensor %s [%lld, %lld] on %s: %s\n", vdn_dtype_name(dt), (long long)rows,
                (long long)cols, vdn_dev_name(dev[s]), t ? "too many held" : vdn_dev_error(dev[s]));
        exit(1);
    }
    held[n_held++] = t;
    return t;
}

static void release(void) {
    for (int i = 0; i < n_held; i++)
        vdn_tensor_free(held[i]);
    n_held = 0;
}

static float *get_f32(const vdn_tensor *t) {
    float *h = vdn_xmalloc(sizeof(float) * (size_t)(vdn_tensor_numel(t) ? vdn_tensor_numel(t) : 1));
    CHECK(vdn_tensor_get(t, h) == 0, "get %s: %s", vdn_dev_name(t->dev), vdn_dev_error(t->dev));
    return h;
}

/* A [rows, cols] operand: dtype dt_cpu on the CPU, dt_gpu on the GPU, as a column view of a
 * parent [rows, cols + 2 pad] (pad 0: the packed tensor itself). */
static pair mk_pair(vdn_dtype dt_cpu, vdn_dtype dt_gpu, int64_t rows, int64_t cols, int pad) {
    pair p;
    memset(&p, 0, sizeof p);
    p.pad = pad;
    const vdn_dtype dts[2] = {dt_cpu, dt_gpu};
    for (int s = 0; s < 2; s++) {
        p.parent[s] = alloc_on(s, dts[s], rows, cols + 2 * pad);
        p.v[s] = pad ? vdn_view_cols(p.parent[s], pad, cols) : *p.parent[s];
        p.v[s].owned = 0;
    }
    return p;
}

/* Set both sides from host values h (packed [rows, cols] f32), the CPU side getting the GPU
 * side's rounding of them; the parent's other columns hold the sentinel. */
static void put(pair *p, const float *h) {
    for (int s = 0; s < 2; s++)
        if (p->pad) CHECK(vdn_tensor_fill(p->parent[s], SENTINEL) == 0);
    CHECK(vdn_tensor_set(&p->v[1], h, VDN_DT_F32) == 0, "set: %s", vdn_dev_error(dev[1]));
    float *r = get_f32(&p->v[1]);
    CHECK(vdn_tensor_set(&p->v[0], r, VDN_DT_F32) == 0, "set: %s", vdn_dev_error(dev[0]));
    free(r);
}

/* an input of normal values times `scale` plus `offset` */
static pair in(vdn_dtype dt_gpu, int64_t rows, int64_t cols, int pad, double scale, double offset) {
    pair p = mk_pair(VDN_DT_F32, dt_gpu, rows, cols, pad);
    float *h = vdn_xmalloc(sizeof(float) * (size_t)(rows * cols > 0 ? rows * cols : 1));
    for (int64_t i = 0; i < rows * cols; i++)
        h[i] = (float)(offset + scale * nrand());
    put(&p, h);
    free(h);
    return p;
}
/* an input uniform in [lo, hi) */
static pair in_unif(vdn_dtype dt_gpu, int64_t rows, int64_t cols, double lo, double hi) {
    pair p = mk_pair(VDN_DT_F32, dt_gpu, rows, cols, 0);
    float *h = vdn_xmalloc(sizeof(float) * (size_t)(rows * cols > 0 ? rows * cols : 1));
    for (int64_t i = 0; i < rows * cols; i++)
        h[i] = (float)(lo + (hi - lo) * urand());
    put(&p, h);
    free(h);
    return p;
}
/* an output: NaN on the GPU (every element must be written), sentinel around it */
static pair out_typed(vdn_dtype dt_cpu, vdn_dtype dt_gpu, int64_t rows, int64_t cols, int pad) {
    pair p = mk_pair(dt_cpu, dt_gpu, rows, cols, pad);
    for (int s = 0; s < 2; s++) {
        if (pad) CHECK(vdn_tensor_fill(p.parent[s], SENTINEL) == 0);
        CHECK(vdn_tensor_fill(&p.v[s], s ? NAN : 0.0) == 0);
    }
    return p;
}
static pair out(vdn_dtype dt_gpu, int64_t rows, int64_t cols, int pad) {
    return out_typed(VDN_DT_F32, dt_gpu, rows, cols, pad);
}
/* I32 indices (same on both devices) */
static pair idx_pair(int64_t rows, const int *h) {
    pair p = mk_pair(VDN_DT_I32, VDN_DT_I32, rows, 1, 0);
    for (int s = 0; s < 2; s++)
        CHECK(vdn_tensor_set(&p.v[s], h, VDN_DT_I32) == 0);
    return p;
}

#define P(p) (&(p).v[side])
/* the call once per device; a failure is reported with the device's message */
#define RUN(call)                                                                                  \
    do {                                                                                           \
        for (side = 0; side < 2; side++) {                                                         \
            int rc_ = (call);                                                                      \
            CHECK(rc_ == 0, "%s on %s: %s", #call, vdn_dev_name(dev[side]),                        \
                  vdn_dev_error(dev[side]));                                                       \
        }                                                                                          \
        CHECK(vdn_dev_sync(dev[1]) == 0, "sync: %s", vdn_dev_error(dev[1]));                       \
    } while (0)

/* GPU output against CPU output: relative L2 error under tol, no NaN (unwritten elements), the
 * parent's columns outside the view untouched. */
static void cmp(const char *what, const pair *p, double tol) {
    const vdn_tensor *g = &p->v[1], *c = &p->v[0];
    const int64_t n = vdn_tensor_numel(c);
    float *hg = get_f32(g), *hc = get_f32(c);
    double num = 0, den = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(hg[i])) bad++;
        num += ((double)hg[i] - hc[i]) * ((double)hg[i] - hc[i]);
        den += (double)hc[i] * hc[i];
    }
    const double err = sqrt(num / (den > 0 ? den : 1));
    CHECK(den > 0, "%s: the CPU result is all zeros, so the case checks nothing", what);
    int border_ok = 1;
    if (p->pad) {
        float *all = get_f32(p->parent[1]);
        const int64_t rows = vdn_tensor_rows(g), cols = vdn_tensor_cols(g), w = cols + 2 * p->pad;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < w; j++)
                if ((j < p->pad || j >= p->pad + cols) && all[r * w + j] != (float)SENTINEL)
                    border_ok = 0;
        free(all);
    }
    const int ok = bad == 0 && err <= tol && border_ok;
    printf("%-58s err %.2e (tol %.0e)%s%s %s\n", what, err, tol, bad ? " NON-FINITE" : "",
           border_ok ? "" : " WROTE-OUTSIDE", ok ? "ok" : "FAIL");
    CHECK(ok, "%s: relative error %.3e (tolerance %.0e), %lld non-finite, border %s", what, err,
          tol, (long long)bad, border_ok ? "intact" : "overwritten");
    free(hg);
    free(hc);
}

static const char *dtn(vdn_dtype dt) {
    return vdn_dtype_name(dt);
}
/* tolerance of a result stored in dt: bf16 / f16 outputs carry their rounding (2^-9 relative at
 * worst per element, about 3e-3 in L2 over many), fp32 ones the arithmetic's */
static double tol_of(vdn_dtype dt, double f32_tol) {
    return dt == VDN_DT_F32 ? f32_tol : 1e-2;
}

/* ---- transfers ---- */

/* RNE bf16 rounding written here, independently of the code under test */
static float bf16_rne(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

static void case_transfers(int64_t rows, int64_t cols) {
    char what[128];
    const int64_t n = rows * cols;
    float *h = vdn_xmalloc(sizeof(float) * (size_t)n),
          *back = vdn_xmalloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)(nrand() * 3.0);
    /* set f32 -> bf16 view, get: RNE of each value; the sentinel columns survive */
    pair p = mk_pair(VDN_DT_F32, VDN_DT_BF16, rows, cols, PAD);
    CHECK(vdn_tensor_fill(p.parent[1], SENTINEL) == 0);
    CHECK(vdn_tensor_set(&p.v[1], h, VDN_DT_F32) == 0, "%s", vdn_dev_error(dev[1]));
    CHECK(vdn_tensor_get(&p.v[1], back) == 0);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i++)
        wrong += back[i] != bf16_rne(h[i]);
    snprintf(what, sizeof what, "set f32 -> bf16 view [%lld,%lld], get", (long long)rows,
             (long long)cols);
    printf("%-58s %lld of %lld differ from RNE %s\n", what, (long long)wrong, (long long)n,
           wrong ? "FAIL" : "ok");
    CHECK(wrong == 0, "%s", what);
    /* raw bf16 back, and set from bf16 host words */
    uint16_t *raw = vdn_xmalloc(2 * (size_t)n);
    CHECK(vdn_tensor_get_raw(&p.v[1], raw) == 0);
    pair q = mk_pair(VDN_DT_F32, VDN_DT_F32, rows, cols, 0);
    CHECK(vdn_tensor_set(&q.v[1], raw, VDN_DT_BF16) == 0, "%s", vdn_dev_error(dev[1]));
    CHECK(vdn_tensor_get(&q.v[1], h) == 0);
    wrong = 0;
    for (int64_t i = 0; i < n; i++)
        wrong += h[i] != back[i];
    snprintf(what, sizeof what, "get_raw bf16, set from bf16 words into f32 [%lld,%lld]",
             (long long)rows, (long long)cols);
    printf("%-58s %lld differ %s\n", what, (long long)wrong, wrong ? "FAIL" : "ok");
    CHECK(wrong == 0, "%s", what);
    /* copies between dtypes and into views: bf16 view -> f32 packed -> f16 view -> f32 */
    pair f = out(VDN_DT_F32, rows, cols, 0), f16 = out(VDN_DT_F16, rows, cols, PAD),
         f2 = out(VDN_DT_F32, rows, cols, 1);
    side = 1;
    CHECK(vdn_tensor_copy(P(f), P(p)) == 0, "%s", vdn_dev_error(dev[1]));
    CHECK(vdn_tensor_copy(P(f16), P(f)) == 0, "%s", vdn_dev_error(dev[1]));
    CHECK(vdn_tensor_copy(P(f2), P(f16)) == 0, "%s", vdn_dev_error(dev[1]));
    side = 0; /* the CPU oracle does the same chain from the same values */
    CHECK(vdn_tensor_set(&p.v[0], back, VDN_DT_F32) == 0);
    CHECK(vdn_tensor_copy(P(f), P(p)) == 0 && vdn_tensor_copy(P(f16), P(f)) == 0 &&
          vdn_tensor_copy(P(f2), P(f16)) == 0);
    snprintf(what, sizeof what, "copy bf16 view -> f32 -> f16 view -> f32 [%lld,%lld]",
             (long long)rows, (long long)cols);
    cmp(what, &f2, 0);
    /* fill a view */
    pair fl = out(VDN_DT_BF16, rows, cols, PAD);
    for (side = 0; side < 2; side++)
        CHECK(vdn_tensor_fill(P(fl), -0.75) == 0);
    snprintf(what, sizeof what, "fill bf16 view [%lld,%lld]", (long long)rows, (long long)cols);
    cmp(what, &fl, 0);
    /* F64 and I32 round trips are exact */
    double *d64 = vdn_xmalloc(8 * (size_t)n), *d64b = vdn_xmalloc(8 * (size_t)n);
    int *i32 = vdn_xmalloc(4 * (size_t)n), *i32b = vdn_xmalloc(4 * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        d64[i] = nrand() * 1e3, i32[i] = (int)(urand() * 2e9) - 1000000000;
    vdn_tensor *t64 = alloc_on(1, VDN_DT_F64, rows, cols),
               *t32 = alloc_on(1, VDN_DT_I32, rows, cols);
    CHECK(vdn_tensor_set(t64, d64, VDN_DT_F64) == 0 && vdn_tensor_get_raw(t64, d64b) == 0);
    CHECK(vdn_tensor_set(t32, i32, VDN_DT_I32) == 0 && vdn_tensor_get_raw(t32, i32b) == 0);
    CHECK(memcmp(d64, d64b, 8 * (size_t)n) == 0, "F64 round trip");
    CHECK(memcmp(i32, i32b, 4 * (size_t)n) == 0, "I32 round trip");
    printf("%-58s %s\n", "F64 and I32 round trips", "checked");
    free(h), free(back), free(raw), free(d64), free(d64b), free(i32), free(i32b);
    release();
}

/* ---- matrix products ---- */

static void case_linear(int64_t rows, int64_t in_f, int64_t out_f, vdn_dtype dt, vdn_dtype dt_b,
                        vdn_act act, int accumulate) {
    char what[160];
    const double ws = 1.0 / sqrt((double)in_f);
    pair x = in(dt, rows, in_f, PAD, 1.0, 0), w = in(dt, out_f, in_f, 0, ws, 0);
    const int has_b = dt_b != VDN_DT_COUNT; /* VDN_DT_COUNT: no bias */
    pair b = in(has_b ? dt_b : dt, 1, out_f, 0, 0.5, 0);
    pair y = accumulate ? in(dt, rows, out_f, 2, 1.0, 0) : out(dt, rows, out_f, 2);
    RUN(vdn_op_linear(P(y), P(x), P(w), has_b ? P(b) : NULL, act, accumulate));
    snprintf(what, sizeof what, "linear %s [%lld,%lld]x[%lld,%lld]^T bias %s act %d%s", dtn(dt),
             (long long)rows, (long long)in_f, (long long)out_f, (long long)in_f,
             has_b ? dtn(dt_b) : "-", (int)act, accumulate ? " +=" : "");
    cmp(what, &y, tol_of(dt, 1e-5)); /* fp32: SGEMM, no TF32 */
    release();
}

/* bf16 x and w into an fp32 y (cuBLASLt with fp32 C/D: the video decoder's residual stream, the
 * product accumulated into it, and its proj_out). The products of bf16 values are exact in fp32 and
 * both sides sum in fp32 or better: 1e-5 as for the fp32 ops. */
static void case_linear_out32(int64_t rows, int64_t in_f, int64_t out_f, vdn_dtype dt_b,
                              int accumulate, int pad) {
    char what[160];
    pair x = in(VDN_DT_BF16, rows, in_f, pad, 1.0, 0),
         w = in(VDN_DT_BF16, out_f, in_f, 0, 1.0 / sqrt((double)in_f), 0);
    const int has_b = dt_b != VDN_DT_COUNT;
    pair b = in(has_b ? dt_b : VDN_DT_F32, 1, out_f, 0, 0.5, 0);
    pair y =
        accumulate ? in(VDN_DT_F32, rows, out_f, pad, 1.0, 0) : out(VDN_DT_F32, rows, out_f, pad);
    RUN(vdn_op_linear(P(y), P(x), P(w), has_b ? P(b) : NULL, VDN_ACT_NONE, accumulate));
    snprintf(what, sizeof what, "linear bf16 -> f32 [%lld,%lld]x[%lld,%lld]^T bias %s%s%s",
             (long long)rows, (long long)in_f, (long long)out_f, (long long)in_f,
             has_b ? dtn(dt_b) : "-", accumulate ? " +=" : "", pad ? " (views: widened)" : "");
    cmp(what, &y, 1e-5);
    release();
}

/* x f32 with w bf16 -> y bf16 (the mixed path: widened to fp32) */
static void case_linear_mixed(int64_t rows, int64_t in_f, int64_t out_f) {
    char what[128];
    pair x = in(VDN_DT_F32, rows, in_f, 0, 1.0, 0), w = in(VDN_DT_BF16, out_f, in_f, 0, 0.2, 0);
    pair b = in(VDN_DT_F32, 1, out_f, 0, 0.5, 0), y = out(VDN_DT_BF16, rows, out_f, 0);
    RUN(vdn_op_linear(P(y), P(x), P(w), P(b), VDN_ACT_SILU, 0));
    snprintf(what, sizeof what, "linear mixed f32 x, bf16 w -> bf16 [%lld,%lld,%lld] silu",
             (long long)rows, (long long)in_f, (long long)out_f);
    cmp(what, &y, 1e-2);
    release();
}

/* ---- fp8 ---- */

/* an fp8 weight per device from the float pair x: the bytes and scales of both devices must be
 * equal (the rule is exact arithmetic), checked here */
typedef struct {
    pair q, s;
    vdn_tensor v[2]; /* the quantised operand (q.v with its scales) */
} qpair;

static void quantize_both(qpair *o, const pair *x, const char *what) {
    const int64_t rows = vdn_tensor_rows(&x->v[0]), cols = vdn_tensor_cols(&x->v[0]);
    o->q = mk_pair(VDN_DT_F8_E4M3, VDN_DT_F8_E4M3, rows, cols, 0);
    o->s = mk_pair(VDN_DT_F32, VDN_DT_F32, rows, 1, 0);
    for (int s = 0; s < 2; s++) {
        CHECK(vdn_op_quantize_rows(&o->q.v[s], &o->s.v[s], &x->v[s]) == 0, "quantize on %s: %s",
              vdn_dev_name(dev[s]), vdn_dev_error(dev[s]));
        o->v[s] = o->q.v[s];
        CHECK(o->v[s].scale == (const float *)o->s.v[s].data, "q->scale set by the op");
    }
    CHECK(vdn_dev_sync(dev[1]) == 0, "sync: %s", vdn_dev_error(dev[1]));
    const int64_t n = rows * cols;
    uint8_t *b[2];
    float *sc[2];
    for (int s = 0; s < 2; s++) {
        b[s] = vdn_xmalloc((size_t)n);
        sc[s] = vdn_xmalloc(sizeof(float) * (size_t)rows);
        CHECK(vdn_tensor_get_raw(&o->q.v[s], b[s]) == 0 && vdn_tensor_get(&o->s.v[s], sc[s]) == 0,
              "get: %s", vdn_dev_error(dev[s]));
    }
    int64_t diff = 0, sdiff = 0;
    for (int64_t i = 0; i < n; i++)
        diff += b[0][i] != b[1][i];
    for (int64_t r = 0; r < rows; r++)
        sdiff += memcmp(&sc[0][r], &sc[1][r], sizeof(float)) != 0;
    printf("%-58s %lld of %lld bytes, %lld scales differ %s\n", what, (long long)diff, (long long)n,
           (long long)sdiff, diff || sdiff ? "FAIL" : "ok");
    CHECK(diff == 0 && sdiff == 0, "%s: %lld bytes and %lld scales differ from the CPU's", what,
          (long long)diff, (long long)sdiff);
    for (int s = 0; s < 2; s++)
        free(b[s]), free(sc[s]);
}

/* quantize_rows alone: a view input (16-byte rows for bf16 when pad is 0), a zero row, a row
 * whose values sit on e4m3 midpoints (scale exactly 1: ties to even), odd widths */
static void case_quantize_rows(int64_t rows, int64_t cols, vdn_dtype dt, int pad) {
    char what[128];
    pair x = mk_pair(VDN_DT_F32, dt, rows, cols, pad);
    float *h = vdn_xmalloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++)
        h[i] = (float)(nrand() * pow(10.0, (double)((i / cols) % 5) - 2));
    for (int64_t c = 0; c < cols; c++) {
        h[c] = 0.f;     /* row 0: zeros, scale 1 */
        if (rows > 1) { /* row 1: 448 first, then midpoints of neighbouring e4m3 values */
            const int code = (int)(c % 125);
            const double lo = vdn_e4m3_to_f32((uint8_t)code),
                         hi = vdn_e4m3_to_f32((uint8_t)(code + 1));
            h[cols + c] = c == 0 ? 448.f : (float)((c & 1 ? -0.5 : 0.5) * (lo + hi));
        }
    }
    put(&x, h);
    snprintf(what, sizeof what, "quantize_rows %s [%lld,%lld]%s", dtn(dt), (long long)rows,
             (long long)cols, pad ? " view" : "");
    qpair q;
    quantize_both(&q, &x, what);
    free(h);
    release();
}

/* linear with an fp8 weight: both devices quantise x by the same rule, so what differs is the
 * GPU's fp32 accumulation order and, for bf16 outputs, the output's and the bias's bf16 rounding
 * (2^-9 relative at worst per element: 1.7e-3 in L2 measured CPU vs CPU; 6e-3 leaves margin and
 * fails an x left unquantised, which is off by the e4m3 error, ~3e-2). fp32 outputs take the
 * dequantised fp32 route (products rounded at 2^-24) unless they are packed and 16-byte
 * aligned (ypad 0, k and out multiples of 16, aligned scales): then the fp8 path with its raw
 * product rounded to bf16 (2^-9) before a float32 epilogue, bf16's tolerance. extra: the weight
 * is a row view (scales offset). ypad: y's columns left of the view in its parent. */
static void case_linear_fp8_y(int64_t rows, int64_t in_f, int64_t out_f, vdn_dtype dt_x,
                              vdn_dtype dt_y, vdn_dtype dt_b, vdn_act act, int accumulate,
                              int extra, int ypad) {
    char what[160];
    pair w = in(VDN_DT_BF16, out_f + extra, in_f, 0, 1.0 / sqrt((double)in_f), 0);
    snprintf(what, sizeof what, "quantize_rows bf16 weight [%lld,%lld]", (long long)(out_f + extra),
             (long long)in_f);
    qpair q; /* the whole parent, so a row view's scales sit at an offset */
    quantize_both(&q, &w, what);
    for (int s = 0; s < 2; s++)
        q.v[s] = vdn_view_rows(&q.q.v[s], extra, out_f);
    pair x = in(dt_x, rows, in_f, PAD, 1.0, 0);
    const int has_b = dt_b != VDN_DT_COUNT;
    pair b = in(has_b ? dt_b : VDN_DT_F32, 1, out_f, 0, 0.5, 0);
    pair y = accumulate ? in(dt_y, rows, out_f, ypad, 1.0, 0) : out(dt_y, rows, out_f, ypad);
    RUN(vdn_op_linear(P(y), P(x), &q.v[side], has_b ? P(b) : NULL, act, accumulate));
    const int fp8_f32 =
        dt_y == VDN_DT_F32 && ypad == 0 && in_f % 16 == 0 && out_f % 16 == 0 && extra % 4 == 0;
    snprintf(what, sizeof what, "linear fp8 %s x -> %s [%lld,%lld]x[%lld,%lld]^T b %s a%d%s%s",
             dtn(dt_x), dtn(dt_y), (long long)rows, (long long)in_f, (long long)out_f,
             (long long)in_f, has_b ? dtn(dt_b) : "-", (int)act, accumulate ? " +=" : "",
             extra ? " wview" : "");
    cmp(what, &y, dt_y == VDN_DT_F32 && !fp8_f32 ? 1e-5 : 6e-3);
    release();
}
static void case_linear_fp8(int64_t rows, int64_t in_f, int64_t out_f, vdn_dtype dt_x,
                            vdn_dtype dt_y, vdn_dtype dt_b, vdn_act act, int accumulate,
                            int extra) {
    case_linear_fp8_y(rows, in_f, out_f, dt_x, dt_y, dt_b, act, accumulate, extra, 2);
}

/* ---- fused fp8 producers (rmsnorm_quant, linear_swiglu_quant) and an fp8 x ---- */

/* the spacing of e4m3 values at magnitude a of the code grid (subnormals 2^-9): one code step */
static double e4m3_step(double a) {
    return a < 0.015625 ? 0.001953125 : pow(2.0, floor(log2(a)) - 3);
}

/* host rows for the quantising ops: row 0 all zeros, row 1 large (1e4), row 2 tiny (1e-4), the
 * rest normal with row magnitudes spread over 10^-2..10^2 */
static float *quant_rows_host(int64_t rows, int64_t cols) {
    float *h = vdn_xmalloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t r = 0; r < rows; r++) {
        const double mag = r == 0 ? 0.0 : r == 1 ? 1e4 : r == 2 ? 1e-4 : pow(10.0, (r % 5) - 2.0);
        for (int64_t c = 0; c < cols; c++)
            h[r * cols + c] = (float)(mag * nrand());
    }
    return h;
}

/* e4m3 outputs q [rows, cols] and their scales: raw NaN bytes (0x7f) and NaN scales on the GPU
 * first, so an element or scale the op does not write fails */
static void quant_outputs(pair *q, pair *sc, int64_t rows, int64_t cols) {
    *q = mk_pair(VDN_DT_F8_E4M3, VDN_DT_F8_E4M3, rows, cols, 0);
    *sc = mk_pair(VDN_DT_F32, VDN_DT_F32, rows, 1, 0);
    uint8_t *nan8 = vdn_xmalloc((size_t)(rows * cols));
    memset(nan8, 0x7f, (size_t)(rows * cols));
    CHECK(vdn_tensor_set(&q->v[1], nan8, VDN_DT_F8_E4M3) == 0, "%s", vdn_dev_error(dev[1]));
    CHECK(vdn_tensor_fill(&sc->v[1], NAN) == 0, "%s", vdn_dev_error(dev[1]));
    free(nan8);
}

/* The GPU's e4m3 rows against the CPU's. dy NULL: both quantise the same float32 values up to
 * float32 arithmetic order, so per row the scales agree within scale_tol (relative), and per
 * element the dequantised values within one e4m3 code step at the larger of the two (a value
 * near a rounding midpoint may land on the neighbouring code) plus the scales' own difference.
 * dy given: a bound per element on |y_gpu - y_cpu| of the values before quantisation (the
 * caller's argument); then each dequantised value is within half a step of its own y (its
 * row's scale times half the e4m3 spacing at its code), so they agree within dy + both half
 * steps, and the scales (amax / 448) within the row's largest dy / 448. Either way at most
 * flip_tol of the codes may differ, and a row the CPU quantises to all zeros (scale 1) must be
 * exactly that on the GPU too. Wrong arithmetic (a missing bias, scale, or swapped halves) moves
 * values far past these bounds and fails. */
static void cmp_quant(const char *what, const pair *q, const pair *sc, double scale_tol,
                      double flip_tol, const double *dy) {
    const int64_t rows = vdn_tensor_rows(&q->v[0]), cols = vdn_tensor_cols(&q->v[0]);
    uint8_t *b[2];
    float *s[2];
    for (int d = 0; d < 2; d++) {
        b[d] = vdn_xmalloc((size_t)(rows * cols));
        s[d] = vdn_xmalloc(sizeof(float) * (size_t)rows);
        CHECK(vdn_tensor_get_raw(&q->v[d], b[d]) == 0 && vdn_tensor_get(&sc->v[d], s[d]) == 0,
              "get: %s", vdn_dev_error(dev[d]));
    }
    int64_t flips = 0, beyond = 0, nan = 0, zero_rows = 0, bad_zero = 0, nonzero = 0;
    double worst_s = 0, worst_e = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double sg = s[1][r], sc0 = s[0][r];
        double srel = fabs(sg - sc0) / sc0;
        if (dy) { /* relative to what the row's dy allows (<= 1 passes) */
            double m = 0;
            for (int64_t c = 0; c < cols; c++)
                m = fmax(m, dy[r * cols + c]);
            srel /= (m / 448.0 * 1.01 + sc0 * 0x1p-22) / sc0;
        }
        if (!(srel <= worst_s)) worst_s = isnan(srel) ? INFINITY : srel;
        int zero = sc0 == 1.0;
        for (int64_t c = 0; c < cols; c++)
            zero = zero && (b[0][r * cols + c] & 0x7f) == 0;
        if (zero) {
            zero_rows++;
            int ok = sg == 1.0;
            for (int64_t c = 0; c < cols; c++)
                ok = ok && (b[1][r * cols + c] & 0x7f) == 0;
            bad_zero += !ok;
        }
        for (int64_t c = 0; c < cols; c++) {
            const uint8_t g = b[1][r * cols + c], k = b[0][r * cols + c];
            nonzero += (k & 0x7f) != 0;
            if ((g & 0x7f) == 0x7f) {
                nan++;
                continue;
            }
            flips += g != k && !((g & 0x7f) == 0 && (k & 0x7f) == 0);
            const double eg = vdn_e4m3_to_f32(g), ek = vdn_e4m3_to_f32(k);
            const double a = fmax(fabs(eg), fabs(ek)), smax = fmax(sg, sc0);
            const double lim =
                dy ? dy[r * cols + c] +
                         0.5 * (e4m3_step(fabs(eg)) * sg + e4m3_step(fabs(ek)) * sc0) * 1.0001
                   : e4m3_step(a) * smax * 1.0001 + a * smax * srel * 1.01;
            const double e = fabs(eg * sg - ek * sc0);
            if (!(e <= lim)) beyond++;
            if (lim > 0 && e / lim > worst_e) worst_e = e / lim;
        }
    }
    const double frac = (double)flips / (double)(rows * cols);
    const int ok = nan == 0 && beyond == 0 && bad_zero == 0 && worst_s <= scale_tol &&
                   frac <= flip_tol && nonzero > 0;
    printf("%-58s scales %.1e (tol %.0e), codes differ %.2e (tol %.0e), worst %.2f of the "
           "bound, %lld zero rows %s\n",
           what, worst_s, scale_tol, frac, flip_tol, worst_e, (long long)zero_rows,
           ok ? "ok" : "FAIL");
    CHECK(ok,
          "%s: %lld unwritten (NaN) codes, %lld beyond one step, %lld zero rows not zero, scales "
          "off by %.3e (tol %.0e), %.3e of the codes differ (tol %.0e), %lld nonzero CPU codes",
          what, (long long)nan, (long long)beyond, (long long)bad_zero, worst_s, scale_tol, frac,
          flip_tol, (long long)nonzero);
    for (int d = 0; d < 2; d++)
        free(b[d]), free(s[d]);
}

/* rmsnorm_quant: x of the decoder's residual stream (f32, packed: the registers path) or bf16
 * (a view with odd columns: the re-reading path). The GPU's h differs from the CPU's by float32
 * arithmetic order only (a tree of fmaf sums against float64, IEEE sqrt and reciprocal: a few
 * 2^-24 relative), so scales agree to 4e-6 and codes differ only where h sits within that of a
 * rounding midpoint: 1e-3 of them leaves a wide margin over the ~1e-5 expected. */
static void case_rmsnorm_quant(int64_t rows, int64_t cols, vdn_dtype dt, int with_w, int pad) {
    char what[128];
    pair x = mk_pair(VDN_DT_F32, dt, rows, cols, pad), w = in(dt, 1, cols, 0, 0.5, 1.0), q, sc;
    float *h = quant_rows_host(rows, cols);
    put(&x, h);
    free(h);
    quant_outputs(&q, &sc, rows, cols);
    RUN(vdn_op_rmsnorm_quant(P(q), P(sc), P(x), with_w ? P(w) : NULL, 1e-6));
    for (int d = 0; d < 2; d++)
        CHECK(q.v[d].scale == (const float *)sc.v[d].data, "rmsnorm_quant: q->scale not set");
    snprintf(what, sizeof what, "rmsnorm_quant %s [%lld,%lld]%s%s", dtn(dt), (long long)rows,
             (long long)cols, with_w ? " w" : "", pad ? " view" : "");
    cmp_quant(what, &q, &sc, 4e-6, 1e-3, NULL);
    release();
}

/* The bound on |y_gpu - y_cpu| of linear_swiglu_quant per output element, from the CPU side's
 * e4m3 operands (x8 with its scales, w8 with its, the bias b or NULL; f outputs a row). Both
 * devices use the same bytes and scales; the GPU's raw product p = sx sw sum x8 w8 differs from
 * the CPU's (float64, rounded once) by its accumulation, its rounding to bf16 (2^-8 relative:
 * bf16 keeps 8 significant bits) and a few float32 operations (2^-22 of |p| + |b|): dp. Hopper's
 * fp8 tensor cores keep only about 14 bits of the sum inside an MMA's k chunk (DeepSeek-V3
 * report, sec. 3.3.2; cuBLASLt then adds the chunks in fp32), so the accumulation is off by at
 * most 2^-13 + k 2^-24 of a = sx sw sum |x8 w8| (run 2 on the H200: a k = 16 product failed the
 * fp32-only k 2^-24 by 3.8x). Then h = p + b moves by dp, and y = h_v silu(h_g) by
 * dp_v |silu(h_g)| + 1.1 dp_g (|h_v| + dp_v) (silu is 1.1-Lipschitz), plus the GPU's fast exp and
 * division (2^-17 of |y|: __expf's argument scaling grows with |g|). p and a are the CPU
 * oracle's own fp8 linear of the operands and of their magnitudes (the codes with the sign bit
 * cleared). */
static double *swiglu_dy(const vdn_tensor *x8, const vdn_tensor *w8, const vdn_tensor *b,
                         int64_t f) {
    const int64_t rows = vdn_tensor_rows(x8), k = vdn_tensor_cols(x8), n = 2 * f;
    vdn_tensor *abs_x = alloc_on(0, VDN_DT_F8_E4M3, rows, k),
               *abs_w = alloc_on(0, VDN_DT_F8_E4M3, n, k);
    const vdn_tensor *src[2] = {x8, w8};
    vdn_tensor *dst[2] = {abs_x, abs_w};
    for (int i = 0; i < 2; i++) {
        const int64_t m = vdn_tensor_numel(src[i]);
        uint8_t *h = vdn_xmalloc((size_t)m);
        CHECK(vdn_tensor_get_raw(src[i], h) == 0);
        for (int64_t j = 0; j < m; j++)
            h[j] &= 0x7f;
        CHECK(vdn_tensor_set(dst[i], h, VDN_DT_F8_E4M3) == 0);
        dst[i]->scale = src[i]->scale;
        free(h);
    }
    vdn_tensor *P = alloc_on(0, VDN_DT_F32, rows, n), *A = alloc_on(0, VDN_DT_F32, rows, n);
    CHECK(vdn_op_linear(P, x8, w8, NULL, VDN_ACT_NONE, 0) == 0 &&
              vdn_op_linear(A, abs_x, abs_w, NULL, VDN_ACT_NONE, 0) == 0,
          "swiglu_dy: %s", vdn_dev_error(dev[0]));
    float *p = get_f32(P), *a = get_f32(A), *bh = b ? get_f32(b) : NULL;
    double *dy = vdn_xmalloc(sizeof(double) * (size_t)(rows * f));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < f; c++) {
            const double pv = p[r * n + c], pg = p[r * n + f + c];
            const double bv = bh ? bh[c] : 0, bg = bh ? bh[f + c] : 0, hv = pv + bv, hg = pg + bg;
            const double acc = 0x1p-13 + (double)k * 0x1p-24;
            const double dpv =
                0x1p-8 * fabs(pv) + acc * a[r * n + c] + 0x1p-22 * (fabs(pv) + fabs(bv));
            const double dpg =
                0x1p-8 * fabs(pg) + acc * a[r * n + f + c] + 0x1p-22 * (fabs(pg) + fabs(bg));
            const double silu = hg / (1.0 + exp(-hg));
            dy[r * f + c] =
                dpv * fabs(silu) + 1.1 * dpg * (fabs(hv) + dpv) + 0x1p-17 * fabs(hv * silu) + 1e-30;
        }
    free(p), free(a), free(bh);
    return dy;
}

/* linear_swiglu_quant: x float (quantised inside), e4m3 packed (as rmsnorm_quant leaves it) or an
 * e4m3 view (unaligned: the dequantised fp32 route), against the bound swiglu_dy argues; the
 * flips (a code lands on its neighbour where y sits within dy of a midpoint) measured 3% of the
 * codes at most (flip_tol 0.1). xmode: 0 float x, 1 e4m3 x, 2 e4m3 x view. */
static void case_linear_swiglu_quant(int64_t rows, int64_t in_f, int64_t f, int xmode,
                                     vdn_dtype dt_b) {
    char what[160];
    pair w = in(VDN_DT_BF16, 2 * f, in_f, 0, 1.0 / sqrt((double)in_f), 0);
    qpair wq, xq;
    snprintf(what, sizeof what, "quantize_rows bf16 weight [%lld,%lld]", (long long)(2 * f),
             (long long)in_f);
    quantize_both(&wq, &w, what);
    pair x = mk_pair(VDN_DT_F32, VDN_DT_BF16, rows, in_f, xmode == 2 ? PAD : 0);
    float *h = quant_rows_host(rows, in_f);
    put(&x, h);
    free(h);
    vdn_tensor xv[2];
    if (xmode == 0) {
        xv[0] = x.v[0], xv[1] = x.v[1];
    } else {
        /* quantised on both devices (the same bytes, checked); a view of an e4m3 parent for 2 */
        pair xp = mk_pair(VDN_DT_F32, VDN_DT_BF16, rows, in_f + (xmode == 2 ? 3 : 0), 0);
        for (int d = 0; d < 2; d++)
            CHECK(vdn_tensor_fill(xp.parent[d], 0.25) == 0);
        vdn_tensor inner[2];
        for (int d = 0; d < 2; d++) {
            inner[d] = xmode == 2 ? vdn_view_cols(&xp.v[d], 3, in_f) : xp.v[d];
            CHECK(vdn_tensor_copy(&inner[d], &x.v[d]) == 0, "%s", vdn_dev_error(dev[d]));
        }
        snprintf(what, sizeof what, "quantize_rows bf16 x [%lld,%lld]", (long long)rows,
                 (long long)(in_f + (xmode == 2 ? 3 : 0)));
        quantize_both(&xq, &xp, what);
        for (int d = 0; d < 2; d++)
            xv[d] = xmode == 2 ? vdn_view_cols(&xq.v[d], 3, in_f) : xq.v[d];
    }
    const int has_b = dt_b != VDN_DT_COUNT;
    pair b = in(has_b ? dt_b : VDN_DT_F32, 1, 2 * f, 0, 0.5, 0), q, sc;
    quant_outputs(&q, &sc, rows, f);
    RUN(vdn_op_linear_swiglu_quant(P(q), P(sc), &xv[side], &wq.v[side], has_b ? P(b) : NULL));
    for (int d = 0; d < 2; d++)
        CHECK(q.v[d].scale == (const float *)sc.v[d].data, "linear_swiglu_quant: q->scale");
    static const char *xs[] = {"bf16 x", "e4m3 x", "e4m3 x view"};
    snprintf(what, sizeof what, "linear_swiglu_quant %s [%lld,%lld] f %lld b %s", xs[xmode],
             (long long)rows, (long long)in_f, (long long)f, has_b ? dtn(dt_b) : "-");
    /* the CPU side's e4m3 x: the op's own rule on x for a float x (quantize_rows gives the same
     * bytes on both devices, checked above) */
    vdn_tensor x8c = xv[0];
    if (xmode == 0) {
        vdn_tensor *q0 = alloc_on(0, VDN_DT_F8_E4M3, rows, in_f),
                   *s0 = alloc_on(0, VDN_DT_F32, rows, 1);
        CHECK(vdn_op_quantize_rows(q0, s0, &x.v[0]) == 0);
        x8c = *q0;
    }
    double *dy = swiglu_dy(&x8c, &wq.v[0], has_b ? &b.v[0] : NULL, f);
    cmp_quant(what, &q, &sc, 1.0, 0.1, dy);
    free(dy);
    release();
}

/* linear with an e4m3 x (quantised on both devices to the same bytes first) and an fp8 weight:
 * the same function as quantising inside linear, so linear fp8's tolerances; ypad 0 and aligned
 * x: the fp8 path, xpad: an unaligned e4m3 x view (the dequantised fp32 route) */
static void case_linear_fp8x(int64_t rows, int64_t in_f, int64_t out_f, vdn_dtype dt_y,
                             int accumulate, int xpad) {
    char what[160];
    pair w = in(VDN_DT_BF16, out_f, in_f, 0, 1.0 / sqrt((double)in_f), 0);
    pair x = in(VDN_DT_BF16, rows, in_f + xpad, 0, 1.0, 0);
    qpair wq, xq;
    snprintf(what, sizeof what, "quantize_rows bf16 [%lld,%lld] (w, x)", (long long)out_f,
             (long long)in_f);
    quantize_both(&wq, &w, what);
    quantize_both(&xq, &x, what);
    vdn_tensor xv[2];
    for (int d = 0; d < 2; d++)
        xv[d] = xpad ? vdn_view_cols(&xq.v[d], xpad, in_f) : xq.v[d];
    pair b = in(VDN_DT_BF16, 1, out_f, 0, 0.5, 0);
    pair y = accumulate ? in(dt_y, rows, out_f, 0, 1.0, 0) : out(dt_y, rows, out_f, 0);
    RUN(vdn_op_linear(P(y), &xv[side], &wq.v[side], P(b), VDN_ACT_NONE, accumulate));
    snprintf(what, sizeof what, "linear e4m3 x%s -> %s [%lld,%lld]x[%lld,%lld]^T%s",
             xpad ? " view" : "", dtn(dt_y), (long long)rows, (long long)in_f, (long long)out_f,
             (long long)in_f, accumulate ? " +=" : "");
    cmp(what, &y, dt_y == VDN_DT_F32 && xpad ? 1e-5 : 6e-3);
    release();
}

static void case_matmul_bt(int n, int64_t m, int64_t p, int64_t k, vdn_dtype dt, vdn_dtype dt_y,
                           int accumulate) {
    char what[128];
    pair a = in(dt, n * m, k, 0, 1.0, 0), b = in(dt, n * p, k, 0, 1.0, 0);
    pair y = accumulate ? in(dt_y, n * m, p, 0, 1.0, 0) : out(dt_y, n * m, p, 0);
    const int64_t na[3] = {n, m, k}, nb[3] = {n, p, k}, ny[3] = {n, m, p};
    vdn_tensor A[2], B[2], Y[2];
    for (int s = 0; s < 2; s++) {
        A[s] = vdn_view_reshape(&a.v[s], 3, na);
        B[s] = vdn_view_reshape(&b.v[s], 3, nb);
        Y[s] = vdn_view_reshape(&y.v[s], 3, ny);
    }
    RUN(vdn_op_matmul_bt(&Y[side], &A[side], &B[side], accumulate));
    snprintf(what, sizeof what, "matmul_bt %s -> %s %d x [%lld,%lld]x[%lld,%lld]^T%s", dtn(dt),
             dtn(dt_y), n, (long long)m, (long long)k, (long long)p, (long long)k,
             accumulate ? " +=" : "");
    cmp(what, &y, tol_of(dt_y, 1e-5));
    release();
}

/* ---- elementwise ---- */

static void case_act(int64_t rows, int64_t cols, vdn_dtype dt, vdn_act act) {
    char what[128];
    pair x = in(dt, rows, cols, PAD, 2.0, 0), y = out(dt, rows, cols, 1);
    RUN(vdn_op_act(P(y), P(x), act));
    snprintf(what, sizeof what, "act %d %s [%lld,%lld]", (int)act, dtn(dt), (long long)rows,
             (long long)cols);
    cmp(what, &y, tol_of(dt, 1e-5));
    release();
}

/* value and gate as the two halves of one [rows, 2f] tensor (the fused kernel's layout), or as
 * separate strided tensors */
static void case_swiglu(int64_t rows, int64_t f, vdn_dtype dt, int halves) {
    char what[128];
    pair h = in(dt, rows, 2 * f, halves ? 0 : PAD, 1.5, 0), g = in(dt, rows, f, PAD, 1.5, 0);
    pair y = out(dt, rows, f, halves ? 0 : 1);
    vdn_tensor val[2], gate[2];
    for (int s = 0; s < 2; s++) {
        val[s] = vdn_view_cols(&h.v[s], 0, f);
        gate[s] = halves ? vdn_view_cols(&h.v[s], f, f) : g.v[s];
    }
    RUN(vdn_op_swiglu(P(y), &val[side], &gate[side]));
    snprintf(what, sizeof what, "swiglu %s [%lld,%lld]%s", dtn(dt), (long long)rows, (long long)f,
             halves ? " (halves of one tensor)" : " (separate views)");
    cmp(what, &y, tol_of(dt, 1e-5));
    release();
}

static void case_add_scale(int64_t rows, int64_t cols, vdn_dtype dt, int pad) {
    char what[128];
    pair x = in(dt, rows, cols, pad, 1.0, 0), y = in(dt, rows, cols, pad, 1.0, 0);
    RUN(vdn_op_add(P(x), P(y)));
    snprintf(what, sizeof what, "add %s [%lld,%lld]%s", dtn(dt), (long long)rows, (long long)cols,
             pad ? " views" : "");
    cmp(what, &x, tol_of(dt, 1e-6));
    RUN(vdn_op_scale(P(y), -1.375));
    snprintf(what, sizeof what, "scale %s [%lld,%lld]%s", dtn(dt), (long long)rows, (long long)cols,
             pad ? " views" : "");
    cmp(what, &y, tol_of(dt, 1e-6));
    release();
}

/* x += gate[idx[r]] * y: gate rows of a wider table (a column view, the adaLN layout), idx
 * picking them; or no idx (row r uses row r); or no gate */
static void case_gate_residual(int64_t rows, int64_t cols, vdn_dtype dt, int mode) {
    char what[128];
    const int n_t = 3;
    pair x = in(dt, rows, cols, mode == 0 ? 0 : PAD, 1.0, 0), y = in(dt, rows, cols, 0, 1.0, 0);
    pair table = in(dt, mode == 1 ? rows : n_t, 6 * cols, 0, 0.5, 0);
    int *ih = vdn_xmalloc(sizeof(int) * (size_t)rows);
    for (int64_t r = 0; r < rows; r++)
        ih[r] = (int)(urand() * n_t);
    pair idx = idx_pair(rows, ih);
    free(ih);
    vdn_tensor gate[2];
    for (int s = 0; s < 2; s++)
        gate[s] = vdn_view_cols(&table.v[s], 2 * cols, cols);
    RUN(vdn_op_gate_residual(P(x), P(y), mode == 2 ? NULL : &gate[side],
                             mode == 0 ? P(idx) : NULL));
    snprintf(what, sizeof what, "gate_residual %s [%lld,%lld] %s", dtn(dt), (long long)rows,
             (long long)cols,
             mode == 0   ? "gate by idx"
             : mode == 1 ? "gate per row"
                         : "no gate");
    cmp(what, &x, tol_of(dt, 1e-6));
    release();
}

static void case_mul_groups(int64_t rows, int heads, int group, vdn_dtype dt) {
    char what[128];
    pair x = in(dt, rows, (int64_t)heads * group, PAD, 1.0, 0);
    pair s = in_unif(VDN_DT_F32, rows, heads, 0, 1);
    RUN(vdn_op_mul_groups(P(x), P(s), group));
    snprintf(what, sizeof what, "mul_groups %s [%lld,%d x %d]", dtn(dt), (long long)rows, heads,
             group);
    cmp(what, &x, tol_of(dt, 1e-6));
    release();
}

/* ---- norms ---- */

static void case_rmsnorm(int64_t rows, int64_t cols, vdn_dtype dt, int with_w, int mode) {
    char what[160];
    const int n_t = 4;
    pair x = in(dt, rows, cols, mode == 2 ? PAD : 0, 2.0, 0.3);
    pair w = in(dt, 1, cols, 0, 0.5, 1.0), y = out(dt, rows, cols, mode == 2 ? 1 : 0);
    pair table = in(dt, mode == 1 ? n_t : rows, 6 * cols, 0, 0.3, 0);
    int *ih = vdn_xmalloc(sizeof(int) * (size_t)rows);
    for (int64_t r = 0; r < rows; r++)
        ih[r] = (int)(urand() * n_t);
    pair idx = idx_pair(rows, ih);
    free(ih);
    vdn_tensor sh[2], sc[2];
    for (int s = 0; s < 2; s++) {
        sh[s] = vdn_view_cols(&table.v[s], 3 * cols, cols);
        sc[s] = vdn_view_cols(&table.v[s], 4 * cols, cols);
    }
    const int mod = mode != 0;
    RUN(vdn_op_rmsnorm(P(y), P(x), with_w ? P(w) : NULL, 1e-6, mod ? &sh[side] : NULL,
                       mod ? &sc[side] : NULL, mode == 1 ? P(idx) : NULL));
    snprintf(what, sizeof what, "rmsnorm %s [%lld,%lld]%s%s", dtn(dt), (long long)rows,
             (long long)cols, with_w ? " w" : "",
             mode == 1   ? " adaLN by idx"
             : mode == 2 ? " adaLN per row, views"
                         : "");
    cmp(what, &y, tol_of(dt, 1e-5));
    release();
}

/* the video decoder's form: a float32 residual stream normed into bf16 (or float32), the
 * weight in its own dtype (CUDA: the register kernel for float32 rows with cols % 4 == 0) */
static void case_rmsnorm_mixed(int64_t rows, int64_t cols, vdn_dtype wdt, vdn_dtype ydt, int pad) {
    char what[160];
    pair x = in(VDN_DT_F32, rows, cols, pad, 2.0, 0.3);
    /* wdt I32: no weight */
    pair w = in(wdt == VDN_DT_I32 ? VDN_DT_F32 : wdt, 1, cols, 0, 0.5, 1.0);
    pair y = out(ydt, rows, cols, pad);
    RUN(vdn_op_rmsnorm(P(y), P(x), wdt == VDN_DT_I32 ? NULL : P(w), 1e-6, NULL, NULL, NULL));
    snprintf(what, sizeof what, "rmsnorm F32 -> %s [%lld,%lld] w %s%s", dtn(ydt), (long long)rows,
             (long long)cols, wdt == VDN_DT_I32 ? "none" : dtn(wdt), pad ? " views" : "");
    cmp(what, &y, tol_of(ydt, 1e-5));
    release();
}

static void case_layernorm(int64_t rows, int64_t cols, vdn_dtype dt, int affine) {
    char what[128];
    pair x = in(dt, rows, cols, PAD, 3.0, 1.5), y = out(dt, rows, cols, 0);
    pair w = in(dt, 1, cols, 0, 0.5, 1.0), b = in(dt, 1, cols, 0, 0.5, 0);
    RUN(vdn_op_layernorm(P(y), P(x), affine ? P(w) : NULL, affine ? P(b) : NULL, 1e-5));
    snprintf(what, sizeof what, "layernorm %s [%lld,%lld]%s", dtn(dt), (long long)rows,
             (long long)cols, affine ? " w, b" : "");
    cmp(what, &y, tol_of(dt, 1e-5));
    release();
}

/* q and k as column views of one fused [rows, ...] projection (the DiT's layout) */
static void case_qk_norm_rope_il(int64_t rows, int hq, int hk, int hd, int n_rot, int s0, int s1,
                                 int norm, vdn_dtype dt, int with_k, int interleaved) {
    char what[160];
    const int64_t wq_ = (int64_t)hq * hd, wk_ = (int64_t)hk * hd;
    pair qkv = in(dt, rows, wq_ + wk_ + 24, 0, 1.0, 0);
    pair qo = out(dt, rows, wq_, 0), ko = out(dt, rows, wk_, 0);
    pair wq = in(dt, 1, hd, 0, 0.3, 1.0), wk = in(dt, 1, hd, 0, 0.3, 1.0);
    /* positions: text-length offsets plus a media clock, up to several hundred radians; inv:
     * H3's 10000^(-2j/32) for each axis' pairs */
    const int half = n_rot / 2;
    pair pos = mk_pair(VDN_DT_F64, VDN_DT_F64, rows, 3, 0);
    pair iv = mk_pair(VDN_DT_F32, VDN_DT_F32, 1, half ? half : 1, 0);
    double *ph = vdn_xmalloc(sizeof(double) * 3 * (size_t)rows);
    for (int64_t i = 0; i < 3 * rows; i++)
        ph[i] = floor(urand() * 700) - 60 + (urand() < 0.3 ? 0.5 : 0);
    float inv[128] = {0};
    for (int i = 0; i < half; i++) {
        const int j = i < s0 ? i : (i < s0 + s1 ? i - s0 : i - s0 - s1);
        inv[i] = (float)pow(10000.0, -2.0 * j / 32.0);
    }
    for (int s = 0; s < 2; s++) {
        CHECK(vdn_tensor_set(&pos.v[s], ph, VDN_DT_F64) == 0);
        CHECK(vdn_tensor_set(&iv.v[s], inv, VDN_DT_F32) == 0);
    }
    free(ph);
    vdn_tensor q[2], k[2];
    vdn_rope rope[2];
    for (int s = 0; s < 2; s++) {
        q[s] = vdn_view_cols(&qkv.v[s], 0, wq_);
        k[s] = vdn_view_cols(&qkv.v[s], wq_, wk_);
        rope[s] = (vdn_rope){&pos.v[s], &iv.v[s], n_rot, {s0, s1, half - s0 - s1}, interleaved};
    }
    RUN(vdn_op_qk_norm_rope(P(qo), with_k ? P(ko) : NULL, &q[side], with_k ? &k[side] : NULL,
                            norm ? P(wq) : NULL, norm && with_k ? P(wk) : NULL, hd, 1e-6,
                            n_rot ? &rope[side] : NULL));
    snprintf(what, sizeof what, "qk_norm_rope %s [%lld] q %dx%d k %dx%d rot %d (%d,%d)%s%s q",
             dtn(dt), (long long)rows, hq, hd, with_k ? hk : 0, hd, n_rot, s0, s1,
             norm ? " norm" : "", interleaved ? " interleaved" : "");
    cmp(what, &qo, tol_of(dt, 1e-5));
    if (with_k) {
        what[strlen(what) - 1] = 'k';
        cmp(what, &ko, tol_of(dt, 1e-5));
    }
    release();
}

static void case_qk_norm_rope(int64_t rows, int hq, int hk, int hd, int n_rot, int s0, int s1,
                              int norm, vdn_dtype dt, int with_k) {
    case_qk_norm_rope_il(rows, hq, hk, hd, n_rot, s0, s1, norm, dt, with_k, 0);
}

/* ---- attention ---- */

/* M_BLOCKS: the video VAE decoder's block-diagonal mask, rows in tiles of 179 attending only
 * within their own tile (most 128-row query tiles of the kernels straddle two of them) */
enum { M_DENSE, M_CAUSAL, M_WINDOW, M_BLOCKS };

static void case_attention(int64_t rows, int64_t keys, int hq, int hkv, int hd, int mask_kind,
                           int gated, vdn_dtype dt) {
    char what[160];
    pair q = in(dt, rows, (int64_t)hq * hd, 0, 1.0, 0);
    pair kv = in(dt, keys, 2 * (int64_t)hkv * hd + 8, 0, 1.0, 0); /* k and v side by side */
    pair o = out(dt, rows, (int64_t)hq * hd, 0);
    pair g = in_unif(VDN_DT_F32, rows, hq, 0, 1);
    vdn_attn_mask *m[2];
    vdn_attn_rows ar;
    memset(&ar, 0, sizeof ar);
    if (mask_kind == M_WINDOW) { /* 60 global rows, frames of 40 tokens, window + anchors */
        const int frames = (int)((rows - 60) / 40);
        VDN_ASSERT(vdn_attn_rows_make(&ar, 60, frames, 40, 1, 1, 2, 1) == 0 && ar.rows == rows &&
                   keys == rows);
    } else if (mask_kind == M_BLOCKS) {
        VDN_ASSERT(vdn_attn_rows_make(&ar, 0, (int)(rows / 179), 179, 1, 0, 1, 0) == 0 &&
                   ar.rows == rows && keys == rows);
    }
    vdn_tensor k[2], v[2];
    for (int s = 0; s < 2; s++) {
        k[s] = vdn_view_cols(&kv.v[s], 0, (int64_t)hkv * hd);
        v[s] = vdn_view_cols(&kv.v[s], (int64_t)hkv * hd + 8, (int64_t)hkv * hd);
        m[s] = mask_kind == M_DENSE    ? vdn_attn_mask_dense(dev[s], (int)rows, (int)keys)
               : mask_kind == M_CAUSAL ? vdn_attn_mask_causal(dev[s], (int)rows)
                                       : vdn_attn_mask_rows(dev[s], (int)rows, ar.head_end,
                                                            ar.tail_start, ar.lo, ar.hi);
        CHECK(m[s] != NULL, "mask on %s: %s", vdn_dev_name(dev[s]), vdn_dev_error(dev[s]));
    }
    vdn_attn_rows_free(&ar);
    if (m[0] && m[1])
        RUN(vdn_op_attention(P(o), P(q), &k[side], &v[side], hd, 1.0 / sqrt((double)hd), m[side],
                             gated ? P(g) : NULL));
    snprintf(what, sizeof what, "attention %s %lldx%lld q %dx%d kv %d %s%s", dtn(dt),
             (long long)rows, (long long)keys, hq, hd, hkv,
             mask_kind == M_DENSE    ? "dense"
             : mask_kind == M_CAUSAL ? "causal"
             : mask_kind == M_WINDOW ? "window+anchors"
                                     : "block-diagonal",
             gated ? " gate" : "");
    /* the CUDA kernels compute in bf16 (fp32 operands are rounded first) and round P to bf16
     * before P V, as every flash kernel does */
    cmp(what, &o, 1e-2);
    for (int s = 0; s < 2; s++)
        vdn_attn_mask_free(m[s]);
    release();
}

/* ---- diffusion ---- */

static void case_time_features(int M, int dim) {
    char what[96];
    pair t = mk_pair(VDN_DT_F32, VDN_DT_F32, 1, M, 0), e = out(VDN_DT_F32, M, dim, 0);
    float th[8] = {0.f, 0.37f, 1.f, 999.f, 500.25f, 12.5f, 0.001f, 731.f};
    for (int s = 0; s < 2; s++)
        CHECK(vdn_tensor_set(&t.v[s], th, VDN_DT_F32) == 0);
    const int64_t nt[1] = {M};
    vdn_tensor tv[2] = {vdn_view_reshape(&t.v[0], 1, nt), vdn_view_reshape(&t.v[1], 1, nt)};
    RUN(vdn_op_time_features(P(e), &tv[side]));
    snprintf(what, sizeof what, "time_features [%d,%d]", M, dim);
    /* the same float32 exponent and argument; cos/sin of it in double on both */
    cmp(what, &e, 1e-6);
    release();
}

static void case_euler(int64_t rows, int64_t cols, vdn_dtype dt_v, double sg, double sn) {
    char what[128];
    pair x = in(VDN_DT_F32, rows, cols, PAD, 1.0, 0), v = in(dt_v, rows, cols, 0, 1.0, 0);
    RUN(vdn_op_euler(P(x), P(v), sg, sn));
    snprintf(what, sizeof what, "euler v %s [%lld,%lld] sigma %.3f -> %.3f", dtn(dt_v),
             (long long)rows, (long long)cols, sg, sn);
    cmp(what, &x, 1e-6); /* the same float32 operations */
    release();
}

/* ---- the VDA family (op_vda.h) ---- */

#define HD 128

/* state dtype per side */
static vdn_dtype st_dt(int s) {
    return vdn_vda_state_dtype(dev[s]);
}
static vdn_dtype ft_dt(int s) {
    return vdn_vda_feat_dtype(dev[s]);
}
static pair st_out(int64_t rows, int64_t cols) {
    return out_typed(st_dt(0), st_dt(1), rows, cols, 0);
}
static pair ft_out(int64_t rows, int64_t cols) {
    return out_typed(ft_dt(0), ft_dt(1), rows, cols, 0);
}
/* an input in the family's dtypes: f32 host values h, rounded to the GPU's dtype for both */
static pair vda_in(int state, int64_t rows, int64_t cols, const float *h) {
    pair p = mk_pair(state ? st_dt(0) : ft_dt(0), state ? st_dt(1) : ft_dt(1), rows, cols, 0);
    put(&p, h);
    return p;
}
static float *randn_h(int64_t n, double scale, double offset) {
    float *h = vdn_xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)(offset + scale * nrand());
    return h;
}
static float *unif_h(int64_t n, double lo, double hi) {
    float *h = vdn_xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)(lo + (hi - lo) * urand());
    return h;
}

/* prep: k, v, q column views of one fused projection, the 5x5 / 5-tap convolutions (or none) */
static void case_vda_prep(int F, int gh, int gw, int H, int conv, int with_q) {
    char what[128];
    const int64_t S = (int64_t)gh * gw, C = (int64_t)H * HD, n = F * S;
    pair proj = in(VDN_DT_BF16, n, 3 * C + 64, 0, 1.0, 0);
    pair beta = in_unif(VDN_DT_F32, n, H, 0.05, 0.95);
    pair ksp = in(VDN_DT_BF16, C, 25, 0, 0.2, 0), ktm = in(VDN_DT_BF16, C, 5, 0, 0.4, 0);
    pair vsp = in(VDN_DT_BF16, C, 25, 0, 0.2, 0), vtm = in(VDN_DT_BF16, C, 5, 0, 0.4, 0);
    pair ks = st_out((int64_t)F * H * S, HD), kb = ft_out((int64_t)F * H * S, HD);
    pair vt = ft_out((int64_t)F * H * S, HD), qt = ft_out((int64_t)F * H * S, HD);
    vdn_tensor q[2], k[2], v[2];
    vdn_vda_conv cv[2];
    vdn_vda_feats fo[2];
    for (int s = 0; s < 2; s++) {
        q[s] = vdn_view_cols(&proj.v[s], 0, C);
        k[s] = vdn_view_cols(&proj.v[s], C, C);
        v[s] = vdn_view_cols(&proj.v[s], 2 * C, C);
        cv[s] = (vdn_vda_conv){&ksp.v[s], &ktm.v[s], &vsp.v[s], &vtm.v[s]};
        fo[s] = (vdn_vda_feats){&ks.v[s], &kb.v[s], &vt.v[s], with_q ? &qt.v[s] : NULL};
    }
    RUN(vdn_op_vda_prep(&fo[side], &k[side], &v[side], with_q ? &q[side] : NULL,
                        conv ? &cv[side] : NULL, P(beta), F, gh, gw, H));
    snprintf(what, sizeof what, "vda_prep F %d grid %dx%d H %d%s", F, gh, gw, H,
             conv ? " conv" : " no conv (text)");
    char w2[160];
    /* bf16 features; k~, q~ are L2-normalised, so errors are relative to unit rows */
    snprintf(w2, sizeof w2, "%s: ks", what), cmp(w2, &ks, 1e-2);
    snprintf(w2, sizeof w2, "%s: kb", what), cmp(w2, &kb, 1e-2);
    snprintf(w2, sizeof w2, "%s: vt", what), cmp(w2, &vt, 1e-2);
    if (with_q) snprintf(w2, sizeof w2, "%s: qt", what), cmp(w2, &qt, 1e-2);
    release();
}

/* stats, solve (inverse and additive), scans, gather, readout on one chain of random inputs */
static void case_vda_chain(int F, int H, int S, int with_s0, int additive) {
    char what[160];
    const int nmat = F * H;
    const int64_t rows = (int64_t)nmat * S;
    /* features: L2-normalised k~ scaled by beta like the prep makes them */
    float *kh = randn_h(rows * HD, 1.0, 0), *vh = randn_h(rows * HD, 1.0, 0);
    float *ksh = vdn_xmalloc(sizeof(float) * (size_t)rows * HD),
          *kbh = vdn_xmalloc(sizeof(float) * (size_t)rows * HD);
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0, beta = 0.05 + 0.9 * urand();
        for (int i = 0; i < HD; i++)
            ss += (double)kh[r * HD + i] * kh[r * HD + i];
        for (int i = 0; i < HD; i++) {
            const double kn = kh[r * HD + i] / sqrt(ss);
            ksh[r * HD + i] = (float)(sqrt(beta) * kn);
            kbh[r * HD + i] = (float)(beta * kn);
        }
    }
    pair ks = vda_in(1, rows, HD, ksh), kb = vda_in(0, rows, HD, kbh), vt = vda_in(0, rows, HD, vh);
    free(kh), free(vh), free(ksh), free(kbh);
    pair A = st_out((int64_t)nmat * HD, HD), B = st_out((int64_t)nmat * HD, HD);
    RUN(vdn_op_vda_stats(P(A), P(B), P(ks), P(kb), P(vt), nmat));
    snprintf(what, sizeof what, "vda_stats %d x [%d, %d]: A (TF32 on cuda)", nmat, S, HD);
    cmp(what, &A, 3e-3);
    snprintf(what, sizeof what, "vda_stats %d x [%d, %d]: B", nmat, S, HD);
    cmp(what, &B, 1e-5);
    /* the rest of the chain starts from the CPU's A and B on both sides */
    for (int s = 0; s < 2; s++) {
        float *a = get_f32(&A.v[0]), *b = get_f32(&B.v[0]);
        CHECK(vdn_tensor_set(&A.v[s], a, VDN_DT_F32) == 0 &&
              vdn_tensor_set(&B.v[s], b, VDN_DT_F32) == 0);
        free(a), free(b);
    }
    float *al = unif_h((int64_t)F * H * HD, 0.6, 1.0);
    pair alpha = vda_in(1, F, (int64_t)H * HD, al);
    free(al);
    const int64_t nm[2] = {(int64_t)nmat, HD};
    vdn_tensor alv[2] = {vdn_view_reshape(&alpha.v[0], 2, nm),
                         vdn_view_reshape(&alpha.v[1], 2, nm)};
    pair T = st_out((int64_t)nmat * HD, HD), J = st_out((int64_t)nmat * HD, HD);
    RUN(vdn_op_vda_solve(P(T), P(J), P(A), P(B), &alv[side], additive ? S : 0));
    snprintf(what, sizeof what, "vda_solve %d x %d%s: T", nmat, HD, additive ? " additive" : "");
    cmp(what, &T, 1e-4);
    snprintf(what, sizeof what, "vda_solve %d x %d%s: J", nmat, HD, additive ? " additive" : "");
    cmp(what, &J, 1e-4);
    /* the text state's form: no alpha, no T */
    pair J2 = st_out((int64_t)nmat * HD, HD);
    RUN(vdn_op_vda_solve(NULL, P(J2), P(A), P(B), NULL, 0));
    snprintf(what, sizeof what, "vda_solve %d x %d, no alpha, J only", nmat, HD);
    cmp(what, &J2, 1e-4);
    /* scans and gather from the CPU's T and J */
    for (int s = 0; s < 2; s++) {
        float *t = get_f32(&T.v[0]), *j = get_f32(&J.v[0]);
        CHECK(vdn_tensor_set(&T.v[s], t, VDN_DT_F32) == 0 &&
              vdn_tensor_set(&J.v[s], j, VDN_DT_F32) == 0);
        free(t), free(j);
    }
    float *s0h = randn_h((int64_t)H * HD * HD, 0.05, 0);
    pair S0 = vda_in(1, (int64_t)H * HD, HD, s0h);
    free(s0h);
    pair Pm = st_out((int64_t)nmat * HD, HD), Rm = st_out((int64_t)nmat * HD, HD);
    RUN(vdn_op_vda_scans(P(Pm), P(Rm), P(T), P(J), with_s0 ? P(S0) : NULL, F));
    snprintf(what, sizeof what, "vda_scans F %d H %d%s: P", F, H, with_s0 ? " S0" : "");
    cmp(what, &Pm, 1e-4);
    snprintf(what, sizeof what, "vda_scans F %d H %d%s: R", F, H, with_s0 ? " S0" : "");
    cmp(what, &Rm, 1e-4);
    for (int s = 0; s < 2; s++) {
        float *p = get_f32(&Pm.v[0]), *r = get_f32(&Rm.v[0]);
        CHECK(vdn_tensor_set(&Pm.v[s], p, VDN_DT_F32) == 0 &&
              vdn_tensor_set(&Rm.v[s], r, VDN_DT_F32) == 0);
        free(p), free(r);
    }
    /* chunk windows (chunk 2, radius 1: S0 reaches the frames through the window ends), or each
     * frame alone (the scans' P and R bridge into every frame) */
    int *wh = vdn_xmalloc(sizeof(int) * 2 * (size_t)F);
    for (int t = 0; t < F; t++) {
        const int c = t / 2;
        wh[2 * t] = with_s0 ? (c - 1) * 2 : t, wh[2 * t + 1] = with_s0 ? (c + 2) * 2 - 1 : t;
    }
    pair win = mk_pair(VDN_DT_I32, VDN_DT_I32, F, 2, 0);
    for (int s = 0; s < 2; s++)
        CHECK(vdn_tensor_set(&win.v[s], wh, VDN_DT_I32) == 0);
    free(wh);
    pair Sl = ft_out((int64_t)nmat * HD, HD);
    RUN(vdn_op_vda_gather(P(Sl), P(Pm), P(Rm), with_s0 ? P(S0) : NULL, P(alpha), P(win), F));
    snprintf(what, sizeof what, "vda_gather F %d H %d%s", F, H, with_s0 ? " S0" : "");
    cmp(what, &Sl, 1e-2);
    /* readout from the GPU's Slin on both sides (a bf16 feature) */
    float *slh = get_f32(&Sl.v[1]), *qh = randn_h(rows * HD, 0.1, 0);
    pair Sl2 = vda_in(0, (int64_t)nmat * HD, HD, slh), qt = vda_in(0, rows, HD, qh);
    free(slh), free(qh);
    pair r = st_out(rows, HD);
    RUN(vdn_op_vda_readout(P(r), P(Sl2), P(qt), nmat));
    snprintf(what, sizeof what, "vda_readout %d x [%d, %d]", nmat, S, HD);
    cmp(what, &r, 1e-5);
    release();
}

static void case_vda_epilogue(int F, int H, int S) {
    char what[96];
    const int64_t C = (int64_t)H * HD, rows = (int64_t)F * S;
    float *rh = randn_h(rows * C, 1.0, 0.2);
    pair r = vda_in(1, (int64_t)F * H * S, HD, rh);
    free(rh);
    pair wn = in(VDN_DT_BF16, 1, HD, 0, 0.3, 1.0), gpre = in(VDN_DT_BF16, rows, C, 4, 2.0, 0);
    pair o = out(VDN_DT_BF16, rows, C, 4);
    RUN(vdn_op_vda_epilogue(P(o), P(r), P(wn), 1e-6, P(gpre), F, H));
    snprintf(what, sizeof what, "vda_epilogue F %d H %d S %d (views)", F, H, S);
    cmp(what, &o, 1e-2);
    release();
}

static void case_vda_alpha(int F, int S, int hidden, int H) {
    char what[96];
    pair x = in(VDN_DT_BF16, (int64_t)F * S, hidden, 0, 1.0, 0.1);
    pair m = out(VDN_DT_F32, F, hidden, 0);
    RUN(vdn_op_frame_means(P(m), P(x), F));
    snprintf(what, sizeof what, "frame_means F %d S %d hidden %d", F, S, hidden);
    cmp(what, &m, 1e-5);
    const int64_t C = (int64_t)H * HD;
    pair u = in(VDN_DT_F32, F, C, 0, 1.0, 0), db = in(VDN_DT_F32, 1, C, 0, 0.5, -1.0);
    pair al = in(VDN_DT_F32, 1, H, 0, 0.5, -1.0);
    pair a = st_out(F, C);
    RUN(vdn_op_alpha_finish(P(a), P(u), P(db), P(al)));
    snprintf(what, sizeof what, "alpha_finish F %d C %lld", F, (long long)C);
    cmp(what, &a, 1e-5);
    release();
}

/* ---- the decoders' convolutions (op_conv.h) ---- */

/* The CUDA convolutions are TF32 tensor-core GEMMs (kernels/op_cuda_conv.cu). By default each
 * operand is split into two TF32 numbers and a product takes three MMAs, which leaves at most
 * about 3 x 2^-22 relative per product (the dropped small x small term and the small parts'
 * rounding), random in sign, and each 8-term MMA sum is added to the total in float32 (round to
 * nearest). Emulated on the CPU for random products (the tensor cores' truncating accumulation
 * modelled), that gives a relative L2 error of 2.3e-7 at reduction length R = 1056 and 3.6e-7 at R
 * = 2816 (this file's longest), below float32 FMAs in order (5.8e-7, 9.4e-7): 2e-6 is
 * float32-class with 2x margin. It is tight on purpose: 1e-5 passed the kernel of 89f1c00, which
 * accumulated whole reductions on the tensor cores (their truncation toward zero, a bias linear in
 * R: 7.1e-6 measured on the H200 at R = 1056, 3.3e-6 at R = 490, 2.3e-5 emulated at R = 2816) and
 * moved the reference audio decode by 15x the float32 error. (Plain TF32, one MMA per product,
 * ran here at 1e-3 until its switch went: docs/PERF.md, the house-in-order change.) */
static const double conv_tol = 2e-6;

/* B signals of cin channels each, as a batch (rows b cin .. b cin + cin - 1); accumulate: y
 * starts as random values of the conv's scale (a residual stream) and the conv adds to them */
static void conv1d_case(int B, int64_t cin, int64_t lin, int64_t cout, int K, int stride, int pad,
                        int dilation, int bias, vdn_dtype dt, int accumulate) {
    char what[128];
    const int64_t lout = (lin + 2 * pad - (int64_t)dilation * (K - 1) - 1) / stride + 1;
    pair x = in(dt, B * cin, lin, PAD, 1.0, 0),
         w = in(dt, cout, cin * K, 0, 1.0 / sqrt(cin * K), 0);
    pair b = in(dt, 1, cout, 0, 0.3, 0);
    pair y = accumulate ? in(dt, B * cout, lout, 1, 1.0, 0) : out(dt, B * cout, lout, 1);
    RUN(vdn_op_conv1d(P(y), P(x), P(w), bias ? P(b) : NULL, K, stride, pad, dilation, accumulate));
    snprintf(what, sizeof what,
             "conv1d %s %dx[%lld,%lld] -> %lld, K %d stride %d pad %d dil %d%s%s", dtn(dt), B,
             (long long)cin, (long long)lin, (long long)cout, K, stride, pad, dilation,
             bias ? " bias" : "", accumulate ? " acc" : "");
    cmp(what, &y, tol_of(dt, conv_tol));
    release();
}
static void case_conv1d(int B, int64_t cin, int64_t lin, int64_t cout, int K, int stride, int pad,
                        int dilation, int bias, vdn_dtype dt) {
    conv1d_case(B, cin, lin, cout, K, stride, pad, dilation, bias, dt, 0);
}

static void case_conv_transpose1d(int B, int64_t cin, int64_t lin, int64_t cout, int K, int stride,
                                  int pad, int bias, vdn_dtype dt) {
    char what[128];
    const int64_t lout = (lin - 1) * stride - 2 * pad + K;
    pair x = in(dt, B * cin, lin, PAD, 1.0, 0),
         w = in(dt, cin, cout * K, 0, 1.0 / sqrt(cin * K), 0);
    pair b = in(dt, 1, cout, 0, 0.3, 0), y = out(dt, B * cout, lout, 0);
    RUN(vdn_op_conv_transpose1d(P(y), P(x), P(w), bias ? P(b) : NULL, K, stride, pad));
    snprintf(what, sizeof what,
             "conv_transpose1d %s %dx[%lld,%lld] -> %lld, K %d stride %d pad %d%s", dtn(dt), B,
             (long long)cin, (long long)lin, (long long)cout, K, stride, pad, bias ? " bias" : "");
    cmp(what, &y, tol_of(dt, conv_tol));
    release();
}

/* BigVGAN's anti-aliased SnakeBeta: 12-tap low-pass filters (a windowed sinc, as the release's
 * kaiser-sinc filters are), ratio 2; alpha, beta on their log scale */
/* amp: the inputs' scale (sin's argument alpha u reaches a few amp) */
static void case_snake_aa(int B, int64_t C, int64_t L, int K, int ratio, vdn_dtype dt, double amp) {
    char what[128];
    float f[64];
    double sum = 0;
    for (int k = 0; k < K; k++) {
        const double t = (k - (K - 1) / 2.0) / ratio,
                     win = 0.5 - 0.5 * cos(6.283185307 * (k + 0.5) / K);
        f[k] = (float)((t == 0 ? 1.0 : sin(3.14159265 * t) / (3.14159265 * t)) * win);
        sum += f[k];
    }
    for (int k = 0; k < K; k++)
        f[k] = (float)(f[k] / sum);
    pair x = in(dt, B * C, L, PAD, amp, 0), al = in(VDN_DT_F32, 1, C, 0, 0.3, 0),
         be = in(VDN_DT_F32, 1, C, 0, 0.3, 0);
    pair fu = mk_pair(VDN_DT_F32, VDN_DT_F32, 1, K, 0),
         fd = mk_pair(VDN_DT_F32, VDN_DT_F32, 1, K, 0);
    put(&fu, f), put(&fd, f);
    pair y = out(dt, B * C, L, 1);
    RUN(vdn_op_snake_aa(P(y), P(x), P(al), P(be), P(fu), P(fd), ratio));
    snprintf(what, sizeof what, "snake_aa %s %dx[%lld,%lld] K %d ratio %d", dtn(dt), B,
             (long long)C, (long long)L, K, ratio);
    cmp(what, &y, tol_of(dt, 1e-5));
    release();
}

static void conv_cases(void) {
    const vdn_dtype BF = VDN_DT_BF16, F32 = VDN_DT_F32;
    /* the audio decoder's convolutions: residual convs (dilations 1, 3, 5), strided upsampling,
     * the anti-aliased activation; odd lengths; batches of 2 (the stereo channels); both CUDA tile
     * shapes (output channels >= 64 and fewer), reductions that are not a multiple of the CUDA
     * kernel's 32-term stage, every phase of the release's strides 5 and 2; activations longer
     * than one 512-sample tile */
    case_conv1d(1, 16, 101, 24, 7, 1, 3, 1, 1, F32);
    case_conv1d(2, 8, 77, 8, 3, 1, 5, 5, 1, BF);
    case_conv1d(1, 12, 50, 4, 1, 1, 0, 1, 0, F32);
    case_conv1d(1, 5, 64, 7, 4, 2, 1, 1, 1, F32);
    case_conv1d(2, 96, 300, 80, 11, 1, 25, 5, 1, F32);
    case_conv1d(2, 24, 1000, 24, 7, 1, 9, 3, 1, F32);
    case_conv1d(2, 70, 45, 130, 7, 1, 3, 1, 1, F32);
    /* release-like reduction lengths (256 channels x 11 taps; 512 x 2 taps per phase), where a
     * biased accumulation shows (conv_tol) */
    case_conv1d(2, 256, 190, 64, 11, 1, 25, 5, 1, F32);
    /* grids of at least two 64 x 128 tiles an SM (132-SM H100/H200; smaller conv1d grids split
     * their reduction when it is long); a bf16 case (no float32 fast load); the CUDA strip tiles
     * (stride 1, K >= 3 here) and the im2col rows (K = 1, stride 2, the transposes) on both
     * tile shapes */
    case_conv1d(2, 40, 17000, 96, 3, 1, 1, 1, 1, F32);
    case_conv_transpose1d(2, 24, 10000, 64, 4, 2, 1, 1, F32);
    case_conv1d(1, 20, 300, 72, 5, 1, 2, 1, 1, BF);
    case_conv1d(2, 64, 500, 80, 1, 1, 0, 1, 1, F32);
    case_conv1d(2, 24, 34000, 64, 4, 2, 1, 1, 1, F32);
    /* a residual conv's K 3 at dilation 5 (12 input channels a 32-row stage) on several CUDA
     * wgmma strip tiles (output channels >= 64), whole reductions (no split) */
    case_conv1d(2, 128, 700, 128, 3, 1, 5, 5, 1, F32);
    /* few tiles, long reductions: the CUDA split reduction (4 parts; strips, then im2col rows,
     * then a transposed conv's 5 phases: outputs per phase, the ends left out) */
    case_conv1d(2, 512, 100, 128, 7, 1, 3, 1, 1, F32);
    /* a release stage's residual conv (256 channels x 11 taps, dilation 3) on the CUDA wgmma
     * tiles with pre-split weights: 3 channel blocks, 400 columns (the last tile partial), the
     * reduction split */
    case_conv1d(2, 256, 400, 192, 11, 1, 15, 3, 1, F32);
    case_conv1d(1, 1000, 60, 64, 1, 1, 0, 1, 0, F32);
    /* conv_pre's class (200 columns, a long reduction, many output channels: the weights' layout
     * per call, wtap2_k, larger than the columns' work) and a 200-column transposed conv: 5
     * channel blocks, cin not a multiple of 16 */
    case_conv1d(2, 1000, 200, 320, 7, 1, 3, 1, 1, F32);
    case_conv_transpose1d(2, 392, 200, 192, 8, 4, 2, 1, F32);
    /* accumulate (y += conv, the AMP block's residual add) on every CUDA epilogue: conv_tap_k
     * whole and with a split reduction (the parts' sum), conv_direct_k (narrow), the mma.sync
     * strip tiles (a bf16 case) */
    conv1d_case(2, 128, 700, 128, 3, 1, 5, 5, 1, F32, 1);
    conv1d_case(2, 256, 400, 192, 11, 1, 15, 3, 1, F32, 1);
    conv1d_case(2, 24, 1000, 24, 7, 1, 9, 3, 1, F32, 1);
    conv1d_case(1, 20, 300, 72, 5, 1, 2, 1, 0, BF, 1);
    case_conv_transpose1d(2, 512, 40, 64, 10, 5, 3, 1, F32);
    case_conv_transpose1d(1, 16, 33, 8, 16, 8, 4, 1, F32);
    case_conv_transpose1d(1, 6, 17, 5, 4, 2, 1, 0, BF);
    case_conv_transpose1d(1, 3, 9, 4, 11, 5, 3, 1, F32);
    case_conv_transpose1d(2, 128, 41, 64, 9, 5, 2, 1, F32);
    case_conv_transpose1d(2, 32, 300, 16, 4, 2, 1, 1, F32);
    case_conv_transpose1d(2, 512, 60, 32, 4, 2, 1, 1, F32);
    case_snake_aa(1, 6, 131, 12, 2, F32, 1.0);
    case_snake_aa(1, 3, 40, 12, 2, BF, 1.0);
    case_snake_aa(1, 2, 17, 6, 3, F32, 1.0);
    case_snake_aa(2, 5, 1100, 12, 2, F32, 1.0);
    case_snake_aa(2, 3, 513, 11, 3, F32, 1.0);
    /* sin's arguments in the tens of thousands: the CUDA kernel's float sin^2 and, from 32768 on,
     * its double fallback (kernels/op_cuda_conv.cu sin_sq) */
    case_snake_aa(2, 4, 700, 12, 2, F32, 3e4);
}

/* ---- the video VAE encoder's ops (op_conv.h: conv2d, group_norm) ----
 * The CUDA conv2d multiplies bf16 operands (the gathered image values and the weight rounded to
 * bf16, float32 accumulation on the tensor cores): about 2^-9 relative per operand, random in
 * sign, so a relative L2 error of a few 1e-3 whatever the storage dtype; 1e-2 as for every bf16
 * result here. x in xdt, y in ydt (the encoder: bf16 -> bf16 for a resnet's conv1, bf16 -> f32
 * accumulating for its conv2, f32 -> f32 for conv_in, the shortcut and the downsamplers). */
static void conv2d_case(int B, int64_t cin, int H, int W, int64_t cout, int K, int stride, int t,
                        int bo, int l, int r, int reflect, int bias, vdn_dtype xdt, vdn_dtype ydt,
                        int accumulate) {
    char what[192];
    const int pad[4] = {t, bo, l, r};
    const int Ho = (H + t + bo - K) / stride + 1, Wo = (W + l + r - K) / stride + 1;
    pair x = in(xdt, B * cin, (int64_t)H * W, PAD, 1.0, 0),
         w = in(xdt, cout, cin * K * K, 0, 1.0 / sqrt((double)cin * K * K), 0);
    pair b = in(VDN_DT_F32, 1, cout, 0, 0.3, 0);
    pair y = accumulate ? in(ydt, B * cout, (int64_t)Ho * Wo, 1, 1.0, 0)
                        : out(ydt, B * cout, (int64_t)Ho * Wo, 1);
    RUN(vdn_op_conv2d(P(y), P(x), P(w), bias ? P(b) : NULL, H, W, K, stride, pad, reflect,
                      accumulate));
    snprintf(what, sizeof what,
             "conv2d %s->%s %dx[%lld,%dx%d] -> %lld K %d s %d pad %d%d%d%d %s%s%s", dtn(xdt),
             dtn(ydt), B, (long long)cin, H, W, (long long)cout, K, stride, t, bo, l, r,
             reflect ? "reflect" : "zeros", bias ? " bias" : "", accumulate ? " acc" : "");
    cmp(what, &y, 1e-2);
    release();
}

static void group_norm_at(int B, int64_t C, int64_t L, int groups, vdn_dtype xdt, vdn_dtype ydt,
                          vdn_act act, int inplace, double scale, double offset) {
    char what[160];
    pair x = in(xdt, B * C, L, PAD, scale, offset), w = in(VDN_DT_F32, 1, C, 0, 0.2, 1.0),
         b = in(VDN_DT_F32, 1, C, 0, 0.3, 0);
    pair y = inplace ? x : out(ydt, B * C, L, 1);
    RUN(vdn_op_group_norm(P(y), P(x), P(w), P(b), groups, 1e-6, act));
    snprintf(what, sizeof what, "group_norm %s->%s %dx[%lld,%lld] %d groups%s%s, x ~ %g + %g N",
             dtn(xdt), dtn(inplace ? xdt : ydt), B, (long long)C, (long long)L, groups,
             act == VDN_ACT_SILU ? " silu" : "", inplace ? " in place" : "", offset, scale);
    cmp(what, &y, tol_of(inplace ? xdt : ydt, 2e-6));
    release();
}
static void case_group_norm(int B, int64_t C, int64_t L, int groups, vdn_dtype xdt, vdn_dtype ydt,
                            vdn_act act, int inplace) {
    group_norm_at(B, C, L, groups, xdt, ydt, act, inplace, 1.5, 0.7);
}

static void encoder_cases(void) {
    const vdn_dtype BF = VDN_DT_BF16, F32 = VDN_DT_F32;
    /* the encoder's convs: 3x3 reflect pad 1 (conv_in's 3 channels: a reduction of 27), the 1x1
     * shortcut and quant_conv, the downsampler (reflect pad of 1 bottom
     * and right, stride 2), the residual add (accumulate); zero padding and odd sizes; a batch.
     * Input channels not a multiple of 32 take the CUDA kernel's torch-order reduction, the
     * others its tap-major one (a stage = one tap of 32 channels). */
    conv2d_case(1, 3, 32, 48, 8, 3, 1, 1, 1, 1, 1, 1, 1, F32, F32, 0);
    conv2d_case(1, 8, 17, 23, 16, 3, 1, 1, 1, 1, 1, 1, 1, F32, F32, 0);
    conv2d_case(2, 16, 12, 10, 8, 1, 1, 0, 0, 0, 0, 1, 1, BF, BF, 0);
    conv2d_case(1, 48, 6, 5, 48, 1, 1, 0, 0, 0, 0, 1, 1, F32, F32, 0);
    conv2d_case(1, 8, 32, 32, 8, 3, 2, 0, 1, 0, 1, 1, 1, F32, F32, 0);
    conv2d_case(1, 16, 20, 14, 16, 3, 1, 1, 1, 1, 1, 1, 1, F32, F32, 1);
    conv2d_case(2, 5, 9, 11, 7, 3, 2, 2, 1, 0, 2, 0, 0, BF, BF, 0);
    conv2d_case(1, 128, 64, 64, 128, 3, 1, 1, 1, 1, 1, 1, 1, F32, F32, 1);
    /* tap-major: a batch of tiles, bf16 in and out (conv1), output channels over two blocks of
     * 128 with a partial one, pixels over several blocks of 128 with a partial one */
    conv2d_case(3, 64, 20, 18, 160, 3, 1, 1, 1, 1, 1, 1, 1, BF, BF, 0);
    /* bf16 in, float32 out accumulating (conv2's residual add), no bias */
    conv2d_case(2, 32, 24, 20, 32, 3, 1, 1, 1, 1, 1, 1, 0, BF, F32, 1);
    /* float32 in, the downsampler's stride 2 with the bottom/right reflect pad, odd sides */
    conv2d_case(2, 32, 33, 31, 40, 3, 2, 0, 1, 0, 1, 1, 1, F32, F32, 0);
    /* the shortcut's 1x1 tap-major, zero pads of 2 (a 3x3 reads past one reflection's reach) */
    conv2d_case(2, 64, 9, 7, 96, 1, 1, 0, 0, 0, 0, 1, 1, F32, F32, 0);
    conv2d_case(1, 32, 6, 7, 24, 3, 1, 2, 2, 2, 2, 0, 1, BF, F32, 0);
    /* a reduction of 73,728 rows (2,304 stages) */
    conv2d_case(1, 8192, 3, 2, 4, 3, 1, 1, 1, 1, 1, 1, 1, F32, F32, 0);
    case_group_norm(1, 8, 1536, 4, F32, F32, VDN_ACT_SILU, 0);
    case_group_norm(2, 32, 77, 8, F32, F32, VDN_ACT_NONE, 0);
    case_group_norm(1, 64, 4096, 32, F32, F32, VDN_ACT_SILU, 1);
    case_group_norm(1, 16, 300, 4, BF, BF, VDN_ACT_SILU, 0);
    /* rows past one 4096-column slice (a partial last one), float32 in, bf16 out (norm1's) */
    case_group_norm(3, 64, 5000, 32, F32, BF, VDN_ACT_SILU, 0);
    /* bf16 in place over slices (norm2's), and 32 channels a group over few columns */
    case_group_norm(2, 128, 8200, 32, BF, BF, VDN_ACT_SILU, 1);
    case_group_norm(3, 1024, 64, 32, F32, BF, VDN_ACT_SILU, 0);
    /* a large mean over a small spread: the float64 sums keep the variance */
    group_norm_at(2, 64, 3000, 32, F32, F32, VDN_ACT_NONE, 0, 1.0, 40.0);
}

/* ---- the video decoder's pixel ops (op_pixels.h) ----
 * The CUDA kernels move values and round each float32 operation as the CPU does (no fused
 * multiply-add, correctly rounded division), so the tolerance is 0: the same bits. */

/* tiles of T x Hl x Wl tokens, each followed by 5 rows that are not tokens (the ViT's registers) */
static void case_unpatchify(int tiles, int T, int Hl, int Wl, int C, int pt, int p, vdn_dtype dt) {
    char what[128];
    const int64_t N = (int64_t)T * Hl * Wl, stride = N + 5;
    pair x = in(dt, tiles * stride, (int64_t)C * pt * p * p, PAD, 1.0, 0);
    pair y = out(VDN_DT_F32, (int64_t)tiles * C * T * pt, (int64_t)Hl * p * Wl * p, 1);
    RUN(vdn_op_unpatchify(P(y), P(x), tiles, stride, T, Hl, Wl, C, pt, p));
    snprintf(what, sizeof what, "unpatchify %s %d tiles %dx%dx%d C %d patch %dx%dx%d", dtn(dt),
             tiles, T, Hl, Wl, C, pt, p, p);
    cmp(what, &y, 0.0);
    release();
}

/* ny x nx tiles of th x tw with the given overlaps (uneven, as split_tiles' slack makes them) */
static void case_tile_stitch(int ny, int nx, int th, int tw, const int *oy, const int *ox, int P_) {
    char what[128];
    vdn_tile_grid g = {.ny = ny, .nx = nx, .th = th, .tw = tw};
    for (int i = 1; i < ny; i++)
        g.y0[i] = g.y0[i - 1] + th - (g.oy[i - 1] = oy[i - 1]);
    for (int j = 1; j < nx; j++)
        g.x0[j] = g.x0[j - 1] + tw - (g.ox[j - 1] = ox[j - 1]);
    const int64_t H = g.y0[ny - 1] + th, W = g.x0[nx - 1] + tw;
    pair t = in(VDN_DT_F32, (int64_t)ny * nx * P_, (int64_t)th * tw, 0, 1.0, 0);
    pair y = out(VDN_DT_F32, P_, H * W, 0);
    RUN(vdn_op_tile_stitch(P(y), P(t), &g));
    snprintf(what, sizeof what, "tile_stitch %dx%d tiles of %dx%d -> %lldx%lld, %d planes", nx, ny,
             tw, th, (long long)W, (long long)H, P_);
    cmp(what, &y, 0.0);
    release();
}

static void pixel_cases(void) {
    case_unpatchify(3, 2, 3, 5, 3, 2, 4, VDN_DT_F32);
    case_unpatchify(2, 1, 4, 2, 3, 4, 16, VDN_DT_BF16);
    const int oy[2] = {6, 5}, ox[1] = {7}, none[1] = {0};
    case_tile_stitch(3, 2, 16, 20, oy, ox, 4);
    case_tile_stitch(1, 1, 8, 9, none, none, 2);
    case_tile_stitch(2, 1, 16, 16, oy, none, 3);
    /* a cross-fade of 5 frames in place; a view with columns on either side */
    pair a = in(VDN_DT_F32, 5, 300, PAD, 1.0, 0), b = in(VDN_DT_F32, 5, 300, 0, 1.0, 0);
    RUN(vdn_op_crossfade(P(a), P(b)));
    cmp("crossfade 5 x 300", &a, 0.0);
    release();
    /* ImageNet's de-normalisation of the red channel; values past both ends of the clamp */
    pair x = in(VDN_DT_F32, 7, 129, PAD, 2.0, 0), y = out(VDN_DT_F32, 7, 129, 1);
    RUN(vdn_op_scale_shift_clamp(P(y), P(x), 0.229f, 0.485f, 0.0, 1.0));
    cmp("scale_shift_clamp 7 x 129", &y, 0.0);
    release();
}

/* ---- lanes (op.h): work forked to lane 1 of the device, joined back ---- */

/* On dev[side]: y = x w^T on lane 0; fork; lane 1: z = reps (y w^T), one product after another
 * (each reading y); lane 0 meanwhile u = x w^T; join; lane 0: y += z, y += u. Lane 1 starts from
 * y (the fork must wait for lane 0's product) and lane 0 reads z after the join (the join must
 * wait for all of lane 1's products): a missing wait reads the NaN a GPU output starts with, or a
 * partial sum. */
static int lanes_chain(pair *y, pair *z, pair *u, pair *x, pair *w, int reps) {
    vdn_dev *d = dev[side];
    if (vdn_op_linear(P(*y), P(*x), P(*w), NULL, VDN_ACT_NONE, 0) || vdn_dev_fork(d)) return -1;
    for (int i = 0; i < reps; i++)
        if (vdn_op_linear(P(*z), P(*y), P(*w), NULL, VDN_ACT_NONE, i > 0)) return -1;
    if (vdn_dev_lane(d, 0) || vdn_op_linear(P(*u), P(*x), P(*w), NULL, VDN_ACT_NONE, 0) ||
        vdn_dev_join(d))
        return -1;
    return vdn_op_add(P(*y), P(*z)) || vdn_op_add(P(*y), P(*u)) ? -1 : 0;
}

static void case_lanes(int64_t rows, int64_t k, int reps, int check_workspace) {
    char what[160];
    pair x = in(VDN_DT_BF16, rows, k, 0, 1.0, 0), w = in(VDN_DT_BF16, k, k, 0, 1 / sqrt(k), 0);
    pair y = out(VDN_DT_BF16, rows, k, 0), z = out(VDN_DT_BF16, rows, k, 0),
         u = out(VDN_DT_BF16, rows, k, 0);
    size_t before = 0, after = 0;
    vdn_dev_memory(dev[1], &before, NULL);
    RUN(lanes_chain(&y, &z, &u, &x, &w, reps));
    vdn_dev_memory(dev[1], &after, NULL);
    snprintf(what, sizeof what, "lanes: fork, %d products on lane 1, join [%lld,%lld] bf16", reps,
             (long long)rows, (long long)k);
    cmp(what, &y, 1e-2);
    /* lane 1 has its own cuBLASLt workspace (64 MiB), made by the first fork */
    if (check_workspace)
        CHECK(after >= before + ((size_t)64 << 20),
              "lane 1's workspace is not counted: %zu bytes in use before the first fork, %zu "
              "after",
              before, after);
    release();
}

static int finish(void) {
    size_t in_use = 0, peak = 0;
    vdn_dev_memory(dev[1], &in_use, &peak);
    printf("cuda memory: %zu bytes in use after the cases (backend workspace and scratch), peak "
           "%zu\n",
           in_use, peak);
    vdn_dev_close(dev[0]);
    vdn_dev_close(dev[1]);
    return check_report("test_backend_ops");
}

/* usage: test_backend_ops [encoder] (encoder: the video VAE encoder's ops only, conv2d and
 * group_norm: the keyframe encoder's device run, ops/device/vae.sh ENC_BENCH=1) */
int main(int argc, char **argv) {
    vdn_backends_register(); /* "cuda" where this build has it */
    char err[512];
    /* VDN_BACKEND_OPS_SELFTEST=1: the CPU against itself, to check the harness without a GPU */
    const char *self = getenv("VDN_BACKEND_OPS_SELFTEST");
    const int selftest = self && strcmp(self, "1") == 0;
    dev[1] = vdn_dev_open(selftest ? "cpu" : "cuda", 0, 0, err, sizeof err);
    if (!dev[1]) {
        printf("SKIP: no CUDA device for the backend-ops test: %s\n", err);
        return 77;
    }
    dev[0] = vdn_dev_open("cpu", 0, 2, err, sizeof err);
    if (!dev[0]) {
        fprintf(stderr, "cpu device: %s\n", err);
        return 1;
    }
    const vdn_dtype BF = VDN_DT_BF16, F32 = VDN_DT_F32, NB = VDN_DT_COUNT;
    /* the table's last field, after every op: a member added to op_backend.h without its entry
     * in a positional table shifts it (run 7 rendered the DiT in fp32 that way) */
    if (!selftest)
        CHECK(vdn_dev_act_dtype(dev[1]) == VDN_DT_BF16, "cuda activations in %s, expected BF16",
              vdn_dtype_name(vdn_dev_act_dtype(dev[1])));

    case_transfers(37, 129);
    case_transfers(1, 8);
    if (argc > 1 && !strcmp(argv[1], "encoder")) {
        encoder_cases();
        return finish();
    }

    /* linear: cuBLASLt bf16 (fused bf16 bias, fp32 bias as epilogue), fp32 SGEMM, mixed */
    case_linear(130, 264, 96, BF, BF, VDN_ACT_NONE, 0);
    case_linear(37, 72, 40, BF, F32, VDN_ACT_SILU, 0);
    case_linear(64, 128, 136, BF, NB, VDN_ACT_NONE, 1);
    case_linear(5, 16, 24, BF, BF, VDN_ACT_GELU_TANH, 0);
    case_linear(37, 13, 7, F32, F32, VDN_ACT_NONE, 0);
    case_linear(3, 256, 1024, F32, F32, VDN_ACT_SILU, 0);
    case_linear(29, 40, 33, F32, NB, VDN_ACT_NONE, 1);
    case_linear(17, 24, 9, F32, F32, VDN_ACT_SIGMOID, 0);
    /* packed (16-byte rows: cuBLASLt with fp32 C/D) and odd views (widened to fp32, SGEMM) */
    case_linear_out32(130, 264, 96, BF, 1, 0);
    case_linear_out32(64, 128, 136, F32, 1, 0);
    case_linear_out32(37, 72, 40, NB, 0, 0);
    case_linear_out32(29, 40, 33, BF, 1, PAD);
    case_linear_mixed(21, 48, 40);

    /* fp8: the row quantisation bit for bit (16-byte bf16 rows, views, odd widths, f32), then
     * linear on the cuBLASLt fp8 path (k, out multiples of 16, bf16 out) and the dequantised
     * fp32 fallback (odd k or out, fp32 out, a weight view with unaligned scales) */
    case_quantize_rows(37, 264, BF, 0);
    case_quantize_rows(130, 1024, BF, 0);
    case_quantize_rows(9, 77, BF, PAD);
    case_quantize_rows(21, 40, F32, 1);
    case_quantize_rows(1, 8, F32, 0);
    case_linear_fp8(130, 256, 96, BF, BF, BF, VDN_ACT_NONE, 0, 0);
    case_linear_fp8(64, 128, 144, BF, BF, F32, VDN_ACT_SILU, 0, 0);
    case_linear_fp8(37, 512, 64, BF, BF, NB, VDN_ACT_NONE, 1, 0);
    case_linear_fp8(33, 64, 48, F32, BF, BF, VDN_ACT_GELU_TANH, 0, 0);
    case_linear_fp8(21, 64, 32, BF, BF, BF, VDN_ACT_NONE, 0, 4);
    case_linear_fp8(29, 40, 33, BF, BF, BF, VDN_ACT_NONE, 0, 0);
    case_linear_fp8(17, 48, 32, F32, F32, F32, VDN_ACT_SIGMOID, 0, 0);
    case_linear_fp8(11, 64, 32, BF, BF, NB, VDN_ACT_NONE, 1, 3);
    case_linear_fp8(1, 16, 16, BF, BF, BF, VDN_ACT_NONE, 0, 0);
    /* a packed float32 y on the fp8 path: the video VAE's residual stream (+= to_out, FFN out
     * with their biases), and without accumulate */
    case_linear_fp8_y(77, 256, 128, BF, F32, BF, VDN_ACT_NONE, 1, 0, 0);
    case_linear_fp8_y(40, 512, 64, BF, F32, NB, VDN_ACT_NONE, 1, 4, 0);
    case_linear_fp8_y(33, 128, 48, BF, F32, F32, VDN_ACT_SILU, 0, 0, 0);
    /* an e4m3 x with its scales: the decoder's FFN-out (f32 += at in 8192, out 2048) and to_qkv
     * shapes, an unaligned x view (the fp32 route) */
    case_linear_fp8x(67, 8192, 2048, F32, 1, 0);
    case_linear_fp8x(131, 2048, 192, BF, 0, 0);
    case_linear_fp8x(37, 64, 48, F32, 0, 5);
    /* the fused producers: release widths (dim 2048 f32 rows, FFN f 8192 from 2048), odd row
     * counts with zero / large / tiny rows, the re-reading and fp32 routes, and a two-slab
     * product (more than 65536 rows) */
    case_rmsnorm_quant(1237, 2048, F32, 1, 0);
    case_rmsnorm_quant(301, 4096, BF, 1, 0);
    case_rmsnorm_quant(53, 77, BF, 1, PAD);
    case_rmsnorm_quant(9, 24, F32, 0, 0);
    case_rmsnorm_quant(5, 40000, F32, 1, 0);
    case_linear_swiglu_quant(37, 2048, 8192, 1, BF);
    case_linear_swiglu_quant(131, 256, 96, 0, F32);
    case_linear_swiglu_quant(37, 64, 48, 2, BF);
    case_linear_swiglu_quant(29, 40, 24, 0, NB);
    case_linear_swiglu_quant(65601, 16, 8, 1, NB);

    case_matmul_bt(3, 17, 33, 40, BF, F32, 0);
    case_matmul_bt(2, 64, 64, 128, BF, BF, 0);
    case_matmul_bt(1, 9, 5, 7, F32, F32, 1);
    case_matmul_bt(4, 8, 16, 24, F32, BF, 0);

    for (int a = VDN_ACT_SILU; a <= VDN_ACT_GELU; a++) {
        case_act(33, 77, F32, (vdn_act)a);
        case_act(16, 256, BF, (vdn_act)a);
    }
    case_swiglu(37, 64, BF, 1);
    case_swiglu(130, 136, BF, 1);
    case_swiglu(9, 13, F32, 0);
    case_swiglu(11, 40, BF, 0);
    case_add_scale(21, 96, BF, 0);
    case_add_scale(7, 13, F32, PAD);
    case_add_scale(5, 31, BF, PAD);
    case_gate_residual(130, 256, BF, 0);
    case_gate_residual(9, 40, F32, 0);
    case_gate_residual(13, 24, BF, 1);
    case_gate_residual(6, 10, F32, 2);
    case_mul_groups(37, 4, 32, BF);
    case_mul_groups(5, 3, 7, F32);

    case_rmsnorm(130, 512, BF, 1, 1); /* the DiT's fused adaLN form */
    case_rmsnorm(33, 264, BF, 1, 0);
    case_rmsnorm(17, 40, BF, 0, 0);
    case_rmsnorm(9, 37, F32, 1, 2);
    case_rmsnorm(4, 96, F32, 0, 1);
    case_rmsnorm(7, 2048, F32, 1, 0);
    case_rmsnorm_mixed(37, 2048, F32, BF, 0);
    case_rmsnorm_mixed(5, 264, BF, BF, 4);
    case_rmsnorm_mixed(3, 3000, VDN_DT_I32, F32, 0); /* no weight; cols not a multiple of 1024 */
    case_rmsnorm_mixed(2, 8200, F32, BF, 0);         /* over 8192 columns: the plain kernel */
    case_layernorm(21, 64, F32, 1);
    case_layernorm(9, 37, BF, 0);
    case_layernorm(130, 1024, BF, 1);

    /* the DiT's form (fused kernel), the refiner's (no rope), and the decoders'/text encoder's */
    case_qk_norm_rope(130, 4, 4, 128, 96, 16, 16, 1, BF, 1);
    case_qk_norm_rope(37, 3, 3, 128, 0, 0, 0, 1, BF, 1);
    case_qk_norm_rope(37, 8, 2, 64, 32, 6, 5, 1, BF, 1);
    case_qk_norm_rope(21, 4, 4, 128, 96, 16, 16, 1, F32, 1);
    case_qk_norm_rope(13, 2, 2, 64, 64, 32, 0, 0, F32, 0);
    /* Qwen3-VL: the text decoder's interleaved multimodal rope (sections 24/20/20 of 128, tiny
     * 12/10/10 of 64) and the vision tower's 2-D rope (72 channels of heads padded to 128) */
    case_qk_norm_rope_il(19, 8, 2, 128, 128, 24, 20, 1, BF, 1, 1);
    case_qk_norm_rope_il(23, 4, 2, 64, 64, 12, 10, 1, F32, 1, 1);
    case_qk_norm_rope(41, 2, 2, 128, 72, 18, 18, 0, BF, 1);
    case_qk_norm_rope(19, 6, 2, 128, 128, 20, 22, 1, BF, 1);
    /* the video decoder's (32 heads of 64, 8 + 8 + 8 pairs); the generic kernel's other lane
     * widths (hd <= 32, 96, 256) and head counts that leave a warp's last group of heads short */
    case_qk_norm_rope(203, 32, 32, 64, 48, 8, 8, 1, BF, 1);
    case_qk_norm_rope(11, 5, 5, 24, 12, 2, 2, 1, BF, 1);
    case_qk_norm_rope(13, 6, 2, 96, 96, 16, 16, 0, BF, 1);
    case_qk_norm_rope(9, 3, 1, 256, 64, 10, 10, 1, F32, 1);
    /* the vectorised bf16 kernel (hd / 8 lanes a head, half % 8 == 0): heads that leave a warp's
     * loads short (5 of 32), no norm, q alone over two chunks of 32 heads, hd 32 and 256 */
    case_qk_norm_rope(29, 5, 3, 64, 48, 8, 8, 0, BF, 1);
    case_qk_norm_rope(17, 40, 2, 64, 16, 4, 2, 1, BF, 0);
    case_qk_norm_rope(23, 9, 9, 32, 16, 4, 2, 1, BF, 1);
    case_qk_norm_rope(9, 3, 1, 256, 64, 10, 10, 1, BF, 1);

    /* wgmma kernel: hd 128, same heads, keys = rows; mma.sync: hd 64, GQA, keys != rows */
    case_attention(300, 300, 2, 2, 128, M_DENSE, 0, BF);
    case_attention(460, 460, 2, 2, 128, M_WINDOW, 1, BF);
    case_attention(1, 1, 2, 2, 128, M_DENSE, 0, BF);
    case_attention(200, 200, 4, 2, 64, M_CAUSAL, 0, BF);
    case_attention(9, 70, 2, 2, 128, M_DENSE, 1, BF);
    case_attention(131, 131, 3, 3, 64, M_DENSE, 1, BF);
    case_attention(77, 77, 8, 1, 128, M_CAUSAL, 0, BF);
    case_attention(65, 65, 2, 2, 128, M_CAUSAL, 0, F32);
    case_attention(260, 260, 2, 1, 64, M_WINDOW, 0, BF);
    /* head dim 64 with one key/value head per query head: the wgmma kernel on Hopper */
    case_attention(260, 260, 2, 2, 64, M_WINDOW, 1, BF);
    case_attention(5 * 179, 5 * 179, 4, 4, 64, M_BLOCKS, 1, BF);
    case_attention(2 * 179, 2 * 179, 2, 2, 64, M_BLOCKS, 0, F32);

    case_time_features(3, 256);
    case_time_features(8, 34);
    case_euler(37, 129, F32, 0.9, 0.75);
    case_euler(5, 16, BF, 0.3, 0.0);

    /* VDA: the video frames' prep (conv), the text state's (none); the chain; epilogue; alpha */
    case_vda_prep(4, 5, 7, 2, 1, 1);
    case_vda_prep(3, 8, 14, 1, 1, 1);
    case_vda_prep(1, 37, 1, 2, 0, 0);
    case_vda_chain(4, 2, 35, 1, 0);
    case_vda_chain(3, 1, 64, 0, 0);
    case_vda_chain(2, 2, 50, 1, 1);
    case_vda_epilogue(3, 2, 35);
    case_vda_alpha(3, 35, 264, 2);

    pixel_cases();
    conv_cases();
    encoder_cases();

    /* the first fork of dev[1] makes its lane 1 (the workspace check) */
    case_lanes(256, 512, 8, !selftest);
    case_lanes(37, 136, 3, 0);

    return finish();
}
