/* `vdn decode LATENTS.safetensors -o CLIP.mp4 ...` (decode.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "decode.h"
#include "vdn_util.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: vdn decode LATENTS.safetensors -o CLIP.mp4 [--checkpoint DIR] [--vae DIR]\n"
        "                  [--audio-vae DIR] [--frames-out F.safetensors] [--wav A.wav]\n"
        "                  [--poster P.png] [--crf N] [--backend auto|cpu|cuda] [--devices N]\n"
        "                  [--precision bf16|fp8] [--quiet]\n"
        "Decodes video latents (tensor video (C,T,h,w), or latents (1,C,T,h,w) as the official\n"
        "save_latents writes) and audio latents (audio or audio_latents (2,C,La)) with the\n"
        "released VAEs into an H.264 + AAC mp4 (24 fps). The VAEs come from --vae/--audio-vae or\n"
        "from DIR/vae and DIR/audio_vae of --checkpoint (the base's root). Latents without audio,\n"
        "or no audio VAE, give a video without sound.\n"
        "  --frames-out FILE  also the decoded frames, float32 (3, T, H, W) in [0, 1]\n"
        "  --wav FILE         also the waveform, float32 WAV\n"
        "  --poster FILE      also a PNG of the first, middle and last frame\n"
        "  --crf N            H.264 quality, 0 (lossless) .. 51 (default 18)\n"
        "  --devices N        decode over N devices of the backend, each with its own copy of\n"
        "                     the VAEs: GPUs 0..N-1 with cuda; N host devices with cpu (the\n"
        "                     same output as one device; default 1)\n"
        "  --precision P      the video decoder's: bf16 (default) or fp8 (the ViT blocks' four\n"
        "                     large Linears in e4m3 with row scales, quantised at load; faster\n"
        "                     on GPUs with fp8 tensor cores, ~3%% of the frames' range off)\n");
}

int vdn_cmd_decode(int argc, char **argv) {
    vdn_decode_opts o = {.crf = -1};
    const char *ckpt = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--quiet")) {
            o.quiet = 1;
            continue;
        }
        if (a[0] != '-') {
            if (o.latents) {
                fprintf(stderr, "vdn decode: one latents file at a time (got %s and %s)\n",
                        o.latents, a);
                return 2;
            }
            o.latents = a;
            continue;
        }
        if (!v) {
            fprintf(stderr, "vdn decode: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "-o") || !strcmp(a, "--out"))
            o.mp4 = v;
        else if (!strcmp(a, "--checkpoint"))
            ckpt = v;
        else if (!strcmp(a, "--vae"))
            o.vae_dir = v;
        else if (!strcmp(a, "--audio-vae"))
            o.audio_vae_dir = v;
        else if (!strcmp(a, "--frames-out"))
            o.frames_out = v;
        else if (!strcmp(a, "--wav"))
            o.wav = v;
        else if (!strcmp(a, "--poster"))
            o.poster = v;
        else if (!strcmp(a, "--backend"))
            o.backend = v;
        else if (!strcmp(a, "--precision")) {
            if (vdn_precision_parse(v, &o.precision)) {
                fprintf(stderr, "vdn decode: --precision \"%s\": expected bf16 or fp8\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--devices")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > VDN_VAE_MAX_GROUP) {
                fprintf(stderr, "vdn decode: --devices \"%s\": expected an integer 1..%d\n", v,
                        VDN_VAE_MAX_GROUP);
                return 2;
            }
            o.devices = (int)n;
        } else if (!strcmp(a, "--crf")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 0 || n > 51) {
                fprintf(stderr, "vdn decode: --crf \"%s\": expected an integer 0..51\n", v);
                return 2;
            }
            o.crf = (int)n;
        } else {
            fprintf(stderr, "vdn decode: unknown option %s (see --help)\n", a);
            return 2;
        }
    }
    if (!o.latents || (!o.mp4 && !o.frames_out && !o.wav && !o.poster)) {
        usage(stderr);
        return 2;
    }
    char vdir[4400], adir[4400];
    if (ckpt && !o.vae_dir && vdn_vae_find(ckpt, "vae", vdir, sizeof vdir) == 0) o.vae_dir = vdir;
    if (ckpt && !o.audio_vae_dir && vdn_vae_find(ckpt, "audio_vae", adir, sizeof adir) == 0)
        o.audio_vae_dir = adir;
    if (!o.vae_dir) {
        fprintf(stderr,
                "vdn decode: no video VAE: give --vae DIR, or --checkpoint DIR with vae/ %s\n",
                ckpt ? "(none there)" : "");
        return 2;
    }
    char err[VDN_ERR_LEN];
    if (vdn_decode_file(&o, err, sizeof err)) {
        fprintf(stderr, "vdn decode: %s\n", err);
        return 1;
    }
    if (!o.quiet && o.mp4) fprintf(stderr, "vdn decode: wrote %s\n", o.mp4);
    return 0;
}
