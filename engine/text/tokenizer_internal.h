/* What a loaded tokenizer holds; shared by tokenizer_load.c (building it) and tokenizer.c
 * (using it). Token strings are kept as raw bytes: the byte-level alphabet of the file (GPT-2's
 * bytes_to_unicode) is undone at load, so BPE runs on the prompt's own bytes. */
#ifndef VDN_TOKENIZER_INTERNAL_H
#define VDN_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>

#include "tokenizer.h"

typedef struct {
    char *content; /* UTF-8 as it must appear in the text */
    size_t len;
    int32_t id;
    int normalized; /* 1: matched in the NFC text, 0: in the raw text (before NFC) */
} vdn_added_token;

/* (left id, right id) -> (rank, merged id), open addressing; key 0 marks an empty slot, so keys
 * are stored + 1. */
typedef struct {
    uint64_t *keys;
    uint32_t *rank;
    int32_t *merged;
    size_t cap; /* a power of two */
} vdn_merge_map;

struct vdn_tokenizer {
    int32_t byte_id[256]; /* the id of each single byte */
    vdn_merge_map merges;
    vdn_added_token *added;
    int n_added;
    int nfc;        /* the normaliser is NFC (else none) */
    pcre2_code *re; /* the split regex */
    int32_t n_ids;
    char sha256[65];
};

/* Look a pair up: 0 and its rank/merged id, or -1 when the pair never merges. */
static inline int vdn_merge_find(const vdn_merge_map *m, int32_t a, int32_t b, uint32_t *rank,
                                 int32_t *merged) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull >> 17) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == 0) return -1;
        if (m->keys[i] == key) {
            *rank = m->rank[i];
            *merged = m->merged[i];
            return 0;
        }
    }
}

#endif
