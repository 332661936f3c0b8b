/* CPU matrix products: linear (y = act(x w^T + b)) and batched a b^T. float64 accumulation in
 * input order, one rounding to float32 per output; rows are spread over vdn_parallel_for (the
 * result does not depend on the thread count).
 * fp8 (op.h): the oracle quantises x exactly as the CUDA backend does (the same float32
 * division and e4m3 rounding, so the same bytes and scales) and sums the e4m3 values' products
 * in float64, which is exact for up to 2^25 terms; the scales and bias apply once at the end.
 * An x that arrives quantised (F8_E4M3 with x->scale) is read as it is. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_cpu.h"
#include "ops.h"

typedef struct {
    vdn_tensor *y;
    cpu_fmat x, w, b;
    int has_b, accumulate;
    vdn_act act;
    int64_t rows, in, out, chunk;
    const float *sx, *sw; /* fp8: per-row scales of x and w (x and w hold the e4m3 values) */
} linear_job;

/* the float32 value of the product before its act / accumulate: bias first for float weights
 * (unchanged order), scales then bias for fp8 (as cuBLASLt's alpha, scales and bias epilogue) */
static float linear_dot(const linear_job *j, const float *xr, int64_t r, int64_t o) {
    const float *wo = cpu_frow(&j->w, o);
    double acc = j->has_b && !j->sx ? j->b.p[o] : 0.0;
    for (int64_t i = 0; i < j->in; i++)
        acc += (double)xr[i] * wo[i];
    if (j->sx) {
        acc *= (double)j->sx[r] * j->sw[o];
        if (j->has_b) acc += j->b.p[o];
    }
    return (float)acc;
}

/* rows [c*chunk, (c+1)*chunk) */
static void linear_chunk(void *ctx, int c) {
    const linear_job *j = ctx;
    int64_t r0 = (int64_t)c * j->chunk, r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
    float *yf = j->y->dtype == VDN_DT_F32 ? (float *)j->y->data : NULL;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = cpu_frow(&j->x, r);
        for (int64_t o = 0; o < j->out; o++) {
            float v = linear_dot(j, xr, r, o); /* the product's float32 value; the act reads it */
            if (yf) /* float32 output: the same roundings, stored directly */
                yf[(size_t)r * j->y->ld + o] = j->accumulate
                                                   ? yf[(size_t)r * j->y->ld + o] + v
                                                   : (j->act ? (float)cpu_act(v, j->act) : v);
            else if (j->accumulate)
                cpu_put(j->y, r, o, (float)cpu_at(j->y, r, o) + v);
            else
                cpu_put(j->y, r, o, j->act ? cpu_act(v, j->act) : v);
        }
    }
}

float vdn_cpu_quantize_row(const void *x, vdn_dtype dt, int64_t n, uint8_t *q) {
    vdn_tensor t = {.dtype = dt, .ndim = 2, .ne = {1, n, 1, 1}, .ld = n, .data = (void *)x};
    float amax = 0.f;
    for (int64_t c = 0; c < n; c++)
        amax = fmaxf(amax, fabsf((float)cpu_at(&t, 0, c)));
    /* float32 arithmetic on purpose: the CUDA kernel does exactly these two roundings */
    const float s = amax > 0.f ? amax / 448.f : 1.f;
    for (int64_t c = 0; c < n; c++)
        q[c] = vdn_f32_to_e4m3((float)cpu_at(&t, 0, c) / s);
    return s;
}

int vdn_cpu_quantize_rows(vdn_tensor *q, vdn_tensor *scale, const vdn_tensor *x) {
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    for (int64_t r = 0; r < rows; r++)
        ((float *)scale->data)[r] =
            vdn_cpu_quantize_row(cpu_addr(x, r, 0), x->dtype, cols, (uint8_t *)cpu_addr(q, r, 0));
    return 0;
}

/* x quantised per row (the fp8 rule) as a float32 matrix of its e4m3 values, and its scales */
static cpu_fmat quantized_x(const vdn_tensor *x, float **sx) {
    const int64_t rows = vdn_tensor_rows(x), cols = vdn_tensor_cols(x);
    cpu_fmat m = {0};
    m.copy = vdn_xmalloc(sizeof(float) * (size_t)(rows * cols));
    *sx = vdn_xmalloc(sizeof(float) * (size_t)rows);
    uint8_t *q = vdn_xmalloc((size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        (*sx)[r] = vdn_cpu_quantize_row(cpu_addr(x, r, 0), x->dtype, cols, q);
        for (int64_t c = 0; c < cols; c++)
            m.copy[r * cols + c] = vdn_e4m3_to_f32(q[c]);
    }
    free(q);
    m.p = m.copy;
    m.ld = cols;
    return m;
}

int vdn_cpu_linear(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                   vdn_act act, int accumulate) {
    const int fp8 = w->dtype == VDN_DT_F8_E4M3, x8 = x->dtype == VDN_DT_F8_E4M3;
    float *sx = NULL;
    /* an fp8 x: its e4m3 values (cpu_at decodes them) and its own scales */
    const cpu_fmat xm = fp8 && !x8 ? quantized_x(x, &sx) : cpu_fmat_of(x); /* before sx is read */
    linear_job j = {.y = y,
                    .x = xm,
                    .sx = x8 ? x->scale : sx,
                    .sw = fp8 ? w->scale : NULL,
                    .w = cpu_fmat_of(w),
                    .has_b = b != NULL,
                    .accumulate = accumulate,
                    .act = act,
                    .rows = vdn_tensor_rows(x),
                    .in = vdn_tensor_cols(x),
                    .out = vdn_tensor_rows(w)};
    if (b) j.b = cpu_fmat_of(b);
    int nt = vdn_ops_threads();
    double work = (double)j.rows * j.in * j.out;
    if (work < 1e6 || nt <= 1) nt = 1;
    j.chunk = (j.rows + nt - 1) / nt;
    int n_chunks = (int)((j.rows + j.chunk - 1) / j.chunk);
    if (nt == 1)
        linear_chunk(&j, 0);
    else
        vdn_parallel_for(n_chunks, linear_chunk, &j);
    cpu_fmat_done(&j.x);
    cpu_fmat_done(&j.w);
    cpu_fmat_done(&j.b);
    free(sx);
    return 0;
}

typedef struct {
    vdn_tensor *y;
    cpu_fmat a, b;
    int64_t m, p, k;
    int accumulate;
} matmul_job;

static void matmul_one(void *ctx, int i) {
    const matmul_job *j = ctx;
    for (int64_t r = 0; r < j->m; r++) {
        const float *ar = cpu_frow(&j->a, (int64_t)i * j->m + r);
        for (int64_t c = 0; c < j->p; c++) {
            const float *bc = cpu_frow(&j->b, (int64_t)i * j->p + c);
            double acc = 0.0;
            for (int64_t t = 0; t < j->k; t++)
                acc += (double)ar[t] * bc[t];
            int64_t yr = (int64_t)i * j->m + r;
            float v = (float)acc;
            cpu_put(j->y, yr, c, j->accumulate ? (float)cpu_at(j->y, yr, c) + v : v);
        }
    }
}

int vdn_cpu_matmul_bt(vdn_tensor *y, const vdn_tensor *a, const vdn_tensor *b, int accumulate) {
    int64_t n = a->ndim == 3 ? a->ne[0] : 1;
    matmul_job j = {.y = y,
                    .a = cpu_fmat_of(a),
                    .b = cpu_fmat_of(b),
                    .m = vdn_tensor_rows(a) / n,
                    .p = vdn_tensor_rows(b) / n,
                    .k = vdn_tensor_cols(a),
                    .accumulate = accumulate};
    vdn_parallel_for((int)n, matmul_one, &j);
    cpu_fmat_done(&j.a);
    cpu_fmat_done(&j.b);
    return 0;
}
