/* Float32 WAV files (still.h) and the helpers media/ shares (media_util.h). */
#include "still.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "media_util.h"

int vdn_media_fail(char *err, size_t errlen, const char *msg, const char *path) {
    snprintf(err, errlen, "%s: %s", path, msg);
    return -1;
}

/* bytes to PATH.partial, then rename */
int vdn_media_write_atomic(const char *path, const void *a, size_t na, const void *b, size_t nb,
                           char *err, size_t errlen) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    int ok = fwrite(a, 1, na, f) == na && (!nb || fwrite(b, 1, nb, f) == nb);
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

int vdn_wav_write_f32(const char *path, const float *const *ch, int channels, int64_t n,
                      int sample_rate, char *err, size_t errlen) {
    const uint64_t data_bytes = (uint64_t)n * channels * 4;
    if (channels < 1 || n < 0 || sample_rate < 1 || data_bytes > 0xFFFFFF00u - 64)
        return vdn_media_fail(err, errlen, "WAV: bad channel count, length or rate (or over 4 GB)",
                              path);
    /* RIFF header, fmt (WAVE_FORMAT_IEEE_FLOAT = 3, 18 bytes), fact, data */
    uint8_t h[58];
    memcpy(h, "RIFF", 4);
    put32(h + 4, (uint32_t)(50 + data_bytes));
    memcpy(h + 8, "WAVEfmt ", 8);
    put32(h + 16, 18);
    put16(h + 20, 3);
    put16(h + 22, (uint16_t)channels);
    put32(h + 24, (uint32_t)sample_rate);
    put32(h + 28, (uint32_t)(sample_rate * channels * 4));
    put16(h + 32, (uint16_t)(channels * 4));
    put16(h + 34, 32);
    put16(h + 36, 0);
    memcpy(h + 38, "fact", 4);
    put32(h + 42, 4);
    put32(h + 46, (uint32_t)n);
    memcpy(h + 50, "data", 4);
    put32(h + 54, (uint32_t)data_bytes);
    float *inter = malloc(data_bytes ? data_bytes : 1);
    if (!inter) return vdn_media_fail(err, errlen, "out of memory", path);
    for (int64_t i = 0; i < n; i++)
        for (int c = 0; c < channels; c++)
            inter[i * channels + c] = ch[c][i]; /* x86/arm: little-endian floats as stored */
    int rc = vdn_media_write_atomic(path, h, sizeof h, inter, data_bytes, err, errlen);
    free(inter);
    return rc;
}
