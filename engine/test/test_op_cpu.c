/* The op layer on the CPU backend: every op of op.h against a float64 reference written here,
 * independently, on fresh random inputs of odd shapes, through strided views (ld > cols) where
 * an op takes views; transfers and views; and the front end's refusals with their messages. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "op.h"
#include "op_conv.h"
#include "ops.h"
#include "vdn_util.h"

static vdn_dev *D;

/* ---- tensors for the tests ---- */

#define MAX_HELD 256
static vdn_tensor *held[MAX_HELD];
static int n_held;

/* a [rows, cols] f32 tensor with random values (scale), as a column view at offset `pad` of a
 * [rows, cols + 2 pad] tensor when pad > 0 (so ld > cols). Host copy in *host (malloc'd). */
static vdn_tensor mk(int rows, int cols, int pad, double scale, float **host) {
    vdn_tensor *base = vdn_tensor_new2(D, VDN_DT_F32, rows, cols + 2 * pad);
    VDN_ASSERT(base && n_held < MAX_HELD);
    held[n_held++] = base;
    float *all = vdn_xmalloc(sizeof(float) * (size_t)rows * (cols + 2 * pad));
    fill(all, (size_t)rows * (cols + 2 * pad), scale);
    VDN_ASSERT(vdn_tensor_set(base, all, VDN_DT_F32) == 0);
    float *h = vdn_xmalloc(sizeof(float) * (size_t)rows * cols);
    for (int r = 0; r < rows; r++)
        memcpy(h + (size_t)r * cols, all + (size_t)r * (cols + 2 * pad) + pad,
               sizeof(float) * cols);
    free(all);
    if (host)
        *host = h;
    else
        free(h);
    return pad ? vdn_view_cols(base, pad, cols) : vdn_view_rows(base, 0, rows);
}

static float *get(const vdn_tensor *t) {
    float *h = vdn_xmalloc(sizeof(float) * (size_t)vdn_tensor_numel(t));
    CHECK(vdn_tensor_get(t, h) == 0, "get: %s", vdn_dev_error(D));
    return h;
}

static void release(void) {
    for (int i = 0; i < n_held; i++)
        vdn_tensor_free(held[i]);
    n_held = 0;
}

/* |out - ref| <= tol (1 + |ref|) everywhere */
static void near_all(const float *out, const double *ref, size_t n, double tol, const char *what) {
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(out[i] - ref[i]) / (1.0 + fabs(ref[i]));
        if (!(e <= worst)) worst = e, at = i;
    }
    CHECK(worst <= tol, "%s: error %.3g at %zu (%.9g vs %.9g)", what, worst, at, out[at], ref[at]);
}

static double act_ref(double x, vdn_act a) {
    switch (a) {
    case VDN_ACT_SILU:
        return x / (1 + exp(-x));
    case VDN_ACT_SIGMOID:
        return 1 / (1 + exp(-x));
    case VDN_ACT_GELU_TANH:
        return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case VDN_ACT_GELU:
        return 0.5 * x * erfc(-x / sqrt(2.0));
    default:
        return x;
    }
}

/* ---- products ---- */

static void test_linear(void) {
    const int rows = 7, in = 33, out = 19;
    for (int variant = 0; variant < 4; variant++) {
        float *x, *w, *b, *y0;
        vdn_tensor tx = mk(rows, in, variant & 1 ? 3 : 0, 1, &x);
        vdn_tensor tw = mk(out, in, 0, 1, &w), tb = mk(1, out, 0, 1, &b);
        vdn_tensor ty = mk(rows, out, variant & 2 ? 5 : 0, 1, &y0);
        vdn_act act = (vdn_act)(variant % 4);
        int accumulate = variant == 0;
        double *ref = vdn_xmalloc(sizeof(double) * rows * out);
        for (int r = 0; r < rows; r++)
            for (int o = 0; o < out; o++) {
                double s = b[o];
                for (int i = 0; i < in; i++)
                    s += (double)x[r * in + i] * w[o * in + i];
                ref[r * out + o] = accumulate ? y0[r * out + o] + s : act_ref(s, act);
            }
        CHECK(vdn_op_linear(&ty, &tx, &tw, &tb, act, accumulate) == 0, "%s", vdn_dev_error(D));
        float *y = get(&ty);
        near_all(y, ref, (size_t)rows * out, 1e-6, "linear");
        free(x), free(w), free(b), free(y0), free(y), free(ref);
    }
    /* threads give the same bits; bf16 weights read as their rounded values */
    float *x, *w;
    vdn_tensor tx = mk(64, 300, 0, 1, &x), tw = mk(200, 300, 0, 1, &w);
    vdn_tensor ya = mk(64, 200, 0, 1, NULL), yb = mk(64, 200, 0, 1, NULL);
    vdn_ops_set_threads(1);
    vdn_op_linear(&ya, &tx, &tw, NULL, VDN_ACT_NONE, 0);
    vdn_ops_set_threads(2);
    vdn_op_linear(&yb, &tx, &tw, NULL, VDN_ACT_NONE, 0);
    float *a = get(&ya), *bb = get(&yb);
    CHECK(memcmp(a, bb, sizeof(float) * 64 * 200) == 0, "threaded linear differs from serial");
    vdn_tensor *wb = vdn_tensor_new2(D, VDN_DT_BF16, 200, 300);
    held[n_held++] = wb;
    vdn_tensor_set(wb, w, VDN_DT_F32);
    vdn_op_linear(&ya, &tx, wb, NULL, VDN_ACT_NONE, 0);
    float *y = get(&ya);
    double *ref = vdn_xmalloc(sizeof(double) * 64 * 200);
    for (int r = 0; r < 64; r++)
        for (int o = 0; o < 200; o++) {
            double s = 0;
            for (int i = 0; i < 300; i++)
                s += (double)x[r * 300 + i] * vdn_round_bf16(w[o * 300 + i]);
            ref[r * 200 + o] = s;
        }
    near_all(y, ref, 64 * 200, 1e-6, "linear bf16 weight");
    free(x), free(w), free(a), free(bb), free(y), free(ref);
    release();
}

static void test_matmul_bt(void) {
    const int n = 3, m = 5, p = 7, k = 9;
    float *a, *b, *y0;
    vdn_tensor ta2 = mk(n * m, k, 2, 1, &a), tb2 = mk(n * p, k, 0, 1, &b);
    vdn_tensor ty2 = mk(n * m, p, 0, 1, &y0);
    int64_t na[3] = {n, m, k}, nb[3] = {n, p, k}, ny[3] = {n, m, p};
    vdn_tensor ta = vdn_view_reshape(&ta2, 3, na), tb = vdn_view_reshape(&tb2, 3, nb);
    vdn_tensor ty = vdn_view_reshape(&ty2, 3, ny);
    CHECK(vdn_op_matmul_bt(&ty, &ta, &tb, 1) == 0, "%s", vdn_dev_error(D));
    double ref[3 * 5 * 7];
    for (int i = 0; i < n; i++)
        for (int r = 0; r < m; r++)
            for (int c = 0; c < p; c++) {
                double s = y0[(i * m + r) * p + c];
                for (int t = 0; t < k; t++)
                    s += (double)a[(i * m + r) * k + t] * b[(i * p + c) * k + t];
                ref[(i * m + r) * p + c] = s;
            }
    float *y = get(&ty);
    near_all(y, ref, n * m * p, 1e-6, "matmul_bt");
    free(a), free(b), free(y0), free(y);
    release();
}

/* ---- elementwise ---- */

static void test_elementwise(void) {
    const int rows = 6, cols = 13;
    float *x, *u, *g, *s;
    double ref[6 * 26];
    for (int a = VDN_ACT_SILU; a <= VDN_ACT_GELU; a++) {
        vdn_tensor tx = mk(rows, cols, 2, 3, &x), ty = mk(rows, cols, 1, 1, NULL);
        CHECK(vdn_op_act(&ty, &tx, (vdn_act)a) == 0, "%s", vdn_dev_error(D));
        for (int i = 0; i < rows * cols; i++)
            ref[i] = act_ref(x[i], (vdn_act)a);
        float *y = get(&ty);
        near_all(y, ref, rows * cols, 1e-6, "act");
        free(x), free(y);
    }
    /* swiglu: value and gate are the two halves of one [rows, 2 cols] tensor */
    vdn_tensor tu = mk(rows, 2 * cols, 0, 2, &u), ty = mk(rows, cols, 3, 1, NULL);
    vdn_tensor tv = vdn_view_cols(&tu, 0, cols), tg = vdn_view_cols(&tu, cols, cols);
    CHECK(vdn_op_swiglu(&ty, &tv, &tg) == 0, "%s", vdn_dev_error(D));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double gv = u[r * 2 * cols + cols + c];
            ref[r * cols + c] = u[r * 2 * cols + c] * gv / (1 + exp(-gv));
        }
    float *y = get(&ty);
    near_all(y, ref, rows * cols, 1e-6, "swiglu");
    free(u), free(y);

    /* add, scale */
    vdn_tensor ta = mk(rows, cols, 1, 1, &x), tb = mk(rows, cols, 2, 1, &s);
    CHECK(vdn_op_add(&ta, &tb) == 0 && vdn_op_scale(&ta, -0.75) == 0, "%s", vdn_dev_error(D));
    for (int i = 0; i < rows * cols; i++)
        ref[i] = ((double)x[i] + s[i]) * -0.75;
    y = get(&ta);
    near_all(y, ref, rows * cols, 1e-6, "add + scale");
    free(x), free(s), free(y);

    /* gate_residual: gate rows picked by idx from a 3-row table view */
    vdn_tensor tx = mk(rows, cols, 1, 1, &x), tyy = mk(rows, cols, 0, 1, &u);
    vdn_tensor tgt = mk(3, cols, 4, 1, &g);
    int32_t idx[6] = {2, 0, 1, 1, 2, 0};
    vdn_tensor *ti = vdn_tensor_new2(D, VDN_DT_I32, 1, rows);
    held[n_held++] = ti;
    vdn_tensor_set(ti, idx, VDN_DT_I32);
    CHECK(vdn_op_gate_residual(&tx, &tyy, &tgt, ti) == 0, "%s", vdn_dev_error(D));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            ref[r * cols + c] = x[r * cols + c] + (double)g[idx[r] * cols + c] * u[r * cols + c];
    y = get(&tx);
    near_all(y, ref, rows * cols, 1e-6, "gate_residual");
    free(y);
    CHECK(vdn_op_gate_residual(&tx, &tyy, NULL, NULL) == 0, "%s", vdn_dev_error(D));
    for (int i = 0; i < rows * cols; i++)
        ref[i] += u[i];
    y = get(&tx);
    near_all(y, ref, rows * cols, 1e-6, "residual without gate");
    free(x), free(u), free(g), free(y);

    /* mul_groups: per-head scale */
    vdn_tensor tm = mk(rows, 12, 2, 1, &x), tsc = mk(rows, 3, 1, 1, &s);
    CHECK(vdn_op_mul_groups(&tm, &tsc, 4) == 0, "%s", vdn_dev_error(D));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < 12; c++)
            ref[r * 12 + c] = (double)x[r * 12 + c] * s[r * 3 + c / 4];
    y = get(&tm);
    near_all(y, ref, rows * 12, 1e-6, "mul_groups");
    free(x), free(s), free(y);
    release();
}

/* ---- norms ---- */

static void test_norms(void) {
    const int rows = 5, d = 27;
    float *x, *w, *sh, *sc, *b;
    double ref[5 * 27];
    int32_t idx[5] = {1, 1, 0, 1, 0};
    vdn_tensor *ti = vdn_tensor_new2(D, VDN_DT_I32, rows, 1);
    held[n_held++] = ti;
    vdn_tensor_set(ti, idx, VDN_DT_I32);
    for (int mode = 0; mode < 3; mode++) { /* plain, weight, weight + modulation by idx */
        vdn_tensor tx = mk(rows, d, 2, 3, &x), tw = mk(1, d, 0, 1, &w);
        vdn_tensor tsh = mk(2, d, 1, 1, &sh), tsc = mk(2, d, 3, 1, &sc);
        vdn_tensor ty = mk(rows, d, 1, 1, NULL);
        int rc = vdn_op_rmsnorm(&ty, &tx, mode ? &tw : NULL, 1e-5, mode == 2 ? &tsh : NULL,
                                mode == 2 ? &tsc : NULL, mode == 2 ? ti : NULL);
        CHECK(rc == 0, "%s", vdn_dev_error(D));
        for (int r = 0; r < rows; r++) {
            double ss = 0;
            for (int i = 0; i < d; i++)
                ss += (double)x[r * d + i] * x[r * d + i];
            for (int i = 0; i < d; i++) {
                double v = x[r * d + i] / sqrt(ss / d + 1e-5) * (mode ? w[i] : 1.0);
                if (mode == 2) v = v * (1 + sc[idx[r] * d + i]) + sh[idx[r] * d + i];
                ref[r * d + i] = v;
            }
        }
        float *y = get(&ty);
        near_all(y, ref, rows * d, 2e-6, "rmsnorm");
        free(x), free(w), free(sh), free(sc), free(y);
    }
    /* in place, no weight, modulation row by row (no idx) */
    vdn_tensor tx = mk(rows, d, 0, 1, &x), tsh = mk(rows, d, 0, 1, &sh),
               tsc = mk(rows, d, 2, 1, &sc);
    CHECK(vdn_op_rmsnorm(&tx, &tx, NULL, 1e-6, &tsh, &tsc, NULL) == 0, "%s", vdn_dev_error(D));
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int i = 0; i < d; i++)
            ss += (double)x[r * d + i] * x[r * d + i];
        for (int i = 0; i < d; i++)
            ref[r * d + i] =
                x[r * d + i] / sqrt(ss / d + 1e-6) * (1 + sc[r * d + i]) + sh[r * d + i];
    }
    float *y = get(&tx);
    near_all(y, ref, rows * d, 2e-6, "rmsnorm in place");
    free(x), free(sh), free(sc), free(y);

    vdn_tensor tl = mk(rows, d, 1, 2, &x), tw = mk(1, d, 0, 1, &w), tb = mk(1, d, 0, 1, &b);
    vdn_tensor ty = mk(rows, d, 0, 1, NULL);
    CHECK(vdn_op_layernorm(&ty, &tl, &tw, &tb, 1e-6) == 0, "%s", vdn_dev_error(D));
    for (int r = 0; r < rows; r++) {
        double m = 0, v = 0;
        for (int i = 0; i < d; i++)
            m += x[r * d + i] / (double)d;
        for (int i = 0; i < d; i++)
            v += (x[r * d + i] - m) * (x[r * d + i] - m) / d;
        for (int i = 0; i < d; i++)
            ref[r * d + i] = (x[r * d + i] - m) / sqrt(v + 1e-6) * w[i] + b[i];
    }
    y = get(&ty);
    near_all(y, ref, rows * d, 2e-6, "layernorm");
    free(x), free(w), free(b), free(y);
    release();
}

/* q (4 heads) and k (2 heads, GQA) of head_dim 12: norm, then rope on the first 10 channels with
 * sections 2 + 1 + 2 pairs, or (interleaved, Qwen3-VL's layout) 1 + 2 + 2: pairs 1 and 4 turn by
 * axis 1, pair 2 by axis 2, pairs 0 and 3 by axis 0 */
static void test_qk_norm_rope(int interleaved) {
    const int rows = 4, hd = 12, hq = 4, hk = 2, n_rot = 10;
    const int sec[3] = {interleaved ? 1 : 2, interleaved ? 2 : 1, 2};
    const int axis_il[5] = {0, 1, 2, 0, 1};
    float *q, *k, *wq, *wk;
    vdn_tensor tq = mk(rows, hq * hd, 3, 2, &q), tk = mk(rows, hk * hd, 1, 2, &k);
    vdn_tensor twq = mk(1, hd, 0, 1, &wq), twk = mk(1, hd, 0, 1, &wk);
    vdn_tensor tqo = mk(rows, hq * hd, 0, 1, NULL);
    double pos[4 * 3], invd[5];
    float inv[5];
    for (int i = 0; i < rows * 3; i++)
        pos[i] = 37.0 * rnd() + 40.0;
    for (int i = 0; i < 5; i++)
        inv[i] = (float)pow(10000.0, -i / 5.0), invd[i] = inv[i];
    vdn_tensor *tp = vdn_tensor_new2(D, VDN_DT_F64, rows, 3),
               *tinv = vdn_tensor_new2(D, VDN_DT_F32, 1, 5);
    held[n_held++] = tp, held[n_held++] = tinv;
    vdn_tensor_set(tp, pos, VDN_DT_F64);
    vdn_tensor_set(tinv, inv, VDN_DT_F32);
    vdn_rope rope = {tp, tinv, n_rot, {sec[0], sec[1], sec[2]}, interleaved};
    CHECK(vdn_op_qk_norm_rope(&tqo, &tk, &tq, &tk, &twq, &twk, hd, 1e-5, &rope) == 0, "%s",
          vdn_dev_error(D));
    for (int which = 0; which < 2; which++) {
        const float *in = which ? k : q, *w = which ? wk : wq;
        int heads = which ? hk : hq;
        double *ref = vdn_xmalloc(sizeof(double) * rows * heads * hd);
        for (int r = 0; r < rows; r++)
            for (int h = 0; h < heads; h++) {
                const float *x = in + (r * heads + h) * hd;
                double n[12], ss = 0;
                for (int i = 0; i < hd; i++)
                    ss += (double)x[i] * x[i];
                for (int i = 0; i < hd; i++)
                    n[i] = x[i] / sqrt(ss / hd + 1e-5) * w[i];
                double *o = ref + (r * heads + h) * hd;
                for (int i = 0; i < hd; i++)
                    o[i] = n[i];
                for (int i = 0; i < n_rot / 2; i++) {
                    int axis = interleaved           ? axis_il[i]
                               : i < sec[0]          ? 0
                               : i < sec[0] + sec[1] ? 1
                                                     : 2;
                    double ang = (float)((float)pos[r * 3 + axis] * inv[i]);
                    o[i] = n[i] * cos(ang) - n[i + n_rot / 2] * sin(ang);
                    o[i + n_rot / 2] = n[i + n_rot / 2] * cos(ang) + n[i] * sin(ang);
                }
            }
        float *y = get(which ? &tk : &tqo);
        near_all(y, ref, (size_t)rows * heads * hd, 2e-6, which ? "rope k (in place)" : "rope q");
        free(y), free(ref);
    }
    (void)invd;
    free(q), free(k), free(wq), free(wk);
    release();
}

/* ---- attention ---- */

static void attn_ref(double *o, const float *q, const float *k, const float *v, const float *g,
                     int rows, int keys, int hq, int hk, int hd, double scale,
                     int (*vis)(int, int, const void *), const void *u) {
    for (int h = 0; h < hq; h++)
        for (int r = 0; r < rows; r++) {
            int kh = h / (hq / hk);
            double mx = -INFINITY, den = 0, acc[16] = {0};
            for (int j = 0; j < keys; j++)
                if (vis(r, j, u)) {
                    double s = 0;
                    for (int c = 0; c < hd; c++)
                        s += (double)q[(r * hq + h) * hd + c] * k[(j * hk + kh) * hd + c];
                    mx = fmax(mx, s * scale);
                }
            for (int j = 0; j < keys; j++)
                if (vis(r, j, u)) {
                    double s = 0;
                    for (int c = 0; c < hd; c++)
                        s += (double)q[(r * hq + h) * hd + c] * k[(j * hk + kh) * hd + c];
                    double p = exp(s * scale - mx);
                    den += p;
                    for (int c = 0; c < hd; c++)
                        acc[c] += p * v[(j * hk + kh) * hd + c];
                }
            for (int c = 0; c < hd; c++)
                o[(r * hq + h) * hd + c] = (den > 0 ? acc[c] / den : 0) * (g ? g[r * hq + h] : 1);
        }
}

typedef struct {
    int head_end, tail_start;
    const int *lo, *hi;
} rows_rule;
static int vis_all(int r, int k, const void *u) {
    (void)r, (void)k, (void)u;
    return 1;
}
static int vis_causal(int r, int k, const void *u) {
    (void)u;
    return k <= r;
}
static int vis_rows(int r, int k, const void *u) {
    const rows_rule *m = u;
    return k < m->head_end || k >= m->tail_start || (k >= m->lo[r] && k < m->hi[r]);
}

static void test_attention(void) {
    const int rows = 70, hq = 4, hk = 2, hd = 16; /* 70 rows: two row blocks, the second partial */
    float *q, *k, *v, *g;
    vdn_tensor tq = mk(rows, hq * hd, 3, 1, &q), tk = mk(rows, hk * hd, 0, 1, &k);
    vdn_tensor tv = mk(rows, hk * hd, 5, 1, &v), tg = mk(rows, hq, 0, 1, &g);
    vdn_tensor to = mk(rows, hq * hd, 1, 1, NULL);
    int lo[70], hi[70];
    for (int r = 0; r < rows; r++) { /* windows of 10 rows; row 33 sees only the head/tail */
        lo[r] = (r / 10) * 10, hi[r] = lo[r] + 10;
        if (r == 33) lo[r] = hi[r] = 20;
        if (r == 50) lo[r] = 68, hi[r] = 70; /* a window past the tail's start (66) */
        if (r == 51) lo[r] = 2, hi[r] = 69;  /* one covering head, tail and what is between */
    }
    rows_rule rule = {4, 66, lo, hi};
    double *ref = vdn_xmalloc(sizeof(double) * rows * hq * hd);
    for (int kind = 0; kind < 3; kind++) {
        vdn_attn_mask *m = kind == 0   ? vdn_attn_mask_dense(D, rows, rows)
                           : kind == 1 ? vdn_attn_mask_causal(D, rows)
                                       : vdn_attn_mask_rows(D, rows, 4, 66, lo, hi);
        CHECK(m != NULL, "%s", vdn_dev_error(D));
        const vdn_tensor *gate = kind == 2 ? &tg : NULL;
        CHECK(vdn_op_attention(&to, &tq, &tk, &tv, hd, 0.3, m, gate) == 0, "%s", vdn_dev_error(D));
        attn_ref(ref, q, k, v, kind == 2 ? g : NULL, rows, rows, hq, hk, hd, 0.3,
                 kind == 0   ? vis_all
                 : kind == 1 ? vis_causal
                             : vis_rows,
                 &rule);
        float *o = get(&to);
        near_all(o, ref, (size_t)rows * hq * hd, 2e-6,
                 kind == 0   ? "attention dense"
                 : kind == 1 ? "attention causal"
                             : "attention rows");
        free(o);
        vdn_attn_mask_free(m);
    }
    /* cross attention: 9 queries over 70 keys */
    vdn_tensor tq9 = vdn_view_rows(&tq, 0, 9), to9 = mk(9, hq * hd, 0, 1, NULL);
    vdn_attn_mask *m = vdn_attn_mask_dense(D, 9, rows);
    CHECK(vdn_op_attention(&to9, &tq9, &tk, &tv, hd, 0.25, m, NULL) == 0, "%s", vdn_dev_error(D));
    attn_ref(ref, q, k, v, NULL, 9, rows, hq, hk, hd, 0.25, vis_all, NULL);
    float *o = get(&to9);
    near_all(o, ref, (size_t)9 * hq * hd, 2e-6, "attention 9 x 70");
    vdn_attn_mask_free(m);
    free(o), free(ref), free(q), free(k), free(v), free(g);
    release();
}

/* ---- diffusion ---- */

static void test_diffusion(void) {
    float t[3] = {0.0f, 0.37f, 1.0f};
    vdn_tensor *tt = vdn_tensor_new2(D, VDN_DT_F32, 1, 3),
               *te = vdn_tensor_new2(D, VDN_DT_F32, 3, 10);
    held[n_held++] = tt, held[n_held++] = te;
    vdn_tensor_set(tt, t, VDN_DT_F32);
    CHECK(vdn_op_time_features(te, tt) == 0, "%s", vdn_dev_error(D));
    double ref[30];
    for (int m = 0; m < 3; m++)
        for (int j = 0; j < 5; j++) {
            double f = exp(-log(10000.0) * j / 5.0);
            ref[m * 10 + j] = cos(t[m] * f);
            ref[m * 10 + 5 + j] = sin(t[m] * f);
        }
    float *e = get(te);
    near_all(e, ref, 30, 1e-6, "time_features");
    free(e);

    float *x, *v;
    vdn_tensor tx = mk(5, 9, 2, 1, &x), tv = mk(5, 9, 0, 1, &v);
    CHECK(vdn_op_euler(&tx, &tv, 0.8, 0.5) == 0, "%s", vdn_dev_error(D));
    double rx[45];
    for (int i = 0; i < 45; i++) { /* x0 = x + sigma v; x <- x0 + sigma_next/sigma (x - x0) */
        double x0 = x[i] + 0.8 * v[i], r = 0.5 / 0.8;
        rx[i] = r * x[i] + (1 - r) * x0;
    }
    float *y = get(&tx);
    near_all(y, rx, 45, 2e-7 * 8, "euler");
    free(x), free(v), free(y);
    release();
}

/* ---- transfers and views ---- */

static void test_tensors(void) {
    float h[12] = {1.0f, 1.00390625f, 1.001953125f, -3.5f, 1e-3f, 65504.0f,
                   0.1f, -0.2f,       3.0f,         4.0f,  5.0f,  6.0f};
    int64_t ne[3] = {2, 3, 2};
    vdn_tensor *b = vdn_tensor_new(D, VDN_DT_BF16, 3, ne);
    CHECK(b && vdn_tensor_rows(b) == 6 && vdn_tensor_cols(b) == 2 && vdn_tensor_numel(b) == 12);
    CHECK(vdn_tensor_set(b, h, VDN_DT_F32) == 0);
    float back[12];
    CHECK(vdn_tensor_get(b, back) == 0);
    int exact = 1;
    for (int i = 0; i < 12; i++)
        exact &= back[i] == vdn_round_bf16(h[i]);
    CHECK(exact, "bf16 set/get is not round-to-nearest-even");
    CHECK(back[2] == 1.0f, "1 + 2^-9 rounds to even (1.0), got %.9g", back[2]);
    uint16_t raw[12];
    CHECK(vdn_tensor_get_raw(b, raw) == 0 && raw[0] == 0x3f80, "raw bf16 of 1.0: %04x", raw[0]);

    /* copy f32 <- bf16 view, fill, reshape */
    vdn_tensor *f = vdn_tensor_new2(D, VDN_DT_F32, 4, 5);
    CHECK(vdn_tensor_fill(f, 2.5) == 0);
    vdn_tensor sub = vdn_view_cols(f, 1, 2), rows3 = vdn_view_rows(&sub, 1, 3);
    int64_t ne2[2] = {3, 2};
    vdn_tensor bsub = vdn_view_reshape(b, 2, (int64_t[]){6, 2});
    vdn_tensor b3 = vdn_view_rows(&bsub, 2, 3);
    CHECK(vdn_tensor_copy(&rows3, &b3) == 0, "%s", vdn_dev_error(D));
    float all[20];
    vdn_tensor_get(f, all);
    CHECK(all[0] == 2.5f && all[5] == 2.5f && all[6] == back[4] && all[7] == back[5] &&
              all[16] == back[8] && all[17] == back[9] && all[18] == 2.5f,
          "copy into a strided view touched the wrong elements");
    char desc[96];
    CHECK(strcmp(vdn_tensor_desc(&rows3, desc, sizeof desc), "F32[3,2] ld 5") == 0, "desc %s",
          desc);
    vdn_tensor r2 = vdn_view_reshape(&rows3, 2, ne2);
    CHECK(r2.data == rows3.data && r2.ld == 5, "reshape of a strided view keeps its rows");
    vdn_tensor bad = vdn_view_reshape(&rows3, 1, (int64_t[]){6});
    CHECK(!bad.data && strstr(vdn_dev_error(D), "must keep 2 columns"), "%s", vdn_dev_error(D));
    bad = vdn_view_rows(f, 3, 2);
    CHECK(!bad.data && strstr(vdn_dev_error(D), "rows [3, 5) outside F32[4,5]"), "%s",
          vdn_dev_error(D));
    size_t in_use, peak;
    vdn_dev_memory(D, &in_use, &peak);
    CHECK(in_use == 24 + 80 && peak >= in_use, "memory in use %zu", in_use);
    vdn_tensor_free(b);
    vdn_tensor_free(f);
    vdn_dev_memory(D, &in_use, &peak);
    CHECK(in_use == 0, "memory in use after free %zu", in_use);
}

/* ---- the front end refuses bad calls, naming the op and the tensor ---- */

static void expect_err(int rc, const char *want) {
    CHECK(rc == -1 && strstr(vdn_dev_error(D), want), "want '%s', got rc %d '%s'", want, rc,
          vdn_dev_error(D));
}

/* conv2d and group_norm (op_conv.h, the video encoder's) against loops written here: the image
 * padded explicitly (reflect: mirror about the edge pixel; zeros), then the plain sum; GroupNorm
 * from its definition. Views with ld > cols on every operand, a batch of 2. */
static double pad_at(const float *img, int H, int W, int r, int c, int reflect) {
    if (r < 0 || r >= H || c < 0 || c >= W) {
        if (!reflect) return 0.0;
        r = r < 0 ? -r : r >= H ? 2 * H - 2 - r : r;
        c = c < 0 ? -c : c >= W ? 2 * W - 2 - c : c;
    }
    return img[r * W + c];
}

static void conv2d_case(int B, int cin, int H, int W, int cout, int K, int stride, int t, int bo,
                        int l, int r, int reflect, int accumulate) {
    const int Ho = (H + t + bo - K) / stride + 1, Wo = (W + l + r - K) / stride + 1;
    float *hx, *hw, *hb, *hy;
    vdn_tensor x = mk(B * cin, H * W, 2, 1, &hx), w = mk(cout, cin * K * K, 1, 0.3, &hw),
               b = mk(1, cout, 0, 0.3, &hb), y = mk(B * cout, Ho * Wo, 3, 1, &hy);
    const int pad[4] = {t, bo, l, r};
    CHECK(vdn_op_conv2d(&y, &x, &w, &b, H, W, K, stride, pad, reflect, accumulate) == 0, "%s",
          vdn_dev_error(D));
    float *got = get(&y);
    double worst = 0;
    for (int bi = 0; bi < B; bi++)
        for (int o = 0; o < cout; o++)
            for (int oh = 0; oh < Ho; oh++)
                for (int ow = 0; ow < Wo; ow++) {
                    double v = hb[o];
                    for (int i = 0; i < cin; i++)
                        for (int kh = 0; kh < K; kh++)
                            for (int kw = 0; kw < K; kw++)
                                v += (double)hw[o * cin * K * K + (i * K + kh) * K + kw] *
                                     pad_at(hx + (size_t)(bi * cin + i) * H * W, H, W,
                                            oh * stride + kh - t, ow * stride + kw - l, reflect);
                    const size_t at = (size_t)(bi * cout + o) * Ho * Wo + (size_t)oh * Wo + ow;
                    const double want = accumulate ? (double)(float)(hy[at] + (float)v) : v;
                    worst = fmax(worst, fabs(got[at] - want) / (1 + fabs(want)));
                }
    CHECK(worst < 1e-6, "conv2d %dx%d K %d stride %d pads %d %d %d %d %s%s: error %.3e", H, W, K,
          stride, t, bo, l, r, reflect ? "reflect" : "zeros", accumulate ? " acc" : "", worst);
    free(hx), free(hw), free(hb), free(hy), free(got);
}

static void group_norm_case(int B, int C, int L, int groups, vdn_act act) {
    float *hx, *hw, *hb;
    vdn_tensor x = mk(B * C, L, 1, 2, &hx), w = mk(1, C, 0, 1, &hw), b = mk(1, C, 0, 1, &hb),
               y = mk(B * C, L, 2, 1, NULL);
    CHECK(vdn_op_group_norm(&y, &x, &w, &b, groups, 1e-6, act) == 0, "%s", vdn_dev_error(D));
    float *got = get(&y);
    const int cpg = C / groups;
    double worst = 0;
    for (int bi = 0; bi < B; bi++)
        for (int g = 0; g < groups; g++) {
            double sum = 0, sq = 0;
            const float *xg = hx + (size_t)(bi * C + g * cpg) * L;
            for (int e = 0; e < cpg * L; e++)
                sum += xg[e];
            const double mean = sum / (cpg * L);
            for (int e = 0; e < cpg * L; e++)
                sq += (xg[e] - mean) * (xg[e] - mean);
            const double sd = sqrt(sq / (cpg * L) + 1e-6);
            for (int e = 0; e < cpg * L; e++) {
                const int c = g * cpg + e / L;
                double v = (xg[e] - mean) / sd * hw[c] + hb[c];
                if (act == VDN_ACT_SILU) v = v / (1 + exp(-v));
                worst = fmax(worst, fabs(got[(size_t)(bi * C + g * cpg) * L + e] - v));
            }
        }
    CHECK(worst < 1e-5, "group_norm %d groups: error %.3e", groups, worst);
    free(hx), free(hw), free(hb), free(got);
}

static void test_encoder_ops(void) {
    conv2d_case(2, 3, 7, 9, 4, 3, 1, 1, 1, 1, 1, 1, 0); /* conv_in's reflect pad 1 */
    conv2d_case(1, 4, 8, 6, 5, 3, 2, 0, 1, 0, 1, 1, 0); /* the downsampler */
    conv2d_case(2, 5, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1); /* the residual add */
    conv2d_case(1, 6, 4, 5, 6, 1, 1, 0, 0, 0, 0, 1, 0); /* 1x1 */
    conv2d_case(2, 3, 6, 8, 2, 5, 2, 2, 1, 3, 0, 0, 0); /* zero pads, asymmetric */
    conv2d_case(1, 2, 9, 5, 3, 4, 3, 3, 2, 1, 4, 1, 1); /* reflect up to size - 1 */
    group_norm_case(2, 8, 37, 4, VDN_ACT_SILU);
    group_norm_case(1, 6, 50, 3, VDN_ACT_NONE);
    group_norm_case(1, 4, 11, 1, VDN_ACT_SILU);
    float *hx;
    vdn_tensor x = mk(2, 12, 0, 1, &hx), w = mk(2, 2 * 9, 0, 1, NULL), y = mk(2, 12, 0, 1, NULL);
    const int p1[4] = {1, 1, 1, 1}, p3[4] = {0, 0, 4, 4};
    vdn_tensor gw = mk(1, 2, 0, 1, NULL);
    CHECK(vdn_op_group_norm(&x, &x, &gw, &gw, 2, 1e-6, VDN_ACT_SILU) == 0, "in place: %s",
          vdn_dev_error(D));
    expect_err(vdn_op_conv2d(&y, &x, &w, NULL, 3, 4, 3, 1, p3, 1, 0),
               "op conv2d: reflect pads 0 0 4 4 of a 3x4 image");
    expect_err(vdn_op_conv2d(&y, &x, &w, NULL, 4, 4, 3, 1, p1, 1, 0),
               "op conv2d: x has 12 columns, expected H x W = 16");
    expect_err(vdn_op_conv2d(&x, &x, &w, NULL, 3, 4, 3, 1, p1, 1, 0), "op conv2d: y and x overlap");
    expect_err(vdn_op_group_norm(&y, &x, &gw, &gw, 3, 1e-6, VDN_ACT_NONE),
               "op group_norm: 3 groups of 2 channels");
    expect_err(vdn_op_group_norm(&y, &x, &gw, &gw, 1, 1e-6, VDN_ACT_GELU_TANH),
               "op group_norm: activation");
    free(hx);
}

static void test_errors(void) {
    vdn_tensor x = mk(4, 8, 0, 1, NULL), w = mk(6, 7, 0, 1, NULL), y = mk(4, 6, 0, 1, NULL);
    expect_err(vdn_op_linear(&y, &x, &w, NULL, VDN_ACT_NONE, 0),
               "op linear: w is F32[6,7], expected [6, 8]");
    vdn_tensor w8 = mk(6, 8, 0, 1, NULL), yv = vdn_view_cols(&x, 0, 5);
    expect_err(vdn_op_linear(&yv, &x, &w8, NULL, VDN_ACT_NONE, 0),
               "op linear: y is F32[4,5] ld 8, expected [4, 6]");
    expect_err(vdn_op_linear(&y, &x, &w8, NULL, VDN_ACT_SILU, 1), "accumulate and an activation");
    vdn_tensor *xi = vdn_tensor_new2(D, VDN_DT_I32, 4, 8);
    held[n_held++] = xi;
    expect_err(vdn_op_linear(&y, xi, &w8, NULL, VDN_ACT_NONE, 0),
               "op linear: x is I32[4,8], expected a float tensor");
    vdn_tensor cw = mk(4, 4, 0, 1, NULL); /* conv1d 4 -> 4 channels, K 1: y would be x */
    expect_err(vdn_op_conv1d(&x, &x, &cw, NULL, 1, 1, 0, 1, 1), "op conv1d: y and x overlap");
    vdn_tensor inval = vdn_view_rows(&x, 3, 5);
    expect_err(vdn_op_add(&x, &inval), "op add: y is an invalid view");
    expect_err(vdn_op_add(&x, NULL), "op add: y is missing");

    char err[256];
    vdn_dev *other = vdn_dev_open("cpu", 0, 1, err, sizeof err);
    vdn_tensor *xo = vdn_tensor_new2(other, VDN_DT_F32, 4, 8);
    expect_err(vdn_op_add(&x, xo), "op add: y lives on cpu, the op runs on cpu");
    vdn_tensor_free(xo);
    vdn_dev_close(other);
    CHECK(vdn_dev_open("tpu", 0, 1, err, sizeof err) == NULL &&
              strstr(err, "backend 'tpu' unknown"),
          "%s", err);

    vdn_tensor sh = mk(2, 8, 0, 1, NULL);
    expect_err(vdn_op_rmsnorm(&x, &x, NULL, 1e-5, &sh, NULL, NULL), "shift and scale go together");
    expect_err(vdn_op_rmsnorm(&x, &x, NULL, 1e-5, &sh, &sh, NULL),
               "op rmsnorm: shift is F32[2,8] without idx, expected 4 rows");
    expect_err(vdn_op_rmsnorm(&x, &x, NULL, 0, NULL, NULL, NULL), "op rmsnorm: eps 0");
    expect_err(vdn_op_mul_groups(&x, &sh, 3), "op mul_groups: group 3 does not divide 8");

    vdn_tensor q = mk(5, 8, 0, 1, NULL), k = mk(5, 6, 0, 1, NULL);
    vdn_attn_mask *m = vdn_attn_mask_dense(D, 5, 5);
    expect_err(vdn_op_attention(&q, &q, &k, &k, 4, 0.5, m, NULL),
               "op attention: head_dim 4 does not divide q (8) and k (6)");
    vdn_tensor k4 = mk(5, 4, 0, 1, NULL), q12 = mk(5, 12, 0, 1, NULL);
    expect_err(vdn_op_attention(&q12, &q12, &q, &q, 4, 0.5, m, NULL), "GQA needs a multiple");
    expect_err(vdn_op_attention(&q, &q, &k4, &k4, 4, 0.5, NULL, NULL), "mask is missing");
    vdn_tensor q6 = mk(6, 8, 0, 1, NULL);
    expect_err(vdn_op_attention(&q6, &q6, &k4, &k4, 4, 0.5, m, NULL),
               "mask is 5 rows x 5 keys, q has 6 rows");
    vdn_attn_mask_free(m);
    CHECK(vdn_attn_mask_rows(D, 3, 1, 2, (int[]){0, 0, 2}, (int[]){1, 4, 3}) == NULL &&
              strstr(vdn_dev_error(D), "row 1 has window [0, 4)"),
          "%s", vdn_dev_error(D));

    vdn_rope rope = {NULL, NULL, 6, {1, 1, 1}, 0};
    expect_err(vdn_op_qk_norm_rope(&q, NULL, &q, NULL, NULL, NULL, 4, 1e-5, &rope),
               "rope n_rot 6, expected even and 2..head_dim 4");
    rope.n_rot = 4;
    expect_err(vdn_op_qk_norm_rope(&q, NULL, &q, NULL, NULL, NULL, 4, 1e-5, &rope),
               "rope sections 1+1+1, expected n_rot/2 = 2 pairs");
    rope.sections[2] = 0;
    expect_err(vdn_op_qk_norm_rope(&q, NULL, &q, NULL, NULL, NULL, 4, 1e-5, &rope),
               "op qk_norm_rope: rope.pos is missing");
    expect_err(vdn_op_euler(&x, &x, 0.5, 0.7), "op euler: sigma 0.5 -> 0.7");
    vdn_tensor t3 = mk(1, 3, 0, 1, NULL);
    expect_err(vdn_op_time_features(&x, &t3), "op time_features: t is F32[1,3], expected one");
    release();
}

/* ---- lanes (op.h): on the CPU every op completes before it returns, so work forked to lane 1
 * gives what the same calls on one lane give; the front end refuses misuse on every backend ---- */

static void test_lanes(void) {
    float *hx;
    vdn_tensor x = mk(5, 9, 1, 1, &hx), y = mk(5, 9, 0, 1, NULL), z = mk(5, 9, 0, 1, NULL);
    expect_err(vdn_dev_lane(D, 1), "device cpu: lane 1 outside a fork");
    expect_err(vdn_dev_lane(D, 2), "device cpu: lane 2, expected 0 or 1");
    expect_err(vdn_dev_join(D), "device cpu: join without a fork");
    /* lane 0 writes x, lane 1 reads it into y = 2x, lane 0 meanwhile z = x + 1 (reads only),
     * after the join lane 0 adds y into z: z = 3x + 1 */
    CHECK(vdn_op_scale(&x, 1.0) == 0 && vdn_dev_fork(D) == 0);
    CHECK(vdn_tensor_copy(&y, &x) == 0 && vdn_op_scale(&y, 2.0) == 0);
    CHECK(vdn_dev_lane(D, 0) == 0 && vdn_tensor_copy(&z, &x) == 0);
    vdn_tensor *one = vdn_tensor_new2(D, VDN_DT_F32, 5, 9);
    CHECK(one && vdn_tensor_fill(one, 1.0) == 0 && vdn_op_add(&z, one) == 0);
    CHECK(vdn_dev_lane(D, 1) == 0 && vdn_dev_lane(D, 0) == 0, "%s", vdn_dev_error(D));
    CHECK(vdn_dev_join(D) == 0 && vdn_op_add(&z, &y) == 0 && vdn_dev_sync(D) == 0);
    expect_err(vdn_dev_join(D), "join without a fork"); /* the join closed the fork */
    expect_err(vdn_dev_lane(D, 1), "lane 1 outside a fork");
    float *hz = get(&z);
    double ref[45];
    for (int i = 0; i < 45; i++)
        ref[i] = 3.0 * hx[i] + 1.0;
    near_all(hz, ref, 45, 1e-6, "lanes: z = 3x + 1 through a fork and a join");
    vdn_tensor_free(one);
    free(hx), free(hz);
    release();
}

int main(void) {
    char err[256];
    D = vdn_dev_open("cpu", 0, 2, err, sizeof err);
    if (!D) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    CHECK(strcmp(vdn_dev_name(D), "cpu") == 0 && vdn_dev_is_cpu(D));
    test_tensors();
    test_linear();
    test_matmul_bt();
    test_elementwise();
    test_norms();
    test_qk_norm_rope(0);
    test_qk_norm_rope(1);
    test_attention();
    test_diffusion();
    test_errors();
    test_encoder_ops();
    test_lanes();
    vdn_dev_close(D);
    return test_done("test_op_cpu");
}
