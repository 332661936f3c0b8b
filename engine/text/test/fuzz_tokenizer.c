/* libFuzzer target for the tokenizer: the first byte picks the path.
 *   even: the rest is a tokenizer.json (loader: every field check, the merges, the regex);
 *   odd:  the rest is text for a small tokenizer.json of the real layout, built once here
 *         (added tokens, NFC, the Qwen2 split regex, byte-level BPE, UTF-8 refusal).
 * An accepted text's ids must all be ids of that tokenizer. Corpus: corpus_tokenizer/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "vdn_util.h"

static vdn_tokenizer *small;

/* a byte-level vocabulary of all 256 bytes, a few merges and added tokens, Qwen2's regex */
static char *small_json(void) {
    size_t cap = 1 << 16, k = 0;
    char *j = vdn_xmalloc(cap);
    k += (size_t)snprintf(
        j + k, cap - k,
        "{\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"Sequence\","
        "\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
        "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
        "\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|"
        "\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
        "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]},"
        "\"added_tokens\":[{\"id\":300,\"content\":\"<|im_start|>\",\"special\":true,"
        "\"normalized\":false},{\"id\":301,\"content\":\"<think>\",\"special\":false,"
        "\"normalized\":true}],\"model\":{\"type\":\"BPE\",\"vocab\":{");
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        int cp = printable ? b : next++;
        char u[4];
        int n = cp < 0x80 ? (u[0] = (char)cp, 1)
                          : (u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 63)), 2);
        k += (size_t)snprintf(j + k, cap - k, "%s\"", b ? "," : "");
        for (int i = 0; i < n; i++) {
            if (u[i] == '"' || u[i] == '\\') j[k++] = '\\';
            j[k++] = u[i];
        }
        k += (size_t)snprintf(j + k, cap - k, "\":%d", b);
    }
    /* "Ġ" is the space byte's character (U+0120) */
    k += (size_t)snprintf(
        j + k, cap - k,
        ",\"\xc4\xa0t\":256,\"he\":257,\"\xc4\xa0the\":258,\"in\":259,\"\xc4\xa0\xc4\xa0\":260},"
        "\"merges\":[[\"\xc4\xa0\",\"t\"],[\"h\",\"e\"],[\"\xc4\xa0t\",\"he\"],\"i n\","
        "[\"\xc4\xa0\",\"\xc4\xa0\"]]}}");
    return j;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[VDN_ERR_LEN];
    if (!small) {
        char *j = small_json();
        small = vdn_tokenizer_parse(j, strlen(j), "small.json", err, sizeof err);
        free(j);
        if (!small) {
            fprintf(stderr, "fuzz_tokenizer: the built-in tokenizer does not load: %s\n", err);
            abort();
        }
    }
    if (size == 0) return 0;
    if ((data[0] & 1) == 0) {
        vdn_tokenizer *t =
            vdn_tokenizer_parse((const char *)data + 1, size - 1, "fuzz.json", err, sizeof err);
        vdn_tokenizer_free(t);
        return 0;
    }
    int32_t *ids;
    size_t n;
    if (vdn_tokenize(small, (const char *)data + 1, size - 1, &ids, &n, err, sizeof err) == 0) {
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= vdn_tokenizer_n_ids(small)) abort();
        free(ids);
    }
    return 0;
}
