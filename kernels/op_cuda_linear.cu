/* Matrix products of the CUDA backend.
 *   linear     fp8 w (with scales), and an fp8 x with it: op_cuda_fp8.cu;
 *              bf16 x, w, y (16-byte rows): cuBLASLt (gemm.cu) with the bias fused (as bf16);
 *              bf16 x, w into fp32 y (16-byte rows): cuBLASLt with fp32 C/D and bias;
 *              fp32 x, w, y: cuBLAS SGEMM in full fp32 (the contract's fp32 heads, no TF32);
 *              mixed dtypes: operands widened to fp32 in scratch, then SGEMM.
 *              The activation (and an fp32 bias) follow in one epilogue kernel.
 *   matmul_bt  cuBLAS strided-batched GEMM, fp32 accumulation (bf16 or fp32 operands). */
#include <cublas_v2.h>

#include "op_cuda.h"

namespace {

/* y^T (n x rows, ld ldy) = W^T x^T in cuBLAS's column-major terms: W row-major [n, k] is the
 * column-major k x n matrix, used transposed */
int sgemm(vdn_dev *d, const char *OP, const float *x, int64_t ldx, const float *w, int64_t ldw,
          float *y, int64_t ldy, int64_t rows, int64_t n, int64_t k, int accumulate) {
    cublasHandle_t h = (cublasHandle_t)cdev(d)->cb;
    const float one = 1.f, beta = accumulate ? 1.f : 0.f;
    if (cublasSetStream(h, cdev(d)->st) != CUBLAS_STATUS_SUCCESS)
        return vdn_dev_fault(d, VDN_DEV_FAULT_DEVICE, "op %s (%s): cublasSetStream failed", OP,
                             d->name);
    cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)rows, (int)k, &one, w,
                                   (int)ldw, x, (int)ldx, &beta, y, (int)ldy);
    if (s != CUBLAS_STATUS_SUCCESS)
        return vdn_dev_fault(d, op_cuda_cublas_fault_kind((int)s),
                             "op %s (%s): cublasSgemm (rows %lld, out %lld, in %lld): status %d",
                             OP, d->name, (long long)rows, (long long)n, (long long)k, (int)s);
    return 0;
}

/* t as fp32: itself, or widened into scratch `slot` (packed rows) */
const float *as_f32(vdn_dev *d, const vdn_tensor *t, int slot, int64_t *ld) {
    if (t->dtype == VDN_DT_F32) {
        *ld = t->ld;
        return (const float *)t->data;
    }
    const int64_t rows = vdn_tensor_rows(t), cols = vdn_tensor_cols(t);
    float *s = (float *)op_cuda_scratch(d, slot, (size_t)rows * cols * 4);
    if (!s || op_cuda_convert2d(d, s, VDN_DT_F32, cols, t->data, t->dtype, t->ld, rows, cols))
        return NULL;
    *ld = cols;
    return s;
}

int aligned_rows(const vdn_tensor *t) {
    return aligned16(t->data) && t->ld % 8 == 0;
}

int fits_int(int64_t v) {
    return v >= 0 && v <= INT32_MAX;
}

} // namespace

int op_cuda_linear(vdn_tensor *y, const vdn_tensor *x, const vdn_tensor *w, const vdn_tensor *b,
                   vdn_act act, int accumulate) {
    vdn_dev *d = y->dev;
    const char *OP = "linear";
    const int fp8 = w->dtype == VDN_DT_F8_E4M3;
    if (op_cuda_enter(d, OP, {y, x->dtype == VDN_DT_F8_E4M3 ? NULL : x, fp8 ? NULL : w, b}))
        return -1;
    const int64_t rows = vdn_tensor_rows(x), k = vdn_tensor_cols(x), n = vdn_tensor_rows(w);
    if (rows == 0 || n == 0) return 0;
    if (!fits_int(rows) || !fits_int(n) || !fits_int(k) || !fits_int(x->ld) || !fits_int(w->ld) ||
        !fits_int(y->ld))
        return vdn_dev_fail(d, "op %s: dimensions past 2^31 are not supported on cuda", OP);
    if (fp8) return op_cuda_linear_fp8(y, x, w, b, act, accumulate);
    /* cuBLASLt's tensor-core kernels want 16-byte operands: the model's tensors always are;
     * an odd view takes the fp32 route below */
    if (is_bf16(x) && is_bf16(w) && is_bf16(y) && aligned_rows(x) && aligned_rows(w) &&
        aligned_rows(y)) {
        /* the bias rides in cuBLASLt's epilogue as bf16: an fp32 one (the DiT's fused qkv bias)
         * is rounded to bf16 first, which costs one rounding of a value the output rounds anyway,
         * instead of a second pass over the whole output */
        const void *bias = NULL;
        if (b && !(bias = op_cuda_packed(d, b, VDN_DT_BF16, SCR_W0))) return -1;
        OPK(vdn_gemm_bf16(cdev(d)->gc, x->data, (int)x->ld, w->data, (int)w->ld, y->data,
                          (int)y->ld, (int)rows, (int)n, (int)k, bias, accumulate, vst(d)));
        return op_cuda_bias_act(d, OP, fview(y), rows, n, NULL, act);
    }
    /* bf16 operands into a float32 output (the video decoder's residual stream, accumulated, and
     * its proj_out): the same tensor-core product with C/D and the bias in float32 */
    if (is_bf16(x) && is_bf16(w) && is_f32(y) && aligned_rows(x) && aligned_rows(w) &&
        aligned16(y->data) && y->ld % 4 == 0) {
        const void *bias = NULL;
        if (b && !(bias = op_cuda_packed(d, b, VDN_DT_F32, SCR_W0))) return -1;
        const int rc = vdn_gemm_bf16_f32(cdev(d)->gc, x->data, (int)x->ld, w->data, (int)w->ld,
                                         (float *)y->data, (int)y->ld, (int)rows, (int)n, (int)k,
                                         (const float *)bias, accumulate, vst(d));
        if (rc < 0)
            return vdn_dev_fault(d, VDN_DEV_FAULT_DEVICE,
                                 "op %s (%s): vdn_gemm_bf16_f32 failed (details on stderr)", OP,
                                 d->name);
        if (rc == 0) return op_cuda_bias_act(d, OP, fview(y), rows, n, NULL, act);
        /* rc 1: no cuBLASLt algorithm for the shape: the widened route below */
    }
    int64_t ldx = 0, ldw = 0;
    const float *xf = as_f32(d, x, SCR_CONV, &ldx), *wf = as_f32(d, w, SCR_CONV2, &ldw);
    if (!xf || !wf) return -1;
    return op_cuda_linear_f32(y, xf, ldx, wf, ldw, k, b, act, accumulate);
}

int op_cuda_linear_f32(vdn_tensor *y, const float *xf, int64_t ldx, const float *wf, int64_t ldw,
                       int64_t k, const vdn_tensor *b, vdn_act act, int accumulate) {
    vdn_dev *d = y->dev;
    const char *OP = "linear";
    const int64_t rows = vdn_tensor_rows(y), n = vdn_tensor_cols(y);
    if (is_f32(y)) {
        if (sgemm(d, OP, xf, ldx, wf, ldw, (float *)y->data, y->ld, rows, n, k, accumulate))
            return -1;
        return op_cuda_bias_act(d, OP, fview(y), rows, n, b, act);
    }
    /* a bf16 / f16 output of fp32 arithmetic: through an fp32 staging matrix */
    float *yf = (float *)op_cuda_scratch(d, SCR_STAGE, (size_t)rows * n * 4);
    if (!yf) return -1;
    if (accumulate && op_cuda_convert2d(d, yf, VDN_DT_F32, n, y->data, y->dtype, y->ld, rows, n))
        return -1;
    FView yv = {(char *)yf, VDN_DT_F32, n};
    if (sgemm(d, OP, xf, ldx, wf, ldw, yf, n, rows, n, k, accumulate) ||
        op_cuda_bias_act(d, OP, yv, rows, n, b, act))
        return -1;
    return op_cuda_convert2d(d, y->data, y->dtype, y->ld, yf, VDN_DT_F32, n, rows, n);
}

int op_cuda_matmul_bt(vdn_tensor *y, const vdn_tensor *a, const vdn_tensor *b, int accumulate) {
    vdn_dev *d = y->dev;
    const char *OP = "matmul_bt";
    if (op_cuda_enter(d, OP, {y, a, b})) return -1;
    const int64_t k = vdn_tensor_cols(a);
    const int64_t m = a->ndim >= 2 ? a->ne[a->ndim - 2] : 1;
    const int64_t p = b->ndim >= 2 ? b->ne[b->ndim - 2] : 1;
    const int64_t batch = m ? vdn_tensor_rows(a) / m : 0;
    if (batch == 0 || m == 0 || p == 0) return 0;
    if (!fits_int(m) || !fits_int(p) || !fits_int(k) || !fits_int(batch))
        return vdn_dev_fail(d, "op %s: dimensions past 2^31 are not supported on cuda", OP);
    const void *A = a->data, *B = b->data;
    int64_t lda = a->ld, ldb = b->ld;
    cudaDataType_t tin = CUDA_R_16BF;
    if (!(is_bf16(a) && is_bf16(b))) { /* fp32 (or mixed, widened) operands */
        if (!(A = as_f32(d, a, SCR_CONV, &lda)) || !(B = as_f32(d, b, SCR_CONV2, &ldb))) return -1;
        tin = CUDA_R_32F;
    }
    void *Y = y->data;
    int64_t ldy = y->ld;
    cudaDataType_t tout;
    if (y->dtype == VDN_DT_F32)
        tout = CUDA_R_32F;
    else if (y->dtype == VDN_DT_BF16 && tin == CUDA_R_16BF)
        tout = CUDA_R_16BF;
    else { /* fp32 products into a bf16/f16 output: staged */
        Y = op_cuda_scratch(d, SCR_STAGE, (size_t)batch * m * p * 4);
        if (!Y) return -1;
        ldy = p;
        tout = CUDA_R_32F;
        if (accumulate &&
            op_cuda_convert2d(d, Y, VDN_DT_F32, p, y->data, y->dtype, y->ld, batch * m, p))
            return -1;
    }
    cublasHandle_t h = (cublasHandle_t)cdev(d)->cb;
    const float one = 1.f, beta = accumulate ? 1.f : 0.f;
    if (cublasSetStream(h, cdev(d)->st) != CUBLAS_STATUS_SUCCESS)
        return vdn_dev_fault(d, VDN_DEV_FAULT_DEVICE, "op %s (%s): cublasSetStream failed", OP,
                             d->name);
    /* Y_i^T (p x m) = B_i A_i^T, column-major: B_i row-major [p, k] used transposed */
    cublasStatus_t s = cublasGemmStridedBatchedEx(
        h, CUBLAS_OP_T, CUBLAS_OP_N, (int)p, (int)m, (int)k, &one, B, tin, (int)ldb, p * ldb, A,
        tin, (int)lda, m * lda, &beta, Y, tout, (int)ldy, m * ldy, (int)batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return vdn_dev_fault(d, op_cuda_cublas_fault_kind((int)s),
                             "op %s (%s): cublasGemmStridedBatchedEx (%lld x [%lld, %lld, %lld]): "
                             "status %d",
                             OP, d->name, (long long)batch, (long long)m, (long long)p,
                             (long long)k, (int)s);
    if (Y != y->data)
        return op_cuda_convert2d(d, y->data, y->dtype, y->ld, Y, VDN_DT_F32, p, batch * m, p);
    return 0;
}
