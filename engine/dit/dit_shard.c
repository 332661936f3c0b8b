/* The sharded side of the DiT's one forward (dit.c) over P > 1 ranks (sequence parallelism,
 * spec 6; comm.h): a rank's head-sharded buffers and the collectives, as ops, so it runs on every
 * backend and communicator; and P virtual ranks in one address space. At P = 1 none of this runs:
 * the head-layout views are the row-wise tensors (vdn_dit_heads_views).
 *
 * Rank r owns the packed rows [row0(r), row0(r+1)) (ceil(S/P) each, the remainder on the last) and
 * the heads [head0(r), head0(r+1)) (balanced). Embeddings, the time embedding, the adaLN
 * modulation, QKV, the q/k norms + RoPE, to_out, to_out_linear and the FFN run on own rows; one
 * all-to-all per block moves q, k, v (+ the softmax gate, and for the linear branch raw q, k and
 * beta) to the head-sharded layout, where the window+anchor softmax and the VDA linear branch run
 * over every row for own heads; one reverse all-to-all (two with the linear branch) brings the
 * outputs back. The branch's decay needs frame means of the modulated input and its output gate
 * the 128-wide gate hidden of every row: both are all-gathered. One all-gather of the residual
 * before the final layer. The block is dit.c's, the branch dit_vda.c's (dit_internal.h). */
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

vdn_tensor vdn_dit_narrow_cols(const vdn_tensor *t, int64_t n) {
    vdn_tensor v = *t;
    v.owned = 0;
    v.ne[v.ndim - 1] = n;
    return v;
}

vdn_tensor vdn_dit_narrow_rows(const vdn_tensor *t, int64_t n) {
    vdn_tensor v = *t;
    v.owned = 0;
    v.ne[0] = n;
    return v;
}

int vdn_dit_shard_buffers(vdn_dit_buffers *b, const vdn_dit_weights *w, const vdn_dit_seq *s) {
    const vdn_config *c = &w->cfg;
    const vdn_dtype A = vdn_dev_act_dtype(w->dev), F32 = VDN_DT_F32;
    const int64_t S = s->lay.n_rows, nc1 = b->nc ? b->nc : 1, nh1 = b->nh ? b->nh : 1;
    int fail = 0;
    b->Qh = vdn_dit_own(b, A, S, nc1, &fail), b->Kh = vdn_dit_own(b, A, S, nc1, &fail);
    b->Vh = vdn_dit_own(b, A, S, nc1, &fail), b->Aoh = vdn_dit_own(b, A, S, nc1, &fail);
    b->Gh = vdn_dit_own(b, F32, S, nh1, &fail);
    b->Xall = vdn_dit_own(b, A, S, c->hidden, &fail);
    b->Hfull = vdn_dit_own(b, A, S, c->hidden, &fail);
    int64_t row0;
    const int Fp = vdn_dit_branch_frames(s, &row0);
    if (c->has_vdn && s->plan.linear && Fp > 0) {
        b->Qrh = vdn_dit_own(b, A, S, nc1, &fail), b->Krh = vdn_dit_own(b, A, S, nc1, &fail);
        b->Bh = vdn_dit_own(b, A, S, nh1, &fail), b->LinH = vdn_dit_own(b, A, S, nc1, &fail);
        b->GD = vdn_dit_own(b, A, S, c->gate_rank, &fail);
        b->Hall = vdn_dit_own(b, A, S, c->hidden, &fail);
        b->alpha_g = vdn_dit_own(b, vdn_vda_state_dtype(w->dev), Fp, nc1, &fail);
    }
    return fail ? -1 : 0;
}

void vdn_dit_heads_views(const vdn_dit_weights *w, const vdn_dit_buffers *buf, const vdn_tensor *h,
                         const vdn_tensor *qkv, vdn_dit_heads *hv) {
    const vdn_config *c = &w->cfg;
    const int64_t H = c->heads, C = H * c->head_dim, nr = buf->nr, nc = buf->nc, nh = buf->nh;
    memset(hv, 0, sizeof *hv);
    if (!buf->comm) { /* P = 1: the row-wise tensors are already every row of every head */
        hv->q = vdn_dit_narrow_rows(buf->qr, nr), hv->k = vdn_dit_narrow_rows(buf->kr, nr);
        hv->v = vdn_view_cols(qkv, 2 * C, C), hv->ao = vdn_dit_narrow_rows(buf->ao, nr);
        if (buf->sgate) hv->gate = vdn_dit_narrow_rows(buf->sgate, nr);
        hv->qraw = vdn_view_cols(qkv, 0, C), hv->kraw = vdn_view_cols(qkv, C, C);
        if (c->has_vdn) {
            hv->beta = vdn_view_cols(qkv, w->col_beta, H);
            hv->gd = vdn_view_cols(qkv, w->col_gate_down, c->gate_rank);
        }
        hv->h = *h;
        return;
    }
    hv->q = vdn_dit_narrow_cols(buf->Qh, nc), hv->k = vdn_dit_narrow_cols(buf->Kh, nc);
    hv->v = vdn_dit_narrow_cols(buf->Vh, nc), hv->ao = vdn_dit_narrow_cols(buf->Aoh, nc);
    hv->gate = vdn_dit_narrow_cols(buf->Gh, nh);
    if (buf->Qrh) { /* the linear branch's */
        hv->qraw = vdn_dit_narrow_cols(buf->Qrh, nc), hv->kraw = vdn_dit_narrow_cols(buf->Krh, nc);
        hv->beta = vdn_dit_narrow_cols(buf->Bh, nh);
        hv->h = *buf->Hall, hv->gd = *buf->GD;
        hv->h.owned = hv->gd.owned = 0;
    }
}

int vdn_dit_heads_softmax(const vdn_dit_weights *w, vdn_dit_buffers *buf, const vdn_tensor *qr,
                          const vdn_tensor *kr, const vdn_tensor *qkv, const vdn_tensor *sg) {
    const int64_t C = (int64_t)w->cfg.heads * w->cfg.head_dim;
    vdn_comm *cm = buf->comm;
    vdn_tensor Qh = vdn_dit_narrow_cols(buf->Qh, buf->nc),
               Kh = vdn_dit_narrow_cols(buf->Kh, buf->nc),
               Vh = vdn_dit_narrow_cols(buf->Vh, buf->nc), v = vdn_view_cols(qkv, 2 * C, C);
    OK(vdn_op_rows_to_cols(cm, &Qh, qr, &buf->rows, &buf->chans));
    OK(vdn_op_rows_to_cols(cm, &Kh, kr, &buf->rows, &buf->chans));
    OK(vdn_op_rows_to_cols(cm, &Vh, &v, &buf->rows, &buf->chans));
    if (!sg) return 0;
    vdn_tensor Gh = vdn_dit_narrow_cols(buf->Gh, buf->nh);
    return vdn_op_rows_to_cols(cm, &Gh, sg, &buf->rows, &buf->heads);
}

/* what the linear branch on own heads reads besides v (moved with the softmax's): raw q, k and
 * beta of own rows to own heads, every row's modulated input (frame means for alpha) and
 * 128-wide gate hidden */
int vdn_dit_heads_branch(const vdn_dit_weights *w, vdn_dit_buffers *buf, const vdn_tensor *h,
                         const vdn_tensor *qkv) {
    const vdn_config *c = &w->cfg;
    const int64_t H = c->heads, C = H * c->head_dim;
    vdn_comm *cm = buf->comm;
    vdn_tensor q = vdn_view_cols(qkv, 0, C), k = vdn_view_cols(qkv, C, C);
    vdn_tensor beta = vdn_view_cols(qkv, w->col_beta, H);
    vdn_tensor Qrh = vdn_dit_narrow_cols(buf->Qrh, buf->nc),
               Krh = vdn_dit_narrow_cols(buf->Krh, buf->nc);
    vdn_tensor Bh = vdn_dit_narrow_cols(buf->Bh, buf->nh);
    OK(vdn_op_rows_to_cols(cm, &Qrh, &q, &buf->rows, &buf->chans));
    OK(vdn_op_rows_to_cols(cm, &Krh, &k, &buf->rows, &buf->chans));
    OK(vdn_op_rows_to_cols(cm, &Bh, &beta, &buf->rows, &buf->heads));
    vdn_tensor gd = vdn_view_cols(qkv, w->col_gate_down, c->gate_rank);
    OK(vdn_op_all_gather_rows(cm, buf->Hall, h, &buf->rows));
    return vdn_op_all_gather_rows(cm, buf->GD, &gd, &buf->rows);
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
    const vdn_dit_buffers *vb;
    const vdn_dit_weights *w;
    const vdn_dit_seq *s;
    vdn_comm_group *g;
    const vdn_tensor *in[4]; /* text, video_x, cond_x, audio_x (rank 0's) */
    vdn_tensor *out[2];      /* video_v, audio_v (rank 0's) */
} virtual_job;

/* one rank's forward with its own buffers, made for this evaluation */
static int rank_forward(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_comm *cm,
                        const vdn_dit_opts *opts, const vdn_tensor *const in[4],
                        vdn_tensor *const out[2]) {
    vdn_dit_buffers *buf = vdn_dit_buffers_new(w, s, cm, opts);
    if (!buf) return vdn_comm_abort(cm);
    int rc = vdn_dit_forward(w, s, buf, in[0], in[1], in[2], in[3], out[0], out[1]);
    vdn_dit_buffers_free(buf);
    return rc;
}

static int virtual_rank(int rank, void *arg) {
    virtual_job *j = arg;
    vdn_dev *d = j->vb->vdevs[rank];
    vdn_comm *cm = vdn_comm_inproc(j->g, rank, d);
    int rc;
    if (rank == 0) {
        rc = rank_forward(j->w, j->s, cm, &j->vb->vopts, j->in, j->out);
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
        rc = fail ? vdn_comm_abort(cm) : rank_forward(&v.w, &v.s, cm, &j->vb->vopts, in, out);
        if (rc == 0) rc = vdn_dev_sync(d);
        vdn_tensor_free(out[0]);
        vdn_tensor_free(out[1]);
        view_free(&v);
    }
    vdn_comm_free(cm);
    return rc;
}

vdn_dit_buffers *vdn_dit_buffers_virtual(const vdn_dit_weights *w, vdn_dev *const *devs, int ranks,
                                         const vdn_dit_opts *opts) {
    if (ranks < 1 || ranks > VDN_COMM_MAX_RANKS || devs[0] != w->dev) {
        vdn_dev_fail(w->dev,
                     "dit: %d virtual ranks with rank 0 on %s, expected 1..%d ranks with "
                     "rank 0 on the weights' device %s",
                     ranks, vdn_dev_name(devs[0]), VDN_COMM_MAX_RANKS, vdn_dev_name(w->dev));
        return NULL;
    }
    vdn_dit_buffers *b = vdn_xcalloc(1, sizeof *b);
    b->dev = w->dev, b->vranks = ranks;
    b->vdevs = vdn_xmalloc(sizeof *b->vdevs * (size_t)ranks);
    memcpy(b->vdevs, devs, sizeof *b->vdevs * (size_t)ranks);
    if (opts) b->vopts = *opts;
    return b;
}

int vdn_dit_virtual_forward(const vdn_dit_weights *w, const vdn_dit_seq *s,
                            const vdn_dit_buffers *vb, const vdn_tensor *text,
                            const vdn_tensor *video_x, const vdn_tensor *cond_x,
                            const vdn_tensor *audio_x, vdn_tensor *video_v, vdn_tensor *audio_v) {
    const int ranks = vb->vranks;
    char err[VDN_ERR_LEN];
    vdn_comm_group *g = vdn_comm_group_new(ranks, err, sizeof err);
    if (!g) return vdn_dev_fail(w->dev, "%s", err);
    if (vdn_dev_sync(w->dev) != 0) { /* the inputs are complete before peers read them */
        vdn_comm_group_free(g);
        return -1;
    }
    virtual_job j = {vb, w, s, g, {text, video_x, cond_x, audio_x}, {video_v, audio_v}};
    int failed = vdn_comm_run_ranks(ranks, virtual_rank, &j);
    vdn_comm_group_free(g);
    if (failed && !vdn_dev_error(w->dev)[0])
        return vdn_dev_fail(w->dev, "dit: %d of %d virtual ranks failed", failed, ranks);
    return failed ? -1 : 0;
}
