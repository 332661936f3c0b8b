/* File formats: safetensors round trip and every malformed case, sharded index sets, config
 * parsing errors, prompt caches. Usage: ckpt_test_formats TMPDIR */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_config.h"
#include "lora.h"
#include "prompt.h"
#include "safetensors.h"
#include "vdn_util.h"
#include "../../ops/test/check.h"

static const char *tmp;

/* ---- building raw files by hand (independent of our writer) ---- */

static size_t raw_file(uint8_t *buf, const char *header, const void *data, size_t data_len) {
    uint64_t hl = strlen(header);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)(hl >> (8 * i));
    memcpy(buf + 8, header, hl);
    if (data_len) memcpy(buf + 8 + hl, data, data_len);
    return 8 + hl + data_len;
}

/* The buffer must be refused with an error containing every needle. */
static void expect_bad(const char *what, const uint8_t *buf, size_t len, const char *n1,
                       const char *n2) {
    char err[VDN_ERR_LEN] = "";
    vdn_st_file *f = vdn_st_open_mem(buf, len, "bad.safetensors", err, sizeof err);
    CHECK(!f, "%s: accepted", what);
    if (f) vdn_st_close(f);
    CHECK(strstr(err, "bad.safetensors") != NULL, "%s: error does not name the file: %s", what,
          err);
    CHECK(!n1 || strstr(err, n1), "%s: error lacks \"%s\": %s", what, n1, err);
    CHECK(!n2 || strstr(err, n2), "%s: error lacks \"%s\": %s", what, n2, err);
}

static void test_malformed(void) {
    static uint8_t buf[4096];
    uint8_t data[64] = {0};
    size_t n;
    expect_bad("empty", buf, 0, "too short", NULL);
    expect_bad("7 bytes", (const uint8_t *)"\x02\0\0\0\0\0\0", 7, "too short", NULL);
    memset(buf, 0, 16);
    buf[0] = 100; /* header length 100, 8 bytes follow */
    expect_bad("header past end", buf, 16, "truncated", NULL);
    memset(buf, 0xff, 8);
    expect_bad("huge header length", buf, 16, "100 MB", NULL);
    n = raw_file(buf, "{\"a\": {\"dtype\": \"F32\"", NULL, 0);
    expect_bad("bad json", buf, n, "not valid JSON", NULL);
    n = raw_file(buf, "{} x", NULL, 0);
    expect_bad("trailing bytes", buf, n, "trailing", NULL);
    n = raw_file(buf, "[1, 2]", NULL, 0);
    expect_bad("array header", buf, n, "JSON object", NULL);
    n = raw_file(buf, "{\"t\": 5}", NULL, 0);
    expect_bad("entry not object", buf, n, "\"t\"", "expected an object");
    n = raw_file(buf, "{\"t\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", data, 4);
    expect_bad("no dtype", buf, n, "\"t\"", "dtype");
    n = raw_file(buf, "{\"t\": {\"dtype\": \"Q4\", \"shape\": [1], \"data_offsets\": [0, 8]}}",
                 data, 8);
    expect_bad("unknown dtype", buf, n, "\"t\"", "Q4");
    n = raw_file(buf, "{\"t\": {\"dtype\": \"F32\", \"shape\": 4, \"data_offsets\": [0, 16]}}",
                 data, 16);
    expect_bad("shape not array", buf, n, "\"t\"", "shape");
    n = raw_file(buf, "{\"t\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}",
                 data, 4);
    expect_bad("negative dim", buf, n, "\"t\"", "shape[0]");
    n = raw_file(buf, "{\"t\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}",
                 data, 4);
    expect_bad("fractional dim", buf, n, "\"t\"", "shape[0]");
    n = raw_file(buf,
                 "{\"t\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], "
                 "\"data_offsets\": [0, 4]}}",
                 data, 4);
    expect_bad("too many dims", buf, n, "\"t\"", "dims");
    n = raw_file(buf, "{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", data,
                 4);
    expect_bad("offsets arity", buf, n, "\"t\"", "data_offsets");
    n = raw_file(buf, "{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 0]}}",
                 data, 4);
    expect_bad("end before begin", buf, n, "\"t\"", "end before begin");
    n = raw_file(buf, "{\"t\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}",
                 data, 8);
    expect_bad("past the end", buf, n, "\"t\"", "truncated");
    n = raw_file(buf, "{\"t\": {\"dtype\": \"BF16\", \"shape\": [3], \"data_offsets\": [0, 8]}}",
                 data, 8);
    expect_bad("size mismatch", buf, n, "\"t\"", "6 bytes");
    n = raw_file(buf,
                 "{\"t\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], "
                 "\"data_offsets\": [0, 8]}}",
                 data, 8);
    expect_bad("numel overflow", buf, n, "\"t\"", "more than");
    n = raw_file(buf,
                 "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                 "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
                 data, 12);
    expect_bad("overlap", buf, n, "\"b\"", "overlaps");
    n = raw_file(buf,
                 "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
                 "\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
                 data, 12);
    expect_bad("hole", buf, n, "\"b\"", "unused bytes");
    n = raw_file(buf, "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
                 data, 12);
    expect_bad("bytes after data", buf, n, "after the last tensor", NULL);
    n = raw_file(buf,
                 "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
                 "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
                 data, 8);
    expect_bad("duplicate name", buf, n, "\"a\"", "twice");
    n = raw_file(buf, "{\"__metadata__\": {\"k\": 1}}", NULL, 0);
    expect_bad("metadata value", buf, n, "__metadata__", "\"k\"");
    n = raw_file(buf, "{\"__metadata__\": [1]}", NULL, 0);
    expect_bad("metadata type", buf, n, "__metadata__", NULL);
    n = raw_file(buf, "{\"\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
                 data, 4);
    expect_bad("empty name", buf, n, "empty name", NULL);

    /* valid edge cases: zero-size tensor, scalar, spaces after the JSON, odd header length */
    n = raw_file(buf,
                 "{\"z\": {\"dtype\": \"F32\", \"shape\": [0, 3], \"data_offsets\": [0, 0]}, "
                 "\"s\": {\"dtype\": \"BF16\", \"shape\": [], \"data_offsets\": [0, 2]}}   ",
                 "\x80\x3f", 2);
    char err[VDN_ERR_LEN];
    vdn_st_file *f = vdn_st_open_mem(buf, n, "edge", err, sizeof err);
    CHECK(f != NULL, "edge cases refused: %s", err);
    if (f) {
        const vdn_st_entry *s = vdn_st_find(f, "s");
        float v = 0;
        CHECK(s && s->ndim == 0 && s->numel == 1, "scalar");
        CHECK(s && vdn_st_to_f32(f, s, &v, err, sizeof err) == 0 && v == 1.0f, "bf16 0x3f80 = %g",
              v);
        CHECK(vdn_st_find(f, "z") && vdn_st_find(f, "z")->numel == 0, "zero-size tensor");
        CHECK(!vdn_st_find(f, "nope"), "absent tensor found");
        vdn_st_close(f);
    }

    /* a tensor of a dtype we never convert (F64, BOOL) does not make the file unreadable */
    static const double one = 1.0;
    uint8_t mixed[16];
    memcpy(mixed, &one, 8);
    memcpy(mixed + 8, "\x80\x3f\x01\x00\x00\x00\x00\x00", 8);
    n = raw_file(buf,
                 "{\"pos\": {\"dtype\": \"F64\", \"shape\": [1], \"data_offsets\": [0, 8]}, "
                 "\"w\": {\"dtype\": \"BF16\", \"shape\": [1], \"data_offsets\": [8, 10]}, "
                 "\"m\": {\"dtype\": \"BOOL\", \"shape\": [1], \"data_offsets\": [10, 11]}}",
                 mixed, 11);
    f = vdn_st_open_mem(buf, n, "mixed", err, sizeof err);
    CHECK(f != NULL, "file with F64/BOOL tensors refused: %s", err);
    if (f) {
        const vdn_st_entry *w = vdn_st_find(f, "w"), *pos = vdn_st_find(f, "pos");
        float v = 0;
        CHECK(w && vdn_st_to_f32(f, w, &v, err, sizeof err) == 0 && v == 1.0f, "bf16 beside f64");
        CHECK(pos && pos->dtype == VDN_DT_F64 && pos->nbytes == 8, "f64 entry");
        CHECK(pos && vdn_st_to_f32(f, pos, &v, err, sizeof err) != 0 && strstr(err, "\"pos\""),
              "f64 -> f32 conversion must be refused by name: %s", err);
        vdn_st_close(f);
    }
}

/* bf16 by truncation with round-to-nearest-even, computed on the bits here, independently. */
static float ref_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
    float r;
    memcpy(&r, &u, 4);
    return r;
}

static void test_round_trip(void) {
    char path[1024], err[VDN_ERR_LEN];
    snprintf(path, sizeof path, "%s/rt.safetensors", tmp);
    float f32[6] = {1.5f, -2.25f, 3e-8f, 65504.0f, -0.0f, 7.0f};
    uint16_t bf[4], hf[3];
    float bf_src[4] = {1.0f, 3.14159f, -1e-3f, 1e20f};
    for (int i = 0; i < 4; i++)
        bf[i] = vdn_f32_to_bf16(bf_src[i]);
    float hf_src[3] = {0.5f, -1024.0f, 6.1e-5f};
    for (int i = 0; i < 3; i++)
        hf[i] = vdn_f32_to_f16(hf_src[i]);
    int64_t i64[3] = {0, 1, -5};
    int32_t i32[2] = {7, -7};
    uint8_t u8[5] = {1, 2, 3, 4, 255};
    vdn_st_tensor ts[] = {
        {"mat", VDN_DT_F32, 2, {2, 3}, f32},  {"bf", VDN_DT_BF16, 1, {4}, bf},
        {"hf", VDN_DT_F16, 3, {1, 3, 1}, hf}, {"i64", VDN_DT_I64, 1, {3}, i64},
        {"i32", VDN_DT_I32, 1, {2}, i32},     {"u8", VDN_DT_U8, 1, {5}, u8},
    };
    vdn_st_kv meta[2] = {{"prompt", "a \"quoted\"\nline"}, {"k", "v"}};
    CHECK(vdn_st_write(path, ts, 6, meta, 2, err, sizeof err) == 0, "write: %s", err);
    char tmpname[1100];
    snprintf(tmpname, sizeof tmpname, "%s.tmp.%d", path, (int)getpid());
    CHECK(access(tmpname, F_OK) != 0, "temporary file left behind");
    vdn_st_file *f = vdn_st_open(path, err, sizeof err);
    CHECK(f != NULL, "open: %s", err);
    if (!f) return;
    CHECK(vdn_st_count(f) == 6, "count %d", vdn_st_count(f));
    size_t hl;
    vdn_st_header(f, &hl);
    CHECK((8 + hl) % 8 == 0, "header not padded to 8 (%zu)", hl);
    CHECK(vdn_st_meta(f, "prompt") && !strcmp(vdn_st_meta(f, "prompt"), "a \"quoted\"\nline"),
          "metadata round trip");
    const vdn_st_entry *e = vdn_st_find(f, "mat");
    float out[6];
    CHECK(e && e->ndim == 2 && e->shape[0] == 2 && e->shape[1] == 3 && e->dtype == VDN_DT_F32,
          "mat entry");
    CHECK(e && vdn_st_to_f32(f, e, out, err, sizeof err) == 0 && !memcmp(out, f32, sizeof f32),
          "f32 values");
    e = vdn_st_find(f, "bf");
    CHECK(e && vdn_st_to_f32(f, e, out, err, sizeof err) == 0, "bf16 widen");
    for (int i = 0; i < 4; i++)
        CHECK(out[i] == ref_bf16(bf_src[i]), "bf16[%d] %g vs %g", i, out[i], ref_bf16(bf_src[i]));
    e = vdn_st_find(f, "hf");
    CHECK(e && vdn_st_to_f32(f, e, out, err, sizeof err) == 0, "f16 widen");
    for (int i = 0; i < 3; i++)
        CHECK(fabsf(out[i] - hf_src[i]) <= fabsf(hf_src[i]) * 1e-3f, "f16[%d] %g vs %g", i, out[i],
              hf_src[i]);
    e = vdn_st_find(f, "i64");
    CHECK(e && e->nbytes == 24 && !memcmp(e->data, i64, 24), "i64 bytes");
    CHECK(e && vdn_st_to_f32(f, e, out, err, sizeof err) != 0 && strstr(err, "\"i64\""),
          "int widened: %s", err);
    e = vdn_st_find(f, "u8");
    CHECK(e && !memcmp(e->data, u8, 5), "u8 bytes");
    int64_t want[2] = {3, 2};
    CHECK(vdn_st_check_shape(f, vdn_st_find(f, "mat"), 2, want, err, sizeof err) != 0 &&
              strstr(err, "rt.safetensors") && strstr(err, "[2, 3], expected [3, 2]"),
          "shape error text: %s", err);
    vdn_st_close(f);

    /* the writer refuses what a reader would refuse, and streaming checks byte counts */
    vdn_st_tensor dup[2] = {{"a", VDN_DT_F32, 1, {1}, f32}, {"a", VDN_DT_F32, 1, {1}, f32}};
    CHECK(vdn_st_write(path, dup, 2, NULL, 0, err, sizeof err) != 0 && strstr(err, "twice"),
          "duplicate written: %s", err);
    snprintf(path, sizeof path, "%s/stream.safetensors", tmp);
    vdn_st_tensor decl[1] = {{"x", VDN_DT_F32, 1, {4}, NULL}};
    vdn_st_writer *w = vdn_st_writer_begin(path, decl, 1, NULL, 0, err, sizeof err);
    CHECK(w && vdn_st_writer_put(w, f32, 8, err, sizeof err) == 0, "put");
    CHECK(w && vdn_st_writer_finish(w, err, sizeof err) != 0 && strstr(err, "never written"),
          "short stream finished: %s", err);
    CHECK(access(path, F_OK) != 0, "short stream left a file");
    w = vdn_st_writer_begin(path, decl, 1, NULL, 0, err, sizeof err);
    CHECK(w && vdn_st_writer_put(w, f32, 20, err, sizeof err) != 0, "overlong put accepted");
    if (w) vdn_st_writer_abort(w);
    CHECK(access(path, F_OK) != 0, "aborted stream left a file");
}

static void write_or_die(const char *path, const char *text) {
    char err[VDN_ERR_LEN];
    if (vdn_write_file_atomic(path, text, strlen(text), err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
}

static void test_sharded(void) {
    char dir[1024], p1[1100], p2[1100], idx[1100], err[VDN_ERR_LEN];
    snprintf(dir, sizeof dir, "%s/shards", tmp);
    mkdir(dir, 0755);
    snprintf(p1, sizeof p1, "%s/m-00001-of-00002.safetensors", dir);
    snprintf(p2, sizeof p2, "%s/m-00002-of-00002.safetensors", dir);
    snprintf(idx, sizeof idx, "%s/m.safetensors.index.json", dir);
    float a[2] = {1, 2}, b[3] = {3, 4, 5};
    vdn_st_tensor t1[1] = {{"alpha", VDN_DT_F32, 1, {2}, a}};
    vdn_st_tensor t2[1] = {{"beta", VDN_DT_F32, 1, {3}, b}};
    CHECK(vdn_st_write(p1, t1, 1, NULL, 0, err, sizeof err) == 0, "%s", err);
    CHECK(vdn_st_write(p2, t2, 1, NULL, 0, err, sizeof err) == 0, "%s", err);
    write_or_die(idx,
                 "{\"metadata\": {\"total_size\": 20}, \"weight_map\": {\"alpha\": "
                 "\"m-00001-of-00002.safetensors\", \"beta\": \"m-00002-of-00002.safetensors\"}}");
    vdn_st_set *s = vdn_st_set_open(idx, err, sizeof err);
    CHECK(s != NULL, "index: %s", err);
    if (s) {
        const vdn_st_file *f;
        const vdn_st_entry *e = vdn_st_set_find(s, "beta", &f);
        float out[3];
        CHECK(vdn_st_set_count(s) == 2 && vdn_st_set_file_count(s) == 2, "set counts");
        CHECK(e && strstr(vdn_st_path(f), "00002") &&
                  vdn_st_to_f32(f, e, out, err, sizeof err) == 0 && out[2] == 5,
              "beta from shard 2");
        CHECK(!vdn_st_set_find(s, "gamma", NULL), "absent found");
        vdn_st_set_close(s);
    }
    struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"weight_map\": ", "not valid JSON"},
        {"{\"metadata\": {}}", "weight_map"},
        {"{\"weight_map\": {\"alpha\": 3}}", "\"alpha\""},
        {"{\"weight_map\": {\"alpha\": \"../x.safetensors\"}}", "not a file name"},
        {"{\"weight_map\": {\"alpha\": \"missing.safetensors\"}}", "missing.safetensors"},
        {"{\"weight_map\": {\"alpha\": \"m-00001-of-00002.safetensors\", \"gamma\": "
         "\"m-00001-of-00002.safetensors\"}}",
         "\"gamma\""},
        {"{\"weight_map\": {\"alpha\": \"m-00002-of-00002.safetensors\", \"beta\": "
         "\"m-00002-of-00002.safetensors\"}}",
         "\"alpha\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_or_die(idx, bad[i].json);
        s = vdn_st_set_open(idx, err, sizeof err);
        CHECK(!s && strstr(err, bad[i].needle), "bad index %zu: %s", i, err);
        if (s) vdn_st_set_close(s);
    }
    /* a shard-only tensor missing from the map */
    write_or_die(idx, "{\"weight_map\": {\"alpha\": \"m-00001-of-00002.safetensors\"}}");
    vdn_st_tensor t3[2] = {{"alpha", VDN_DT_F32, 1, {2}, a}, {"extra", VDN_DT_F32, 1, {3}, b}};
    CHECK(vdn_st_write(p1, t3, 2, NULL, 0, err, sizeof err) == 0, "%s", err);
    s = vdn_st_set_open(idx, err, sizeof err);
    CHECK(!s && strstr(err, "\"extra\"") && strstr(err, "missing from"), "unmapped: %s", err);
    if (s) vdn_st_set_close(s);
}

/* ---- configs ---- */

/* The released native config (MiniMax-H3 Ref2VA/transformer/config.json): both key spellings. */
static const char *native_config =
    "{\"_class_name\": \"MiniMaxH3DiTModel\", \"_diffusers_version\": \"0.32.2\", "
    "\"hidden_size\": 5376, \"num_layers\": 50, \"token_refiner_num_layers\": 2, "
    "\"num_refiner_layers\": 2, \"num_attention_heads\": 56, \"attention_head_dim\": 128, "
    "\"ffn_hidden_size\": 14336, \"ffn_dim\": 14336, \"latents_dim\": 24, \"in_channels\": 24, "
    "\"audio_latents_dim\": 32, \"audio_in_channels\": 32, \"patch_size\": [1, 2, 2], "
    "\"text_dim\": 5120, \"timestep_input_dim\": 256, \"freq_dim\": 256, "
    "\"time_embed_hidden_size\": 5376, \"time_embed_hidden_dim\": 5376, \"time_embed_dim\": 2688, "
    "\"adaln_out_features\": 96768, \"final_adaln_out_features\": 10752, "
    "\"rope_inv_freq_len\": 16, \"rope_freq_dim\": 16, \"rope_theta\": 10000.0, "
    "\"norm_eps\": 1e-05, \"qk_norm_eps\": 1e-05, \"final_norm_eps\": 1e-05}";

static const char *diffusers_config =
    "{\"_class_name\": \"MiniMaxH3Transformer3DModel\", \"num_attention_heads\": 56, "
    "\"attention_head_dim\": 128, \"hidden_size\": 5376, \"num_layers\": 50, "
    "\"num_refiner_layers\": 2, \"ffn_dim\": 14336, \"in_channels\": 24, \"audio_in_channels\": "
    "32, "
    "\"patch_size\": [1, 2, 2], \"text_dim\": 5120, \"freq_dim\": 256, "
    "\"time_embed_hidden_dim\": 5376, \"time_embed_dim\": 2688, \"rope_freq_dim\": 16, "
    "\"rope_theta\": 10000.0, \"norm_eps\": 1e-05, \"qk_norm_eps\": 1e-05, \"final_norm_eps\": "
    "1e-05}";

static char *replace(const char *s, const char *from, const char *to) {
    const char *at = strstr(s, from);
    VDN_ASSERT(at);
    size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
    char *out = vdn_xmalloc(n);
    snprintf(out, n, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    return out;
}

static void expect_config_error(const char *what, const char *text, const char *needle) {
    vdn_config c;
    vdn_layout_kind k;
    char err[VDN_ERR_LEN] = "";
    int rc = vdn_config_parse_base("cfg.json", text, strlen(text), &c, &k, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "cfg.json") && strstr(err, needle), "%s: rc %d, error: %s", what,
          rc, err);
}

static void test_config(void) {
    vdn_config c;
    vdn_layout_kind k;
    char err[VDN_ERR_LEN];
    CHECK(vdn_config_parse_base("native", native_config, strlen(native_config), &c, &k, err,
                                sizeof err) == 0,
          "native: %s", err);
    CHECK(k == VDN_LAYOUT_NATIVE && c.hidden == 5376 && c.layers == 50 && c.heads == 56 &&
              c.head_dim == 128 && c.ffn == 14336 && c.refiner_layers == 2 && c.text_dim == 5120 &&
              c.in_channels == 24 && c.audio_channels == 32 && c.freq_dim == 256 &&
              c.time_embed_dim == 2688 && c.time_hidden == 5376 && c.rope_freq_dim == 16 &&
              c.rope_theta == 10000.0 && c.norm_eps == 1e-5f && c.patch_h == 2 && c.patch_w == 2 &&
              c.video_shift == 12.0f && c.audio_shift == 3.0f && !c.has_vdn,
          "native values");
    vdn_config d;
    CHECK(vdn_config_parse_base("diffusers", diffusers_config, strlen(diffusers_config), &d, &k,
                                err, sizeof err) == 0,
          "diffusers: %s", err);
    CHECK(k == VDN_LAYOUT_DIFFUSERS && !memcmp(&c, &d, sizeof c), "both spellings give one config");

    struct {
        const char *what, *from, *to, *needle;
    } bad[] = {
        {"missing key", "\"num_layers\": 50, ", "", "\"num_layers\""},
        {"string value", "\"hidden_size\": 5376", "\"hidden_size\": \"5376\"", "\"hidden_size\""},
        {"fraction", "\"num_attention_heads\": 56", "\"num_attention_heads\": 56.5",
         "\"num_attention_heads\""},
        {"negative", "\"text_dim\": 5120", "\"text_dim\": -1", "\"text_dim\""},
        {"aliases disagree", "\"ffn_hidden_size\": 14336", "\"ffn_hidden_size\": 14000",
         "disagree"},
        {"unknown class", "MiniMaxH3DiTModel", "SomethingElse", "_class_name"},
        {"patch arity", "\"patch_size\": [1, 2, 2]", "\"patch_size\": [2, 2]", "patch_size"},
        {"temporal patch", "\"patch_size\": [1, 2, 2]", "\"patch_size\": [2, 2, 2]", "temporal"},
        {"eps differs", "\"qk_norm_eps\": 1e-05", "\"qk_norm_eps\": 1e-06", "qk_norm_eps"},
        {"adaln size", "\"adaln_out_features\": 96768", "\"adaln_out_features\": 96000",
         "adaln_out_features"},
        {"rope too wide", "\"rope_inv_freq_len\": 16, \"rope_freq_dim\": 16",
         "\"rope_inv_freq_len\": 32, \"rope_freq_dim\": 32", "rope_freq_dim"},
        {"bad json", "\"norm_eps\": 1e-05", "\"norm_eps\": ", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *t = replace(native_config, bad[i].from, bad[i].to);
        expect_config_error(bad[i].what, t, bad[i].needle);
        free(t);
    }
    expect_config_error("not an object", "[]", "object");
    expect_config_error("no class", "{\"hidden_size\": 4}", "_class_name");

    /* transform */
    const char *tf = "{\"type\": \"hybrid_attention\", \"version\": 2, \"config\": "
                     "{\"enable_softmax_gate\": true, \"anchor_frames\": \"both\", "
                     "\"softmax_attention\": {\"radius\": 1, \"chunk\": 5}, "
                     "\"linear_attention\": {\"delta_rule\": \"vdn_solve\", \"linear_head_dim\": "
                     "128, \"bridge\": \"alpha\", \"short_conv\": {\"targets\": [\"k\", \"v\"]}, "
                     "\"enable_text_state\": true, \"a_fp32\": true}}}";
    CHECK(vdn_config_parse_transform("tf", tf, strlen(tf), &c, err, sizeof err) == 0, "tf: %s",
          err);
    CHECK(c.has_vdn && c.chunk == 5 && c.radius == 1 && c.anchors_both && c.softmax_gate &&
              c.text_state && c.linear_head_dim == 128 && c.text_state_scale == 0.5f &&
              c.linear_norm_eps == 1e-6f,
          "transform values");
    struct {
        const char *from, *to, *needle;
    } badt[] = {
        {"\"version\": 2", "\"version\": 1", "version"},
        {"\"vdn_solve\"", "\"sana_scaled\"", "delta_rule"},
        {"\"alpha\"", "\"none\"", "bridge"},
        {"[\"k\", \"v\"]", "[\"k\"]", "targets"},
        {"[\"k\", \"v\"]", "[\"k\", \"k\"]", "targets"},
        {"\"both\"", "\"middle\"", "anchor_frames"},
        {"\"radius\": 1, ", "", "radius"},
        {"\"enable_text_state\": true", "\"enable_text_state\": 1", "enable_text_state"},
        {"\"chunk\": 5", "\"chunk\": \"5\"", "chunk"},
        {"hybrid_attention", "other", "type"},
    };
    for (size_t i = 0; i < sizeof badt / sizeof *badt; i++) {
        char *t = replace(tf, badt[i].from, badt[i].to);
        err[0] = '\0';
        int rc = vdn_config_parse_transform("tf.json", t, strlen(t), &c, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "tf.json") && strstr(err, badt[i].needle),
              "transform case %zu: %s", i, err);
        free(t);
    }
    /* adapter JSON: both spellings, and errors naming the key */
    int rank = 0;
    float alpha = 0;
    const char *spec = "{\"type\": \"lora\", \"config\": {\"rank\": 64, \"alpha\": 32}}";
    CHECK(vdn_lora_check_json("a.json", spec, strlen(spec), &rank, &alpha, err, sizeof err) == 0 &&
              rank == 64 && alpha == 32.0f,
          "adapter_spec.json: %s", err);
    const char *peft = "{\"r\": 8, \"lora_alpha\": 16, \"rank_pattern\": {\"to_q\": 4}}";
    CHECK(vdn_lora_check_json("a.json", peft, strlen(peft), &rank, &alpha, err, sizeof err) == 0 &&
              rank == 8 && alpha == 16.0f,
          "adapter_config.json: %s", err);
    struct {
        const char *json, *needle;
    } bad_ad[] = {
        {"{\"r\": 0}", "\"r\""},
        {"{\"config\": {\"rank\": 4.5}}", "\"rank\""},
        {"{\"lora_alpha\": -1}", "\"lora_alpha\""},
        {"{\"rank_pattern\": [4]}", "rank_pattern"},
        {"{\"alpha_pattern\": {\"to_q\": \"x\"}}", "alpha_pattern"},
        {"{\"r\": 4", "not valid JSON"},
        {"[4]", "JSON object"},
    };
    for (size_t i = 0; i < sizeof bad_ad / sizeof *bad_ad; i++) {
        err[0] = '\0';
        int rc = vdn_lora_check_json("ad.json", bad_ad[i].json, strlen(bad_ad[i].json), &rank,
                                     &alpha, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "ad.json") && strstr(err, bad_ad[i].needle),
              "adapter json %zu: %s", i, err);
    }
    float shift = 12;
    CHECK(vdn_config_parse_shift("s", "{\"shift\": 5.5}", 14, &shift, err, sizeof err) == 0 &&
              shift == 5.5f,
          "shift");
    CHECK(vdn_config_parse_shift("s.json", "{\"shift\": \"x\"}", 14, &shift, err, sizeof err) &&
              strstr(err, "shift"),
          "bad shift: %s", err);
}

/* ---- prompt caches ---- */

static int write_prompt(const char *path, int L, int D, const int64_t *tags, int kf, int h, int w,
                        const char *height, const char *width, const char *anchors,
                        const char *extra) {
    float *emb = vdn_xcalloc((size_t)L * D, sizeof(float));
    for (int i = 0; i < L * D; i++)
        emb[i] = (float)i / 7.0f;
    float *k = vdn_xcalloc((size_t)24 * h * w + 1, sizeof(float));
    for (int i = 0; i < 24 * h * w; i++)
        k[i] = (float)i;
    vdn_st_tensor t[6];
    int n = 0;
    t[n++] = (vdn_st_tensor){"prompt_embeds", VDN_DT_F32, 2, {L, D}, emb};
    t[n++] = (vdn_st_tensor){"text_token_tags", VDN_DT_I64, 1, {L}, tags};
    if (kf & 1) t[n++] = (vdn_st_tensor){"keyframe_first", VDN_DT_F32, 5, {1, 24, 1, h, w}, k};
    if (kf & 2) t[n++] = (vdn_st_tensor){"keyframe_last", VDN_DT_F32, 4, {24, 1, h, w}, k};
    if (extra) t[n++] = (vdn_st_tensor){extra, VDN_DT_F32, 1, {1}, k};
    vdn_st_kv meta[4];
    int m = 0;
    if (height) meta[m++] = (vdn_st_kv){"height", height};
    if (width) meta[m++] = (vdn_st_kv){"width", width};
    if (anchors) meta[m++] = (vdn_st_kv){"keyframe_anchors", anchors};
    meta[m++] = (vdn_st_kv){"prompt", "hello"};
    char err[VDN_ERR_LEN];
    int rc = vdn_st_write(path, t, n, meta, m, err, sizeof err);
    free(emb);
    free(k);
    return rc;
}

static void test_prompt(void) {
    char path[1024], err[VDN_ERR_LEN];
    snprintf(path, sizeof path, "%s/p.safetensors", tmp);
    int64_t tags[5] = {1, 1, 0, 0, 1};
    vdn_prompt p;
    CHECK(write_prompt(path, 5, 3, tags, 3, 2, 4, "32", "64", "first,last", NULL) == 0, "write");
    CHECK(vdn_prompt_load(path, 3, &p, err, sizeof err) == 0, "load: %s", err);
    CHECK(p.n_text == 5 && p.text_dim == 3 && p.tags[2] == 0 && p.tags[4] == 1 &&
              p.embeds[7] == 1.0f && p.n_keyframes == 2 && p.anchor_last[0] == 0 &&
              p.anchor_last[1] == 1 && p.kf_h == 2 && p.kf_w == 4 && p.height == 32 &&
              p.width == 64 && p.keyframes[24 * 8 + 5] == 5.0f && p.prompt &&
              !strcmp(p.prompt, "hello"),
          "prompt contents");
    vdn_prompt_free(&p);
    CHECK(write_prompt(path, 5, 3, tags, 2, 2, 4, "32", "64", NULL, NULL) == 0, "write");
    CHECK(vdn_prompt_load(path, 0, &p, err, sizeof err) == 0 && p.n_keyframes == 1 &&
              p.anchor_last[0] == 1,
          "last only: %s", err);
    vdn_prompt_free(&p);

    struct {
        const char *what, *needle;
        int L, D, kf, h, w;
        const char *height, *width, *anchors, *extra;
        int64_t bad_tag;
        int text_dim;
    } bad[] = {
        {"width mismatch", "text_dim is 4", 5, 3, 0, 2, 4, NULL, NULL, NULL, NULL, 1, 4},
        {"bad tag", "text_token_tags\"[1] = 2", 5, 3, 0, 2, 4, NULL, NULL, NULL, NULL, 2, 3},
        {"no height", "height", 5, 3, 1, 2, 4, NULL, NULL, NULL, NULL, 1, 3},
        {"latent size", "height/16", 5, 3, 1, 2, 4, "64", "64", NULL, NULL, 1, 3},
        {"anchors", "keyframe_anchors", 5, 3, 1, 2, 4, "32", "64", "last", NULL, 1, 3},
        {"unknown tensor", "\"prompt_embed\"", 5, 3, 0, 2, 4, NULL, NULL, NULL, "prompt_embed", 1,
         3},
        {"bad height", "\"height\"", 5, 3, 1, 2, 4, "32px", "64", NULL, NULL, 1, 3},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int64_t t[5] = {1, bad[i].bad_tag, 1, 1, 1};
        CHECK(write_prompt(path, bad[i].L, bad[i].D, t, bad[i].kf, bad[i].h, bad[i].w,
                           bad[i].height, bad[i].width, bad[i].anchors, bad[i].extra) == 0,
              "write %zu", i);
        err[0] = '\0';
        int rc = vdn_prompt_load(path, bad[i].text_dim, &p, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "p.safetensors") && strstr(err, bad[i].needle),
              "%s: rc %d: %s", bad[i].what, rc, err);
        if (!rc) vdn_prompt_free(&p);
    }
    /* missing tensors, wrong shapes and dtypes */
    float emb[6] = {0};
    int32_t tags32[2] = {1, 1};
    float ftags[2] = {1, 1};
    struct {
        vdn_st_tensor t[2];
        int n;
        const char *needle;
    } shapes[] = {
        {{{"text_token_tags", VDN_DT_I64, 1, {2}, tags}}, 1, "missing tensor \"prompt_embeds\""},
        {{{"prompt_embeds", VDN_DT_F32, 2, {2, 3}, emb}}, 1, "missing tensor \"text_token_tags\""},
        {{{"prompt_embeds", VDN_DT_F32, 1, {6}, emb},
          {"text_token_tags", VDN_DT_I64, 1, {2}, tags}},
         2,
         "(L, text_dim)"},
        {{{"prompt_embeds", VDN_DT_F32, 2, {2, 3}, emb},
          {"text_token_tags", VDN_DT_I64, 1, {1}, tags}},
         2,
         "to match prompt_embeds"},
        {{{"prompt_embeds", VDN_DT_F32, 2, {2, 3}, emb},
          {"text_token_tags", VDN_DT_F32, 1, {2}, ftags}},
         2,
         "expected I64"},
        {{{"prompt_embeds", VDN_DT_I32, 2, {1, 2}, tags32},
          {"text_token_tags", VDN_DT_I64, 1, {1}, tags}},
         2,
         "\"prompt_embeds\""},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        CHECK(vdn_st_write(path, shapes[i].t, shapes[i].n, NULL, 0, err, sizeof err) == 0, "%s",
              err);
        err[0] = '\0';
        int rc = vdn_prompt_load(path, 0, &p, err, sizeof err);
        CHECK(rc != 0 && strstr(err, shapes[i].needle), "shape case %zu: %s", i, err);
        if (!rc) vdn_prompt_free(&p);
    }
    /* too many rows, or rows too wide: refused from the header, before the widening malloc
     * (2^20 rows of 5120 were a 21 GB allocation that aborted the worker) */
    {
        const int64_t dims[2][2] = {{VDN_PROMPT_MAX_ROWS + 1, 1}, {1, VDN_PROMPT_MAX_DIM + 1}};
        for (int k = 0; k < 2; k++) {
            size_t n = (size_t)(dims[k][0] * dims[k][1]);
            uint16_t *big = calloc(n, 2);
            int64_t *bt = calloc((size_t)dims[k][0], 8);
            for (int64_t i = 0; i < dims[k][0]; i++)
                bt[i] = 1;
            vdn_st_tensor t[2] = {{"prompt_embeds", VDN_DT_BF16, 2, {dims[k][0], dims[k][1]}, big},
                                  {"text_token_tags", VDN_DT_I64, 1, {dims[k][0]}, bt}};
            CHECK(vdn_st_write(path, t, 2, NULL, 0, err, sizeof err) == 0, "%s", err);
            int rc = vdn_prompt_load(path, 0, &p, err, sizeof err);
            CHECK(rc != 0 && strstr(err, "above the limit of 16384 rows"), "limit %d: %s", k, err);
            if (!rc) vdn_prompt_free(&p);
            free(big);
            free(bt);
        }
    }
    snprintf(path, sizeof path, "%s/does-not-exist.safetensors", tmp);
    CHECK(vdn_prompt_load(path, 0, &p, err, sizeof err) != 0 && strstr(err, "does-not-exist"),
          "missing file: %s", err);
}

int main(int argc, char **argv) {
    tmp = argc > 1 ? argv[1] : "/tmp";
    mkdir(tmp, 0755);
    test_malformed();
    test_round_trip();
    test_sharded();
    test_config();
    test_prompt();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
