/* Reading tokenizer.json (cJSON) into the tables tokenizer.c runs on: the byte-level vocabulary
 * as raw bytes, the ranked merges as an id-pair map, the added tokens and the compiled split
 * regex. Every field the encoding depends on is checked; an unsupported setting is refused. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

#include "tokenizer_internal.h"
#include "vdn_util.h"

/* ---- GPT-2's byte-level alphabet, inverted: code point -> byte ---- */

/* Printable Latin-1 bytes stand for themselves; the other 68 bytes are mapped in order to
 * U+0100.. (the alphabet of every byte-level BPE vocabulary). */
static void byte_alphabet_inverse(int16_t inv[512]) {
    for (int i = 0; i < 512; i++)
        inv[i] = -1;
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        inv[printable ? b : next++] = (int16_t)b;
    }
}

/* A token string of the alphabet -> its raw bytes (out has room for strlen(s) bytes). */
static int alphabet_to_bytes(const int16_t inv[512], const char *s, uint8_t *out, size_t *n) {
    size_t len = strlen(s), k = 0;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t used =
            utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &cp);
        if (used <= 0 || cp < 0 || cp >= 512 || inv[cp] < 0) return -1;
        out[k++] = (uint8_t)inv[cp];
        i += (size_t)used;
    }
    *n = k;
    return 0;
}

/* ---- the vocabulary while loading: raw bytes -> id ---- */

typedef struct {
    uint8_t *arena; /* every token's bytes, back to back */
    size_t used;
    uint32_t *off, *len; /* per slot */
    int32_t *id;         /* per slot, -1 = empty */
    size_t cap;
} vocab_map;

static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static int32_t vocab_find(const vocab_map *v, const uint8_t *p, size_t n) {
    size_t mask = v->cap - 1;
    for (size_t i = hash_bytes(p, n) & mask;; i = (i + 1) & mask) {
        if (v->id[i] < 0) return -1;
        if (v->len[i] == n && !memcmp(v->arena + v->off[i], p, n)) return v->id[i];
    }
}

static void vocab_put(vocab_map *v, const uint8_t *p, size_t n, int32_t id) {
    size_t mask = v->cap - 1, i = hash_bytes(p, n) & mask;
    while (v->id[i] >= 0) {
        if (v->len[i] == n && !memcmp(v->arena + v->off[i], p, n)) break; /* later entry wins */
        i = (i + 1) & mask;
    }
    memcpy(v->arena + v->used, p, n);
    v->off[i] = (uint32_t)v->used;
    v->len[i] = (uint32_t)n;
    v->id[i] = id;
    v->used += n;
}

static void vocab_free(vocab_map *v) {
    free(v->arena);
    free(v->off);
    free(v->len);
    free(v->id);
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

/* ---- field helpers ---- */

#define FAIL(...) (vdn_fail(err, errlen, __VA_ARGS__), -1)

/* A JSON bool that must be false (or absent/null) for this tokenizer to be supported. */
static int require_false(const cJSON *obj, const char *key, const char *where, const char *name,
                         char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return 0;
    return FAIL("%s: %s.%s is %s; only false is supported", name, where, key,
                cJSON_IsTrue(v) ? "true" : "not a boolean");
}

/* A JSON string that must be empty (or absent/null). */
static int require_empty(const cJSON *obj, const char *key, const char *where, const char *name,
                         char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v) || (cJSON_IsString(v) && !v->valuestring[0])) return 0;
    return FAIL("%s: %s.%s must be empty or null (a byte-level BPE has no affixes)", name, where,
                key);
}

static int type_is(const cJSON *obj, const char *type) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

static const char *type_of(const cJSON *obj) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(t) ? t->valuestring : "(none)";
}

/* ---- sections ---- */

static int load_normalizer(vdn_tokenizer *t, const cJSON *root, const char *name, char *err,
                           size_t errlen) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (!n || cJSON_IsNull(n)) return 0;
    if (!cJSON_IsObject(n) || !type_is(n, "NFC"))
        return FAIL("%s: normalizer: type '%s' is not supported (expected NFC or null)", name,
                    cJSON_IsObject(n) ? type_of(n) : "?");
    t->nfc = 1;
    return 0;
}

/* tokenizers matches with Oniguruma, whose \s is exactly Unicode's White_Space property. PCRE2's
 * \s under UCP is \p{Z} + \h + \v, which adds U+180E (MONGOLIAN VOWEL SEPARATOR, a format
 * character since Unicode 6.3): "a\u180eb" would split differently. So \s becomes the explicit
 * White_Space set, and \S outside a class its complement (inside a class \S stays: a negated set
 * cannot nest there; the Qwen2 pattern has none). The caller frees the result. */
#define WHITE_SPACE                                                                                \
    "\\t\\n\\x{0B}\\f\\r "                                                                         \
    "\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static char *white_space_as_unicode(const char *re) {
    size_t len = strlen(re), cap = len * 40 + 1, k = 0;
    char *out = vdn_xmalloc(cap);
    int in_class = 0;
    for (size_t i = 0; i < len; i++) {
        char c = re[i];
        if (c == '\\' && i + 1 < len) {
            char e = re[++i];
            if (e == 's' || (e == 'S' && !in_class))
                k += (size_t)sprintf(out + k, "%s%s%s",
                                     in_class   ? ""
                                     : e == 's' ? "["
                                                : "[^",
                                     WHITE_SPACE, in_class ? "" : "]");
            else
                k += (size_t)sprintf(out + k, "\\%c", e);
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            out[k++] = c;
            if (i + 1 < len && re[i + 1] == '^') out[k++] = re[++i];
            if (i + 1 < len && re[i + 1] == ']') out[k++] = re[++i]; /* a literal ']' first */
            continue;
        }
        if (c == ']' && in_class) in_class = 0;
        out[k++] = c;
    }
    out[k] = 0;
    return out;
}

static int load_split(vdn_tokenizer *t, const cJSON *split, const char *name, char *err,
                      size_t errlen) {
    const char *where = "pre_tokenizer.pretokenizers[0]";
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(split, "pattern");
    const cJSON *re = cJSON_IsObject(pat) ? cJSON_GetObjectItemCaseSensitive(pat, "Regex") : NULL;
    if (!cJSON_IsString(re))
        return FAIL("%s: %s.pattern: expected {\"Regex\": \"...\"}", name, where);
    const cJSON *beh = cJSON_GetObjectItemCaseSensitive(split, "behavior");
    if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated"))
        return FAIL("%s: %s.behavior: only \"Isolated\" is supported", name, where);
    if (require_false(split, "invert", where, name, err, errlen)) return -1;
    int code;
    PCRE2_SIZE at;
    char *pattern = white_space_as_unicode(re->valuestring);
    t->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code,
                          &at, NULL);
    free(pattern);
    if (!t->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return FAIL("%s: %s.pattern.Regex: does not compile at offset %zu: %s", name, where,
                    (size_t)at, (const char *)msg);
    }
    pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE); /* best effort: the interpreter is the fallback */
    return 0;
}

static int load_pre_tokenizer(vdn_tokenizer *t, const cJSON *root, const char *name, char *err,
                              size_t errlen) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *list = cJSON_IsObject(p) && type_is(p, "Sequence")
                            ? cJSON_GetObjectItemCaseSensitive(p, "pretokenizers")
                            : NULL;
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != 2)
        return FAIL("%s: pre_tokenizer: expected a Sequence of [Split, ByteLevel] (the Qwen2 "
                    "pre-tokenizer)",
                    name);
    const cJSON *split = cJSON_GetArrayItem(list, 0), *bl = cJSON_GetArrayItem(list, 1);
    if (!cJSON_IsObject(split) || !type_is(split, "Split"))
        return FAIL("%s: pre_tokenizer.pretokenizers[0]: expected type Split", name);
    if (!cJSON_IsObject(bl) || !type_is(bl, "ByteLevel"))
        return FAIL("%s: pre_tokenizer.pretokenizers[1]: expected type ByteLevel", name);
    const char *where = "pre_tokenizer.pretokenizers[1]";
    if (require_false(bl, "add_prefix_space", where, name, err, errlen) ||
        require_false(bl, "use_regex", where, name, err, errlen))
        return -1;
    return load_split(t, split, name, err, errlen);
}

static int load_added(vdn_tokenizer *t, const cJSON *root, const char *name, char *err,
                      size_t errlen) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!list || cJSON_IsNull(list)) return 0;
    if (!cJSON_IsArray(list)) return FAIL("%s: added_tokens: expected an array", name);
    int n = cJSON_GetArraySize(list);
    t->added = vdn_xcalloc((size_t)n + 1, sizeof *t->added);
    const cJSON *a;
    cJSON_ArrayForEach(a, list) {
        int i = t->n_added;
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(a, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(a, "content");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > INT32_MAX - 1 ||
            id->valuedouble != (double)(int32_t)id->valuedouble)
            return FAIL("%s: added_tokens[%d].id: expected a whole number in [0, 2^31-1)", name, i);
        if (!cJSON_IsString(content) || !content->valuestring[0])
            return FAIL("%s: added_tokens[%d].content: expected a non-empty string", name, i);
        size_t len = strlen(content->valuestring);
        utf8proc_int32_t cp;
        for (size_t k = 0; k < len;) {
            utf8proc_ssize_t used =
                utf8proc_iterate((const utf8proc_uint8_t *)content->valuestring + k,
                                 (utf8proc_ssize_t)(len - k), &cp);
            if (used <= 0) return FAIL("%s: added_tokens[%d].content: invalid UTF-8", name, i);
            k += (size_t)used;
        }
        const char *where = "added_tokens[]";
        if (require_false(a, "lstrip", where, name, err, errlen) ||
            require_false(a, "rstrip", where, name, err, errlen) ||
            require_false(a, "single_word", where, name, err, errlen))
            return -1;
        const cJSON *norm = cJSON_GetObjectItemCaseSensitive(a, "normalized");
        const cJSON *special = cJSON_GetObjectItemCaseSensitive(a, "special");
        vdn_added_token *at = &t->added[t->n_added++];
        at->content = vdn_xstrdup(content->valuestring);
        at->len = len;
        at->id = (int32_t)id->valuedouble;
        /* tokenizers' default: a special token is matched before normalisation */
        at->normalized = norm ? cJSON_IsTrue(norm) : !cJSON_IsTrue(special);
        if (at->id + 1 > t->n_ids) t->n_ids = at->id + 1;
    }
    return 0;
}

static int load_vocab(vocab_map *v, const cJSON *model, const int16_t inv[512], vdn_tokenizer *t,
                      const char *name, char *err, size_t errlen) {
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(vocab)) return FAIL("%s: model.vocab: expected an object", name);
    size_t n = (size_t)cJSON_GetArraySize(vocab), bytes = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) bytes += strlen(e->string);
    v->cap = pow2_at_least(2 * n + 2);
    v->arena = vdn_xmalloc(bytes + 1);
    v->off = vdn_xcalloc(v->cap, sizeof *v->off);
    v->len = vdn_xcalloc(v->cap, sizeof *v->len);
    v->id = vdn_xmalloc(v->cap * sizeof *v->id);
    for (size_t i = 0; i < v->cap; i++)
        v->id[i] = -1;
    uint8_t *tmp = vdn_xmalloc(bytes + 1);
    int rc = 0;
    cJSON_ArrayForEach(e, vocab) {
        size_t len;
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > INT32_MAX - 1 ||
            e->valuedouble != (double)(int32_t)e->valuedouble) {
            rc = FAIL("%s: model.vocab[\"%.60s\"]: expected a whole-number id in [0, 2^31-1)", name,
                      e->string);
            break;
        }
        if (!e->string[0] || alphabet_to_bytes(inv, e->string, tmp, &len)) {
            rc = FAIL("%s: model.vocab[\"%.60s\"]: not a token of the byte-level alphabet", name,
                      e->string);
            break;
        }
        vocab_put(v, tmp, len, (int32_t)e->valuedouble);
        if ((int32_t)e->valuedouble + 1 > t->n_ids) t->n_ids = (int32_t)e->valuedouble + 1;
    }
    free(tmp);
    if (rc) return rc;
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        t->byte_id[b] = vocab_find(v, &byte, 1);
        if (t->byte_id[b] < 0)
            return FAIL("%s: model.vocab: byte 0x%02x has no token (a byte-level vocabulary holds "
                        "all 256)",
                        name, b);
    }
    return 0;
}

/* One merge entry, ["a", "b"] or the older "a b", as raw bytes: the concatenation in buf, the
 * left part's length in *split. */
static int merge_parts(const cJSON *m, const int16_t inv[512], uint8_t *buf, size_t *n,
                       size_t *split) {
    const char *a, *b;
    char *own = NULL;
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
        cJSON_IsString(cJSON_GetArrayItem(m, 0)) && cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
        a = cJSON_GetArrayItem(m, 0)->valuestring;
        b = cJSON_GetArrayItem(m, 1)->valuestring;
    } else if (cJSON_IsString(m)) {
        own = vdn_xstrdup(m->valuestring);
        char *sp = strchr(own, ' ');
        if (!sp || strchr(sp + 1, ' ')) {
            free(own);
            return -1;
        }
        *sp = 0;
        a = own;
        b = sp + 1;
    } else {
        return -1;
    }
    size_t la, lb;
    int rc = (!a[0] || !b[0] || strlen(a) + strlen(b) > 1024 ||
              alphabet_to_bytes(inv, a, buf, &la) || alphabet_to_bytes(inv, b, buf + la, &lb))
                 ? -1
                 : 0;
    free(own);
    if (rc) return -1;
    *split = la;
    *n = la + lb;
    return 0;
}

static void merge_put(vdn_merge_map *m, int32_t a, int32_t b, uint32_t rank, int32_t merged) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t mask = m->cap - 1, i = (size_t)(key * 0x9E3779B97F4A7C15ull >> 17) & mask;
    while (m->keys[i] != 0 && m->keys[i] != key)
        i = (i + 1) & mask;
    m->keys[i] = key; /* a repeated pair: the later rank wins, as in tokenizers */
    m->rank[i] = rank;
    m->merged[i] = merged;
}

static int load_merges(vdn_tokenizer *t, const cJSON *model, const vocab_map *v,
                       const int16_t inv[512], const char *name, char *err, size_t errlen) {
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsArray(merges)) return FAIL("%s: model.merges: expected an array", name);
    size_t n = (size_t)cJSON_GetArraySize(merges);
    vdn_merge_map *m = &t->merges;
    m->cap = pow2_at_least(2 * n + 2);
    m->keys = vdn_xcalloc(m->cap, sizeof *m->keys);
    m->rank = vdn_xcalloc(m->cap, sizeof *m->rank);
    m->merged = vdn_xcalloc(m->cap, sizeof *m->merged);
    uint8_t buf[2048];
    uint32_t rank = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, merges) {
        size_t len, split;
        if (merge_parts(e, inv, buf, &len, &split))
            return FAIL("%s: model.merges[%u]: expected [\"left\", \"right\"] (or \"left right\") "
                        "of byte-level tokens",
                        name, rank);
        int32_t a = vocab_find(v, buf, split), b = vocab_find(v, buf + split, len - split);
        int32_t ab = vocab_find(v, buf, len);
        if (a < 0 || b < 0 || ab < 0)
            return FAIL("%s: model.merges[%u]: %s is not in model.vocab", name, rank,
                        a < 0   ? "the left part"
                        : b < 0 ? "the right part"
                                : "the merged token");
        merge_put(m, a, b, rank++, ab);
    }
    return 0;
}

static int load_model(vdn_tokenizer *t, const cJSON *root, const char *name, char *err,
                      size_t errlen) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return FAIL("%s: model: expected an object", name);
    if (cJSON_GetObjectItemCaseSensitive(model, "type") && !type_is(model, "BPE"))
        return FAIL("%s: model.type: '%s' is not supported (expected BPE)", name, type_of(model));
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (dropout && !cJSON_IsNull(dropout))
        return FAIL("%s: model.dropout: must be null (dropout makes ids random)", name);
    if (require_false(model, "byte_fallback", "model", name, err, errlen) ||
        require_false(model, "ignore_merges", "model", name, err, errlen) ||
        require_false(model, "fuse_unk", "model", name, err, errlen) ||
        require_empty(model, "continuing_subword_prefix", "model", name, err, errlen) ||
        require_empty(model, "end_of_word_suffix", "model", name, err, errlen))
        return -1;
    int16_t inv[512];
    byte_alphabet_inverse(inv);
    vocab_map v = {0};
    int rc = load_vocab(&v, model, inv, t, name, err, errlen);
    if (!rc) rc = load_merges(t, model, &v, inv, name, err, errlen);
    vocab_free(&v);
    return rc;
}

vdn_tokenizer *vdn_tokenizer_parse(const char *json, size_t len, const char *name, char *err,
                                   size_t errlen) {
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root || !cJSON_IsObject(root)) {
        vdn_fail(err, errlen, "%s: not a JSON object (a Hugging Face tokenizer.json)", name);
        cJSON_Delete(root);
        return NULL;
    }
    vdn_tokenizer *t = vdn_xcalloc(1, sizeof *t);
    int rc = load_normalizer(t, root, name, err, errlen);
    if (!rc) rc = load_pre_tokenizer(t, root, name, err, errlen);
    if (!rc) rc = load_model(t, root, name, err, errlen);
    if (!rc) rc = load_added(t, root, name, err, errlen);
    cJSON_Delete(root);
    if (rc) {
        vdn_tokenizer_free(t);
        return NULL;
    }
    vdn_sha256_hex(json, len, t->sha256);
    return t;
}

vdn_tokenizer *vdn_tokenizer_load(const char *path, char *err, size_t errlen) {
    char file[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(file, sizeof file, "%s/tokenizer.json", path);
    else
        snprintf(file, sizeof file, "%s", path);
    size_t len;
    char *json = vdn_read_file(file, &len, err, errlen);
    if (!json) return NULL;
    vdn_tokenizer *t = vdn_tokenizer_parse(json, len, file, err, errlen);
    free(json);
    return t;
}

void vdn_tokenizer_free(vdn_tokenizer *t) {
    if (!t) return;
    free(t->merges.keys);
    free(t->merges.rank);
    free(t->merges.merged);
    for (int i = 0; i < t->n_added; i++)
        free(t->added[i].content);
    free(t->added);
    pcre2_code_free(t->re);
    free(t);
}

int32_t vdn_tokenizer_n_ids(const vdn_tokenizer *t) {
    return t->n_ids;
}

const char *vdn_tokenizer_sha256(const vdn_tokenizer *t) {
    return t->sha256;
}
