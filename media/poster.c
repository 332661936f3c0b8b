/* Poster PNGs through libavcodec's PNG encoder (still.h); built where FFmpeg's libraries are
 * found (media/CMakeLists.txt). */
#include "still.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavutil/frame.h>

#include "media_util.h"

int vdn_poster_png(const char *path, const float *frames, int T, int H, int W, const int *idx,
                   int n, char *err, size_t errlen) {
    if (n < 1 || T < 1 || H < 1 || W < 1)
        return vdn_media_fail(err, errlen, "no frames for a poster", path);
    const AVCodec *codec = avcodec_find_encoder(AV_CODEC_ID_PNG);
    if (!codec) return vdn_media_fail(err, errlen, "this FFmpeg has no PNG encoder", path);
    AVCodecContext *c = avcodec_alloc_context3(codec);
    AVFrame *fr = av_frame_alloc();
    AVPacket *pkt = av_packet_alloc();
    int rc = -1;
    if (!c || !fr || !pkt) {
        vdn_media_fail(err, errlen, "out of memory", path);
        goto done;
    }
    c->width = n * W;
    c->height = H;
    c->pix_fmt = AV_PIX_FMT_RGB24;
    c->time_base = (AVRational){1, 1};
    if (avcodec_open2(c, codec, NULL) < 0) {
        vdn_media_fail(err, errlen, "cannot open the PNG encoder", path);
        goto done;
    }
    fr->format = AV_PIX_FMT_RGB24;
    fr->width = c->width;
    fr->height = H;
    if (av_frame_get_buffer(fr, 0) < 0) {
        vdn_media_fail(err, errlen, "out of memory", path);
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
        vdn_media_fail(err, errlen, "PNG encoding failed", path);
        goto done;
    }
    rc = vdn_media_write_atomic(path, pkt->data, (size_t)pkt->size, NULL, 0, err, errlen);
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
