/* Qwen3-VL's vision tower over the op layer (see vision.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cancel.h"
#include "vdn_util.h"
#include "vision.h"

typedef struct {
    vdn_tensor *n1w, *n1b, *qkv, *qkv_b, *proj, *proj_b, *n2w, *n2b, *fc1, *fc1_b, *fc2, *fc2_b;
} vis_block;

typedef struct { /* a patch merger: the final one or a DeepStack one */
    vdn_tensor *nw, *nb, *fc1, *fc1_b, *fc2, *fc2_b;
} vis_merger;

struct vdn_vision {
    vdn_vision_config c;
    vdn_dev *dev;
    int hd, hp; /* head width, and padded (64 or 128) */
    vdn_tensor *patch, *patch_b, *inv;
    const vdn_st_entry *pos_table; /* [n_pos_embed, hidden] in the file mapping, or */
    const vdn_st_file *pos_file;
    float *pos_host; /* random weights: the table on the host, owned */
    vis_block *blocks;
    vis_merger merger, deepstack[VDN_VISION_MAX_DEEPSTACK];
};

/* ---- loading ---- */

static const vdn_st_entry *find(const vdn_st_set *st, int block, const char *what, int ndim,
                                const int64_t *shape, const vdn_st_file **file, char *err,
                                size_t errlen) {
    char name[256];
    vdn_vision_weight_name(name, sizeof name, block, what);
    const vdn_st_file *f;
    const vdn_st_entry *t = vdn_st_set_find(st, name, &f);
    if (!t) {
        vdn_fail(err, errlen, "vision tower: tensor %s is missing from the checkpoint", name);
        return NULL;
    }
    if (vdn_st_check_shape(f, t, ndim, shape, err, errlen)) return NULL;
    if (!vdn_dtype_is_float(t->dtype)) {
        vdn_fail(err, errlen, "%s: tensor %s: dtype %s, expected BF16, F16 or F32", vdn_st_path(f),
                 name, vdn_dtype_name(t->dtype));
        return NULL;
    }
    if (file) *file = f;
    return t;
}

/* Host float32 values src [rows, cols] onto the device as a weight. When padding, the heads are
 * padded: a Linear's output rows (pad_rows) or input columns (pad_cols) come in groups of v->hd,
 * each placed at the start of a group of v->hp with zeros after it. 1-D: a vector [rows]. */
static vdn_tensor *upload_padded(vdn_vision *v, const float *src, int64_t rows, int64_t cols,
                                 int vector, int pad_rows, int pad_cols) {
    const int64_t hd = v->hd, hp = v->hp;
    int64_t R = pad_rows ? rows / hd * hp : rows, C = pad_cols ? cols / hd * hp : cols;
    const float *dst = src;
    float *padded = NULL;
    if (pad_rows || pad_cols) {
        padded = vdn_xcalloc((size_t)(R * C), sizeof(float));
        for (int64_t r = 0; r < rows; r++) {
            int64_t rr = pad_rows ? r / hd * hp + r % hd : r;
            for (int64_t c = 0; c < cols; c++) {
                int64_t cc = pad_cols ? c / hd * hp + c % hd : c;
                padded[rr * C + cc] = src[r * cols + c];
            }
        }
        dst = padded;
    }
    int64_t ne[2] = {R, C};
    vdn_dtype dt = vdn_dev_act_dtype(v->dev);
    vdn_tensor *w = vector ? vdn_tensor_new(v->dev, dt, 1, ne) : vdn_tensor_new2(v->dev, dt, R, C);
    if (w && vdn_tensor_set(w, dst, VDN_DT_F32)) {
        vdn_tensor_free(w);
        w = NULL;
    }
    free(padded);
    return w;
}

/* A released weight (an ndim-D tensor of `shape`, flattened to [shape[0], the rest]) onto the
 * device, padded as upload_padded says. */
static vdn_tensor *load(vdn_vision *v, const vdn_st_set *st, int block, const char *what, int ndim,
                        const int64_t *shape, int pad_rows, int pad_cols, char *err,
                        size_t errlen) {
    const vdn_st_file *f;
    const vdn_st_entry *t = find(st, block, what, ndim, shape, &f, err, errlen);
    if (!t) return NULL;
    float *src = vdn_xmalloc(sizeof(float) * (size_t)t->numel);
    vdn_tensor *w = NULL;
    if (vdn_st_to_f32(f, t, src, err, errlen) == 0) {
        w = upload_padded(v, src, shape[0], t->numel / shape[0], ndim == 1, pad_rows, pad_cols);
        if (!w) {
            char name[256];
            vdn_vision_weight_name(name, sizeof name, block, what);
            vdn_fail(err, errlen, "vision tower: uploading %s: %s", name, vdn_dev_error(v->dev));
        }
    }
    free(src);
    return w;
}

#define V1(n) ((int64_t[]){n})
#define V2(a, b) ((int64_t[]){a, b})

static int load_block(vdn_vision *v, const vdn_st_set *st, int b, char *err, size_t errlen) {
    const int64_t H = v->c.hidden, I = v->c.intermediate;
    vis_block *B = &v->blocks[b];
    return !(B->n1w = load(v, st, b, "norm1.weight", 1, V1(H), 0, 0, err, errlen)) ||
                   !(B->n1b = load(v, st, b, "norm1.bias", 1, V1(H), 0, 0, err, errlen)) ||
                   !(B->qkv =
                         load(v, st, b, "attn.qkv.weight", 2, V2(3 * H, H), 1, 0, err, errlen)) ||
                   !(B->qkv_b = load(v, st, b, "attn.qkv.bias", 1, V1(3 * H), 1, 0, err, errlen)) ||
                   !(B->proj =
                         load(v, st, b, "attn.proj.weight", 2, V2(H, H), 0, 1, err, errlen)) ||
                   !(B->proj_b = load(v, st, b, "attn.proj.bias", 1, V1(H), 0, 0, err, errlen)) ||
                   !(B->n2w = load(v, st, b, "norm2.weight", 1, V1(H), 0, 0, err, errlen)) ||
                   !(B->n2b = load(v, st, b, "norm2.bias", 1, V1(H), 0, 0, err, errlen)) ||
                   !(B->fc1 =
                         load(v, st, b, "mlp.linear_fc1.weight", 2, V2(I, H), 0, 0, err, errlen)) ||
                   !(B->fc1_b =
                         load(v, st, b, "mlp.linear_fc1.bias", 1, V1(I), 0, 0, err, errlen)) ||
                   !(B->fc2 =
                         load(v, st, b, "mlp.linear_fc2.weight", 2, V2(H, I), 0, 0, err, errlen)) ||
                   !(B->fc2_b = load(v, st, b, "mlp.linear_fc2.bias", 1, V1(H), 0, 0, err, errlen))
               ? -1
               : 0;
}

/* prefix "merger" or "deepstack_merger_list.j"; the norm is over one patch (hidden) or, post
 * shuffle, over merge^2 patches */
static int load_merger(vdn_vision *v, const vdn_st_set *st, vis_merger *m, const char *prefix,
                       int64_t norm_width, char *err, size_t errlen) {
    const int64_t M = v->c.hidden * v->c.merge * v->c.merge, O = v->c.out_hidden;
    char n[6][96];
    const char *what[6] = {"norm.weight",     "norm.bias",         "linear_fc1.weight",
                           "linear_fc1.bias", "linear_fc2.weight", "linear_fc2.bias"};
    for (int i = 0; i < 6; i++)
        snprintf(n[i], sizeof n[i], "%s.%s", prefix, what[i]);
    return !(m->nw = load(v, st, -1, n[0], 1, V1(norm_width), 0, 0, err, errlen)) ||
                   !(m->nb = load(v, st, -1, n[1], 1, V1(norm_width), 0, 0, err, errlen)) ||
                   !(m->fc1 = load(v, st, -1, n[2], 2, V2(M, M), 0, 0, err, errlen)) ||
                   !(m->fc1_b = load(v, st, -1, n[3], 1, V1(M), 0, 0, err, errlen)) ||
                   !(m->fc2 = load(v, st, -1, n[4], 2, V2(O, M), 0, 0, err, errlen)) ||
                   !(m->fc2_b = load(v, st, -1, n[5], 1, V1(O), 0, 0, err, errlen))
               ? -1
               : 0;
}

/* the rope's inverse frequencies as transformers holds them (float32, over hd / 2 channels),
 * once for the row axis and once for the column axis */
static int make_inv(vdn_vision *v, char *err, size_t errlen) {
    const int dim = v->hd / 2, q = v->hd / 4;
    float inv[128]; /* hd <= 256 */
    for (int j = 0; j < q; j++) {
        float expo = (float)(2 * j) / (float)dim;
        inv[j] = inv[q + j] = (float)(1.0 / pow(10000.0, (double)expo));
    }
    v->inv = vdn_tensor_new2(v->dev, VDN_DT_F32, 1, 2 * q);
    if (!v->inv || vdn_tensor_set(v->inv, inv, VDN_DT_F32))
        return vdn_fail(err, errlen, "vision tower: inv_freq: %s", vdn_dev_error(v->dev));
    return 0;
}

vdn_vision *vdn_vision_open(const vdn_st_set *st, const vdn_vision_config *c, vdn_dev *dev,
                            char *err, size_t errlen) {
    vdn_vision *v = vdn_xcalloc(1, sizeof *v);
    v->c = *c, v->dev = dev;
    v->hd = (int)(c->hidden / c->heads);
    v->hp = v->hd <= 64 ? 64 : v->hd <= 128 ? 128 : v->hd;
    const int64_t H = c->hidden, M = H * c->merge * c->merge;
    int64_t pe[5] = {H, c->in_channels, c->temporal_patch, c->patch, c->patch};
    int rc = v->hd > 256
                 ? vdn_fail(err, errlen, "vision tower: heads of %d channels, over 256", v->hd)
                 : 0;
    rc = rc || !(v->patch = load(v, st, -1, "patch_embed.proj.weight", 5, pe, 0, 0, err, errlen)) ||
         !(v->patch_b = load(v, st, -1, "patch_embed.proj.bias", 1, V1(H), 0, 0, err, errlen)) ||
         !(v->pos_table = find(st, -1, "pos_embed.weight", 2, V2(c->n_pos_embed, H), &v->pos_file,
                               err, errlen));
    if (!rc) v->blocks = vdn_xcalloc((size_t)c->depth, sizeof *v->blocks);
    for (int b = 0; !rc && b < c->depth; b++)
        rc = load_block(v, st, b, err, errlen);
    rc = rc || load_merger(v, st, &v->merger, "merger", H, err, errlen);
    for (int j = 0; !rc && j < c->n_deepstack; j++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "deepstack_merger_list.%d", j);
        rc = load_merger(v, st, &v->deepstack[j], prefix, M, err, errlen);
    }
    rc = rc || make_inv(v, err, errlen);
    if (rc) {
        vdn_vision_close(v);
        return NULL;
    }
    return v;
}

static void merger_free(vis_merger *m) {
    vdn_tensor *t[] = {m->nw, m->nb, m->fc1, m->fc1_b, m->fc2, m->fc2_b};
    for (int i = 0; i < 6; i++)
        vdn_tensor_free(t[i]);
}

void vdn_vision_close(vdn_vision *v) {
    if (!v) return;
    for (int b = 0; v->blocks && b < v->c.depth; b++) {
        vis_block *B = &v->blocks[b];
        vdn_tensor *t[] = {B->n1w, B->n1b, B->qkv, B->qkv_b, B->proj, B->proj_b,
                           B->n2w, B->n2b, B->fc1, B->fc1_b, B->fc2,  B->fc2_b};
        for (int i = 0; i < 12; i++)
            vdn_tensor_free(t[i]);
    }
    free(v->blocks);
    merger_free(&v->merger);
    for (int j = 0; j < VDN_VISION_MAX_DEEPSTACK; j++)
        merger_free(&v->deepstack[j]);
    vdn_tensor_free(v->patch);
    vdn_tensor_free(v->patch_b);
    vdn_tensor_free(v->inv);
    free(v->pos_host);
    free(v);
}

/* ---- random weights (benchmarks) ---- */

static uint64_t mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* [rows, cols] uniform with the given mean and std, key-dependent */
static float *random_floats(int64_t rows, int64_t cols, double mean, double std, uint64_t key) {
    float *h = vdn_xmalloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) {
        double u = (double)(mix(key ^ mix((uint64_t)i)) >> 11) / 9007199254740992.0;
        h[i] = (float)(mean + std * 1.7320508075688772 * (2 * u - 1));
    }
    return h;
}

static vdn_tensor *random_weight(vdn_vision *v, int64_t rows, int64_t cols, int vector,
                                 int pad_rows, int pad_cols, double mean, double std, uint64_t *key,
                                 int *ok) {
    float *h = random_floats(rows, cols, mean, std, ++*key);
    vdn_tensor *w = upload_padded(v, h, rows, cols, vector, pad_rows, pad_cols);
    free(h);
    *ok = *ok && w;
    return w;
}

vdn_vision *vdn_vision_random(const vdn_vision_config *c, vdn_dev *dev, uint64_t seed, char *err,
                              size_t errlen) {
    vdn_vision *v = vdn_xcalloc(1, sizeof *v);
    v->c = *c, v->dev = dev;
    v->hd = (int)(c->hidden / c->heads);
    v->hp = v->hd <= 64 ? 64 : v->hd <= 128 ? 128 : v->hd;
    const int64_t H = c->hidden, I = c->intermediate, M = H * c->merge * c->merge;
    const int64_t K = 3 * (int64_t)c->temporal_patch * c->patch * c->patch, O = c->out_hidden;
    uint64_t key = mix(seed ^ 0x766973696f6eull);
    int ok = v->hd <= 256;
#define RW(rows, cols, vec, pr, pc, mean, std)                                                     \
    random_weight(v, rows, cols, vec, pr, pc, mean, std, &key, &ok)
    v->patch = RW(H, K, 0, 0, 0, 0, 1 / sqrt((double)K));
    v->patch_b = RW(H, 1, 1, 0, 0, 0, 0.1);
    v->pos_host = random_floats(c->n_pos_embed, H, 0, 0.5, ++key);
    v->blocks = vdn_xcalloc((size_t)c->depth, sizeof *v->blocks);
    for (int b = 0; ok && b < c->depth; b++) {
        vis_block *B = &v->blocks[b];
        B->n1w = RW(H, 1, 1, 0, 0, 1, 0.1), B->n1b = RW(H, 1, 1, 0, 0, 0, 0.1);
        B->qkv = RW(3 * H, H, 0, 1, 0, 0, 1 / sqrt((double)H));
        B->qkv_b = RW(3 * H, 1, 1, 1, 0, 0, 0.1);
        B->proj = RW(H, H, 0, 0, 1, 0, 1 / sqrt((double)H)), B->proj_b = RW(H, 1, 1, 0, 0, 0, 0.1);
        B->n2w = RW(H, 1, 1, 0, 0, 1, 0.1), B->n2b = RW(H, 1, 1, 0, 0, 0, 0.1);
        B->fc1 = RW(I, H, 0, 0, 0, 0, 1 / sqrt((double)H)), B->fc1_b = RW(I, 1, 1, 0, 0, 0, 0.1);
        B->fc2 = RW(H, I, 0, 0, 0, 0, 1 / sqrt((double)I)), B->fc2_b = RW(H, 1, 1, 0, 0, 0, 0.1);
    }
    for (int j = -1; ok && j < c->n_deepstack; j++) {
        vis_merger *m = j < 0 ? &v->merger : &v->deepstack[j];
        const int64_t nw = j < 0 ? H : M;
        m->nw = RW(nw, 1, 1, 0, 0, 1, 0.1), m->nb = RW(nw, 1, 1, 0, 0, 0, 0.1);
        m->fc1 = RW(M, M, 0, 0, 0, 0, 1 / sqrt((double)M)), m->fc1_b = RW(M, 1, 1, 0, 0, 0, 0.1);
        m->fc2 = RW(O, M, 0, 0, 0, 0, 1 / sqrt((double)M)), m->fc2_b = RW(O, 1, 1, 0, 0, 0, 0.1);
    }
#undef RW
    if (!ok || make_inv(v, err, errlen)) {
        if (!ok) vdn_fail(err, errlen, "vision tower (random): %s", vdn_dev_error(dev));
        vdn_vision_close(v);
        return NULL;
    }
    return v;
}

/* ---- inputs of a run: positions, the interpolated position table, the mask ---- */

/* torch.linspace(0, end, n) in float32: from the start for the first half, from the end after */
static float linspace(float end, int n, int i) {
    if (n == 1) return 0;
    float step = end / (float)(n - 1);
    return i < n / 2 ? step * (float)i : end - step * (float)(n - 1 - i);
}

/* out[r, :] for the picture's patches r in merge order: the position table (a side x side grid)
 * bilinearly sampled at the patch's place on a linspace over the grid (transformers'
 * fast_pos_embed_interpolate, weights in float32), in float64 sums */
static void interpolate(const vdn_vision *v, const float *table, int64_t gh, int64_t gw,
                        float *out) {
    const int side = (int)lrint(sqrt((double)v->c.n_pos_embed)), M = v->c.merge;
    const int64_t H = v->c.hidden;
    double *acc = vdn_xmalloc(sizeof(double) * (size_t)H);
    int64_t r = 0;
    for (int64_t bh = 0; bh < gh / M; bh++)
        for (int64_t bw = 0; bw < gw / M; bw++)
            for (int mh = 0; mh < M; mh++)
                for (int mw = 0; mw < M; mw++, r++) {
                    float fy = linspace((float)(side - 1), (int)gh, (int)(bh * M + mh));
                    float fx = linspace((float)(side - 1), (int)gw, (int)(bw * M + mw));
                    int y0 = (int)fy, x0 = (int)fx;
                    int y1 = y0 + 1 < side ? y0 + 1 : side - 1,
                        x1 = x0 + 1 < side ? x0 + 1 : side - 1;
                    float dy = fy - (float)y0, dx = fx - (float)x0;
                    float w[4] = {(1 - dy) * (1 - dx), (1 - dy) * dx, dy * (1 - dx), dy * dx};
                    int idx[4] = {y0 * side + x0, y0 * side + x1, y1 * side + x0, y1 * side + x1};
                    for (int64_t c = 0; c < H; c++)
                        acc[c] = 0;
                    for (int k = 0; k < 4; k++)
                        for (int64_t c = 0; c < H; c++)
                            acc[c] += (double)w[k] * table[(int64_t)idx[k] * H + c];
                    for (int64_t c = 0; c < H; c++)
                        out[r * H + c] = (float)acc[c];
                }
    free(acc);
}

typedef struct {
    vdn_tensor *h, *x, *qkv, *qr, *kr, *att, *mlp, *pos, *pe, *m1, *m2;
    vdn_attn_mask *mask;
} vis_acts;

static void acts_free(vis_acts *a) {
    vdn_tensor *t[] = {a->h,   a->x,   a->qkv, a->qr, a->kr, a->att,
                       a->mlp, a->pos, a->pe,  a->m1, a->m2};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        vdn_tensor_free(t[i]);
    vdn_attn_mask_free(a->mask);
}

/* positions (row, column, 0) of every patch, the interpolated table, the block-diagonal mask
 * (each picture's patches see that picture's) */
static int acts_new(vdn_vision *v, const int64_t (*grids)[3], int n_pics, int64_t N, vis_acts *a,
                    char *err, size_t errlen) {
    const int64_t H = v->c.hidden, HP = (int64_t)v->c.heads * v->hp, M = v->c.merge;
    const int64_t MM = H * M * M;
    vdn_dtype dt = vdn_dev_act_dtype(v->dev);
    memset(a, 0, sizeof *a);
    a->h = vdn_tensor_new2(v->dev, dt, N, H);
    a->x = vdn_tensor_new2(v->dev, dt, N, H);
    a->qkv = vdn_tensor_new2(v->dev, dt, N, 3 * HP);
    a->qr = vdn_tensor_new2(v->dev, dt, N, HP);
    a->kr = vdn_tensor_new2(v->dev, dt, N, HP);
    a->att = vdn_tensor_new2(v->dev, dt, N, HP);
    a->mlp = vdn_tensor_new2(v->dev, dt, N, v->c.intermediate);
    a->pos = vdn_tensor_new2(v->dev, VDN_DT_F64, N, 3);
    a->pe = vdn_tensor_new2(v->dev, dt, N, H);
    a->m1 = vdn_tensor_new2(v->dev, dt, N / (M * M), MM);
    a->m2 = vdn_tensor_new2(v->dev, dt, N / (M * M), MM);
    int *lo = vdn_xmalloc(sizeof(int) * (size_t)N), *hi = vdn_xmalloc(sizeof(int) * (size_t)N);
    double *pos = vdn_xmalloc(sizeof(double) * 3 * (size_t)N);
    float *pe = vdn_xmalloc(sizeof(float) * (size_t)(N * H));
    float *table = vdn_xmalloc(sizeof(float) * (size_t)(v->c.n_pos_embed * H));
    int rc = 0;
    if (v->pos_host)
        memcpy(table, v->pos_host, sizeof(float) * (size_t)(v->c.n_pos_embed * H));
    else
        rc = vdn_st_to_f32(v->pos_file, v->pos_table, table, err, errlen);
    for (int64_t p = 0, r0 = 0; !rc && p < n_pics; p++) {
        const int64_t gt = grids[p][0], gh = grids[p][1], gw = grids[p][2], n = gt * gh * gw;
        for (int64_t t = 0; t < gt; t++) /* every frame pair: the same table and positions */
            interpolate(v, table, gh, gw, pe + (r0 + t * gh * gw) * H);
        for (int64_t i = 0; i < n; i++) {
            int64_t q = i % (gh * gw), blk = q / (M * M), in = q % (M * M);
            pos[3 * (r0 + i) + 0] = (double)(blk / (gw / M) * M + in / M);
            pos[3 * (r0 + i) + 1] = (double)(blk % (gw / M) * M + in % M);
            pos[3 * (r0 + i) + 2] = 0;
            lo[r0 + i] = (int)(r0 + i / (gh * gw) * gh * gw);
            hi[r0 + i] = lo[r0 + i] + (int)(gh * gw);
        }
        r0 += n;
    }
    free(table);
    if (!rc) {
        a->mask = vdn_attn_mask_rows(v->dev, (int)N, 0, (int)N, lo, hi);
        rc = !a->h || !a->x || !a->qkv || !a->qr || !a->kr || !a->att || !a->mlp || !a->pos ||
             !a->pe || !a->m1 || !a->m2 || !a->mask || vdn_tensor_set(a->pos, pos, VDN_DT_F64) ||
             vdn_tensor_set(a->pe, pe, VDN_DT_F32);
        if (rc)
            vdn_fail(err, errlen, "vision tower on %s: %s", vdn_dev_name(v->dev),
                     vdn_dev_error(v->dev));
    }
    free(lo), free(hi), free(pos), free(pe);
    return rc ? -1 : 0;
}

/* ---- the forward ---- */

static int run_block(vdn_vision *v, const vis_block *B, vis_acts *a) {
    const int hd = v->hd, hp = v->hp;
    const int64_t HP = (int64_t)v->c.heads * hp;
    const double eps = 1e-6;
    vdn_rope rope = {.pos = a->pos, .inv = v->inv, .n_rot = hd, .sections = {hd / 4, hd / 4, 0}};
    vdn_tensor q = vdn_view_cols(a->qkv, 0, HP), k = vdn_view_cols(a->qkv, HP, HP);
    vdn_tensor val = vdn_view_cols(a->qkv, 2 * HP, HP);
    return vdn_op_layernorm(a->x, a->h, B->n1w, B->n1b, eps) ||
                   vdn_op_linear(a->qkv, a->x, B->qkv, B->qkv_b, VDN_ACT_NONE, 0) ||
                   vdn_op_qk_norm_rope(a->qr, a->kr, &q, &k, NULL, NULL, hp, eps, &rope) ||
                   vdn_op_attention(a->att, a->qr, a->kr, &val, hp, 1.0 / sqrt((double)hd), a->mask,
                                    NULL) ||
                   vdn_op_linear(a->h, a->att, B->proj, B->proj_b, VDN_ACT_NONE, 1) ||
                   vdn_op_layernorm(a->x, a->h, B->n2w, B->n2b, eps) ||
                   vdn_op_linear(a->mlp, a->x, B->fc1, B->fc1_b, VDN_ACT_GELU_TANH, 0) ||
                   vdn_op_linear(a->h, a->mlp, B->fc2, B->fc2_b, VDN_ACT_NONE, 1)
               ? -1
               : 0;
}

/* out = fc2(gelu(fc1(x))) over merge^2 patches a row; the norm per patch (the final merger) or
 * over the whole row (DeepStack: post_shuffle) */
static int run_merger(vdn_vision *v, const vis_merger *m, int post_shuffle, vis_acts *a,
                      vdn_tensor *out) {
    const int64_t N = vdn_tensor_rows(a->h), MM = vdn_tensor_cols(a->m1),
                  T = vdn_tensor_rows(a->m1);
    int64_t patch_ne[2] = {N, v->c.hidden}, row_ne[2] = {T, MM};
    vdn_tensor per_patch = vdn_view_reshape(a->m1, 2, patch_ne);
    vdn_tensor h_rows = vdn_view_reshape(a->h, 2, row_ne);
    int rc = post_shuffle ? vdn_op_layernorm(a->m1, &h_rows, m->nw, m->nb, 1e-6)
                          : vdn_op_layernorm(&per_patch, a->h, m->nw, m->nb, 1e-6);
    return rc || vdn_op_linear(a->m2, a->m1, m->fc1, m->fc1_b, VDN_ACT_GELU, 0) ||
                   vdn_op_linear(out, a->m2, m->fc2, m->fc2_b, VDN_ACT_NONE, 0)
               ? -1
               : 0;
}

int vdn_vision_run(vdn_vision *v, const float *rows, const int64_t (*grids)[3], int n_pics,
                   const atomic_int *cancel, vdn_tensor **feat, vdn_tensor **ds, char *err,
                   size_t errlen) {
    const vdn_vision_config *c = &v->c;
    const int64_t mm = (int64_t)c->merge * c->merge;
    const int64_t cols = 3 * (int64_t)c->temporal_patch * c->patch * c->patch;
    int64_t N = 0;
    *feat = NULL;
    for (int j = 0; j < c->n_deepstack; j++)
        ds[j] = NULL;
    for (int p = 0; p < n_pics; p++) {
        if (grids[p][0] < 1 || grids[p][1] < 1 || grids[p][2] < 1 || grids[p][1] % c->merge ||
            grids[p][2] % c->merge)
            return vdn_fail(err, errlen,
                            "vision tower: picture %d's grid %lldx%lldx%lld: expected positive "
                            "sizes, h and w multiples of %d",
                            p, (long long)grids[p][0], (long long)grids[p][1],
                            (long long)grids[p][2], c->merge);
        N += grids[p][0] * grids[p][1] * grids[p][2];
    }
    if (N < 1 || N > (1 << 24))
        return vdn_fail(err, errlen, "vision tower: %lld patches", (long long)N);
    vis_acts a;
    if (acts_new(v, grids, n_pics, N, &a, err, errlen)) {
        acts_free(&a);
        return -1;
    }
    vdn_dtype dt = vdn_dev_act_dtype(v->dev);
    vdn_tensor *px = vdn_tensor_new2(v->dev, dt, N, cols);
    *feat = vdn_tensor_new2(v->dev, dt, N / mm, c->out_hidden);
    int rc = !px || !*feat || vdn_tensor_set(px, rows, VDN_DT_F32) ||
             vdn_op_linear(a.h, px, v->patch, v->patch_b, VDN_ACT_NONE, 0) || vdn_op_add(a.h, a.pe);
    int stopped = -1; /* the block a cancel came before */
    for (int b = 0, j = 0; !rc && b < c->depth; b++) {
        if (vdn_cancelled(cancel)) {
            stopped = b, rc = 1;
            break;
        }
        rc = run_block(v, &v->blocks[b], &a);
        if (!rc && j < c->n_deepstack && c->deepstack[j] == b) {
            ds[j] = vdn_tensor_new2(v->dev, dt, N / mm, c->out_hidden);
            rc = !ds[j] || run_merger(v, &v->deepstack[j], 1, &a, ds[j]);
            j++;
        }
    }
    rc = rc || run_merger(v, &v->merger, 0, &a, *feat);
    vdn_tensor_free(px);
    acts_free(&a);
    if (rc) {
        if (stopped >= 0)
            vdn_fail(err, errlen, "vision tower on %s: cancelled before block %d of %d",
                     vdn_dev_name(v->dev), stopped + 1, c->depth);
        else
            vdn_fail(err, errlen, "vision tower on %s: %s", vdn_dev_name(v->dev),
                     vdn_dev_error(v->dev));
        vdn_tensor_free(*feat);
        *feat = NULL;
        for (int j = 0; j < c->n_deepstack; j++) {
            vdn_tensor_free(ds[j]);
            ds[j] = NULL;
        }
        return -1;
    }
    return 0;
}
