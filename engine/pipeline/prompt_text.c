/* Text prompts into prompt caches (see prompt_text.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "encoder.h"
#include "prompt_pictures.h"
#include "prompt_text.h"
#include "safetensors.h"
#include "tokenizer.h"
#include "vdn_util.h"

/* A key some call of this instance is encoding now (single flight). */
typedef struct flight {
    char *id; /* the store's URI and the key */
    struct flight *next;
} flight;

/* An encoder left resident on a device by the keep policy. */
typedef struct {
    vdn_dev *dev;
    vdn_text_encoder *enc;
} resident;

#define MAX_RESIDENT 64

struct vdn_text_prompts {
    char root[4096];  /* the folder holding tokenizer/ and text_encoder/ */
    char backend[16]; /* "" = the GPU when there is one */
    int layer;
    vdn_precision precision; /* the encoder's, at every load; part of every key */
    vdn_tokenizer *tok;
    char identity[65];
    vdn_text_config cfg; /* from text_encoder/config.json, read at open */
    double keep_free;    /* bytes a device must still have free to keep an encoder; < 0: never */
    int delay_ms;        /* tests: every encode takes at least this long (vdn_text_prompts_opts) */
    char flight_dir[4096]; /* "" or the folder of the flight locks shared with other processes */

    pthread_mutex_t own_mu; /* the instance's own device and encoder (dev NULL places) */
    vdn_dev *dev;           /* opened with the encoder, on the first such encode */
    vdn_text_encoder *enc;

    pthread_mutex_t mu;    /* guards what follows; never held across an encode or a store call */
    pthread_cond_t landed; /* a flight ended */
    flight *flights;
    resident res[MAX_RESIDENT];
    int nres;
    long encodes, loads;
};

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The folder holding tokenizer/ and text_encoder/: ckpt itself, or its base/ (a VDN checkpoint). */
static int find_root(const char *ckpt, char root[4096], char *err, size_t errlen) {
    char dir[4352];
    snprintf(root, 4096, "%s", ckpt);
    snprintf(dir, sizeof dir, "%s/text_encoder", ckpt);
    if (!is_dir(dir)) {
        snprintf(root, 4096, "%s/base", ckpt);
        snprintf(dir, sizeof dir, "%s/text_encoder", root);
    }
    if (!is_dir(dir))
        return vdn_fail(err, errlen,
                        "checkpoint %s has no text_encoder/ (nor base/text_encoder/): text prompts "
                        "need the release's text_encoder/ and tokenizer/ (`vdn ckpt init "
                        "--text-encoder` writes tiny ones)",
                        ckpt);
    snprintf(dir, sizeof dir, "%s/tokenizer", root);
    if (!is_dir(dir))
        return vdn_fail(err, errlen,
                        "checkpoint %s has a text_encoder/ but no tokenizer/ beside it (%s): text "
                        "prompts need the release's tokenizer/ (`vdn ckpt init --text-encoder` "
                        "copies a real one)",
                        ckpt, dir);
    return 0;
}

vdn_text_prompts *vdn_text_prompts_open(const char *ckpt, const vdn_text_prompts_opts *o, char *err,
                                        size_t errlen) {
    const vdn_text_prompts_opts defaults = {0};
    if (!o) o = &defaults;
    if (o->keep && !(o->keep_free_gib >= 0)) {
        vdn_fail(err, errlen, "text prompts: keep_free_gib %g, expected GiB >= 0",
                 o->keep_free_gib);
        return NULL;
    }
    vdn_text_prompts *p = vdn_xcalloc(1, sizeof *p);
    if (find_root(ckpt, p->root, err, errlen)) {
        free(p);
        return NULL;
    }
    snprintf(p->backend, sizeof p->backend, "%s", o->backend ? o->backend : "");
    p->layer = o->layer;
    p->precision = o->precision;
    p->keep_free = o->keep ? o->keep_free_gib * (double)(1ull << 30) : -1;
    p->delay_ms = o->test_encode_delay_ms;
    snprintf(p->flight_dir, sizeof p->flight_dir, "%s", o->flight_dir ? o->flight_dir : "");
    pthread_mutex_init(&p->own_mu, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->landed, NULL);
    char dir[4352];
    snprintf(dir, sizeof dir, "%s/tokenizer", p->root);
    p->tok = vdn_tokenizer_load(dir, err, errlen);
    snprintf(dir, sizeof dir, "%s/text_encoder", p->root);
    if (!p->tok || vdn_text_config_load(dir, &p->cfg, err, errlen) ||
        vdn_text_encoder_identity_of(dir, p->layer, p->identity, err, errlen)) {
        vdn_text_prompts_close(p);
        return NULL;
    }
    return p;
}

void vdn_text_prompts_close(vdn_text_prompts *p) {
    if (!p) return;
    for (int i = 0; i < p->nres; i++)
        vdn_text_encoder_close(p->res[i].enc);
    vdn_text_encoder_close(p->enc);
    vdn_dev_close(p->dev);
    vdn_tokenizer_free(p->tok);
    pthread_mutex_destroy(&p->own_mu);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->landed);
    free(p);
}

int64_t vdn_text_prompts_max_tokens(const vdn_text_prompts *p) {
    return p->cfg.max_positions;
}

const char *vdn_text_prompts_identity(const vdn_text_prompts *p) {
    return p->identity;
}

vdn_precision vdn_text_prompts_precision(const vdn_text_prompts *p) {
    return p->precision;
}

/* The counters and the table are written under mu by other threads; reading them takes it too
 * (the const is the caller's promise, not the mutex's). */
static void lock(const vdn_text_prompts *p) {
    pthread_mutex_lock((pthread_mutex_t *)&p->mu);
}
static void unlock(const vdn_text_prompts *p) {
    pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
}

long vdn_text_prompts_encodes(const vdn_text_prompts *p) {
    lock(p);
    long n = p->encodes;
    unlock(p);
    return n;
}

long vdn_text_prompts_loads(const vdn_text_prompts *p) {
    lock(p);
    long n = p->loads;
    unlock(p);
    return n;
}

int vdn_text_prompts_resident(const vdn_text_prompts *p) {
    lock(p);
    int n = p->nres;
    unlock(p);
    return n;
}

static int tokenize(vdn_text_prompts *p, const char *text, int32_t **ids, size_t *n, char *err,
                    size_t errlen) {
    size_t len = strlen(text);
    if (len > VDN_TEXT_MAX_PROMPT_BYTES)
        return vdn_fail(err, errlen,
                        "the prompt is %zu bytes, above the limit of %d (refused before "
                        "tokenizing)",
                        len, VDN_TEXT_MAX_PROMPT_BYTES);
    if (vdn_tokenize(p->tok, text, len, ids, n, err, errlen)) return -1;
    if (*n == 0) return vdn_fail(err, errlen, "the prompt is empty (no tokens)");
    return 0;
}

/* content_sha256 of a text entry (prompt_pictures.h vdn_prompt_content_sha256) */
static void content_hash(const void *embeds, size_t ne, const void *tags, size_t nt, char hex[65]) {
    const void *parts[2] = {embeds, tags};
    const size_t sizes[2] = {ne, nt};
    vdn_prompt_content_sha256(parts, sizes, 2, hex);
}

/* The key hashes the encoder's identity, its precision and the ids. The bf16 material is the
 * text of the keys written before fp8 existed ("v1", no precision line), so the entries already
 * in a store stay hits; any other precision adds its line and can never meet a bf16 key. A
 * prompt with pictures adds the VAE's identity, the image processor's, the canvas asked for and
 * each picture's anchor and content hash, so it can never meet a text-only key. "v3": since the
 * processor's line (the "v2" keys before it, which lacked it, are never asked for again). */
static void key_of(const vdn_text_prompts *p, const vdn_pictures *pics, const int32_t *ids,
                   size_t n, char *key, size_t keylen) {
    size_t cap = 640 + 12 * n, used = 0;
    char *buf = vdn_xmalloc(cap), hex[65];
    used += (size_t)snprintf(buf, cap, "vdn prompt cache v%d\nencoder %s\n", pics->n ? 3 : 1,
                             p->identity);
    if (p->precision != VDN_PRECISION_BF16 || pics->n)
        used += (size_t)snprintf(buf + used, cap - used, "precision %s\n",
                                 vdn_precision_name(p->precision));
    if (pics->n) {
        used += (size_t)snprintf(buf + used, cap - used, "vae %s\nprocessor %s\ncanvas %dx%d\n",
                                 pics->vae, pics->processor, pics->height, pics->width);
        for (int i = 0; i < pics->n; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s %s\n",
                                     pics->anchor_last[i] ? "last" : "first", pics->sha256[i]);
    }
    used += (size_t)snprintf(buf + used, cap - used, "ids");
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(buf + used, cap - used, " %d", ids[i]);
    vdn_sha256_hex(buf, used, hex);
    free(buf);
    snprintf(key, keylen, "%s%s.safetensors", VDN_PROMPT_CACHE_PREFIX, hex);
}

int vdn_text_prompts_pictures(const vdn_text_prompts *p, const vdn_prompt_input *in,
                              vdn_pictures *pics, char *err, size_t errlen) {
    return vdn_pictures_of(p->root, in, pics, err, errlen);
}

/* pics as the calls take them: NULL for a prompt without pictures, and never one that disagrees
 * with the input (a caller's slip would key pictures under another prompt's entry). */
static const vdn_pictures none;
static int pictures_in(const vdn_prompt_input *in, const vdn_pictures **pics, char *err,
                       size_t errlen) {
    const int named =
        (in->first_frame && in->first_frame[0]) + (in->last_frame && in->last_frame[0]);
    if (!*pics) *pics = &none;
    if ((*pics)->n != named)
        return vdn_fail(err, errlen,
                        "the prompt names %d keyframe pictures, %d were read for it "
                        "(vdn_text_prompts_pictures)",
                        named, (*pics)->n);
    return 0;
}

int vdn_text_prompts_key(vdn_text_prompts *p, const vdn_prompt_input *in, const vdn_pictures *pics,
                         char *key, size_t keylen, int *tokens, char *err, size_t errlen) {
    int32_t *ids;
    size_t n;
    if (pictures_in(in, &pics, err, errlen)) return -1;
    if (tokenize(p, in->text, &ids, &n, err, errlen)) return -1;
    key_of(p, pics, ids, n, key, keylen);
    if (tokens) *tokens = (int)n;
    free(ids);
    return 0;
}

/* "GPU 2 (cuda:2)", or the device alone for the CPU slot and `vdn encode`. */
static const char *where(const vdn_text_place *at, const vdn_dev *dev, char *buf, size_t len) {
    if (at && at->gpu >= 0)
        snprintf(buf, len, "GPU %d (%s)", at->gpu, vdn_dev_name(dev));
    else
        snprintf(buf, len, "%s", vdn_dev_name(dev));
    return buf;
}

static vdn_text_encoder *load_on(vdn_text_prompts *p, vdn_dev *dev, const vdn_text_place *at,
                                 double *seconds, char *err, size_t errlen) {
    char dir[4352], w[96];
    snprintf(dir, sizeof dir, "%s/text_encoder", p->root);
    double t0 = vdn_now();
    vdn_text_encoder *enc = vdn_text_encoder_open(dir, dev, p->layer, p->precision, err, errlen);
    if (!enc) return NULL;
    *seconds = vdn_now() - t0;
    lock(p);
    p->loads++;
    unlock(p);
    VDN_INFO("text encoder %s loaded on %s in %.1f s (hidden_states[%d], %s, identity %.16s)", dir,
             where(at, dev, w, sizeof w), *seconds, vdn_text_encoder_layer(enc),
             vdn_precision_name(p->precision), p->identity);
    return enc;
}

/* The instance's own device and encoder (`vdn encode`), on its first encode: the GPU when there
 * is one (or as asked at open). Called under own_mu. */
static int load_own(vdn_text_prompts *p, char *err, size_t errlen) {
    if (p->enc) return 0;
    char derr[VDN_ERR_LEN] = "";
    if (!strcmp(p->backend, "cuda") || !p->backend[0])
        p->dev = vdn_dev_open("cuda", 0, 0, derr, sizeof derr);
    if (!p->dev && !strcmp(p->backend, "cuda"))
        return vdn_fail(err, errlen, "text encoder: %s", derr);
    if (!p->dev) p->dev = vdn_dev_open("cpu", 0, 0, err, errlen);
    if (!p->dev) return -1;
    double s;
    p->enc = load_on(p, p->dev, NULL, &s, err, errlen);
    return p->enc ? 0 : -1;
}

/* The prompt's cache file at path, encoded with enc on dev: text alone here, with pictures
 * through prompt_pictures.c. */
static int encode_to(vdn_text_prompts *p, vdn_text_encoder *enc, vdn_dev *dev,
                     const vdn_prompt_input *in, const vdn_pictures *pics, const int32_t *ids,
                     size_t n, const char *path, char *err, size_t errlen) {
    if (pics->n) {
        char key[160];
        key_of(p, pics, ids, n, key, sizeof key);
        vdn_pictures_meta m = {.identity = p->identity,
                               .precision = p->precision,
                               .tokenizer_sha256 = vdn_tokenizer_sha256(p->tok),
                               .cache_key = key,
                               .tokens = (int)n};
        if (vdn_pictures_write_cache(p->root, enc, dev, p->tok, in->text, pics, &m, path, err,
                                     errlen))
            return -1;
        lock(p);
        p->encodes++;
        unlock(p);
        return 0;
    }
    const char *text = in->text;
    int64_t H = vdn_text_encoder_config(enc)->hidden;
    float *h = vdn_xmalloc(sizeof(float) * n * (size_t)H);
    if (vdn_text_encoder_run(enc, ids, (int)n, h, err, errlen)) {
        free(h);
        return -1;
    }
    lock(p);
    p->encodes++;
    unlock(p);
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
    char tokens[32], layer[16], content[65], key[160];
    snprintf(tokens, sizeof tokens, "%zu", n);
    snprintf(layer, sizeof layer, "%d", vdn_text_encoder_layer(enc));
    /* what a hit is checked against (hit_ok): the key it belongs under, its embeddings' hash */
    content_hash(bf, 2 * n * (size_t)H, tags, sizeof(int64_t) * n, content);
    key_of(p, pics, ids, n, key, sizeof key);
    vdn_st_kv meta[] = {{"cache_key", key},
                        {"content_sha256", content},
                        {"prompt", text},
                        {"text_encoder", p->identity},
                        {"text_encoder_layer", layer},
                        {"text_encoder_precision", vdn_precision_name(p->precision)},
                        {"tokens", tokens},
                        {"tokenizer", vdn_tokenizer_sha256(p->tok)}};
    int rc = vdn_st_write(path, t, 2, meta, sizeof meta / sizeof *meta, err, errlen);
    free(h);
    free(bf);
    free(tags);
    return rc;
}

/* encode_to with the run's options on the encoder (a resident one serves other jobs after):
 * the caller's cancel flag, the tests' delay */
static int write_cache(vdn_text_prompts *p, vdn_text_encoder *enc, vdn_dev *dev,
                       const atomic_int *cancel, const vdn_prompt_input *in,
                       const vdn_pictures *pics, const int32_t *ids, size_t n, const char *path,
                       char *err, size_t errlen) {
    const vdn_text_run_opts o = {.cancel = cancel, .test_delay_ms = p->delay_ms};
    vdn_text_encoder_set_run_opts(enc, &o);
    int rc = encode_to(p, enc, dev, in, pics, ids, n, path, err, errlen);
    vdn_text_encoder_set_run_opts(enc, NULL);
    return rc;
}

int vdn_text_prompts_write(vdn_text_prompts *p, const vdn_prompt_input *in,
                           const vdn_pictures *pics, const char *path, char *err, size_t errlen) {
    int32_t *ids;
    size_t n;
    if (pictures_in(in, &pics, err, errlen)) return -1;
    if (tokenize(p, in->text, &ids, &n, err, errlen)) return -1;
    pthread_mutex_lock(&p->own_mu);
    int rc = load_own(p, err, errlen);
    if (!rc) rc = write_cache(p, p->enc, p->dev, NULL, in, pics, ids, n, path, err, errlen);
    pthread_mutex_unlock(&p->own_mu);
    free(ids);
    return rc;
}

/* ---- encoders resident on devices (the keep policy) ---- */

/* The encoder resident on dev, taken out of the table (its caller holds dev), or NULL. */
static vdn_text_encoder *take_resident(vdn_text_prompts *p, vdn_dev *dev) {
    vdn_text_encoder *enc = NULL;
    lock(p);
    for (int i = 0; i < p->nres; i++)
        if (p->res[i].dev == dev) {
            enc = p->res[i].enc;
            p->res[i] = p->res[--p->nres];
            break;
        }
    unlock(p);
    return enc;
}

static int put_resident(vdn_text_prompts *p, vdn_dev *dev, vdn_text_encoder *enc) {
    lock(p);
    int ok = p->nres < MAX_RESIDENT;
    if (ok) p->res[p->nres++] = (resident){dev, enc};
    unlock(p);
    return ok;
}

void vdn_text_prompts_release(vdn_text_prompts *p, vdn_dev *dev) {
    if (p) vdn_text_encoder_close(take_resident(p, dev));
}

/* Whether the encoder may stay on dev after an encode: only when asked for (the keep policy,
 * VDN_TEXT_ENCODER_KEEP_FREE_GIB to the commands) and the device, with it loaded, still reports
 * that much free for the render's activations. why says which, for the log. */
static int keep_on(vdn_text_prompts *p, vdn_dev *dev, char *why, size_t len) {
    if (p->keep_free < 0) {
        snprintf(why, len,
                 "the render gets its memory back (VDN_TEXT_ENCODER_KEEP_FREE_GIB unset)");
        return 0;
    }
    size_t fr = 0, tot = 0;
    if (vdn_dev_mem_info(dev, &fr, &tot)) {
        snprintf(why, len, "the device cannot say what is free: %.200s", vdn_dev_error(dev));
        return 0;
    }
    double gib = (double)(1ull << 30);
    int keep = (double)fr >= p->keep_free;
    snprintf(why, len, "%.1f of %.1f GiB free with it loaded, %s the %.1f GiB kept for a render",
             (double)fr / gib, (double)tot / gib, keep ? "at least" : "below", p->keep_free / gib);
    return keep;
}

/* A miss: encode text at `at` into path. On a device of the caller's, the encoder is the one
 * resident there or loaded now, and released after unless the keep policy says otherwise. */
static int encode_at(vdn_text_prompts *p, const vdn_text_place *at, const vdn_prompt_input *in,
                     const vdn_pictures *pics, const int32_t *ids, size_t n, const char *path,
                     vdn_text_cache_info *info, char *err, size_t errlen) {
    if (!at || !at->dev) {
        pthread_mutex_lock(&p->own_mu);
        int rc = load_own(p, err, errlen);
        if (!rc) {
            snprintf(info->device, sizeof info->device, "%s", vdn_dev_name(p->dev));
            rc = write_cache(p, p->enc, p->dev, at ? at->cancel : NULL, in, pics, ids, n, path, err,
                             errlen);
        }
        pthread_mutex_unlock(&p->own_mu);
        return rc;
    }
    vdn_dev *dev = at->dev;
    char w[96], why[256];
    snprintf(info->device, sizeof info->device, "%s", vdn_dev_name(dev));
    vdn_text_encoder *enc = take_resident(p, dev);
    info->loaded = enc == NULL;
    if (!enc && !(enc = load_on(p, dev, at, &info->load_seconds, err, errlen))) return -1;
    int rc = write_cache(p, enc, dev, at->cancel, in, pics, ids, n, path, err, errlen);
    /* an encoder whose device failed under it, or cancelled, is not kept */
    if (rc == 0 && keep_on(p, dev, why, sizeof why) && put_resident(p, dev, enc)) {
        info->kept = 1;
        VDN_INFO("text encoder kept on %s: %s", where(at, dev, w, sizeof w), why);
        return 0;
    }
    vdn_text_encoder_close(enc);
    if (rc == 0) VDN_INFO("text encoder released on %s: %s", where(at, dev, w, sizeof w), why);
    return rc;
}

/* ---- single flight ---- */

static flight *flight_find(vdn_text_prompts *p, const char *id) {
    for (flight *f = p->flights; f; f = f->next)
        if (!strcmp(f->id, id)) return f;
    return NULL;
}

/* Under mu: 1 = the caller now encodes id (its flight is registered); 0 = another call was
 * encoding it and has finished (the caller looks in the store again). */
static int board_or_wait(vdn_text_prompts *p, const char *id, vdn_text_cache_info *info) {
    if (!flight_find(p, id)) {
        flight *f = vdn_xcalloc(1, sizeof *f);
        f->id = vdn_xstrdup(id);
        f->next = p->flights;
        p->flights = f;
        return 1;
    }
    info->waited = 1;
    while (flight_find(p, id))
        pthread_cond_wait(&p->landed, &p->mu);
    return 0;
}

static void land(vdn_text_prompts *p, const char *id) {
    lock(p);
    for (flight **pp = &p->flights; *pp; pp = &(*pp)->next)
        if (!strcmp((*pp)->id, id)) {
            flight *f = *pp;
            *pp = f->next;
            free(f->id);
            free(f);
            break;
        }
    pthread_cond_broadcast(&p->landed);
    unlock(p);
}

/* content_sha256 of an entry as stored: its embeddings, tags and keyframe latents */
static void entry_hash(const vdn_st_file *f, const vdn_st_entry *e, const vdn_st_entry *t,
                       char hex[65]) {
    const void *parts[4] = {e->data, t->data};
    size_t sizes[4] = {(size_t)e->nbytes, (size_t)t->nbytes};
    int n = 2;
    const char *kf[2] = {"keyframe_first", "keyframe_last"};
    for (int i = 0; i < 2; i++) {
        const vdn_st_entry *k = vdn_st_find(f, kf[i]);
        if (k) parts[n] = k->data, sizes[n++] = (size_t)k->nbytes;
    }
    vdn_prompt_content_sha256(parts, sizes, n, hex);
}

/* Whether the entry fetched to path is what `key` stands for, before anyone renders from it:
 * written under this key (cache_key) by an encoder of this identity and precision for n tokens,
 * bf16 embeddings and one tag a row whose bytes hash to its content_sha256. A store that others
 * can write to (or a torn, older or hand-made file) never feeds a render unchecked. 1 ok, else
 * 0 with why. */
static int hit_ok(const vdn_text_prompts *p, const char *path, const char *key, size_t n, char *why,
                  size_t len) {
    vdn_st_file *f = vdn_st_open(path, why, len);
    if (!f) return 0;
    const char *ck = vdn_st_meta(f, "cache_key"), *cs = vdn_st_meta(f, "content_sha256");
    const char *enc = vdn_st_meta(f, "text_encoder"), *tok = vdn_st_meta(f, "tokens");
    const char *prec = vdn_st_meta(f, "text_encoder_precision");
    const vdn_st_entry *e = vdn_st_find(f, "prompt_embeds"), *t = vdn_st_find(f, "text_token_tags");
    char hex[65], ntok[32];
    snprintf(ntok, sizeof ntok, "%zu", n);
    int ok = 0;
    if (!ck || strcmp(ck, key))
        snprintf(why, len, "metadata cache_key is %.100s, not this key", ck ? ck : "(none)");
    else if (!enc || strcmp(enc, p->identity) || !prec ||
             strcmp(prec, vdn_precision_name(p->precision)))
        snprintf(why, len, "written by encoder %.40s at %.8s, not %.40s at %s", enc ? enc : "?",
                 prec ? prec : "?", p->identity, vdn_precision_name(p->precision));
    else if (!tok || strcmp(tok, ntok))
        snprintf(why, len, "metadata tokens %.20s, the prompt has %zu", tok ? tok : "?", n);
    else if (!e || e->dtype != VDN_DT_BF16 || e->ndim != 2 || e->shape[0] < 1 || !t ||
             t->ndim != 1 || t->shape[0] != e->shape[0])
        snprintf(why, len, "expected bf16 prompt_embeds (rows, hidden) and text_token_tags (rows)");
    else if (entry_hash(f, e, t, hex), !cs || strcmp(cs, hex))
        snprintf(why, len, "the tensors hash to %.16s..., metadata content_sha256 says %.16s...",
                 hex, cs ? cs : "(none)");
    else
        ok = 1;
    vdn_st_close(f);
    return ok;
}

/* In the store: fetch it (1), not there or failing its check (0: encoded again and stored over
 * it), or -1 (the store failed: info says so). */
static int fetch(const vdn_text_prompts *p, vdn_store *st, const char *key, size_t n,
                 const char *path, vdn_text_cache_info *info, char *err, size_t errlen) {
    int have = vdn_store_exists(st, key, NULL, err, errlen);
    if (have == 0) return 0;
    if (have > 0 && vdn_store_get_file(st, key, path, err, errlen) == 0) {
        char why[VDN_ERR_LEN];
        if (hit_ok(p, path, key, n, why, sizeof why)) return 1;
        VDN_WARN("prompt cache %s in %s failed its check (%s): encoding it again", key,
                 vdn_store_uri(st), why);
        unlink(path);
        return 0;
    }
    info->store_failed = 1;
    return -1;
}

/* The flight's leader: looks once more (a flight that landed between the caller's look and its
 * boarding, or another process, may have stored it), else encodes and uploads. */
static int lead(vdn_text_prompts *p, const vdn_text_place *at, vdn_store *st,
                const vdn_prompt_input *in, const vdn_pictures *pics, const int32_t *ids, size_t n,
                const char *path, vdn_text_cache_info *info, char *err, size_t errlen) {
    int got = fetch(p, st, info->key, n, path, info, err, errlen);
    if (got) {
        info->hit = got > 0;
        return got > 0 ? 0 : -1;
    }
    if (encode_at(p, at, in, pics, ids, n, path, info, err, errlen)) return -1;
    if (vdn_store_put_file(st, info->key, path, err, errlen) == 0) return 0;
    info->store_failed = 2;
    return -1;
}

/* The flight across processes (vdn_text_prompts_opts.flight_dir): an flock on a file named by
 * the flight's id. The descriptor holding it (its path in lock_path: the leader removes the file
 * when it lands), -1 when flights are not shared or the file does not open (then each process
 * encodes on its own, harmless: the store's publish is atomic), or -2 after waiting for another
 * process's flight to land (look in the store again; a process that takes the lock of a file
 * already removed leads, and lead() looks in the store before it encodes). */
static int board_across(const vdn_text_prompts *p, const char *id, vdn_text_cache_info *info,
                        char *lock_path, size_t len) {
    if (!p->flight_dir[0]) return -1;
    uint64_t h = 1469598103934665603ull; /* FNV-1a: a file name for the id */
    for (const char *c = id; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    snprintf(lock_path, len, "%s/text-flight-%016llx.lock", p->flight_dir, (unsigned long long)h);
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    info->waited = 1;
    while (flock(fd, LOCK_EX) < 0 && errno == EINTR) {
    }
    close(fd); /* closing releases it: the store has the entry now, or the leader failed */
    return -2;
}

static int fetch_or_encode(vdn_text_prompts *p, const vdn_text_place *at, vdn_store *st,
                           const vdn_prompt_input *in, const vdn_pictures *pics, const int32_t *ids,
                           size_t n, const char *path, vdn_text_cache_info *info, char *err,
                           size_t errlen) {
    size_t idlen = strlen(vdn_store_uri(st)) + strlen(info->key) + 2;
    char *id = vdn_xmalloc(idlen);
    snprintf(id, idlen, "%s\n%s", vdn_store_uri(st), info->key);
    int rc;
    for (;;) {
        int got = fetch(p, st, info->key, n, path, info, err, errlen);
        if (got) {
            info->hit = got > 0;
            rc = got > 0 ? 0 : -1;
            break;
        }
        lock(p);
        int leader = board_or_wait(p, id, info);
        unlock(p);
        if (!leader) continue; /* its result is in the store now; or it failed: try ourselves */
        char lock_path[4200];
        int across = board_across(p, id, info, lock_path, sizeof lock_path);
        if (across == -2) {
            land(p, id);
            continue;
        }
        rc = lead(p, at, st, in, pics, ids, n, path, info, err, errlen);
        if (across >= 0) {
            unlink(lock_path); /* nothing left behind; a late opener leads and finds the entry */
            close(across);
        }
        land(p, id);
        break;
    }
    free(id);
    return rc;
}

int vdn_text_prompts_cached(vdn_text_prompts *p, const vdn_text_place *at, vdn_store *st,
                            const vdn_prompt_input *in, const vdn_pictures *pics,
                            const char *local_path, vdn_text_cache_info *info, char *err,
                            size_t errlen) {
    double t0 = vdn_now();
    memset(info, 0, sizeof *info);
    info->gpu = at ? at->gpu : -1;
    info->precision = vdn_precision_name(p->precision);
    int32_t *ids;
    size_t n;
    if (pictures_in(in, &pics, err, errlen)) return -1;
    info->pictures = vdn_pictures_identity(pics);
    if (tokenize(p, in->text, &ids, &n, err, errlen)) return -1;
    key_of(p, pics, ids, n, info->key, sizeof info->key);
    info->tokens = (int)n;
    int rc = fetch_or_encode(p, at, st, in, pics, ids, n, local_path, info, err, errlen);
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
    if (info->precision) cJSON_AddStringToObject(o, "precision", info->precision);
    cJSON_AddNumberToObject(o, "seconds", info->seconds);
    cJSON_AddBoolToObject(o, "waited", info->waited);
    if (info->pictures.n) vdn_pictures_to_json(&info->pictures, o);
    if (!info->hit) {
        cJSON *at = cJSON_AddObjectToObject(o, "encoded_on");
        cJSON_AddNumberToObject(at, "gpu", info->gpu);
        cJSON_AddStringToObject(at, "device", info->device);
        cJSON_AddBoolToObject(at, "loaded", info->loaded);
        cJSON_AddBoolToObject(at, "kept", info->kept);
        cJSON_AddNumberToObject(at, "load_seconds", info->load_seconds);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(r, "text_prompt");
    cJSON_AddItemToObject(r, "text_prompt", o);
    char *out = cJSON_Print(r);
    cJSON_Delete(r);
    int rc = vdn_write_file_atomic(record_path, out, strlen(out), err, errlen);
    cJSON_free(out);
    return rc;
}
