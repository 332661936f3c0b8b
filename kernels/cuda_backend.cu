/* The "cuda" backend (engine/backend.h): the whole MiniMax-H3 / VDN-H3 evaluation on one GPU.
 *
 * Weights are uploaded once in create(): bf16 where the release is bf16, fp32 where the contract
 * keeps fp32 (time embedder, patch projections, output heads, the alpha projections), each tensor
 * sent in its stored dtype and converted on the device (upload.h), so the host never holds a
 * float32 copy of the model. Each DiT block's q, k, v and, for VDN, the output-gate down
 * projection, the softmax gate and beta are one fused weight [q; k; v; gate_down; softmax_gate;
 * beta; 0-pad] so a single GEMM serves them all.
 * reserve() sizes one device arena for the layout; forward() allocates nothing on the device and
 * follows model.c (the CPU oracle) stage by stage with the kernels of this folder.
 * Linked into `vdn` through the weak symbol vdn_cuda_backend_ops that engine.c looks up. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

extern "C" {
#include "backend.h"
#include "model.h"
#include "upload.h"
#include "vdn_util.h"
}
#include "attn_tiles.h"
#include "cuda_util.cuh"
#include "twin.h"

#define BE_CUDA(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return vdn_fail(err, errlen, "cuda backend: %s: %s", #call, cudaGetErrorString(e_));   \
    } while (0)
#define BE_K(call)                                                                                 \
    do {                                                                                           \
        if ((call) != 0)                                                                           \
            return vdn_fail(err, errlen, "cuda backend: %s failed (details on stderr)", #call);    \
    } while (0)

namespace {

struct DevBlock {
    bf16 *n1, *n2, *wcat, *nq, *nk, *wo, *w1, *w2, *ada_w, *ada_b;
    float *sg_b; /* softmax_gate.up.bias */
    bf16 *wlin, *ksp, *vsp, *ktm, *vtm, *gup, *gup_b, *nw;
    float *adn, *aup, *alog, *dtb; /* alpha projections stay fp32 */
};

/* one device arena, carved in order; 256-byte aligned pieces */
struct Carver {
    char *base;
    size_t off;
    template <class T> T *take(size_t n) {
        off = (off + 255) & ~(size_t)255;
        T *p = (T *)(base ? base + off : NULL);
        off += n * sizeof(T);
        return p;
    }
};

size_t round_up(size_t x, size_t m) {
    return (x + m - 1) / m * m;
}

} // namespace

struct vdn_backend {
    vdn_config c;
    int H, D, C, hid, ffn, G, pf, LDQ, LDQR;
    std::vector<void *> weights; /* every weight allocation, freed by destroy */
    float *pin_w, *pin_b, *ain_w, *ain_b, *t1w, *t1b, *t2w, *t2b, *pout_w, *pout_b, *aout_w,
        *aout_b, *inv_freq;
    bf16 *ctx_w, *ctx_b, *ref_final, *nout_w, *nout_lin_w, *nout_lin_b;
    std::vector<DevBlock> ref, blk;
    vdn_gemm_ctx *gc;
    void *cb;

    /* per layout (reserve) */
    vdn_layout lay;
    int reserved, text_ready, plan_window, plan_anchors, plan_skip;
    int head_end, tail_start; /* keys every query sees (attn_tiles.h) under the current plan */
    char *arena;
    size_t arena_bytes;
    bf16 *x, *h, *y, *qkv, *qr, *kr, *ao, *fh, *fa, *text, *emb, *P, *F2, *st_bf, *vts;
    int *idx, *tidx, *lohi, *tiles, *lohi_t, *tiles_t, *win;
    int n_tiles, n_tiles_t;
    double *pos;
    float *vx, *cx, *ax, *tmp, *tf, *th, *sg, *hf, *vout, *aout;
    /* VDA */
    bf16 *kb, *vt, *qt, *Sl, *gpre, *lin;
    float *ks, *beta, *beta_t, *A, *B, *T, *J, *Pm, *Rm, *S0, *rr, *means, *dvec, *uvec, *alpha;
    /* host staging */
    std::vector<int> h_idx, h_tidx;
    std::vector<float> h_tf;
};

namespace {

const int MAX_T = 8; /* distinct timesteps per evaluation (video, audio, keyframes: <= 3) */

/* Weight upload (upload.h): each tensor goes up in its stored dtype and is converted on the
 * device, so the host never holds more than the mapping plus one folded tensor at a time. */
struct Loader {
    vdn_backend *be;
    vdn_ckpt *ck;
    vdn_uploader u;
    void *stage;
    size_t stage_bytes;
    char *err;
    size_t errlen;
    int failed;
};

int dev_copy(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) fprintf(stderr, "weight upload: cudaMemcpy: %s\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}

int dev_convert(void *ctx, void *dst, vdn_dtype want, const void *src, vdn_dtype have, size_t n) {
    (void)ctx;
    return vdn_k_convert(dst, (int)want, src, (int)have, n, NULL) != 0;
}

void *dev_stage(void *ctx, size_t bytes) {
    Loader *L = (Loader *)ctx;
    if (bytes > L->stage_bytes) {
        if (L->stage) cudaFree(L->stage);
        L->stage = NULL, L->stage_bytes = 0;
        if (cudaMalloc(&L->stage, bytes) != cudaSuccess) return NULL;
        L->stage_bytes = bytes;
    }
    return L->stage;
}

/* upload tensor `name` (shape d[0..ndim)) into dst, which holds it in dtype want */
void put(Loader *L, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
         vdn_dtype want, void *dst) {
    if (L->failed) return;
    const int64_t shape[4] = {d0, d1, d2, d3};
    if (vdn_upload(&L->u, L->ck, name, ndim, shape, want, dst, L->err, L->errlen)) L->failed = 1;
}

void *dev_alloc(Loader *L, size_t bytes) {
    void *p = NULL;
    if (L->failed) return NULL;
    cudaError_t e = cudaMalloc(&p, bytes + 16);
    if (e != cudaSuccess) {
        vdn_fail(L->err, L->errlen, "cuda backend: cudaMalloc of %zu weight bytes: %s", bytes,
                 cudaGetErrorString(e));
        L->failed = 1;
        return NULL;
    }
    L->be->weights.push_back(p);
    return p;
}

/* a new device tensor (1-2 dims; d1 = 0 for 1-D) */
template <class T> T *get(Loader *L, const char *name, int ndim, int64_t d0, int64_t d1) {
    const vdn_dtype want = sizeof(T) == 4 ? VDN_DT_F32 : VDN_DT_BF16;
    T *p = (T *)dev_alloc(L, (size_t)d0 * (ndim > 1 ? (size_t)d1 : 1) * sizeof(T));
    put(L, name, ndim, d0, d1, 0, 0, want, p);
    return p;
}

int load_block(Loader *L, const char *prefix, DevBlock *d, int dit) {
    vdn_backend *be = L->be;
    const vdn_config *c = &be->c;
    const int64_t hid = be->hid, C = be->C, ffn = be->ffn, D = be->D, H = be->H, G = be->G;
    char n[256];
#define NAME(suffix) (snprintf(n, sizeof n, "%s.%s", prefix, suffix), n)
    memset(d, 0, sizeof *d);
    const int vdn = dit && c->has_vdn;
    d->n1 = get<bf16>(L, NAME("norm1.weight"), 1, hid, 0);
    d->n2 = get<bf16>(L, NAME("norm2.weight"), 1, hid, 0);
    /* [q; k; v; (gate_down; softmax_gate; beta)] padded with zero rows to ld rows */
    const int64_t ld = dit ? be->LDQ : be->LDQR;
    d->wcat = (bf16 *)dev_alloc(L, (size_t)ld * hid * 2);
    if (d->wcat && cudaMemset(d->wcat, 0, (size_t)ld * hid * 2) != cudaSuccess) {
        vdn_fail(L->err, L->errlen, "cuda backend: cudaMemset of the fused qkv weight failed");
        L->failed = 1;
    }
    put(L, NAME("attn.to_q.weight"), 2, C, hid, 0, 0, VDN_DT_BF16, d->wcat);
    put(L, NAME("attn.to_k.weight"), 2, C, hid, 0, 0, VDN_DT_BF16, d->wcat + C * hid);
    put(L, NAME("attn.to_v.weight"), 2, C, hid, 0, 0, VDN_DT_BF16, d->wcat + 2 * C * hid);
    if (vdn) {
        bf16 *r = d->wcat + 3 * C * hid;
        put(L, NAME("attn.linear_attention.output_gate.down.weight"), 2, G, hid, 0, 0, VDN_DT_BF16,
            r);
        put(L, NAME("attn.softmax_gate.up.weight"), 2, H, hid, 0, 0, VDN_DT_BF16, r + G * hid);
        put(L, NAME("attn.linear_attention.beta_proj.weight"), 2, H, hid, 0, 0, VDN_DT_BF16,
            r + (G + H) * hid);
    }
    d->nq = get<bf16>(L, NAME("attn.norm_q.weight"), 1, D, 0);
    d->nk = get<bf16>(L, NAME("attn.norm_k.weight"), 1, D, 0);
    d->wo = get<bf16>(L, NAME("attn.to_out.0.weight"), 2, hid, C);
    d->w1 = get<bf16>(L, NAME("ff.net.0.proj.weight"), 2, 2 * ffn, hid);
    d->w2 = get<bf16>(L, NAME("ff.net.2.weight"), 2, hid, ffn);
    if (dit) {
        const int64_t ted = c->time_embed_dim;
        d->ada_w = get<bf16>(L, NAME("adaln_proj.linear.weight"), 2, 18 * hid, ted);
        d->ada_b = get<bf16>(L, NAME("adaln_proj.linear.bias"), 1, 18 * hid, 0);
    }
    if (vdn) {
        const int64_t R = c->alpha_rank, ks = c->conv_spatial, kt = c->conv_temporal;
        d->sg_b = get<float>(L, NAME("attn.softmax_gate.up.bias"), 1, H, 0);
        d->wlin = get<bf16>(L, NAME("attn.to_out_linear.weight"), 2, hid, C);
        d->ksp = (bf16 *)dev_alloc(L, (size_t)C * ks * ks * 2);
        put(L, NAME("attn.linear_attention.short_conv.k_sp.weight"), 4, C, 1, ks, ks, VDN_DT_BF16,
            d->ksp);
        d->vsp = (bf16 *)dev_alloc(L, (size_t)C * ks * ks * 2);
        put(L, NAME("attn.linear_attention.short_conv.v_sp.weight"), 4, C, 1, ks, ks, VDN_DT_BF16,
            d->vsp);
        d->ktm = (bf16 *)dev_alloc(L, (size_t)C * kt * 2);
        put(L, NAME("attn.linear_attention.short_conv.k_tm.weight"), 3, C, 1, kt, 0, VDN_DT_BF16,
            d->ktm);
        d->vtm = (bf16 *)dev_alloc(L, (size_t)C * kt * 2);
        put(L, NAME("attn.linear_attention.short_conv.v_tm.weight"), 3, C, 1, kt, 0, VDN_DT_BF16,
            d->vtm);
        d->gup = get<bf16>(L, NAME("attn.linear_attention.output_gate.up.weight"), 2, C, G);
        d->gup_b = get<bf16>(L, NAME("attn.linear_attention.output_gate.up.bias"), 1, C, 0);
        d->nw = get<bf16>(L, NAME("attn.linear_attention.norm.weight"), 1, c->linear_head_dim, 0);
        /* alpha projections stay fp32 */
        d->adn = get<float>(L, NAME("attn.linear_attention.alpha.down.weight"), 2, R, hid);
        d->aup = get<float>(L, NAME("attn.linear_attention.alpha.up.weight"), 2, C, R);
        d->alog = get<float>(L, NAME("attn.linear_attention.alpha.A_log"), 1, H, 0);
        d->dtb = get<float>(L, NAME("attn.linear_attention.alpha.dt_bias"), 1, C, 0);
    }
#undef NAME
    return L->failed ? -1 : 0;
}

int cuda_available(char *err, size_t errlen) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        vdn_fail(err, errlen, "no CUDA GPU visible");
        return 0;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || p.major < 9) {
        vdn_fail(err, errlen, "GPU 0 (%s) is not Hopper (sm_90); the kernels are built for sm_90a",
                 p.name);
        return 0;
    }
    return 1;
}

void cuda_destroy(vdn_backend *be);

vdn_backend *cuda_create(vdn_ckpt *ck, const vdn_config *cfg, int threads, char *err,
                         size_t errlen) {
    (void)threads;
    const vdn_config *c = cfg;
    if (c->head_dim != 128 || c->rope_freq_dim != 16 || c->hidden % 8 || c->ffn % 8 ||
        (c->has_vdn && (c->linear_head_dim != 128 || c->conv_spatial != 5 ||
                        c->conv_temporal != 5 || c->gate_rank % 8))) {
        vdn_fail(err, errlen,
                 "cuda backend: unsupported geometry (head_dim %d, rope_freq_dim %d, hidden %d, "
                 "ffn %d): the kernels need head_dim 128, 16 rope frequencies, widths that are "
                 "multiples of 8, 5x5/5 short convs; use --cpu",
                 c->head_dim, c->rope_freq_dim, c->hidden, c->ffn);
        return NULL;
    }
    vdn_backend *be = new vdn_backend();
    be->c = *cfg;
    be->H = c->heads, be->D = c->head_dim, be->C = c->heads * c->head_dim, be->hid = c->hidden;
    be->ffn = c->ffn, be->G = c->has_vdn ? c->gate_rank : 0;
    be->pf = c->in_channels * c->patch_t * c->patch_h * c->patch_w;
    be->LDQ = (int)round_up(3 * be->C + (c->has_vdn ? be->G + 2 * be->H : 0), 64);
    be->LDQR = (int)round_up(3 * be->C, 64);
    const int64_t hid = be->hid, pf = be->pf, Ca = c->audio_channels;
    Loader L = {};
    L.be = be, L.ck = ck, L.err = err, L.errlen = errlen;
    L.u.ctx = &L, L.u.to_device = dev_copy, L.u.convert = dev_convert, L.u.staging = dev_stage;
    be->pin_w = get<float>(&L, "proj_in.weight", 2, hid, pf);
    be->pin_b = get<float>(&L, "proj_in.bias", 1, hid, 0);
    be->ain_w = get<float>(&L, "audio_proj_in.weight", 2, hid, Ca);
    be->ain_b = get<float>(&L, "audio_proj_in.bias", 1, hid, 0);
    be->ctx_w = get<bf16>(&L, "context_embedder.weight", 2, hid, c->text_dim);
    be->ctx_b = get<bf16>(&L, "context_embedder.bias", 1, hid, 0);
    be->t1w = get<float>(&L, "time_embedder.linear_1.weight", 2, c->time_hidden, c->freq_dim);
    be->t1b = get<float>(&L, "time_embedder.linear_1.bias", 1, c->time_hidden, 0);
    be->t2w = get<float>(&L, "time_embedder.linear_2.weight", 2, c->time_embed_dim, c->time_hidden);
    be->t2b = get<float>(&L, "time_embedder.linear_2.bias", 1, c->time_embed_dim, 0);
    be->ref_final = get<bf16>(&L, "token_refiner.final_norm.weight", 1, hid, 0);
    be->nout_w = get<bf16>(&L, "norm_out.norm.weight", 1, hid, 0);
    be->nout_lin_w = get<bf16>(&L, "norm_out.linear.weight", 2, 2 * hid, c->time_embed_dim);
    be->nout_lin_b = get<bf16>(&L, "norm_out.linear.bias", 1, 2 * hid, 0);
    be->pout_w = get<float>(&L, "proj_out.weight", 2, pf, hid);
    be->pout_b = get<float>(&L, "proj_out.bias", 1, pf, 0);
    be->aout_w = get<float>(&L, "audio_proj_out.weight", 2, Ca, hid);
    be->aout_b = get<float>(&L, "audio_proj_out.bias", 1, Ca, 0);
    int rc = L.failed ? -1 : 0;
    float invf[48]; /* one per rotated pair (kernels.h): the 16 frequencies for each axis */
    for (int k = 0; k < 48; k++)
        invf[k] = (float)pow(c->rope_theta, -2.0 * (k % 16) / 32.0);
    be->inv_freq = rc ? NULL : (float *)dev_alloc(&L, sizeof invf);
    if (be->inv_freq && cudaMemcpy(be->inv_freq, invf, sizeof invf, cudaMemcpyHostToDevice))
        rc = vdn_fail(err, errlen, "cuda backend: upload of the RoPE frequencies failed");
    be->ref.resize(c->refiner_layers);
    be->blk.resize(c->layers);
    char prefix[128];
    for (int i = 0; i < c->refiner_layers && !rc; i++) {
        snprintf(prefix, sizeof prefix, "token_refiner.refiner_blocks.%d", i);
        rc = load_block(&L, prefix, &be->ref[i], 0);
    }
    for (int i = 0; i < c->layers && !rc; i++) {
        snprintf(prefix, sizeof prefix, "transformer_blocks.%d", i);
        rc = load_block(&L, prefix, &be->blk[i], 1);
    }
    if (L.stage) cudaFree(L.stage);
    if (!rc)
        vdn_log(VDN_LOG_INFO,
                "cuda backend: %llu weight tensors uploaded (%.2f GB as stored, %llu converted on "
                "the device, largest %.1f MB)",
                (unsigned long long)L.u.n_tensors, L.u.bytes_sent / 1e9,
                (unsigned long long)L.u.n_converted, L.u.max_tensor_b / 1e6);
    if (!rc) {
        be->gc = vdn_gemm_create((size_t)64 << 20);
        be->cb = vdn_cublas_create();
        if (!be->gc || !be->cb)
            rc = vdn_fail(err, errlen, "cuda backend: cuBLAS(Lt) handle creation failed");
    }
    if (rc) {
        cuda_destroy(be);
        return NULL;
    }
    return be;
}

/* Lay out (base NULL: measure) every per-render buffer. */
void carve(vdn_backend *be, Carver &cv) {
    const vdn_layout *L = &be->lay;
    const vdn_config *c = &be->c;
    const size_t n = L->n_rows, hid = be->hid, C = be->C, H = be->H, D = be->D;
    be->x = cv.take<bf16>(n * hid), be->h = cv.take<bf16>(n * hid), be->y = cv.take<bf16>(n * hid);
    be->qkv = cv.take<bf16>(n * be->LDQ);
    be->qr = cv.take<bf16>(n * C), be->kr = cv.take<bf16>(n * C), be->ao = cv.take<bf16>(n * C);
    be->fh = cv.take<bf16>(n * 2 * be->ffn), be->fa = cv.take<bf16>(n * be->ffn);
    be->vts = cv.take<bf16>(vdn_attention_vt_elems((int)n, (int)H)); /* V^T for wgmma attention */
    be->text = cv.take<bf16>((size_t)L->n_text * hid);
    be->emb = cv.take<bf16>((size_t)L->n_text * c->text_dim);
    be->P = cv.take<bf16>(MAX_T * 18 * hid), be->F2 = cv.take<bf16>(MAX_T * 2 * hid);
    be->st_bf = cv.take<bf16>(MAX_T * (size_t)c->time_embed_dim);
    be->idx = cv.take<int>(n), be->tidx = cv.take<int>(n);
    be->n_tiles = (int)((n + VDN_ATTN_BM - 1) / VDN_ATTN_BM);
    be->n_tiles_t = (L->n_text + VDN_ATTN_BM - 1) / VDN_ATTN_BM;
    be->lohi = cv.take<int>(2 * n), be->tiles = cv.take<int>((size_t)be->n_tiles * VDN_TILE_INTS);
    be->lohi_t = cv.take<int>(2 * (size_t)L->n_text);
    be->tiles_t = cv.take<int>((size_t)be->n_tiles_t * VDN_TILE_INTS);
    be->pos = cv.take<double>(3 * n);
    const size_t pf = be->pf, Ca = c->audio_channels;
    be->vx = cv.take<float>((size_t)L->n_video * pf),
    be->cx = cv.take<float>((size_t)L->n_cond * pf);
    be->ax = cv.take<float>((size_t)L->n_audio * Ca);
    size_t big = L->n_video > L->n_audio ? L->n_video : L->n_audio;
    if ((size_t)L->n_cond > big) big = L->n_cond;
    be->tmp = cv.take<float>(big * hid + MAX_T * (size_t)c->time_hidden);
    be->tf = cv.take<float>(MAX_T * (size_t)c->freq_dim);
    be->th = cv.take<float>(
        MAX_T * (size_t)(c->time_hidden > c->time_embed_dim ? c->time_hidden : c->time_embed_dim));
    be->sg = cv.take<float>(n * H);
    be->hf = cv.take<float>(big * hid);
    be->vout = cv.take<float>((size_t)L->n_video * pf),
    be->aout = cv.take<float>((size_t)L->n_audio * Ca);
    if (!c->has_vdn) return;
    const size_t F = L->frames, S = L->tokens_per_frame, nl = F * S;
    const size_t nk = nl > (size_t)L->n_text ? nl : (size_t)L->n_text;
    const size_t mats = (F > 1 ? F : 1) * H * D * D;
    be->ks = cv.take<float>(nk * C); /* fp32 sqrt(beta) k~: A in fp32 (spec 5.3) */
    be->kb = cv.take<bf16>(nk * C), be->vt = cv.take<bf16>(nk * C);
    be->qt = cv.take<bf16>(nl * C);
    be->beta = cv.take<float>(nl * H), be->beta_t = cv.take<float>((size_t)L->n_text * H);
    be->A = cv.take<float>(mats), be->B = cv.take<float>(mats), be->T = cv.take<float>(mats);
    be->J = cv.take<float>(mats), be->Pm = cv.take<float>(mats), be->Rm = cv.take<float>(mats);
    be->Sl = cv.take<bf16>(mats), be->S0 = cv.take<float>(H * D * D);
    be->rr = cv.take<float>(nl * C), be->gpre = cv.take<bf16>(nl * C);
    be->lin = cv.take<bf16>((size_t)L->n_video * C);
    be->means = cv.take<float>(F * hid), be->dvec = cv.take<float>(F * (size_t)c->alpha_rank);
    be->uvec = cv.take<float>(F * C), be->alpha = cv.take<float>(F * C);
    be->win = cv.take<int>(2 * F);
}

int cuda_reserve(vdn_backend *be, const vdn_layout *lay, char *err, size_t errlen) {
    if (lay->n_rows != lay->n_text + lay->n_cond + lay->n_audio + lay->n_video ||
        lay->n_video != lay->frames * lay->tokens_per_frame || lay->n_text < 1)
        return vdn_fail(err, errlen, "cuda backend: inconsistent layout (%d rows)", lay->n_rows);
    be->lay = *lay;
    Carver m = {NULL, 0};
    carve(be, m);
    if (m.off > be->arena_bytes) {
        if (be->arena) cudaFree(be->arena);
        be->arena = NULL;
        be->arena_bytes = 0;
        BE_CUDA(cudaMalloc((void **)&be->arena, m.off));
        be->arena_bytes = m.off;
    }
    Carver cv = {be->arena, 0};
    carve(be, cv);
    be->reserved = 1, be->text_ready = 0, be->plan_window = -1;
    be->h_idx.resize(lay->n_rows), be->h_tidx.resize(lay->n_rows);
    be->h_tf.resize((size_t)MAX_T * be->c.freq_dim);
    /* dense rows/tiles of the text (refiner) */
    vdn_attn_rows ar;
    if (vdn_attn_rows_make(&ar, lay->n_text, 0, 1, 0, 0, 1, 0) != 0)
        return vdn_fail(err, errlen, "cuda backend: out of host memory");
    int nt = 0;
    int *tl = vdn_attn_tiles_make(&ar, VDN_ATTN_BM, &nt);
    std::vector<int> lh(2 * (size_t)lay->n_text);
    for (int r = 0; r < lay->n_text; r++)
        lh[2 * r] = ar.lo[r], lh[2 * r + 1] = ar.hi[r];
    vdn_attn_rows_free(&ar);
    if (!tl) return vdn_fail(err, errlen, "cuda backend: out of host memory");
    cudaError_t e1 = cudaMemcpy(be->lohi_t, lh.data(), lh.size() * 4, cudaMemcpyHostToDevice);
    cudaError_t e2 =
        cudaMemcpy(be->tiles_t, tl, (size_t)nt * VDN_TILE_INTS * 4, cudaMemcpyHostToDevice);
    free(tl);
    BE_CUDA(e1);
    BE_CUDA(e2);
    return 0;
}

/* one pre-norm refiner block / the attention+FFN of a DiT block share these pieces */
int cuda_set_text(vdn_backend *be, const float *embeds, int n_text, char *err, size_t errlen) {
    if (!be->reserved || n_text != be->lay.n_text)
        return vdn_fail(err, errlen, "cuda backend: set_text(%d rows) does not match reserve()",
                        n_text);
    const vdn_config *c = &be->c;
    const int L = n_text, hid = be->hid, C = be->C, ffn = be->ffn;
    std::vector<uint16_t> hb((size_t)L * c->text_dim);
    for (size_t i = 0; i < hb.size(); i++)
        hb[i] = vdn_f32_to_bf16(embeds[i]);
    BE_CUDA(cudaMemcpy(be->emb, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
    BE_K(vdn_gemm_bf16(be->gc, be->emb, c->text_dim, be->ctx_w, c->text_dim, be->text, hid, L, hid,
                       c->text_dim, be->ctx_b, 0, 0));
    const float sc = 1.f / sqrtf((float)be->D);
    for (int i = 0; i < c->refiner_layers; i++) {
        const DevBlock *b = &be->ref[i];
        BE_K(vdn_k_rmsnorm_modulate(be->text, b->n1, NULL, NULL, NULL, 0, L, hid, c->norm_eps,
                                    be->h, 0));
        BE_K(vdn_gemm_bf16(be->gc, be->h, hid, b->wcat, hid, be->qkv, be->LDQ, L, be->LDQR, hid,
                           NULL, 0, 0));
        BE_K(vdn_k_qknorm_rope(be->qkv, be->qkv + C, be->LDQ, NULL, be->inv_freq, b->nq, b->nk, L,
                               be->H, c->norm_eps, be->qr, be->kr, C, 0));
        BE_K(vdn_k_attention_wgmma(be->qr, C, be->kr, C, be->qkv + 2 * C, be->LDQ, be->vts, L,
                                   be->H, be->lohi_t, 0, L, be->tiles_t, be->n_tiles_t, sc, NULL,
                                   be->ao, C, 0));
        BE_K(vdn_gemm_bf16(be->gc, be->ao, C, b->wo, C, be->y, hid, L, hid, C, NULL, 0, 0));
        BE_K(vdn_k_add_bf16(be->text, be->y, (size_t)L * hid, 0));
        BE_K(vdn_k_rmsnorm_modulate(be->text, b->n2, NULL, NULL, NULL, 0, L, hid, c->norm_eps,
                                    be->h, 0));
        BE_K(vdn_gemm_bf16(be->gc, be->h, hid, b->w1, hid, be->fh, 2 * ffn, L, 2 * ffn, hid, NULL,
                           0, 0));
        BE_K(vdn_k_swiglu(be->fh, L, ffn, be->fa, 0));
        BE_K(vdn_gemm_bf16(be->gc, be->fa, ffn, b->w2, ffn, be->y, hid, L, hid, ffn, NULL, 0, 0));
        BE_K(vdn_k_add_bf16(be->text, be->y, (size_t)L * hid, 0));
    }
    BE_K(vdn_k_rmsnorm_modulate(be->text, be->ref_final, NULL, NULL, NULL, 0, L, hid, c->norm_eps,
                                be->text, 0));
    BE_CUDA(cudaDeviceSynchronize());
    be->text_ready = 1;
    return 0;
}

/* fp32 projection of rows (n, k) -> bf16 residual rows with bias */
int embed_rows(vdn_backend *be, const float *dx, int rows, int k, const float *W, const float *b,
               bf16 *dst, char *err, size_t errlen) {
    if (rows == 0) return 0;
    BE_K(vdn_sgemm_f32(be->cb, dx, W, be->tmp, rows, be->hid, k, 0));
    BE_K(vdn_k_bias_act(be->tmp, be->hid, b, rows, be->hid, 0, NULL, 0, dst, be->hid, 0));
    return 0;
}

/* Attention rows/tiles (and the VDA windows) of this plan, rebuilt only when the plan changes. */
int ensure_plan(vdn_backend *be, const vdn_attn_plan *p, char *err, size_t errlen) {
    const vdn_layout *L = &be->lay;
    if (be->plan_window == p->window && be->plan_anchors == p->anchors &&
        be->plan_skip == p->skip_ends)
        return 0;
    vdn_attn_rows ar;
    if (vdn_attn_rows_make(&ar, L->video_start, L->frames, L->tokens_per_frame, p->window,
                           p->anchors, be->c.chunk, be->c.radius) != 0)
        return vdn_fail(err, errlen, "cuda backend: out of host memory");
    int nt = 0;
    int *tl = vdn_attn_tiles_make(&ar, VDN_ATTN_BM, &nt);
    std::vector<int> lh(2 * (size_t)L->n_rows);
    for (int r = 0; r < L->n_rows; r++)
        lh[2 * r] = ar.lo[r], lh[2 * r + 1] = ar.hi[r];
    int head_end = ar.head_end, tail = ar.tail_start;
    vdn_attn_rows_free(&ar);
    if (!tl || nt != be->n_tiles) {
        free(tl);
        return vdn_fail(err, errlen, "cuda backend: attention tile plan failed");
    }
    cudaError_t e1 = cudaMemcpy(be->lohi, lh.data(), lh.size() * 4, cudaMemcpyHostToDevice);
    cudaError_t e2 =
        cudaMemcpy(be->tiles, tl, (size_t)nt * VDN_TILE_INTS * 4, cudaMemcpyHostToDevice);
    free(tl);
    BE_CUDA(e1);
    BE_CUDA(e2);
    be->head_end = head_end, be->tail_start = tail;
    if (be->c.has_vdn && L->frames > 0) {
        std::vector<int> lo(L->frames), hi(L->frames), w2(2 * (size_t)L->frames);
        vdn_vda_windows(L->frames, p->skip_ends, be->c.chunk, be->c.radius, lo.data(), hi.data());
        int Fp = L->frames - 2 * (p->skip_ends ? 1 : 0);
        for (int t = 0; t < Fp; t++)
            w2[2 * t] = lo[t], w2[2 * t + 1] = hi[t];
        BE_CUDA(cudaMemcpy(be->win, w2.data(), w2.size() * 4, cudaMemcpyHostToDevice));
    }
    be->plan_window = p->window, be->plan_anchors = p->anchors, be->plan_skip = p->skip_ends;
    return 0;
}

/* The VDN linear branch of block b on the modulated input be->h; adds to_out_linear(...) into
 * be->y's video rows (spec 5.3; model.c / vda.c for the CPU form). */
int linear_branch(vdn_backend *be, const DevBlock *b, const vdn_attn_plan *p, char *err,
                  size_t errlen) {
    const vdn_layout *L = &be->lay;
    const vdn_config *c = &be->c;
    const int H = be->H, D = be->D, C = be->C, hid = be->hid, S = L->tokens_per_frame;
    const int f0 = p->skip_ends ? 1 : 0, Fp = L->frames - 2 * f0, nl = Fp * S;
    const int LDQ = be->LDQ, og = 3 * C, osg = og + be->G, obt = osg + H;
    if (Fp <= 0) return 0;
    const size_t row0 = (size_t)L->video_start + (size_t)f0 * S;
    const bf16 *q0 = be->qkv + row0 * LDQ;
    /* features */
    BE_K(vdn_k_sigmoid_cols(q0, LDQ, obt, H, nl, NULL, be->beta, 0));
    BE_K(vdn_k_vda_prep(q0 + C, q0 + 2 * C, q0, LDQ, Fp, L->grid_h, L->grid_w, H, b->ksp, b->ktm,
                        b->vsp, b->vtm, be->beta, NULL, be->kb, be->vt, be->qt, be->ks, 0));
    /* decay alpha from frame means of the modulated input */
    BE_K(vdn_k_frame_means(be->h + row0 * hid, hid, Fp, S, hid, be->means, 0));
    BE_K(vdn_sgemm_f32(be->cb, be->means, b->adn, be->dvec, Fp, c->alpha_rank, hid, 0));
    BE_K(vdn_sgemm_f32(be->cb, be->dvec, b->aup, be->uvec, Fp, C, c->alpha_rank, 0));
    BE_K(vdn_k_alpha_finish(be->uvec, b->dtb, b->alog, Fp, C, be->alpha, 0));
    BE_K(vdn_k_vda_stats(be->cb, NULL, be->ks, be->kb, be->vt, Fp * H, S, be->A, be->B, 0));
    BE_K(vdn_k_vda_solve(be->A, be->B, be->alpha, Fp * H, be->T, be->J, p->additive ? S : 0, 0));
    /* text state S0 = scale * B_t (I + A_t)^-1 over every prompt row, no conv (kt/kb/vt reused:
     * the frame statistics above are already in A, B) */
    const float *S0 = NULL;
    const int Lt = L->n_text;
    if (c->text_state && Lt > 0) {
        BE_K(vdn_k_sigmoid_cols(be->qkv, LDQ, obt, H, Lt, NULL, be->beta_t, 0));
        BE_K(vdn_k_vda_act(be->qkv + C, LDQ, be->qkv + 2 * C, LDQ, NULL, 0, NULL, NULL, be->beta_t,
                           1, Lt, H, NULL, be->kb, be->vt, NULL, be->ks, 0));
        float *At = be->Pm, *Bt = be->Rm; /* scratch: the scans overwrite them later */
        BE_K(vdn_k_vda_stats(be->cb, NULL, be->ks, be->kb, be->vt, H, Lt, At, Bt, 0));
        BE_K(vdn_k_vda_solve(At, Bt, NULL, H, NULL, be->S0, p->additive ? Lt : 0, 0));
        BE_K(vdn_k_scale_f32(be->S0, (size_t)H * D * D, c->text_state_scale, 0));
        S0 = be->S0;
    }
    BE_K(vdn_k_vda_scans(be->T, be->J, S0, Fp, H, be->Pm, be->Rm, 0));
    BE_K(vdn_k_vda_gather(be->Pm, be->Rm, S0, be->alpha, be->win, Fp, H, be->Sl, 0));
    BE_K(vdn_k_vda_readout(be->cb, be->Sl, be->qt, Fp * H, S, be->rr, 0));
    /* output gate sigmoid(W_gup (W_gdown x) + b): gate_down came out of the fused projection */
    BE_K(vdn_gemm_bf16(be->gc, q0 + og, LDQ, b->gup, be->G, be->gpre, C, nl, C, be->G, b->gup_b, 0,
                       0));
    BE_K(vdn_k_vda_epilogue(be->rr, b->nw, c->linear_norm_eps, be->gpre, C, Fp, S, H,
                            be->lin + (size_t)f0 * S * C, C, 0));
    BE_K(vdn_gemm_bf16(be->gc, be->lin + (size_t)f0 * S * C, C, b->wlin, C, be->y + row0 * hid, hid,
                       nl, hid, C, NULL, 1, 0));
    (void)osg;
    return 0;
}

int cuda_forward(vdn_backend *be, const vdn_step_inputs *in, float *video_v, float *audio_v,
                 char *err, size_t errlen) {
    const vdn_layout *L = in->layout;
    const vdn_config *c = &be->c;
    if (!be->reserved || memcmp(L, &be->lay, sizeof *L) != 0)
        return vdn_fail(err, errlen, "cuda backend: forward() layout differs from reserve()");
    if (!be->text_ready) return vdn_fail(err, errlen, "cuda backend: set_text not called");
    const int n = L->n_rows, hid = be->hid, C = be->C, H = be->H, ffn = be->ffn, M = in->n_t;
    const int LDQ = be->LDQ, pf = be->pf, ted = c->time_embed_dim;
    if (M < 1 || M > MAX_T)
        return vdn_fail(err, errlen, "cuda backend: %d distinct timesteps (1..%d supported)", M,
                        MAX_T);
    for (int r = 0; r < n; r++) {
        if (in->t_index[r] < 0 || in->t_index[r] >= M || in->tags[r] > 2)
            return vdn_fail(err, errlen, "forward: row %d has timestep index %d (of %d) tag %d", r,
                            in->t_index[r], M, in->tags[r]);
        be->h_idx[r] = in->t_index[r] * 3 + (in->tags[r] < 0 ? 0 : in->tags[r]);
        be->h_tidx[r] = in->t_index[r];
    }
    const vdn_attn_plan *p = &in->plan;
    if (ensure_plan(be, p, err, errlen)) return -1;
    BE_CUDA(cudaMemcpy(be->idx, be->h_idx.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
    BE_CUDA(cudaMemcpy(be->tidx, be->h_tidx.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
    BE_CUDA(cudaMemcpy(be->pos, in->pos, (size_t)n * 24, cudaMemcpyHostToDevice));
    BE_CUDA(cudaMemcpy(be->vx, in->video_x, (size_t)L->n_video * pf * 4, cudaMemcpyHostToDevice));
    if (L->n_cond)
        BE_CUDA(cudaMemcpy(be->cx, in->cond_x, (size_t)L->n_cond * pf * 4, cudaMemcpyHostToDevice));
    BE_CUDA(cudaMemcpy(be->ax, in->audio_x, (size_t)L->n_audio * c->audio_channels * 4,
                       cudaMemcpyHostToDevice));

    /* embeddings: text rows from set_text, fp32 patch projections for the rest */
    BE_CUDA(cudaMemcpy(be->x, be->text, (size_t)L->n_text * hid * 2, cudaMemcpyDeviceToDevice));
    if (embed_rows(be, be->cx, L->n_cond, pf, be->pin_w, be->pin_b,
                   be->x + (size_t)L->cond_start * hid, err, errlen) ||
        embed_rows(be, be->ax, L->n_audio, c->audio_channels, be->ain_w, be->ain_b,
                   be->x + (size_t)L->audio_start * hid, err, errlen) ||
        embed_rows(be, be->vx, L->n_video, pf, be->pin_w, be->pin_b,
                   be->x + (size_t)L->video_start * hid, err, errlen))
        return -1;
    /* SiLU(temb) per timestep in fp32 (sinusoid cos first, then the two fp32 linears), cast to
     * bf16 for the adaLN projections (spec 2.3, 2.4) */
    const int half = c->freq_dim / 2;
    for (int m = 0; m < M; m++)
        for (int j = 0; j < half; j++) {
            double f = exp(-log(10000.0) * j / half);
            be->h_tf[(size_t)m * c->freq_dim + j] = (float)cos((double)in->t_values[m] * f);
            be->h_tf[(size_t)m * c->freq_dim + half + j] = (float)sin((double)in->t_values[m] * f);
        }
    BE_CUDA(
        cudaMemcpy(be->tf, be->h_tf.data(), (size_t)M * c->freq_dim * 4, cudaMemcpyHostToDevice));
    BE_K(vdn_sgemm_f32(be->cb, be->tf, be->t1w, be->tmp, M, c->time_hidden, c->freq_dim, 0));
    BE_K(vdn_k_bias_act(be->tmp, c->time_hidden, be->t1b, M, c->time_hidden, 1, be->th,
                        c->time_hidden, NULL, 0, 0));
    BE_K(vdn_sgemm_f32(be->cb, be->th, be->t2w, be->tmp, M, ted, c->time_hidden, 0));
    BE_K(vdn_k_bias_act(be->tmp, ted, be->t2b, M, ted, 1, NULL, 0, be->st_bf, ted, 0));
    if (c->has_vdn && p->linear) /* anchor-frame rows of the branch output stay exact zeros */
        BE_CUDA(cudaMemsetAsync(be->lin, 0, (size_t)L->n_video * C * 2, 0));

    const float sc = 1.f / sqrtf((float)be->D);
    const int t6 = 6 * hid; /* adaLN row (timestep m, tag j) = P + (3m + j) * 6 hid */
    for (int l = 0; l < c->layers; l++) {
        const DevBlock *b = &be->blk[l];
        BE_K(vdn_gemm_bf16(be->gc, be->st_bf, ted, b->ada_w, ted, be->P, 18 * hid, M, 18 * hid, ted,
                           b->ada_b, 0, 0));
        BE_K(vdn_k_rmsnorm_modulate(be->x, b->n1, be->P, be->P + hid, be->idx, t6, n, hid,
                                    c->norm_eps, be->h, 0));
        BE_K(
            vdn_gemm_bf16(be->gc, be->h, hid, b->wcat, hid, be->qkv, LDQ, n, LDQ, hid, NULL, 0, 0));
        BE_K(vdn_k_qknorm_rope(be->qkv, be->qkv + C, LDQ, be->pos, be->inv_freq, b->nq, b->nk, n, H,
                               c->norm_eps, be->qr, be->kr, C, 0));
        const float *gate = NULL;
        if (c->has_vdn && p->softmax_gate) {
            BE_K(vdn_k_sigmoid_cols(be->qkv, LDQ, 3 * C + be->G, H, n, b->sg_b, be->sg, 0));
            gate = be->sg;
        }
        BE_K(vdn_k_attention_wgmma(be->qr, C, be->kr, C, be->qkv + 2 * C, LDQ, be->vts, n, H,
                                   be->lohi, be->head_end, be->tail_start, be->tiles, be->n_tiles,
                                   sc, gate, be->ao, C, 0));
        BE_K(vdn_gemm_bf16(be->gc, be->ao, C, b->wo, C, be->y, hid, n, hid, C, NULL, 0, 0));
        if (c->has_vdn && p->linear && linear_branch(be, b, p, err, errlen)) return -1;
        BE_K(vdn_k_gate_residual(be->x, be->y, be->P + 2 * hid, be->idx, t6, n, hid, 0));
        BE_K(vdn_k_rmsnorm_modulate(be->x, b->n2, be->P + 3 * hid, be->P + 4 * hid, be->idx, t6, n,
                                    hid, c->norm_eps, be->h, 0));
        BE_K(vdn_gemm_bf16(be->gc, be->h, hid, b->w1, hid, be->fh, 2 * ffn, n, 2 * ffn, hid, NULL,
                           0, 0));
        BE_K(vdn_k_swiglu(be->fh, n, ffn, be->fa, 0));
        BE_K(vdn_gemm_bf16(be->gc, be->fa, ffn, b->w2, ffn, be->y, hid, n, hid, ffn, NULL, 0, 0));
        BE_K(vdn_k_gate_residual(be->x, be->y, be->P + 5 * hid, be->idx, t6, n, hid, 0));
    }
    /* final layer: (shift, scale) per timestep, then the fp32 heads on video and audio rows */
    BE_K(vdn_gemm_bf16(be->gc, be->st_bf, ted, be->nout_lin_w, ted, be->F2, 2 * hid, M, 2 * hid,
                       ted, be->nout_lin_b, 0, 0));
    BE_K(vdn_k_rmsnorm_modulate(be->x, be->nout_w, be->F2, be->F2 + hid, be->tidx, 2 * hid, n, hid,
                                c->norm_eps, be->h, 0));
    BE_K(vdn_k_bf16_to_f32(be->h + (size_t)L->video_start * hid, hid, L->n_video, hid, be->hf, hid,
                           0));
    BE_K(vdn_sgemm_f32(be->cb, be->hf, be->pout_w, be->tmp, L->n_video, pf, hid, 0));
    BE_K(vdn_k_bias_act(be->tmp, pf, be->pout_b, L->n_video, pf, 0, be->vout, pf, NULL, 0, 0));
    BE_K(vdn_k_bf16_to_f32(be->h + (size_t)L->audio_start * hid, hid, L->n_audio, hid, be->hf, hid,
                           0));
    BE_K(vdn_sgemm_f32(be->cb, be->hf, be->aout_w, be->tmp, L->n_audio, c->audio_channels, hid, 0));
    BE_K(vdn_k_bias_act(be->tmp, c->audio_channels, be->aout_b, L->n_audio, c->audio_channels, 0,
                        be->aout, c->audio_channels, NULL, 0, 0));
    BE_CUDA(cudaMemcpy(video_v, be->vout, (size_t)L->n_video * pf * 4, cudaMemcpyDeviceToHost));
    BE_CUDA(cudaMemcpy(audio_v, be->aout, (size_t)L->n_audio * c->audio_channels * 4,
                       cudaMemcpyDeviceToHost));
    return 0;
}

void cuda_destroy(vdn_backend *be) {
    if (!be) return;
    for (void *p : be->weights)
        cudaFree(p);
    if (be->arena) cudaFree(be->arena);
    if (be->gc) vdn_gemm_destroy(be->gc);
    if (be->cb) vdn_cublas_destroy(be->cb);
    delete be;
}

} // namespace

extern "C" const vdn_backend_ops vdn_cuda_backend_ops = {
    "cuda", cuda_available, cuda_create, cuda_reserve, cuda_set_text, cuda_forward, cuda_destroy};
