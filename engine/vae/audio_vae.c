/* The audio VAE's decoder over the op layer (vae.h): un-normalise, dec_in_proj, then BigVGAN
 * (conv_pre; per stage a transposed-conv upsampler and the mean of the AMP residual blocks, each
 * a chain of anti-aliased SnakeBeta + dilated conv + anti-aliased SnakeBeta + conv; the final
 * activation and conv_post), clamped to [-1, 1]. Weight norm is folded once at load
 * (w = g v / ||v||, the norm over all but dim 0, as torch's weight_norm with dim=0). Float32 on
 * every backend: the release documents that lower precision makes decodes audibly worse. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_conv.h"
#include "safetensors.h"
#include "vae.h"
#include "vae_group.h"
#include "vdn_util.h"

typedef struct {
    vdn_tensor *alpha, *beta, *up, *down;
} aa_act;

typedef struct {
    int k;                             /* kernel size */
    const int *dilations;              /* n_dil of them (the config's list for this kernel) */
    vdn_tensor **w1, **b1, **w2, **b2; /* per dilation */
    aa_act *acts;                      /* 2 per dilation */
} amp_block;

struct vdn_audio_vae {
    vdn_vae_audio_config cfg;
    vdn_dev *dev;
    vdn_tensor *in_w, *in_b, *pre_w, *pre_b, *post_w;
    vdn_tensor *ups_w[VDN_VAE_MAX_LEVELS], *ups_b[VDN_VAE_MAX_LEVELS];
    amp_block *blocks; /* n_ups * n_res */
    aa_act post;
};

const vdn_vae_audio_config *vdn_audio_vae_config(const vdn_audio_vae *a) {
    return &a->cfg;
}

static vdn_tensor *upload(vdn_dev *d, int64_t rows, int64_t cols, const float *h) {
    vdn_tensor *t = vdn_tensor_new2(d, VDN_DT_F32, rows, cols);
    if (t && vdn_tensor_set(t, h, VDN_DT_F32)) {
        vdn_tensor_free(t);
        return NULL;
    }
    return t;
}

static vdn_tensor *plain(vdn_audio_vae *a, vdn_st_set *st, const char *name, int64_t rows,
                         int64_t cols) {
    float *h = vdn_vae_read(st, name, NULL);
    vdn_tensor *t = h ? upload(a->dev, rows, cols, h) : NULL;
    free(h);
    return t;
}

/* a weight-normalised conv: PRE.weight_g [d0, 1, 1], PRE.weight_v [d0, rest] -> [d0, rest] */
static vdn_tensor *folded(vdn_audio_vae *a, vdn_st_set *st, const char *pre, int64_t d0,
                          int64_t rest) {
    char n[256];
    snprintf(n, sizeof n, "%s.weight_g", pre);
    float *g = vdn_vae_read(st, n, NULL);
    snprintf(n, sizeof n, "%s.weight_v", pre);
    float *v = vdn_vae_read(st, n, NULL);
    vdn_tensor *t = NULL;
    if (g && v) {
        for (int64_t r = 0; r < d0; r++) {
            double ss = 0.0;
            for (int64_t i = 0; i < rest; i++)
                ss += (double)v[r * rest + i] * v[r * rest + i];
            const double s = ss > 0.0 ? g[r] / sqrt(ss) : 0.0;
            for (int64_t i = 0; i < rest; i++)
                v[r * rest + i] = (float)(v[r * rest + i] * s);
        }
        t = upload(a->dev, d0, rest, v);
    }
    free(g);
    free(v);
    return t;
}

static int load_act(vdn_audio_vae *a, vdn_st_set *st, const char *pre, int ch, aa_act *out) {
    char n[256];
    snprintf(n, sizeof n, "%s.act.alpha", pre);
    out->alpha = plain(a, st, n, 1, ch);
    snprintf(n, sizeof n, "%s.act.beta", pre);
    out->beta = plain(a, st, n, 1, ch);
    snprintf(n, sizeof n, "%s.upsample.filter", pre);
    out->up = plain(a, st, n, 1, 12);
    snprintf(n, sizeof n, "%s.downsample.lowpass.filter", pre);
    out->down = plain(a, st, n, 1, 12);
    return out->alpha && out->beta && out->up && out->down ? 0 : -1;
}

static void free_act(aa_act *x) {
    vdn_tensor_free(x->alpha);
    vdn_tensor_free(x->beta);
    vdn_tensor_free(x->up);
    vdn_tensor_free(x->down);
}

void vdn_audio_vae_free(vdn_audio_vae *a) {
    if (!a) return;
    const vdn_vae_audio_config *c = &a->cfg;
    vdn_tensor_free(a->in_w);
    vdn_tensor_free(a->in_b);
    vdn_tensor_free(a->pre_w);
    vdn_tensor_free(a->pre_b);
    vdn_tensor_free(a->post_w);
    for (int i = 0; i < c->n_ups; i++) {
        vdn_tensor_free(a->ups_w[i]);
        vdn_tensor_free(a->ups_b[i]);
    }
    for (int i = 0; a->blocks && i < c->n_ups * c->n_res; i++) {
        amp_block *b = &a->blocks[i];
        for (int e = 0; e < c->n_dil; e++) {
            if (b->w1) vdn_tensor_free(b->w1[e]);
            if (b->b1) vdn_tensor_free(b->b1[e]);
            if (b->w2) vdn_tensor_free(b->w2[e]);
            if (b->b2) vdn_tensor_free(b->b2[e]);
        }
        for (int e = 0; b->acts && e < 2 * c->n_dil; e++)
            free_act(&b->acts[e]);
        free(b->w1);
        free(b->b1);
        free(b->w2);
        free(b->b2);
        free(b->acts);
    }
    free(a->blocks);
    free_act(&a->post);
    free(a);
}

vdn_audio_vae *vdn_audio_vae_load(vdn_dev *dev, const char *dir, char *err, size_t errlen) {
    vdn_audio_vae *a = calloc(1, sizeof *a);
    if (!a) {
        vdn_fail(err, errlen, "audio VAE: out of memory");
        return NULL;
    }
    a->dev = dev;
    if (vdn_vae_audio_config_load(dir, &a->cfg, err, errlen)) {
        free(a);
        return NULL;
    }
    vdn_st_set *st = vdn_vae_open_weights(dir, 0, &a->cfg, err, errlen);
    if (!st) {
        free(a);
        return NULL;
    }
    const vdn_vae_audio_config *c = &a->cfg;
    const int L = c->latent_dim, C = c->latent_channels, U = c->decoder_dim;
    int ok = 1;
    ok = ok && (a->in_w = plain(a, st, "dec_in_proj.weight", L, C));
    ok = ok && (a->in_b = plain(a, st, "dec_in_proj.bias", 1, L));
    ok = ok && (a->pre_w = folded(a, st, "decoder.conv_pre", U, (int64_t)L * 7));
    ok = ok && (a->pre_b = plain(a, st, "decoder.conv_pre.bias", 1, U));
    for (int i = 0; ok && i < c->n_ups; i++) {
        char n[128];
        snprintf(n, sizeof n, "decoder.ups.%d.0", i);
        ok = ok && (a->ups_w[i] =
                        folded(a, st, n, U >> i, (int64_t)(U >> (i + 1)) * c->decoder_kernels[i]));
        snprintf(n, sizeof n, "decoder.ups.%d.0.bias", i);
        ok = ok && (a->ups_b[i] = plain(a, st, n, 1, U >> (i + 1)));
    }
    a->blocks = calloc((size_t)(c->n_ups * c->n_res), sizeof *a->blocks);
    ok = ok && a->blocks;
    for (int i = 0; ok && i < c->n_ups; i++)
        for (int j = 0; ok && j < c->n_res; j++) {
            amp_block *b = &a->blocks[i * c->n_res + j];
            const int ch = U >> (i + 1), k = c->res_kernels[j];
            b->k = k;
            b->dilations = c->res_dilations[j];
            b->w1 = calloc((size_t)c->n_dil, sizeof(vdn_tensor *));
            b->b1 = calloc((size_t)c->n_dil, sizeof(vdn_tensor *));
            b->w2 = calloc((size_t)c->n_dil, sizeof(vdn_tensor *));
            b->b2 = calloc((size_t)c->n_dil, sizeof(vdn_tensor *));
            b->acts = calloc((size_t)(2 * c->n_dil), sizeof(aa_act));
            ok = b->w1 && b->b1 && b->w2 && b->b2 && b->acts;
            for (int e = 0; ok && e < c->n_dil; e++) {
                char n[160];
                snprintf(n, sizeof n, "decoder.resblocks.%d.convs1.%d", i * c->n_res + j, e);
                ok = ok && (b->w1[e] = folded(a, st, n, ch, (int64_t)ch * k));
                strcat(n, ".bias");
                ok = ok && (b->b1[e] = plain(a, st, n, 1, ch));
                snprintf(n, sizeof n, "decoder.resblocks.%d.convs2.%d", i * c->n_res + j, e);
                ok = ok && (b->w2[e] = folded(a, st, n, ch, (int64_t)ch * k));
                strcat(n, ".bias");
                ok = ok && (b->b2[e] = plain(a, st, n, 1, ch));
            }
            for (int e = 0; ok && e < 2 * c->n_dil; e++) {
                char n[160];
                snprintf(n, sizeof n, "decoder.resblocks.%d.activations.%d", i * c->n_res + j, e);
                ok = !load_act(a, st, n, ch, &b->acts[e]);
            }
        }
    const int last = U >> c->n_ups;
    ok = ok && !load_act(a, st, "decoder.activation_post", last, &a->post);
    ok = ok && (a->post_w = folded(a, st, "decoder.conv_post", 1, (int64_t)last * 7));
    vdn_st_set_close(st);
    if (!ok) {
        vdn_fail(err, errlen, "audio VAE %s: loading the decoder: %s", dir, vdn_dev_error(dev));
        vdn_audio_vae_free(a);
        return NULL;
    }
    return a;
}

#define OPS(call)                                                                                  \
    do {                                                                                           \
        if (call) {                                                                                \
            vdn_fail(err, errlen, "audio VAE: %s", vdn_dev_error(a->dev));                         \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* One decode's activations live in AW_BUFS device buffers allocated once (no allocation, and so no
 * device-wide wait in a free, between the ops); each op's tensors are views of them. */
#define AW_BUFS 6

/* buffer `buf` ([n, 1]: a column, so its leading rows reshape to any contiguous matrix) seen as
 * [rows, cols] (rows * cols fit: aw_size sized them) */
static vdn_tensor aw_view(const vdn_tensor *buf, int64_t rows, int64_t cols) {
    vdn_tensor flat = vdn_view_rows(buf, 0, rows * cols);
    const int64_t ne[2] = {rows, cols};
    return vdn_view_reshape(&flat, 2, ne);
}

/* the largest activation of a decode of B signals of La latents, in elements */
static int64_t aw_size(const vdn_vae_audio_config *c, int64_t B, int64_t La) {
    int64_t m = (int64_t)c->latent_channels * La, len = La;
    if ((int64_t)c->latent_dim * La > m) m = (int64_t)c->latent_dim * La;
    if ((int64_t)c->decoder_dim * La > m) m = (int64_t)c->decoder_dim * La;
    for (int i = 0; i < c->n_ups; i++) {
        const int k = c->decoder_kernels[i], s = c->decoder_rates[i];
        len = (len - 1) * s - 2 * ((k - s) / 2) + k;
        const int64_t n = (int64_t)(c->decoder_dim >> (i + 1)) * len;
        if (n > m) m = n;
    }
    return B * m;
}

/* x [B*ch, len] -> out = AMP block(x); t, r: scratch of the same shape */
static int amp(vdn_audio_vae *a, const amp_block *b, const vdn_tensor *x, vdn_tensor *out,
               vdn_tensor *t, vdn_tensor *r, char *err, size_t errlen) {
    const vdn_vae_audio_config *c = &a->cfg;
    OPS(vdn_tensor_copy(out, x));
    for (int e = 0; e < c->n_dil; e++) {
        const int d = b->dilations[e];
        const aa_act *p = &b->acts[2 * e], *q = &b->acts[2 * e + 1];
        OPS(vdn_op_snake_aa(t, out, p->alpha, p->beta, p->up, p->down, 2));
        OPS(vdn_op_conv1d(r, t, b->w1[e], b->b1[e], b->k, 1, (b->k * d - d) / 2, d, 0));
        OPS(vdn_op_snake_aa(t, r, q->alpha, q->beta, q->up, q->down, 2));
        /* out += conv(t): the residual add in the conv's epilogue */
        OPS(vdn_op_conv1d(out, t, b->w2[e], b->b2[e], b->k, 1, (b->k - 1) / 2, 1, 1));
    }
    return 0;
fail:
    return -1;
}

/* B signals as one batch (each weight read once for all): z [B*C, La] (un-normalised) ->
 * wave [B, La * hop] */
static int decode_batch(vdn_audio_vae *a, const float *z, int B, int La, float *wave, char *err,
                        size_t errlen) {
    const vdn_vae_audio_config *c = &a->cfg;
    vdn_dev *d = a->dev;
    const int C = c->latent_channels, L = c->latent_dim, U = c->decoder_dim;
    vdn_tensor *buf[AW_BUFS] = {0};
    int rc = -1, len = La;
    const int64_t n = aw_size(c, B, La);
    for (int i = 0; i < AW_BUFS; i++)
        if (!(buf[i] = vdn_tensor_new2(d, VDN_DT_F32, n, 1))) {
            vdn_fail(err, errlen, "audio VAE: %s", vdn_dev_error(d));
            goto fail;
        }
    vdn_tensor zin = aw_view(buf[0], (int64_t)B * C, La), h = aw_view(buf[1], (int64_t)B * L, La);
    vdn_tensor x = aw_view(buf[2], (int64_t)B * U, La);
    OPS(vdn_tensor_set(&zin, z, VDN_DT_F32));
    OPS(vdn_op_conv1d(&h, &zin, a->in_w, a->in_b, 1, 1, 0, 1, 0)); /* dec_in_proj */
    OPS(vdn_op_conv1d(&x, &h, a->pre_w, a->pre_b, 7, 1, 3, 1, 0)); /* conv_pre */
    int cur = 2;                                                   /* the buffer holding x */
    for (int i = 0; i < c->n_ups; i++) {
        const int k = c->decoder_kernels[i], s = c->decoder_rates[i];
        const int64_t rows = (int64_t)B * (U >> (i + 1));
        const int pad = (k - s) / 2, nlen = (len - 1) * s - 2 * pad + k;
        int o[AW_BUFS - 1], no = 0; /* the other buffers: u, acc, blk, t, r */
        for (int j = 0; j < AW_BUFS; j++)
            if (j != cur) o[no++] = j;
        vdn_tensor u = aw_view(buf[o[0]], rows, nlen), acc = aw_view(buf[o[1]], rows, nlen),
                   blk = aw_view(buf[o[2]], rows, nlen), t = aw_view(buf[o[3]], rows, nlen),
                   r = aw_view(buf[o[4]], rows, nlen);
        OPS(vdn_op_conv_transpose1d(&u, &x, a->ups_w[i], a->ups_b[i], k, s, pad));
        len = nlen;
        for (int j = 0; j < c->n_res; j++) {
            if (amp(a, &a->blocks[i * c->n_res + j], &u, j == 0 ? &acc : &blk, &t, &r, err, errlen))
                goto fail;
            if (j > 0) OPS(vdn_op_add(&acc, &blk));
        }
        OPS(vdn_op_scale(&acc, 1.0 / c->n_res));
        x = acc;
        cur = o[1];
    }
    const int last = U >> c->n_ups;
    vdn_tensor pa = aw_view(buf[(cur + 1) % AW_BUFS], (int64_t)B * last, len),
               y = aw_view(buf[(cur + 2) % AW_BUFS], B, len);
    OPS(vdn_op_snake_aa(&pa, &x, a->post.alpha, a->post.beta, a->post.up, a->post.down, 2));
    OPS(vdn_op_conv1d(&y, &pa, a->post_w, NULL, 7, 1, 3, 1, 0));
    OPS(vdn_tensor_get(&y, wave));
    for (int64_t i = 0; i < (int64_t)B * len; i++)
        wave[i] = wave[i] < -1.0f ? -1.0f : wave[i] > 1.0f ? 1.0f : wave[i];
    rc = 0;
fail:
    for (int i = 0; i < AW_BUFS; i++)
        vdn_tensor_free(buf[i]);
    return rc;
}

/* A clip's channels over a group of decoders: channel s on member s mod n, each member's channels
 * as one batch (the two stereo channels are two mono decodes of one size, independent of each
 * other: one device decodes both at once, two devices one each). */
typedef struct {
    vdn_audio_vae *const *a;
    vae_group grp;
    const float *latents; /* (channels, C, La), normalised */
    int channels, La;
    float *wave;
} audio_plan;

static void audio_member(int r, void *arg) {
    audio_plan *p = arg;
    vdn_audio_vae *a = p->a[r];
    const vdn_vae_audio_config *c = &a->cfg;
    const int C = c->latent_channels, La = p->La, n = p->grp.n;
    const int B = r < p->channels ? (p->channels - r + n - 1) / n : 0;
    if (B == 0 || atomic_load(&p->grp.stop)) return;
    float *z = vdn_xmalloc(sizeof(float) * (size_t)B * C * La);
    float *w = vdn_xmalloc(sizeof(float) * (size_t)B * La * c->hop);
    for (int bi = 0; bi < B; bi++) { /* un-normalise: z std + mean, float32 */
        const int s = r + bi * n;
        for (int ch = 0; ch < C; ch++) {
            const float sd = (float)c->latents_std[ch], mu = (float)c->latents_mean[ch];
            for (int t = 0; t < La; t++) {
                const float v = p->latents[((int64_t)s * C + ch) * La + t] * sd;
                z[((int64_t)bi * C + ch) * La + t] = v + mu;
            }
        }
    }
    if (decode_batch(a, z, B, La, w, p->grp.err[r], VDN_ERR_LEN)) {
        vae_group_fail(&p->grp, r);
    } else {
        const int64_t ns = (int64_t)La * c->hop;
        for (int bi = 0; bi < B; bi++)
            memcpy(p->wave + (int64_t)(r + bi * n) * ns, w + bi * ns, sizeof(float) * (size_t)ns);
        vae_group_done(&p->grp, r, B);
    }
    free(z);
    free(w);
}

int vdn_audio_vae_decode_group(vdn_audio_vae *const *a, int n, const float *latents, int channels,
                               int La, float *wave, vdn_vae_progress_fn progress, void *user,
                               vdn_vae_share *share, char *err, size_t errlen) {
    if (share) memset(share, 0, sizeof *share);
    vdn_dev *devs[VDN_VAE_MAX_GROUP] = {0};
    char *cj[VDN_VAE_MAX_GROUP] = {0};
    const int nn = n < 1 ? 0 : n > VDN_VAE_MAX_GROUP ? VDN_VAE_MAX_GROUP : n;
    for (int i = 0; i < nn; i++) {
        devs[i] = a[i]->dev;
        cj[i] = vdn_vae_audio_config_json(&a[i]->cfg);
    }
    int rc = vae_group_check(n, devs, cj, "audio VAE", err, errlen);
    for (int i = 0; i < nn; i++)
        free(cj[i]);
    if (rc) return -1;
    if (La < 1 || channels < 1)
        return vdn_fail(err, errlen,
                        "audio latents (%d, %d, %d): expected at least one channel and one latent",
                        channels, a[0]->cfg.latent_channels, La);
    audio_plan p = {.a = a, .latents = latents, .channels = channels, .La = La, .wave = wave};
    vae_group_init(&p.grp, n, channels, progress, user);
    vae_group_run(&p.grp, audio_member, &p);
    return vae_group_finish(&p.grp, devs, share, err, errlen);
}

int vdn_audio_vae_decode(vdn_audio_vae *a, const float *latents, int channels, int La, float *wave,
                         vdn_vae_progress_fn progress, void *user, char *err, size_t errlen) {
    return vdn_audio_vae_decode_group(&a, 1, latents, channels, La, wave, progress, user, NULL, err,
                                      errlen);
}
