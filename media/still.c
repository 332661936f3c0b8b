/* Poster PNGs (libavcodec's PNG encoder) and float32 WAV files (still.h). */
#include "still.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavutil/frame.h>

static int fail(char *err, size_t errlen, const char *msg, const char *path) {
    snprintf(err, errlen, "%s: %s", path, msg);
    return -1;
}

/* bytes to PATH.partial, then rename */
static int write_atomic(const char *path, const void *a, size_t na, const void *b, size_t nb,
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

int vdn_poster_png(const char *path, const float *frames, int T, int H, int W, const int *idx,
                   int n, char *err, size_t errlen) {
    if (n < 1 || T < 1 || H < 1 || W < 1) return fail(err, errlen, "no frames for a poster", path);
    const AVCodec *codec = avcodec_find_encoder(AV_CODEC_ID_PNG);
    if (!codec) return fail(err, errlen, "this FFmpeg has no PNG encoder", path);
    AVCodecContext *c = avcodec_alloc_context3(codec);
    AVFrame *fr = av_frame_alloc();
    AVPacket *pkt = av_packet_alloc();
    int rc = -1;
    if (!c || !fr || !pkt) {
        fail(err, errlen, "out of memory", path);
        goto done;
    }
    c->width = n * W;
    c->height = H;
    c->pix_fmt = AV_PIX_FMT_RGB24;
    c->time_base = (AVRational){1, 1};
    if (avcodec_open2(c, codec, NULL) < 0) {
        fail(err, errlen, "cannot open the PNG encoder", path);
        goto done;
    }
    fr->format = AV_PIX_FMT_RGB24;
    fr->width = c->width;
    fr->height = H;
    if (av_frame_get_buffer(fr, 0) < 0) {
        fail(err, errlen, "out of memory", path);
        goto done;
    }
    const int64_t plane = (int64_t)H * W, chan = plane * T;
    for (int k = 0; k < n; k++) {
        const int t = idx[k] < 0 ? 0 : idx[k] >= T ? T - 1 : idx[k];
        for (int y = 0; y < H; y++) {
            uint8_t *row = fr->data[0] + (int64_t)y * fr->linesize[0] + (int64_t)k * W * 3;
            for (int x = 0; x < W; x++)
                for (int ch = 0; ch < 3; ch++) {
                    float v = frames[ch * chan + t * plane + (int64_t)y * W + x];
                    v = v != v ? 0.0f : v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
                    row[3 * x + ch] = (uint8_t)lrintf(v * 255.0f);
                }
        }
    }
    if (avcodec_send_frame(c, fr) < 0 || avcodec_send_frame(c, NULL) < 0 ||
        avcodec_receive_packet(c, pkt) < 0) {
        fail(err, errlen, "PNG encoding failed", path);
        goto done;
    }
    rc = write_atomic(path, pkt->data, (size_t)pkt->size, NULL, 0, err, errlen);
done:
    av_packet_free(&pkt);
    av_frame_free(&fr);
    avcodec_free_context(&c);
    return rc;
}

int vdn_poster_png3(const char *path, const float *frames, int T, int H, int W, char *err,
                    size_t errlen) {
    const int idx[3] = {0, (T - 1) / 2, T - 1};
    return vdn_poster_png(path, frames, T, H, W, idx, T >= 3 ? 3 : T, err, errlen);
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
        return fail(err, errlen, "WAV: bad channel count, length or rate (or over 4 GB)", path);
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
    if (!inter) return fail(err, errlen, "out of memory", path);
    for (int64_t i = 0; i < n; i++)
        for (int c = 0; c < channels; c++)
            inter[i * channels + c] = ch[c][i]; /* x86/arm: little-endian floats as stored */
    int rc = write_atomic(path, h, sizeof h, inter, data_bytes, err, errlen);
    free(inter);
    return rc;
}
