/* The DiT forward over the op layer (dit.h; spec 2-5): embeddings, the token refiner, the time
 * embedding, adaLN blocks with dense or windowed attention and the softmax gate, the VDN linear
 * branch (dit_vda.c), the final layer and the output heads. One code path for every backend;
 * each stage is a handful of ops on device tensors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dit_internal.h"
#include "vdn_util.h"

#define OK(call)                                                                                   \
    do {                                                                                           \
        if ((call) != 0) return -1;                                                                \
    } while (0)

/* ---- buffers ---- */

vdn_tensor *vdn_dit_own(vdn_dit_buffers *b, vdn_dtype dt, int64_t rows, int64_t cols, int *fail) {
    if (*fail) return NULL;
    vdn_tensor *t = vdn_tensor_new2(b->dev, dt, rows, cols);
    if (!t) {
        *fail = 1;
        return NULL;
    }
    b->owned = realloc(b->owned, sizeof(vdn_tensor *) * (size_t)(b->n_owned + 1));
    VDN_ASSERT(b->owned);
    return b->owned[b->n_owned++] = t;
}

/* heads of the linear branch per pass on one rank: the largest divisor of the head count up to
 * want (vdn_dit_opts.vda_heads, 0: DIT_VDA_HEADS) */
static int vda_group_heads(int heads, int want) {
    if (want <= 0) want = DIT_VDA_HEADS;
    int g = 1;
    for (int d = 1; d <= heads && d <= want; d++)
        if (heads % d == 0) g = d;
    return g;
}

/* one rank's passes: the groups' outputs side by side, and one group's decay */
static int group_buffers(vdn_dit_buffers *b, const vdn_dit_weights *w, const vdn_dit_seq *s) {
    const vdn_config *c = &w->cfg;
    int64_t row0;
    const int Fp = vdn_dit_branch_frames(s, &row0);
    const int64_t nl = (int64_t)Fp * s->lay.tokens_per_frame, hd = c->head_dim;
    int fail = 0;
    if (Fp > 0) {
        b->lin_all = vdn_dit_own(b, vdn_dev_act_dtype(w->dev), nl, (int64_t)c->heads * hd, &fail);
        b->alpha_g = vdn_dit_own(b, vdn_vda_state_dtype(w->dev), Fp, b->vda_heads * hd, &fail);
    }
    return fail ? -1 : 0;
}

/* this rank's rows and heads of P (comm NULL: one rank, everything) */
static void split(vdn_dit_buffers *b, const vdn_dit_weights *w, const vdn_dit_seq *s,
                  vdn_comm *comm) {
    const int P = comm ? comm->size : 1, me = comm ? comm->rank : 0;
    b->comm = comm;
    vdn_split_rows(&b->rows, s->lay.n_rows, P);
    vdn_split_heads(&b->heads, w->cfg.heads, P);
    b->chans = b->heads;
    for (int r = 0; r <= P; r++)
        b->chans.off[r] *= w->cfg.head_dim;
    b->r0 = b->rows.off[me], b->nr = vdn_split_len(&b->rows, me);
    b->h0 = b->heads.off[me], b->nh = vdn_split_len(&b->heads, me);
    b->c0 = b->chans.off[me], b->nc = vdn_split_len(&b->chans, me);
}

vdn_dit_buffers *vdn_dit_buffers_new(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_comm *comm,
                                     const vdn_dit_opts *opts) {
    const vdn_dit_opts none = {0};
    const vdn_config *c = &w->cfg;
    if (!opts) opts = &none;
    if (comm && comm->dev != w->dev) {
        vdn_dev_fail(w->dev, "dit: rank %d's communicator is on %s, expected its weights' %s",
                     comm->rank, vdn_dev_name(comm->dev), vdn_dev_name(w->dev));
        return NULL;
    }
    vdn_dit_buffers at = {0};
    split(&at, w, s, comm);
    const int P = at.rows.parts;
    if (vdn_split_len(&at.rows, P - 1) < 1) { /* the same on every rank: no collective is pending */
        vdn_dev_fail(w->dev,
                     "dit: %d rows cannot be sharded over %d ranks (ceil(S/P) rows each leaves "
                     "the last rank none)",
                     s->lay.n_rows, P);
        return NULL;
    }
    /* a sharded rank runs its own heads in one pass (a prime count, 19 of 56 at P = 3, would
     * otherwise go one head at a time) */
    const int G = comm                           ? (at.nh ? (int)at.nh : 1)
                  : c->has_vdn && s->plan.linear ? vda_group_heads(c->heads, opts->vda_heads)
                                                 : c->heads;
    vdn_dit_buffers *b = vdn_dit_buffers_make(
        w, s, at.nr, G, opts->chunk_rows > 0 ? opts->chunk_rows : DIT_CHUNK_ROWS);
    if (!b) return NULL;
    split(b, w, s, comm);
    b->one_lane = opts->vda_one_lane != 0;
    b->cancel = opts->cancel;
    b->vda_heads = G;
    int rc = comm ? vdn_dit_shard_buffers(b, w, s) : G < c->heads ? group_buffers(b, w, s) : 0;
    if (rc != 0) {
        vdn_dit_buffers_free(b);
        return NULL;
    }
    return b;
}

vdn_dit_buffers *vdn_dit_buffers_make(const vdn_dit_weights *w, const vdn_dit_seq *s, int64_t n,
                                      int heads, int64_t cap) {
    const vdn_config *c = &w->cfg;
    const vdn_layout *L = &s->lay;
    vdn_dit_buffers *b = vdn_xcalloc(1, sizeof *b);
    b->dev = w->dev;
    const vdn_dtype A = vdn_dev_act_dtype(w->dev), F32 = VDN_DT_F32;
    const int64_t hid = c->hidden, H = heads, hd = c->head_dim, C = H * hd,
                  Cfull = (int64_t)c->heads * hd;
    int fail = 0;
    b->x = vdn_dit_own(b, A, n, hid, &fail), b->h = vdn_dit_own(b, A, n, hid, &fail);
    b->y = vdn_dit_own(b, A, n, hid, &fail);
    b->qkv = vdn_dit_own(b, A, n, w->ldq > w->ldq_refiner ? w->ldq : w->ldq_refiner, &fail);
    b->qr = vdn_dit_own(b, A, n, Cfull, &fail), b->kr = vdn_dit_own(b, A, n, Cfull, &fail);
    b->ao = vdn_dit_own(b, A, n, Cfull, &fail);
    const int64_t nf = n < cap ? n : cap; /* feed-forward pieces */
    b->fh = vdn_dit_own(b, A, nf, 2 * (int64_t)c->ffn, &fail),
    b->fa = vdn_dit_own(b, A, nf, c->ffn, &fail);
    if (c->has_vdn) b->sgate = vdn_dit_own(b, F32, n, c->heads, &fail);
    b->tf = vdn_dit_own(b, F32, DIT_MAX_T, c->freq_dim, &fail);
    b->th = vdn_dit_own(b, F32, DIT_MAX_T, c->time_hidden, &fail);
    b->st = vdn_dit_own(b, F32, DIT_MAX_T, c->time_embed_dim, &fail);
    b->st_act = vdn_dit_own(b, A, DIT_MAX_T, c->time_embed_dim, &fail);
    b->ada = vdn_dit_own(b, A, DIT_MAX_T, 18 * hid, &fail),
    b->fin = vdn_dit_own(b, A, DIT_MAX_T, 2 * hid, &fail);
    const int64_t nh = L->n_video > L->n_audio ? L->n_video : L->n_audio; /* head pieces */
    b->hf = vdn_dit_own(b, F32, nh < cap ? nh : cap, hid, &fail);
    const int f0 = s->plan.skip_ends ? 1 : 0, Fp = L->frames - 2 * f0;
    const int64_t S = L->tokens_per_frame, nl = (int64_t)Fp * S;
    if (c->has_vdn && s->plan.linear && Fp > 0) {
        const vdn_dtype ft = vdn_vda_feat_dtype(w->dev), st = vdn_vda_state_dtype(w->dev);
        const int64_t nmat = (int64_t)Fp * H;
        b->beta = vdn_dit_own(b, F32, nl, H, &fail);
        b->feats.ks = vdn_dit_own(b, st, nmat * S, hd, &fail);
        b->feats.kb = vdn_dit_own(b, ft, nmat * S, hd, &fail);
        b->feats.vt = vdn_dit_own(b, ft, nmat * S, hd, &fail);
        b->feats.qt = vdn_dit_own(b, ft, nmat * S, hd, &fail);
        b->means = vdn_dit_own(b, F32, Fp, hid, &fail),
        b->dvec = vdn_dit_own(b, F32, Fp, c->alpha_rank, &fail);
        b->uvec = vdn_dit_own(b, F32, Fp, Cfull, &fail);
        b->alpha = vdn_dit_own(b, st, Fp, Cfull, &fail);
        vdn_tensor **mats[6] = {&b->A, &b->B, &b->T, &b->J, &b->P, &b->R};
        for (int i = 0; i < 6; i++)
            *mats[i] = vdn_dit_own(b, st, nmat * hd, hd, &fail);
        b->Slin = vdn_dit_own(b, ft, nmat * hd, hd, &fail);
        b->r = vdn_dit_own(b, st, nmat * S, hd, &fail);
        b->gpre = vdn_dit_own(b, A, nl, C, &fail), b->lin = vdn_dit_own(b, A, nl, C, &fail);
        if (c->text_state && L->n_text > 0) {
            const int64_t Lt = L->n_text;
            b->beta_t = vdn_dit_own(b, F32, Lt, H, &fail);
            b->tfeats.ks = vdn_dit_own(b, st, H * Lt, hd, &fail);
            b->tfeats.kb = vdn_dit_own(b, ft, H * Lt, hd, &fail);
            b->tfeats.vt = vdn_dit_own(b, ft, H * Lt, hd, &fail);
            b->At = vdn_dit_own(b, st, H * hd, hd, &fail),
            b->Bt = vdn_dit_own(b, st, H * hd, hd, &fail);
            b->S0 = vdn_dit_own(b, st, H * hd, hd, &fail);
        }
    }
    if (fail) {
        vdn_dit_buffers_free(b);
        return NULL;
    }
    return b;
}

void vdn_dit_buffers_free(vdn_dit_buffers *b) {
    if (!b) return;
    for (int i = 0; i < b->n_owned; i++)
        vdn_tensor_free(b->owned[i]);
    free(b->owned);
    free(b->vdevs);
    free(b);
}

/* ---- pieces ---- */

static vdn_tensor cols(const vdn_tensor *t, int64_t c0, int64_t n) {
    return vdn_view_cols(t, c0, n);
}
static vdn_tensor rows(const vdn_tensor *t, int64_t r0, int64_t n) {
    return vdn_view_rows(t, r0, n);
}

/* rows [r0, r0 + m) of n in `parts` near-equal pieces of at most cap rows */
static int64_t chunk_rows(int64_t n, int64_t cap, int64_t *parts) {
    *parts = (n + cap - 1) / cap;
    return (n + *parts - 1) / *parts;
}

/* SwiGLU feed-forward of h's rows into y, in pieces of at most fh's rows: the inner activations
 * (2 ffn + ffn wide) of every row at once would be 9 GB at the H3 workload, and a product of
 * ~15k rows keeps the tensor cores as busy as one of 100k */
int vdn_dit_feed_forward(const vdn_dit_block *b, vdn_tensor *h, vdn_tensor *fh, vdn_tensor *fa,
                         vdn_tensor *y, int64_t ffn) {
    const int64_t n = vdn_tensor_rows(h);
    int64_t parts, step = chunk_rows(n, vdn_tensor_rows(fh), &parts);
    for (int64_t r0 = 0; r0 < n; r0 += step) {
        const int64_t m = n - r0 < step ? n - r0 : step;
        vdn_tensor hr = rows(h, r0, m), yr = rows(y, r0, m);
        vdn_tensor fhr = rows(fh, 0, m), far = rows(fa, 0, m);
        OK(vdn_op_linear(&fhr, &hr, b->ff_in, NULL, VDN_ACT_NONE, 0));
        vdn_tensor value = cols(&fhr, 0, ffn), gate = cols(&fhr, ffn, ffn);
        OK(vdn_op_swiglu(&far, &value, &gate));
        OK(vdn_op_linear(&yr, &far, b->ff_out, NULL, VDN_ACT_NONE, 0));
    }
    return 0;
}

int vdn_dit_refine_text(const vdn_dit_weights *w, const vdn_tensor *embeds, vdn_tensor *text) {
    const vdn_config *c = &w->cfg;
    vdn_dev *d = w->dev;
    const int64_t Lt = vdn_tensor_rows(embeds), hid = c->hidden,
                  C = (int64_t)c->heads * c->head_dim;
    const vdn_dtype A = vdn_dev_act_dtype(d);
    vdn_tensor *emb = vdn_tensor_new2(d, A, Lt, c->text_dim);
    vdn_tensor *h = vdn_tensor_new2(d, A, Lt, hid), *y = vdn_tensor_new2(d, A, Lt, hid);
    vdn_tensor *qkv = vdn_tensor_new2(d, A, Lt, w->ldq_refiner);
    vdn_tensor *qr = vdn_tensor_new2(d, A, Lt, C), *kr = vdn_tensor_new2(d, A, Lt, C);
    vdn_tensor *ao = vdn_tensor_new2(d, A, Lt, C);
    vdn_tensor *fh = vdn_tensor_new2(d, A, Lt, 2 * (int64_t)c->ffn);
    vdn_tensor *fa = vdn_tensor_new2(d, A, Lt, c->ffn);
    vdn_attn_mask *mask = vdn_attn_mask_dense(d, (int)Lt, (int)Lt);
    int rc = -1;
    if (emb && h && y && qkv && qr && kr && ao && fh && fa && mask) {
        rc = vdn_tensor_copy(emb, embeds) ||
             vdn_op_linear(text, emb, w->ctx_w, w->ctx_b, VDN_ACT_NONE, 0);
        for (int i = 0; i < c->refiner_layers && rc == 0; i++) { /* pre-norm, no adaLN/RoPE */
            const vdn_dit_block *b = &w->refiner[i];
            vdn_tensor q = cols(qkv, 0, C), k = cols(qkv, C, C), v = cols(qkv, 2 * C, C);
            rc = vdn_op_rmsnorm(h, text, b->norm1, c->norm_eps, NULL, NULL, NULL) ||
                 vdn_op_linear(qkv, h, b->wqkv, NULL, VDN_ACT_NONE, 0) ||
                 vdn_op_qk_norm_rope(qr, kr, &q, &k, b->norm_q, b->norm_k, c->head_dim, c->norm_eps,
                                     NULL) ||
                 vdn_op_attention(ao, qr, kr, &v, c->head_dim, 1.0 / sqrt((double)c->head_dim),
                                  mask, NULL) ||
                 vdn_op_linear(y, ao, b->to_out, NULL, VDN_ACT_NONE, 0) || vdn_op_add(text, y) ||
                 vdn_op_rmsnorm(h, text, b->norm2, c->norm_eps, NULL, NULL, NULL) ||
                 vdn_dit_feed_forward(b, h, fh, fa, y, c->ffn) || vdn_op_add(text, y);
        }
        if (rc == 0)
            rc = vdn_op_rmsnorm(text, text, w->refiner_final_norm, c->norm_eps, NULL, NULL, NULL);
    } /* else: the failed allocation left its message in the device */
    vdn_tensor *all[] = {emb, h, y, qkv, qr, kr, ao, fh, fa};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        vdn_tensor_free(all[i]);
    vdn_attn_mask_free(mask);
    return rc ? -1 : 0;
}

/* SiLU(temb) for each of the n_t timesteps into buf->st_act (spec 2.3): sinusoid (cos first),
 * two float32 linears with SiLU, then the activation dtype for the adaLN products */
int vdn_dit_time_embed(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_dit_buffers *buf) {
    const int M = s->n_t;
    vdn_tensor t = cols(s->t_values, 0, M), tf = rows(buf->tf, 0, M), th = rows(buf->th, 0, M);
    vdn_tensor st = rows(buf->st, 0, M), sa = rows(buf->st_act, 0, M);
    OK(vdn_op_time_features(&tf, &t));
    OK(vdn_op_linear(&th, &tf, w->t1_w, w->t1_b, VDN_ACT_SILU, 0));
    OK(vdn_op_linear(&st, &th, w->t2_w, w->t2_b, VDN_ACT_SILU, 0));
    return vdn_tensor_copy(&sa, &st);
}

/* the adaLN table of a block for every (timestep, tag) row */
int vdn_dit_ada_table(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                      vdn_dit_buffers *buf, vdn_tensor ada[6]) {
    const int M = s->n_t;
    const int64_t hid = w->cfg.hidden;
    vdn_tensor sa = rows(buf->st_act, 0, M), P = rows(buf->ada, 0, M);
    OK(vdn_op_linear(&P, &sa, b->ada_w, b->ada_b, VDN_ACT_NONE, 0));
    /* row (timestep m, tag j) of the table = row 3m + j of P seen as [3M, 6 hidden]; its
     * columns k hidden .. are shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp */
    const int64_t six[2] = {3 * (int64_t)M, 6 * hid};
    vdn_tensor P6 = vdn_view_reshape(&P, 2, six);
    for (int k = 0; k < 6; k++)
        ada[k] = cols(&P6, k * hid, hid);
    return 0;
}

int vdn_dit_qk_norm_rope(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                         int64_t r0, vdn_tensor *q, vdn_tensor *k, const vdn_tensor *qraw,
                         const vdn_tensor *kraw) {
    const vdn_config *c = &w->cfg;
    vdn_tensor pos = rows(s->pos, r0, vdn_tensor_rows(q));
    const vdn_rope rope = {&pos,
                           w->rope_inv,
                           6 * c->rope_freq_dim,
                           {c->rope_freq_dim, c->rope_freq_dim, c->rope_freq_dim},
                           0};
    return vdn_op_qk_norm_rope(q, k, qraw, kraw, b->norm_q, b->norm_k, c->head_dim, c->norm_eps,
                               &rope);
}

/* P = 1: q, k (norm + RoPE) and the softmax gate of every row from the fused projection (at
 * P > 1 each rank makes them for its heads after the all-to-all: vdn_dit_heads_softmax) */
static int softmax_in(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                      vdn_dit_buffers *buf, const vdn_tensor *qkv) {
    const vdn_config *c = &w->cfg;
    const int64_t H = c->heads, C = H * c->head_dim, nr = buf->nr;
    vdn_tensor q = cols(qkv, 0, C), k = cols(qkv, C, C);
    vdn_tensor qr = vdn_dit_narrow_rows(buf->qr, nr), kr = vdn_dit_narrow_rows(buf->kr, nr);
    OK(vdn_dit_qk_norm_rope(w, b, s, buf->r0, &qr, &kr, &q, &k));
    if (c->has_vdn && s->plan.softmax_gate) { /* per-head sigmoid gate on every row */
        vdn_tensor g = cols(qkv, w->col_sgate, H), sg = vdn_dit_narrow_rows(buf->sgate, nr);
        OK(vdn_op_act(&sg, &g, VDN_ACT_SIGMOID));
    }
    return 0;
}

/* the window+anchor (or dense) softmax attention of every row on this rank's heads */
static int attention(const vdn_dit_weights *w, const vdn_dit_seq *s, const vdn_dit_buffers *buf,
                     vdn_dit_heads *hv) {
    const vdn_config *c = &w->cfg;
    if (buf->nh == 0) return 0; /* more ranks than heads */
    const int gated = c->has_vdn && s->plan.softmax_gate;
    return vdn_op_attention(&hv->ao, &hv->q, &hv->k, &hv->v, c->head_dim,
                            1.0 / sqrt((double)c->head_dim), s->mask, gated ? &hv->gate : NULL);
}

/* the attention output of this rank's rows (at P > 1 moved back from the head-sharded layout)
 * through to_out into y */
static int softmax_out(const vdn_dit_block *b, vdn_dit_buffers *buf, vdn_dit_heads *hv,
                       vdn_tensor *y) {
    vdn_tensor ao = vdn_dit_narrow_rows(buf->ao, buf->nr);
    if (buf->comm) OK(vdn_op_cols_to_rows(buf->comm, &ao, &hv->ao, &buf->rows, &buf->chans));
    return vdn_op_linear(y, &ao, b->to_out, NULL, VDN_ACT_NONE, 0);
}

/* The attention of a block and its linear branch into y. The branch reads only h and the fused
 * projection (P = 1) or what the all-to-all brought (P > 1), so it is forked to lane 1 beside the
 * softmax once those are queued (the next writes of h and qkv come after the join). At P = 1 the
 * whole softmax runs on lane 0 beside it. At P > 1 lane 0 makes the softmax's q, k and gate from
 * the moved raw ones beside the branch, and the branch's output goes back to its rows' owners
 * on lane 1 as soon as it is made, overlapping the softmax (the longer of the two); the other
 * collectives run on lane 0 before the fork and after the join. Every rank issues them in the
 * same order (the branch's return before the softmax's, with one lane or without heads too).
 * y = to_out(softmax) first, then += to_out_linear(branch). */
static int mixers(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                  vdn_dit_buffers *buf, const vdn_tensor *h, const vdn_tensor *qkv, vdn_tensor *y) {
    const vdn_config *c = &w->cfg;
    int64_t row0;
    const int linear = c->has_vdn && s->plan.linear && vdn_dit_branch_frames(s, &row0) > 0;
    const int local = buf->comm == NULL;
    vdn_dit_heads hv;
    vdn_dit_heads_views(w, buf, h, qkv, &hv);
    if (!local) OK(vdn_dit_heads_in(w, b, s, buf, h, qkv, linear));
    const int side = linear && buf->nh > 0 && !buf->one_lane;
    vdn_dev *d = buf->dev;
    int rc = 0;
    if (side) {
        OK(vdn_dev_fork(d));
        rc = vdn_dit_branch(w, b, s, buf, &hv);
        if (rc == 0 && !local) rc = vdn_dit_branch_back(s, buf);
        (void)vdn_dev_lane(d, 0); /* lane 0 is always valid */
    }
    if (rc == 0)
        rc = local ? softmax_in(w, b, s, buf, qkv) : vdn_dit_heads_softmax(w, b, s, buf, &hv);
    if (rc == 0) rc = attention(w, s, buf, &hv);
    if (rc == 0 && local) rc = softmax_out(b, buf, &hv, y);
    if (side && vdn_dev_join(d) != 0) rc = -1; /* joined on failure too: no fork stays open */
    OK(rc);
    if (linear && !side) {
        OK(vdn_dit_branch(w, b, s, buf, &hv));
        if (!local) OK(vdn_dit_branch_back(s, buf));
    }
    if (!local) OK(softmax_out(b, buf, &hv, y));
    return linear ? vdn_dit_branch_out(w, b, s, buf, y) : 0;
}

/* one DiT block on this rank's rows of buf->x (spec 2.4-2.6, 5): the adaLN table of this block
 * for every (timestep, tag) row, attention + gated residual, feed-forward + gated residual */
static int dit_block(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                     vdn_dit_buffers *buf) {
    const vdn_config *c = &w->cfg;
    const int64_t nr = buf->nr;
    vdn_tensor ada[6];
    OK(vdn_dit_ada_table(w, b, s, buf, ada));
    vdn_tensor x = vdn_dit_narrow_rows(buf->x, nr), h = vdn_dit_narrow_rows(buf->h, nr),
               y = vdn_dit_narrow_rows(buf->y, nr);
    vdn_tensor idx = cols(s->ada_idx, buf->r0, nr);
    OK(vdn_op_rmsnorm(&h, &x, b->norm1, c->norm_eps, &ada[0], &ada[1], &idx));
    vdn_tensor qkv_all = vdn_dit_narrow_rows(buf->qkv, nr), qkv = cols(&qkv_all, 0, w->ldq);
    OK(vdn_op_linear(&qkv, &h, b->wqkv, b->bqkv, VDN_ACT_NONE, 0));
    OK(mixers(w, b, s, buf, &h, &qkv, &y));
    OK(vdn_op_gate_residual(&x, &y, &ada[2], &idx));
    OK(vdn_op_rmsnorm(&h, &x, b->norm2, c->norm_eps, &ada[3], &ada[4], &idx));
    OK(vdn_dit_feed_forward(b, &h, buf->fh, buf->fa, &y, c->ffn)); /* pieces of fh's rows */
    return vdn_op_gate_residual(&x, &y, &ada[5], &idx);
}

/* the rows [r0, r0+n) of h through a float32 head: out = h W^T + b, in pieces of hf's rows */
static int head(vdn_dit_buffers *buf, int64_t r0, int64_t n, const vdn_tensor *W,
                const vdn_tensor *bias, vdn_tensor *out) {
    int64_t parts, step = n ? chunk_rows(n, vdn_tensor_rows(buf->hf), &parts) : 1;
    for (int64_t i = 0; i < n; i += step) {
        const int64_t m = n - i < step ? n - i : step;
        vdn_tensor hr = rows(buf->h, r0 + i, m), hf = rows(buf->hf, 0, m), o = rows(out, i, m);
        OK(vdn_tensor_copy(&hf, &hr));
        OK(vdn_op_linear(&o, &hf, W, bias, VDN_ACT_NONE, 0));
    }
    return 0;
}

/* this rank's rows of segment [seg0, seg0 + n) of the packed sequence: x[i - r0] = in[i - seg0]
 * W^T + b (float32 projections; W NULL: a copy) */
static int embed(const vdn_dit_buffers *buf, vdn_tensor *x, int64_t seg0, const vdn_tensor *in,
                 const vdn_tensor *W, const vdn_tensor *bias) {
    if (!in) return 0;
    const int64_t n = vdn_tensor_rows(in), r0 = buf->r0, r1 = buf->r0 + buf->nr;
    const int64_t i0 = seg0 > r0 ? seg0 : r0, i1 = seg0 + n < r1 ? seg0 + n : r1;
    if (i1 <= i0) return 0;
    vdn_tensor dst = rows(x, i0 - r0, i1 - i0), src = rows(in, i0 - seg0, i1 - i0);
    return W ? vdn_op_linear(&dst, &src, W, bias, VDN_ACT_NONE, 0) : vdn_tensor_copy(&dst, &src);
}

static int forward(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_dit_buffers *buf,
                   const vdn_tensor *text, const vdn_tensor *video_x, const vdn_tensor *cond_x,
                   const vdn_tensor *audio_x, vdn_tensor *video_v, vdn_tensor *audio_v) {
    const vdn_layout *L = &s->lay;
    if (s->n_t < 1) return vdn_dev_fail(w->dev, "dit: forward before vdn_dit_seq_timesteps");
    vdn_tensor x = vdn_dit_narrow_rows(buf->x, buf->nr);
    OK(embed(buf, &x, 0, text, NULL, NULL));
    if (L->n_cond) OK(embed(buf, &x, L->cond_start, cond_x, w->proj_in_w, w->proj_in_b));
    if (L->n_audio) OK(embed(buf, &x, L->audio_start, audio_x, w->audio_in_w, w->audio_in_b));
    OK(embed(buf, &x, L->video_start, video_x, w->proj_in_w, w->proj_in_b));
    OK(vdn_dit_time_embed(w, s, buf));
    for (int l = 0; l < w->cfg.layers; l++) {
        /* a cancel stops the evaluation here, not at its end (a block of a large clip takes
         * seconds on a CPU); a sharded rank's peers then fail their next collective */
        if (vdn_cancelled(buf->cancel))
            return vdn_dev_fail(w->dev, "cancelled in model evaluation at block %d of %d", l,
                                w->cfg.layers);
        OK(dit_block(w, &w->blocks[l], s, buf));
    }
    if (!buf->comm) return vdn_dit_final(w, s, buf, video_v, audio_v);
    /* every rank's rows through the final layer, for every rank's full outputs */
    OK(vdn_op_all_gather_rows(buf->comm, buf->Xall, &x, &buf->rows));
    vdn_tensor *keep_x = buf->x, *keep_h = buf->h;
    buf->x = buf->Xall, buf->h = buf->Hfull;
    int rc = vdn_dit_final(w, s, buf, video_v, audio_v);
    buf->x = keep_x, buf->h = keep_h;
    return rc;
}

/* buf->x (every row) through the final layer and the output heads */
int vdn_dit_final(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_dit_buffers *buf,
                  vdn_tensor *video_v, vdn_tensor *audio_v) {
    const vdn_config *c = &w->cfg;
    const vdn_layout *L = &s->lay;
    const int64_t hid = c->hidden;
    /* final layer: (shift, scale) per timestep, no modality; then the heads */
    vdn_tensor sa = rows(buf->st_act, 0, s->n_t), F2 = rows(buf->fin, 0, s->n_t);
    OK(vdn_op_linear(&F2, &sa, w->norm_out_lin_w, w->norm_out_lin_b, VDN_ACT_NONE, 0));
    vdn_tensor shift = cols(&F2, 0, hid), scale = cols(&F2, hid, hid);
    OK(vdn_op_rmsnorm(buf->h, buf->x, w->norm_out_w, c->norm_eps, &shift, &scale, s->t_idx));
    OK(head(buf, L->video_start, L->n_video, w->proj_out_w, w->proj_out_b, video_v));
    return head(buf, L->audio_start, L->n_audio, w->audio_out_w, w->audio_out_b, audio_v);
}

int vdn_dit_forward(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_dit_buffers *buf,
                    const vdn_tensor *text, const vdn_tensor *video_x, const vdn_tensor *cond_x,
                    const vdn_tensor *audio_x, vdn_tensor *video_v, vdn_tensor *audio_v) {
    if (!buf)
        return vdn_dev_fail(w->dev,
                            "dit: forward without buffers (expected vdn_dit_buffers_new's)");
    if (buf->vranks)
        return vdn_dit_virtual_forward(w, s, buf, text, video_x, cond_x, audio_x, video_v, audio_v);
    int rc = forward(w, s, buf, text, video_x, cond_x, audio_x, video_v, audio_v);
    if (rc != 0 && buf->comm) vdn_comm_abort(buf->comm); /* no peer may wait for this rank */
    return rc;
}
