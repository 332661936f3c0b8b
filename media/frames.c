/* Frame sources (frames.h): an mp4 through libavformat/libavcodec/
 * libswscale, or a buffer of decoded frames. */
#include "frames.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "vdn_util.h"

struct vdn_frames {
    int T, H, W;
    /* buffer source */
    const float *px;
    int next;
    /* mp4 source */
    char *path;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    int stream;
    AVPacket *pkt;
    AVFrame *frame;
    struct SwsContext *sws;
    uint8_t *rgb; /* one packed RGB24 frame */
    int flushing, done;
};

vdn_frames *vdn_frames_from_buffer(const float *px, int T, int H, int W) {
    vdn_frames *f = vdn_xcalloc(1, sizeof *f);
    f->px = px;
    f->T = T;
    f->H = H;
    f->W = W;
    return f;
}

void vdn_frames_close(vdn_frames *f) {
    if (!f) return;
    avformat_close_input(&f->fmt);
    avcodec_free_context(&f->dec);
    av_packet_free(&f->pkt);
    av_frame_free(&f->frame);
    sws_freeContext(f->sws);
    free(f->rgb);
    free(f->path);
    free(f);
}

static int averr(char *err, size_t errlen, const char *path, const char *what, int rc) {
    char eb[128];
    av_strerror(rc, eb, sizeof eb);
    return vdn_fail(err, errlen, "%s: %s: %s", path, what, eb);
}

vdn_frames *vdn_frames_open_mp4(const char *path, char *err, size_t errlen) {
    vdn_frames *f = vdn_xcalloc(1, sizeof *f);
    f->path = vdn_xstrdup(path);
    int rc = avformat_open_input(&f->fmt, path, NULL, NULL);
    if (rc < 0) {
        averr(err, errlen, path, "opening", rc);
        goto fail;
    }
    if ((rc = avformat_find_stream_info(f->fmt, NULL)) < 0) {
        averr(err, errlen, path, "reading the stream info", rc);
        goto fail;
    }
    const AVCodec *codec = NULL;
    f->stream = av_find_best_stream(f->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (f->stream < 0 || !codec) {
        vdn_fail(err, errlen, "%s: no video stream with a decoder in this FFmpeg", path);
        goto fail;
    }
    AVStream *st = f->fmt->streams[f->stream];
    f->dec = avcodec_alloc_context3(codec);
    if (!f->dec || avcodec_parameters_to_context(f->dec, st->codecpar) < 0) {
        vdn_fail(err, errlen, "%s: cannot set up the %s decoder", path, codec->name);
        goto fail;
    }
    if ((rc = avcodec_open2(f->dec, codec, NULL)) < 0) {
        averr(err, errlen, path, "opening the video decoder", rc);
        goto fail;
    }
    f->W = st->codecpar->width;
    f->H = st->codecpar->height;
    if (f->W < 1 || f->H < 1 || f->W > 16384 || f->H > 16384) {
        vdn_fail(err, errlen, "%s: video size %dx%d out of range", path, f->W, f->H);
        goto fail;
    }
    f->T = st->nb_frames > 0 && st->nb_frames < 10000000 ? (int)st->nb_frames : 0;
    f->pkt = av_packet_alloc();
    f->frame = av_frame_alloc();
    f->rgb = vdn_xmalloc((size_t)f->W * f->H * 3);
    if (!f->pkt || !f->frame) {
        vdn_fail(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    return f;
fail:
    vdn_frames_close(f);
    return NULL;
}

void vdn_frames_info(const vdn_frames *f, int *T, int *H, int *W) {
    *T = f->T;
    *H = f->H;
    *W = f->W;
}

/* To RGB24 with the colour matrix and range the frame is tagged with, as FFmpeg's scale filter
 * does by default ("auto"), so our frames equal `ffmpeg -pix_fmt rgb24`'s byte for byte. */
static int to_rgb(vdn_frames *f, const AVFrame *fr, float *rgb, char *err, size_t errlen) {
    if (fr->width != f->W || fr->height != f->H)
        return vdn_fail(err, errlen, "%s: a frame of %dx%d in a %dx%d stream", f->path, fr->width,
                        fr->height, f->W, f->H);
    f->sws = sws_getCachedContext(f->sws, f->W, f->H, fr->format, f->W, f->H, AV_PIX_FMT_RGB24,
                                  SWS_BICUBIC, NULL, NULL, NULL);
    if (!f->sws)
        return vdn_fail(err, errlen, "%s: no converter from %s to RGB24", f->path,
                        av_get_pix_fmt_name(fr->format));
    int cs = fr->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : (int)fr->colorspace;
    const int *inv = sws_getCoefficients(cs);
    sws_setColorspaceDetails(f->sws, inv, fr->color_range == AVCOL_RANGE_JPEG, inv, 1, 0, 1 << 16,
                             1 << 16);
    uint8_t *dst[4] = {f->rgb, NULL, NULL, NULL};
    int stride[4] = {3 * f->W, 0, 0, 0};
    sws_scale(f->sws, (const uint8_t *const *)fr->data, fr->linesize, 0, f->H, dst, stride);
    size_t plane = (size_t)f->W * f->H;
    for (size_t i = 0; i < plane; i++)
        for (int c = 0; c < 3; c++)
            rgb[c * plane + i] = f->rgb[3 * i + c] / 255.0f;
    return 0;
}

int vdn_frames_next(vdn_frames *f, float *rgb, char *err, size_t errlen) {
    if (f->px) {
        if (f->next >= f->T) return 0;
        size_t plane = (size_t)f->H * f->W;
        for (int c = 0; c < 3; c++)
            memcpy(rgb + c * plane, f->px + ((size_t)c * f->T + f->next) * plane,
                   plane * sizeof *rgb);
        f->next++;
        return 1;
    }
    while (!f->done) {
        int rc = avcodec_receive_frame(f->dec, f->frame);
        if (rc == 0) {
            rc = to_rgb(f, f->frame, rgb, err, errlen);
            av_frame_unref(f->frame);
            return rc ? -1 : 1;
        }
        if (rc == AVERROR_EOF) {
            f->done = 1;
            break;
        }
        if (rc != AVERROR(EAGAIN)) return averr(err, errlen, f->path, "decoding", rc);
        if (f->flushing) { /* drained without EOF: treat as the end */
            f->done = 1;
            break;
        }
        /* the decoder wants input: the next packet of our stream, or the flush at the end */
        for (;;) {
            rc = av_read_frame(f->fmt, f->pkt);
            if (rc == AVERROR_EOF) {
                f->flushing = 1;
                rc = avcodec_send_packet(f->dec, NULL);
                break;
            }
            if (rc < 0) return averr(err, errlen, f->path, "reading", rc);
            if (f->pkt->stream_index == f->stream) {
                rc = avcodec_send_packet(f->dec, f->pkt);
                av_packet_unref(f->pkt);
                break;
            }
            av_packet_unref(f->pkt);
        }
        if (rc < 0 && rc != AVERROR_EOF) return averr(err, errlen, f->path, "decoding", rc);
    }
    return 0;
}
