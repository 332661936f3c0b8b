/* vdn encode "TEXT" --checkpoint CKPT -o CACHE.safetensors [--first-frame IMG] [--last-frame IMG]:
 * one prompt (and its keyframe pictures) through the checkpoint's tokenizer, text encoder and
 * video VAE encoder into a prompt cache, the file `vdn render --prompt-cache` takes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "commands.h"
#include "prompt_text.h"
#include "vdn_util.h"

static void usage(FILE *f) {
    fprintf(f, "usage: vdn encode TEXT --checkpoint CKPT -o CACHE.safetensors [--cpu] [--layer N]\n"
               "                  [--precision bf16|fp8] [--first-frame IMG] [--last-frame IMG]\n"
               "                  [--height H --width W]\n"
               "  Tokenizes TEXT verbatim (no chat template, no special tokens added) with\n"
               "  CKPT/tokenizer and runs CKPT/text_encoder (Qwen3-VL) up to hidden_states[50]\n"
               "  (or --layer N), writing prompt_embeds (bf16) and text_token_tags (all 1).\n"
               "  TEXT '-' reads the prompt from stdin. --cpu: the CPU backend even with a GPU.\n"
               "  --precision fp8: the encoder's Linears in e4m3 with row scales (default bf16;\n"
               "  the file's metadata text_encoder_precision says which).\n"
               "  Keyframe modes: --first-frame IMG (I2VA), --last-frame IMG (L2VA) or both\n"
               "  (FL2VA): PNG, JPEG or WebP pictures, drawn on the release's canvas (the first\n"
               "  keyframe's aspect, short edge 768, multiples of 32, at most 768 x 1344; or\n"
               "  --height H --width W), encoded by CKPT/vae's encoder into keyframe latents and\n"
               "  shown to the text encoder as \"<Picture i>: \" + the picture before the prompt.\n"
               "  The cache then renders at the canvas's size.\n");
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
    vdn_prompt_input in = {0};
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
                    !strcmp(a, "--layer") || !strcmp(a, "--precision") ||
                    !strcmp(a, "--first-frame") || !strcmp(a, "--last-frame") ||
                    !strcmp(a, "--height") || !strcmp(a, "--width")) &&
                   v) {
            i++;
            if (!strcmp(a, "--checkpoint")) {
                ckpt = v;
            } else if (!strcmp(a, "--first-frame")) {
                in.first_frame = v;
            } else if (!strcmp(a, "--last-frame")) {
                in.last_frame = v;
            } else if (!strcmp(a, "--height") || !strcmp(a, "--width")) {
                char *end;
                long px = strtol(v, &end, 10);
                if (*end || px < 32 || px > 8192 || px % 32) {
                    fprintf(stderr,
                            "vdn encode: %s \"%s\": expected a multiple of 32 in 32..8192\n", a, v);
                    return 2;
                }
                *(!strcmp(a, "--height") ? &in.height : &in.width) = (int)px;
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
    if ((in.height || in.width) && !(in.first_frame || in.last_frame)) {
        fprintf(stderr, "vdn encode: --height/--width size the keyframes' canvas: give "
                        "--first-frame and/or --last-frame\n");
        return 2;
    }
    if (!in.height != !in.width) {
        fprintf(stderr, "vdn encode: give both --height and --width, or neither\n");
        return 2;
    }
    char *owned = !strcmp(text, "-") ? read_stdin() : NULL;
    if (owned) text = owned;
    in.text = text;
    char err[VDN_ERR_LEN];
    int rc = 1;
    vdn_text_prompts_opts to = {.backend = backend, .layer = layer, .precision = precision};
    cli_env_text_prompts(&to);
    vdn_text_prompts *p = vdn_text_prompts_open(ckpt, &to, err, sizeof err);
    double t0 = vdn_now();
    vdn_pictures pictures = {0}; /* read once, for the encode and its key */
    if (p && vdn_text_prompts_pictures(p, &in, &pictures, err, sizeof err) == 0 &&
        vdn_text_prompts_write(p, &in, &pictures, out, err, sizeof err) == 0) {
        int tokens = 0;
        char key[256];
        vdn_text_prompts_key(p, &in, &pictures, key, sizeof key, &tokens, err, sizeof err);
        const int pics = !!in.first_frame + !!in.last_frame;
        printf("wrote %s: %d tokens%s%s, %.2f s (encoder %.16s, %s)\n", out, tokens,
               pics ? (pics == 2        ? " + first and last frame"
                       : in.first_frame ? " + first frame"
                                        : " + last frame")
                    : "",
               pics ? (pics == 2        ? " (FL2VA)"
                       : in.first_frame ? " (I2VA)"
                                        : " (L2VA)")
                    : "",
               vdn_now() - t0, vdn_text_prompts_identity(p), vdn_precision_name(precision));
        rc = 0;
    } else {
        fprintf(stderr, "vdn encode: %s\n", err);
    }
    vdn_pictures_free(&pictures);
    vdn_text_prompts_close(p);
    free(owned);
    return rc;
}
