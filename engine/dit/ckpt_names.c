/* Name maps and the tensor schema; see ckpt_names.h and spec 0 / 5.4. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_names.h"

/* Whole-model modules: native prefix -> canonical prefix (followed by "weight" / "bias"). */
static const char *const top_map[][2] = {
    {"video_patch_proj.", "proj_in."},
    {"audio_patch_proj.", "audio_proj_in."},
    {"condition_proj.", "context_embedder."},
    {"time_embedder.proj_in.", "time_embedder.linear_1."},
    {"time_embedder.proj_out.", "time_embedder.linear_2."},
    {"token_refiner.final_norm.", "token_refiner.final_norm."},
    {"final_layer.norm.", "norm_out.norm."},
    {"final_layer.adaln_proj.linear.", "norm_out.linear."},
    {"final_layer.video_out.", "proj_out."},
    {"final_layer.audio_out.", "audio_proj_out."},
};

/* Block stacks: native prefix (with the index) -> canonical prefix. */
static const char *const stack_map[][2] = {
    {"token_refiner.blocks.", "token_refiner.refiner_blocks."},
    {"blocks.", "transformer_blocks."},
};

/* Inside a block. qkv_proj is handled apart (one native tensor, three canonical). */
static const char *const block_map[][2] = {
    {"norm1.", "norm1."},
    {"norm2.", "norm2."},
    {"attn.q_norm.", "attn.norm_q."},
    {"attn.k_norm.", "attn.norm_k."},
    {"attn.out_proj.", "attn.to_out.0."},
    {"mlp.fc1.", "ff.net.0.proj."},
    {"mlp.fc2.", "ff.net.2."},
    {"adaln_proj.linear.", "adaln_proj.linear."},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int starts(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* "PREFIX<digits>." -> index and the rest; -1 if s does not have that form. */
static int split_index(const char *s, const char *prefix, long *idx, const char **rest) {
    if (!starts(s, prefix)) return -1;
    const char *p = s + strlen(prefix);
    if (*p < '0' || *p > '9') return -1;
    char *end;
    *idx = strtol(p, &end, 10);
    if (*end != '.' || *idx < 0 || *idx > 100000) return -1;
    *rest = end + 1;
    return 0;
}

static int leaf_ok(const char *rest) {
    return strcmp(rest, "weight") == 0 || strcmp(rest, "bias") == 0;
}

int vdn_native_to_canonical(const char *native, char out[3][VDN_NAME_MAX], vdn_xform *xf) {
    *xf = VDN_XF_COPY;
    if (strcmp(native, "rope.inv_freq") == 0) return 0;
    for (size_t i = 0; i < COUNT(top_map); i++)
        if (starts(native, top_map[i][0]) && leaf_ok(native + strlen(top_map[i][0]))) {
            snprintf(out[0], VDN_NAME_MAX, "%s%s", top_map[i][1], native + strlen(top_map[i][0]));
            return 1;
        }
    for (size_t s = 0; s < COUNT(stack_map); s++) {
        long idx;
        const char *rest;
        if (split_index(native, stack_map[s][0], &idx, &rest) != 0) continue;
        if (strcmp(rest, "attn.qkv_proj.weight") == 0) {
            static const char *const part[3] = {"to_q", "to_k", "to_v"};
            for (int k = 0; k < 3; k++)
                snprintf(out[k], VDN_NAME_MAX, "%s%ld.attn.%s.weight", stack_map[s][1], idx,
                         part[k]);
            *xf = VDN_XF_QKV;
            return 3;
        }
        for (size_t b = 0; b < COUNT(block_map); b++) {
            if (!starts(rest, block_map[b][0]) || !leaf_ok(rest + strlen(block_map[b][0])))
                continue;
            if (s == 0 && starts(rest, "adaln_proj.")) return -1; /* the refiner has no adaLN */
            snprintf(out[0], VDN_NAME_MAX, "%s%ld.%s%s", stack_map[s][1], idx, block_map[b][1],
                     rest + strlen(block_map[b][0]));
            if (starts(rest, "mlp.fc1.")) *xf = VDN_XF_SWAP;
            return 1;
        }
        return -1;
    }
    return -1;
}

int vdn_canonical_to_native(const char *canon, char *out, size_t n, vdn_xform *xf, int *part) {
    *xf = VDN_XF_COPY;
    *part = 0;
    for (size_t i = 0; i < COUNT(top_map); i++)
        if (starts(canon, top_map[i][1]) && leaf_ok(canon + strlen(top_map[i][1]))) {
            snprintf(out, n, "%s%s", top_map[i][0], canon + strlen(top_map[i][1]));
            return 0;
        }
    for (size_t s = 0; s < COUNT(stack_map); s++) {
        long idx;
        const char *rest;
        if (split_index(canon, stack_map[s][1], &idx, &rest) != 0) continue;
        static const char *const part_names[3] = {"attn.to_q.weight", "attn.to_k.weight",
                                                  "attn.to_v.weight"};
        for (int k = 0; k < 3; k++)
            if (strcmp(rest, part_names[k]) == 0) {
                snprintf(out, n, "%s%ld.attn.qkv_proj.weight", stack_map[s][0], idx);
                *xf = VDN_XF_QKV;
                *part = k;
                return 0;
            }
        for (size_t b = 0; b < COUNT(block_map); b++) {
            if (!starts(rest, block_map[b][1]) || !leaf_ok(rest + strlen(block_map[b][1])))
                continue;
            snprintf(out, n, "%s%ld.%s%s", stack_map[s][0], idx, block_map[b][0],
                     rest + strlen(block_map[b][1]));
            if (starts(rest, "ff.net.0.proj.")) *xf = VDN_XF_SWAP;
            return 0;
        }
        return -1;
    }
    return -1;
}

int vdn_branch_name_v2(const char *name, char *out, size_t n) {
    /* longest first: ".attn.far.gate." must not be taken for ".attn.far." */
    static const char *const renames[][2] = {
        {".attn.far.gate.", ".attn.linear_attention.output_gate."},
        {".attn.far.", ".attn.linear_attention."},
        {".attn.local_gate.", ".attn.softmax_gate."},
        {".attn.w_o_far.", ".attn.to_out_linear."},
    };
    for (size_t i = 0; i < COUNT(renames); i++) {
        const char *at = strstr(name, renames[i][0]);
        if (!at) continue;
        snprintf(out, n, "%.*s%s%s", (int)(at - name), name, renames[i][1],
                 at + strlen(renames[i][0]));
        return 1;
    }
    snprintf(out, n, "%s", name);
    return 0;
}

int vdn_lora_module_canonical(const char *module, char *out, size_t n) {
    static const char *const prefixes[] = {"base_model.model.", "transformer.", "diffusion_model."};
    for (size_t i = 0; i < COUNT(prefixes); i++)
        if (starts(module, prefixes[i])) {
            module += strlen(prefixes[i]);
            break;
        }
    const char *at = strstr(module, ".attn.orig.");
    int w = at ? snprintf(out, n, "%.*s.attn.%s", (int)(at - module), module,
                          at + strlen(".attn.orig."))
               : snprintf(out, n, "%s", module);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* ---- schema ---- */

typedef struct {
    vdn_schema_fn fn;
    void *user;
    char name[VDN_NAME_MAX];
} emitter;

static void emit(emitter *e, vdn_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2,
                 int64_t d3) {
    int64_t shape[4] = {d0, d1, d2, d3};
    e->fn(e->user, e->name, ndim, shape, dt);
}

#define NAME(...) snprintf(e.name, sizeof e.name, __VA_ARGS__)

static void attention_block(emitter *e_, const char *prefix, const vdn_config *c) {
    emitter e = *e_;
    const int64_t hid = c->hidden, inner = (int64_t)c->heads * c->head_dim;
    NAME("%s.norm1.weight", prefix), emit(&e, VDN_DT_BF16, 1, hid, 0, 0, 0);
    NAME("%s.norm2.weight", prefix), emit(&e, VDN_DT_BF16, 1, hid, 0, 0, 0);
    NAME("%s.attn.to_q.weight", prefix), emit(&e, VDN_DT_BF16, 2, inner, hid, 0, 0);
    NAME("%s.attn.to_k.weight", prefix), emit(&e, VDN_DT_BF16, 2, inner, hid, 0, 0);
    NAME("%s.attn.to_v.weight", prefix), emit(&e, VDN_DT_BF16, 2, inner, hid, 0, 0);
    NAME("%s.attn.norm_q.weight", prefix), emit(&e, VDN_DT_BF16, 1, c->head_dim, 0, 0, 0);
    NAME("%s.attn.norm_k.weight", prefix), emit(&e, VDN_DT_BF16, 1, c->head_dim, 0, 0, 0);
    NAME("%s.attn.to_out.0.weight", prefix), emit(&e, VDN_DT_BF16, 2, hid, inner, 0, 0);
    NAME("%s.ff.net.0.proj.weight", prefix),
        emit(&e, VDN_DT_BF16, 2, 2 * (int64_t)c->ffn, hid, 0, 0);
    NAME("%s.ff.net.2.weight", prefix), emit(&e, VDN_DT_BF16, 2, hid, c->ffn, 0, 0);
}

void vdn_ckpt_schema(const vdn_config *c, int which, vdn_schema_fn fn, void *user) {
    emitter e = {fn, user, ""};
    const int64_t hid = c->hidden, inner = (int64_t)c->heads * c->head_dim;
    const int64_t patch = (int64_t)c->in_channels * c->patch_t * c->patch_h * c->patch_w;
    char prefix[96];
    if (which & VDN_SCHEMA_BASE) {
        NAME("proj_in.weight"), emit(&e, VDN_DT_F32, 2, hid, patch, 0, 0);
        NAME("proj_in.bias"), emit(&e, VDN_DT_F32, 1, hid, 0, 0, 0);
        NAME("audio_proj_in.weight"), emit(&e, VDN_DT_F32, 2, hid, c->audio_channels, 0, 0);
        NAME("audio_proj_in.bias"), emit(&e, VDN_DT_F32, 1, hid, 0, 0, 0);
        NAME("context_embedder.weight"), emit(&e, VDN_DT_BF16, 2, hid, c->text_dim, 0, 0);
        NAME("context_embedder.bias"), emit(&e, VDN_DT_BF16, 1, hid, 0, 0, 0);
        NAME("time_embedder.linear_1.weight"),
            emit(&e, VDN_DT_F32, 2, c->time_hidden, c->freq_dim, 0, 0);
        NAME("time_embedder.linear_1.bias"), emit(&e, VDN_DT_F32, 1, c->time_hidden, 0, 0, 0);
        NAME("time_embedder.linear_2.weight"),
            emit(&e, VDN_DT_F32, 2, c->time_embed_dim, c->time_hidden, 0, 0);
        NAME("time_embedder.linear_2.bias"), emit(&e, VDN_DT_F32, 1, c->time_embed_dim, 0, 0, 0);
        for (int j = 0; j < c->refiner_layers; j++) {
            snprintf(prefix, sizeof prefix, "token_refiner.refiner_blocks.%d", j);
            attention_block(&e, prefix, c);
        }
        NAME("token_refiner.final_norm.weight"), emit(&e, VDN_DT_BF16, 1, hid, 0, 0, 0);
        for (int i = 0; i < c->layers; i++) {
            snprintf(prefix, sizeof prefix, "transformer_blocks.%d", i);
            attention_block(&e, prefix, c);
            NAME("%s.adaln_proj.linear.weight", prefix),
                emit(&e, VDN_DT_BF16, 2, 18 * hid, c->time_embed_dim, 0, 0);
            NAME("%s.adaln_proj.linear.bias", prefix), emit(&e, VDN_DT_BF16, 1, 18 * hid, 0, 0, 0);
        }
        NAME("norm_out.norm.weight"), emit(&e, VDN_DT_BF16, 1, hid, 0, 0, 0);
        NAME("norm_out.linear.weight"), emit(&e, VDN_DT_BF16, 2, 2 * hid, c->time_embed_dim, 0, 0);
        NAME("norm_out.linear.bias"), emit(&e, VDN_DT_BF16, 1, 2 * hid, 0, 0, 0);
        NAME("proj_out.weight"), emit(&e, VDN_DT_F32, 2, patch, hid, 0, 0);
        NAME("proj_out.bias"), emit(&e, VDN_DT_F32, 1, patch, 0, 0, 0);
        NAME("audio_proj_out.weight"), emit(&e, VDN_DT_F32, 2, c->audio_channels, hid, 0, 0);
        NAME("audio_proj_out.bias"), emit(&e, VDN_DT_F32, 1, c->audio_channels, 0, 0, 0);
    }
    if (which & VDN_SCHEMA_VDN) {
        const int64_t H = c->heads, lin = (int64_t)c->heads * c->linear_head_dim;
        const int64_t ks = c->conv_spatial, kt = c->conv_temporal;
        (void)inner;
        for (int i = 0; i < c->layers; i++) {
            const char *p = prefix;
            snprintf(prefix, sizeof prefix, "transformer_blocks.%d.attn", i);
            NAME("%s.to_out_linear.weight", p), emit(&e, VDN_DT_BF16, 2, hid, lin, 0, 0);
            NAME("%s.softmax_gate.up.weight", p), emit(&e, VDN_DT_BF16, 2, H, hid, 0, 0);
            NAME("%s.softmax_gate.up.bias", p), emit(&e, VDN_DT_BF16, 1, H, 0, 0, 0);
            NAME("%s.linear_attention.beta_proj.weight", p), emit(&e, VDN_DT_BF16, 2, H, hid, 0, 0);
            NAME("%s.linear_attention.alpha.down.weight", p),
                emit(&e, VDN_DT_BF16, 2, c->alpha_rank, hid, 0, 0);
            NAME("%s.linear_attention.alpha.up.weight", p),
                emit(&e, VDN_DT_BF16, 2, lin, c->alpha_rank, 0, 0);
            NAME("%s.linear_attention.alpha.A_log", p), emit(&e, VDN_DT_BF16, 1, H, 0, 0, 0);
            NAME("%s.linear_attention.alpha.dt_bias", p), emit(&e, VDN_DT_BF16, 1, lin, 0, 0, 0);
            NAME("%s.linear_attention.output_gate.down.weight", p),
                emit(&e, VDN_DT_BF16, 2, c->gate_rank, hid, 0, 0);
            NAME("%s.linear_attention.output_gate.up.weight", p),
                emit(&e, VDN_DT_BF16, 2, lin, c->gate_rank, 0, 0);
            NAME("%s.linear_attention.output_gate.up.bias", p),
                emit(&e, VDN_DT_BF16, 1, lin, 0, 0, 0);
            NAME("%s.linear_attention.norm.weight", p),
                emit(&e, VDN_DT_BF16, 1, c->linear_head_dim, 0, 0, 0);
            NAME("%s.linear_attention.short_conv.k_sp.weight", p),
                emit(&e, VDN_DT_BF16, 4, lin, 1, ks, ks);
            NAME("%s.linear_attention.short_conv.v_sp.weight", p),
                emit(&e, VDN_DT_BF16, 4, lin, 1, ks, ks);
            NAME("%s.linear_attention.short_conv.k_tm.weight", p),
                emit(&e, VDN_DT_BF16, 3, lin, 1, kt, 0);
            NAME("%s.linear_attention.short_conv.v_tm.weight", p),
                emit(&e, VDN_DT_BF16, 3, lin, 1, kt, 0);
        }
    }
}
