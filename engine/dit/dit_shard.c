/* The DiT forward sharded over P ranks (sequence parallelism, spec 6; comm.h), written once over
 * the op layer with the collectives as ops, so it runs on every backend and communicator.
 *
 * Rank r owns the packed rows [row0(r), row0(r+1)) (ceil(S/P) each, the remainder on the last) and
 * the heads [head0(r), head0(r+1)) (balanced). Embeddings, the time embedding, the adaLN
 * modulation, QKV, the q/k norms + RoPE, to_out, to_out_linear and the FFN run on own rows; one
 * all-to-all per block moves q, k, v (+ the softmax gate, and for the linear branch raw q, k and
 * beta) to the head-sharded layout, where the window+anchor softmax and the VDA linear branch run
 * over every row for own heads; one reverse all-to-all (two with the linear branch) brings the
 * outputs back. The branch's decay needs frame means of the modulated input and its output gate
 * the 128-wide gate hidden of every row: both are all-gathered. One all-gather of the residual
 * before the final layer. The pieces are dit.c's and dit_vda.c's (dit_internal.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "dit_internal.h"
#include "op_backend.h" /* vdn_attn_mask: a rank's alias of the mask */
#include "vdn_util.h"

#define OK(call)                                                                                   \
    do {                                                                                           \
        if ((call) != 0) return -1;                                                                \
    } while (0)

struct vdn_dit_shard {
    vdn_comm *comm;
    vdn_split rows, heads, chans; /* rows; heads; heads * head_dim columns */
    int64_t r0, nr, h0, nh, c0, nc;
    vdn_dit_buffers *buf; /* row-wise buffers for nr rows, the branch's for nh heads */
    /* head-sharded [S, nc] (or [S, nh]) */
    vdn_tensor *Qh, *Kh, *Vh, *Gh, *Aoh, *Qrh, *Krh, *Bh, *LinH;
    vdn_tensor *GD, *Hall, *AlphaH; /* [S, gate_rank], [S, hidden], [F', nc] */
    vdn_tensor *Xall, *Hfull;       /* [S, hidden]: the final layer's input */
};
typedef struct vdn_dit_shard shard;

/* t with its innermost dim narrowed to n (0 allowed: a rank without heads) */
static vdn_tensor narrow_cols(const vdn_tensor *t, int64_t n) {
    vdn_tensor v = *t;
    v.owned = 0;
    v.ne[v.ndim - 1] = n;
    return v;
}
static vdn_tensor narrow_rows(const vdn_tensor *t, int64_t n) {
    vdn_tensor v = *t;
    v.owned = 0;
    v.ne[0] = n;
    return v;
}

static void shard_free(shard *sh) {
    vdn_dit_buffers_free(sh->buf);
}

static int shard_init(shard *sh, const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_comm *comm) {
    const vdn_config *c = &w->cfg;
    const vdn_layout *L = &s->lay;
    const int P = comm->size, me = comm->rank;
    memset(sh, 0, sizeof *sh);
    sh->comm = comm;
    vdn_split_rows(&sh->rows, L->n_rows, P);
    vdn_split_heads(&sh->heads, c->heads, P);
    sh->chans = sh->heads;
    for (int r = 0; r <= P; r++)
        sh->chans.off[r] *= c->head_dim;
    sh->r0 = sh->rows.off[me], sh->nr = vdn_split_len(&sh->rows, me);
    sh->h0 = sh->heads.off[me], sh->nh = vdn_split_len(&sh->heads, me);
    sh->c0 = sh->chans.off[me], sh->nc = vdn_split_len(&sh->chans, me);
    if (vdn_split_len(&sh->rows, P - 1) < 1) /* the same on every rank: no collective is pending */
        return vdn_dev_fail(w->dev,
                            "dit: %d rows cannot be sharded over %d ranks (ceil(S/P) rows "
                            "each leaves the last rank none)",
                            L->n_rows, P);
    vdn_dit_buffers *b = sh->buf = vdn_dit_buffers_make(w, s, sh->nr, sh->nh ? (int)sh->nh : 1);
    if (!b) return -1;
    const vdn_dtype A = vdn_dev_act_dtype(w->dev), F32 = VDN_DT_F32;
    const int64_t S = L->n_rows, nc1 = sh->nc ? sh->nc : 1, nh1 = sh->nh ? sh->nh : 1;
    int fail = 0;
    sh->Qh = vdn_dit_own(b, A, S, nc1, &fail), sh->Kh = vdn_dit_own(b, A, S, nc1, &fail);
    sh->Vh = vdn_dit_own(b, A, S, nc1, &fail), sh->Aoh = vdn_dit_own(b, A, S, nc1, &fail);
    sh->Gh = vdn_dit_own(b, F32, S, nh1, &fail);
    sh->Xall = vdn_dit_own(b, A, S, c->hidden, &fail);
    sh->Hfull = vdn_dit_own(b, A, S, c->hidden, &fail);
    const int f0 = s->plan.skip_ends ? 1 : 0, Fp = L->frames - 2 * f0;
    if (c->has_vdn && s->plan.linear && Fp > 0) {
        sh->Qrh = vdn_dit_own(b, A, S, nc1, &fail), sh->Krh = vdn_dit_own(b, A, S, nc1, &fail);
        sh->Bh = vdn_dit_own(b, A, S, nh1, &fail), sh->LinH = vdn_dit_own(b, A, S, nc1, &fail);
        sh->GD = vdn_dit_own(b, A, S, c->gate_rank, &fail);
        sh->Hall = vdn_dit_own(b, A, S, c->hidden, &fail);
        sh->AlphaH = vdn_dit_own(b, vdn_vda_state_dtype(w->dev), Fp, nc1, &fail);
    }
    return fail ? -1 : 0;
}

/* own rows of segment [seg0, seg0 + n) of the packed sequence: x[i - r0] = in[i - seg0] W^T + b
 * (W NULL: a copy) */
static int embed_rows(const shard *sh, vdn_tensor *x, int64_t seg0, const vdn_tensor *in,
                      const vdn_tensor *W, const vdn_tensor *bias) {
    if (!in) return 0;
    const int64_t n = vdn_tensor_rows(in);
    const int64_t i0 = seg0 > sh->r0 ? seg0 : sh->r0;
    const int64_t i1 = seg0 + n < sh->r0 + sh->nr ? seg0 + n : sh->r0 + sh->nr;
    if (i1 <= i0) return 0;
    vdn_tensor dst = vdn_view_rows(x, i0 - sh->r0, i1 - i0);
    vdn_tensor src = vdn_view_rows(in, i0 - seg0, i1 - i0);
    return W ? vdn_op_linear(&dst, &src, W, bias, VDN_ACT_NONE, 0) : vdn_tensor_copy(&dst, &src);
}

/* what the linear branch on own heads reads, moved by the collectives: raw q, k and beta of own
 * rows to own heads (v went with the softmax's), every row's modulated input (frame means for
 * alpha) and 128-wide gate hidden */
static int branch_gather(const vdn_dit_weights *w, shard *sh, const vdn_tensor *h,
                         const vdn_tensor *qkv) {
    const vdn_config *c = &w->cfg;
    const int64_t H = c->heads, C = H * c->head_dim;
    vdn_comm *cm = sh->comm;
    vdn_tensor q = vdn_view_cols(qkv, 0, C), k = vdn_view_cols(qkv, C, C);
    vdn_tensor beta = vdn_view_cols(qkv, w->col_beta, H);
    vdn_tensor Qrh = narrow_cols(sh->Qrh, sh->nc), Krh = narrow_cols(sh->Krh, sh->nc);
    vdn_tensor Bh = narrow_cols(sh->Bh, sh->nh);
    OK(vdn_op_rows_to_cols(cm, &Qrh, &q, &sh->rows, &sh->chans));
    OK(vdn_op_rows_to_cols(cm, &Krh, &k, &sh->rows, &sh->chans));
    OK(vdn_op_rows_to_cols(cm, &Bh, &beta, &sh->rows, &sh->heads));
    vdn_tensor gd = vdn_view_cols(qkv, w->col_gate_down, c->gate_rank);
    OK(vdn_op_all_gather_rows(cm, sh->Hall, h, &sh->rows));
    return vdn_op_all_gather_rows(cm, sh->GD, &gd, &sh->rows);
}

/* the linear branch on own heads over every branch row from what branch_gather moved, into
 * LinH's rows; no collective, and nothing the softmax reads or writes (it may run on lane 1) */
static int branch(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                  shard *sh) {
    const vdn_config *c = &w->cfg;
    const vdn_layout *L = &s->lay;
    const int64_t S = L->tokens_per_frame;
    const int f0 = s->plan.skip_ends ? 1 : 0, Fp = L->frames - 2 * f0;
    const int64_t row0 = (int64_t)L->video_start + (int64_t)f0 * S, nl = (int64_t)Fp * S;
    vdn_dit_buffers *buf = sh->buf;
    if (sh->nh == 0) return 0;
    vdn_tensor Qrh = narrow_cols(sh->Qrh, sh->nc), Krh = narrow_cols(sh->Krh, sh->nc);
    vdn_tensor Bh = narrow_cols(sh->Bh, sh->nh), Vh = narrow_cols(sh->Vh, sh->nc);
    vdn_tensor hv = vdn_view_rows(sh->Hall, row0, nl);
    OK(vdn_dit_vda_alpha(b, buf, &hv, Fp));
    vdn_tensor alpha_own = vdn_view_cols(buf->alpha, sh->c0, sh->nc);
    OK(vdn_tensor_copy(sh->AlphaH, &alpha_own));
    vdn_tensor gdv = vdn_view_rows(sh->GD, row0, nl);
    vdn_tensor gw = vdn_dit_outer_slice(b->gate_up, sh->c0, sh->nc);
    vdn_tensor gb = vdn_view_cols(b->gate_up_b, sh->c0, sh->nc);
    OK(vdn_op_linear(buf->gpre, &gdv, &gw, &gb, VDN_ACT_NONE, 0));
    vdn_tensor lin = vdn_view_rows(sh->LinH, row0, nl);
    vdn_dit_vda_in in = {
        .heads = (int)sh->nh, .head0 = (int)sh->h0, .alpha = sh->AlphaH, .lin = &lin};
    in.q = vdn_view_rows(&Qrh, row0, nl), in.k = vdn_view_rows(&Krh, row0, nl);
    in.v = vdn_view_rows(&Vh, row0, nl), in.beta_pre = vdn_view_rows(&Bh, row0, nl);
    in.gpre = *buf->gpre;
    if (c->text_state && L->n_text > 0) {
        in.tk = vdn_view_rows(&Krh, 0, L->n_text), in.tv = vdn_view_rows(&Vh, 0, L->n_text);
        in.tbeta_pre = vdn_view_rows(&Bh, 0, L->n_text);
    }
    return vdn_dit_vda_core(w, b, s, buf, &in);
}

/* to_out_linear of the branch rows this rank owns, added into y */
static int branch_out(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                      shard *sh, vdn_tensor *y, vdn_tensor *lin_rows) {
    const vdn_layout *L = &s->lay;
    const int64_t H = w->cfg.heads, C = H * w->cfg.head_dim, S = L->tokens_per_frame;
    const int f0 = s->plan.skip_ends ? 1 : 0, Fp = L->frames - 2 * f0;
    const int64_t row0 = (int64_t)L->video_start + (int64_t)f0 * S, nl = (int64_t)Fp * S;
    vdn_tensor LinH = narrow_cols(sh->LinH, sh->nc);
    OK(vdn_op_cols_to_rows(sh->comm, lin_rows, &LinH, &sh->rows, &sh->chans));
    const int64_t i0 = row0 > sh->r0 ? row0 : sh->r0;
    const int64_t i1 = row0 + nl < sh->r0 + sh->nr ? row0 + nl : sh->r0 + sh->nr;
    if (i1 <= i0) return 0;
    vdn_tensor yv = vdn_view_rows(y, i0 - sh->r0, i1 - i0);
    vdn_tensor lv = vdn_view_rows(lin_rows, i0 - sh->r0, i1 - i0);
    (void)C;
    return vdn_op_linear(&yv, &lv, b->to_out_linear, NULL, VDN_ACT_NONE, 1);
}

static int shard_block(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                       shard *sh) {
    const vdn_config *c = &w->cfg;
    const vdn_attn_plan *p = &s->plan;
    vdn_dit_buffers *buf = sh->buf;
    vdn_comm *cm = sh->comm;
    const int64_t H = c->heads, C = H * c->head_dim, nr = sh->nr;
    const int f0 = p->skip_ends ? 1 : 0, Fp = s->lay.frames - 2 * f0;
    const int linear = c->has_vdn && p->linear && Fp > 0;
    vdn_tensor ada[6];
    OK(vdn_dit_ada_table(w, b, s, buf, ada));
    vdn_tensor x = narrow_rows(buf->x, nr), h = narrow_rows(buf->h, nr),
               y = narrow_rows(buf->y, nr);
    vdn_tensor idx = vdn_view_cols(s->ada_idx, sh->r0, nr);
    OK(vdn_op_rmsnorm(&h, &x, b->norm1, c->norm_eps, &ada[0], &ada[1], &idx));
    vdn_tensor qkv_all = narrow_rows(buf->qkv, nr), qkv = vdn_view_cols(&qkv_all, 0, w->ldq);
    OK(vdn_op_linear(&qkv, &h, b->wqkv, b->bqkv, VDN_ACT_NONE, 0));
    vdn_tensor q = vdn_view_cols(&qkv, 0, C), k = vdn_view_cols(&qkv, C, C),
               v = vdn_view_cols(&qkv, 2 * C, C);
    vdn_tensor pos = vdn_view_rows(s->pos, sh->r0, nr);
    const vdn_rope rope = {&pos,
                           w->rope_inv,
                           6 * c->rope_freq_dim,
                           {c->rope_freq_dim, c->rope_freq_dim, c->rope_freq_dim}};
    vdn_tensor qr = narrow_rows(buf->qr, nr), kr = narrow_rows(buf->kr, nr);
    OK(vdn_op_qk_norm_rope(&qr, &kr, &q, &k, b->norm_q, b->norm_k, c->head_dim, c->norm_eps,
                           &rope));
    /* own rows, every head -> every row, own heads */
    vdn_tensor Qh = narrow_cols(sh->Qh, sh->nc), Kh = narrow_cols(sh->Kh, sh->nc),
               Vh = narrow_cols(sh->Vh, sh->nc), Aoh = narrow_cols(sh->Aoh, sh->nc),
               Gh = narrow_cols(sh->Gh, sh->nh);
    OK(vdn_op_rows_to_cols(cm, &Qh, &qr, &sh->rows, &sh->chans));
    OK(vdn_op_rows_to_cols(cm, &Kh, &kr, &sh->rows, &sh->chans));
    OK(vdn_op_rows_to_cols(cm, &Vh, &v, &sh->rows, &sh->chans));
    const vdn_tensor *gate = NULL;
    if (c->has_vdn && p->softmax_gate) { /* per-head sigmoid gate on every row */
        vdn_tensor g = vdn_view_cols(&qkv, w->col_sgate, H), sg = narrow_rows(buf->sgate, nr);
        OK(vdn_op_act(&sg, &g, VDN_ACT_SIGMOID));
        OK(vdn_op_rows_to_cols(cm, &Gh, &sg, &sh->rows, &sh->heads));
        gate = &Gh;
    }
    if (linear) OK(branch_gather(w, sh, &h, &qkv));
    /* the branch on lane 1 beside the softmax (dit.c's dit_block): the collectives stay on lane 0,
     * before the fork and after the join, in the same order on every rank */
    const int side = linear && sh->nh > 0 && vdn_dit_vda_side();
    vdn_dev *d = w->dev;
    int rc = 0;
    if (side) {
        OK(vdn_dev_fork(d));
        rc = branch(w, b, s, sh);
        (void)vdn_dev_lane(d, 0); /* lane 0 is always valid */
    }
    if (rc == 0 && sh->nh > 0)
        rc = vdn_op_attention(&Aoh, &Qh, &Kh, &Vh, c->head_dim, 1.0 / sqrt((double)c->head_dim),
                              s->mask, gate);
    if (side && vdn_dev_join(d) != 0) rc = -1; /* joined on failure too: no fork stays open */
    OK(rc);
    if (linear && !side) OK(branch(w, b, s, sh));
    /* every row, own heads -> own rows, every head */
    vdn_tensor ao = narrow_rows(buf->ao, nr);
    OK(vdn_op_cols_to_rows(cm, &ao, &Aoh, &sh->rows, &sh->chans));
    OK(vdn_op_linear(&y, &ao, b->to_out, NULL, VDN_ACT_NONE, 0));
    if (linear) OK(branch_out(w, b, s, sh, &y, &kr)); /* kr is free now: the branch's rows */
    OK(vdn_op_gate_residual(&x, &y, &ada[2], &idx));
    OK(vdn_op_rmsnorm(&h, &x, b->norm2, c->norm_eps, &ada[3], &ada[4], &idx));
    OK(vdn_dit_feed_forward(b, &h, buf->fh, buf->fa, &y, c->ffn)); /* pieces of fh's rows */
    return vdn_op_gate_residual(&x, &y, &ada[5], &idx);
}

static int shard_forward(const vdn_dit_weights *w, const vdn_dit_seq *s, shard *sh,
                         const vdn_tensor *text, const vdn_tensor *video_x,
                         const vdn_tensor *cond_x, const vdn_tensor *audio_x, vdn_tensor *video_v,
                         vdn_tensor *audio_v) {
    const vdn_layout *L = &s->lay;
    vdn_dit_buffers *buf = sh->buf;
    vdn_tensor x = narrow_rows(buf->x, sh->nr);
    OK(embed_rows(sh, &x, 0, text, NULL, NULL));
    if (L->n_cond) OK(embed_rows(sh, &x, L->cond_start, cond_x, w->proj_in_w, w->proj_in_b));
    if (L->n_audio) OK(embed_rows(sh, &x, L->audio_start, audio_x, w->audio_in_w, w->audio_in_b));
    OK(embed_rows(sh, &x, L->video_start, video_x, w->proj_in_w, w->proj_in_b));
    OK(vdn_dit_time_embed(w, s, buf));
    for (int l = 0; l < w->cfg.layers; l++)
        OK(shard_block(w, &w->blocks[l], s, sh));
    OK(vdn_op_all_gather_rows(sh->comm, sh->Xall, &x, &sh->rows));
    vdn_tensor *keep_x = buf->x, *keep_h = buf->h;
    buf->x = sh->Xall, buf->h = sh->Hfull;
    int rc = vdn_dit_final(w, s, buf, video_v, audio_v);
    buf->x = keep_x, buf->h = keep_h;
    return rc;
}

vdn_dit_shard *vdn_dit_shard_new(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_comm *comm) {
    if (comm->dev != w->dev) {
        vdn_dev_fail(w->dev, "dit: rank %d's communicator is on %s, its weights on %s", comm->rank,
                     vdn_dev_name(comm->dev), vdn_dev_name(w->dev));
        return NULL;
    }
    shard *sh = vdn_xmalloc(sizeof *sh);
    if (shard_init(sh, w, s, comm) != 0) {
        shard_free(sh);
        free(sh);
        return NULL;
    }
    return sh;
}

void vdn_dit_shard_free(vdn_dit_shard *sh) {
    if (!sh) return;
    shard_free(sh);
    free(sh);
}

int vdn_dit_forward_shard(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_dit_shard *sh,
                          const vdn_tensor *text, const vdn_tensor *video_x,
                          const vdn_tensor *cond_x, const vdn_tensor *audio_x, vdn_tensor *video_v,
                          vdn_tensor *audio_v) {
    int rc = s->n_t < 1 ? vdn_dev_fail(w->dev, "dit: forward before vdn_dit_seq_timesteps")
                        : shard_forward(w, s, sh, text, video_x, cond_x, audio_x, video_v, audio_v);
    if (rc != 0) vdn_comm_abort(sh->comm); /* a local failure must not leave the peers waiting */
    return rc;
}

int vdn_dit_forward_sharded(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_comm *comm,
                            const vdn_tensor *text, const vdn_tensor *video_x,
                            const vdn_tensor *cond_x, const vdn_tensor *audio_x,
                            vdn_tensor *video_v, vdn_tensor *audio_v) {
    vdn_dit_shard *sh = vdn_dit_shard_new(w, s, comm);
    if (!sh) {
        vdn_comm_abort(comm);
        return -1;
    }
    int rc = vdn_dit_forward_shard(w, s, sh, text, video_x, cond_x, audio_x, video_v, audio_v);
    vdn_dit_shard_free(sh);
    return rc;
}

/* ---- from host arrays with P in-process ranks (tests, `vdn render --ranks`) ---- */

typedef struct {
    vdn_dit_weights *const *w;
    vdn_comm_group *g;
    const float *text;
    const vdn_step_inputs *in;
    float *const *video_v, *const *audio_v;
    char (*err)[VDN_ERR_LEN];
} ranks_job;

static vdn_tensor *up(vdn_dev *d, const float *host, int64_t rows, int64_t cols, int *fail) {
    if (rows < 1 || *fail) return NULL;
    vdn_tensor *t = vdn_tensor_new2(d, VDN_DT_F32, rows, cols);
    if (!t || (host && vdn_tensor_set(t, host, VDN_DT_F32) != 0)) *fail = 1;
    return t;
}

int vdn_dit_forward_comm_host(const vdn_dit_weights *w, vdn_comm *cm, const float *text,
                              const vdn_step_inputs *in, float *video_v, float *audio_v, int reps,
                              double *seconds) {
    vdn_dev *d = w->dev;
    const vdn_config *c = &w->cfg;
    const vdn_layout *L = in->layout;
    const int pf = c->in_channels * c->patch_t * c->patch_h * c->patch_w;
    vdn_dit_seq s;
    int fail = vdn_dit_seq_init(&s, d, c, L, &in->plan, in->pos) != 0;
    vdn_tensor *tt = up(d, text, L->n_text, c->hidden, &fail);
    vdn_tensor *vx = up(d, in->video_x, L->n_video, pf, &fail);
    vdn_tensor *cx = up(d, in->cond_x, L->n_cond, pf, &fail);
    vdn_tensor *ax = up(d, in->audio_x, L->n_audio, c->audio_channels, &fail);
    vdn_tensor *vv = up(d, NULL, L->n_video, pf, &fail);
    vdn_tensor *av = up(d, NULL, L->n_audio, c->audio_channels, &fail);
    if (!fail) fail = vdn_dit_seq_timesteps(&s, in->tags, in->t_index, in->t_values, in->n_t) != 0;
    /* every rank reaches the collectives; a rank that failed its setup fails the first one */
    int rc = fail ? (cm ? vdn_comm_abort(cm) : -1) : 0;
    /* buffers made once, as a render makes them: the plain forward's, or this rank's shard */
    vdn_dit_buffers *buf = NULL;
    vdn_dit_shard *sh = NULL;
    if (rc == 0 && !cm && !(buf = vdn_dit_buffers_new(w, &s))) rc = -1;
    if (rc == 0 && cm && !(sh = vdn_dit_shard_new(w, &s, cm))) rc = vdn_comm_abort(cm);
    double t0 = 0;
    for (int i = 0; i <= reps && rc == 0; i++) { /* i = 0: the one evaluation, or a warm-up */
        if (i == 1) t0 = vdn_now();
        rc = cm ? vdn_dit_forward_shard(w, &s, sh, tt, vx, cx, ax, vv, av)
                : vdn_dit_forward(w, &s, buf, tt, vx, cx, ax, vv, av);
        if (rc == 0) rc = vdn_dev_sync(d);
    }
    vdn_dit_buffers_free(buf);
    vdn_dit_shard_free(sh);
    if (seconds && reps > 0) *seconds = (vdn_now() - t0) / reps;
    if (rc == 0 && video_v) rc = vdn_tensor_get(vv, video_v);
    if (rc == 0 && av && audio_v) rc = vdn_tensor_get(av, audio_v);
    vdn_tensor *all[] = {tt, vx, cx, ax, vv, av};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        vdn_tensor_free(all[i]);
    if (s.pos) vdn_dit_seq_free(&s);
    return rc;
}

static int rank_forward(int rank, void *arg) {
    ranks_job *j = arg;
    const vdn_dit_weights *w = j->w[rank];
    vdn_comm *cm = vdn_comm_inproc(j->g, rank, w->dev);
    int rc = vdn_dit_forward_comm_host(w, cm, j->text, j->in, j->video_v[rank], j->audio_v[rank], 0,
                                       NULL);
    if (rc)
        snprintf(j->err[rank], VDN_ERR_LEN, "rank %d (%s): %s", rank, vdn_dev_name(w->dev),
                 vdn_dev_error(w->dev));
    vdn_comm_free(cm);
    return rc;
}

int vdn_dit_forward_ranks_host(vdn_dit_weights *const *w, int ranks, const float *text,
                               const vdn_step_inputs *in, float *const *video_v,
                               float *const *audio_v, char *err, size_t errlen) {
    vdn_comm_group *g = vdn_comm_group_new(ranks, err, errlen);
    if (!g) return -1;
    char(*errs)[VDN_ERR_LEN] = vdn_xcalloc((size_t)ranks, sizeof *errs);
    ranks_job j = {w, g, text, in, video_v, audio_v, errs};
    int failed = vdn_comm_run_ranks(ranks, rank_forward, &j);
    if (failed) { /* the first rank's own message, not "another rank failed" */
        int pick = -1;
        for (int r = 0; r < ranks; r++)
            if (errs[r][0] && (pick < 0 || !strstr(errs[r], "another rank"))) {
                if (pick < 0 || strstr(errs[pick], "another rank")) pick = r;
            }
        vdn_fail(err, errlen, "sharded forward over %d ranks: %s", ranks,
                 pick >= 0 ? errs[pick] : "failed");
    }
    free(errs);
    vdn_comm_group_free(g);
    return failed ? -1 : 0;
}

/* ---- P virtual ranks in one address space sharing one copy of everything ---- */

/* t seen from device d (the same memory: host, or one GPU) */
static vdn_tensor *alias(const vdn_tensor *t, vdn_dev *d) {
    if (!t) return NULL;
    vdn_tensor *a = vdn_xmalloc(sizeof *a);
    *a = *t;
    a->dev = d, a->owned = 0;
    return a;
}

typedef struct {
    vdn_dit_weights w;
    vdn_dit_seq s;
    vdn_attn_mask mask;
    vdn_tensor *keep[12]; /* aliases of the seq's and the inputs' tensors */
    int n_keep;
    vdn_tensor **blk; /* aliases of the block weights */
    int n_blk;
} rank_view;

static vdn_tensor *keep(rank_view *v, const vdn_tensor *t, vdn_dev *d) {
    vdn_tensor *a = alias(t, d);
    if (a) v->keep[v->n_keep++] = a;
    return a;
}

/* The weights' tensor members: the run from proj_in_w to rope_inv of vdn_dit_weights and every
 * member of vdn_dit_block are vdn_tensor pointers (dit.h), aliased in place. */
static void alias_ptrs(vdn_tensor **p, int n, rank_view *v, vdn_dev *d) {
    for (int i = 0; i < n; i++)
        if (p[i]) {
            v->blk = realloc(v->blk, sizeof *v->blk * (size_t)(v->n_blk + 1));
            VDN_ASSERT(v->blk);
            p[i] = v->blk[v->n_blk++] = alias(p[i], d);
        }
}

static void view_make(rank_view *v, const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_dev *d) {
    memset(v, 0, sizeof *v);
    v->w = *w;
    v->w.dev = d, v->w.owned = NULL, v->w.n_owned = v->w.cap_owned = 0;
    _Static_assert(sizeof(vdn_dit_block) % sizeof(vdn_tensor *) == 0, "blocks hold tensors only");
    alias_ptrs(&v->w.proj_in_w, (int)(&v->w.rope_inv - &v->w.proj_in_w) + 1, v, d);
    const int per = (int)(sizeof(vdn_dit_block) / sizeof(vdn_tensor *));
    v->w.blocks = vdn_xmalloc(sizeof(vdn_dit_block) * (size_t)w->cfg.layers);
    memcpy(v->w.blocks, w->blocks, sizeof(vdn_dit_block) * (size_t)w->cfg.layers);
    for (int l = 0; l < w->cfg.layers; l++)
        alias_ptrs((vdn_tensor **)&v->w.blocks[l], per, v, d);
    v->w.refiner = NULL; /* the forward does not use the refiner */
    v->s = *s;
    v->s.pos = keep(v, s->pos, d), v->s.ada_idx = keep(v, s->ada_idx, d);
    v->s.t_idx = keep(v, s->t_idx, d), v->s.t_values = keep(v, s->t_values, d);
    v->s.vda_win = keep(v, s->vda_win, d);
    v->mask = *s->mask;
    v->mask.dev = d;
    v->s.mask = &v->mask;
}

static void view_free(rank_view *v) {
    for (int i = 0; i < v->n_blk; i++)
        free(v->blk[i]);
    for (int i = 0; i < v->n_keep; i++)
        free(v->keep[i]);
    free(v->blk);
    free(v->w.blocks);
}

typedef struct {
    vdn_dev *const *devs;
    const vdn_dit_weights *w;
    const vdn_dit_seq *s;
    vdn_comm_group *g;
    const vdn_tensor *in[4]; /* text, video_x, cond_x, audio_x (rank 0's) */
    vdn_tensor *out[2];      /* video_v, audio_v (rank 0's) */
} virtual_job;

static int virtual_rank(int rank, void *arg) {
    virtual_job *j = arg;
    vdn_dev *d = j->devs[rank];
    vdn_comm *cm = vdn_comm_inproc(j->g, rank, d);
    int rc;
    if (rank == 0) {
        rc = vdn_dit_forward_sharded(j->w, j->s, cm, j->in[0], j->in[1], j->in[2], j->in[3],
                                     j->out[0], j->out[1]);
    } else { /* the same weights, layout and inputs seen from this rank's device; own outputs */
        rank_view v;
        view_make(&v, j->w, j->s, d);
        const vdn_tensor *in[4];
        for (int i = 0; i < 4; i++)
            in[i] = keep(&v, j->in[i], d);
        vdn_tensor *out[2] = {NULL, NULL};
        int fail = 0;
        for (int i = 0; i < 2; i++)
            if (j->out[i] &&
                !(out[i] = vdn_tensor_new(d, j->out[i]->dtype, j->out[i]->ndim, j->out[i]->ne)))
                fail = 1;
        rc = fail ? vdn_comm_abort(cm)
                  : vdn_dit_forward_sharded(&v.w, &v.s, cm, in[0], in[1], in[2], in[3], out[0],
                                            out[1]);
        if (rc == 0) rc = vdn_dev_sync(d);
        vdn_tensor_free(out[0]);
        vdn_tensor_free(out[1]);
        view_free(&v);
    }
    vdn_comm_free(cm);
    return rc;
}

int vdn_dit_forward_virtual(vdn_dev *const *devs, int ranks, const vdn_dit_weights *w,
                            const vdn_dit_seq *s, const vdn_tensor *text, const vdn_tensor *video_x,
                            const vdn_tensor *cond_x, const vdn_tensor *audio_x,
                            vdn_tensor *video_v, vdn_tensor *audio_v) {
    if (devs[0] != w->dev)
        return vdn_dev_fail(w->dev, "dit: rank 0 of the virtual ranks is not the weights' device");
    char err[VDN_ERR_LEN];
    vdn_comm_group *g = vdn_comm_group_new(ranks, err, sizeof err);
    if (!g) return vdn_dev_fail(w->dev, "%s", err);
    if (vdn_dev_sync(w->dev) != 0) return -1; /* the inputs are complete before peers read them */
    virtual_job j = {devs, w, s, g, {text, video_x, cond_x, audio_x}, {video_v, audio_v}};
    int failed = vdn_comm_run_ranks(ranks, virtual_rank, &j);
    vdn_comm_group_free(g);
    if (failed && !vdn_dev_error(w->dev)[0])
        return vdn_dev_fail(w->dev, "dit: %d of %d virtual ranks failed", failed, ranks);
    return failed ? -1 : 0;
}
