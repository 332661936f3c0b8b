/* Checkpoint loading: layouts load to identical canonical tensors, the native layout matches the
 * spec's layout rules on the raw files, shards, VDN assembly, identity, and every malformed
 * checkpoint fails with an error naming the file and tensor/key. Usage: ckpt_test_load TMPDIR */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckpt_init.h"
#include "lora.h"
#include "safetensors.h"
#include "vdn_util.h"
#include "../../ops/test/check.h"

static char tmp[900];

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (system(cmd) != 0) {
        fprintf(stderr, "command failed: %s\n", cmd);
        exit(1);
    }
}

static void init(const char *name, uint64_t seed, int vdn, int native, const char *adapters,
                 double shard_mb) {
    char out[1024], err[VDN_ERR_LEN];
    snprintf(out, sizeof out, "%s/%s", tmp, name);
    vdn_ckpt_init_opts o = {.preset = "tiny",
                            .out = out,
                            .seed = seed,
                            .vdn = vdn,
                            .native = native,
                            .adapters = adapters,
                            .shard_mb = shard_mb};
    if (vdn_ckpt_init(&o, err, sizeof err)) {
        fprintf(stderr, "ckpt init %s: %s\n", name, err);
        exit(1);
    }
}

static const char *base_dir; /* the base_dir open_ck passes (ckpt.h vdn_ckpt_open) */

static vdn_ckpt *open_ck(const char *name, const char *const *extra, int n_extra, char *err) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    return vdn_ckpt_open(dir, extra, n_extra, base_dir, err, VDN_ERR_LEN);
}

/* Every canonical tensor of a and b has the same name, shape, dtype and float values. */
static void same_tensors(vdn_ckpt *a, vdn_ckpt *b, const char *what) {
    char err[VDN_ERR_LEN];
    CHECK(vdn_ckpt_count(a) == vdn_ckpt_count(b), "%s: counts %d vs %d", what, vdn_ckpt_count(a),
          vdn_ckpt_count(b));
    int diffs = 0;
    for (int i = 0; i < vdn_ckpt_count(a) && i < vdn_ckpt_count(b); i++) {
        const char *n = vdn_ckpt_name(a, i);
        int64_t sa[8], sb[8];
        int nd = vdn_ckpt_shape(a, n, sa);
        if (strcmp(n, vdn_ckpt_name(b, i)) || vdn_ckpt_shape(b, n, sb) != nd ||
            memcmp(sa, sb, sizeof sa) || vdn_ckpt_dtype(a, n) != vdn_ckpt_dtype(b, n)) {
            if (diffs++ < 5) CHECK(0, "%s: tensor %s differs in name/shape/dtype", what, n);
            continue;
        }
        const float *x = vdn_ckpt_f32(a, n, nd, sa, err, sizeof err);
        const float *y = vdn_ckpt_f32(b, n, nd, sb, err, sizeof err);
        int64_t cnt = 1;
        for (int d = 0; d < nd; d++)
            cnt *= sa[d];
        if (!x || !y || memcmp(x, y, (size_t)cnt * sizeof(float))) {
            if (diffs++ < 5) CHECK(0, "%s: tensor %s values differ", what, n);
        }
    }
    CHECK(diffs == 0, "%s: %d tensors differ", what, diffs);
}

static float ref_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* Raw value (float) of element (row, col) of a 2-D tensor in a safetensors file. */
static float raw_at(const vdn_st_file *f, const char *name, int64_t row, int64_t col) {
    const vdn_st_entry *e = vdn_st_find(f, name);
    VDN_ASSERT(e && e->ndim == 2);
    int64_t i = row * e->shape[1] + col;
    const uint8_t *p = e->data;
    if (e->dtype == VDN_DT_F32) {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    uint32_t u = (uint32_t)h << 16;
    float v;
    memcpy(&v, &u, 4);
    return v;
}

static void test_layouts(void) {
    char err[VDN_ERR_LEN] = "";
    init("diff", 7, 0, 0, NULL, 0);
    init("nat", 7, 0, 1, NULL, 0);
    init("shard", 7, 0, 0, NULL, 0.05);
    init("natshard", 7, 0, 1, NULL, 0.05);
    vdn_ckpt *d = open_ck("diff", NULL, 0, err);
    CHECK(d, "open diffusers: %s", err);
    vdn_ckpt *n = open_ck("nat", NULL, 0, err);
    CHECK(n, "open native: %s", err);
    vdn_ckpt *s = open_ck("shard", NULL, 0, err);
    CHECK(s, "open sharded: %s", err);
    vdn_ckpt *ns = open_ck("natshard", NULL, 0, err);
    CHECK(ns, "open native sharded: %s", err);
    if (!d || !n || !s || !ns) exit(1);
    CHECK(!strcmp(vdn_ckpt_layout(d), "diffusers") && !strcmp(vdn_ckpt_layout(n), "native"),
          "layout names");
    /* released counts, scaled to 2 layers: 10 + 2x10+1 + 2x12 + 3 + 4 */
    CHECK(vdn_ckpt_count(d) == 62, "tiny canonical count %d", vdn_ckpt_count(d));
    same_tensors(d, n, "diffusers vs native");
    same_tensors(d, s, "single vs sharded");
    same_tensors(d, ns, "diffusers vs native sharded");
    char path[1200];
    snprintf(path, sizeof path,
             "%s/shard/transformer/diffusion_pytorch_model.safetensors.index.json", tmp);
    CHECK(access(path, F_OK) == 0, "no index for the sharded checkpoint");
    snprintf(path, sizeof path,
             "%s/shard/transformer/diffusion_pytorch_model-00002-of-00%03d.safetensors", tmp, 0);
    /* the values are the generator's, rounded to the stored dtype */
    int64_t sh_[8];
    int nd = vdn_ckpt_shape(d, "transformer_blocks.1.attn.to_k.weight", sh_);
    const float *k =
        vdn_ckpt_f32(d, "transformer_blocks.1.attn.to_k.weight", nd, sh_, err, sizeof err);
    CHECK(k && vdn_ckpt_dtype(d, "transformer_blocks.1.attn.to_k.weight") == VDN_DT_BF16, "to_k");
    for (int64_t i = 0; k && i < 64; i += 7) {
        float want = ref_bf16(
            vdn_ckpt_init_value(7, "transformer_blocks.1.attn.to_k.weight", nd, sh_, i * 13));
        CHECK(k[i * 13] == want, "to_k[%" PRId64 "] %g vs %g", i * 13, k[i * 13], want);
    }
    nd = vdn_ckpt_shape(d, "proj_in.weight", sh_);
    const float *pin = vdn_ckpt_f32(d, "proj_in.weight", nd, sh_, err, sizeof err);
    CHECK(pin && vdn_ckpt_dtype(d, "proj_in.weight") == VDN_DT_F32 &&
              pin[5] == vdn_ckpt_init_value(7, "proj_in.weight", nd, sh_, 5),
          "fp32 module kept fp32");
    CHECK(!vdn_ckpt_has(d, "rope.inv_freq"), "rope buffer exposed");

    /* the native files follow the spec's rules, checked on the raw bytes: fused qkv rows are
     * [h0_q, h0_k, h0_v, h1_q, ...] of head_dim each, fc1 rows are [gate; up] */
    char np[1200], dp[1200];
    snprintf(np, sizeof np, "%s/nat/transformer/model.safetensors", tmp);
    snprintf(dp, sizeof dp, "%s/diff/transformer/diffusion_pytorch_model.safetensors", tmp);
    vdn_st_file *nf = vdn_st_open(np, err, sizeof err), *df = vdn_st_open(dp, err, sizeof err);
    CHECK(nf && df, "raw open: %s", err);
    if (nf && df) {
        const int hd = 32, heads = 2, hidden = 64, ffn = 128;
        const char *pn[3] = {"to_q", "to_k", "to_v"};
        int bad = 0;
        for (int h = 0; h < heads; h++)
            for (int p = 0; p < 3; p++)
                for (int dd = 0; dd < hd; dd += 5)
                    for (int c = 0; c < hidden; c += 9) {
                        char cn[128];
                        snprintf(cn, sizeof cn, "token_refiner.refiner_blocks.1.attn.%s.weight",
                                 pn[p]);
                        float a = raw_at(nf, "token_refiner.blocks.1.attn.qkv_proj.weight",
                                         (int64_t)h * 3 * hd + p * hd + dd, c);
                        bad += a != raw_at(df, cn, (int64_t)h * hd + dd, c);
                    }
        CHECK(bad == 0, "qkv interleave: %d mismatches", bad);
        bad = 0;
        for (int r = 0; r < 2 * ffn; r += 3)
            for (int c = 0; c < hidden; c += 11)
                bad += raw_at(nf, "blocks.0.mlp.fc1.weight", r, c) !=
                       raw_at(df, "transformer_blocks.0.ff.net.0.proj.weight",
                              (r + ffn) % (2 * ffn), c);
        CHECK(bad == 0, "fc1 [gate; up]: %d mismatches", bad);
        CHECK(vdn_st_find(nf, "rope.inv_freq") && vdn_st_find(nf, "final_layer.video_out.weight") &&
                  vdn_st_find(nf, "time_embedder.proj_in.bias") &&
                  vdn_st_find(nf, "final_layer.adaln_proj.linear.weight") &&
                  vdn_st_find(nf, "blocks.1.attn.q_norm.weight") &&
                  vdn_st_find(nf, "token_refiner.blocks.0.attn.out_proj.weight"),
              "native names");
        /* 535 / 638 tensors in the release; here 2 layers: 10 + 1 + 2x8 + 1 + 2x10 + 7 */
        CHECK(vdn_st_count(nf) == 55, "native tensor count %d", vdn_st_count(nf));
    }
    vdn_st_close(nf);
    vdn_st_close(df);

    /* identity: stable, layout- and content-sensitive */
    vdn_ckpt *d2 = open_ck("diff", NULL, 0, err);
    CHECK(d2 && !strcmp(vdn_ckpt_identity(d), vdn_ckpt_identity(d2)), "identity not stable");
    init("diff_again", 7, 0, 0, NULL, 0);
    init("diff_seed8", 8, 0, 0, NULL, 0);
    vdn_ckpt *d3 = open_ck("diff_again", NULL, 0, err), *d8 = open_ck("diff_seed8", NULL, 0, err);
    CHECK(d3 && !strcmp(vdn_ckpt_identity(d), vdn_ckpt_identity(d3)),
          "same content, another directory, another identity");
    CHECK(strlen(vdn_ckpt_identity(d)) == 64 && strcmp(vdn_ckpt_identity(d), vdn_ckpt_identity(n)),
          "layouts share an identity");
    CHECK(d8 && strcmp(vdn_ckpt_identity(d), vdn_ckpt_identity(d8)),
          "different weights, same identity");
    vdn_ckpt_close(d2);
    vdn_ckpt_close(d3);
    vdn_ckpt_close(d8);
    vdn_ckpt_close(d);
    vdn_ckpt_close(n);
    vdn_ckpt_close(s);
    vdn_ckpt_close(ns);
}

static void test_vdn(void) {
    char err[VDN_ERR_LEN] = "";
    init("vdn", 3, 1, 0, "default,turbo", 0);
    init("vdnnat", 3, 1, 1, "default,turbo", 0);
    vdn_ckpt *v = open_ck("vdn", NULL, 0, err);
    CHECK(v, "open vdn: %s", err);
    vdn_ckpt *vn = open_ck("vdnnat", NULL, 0, err);
    CHECK(vn, "open vdn on a native base: %s", err);
    if (!v || !vn) exit(1);
    const vdn_config *c = vdn_ckpt_config(v);
    CHECK(c->has_vdn && c->alpha_rank == 8 && c->gate_rank == 8 && c->conv_spatial == 5 &&
              c->conv_temporal == 5 && c->chunk == 5 && c->radius == 1 && c->anchors_both &&
              c->linear_head_dim == 32,
          "vdn config");
    CHECK(vdn_ckpt_adapter_count(v) == 2 && !strcmp(vdn_ckpt_adapter_name(v, 0), "default") &&
              !strcmp(vdn_ckpt_adapter_name(v, 1), "turbo") && vdn_ckpt_adapter_rank(v, 0) == 4 &&
              vdn_ckpt_adapter_targets(v, 0) == 16 && vdn_ckpt_adapter_targets(v, 1) == 13,
          "adapters: %d", vdn_ckpt_adapter_count(v));
    CHECK(vdn_ckpt_count(v) == 62 + 2 * 16, "vdn tensor count %d", vdn_ckpt_count(v));
    CHECK(vdn_ckpt_has(v, "transformer_blocks.1.attn.linear_attention.alpha.A_log"), "branch");
    same_tensors(v, vn, "vdn over diffusers vs native base (folds included)");
    /* folds change the targets and nothing else */
    vdn_ckpt *b = NULL;
    char base[1200];
    snprintf(base, sizeof base, "%s/vdn/base", tmp);
    b = vdn_ckpt_open(base, NULL, 0, NULL, err, sizeof err);
    CHECK(b, "base: %s", err);
    if (b) {
        int64_t s[8];
        const char *names[] = {"transformer_blocks.0.attn.to_q.weight",
                               "token_refiner.refiner_blocks.1.attn.to_out.0.weight",
                               "norm_out.linear.weight",
                               "transformer_blocks.1.ff.net.0.proj.weight"};
        for (int i = 0; i < 4; i++) {
            int nd = vdn_ckpt_shape(v, names[i], s);
            const float *x = vdn_ckpt_f32(v, names[i], nd, s, err, sizeof err);
            const float *y = vdn_ckpt_f32(b, names[i], nd, s, err, sizeof err);
            CHECK(x && y && memcmp(x, y, (size_t)(s[0] * s[1]) * sizeof(float)) != 0,
                  "%s not folded", names[i]);
        }
        int nd = vdn_ckpt_shape(v, "transformer_blocks.0.ff.net.2.weight", s);
        const float *x = vdn_ckpt_f32(v, "transformer_blocks.0.ff.net.2.weight", nd, s, err, 256);
        const float *y = vdn_ckpt_f32(b, "transformer_blocks.0.ff.net.2.weight", nd, s, err, 256);
        CHECK(x && y && !memcmp(x, y, (size_t)(s[0] * s[1]) * sizeof(float)),
              "an untargeted weight changed");
        CHECK(strcmp(vdn_ckpt_identity(b), vdn_ckpt_identity(v)), "vdn identity == base's");
        vdn_ckpt_close(b);
    }
    /* release and rebuild gives the same folded values */
    int64_t s[8];
    int nd = vdn_ckpt_shape(v, "transformer_blocks.0.attn.to_v.weight", s);
    const float *x = vdn_ckpt_f32(v, "transformer_blocks.0.attn.to_v.weight", nd, s, err, 256);
    float first = x ? x[3] : 0;
    vdn_ckpt_release(v, "transformer_blocks.0.attn.to_v.weight");
    x = vdn_ckpt_f32(v, "transformer_blocks.0.attn.to_v.weight", nd, s, err, 256);
    CHECK(x && x[3] == first, "rebuilt value differs");
    int64_t wrong[2] = {s[0] + 1, s[1]};
    CHECK(!vdn_ckpt_f32(v, "transformer_blocks.0.attn.to_v.weight", 2, wrong, err, sizeof err) &&
              strstr(err, "diffusion_pytorch_model.safetensors") &&
              strstr(err, "transformer_blocks.0.attn.to_v.weight"),
          "shape error: %s", err);
    CHECK(!vdn_ckpt_f32(v, "nope.weight", 1, wrong, err, sizeof err) && strstr(err, "nope.weight"),
          "missing: %s", err);
    /* stored-dtype views agree with the float32 ones: zero-copy for a plain tensor, built for a
     * folded one and a native split */
    const char *sn[3] = {"transformer_blocks.0.ff.net.2.weight",
                         "transformer_blocks.0.attn.to_q.weight", "proj_in.weight"};
    for (int q = 0; q < 2; q++) {
        vdn_ckpt *ck = q ? vn : v;
        for (int i = 0; i < 3; i++) {
            int64_t sh2[8];
            int nd2 = vdn_ckpt_shape(ck, sn[i], sh2);
            vdn_dtype dt;
            const void *raw = vdn_ckpt_stored(ck, sn[i], nd2, sh2, &dt, err, sizeof err);
            const float *f = vdn_ckpt_f32(ck, sn[i], nd2, sh2, err, sizeof err);
            CHECK(raw && f && dt == vdn_ckpt_dtype(ck, sn[i]), "stored %s: %s", sn[i], err);
            int64_t cnt = sh2[0] * sh2[1], bad = 0;
            for (int64_t k = 0; raw && f && k < cnt; k++) {
                float x;
                if (dt == VDN_DT_F32) {
                    memcpy(&x, (const char *)raw + 4 * k, 4);
                } else {
                    uint16_t h;
                    memcpy(&h, (const char *)raw + 2 * k, 2);
                    x = vdn_bf16_to_f32(h);
                }
                bad += x != f[k];
            }
            CHECK(bad == 0, "stored %s (%s): %lld values differ", sn[i], q ? "native" : "diffusers",
                  (long long)bad);
        }
    }
    vdn_ckpt_close(v);
    vdn_ckpt_close(vn);
}

/* Rewrite a safetensors file through a filter: drop a tensor, rename one, change a shape, add
 * one. Values are copied from the original mapping. */
static void rewrite(const char *path, const char *drop, const char *rename_from,
                    const char *rename_to, const char *reshape, const char *add) {
    char err[VDN_ERR_LEN], out[1300];
    vdn_st_file *f = vdn_st_open(path, err, sizeof err);
    if (!f) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    int n = vdn_st_count(f);
    vdn_st_tensor *t = vdn_xcalloc(n + 1, sizeof *t);
    int k = 0;
    static float zeros[64];
    for (int i = 0; i < n; i++) {
        const vdn_st_entry *e = vdn_st_at(f, i);
        if (drop && !strcmp(e->name, drop)) continue;
        t[k] = (vdn_st_tensor){e->name, e->dtype, e->ndim, {0}, e->data};
        memcpy(t[k].shape, e->shape, sizeof t[k].shape);
        if (rename_from && !strcmp(e->name, rename_from)) t[k].name = rename_to;
        if (reshape && !strcmp(e->name, reshape)) t[k].shape[0] -= 1;
        k++;
    }
    if (add) t[k++] = (vdn_st_tensor){add, VDN_DT_F32, 1, {4}, zeros};
    snprintf(out, sizeof out, "%s.new", path);
    if (vdn_st_write(out, t, k, NULL, 0, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    vdn_st_close(f);
    free(t);
    if (rename(out, path)) exit(1);
}

static void expect_open_error(const char *name, const char *n1, const char *n2,
                              const char *const *extra, int n_extra) {
    char err[VDN_ERR_LEN] = "";
    vdn_ckpt *ck = open_ck(name, extra, n_extra, err);
    CHECK(!ck, "%s: opened", name);
    if (ck) vdn_ckpt_close(ck);
    CHECK(strstr(err, n1) != NULL, "%s: error lacks \"%s\": %s", name, n1, err);
    CHECK(!n2 || strstr(err, n2) != NULL, "%s: error lacks \"%s\": %s", name, n2, err);
}

static void fresh(const char *name, const char *from) {
    sh("rm -rf '%s/%s' && cp -r '%s/%s' '%s/%s'", tmp, name, tmp, from, tmp, name);
}

static void write_text(const char *name, const char *file, const char *text) {
    char path[1300], err[VDN_ERR_LEN];
    snprintf(path, sizeof path, "%s/%s/%s", tmp, name, file);
    if (vdn_write_file_atomic(path, text, strlen(text), err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
}

static void test_malformed(void) {
    char p[1300];
    const char *W = "transformer/diffusion_pytorch_model.safetensors";
    fresh("m1", "diff");
    sh("rm '%s/m1/transformer/config.json'", tmp);
    expect_open_error("m1", "not a checkpoint", NULL, NULL, 0);

    fresh("m2", "diff");
    sh("sed -i 's/\"hidden_size\":[[:space:]]*64/\"hidden_size\": \"64\"/' "
       "'%s/m2/transformer/config.json'",
       tmp);
    expect_open_error("m2", "config.json", "\"hidden_size\"", NULL, 0);

    fresh("m3", "diff");
    snprintf(p, sizeof p, "%s/m3/%s", tmp, W);
    rewrite(p, "norm_out.norm.weight", NULL, NULL, NULL, NULL);
    expect_open_error("m3", "missing tensor \"norm_out.norm.weight\"", NULL, NULL, 0);

    fresh("m4", "diff");
    snprintf(p, sizeof p, "%s/m4/%s", tmp, W);
    rewrite(p, NULL, NULL, NULL, "proj_in.bias", NULL);
    expect_open_error("m4", "diffusion_pytorch_model.safetensors", "\"proj_in.bias\": shape [63]",
                      NULL, 0);

    fresh("m5", "diff");
    sh("truncate -s -100 '%s/m5/%s'", tmp, W);
    expect_open_error("m5", "diffusion_pytorch_model.safetensors", "truncated", NULL, 0);

    fresh("m6", "diff");
    snprintf(p, sizeof p, "%s/m6/%s", tmp, W);
    rewrite(p, NULL, NULL, NULL, NULL, "foo.weight");
    expect_open_error("m6", "unexpected tensor \"foo.weight\"", NULL, NULL, 0);

    fresh("m7", "nat");
    snprintf(p, sizeof p, "%s/m7/transformer/model.safetensors", tmp);
    rewrite(p, NULL, NULL, NULL, NULL, "blocks.0.attn.to_gate_compress.weight");
    expect_open_error("m7", "model.safetensors", "\"blocks.0.attn.to_gate_compress.weight\"", NULL,
                      0);

    fresh("m8", "diff");
    sh("rm '%s/m8/%s'", tmp, W);
    expect_open_error("m8", "diffusion_pytorch_model.safetensors", NULL, NULL, 0);

    fresh("m9", "shard");
    sh("rm '%s/m9/transformer/diffusion_pytorch_model-00002-of-'*", tmp);
    expect_open_error("m9", "00002-of-", NULL, NULL, 0);

    /* VDN directories */
    fresh("v1", "vdn");
    write_text("v1", "metadata.json",
               "{\"kind\": \"train_state\", \"checkpoint_format_version\": 2}");
    expect_open_error("v1", "metadata.json", "\"weights\"", NULL, 0);

    fresh("v2", "vdn");
    sh("sed -i 's/\"format_version\":[[:space:]]*2/\"format_version\": 1/' '%s/v2/model_spec.json'",
       tmp);
    expect_open_error("v2", "model_spec.json", "format_version", NULL, 0);

    fresh("v3", "vdn");
    sh("mv '%s/v3/base' '%s/v3/base-moved'", tmp, tmp);
    expect_open_error("v3", "base checkpoint not found", NULL, NULL, 0);
    snprintf(p, sizeof p, "%s/v3/base-moved", tmp);
    base_dir = p; /* the vdn command's VDN_BASE_DIR */
    char err[VDN_ERR_LEN];
    vdn_ckpt *ck = open_ck("v3", NULL, 0, err);
    CHECK(ck, "base_dir not honoured: %s", err);
    vdn_ckpt_close(ck);
    base_dir = NULL;

    fresh("v4", "vdn");
    snprintf(p, sizeof p, "%s/v4/linear_branch/model.safetensors", tmp);
    rewrite(p, "transformer_blocks.1.attn.linear_attention.alpha.dt_bias", NULL, NULL, NULL, NULL);
    expect_open_error("v4", "missing tensor",
                      "\"transformer_blocks.1.attn.linear_attention.alpha.dt_bias\"", NULL, 0);

    fresh("v5", "vdn");
    sh("sed -i 's/\"vdn_solve\"/\"vdn_scaled\"/' '%s/v5/model_spec.json'", tmp);
    expect_open_error("v5", "model_spec.json", "delta_rule", NULL, 0);

    fresh("v6", "vdn");
    sh("sed -i 's/\"radius\":[[:space:]]*1/\"radius\": 2/' '%s/v6/linear_branch/config.json'", tmp);
    expect_open_error("v6", "linear_branch/config.json", "disagrees", NULL, 0);

    /* pre-v2 branch names load to the same tensors */
    fresh("v7", "vdn");
    snprintf(p, sizeof p, "%s/v7/linear_branch/model.safetensors", tmp);
    rewrite(p, NULL, "transformer_blocks.0.attn.linear_attention.output_gate.up.bias",
            "transformer_blocks.0.attn.far.gate.up.bias", NULL, NULL);
    rewrite(p, NULL, "transformer_blocks.1.attn.to_out_linear.weight",
            "transformer_blocks.1.attn.w_o_far.weight", NULL, NULL);
    rewrite(p, NULL, "transformer_blocks.1.attn.softmax_gate.up.bias",
            "transformer_blocks.1.attn.local_gate.up.bias", NULL, NULL);
    rewrite(p, NULL, "transformer_blocks.0.attn.linear_attention.beta_proj.weight",
            "transformer_blocks.0.attn.far.beta_proj.weight", NULL, NULL);
    vdn_ckpt *a = open_ck("v7", NULL, 0, err), *b = open_ck("vdn", NULL, 0, err);
    CHECK(a && b, "pre-v2 names: %s", err);
    if (a && b) same_tensors(a, b, "pre-v2 names vs v2");
    vdn_ckpt_close(a);
    vdn_ckpt_close(b);

    /* adapters */
    fresh("a1", "vdn");
    snprintf(p, sizeof p, "%s/a1/adapters/default/adapter_model.safetensors", tmp);
    rewrite(p, NULL, "transformer_blocks.1.attn.orig.to_q.lora_A.default.weight",
            "transformer_blocks.7.attn.orig.to_q.lora_A.default.weight", NULL, NULL);
    rewrite(p, NULL, "transformer_blocks.1.attn.orig.to_q.lora_B.default.weight",
            "transformer_blocks.7.attn.orig.to_q.lora_B.default.weight", NULL, NULL);
    expect_open_error("a1", "adapter_model.safetensors", "\"transformer_blocks.7.attn.to_q\"", NULL,
                      0);

    fresh("a2", "vdn");
    write_text("a2", "adapters/turbo/adapter_spec.json",
               "{\"config\": {\"rank\": 6, \"alpha\": 12, \"rank_pattern\": "
               "{\"norm_out.linear\": 5, \"ff.net.0.proj\": 3}}}");
    expect_open_error("a2", "adapter_model.safetensors", "rank_pattern says r = 5", NULL, 0);

    fresh("a3", "vdn");
    snprintf(p, sizeof p, "%s/a3/adapters/default/adapter_model.safetensors", tmp);
    rewrite(p, "transformer_blocks.0.attn.orig.to_k.lora_B.default.weight", NULL, NULL, NULL, NULL);
    expect_open_error("a3", "adapter_model.safetensors", "\"transformer_blocks.0.attn.orig.to_k\"",
                      NULL, 0);

    fresh("a4", "vdn");
    snprintf(p, sizeof p, "%s/a4/adapters/turbo/adapter_model.safetensors", tmp);
    rewrite(p, NULL, NULL, NULL, NULL, "transformer_blocks.0.attn.to_q.lora_magnitude_vector");
    expect_open_error("a4", "lora_magnitude_vector", "not a LoRA factor", NULL, 0);

    fresh("a5", "vdn");
    write_text("a5", "adapters/turbo/adapter_spec.json", "{\"config\": {\"rank\": \"six\"}}");
    expect_open_error("a5", "adapter_spec.json", "\"rank\"", NULL, 0);

    /* peft's adapter_config.json spelling, and no JSON at all (alpha = rank), both load */
    fresh("a6", "vdn");
    sh("mv '%s/a6/adapters/default/adapter_spec.json' '%s/a6/adapters/default/adapter_config.json'",
       tmp, tmp);
    write_text("a6", "adapters/default/adapter_config.json",
               "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 4, \"target_modules\": "
               "[\"to_q\"]}");
    sh("rm '%s/a6/adapters/turbo/adapter_spec.json'", tmp);
    a = open_ck("a6", NULL, 0, err);
    CHECK(a, "adapter_config.json / no JSON: %s", err);
    vdn_ckpt_close(a);

    /* a rank the JSON does not explain (no rank_pattern): folded at the configured alpha/r
     * ratio (1 here, as the reference folds checkpoint adapters), with a warning */
    fresh("a7", "vdn");
    write_text("a7", "adapters/default/adapter_spec.json",
               "{\"config\": {\"rank\": 2, \"alpha\": 2}}");
    a = open_ck("a7", NULL, 0, err), b = open_ck("vdn", NULL, 0, err);
    CHECK(a && b, "unexplained rank: %s", err);
    if (a && b) same_tensors(a, b, "unexplained rank folds at alpha/r = 1");
    vdn_ckpt_close(a);
    vdn_ckpt_close(b);

    /* an extra adapter that does not exist */
    const char *extra[1] = {"/nonexistent/adapter.safetensors"};
    expect_open_error("diff", "/nonexistent/adapter.safetensors", NULL, extra, 1);
}

/* A fold big enough to run on several threads gives the same bits as one thread, and matches
 * a float64 reference within one bf16 rounding of the delta. */
static void test_fold_threads(void) {
    const int64_t out = 4096, in = 2048, r = 8;
    float *A = vdn_xmalloc((size_t)(r * in) * 4), *B = vdn_xmalloc((size_t)(out * r) * 4);
    for (int64_t i = 0; i < r * in; i++)
        A[i] = (float)sin((double)i * 0.37) * 0.05f;
    for (int64_t i = 0; i < out * r; i++)
        B[i] = (float)cos((double)i * 0.11) * 0.05f;
    char path[1024], err[VDN_ERR_LEN];
    snprintf(path, sizeof path, "%s/big_lora.safetensors", tmp);
    vdn_st_tensor t[2] = {{"m.lora_A.weight", VDN_DT_F32, 2, {r, in}, A},
                          {"m.lora_B.weight", VDN_DT_F32, 2, {out, r}, B}};
    vdn_st_kv meta[1] = {{"alpha", "4"}};
    CHECK(vdn_st_write(path, t, 2, meta, 1, err, sizeof err) == 0, "%s", err);
    vdn_lora l;
    CHECK(vdn_lora_open(&l, path, NULL, err, sizeof err) == 0, "big lora: %s", err);
    float *w1 = vdn_xcalloc((size_t)(out * in), 4), *w4 = vdn_xcalloc((size_t)(out * in), 4);
    for (int64_t i = 0; i < out * in; i++)
        w1[i] = w4[i] = vdn_round_bf16((float)(i % 97) / 97);
    CHECK(vdn_lora_fold(w1, VDN_DT_BF16, &l, &l.pairs[0], 1, err, sizeof err) == 0, "%s", err);
    CHECK(vdn_lora_fold(w4, VDN_DT_BF16, &l, &l.pairs[0], 4, err, sizeof err) == 0, "%s", err);
    CHECK(!memcmp(w1, w4, (size_t)(out * in) * 4), "threaded fold differs from one thread");
    CHECK(l.pairs[0].scale == 0.5f, "alpha 4 / r 8 = %g", l.pairs[0].scale);
    int bad = 0;
    for (int64_t o = 0; o < out; o += 257)
        for (int64_t i = 0; i < in; i += 131) {
            double d = 0;
            for (int64_t k = 0; k < r; k++)
                d += (double)B[o * r + k] * A[k * in + i];
            double w0 = vdn_round_bf16((float)((o * in + i) % 97) / 97);
            float want = vdn_round_bf16((float)(w0 + vdn_round_bf16((float)(d * 0.5))));
            float got = w1[o * in + i];
            uint32_t ug, uw;
            memcpy(&ug, &got, 4), memcpy(&uw, &want, 4);
            bad += (ug > uw ? ug - uw : uw - ug) > 0x10000; /* more than one bf16 ulp */
        }
    CHECK(bad == 0, "%d folded values off the float64 reference", bad);
    vdn_lora_free(&l);
    free(A), free(B), free(w1), free(w4);
}

int main(int argc, char **argv) {
    snprintf(tmp, sizeof tmp, "%s", argc > 1 ? argv[1] : "/tmp/ckpt_test_load");
    sh("rm -rf '%s' && mkdir -p '%s'", tmp, tmp);
    test_layouts();
    test_vdn();
    test_malformed();
    test_fold_threads();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
