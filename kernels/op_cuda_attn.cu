/* Attention of the CUDA backend. Calls with as many key/value heads as query heads and keys =
 * query rows (the DiT's, head dim 128; the video VAE decoder's, head dim 64) run the Hopper kernel
 * (attn_pingpong.cu: wgmma, TMA stage ring, FA3 ping-pong); everything else (GQA, keys != rows, a
 * gate with a stride) runs the portable mma.sync kernel (attn.cu). Both walk the mask's per-tile
 * key ranges (attn_tiles.h), built once per mask by op_cuda.cu; a causal mask is per-row windows
 * [0, r + 1). */
#include "op_cuda.h"

namespace {

int aligned_rows(const void *p, int64_t ld) {
    return aligned16(p) && ld % 8 == 0;
}

} // namespace

int op_cuda_attention(vdn_tensor *o, const vdn_tensor *q, const vdn_tensor *k, const vdn_tensor *v,
                      int head_dim, double scale, const vdn_attn_mask *mask,
                      const vdn_tensor *gate) {
    vdn_dev *d = o->dev;
    const char *OP = "attention";
    if (op_cuda_enter(d, OP, {o, q, k, v})) return -1;
    const int64_t rows = vdn_tensor_rows(q), keys = vdn_tensor_rows(k);
    const int hq = (int)(vdn_tensor_cols(q) / head_dim), hkv = (int)(vdn_tensor_cols(k) / head_dim);
    if (rows == 0 || hq == 0) return 0;
    if (head_dim != 64 && head_dim != 128)
        return vdn_dev_fail(d, "op %s: head_dim %d on cuda: the kernels take 64 or 128", OP,
                            head_dim);
    if (rows > INT32_MAX || keys > INT32_MAX)
        return vdn_dev_fail(d, "op %s: more than 2^31 rows", OP);
    /* operands as bf16 rows the kernels can copy 16 bytes at a time */
    int64_t ldq = q->ld, ldk = k->ld, ldv = v->ld;
    const void *Q = q->data, *K = k->data, *V = v->data;
    if (!is_bf16(q) || !aligned_rows(Q, ldq)) Q = NULL;
    if (!is_bf16(k) || !aligned_rows(K, ldk)) K = NULL;
    if (!is_bf16(v) || !aligned_rows(V, ldv)) V = NULL;
    /* (a misaligned bf16 view is copied like an fp32 one) */
    if (!Q && !(Q = op_cuda_as_bf16_packed(d, q, SCR_CONV, &ldq))) return -1;
    if (!K && !(K = op_cuda_as_bf16_packed(d, k, SCR_CONV2, &ldk))) return -1;
    if (!V && !(V = op_cuda_as_bf16_packed(d, v, SCR_CONV3, &ldv))) return -1;
    /* the gate as fp32 [rows][hq] */
    const float *G = NULL;
    int64_t ldg = hq;
    if (gate) {
        if (is_f32(gate)) {
            G = (const float *)gate->data, ldg = gate->ld;
        } else {
            float *g = (float *)op_cuda_scratch(d, SCR_GATE, (size_t)rows * hq * 4);
            if (!g || op_cuda_convert2d(d, g, VDN_DT_F32, hq, gate->data, gate->dtype, gate->ld,
                                        rows, hq))
                return -1;
            G = g;
        }
    }
    /* the output: o itself when bf16 with even stride, else staged */
    void *O = o->data;
    int64_t ldo = o->ld;
    const int stage_out = !is_bf16(o) || ldo % 2 || (uintptr_t)O % 4;
    if (stage_out) {
        ldo = (int64_t)hq * head_dim;
        if (!(O = op_cuda_scratch(d, SCR_OUT, (size_t)rows * ldo * 2))) return -1;
    }
    int n_tiles = 0;
    const int *tiles = op_cuda_mask_tiles(mask, &n_tiles);
    const int *lohi = op_cuda_mask_lohi(mask);
    const int head_end = mask->kind == VDN_MASK_ROWS ? mask->head_end : 0;
    const int tail_start = mask->kind == VDN_MASK_ROWS ? mask->tail_start : (int)keys;
    const float sc = (float)scale;
    if (hq == hkv && rows == keys && ldg == hq) {
        void *vt = op_cuda_scratch(d, SCR_VT, vdn_attention_vt_elems((int)rows, hq, head_dim) * 2);
        if (!vt) return -1;
        OPK(vdn_k_attention_wgmma(Q, (int)ldq, K, (int)ldk, V, (int)ldv, vt, (int)rows, hq,
                                  head_dim, lohi, head_end, tail_start, tiles, n_tiles, sc, G, O,
                                  (int)ldo, vst(d)));
    } else {
        OPK(vdn_k_attention_ex(Q, (int)ldq, K, (int)ldk, V, (int)ldv, (int)rows, (int)keys, hq,
                               hq / hkv, head_dim, lohi, head_end, tail_start, tiles, n_tiles, sc,
                               G, (int)ldg, O, (int)ldo, vst(d)));
    }
    if (stage_out)
        return op_cuda_convert2d(d, o->data, o->dtype, o->ld, O, VDN_DT_BF16, ldo, rows,
                                 (int64_t)hq * head_dim);
    return 0;
}
