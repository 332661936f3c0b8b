/* mp4 writer over libavformat/libavcodec/libswscale (see mp4.h). */
#include "mp4.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

struct vdn_mp4 {
    char path[4096], partial[4200];
    vdn_mp4_opts o;
    AVFormatContext *fmt;
    AVCodecContext *venc, *aenc;
    AVStream *vst, *ast;
    struct SwsContext *sws;
    AVFrame *vframe, *aframe;
    AVPacket *pkt;
    uint8_t *rgb;       /* one packed RGB24 frame */
    int64_t n_frames;   /* video frames sent */
    int64_t audio_sent; /* samples sent to the AAC encoder */
    int header_written;
};

static int fail(char *err, size_t errlen, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const char *averr(int rc, char *buf, size_t len) {
    av_strerror(rc, buf, len);
    return buf;
}

static void mp4_free(vdn_mp4 *m) {
    if (!m) return;
    if (m->fmt) {
        if (m->fmt->pb) avio_closep(&m->fmt->pb);
        avformat_free_context(m->fmt);
    }
    avcodec_free_context(&m->venc);
    avcodec_free_context(&m->aenc);
    sws_freeContext(m->sws);
    av_frame_free(&m->vframe);
    av_frame_free(&m->aframe);
    av_packet_free(&m->pkt);
    free(m->rgb);
    free(m);
}

void vdn_mp4_abort(vdn_mp4 *m) {
    if (!m) return;
    char partial[sizeof m->partial];
    memcpy(partial, m->partial, sizeof partial);
    mp4_free(m);
    unlink(partial);
}

/* Send one frame (NULL: flush) to enc and write every packet it gives back. */
static int encode_write(vdn_mp4 *m, AVCodecContext *enc, AVStream *st, AVFrame *frame, char *err,
                        size_t errlen) {
    char eb[128];
    int rc = avcodec_send_frame(enc, frame);
    if (rc < 0)
        return fail(err, errlen, "%s: encoding %s: %s", m->path, enc->codec->name,
                    averr(rc, eb, sizeof eb));
    for (;;) {
        rc = avcodec_receive_packet(enc, m->pkt);
        if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return 0;
        if (rc < 0)
            return fail(err, errlen, "%s: encoding %s: %s", m->path, enc->codec->name,
                        averr(rc, eb, sizeof eb));
        av_packet_rescale_ts(m->pkt, enc->time_base, st->time_base);
        m->pkt->stream_index = st->index;
        rc = av_interleaved_write_frame(m->fmt, m->pkt);
        if (rc < 0)
            return fail(err, errlen, "%s: writing: %s", m->partial, averr(rc, eb, sizeof eb));
    }
}

static int open_video(vdn_mp4 *m, char *err, size_t errlen) {
    char eb[128];
    const AVCodec *codec = avcodec_find_encoder_by_name("libx264");
    if (!codec)
        return fail(err, errlen, "%s: this FFmpeg has no libx264 encoder (Debian's libavcodec has)",
                    m->path);
    m->vst = avformat_new_stream(m->fmt, NULL);
    m->venc = avcodec_alloc_context3(codec);
    if (!m->vst || !m->venc) return fail(err, errlen, "%s: out of memory", m->path);
    AVCodecContext *c = m->venc;
    c->width = m->o.width;
    c->height = m->o.height;
    c->pix_fmt = AV_PIX_FMT_YUV420P;
    c->time_base = (AVRational){1, m->o.fps};
    c->framerate = (AVRational){m->o.fps, 1};
    /* BT.709, limited range: what players assume for HD video; the tags say so explicitly. */
    c->colorspace = AVCOL_SPC_BT709;
    c->color_primaries = AVCOL_PRI_BT709;
    c->color_trc = AVCOL_TRC_BT709;
    c->color_range = AVCOL_RANGE_MPEG;
    if (m->fmt->oformat->flags & AVFMT_GLOBALHEADER) c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    char crf[16];
    snprintf(crf, sizeof crf, "%d", m->o.crf);
    av_opt_set(c->priv_data, "crf", crf, 0);
    av_opt_set(c->priv_data, "preset", m->o.preset ? m->o.preset : "medium", 0);
    int rc = avcodec_open2(c, codec, NULL);
    if (rc < 0)
        return fail(err, errlen, "%s: opening libx264 (%dx%d, crf %d, preset %s): %s", m->path,
                    c->width, c->height, m->o.crf, m->o.preset ? m->o.preset : "medium",
                    averr(rc, eb, sizeof eb));
    rc = avcodec_parameters_from_context(m->vst->codecpar, c);
    if (rc < 0) return fail(err, errlen, "%s: %s", m->path, averr(rc, eb, sizeof eb));
    m->vst->time_base = c->time_base;
    m->vst->avg_frame_rate = c->framerate;

    m->vframe = av_frame_alloc();
    if (!m->vframe) return fail(err, errlen, "%s: out of memory", m->path);
    m->vframe->format = c->pix_fmt;
    m->vframe->width = c->width;
    m->vframe->height = c->height;
    if (av_frame_get_buffer(m->vframe, 0) < 0)
        return fail(err, errlen, "%s: out of memory", m->path);
    m->sws = sws_getContext(c->width, c->height, AV_PIX_FMT_RGB24, c->width, c->height,
                            AV_PIX_FMT_YUV420P, SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT,
                            NULL, NULL, NULL);
    if (!m->sws) return fail(err, errlen, "%s: no RGB24 -> yuv420p converter", m->path);
    const int *bt709 = sws_getCoefficients(SWS_CS_ITU709);
    sws_setColorspaceDetails(m->sws, bt709, 1, bt709, 0, 0, 1 << 16, 1 << 16);
    m->rgb = malloc((size_t)c->width * c->height * 3);
    if (!m->rgb) return fail(err, errlen, "%s: out of memory", m->path);
    return 0;
}

static int open_audio(vdn_mp4 *m, char *err, size_t errlen) {
    char eb[128];
    const AVCodec *codec = avcodec_find_encoder(AV_CODEC_ID_AAC);
    if (!codec) return fail(err, errlen, "%s: this FFmpeg has no AAC encoder", m->path);
    m->ast = avformat_new_stream(m->fmt, NULL);
    m->aenc = avcodec_alloc_context3(codec);
    if (!m->ast || !m->aenc) return fail(err, errlen, "%s: out of memory", m->path);
    AVCodecContext *c = m->aenc;
    c->sample_fmt = AV_SAMPLE_FMT_FLTP; /* the native AAC encoder's only format: our planes */
    c->sample_rate = m->o.sample_rate;
    av_channel_layout_default(&c->ch_layout, 2);
    c->bit_rate = 192000;
    c->time_base = (AVRational){1, m->o.sample_rate};
    if (m->fmt->oformat->flags & AVFMT_GLOBALHEADER) c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    int rc = avcodec_open2(c, codec, NULL);
    if (rc < 0)
        return fail(err, errlen, "%s: opening the AAC encoder (stereo, %d Hz): %s", m->path,
                    m->o.sample_rate, averr(rc, eb, sizeof eb));
    rc = avcodec_parameters_from_context(m->ast->codecpar, c);
    if (rc < 0) return fail(err, errlen, "%s: %s", m->path, averr(rc, eb, sizeof eb));
    m->ast->time_base = c->time_base;
    m->aframe = av_frame_alloc();
    if (!m->aframe) return fail(err, errlen, "%s: out of memory", m->path);
    m->aframe->format = c->sample_fmt;
    m->aframe->nb_samples = c->frame_size;
    m->aframe->sample_rate = c->sample_rate;
    if (av_channel_layout_copy(&m->aframe->ch_layout, &c->ch_layout) < 0 ||
        av_frame_get_buffer(m->aframe, 0) < 0)
        return fail(err, errlen, "%s: out of memory", m->path);
    return 0;
}

static float clampf(float x, float lo, float hi) {
    return x != x ? 0.0f : x < lo ? lo : x > hi ? hi : x; /* NaN -> 0 */
}

/* Encode whole AAC frames of the waveform up to sample `upto` (flush: also the last, short one,
 * zero-padded, which the encoder's priming/padding accounting in the mp4 trims). */
static int audio_upto(vdn_mp4 *m, int64_t upto, int flush, char *err, size_t errlen) {
    if (!m->aenc) return 0;
    if (upto > m->o.n_samples) upto = m->o.n_samples;
    const int fs = m->aenc->frame_size;
    while (m->audio_sent < upto && (flush || upto - m->audio_sent >= fs)) {
        if (av_frame_make_writable(m->aframe) < 0)
            return fail(err, errlen, "%s: out of memory", m->path);
        int64_t n = upto - m->audio_sent < fs ? upto - m->audio_sent : fs;
        float *l = (float *)m->aframe->data[0], *r = (float *)m->aframe->data[1];
        for (int64_t i = 0; i < fs; i++) {
            l[i] = i < n ? clampf(m->o.left[m->audio_sent + i], -1.0f, 1.0f) : 0.0f;
            r[i] = i < n ? clampf(m->o.right[m->audio_sent + i], -1.0f, 1.0f) : 0.0f;
        }
        int small_ok = (m->aenc->codec->capabilities & AV_CODEC_CAP_SMALL_LAST_FRAME) != 0;
        m->aframe->nb_samples = (n < fs && small_ok) ? (int)n : fs;
        m->aframe->pts = m->audio_sent;
        if (encode_write(m, m->aenc, m->ast, m->aframe, err, errlen)) return -1;
        m->audio_sent += n;
    }
    return 0;
}

vdn_mp4 *vdn_mp4_open(const char *path, const vdn_mp4_opts *opts, char *err, size_t errlen) {
    char eb[128];
    /* libx264 prints its banner and settings at "info"; only problems belong on our stderr */
    if (av_log_get_level() > AV_LOG_ERROR) av_log_set_level(AV_LOG_ERROR);
    vdn_mp4 *m = calloc(1, sizeof *m);
    if (!m) {
        fail(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    m->o = *opts;
    if (m->o.fps <= 0) m->o.fps = VDN_MP4_DEFAULT_FPS;
    if (m->o.crf < 0) m->o.crf = VDN_MP4_DEFAULT_CRF;
    if (snprintf(m->path, sizeof m->path, "%s", path) >= (int)sizeof m->path) {
        fail(err, errlen, "%s: path too long", path);
        free(m);
        return NULL;
    }
    snprintf(m->partial, sizeof m->partial, "%s.partial", path);
    if (m->o.width <= 0 || m->o.height <= 0 || m->o.width % 2 || m->o.height % 2) {
        fail(err, errlen, "%s: frame size %dx%d: expected positive even width and height", path,
             m->o.width, m->o.height);
        free(m);
        return NULL;
    }
    if (m->o.crf > 51) {
        fail(err, errlen, "%s: crf %d: expected 0..51", path, m->o.crf);
        free(m);
        return NULL;
    }
    if (m->o.left && (m->o.n_samples <= 0 || m->o.sample_rate <= 0 || !m->o.right)) {
        fail(err, errlen,
             "%s: audio of %lld samples at %d Hz: expected both channels, >0 samples "
             "and a positive rate",
             path, (long long)m->o.n_samples, m->o.sample_rate);
        free(m);
        return NULL;
    }
    m->pkt = av_packet_alloc();
    int rc = avformat_alloc_output_context2(&m->fmt, NULL, "mp4", m->partial);
    if (rc < 0 || !m->fmt || !m->pkt) {
        fail(err, errlen, "%s: no mp4 muxer: %s", path, averr(rc, eb, sizeof eb));
        mp4_free(m);
        return NULL;
    }
    if (open_video(m, err, errlen) || (m->o.left && open_audio(m, err, errlen))) {
        mp4_free(m);
        return NULL;
    }
    rc = avio_open(&m->fmt->pb, m->partial, AVIO_FLAG_WRITE);
    if (rc < 0) {
        fail(err, errlen, "%s: cannot create: %s", m->partial, averr(rc, eb, sizeof eb));
        mp4_free(m);
        return NULL;
    }
    AVDictionary *mux = NULL;
    av_dict_set(&mux, "movflags", "+faststart", 0);
    rc = avformat_write_header(m->fmt, &mux);
    av_dict_free(&mux);
    if (rc < 0) {
        fail(err, errlen, "%s: writing the header: %s", m->partial, averr(rc, eb, sizeof eb));
        vdn_mp4_abort(m);
        return NULL;
    }
    m->header_written = 1;
    return m;
}

int vdn_mp4_frame(vdn_mp4 *m, const float *r, const float *g, const float *b, char *err,
                  size_t errlen) {
    const int w = m->o.width, h = m->o.height;
    /* the audio that plays up to the end of this frame goes first, so the file interleaves */
    int64_t upto = (m->n_frames + 1) * (int64_t)m->o.sample_rate / m->o.fps;
    if (audio_upto(m, upto, 0, err, errlen)) return -1;
    for (int64_t i = 0; i < (int64_t)w * h; i++) {
        m->rgb[3 * i + 0] = (uint8_t)lrintf(clampf(r[i], 0.0f, 1.0f) * 255.0f);
        m->rgb[3 * i + 1] = (uint8_t)lrintf(clampf(g[i], 0.0f, 1.0f) * 255.0f);
        m->rgb[3 * i + 2] = (uint8_t)lrintf(clampf(b[i], 0.0f, 1.0f) * 255.0f);
    }
    if (av_frame_make_writable(m->vframe) < 0)
        return fail(err, errlen, "%s: out of memory", m->path);
    const uint8_t *src[1] = {m->rgb};
    const int src_stride[1] = {3 * w};
    sws_scale(m->sws, src, src_stride, 0, h, m->vframe->data, m->vframe->linesize);
    m->vframe->pts = m->n_frames++;
    return encode_write(m, m->venc, m->vst, m->vframe, err, errlen);
}

int vdn_mp4_finish(vdn_mp4 *m, char *err, size_t errlen) {
    char eb[128];
    int rc = 0;
    if (m->n_frames == 0) rc = fail(err, errlen, "%s: no frames to write", m->path);
    if (!rc) rc = encode_write(m, m->venc, m->vst, NULL, err, errlen);
    if (!rc && m->aenc) rc = audio_upto(m, m->o.n_samples, 1, err, errlen);
    if (!rc && m->aenc) rc = encode_write(m, m->aenc, m->ast, NULL, err, errlen);
    if (!rc) {
        int a = av_write_trailer(m->fmt);
        if (a < 0)
            rc = fail(err, errlen, "%s: writing the trailer: %s", m->partial,
                      averr(a, eb, sizeof eb));
    }
    if (!rc) {
        int a = avio_closep(&m->fmt->pb);
        if (a < 0) rc = fail(err, errlen, "%s: closing: %s", m->partial, averr(a, eb, sizeof eb));
    }
    if (!rc && rename(m->partial, m->path) != 0)
        rc = fail(err, errlen, "%s: renaming %s into place: %s", m->path, m->partial,
                  strerror(errno));
    if (rc) {
        vdn_mp4_abort(m);
        return -1;
    }
    mp4_free(m);
    return 0;
}

int vdn_mp4_available(void) {
    return 1;
}

int vdn_mp4_write(const char *path, const float *frames, int n_frames, const vdn_mp4_opts *opts,
                  char *err, size_t errlen) {
    if (n_frames <= 0) return fail(err, errlen, "%s: no frames to write", path);
    vdn_mp4 *m = vdn_mp4_open(path, opts, err, errlen);
    if (!m) return -1;
    const int64_t plane = (int64_t)opts->width * opts->height;
    const int64_t chan = plane * n_frames; /* (3, T, H, W): one channel is T planes */
    for (int t = 0; t < n_frames; t++) {
        const float *r = frames + t * plane;
        if (vdn_mp4_frame(m, r, r + chan, r + 2 * chan, err, errlen)) {
            vdn_mp4_abort(m);
            return -1;
        }
    }
    return vdn_mp4_finish(m, err, errlen);
}
