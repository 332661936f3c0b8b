/* Front end of the VDA ops (op_vda.h): shape and dtype checks, then the device's VDA table. */
#include "op_vda.h"
#include "op_check.h"
#include "op_profile.h"

#define VDA_TABLE(d, op)                                                                           \
    const struct vdn_vda_backend *vt_ = (d)->be->vda;                                              \
    if (vdn_chk_family(d, op, vt_)) return -1

vdn_dtype vdn_vda_feat_dtype(const vdn_dev *d) {
    return d->be->vda ? d->be->vda->feat_dtype : VDN_DT_F32;
}
vdn_dtype vdn_vda_state_dtype(const vdn_dev *d) {
    return d->be->vda ? d->be->vda->state_dtype : VDN_DT_F32;
}

/* a float tensor of 2-D shape [rows, cols] */
static int chk(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t, int64_t rows,
               int64_t cols) {
    return vdn_chk_float(d, op, name, t) || vdn_chk_2d(d, op, name, t, rows, cols) ? -1 : 0;
}

/* hd of per-matrix tensors [nmat hd, hd] */
static int mat_hd(vdn_dev *d, const char *op, const char *name, const vdn_tensor *t, int nmat,
                  int64_t *hd) {
    if (vdn_chk_float(d, op, name, t)) return -1;
    *hd = vdn_tensor_cols(t);
    return vdn_chk_2d(d, op, name, t, nmat * *hd, *hd);
}

int vdn_op_vda_prep(const vdn_vda_feats *o, const vdn_tensor *k, const vdn_tensor *v,
                    const vdn_tensor *q, const vdn_vda_conv *conv, const vdn_tensor *beta,
                    int frames, int gh, int gw, int heads) {
    if (!o || !o->ks || !k) return -1;
    vdn_dev *d = o->ks->dev;
    const char *op = "vda_prep";
    VDA_TABLE(d, op);
    if (frames < 1 || gh < 1 || gw < 1 || heads < 1)
        return vdn_dev_fail(d, "op vda_prep: %d frames of %d x %d tokens, %d heads (all >= 1)",
                            frames, gh, gw, heads);
    const int64_t S = (int64_t)gh * gw, rows = frames * S, C = vdn_tensor_cols(k);
    if (vdn_chk_float(d, op, "k", k) || vdn_chk_2d(d, op, "k", k, rows, C) ||
        chk(d, op, "v", v, rows, C) || (q && chk(d, op, "q", q, rows, C)))
        return -1;
    if (C % heads)
        return vdn_dev_fail(d, "op vda_prep: %d heads do not divide %lld channels", heads,
                            (long long)C);
    const int64_t hd = C / heads, fhs = (int64_t)frames * heads * S;
    if (vdn_chk_dtype(d, op, "beta", beta, VDN_DT_F32) ||
        vdn_chk_2d(d, op, "beta", beta, rows, heads))
        return -1;
    if (chk(d, op, "ks", o->ks, fhs, hd) || chk(d, op, "kb", o->kb, fhs, hd) ||
        chk(d, op, "vt", o->vt, fhs, hd) || (o->qt && chk(d, op, "qt", o->qt, fhs, hd)))
        return -1;
    if (!o->qt != !q) return vdn_dev_fail(d, "op vda_prep: q and qt go together");
    if (conv && (conv->k_sp || conv->k_tm || conv->v_sp || conv->v_tm)) {
        if (!conv->k_sp || !conv->k_tm || !conv->v_sp || !conv->v_tm)
            return vdn_dev_fail(d, "op vda_prep: the four conv weights go together");
        int64_t taps = vdn_tensor_cols(conv->k_sp), kt = vdn_tensor_cols(conv->k_tm);
        int64_t ks = 1;
        while (ks * ks < taps)
            ks++;
        if (ks * ks != taps || ks % 2 == 0 || kt % 2 == 0)
            return vdn_dev_fail(d,
                                "op vda_prep: conv taps %lld spatial / %lld temporal, expected "
                                "an odd square and an odd count",
                                (long long)taps, (long long)kt);
        if (chk(d, op, "conv.k_sp", conv->k_sp, C, taps) ||
            chk(d, op, "conv.v_sp", conv->v_sp, C, taps) ||
            chk(d, op, "conv.k_tm", conv->k_tm, C, kt) ||
            chk(d, op, "conv.v_tm", conv->v_tm, C, kt))
            return -1;
    }
    return VDN_PROF(d, "vda_prep", NULL, NULL, 0,
                    vt_->prep(o, k, v, q, conv, beta, frames, gh, gw, heads));
}

int vdn_op_vda_stats(vdn_tensor *A, vdn_tensor *B, const vdn_tensor *ks, const vdn_tensor *kb,
                     const vdn_tensor *vt, int nmat) {
    if (!A) return -1;
    vdn_dev *d = A->dev;
    const char *op = "vda_stats";
    VDA_TABLE(d, op);
    int64_t hd;
    if (nmat < 1) return vdn_dev_fail(d, "op vda_stats: %d matrices, expected >= 1", nmat);
    if (mat_hd(d, op, "A", A, nmat, &hd) || chk(d, op, "B", B, nmat * hd, hd) ||
        vdn_chk_float(d, op, "ks", ks))
        return -1;
    const int64_t rows = vdn_tensor_rows(ks);
    if (rows % nmat)
        return vdn_dev_fail(d, "op vda_stats: ks has %lld rows, not a multiple of %d matrices",
                            (long long)rows, nmat);
    if (chk(d, op, "ks", ks, rows, hd) || chk(d, op, "kb", kb, rows, hd) ||
        chk(d, op, "vt", vt, rows, hd))
        return -1;
    return VDN_PROF(d, "vda_stats", NULL, NULL, 0, vt_->stats(A, B, ks, kb, vt, nmat));
}

int vdn_op_vda_solve(vdn_tensor *T, vdn_tensor *J, const vdn_tensor *A, const vdn_tensor *B,
                     const vdn_tensor *alpha, int additive_S) {
    if (!J) return -1;
    vdn_dev *d = J->dev;
    const char *op = "vda_solve";
    VDA_TABLE(d, op);
    if (vdn_chk_float(d, op, "A", A)) return -1;
    const int64_t hd = vdn_tensor_cols(A), rows = vdn_tensor_rows(A);
    if (rows % hd)
        return vdn_dev_fail(d, "op vda_solve: A has %lld rows, not a multiple of hd %lld",
                            (long long)rows, (long long)hd);
    const int64_t nmat = rows / hd;
    if (chk(d, op, "B", B, rows, hd) || chk(d, op, "J", J, rows, hd) ||
        (T && chk(d, op, "T", T, rows, hd)) || (alpha && vdn_chk_float(d, op, "alpha", alpha)))
        return -1;
    if (alpha && (vdn_tensor_numel(alpha) != nmat * hd ||
                  (vdn_tensor_rows(alpha) > 1 && alpha->ld != vdn_tensor_cols(alpha)))) {
        char b[96];
        return vdn_dev_fail(d,
                            "op vda_solve: alpha is %s, expected %lld x %lld contiguous values "
                            "([F, C] or [nmat, hd])",
                            vdn_tensor_desc(alpha, b, sizeof b), (long long)nmat, (long long)hd);
    }
    if (additive_S < 0)
        return vdn_dev_fail(d, "op vda_solve: additive_S %d, expected 0 (solve) or S > 0",
                            additive_S);
    return VDN_PROF(d, "vda_solve", NULL, NULL, 0, vt_->solve(T, J, A, B, alpha, additive_S));
}

int vdn_op_vda_scans(vdn_tensor *P, vdn_tensor *R, const vdn_tensor *T, const vdn_tensor *J,
                     const vdn_tensor *S0, int frames) {
    if (!P) return -1;
    vdn_dev *d = P->dev;
    const char *op = "vda_scans";
    VDA_TABLE(d, op);
    if (frames < 1) return vdn_dev_fail(d, "op vda_scans: %d frames, expected >= 1", frames);
    if (vdn_chk_float(d, op, "P", P)) return -1;
    const int64_t hd = vdn_tensor_cols(P), rows = vdn_tensor_rows(P);
    if (rows % (frames * hd))
        return vdn_dev_fail(d, "op vda_scans: P has %lld rows, not frames %d x heads x hd %lld",
                            (long long)rows, frames, (long long)hd);
    if (chk(d, op, "T", T, rows, hd) || chk(d, op, "J", J, rows, hd) ||
        (R && chk(d, op, "R", R, rows, hd)) || (S0 && chk(d, op, "S0", S0, rows / frames, hd)))
        return -1;
    return VDN_PROF(d, "vda_scans", NULL, NULL, 0, vt_->scans(P, R, T, J, S0, frames));
}

int vdn_op_vda_gather(vdn_tensor *Slin, const vdn_tensor *P, const vdn_tensor *R,
                      const vdn_tensor *S0, const vdn_tensor *alpha, const vdn_tensor *win,
                      int frames) {
    if (!Slin) return -1;
    vdn_dev *d = Slin->dev;
    const char *op = "vda_gather";
    VDA_TABLE(d, op);
    if (frames < 1) return vdn_dev_fail(d, "op vda_gather: %d frames, expected >= 1", frames);
    if (vdn_chk_float(d, op, "Slin", Slin)) return -1;
    const int64_t hd = vdn_tensor_cols(Slin), rows = vdn_tensor_rows(Slin);
    if (rows % (frames * hd))
        return vdn_dev_fail(d, "op vda_gather: Slin has %lld rows, not frames %d x heads x hd %lld",
                            (long long)rows, frames, (long long)hd);
    const int64_t heads = rows / (frames * hd);
    if (chk(d, op, "P", P, rows, hd) || chk(d, op, "R", R, rows, hd) ||
        (S0 && chk(d, op, "S0", S0, heads * hd, hd)) ||
        chk(d, op, "alpha", alpha, frames, heads * hd) ||
        vdn_chk_dtype(d, op, "win", win, VDN_DT_I32) || vdn_chk_2d(d, op, "win", win, frames, 2))
        return -1;
    if (win->ld != 2) return vdn_dev_fail(d, "op vda_gather: win must be contiguous [F, 2]");
    return VDN_PROF(d, "vda_gather", NULL, NULL, 0,
                    vt_->gather(Slin, P, R, S0, alpha, win, frames));
}

int vdn_op_vda_readout(vdn_tensor *r, const vdn_tensor *Slin, const vdn_tensor *qt, int nmat) {
    if (!r) return -1;
    vdn_dev *d = r->dev;
    const char *op = "vda_readout";
    VDA_TABLE(d, op);
    int64_t hd;
    if (nmat < 1) return vdn_dev_fail(d, "op vda_readout: %d matrices, expected >= 1", nmat);
    if (mat_hd(d, op, "Slin", Slin, nmat, &hd) || vdn_chk_float(d, op, "qt", qt)) return -1;
    const int64_t rows = vdn_tensor_rows(qt);
    if (rows % nmat)
        return vdn_dev_fail(d, "op vda_readout: qt has %lld rows, not a multiple of %d matrices",
                            (long long)rows, nmat);
    if (chk(d, op, "qt", qt, rows, hd) || chk(d, op, "r", r, rows, hd)) return -1;
    return VDN_PROF(d, "vda_readout", NULL, NULL, 0, vt_->readout(r, Slin, qt, nmat));
}

int vdn_op_vda_epilogue(vdn_tensor *out, const vdn_tensor *r, const vdn_tensor *wn, double eps,
                        const vdn_tensor *gpre, int frames, int heads) {
    if (!out) return -1;
    vdn_dev *d = out->dev;
    const char *op = "vda_epilogue";
    VDA_TABLE(d, op);
    if (frames < 1 || heads < 1)
        return vdn_dev_fail(d, "op vda_epilogue: %d frames, %d heads (>= 1)", frames, heads);
    if (vdn_chk_float(d, op, "out", out) || vdn_chk_float(d, op, "r", r)) return -1;
    const int64_t hd = vdn_tensor_cols(r), rows = vdn_tensor_rows(out);
    if (rows % frames)
        return vdn_dev_fail(d, "op vda_epilogue: out has %lld rows, not a multiple of %d frames",
                            (long long)rows, frames);
    if (chk(d, op, "out", out, rows, heads * hd) || chk(d, op, "r", r, rows * heads, hd) ||
        chk(d, op, "gpre", gpre, rows, heads * hd) || chk(d, op, "wn", wn, 1, hd))
        return -1;
    if (!(eps > 0)) return vdn_dev_fail(d, "op vda_epilogue: eps %g, expected > 0", eps);
    return VDN_PROF(d, "vda_epilogue", NULL, NULL, 0,
                    vt_->epilogue(out, r, wn, eps, gpre, frames, heads));
}

int vdn_op_frame_means(vdn_tensor *m, const vdn_tensor *x, int frames) {
    if (!m) return -1;
    vdn_dev *d = m->dev;
    const char *op = "frame_means";
    VDA_TABLE(d, op);
    if (frames < 1) return vdn_dev_fail(d, "op frame_means: %d frames, expected >= 1", frames);
    if (vdn_chk_dtype(d, op, "m", m, VDN_DT_F32) || vdn_chk_float(d, op, "x", x)) return -1;
    const int64_t rows = vdn_tensor_rows(x), hid = vdn_tensor_cols(x);
    if (rows % frames)
        return vdn_dev_fail(d, "op frame_means: x has %lld rows, not a multiple of %d frames",
                            (long long)rows, frames);
    if (vdn_chk_2d(d, op, "m", m, frames, hid)) return -1;
    return VDN_PROF(d, "vda_frame_means", NULL, NULL, 0, vt_->frame_means(m, x, frames));
}

int vdn_op_alpha_finish(vdn_tensor *alpha, const vdn_tensor *u, const vdn_tensor *dt_bias,
                        const vdn_tensor *A_log) {
    if (!alpha) return -1;
    vdn_dev *d = alpha->dev;
    const char *op = "alpha_finish";
    VDA_TABLE(d, op);
    if (vdn_chk_float(d, op, "alpha", alpha) || vdn_chk_dtype(d, op, "u", u, VDN_DT_F32) ||
        vdn_chk_float(d, op, "A_log", A_log))
        return -1;
    const int64_t F = vdn_tensor_rows(alpha), C = vdn_tensor_cols(alpha);
    const int64_t H = vdn_tensor_numel(A_log);
    if (H < 1 || C % H || vdn_tensor_rows(A_log) != 1)
        return vdn_dev_fail(d,
                            "op alpha_finish: A_log has %lld values, expected one per head "
                            "dividing %lld channels",
                            (long long)H, (long long)C);
    if (chk(d, op, "u", u, F, C) || chk(d, op, "dt_bias", dt_bias, 1, C)) return -1;
    return VDN_PROF(d, "vda_alpha_finish", NULL, NULL, 0,
                    vt_->alpha_finish(alpha, u, dt_bias, A_log));
}
