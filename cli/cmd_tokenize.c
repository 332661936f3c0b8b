/* vdn tokenize: one JSON string per line on stdin (so a prompt may hold newlines), its token ids
 * as one JSON array per line on stdout. A bad line prints `null` in its place (the output stays
 * line for line with the input), the error goes to stderr and the exit status is 1. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "tokenizer.h"
#include "vdn_util.h"

static void usage(FILE *f) {
    fprintf(f, "usage: vdn tokenize (--tokenizer DIR | --checkpoint CKPT) < lines.jsonl\n"
               "  Reads one JSON string per line on stdin and prints its token ids (no special\n"
               "  tokens added, as MiniMax-H3 tokenizes prompts) as one JSON array per line.\n"
               "  --tokenizer DIR   a folder holding tokenizer.json (or the file itself)\n"
               "  --checkpoint CKPT a checkpoint in the released layout: CKPT/tokenizer\n");
}

/* cJSON ends a string at a decoded NUL; refuse \u0000 rather than tokenize a shorter prompt. */
static int has_escaped_nul(const char *line) {
    for (const char *p = line; *p; p++) {
        if (*p != '\\') continue;
        if (p[1] == 'u' && !strncmp(p + 2, "0000", 4)) return 1;
        if (p[1]) p++;
    }
    return 0;
}

/* One input line -> its ids printed; -1 with the error in err. */
static int tokenize_line(const vdn_tokenizer *t, const char *line, size_t len, char *err,
                         size_t errlen) {
    cJSON *v = cJSON_ParseWithLength(line, len);
    if (!cJSON_IsString(v)) {
        cJSON_Delete(v);
        return vdn_fail(err, errlen, "expected one JSON string (\"...\")");
    }
    if (has_escaped_nul(line)) {
        cJSON_Delete(v);
        return vdn_fail(err, errlen, "the string holds U+0000 (\\u0000), which a prompt may not");
    }
    int32_t *ids;
    size_t n;
    int rc = vdn_tokenize(t, v->valuestring, strlen(v->valuestring), &ids, &n, err, errlen);
    cJSON_Delete(v);
    if (rc) return -1;
    putchar('[');
    for (size_t i = 0; i < n; i++)
        printf(i ? ",%d" : "%d", ids[i]);
    puts("]");
    free(ids);
    return 0;
}

int vdn_cmd_tokenize(int argc, char **argv) {
    const char *path = NULL;
    char buf[4096];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) {
            path = argv[++i];
        } else if (!strcmp(argv[i], "--checkpoint") && i + 1 < argc) {
            snprintf(buf, sizeof buf, "%s/tokenizer", argv[++i]);
            path = buf;
        } else {
            fprintf(stderr, "vdn tokenize: unknown or incomplete argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr,
                "vdn tokenize: say which tokenizer (--tokenizer DIR or --checkpoint CKPT)\n");
        usage(stderr);
        return 2;
    }
    char err[VDN_ERR_LEN];
    vdn_tokenizer *t = vdn_tokenizer_load(path, err, sizeof err);
    if (!t) {
        fprintf(stderr, "vdn tokenize: %s\n", err);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    long lineno = 0;
    int bad = 0;
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        size_t len = (size_t)got;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (tokenize_line(t, line, len, err, sizeof err)) {
            fprintf(stderr, "vdn tokenize: stdin line %ld: %s\n", lineno, err);
            puts("null");
            bad++;
        }
    }
    free(line);
    vdn_tokenizer_free(t);
    fflush(stdout);
    if (bad) fprintf(stderr, "vdn tokenize: %d of %ld lines refused\n", bad, lineno);
    return bad ? 1 : 0;
}
