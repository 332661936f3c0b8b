/* The DiT's activations for one layout, shared by dit.c (blocks) and dit_vda.c (the VDN linear
 * branch). Not public: dit.h is the interface. */
#ifndef VDN_DIT_INTERNAL_H
#define VDN_DIT_INTERNAL_H

#include "dit.h"
#include "op_vda.h"

#define DIT_MAX_T 4 /* distinct timesteps of one evaluation */

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
    /* the text state (cfg.text_state) */
    vdn_tensor *beta_t;       /* F32 [n_text, heads] */
    vdn_vda_feats tfeats;     /* [H n_text, hd], no q */
    vdn_tensor *At, *Bt, *S0; /* [H hd, hd] */
    vdn_tensor **owned;
    int n_owned;
};

/* The linear branch of one block on the modulated input buf->h and the fused projection
 * buf->qkv; adds to_out_linear(branch) into buf->y's video rows. */
int vdn_dit_vda_branch(const vdn_dit_weights *w, const vdn_dit_block *b, const vdn_dit_seq *s,
                       vdn_dit_buffers *buf);

#endif
