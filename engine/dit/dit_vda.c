/* The VDN linear branch of one DiT block over the VDA ops (op_vda.h; spec 5.3, paper section 3
 * and appendix A.4): features of the branch's frames from the fused projection, the decay alpha
 * from frame means, per-frame statistics and transitions, the text state, both scans, the
 * boundary gather with the alpha bridge, the readout with its norm and output gate, and
 * to_out_linear added into the block's output rows. */
#include <stdlib.h>
#include <string.h>

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
    OK(vdn_op_linear(buf->dvec, buf->means, b->alpha_down, NULL, VDN_ACT_NONE, 0));
    OK(vdn_op_linear(buf->uvec, buf->dvec, b->alpha_up, NULL, VDN_ACT_NONE, 0));
    return vdn_op_alpha_finish(buf->alpha, buf->uvec, b->dt_bias, b->A_log);
}

/* heads [h0, h0 + g) of the branch into buf->lin ([nl, g hd]): their output-gate pre-activation,
 * decay, features, states and readout (the same per-head arithmetic as all heads at once) */
static int branch_heads(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                        vdn_dit_buffers *buf, const vdn_tensor *qkv, int h0, int g) {
    const vdn_config *c = &w->cfg;
    const vdn_layout *L = &s->lay;
    const int64_t C = (int64_t)c->heads * c->head_dim, c0 = (int64_t)h0 * c->head_dim,
                  nc = (int64_t)g * c->head_dim;
    vdn_tensor gate_down = vdn_view_cols(qkv, w->col_gate_down, c->gate_rank);
    vdn_tensor gw = vdn_dit_outer_slice(b->gate_up, c0, nc),
               gb = vdn_view_cols(b->gate_up_b, c0, nc);
    OK(vdn_op_linear(buf->gpre, &gate_down, &gw, &gb, VDN_ACT_NONE, 0));
    const vdn_tensor *alpha = buf->alpha;
    if (g < c->heads) { /* the state ops read a group's decay as one contiguous matrix */
        vdn_tensor a = vdn_view_cols(buf->alpha, c0, nc);
        OK(vdn_tensor_copy(buf->alpha_g, &a));
        alpha = buf->alpha_g;
    }
    vdn_dit_vda_in in = {.heads = g, .head0 = h0, .alpha = alpha, .lin = buf->lin};
    in.q = vdn_view_cols(qkv, c0, nc), in.k = vdn_view_cols(qkv, C + c0, nc);
    in.v = vdn_view_cols(qkv, 2 * C + c0, nc),
    in.beta_pre = vdn_view_cols(qkv, w->col_beta + h0, g);
    in.gpre = *buf->gpre;
    if (c->text_state && L->n_text > 0) {
        vdn_tensor tq = vdn_view_rows(buf->qkv, 0, L->n_text);
        in.tk = vdn_view_cols(&tq, C + c0, nc), in.tv = vdn_view_cols(&tq, 2 * C + c0, nc);
        in.tbeta_pre = vdn_view_cols(&tq, w->col_beta + h0, g);
    }
    return vdn_dit_vda_core(w, b, s, buf, &in);
}

/* the branch's group size: every head at once, or buf->vda_heads per pass */
static int group_heads(const vdn_dit_buffers *buf, int H) {
    return buf->vda_heads > 0 && buf->vda_heads < H ? buf->vda_heads : H;
}

int vdn_dit_vda_lin(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                    vdn_dit_buffers *buf) {
    const vdn_config *c = &w->cfg;
    const vdn_layout *L = &s->lay;
    const int H = c->heads, S = L->tokens_per_frame;
    const int f0 = s->plan.skip_ends ? 1 : 0, Fp = L->frames - 2 * f0, nl = Fp * S;
    if (Fp <= 0) return 0; /* a clip of anchors only: no linear output */
    const int64_t row0 = (int64_t)L->video_start + (int64_t)f0 * S;
    vdn_tensor qkv = vdn_view_rows(buf->qkv, row0, nl);
    vdn_tensor hv = vdn_view_rows(buf->h, row0, nl);
    OK(vdn_dit_vda_alpha(b, buf, &hv, Fp));
    const int G = group_heads(buf, H);
    for (int h0 = 0; h0 < H; h0 += G) { /* G divides H */
        OK(branch_heads(w, b, s, buf, &qkv, h0, G));
        if (G < H) {
            vdn_tensor dst =
                vdn_view_cols(buf->lin_all, (int64_t)h0 * c->head_dim, (int64_t)G * c->head_dim);
            OK(vdn_tensor_copy(&dst, buf->lin));
        }
    }
    return 0;
}

int vdn_dit_vda_out(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                    vdn_dit_buffers *buf) {
    const vdn_layout *L = &s->lay;
    const int S = L->tokens_per_frame;
    const int f0 = s->plan.skip_ends ? 1 : 0, Fp = L->frames - 2 * f0, nl = Fp * S;
    if (Fp <= 0) return 0;
    const int64_t row0 = (int64_t)L->video_start + (int64_t)f0 * S;
    vdn_tensor yv = vdn_view_rows(buf->y, row0, nl);
    const int whole = group_heads(buf, w->cfg.heads) == w->cfg.heads;
    return vdn_op_linear(&yv, whole ? buf->lin : buf->lin_all, b->to_out_linear, NULL, VDN_ACT_NONE,
                         1);
}

int vdn_dit_vda_branch(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                       vdn_dit_buffers *buf) {
    OK(vdn_dit_vda_lin(w, b, s, buf));
    return vdn_dit_vda_out(w, b, s, buf);
}

int vdn_dit_vda_side(void) {
    const char *e = getenv("VDN_VDA_STREAM");
    return !(e && strcmp(e, "0") == 0);
}
