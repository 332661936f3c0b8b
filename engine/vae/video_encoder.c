/* The video VAE's encoder for keyframes over the op layer (video_encoder.h says what it
 * computes). Host float32 work (pixels, the tiles' blend, the posterior sample) is written in
 * torch's order of operations and compiled with -ffp-contract=off, so it rounds as torch does. */
#include "video_encoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_conv.h"
#include "safetensors.h"
#include "vae.h"
#include "vdn_util.h"

#define ENC_NORM_EPS 1e-6 /* norm_eps of the release (vae_config.c writes it) */
#define ENC_MAX_RESNETS 8

typedef struct {
    vdn_tensor *w, *b; /* w [cout, cin*K*K] (the k_t = 2 slice), b [cout] float32 */
    int cin, cout, K;
} enc_conv;

typedef struct {
    vdn_tensor *n1w, *n1b, *n2w, *n2b; /* GroupNorm affine, float32 */
    enc_conv c1, c2, sc;               /* sc.w NULL: no conv_shortcut (cin == cout) */
} enc_resnet;

typedef struct {
    enc_resnet r[ENC_MAX_RESNETS];
    enc_conv down; /* down.w NULL: no downsampler */
    int sf;        /* the spatial stride of the downsampler */
} enc_level;

struct vdn_video_encoder {
    vdn_dev *dev;
    vdn_vae_video_config cfg;
    enc_conv conv_in, conv_out, quant;
    enc_level lv[VDN_VAE_MAX_LEVELS];
    vdn_tensor *now, *nob; /* norm_out */
    /* a pass's buffers (enc_bufs: two float32, two in the activation dtype) and the canvas,
     * kept from one encode to the next (grown when a larger canvas needs more) */
    vdn_tensor *pass[4], *canvas;
    int64_t pass_elems, canvas_elems;
};

const vdn_vae_video_config *vdn_video_encoder_config(const vdn_video_encoder *e) {
    return &e->cfg;
}

/* ---- loading ---- */

static vdn_tensor *upload(vdn_dev *d, vdn_dtype dt, int64_t rows, int64_t cols, const float *h,
                          const char *what, char *err, size_t errlen) {
    vdn_tensor *t = vdn_tensor_new2(d, dt, rows, cols);
    if (!t || vdn_tensor_set(t, h, VDN_DT_F32)) {
        vdn_fail(err, errlen, "video VAE encoder: uploading %s: %s", what, vdn_dev_error(d));
        vdn_tensor_free(t);
        return NULL;
    }
    return t;
}

static vdn_tensor *up_vec(vdn_video_encoder *e, vdn_st_set *st, const char *name, char *err,
                          size_t errlen) {
    int64_t n;
    float *h = vdn_vae_read(st, name, &n);
    if (!h) {
        vdn_fail(err, errlen, "video VAE encoder: reading %s", name);
        return NULL;
    }
    vdn_tensor *t = upload(e->dev, VDN_DT_F32, 1, n, h, name, err, errlen);
    free(h);
    return t;
}

/* a Conv3d [cout, cin, K, K, K] as its last temporal slice [cout, cin*K*K] (K = 1: [cout, cin]) */
static int up_conv(vdn_video_encoder *e, vdn_st_set *st, const char *pre, int cin, int cout, int K,
                   enc_conv *c, char *err, size_t errlen) {
    char name[320];
    snprintf(name, sizeof name, "%s.weight", pre);
    float *w5 = vdn_vae_read(st, name, NULL);
    if (!w5) return vdn_fail(err, errlen, "video VAE encoder: reading %s", name);
    const int64_t kk = (int64_t)K * K, cols = (int64_t)cin * kk;
    float *w2 = vdn_xmalloc(sizeof(float) * (size_t)(cout * cols));
    for (int64_t o = 0; o < cout; o++)
        for (int64_t i = 0; i < cin; i++)
            memcpy(w2 + o * cols + i * kk, w5 + ((o * cin + i) * K + (K - 1)) * kk,
                   sizeof(float) * (size_t)kk);
    free(w5);
    c->cin = cin, c->cout = cout, c->K = K;
    c->w = upload(e->dev, vdn_dev_act_dtype(e->dev), cout, cols, w2, name, err, errlen);
    free(w2);
    snprintf(name, sizeof name, "%s.bias", pre);
    if (c->w) c->b = up_vec(e, st, name, err, errlen);
    return c->w && c->b ? 0 : -1;
}

static void conv_free(enc_conv *c) {
    vdn_tensor_free(c->w);
    vdn_tensor_free(c->b);
}

void vdn_video_encoder_free(vdn_video_encoder *e) {
    if (!e) return;
    conv_free(&e->conv_in);
    conv_free(&e->conv_out);
    conv_free(&e->quant);
    for (int i = 0; i < VDN_VAE_MAX_LEVELS; i++) {
        for (int r = 0; r < ENC_MAX_RESNETS; r++) {
            enc_resnet *rn = &e->lv[i].r[r];
            vdn_tensor_free(rn->n1w), vdn_tensor_free(rn->n1b);
            vdn_tensor_free(rn->n2w), vdn_tensor_free(rn->n2b);
            conv_free(&rn->c1), conv_free(&rn->c2), conv_free(&rn->sc);
        }
        conv_free(&e->lv[i].down);
    }
    vdn_tensor_free(e->now);
    vdn_tensor_free(e->nob);
    for (int i = 0; i < 4; i++)
        vdn_tensor_free(e->pass[i]);
    vdn_tensor_free(e->canvas);
    free(e);
}

static int load_resnet(vdn_video_encoder *e, vdn_st_set *st, const char *p, int cin, int cout,
                       enc_resnet *rn, char *err, size_t errlen) {
    char n[300];
#define VEC(field, suffix)                                                                         \
    snprintf(n, sizeof n, "%s.%s", p, suffix);                                                     \
    if (!(rn->field = up_vec(e, st, n, err, errlen))) return -1
    VEC(n1w, "norm1.weight");
    VEC(n1b, "norm1.bias");
    VEC(n2w, "norm2.weight");
    VEC(n2b, "norm2.bias");
#undef VEC
    snprintf(n, sizeof n, "%s.conv1", p);
    if (up_conv(e, st, n, cin, cout, 3, &rn->c1, err, errlen)) return -1;
    snprintf(n, sizeof n, "%s.conv2", p);
    if (up_conv(e, st, n, cout, cout, 3, &rn->c2, err, errlen)) return -1;
    snprintf(n, sizeof n, "%s.conv_shortcut", p);
    return cin != cout ? up_conv(e, st, n, cin, cout, 1, &rn->sc, err, errlen) : 0;
}

static int load_all(vdn_video_encoder *e, vdn_st_set *st, char *err, size_t errlen) {
    const vdn_vae_video_config *c = &e->cfg;
    const int *boc = c->block_out_channels, lc2 = 2 * c->latent_channels;
    if (up_conv(e, st, "encoder.conv_in", c->in_channels, boc[0], 3, &e->conv_in, err, errlen))
        return -1;
    for (int i = 0; i < c->n_levels; i++) {
        const int in = i == 0 ? boc[0] : boc[i - 1], out = boc[i];
        char p[200];
        for (int r = 0; r < c->layers_per_block; r++) {
            snprintf(p, sizeof p, "encoder.down_blocks.%d.resnets.%d", i, r);
            if (load_resnet(e, st, p, r == 0 ? in : out, out, &e->lv[i].r[r], err, errlen))
                return -1;
        }
        e->lv[i].sf = c->spatial_factors[i];
        snprintf(p, sizeof p, "encoder.down_blocks.%d.downsamplers.0.conv", i);
        if (c->spatial_factors[i] * c->temporal_factors[i] > 1 &&
            up_conv(e, st, p, out, out, 3, &e->lv[i].down, err, errlen))
            return -1;
    }
    const int last = boc[c->n_levels - 1];
    if (!(e->now = up_vec(e, st, "encoder.norm_out.weight", err, errlen)) ||
        !(e->nob = up_vec(e, st, "encoder.norm_out.bias", err, errlen)))
        return -1;
    if (up_conv(e, st, "encoder.conv_out", last, lc2, 3, &e->conv_out, err, errlen)) return -1;
    return up_conv(e, st, "quant_conv", lc2, lc2, 1, &e->quant, err, errlen);
}

vdn_video_encoder *vdn_video_encoder_load(vdn_dev *dev, const char *dir, char *err, size_t errlen) {
    vdn_video_encoder *e = vdn_xcalloc(1, sizeof *e);
    e->dev = dev;
    if (vdn_vae_video_config_load(dir, &e->cfg, err, errlen)) {
        free(e);
        return NULL;
    }
    for (int i = 0; i < e->cfg.n_levels; i++)
        if (e->cfg.spatial_factors[i] > 2 ||
            (e->cfg.spatial_factors[i] == 1 && e->cfg.temporal_factors[i] > 1)) {
            vdn_fail(err, errlen,
                     "%s/config.json: level %d downsamples %dx spatially and %dx in time: the "
                     "keyframe encoder takes spatial factors 1 and 2, and no level that "
                     "downsamples in time alone",
                     dir, i, e->cfg.spatial_factors[i], e->cfg.temporal_factors[i]);
            free(e);
            return NULL;
        }
    if (e->cfg.layers_per_block > ENC_MAX_RESNETS) {
        vdn_fail(err, errlen, "%s/config.json: layers_per_block %d: at most %d are supported", dir,
                 e->cfg.layers_per_block, ENC_MAX_RESNETS);
        free(e);
        return NULL;
    }
    vdn_st_set *st = vdn_vae_open_weights(dir, 1, &e->cfg, err, errlen);
    if (!st) {
        free(e);
        return NULL;
    }
    int rc = load_all(e, st, err, errlen);
    vdn_st_set_close(st);
    if (rc) {
        vdn_video_encoder_free(e);
        return NULL;
    }
    return e;
}

/* ---- one tile through the network ---- */

/* rows x cols over the first rows*cols elements of a contiguous buffer */
static vdn_tensor view2d(const vdn_tensor *buf, int64_t rows, int64_t cols) {
    vdn_tensor v = *buf;
    v.owned = 0;
    v.ndim = 2;
    v.ne[0] = rows, v.ne[1] = cols, v.ne[2] = v.ne[3] = 1;
    v.ld = cols;
    return v;
}

/* A pass: nb tiles through the network together (each op one call over all of them: the
 * tiles are a batch of images). The residual stream lives in s[0] (float32), s[1] takes its next
 * version (the shortcut, conv_in, the downsamplers); t1, t2 hold a resnet's inner activations in
 * the device's activation dtype (bf16 on a GPU: conv1's output is stored rounded, the others are
 * rounded to bf16 where a conv reads them anyway). */
typedef struct {
    vdn_tensor *s[2], *t1, *t2;
    int H, W, nb; /* the current image size; tiles in the pass */
} enc_bufs;

static const int PAD_SAME[4] = {1, 1, 1, 1}, PAD_NONE[4] = {0, 0, 0, 0};

/* y [nb cout, Ho*Wo] = conv(x [nb cin, H*W]); the size after it in *H, *W */
static int conv(const enc_conv *c, const enc_bufs *B, const vdn_tensor *xb, vdn_tensor *yb,
                int stride, const int pad[4], int accumulate, int *Ho, int *Wo) {
    const int H = B->H, W = B->W;
    const int ho = (H + pad[0] + pad[1] - c->K) / stride + 1,
              wo = (W + pad[2] + pad[3] - c->K) / stride + 1;
    vdn_tensor x = view2d(xb, (int64_t)B->nb * c->cin, (int64_t)H * W),
               y = view2d(yb, (int64_t)B->nb * c->cout, (int64_t)ho * wo);
    if (vdn_op_conv2d(&y, &x, c->w, c->b, H, W, c->K, stride, pad, 1, accumulate)) return -1;
    if (Ho) *Ho = ho, *Wo = wo;
    return 0;
}

static int gn_silu(const vdn_tensor *w, const vdn_tensor *b, int groups, const enc_bufs *B,
                   const vdn_tensor *xb, vdn_tensor *yb, int C) {
    const int64_t rows = (int64_t)B->nb * C, n = (int64_t)B->H * B->W;
    vdn_tensor x = view2d(xb, rows, n), y = view2d(yb, rows, n);
    return vdn_op_group_norm(&y, &x, w, b, groups, ENC_NORM_EPS, VDN_ACT_SILU);
}

static void next_stream(enc_bufs *B) {
    vdn_tensor *t = B->s[0];
    B->s[0] = B->s[1], B->s[1] = t;
}

/* x <- resnet(x): h = conv1(silu(norm1 x)); h = conv2(silu(norm2 h)); x = shortcut(x) + h */
static int resnet(vdn_video_encoder *e, const enc_resnet *rn, enc_bufs *B) {
    const int g = e->cfg.norm_num_groups;
    if (gn_silu(rn->n1w, rn->n1b, g, B, B->s[0], B->t1, rn->c1.cin) ||
        conv(&rn->c1, B, B->t1, B->t2, 1, PAD_SAME, 0, NULL, NULL) ||
        gn_silu(rn->n2w, rn->n2b, g, B, B->t2, B->t2, rn->c1.cout))
        return -1;
    if (rn->sc.w) {
        if (conv(&rn->sc, B, B->s[0], B->s[1], 1, PAD_NONE, 0, NULL, NULL)) return -1;
        next_stream(B);
    }
    return conv(&rn->c2, B, B->t2, B->s[0], 1, PAD_SAME, 1, NULL, NULL);
}

/* pixels [nb 3, H*W] (already in B->s[0]) -> moments [nb 2C, (H/16) (W/16)] in B->s[0] */
static int forward(vdn_video_encoder *e, enc_bufs *B) {
    const vdn_vae_video_config *c = &e->cfg;
    if (conv(&e->conv_in, B, B->s[0], B->s[1], 1, PAD_SAME, 0, NULL, NULL)) return -1;
    next_stream(B);
    for (int i = 0; i < c->n_levels; i++) {
        for (int r = 0; r < c->layers_per_block; r++)
            if (resnet(e, &e->lv[i].r[r], B)) return -1;
        const enc_level *L = &e->lv[i];
        if (!L->down.w) continue;
        /* a spatial stride of 2 is preceded by a reflect pad of 1 at the bottom and right */
        const int pad2[4] = {0, 1, 0, 1};
        if (conv(&L->down, B, B->s[0], B->s[1], L->sf, L->sf == 2 ? pad2 : PAD_NONE, 0, &B->H,
                 &B->W))
            return -1;
        next_stream(B);
    }
    const int last = c->block_out_channels[c->n_levels - 1];
    if (gn_silu(e->now, e->nob, c->norm_num_groups, B, B->s[0], B->t1, last) ||
        conv(&e->conv_out, B, B->t1, B->t2, 1, PAD_SAME, 0, NULL, NULL) ||
        conv(&e->quant, B, B->t2, B->s[0], 1, PAD_NONE, 0, NULL, NULL))
        return -1;
    return 0;
}

/* the largest activation (channels x pixels) of a th x tw tile */
static int64_t max_activation(const vdn_vae_video_config *c, int th, int tw) {
    int64_t m = (int64_t)3 * th * tw;
    int64_t px = (int64_t)th * tw;
    for (int i = 0; i < c->n_levels; i++) {
        const int in = i == 0 ? c->block_out_channels[0] : c->block_out_channels[i - 1];
        const int64_t ch = in > c->block_out_channels[i] ? in : c->block_out_channels[i];
        if (ch * px > m) m = ch * px;
        if (c->spatial_factors[i] > 1) {
            th = (th + (c->spatial_factors[i] == 2) - 3) / c->spatial_factors[i] + 1;
            tw = (tw + (c->spatial_factors[i] == 2) - 3) / c->spatial_factors[i] + 1;
            px = (int64_t)th * tw;
        }
    }
    const int64_t lc2 = 2 * c->latent_channels;
    return m > lc2 * px ? m : lc2 * px;
}

/* ---- tiles: diffusers' _split_tiles and _stitch_tiles ---- */

#define ENC_MAX_TILES 64
typedef struct {
    int n, start[ENC_MAX_TILES], overlap[ENC_MAX_TILES];
    int len;
} enc_tiling;

static int split(int length, int tile, int min_overlap, int ratio, enc_tiling *t) {
    memset(t, 0, sizeof *t);
    if (tile >= length) {
        t->n = 1, t->len = length;
        return 0;
    }
    int n = (length + tile - 1) / tile;
    while (tile * n - min_overlap * (n - 1) - length < 0)
        n++;
    if (n > ENC_MAX_TILES) return -1;
    t->n = n, t->len = tile;
    int remaining = tile * n - min_overlap * (n - 1) - length;
    for (int i = 0; i < n - 1; i++)
        t->overlap[i] = min_overlap;
    for (int i = 0; i < remaining / ratio; i++)
        t->overlap[i % (n - 1)] += ratio;
    for (int i = 1; i < n; i++)
        t->start[i] = t->start[i - 1] + tile - t->overlap[i - 1];
    return 0;
}

/* _blend along rows (dim -2) or columns (dim -1) of [C, h, w] tiles, in float32 as torch:
 * out[:ext] = a[-ext:] * (1 - k/ext) + b[:ext] * (k/ext); the rest of b unchanged */
static void blend(const float *a, float *b, int C, int h, int w, int ext, int rows) {
    const int side = rows ? h : w;
    if (ext > side) ext = side;
    for (int k = 0; k < ext; k++) {
        const float pos = (float)k / (float)ext, wa = 1.0f - pos;
        for (int c = 0; c < C; c++)
            for (int o = 0; o < (rows ? w : h); o++) {
                const int64_t ib =
                    rows ? ((int64_t)c * h + k) * w + o : ((int64_t)c * h + o) * w + k;
                const int64_t ia = rows ? ((int64_t)c * h + (h - ext + k)) * w + o
                                        : ((int64_t)c * h + o) * w + (w - ext + k);
                const float pa = a[ia] * wa, pb = b[ib] * pos;
                b[ib] = pa + pb;
            }
    }
}

/* Device memory a pass may take for its activations (two float32 stream buffers and two in the
 * activation dtype, per tile): the release's 768 x 1344 canvas (28 tiles of 256, ~100 MB each in
 * bf16) goes in one pass on a GPU. The CPU runs its tiles in passes of ~512 MB (its convs are
 * parallel over output rows already). */
#define ENC_PASS_BYTES_GPU ((int64_t)3584 << 20)
#define ENC_PASS_BYTES_CPU ((int64_t)512 << 20)

/* Work the host does while the device runs the last pass (the posterior's noise). */
typedef struct {
    int (*fn)(void *ctx, char *err, size_t errlen);
    void *ctx;
} enc_host_work;

/* the pass buffers for `elems` values each and the canvas for `canvas` (float32), grown */
static int grow(vdn_video_encoder *e, int64_t elems, int64_t canvas) {
    vdn_dev *d = e->dev;
    if (e->pass_elems < elems) {
        for (int i = 0; i < 4; i++) {
            vdn_tensor_free(e->pass[i]);
            e->pass[i] = NULL;
        }
        e->pass_elems = 0;
        for (int i = 0; i < 4; i++)
            if (!(e->pass[i] =
                      vdn_tensor_new2(d, i < 2 ? VDN_DT_F32 : vdn_dev_act_dtype(d), 1, elems)))
                return -1;
        e->pass_elems = elems;
    }
    if (e->canvas_elems < canvas) {
        vdn_tensor_free(e->canvas);
        e->canvas_elems = 0;
        if (!(e->canvas = vdn_tensor_new2(d, VDN_DT_F32, 1, canvas))) return -1;
        e->canvas_elems = canvas;
    }
    return 0;
}

static int moments_run(vdn_video_encoder *e, const float *pixels, int H, int W,
                       const vdn_video_encoder_opts *opts, float *moments,
                       const enc_host_work *during, char *err, size_t errlen) {
    const vdn_vae_video_config *c = &e->cfg;
    const int sr = c->spatial_ratio, C2 = 2 * c->latent_channels;
    const int tile = opts && opts->tile ? opts->tile : 256;
    const int ov = opts && opts->tile_overlap ? opts->tile_overlap : 64;
    if (H < 2 * sr || W < 2 * sr || H % sr || W % sr)
        return vdn_fail(err, errlen,
                        "video VAE encoder: a %dx%d canvas: expected multiples of %d, at least %d",
                        W, H, sr, 2 * sr);
    if (tile % sr || ov % sr || tile <= ov || ov < 0)
        return vdn_fail(err, errlen,
                        "video VAE encoder: tile %d, overlap %d: expected multiples of %d, the "
                        "tile larger",
                        tile, ov, sr);
    enc_tiling ty, tx;
    if (split(H, tile, ov, sr, &ty) || split(W, tile, ov, sr, &tx))
        return vdn_fail(err, errlen, "video VAE encoder: a %dx%d canvas needs over %d tiles a side",
                        W, H, ENC_MAX_TILES);
    const int th = ty.len, tw = tx.len, lh = th / sr, lw = tw / sr, nt = ty.n * tx.n;
    const int64_t tn = (int64_t)C2 * lh * lw, big = max_activation(c, th, tw);
    vdn_dev *d = e->dev;
    /* tiles per pass: as many as the budget holds, the passes even */
    const vdn_dtype adt = vdn_dev_act_dtype(d);
    const int64_t per_tile = big * (int64_t)(2 * sizeof(float) + 2 * vdn_dtype_size(adt));
    const int64_t budget = vdn_dev_is_cpu(d) ? ENC_PASS_BYTES_CPU : ENC_PASS_BYTES_GPU;
    int nbmax = opts && opts->tiles_per_pass > 0
                    ? opts->tiles_per_pass
                    : (int)(budget / per_tile > 0 ? budget / per_tile : 1);
    if (nbmax > nt) nbmax = nt;
    const int npass = (nt + nbmax - 1) / nbmax, nb = (nt + npass - 1) / npass;
    int rc = grow(e, (int64_t)nb * big, (int64_t)3 * H * W);
    enc_bufs B = {{e->pass[0], e->pass[1]}, e->pass[2], e->pass[3], 0, 0, 0};
    /* the canvas on the device once; each tile's crop is a device copy per channel */
    vdn_tensor canvas = rc ? (vdn_tensor){0} : view2d(e->canvas, (int64_t)3 * H, W);
    float *tiles = vdn_xmalloc(sizeof(float) * (size_t)(tn * nt));
    if (!rc) rc = vdn_tensor_set(&canvas, pixels, VDN_DT_F32);
    int host_rc = 0;
    char host_err[512] = "";
    for (int t0 = 0; !rc && t0 < nt; t0 += nb) {
        B.nb = nt - t0 < nb ? nt - t0 : nb;
        B.H = th, B.W = tw;
        vdn_tensor in = view2d(B.s[0], (int64_t)B.nb * 3 * th, tw);
        for (int k = 0; !rc && k < B.nb; k++) {
            const int i = (t0 + k) / tx.n, j = (t0 + k) % tx.n;
            for (int ch = 0; !rc && ch < 3; ch++) {
                vdn_tensor dst = vdn_view_rows(&in, ((int64_t)k * 3 + ch) * th, th);
                vdn_tensor rows = vdn_view_rows(&canvas, (int64_t)ch * H + ty.start[i], th);
                vdn_tensor src = vdn_view_cols(&rows, tx.start[j], tw);
                rc = vdn_tensor_copy(&dst, &src);
            }
        }
        if (!rc) rc = forward(e, &B);
        if (!rc && during && t0 + nb >= nt) /* the last pass is queued: the host's share now */
            host_rc = during->fn(during->ctx, host_err, sizeof host_err);
        vdn_tensor out = view2d(B.s[0], (int64_t)B.nb * C2, (int64_t)lh * lw);
        if (!rc) rc = vdn_tensor_get(&out, tiles + t0 * tn);
    }
    if (rc)
        vdn_fail(err, errlen, "video VAE encoder on %s: %s", vdn_dev_name(d), vdn_dev_error(d));
    else if (host_rc)
        rc = vdn_fail(err, errlen, "%s", host_err);
    /* stitch: each tile blended with the unblended tiles above and to the left, then cropped */
    const int h = H / sr, w = W / sr;
    float *t = vdn_xmalloc(sizeof(float) * (size_t)tn);
    for (int i = 0, y0 = 0; !rc && i < ty.n; i++) {
        const int keep_h = lh - (i < ty.n - 1 ? ty.overlap[i] / sr : 0);
        for (int j = 0, x0 = 0; j < tx.n; j++) {
            const int keep_w = lw - (j < tx.n - 1 ? tx.overlap[j] / sr : 0);
            memcpy(t, tiles + (i * tx.n + j) * tn, sizeof(float) * (size_t)tn);
            if (i > 0)
                blend(tiles + ((i - 1) * tx.n + j) * tn, t, C2, lh, lw, ty.overlap[i - 1] / sr, 1);
            if (j > 0)
                blend(tiles + (i * tx.n + j - 1) * tn, t, C2, lh, lw, tx.overlap[j - 1] / sr, 0);
            for (int ch = 0; ch < C2; ch++)
                for (int y = 0; y < keep_h; y++)
                    memcpy(moments + ((int64_t)ch * h + y0 + y) * w + x0,
                           t + ((int64_t)ch * lh + y) * lw, sizeof(float) * (size_t)keep_w);
            x0 += keep_w;
        }
        y0 += keep_h;
    }
    free(t);
    free(tiles);
    return rc;
}

int vdn_video_encoder_moments(vdn_video_encoder *e, const float *pixels, int H, int W,
                              const vdn_video_encoder_opts *opts, float *moments, char *err,
                              size_t errlen) {
    return moments_run(e, pixels, H, W, opts, moments, NULL, err, errlen);
}

/* ---- the recipe around it ---- */

static const float PIX_MEAN[3] = {0.485f, 0.456f, 0.406f}, PIX_STD[3] = {0.229f, 0.224f, 0.225f};

/* (v / 255 - mean) / std for every u8 value of every channel once (the same float32 operations,
 * so the same bits), then a look-up per pixel in one pass over the picture */
void vdn_video_encoder_pixels_u8(const uint8_t *rgb, int H, int W, float *pixels) {
    float lut[3][256];
    for (int ch = 0; ch < 3; ch++)
        for (int v = 0; v < 256; v++)
            lut[ch][v] = ((float)v / 255.0f - PIX_MEAN[ch]) / PIX_STD[ch];
    const int64_t n = (int64_t)H * W;
    float *r = pixels, *g = pixels + n, *b = pixels + 2 * n;
    for (int64_t p = 0; p < n; p++) {
        r[p] = lut[0][rgb[p * 3]];
        g[p] = lut[1][rgb[p * 3 + 1]];
        b[p] = lut[2][rgb[p * 3 + 2]];
    }
}

/* the sample from moments and the generator's noise (clamp, exp, mean + std * noise, float16,
 * latents_mean / std) */
static void sample_with(const vdn_vae_video_config *c, const float *moments, int h, int w,
                        const float *noise, float *latents) {
    const int64_t n = (int64_t)c->latent_channels * h * w;
    for (int64_t i = 0; i < n; i++) {
        const int ch = (int)(i / ((int64_t)h * w));
        float logvar = moments[n + i];
        logvar = logvar < -30.0f ? -30.0f : logvar > 20.0f ? 20.0f : logvar;
        const float sd = (float)exp((double)(0.5f * logvar)); /* correctly rounded expf */
        const float prod = sd * noise[i], x = moments[i] + prod;
        const float x16 = vdn_f16_to_f32(vdn_f32_to_f16(x));
        latents[i] = (x16 - (float)c->latents_mean[ch]) / (float)c->latents_std[ch];
    }
}

typedef struct {
    float *noise;
    int64_t n;
    uint64_t seed;
    vdn_torch_randn_path path;
} enc_noise;

static void noise_of(const vdn_video_encoder_opts *opts, enc_noise *z) {
    z->seed = opts && (opts->seed || opts->seed_set) ? opts->seed : 42;
    z->path = opts ? (vdn_torch_randn_path)opts->randn_path : VDN_TORCH_RANDN_AVX2;
}

static int draw_noise(void *ctx, char *err, size_t errlen) {
    enc_noise *z = ctx;
    return vdn_torch_randn(z->noise, z->n, z->seed, z->path, err, errlen);
}

int vdn_video_encoder_sample(const vdn_vae_video_config *c, const float *moments, int h, int w,
                             const vdn_video_encoder_opts *opts, float *latents, char *err,
                             size_t errlen) {
    enc_noise z = {.n = (int64_t)c->latent_channels * h * w};
    noise_of(opts, &z);
    z.noise = vdn_xmalloc(sizeof(float) * (size_t)(z.n > 16 ? z.n : 16));
    int rc = draw_noise(&z, err, errlen);
    if (!rc) sample_with(c, moments, h, w, z.noise, latents);
    free(z.noise);
    return rc;
}

/* the moments on the device, the noise drawn on the host meanwhile (it does not depend on them),
 * then the sample */
static int encode_pixels(vdn_video_encoder *e, const float *pixels, int H, int W,
                         const vdn_video_encoder_opts *opts, float *latents, char *err,
                         size_t errlen) {
    const vdn_vae_video_config *c = &e->cfg;
    const int sr = c->spatial_ratio;
    const int h = H / sr > 0 ? H / sr : 1, w = W / sr > 0 ? W / sr : 1;
    enc_noise z = {.n = (int64_t)c->latent_channels * h * w};
    noise_of(opts, &z);
    z.noise = vdn_xmalloc(sizeof(float) * (size_t)(z.n > 16 ? z.n : 16));
    float *moments = vdn_xmalloc(sizeof(float) * 2 * (size_t)z.n);
    const enc_host_work during = {draw_noise, &z};
    int rc = moments_run(e, pixels, H, W, opts, moments, &during, err, errlen);
    if (!rc) sample_with(c, moments, H / sr, W / sr, z.noise, latents);
    free(moments);
    free(z.noise);
    return rc;
}

int vdn_video_encoder_encode_u8(vdn_video_encoder *e, const uint8_t *rgb, int H, int W,
                                const vdn_video_encoder_opts *opts, float *latents, char *err,
                                size_t errlen) {
    if (H < 1 || W < 1) return vdn_fail(err, errlen, "video VAE encoder: a %dx%d canvas", W, H);
    float *px = vdn_xmalloc(sizeof(float) * 3 * (size_t)H * (size_t)W);
    vdn_video_encoder_pixels_u8(rgb, H, W, px);
    int rc = encode_pixels(e, px, H, W, opts, latents, err, errlen);
    free(px);
    return rc;
}

int vdn_video_encoder_encode_f32(vdn_video_encoder *e, const float *rgb, int H, int W,
                                 const vdn_video_encoder_opts *opts, float *latents, char *err,
                                 size_t errlen) {
    if (H < 1 || W < 1) return vdn_fail(err, errlen, "video VAE encoder: a %dx%d canvas", W, H);
    const int64_t n = (int64_t)H * W;
    float *px = vdn_xmalloc(sizeof(float) * 3 * (size_t)n);
    for (int ch = 0; ch < 3; ch++)
        for (int64_t p = 0; p < n; p++)
            px[ch * n + p] = (rgb[p * 3 + ch] - PIX_MEAN[ch]) / PIX_STD[ch];
    int rc = encode_pixels(e, px, H, W, opts, latents, err, errlen);
    free(px);
    return rc;
}
