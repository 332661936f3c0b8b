/* What encoder.c and encoder_pictures.c share: the encoder's state and the steps of a run. Only
 * those two files include it. */
#ifndef VDN_TEXT_ENCODER_INTERNAL_H
#define VDN_TEXT_ENCODER_INTERNAL_H

#include "encoder.h"
#include "safetensors.h"
#include "vision.h"
#include "vision_preprocess.h"

/* One decoder layer's weights. q/k/v are stacked into one [q + k + v, hidden] matrix and
 * gate/up into one [2 x intermediate, hidden] (gate first), so each is one GEMM. The four
 * Linears are float (the device's weight dtype) or, at fp8 precision, e4m3 carrying row scales;
 * the norms' weights are always float. */
enum { W_QKV, W_O, W_GATE_UP, W_DOWN, N_LIN };

typedef struct {
    vdn_tensor *in_norm, *q_norm, *k_norm, *post_norm;
    vdn_tensor *lin[N_LIN];   /* [out, in] */
    vdn_tensor *scale[N_LIN]; /* fp8: the F32 row scales lin[i]->scale points into; else NULL */
} enc_layer;

struct vdn_text_encoder {
    vdn_text_config cfg;
    int layer; /* hidden_states[layer]: this many decoder layers run */
    vdn_precision precision;
    int n_fp8; /* Linears held in fp8 */
    vdn_dev *dev;
    vdn_st_set *st;
    const vdn_st_entry *embed; /* [vocab, hidden] in the mapping */
    const vdn_st_file *embed_file;
    /* where the prompt's rows come from: the mapping's table, or random weights' own rows
     * (a table of rand_rows rows, token i reading row i % rand_rows) */
    const uint8_t *table;
    vdn_dtype table_dt;
    int64_t table_rows;
    uint16_t *rand_table; /* random weights: bf16 [table_rows, hidden], owned */
    enc_layer *layers;
    vdn_tensor *inv_freq;  /* F32 [head_dim / 2] */
    struct enc_acts *acts; /* the last run's activations, kept for the next of the same length */
    int acts_n;
    char identity[65];
    /* pictures: the vision tower and the processor's settings, read on the first picture */
    char dir[4096]; /* the text_encoder/ folder ("" for random weights) */
    int vision_loaded;
    vdn_vision_config vcfg;
    vdn_vision_proc proc;
    vdn_vision *vision;
    vdn_text_run_opts run; /* vdn_text_encoder_set_run_opts */
};

/* Activations of one run, in the device's activation dtype (fp32 on the CPU, bf16 on a GPU as
 * the released model runs): h is the residual stream, which the o and down projections
 * accumulate into; q/k/v and gate/up are column views of the fused GEMMs' outputs. */
typedef struct enc_acts {
    vdn_tensor *h, *x, *qkv, *qr, *kr, *att, *gu, *act, *pos;
    vdn_attn_mask *mask;
    int picture_pos; /* pos holds a picture run's positions, not the text ones */
} enc_acts;

/* 0, or -1 naming the limit (empty, too long, an id outside the vocabulary) */
int vdn_enc_check_ids(const vdn_text_encoder *e, const int32_t *ids, int n, char *err,
                      size_t errlen);
/* e->acts for n rows (kept from the last run when n is the same) */
int vdn_enc_acts_for(vdn_text_encoder *e, int n);
/* the prompt's rows of the embedding table into h */
int vdn_enc_embed(vdn_text_encoder *e, const int32_t *ids, int n, vdn_tensor *h);
/* one decoder layer on a->h; rope: the positions' layout */
int vdn_enc_run_layer(vdn_text_encoder *e, const enc_layer *L, enc_acts *a, const vdn_rope *rope);
/* the device's error into err, the activations freed; -1 */
int vdn_enc_run_failed(vdn_text_encoder *e, char *err, size_t errlen);
/* Before decoder layer l: the test delay's share, then the cancel flag. 0 go on; -1 cancelled,
 * said in err ("text encoder: cancelled before layer l + 1 of L") with the activations freed. */
int vdn_enc_layer_gate(vdn_text_encoder *e, int l, char *err, size_t errlen);

#endif
