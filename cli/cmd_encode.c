/* vdn encode "TEXT" --checkpoint CKPT -o CACHE.safetensors: one prompt through the checkpoint's
 * tokenizer and text encoder into a prompt cache, the file `vdn render --prompt-cache` takes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "prompt_text.h"
#include "vdn_util.h"

static void usage(FILE *f) {
    fprintf(f, "usage: vdn encode TEXT --checkpoint CKPT -o CACHE.safetensors [--cpu] [--layer N]\n"
               "                  [--precision bf16|fp8]\n"
               "  Tokenizes TEXT verbatim (no chat template, no special tokens added) with\n"
               "  CKPT/tokenizer and runs CKPT/text_encoder (Qwen3-VL) up to hidden_states[50]\n"
               "  (or --layer N), writing prompt_embeds (bf16) and text_token_tags (all 1).\n"
               "  TEXT '-' reads the prompt from stdin. --cpu: the CPU backend even with a GPU.\n"
               "  --precision fp8: the encoder's Linears in e4m3 with row scales (default bf16;\n"
               "  the file's metadata text_encoder_precision says which).\n");
}

static char *read_stdin(void) {
    size_t cap = 4096, n = 0;
    char *buf = vdn_xmalloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, stdin)) > 0) {
        n += got;
        if (n + 1 == cap) {
            cap *= 2;
            char *grown = realloc(buf, cap);
            VDN_ASSERT(grown);
            buf = grown;
        }
    }
    buf[n] = 0;
    return buf;
}

int vdn_cmd_encode(int argc, char **argv) {
    const char *text = NULL, *ckpt = NULL, *out = NULL, *backend = NULL;
    int layer = 0;
    vdn_precision precision = VDN_PRECISION_BF16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--cpu")) {
            backend = "cpu";
        } else if ((!strcmp(a, "--checkpoint") || !strcmp(a, "-o") || !strcmp(a, "--out") ||
                    !strcmp(a, "--layer") || !strcmp(a, "--precision")) &&
                   v) {
            i++;
            if (!strcmp(a, "--checkpoint")) {
                ckpt = v;
            } else if (!strcmp(a, "--layer")) {
                char *end;
                long l = strtol(v, &end, 10);
                if (*end || l < 1 || l > 4096) {
                    fprintf(stderr, "vdn encode: --layer \"%s\": expected 1..4096\n", v);
                    return 2;
                }
                layer = (int)l;
            } else if (!strcmp(a, "--precision")) {
                if (vdn_precision_parse(v, &precision)) {
                    fprintf(stderr, "vdn encode: --precision '%s': expected bf16 or fp8\n", v);
                    return 2;
                }
            } else {
                out = v;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vdn encode: unknown or incomplete option %s\n", a);
            usage(stderr);
            return 2;
        } else if (!text) {
            text = a;
        } else {
            fprintf(stderr, "vdn encode: one prompt at a time (quote it)\n");
            return 2;
        }
    }
    if (!text || !ckpt || !out) {
        usage(stderr);
        return 2;
    }
    char *owned = !strcmp(text, "-") ? read_stdin() : NULL;
    if (owned) text = owned;
    char err[VDN_ERR_LEN];
    int rc = 1;
    vdn_text_prompts *p = vdn_text_prompts_open(ckpt, backend, layer, precision, err, sizeof err);
    double t0 = vdn_now();
    if (p && vdn_text_prompts_write(p, text, out, err, sizeof err) == 0) {
        int tokens = 0;
        char key[256];
        vdn_text_prompts_key(p, text, key, sizeof key, &tokens, err, sizeof err);
        printf("wrote %s: %d tokens, %.2f s (encoder %.16s, %s)\n", out, tokens, vdn_now() - t0,
               vdn_text_prompts_identity(p), vdn_precision_name(precision));
        rc = 0;
    } else {
        fprintf(stderr, "vdn encode: %s\n", err);
    }
    vdn_text_prompts_close(p);
    free(owned);
    return rc;
}
