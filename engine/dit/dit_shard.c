/* The sharded side of the DiT's one forward (dit.c) over P > 1 ranks (sequence parallelism,
 * spec 6; comm.h): a rank's head-sharded buffers and the collectives, as ops, so it runs on every
 * backend and communicator; and P virtual ranks in one address space. At P = 1 none of this runs:
 * the head-layout views are the row-wise tensors (vdn_dit_heads_views).
 *
 * Rank r owns the packed rows [row0(r), row0(r+1)) (ceil(S/P) each, the remainder on the last) and
 * the heads [head0(r), head0(r+1)) (balanced). Embeddings, the time embedding, the adaLN
 * modulation, the fused projection, to_out, to_out_linear and the FFN run on own rows. Per block,
 * Ulysses style (the paper's 8-GPU inference, both branches sharded by heads):
 *  - the linear branch's decay needs the frame means of the modulated input: each rank takes the
 *    means of the frames it holds whole, all-reduced, and the few frames a rank boundary cuts
 *    are all-gathered whole (not the input gathered; the same bits as one rank, shard_alpha);
 *  - ONE all-to-all (vdn_op_rows_to_cols_parts) moves the raw q, k and v of own rows to every row
 *    of own heads, with the softmax gate's and beta's logits (own heads) and the output gate's
 *    128-wide hidden (every rank gets all of it): the softmax's q, k (norm + RoPE) are made on the
 *    head side from the same raw q, k the linear branch reads, so they cross once;
 *  - the window+anchor softmax and the whole linear branch (features, statistics, states, scans,
 *    readout, epilogue) run over every row for own heads;
 *  - the reverse all-to-alls bring the attention output (every row) and the branch output (the
 *    branch's rows) back to their owners.
 * What a rank receives per block is then the Ulysses floor for a model with two attention outputs
 * (3 C wide forward, 2 C back, of (P - 1)/P of the rows over P) plus the small parts
 * (docs/PERF.md, "Bytes per evaluation"). One all-gather of the residual before the final layer.
 * The block is dit.c's, the branch dit_vda.c's (dit_internal.h). */
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

/* The frames of the branch that a rank boundary cuts (in order, each once; at most P - 1): their
 * rows belong to two ranks or more. The same list on every rank. */
static int split_frames(const vdn_dit_buffers *b, const vdn_dit_seq *s, int *frames) {
    int64_t row0;
    const int Fp = vdn_dit_branch_frames(s, &row0);
    const int64_t T = s->lay.tokens_per_frame;
    int n = 0;
    for (int r = 1; r < b->rows.parts; r++) {
        const int64_t at = b->rows.off[r] - row0; /* a boundary inside a frame of the branch */
        if (at <= 0 || at >= Fp * T || at % T == 0) continue;
        if (n == 0 || frames[n - 1] != (int)(at / T)) frames[n++] = (int)(at / T);
    }
    return n;
}

/* Each rank's rows of those frames (ns of them, frames[]) as a split of their ns S rows laid end
 * to end: a rank meets cut frames only at its two ends (a frame inside its rows has no boundary
 * in it), the end of one frame and the start of the next, so its rows are one range there. */
static void cut_rows(const vdn_dit_buffers *b, const vdn_dit_seq *s, const int *frames, int ns,
                     vdn_split *cs) {
    int64_t row0;
    vdn_dit_branch_frames(s, &row0);
    const int64_t T = s->lay.tokens_per_frame;
    cs->parts = b->rows.parts, cs->off[0] = 0;
    for (int q = 0; q < b->rows.parts; q++) {
        int64_t n = 0;
        for (int j = 0; j < ns; j++) {
            const int64_t f0 = row0 + frames[j] * T, a = f0 > b->rows.off[q] ? f0 : b->rows.off[q],
                          e = f0 + T < b->rows.off[q + 1] ? f0 + T : b->rows.off[q + 1];
            n += e > a ? e - a : 0;
        }
        cs->off[q + 1] = cs->off[q] + n;
    }
}

/* the rows of the branch's frames this rank owns, [*i0, *i1) (empty: i1 <= i0), and the
 * branch's first row */
static void own_branch_rows(const vdn_dit_buffers *b, const vdn_dit_seq *s, int64_t *row0,
                            int64_t *i0, int64_t *i1) {
    const int Fp = vdn_dit_branch_frames(s, row0);
    const int64_t end = *row0 + (int64_t)Fp * s->lay.tokens_per_frame;
    *i0 = *row0 > b->r0 ? *row0 : b->r0, *i1 = end < b->r0 + b->nr ? end : b->r0 + b->nr;
}

int vdn_dit_shard_buffers(vdn_dit_buffers *b, const vdn_dit_weights *w, const vdn_dit_seq *s) {
    const vdn_config *c = &w->cfg;
    const vdn_dtype A = vdn_dev_act_dtype(w->dev), F32 = VDN_DT_F32;
    const int64_t S = s->lay.n_rows, nc1 = b->nc ? b->nc : 1, nh1 = b->nh ? b->nh : 1;
    int fail = 0;
    b->Qh = vdn_dit_own(b, A, S, nc1, &fail), b->Kh = vdn_dit_own(b, A, S, nc1, &fail);
    b->Qrh = vdn_dit_own(b, A, S, nc1, &fail), b->Krh = vdn_dit_own(b, A, S, nc1, &fail);
    b->Vh = vdn_dit_own(b, A, S, nc1, &fail), b->Aoh = vdn_dit_own(b, A, S, nc1, &fail);
    if (c->has_vdn) {
        b->Glh = vdn_dit_own(b, A, S, nh1, &fail);
        b->Gh = vdn_dit_own(b, F32, S, nh1, &fail);
    }
    b->Xall = vdn_dit_own(b, A, S, c->hidden, &fail);
    b->Hfull = vdn_dit_own(b, A, S, c->hidden, &fail);
    int64_t row0;
    const int Fp = vdn_dit_branch_frames(s, &row0);
    if (c->has_vdn && s->plan.linear && Fp > 0) {
        const int64_t T = s->lay.tokens_per_frame;
        b->Bh = vdn_dit_own(b, A, S, nh1, &fail), b->LinH = vdn_dit_own(b, A, S, nc1, &fail);
        b->GD = vdn_dit_own(b, A, S, c->gate_rank, &fail);
        b->alpha_g = vdn_dit_own(b, vdn_vda_state_dtype(w->dev), Fp, nc1, &fail);
        /* the frame means: own whole frames' (zero elsewhere), the cut frames' rows */
        b->msum = vdn_dit_own(b, F32, Fp, c->hidden, &fail);
        if (!fail && vdn_tensor_fill(b->msum, 0) != 0) fail = 1;
        int split[VDN_COMM_MAX_RANKS];
        const int ns = split_frames(b, s, split);
        if (ns) {
            vdn_split cs;
            cut_rows(b, s, split, ns, &cs);
            const int64_t mine = vdn_split_len(&cs, b->comm->rank);
            b->Fsplit = vdn_dit_own(b, A, (int64_t)ns * T, c->hidden, &fail);
            b->Fmine = vdn_dit_own(b, A, mine ? mine : 1, c->hidden, &fail);
        }
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
    hv->qraw = vdn_dit_narrow_cols(buf->Qrh, nc), hv->kraw = vdn_dit_narrow_cols(buf->Krh, nc);
    if (buf->Gh) hv->gate = vdn_dit_narrow_cols(buf->Gh, nh);
    if (buf->Bh) { /* the linear branch's; its decay is made before (vdn_dit_heads_in) */
        hv->beta = vdn_dit_narrow_cols(buf->Bh, nh);
        hv->gd = *buf->GD;
        hv->gd.owned = 0;
    }
}

/* The branch's decay from the frame means of every rank's rows, the same bits as one rank's:
 * each rank takes the means of the frames it holds whole (zeros elsewhere: the all-reduce adds
 * exact zeros); the frames a rank boundary cuts are put together whole on every rank (an
 * all-gather of each rank's rows of them) and their means taken there. */
static int shard_alpha(const vdn_dit_block *b, const vdn_dit_seq *s, vdn_dit_buffers *buf,
                       const vdn_tensor *h) {
    int64_t row0, i0, i1;
    own_branch_rows(buf, s, &row0, &i0, &i1);
    const int64_t T = s->lay.tokens_per_frame;
    if (i1 > i0) {
        const int64_t wa = (i0 - row0 + T - 1) / T, wb = (i1 - row0) / T; /* whole frames */
        if (wb > wa) {
            vdn_tensor m = vdn_view_rows(buf->msum, wa, wb - wa),
                       x = vdn_view_rows(h, row0 + wa * T - buf->r0, (wb - wa) * T);
            OK(vdn_op_frame_means(&m, &x, (int)(wb - wa)));
        }
    }
    OK(vdn_tensor_copy(buf->means, buf->msum));
    OK(vdn_op_all_reduce_sum(buf->comm, buf->means));
    int split[VDN_COMM_MAX_RANKS];
    const int ns = split_frames(buf, s, split);
    if (ns == 0) return vdn_dit_vda_decay(b, buf);
    vdn_split cs; /* own rows of the cut frames into Fmine, every rank's gathered in Fsplit */
    cut_rows(buf, s, split, ns, &cs);
    const int64_t at = cs.off[buf->comm->rank];
    for (int j = 0; j < ns; j++) {
        const int64_t f0 = row0 + split[j] * T, a = f0 > i0 ? f0 : i0,
                      e = f0 + T < i1 ? f0 + T : i1;
        if (e <= a) continue;
        vdn_tensor dst = vdn_view_rows(buf->Fmine, j * T + (a - f0) - at, e - a),
                   src = vdn_view_rows(h, a - buf->r0, e - a);
        OK(vdn_tensor_copy(&dst, &src));
    }
    vdn_tensor mine = vdn_dit_narrow_rows(buf->Fmine, vdn_split_len(&cs, buf->comm->rank));
    OK(vdn_op_all_gather_rows(buf->comm, buf->Fsplit, &mine, &cs));
    for (int j = 0; j < ns; j++) {
        vdn_tensor m = vdn_view_rows(buf->means, split[j], 1),
                   x = vdn_view_rows(buf->Fsplit, j * T, T);
        OK(vdn_op_frame_means(&m, &x, 1));
    }
    return vdn_dit_vda_decay(b, buf);
}

int vdn_dit_heads_in(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                     vdn_dit_buffers *buf, const vdn_tensor *h, const vdn_tensor *qkv, int linear) {
    const vdn_config *c = &w->cfg;
    const int64_t H = c->heads, C = H * c->head_dim;
    if (linear) OK(shard_alpha(b, s, buf, h));
    vdn_tensor q = vdn_view_cols(qkv, 0, C), k = vdn_view_cols(qkv, C, C),
               v = vdn_view_cols(qkv, 2 * C, C);
    vdn_tensor Qr = vdn_dit_narrow_cols(buf->Qrh, buf->nc),
               Kr = vdn_dit_narrow_cols(buf->Krh, buf->nc),
               Vh = vdn_dit_narrow_cols(buf->Vh, buf->nc);
    vdn_comm_part parts[VDN_COMM_MAX_PARTS] = {
        {&Qr, &q, &buf->chans}, {&Kr, &k, &buf->chans}, {&Vh, &v, &buf->chans}};
    int n = 3;
    vdn_tensor gl, Gl, beta, Bh, gd;
    if (c->has_vdn && s->plan.softmax_gate) { /* the sigmoid is taken on the head side */
        gl = vdn_view_cols(qkv, w->col_sgate, H), Gl = vdn_dit_narrow_cols(buf->Glh, buf->nh);
        parts[n++] = (vdn_comm_part){&Gl, &gl, &buf->heads};
    }
    if (linear) {
        beta = vdn_view_cols(qkv, w->col_beta, H), Bh = vdn_dit_narrow_cols(buf->Bh, buf->nh);
        gd = vdn_view_cols(qkv, w->col_gate_down, c->gate_rank);
        parts[n++] = (vdn_comm_part){&Bh, &beta, &buf->heads};
        parts[n++] = (vdn_comm_part){buf->GD, &gd, NULL}; /* every rank: all 128 columns */
    }
    return vdn_op_rows_to_cols_parts(buf->comm, parts, n, &buf->rows);
}

int vdn_dit_heads_softmax(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                          vdn_dit_buffers *buf, vdn_dit_heads *hv) {
    if (buf->nh == 0) return 0; /* more ranks than heads */
    OK(vdn_dit_qk_norm_rope(w, b, s, 0, &hv->q, &hv->k, &hv->qraw, &hv->kraw));
    if (!(w->cfg.has_vdn && s->plan.softmax_gate)) return 0;
    vdn_tensor Gl = vdn_dit_narrow_cols(buf->Glh, buf->nh);
    return vdn_op_act(&hv->gate, &Gl, VDN_ACT_SIGMOID);
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
