/* CPU matrix products: linear (y = act(x w^T + b)) and batched a b^T. float64 accumulation in
 * input order, one rounding to float32 per output; rows are spread over vdn_parallel_for (the
 * result does not depend on the thread count). */
#include <stdlib.h>

#include "op_cpu.h"
#include "ops.h"

typedef struct {
    vdn_tensor *y;
    cpu_fmat x, w, b;
    int has_b, accumulate;
    vdn_act act;
    int64_t rows, in, out, chunk;
} linear_job;

/* rows [c*chunk, (c+1)*chunk) */
static void linear_chunk(void *ctx, int c) {
    const linear_job *j = ctx;
    int64_t r0 = (int64_t)c * j->chunk, r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
    float *yf = j->y->dtype == VDN_DT_F32 ? (float *)j->y->data : NULL;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = cpu_frow(&j->x, r);
        for (int64_t o = 0; o < j->out; o++) {
            const float *wo = cpu_frow(&j->w, o);
            double acc = j->has_b ? j->b.p[o] : 0.0;
            for (int64_t i = 0; i < j->in; i++)
                acc += (double)xr[i] * wo[i];
            float v = (float)acc; /* the product's float32 value; the act reads it */
            if (yf)               /* float32 output: the same roundings, stored directly */
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

int vdn_cpu_linear(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                   vdn_act act, int accumulate) {
    linear_job j = {.y = y,
                    .x = cpu_fmat_of(x),
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
