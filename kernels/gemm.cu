/* Linear layers through cuBLASLt: bf16 operands, fp32 accumulation, optional fused bias and
 * accumulate-into-output, a bf16 or (vdn_gemm_bf16_f32) a float32 output. Row-major Y = X W^T is
 * the column-major product Y^T = W X^T, so W is passed transposed as cuBLAS's A and X as its B. The
 * heuristic's choice is cached per shape. fp8: the plain product of e4m3 A and B into bf16 D (no
 * scales, no bias, beta 0); the TN layout above is the one fp8 needs. cuBLASLt 13.0 refuses the
 * row-wise scale mode (OUTER_VEC_32F) on Hopper (CUBLAS_STATUS_INVALID_VALUE from the heuristic,
 * device run 2026-11-25), so the row scales, the bias and the accumulation are one epilogue of the
 * caller's (op_cuda_fp8.cu). */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_util.cuh"

typedef struct {
    int rows, n, k, ldx, ldw, ldy, bias, acc, align; /* align: min pointer alignment in bytes */
    int fp8;                                         /* e4m3 operands, unscaled bf16 D */
    int out32;                                       /* float32 C/D and bias (bf16 operands) */
    int none; /* the heuristic found no algorithm (fp8: the caller falls back) */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
} plan;

struct vdn_gemm_ctx {
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    plan plans[128];
    int n_plans;
};

extern "C" vdn_gemm_ctx *vdn_gemm_create(size_t workspace_bytes) {
    vdn_gemm_ctx *g = (vdn_gemm_ctx *)calloc(1, sizeof *g);
    if (!g) return NULL;
    if (cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS ||
        cudaMalloc(&g->ws, workspace_bytes) != cudaSuccess) {
        fprintf(stderr, "vdn_gemm_create: cuBLASLt handle or %zu-byte workspace failed\n",
                workspace_bytes);
        free(g);
        return NULL;
    }
    g->ws_bytes = workspace_bytes;
    return g;
}

extern "C" void vdn_gemm_destroy(vdn_gemm_ctx *g) {
    if (!g) return;
    for (int i = 0; i < g->n_plans; i++) {
        cublasLtMatmulDescDestroy(g->plans[i].op);
        cublasLtMatrixLayoutDestroy(g->plans[i].a);
        cublasLtMatrixLayoutDestroy(g->plans[i].b);
        cublasLtMatrixLayoutDestroy(g->plans[i].c);
    }
    cudaFree(g->ws);
    cublasLtDestroy(g->lt);
    free(g);
}

/* 0: planned; -1: a cuBLASLt call failed; 1: no algorithm for this shape (p->none set) */
static int make_plan(vdn_gemm_ctx *g, plan *p) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (p->bias) {
        cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
        cudaDataType_t bt = p->out32 ? CUDA_R_32F : CUDA_R_16BF;
        CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                                    sizeof bt));
    }
    const cudaDataType_t tin = p->fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    /* A = W as stored: column-major k x n (ld = ldw), transposed by the op */
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, tin, p->k, p->n, p->ldw));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, tin, p->k, p->rows, p->ldx));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, p->out32 ? CUDA_R_32F : CUDA_R_16BF, p->n,
                                            p->rows, p->ldy));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->ws_bytes, sizeof g->ws_bytes));
    /* operands may sit at an offset inside a wider buffer: say how aligned they really are */
    uint32_t al = (uint32_t)p->align;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(g->lt, p->op, p->a, p->b, p->c, p->c, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
        if ((p->fp8 || p->out32) &&
            (found == 0 || s == CUBLAS_STATUS_NOT_SUPPORTED)) { /* the caller's fallback */
            p->none = 1;
            fprintf(stderr,
                    "vdn_gemm: cuBLASLt has no %s algorithm for rows %d n %d k %d (status "
                    "%d): these products take the %s fp32 route\n",
                    p->fp8 ? "fp8" : "bf16 -> fp32", p->rows, p->n, p->k, (int)s,
                    p->fp8 ? "dequantised" : "widened");
            return 1;
        }
        fprintf(stderr, "vdn_gemm: no cuBLASLt algorithm for rows %d n %d k %d (status %d)\n",
                p->rows, p->n, p->k, (int)s);
        return -1;
    }
    p->algo = res.algo;
    return 0;
}

/* the cached plan of this call's shape, made on first use; NULL after printing why. A plan the
 * heuristic found nothing for is cached too (none = 1). */
static plan *find_plan(vdn_gemm_ctx *g, const plan *key) {
    for (int i = 0; i < g->n_plans; i++) {
        plan *q = &g->plans[i];
        if (q->rows == key->rows && q->n == key->n && q->k == key->k && q->ldx == key->ldx &&
            q->ldw == key->ldw && q->ldy == key->ldy && q->bias == key->bias &&
            q->acc == key->acc && q->align == key->align && q->fp8 == key->fp8 &&
            q->out32 == key->out32)
            return q;
    }
    if (g->n_plans == (int)(sizeof g->plans / sizeof g->plans[0])) {
        fprintf(stderr, "vdn_gemm: plan cache full (128 shapes)\n");
        return NULL;
    }
    plan *p = &g->plans[g->n_plans];
    *p = *key;
    if (make_plan(g, p) < 0) return NULL;
    g->n_plans++;
    return p;
}

static plan plan_key(int rows, int n_out, int k, int ldx, int ldw, int ldy, const void *X,
                     const void *W, const void *Y, const void *bias, int accumulate, int fp8,
                     int out32 = 0) {
    plan key;
    memset(&key, 0, sizeof key);
    key.rows = rows, key.n = n_out, key.k = k, key.ldx = ldx, key.ldw = ldw, key.ldy = ldy;
    key.bias = bias != NULL, key.acc = accumulate != 0, key.fp8 = fp8, key.out32 = out32;
    uintptr_t addr = (uintptr_t)X | (uintptr_t)W | (uintptr_t)Y | (uintptr_t)bias;
    key.align = 256;
    while (key.align > 2 && (addr & (uintptr_t)(key.align - 1)))
        key.align >>= 1;
    return key;
}

/* Y (+)= W X (+ bias) through plan p, whose shape and dtypes the caller's key fixed */
static int run_plan(vdn_gemm_ctx *g, plan *p, const void *X, const void *W, void *Y,
                    const void *bias, int accumulate, vdn_stream st) {
    if (bias)
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                    sizeof bias));
    float one = 1.f, beta = accumulate ? 1.f : 0.f;
    CUBLAS_CHECK(cublasLtMatmul(g->lt, p->op, &one, W, p->a, X, p->b, &beta, Y, p->c, Y, p->c,
                                &p->algo, g->ws, g->ws_bytes, S_(st)));
    return 0;
}

extern "C" int vdn_gemm_bf16(vdn_gemm_ctx *g, const void *X, int ldx, const void *W, int ldw,
                             void *Y, int ldy, int rows, int n_out, int k, const void *bias,
                             int accumulate, vdn_stream st) {
    const plan key = plan_key(rows, n_out, k, ldx, ldw, ldy, X, W, Y, bias, accumulate, 0);
    plan *p = find_plan(g, &key);
    if (!p) return -1;
    return run_plan(g, p, X, W, Y, bias, accumulate, st);
}

extern "C" int vdn_gemm_bf16_f32(vdn_gemm_ctx *g, const void *X, int ldx, const void *W, int ldw,
                                 float *Y, int ldy, int rows, int n_out, int k, const float *bias,
                                 int accumulate, vdn_stream st) {
    const plan key = plan_key(rows, n_out, k, ldx, ldw, ldy, X, W, Y, bias, accumulate, 0, 1);
    plan *p = find_plan(g, &key);
    if (!p) return -1;
    if (p->none) return 1;
    return run_plan(g, p, X, W, Y, bias, accumulate, st);
}

extern "C" int vdn_gemm_fp8(vdn_gemm_ctx *g, const void *X8, int ldx, const void *W8, int ldw,
                            void *D, int ldd, int rows, int n_out, int k, vdn_stream st) {
    const plan key = plan_key(rows, n_out, k, ldx, ldw, ldd, X8, W8, D, NULL, 0, 1);
    plan *p = find_plan(g, &key);
    if (!p) return -1;
    if (p->none) return 1;
    float one = 1.f, zero = 0.f;
    CUBLAS_CHECK(cublasLtMatmul(g->lt, p->op, &one, W8, p->a, X8, p->b, &zero, D, p->c, D, p->c,
                                &p->algo, g->ws, g->ws_bytes, S_(st)));
    return 0;
}

extern "C" int vdn_sgemm_f32(void *cublas, const float *x, const float *W, float *y, int rows,
                             int n, int k, vdn_stream st) {
    cublasHandle_t h = (cublasHandle_t)cublas;
    CUBLAS_CHECK(cublasSetStream(h, S_(st)));
    float one = 1.f, zero = 0.f;
    /* y^T (n x rows) = W (col-major k x n, transposed) * x^T (col-major k x rows) */
    CUBLAS_CHECK(
        cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &one, W, k, x, k, &zero, y, n));
    return 0;
}
