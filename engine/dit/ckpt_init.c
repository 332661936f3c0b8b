/* `vdn ckpt init`: random checkpoints in the released layouts; see ckpt_init.h. */
#include <cjson/cJSON.h>
#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_init.h"
#include "ckpt_names.h"
#include "safetensors.h"
#include "vdn_util.h"

/* ---- presets ---- */

int vdn_ckpt_preset(const char *preset, int layers, vdn_config *c, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (preset && strcmp(preset, "tiny") == 0) {
        *c = (vdn_config){.hidden = 64,
                          .heads = 2,
                          .head_dim = 32,
                          .ffn = 128,
                          .layers = 2,
                          .refiner_layers = 2,
                          .text_dim = 48,
                          .in_channels = 24,
                          .audio_channels = 32,
                          .freq_dim = 32,
                          .time_embed_dim = 32,
                          .time_hidden = 64,
                          .rope_freq_dim = 4,
                          .alpha_rank = 8,
                          .gate_rank = 8};
    } else if (preset && strcmp(preset, "small") == 0) {
        /* the smallest model with H3's head geometry (head_dim 128, 16 rope frequencies), for
         * checking the CUDA kernels, which are specialised to head_dim 128, against the CPU */
        *c = (vdn_config){.hidden = 256,
                          .heads = 2,
                          .head_dim = 128,
                          .ffn = 512,
                          .layers = 2,
                          .refiner_layers = 2,
                          .text_dim = 64,
                          .in_channels = 24,
                          .audio_channels = 32,
                          .freq_dim = 64,
                          .time_embed_dim = 64,
                          .time_hidden = 128,
                          .rope_freq_dim = 16,
                          .alpha_rank = 16,
                          .gate_rank = 16};
    } else if (preset && strcmp(preset, "h3") == 0) {
        *c = (vdn_config){.hidden = 5376,
                          .heads = 56,
                          .head_dim = 128,
                          .ffn = 14336,
                          .layers = 50,
                          .refiner_layers = 2,
                          .text_dim = 5120,
                          .in_channels = 24,
                          .audio_channels = 32,
                          .freq_dim = 256,
                          .time_embed_dim = 2688,
                          .time_hidden = 5376,
                          .rope_freq_dim = 16,
                          .alpha_rank = 128,
                          .gate_rank = 128};
    } else {
        return vdn_fail(err, errlen, "ckpt init: --preset \"%s\": expected tiny, small or h3",
                        preset ? preset : "");
    }
    if (layers > 0) c->layers = layers;
    c->patch_t = 1, c->patch_h = 2, c->patch_w = 2;
    c->rope_theta = 10000.0;
    c->norm_eps = 1e-5f;
    /* the released VDN-H3 transform (spec 5.0) */
    c->chunk = 5, c->radius = 1, c->anchors_both = 1, c->softmax_gate = 1, c->text_state = 1;
    c->linear_head_dim = c->head_dim;
    c->conv_spatial = 5, c->conv_temporal = 5;
    c->linear_norm_eps = 1e-6f, c->text_state_scale = 0.5f;
    c->video_shift = 12.0f, c->audio_shift = 3.0f;
    return 0;
}

/* ---- the generator ---- */

static uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* uniform in (0, 1) */
static double unif(uint64_t key, uint64_t i) {
    return ((double)(mix64(key ^ mix64(i)) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Box-Muller on pair i/2: value 2k is the cosine branch, 2k+1 the sine branch. */
static double normal(uint64_t key, int64_t i) {
    uint64_t pair = (uint64_t)i >> 1;
    double u1 = unif(key, 2 * pair), u2 = unif(key, 2 * pair + 1);
    double r = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
    return (i & 1) ? r * sin(a) : r * cos(a);
}

static int ends(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* How a tensor's values are drawn, decided once per tensor from its name and shape. */
enum { R_NORMAL, R_A_LOG, R_DT_BIAS, R_CONST };
typedef struct {
    uint64_t key;
    int kind;
    double scale, shift; /* value = shift + scale * z for R_NORMAL; shift for R_CONST */
} init_rule;

static init_rule rule_for(uint64_t seed, const char *name, int ndim, const int64_t *shape) {
    init_rule r = {mix64(seed) ^ name_hash(name), R_NORMAL, 1.0, 0.0};
    int64_t fan_in = 1;
    for (int d = 1; d < ndim; d++)
        fan_in *= shape[d];
    const double inv = 1.0 / sqrt((double)(fan_in > 0 ? fan_in : 1));
    if (ends(name, "alpha.A_log"))
        r.kind = R_A_LOG;
    else if (ends(name, "alpha.dt_bias"))
        r.kind = R_DT_BIAS;
    else if (ends(name, "softmax_gate.up.bias"))
        r.kind = R_CONST, r.shift = log(0.99 / 0.01);
    else if (ends(name, "norm1.weight") || ends(name, "norm2.weight") ||
             ends(name, "norm_q.weight") || ends(name, "norm_k.weight") ||
             ends(name, "final_norm.weight") || ends(name, "norm_out.norm.weight") ||
             ends(name, "linear_attention.norm.weight"))
        r.scale = 0.05, r.shift = 1.0;
    else if (ends(name, "_sp.weight"))
        r.scale = 1.0 / 5.0;
    else if (ends(name, "_tm.weight"))
        r.scale = 1.0 / sqrt(5.0);
    else if (ends(name, "softmax_gate.up.weight"))
        r.scale = 0.01 * inv;
    else if (ends(name, "adaln_proj.linear.weight") || ends(name, "norm_out.linear.weight"))
        r.scale = 0.5 * inv;
    else if (strstr(name, ".lora_B."))
        r.scale = 0.05;
    else if (strstr(name, ".lora_A."))
        r.scale = inv;
    else if (ends(name, ".bias"))
        r.scale = 0.02;
    else if (ndim >= 2)
        r.scale = inv;
    /* else: prompt embeddings, keyframe latents, N(0, 1) */
    return r;
}

static float rule_value(const init_rule *r, int64_t i) {
    switch (r->kind) {
    case R_A_LOG:
        return (float)log(1.0 + 15.0 * unif(r->key, (uint64_t)i));
    case R_DT_BIAS: {
        double dt = exp(log(1e-3) + unif(r->key, (uint64_t)i) * (log(1e-1) - log(1e-3)));
        return (float)(dt + log(-expm1(-dt))); /* softplus^-1 */
    }
    case R_CONST:
        return (float)r->shift;
    default:
        return (float)(r->shift + r->scale * normal(r->key, i));
    }
}

float vdn_ckpt_init_value(uint64_t seed, const char *name, int ndim, const int64_t *shape,
                          int64_t i) {
    init_rule r = rule_for(seed, name, ndim, shape);
    return rule_value(&r, i);
}

/* ---- tensor lists ---- */

typedef struct {
    char name[VDN_NAME_MAX];  /* name in the file */
    char canon[VDN_NAME_MAX]; /* canonical name the values come from ("" for rope.inv_freq) */
    vdn_dtype dtype;
    int ndim;
    int64_t shape[4];  /* in the file */
    int64_t cshape[4]; /* canonical (what the generator sees) */
    vdn_xform xf;
    uint64_t key_seed; /* seed for this tensor's values */
} wtensor;

typedef struct {
    wtensor *t;
    int n, cap;
} wlist;

static wtensor *wl_add(wlist *l) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->t = realloc(l->t, (size_t)l->cap * sizeof *l->t);
        VDN_ASSERT(l->t);
    }
    wtensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    return t;
}

typedef struct {
    wlist *l;
    uint64_t seed;
    int native;
    const vdn_config *cfg;
} collect_ctx;

static void collect(void *user, const char *name, int ndim, const int64_t *shape, vdn_dtype dt) {
    collect_ctx *c = user;
    if (!c->native) {
        wtensor *t = wl_add(c->l);
        snprintf(t->name, sizeof t->name, "%s", name);
        snprintf(t->canon, sizeof t->canon, "%s", name);
        t->dtype = dt, t->ndim = ndim, t->key_seed = c->seed;
        memcpy(t->shape, shape, 4 * sizeof *shape);
        memcpy(t->cshape, shape, 4 * sizeof *shape);
        return;
    }
    char native[VDN_NAME_MAX];
    vdn_xform xf;
    int part;
    VDN_ASSERT(vdn_canonical_to_native(name, native, sizeof native, &xf, &part) == 0);
    if (xf == VDN_XF_QKV && part != 0) return; /* the fused tensor is written at to_q */
    wtensor *t = wl_add(c->l);
    snprintf(t->name, sizeof t->name, "%s", native);
    snprintf(t->canon, sizeof t->canon, "%s", name);
    t->dtype = dt, t->ndim = ndim, t->xf = xf, t->key_seed = c->seed;
    memcpy(t->shape, shape, 4 * sizeof *shape);
    memcpy(t->cshape, shape, 4 * sizeof *shape);
    if (xf == VDN_XF_QKV) t->shape[0] = 3 * shape[0];
}

static int64_t numel(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

/* Canonical name of part p of a fused qkv tensor whose to_q name is given. */
static void part_name(const char *to_q, int p, char *out, size_t n) {
    static const char *const parts[3] = {"to_q", "to_k", "to_v"};
    const char *at = strstr(to_q, "to_q");
    snprintf(out, n, "%.*s%s%s", (int)(at - to_q), to_q, parts[p], at + 4);
}

/* One file row of a tensor into out[row_len]. */
static void file_row(const wtensor *t, int64_t row, int64_t row_len, const vdn_config *cfg,
                     float *out) {
    if (!t->canon[0]) { /* rope.inv_freq, a 1-D buffer: theta^(-i / F) */
        for (int64_t i = 0; i < row_len; i++)
            out[i] = (float)pow(cfg->rope_theta, -(double)i / (double)cfg->rope_freq_dim);
        return;
    }
    char name[VDN_NAME_MAX];
    int64_t crow = row;
    const char *canon = t->canon;
    if (t->xf == VDN_XF_QKV) {
        const int64_t hd = cfg->head_dim;
        int64_t h = row / (3 * hd), p = (row % (3 * hd)) / hd, d = row % hd;
        part_name(t->canon, (int)p, name, sizeof name);
        canon = name;
        crow = h * hd + d;
    } else if (t->xf == VDN_XF_SWAP) {
        /* native [gate; up] rows from canonical [up; gate] */
        crow = (row + t->shape[0] / 2) % t->shape[0];
    }
    init_rule rule = rule_for(t->key_seed, canon, t->ndim, t->cshape);
    for (int64_t i = 0; i < row_len; i++)
        out[i] = rule_value(&rule, crow * row_len + i);
}

static int write_tensors(const char *path, const wlist *l, int from, int to, const vdn_st_kv *meta,
                         int n_meta, const vdn_config *cfg, char *err, size_t errlen) {
    int n = to - from;
    vdn_st_tensor *decl = vdn_xcalloc(n ? n : 1, sizeof *decl);
    for (int i = 0; i < n; i++) {
        const wtensor *t = &l->t[from + i];
        decl[i].name = t->name;
        decl[i].dtype = t->dtype;
        decl[i].ndim = t->ndim;
        memcpy(decl[i].shape, t->shape, 4 * sizeof *t->shape);
    }
    vdn_st_writer *w = vdn_st_writer_begin(path, decl, n, meta, n_meta, err, errlen);
    free(decl);
    if (!w) return -1;
    const int64_t chunk = 1 << 20;
    float *vals = vdn_xmalloc((size_t)chunk * sizeof(float));
    uint8_t *bytes = vdn_xmalloc((size_t)chunk * 4);
    int rc = 0;
    for (int i = from; i < to && rc == 0; i++) {
        const wtensor *t = &l->t[i];
        int64_t rows = t->ndim >= 2 ? t->shape[0] : 1;
        int64_t row_len = rows ? numel(t->shape, t->ndim) / rows : 0;
        float *row = vdn_xmalloc((size_t)(row_len ? row_len : 1) * sizeof(float));
        int64_t filled = 0;
        for (int64_t r = 0; r < rows && rc == 0; r++) {
            file_row(t, r, row_len, cfg, row);
            for (int64_t k = 0; k < row_len && rc == 0; k++) {
                vals[filled++] = row[k];
                if (filled == chunk || (r == rows - 1 && k == row_len - 1)) {
                    size_t es = vdn_dtype_size(t->dtype);
                    for (int64_t q = 0; q < filled; q++) {
                        if (t->dtype == VDN_DT_F32) {
                            memcpy(bytes + 4 * q, &vals[q], 4);
                        } else {
                            uint16_t h = t->dtype == VDN_DT_BF16 ? vdn_f32_to_bf16(vals[q])
                                                                 : vdn_f32_to_f16(vals[q]);
                            memcpy(bytes + 2 * q, &h, 2);
                        }
                    }
                    rc = vdn_st_writer_put(w, bytes, (size_t)filled * es, err, errlen);
                    filled = 0;
                }
            }
        }
        free(row);
    }
    free(vals);
    free(bytes);
    if (rc) {
        vdn_st_writer_abort(w);
        return -1;
    }
    return vdn_st_writer_finish(w, err, errlen);
}

static int write_json(const char *path, cJSON *j, char *err, size_t errlen) {
    char *s = cJSON_Print(j);
    VDN_ASSERT(s);
    size_t n = strlen(s);
    char *t = vdn_xmalloc(n + 2);
    memcpy(t, s, n);
    t[n] = '\n';
    t[n + 1] = '\0';
    cJSON_free(s);
    int rc = vdn_write_file_atomic(path, t, n + 1, err, errlen);
    free(t);
    return rc;
}

/* ---- configs ---- */

static cJSON *base_config_json(const vdn_config *c, int native) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "_class_name",
                            native ? "MiniMaxH3DiTModel" : "MiniMaxH3Transformer3DModel");
    cJSON_AddStringToObject(j, "_diffusers_version", native ? "0.32.2" : "0.36.0");
#define ADD(k, v) cJSON_AddNumberToObject(j, k, v)
    ADD("hidden_size", c->hidden);
    ADD("num_layers", c->layers);
    if (native) ADD("token_refiner_num_layers", c->refiner_layers);
    ADD("num_refiner_layers", c->refiner_layers);
    ADD("num_attention_heads", c->heads);
    ADD("attention_head_dim", c->head_dim);
    if (native) ADD("ffn_hidden_size", c->ffn);
    ADD("ffn_dim", c->ffn);
    if (native) ADD("latents_dim", c->in_channels);
    ADD("in_channels", c->in_channels);
    if (native) ADD("audio_latents_dim", c->audio_channels);
    ADD("audio_in_channels", c->audio_channels);
    int ps[3] = {c->patch_t, c->patch_h, c->patch_w};
    cJSON_AddItemToObject(j, "patch_size", cJSON_CreateIntArray(ps, 3));
    ADD("text_dim", c->text_dim);
    if (native) ADD("timestep_input_dim", c->freq_dim);
    ADD("freq_dim", c->freq_dim);
    if (native) ADD("time_embed_hidden_size", c->time_hidden);
    ADD("time_embed_hidden_dim", c->time_hidden);
    ADD("time_embed_dim", c->time_embed_dim);
    if (native) {
        ADD("adaln_out_features", 18.0 * c->hidden);
        ADD("final_adaln_out_features", 2.0 * c->hidden);
        ADD("rope_inv_freq_len", c->rope_freq_dim);
    }
    ADD("rope_freq_dim", c->rope_freq_dim);
    ADD("rope_theta", c->rope_theta);
    ADD("norm_eps", 1e-5);
    ADD("qk_norm_eps", 1e-5);
    ADD("final_norm_eps", 1e-5);
#undef ADD
    return j;
}

static cJSON *transform_json(const vdn_config *c) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "type", "hybrid_attention");
    cJSON_AddNumberToObject(t, "version", 2);
    cJSON *cfg = cJSON_AddObjectToObject(t, "config");
    cJSON_AddBoolToObject(cfg, "enable_softmax_gate", c->softmax_gate);
    cJSON_AddStringToObject(cfg, "anchor_frames", c->anchors_both ? "both" : "none");
    cJSON *soft = cJSON_AddObjectToObject(cfg, "softmax_attention");
    cJSON_AddNumberToObject(soft, "radius", c->radius);
    cJSON_AddNumberToObject(soft, "chunk", c->chunk);
    cJSON *lin = cJSON_AddObjectToObject(cfg, "linear_attention");
    cJSON_AddStringToObject(lin, "delta_rule", "vdn_solve");
    cJSON_AddNumberToObject(lin, "linear_head_dim", c->linear_head_dim);
    cJSON_AddStringToObject(lin, "bridge", "alpha");
    cJSON *sc = cJSON_AddObjectToObject(lin, "short_conv");
    const char *targets[2] = {"k", "v"};
    cJSON_AddItemToObject(sc, "targets", cJSON_CreateStringArray(targets, 2));
    cJSON_AddBoolToObject(lin, "enable_text_state", c->text_state);
    cJSON_AddBoolToObject(lin, "a_fp32", 1);
    return t;
}

/* ---- base ---- */

static int write_base(const char *root, const vdn_config *cfg, const vdn_ckpt_init_opts *o,
                      cJSON **config_out, char *err, size_t errlen) {
    char tdir[4096], path[4608];
    snprintf(tdir, sizeof tdir, "%s/transformer", root);
    if (vdn_mkdir_p(tdir, err, errlen)) return -1;
    cJSON *conf = base_config_json(cfg, o->native);
    snprintf(path, sizeof path, "%s/config.json", tdir);
    int rc = write_json(path, conf, err, errlen);
    if (rc) {
        cJSON_Delete(conf);
        return -1;
    }
    *config_out = conf;

    wlist l = {0};
    if (o->native) { /* the native file carries its rope buffer */
        wtensor *t = wl_add(&l);
        snprintf(t->name, sizeof t->name, "rope.inv_freq");
        t->dtype = VDN_DT_F32, t->ndim = 1, t->shape[0] = cfg->rope_freq_dim;
    }
    collect_ctx cc = {&l, o->seed, o->native, cfg};
    vdn_ckpt_schema(cfg, VDN_SCHEMA_BASE, collect, &cc);

    const char *stem = o->native ? "model" : "diffusion_pytorch_model";
    uint64_t budget = (uint64_t)((o->shard_mb > 0 ? o->shard_mb : 10000.0) * 1e6);
    uint64_t total = 0;
    for (int i = 0; i < l.n; i++)
        total += (uint64_t)numel(l.t[i].shape, l.t[i].ndim) * vdn_dtype_size(l.t[i].dtype);
    if (total <= budget) {
        snprintf(path, sizeof path, "%s/%s.safetensors", tdir, stem);
        rc = write_tensors(path, &l, 0, l.n, NULL, 0, cfg, err, errlen);
        free(l.t);
        return rc;
    }
    /* shards of at most `budget` bytes (a larger tensor gets a shard of its own) */
    int *shard_of = vdn_xcalloc(l.n, sizeof(int));
    int n_shards = 0;
    uint64_t acc = 0;
    for (int i = 0; i < l.n; i++) {
        uint64_t b = (uint64_t)numel(l.t[i].shape, l.t[i].ndim) * vdn_dtype_size(l.t[i].dtype);
        if (i == 0 || (acc + b > budget && acc > 0)) {
            n_shards++;
            acc = 0;
        }
        acc += b;
        shard_of[i] = n_shards - 1;
    }
    cJSON *index = cJSON_CreateObject();
    cJSON *im = cJSON_AddObjectToObject(index, "metadata");
    char num[32];
    snprintf(num, sizeof num, "%" PRIu64, total);
    cJSON_AddItemToObject(im, "total_size", cJSON_CreateRaw(num));
    cJSON *wm = cJSON_AddObjectToObject(index, "weight_map");
    int start = 0;
    for (int s = 0; s < n_shards && rc == 0; s++) {
        int end = start;
        while (end < l.n && shard_of[end] == s)
            end++;
        char fname[256];
        snprintf(fname, sizeof fname, "%s-%05d-of-%05d.safetensors", stem, s + 1, n_shards);
        snprintf(path, sizeof path, "%s/%s", tdir, fname);
        rc = write_tensors(path, &l, start, end, NULL, 0, cfg, err, errlen);
        for (int i = start; i < end; i++)
            cJSON_AddStringToObject(wm, l.t[i].name, fname);
        start = end;
    }
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/%s.safetensors.index.json", tdir, stem);
        rc = write_json(path, index, err, errlen);
    }
    cJSON_Delete(index);
    free(shard_of);
    free(l.t);
    return rc;
}

/* ---- adapters ---- */

typedef struct {
    const char *name;
    int rank;
    double alpha;
    int turbo;
} adapter_def;

typedef struct {
    wlist *l;
    const adapter_def *a;
    const vdn_config *cfg;
    uint64_t seed;
    cJSON *rank_pattern, *alpha_pattern;
} adapter_ctx;

static void add_factor(adapter_ctx *c, const char *module, int r, int64_t out, int64_t in) {
    for (int k = 0; k < 2; k++) {
        wtensor *t = wl_add(c->l);
        snprintf(t->name, sizeof t->name, "%s.lora_%c.%s.weight", module, k ? 'B' : 'A',
                 c->a->name);
        snprintf(t->canon, sizeof t->canon, "%s", t->name);
        t->dtype = VDN_DT_BF16, t->ndim = 2, t->key_seed = c->seed;
        t->shape[0] = k ? out : r;
        t->shape[1] = k ? r : in;
        memcpy(t->cshape, t->shape, sizeof t->shape);
    }
}

/* Which canonical weights an adapter targets, and under which module name it is stored. */
static void adapter_target(void *user, const char *name, int ndim, const int64_t *shape,
                           vdn_dtype dt) {
    (void)dt;
    adapter_ctx *c = user;
    if (ndim != 2) return;
    static const char *const attn[] = {".attn.to_q.weight", ".attn.to_k.weight",
                                       ".attn.to_v.weight", ".attn.to_out.0.weight"};
    int is_attn = 0;
    for (int i = 0; i < 4; i++)
        is_attn |= ends(name, attn[i]);
    int dit = strncmp(name, "transformer_blocks.", 19) == 0;
    int refiner = strncmp(name, "token_refiner.", 14) == 0;
    char module[VDN_NAME_MAX];
    snprintf(module, sizeof module, "%.*s", (int)(strlen(name) - strlen(".weight")), name);
    int r = c->a->rank;
    if (!c->a->turbo) {
        /* Stage-B default: attention of the DiT blocks (wrapped: attn.orig.) and the refiner */
        if (!is_attn || !(dit || refiner)) return;
        if (dit) {
            char *at = strstr(module, ".attn.");
            char re[VDN_NAME_MAX];
            snprintf(re, sizeof re, "%.*s.attn.orig.%s", (int)(at - module), module, at + 6);
            add_factor(c, re, r, shape[0], shape[1]);
        } else {
            add_factor(c, module, r, shape[0], shape[1]);
        }
        return;
    }
    /* turbo: DiT attention under its dense names, the SwiGLU input, adaLN, the final adaLN */
    int ff = dit && ends(name, ".ff.net.0.proj.weight");
    int ada = dit && ends(name, ".adaln_proj.linear.weight");
    int out = strcmp(name, "norm_out.linear.weight") == 0;
    if (!((dit && is_attn) || ff || ada || out)) return;
    if (ff) r = cJSON_GetObjectItem(c->rank_pattern, "ff.net.0.proj")->valueint;
    if (out) r = cJSON_GetObjectItem(c->rank_pattern, "norm_out.linear")->valueint;
    add_factor(c, module, r, shape[0], shape[1]);
}

static int write_adapter(const char *dir, const adapter_def *a, const vdn_config *cfg,
                         uint64_t seed, cJSON *spec_adapters, char *err, size_t errlen) {
    char adir[4608], path[4800];
    snprintf(adir, sizeof adir, "%s/adapters/%s", dir, a->name);
    if (vdn_mkdir_p(adir, err, errlen)) return -1;
    cJSON *entry = cJSON_CreateObject();
    cJSON_AddStringToObject(entry, "type", "lora");
    cJSON_AddNumberToObject(entry, "version", 1);
    cJSON *conf = cJSON_AddObjectToObject(entry, "config");
    cJSON_AddStringToObject(conf, "name", a->name);
    cJSON_AddNumberToObject(conf, "rank", a->rank);
    cJSON_AddNumberToObject(conf, "alpha", a->alpha);
    adapter_ctx c = {NULL, a, cfg, seed, NULL, NULL};
    if (a->turbo) {
        /* mixed ranks, as the turbo adapter may have: a rank_pattern and an alpha_pattern */
        int big = cfg->hidden >= 1024;
        c.rank_pattern = cJSON_AddObjectToObject(conf, "rank_pattern");
        cJSON_AddNumberToObject(c.rank_pattern, "norm_out.linear", big ? 32 : 2);
        cJSON_AddNumberToObject(c.rank_pattern, "ff.net.0.proj", big ? 128 : 3);
        c.alpha_pattern = cJSON_AddObjectToObject(conf, "alpha_pattern");
        cJSON_AddNumberToObject(c.alpha_pattern, "norm_out.linear", big ? 32 : 1);
        const char *targets[] = {"to_q",           "to_k",          "to_v",
                                 "to_out.0",       "ff.net.0.proj", "adaln_proj.linear",
                                 "norm_out.linear"};
        cJSON_AddItemToObject(conf, "target_modules", cJSON_CreateStringArray(targets, 7));
    } else {
        const char *targets[] = {"to_q", "to_k", "to_v", "to_out.0"};
        cJSON_AddItemToObject(conf, "target_modules", cJSON_CreateStringArray(targets, 4));
    }
    wlist l = {0};
    c.l = &l;
    vdn_ckpt_schema(cfg, VDN_SCHEMA_BASE, adapter_target, &c);
    snprintf(path, sizeof path, "%s/adapter_spec.json", adir);
    int rc = write_json(path, entry, err, errlen);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", adir);
    if (!rc) rc = write_tensors(path, &l, 0, l.n, NULL, 0, cfg, err, errlen);
    free(l.t);
    cJSON_AddItemToArray(spec_adapters, entry);
    return rc;
}

/* ---- prompts ---- */

static int write_prompt(const char *path, const vdn_config *cfg, uint64_t seed, int tokens,
                        int keyframes, char *err, size_t errlen) {
    const int label = 3, vision = 4; /* "<Picture i>: " rows (tag 1), vision-block rows (tag 0) */
    int L = tokens + (keyframes ? 2 * (label + vision) : 0);
    int big = cfg->hidden >= 1024;
    int height = big ? 768 : 128, width = big ? 1344 : 128;
    int h = height / 16, w = width / 16;
    wlist l = {0};
    wtensor *t = wl_add(&l);
    snprintf(t->name, sizeof t->name, "prompt_embeds");
    snprintf(t->canon, sizeof t->canon, "%s:prompt_embeds", keyframes ? "fl2va" : "t2va");
    t->dtype = VDN_DT_BF16, t->ndim = 2, t->shape[0] = L, t->shape[1] = cfg->text_dim;
    t->key_seed = seed;
    memcpy(t->cshape, t->shape, sizeof t->shape);
    for (int k = 0; keyframes && k < 2; k++) {
        t = wl_add(&l);
        snprintf(t->name, sizeof t->name, "keyframe_%s", k ? "last" : "first");
        snprintf(t->canon, sizeof t->canon, "fl2va:%s", t->name);
        t->dtype = VDN_DT_F32, t->ndim = 5, t->key_seed = seed;
        int64_t s[5] = {1, 24, 1, h, w};
        /* the generator sees a 4-D view; the file holds (1, 24, 1, h, w) */
        t->shape[0] = 1, t->shape[1] = 24, t->shape[2] = 1, t->shape[3] = h;
        memcpy(t->cshape, t->shape, sizeof t->shape);
        (void)s;
    }
    /* text_token_tags are written apart: I64 values, not generated */
    int64_t *tags = vdn_xmalloc((size_t)L * sizeof(int64_t));
    int r = 0;
    for (int k = 0; keyframes && k < 2; k++) {
        for (int i = 0; i < label; i++)
            tags[r++] = 1;
        for (int i = 0; i < vision; i++)
            tags[r++] = 0;
    }
    while (r < L)
        tags[r++] = 1;
    /* values into memory (prompt caches are small), then one atomic write */
    vdn_st_tensor decl[4];
    float *bufs[3] = {NULL, NULL, NULL};
    uint16_t *emb = NULL;
    int n = 0;
    for (int i = 0; i < l.n; i++) {
        wtensor *x = &l.t[i];
        int64_t cnt = i == 0 ? (int64_t)L * cfg->text_dim : (int64_t)24 * h * w;
        int64_t gshape[2] = {cnt, 1};
        bufs[i] = vdn_xmalloc((size_t)cnt * sizeof(float));
        init_rule rule = rule_for(x->key_seed, x->canon, 2, gshape);
        for (int64_t q = 0; q < cnt; q++)
            bufs[i][q] = rule_value(&rule, q);
        decl[n] = (vdn_st_tensor){.name = x->name, .dtype = x->dtype};
        if (i == 0) {
            emb = vdn_xmalloc((size_t)cnt * sizeof(uint16_t));
            for (int64_t q = 0; q < cnt; q++)
                emb[q] = vdn_f32_to_bf16(bufs[i][q]);
            decl[n].ndim = 2, decl[n].shape[0] = L, decl[n].shape[1] = cfg->text_dim;
            decl[n].data = emb;
        } else {
            decl[n].ndim = 5;
            int64_t s5[5] = {1, 24, 1, h, w};
            memcpy(decl[n].shape, s5, sizeof s5);
            decl[n].data = bufs[i];
        }
        n++;
    }
    decl[n++] = (vdn_st_tensor){
        .name = "text_token_tags", .dtype = VDN_DT_I64, .ndim = 1, .shape = {L}, .data = tags};
    char hs[16], ws[16], text[128];
    snprintf(hs, sizeof hs, "%d", height);
    snprintf(ws, sizeof ws, "%d", width);
    snprintf(text, sizeof text, "random %s prompt from vdn ckpt init (seed %" PRIu64 ")",
             keyframes ? "fl2va" : "t2va", seed);
    vdn_st_kv meta[4] = {
        {"prompt", text}, {"height", hs}, {"width", ws}, {"keyframe_anchors", "first,last"}};
    int rc = vdn_st_write(path, decl, n, meta, keyframes ? 4 : 1, err, errlen);
    for (int i = 0; i < 3; i++)
        free(bufs[i]);
    free(emb);
    free(tags);
    free(l.t);
    return rc;
}

/* ---- VDN directory ---- */

static int write_vdn(const char *out, const vdn_config *cfg, const vdn_ckpt_init_opts *o,
                     cJSON *base_conf, char *err, size_t errlen) {
    char path[4608];
    cJSON *spec = cJSON_CreateObject();
    cJSON_AddNumberToObject(spec, "format_version", 2);
    cJSON *base = cJSON_AddObjectToObject(spec, "base");
    cJSON_AddStringToObject(base, "library", "diffusers");
    cJSON_AddStringToObject(base, "class_name",
                            o->native ? "MiniMaxH3DiTModel" : "MiniMaxH3Transformer3DModel");
    /* our choice (docs/formats.md): source is a path relative to the VDN directory */
    cJSON_AddStringToObject(base, "source", "base");
    cJSON_AddStringToObject(base, "subfolder", "transformer");
    cJSON_AddNullToObject(base, "revision");
    cJSON *resolved = cJSON_Duplicate(base_conf, 1);
    cJSON_AddItemToObject(base, "resolved_config", resolved);
    char *canon = cJSON_PrintUnformatted(resolved);
    char hash[65];
    vdn_sha256_hex(canon, strlen(canon), hash);
    cJSON_free(canon);
    cJSON_AddStringToObject(base, "config_hash", hash);
    cJSON *transforms = cJSON_AddArrayToObject(spec, "transforms");
    cJSON *tf = transform_json(cfg);
    cJSON_AddItemToArray(transforms, cJSON_Duplicate(tf, 1));
    cJSON *adapters = cJSON_AddArrayToObject(spec, "adapters");
    int rc = 0;

    /* linear branch */
    snprintf(path, sizeof path, "%s/linear_branch", out);
    rc = vdn_mkdir_p(path, err, errlen);
    snprintf(path, sizeof path, "%s/linear_branch/config.json", out);
    if (!rc) rc = write_json(path, tf, err, errlen);
    cJSON_Delete(tf);
    if (!rc) {
        wlist l = {0};
        collect_ctx cc = {&l, o->seed, 0, cfg};
        vdn_ckpt_schema(cfg, VDN_SCHEMA_VDN, collect, &cc);
        snprintf(path, sizeof path, "%s/linear_branch/model.safetensors", out);
        rc = write_tensors(path, &l, 0, l.n, NULL, 0, cfg, err, errlen);
        free(l.t);
    }
    /* adapters */
    const char *list = o->adapters && o->adapters[0] ? o->adapters : "default";
    int big = cfg->hidden >= 1024;
    if (strcmp(list, "none") != 0) {
        char *copy = vdn_xstrdup(list), *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
            adapter_def a;
            if (strcmp(tok, "default") == 0)
                a = (adapter_def){"default", big ? 64 : 4, big ? 64 : 4, 0};
            else if (strcmp(tok, "turbo") == 0)
                a = (adapter_def){"turbo", big ? 64 : 6, big ? 64 : 12, 1};
            else {
                rc = vdn_fail(err, errlen,
                              "ckpt init: --adapters: \"%s\" (expected default, "
                              "turbo or none)",
                              tok);
                break;
            }
            rc = write_adapter(out, &a, cfg, o->seed, adapters, err, errlen);
        }
        free(copy);
    }
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "kind", "weights");
    cJSON_AddNumberToObject(meta, "checkpoint_format_version", 2);
    cJSON_AddStringToObject(meta, "weights_dtype", "bfloat16");
    cJSON *mm = cJSON_AddObjectToObject(meta, "metadata");
    cJSON_AddStringToObject(mm, "generator", "vdn ckpt init");
    cJSON_AddStringToObject(mm, "preset", o->preset);
    cJSON_AddNumberToObject(mm, "seed", (double)o->seed);
    snprintf(path, sizeof path, "%s/metadata.json", out);
    if (!rc) rc = write_json(path, meta, err, errlen);
    snprintf(path, sizeof path, "%s/model_spec.json", out);
    if (!rc) rc = write_json(path, spec, err, errlen);
    cJSON_Delete(meta);
    cJSON_Delete(spec);
    return rc;
}

/* A second init into the same directory replaces the first: delete the files an earlier run
 * may have written (only those names; anything else in DIR stays) so a stale index, shard,
 * model_spec.json or adapter cannot mix into the new checkpoint. */
static void remove_previous(const char *out) {
    static const char *const files[] = {"transformer/config.json",
                                        "transformer/diffusion_pytorch_model*.safetensors*",
                                        "transformer/model*.safetensors*",
                                        "base/transformer/config.json",
                                        "base/transformer/diffusion_pytorch_model*.safetensors*",
                                        "base/transformer/model*.safetensors*",
                                        "model_spec.json",
                                        "metadata.json",
                                        "linear_branch/config.json",
                                        "linear_branch/model.safetensors",
                                        "adapters/default/adapter_*.*",
                                        "adapters/turbo/adapter_*.*",
                                        "prompt.safetensors",
                                        "prompt_fl2va.safetensors"};
    static const char *const dirs[] = {"transformer",   "base/transformer", "base",
                                       "linear_branch", "adapters/default", "adapters/turbo",
                                       "adapters"};
    char pat[4200];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(pat, sizeof pat, "%s/%s", out, files[i]);
        glob_t g;
        if (glob(pat, 0, NULL, &g) == 0)
            for (size_t k = 0; k < g.gl_pathc; k++)
                unlink(g.gl_pathv[k]);
        globfree(&g);
    }
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(pat, sizeof pat, "%s/%s", out, dirs[i]);
        rmdir(pat); /* only when empty */
    }
}

int vdn_ckpt_init(const vdn_ckpt_init_opts *o, char *err, size_t errlen) {
    vdn_config cfg;
    if (vdn_ckpt_preset(o->preset, o->layers, &cfg, err, errlen)) return -1;
    if (o->heads > 0)
        cfg.heads = o->heads; /* C = heads head_dim need not be hidden (H3's is not) */
    if (!o->out || !o->out[0]) return vdn_fail(err, errlen, "ckpt init: --out DIR is required");
    remove_previous(o->out);
    if (vdn_mkdir_p(o->out, err, errlen)) return -1;
    char base_root[4096], path[4608];
    snprintf(base_root, sizeof base_root, "%s%s", o->out, o->vdn ? "/base" : "");
    cJSON *conf = NULL;
    int rc = write_base(base_root, &cfg, o, &conf, err, errlen);
    if (!rc && o->vdn) rc = write_vdn(o->out, &cfg, o, conf, err, errlen);
    cJSON_Delete(conf);
    int tokens = o->prompt_tokens > 0 ? o->prompt_tokens : cfg.hidden >= 1024 ? 256 : 12;
    snprintf(path, sizeof path, "%s/prompt.safetensors", o->out);
    if (!rc) rc = write_prompt(path, &cfg, o->seed, tokens, 0, err, errlen);
    snprintf(path, sizeof path, "%s/prompt_fl2va.safetensors", o->out);
    if (!rc) rc = write_prompt(path, &cfg, o->seed, tokens, 1, err, errlen);
    return rc;
}
