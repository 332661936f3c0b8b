/* The VDN linear branch of one DiT block over the VDA ops (op_vda.h; spec 5.3, paper section 3
 * and appendix A.4): features of the branch's frames from the fused projection, the decay alpha
 * from frame means, per-frame statistics and transitions, the text state, both scans, the
 * boundary gather with the alpha bridge, the readout with its norm and output gate, and
 * to_out_linear added into the block's output rows. */
#include "dit_internal.h"

#define OK(call)                                                                                   \
    do {                                                                                           \
        if ((call) != 0) return -1;                                                                \
    } while (0)

/* S0 = scale * B_text (I + A_text)^-1 over every prompt row, no conv (or the additive rule) */
static int text_state(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                      vdn_dit_buffers *buf) {
    const vdn_config *c = &w->cfg;
    const int64_t H = c->heads, C = H * c->head_dim, Lt = s->lay.n_text;
    vdn_tensor qkv = vdn_view_rows(buf->qkv, 0, Lt);
    vdn_tensor beta = vdn_view_cols(&qkv, w->col_beta, H);
    vdn_tensor k = vdn_view_cols(&qkv, C, C), v = vdn_view_cols(&qkv, 2 * C, C);
    OK(vdn_op_act(buf->beta_t, &beta, VDN_ACT_SIGMOID));
    OK(vdn_op_vda_prep(&buf->tfeats, &k, &v, NULL, NULL, buf->beta_t, 1, 1, (int)Lt, (int)H));
    OK(vdn_op_vda_stats(buf->At, buf->Bt, buf->tfeats.ks, buf->tfeats.kb, buf->tfeats.vt, (int)H));
    OK(vdn_op_vda_solve(NULL, buf->S0, buf->At, buf->Bt, NULL, s->plan.additive ? (int)Lt : 0));
    (void)b;
    return vdn_op_scale(buf->S0, c->text_state_scale);
}

int vdn_dit_vda_branch(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                       vdn_dit_buffers *buf) {
    const vdn_config *c = &w->cfg;
    const vdn_layout *L = &s->lay;
    const int H = c->heads, C = H * c->head_dim, S = L->tokens_per_frame;
    const int f0 = s->plan.skip_ends ? 1 : 0, Fp = L->frames - 2 * f0, nl = Fp * S;
    if (Fp <= 0) return 0; /* a clip of anchors only: no linear output */
    const int64_t row0 = (int64_t)L->video_start + (int64_t)f0 * S;
    vdn_tensor qkv = vdn_view_rows(buf->qkv, row0, nl);
    vdn_tensor q = vdn_view_cols(&qkv, 0, C), k = vdn_view_cols(&qkv, C, C),
               v = vdn_view_cols(&qkv, 2 * C, C);
    vdn_tensor beta = vdn_view_cols(&qkv, w->col_beta, H);
    vdn_tensor gate_down = vdn_view_cols(&qkv, w->col_gate_down, c->gate_rank);
    /* features: spatial + temporal short convs, SiLU, L2, beta, FHSD */
    OK(vdn_op_act(buf->beta, &beta, VDN_ACT_SIGMOID));
    const vdn_vda_conv conv = {b->k_sp, b->k_tm, b->v_sp, b->v_tm};
    OK(vdn_op_vda_prep(&buf->feats, &k, &v, &q, &conv, buf->beta, Fp, L->grid_h, L->grid_w, H));
    /* decay alpha_f = exp(-exp(A_log) softplus(W_up W_down m_f + dt_bias)), m_f the frame mean
     * of the modulated input */
    vdn_tensor hv = vdn_view_rows(buf->h, row0, nl);
    OK(vdn_op_frame_means(buf->means, &hv, Fp));
    OK(vdn_op_linear(buf->dvec, buf->means, b->alpha_down, NULL, VDN_ACT_NONE, 0));
    OK(vdn_op_linear(buf->uvec, buf->dvec, b->alpha_up, NULL, VDN_ACT_NONE, 0));
    OK(vdn_op_alpha_finish(buf->alpha, buf->uvec, b->dt_bias, b->A_log));
    /* per frame and head: statistics, then T = Diag(alpha)(I + A)^-1, J = B (I + A)^-1 */
    OK(vdn_op_vda_stats(buf->A, buf->B, buf->feats.ks, buf->feats.kb, buf->feats.vt, Fp * H));
    OK(vdn_op_vda_solve(buf->T, buf->J, buf->A, buf->B, buf->alpha, s->plan.additive ? S : 0));
    const vdn_tensor *S0 = NULL;
    if (c->text_state && L->n_text > 0) {
        OK(text_state(w, b, s, buf));
        S0 = buf->S0;
    }
    OK(vdn_op_vda_scans(buf->P, buf->R, buf->T, buf->J, S0, Fp));
    OK(vdn_op_vda_gather(buf->Slin, buf->P, buf->R, S0, buf->alpha, s->vda_win, Fp));
    OK(vdn_op_vda_readout(buf->r, buf->Slin, buf->feats.qt, Fp * H));
    /* output gate sigmoid(W_gup (W_gdown x) + b), RMSNorm of the readout, to_out_linear */
    OK(vdn_op_linear(buf->gpre, &gate_down, b->gate_up, b->gate_up_b, VDN_ACT_NONE, 0));
    OK(vdn_op_vda_epilogue(buf->lin, buf->r, b->lin_norm, c->linear_norm_eps, buf->gpre, Fp, H));
    vdn_tensor yv = vdn_view_rows(buf->y, row0, nl);
    return vdn_op_linear(&yv, buf->lin, b->to_out_linear, NULL, VDN_ACT_NONE, 1);
}
