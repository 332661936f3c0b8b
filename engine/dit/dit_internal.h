/* The DiT's activations for one layout, shared by dit.c (blocks) and dit_vda.c (the VDN linear
 * branch). Not public: dit.h is the interface. */
#ifndef VDN_DIT_INTERNAL_H
#define VDN_DIT_INTERNAL_H

#include "dit.h"
#include "op_vda.h"

#define DIT_MAX_T 4 /* distinct timesteps of one evaluation */
/* rows of the feed-forward and output-head buffers: those run in pieces of at most this many
 * rows (dit.c), which keeps ~7 GB of inner activations off the device at the H3 workload */
#define DIT_CHUNK_ROWS 16384
/* heads of the linear branch per pass in the plain forward (dit_vda.c), at most: the largest
 * divisor of the head count not above it (H3: 14, four passes) */
#define DIT_VDA_HEADS 14

struct vdn_dit_buffers {
    vdn_dev *dev;
    /* rows of the packed sequence (activation dtype unless noted) */
    vdn_tensor *x, *h, *y;    /* [n, hidden] residual, normalised input, block output */
    vdn_tensor *qkv;          /* [n, ldq] fused projection */
    vdn_tensor *qr, *kr, *ao; /* [n, C] q, k after norm + RoPE; attention output */
    vdn_tensor *fh, *fa;      /* [n, 2 ffn], [n, ffn] */
    vdn_tensor *sgate;        /* F32 [n, heads] softmax gate (VDN) */
    /* per timestep */
    vdn_tensor *tf, *th, *st; /* F32 [4, freq_dim], [4, time_hidden], [4, time_embed_dim] */
    vdn_tensor *st_act;       /* [4, time_embed_dim] SiLU(temb) in the activation dtype */
    vdn_tensor *ada, *fin;    /* [4, 18 hidden] adaLN table, [4, 2 hidden] final shift/scale */
    /* heads */
    vdn_tensor *hf; /* F32 [max(n_video, n_audio), hidden] */
    /* the VDN linear branch (plan.linear): nl = F' S rows */
    vdn_tensor *beta;                         /* F32 [nl, heads] */
    vdn_vda_feats feats;                      /* [F' H S, hd] */
    vdn_tensor *means, *dvec, *uvec;          /* F32 [F', hidden], [F', alpha_rank], [F', C] */
    vdn_tensor *alpha;                        /* state [F', C] */
    vdn_tensor *A, *B, *T, *J, *P, *R, *Slin; /* [F' H hd, hd] */
    vdn_tensor *r;                            /* state [F' H S, hd] */
    vdn_tensor *gpre, *lin;                   /* [nl, C] gate pre-activation, gated branch output */
    /* the plain forward runs the branch vda_heads heads at a time (C above = vda_heads hd): the
     * per-head buffers of all 56 H3 heads at once are 15 GB; lin_all [nl, every head's hd]
     * gathers the groups' outputs, alpha_g [F', vda_heads hd] holds a group's decay. 0: all
     * heads at once (the sharded forward: a rank's own heads) */
    int vda_heads;
    vdn_tensor *lin_all, *alpha_g;
    /* the text state (cfg.text_state) */
    vdn_tensor *beta_t;       /* F32 [n_text, heads] */
    vdn_vda_feats tfeats;     /* [H n_text, hd], no q */
    vdn_tensor *At, *Bt, *S0; /* [H hd, hd] */
    vdn_tensor **owned;
    int n_owned;
};

vdn_dit_buffers *vdn_dit_buffers_make(const vdn_dit_weights *w, const vdn_dit_seq *s, int64_t n,
                                      int heads);
/* a new tensor owned by b (freed with it); sets *fail and returns NULL on failure */
vdn_tensor *vdn_dit_own(vdn_dit_buffers *b, vdn_dtype dt, int64_t rows, int64_t cols, int *fail);

/* Pieces shared by the plain forward (dit.c) and the sharded one (dit_shard.c) */
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
/* a view of items [i0, i0+n) of t's outermost dim (per-channel weights of a head range) */
vdn_tensor vdn_dit_outer_slice(const vdn_tensor *t, int64_t i0, int64_t n);

/* The linear branch of one block on the modulated input buf->h and the fused projection
 * buf->qkv: vdn_dit_vda_lin leaves the gated, normalised branch in buf->lin (buf->lin_all when
 * the heads go in groups), reading nothing else the block writes, so that it can run on the
 * device's lane 1 beside the softmax attention; vdn_dit_vda_out then adds to_out_linear of it
 * into buf->y's video rows; vdn_dit_vda_branch is both. */
int vdn_dit_vda_lin(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                    vdn_dit_buffers *buf);
int vdn_dit_vda_out(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                    vdn_dit_buffers *buf);
int vdn_dit_vda_branch(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                       vdn_dit_buffers *buf);
/* Whether the branch runs on lane 1 of the device (op.h, lanes) beside the softmax attention,
 * forked once its inputs are queued and joined before its output is added (the default), or,
 * with VDN_VDA_STREAM=0 in the environment, after the softmax on one lane (for measuring the
 * overlap; on the CPU both give the same bits). */
int vdn_dit_vda_side(void);

#endif
