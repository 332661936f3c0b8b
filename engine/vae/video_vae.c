/* The video VAE's decoder over the op layer (vae.h): un-normalise, temporal chunks with a
 * cross-fade, spatial tiles with linear blends, and per tile post_quant_conv + the ViT decoder
 * (proj_in, register tokens, blocks of RMSNorm / biased qkv / per-head q-k RMSNorm / 3-axis RoPE
 * / attention / scale1 and RMSNorm / SwiGLU / scale2, LayerNorm, proj_out, unpatchify), then
 * ImageNet de-normalisation and a clamp to [0, 1]. Every tile's ViT runs on the device, and so do
 * the unpatchify, the tile stitch, the chunk cross-fades and the de-normalisation (op_pixels.h):
 * only the output frames come back. Over a group of devices each member does this for its own
 * chunks, and the host only joins them ("a clip's ViT passes" below). Both do the same float32
 * operations in the reference's order, so they give the same bits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "op_pixels.h"
#include "ops.h"
#include "safetensors.h"
#include "vae.h"
#include "vae_group.h"
#include "vdn_util.h"

#define VDN_MAX_ROT 128 /* rotated pairs per head: head_dim is 64 */
/* rows of one batched ViT pass (tiles x (tokens + registers + 1)): 36 tiles of 1,797 tokens,
 * about 6 GB of activations at the release's width */
#define VDN_VAE_BATCH_ROWS 65536

static inline int imin(int a, int b) {
    return a < b ? a : b;
}
static inline int imax(int a, int b) {
    return a > b ? a : b;
}

/* out_w/out_b and ff2_w/ff2_b carry the block's scale1 / scale2 (folded at load, up_scaled), so
 * each branch's product accumulates straight into the float32 residual stream. At fp8 precision
 * three large weights (qkv_w, ff1_w, ff2_w) are e4m3 with one F32 scale a row in scale[] (op.h
 * vdn_op_quantize_rows); to_out stays bf16: its input (the attention output) has no fused
 * producer to quantise it, and the separate quantise pass plus the float32 epilogue made the
 * smallest product slower in fp8 than in bf16 on the H200 (0.747 against 0.676 ms a call). Their
 * biases and everything else stay as at bf16. */
enum { LIN_QKV, LIN_FF1, LIN_FF2, N_LIN };
typedef struct {
    vdn_tensor *norm1, *qkv_w, *qkv_b, *out_w, *out_b, *norm2, *ff1_w, *ff1_b, *ff2_w, *ff2_b;
    vdn_tensor *scale[N_LIN]; /* fp8: the row scales of the weight; else NULL */
} vit_block;

struct vdn_video_vae {
    vdn_vae_video_config cfg;
    vdn_dev *dev;
    vdn_precision precision;   /* fp8: the blocks' qkv, FFN-in and FFN-out quantised at load */
    int n_fp8;                 /* Linears held in fp8 */
    int dim, inner, patch_out; /* model width, FFN width, proj_out width */
    vdn_tensor *pq_w, *pq_b, *in_w, *in_b, *registers, *norm_out_w, *norm_out_b, *out_w, *out_b;
    vdn_tensor *ones; /* [head_dim]: the q/k RMSNorm has no weight */
    vdn_tensor *inv;  /* [n_rot / 2] rope frequencies per pair */
    int n_rot, axis_pairs;
    vit_block *blocks;
    /* the rope positions of pos_tiles tiles of pos_shape (Tl, th, tw) tokens, kept on the device
     * between passes: every pass of a decode has the same tile shape, and the upload of
     * [tiles x rows, 3] doubles cost ~10 ms per pass on the H200 (tile_pos) */
    vdn_tensor *pos;
    int pos_tiles, pos_shape[3];
    /* the ViT's activations, kept from pass to pass of one decode (vit_bufs) */
    struct tile_bufs *bufs;
    int bufs_B, mask_B;        /* tiles they hold; tiles the mask in them is for */
    int64_t bufs_N, bufs_rows; /* a tile's tokens and rows they were made for */
};

const vdn_vae_video_config *vdn_video_vae_config(const vdn_video_vae *v) {
    return &v->cfg;
}

static vdn_tensor *dev_tensor(vdn_dev *d, int64_t rows, int64_t cols, const float *host, char *err,
                              size_t errlen, const char *what) {
    vdn_dtype dt = vdn_dev_act_dtype(d);
    vdn_tensor *t = vdn_tensor_new2(d, dt, rows, cols);
    if (!t || (host && vdn_tensor_set(t, host, VDN_DT_F32))) {
        vdn_fail(err, errlen, "video VAE: uploading %s: %s", what, vdn_dev_error(d));
        vdn_tensor_free(t);
        return NULL;
    }
    return t;
}

/* A block's large Linear weight from host float32 values: at bf16 as dev_tensor does; at fp8
 * uploaded in float32 and quantised to e4m3 with row scales (*scale) on the device, so the CPU's
 * quantised oracle and CUDA round the same float32 values to the same codes (a bf16 upload
 * first would round twice). The float32 copy is freed at once: the device holds one at most. */
static vdn_tensor *lin_tensor(vdn_video_vae *v, int64_t rows, int64_t cols, const float *host,
                              vdn_tensor **scale, char *err, size_t errlen, const char *what) {
    if (v->precision != VDN_PRECISION_FP8)
        return dev_tensor(v->dev, rows, cols, host, err, errlen, what);
    vdn_tensor *f = vdn_tensor_new2(v->dev, VDN_DT_F32, rows, cols), *q = NULL;
    if (!f || vdn_tensor_set(f, host, VDN_DT_F32) || vdn_quantize_weight_fp8(f, &q, scale)) {
        vdn_fail(err, errlen, "video VAE: fp8 %s: %s", what, vdn_dev_error(v->dev));
        q = NULL;
    } else
        v->n_fp8++;
    vdn_tensor_free(f);
    return q;
}

/* a released tensor onto the device as [rows, cols] (the loader checked its shape) */
static vdn_tensor *up(vdn_video_vae *v, vdn_st_set *st, const char *name, int64_t rows,
                      int64_t cols, char *err, size_t errlen) {
    int64_t n;
    float *h = vdn_vae_read(st, name, &n);
    if (!h) {
        vdn_fail(err, errlen, "video VAE: reading %s", name);
        return NULL;
    }
    vdn_tensor *t = dev_tensor(v->dev, rows, cols, h, err, errlen, name);
    free(h);
    return t;
}

/* A Linear [rows, cols] whose output the block multiplies by a per-column scale (scale1, scale2):
 * scale s[o] folded into row o of the weight and the bias, in float32 (s (W x + b) =
 * (s W) x + s b up to float rounding), so the product needs no separate scaling op. */
static int up_scaled(vdn_video_vae *v, vdn_st_set *st, const char *pre, const char *lin,
                     const char *scale, int64_t rows, int64_t cols, vdn_tensor **w, vdn_tensor **b,
                     vdn_tensor **wscale, char *err, size_t errlen) { /* wscale NULL: never fp8 */
    char nw[256], nb[256], ns[256];
    snprintf(nw, sizeof nw, "%s.%s.weight", pre, lin);
    snprintf(nb, sizeof nb, "%s.%s.bias", pre, lin);
    snprintf(ns, sizeof ns, "%s.%s", pre, scale);
    float *hw = vdn_vae_read(st, nw, NULL), *hb = vdn_vae_read(st, nb, NULL),
          *hs = vdn_vae_read(st, ns, NULL);
    int rc = -1;
    if (!hw || !hb || !hs) {
        vdn_fail(err, errlen, "video VAE: reading %s", !hw ? nw : !hb ? nb : ns);
        goto done;
    }
    for (int64_t o = 0; o < rows; o++) {
        for (int64_t i = 0; i < cols; i++)
            hw[o * cols + i] *= hs[o];
        hb[o] *= hs[o];
    }
    if ((*w = wscale ? lin_tensor(v, rows, cols, hw, wscale, err, errlen, nw)
                     : dev_tensor(v->dev, rows, cols, hw, err, errlen, nw)) &&
        (*b = dev_tensor(v->dev, 1, rows, hb, err, errlen, nb)))
        rc = 0;
done:
    free(hw);
    free(hb);
    free(hs);
    return rc;
}

/* q, k, v weights (or biases) stacked into one [3 dim, cols] tensor: one product per block */
static vdn_tensor *up_qkv(vdn_video_vae *v, vdn_st_set *st, const char *pre, const char *what,
                          int64_t cols, vdn_tensor **wscale, char *err, size_t errlen) {
    const int64_t dim = v->dim, rows = cols == 1 ? 1 : 3 * dim, per = dim * cols;
    float *all = vdn_xmalloc(sizeof(float) * (size_t)(3 * per));
    const char *parts[3] = {"to_q", "to_k", "to_v"};
    for (int p = 0; p < 3; p++) {
        char name[256];
        snprintf(name, sizeof name, "%s.attn.%s.%s", pre, parts[p], what);
        float *h = vdn_vae_read(st, name, NULL);
        if (!h) {
            free(all);
            vdn_fail(err, errlen, "video VAE: reading %s", name);
            return NULL;
        }
        memcpy(all + p * per, h, sizeof(float) * (size_t)per);
        free(h);
    }
    vdn_tensor *t = cols == 1 ? dev_tensor(v->dev, rows, 3 * dim, all, err, errlen, pre)
                              : lin_tensor(v, rows, cols, all, wscale, err, errlen, pre);
    free(all);
    return t;
}

static void vit_bufs_release(vdn_video_vae *v);

void vdn_video_vae_free(vdn_video_vae *v) {
    if (!v) return;
    vit_bufs_release(v);
    vdn_tensor *const *own[] = {&v->pq_w,      &v->pq_b,       &v->in_w,       &v->in_b,
                                &v->registers, &v->norm_out_w, &v->norm_out_b, &v->out_w,
                                &v->out_b,     &v->ones,       &v->inv,        &v->pos};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        vdn_tensor_free(*own[i]);
    for (int l = 0; v->blocks && l < v->cfg.dec_layers; l++) {
        vit_block *b = &v->blocks[l];
        vdn_tensor *t[] = {b->norm1, b->qkv_w, b->qkv_b, b->out_w, b->out_b,
                           b->norm2, b->ff1_w, b->ff1_b, b->ff2_w, b->ff2_b};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
            vdn_tensor_free(t[i]);
        for (int i = 0; i < N_LIN; i++) /* after the fp8 weights that point into them */
            vdn_tensor_free(b->scale[i]);
    }
    free(v->blocks);
    free(v);
}

vdn_video_vae *vdn_video_vae_load(vdn_dev *dev, const char *dir, char *err, size_t errlen) {
    return vdn_video_vae_load_precision(dev, dir, VDN_PRECISION_BF16, err, errlen);
}

vdn_precision vdn_video_vae_precision(const vdn_video_vae *v) {
    return v->precision;
}
int vdn_video_vae_fp8_linears(const vdn_video_vae *v) {
    return v->n_fp8;
}

vdn_video_vae *vdn_video_vae_load_precision(vdn_dev *dev, const char *dir, vdn_precision precision,
                                            char *err, size_t errlen) {
    if (precision != VDN_PRECISION_BF16 && precision != VDN_PRECISION_FP8) {
        vdn_fail(err, errlen, "video VAE: precision %d: expected bf16 or fp8", (int)precision);
        return NULL;
    }
    vdn_video_vae *v = calloc(1, sizeof *v);
    if (!v) {
        vdn_fail(err, errlen, "video VAE: out of memory");
        return NULL;
    }
    v->dev = dev;
    v->precision = precision;
    if (!vdn_dev_is_cpu(dev) && vdn_ops_threads() == 1) { /* a group's joins on the host */
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        vdn_ops_set_threads(cores < 1 ? 1 : cores > 8 ? 8 : (int)cores);
    }
    if (vdn_vae_video_config_load(dir, &v->cfg, err, errlen)) {
        free(v);
        return NULL;
    }
    vdn_st_set *st = vdn_vae_open_weights(dir, 1, &v->cfg, err, errlen);
    if (!st) {
        free(v);
        return NULL;
    }
    const vdn_vae_video_config *c = &v->cfg;
    const int lc = c->latent_channels, hd = c->dec_head_dim;
    v->dim = c->dec_heads * hd;
    v->inner = v->dim * c->dec_ffn_mult;
    v->patch_out = c->out_channels * c->temporal_ratio * c->spatial_ratio * c->spatial_ratio;
    v->n_rot = (int)(hd * c->rope_dim_ratio);
    v->axis_pairs = v->n_rot / 6;
    v->blocks = calloc((size_t)c->dec_layers, sizeof *v->blocks);
    int ok = v->blocks != NULL;
    ok = ok && (v->pq_w = up(v, st, "post_quant_conv.weight", lc, lc, err, errlen));
    ok = ok && (v->pq_b = up(v, st, "post_quant_conv.bias", 1, lc, err, errlen));
    ok = ok && (v->in_w = up(v, st, "decoder.proj_in.weight", v->dim, lc, err, errlen));
    ok = ok && (v->in_b = up(v, st, "decoder.proj_in.bias", 1, v->dim, err, errlen));
    ok =
        ok && (v->registers = up(v, st, "decoder.register_tokens",
                                 c->dec_registers > 0 ? c->dec_registers : 1, v->dim, err, errlen));
    ok = ok && (v->norm_out_w = up(v, st, "decoder.norm_out.weight", 1, v->dim, err, errlen));
    ok = ok && (v->norm_out_b = up(v, st, "decoder.norm_out.bias", 1, v->dim, err, errlen));
    ok = ok && (v->out_w = up(v, st, "decoder.proj_out.weight", v->patch_out, v->dim, err, errlen));
    ok = ok && (v->out_b = up(v, st, "decoder.proj_out.bias", 1, v->patch_out, err, errlen));
    for (int l = 0; ok && l < c->dec_layers; l++) {
        char pre[128], n[256];
        vit_block *b = &v->blocks[l];
        snprintf(pre, sizeof pre, "decoder.transformer_blocks.%d", l);
#define UP(field, suffix, r, cc)                                                                   \
    ok = ok && (snprintf(n, sizeof n, "%s.%s", pre, suffix),                                       \
                (b->field = up(v, st, n, r, cc, err, errlen)))
        UP(norm1, "norm1.weight", 1, v->dim);
        ok = ok &&
             (b->qkv_w = up_qkv(v, st, pre, "weight", v->dim, &b->scale[LIN_QKV], err, errlen));
        ok = ok && (b->qkv_b = up_qkv(v, st, pre, "bias", 1, NULL, err, errlen));
        ok = ok && !up_scaled(v, st, pre, "attn.to_out.0", "scale1", v->dim, v->dim, &b->out_w,
                              &b->out_b, NULL, err, errlen); /* bf16 at fp8 too */
        UP(norm2, "norm2.weight", 1, v->dim);
        if (ok) {
            snprintf(n, sizeof n, "%s.ff.net.0.proj.weight", pre);
            float *h = vdn_vae_read(st, n, NULL);
            ok = h && (b->ff1_w = lin_tensor(v, 2 * v->inner, v->dim, h, &b->scale[LIN_FF1], err,
                                             errlen, n));
            if (!h) vdn_fail(err, errlen, "video VAE: reading %s", n);
            free(h);
        }
        UP(ff1_b, "ff.net.0.proj.bias", 1, 2 * v->inner);
        ok = ok && !up_scaled(v, st, pre, "ff.net.2", "scale2", v->dim, v->inner, &b->ff2_w,
                              &b->ff2_b, &b->scale[LIN_FF2], err, errlen);
#undef UP
    }
    vdn_st_set_close(st);
    if (ok) { /* constants: ones for the weightless q/k norm, the rope frequencies */
        float *ones = vdn_xmalloc(sizeof(float) * (size_t)hd);
        for (int i = 0; i < hd; i++)
            ones[i] = 1.0f;
        v->ones = vdn_tensor_new2(dev, VDN_DT_F32, 1, hd);
        ok = v->ones && !vdn_tensor_set(v->ones, ones, VDN_DT_F32);
        free(ones);
        /* inv_freq = 1 / theta^(arange(0, 1, 6 / n_rot)) (float32), one value per pair and axis:
         * the pairs of axis a are [a P, (a+1) P), P = n_rot / 6 */
        float inv[VDN_MAX_ROT];
        for (int i = 0; ok && i < v->n_rot / 2; i++) {
            float e = (float)(i % v->axis_pairs) * (6.0f / (float)v->n_rot);
            inv[i] = 1.0f / powf((float)c->rope_theta, e);
        }
        v->inv = ok ? vdn_tensor_new2(dev, VDN_DT_F32, 1, v->n_rot / 2) : NULL;
        ok = v->inv && !vdn_tensor_set(v->inv, inv, VDN_DT_F32);
        if (!ok && !err[0]) vdn_fail(err, errlen, "video VAE: %s", vdn_dev_error(dev));
    }
    if (!ok) {
        vdn_video_vae_free(v);
        return NULL;
    }
    return v;
}

/* ---- one tile through post_quant_conv and the ViT ---- */

/* f, s: the FFN's float activations (bf16 / the CPU's float32 only); at fp8 the FFN's input and
 * the norms' outputs are e4m3 rows with their scales instead: n8 (norm1 / norm2 -> qkv / FFN-in,
 * [all, dim]) and f8 (SwiGLU -> FFN-out, [all, inner]) */
typedef struct tile_bufs {
    vdn_tensor *x_in, *xq, *h, *hn, *qkv, *q, *k, *o, *f, *s, *proj;
    vdn_tensor *n8, *n8_scale, *f8, *f8_scale;
    vdn_attn_mask *mask;
} tile_bufs;

#define N_TILE_BUFS 15
/* b's tensors, for loops over all of them */
static void tile_bufs_all(tile_bufs *b, vdn_tensor **t[N_TILE_BUFS]) {
    vdn_tensor **all[N_TILE_BUFS] = {&b->x_in, &b->xq, &b->h,        &b->hn, &b->qkv,
                                     &b->q,    &b->k,  &b->o,        &b->f,  &b->s,
                                     &b->proj, &b->n8, &b->n8_scale, &b->f8, &b->f8_scale};
    memcpy(t, all, sizeof all);
}

/* the decoder's ViT activations (vit_bufs) freed: at the end of each decode, so that a farm
 * worker's GPU holds them only while it decodes */
static void vit_bufs_release(vdn_video_vae *v) {
    if (!v->bufs) return;
    vdn_tensor **t[N_TILE_BUFS];
    tile_bufs_all(v->bufs, t);
    for (int i = 0; i < N_TILE_BUFS; i++)
        vdn_tensor_free(*t[i]);
    vdn_attn_mask_free(v->bufs->mask);
    free(v->bufs);
    v->bufs = NULL;
    v->bufs_B = v->mask_B = 0;
}

/* The ViT's activations for a pass of B tiles of N tokens (`rows` rows each), made for the
 * first pass of a decode and kept for the next ones (again only for more tiles or another tile
 * shape): allocating and freeing them every pass cost a cudaFree, a wait for the whole device,
 * between every two passes, and kept a chunk's frames from coming back under the next pass
 * (clip_member). The mask is made again when the pass's tile count changes. */
static tile_bufs *vit_bufs(vdn_video_vae *v, int B, int64_t N, int64_t rows, char *err,
                           size_t errlen) {
    vdn_dev *d = v->dev;
    if (!v->bufs || v->bufs_B < B || v->bufs_N != N || v->bufs_rows != rows) {
        vit_bufs_release(v);
        const int64_t all = rows * B, dim = v->dim, inner = v->inner;
        const int64_t lc = v->cfg.latent_channels;
        const vdn_dtype act = vdn_dev_act_dtype(d);
        const int fp8 = v->precision == VDN_PRECISION_FP8;
        tile_bufs *b = v->bufs = vdn_xcalloc(1, sizeof *b);
        b->x_in = vdn_tensor_new2(d, VDN_DT_F32, N * B, lc);
        b->xq = vdn_tensor_new2(d, act, N * B, lc);
        b->h = vdn_tensor_new2(d, VDN_DT_F32, all, dim); /* the residual stream stays float32 */
        b->hn = vdn_tensor_new2(d, act, all, dim);
        b->qkv = vdn_tensor_new2(d, act, all, 3 * dim);
        b->q = vdn_tensor_new2(d, act, all, dim);
        b->k = vdn_tensor_new2(d, act, all, dim);
        b->o = vdn_tensor_new2(d, act, all, dim);
        if (fp8) { /* the fused producers' e4m3 rows (op.h): no float FFN activations at all */
            b->n8 = vdn_tensor_new2(d, VDN_DT_F8_E4M3, all, dim);
            b->n8_scale = vdn_tensor_new2(d, VDN_DT_F32, all, 1);
            b->f8 = vdn_tensor_new2(d, VDN_DT_F8_E4M3, all, inner);
            b->f8_scale = vdn_tensor_new2(d, VDN_DT_F32, all, 1);
        } else {
            b->f = vdn_tensor_new2(d, act, all, 2 * inner);
            b->s = vdn_tensor_new2(d, act, all, inner);
        }
        b->proj = vdn_tensor_new2(d, VDN_DT_F32, all, v->patch_out);
        v->bufs_B = B, v->bufs_N = N, v->bufs_rows = rows;
        if (!b->x_in || !b->xq || !b->h || !b->hn || !b->qkv || !b->q || !b->k || !b->o ||
            (fp8 ? !b->n8 || !b->n8_scale || !b->f8 || !b->f8_scale : !b->f || !b->s) || !b->proj) {
            vdn_fail(err, errlen, "video VAE: %d tiles of %lld tokens: %s", B, (long long)rows,
                     vdn_dev_error(d));
            vit_bufs_release(v);
            return NULL;
        }
    }
    if (v->mask_B != B) { /* each row's keys: its own tile's rows */
        vdn_attn_mask_free(v->bufs->mask);
        v->bufs->mask = NULL;
        v->mask_B = 0;
        const int64_t all = rows * B;
        int *lo = malloc(sizeof(int) * (size_t)all), *hi = malloc(sizeof(int) * (size_t)all);
        for (int64_t r = 0; lo && hi && r < all; r++) {
            lo[r] = (int)(r / rows * rows);
            hi[r] = (int)(lo[r] + rows);
        }
        if (lo && hi)
            v->bufs->mask = B == 1 ? vdn_attn_mask_dense(d, (int)rows, (int)rows)
                                   : vdn_attn_mask_rows(d, (int)all, 0, (int)all, lo, hi);
        free(lo);
        free(hi);
        if (!v->bufs->mask) {
            vdn_fail(err, errlen, "video VAE: the attention mask of %d tiles: %s", B,
                     lo && hi ? vdn_dev_error(d) : "out of memory");
            return NULL;
        }
        v->mask_B = B;
    }
    return v->bufs;
}

/* rows [0, n) of *t into *view; NULL for a buffer this precision does not use */
static vdn_tensor *first_rows(vdn_tensor *view, const vdn_tensor *t, int64_t n) {
    if (!t) return NULL;
    *view = vdn_view_rows(t, 0, n);
    return view;
}

/* RoPE coordinates of the tokens: per axis 2 ((i + 0.5) / size) - 1, times 2 pi, in float32 as
 * the reference forms them; the register and zero tokens sit at 0 (pos is zeroed). */
static void tile_positions(double *pos, int Tl, int th, int tw) {
    const float two_pi = (float)(2.0 * M_PI);
    const int size[3] = {Tl, th, tw};
    int64_t r = 0;
    for (int t = 0; t < Tl; t++)
        for (int y = 0; y < th; y++)
            for (int x = 0; x < tw; x++, r++) {
                const int idx[3] = {t, y, x};
                for (int a = 0; a < 3; a++) {
                    float p = 2.0f * (((float)idx[a] + 0.5f) / (float)size[a]) - 1.0f;
                    pos[r * 3 + a] = (double)(two_pi * p);
                }
            }
}

/* *view = the positions of B tiles of (Tl, th, tw) tokens, `rows` a tile (its N tokens, then its
 * registers and zero token at 0): rows [0, B rows) of v->pos, uploaded again only when the tile
 * shape changes or more tiles come */
static int tile_pos(vdn_video_vae *v, int B, int Tl, int th, int tw, int64_t rows, vdn_tensor *view,
                    char *err, size_t errlen) {
    const int64_t all = rows * B;
    if (!v->pos || v->pos_tiles < B || v->pos_shape[0] != Tl || v->pos_shape[1] != th ||
        v->pos_shape[2] != tw) {
        vdn_tensor_free(v->pos);
        v->pos = NULL;
        double *pos = calloc((size_t)all * 3, sizeof(double));
        vdn_tensor *t = vdn_tensor_new2(v->dev, VDN_DT_F64, all, 3);
        const int oom = !pos;
        int ok = pos && t;
        if (ok) {
            tile_positions(pos, Tl, th, tw);
            for (int b = 1; b < B; b++)
                memcpy(pos + b * rows * 3, pos, sizeof(double) * (size_t)rows * 3);
            ok = !vdn_tensor_set(t, pos, VDN_DT_F64);
        }
        free(pos);
        if (!ok) {
            vdn_fail(err, errlen, "video VAE: positions of %d tiles of %lld tokens: %s", B,
                     (long long)rows, oom ? "out of memory" : vdn_dev_error(v->dev));
            vdn_tensor_free(t);
            return -1;
        }
        v->pos = t;
        v->pos_tiles = B;
        v->pos_shape[0] = Tl, v->pos_shape[1] = th, v->pos_shape[2] = tw;
    }
    *view = vdn_view_rows(v->pos, 0, all);
    return 0;
}

#define OPS(call)                                                                                  \
    do {                                                                                           \
        if (call) {                                                                                \
            vdn_fail(err, errlen, "video VAE: %s", vdn_dev_error(v->dev));                         \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* Tiles of one chunk batched through the ViT: tile b owns rows [b rows, (b+1) rows) of one
 * sequence (its N tokens, R registers, the zero token) and a block-diagonal mask keeps its
 * attention inside those rows, so every product is one large GEMM over all the tiles (the tiles
 * of a chunk all have the same size: split_tiles gives equal lengths).
 * zt: host tokens [B, N, lc] in (t, y, x) order. The result, px: the tiles' pixels on the
 * device, float32 [B*3*F, th p * tw p] (op_pixels.h's unpatchify). On CUDA the pass is only
 * queued: nothing here waits for the device (the buffers are the decoder's, vit_bufs). */
static int decode_tiles(vdn_video_vae *v, const float *zt, int B, int Tl, int th, int tw,
                        vdn_tensor *px, char *err, size_t errlen) {
    const vdn_vae_video_config *c = &v->cfg;
    const int64_t N = (int64_t)Tl * th * tw, R = c->dec_registers, rows = N + R + 1;
    const int64_t all = rows * B, dim = v->dim, inner = v->inner;
    tile_bufs *cap = vit_bufs(v, B, N, rows, err, errlen);
    if (!cap) return -1;
    /* this pass's rows of the decoder's buffers (x_in and xq hold tokens, the rest rows) */
    vdn_tensor vw[N_TILE_BUFS], **src[N_TILE_BUFS], **dst[N_TILE_BUFS];
    tile_bufs b = {.mask = cap->mask};
    tile_bufs_all(cap, src);
    tile_bufs_all(&b, dst);
    for (int i = 0; i < N_TILE_BUFS; i++)
        *dst[i] =
            first_rows(&vw[i], *src[i], *src[i] == cap->x_in || *src[i] == cap->xq ? N * B : all);
    const int fp8 = v->precision == VDN_PRECISION_FP8;
    vdn_tensor pos;
    int rc = -1;
    if (tile_pos(v, B, Tl, th, tw, rows, &pos, err, errlen)) goto fail;
    OPS(vdn_tensor_set(b.x_in, zt, VDN_DT_F32));
    OPS(vdn_op_linear(b.xq, b.x_in, v->pq_w, v->pq_b, VDN_ACT_NONE, 0)); /* post_quant_conv */
    for (int t = 0; t < B; t++) {
        vdn_tensor tokens = vdn_view_rows(b.h, t * rows, N),
                   regs = vdn_view_rows(b.h, t * rows + N, R),
                   zero = vdn_view_rows(b.h, t * rows + N + R, 1),
                   xq = vdn_view_rows(b.xq, t * N, N);
        OPS(vdn_op_linear(&tokens, &xq, v->in_w, v->in_b, VDN_ACT_NONE, 0));
        if (R > 0) OPS(vdn_tensor_copy(&regs, v->registers));
        OPS(vdn_tensor_fill(&zero, 0.0));
    }

    const int hd = c->dec_head_dim, P = v->axis_pairs;
    const vdn_rope rope = {&pos, v->inv, v->n_rot, {P, P, P}, 0};
    const double eps = c->dec_norm_eps, scale = 1.0 / sqrt((double)hd);
    vdn_tensor qv = vdn_view_cols(b.qkv, 0, dim), kv = vdn_view_cols(b.qkv, dim, dim),
               vv = vdn_view_cols(b.qkv, 2 * dim, dim);
    vdn_tensor fv = {0}, fg = {0};
    if (!fp8) fv = vdn_view_cols(b.f, 0, inner), fg = vdn_view_cols(b.f, inner, inner);
    for (int l = 0; l < c->dec_layers; l++) {
        const vit_block *bl = &v->blocks[l];
        /* fp8: each norm writes the e4m3 rows its Linear reads, and FFN-in's product goes through
         * SwiGLU straight to FFN-out's e4m3 input (the same function as quantising the float
         * activations inside each Linear, without their float round trips through memory) */
        if (fp8) {
            OPS(vdn_op_rmsnorm_quant(b.n8, b.n8_scale, b.h, bl->norm1, eps));
            OPS(vdn_op_linear(b.qkv, b.n8, bl->qkv_w, bl->qkv_b, VDN_ACT_NONE, 0));
        } else {
            OPS(vdn_op_rmsnorm(b.hn, b.h, bl->norm1, eps, NULL, NULL, NULL));
            OPS(vdn_op_linear(b.qkv, b.hn, bl->qkv_w, bl->qkv_b, VDN_ACT_NONE, 0));
        }
        OPS(vdn_op_qk_norm_rope(b.q, b.k, &qv, &kv, v->ones, v->ones, hd, eps, &rope));
        OPS(vdn_op_attention(b.o, b.q, b.k, &vv, hd, scale, b.mask, NULL));
        OPS(vdn_op_linear(b.h, b.o, bl->out_w, bl->out_b, VDN_ACT_NONE, 1)); /* h += scale1 (.) */
        if (fp8) {
            OPS(vdn_op_rmsnorm_quant(b.n8, b.n8_scale, b.h, bl->norm2, eps));
            OPS(vdn_op_linear_swiglu_quant(b.f8, b.f8_scale, b.n8, bl->ff1_w, bl->ff1_b));
            OPS(vdn_op_linear(b.h, b.f8, bl->ff2_w, bl->ff2_b, VDN_ACT_NONE,
                              1)); /* h += scale2 (.) */
        } else {
            OPS(vdn_op_rmsnorm(b.hn, b.h, bl->norm2, eps, NULL, NULL, NULL));
            OPS(vdn_op_linear(b.f, b.hn, bl->ff1_w, bl->ff1_b, VDN_ACT_NONE, 0));
            OPS(vdn_op_swiglu(b.s, &fv, &fg));
            OPS(vdn_op_linear(b.h, b.s, bl->ff2_w, bl->ff2_b, VDN_ACT_NONE,
                              1)); /* h += scale2 (.) */
        }
    }
    OPS(vdn_op_layernorm(b.hn, b.h, v->norm_out_w, v->norm_out_b, eps));
    /* one product over every row; the host keeps each tile's N token rows (its registers and
     * zero token are dropped) */
    OPS(vdn_op_linear(b.proj, b.hn, v->out_w, v->out_b, VDN_ACT_NONE, 0));
    OPS(vdn_op_unpatchify(px, b.proj, B, rows, Tl, th, tw, c->out_channels, c->temporal_ratio,
                          c->spatial_ratio));
    rc = 0;
fail:
    return rc;
}

/* ---- tiles and chunks (float32 arithmetic in the reference's order) ---- */

typedef struct {
    int n, start[64], len[64], overlap[64];
} tiling;

static int split_tiles(int length, int tile, int min_overlap, int ratio, tiling *t) {
    memset(t, 0, sizeof *t);
    if (tile >= length) {
        t->n = 1;
        t->len[0] = length;
        return 0;
    }
    int n = (length + tile - 1) / tile;
    while (tile * n - min_overlap * (n - 1) - length < 0)
        n++;
    if (n > 64) return -1;
    t->n = n;
    int sum = 0;
    for (int i = 0; i < n - 1; i++) {
        t->overlap[i] = min_overlap;
        sum += min_overlap;
    }
    int remaining = tile * n - sum - length;
    for (int i = 0; i < remaining / ratio; i++)
        t->overlap[i % (n - 1)] += ratio;
    for (int i = 0; i < n; i++) {
        t->len[i] = tile;
        t->start[i] = i == 0 ? 0 : t->start[i - 1] + tile - t->overlap[i - 1];
    }
    return 0;
}

/* the chunk geometry of _decode */
typedef struct {
    int chunk, tok_overlap, pre, frame_overlap, chunk_frames, pad, n_chunks, pad_frames, total;
} chunking;

static int plan_chunks(const vdn_vae_video_config *c, int T, chunking *k) {
    const int tr = c->temporal_ratio;
    k->chunk = (c->clip_length + tr - 1) / tr;
    k->tok_overlap = ((-c->token_drop) % k->chunk + k->chunk) % k->chunk;
    k->pre = ((-c->clip_length) % tr + tr) % tr;
    k->frame_overlap = imax(k->tok_overlap * tr - k->pre, 0);
    k->chunk_frames = k->chunk * tr;
    const int tokens = T + c->token_drop;
    k->pad = ((-tokens) % k->chunk + k->chunk) % k->chunk;
    k->n_chunks = (tokens + k->pad) / k->chunk - (c->token_drop > 0);
    if (k->n_chunks < 1) return -1;
    const int intra_tail = c->clip_length % tr;
    k->pad_frames = 0;
    for (int j = 0; j < k->pad; j++)
        k->pad_frames += intra_tail && (T + j) % k->chunk == 0 ? intra_tail : tr;
    const int clip_frames = (k->chunk + k->tok_overlap) * tr;
    const int j0 = imin(k->chunk_frames, clip_frames) - k->pre;
    const int j1 = c->token_drop > 0 ? imax(clip_frames - k->chunk_frames, 0) - k->pre : 0;
    k->total = k->n_chunks * j0 + (c->token_drop > 0 ? imax(j1, 0) : 0) - k->pad_frames;
    return 0;
}

int vdn_video_vae_frames(const vdn_video_vae *v, int T, char *err, size_t errlen) {
    chunking k;
    if (T < 1 || plan_chunks(&v->cfg, T, &k) || k.total < 1) {
        int need = 1;
        while (plan_chunks(&v->cfg, need, &k) || k.total < 1)
            need++;
        return vdn_fail(err, errlen,
                        "%d latent frames: too few for one decoder chunk (expected at "
                        "least %d)",
                        T, need);
    }
    return k.total;
}

/* ---- a clip's ViT passes, dealt over a group of decoders ----
 *
 * The device work of a clip is one ViT pass per batch of tiles of a temporal chunk: a chunk's tiles
 * are independent until their stitch, the chunks until their cross-fade. The clip's tiles, chunk
 * after chunk, are dealt to the n members as n contiguous runs of (nearly) equal length, and each
 * run is cut into passes at chunk boundaries and at the batch limit. A fixed deal and not a queue:
 * the GPUs of one job are alike and so are the tiles of a clip, so a queue would balance no
 * better, while a fixed deal makes the split reproducible (the worker's run record says who decoded
 * what; a test holds it to that). Contiguous runs and not passes in turn: a member then stitches,
 * cross-fades and de-normalises its own chunks on its device, as one decoder does for the whole
 * clip (the pixels of a 768p chunk are ~0.6 GB; on the host they took longer than the ViT), and
 * only its finished frames come back, a chunk's as soon as they are final, read under the next
 * pass (frames_out). Two things cross members:
 *  - a chunk whose tiles fall in two runs or more (a short clip on many GPUs): the member with its
 *    first tile owns it; the others unpatchify their tiles on their devices and copy them to the
 *    host, and the owner uploads them before its stitch. Another member's chunk always comes first
 *    in a run and the owner's wait last in its own, so nobody waits on a cycle;
 *  - the cross-fade between the last chunk of one owner and the first of the next: both sides'
 *    frames come back un-normalised and the host blends and de-normalises them (e frames a pair).
 * Every step is the one-decoder path's float32 op on the same values, so a group of CPU devices
 * gives the one-device frames bit for bit (test_vae_group). */

typedef struct {
    int c, t0, nt; /* tiles [t0, t0 + nt) of chunk c (row-major over the tile grid) */
} vit_pass;

typedef struct {
    vdn_video_vae *const *v;
    int n;
    vae_group grp;
    const float *z; /* un-normalised latents (lc, Tz, h, w) */
    int Tz, h, w, H, W;
    chunking k;
    tiling ty, tx;
    int Tl, th, tw, tiles, F;     /* latent frames of a chunk, a tile's latent size, tiles and pixel
                                     frames of a chunk */
    int64_t N, rows, HW, tile_px; /* a tile's tokens and ViT rows; a frame's and a tile's pixels */
    vit_pass *pass;
    int *run;       /* member r's passes: [run[r], run[r + 1]) */
    int max_nt;     /* the largest pass */
    int *owner;     /* per chunk: the member that decodes its first tile, stitches and places it */
    int *own;       /* per chunk: tiles [0, own) are the owner's, the rest other members' */
    int *left;      /* per chunk: other members' tiles not yet in remote[c] (grp.mu) */
    float **remote; /* per chunk: the other members' tiles' pixels [tiles 3 F, tile_px] (grp.mu) */
    float **edge_tail, **edge_head; /* per chunk c after an owner change: chunk c-1's tail and c's
                                       head frames, un-normalised, [3 e, HW] */
    int fade;  /* the chunks cross-fade (token_drop > 0 and overlapping frames) */
    int e, j0; /* frames of each cross-fade; frames a chunk adds to the clip */
    int full;  /* the clip's frames before the repeated tail's are dropped */
    int n_out;
    float *frames; /* the decode's output (3, n_out, H, W) */
} clip_plan;

/* The deal: member r gets the clip's tiles [ceil(r T / n), ceil((r + 1) T / n)) of T = chunks x
 * tiles, cut at chunk boundaries into passes of at most `group` tiles (a segment of L tiles into
 * ceil(L / group) near-equal passes). Sets pass, run, max_nt, owner, own and left. */
static void deal_passes(clip_plan *p, int group) {
    const int64_t total = (int64_t)p->k.n_chunks * p->tiles;
    int n_pass = 0;
    p->run = vdn_xcalloc((size_t)p->n + 1, sizeof *p->run);
    p->pass = vdn_xcalloc((size_t)(p->k.n_chunks + p->n) * (p->tiles + 1), sizeof *p->pass);
    for (int r = 0; r < p->n; r++) {
        p->run[r] = n_pass;
        /* ceilings: where there are fewer tiles than members, the last members are the idle ones */
        for (int64_t g = (total * r + p->n - 1) / p->n, g1 = (total * (r + 1) + p->n - 1) / p->n;
             g < g1;) {
            const int c = (int)(g / p->tiles), s0 = (int)(g % p->tiles);
            const int L = (int)(g1 - g < p->tiles - s0 ? g1 - g : p->tiles - s0);
            const int np = (L + group - 1) / group;
            for (int q = 0; q < np; q++) {
                const int t0 = s0 + q * L / np, t1 = s0 + (q + 1) * L / np;
                p->pass[n_pass++] = (vit_pass){c, t0, t1 - t0};
                p->max_nt = imax(p->max_nt, t1 - t0);
            }
            if (s0 == 0) p->owner[c] = r, p->own[c] = L; /* a run holds [0, L) of its chunk */
            g += L;
        }
    }
    p->run[p->n] = n_pass;
    for (int c = 0; c < p->k.n_chunks; c++)
        p->left[c] = p->tiles - p->own[c];
}

/* host float32 [rows, cols] as a tensor of the CPU device cpu (the host's share of a group's
 * cross-fades runs the pixel ops, op_pixels.h, on host buffers) */
static vdn_tensor host_tensor(vdn_dev *cpu, float *data, int64_t rows, int64_t cols) {
    vdn_tensor t;
    memset(&t, 0, sizeof t);
    t.dev = cpu, t.dtype = VDN_DT_F32, t.ndim = 2, t.data = data, t.ld = cols;
    t.ne[0] = rows, t.ne[1] = cols, t.ne[2] = t.ne[3] = 1;
    return t;
}

/* the latent tokens of pass ps's tiles: zt [nt, N, lc] in (t, y, x) order */
static void gather_tokens(const clip_plan *p, const vit_pass *ps, int lc, int sr, float *zt) {
    const int Tl = p->Tl, th = p->th, tw = p->tw, h = p->h, w = p->w, Tz = p->Tz;
    for (int b = 0; b < ps->nt; b++) {
        const int i = (ps->t0 + b) / p->tx.n, j = (ps->t0 + b) % p->tx.n;
        const int y0 = p->ty.start[i] / sr, x0 = p->tx.start[j] / sr;
        float *dst = zt + b * p->N * lc;
        for (int t = 0; t < Tl; t++)
            for (int y = 0; y < th; y++)
                for (int x = 0; x < tw; x++)
                    for (int ch = 0; ch < lc; ch++)
                        dst[(((int64_t)t * th + y) * tw + x) * lc + ch] =
                            p->z[(((int64_t)ch * Tz + ps->c * p->k.chunk + t) * h + y0 + y) * w +
                                 x0 + x];
    }
}

/* Frames [t0, t0 + n) of every channel of a (3, F, H, W) block held as [3 F, H W] */
static vdn_tensor planes(const vdn_tensor *t, int F, int ch, int t0, int n) {
    return vdn_view_rows(t, (int64_t)ch * F + t0, n);
}

#define DEV_OPS(call)                                                                              \
    do {                                                                                           \
        if (call) {                                                                                \
            vdn_fail(err, errlen, "video VAE: %s", vdn_dev_error(d));                              \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* The tile grid of a chunk for vdn_op_tile_stitch, in pixels */
static vdn_tile_grid tile_grid(const clip_plan *p, int sr) {
    vdn_tile_grid g = {.ny = p->ty.n, .nx = p->tx.n, .th = p->th * sr, .tw = p->tw * sr};
    for (int i = 0; i < g.ny; i++) {
        g.y0[i] = p->ty.start[i];
        g.oy[i] = p->ty.overlap[i];
    }
    for (int j = 0; j < g.nx; j++) {
        g.x0[j] = p->tx.start[j];
        g.ox[j] = p->tx.overlap[j];
    }
    return g;
}

/* n frames from frame src_t0 of src (3, src_F, H, W) to frame out_t0 of out (3, out_F, H, W):
 * ImageNet de-normalisation and the clamp to [0, 1] (float32, the reference's order), on
 * whichever device holds both */
static int denorm(vdn_tensor *out, int out_F, int out_t0, const vdn_tensor *src, int src_F,
                  int src_t0, int n) {
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std_[3] = {0.229f, 0.224f, 0.225f};
    for (int ch = 0; ch < 3; ch++) {
        vdn_tensor dst = planes(out, out_F, ch, out_t0, n), s = planes(src, src_F, ch, src_t0, n);
        if (vdn_op_scale_shift_clamp(&dst, &s, std_[ch], mean[ch], 0.0, 1.0)) return -1;
    }
    return 0;
}

/* The frames a member's chunks [cf, cl] write into the clip, [*lo, *hi) (the last chunk's with
 * the trailing overlap; another's with the tail the next chunk blends with), and those it
 * finishes itself, [*i_lo, *i_hi) within the output: all but the cross-fades with other owners */
static void member_frames(const clip_plan *p, int cf, int cl, int *lo, int *hi, int *i_lo,
                          int *i_hi) {
    const int last = cl == p->k.n_chunks - 1;
    *lo = cf * p->j0;
    *hi = last ? p->full : (cl + 1) * p->j0 + (p->fade ? p->e : 0);
    *i_lo = imin(cf * p->j0 + (cf > 0 && p->fade ? p->e : 0), p->n_out);
    *i_hi = imin(last ? p->full : (cl + 1) * p->j0, p->n_out);
}

/* A stitched chunk c (clip: its F frames) into the member's frames all, which start at clip
 * frame lo: its j0 frames from frame pre on, at c j0; where the chunk before is the member's own
 * too, the first e of them are cross-faded with the tail it left there (so chunks come in order);
 * and its tail after frame chunk_frames + pre, which the next chunk blends with (the last
 * chunk's: the clip's last frame_overlap frames). */
static int place_chunk(const clip_plan *p, int c, int lo, int fade_in, vdn_tensor *all,
                       const vdn_tensor *clip, char *err, size_t errlen) {
    const chunking *k = &p->k;
    vdn_dev *d = all->dev;
    const int j0 = p->j0, nf = (int)(vdn_tensor_rows(all) / 3), F = p->F;
    const int head = fade_in && c > 0 && p->fade ? p->e : 0;
    for (int ch = 0; ch < 3; ch++) {
        vdn_tensor dst = planes(all, nf, ch, c * j0 + head - lo, j0 - head),
                   src = planes(clip, F, ch, k->pre + head, j0 - head);
        DEV_OPS(vdn_tensor_copy(&dst, &src));
        if (head) {
            vdn_tensor a = planes(all, nf, ch, c * j0 - lo, head),
                       b = planes(clip, F, ch, k->pre, head);
            DEV_OPS(vdn_op_crossfade(&a, &b));
        }
        if (!p->fade) continue;
        const int last = c == k->n_chunks - 1;
        const int n = last ? k->frame_overlap : p->e;
        vdn_tensor tail = planes(all, nf, ch, (last ? k->n_chunks * j0 : (c + 1) * j0) - lo, n),
                   from =
                       planes(clip, F, ch,
                              k->chunk_frames + k->pre + (last ? 0 : k->frame_overlap - p->e), n);
        DEV_OPS(vdn_tensor_copy(&tail, &from));
    }
    return 0;
fail:
    return -1;
}

/* frames [t0, t0 + n) of the (3, F, H, W) block t to host (3, n, H, W) */
static int get_frames(const vdn_tensor *t, int F, int t0, int n, float *host, int64_t HW) {
    for (int ch = 0; ch < 3; ch++) {
        vdn_tensor s = planes(t, F, ch, t0, n);
        if (vdn_tensor_get(&s, host + (int64_t)ch * n * HW)) return -1;
    }
    return 0;
}

/* The sides of the member's cross-fades with other owners (its chunks [cf, cl] placed in all),
 * un-normalised into edge_head / edge_tail for the host */
static int read_edges(const clip_plan *p, int cf, int cl, const vdn_tensor *all, char *err,
                      size_t errlen) {
    vdn_dev *d = all->dev;
    int lo, hi, i_lo, i_hi;
    member_frames(p, cf, cl, &lo, &hi, &i_lo, &i_hi);
    const int nf = hi - lo;
    if (p->fade && cf > 0) DEV_OPS(get_frames(all, nf, 0, p->e, p->edge_head[cf], p->HW));
    if (p->fade && cl < p->k.n_chunks - 1)
        DEV_OPS(get_frames(all, nf, (cl + 1) * p->j0 - lo, p->e, p->edge_tail[cl + 1], p->HW));
    return 0;
fail:
    return -1;
}

/* The frames of the output that chunk c finishes once placed (c's own, its cross-fade with the
 * chunk before where that is the member's too; the last chunk's run to the clip's end), within
 * the member's [i_lo, i_hi): [*a, *b), empty when *a >= *b */
static void chunk_done(const clip_plan *p, int c, int cf, int i_lo, int i_hi, int *a, int *b) {
    *a = imax(c * p->j0 + (c == cf && c > 0 && p->fade ? p->e : 0), i_lo);
    *b = imin(c == p->k.n_chunks - 1 ? p->full : (c + 1) * p->j0, i_hi);
}

/* A member's finished frames on their way out: de-normalised into out (the member's frames
 * [i_lo, i_hi)) on lane 0, then read into the output on lane 1 (read_back) after the host has
 * queued the next pass on lane 0, so that the copy runs under that pass instead of between two.
 * The fork orders lane 1 after the de-normalisation; lane 1 only reads out's rows [a, b), which
 * lane 0 does not touch before the join; a read on lane 1 waits for lane 1 alone. */
typedef struct {
    vdn_tensor *out;
    int i_lo, n_own, a, b; /* frames [a, b) pending (a < b) */
    int forked;
} frames_out;

static int denorm_chunk(frames_out *fo, const vdn_tensor *all, int lo, int a, int b) {
    vdn_dev *d = all->dev;
    const int nf = (int)(vdn_tensor_rows(all) / 3);
    if (a >= b) return 0;
    if (denorm(fo->out, fo->n_own, a - fo->i_lo, all, nf, a - lo, b - a) || vdn_dev_fork(d) ||
        vdn_dev_lane(d, 0))
        return -1;
    fo->forked = 1, fo->a = a, fo->b = b;
    return 0;
}

/* the pending frames into the output (lane 1), then the join; 0 or -1 */
static int read_back(const clip_plan *p, frames_out *fo) {
    if (!fo->forked) return 0;
    vdn_dev *d = fo->out->dev;
    int rc = vdn_dev_lane(d, 1);
    for (int ch = 0; ch < 3 && !rc; ch++) {
        vdn_tensor s = planes(fo->out, fo->n_own, ch, fo->a - fo->i_lo, fo->b - fo->a);
        rc = vdn_tensor_get(&s, p->frames + ((int64_t)ch * p->n_out + fo->a) * p->HW);
    }
    fo->forked = 0;
    const int jrc = vdn_dev_join(d); /* also after a failed read: the device goes back to lane 0 */
    return rc || jrc ? -1 : 0;
}

/* pass ps of chunk c, which another member owns: its tiles' pixels to the host for the owner */
static int send_tiles(clip_plan *p, const vit_pass *ps, const vdn_tensor *px, char *err,
                      size_t errlen) {
    const int64_t per_tile = 3 * (int64_t)p->F * p->tile_px;
    pthread_mutex_lock(&p->grp.mu);
    if (!p->remote[ps->c]) p->remote[ps->c] = malloc(sizeof(float) * (size_t)(p->tiles * per_tile));
    float *dst = p->remote[ps->c];
    pthread_mutex_unlock(&p->grp.mu);
    if (!dst) return vdn_fail(err, errlen, "video VAE: out of memory for the tiles of a chunk");
    if (vdn_tensor_get(px, dst + ps->t0 * per_tile))
        return vdn_fail(err, errlen, "video VAE: %s", vdn_dev_error(px->dev));
    vae_group_arrive(&p->grp, &p->left[ps->c], ps->nt);
    return 0;
}

/* chunk c's tiles from other members (own its first tiles) into the owner's tile buffer, once they
 * are all on the host; 1 when a member failed meanwhile */
static int receive_tiles(clip_plan *p, int c, vdn_tensor *tiles, char *err, size_t errlen) {
    if (p->own[c] == p->tiles) return 0;
    if (vae_group_wait_zero(&p->grp, &p->left[c])) return 1;
    const int64_t per_tile = 3 * (int64_t)p->F * p->tile_px, rows_per_tile = 3 * (int64_t)p->F;
    vdn_tensor dst =
        vdn_view_rows(tiles, p->own[c] * rows_per_tile, (p->tiles - p->own[c]) * rows_per_tile);
    if (vdn_tensor_set(&dst, p->remote[c] + p->own[c] * per_tile, VDN_DT_F32))
        return vdn_fail(err, errlen, "video VAE: %s", vdn_dev_error(tiles->dev));
    free(p->remote[c]);
    p->remote[c] = NULL; /* every other member is done with it */
    return 0;
}

/* Member r's share: its passes on its own decoder, on this thread alone. Each pass's tiles are
 * unpatchified on the device into the chunk's tile buffer; a chunk the member owns is stitched
 * there after its last tile and placed into the member's frames; the frames it finishes come back
 * while the device runs the next pass (read_back). */
static void clip_member(int r, void *arg) {
    clip_plan *p = arg;
    vdn_video_vae *v = p->v[r];
    vdn_dev *d = v->dev;
    const vdn_vae_video_config *c = &v->cfg;
    const int lc = c->latent_channels, sr = c->spatial_ratio, F = p->F;
    char *err = p->grp.err[r];
    const size_t errlen = VDN_ERR_LEN;
    if (p->run[r] == p->run[r + 1]) return; /* fewer tiles than members: nothing to do */
    int cf = -1, cl = -1, lo = 0, hi = 0, i_lo = 0, i_hi = 0;
    for (int u = p->run[r]; u < p->run[r + 1]; u++)
        if (p->owner[p->pass[u].c] == r) {
            if (cf < 0) cf = p->pass[u].c;
            cl = p->pass[u].c;
        }
    if (cf >= 0) member_frames(p, cf, cl, &lo, &hi, &i_lo, &i_hi);
    frames_out fo = {.i_lo = cf >= 0 ? i_lo : 0, .n_own = cf >= 0 ? i_hi - i_lo : 0};
    float *zt = malloc(sizeof(float) * (size_t)(p->max_nt * p->N * lc));
    vdn_tensor *tiles = vdn_tensor_new2(d, VDN_DT_F32, (int64_t)p->tiles * 3 * F, p->tile_px);
    vdn_tensor *clip = cf < 0 ? NULL : vdn_tensor_new2(d, VDN_DT_F32, 3 * (int64_t)F, p->HW);
    vdn_tensor *all = cf < 0 ? NULL : vdn_tensor_new2(d, VDN_DT_F32, 3 * (int64_t)(hi - lo), p->HW);
    if (fo.n_own > 0) fo.out = vdn_tensor_new2(d, VDN_DT_F32, 3 * (int64_t)fo.n_own, p->HW);
    if (!zt || !tiles || (cf >= 0 && (!clip || !all)) || (fo.n_own > 0 && !fo.out)) {
        vdn_fail(err, errlen, "video VAE: frames of %d tiles, a chunk and %d frames of %dx%d: %s",
                 p->tiles, hi - lo, p->W, p->H, zt ? vdn_dev_error(d) : "out of memory");
        goto fail;
    }
    const vdn_tile_grid g = tile_grid(p, sr);
    if (all) DEV_OPS(vdn_tensor_fill(all, 0.0)); /* frames no chunk writes stay 0 */
    for (int u = p->run[r]; u < p->run[r + 1]; u++) {
        if (atomic_load(&p->grp.stop)) goto done;
        const vit_pass *ps = &p->pass[u];
        const int mine = p->owner[ps->c] == r;
        gather_tokens(p, ps, lc, sr, zt);
        vdn_tensor px = vdn_view_rows(tiles, (int64_t)ps->t0 * 3 * F, (int64_t)ps->nt * 3 * F);
        if (decode_tiles(v, zt, ps->nt, p->Tl, p->th, p->tw, &px, err, errlen)) goto fail;
        if (read_back(p, &fo)) goto dev_fail; /* the last chunk's frames, under this pass */
        if (!mine && send_tiles(p, ps, &px, err, errlen)) goto fail;
        vae_group_done(&p->grp, r, ps->nt); /* queued: the device may still be on it */
        if (!mine || ps->t0 + ps->nt < p->own[ps->c])
            continue; /* the chunk's tiles come in order */
        const int got = receive_tiles(p, ps->c, tiles, err, errlen);
        if (got) {
            if (got < 0) goto fail;
            goto done; /* another member failed */
        }
        DEV_OPS(vdn_op_tile_stitch(clip, tiles, &g));
        if (place_chunk(p, ps->c, lo, ps->c > cf, all, clip, err, errlen)) goto fail;
        int a, b;
        chunk_done(p, ps->c, cf, i_lo, i_hi, &a, &b);
        if (denorm_chunk(&fo, all, lo, a, b)) goto dev_fail;
    }
    if (read_back(p, &fo)) goto dev_fail;
    if (cf >= 0 && read_edges(p, cf, cl, all, err, errlen)) goto fail;
    goto done;
dev_fail:
    vdn_fail(err, errlen, "video VAE: %s", vdn_dev_error(d));
fail:
    vae_group_fail(&p->grp, r);
done:
    if (fo.forked) vdn_dev_join(d); /* a decode that stopped between a fork and its read */
    vit_bufs_release(v);
    vdn_tensor_free(fo.out);
    free(zt);
    vdn_tensor_free(tiles);
    vdn_tensor_free(clip);
    vdn_tensor_free(all);
}

/* The cross-fades between chunks of two owners, on the host: chunk c-1's tail blended with c's
 * head (the one-decoder path's crossfade on the same values), then de-normalised into the output */
static int join_edges(const clip_plan *p, char *err, size_t errlen) {
    if (!p->fade) return 0;
    vdn_dev *cpu = vdn_dev_open("cpu", 0, 0, err, errlen);
    if (!cpu) return -1;
    int rc = 0;
    vdn_tensor out = host_tensor(cpu, p->frames, 3 * (int64_t)p->n_out, p->HW);
    for (int c = 1; c < p->k.n_chunks && !rc; c++) {
        if (p->owner[c] == p->owner[c - 1]) continue;
        const int n = imin(p->e, p->n_out - c * p->j0);
        vdn_tensor a = host_tensor(cpu, p->edge_tail[c], 3 * (int64_t)p->e, p->HW),
                   b = host_tensor(cpu, p->edge_head[c], 3 * (int64_t)p->e, p->HW);
        for (int ch = 0; ch < 3 && !rc; ch++) {
            vdn_tensor x = planes(&a, p->e, ch, 0, p->e), y = planes(&b, p->e, ch, 0, p->e);
            rc = vdn_op_crossfade(&x, &y);
        }
        if (!rc && n > 0) rc = denorm(&out, p->n_out, c * p->j0, &a, p->e, 0, n);
    }
    if (rc) vdn_fail(err, errlen, "video VAE: %s", vdn_dev_error(cpu));
    vdn_dev_close(cpu);
    return rc;
}

static void free_plan(clip_plan *p) {
    for (int ci = 0; p->remote && ci < p->k.n_chunks; ci++) { /* what a failed decode left */
        free(p->remote[ci]);
        if (p->edge_tail) free(p->edge_tail[ci]);
        if (p->edge_head) free(p->edge_head[ci]);
    }
    free(p->remote);
    free(p->edge_tail);
    free(p->edge_head);
    free(p->owner);
    free(p->own);
    free(p->left);
    free(p->run);
    free(p->pass);
}

/* the host buffers of the cross-fades between owners: 0, or -1 out of memory */
static int alloc_edges(clip_plan *p) {
    const int nc = p->k.n_chunks;
    p->remote = vdn_xcalloc((size_t)nc, sizeof *p->remote);
    p->edge_tail = vdn_xcalloc((size_t)nc, sizeof *p->edge_tail);
    p->edge_head = vdn_xcalloc((size_t)nc, sizeof *p->edge_head);
    for (int c = 1; c < nc && p->fade; c++) {
        if (p->owner[c] == p->owner[c - 1]) continue;
        p->edge_tail[c] = malloc(sizeof(float) * 3 * (size_t)(p->e * p->HW));
        p->edge_head[c] = malloc(sizeof(float) * 3 * (size_t)(p->e * p->HW));
        if (!p->edge_tail[c] || !p->edge_head[c]) return -1;
    }
    return 0;
}

/* un-normalised latents (float32: z std + mean) with the last frame repeated into the padding */
static float *unnormalise(const vdn_vae_video_config *c, const float *latents, int T, int Tz, int h,
                          int w) {
    const int lc = c->latent_channels;
    float *z = vdn_xmalloc(sizeof(float) * (size_t)lc * Tz * h * w);
    for (int ch = 0; ch < lc; ch++) {
        const float sd = (float)c->latents_std[ch], mu = (float)c->latents_mean[ch];
        for (int t = 0; t < Tz; t++) {
            const float *src = latents + (((int64_t)ch * T + imin(t, T - 1)) * h) * w;
            float *dst = z + (((int64_t)ch * Tz + t) * h) * w;
            for (int64_t i = 0; i < (int64_t)h * w; i++) {
                const float s = src[i] * sd;
                dst[i] = s + mu;
            }
        }
    }
    return z;
}

/* the clip's geometry: chunks, tiles, frames; -1 with a message */
static int plan_clip(clip_plan *p, const vdn_vae_video_config *c, int T, char *err, size_t errlen) {
    plan_chunks(c, T, &p->k);
    const chunking *k = &p->k;
    const int sr = c->spatial_ratio;
    p->H = p->h * sr, p->W = p->w * sr;
    if (split_tiles(p->H, 256, 64, sr, &p->ty) || split_tiles(p->W, 256, 64, sr, &p->tx))
        return vdn_fail(err, errlen, "video VAE: %dx%d px needs more than 64 tiles a side", p->W,
                        p->H);
    p->Tz = T + k->pad;
    p->Tl = k->chunk + k->tok_overlap;
    p->F = p->Tl * c->temporal_ratio;
    /* every tile has the same size (split_tiles), so the tiles of a pass batch as one sequence */
    p->th = p->ty.len[0] / sr;
    p->tw = p->tx.len[0] / sr;
    p->tiles = p->ty.n * p->tx.n;
    p->N = (int64_t)p->Tl * p->th * p->tw;
    p->rows = p->N + c->dec_registers + 1;
    p->HW = (int64_t)p->H * p->W;
    p->tile_px = (int64_t)p->th * sr * p->tw * sr;
    p->fade = c->token_drop > 0 && k->frame_overlap > 0;
    p->e = imin(k->frame_overlap, k->chunk_frames - k->pre);
    p->j0 = k->chunk_frames - k->pre;
    p->full = k->n_chunks * p->j0 + k->frame_overlap;
    return 0;
}

/* -1 with a message unless the n decoders can form a group (vae_group_check) */
static int check_group(vdn_video_vae *const *v, int n, char *err, size_t errlen) {
    vdn_dev *devs[VDN_VAE_MAX_GROUP] = {0};
    char *cj[VDN_VAE_MAX_GROUP] = {0};
    const int nn = n < 1 ? 0 : imin(n, VDN_VAE_MAX_GROUP);
    for (int i = 0; i < nn; i++) {
        devs[i] = v[i]->dev;
        cj[i] = vdn_vae_video_config_json(&v[i]->cfg);
    }
    const int rc = vae_group_check(n, devs, cj, "video VAE", err, errlen);
    for (int i = 0; i < nn; i++)
        free(cj[i]);
    return rc;
}

int vdn_video_vae_decode_group(vdn_video_vae *const *v, int n, const float *latents, int T, int h,
                               int w, float *frames, vdn_vae_progress_fn progress, void *user,
                               vdn_vae_share *share, char *err, size_t errlen) {
    if (share) memset(share, 0, sizeof *share);
    if (check_group(v, n, err, errlen)) return -1;
    const vdn_vae_video_config *c = &v[0]->cfg;
    const int n_out = vdn_video_vae_frames(v[0], T, err, errlen);
    if (n_out < 0) return -1;
    if (h < 1 || w < 1)
        return vdn_fail(err, errlen, "latent grid %dx%d: expected at least 1x1", w, h);
    clip_plan p = {.v = v, .n = n, .h = h, .w = w, .frames = frames, .n_out = n_out};
    if (plan_clip(&p, c, T, err, errlen)) return -1;
    const int nc = p.k.n_chunks;
    p.owner = vdn_xcalloc((size_t)nc, sizeof *p.owner);
    p.own = vdn_xcalloc((size_t)nc, sizeof *p.own);
    p.left = vdn_xcalloc((size_t)nc, sizeof *p.left);
    deal_passes(&p, imax(1, imin(p.tiles, (int)(VDN_VAE_BATCH_ROWS / p.rows))));
    vdn_dev *devs[VDN_VAE_MAX_GROUP];
    for (int i = 0; i < n; i++)
        devs[i] = v[i]->dev;
    int rc;
    vae_group_init(&p.grp, n, nc * p.tiles, progress, user);
    if (alloc_edges(&p)) {
        rc =
            vdn_fail(err, errlen, "video VAE: out of memory for the cross-fades of %d frames", p.e);
        vae_group_finish(&p.grp, devs, share, NULL, 0);
    } else {
        float *z = unnormalise(c, latents, T, p.Tz, h, w);
        p.z = z;
        vae_group_run(&p.grp, clip_member, &p);
        rc = vae_group_finish(&p.grp, devs, share, err, errlen);
        free(z);
    }
    if (!rc) rc = join_edges(&p, err, errlen);
    free_plan(&p);
    return rc;
}

int vdn_video_vae_decode(vdn_video_vae *v, const float *latents, int T, int h, int w, float *frames,
                         vdn_vae_progress_fn progress, void *user, char *err, size_t errlen) {
    return vdn_video_vae_decode_group(&v, 1, latents, T, h, w, frames, progress, user, NULL, err,
                                      errlen);
}
