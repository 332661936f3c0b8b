/* The DiT's activations for one layout and one rank, shared by dit.c (the block), dit_vda.c (the
 * VDN linear branch) and dit_shard.c (the collectives of P > 1). Not public: dit.h is the
 * interface. */
#ifndef VDN_DIT_INTERNAL_H
#define VDN_DIT_INTERNAL_H

#include "comm.h"
#include "dit.h"
#include "op_vda.h"

#define DIT_MAX_T 4 /* distinct timesteps of one evaluation */
/* the defaults of vdn_dit_opts (dit.h): rows of the feed-forward and output-head pieces, heads of
 * the linear branch per pass on one rank */
#define DIT_CHUNK_ROWS 16384
#define DIT_VDA_HEADS 14

struct vdn_dit_buffers {
    vdn_dev *dev;
    /* this rank's share of the forward (spec 6): rows [r0, r0 + nr) of the packed sequence
     * (ceil(S/P) each, the remainder on the last), heads [h0, h0 + nh) (balanced), i.e. channels
     * [c0, c0 + nc). comm NULL: one rank with every row and head, and no collective */
    vdn_comm *comm;
    vdn_split rows, heads, chans; /* rows; heads; heads * head_dim columns */
    int64_t r0, nr, h0, nh, c0, nc;
    int one_lane;             /* vdn_dit_opts.vda_one_lane */
    const atomic_int *cancel; /* vdn_dit_opts.cancel */
    /* rows of this rank (activation dtype unless noted) */
    vdn_tensor *x, *h, *y;    /* [nr, hidden] residual, normalised input, block output */
    vdn_tensor *qkv;          /* [nr, ldq] fused projection */
    vdn_tensor *qr, *kr, *ao; /* [nr, C] q, k after norm + RoPE; attention output */
    vdn_tensor *fh, *fa;      /* [chunk, 2 ffn], [chunk, ffn] */
    vdn_tensor *sgate;        /* F32 [nr, heads] softmax gate (VDN) */
    /* per timestep */
    vdn_tensor *tf, *th, *st; /* F32 [4, freq_dim], [4, time_hidden], [4, time_embed_dim] */
    vdn_tensor *st_act;       /* [4, time_embed_dim] SiLU(temb) in the activation dtype */
    vdn_tensor *ada, *fin;    /* [4, 18 hidden] adaLN table, [4, 2 hidden] final shift/scale */
    /* heads */
    vdn_tensor *hf; /* F32 [min(chunk, max(n_video, n_audio)), hidden] */
    /* the VDN linear branch (plan.linear) on this rank's heads, vda_heads of them per pass
     * (C below = vda_heads hd): nl = F' S rows */
    int vda_heads;
    vdn_tensor *beta;                         /* F32 [nl, heads] */
    vdn_vda_feats feats;                      /* [F' H S, hd] */
    vdn_tensor *means, *dvec, *uvec;          /* F32 [F', hidden], [F', alpha_rank], [F', C] */
    vdn_tensor *alpha;                        /* state [F', every head's hd] */
    vdn_tensor *A, *B, *T, *J, *P, *R, *Slin; /* [F' H hd, hd] */
    vdn_tensor *r;                            /* state [F' H S, hd] */
    vdn_tensor *gpre, *lin;                   /* [nl, C] gate pre-activation, gated branch output */
    /* a pass of fewer than every head of the model reads its decay as one contiguous matrix,
     * alpha_g [F', vda_heads hd]; with several passes (P = 1), lin_all [nl, every head's hd]
     * gathers their outputs for to_out_linear */
    vdn_tensor *lin_all, *alpha_g;
    /* the text state (cfg.text_state) */
    vdn_tensor *beta_t;       /* F32 [n_text, heads] */
    vdn_vda_feats tfeats;     /* [H n_text, hd], no q */
    vdn_tensor *At, *Bt, *S0; /* [H hd, hd] */
    /* P > 1 only (dit_shard.c): every row for own heads, [S, nc] ([S, nh]): raw q, k, v, the
     * softmax gate's logits and beta (Qrh, Krh, Vh, Glh, Bh) filled by the block's one
     * all-to-all, the softmax's q, k and gate (Qh, Kh, Gh) made from them on this rank, the
     * outputs (Aoh, LinH); at P = 1 views of the row-wise tensors stand in for them */
    vdn_tensor *Qh, *Kh, *Vh, *Gh, *Glh, *Aoh, *Qrh, *Krh, *Bh, *LinH;
    vdn_tensor *GD; /* [S, gate_rank]: the output gate's hidden, every row (in the all-to-all) */
    /* the branch's frame means (dit_shard.c shard_alpha): msum F32 [F', hidden] those of the
     * frames this rank holds whole (zero elsewhere), Fsplit [k S, hidden] the k frames a rank
     * boundary cuts, gathered whole from every rank's rows of them (this rank's: Fmine) */
    vdn_tensor *msum, *Fsplit, *Fmine;
    vdn_tensor *Xall, *Hfull; /* [S, hidden]: the final layer's input */
    /* vdn_dit_buffers_virtual: none of the above; the forward runs vranks virtual ranks */
    int vranks;
    vdn_dev **vdevs;
    vdn_dit_opts vopts;
    vdn_tensor **owned;
    int n_owned;
};

/* nr rows of the row-wise buffers, the linear branch's for `heads` heads per pass, the decay
 * alpha always for every head, the pieces chunk_rows long (the split fields left to the caller) */
vdn_dit_buffers *vdn_dit_buffers_make(const vdn_dit_weights *w, const vdn_dit_seq *s, int64_t nr,
                                      int heads, int64_t chunk_rows);
/* a new tensor owned by b (freed with it); sets *fail and returns NULL on failure */
vdn_tensor *vdn_dit_own(vdn_dit_buffers *b, vdn_dtype dt, int64_t rows, int64_t cols, int *fail);
/* t with its innermost dim, or its rows, narrowed to n (0 allowed: a rank without heads) */
vdn_tensor vdn_dit_narrow_cols(const vdn_tensor *t, int64_t n);
vdn_tensor vdn_dit_narrow_rows(const vdn_tensor *t, int64_t n);
/* frames of the linear branch, F' (0: none), and its first packed row */
int vdn_dit_branch_frames(const vdn_dit_seq *s, int64_t *row0);

/* Every row of the sequence for this rank's heads: what the softmax attention and the linear
 * branch read. P > 1: the head-sharded buffers, filled by vdn_dit_heads_in and
 * vdn_dit_heads_softmax; P = 1: views of the row-wise tensors (no copy, no collective). */
typedef struct {
    vdn_tensor q, k, v;          /* [S, nc] after norm + RoPE (q, k), v */
    vdn_tensor gate;             /* F32 [S, nh] softmax gate (VDN with plan.softmax_gate) */
    vdn_tensor ao;               /* [S, nc] attention output */
    vdn_tensor qraw, kraw, beta; /* the branch's: q, k before the norms, beta pre-sigmoid */
    vdn_tensor gd;               /* [S, gate_rank] output gate hidden */
    vdn_tensor h; /* P = 1: [S, hidden] modulated input (the decay's frame means); P > 1: unset,
                   * the decay is made before the fork (vdn_dit_heads_in) */
} vdn_dit_heads;
/* dit_shard.c: the head-sharded buffers of a rank of P > 1 */
int vdn_dit_shard_buffers(vdn_dit_buffers *b, const vdn_dit_weights *w, const vdn_dit_seq *s);
void vdn_dit_heads_views(const vdn_dit_weights *w, const vdn_dit_buffers *buf, const vdn_tensor *h,
                         const vdn_tensor *qkv, vdn_dit_heads *hv);
/* P > 1, the block's collectives before the attention (on lane 0, before the fork): with the
 * linear branch (linear), its decay from the all-reduced frame sums of h into buf->alpha; then
 * the one all-to-all of own rows, every head -> every row, own heads: raw q, k, v, the softmax
 * gate's logits, and with the branch beta's logits and the output gate hidden (all of it) */
int vdn_dit_heads_in(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                     vdn_dit_buffers *buf, const vdn_tensor *h, const vdn_tensor *qkv, int linear);
/* P > 1, after vdn_dit_heads_in (no collective; lane 0 beside the branch): the softmax's q, k
 * (norm + RoPE of the raw ones) and gate (sigmoid of its logits) of own heads on every row */
int vdn_dit_heads_softmax(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                          vdn_dit_buffers *buf, vdn_dit_heads *hv);
/* dit.c: q, k norm + RoPE of rows [r0, r0 + rows) of the sequence, any heads (the widths) */
int vdn_dit_qk_norm_rope(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                         int64_t r0, vdn_tensor *q, vdn_tensor *k, const vdn_tensor *qraw,
                         const vdn_tensor *kraw);
/* the forward over vdn_dit_buffers_virtual's ranks */
int vdn_dit_virtual_forward(const vdn_dit_weights *w, const vdn_dit_seq *s,
                            const vdn_dit_buffers *vb, const vdn_tensor *text,
                            const vdn_tensor *video_x, const vdn_tensor *cond_x,
                            const vdn_tensor *audio_x, vdn_tensor *video_v, vdn_tensor *audio_v);

/* Pieces of the forward (dit.c) */
int vdn_dit_feed_forward(const vdn_dit_block *b, vdn_tensor *h, vdn_tensor *fh, vdn_tensor *fa,
                         vdn_tensor *y, int64_t ffn);
int vdn_dit_time_embed(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_dit_buffers *buf);
/* the block's adaLN table for every (timestep, tag); ada[k]: views of shift/scale/gate msa, mlp */
int vdn_dit_ada_table(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                      vdn_dit_buffers *buf, vdn_tensor ada[6]);
int vdn_dit_final(const vdn_dit_weights *w, const vdn_dit_seq *s, vdn_dit_buffers *buf,
                  vdn_tensor *video_v, vdn_tensor *audio_v);

/* What the linear branch reads, for `heads` consecutive heads (all of them, or a rank's own):
 * branch rows (the F' S video rows) and the prompt rows of the raw projections. */
typedef struct {
    int heads, head0;             /* heads [head0, head0 + heads) of the model */
    vdn_tensor q, k, v, beta_pre; /* [nl, heads hd] x3, [nl, heads] (before the sigmoid) */
    vdn_tensor tk, tv, tbeta_pre; /* prompt rows, same widths (text state) */
    vdn_tensor gpre;              /* [nl, heads hd] output-gate pre-activation */
    const vdn_tensor *alpha;      /* [F', heads hd] decay */
    vdn_tensor *lin;              /* [nl, heads hd] out: the gated, normalised branch */
} vdn_dit_vda_in;
/* the branch of one block for in->heads heads (buffers of buf sized for them) */
int vdn_dit_vda_core(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                     vdn_dit_buffers *buf, const vdn_dit_vda_in *in);
int vdn_dit_vda_alpha(const vdn_dit_block *b, vdn_dit_buffers *buf, const vdn_tensor *hv,
                      int frames);
/* the decay buf->alpha from the frame means already in buf->means */
int vdn_dit_vda_decay(const vdn_dit_block *b, vdn_dit_buffers *buf);
/* a view of items [i0, i0+n) of t's outermost dim (per-channel weights of a head range) */
vdn_tensor vdn_dit_outer_slice(const vdn_tensor *t, int64_t i0, int64_t n);

/* The linear branch of one block on this rank's heads over every branch row, from hv (read
 * nothing else the block writes: it may run on the device's lane 1 beside the softmax), in passes
 * of buf->vda_heads heads, into its output (the head-sharded LinH at P > 1, lin or lin_all at
 * P = 1); no collective (at P > 1 the decay is already made). */
int vdn_dit_branch(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                   vdn_dit_buffers *buf, const vdn_dit_heads *hv);
/* P > 1: the reverse all-to-all of the branch output (the branch's rows only: every rank's rows
 * clamped to them) into the row-wise kr (unused at P > 1), for vdn_dit_branch_out. A collective:
 * every rank, after vdn_dit_branch, before the softmax output's (on lane 1 beside the softmax, or
 * after it with one lane) */
int vdn_dit_branch_back(const vdn_dit_seq *s, vdn_dit_buffers *buf);
/* to_out_linear of the branch output of this rank's rows (P > 1: brought back into kr), added
 * into y ([nr, hidden]) */
int vdn_dit_branch_out(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                       vdn_dit_buffers *buf, vdn_tensor *y);
/* both at P = 1 on buf->h and buf->qkv into buf->y (test_vda.c) */
int vdn_dit_vda_branch(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                       vdn_dit_buffers *buf);

#endif
