/* The PyTorch decode's numbers for `vdn bench decode --peer PEER.json`: the JSON line that
 * ops/reference/vae_bench.py prints after timing the diffusers decode on the same GPU. A file a
 * user passes, so it is parsed defensively (fuzz target vae/test/fuzz_bench_peer.c). */
#ifndef VDN_VAE_BENCH_PEER_H
#define VDN_VAE_BENCH_PEER_H

#include <stddef.h>

typedef struct {
    double video_s, audio_s; /* seconds, > 0 and finite; -1 where the peer has no time */
    char peer[96], gpu[96];  /* who timed it and where ("?" when the line does not say) */
} vdn_vae_peer;

/* text[0, n) as the peer's line. video / audio: this run timed that decoder, so the peer must
 * have decoded the same latents, (C, T, h, w) = latents[0..4), and the same La audio latents.
 * 0, or -1 with a message naming path and the field. */
int vdn_vae_peer_parse(const char *text, size_t n, const char *path, const int latents[4], int La,
                       int video, int audio, vdn_vae_peer *out, char *err, size_t errlen);

/* The PyTorch keyframe encode's numbers for `vdn bench encode --peer PEER.json`: the JSON line of
 * ops/reference/vae_encoder_bench.py ("seconds" per rep for all "keyframes" canvases of "height" x
 * "width"). The peer must have encoded what this run encodes. 0, or -1 with a message naming
 * path and the field. */
typedef struct {
    double seconds;         /* > 0 and finite */
    char peer[96], gpu[96]; /* who timed it and where ("?" when the line does not say) */
} vdn_encode_peer;
int vdn_encode_peer_parse(const char *text, size_t n, const char *path, int keyframes, int height,
                          int width, vdn_encode_peer *out, char *err, size_t errlen);

/* The mux timed apart for `vdn bench --clip --mux-json MUX.json`: the JSON of `vdn bench --clip
 * --mux-only --json` on a host whose build has FFmpeg, for a clip measured where the build has
 * none. It must have muxed the clip's pixel frames at its size. 0, or -1 with a message naming
 * path and the field. */
typedef struct {
    double mux_s;    /* > 0 and finite */
    int cores;       /* the host's (0 when the file does not say) */
    char source[96]; /* "synthetic" or the frames' file ("?" when the file does not say) */
} vdn_mux_part;
int vdn_mux_part_parse(const char *text, size_t n, const char *path, int frames, int height,
                       int width, vdn_mux_part *out, char *err, size_t errlen);

#endif
