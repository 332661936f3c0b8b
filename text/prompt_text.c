/* Text prompts into prompt caches (see prompt_text.h). */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "encoder.h"
#include "prompt_text.h"
#include "safetensors.h"
#include "tokenizer.h"
#include "vdn_util.h"

struct vdn_text_prompts {
    char root[4096];  /* the folder holding tokenizer/ and text_encoder/ */
    char backend[16]; /* "" = the GPU when there is one */
    int layer;
    vdn_tokenizer *tok;
    char identity[65];
    vdn_text_config cfg; /* from text_encoder/config.json, read at open */
    vdn_dev *dev;        /* opened with the encoder, on the first encode */
    vdn_text_encoder *enc;
    long encodes;
    pthread_mutex_t mu; /* one encode or cache lookup at a time */
};

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

vdn_text_prompts *vdn_text_prompts_open(const char *ckpt, const char *backend, int layer, char *err,
                                        size_t errlen) {
    vdn_text_prompts *p = vdn_xcalloc(1, sizeof *p);
    char dir[4352];
    snprintf(p->root, sizeof p->root, "%s", ckpt);
    snprintf(dir, sizeof dir, "%s/text_encoder", ckpt);
    if (!is_dir(dir)) {
        snprintf(p->root, sizeof p->root, "%s/base", ckpt);
        snprintf(dir, sizeof dir, "%s/text_encoder", p->root);
    }
    if (!is_dir(dir)) {
        vdn_fail(err, errlen,
                 "checkpoint %s has no text_encoder/ (nor base/text_encoder/): text prompts need "
                 "the release's text_encoder/ and tokenizer/ (`vdn ckpt init --text-encoder` "
                 "writes tiny ones)",
                 ckpt);
        free(p);
        return NULL;
    }
    snprintf(p->backend, sizeof p->backend, "%s", backend ? backend : "");
    p->layer = layer;
    pthread_mutex_init(&p->mu, NULL);
    snprintf(dir, sizeof dir, "%s/tokenizer", p->root);
    p->tok = vdn_tokenizer_load(dir, err, errlen);
    snprintf(dir, sizeof dir, "%s/text_encoder", p->root);
    if (!p->tok || vdn_text_config_load(dir, &p->cfg, err, errlen) ||
        vdn_text_encoder_identity_of(dir, layer, p->identity, err, errlen)) {
        vdn_text_prompts_close(p);
        return NULL;
    }
    return p;
}

void vdn_text_prompts_close(vdn_text_prompts *p) {
    if (!p) return;
    vdn_text_encoder_close(p->enc);
    vdn_dev_close(p->dev);
    vdn_tokenizer_free(p->tok);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int64_t vdn_text_prompts_max_tokens(const vdn_text_prompts *p) {
    return p->cfg.max_positions;
}

const char *vdn_text_prompts_identity(const vdn_text_prompts *p) {
    return p->identity;
}

long vdn_text_prompts_encodes(const vdn_text_prompts *p) {
    return p->encodes;
}

static int tokenize(vdn_text_prompts *p, const char *text, int32_t **ids, size_t *n, char *err,
                    size_t errlen) {
    if (vdn_tokenize(p->tok, text, strlen(text), ids, n, err, errlen)) return -1;
    if (*n == 0) return vdn_fail(err, errlen, "the prompt is empty (no tokens)");
    return 0;
}

static void key_of(const vdn_text_prompts *p, const int32_t *ids, size_t n, char *key,
                   size_t keylen) {
    size_t cap = 128 + 12 * n, used = 0;
    char *buf = vdn_xmalloc(cap), hex[65];
    used += (size_t)snprintf(buf, cap, "vdn prompt cache v1\nencoder %s\nids", p->identity);
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(buf + used, cap - used, " %d", ids[i]);
    vdn_sha256_hex(buf, used, hex);
    free(buf);
    snprintf(key, keylen, "%s%s.safetensors", VDN_PROMPT_CACHE_PREFIX, hex);
}

int vdn_text_prompts_key(vdn_text_prompts *p, const char *text, char *key, size_t keylen,
                         int *tokens, char *err, size_t errlen) {
    int32_t *ids;
    size_t n;
    if (tokenize(p, text, &ids, &n, err, errlen)) return -1;
    key_of(p, ids, n, key, keylen);
    if (tokens) *tokens = (int)n;
    free(ids);
    return 0;
}

/* The device and the encoder, on the first encode: the GPU when there is one (or as asked). */
static int load_encoder(vdn_text_prompts *p, char *err, size_t errlen) {
    if (p->enc) return 0;
    char dir[4352], derr[VDN_ERR_LEN] = "";
    if (!strcmp(p->backend, "cuda") || !p->backend[0])
        p->dev = vdn_dev_open("cuda", 0, 0, derr, sizeof derr);
    if (!p->dev && !strcmp(p->backend, "cuda"))
        return vdn_fail(err, errlen, "text encoder: %s", derr);
    if (!p->dev) p->dev = vdn_dev_open("cpu", 0, 0, err, errlen);
    if (!p->dev) return -1;
    snprintf(dir, sizeof dir, "%s/text_encoder", p->root);
    double t0 = vdn_now();
    p->enc = vdn_text_encoder_open(dir, p->dev, p->layer, err, errlen);
    if (!p->enc) return -1;
    VDN_INFO("text encoder %s loaded on %s in %.1f s (hidden_states[%d], identity %.16s)", dir,
             vdn_dev_name(p->dev), vdn_now() - t0, vdn_text_encoder_layer(p->enc), p->identity);
    return 0;
}

static int write_cache(vdn_text_prompts *p, const char *text, const int32_t *ids, size_t n,
                       const char *path, char *err, size_t errlen) {
    if (load_encoder(p, err, errlen)) return -1;
    int64_t H = vdn_text_encoder_config(p->enc)->hidden;
    float *h = vdn_xmalloc(sizeof(float) * n * (size_t)H);
    if (vdn_text_encoder_run(p->enc, ids, (int)n, h, err, errlen)) {
        free(h);
        return -1;
    }
    p->encodes++;
    uint16_t *bf = vdn_xmalloc(2 * n * (size_t)H);
    for (size_t i = 0; i < n * (size_t)H; i++)
        bf[i] = vdn_f32_to_bf16(h[i]);
    int64_t *tags = vdn_xmalloc(sizeof(int64_t) * n);
    for (size_t i = 0; i < n; i++)
        tags[i] = 1; /* every row is text */
    vdn_st_tensor t[2] = {
        {.name = "prompt_embeds",
         .dtype = VDN_DT_BF16,
         .ndim = 2,
         .shape = {(int64_t)n, H},
         .data = bf},
        {.name = "text_token_tags",
         .dtype = VDN_DT_I64,
         .ndim = 1,
         .shape = {(int64_t)n},
         .data = tags},
    };
    char tokens[32], layer[16];
    snprintf(tokens, sizeof tokens, "%zu", n);
    snprintf(layer, sizeof layer, "%d", vdn_text_encoder_layer(p->enc));
    vdn_st_kv meta[] = {{"prompt", text},
                        {"text_encoder", p->identity},
                        {"text_encoder_layer", layer},
                        {"tokens", tokens},
                        {"tokenizer", vdn_tokenizer_sha256(p->tok)}};
    int rc = vdn_st_write(path, t, 2, meta, 5, err, errlen);
    free(h);
    free(bf);
    free(tags);
    return rc;
}

int vdn_text_prompts_write(vdn_text_prompts *p, const char *text, const char *path, char *err,
                           size_t errlen) {
    int32_t *ids;
    size_t n;
    if (tokenize(p, text, &ids, &n, err, errlen)) return -1;
    pthread_mutex_lock(&p->mu);
    int rc = write_cache(p, text, ids, n, path, err, errlen);
    pthread_mutex_unlock(&p->mu);
    free(ids);
    return rc;
}

/* VDN_TEXT_ENCODER_UNLOAD=1: give the encoder's memory back after each encode, for a GPU too
 * small to hold it beside the DiT (under ~100 GB); each miss then reloads it. */
static void unload_if_asked(vdn_text_prompts *p) {
    const char *v = getenv("VDN_TEXT_ENCODER_UNLOAD");
    if (!v || strcmp(v, "1")) return;
    vdn_text_encoder_close(p->enc);
    vdn_dev_close(p->dev);
    p->enc = NULL;
    p->dev = NULL;
}

int vdn_text_prompts_cached(vdn_text_prompts *p, vdn_store *st, const char *text,
                            const char *local_path, vdn_text_cache_info *info, char *err,
                            size_t errlen) {
    double t0 = vdn_now();
    memset(info, 0, sizeof *info);
    int32_t *ids;
    size_t n;
    if (tokenize(p, text, &ids, &n, err, errlen)) return -1;
    key_of(p, ids, n, info->key, sizeof info->key);
    info->tokens = (int)n;
    pthread_mutex_lock(&p->mu);
    int rc, have = vdn_store_exists(st, info->key, NULL, err, errlen);
    if (have < 0) {
        rc = -1;
    } else if (have) {
        info->hit = 1;
        rc = vdn_store_get_file(st, info->key, local_path, err, errlen);
    } else {
        rc = write_cache(p, text, ids, n, local_path, err, errlen);
        if (!rc) rc = vdn_store_put_file(st, info->key, local_path, err, errlen);
        unload_if_asked(p);
    }
    pthread_mutex_unlock(&p->mu);
    free(ids);
    info->seconds = vdn_now() - t0;
    return rc;
}

int vdn_text_cache_info_to_record(const char *record_path, const vdn_text_cache_info *info,
                                  const char *encoder_identity, char *err, size_t errlen) {
    size_t len;
    char *text = vdn_read_file(record_path, &len, err, errlen);
    if (!text) return -1;
    cJSON *r = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(r)) {
        cJSON_Delete(r);
        return vdn_fail(err, errlen, "%s: not a JSON object (a run record)", record_path);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "cache", info->hit ? "hit" : "miss");
    cJSON_AddStringToObject(o, "key", info->key);
    cJSON_AddNumberToObject(o, "tokens", info->tokens);
    cJSON_AddStringToObject(o, "encoder", encoder_identity);
    cJSON_AddNumberToObject(o, "seconds", info->seconds);
    cJSON_DeleteItemFromObjectCaseSensitive(r, "text_prompt");
    cJSON_AddItemToObject(r, "text_prompt", o);
    char *out = cJSON_Print(r);
    cJSON_Delete(r);
    int rc = vdn_write_file_atomic(record_path, out, strlen(out), err, errlen);
    cJSON_free(out);
    return rc;
}
