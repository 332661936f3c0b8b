/* The Qwen3-VL text encoder over the op layer (see encoder.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cancel.h"
#include "encoder.h"
#include "encoder_internal.h"
#include "safetensors.h"
#include "vdn_util.h"
#include "vision.h"

static const char *const lin_name[N_LIN] = {"fused q/k/v", "o_proj", "fused gate/up", "down_proj"};

/* ---- loading ---- */

static const vdn_st_entry *find_checked(vdn_text_encoder *e, int layer, const char *what, int ndim,
                                        int64_t d0, int64_t d1, const vdn_st_file **file, char *err,
                                        size_t errlen) {
    char name[256];
    vdn_text_weight_name(name, sizeof name, layer, what);
    const vdn_st_file *f;
    const vdn_st_entry *t = vdn_st_set_find(e->st, name, &f);
    if (!t) {
        vdn_fail(err, errlen, "text encoder: tensor %s is missing from the checkpoint", name);
        return NULL;
    }
    int64_t shape[2] = {d0, d1};
    if (vdn_st_check_shape(f, t, ndim, shape, err, errlen)) return NULL;
    if (!vdn_dtype_is_float(t->dtype)) {
        vdn_fail(err, errlen, "%s: tensor %s: dtype %s, expected BF16, F16 or F32", vdn_st_path(f),
                 name, vdn_dtype_name(t->dtype));
        return NULL;
    }
    if (file) *file = f;
    return t;
}

/* A weight onto the device, in the device's weight dtype. */
static vdn_tensor *upload(vdn_text_encoder *e, int layer, const char *what, int ndim, int64_t d0,
                          int64_t d1, char *err, size_t errlen) {
    const vdn_st_entry *t = find_checked(e, layer, what, ndim, d0, d1, NULL, err, errlen);
    if (!t) return NULL;
    vdn_dtype dt = vdn_dev_act_dtype(e->dev);
    int64_t ne[2] = {d0, d1};
    vdn_tensor *w = vdn_tensor_new(e->dev, dt, ndim, ne);
    if (!w || vdn_tensor_set(w, t->data, t->dtype)) {
        vdn_fail(err, errlen, "text encoder: uploading %s of layer %d: %s", what, layer,
                 vdn_dev_error(e->dev));
        vdn_tensor_free(w);
        return NULL;
    }
    return w;
}

/* Several released weights stacked by rows into one device matrix (a fused projection). */
static vdn_tensor *upload_stacked(vdn_text_encoder *e, int layer, const char *const *whats,
                                  const int64_t *rows, int n, int64_t cols, char *err,
                                  size_t errlen) {
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += rows[i];
    vdn_dtype dt = vdn_dev_act_dtype(e->dev);
    vdn_tensor *w = vdn_tensor_new2(e->dev, dt, total, cols);
    if (!w) {
        vdn_fail(err, errlen, "text encoder: layer %d: %s", layer, vdn_dev_error(e->dev));
        return NULL;
    }
    for (int i = 0, r0 = 0; i < n; r0 += (int)rows[i++]) {
        const vdn_st_entry *t =
            find_checked(e, layer, whats[i], 2, rows[i], cols, NULL, err, errlen);
        vdn_tensor part = vdn_view_rows(w, r0, rows[i]);
        if (!t || vdn_tensor_set(&part, t->data, t->dtype)) {
            if (t)
                vdn_fail(err, errlen, "text encoder: uploading %s of layer %d: %s", whats[i], layer,
                         vdn_dev_error(e->dev));
            vdn_tensor_free(w);
            return NULL;
        }
    }
    return w;
}

/* fp8 precision: L->lin[i] and L->scale[i] become src (a float [out, in] weight) in e4m3 with
 * one fp32 scale a row (vdn_op_quantize_rows). The sync lets the caller free a float source
 * only once the quantising kernel has read it. */
static int quantize_into(vdn_text_encoder *e, enc_layer *L, int l, int i, const vdn_tensor *src,
                         char *err, size_t errlen) {
    vdn_tensor *q, *s;
    if (vdn_quantize_weight_fp8(src, &q, &s) != 0)
        return vdn_fail(err, errlen, "text encoder: fp8 %s of layer %d: %s", lin_name[i], l,
                        vdn_dev_error(e->dev));
    L->lin[i] = q;
    L->scale[i] = s;
    e->n_fp8++;
    return 0;
}

/* At fp8 precision, quantise the layer's Linear i as soon as it is on the device, so the device
 * holds at most one float matrix beside the fp8 ones (50 layers of Qwen3-VL-32B: 48.8 GB in
 * bf16, 24.4 GB in fp8). A no-op at bf16. */
static int quantize_if_fp8(vdn_text_encoder *e, enc_layer *L, int l, int i, char *err,
                           size_t errlen) {
    if (e->precision != VDN_PRECISION_FP8) return 0;
    vdn_tensor *f = L->lin[i];
    L->lin[i] = NULL;
    int rc = quantize_into(e, L, l, i, f, err, errlen);
    vdn_tensor_free(f);
    return rc;
}

static int load_layer(vdn_text_encoder *e, int l, char *err, size_t errlen) {
    const vdn_text_config *c = &e->cfg;
    enc_layer *L = &e->layers[l];
    int64_t H = c->hidden, qd = c->heads * c->head_dim, kd = c->kv_heads * c->head_dim;
    int64_t I = c->intermediate;
    const char *qkv[] = {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                         "self_attn.v_proj.weight"};
    const char *gu[] = {"mlp.gate_proj.weight", "mlp.up_proj.weight"};
    int64_t qkv_rows[] = {qd, kd, kd}, gu_rows[] = {I, I};
    if (!(L->in_norm = upload(e, l, "input_layernorm.weight", 1, H, 0, err, errlen)) ||
        !(L->lin[W_QKV] = upload_stacked(e, l, qkv, qkv_rows, 3, H, err, errlen)) ||
        quantize_if_fp8(e, L, l, W_QKV, err, errlen) ||
        !(L->lin[W_O] = upload(e, l, "self_attn.o_proj.weight", 2, H, qd, err, errlen)) ||
        quantize_if_fp8(e, L, l, W_O, err, errlen) ||
        !(L->q_norm = upload(e, l, "self_attn.q_norm.weight", 1, c->head_dim, 0, err, errlen)) ||
        !(L->k_norm = upload(e, l, "self_attn.k_norm.weight", 1, c->head_dim, 0, err, errlen)) ||
        !(L->post_norm = upload(e, l, "post_attention_layernorm.weight", 1, H, 0, err, errlen)) ||
        !(L->lin[W_GATE_UP] = upload_stacked(e, l, gu, gu_rows, 2, H, err, errlen)) ||
        quantize_if_fp8(e, L, l, W_GATE_UP, err, errlen) ||
        !(L->lin[W_DOWN] = upload(e, l, "mlp.down_proj.weight", 2, H, I, err, errlen)) ||
        quantize_if_fp8(e, L, l, W_DOWN, err, errlen))
        return -1;
    return 0;
}

/* inv_freq[i] = 1 / theta^(2i / head_dim), rounded to float32 as transformers holds it */
static int make_inv_freq(vdn_text_encoder *e, char *err, size_t errlen) {
    int half = (int)(e->cfg.head_dim / 2);
    float *inv = vdn_xmalloc(sizeof(float) * (size_t)half);
    for (int i = 0; i < half; i++) {
        float expo = (float)(2 * i) / (float)e->cfg.head_dim;
        inv[i] = (float)(1.0 / pow(e->cfg.rope_theta, (double)expo));
    }
    int64_t ne[1] = {half};
    e->inv_freq = vdn_tensor_new(e->dev, VDN_DT_F32, 1, ne);
    int rc = !e->inv_freq || vdn_tensor_set(e->inv_freq, inv, VDN_DT_F32);
    free(inv);
    return rc ? vdn_fail(err, errlen, "text encoder: inv_freq: %s", vdn_dev_error(e->dev)) : 0;
}

static int open_shards(vdn_text_encoder *e, const char *dir, char *err, size_t errlen) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(path, "r");
    if (f)
        fclose(f);
    else
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
    e->st = vdn_st_set_open(path, err, errlen);
    return e->st ? 0 : -1;
}

static void hash_identity(const vdn_st_set *st, const char *dir, int layer, char out[65]) {
    char path[4096], err[VDN_ERR_LEN];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t len = 0;
    char *cfg = vdn_read_file(path, &len, err, sizeof err);
    size_t cap = len + 64, used = 0;
    for (int i = 0; i < vdn_st_set_file_count(st); i++) {
        size_t hl;
        vdn_st_header(vdn_st_set_file(st, i), &hl);
        cap += hl;
    }
    char *buf = vdn_xmalloc(cap);
    if (cfg) memcpy(buf, cfg, len);
    used = len;
    for (int i = 0; i < vdn_st_set_file_count(st); i++) {
        size_t hl;
        const char *h = vdn_st_header(vdn_st_set_file(st, i), &hl);
        memcpy(buf + used, h, hl);
        used += hl;
    }
    used += (size_t)snprintf(buf + used, cap - used, "\nlayer %d", layer);
    vdn_sha256_hex(buf, used, out);
    free(buf);
    free(cfg);
}

int vdn_text_encoder_identity_of(const char *dir, int layer, char out[65], char *err,
                                 size_t errlen) {
    vdn_text_encoder e = {0};
    if (vdn_text_config_load(dir, &e.cfg, err, errlen)) return -1;
    if (layer <= 0) layer = vdn_text_encoder_default_layer(&e.cfg);
    if (open_shards(&e, dir, err, errlen)) return -1;
    hash_identity(e.st, dir, layer, out);
    vdn_st_set_close(e.st);
    return 0;
}

vdn_text_encoder *vdn_text_encoder_open(const char *dir, vdn_dev *dev, int layer,
                                        vdn_precision precision, char *err, size_t errlen) {
    vdn_text_encoder *e = vdn_xcalloc(1, sizeof *e);
    e->dev = dev;
    e->precision = precision;
    snprintf(e->dir, sizeof e->dir, "%s", dir);
    if (vdn_text_config_load(dir, &e->cfg, err, errlen)) goto fail;
    e->layer = layer > 0 ? layer : vdn_text_encoder_default_layer(&e->cfg);
    if (e->layer > e->cfg.layers) {
        vdn_fail(err, errlen, "text encoder %s: layer %d asked for, the model has %d", dir,
                 e->layer, e->cfg.layers);
        goto fail;
    }
    if (open_shards(e, dir, err, errlen)) goto fail;
    e->embed = find_checked(e, -1, "embed_tokens.weight", 2, e->cfg.vocab, e->cfg.hidden,
                            &e->embed_file, err, errlen);
    if (!e->embed) goto fail;
    e->table = e->embed->data, e->table_dt = e->embed->dtype, e->table_rows = e->cfg.vocab;
    e->layers = vdn_xcalloc((size_t)e->layer, sizeof *e->layers);
    for (int l = 0; l < e->layer; l++)
        if (load_layer(e, l, err, errlen)) goto fail;
    if (make_inv_freq(e, err, errlen)) goto fail;
    hash_identity(e->st, dir, e->layer, e->identity);
    return e;
fail:
    vdn_text_encoder_close(e);
    return NULL;
}

/* ---- random weights (benchmarks) ---- */

static uint64_t mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [mean - a, mean + a] with a = std * sqrt(3): the std a layer's init has */
static float rnd(uint64_t key, uint64_t i, double mean, double std) {
    double u = (double)(mix(key ^ mix(i)) >> 11) / 9007199254740992.0;
    return (float)(mean + std * 1.7320508075688772 * (2 * u - 1));
}

static vdn_tensor *random_weight(vdn_dev *dev, int ndim, int64_t d0, int64_t d1, double mean,
                                 double std, uint64_t key) {
    int64_t ne[2] = {d0, d1}, n = d0 * (ndim == 2 ? d1 : 1);
    uint16_t *h = vdn_xmalloc(2 * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        h[i] = vdn_f32_to_bf16(rnd(key, (uint64_t)i, mean, std));
    vdn_tensor *w = vdn_tensor_new(dev, vdn_dev_act_dtype(dev), ndim, ne);
    if (w && vdn_tensor_set(w, h, VDN_DT_BF16)) {
        vdn_tensor_free(w);
        w = NULL;
    }
    free(h);
    return w;
}

/* tensor k of an enc_layer's norm weights */
static vdn_tensor **norm_slot(enc_layer *L, int k) {
    vdn_tensor **n[] = {&L->in_norm, &L->q_norm, &L->k_norm, &L->post_norm};
    return n[k];
}
#define N_NORM 4

/* a device-to-device copy of t, or NULL */
static vdn_tensor *copy_of(vdn_dev *dev, const vdn_tensor *t) {
    vdn_tensor *c = vdn_tensor_new(dev, t->dtype, t->ndim, t->ne);
    if (c && vdn_tensor_copy(c, t)) {
        vdn_tensor_free(c);
        c = NULL;
    }
    return c;
}

/* Random weights' embedding rows, stored like a checkpoint's table so that a run gathers them
 * the same way (RANDOM_TABLE_ROWS of them: the full vocabulary would be 1.5 GB of host memory). */
#define RANDOM_TABLE_ROWS 4096
static void random_table(vdn_text_encoder *e) {
    const int64_t H = e->cfg.hidden;
    e->table_rows = e->cfg.vocab < RANDOM_TABLE_ROWS ? e->cfg.vocab : RANDOM_TABLE_ROWS;
    e->rand_table = vdn_xmalloc(sizeof(uint16_t) * (size_t)(e->table_rows * H));
    for (int64_t i = 0; i < e->table_rows * H; i++)
        e->rand_table[i] = vdn_f32_to_bf16(rnd(0x656d626564ull, (uint64_t)i, 0, 1));
    e->table = (const uint8_t *)e->rand_table, e->table_dt = VDN_DT_BF16;
}

vdn_text_encoder *vdn_text_encoder_random(const vdn_text_config *cfg, int layer,
                                          vdn_precision precision, vdn_dev *dev, uint64_t seed,
                                          char *err, size_t errlen) {
    vdn_text_encoder *e = vdn_xcalloc(1, sizeof *e);
    e->cfg = *cfg;
    e->dev = dev;
    e->precision = precision;
    e->layer = layer > 0 ? layer : vdn_text_encoder_default_layer(cfg);
    e->layers = vdn_xcalloc((size_t)e->layer, sizeof *e->layers);
    int64_t H = cfg->hidden, qd = cfg->heads * cfg->head_dim, kd = cfg->kv_heads * cfg->head_dim;
    int64_t I = cfg->intermediate;
    /* layer 0 owns the norms; the float Linears are layer 0's too at bf16, and at fp8 only the
     * source every layer's fp8 copy is quantised from (freed at the end) */
    enc_layer *first = &e->layers[0];
    vdn_tensor *flin[N_LIN] = {
        random_weight(dev, 2, qd + 2 * kd, H, 0, 1 / sqrt((double)H), seed + 2),
        random_weight(dev, 2, H, qd, 0, 1 / sqrt((double)qd), seed + 5),
        random_weight(dev, 2, 2 * I, H, 0, 1 / sqrt((double)H), seed + 9),
        random_weight(dev, 2, H, I, 0, 1 / sqrt((double)I), seed + 11),
    };
    first->in_norm = random_weight(dev, 1, H, 0, 1, 0.1, seed + 1);
    first->q_norm = random_weight(dev, 1, cfg->head_dim, 0, 1, 0.1, seed + 6);
    first->k_norm = random_weight(dev, 1, cfg->head_dim, 0, 1, 0.1, seed + 7);
    first->post_norm = random_weight(dev, 1, H, 0, 1, 0.1, seed + 8);
    int ok = 1;
    for (int k = 0; k < N_NORM; k++)
        ok = ok && *norm_slot(first, k);
    for (int i = 0; i < N_LIN; i++)
        ok = ok && flin[i];
    if (!ok) vdn_fail(err, errlen, "text encoder (random): %s", vdn_dev_error(dev));
    /* every layer: its own copy of the same values (device to device), or its own fp8 form */
    for (int l = 0; ok && l < e->layer; l++) {
        enc_layer *L = &e->layers[l];
        int copied = 1;
        for (int k = 0; copied && l > 0 && k < N_NORM; k++)
            copied = (*norm_slot(L, k) = copy_of(dev, *norm_slot(first, k))) != NULL;
        for (int i = 0; copied && ok && i < N_LIN; i++) {
            if (precision == VDN_PRECISION_FP8)
                ok = quantize_into(e, L, l, i, flin[i], err, errlen) == 0; /* says why */
            else if (l == 0)
                L->lin[i] = flin[i], flin[i] = NULL;
            else
                copied = (L->lin[i] = copy_of(dev, first->lin[i])) != NULL;
        }
        if (!copied) {
            ok = 0;
            vdn_fail(err, errlen, "text encoder (random), layer %d: %s", l, vdn_dev_error(dev));
        }
    }
    for (int i = 0; i < N_LIN; i++)
        vdn_tensor_free(flin[i]);
    if (!ok || make_inv_freq(e, err, errlen)) {
        vdn_text_encoder_close(e);
        return NULL;
    }
    random_table(e);
    snprintf(e->identity, sizeof e->identity, "random-%llu", (unsigned long long)seed);
    return e;
}

static void acts_free(struct enc_acts *a);

void vdn_text_encoder_close(vdn_text_encoder *e) {
    if (!e) return;
    for (int l = 0; e->layers && l < e->layer; l++) {
        enc_layer *L = &e->layers[l];
        for (int k = 0; k < N_NORM; k++)
            vdn_tensor_free(*norm_slot(L, k));
        for (int i = 0; i < N_LIN; i++) {
            vdn_tensor_free(L->lin[i]);
            vdn_tensor_free(L->scale[i]);
        }
    }
    free(e->layers);
    if (e->acts) acts_free(e->acts);
    free(e->acts);
    free(e->rand_table);
    vdn_vision_close(e->vision);
    vdn_tensor_free(e->inv_freq);
    vdn_st_set_close(e->st);
    free(e);
}

const vdn_text_config *vdn_text_encoder_config(const vdn_text_encoder *e) {
    return &e->cfg;
}
int vdn_text_encoder_layer(const vdn_text_encoder *e) {
    return e->layer;
}
const char *vdn_text_encoder_identity(const vdn_text_encoder *e) {
    return e->identity;
}
vdn_precision vdn_text_encoder_precision(const vdn_text_encoder *e) {
    return e->precision;
}
int vdn_text_encoder_fp8_linears(const vdn_text_encoder *e) {
    return e->n_fp8;
}

/* ---- the forward ---- */

static void acts_free(struct enc_acts *a) {
    vdn_tensor *all[] = {a->h, a->x, a->qkv, a->qr, a->kr, a->att, a->gu, a->act, a->pos};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        vdn_tensor_free(all[i]);
    vdn_attn_mask_free(a->mask);
}

/* text tokens: the three multimodal RoPE axes all hold the token's index */
static int text_positions(enc_acts *a, int n) {
    double *pos = vdn_xmalloc(sizeof(double) * 3 * (size_t)n);
    for (int i = 0; i < 3 * n; i++)
        pos[i] = (double)(i / 3);
    int rc = vdn_tensor_set(a->pos, pos, VDN_DT_F64);
    a->picture_pos = 0;
    free(pos);
    return rc;
}

static int acts_new(vdn_text_encoder *e, int n, enc_acts *a) {
    const vdn_text_config *c = &e->cfg;
    vdn_dtype adt = vdn_dev_act_dtype(e->dev);
    int64_t qd = c->heads * c->head_dim, kd = c->kv_heads * c->head_dim;
    memset(a, 0, sizeof *a);
    a->h = vdn_tensor_new2(e->dev, adt, n, c->hidden);
    a->x = vdn_tensor_new2(e->dev, adt, n, c->hidden);
    a->qkv = vdn_tensor_new2(e->dev, adt, n, qd + 2 * kd);
    a->qr = vdn_tensor_new2(e->dev, adt, n, qd);
    a->kr = vdn_tensor_new2(e->dev, adt, n, kd);
    a->att = vdn_tensor_new2(e->dev, adt, n, qd);
    a->gu = vdn_tensor_new2(e->dev, adt, n, 2 * c->intermediate);
    a->act = vdn_tensor_new2(e->dev, adt, n, c->intermediate);
    a->pos = vdn_tensor_new2(e->dev, VDN_DT_F64, n, 3);
    a->mask = vdn_attn_mask_causal(e->dev, n);
    if (!a->h || !a->x || !a->qkv || !a->qr || !a->kr || !a->att || !a->gu || !a->act || !a->pos ||
        !a->mask)
        return -1;
    return text_positions(a, n);
}

/* The prompt's rows of the embedding table onto the device, in the table's dtype (the device
 * widens or keeps them: bf16 rows go up as they are stored, half the bytes of float). */
int vdn_enc_embed(vdn_text_encoder *e, const int32_t *ids, int n, vdn_tensor *h) {
    const size_t row = (size_t)e->cfg.hidden * vdn_dtype_size(e->table_dt);
    uint8_t *rows = vdn_xmalloc(row * (size_t)n);
    for (int i = 0; i < n; i++)
        memcpy(rows + (size_t)i * row, e->table + (size_t)(ids[i] % e->table_rows) * row, row);
    int rc = vdn_tensor_set(h, rows, e->table_dt);
    free(rows);
    return rc;
}

/* rope: the positions' layout (text: every pair on axis 0, as all three axes are equal) */
int vdn_enc_run_layer(vdn_text_encoder *e, const enc_layer *L, enc_acts *a, const vdn_rope *rope) {
    const vdn_text_config *c = &e->cfg;
    int hd = (int)c->head_dim;
    int64_t qd = c->heads * c->head_dim, kd = c->kv_heads * c->head_dim, I = c->intermediate;
    double eps = c->rms_eps;
    vdn_tensor q = vdn_view_cols(a->qkv, 0, qd), k = vdn_view_cols(a->qkv, qd, kd);
    vdn_tensor v = vdn_view_cols(a->qkv, qd + kd, kd);
    vdn_tensor gate = vdn_view_cols(a->gu, 0, I), up = vdn_view_cols(a->gu, I, I);
    if (vdn_op_rmsnorm(a->x, a->h, L->in_norm, eps, NULL, NULL, NULL) ||
        vdn_op_linear(a->qkv, a->x, L->lin[W_QKV], NULL, VDN_ACT_NONE, 0) ||
        vdn_op_qk_norm_rope(a->qr, a->kr, &q, &k, L->q_norm, L->k_norm, hd, eps, rope) ||
        vdn_op_attention(a->att, a->qr, a->kr, &v, hd, 1.0 / sqrt((double)hd), a->mask, NULL) ||
        vdn_op_linear(a->h, a->att, L->lin[W_O], NULL, VDN_ACT_NONE, 1) || /* + residual */
        vdn_op_rmsnorm(a->x, a->h, L->post_norm, eps, NULL, NULL, NULL) ||
        vdn_op_linear(a->gu, a->x, L->lin[W_GATE_UP], NULL, VDN_ACT_NONE, 0) ||
        vdn_op_swiglu(a->act, &up, &gate) ||
        vdn_op_linear(a->h, a->act, L->lin[W_DOWN], NULL, VDN_ACT_NONE, 1)) /* + residual */
        return -1;
    return 0;
}

int vdn_enc_check_ids(const vdn_text_encoder *e, const int32_t *ids, int n, char *err,
                      size_t errlen) {
    const vdn_text_config *c = &e->cfg;
    if (n < 1) return vdn_fail(err, errlen, "text encoder: the prompt has no tokens");
    if (n > c->max_positions)
        return vdn_fail(err, errlen,
                        "text encoder: the prompt is %d tokens; the limit is %lld "
                        "(text_config.max_position_embeddings)",
                        n, (long long)c->max_positions);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= c->vocab)
            return vdn_fail(err, errlen,
                            "text encoder: token %d is id %d, outside the "
                            "vocabulary of %lld",
                            i, ids[i], (long long)c->vocab);
    return 0;
}

/* the activations stay for the next prompt of the same length (allocating and freeing them, and
 * the mask's upload, cost a device sync each) */
int vdn_enc_acts_for(vdn_text_encoder *e, int n) {
    if (e->acts_n == n) return 0;
    if (e->acts) acts_free(e->acts);
    free(e->acts);
    e->acts = vdn_xcalloc(1, sizeof *e->acts);
    e->acts_n = n;
    return acts_new(e, n, e->acts);
}

/* a failed run leaves nothing behind */
int vdn_enc_run_failed(vdn_text_encoder *e, char *err, size_t errlen) {
    vdn_fail(err, errlen, "text encoder on %s: %s", vdn_dev_name(e->dev), vdn_dev_error(e->dev));
    if (e->acts) acts_free(e->acts);
    free(e->acts);
    e->acts = NULL, e->acts_n = 0;
    return -1;
}

void vdn_text_encoder_set_run_opts(vdn_text_encoder *e, const vdn_text_run_opts *o) {
    e->run = o ? *o : (vdn_text_run_opts){0};
}

/* ms of waiting, in slices that each look at the cancel flag */
static void test_wait(const vdn_text_run_opts *o, double ms) {
    while (ms > 0 && !vdn_cancelled(o->cancel)) {
        double slice = ms < 20 ? ms : 20;
        struct timespec ts = {0, (long)(slice * 1e6)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        }
        ms -= slice;
    }
}

int vdn_enc_layer_gate(vdn_text_encoder *e, int l, char *err, size_t errlen) {
    if (e->run.test_delay_ms > 0) test_wait(&e->run, (double)e->run.test_delay_ms / e->layer);
    if (!vdn_cancelled(e->run.cancel)) return 0;
    vdn_enc_run_failed(e, err, errlen);
    return vdn_fail(err, errlen, "text encoder on %s: cancelled before layer %d of %d",
                    vdn_dev_name(e->dev), l + 1, e->layer);
}

int vdn_text_encoder_run(vdn_text_encoder *e, const int32_t *ids, int n, float *out, char *err,
                         size_t errlen) {
    if (vdn_enc_check_ids(e, ids, n, err, errlen)) return -1;
    int rc = vdn_enc_acts_for(e, n);
    enc_acts *a = e->acts;
    if (!rc && a->picture_pos) rc = text_positions(a, n);
    const int hd = (int)e->cfg.head_dim;
    vdn_rope rope = {.pos = a->pos, .inv = e->inv_freq, .n_rot = hd, .sections = {hd / 2, 0, 0}};
    rc = rc || vdn_enc_embed(e, ids, n, a->h);
    for (int l = 0; !rc && l < e->layer; l++) {
        if (vdn_enc_layer_gate(e, l, err, errlen)) return -1;
        rc = vdn_enc_run_layer(e, &e->layers[l], a, &rope);
    }
    if (!rc) rc = vdn_tensor_get(a->h, out);
    return rc ? vdn_enc_run_failed(e, err, errlen) : 0;
}
