/* The VDA family (engine/op_vda.h) on CUDA: each op is one fused kernel of vda_*.cu. The branch
 * lives in bf16 features (kb, vt, qt, Slin) and fp32 states (ks, A, B, T, J, P, R, S0, alpha, r),
 * FHSD tensors packed with head dim 128 (the kernels' D). Weights a model keeps in another dtype
 * (conv taps, the norm weight, dt_bias, A_log) are converted into scratch on the way. */
#include "op_cuda.h"
extern "C" {
#include "op_vda.h"
}

namespace {

const int D = 128;

/* a packed tensor of dtype dt, 16-byte aligned: what every FHSD / state operand must be */
int need(vdn_dev *d, const char *OP, const char *name, const vdn_tensor *t, vdn_dtype dt) {
    if (!t) return 0;
    if (t->dtype != dt || !contiguous(t) || !aligned16(t->data) || vdn_tensor_cols(t) != D) {
        char b[96];
        return vdn_dev_fail(d, "op %s: %s is %s, expected packed %s rows of %d on cuda", OP, name,
                            vdn_tensor_desc(t, b, sizeof b), vdn_dtype_name(dt), D);
    }
    return 0;
}

int prep(const vdn_vda_feats *out, const vdn_tensor *k, const vdn_tensor *v, const vdn_tensor *q,
         const vdn_vda_conv *conv, const vdn_tensor *beta, int frames, int gh, int gw, int heads) {
    vdn_dev *d = k->dev;
    const char *OP = "vda_prep";
    if (op_cuda_enter(d, OP)) return -1;
    if (need(d, OP, "ks", out->ks, VDN_DT_F32) || need(d, OP, "kb", out->kb, VDN_DT_BF16) ||
        need(d, OP, "vt", out->vt, VDN_DT_BF16) || need(d, OP, "qt", out->qt, VDN_DT_BF16))
        return -1;
    if (!is_bf16(k) || !is_bf16(v) || (q && !is_bf16(q)) || !is_f32(beta) || !contiguous(beta))
        return vdn_dev_fail(d, "op %s: k, v, q must be bf16 and beta packed fp32 on cuda", OP);
    if (vdn_tensor_cols(k) != (int64_t)heads * D)
        return vdn_dev_fail(d, "op %s: head dim %lld on cuda, the kernels take %d", OP,
                            (long long)(vdn_tensor_cols(k) / heads), D);
    const int S = gh * gw;
    const void *qin = q ? q->data : NULL;
    void *qt = out->qt ? out->qt->data : NULL;
    float *ks = out->ks ? (float *)out->ks->data : NULL;
    if (!conv) { /* the text state: SiLU (+ L2) and beta only */
        OPK(vdn_k_vda_act(k->data, (int)k->ld, v->data, (int)v->ld, qin, q ? (int)q->ld : 0, NULL,
                          NULL, (const float *)beta->data, frames, S, heads, NULL, out->kb->data,
                          out->vt->data, qt, ks, vst(d)));
        return 0;
    }
    if (k->ld != v->ld || (q && q->ld != k->ld))
        return vdn_dev_fail(d,
                            "op %s: k, v and q must share one row stride on cuda (the fused "
                            "projection's column views)",
                            OP);
    const void *wsk = op_cuda_packed(d, conv->k_sp, VDN_DT_BF16, SCR_W0),
               *wtk = op_cuda_packed(d, conv->k_tm, VDN_DT_BF16, SCR_W0 + 1),
               *wsv = op_cuda_packed(d, conv->v_sp, VDN_DT_BF16, SCR_W0 + 2),
               *wtv = op_cuda_packed(d, conv->v_tm, VDN_DT_BF16, SCR_W0 + 3);
    if (!wsk || !wtk || !wsv || !wtv) return -1;
    if (vdn_tensor_cols(conv->k_sp) != 25 || vdn_tensor_cols(conv->k_tm) != 5)
        return vdn_dev_fail(d,
                            "op %s: the fused kernel takes 5x5 spatial and 5-tap temporal "
                            "convolutions",
                            OP);
    OPK(vdn_k_vda_prep(k->data, v->data, qin, (int)k->ld, frames, gh, gw, heads, wsk, wtk, wsv, wtv,
                       (const float *)beta->data, NULL, out->kb->data, out->vt->data, qt, ks,
                       vst(d)));
    return 0;
}

int stats(vdn_tensor *A, vdn_tensor *B, const vdn_tensor *ks, const vdn_tensor *kb,
          const vdn_tensor *vt, int nmat) {
    vdn_dev *d = A->dev;
    const char *OP = "vda_stats";
    if (op_cuda_enter(d, OP)) return -1;
    if (need(d, OP, "A", A, VDN_DT_F32) || need(d, OP, "B", B, VDN_DT_F32) ||
        need(d, OP, "ks", ks, VDN_DT_F32) || need(d, OP, "kb", kb, VDN_DT_BF16) ||
        need(d, OP, "vt", vt, VDN_DT_BF16))
        return -1;
    if (nmat == 0) return 0;
    const int S = (int)(vdn_tensor_rows(kb) / nmat);
    OPK(vdn_k_vda_stats(cdev(d)->cb, (const float *)ks->data, kb->data, vt->data, nmat, S,
                        (float *)A->data, (float *)B->data, vst(d)));
    return 0;
}

int solve(vdn_tensor *T, vdn_tensor *J, const vdn_tensor *A, const vdn_tensor *B,
          const vdn_tensor *alpha, int additive_S) {
    vdn_dev *d = A->dev;
    const char *OP = "vda_solve";
    if (op_cuda_enter(d, OP)) return -1;
    if (need(d, OP, "T", T, VDN_DT_F32) || need(d, OP, "J", J, VDN_DT_F32) ||
        need(d, OP, "A", A, VDN_DT_F32) || need(d, OP, "B", B, VDN_DT_F32))
        return -1;
    if (alpha && (!is_f32(alpha) || !contiguous(alpha)))
        return vdn_dev_fail(d, "op %s: alpha must be packed fp32 on cuda", OP);
    const int nmat = (int)(vdn_tensor_rows(A) / D);
    if (nmat == 0) return 0;
    OPK(vdn_k_vda_solve(
        (const float *)A->data, (const float *)B->data, alpha ? (const float *)alpha->data : NULL,
        nmat, T ? (float *)T->data : NULL, J ? (float *)J->data : NULL, additive_S, vst(d)));
    return 0;
}

int scans(vdn_tensor *P, vdn_tensor *R, const vdn_tensor *T, const vdn_tensor *J,
          const vdn_tensor *S0, int frames) {
    vdn_dev *d = P->dev;
    const char *OP = "vda_scans";
    if (op_cuda_enter(d, OP)) return -1;
    if (need(d, OP, "P", P, VDN_DT_F32) || need(d, OP, "R", R, VDN_DT_F32) ||
        need(d, OP, "T", T, VDN_DT_F32) || need(d, OP, "J", J, VDN_DT_F32) ||
        need(d, OP, "S0", S0, VDN_DT_F32))
        return -1;
    if (frames == 0) return 0;
    const int heads = (int)(vdn_tensor_rows(T) / ((int64_t)frames * D));
    OPK(vdn_k_vda_scans((const float *)T->data, (const float *)J->data,
                        S0 ? (const float *)S0->data : NULL, frames, heads, (float *)P->data,
                        R ? (float *)R->data : NULL, vst(d)));
    return 0;
}

int gather(vdn_tensor *Slin, const vdn_tensor *P, const vdn_tensor *R, const vdn_tensor *S0,
           const vdn_tensor *alpha, const vdn_tensor *win, int frames) {
    vdn_dev *d = Slin->dev;
    const char *OP = "vda_gather";
    if (op_cuda_enter(d, OP)) return -1;
    if (need(d, OP, "Slin", Slin, VDN_DT_BF16) || need(d, OP, "P", P, VDN_DT_F32) ||
        need(d, OP, "R", R, VDN_DT_F32) || need(d, OP, "S0", S0, VDN_DT_F32))
        return -1;
    if (!is_f32(alpha) || !contiguous(alpha) || win->dtype != VDN_DT_I32 || !contiguous(win))
        return vdn_dev_fail(d, "op %s: alpha packed fp32 and win packed I32 on cuda", OP);
    if (frames == 0) return 0;
    const int heads = (int)(vdn_tensor_rows(P) / ((int64_t)frames * D));
    OPK(vdn_k_vda_gather((const float *)P->data, (const float *)R->data,
                         S0 ? (const float *)S0->data : NULL, (const float *)alpha->data,
                         (const int *)win->data, frames, heads, Slin->data, vst(d)));
    return 0;
}

int readout(vdn_tensor *r, const vdn_tensor *Slin, const vdn_tensor *qt, int nmat) {
    vdn_dev *d = r->dev;
    const char *OP = "vda_readout";
    if (op_cuda_enter(d, OP)) return -1;
    if (need(d, OP, "r", r, VDN_DT_F32) || need(d, OP, "Slin", Slin, VDN_DT_BF16) ||
        need(d, OP, "qt", qt, VDN_DT_BF16))
        return -1;
    if (nmat == 0) return 0;
    const int S = (int)(vdn_tensor_rows(qt) / nmat);
    OPK(vdn_k_vda_readout(cdev(d)->cb, Slin->data, qt->data, nmat, S, (float *)r->data, vst(d)));
    return 0;
}

int epilogue(vdn_tensor *out, const vdn_tensor *r, const vdn_tensor *wn, double eps,
             const vdn_tensor *gpre, int frames, int heads) {
    vdn_dev *d = out->dev;
    const char *OP = "vda_epilogue";
    if (op_cuda_enter(d, OP)) return -1;
    if (need(d, OP, "r", r, VDN_DT_F32)) return -1;
    if (!is_bf16(out) || !is_bf16(gpre) || out->ld % 4 || gpre->ld % 4 ||
        (uintptr_t)out->data % 8 || (uintptr_t)gpre->data % 8)
        return vdn_dev_fail(d, "op %s: out and gpre must be bf16 rows 8-byte aligned on cuda", OP);
    const void *w = op_cuda_packed(d, wn, VDN_DT_BF16, SCR_W0);
    if (!w) return -1;
    if (frames == 0) return 0;
    const int S = (int)(vdn_tensor_rows(out) / frames);
    OPK(vdn_k_vda_epilogue((const float *)r->data, w, (float)eps, gpre->data, (int)gpre->ld, frames,
                           S, heads, out->data, (int)out->ld, vst(d)));
    return 0;
}

int frame_means(vdn_tensor *m, const vdn_tensor *x, int frames) {
    vdn_dev *d = m->dev;
    const char *OP = "frame_means";
    if (op_cuda_enter(d, OP)) return -1;
    if (!is_bf16(x) || !is_f32(m) || !contiguous(m) || x->ld % 8 || !aligned16(x->data) ||
        vdn_tensor_cols(x) % 8)
        return vdn_dev_fail(d,
                            "op %s: x bf16 (16-byte rows, width a multiple of 8) and m packed "
                            "fp32 on cuda",
                            OP);
    if (frames == 0) return 0;
    const int S = (int)(vdn_tensor_rows(x) / frames);
    OPK(vdn_k_frame_means(x->data, (int)x->ld, frames, S, (int)vdn_tensor_cols(x), (float *)m->data,
                          vst(d)));
    return 0;
}

int alpha_finish(vdn_tensor *alpha, const vdn_tensor *u, const vdn_tensor *dt_bias,
                 const vdn_tensor *A_log) {
    vdn_dev *d = alpha->dev;
    const char *OP = "alpha_finish";
    if (op_cuda_enter(d, OP)) return -1;
    if (!is_f32(alpha) || !contiguous(alpha) || !is_f32(u) || !contiguous(u))
        return vdn_dev_fail(d, "op %s: alpha and u packed fp32 on cuda", OP);
    const float *db = (const float *)op_cuda_packed(d, dt_bias, VDN_DT_F32, SCR_W0),
                *al = (const float *)op_cuda_packed(d, A_log, VDN_DT_F32, SCR_W0 + 1);
    if (!db || !al) return -1;
    const int F = (int)vdn_tensor_rows(u), C = (int)vdn_tensor_cols(u);
    if (F * C == 0) return 0;
    OPK(vdn_k_alpha_finish((const float *)u->data, db, al, F, C, (float *)alpha->data, vst(d)));
    return 0;
}

} // namespace

extern "C" const struct vdn_vda_backend op_cuda_vda = {
    VDN_DT_BF16, VDN_DT_F32, prep,     stats,       solve,       scans,
    gather,      readout,    epilogue, frame_means, alpha_finish};
