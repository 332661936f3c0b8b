/* Deterministic stand-in for the fuzzer in CI: every file of the corpus directory, then seeded
 * mutations (bit flips, byte sets, truncations, splices) of each corpus file. Passing means no
 * crash, no assertion, no sanitizer report. Usage: ckpt_fuzz_replay CORPUS_DIR [ITERATIONS] */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdn_util.h"

int ckpt_fuzz_one(const uint8_t *data, size_t size);

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

typedef struct {
    uint8_t *data;
    size_t len;
} blob;

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ckpt_fuzz_replay CORPUS_DIR [ITERATIONS]\n");
        return 2;
    }
    long iters = argc > 2 ? atol(argv[2]) : 4000;
    vdn_log_set_level(VDN_LOG_ERROR); /* mutated configs would log unknown keys */
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "ckpt_fuzz_replay: cannot open %s\n", argv[1]);
        return 1;
    }
    char *names[512];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 512)
        if (de->d_name[0] != '.') names[n++] = vdn_xstrdup(de->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, cmp_name); /* readdir order is not deterministic */
    blob *corpus = vdn_xcalloc(n ? n : 1, sizeof *corpus);
    char err[VDN_ERR_LEN];
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], names[i]);
        char *text = vdn_read_file(path, &corpus[i].len, err, sizeof err);
        if (!text) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        corpus[i].data = (uint8_t *)text;
        ckpt_fuzz_one(corpus[i].data, corpus[i].len);
    }
    if (n == 0) {
        fprintf(stderr, "ckpt_fuzz_replay: empty corpus %s\n", argv[1]);
        return 1;
    }
    size_t cap = 1 << 16;
    uint8_t *buf = vdn_xmalloc(cap);
    for (long it = 0; it < iters; it++) {
        const blob *b = &corpus[next() % n];
        size_t len = b->len < cap ? b->len : cap;
        memcpy(buf, b->data, len);
        int edits = 1 + (int)(next() % 4);
        for (int e = 0; e < edits && len > 1; e++) {
            size_t at = 1 + next() % (len - 1); /* keep byte 0: the parser selector */
            switch (next() % 5) {
            case 0:
                buf[at] ^= (uint8_t)(1u << (next() % 8));
                break;
            case 1:
                buf[at] = (uint8_t)next();
                break;
            case 2:
                len = at;
                break; /* truncate */
            case 3:
                buf[at] = "{}[]\":,0123456789-e.\\ "[next() % 22];
                break;
            default: { /* splice a run from another corpus entry */
                const blob *o = &corpus[next() % n];
                if (o->len > 1) {
                    size_t from = 1 + next() % (o->len - 1), run = 1 + next() % 16;
                    for (size_t k = 0; k < run && at + k < len && from + k < o->len; k++)
                        buf[at + k] = o->data[from + k];
                }
            }
            }
        }
        ckpt_fuzz_one(buf, len);
    }
    printf("replayed %d corpus files and %ld mutations\n", n, iters);
    for (int i = 0; i < n; i++) {
        free(corpus[i].data);
        free(names[i]);
    }
    free(corpus);
    free(buf);
    return 0;
}
