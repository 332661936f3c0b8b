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

vdn_tensor vdn_dit_outer_slice(const vdn_tensor *t, int64_t i0, int64_t n) {
    vdn_tensor v = *t;
    const int64_t per = vdn_tensor_numel(t) / t->ne[0]; /* contiguous weights */
    v.data = (char *)t->data + (size_t)(i0 * per) * vdn_dtype_size(t->dtype);
    v.ne[0] = n;
    v.scale = t->scale ? t->scale + i0 : NULL;
    v.owned = 0;
    return v;
}

/* S0 = scale * B_text (I + A_text)^-1 over every prompt row, no conv (or the additive rule) */
static int text_state(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_dit_buffers *buf,
                      const vdn_dit_vda_in *in) {
    const int H = in->heads, Lt = s->lay.n_text;
    OK(vdn_op_act(buf->beta_t, &in->tbeta_pre, VDN_ACT_SIGMOID));
    OK(vdn_op_vda_prep(&buf->tfeats, &in->tk, &in->tv, NULL, NULL, buf->beta_t, 1, 1, Lt, H));
    OK(vdn_op_vda_stats(buf->At, buf->Bt, buf->tfeats.ks, buf->tfeats.kb, buf->tfeats.vt, H));
    OK(vdn_op_vda_solve(NULL, buf->S0, buf->At, buf->Bt, NULL, s->plan.additive ? Lt : 0));
    return vdn_op_scale(buf->S0, w->cfg.text_state_scale);
}

int vdn_dit_vda_core(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                     vdn_dit_buffers *buf, const vdn_dit_vda_in *in) {
    const vdn_config *c = &w->cfg;
    const vdn_layout *L = &s->lay;
    const int H = in->heads, S = L->tokens_per_frame, hd = c->head_dim;
    const int f0 = s->plan.skip_ends ? 1 : 0, Fp = L->frames - 2 * f0;
    /* features: spatial + temporal short convs (this range's channels), SiLU, L2, beta, FHSD */
    OK(vdn_op_act(buf->beta, &in->beta_pre, VDN_ACT_SIGMOID));
    const int64_t ch0 = (int64_t)in->head0 * hd, nch = (int64_t)H * hd;
    vdn_tensor ksp = vdn_dit_outer_slice(b->k_sp, ch0, nch),
               ktm = vdn_dit_outer_slice(b->k_tm, ch0, nch),
               vsp = vdn_dit_outer_slice(b->v_sp, ch0, nch),
               vtm = vdn_dit_outer_slice(b->v_tm, ch0, nch);
    const vdn_vda_conv conv = {&ksp, &ktm, &vsp, &vtm};
    OK(vdn_op_vda_prep(&buf->feats, &in->k, &in->v, &in->q, &conv, buf->beta, Fp, L->grid_h,
                       L->grid_w, H));
    /* per frame and head: statistics, then T = Diag(alpha)(I + A)^-1, J = B (I + A)^-1 */
    OK(vdn_op_vda_stats(buf->A, buf->B, buf->feats.ks, buf->feats.kb, buf->feats.vt, Fp * H));
    OK(vdn_op_vda_solve(buf->T, buf->J, buf->A, buf->B, in->alpha, s->plan.additive ? S : 0));
    const vdn_tensor *S0 = NULL;
    if (c->text_state && L->n_text > 0) {
        OK(text_state(w, s, buf, in));
        S0 = buf->S0;
    }
    OK(vdn_op_vda_scans(buf->P, buf->R, buf->T, buf->J, S0, Fp));
    OK(vdn_op_vda_gather(buf->Slin, buf->P, buf->R, S0, in->alpha, s->vda_win, Fp));
    OK(vdn_op_vda_readout(buf->r, buf->Slin, buf->feats.qt, Fp * H));
    /* RMSNorm of the readout per head, times the output gate sigmoid(gpre) */
    return vdn_op_vda_epilogue(in->lin, buf->r, b->lin_norm, c->linear_norm_eps, &in->gpre, Fp, H);
}

/* the decay alpha_f = exp(-exp(A_log) softplus(W_up W_down m_f + dt_bias)) of every head, m_f the
 * frame mean of the modulated input hv (the branch's rows) */
int vdn_dit_vda_alpha(const vdn_dit_block *b, vdn_dit_buffers *buf, const vdn_tensor *hv,
                      int frames) {
    OK(vdn_op_frame_means(buf->means, hv, frames));
    return vdn_dit_vda_decay(b, buf);
}

int vdn_dit_vda_decay(const vdn_dit_block *b, vdn_dit_buffers *buf) {
    OK(vdn_op_linear(buf->dvec, buf->means, b->alpha_down, NULL, VDN_ACT_NONE, 0));
    OK(vdn_op_linear(buf->uvec, buf->dvec, b->alpha_up, NULL, VDN_ACT_NONE, 0));
    return vdn_op_alpha_finish(buf->alpha, buf->uvec, b->dt_bias, b->A_log);
}

int vdn_dit_branch_frames(const vdn_dit_seq *s, int64_t *row0) {
    const int f0 = s->plan.skip_ends ? 1 : 0, Fp = s->lay.frames - 2 * f0;
    *row0 = (int64_t)s->lay.video_start + (int64_t)f0 * s->lay.tokens_per_frame;
    return Fp > 0 ? Fp : 0;
}

/* where the branch of this rank's heads leaves its output, [nl, nc]: the head-sharded rows (P >
 * 1), or one pass's output, or with several passes their gathered outputs (P = 1) */
static vdn_tensor branch_lin(const vdn_dit_buffers *buf, int64_t row0, int64_t nl) {
    if (buf->comm) {
        vdn_tensor lin = vdn_dit_narrow_cols(buf->LinH, buf->nc);
        return vdn_view_rows(&lin, row0, nl);
    }
    return vdn_dit_narrow_rows(buf->vda_heads < buf->nh ? buf->lin_all : buf->lin, nl);
}

/* heads [g0, g0 + g) of this rank's (model heads h0 + g0 ..) of the branch into *lin ([nl, g hd]):
 * their output-gate pre-activation, decay, features, states and readout (the same per-head
 * arithmetic as all heads at once) */
static int branch_heads(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                        vdn_dit_buffers *buf, const vdn_dit_heads *hv, int g0, int g,
                        vdn_tensor *lin) {
    const vdn_config *c = &w->cfg;
    const vdn_layout *L = &s->lay;
    int64_t row0;
    const int Fp = vdn_dit_branch_frames(s, &row0), head0 = (int)buf->h0 + g0;
    const int64_t nl = (int64_t)Fp * L->tokens_per_frame, hd = c->head_dim;
    const int64_t c0 = head0 * hd, cc = g0 * hd, nc = g * hd; /* model / own channels */
    vdn_tensor gdv = vdn_view_rows(&hv->gd, row0, nl);
    vdn_tensor gw = vdn_dit_outer_slice(b->gate_up, c0, nc),
               gb = vdn_view_cols(b->gate_up_b, c0, nc);
    OK(vdn_op_linear(buf->gpre, &gdv, &gw, &gb, VDN_ACT_NONE, 0));
    const vdn_tensor *alpha = buf->alpha;
    if (g < c->heads) { /* the state ops read a pass's decay as one contiguous matrix */
        vdn_tensor a = vdn_view_cols(buf->alpha, c0, nc);
        OK(vdn_tensor_copy(buf->alpha_g, &a));
        alpha = buf->alpha_g;
    }
    vdn_dit_vda_in in = {.heads = g, .head0 = head0, .alpha = alpha, .lin = lin};
    vdn_tensor q = vdn_view_cols(&hv->qraw, cc, nc), k = vdn_view_cols(&hv->kraw, cc, nc),
               v = vdn_view_cols(&hv->v, cc, nc), beta = vdn_view_cols(&hv->beta, g0, g);
    in.q = vdn_view_rows(&q, row0, nl), in.k = vdn_view_rows(&k, row0, nl);
    in.v = vdn_view_rows(&v, row0, nl), in.beta_pre = vdn_view_rows(&beta, row0, nl);
    in.gpre = *buf->gpre;
    if (c->text_state && L->n_text > 0) {
        in.tk = vdn_view_rows(&k, 0, L->n_text), in.tv = vdn_view_rows(&v, 0, L->n_text);
        in.tbeta_pre = vdn_view_rows(&beta, 0, L->n_text);
    }
    return vdn_dit_vda_core(w, b, s, buf, &in);
}

int vdn_dit_branch(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                   vdn_dit_buffers *buf, const vdn_dit_heads *hv) {
    int64_t row0;
    const int Fp = vdn_dit_branch_frames(s, &row0), G = buf->vda_heads, nh = (int)buf->nh;
    const int64_t nl = (int64_t)Fp * s->lay.tokens_per_frame, hd = w->cfg.head_dim;
    if (Fp == 0 || nh == 0) return 0; /* a clip of anchors only; a rank without heads */
    if (!buf->comm) { /* P > 1: made from the all-reduced frame sums (vdn_dit_heads_in) */
        vdn_tensor hrows = vdn_view_rows(&hv->h, row0, nl);
        OK(vdn_dit_vda_alpha(b, buf, &hrows, Fp));
    }
    vdn_tensor out = branch_lin(buf, row0, nl);
    for (int g0 = 0; g0 < nh; g0 += G) { /* G divides nh */
        OK(branch_heads(w, b, s, buf, hv, g0, G, G < nh ? buf->lin : &out));
        if (G < nh) {
            vdn_tensor dst = vdn_view_cols(&out, g0 * hd, G * hd);
            OK(vdn_tensor_copy(&dst, buf->lin));
        }
    }
    return 0;
}

/* the rows of the branch this rank owns, [*i0, *i1) (empty: i1 <= i0); F' */
static int own_rows(const vdn_dit_buffers *buf, const vdn_dit_seq *s, int64_t *row0, int64_t *nl,
                    int64_t *i0, int64_t *i1) {
    const int Fp = vdn_dit_branch_frames(s, row0);
    const int64_t r0 = buf->r0, nr = buf->nr;
    *nl = (int64_t)Fp * s->lay.tokens_per_frame;
    *i0 = *row0 > r0 ? *row0 : r0, *i1 = *row0 + *nl < r0 + nr ? *row0 + *nl : r0 + nr;
    return Fp;
}

int vdn_dit_branch_back(const vdn_dit_seq *s, vdn_dit_buffers *buf) {
    int64_t row0, nl, i0, i1;
    if (own_rows(buf, s, &row0, &nl, &i0, &i1) == 0) return 0;
    vdn_split brows = buf->rows; /* each rank's rows clamped to the branch's */
    for (int q = 0; q <= brows.parts; q++) {
        const int64_t o = brows.off[q];
        brows.off[q] = (o < row0 ? row0 : o > row0 + nl ? row0 + nl : o) - row0;
    }
    vdn_tensor all = vdn_dit_narrow_cols(buf->LinH, buf->nc);
    vdn_tensor lin = vdn_view_rows(&all, row0, nl),
               dst = vdn_dit_narrow_rows(buf->kr, i1 > i0 ? i1 - i0 : 0);
    return vdn_op_cols_to_rows(buf->comm, &dst, &lin, &brows, &buf->chans);
}

int vdn_dit_branch_out(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                       vdn_dit_buffers *buf, vdn_tensor *y) {
    (void)w;
    int64_t row0, nl, i0, i1;
    if (own_rows(buf, s, &row0, &nl, &i0, &i1) == 0 || i1 <= i0) return 0;
    /* P = 1: the branch's output from row0; P > 1: own rows of it, brought back into kr */
    vdn_tensor src = buf->comm ? vdn_dit_narrow_rows(buf->kr, i1 - i0) : branch_lin(buf, row0, nl);
    const int64_t base = buf->comm ? i0 : row0;
    vdn_tensor yv = vdn_view_rows(y, i0 - buf->r0, i1 - i0),
               lv = vdn_view_rows(&src, i0 - base, i1 - i0);
    return vdn_op_linear(&yv, &lv, b->to_out_linear, NULL, VDN_ACT_NONE, 1);
}

int vdn_dit_vda_branch(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                       vdn_dit_buffers *buf) {
    vdn_tensor qkv = vdn_view_cols(buf->qkv, 0, w->ldq);
    vdn_dit_heads hv;
    vdn_dit_heads_views(w, buf, buf->h, &qkv, &hv);
    OK(vdn_dit_branch(w, b, s, buf, &hv));
    return vdn_dit_branch_out(w, b, s, buf, buf->y);
}
