/* Text -> ids, as the `tokenizers` library encodes with add_special_tokens=False:
 *  1. added tokens are cut out first, leftmost match first and the longest of those (tokens marked
 *     normalized=false in the raw text, the others in the NFC text of what remains);
 *  2. every other piece is NFC-normalised (utf8proc) and split by the pre-tokenizer's regex
 *     (PCRE2, UTF + UCP), keeping matches and the gaps between them as pieces ("Isolated");
 *  3. each piece's bytes go through byte-level BPE: start from single bytes and repeatedly merge
 *     the adjacent pair of lowest rank (leftmost on ties), with a heap as tokenizers does, so a
 *     long word costs n log n rather than n^2. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer_internal.h"
#include "vdn_util.h"

typedef struct {
    int32_t *v;
    size_t n, cap;
} id_list;

static void ids_push(id_list *l, int32_t id) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        int32_t *grown = realloc(l->v, l->cap * sizeof *l->v);
        VDN_ASSERT(grown);
        l->v = grown;
    }
    l->v[l->n++] = id;
}

/* ---- 3. byte-level BPE ---- */

typedef struct {
    uint32_t rank;
    int32_t pos; /* the left symbol of the pair */
    int32_t merged;
} merge_cand;

static int cand_before(const merge_cand *a, const merge_cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

typedef struct {
    merge_cand *v;
    size_t n;
} cand_heap;

static void heap_push(cand_heap *h, merge_cand c) {
    size_t i = h->n++;
    while (i > 0 && cand_before(&c, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = c;
}

static merge_cand heap_pop(cand_heap *h) {
    merge_cand top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && cand_before(&h->v[c + 1], &h->v[c])) c++;
        if (!cand_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

/* Symbols live in arrays indexed by their first byte's position; merged-away ones are dead. */
typedef struct {
    int32_t *id, *prev, *next;
    uint8_t *alive;
} symbols;

static void push_pair(const vdn_tokenizer *t, cand_heap *h, const symbols *s, int32_t left) {
    if (left < 0 || s->next[left] < 0) return;
    merge_cand c = {.pos = left};
    if (vdn_merge_find(&t->merges, s->id[left], s->id[s->next[left]], &c.rank, &c.merged) == 0)
        heap_push(h, c);
}

static void bpe(const vdn_tokenizer *t, const uint8_t *p, size_t n, id_list *out) {
    if (n == 1) {
        ids_push(out, t->byte_id[p[0]]);
        return;
    }
    symbols s = {vdn_xmalloc(n * sizeof(int32_t)), vdn_xmalloc(n * sizeof(int32_t)),
                 vdn_xmalloc(n * sizeof(int32_t)), vdn_xmalloc(n)};
    /* every merge removes a symbol and adds at most 2 candidates: n - 1 + 2 (n - 1) at most */
    cand_heap h = {vdn_xmalloc(3 * n * sizeof(merge_cand)), 0};
    for (size_t i = 0; i < n; i++) {
        s.id[i] = t->byte_id[p[i]];
        s.prev[i] = (int32_t)i - 1;
        s.next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        s.alive[i] = 1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        push_pair(t, &h, &s, (int32_t)i);
    while (h.n) {
        merge_cand c = heap_pop(&h);
        int32_t l = c.pos, r = s.next[l];
        uint32_t rank;
        int32_t merged;
        /* stale: the left symbol was merged away or changed, or its right neighbour did */
        if (!s.alive[l] || r < 0 || vdn_merge_find(&t->merges, s.id[l], s.id[r], &rank, &merged) ||
            rank != c.rank || merged != c.merged)
            continue;
        s.id[l] = merged;
        s.alive[r] = 0;
        s.next[l] = s.next[r];
        if (s.next[r] >= 0) s.prev[s.next[r]] = l;
        push_pair(t, &h, &s, s.prev[l]);
        push_pair(t, &h, &s, l);
    }
    for (int32_t i = 0; i >= 0; i = s.next[i])
        ids_push(out, s.id[i]);
    free(s.id);
    free(s.prev);
    free(s.next);
    free(s.alive);
    free(h.v);
}

/* ---- 2. the split regex, then BPE on every piece ---- */

static int split_and_bpe(const vdn_tokenizer *t, const char *text, size_t len, id_list *out,
                         char *err, size_t errlen) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
    VDN_ASSERT(md);
    size_t gap = 0, from = 0; /* the unmatched text starts at gap; the search at from */
    while (from < len) {
        int rc = pcre2_match(t->re, (PCRE2_SPTR)text, len, from, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            pcre2_match_data_free(md);
            return vdn_fail(err, errlen, "tokenizer: the split regex failed at byte %zu: %s", from,
                            (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        if (e == s) { /* an empty match (Qwen2's pattern has none): it splits nothing */
            utf8proc_int32_t cp;
            utf8proc_ssize_t used = utf8proc_iterate((const utf8proc_uint8_t *)text + s,
                                                     (utf8proc_ssize_t)(len - s), &cp);
            from = s + (used > 0 ? (size_t)used : 1);
            continue;
        }
        if (s > gap) bpe(t, (const uint8_t *)text + gap, s - gap, out); /* the gap is a piece */
        bpe(t, (const uint8_t *)text + s, e - s, out);
        gap = from = e;
    }
    if (gap < len) bpe(t, (const uint8_t *)text + gap, len - gap, out);
    pcre2_match_data_free(md);
    return 0;
}

/* ---- 1. added tokens ---- */

/* The added token (of the given normalized kind) that starts leftmost in text[from..len), the
 * longest of those; -1 when none. */
static int next_added(const vdn_tokenizer *t, int normalized, const char *text, size_t len,
                      size_t from, size_t *at) {
    for (size_t p = from; p < len; p++) {
        int best = -1;
        for (int i = 0; i < t->n_added; i++) {
            const vdn_added_token *a = &t->added[i];
            if (a->normalized != normalized || a->len > len - p || a->content[0] != text[p])
                continue;
            if (!memcmp(text + p, a->content, a->len) && (best < 0 || a->len > t->added[best].len))
                best = i;
        }
        if (best >= 0) {
            *at = p;
            return best;
        }
    }
    return -1;
}

/* A piece between raw-matched added tokens: NFC, then normalized added tokens, then the rest. */
static int encode_piece(const vdn_tokenizer *t, const char *raw, size_t len, id_list *out,
                        char *err, size_t errlen) {
    if (len == 0) return 0;
    utf8proc_uint8_t *nfc = NULL;
    const char *text = raw;
    if (t->nfc) {
        utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)raw, (utf8proc_ssize_t)len,
                                          &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (n < 0)
            return vdn_fail(err, errlen, "tokenizer: NFC normalisation failed: %s",
                            utf8proc_errmsg(n));
        text = (const char *)nfc;
        len = (size_t)n;
    }
    int rc = 0;
    size_t from = 0, at;
    int k;
    while (!rc && (k = next_added(t, 1, text, len, from, &at)) >= 0) {
        rc = split_and_bpe(t, text + from, at - from, out, err, errlen);
        ids_push(out, t->added[k].id);
        from = at + t->added[k].len;
    }
    if (!rc) rc = split_and_bpe(t, text + from, len - from, out, err, errlen);
    free(nfc);
    return rc;
}

/* Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF): the byte offset of
 * the first bad sequence, or -1 when the text is valid. */
static long long first_invalid_utf8(const char *text, size_t len) {
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t used =
            utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(len - i), &cp);
        if (used <= 0) return (long long)i;
        i += (size_t)used;
    }
    return -1;
}

int vdn_tokenize(const vdn_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n,
                 char *err, size_t errlen) {
    *ids = NULL;
    *n = 0;
    long long bad = first_invalid_utf8(text, len);
    if (bad >= 0)
        return vdn_fail(err, errlen,
                        "tokenizer: the text is not valid UTF-8 (byte %lld: 0x%02x); prompts must "
                        "be UTF-8",
                        bad, (unsigned char)text[bad]);
    id_list out = {0};
    int rc = 0;
    size_t from = 0, at;
    int k;
    while (!rc && (k = next_added(t, 0, text, len, from, &at)) >= 0) {
        rc = encode_piece(t, text + from, at - from, &out, err, errlen);
        ids_push(&out, t->added[k].id);
        from = at + t->added[k].len;
    }
    if (!rc) rc = encode_piece(t, text + from, len - from, &out, err, errlen);
    if (rc) {
        free(out.v);
        return -1;
    }
    *ids = out.v;
    *n = out.n;
    return 0;
}
