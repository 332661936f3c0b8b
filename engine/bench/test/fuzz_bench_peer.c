/* libFuzzer target for the PyTorch peers' JSON lines of `vdn bench decode --peer` and `vdn bench
 * encode --peer`, and the mux timed apart of `vdn bench --clip --mux-json` (bench_peer.h): the
 * first byte picks the parser (bit 3: the mux's, bit 2: the encode's) and, for the decode's,
 * which decoders this run timed (bit 0 video, bit 1 audio); the rest is the file.
 * An accepted line must give times that are -1 or positive and finite (the encode's: positive),
 * and terminated strings; a refusal must say why. Corpus: corpus_bench_peer/. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_peer.h"

static int encode_peer(const uint8_t *data, size_t size) {
    char err[512] = "";
    vdn_encode_peer p;
    memset(&p, 0x5a, sizeof p);
    if (vdn_encode_peer_parse((const char *)data, size, "fuzz.json", 2, 768, 1344, &p, err,
                              sizeof err)) {
        if (!strstr(err, "fuzz.json")) abort();
        return 0;
    }
    if (!(p.seconds > 0 && isfinite(p.seconds))) abort();
    if (!memchr(p.peer, 0, sizeof p.peer) || !memchr(p.gpu, 0, sizeof p.gpu)) abort();
    return 0;
}

static int mux_part(const uint8_t *data, size_t size) {
    char err[512] = "";
    vdn_mux_part p;
    memset(&p, 0x5a, sizeof p);
    if (vdn_mux_part_parse((const char *)data, size, "fuzz.json", 345, 768, 1344, &p, err,
                           sizeof err)) {
        if (!strstr(err, "fuzz.json")) abort();
        return 0;
    }
    if (!(p.mux_s > 0 && isfinite(p.mux_s)) || p.cores < 0) abort();
    if (!memchr(p.source, 0, sizeof p.source)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] & 8) return mux_part(data + 1, size - 1);
    if (data[0] & 4) return encode_peer(data + 1, size - 1);
    static const int latents[4] = {24, 17, 48, 84};
    char err[512] = "";
    vdn_vae_peer p;
    memset(&p, 0x5a, sizeof p); /* a field the parser forgets shows as garbage */
    const int video = data[0] & 1, audio = data[0] >> 1 & 1;
    if (vdn_vae_peer_parse((const char *)data + 1, size - 1, "fuzz.json", latents, 200, video,
                           audio, &p, err, sizeof err)) {
        if (!strstr(err, "fuzz.json")) abort();
        return 0;
    }
    const double t[2] = {p.video_s, p.audio_s};
    for (int i = 0; i < 2; i++)
        if (!(t[i] == -1 || (t[i] > 0 && isfinite(t[i])))) abort();
    if (!memchr(p.peer, 0, sizeof p.peer) || !memchr(p.gpu, 0, sizeof p.gpu)) abort();
    return 0;
}
