/* Pictures decoded with FFmpeg's decoders (image.h): the header is checked first
 * (image_probe.c), the whole file goes to the png / mjpeg / webp decoder as one packet, and the
 * decoded frame becomes RGB as Pillow's convert("RGB") makes it. Sample layouts Pillow reduces in
 * a way of its own (16-bit samples, 16-bit grey, palettes, 1-bit) are converted here byte by
 * byte; only YUV frames (JPEG, lossy WebP) go through libswscale. */
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "image.h"
#include "image_yuv.h"
#include "vdn_util.h"

static int averr(char *err, size_t errlen, const char *name, const char *fmt, int rc) {
    char eb[128];
    av_strerror(rc, eb, sizeof eb);
    return vdn_fail(err, errlen, "%s: corrupt %s picture (the decoder says: %s)", name, fmt, eb);
}

/* YUV (and anything else swscale knows) -> RGB24 with the matrix and range the frame is tagged
 * with (JPEG: BT.601 full range; VP8: BT.601 limited), chroma at full horizontal resolution. */
static int yuv_to_rgb(const AVFrame *f, uint8_t *rgb, const char *name, char *err, size_t errlen) {
    struct SwsContext *sws = sws_getContext(
        f->width, f->height, f->format, f->width, f->height, AV_PIX_FMT_RGB24,
        SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_BITEXACT, NULL, NULL, NULL);
    if (!sws)
        return vdn_fail(err, errlen, "%s: no converter from %s to RGB", name,
                        av_get_pix_fmt_name(f->format));
    int cs = f->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : (int)f->colorspace;
    const int *inv = sws_getCoefficients(cs);
    int full = f->color_range == AVCOL_RANGE_JPEG || f->format == AV_PIX_FMT_YUVJ420P ||
               f->format == AV_PIX_FMT_YUVJ422P || f->format == AV_PIX_FMT_YUVJ444P ||
               f->format == AV_PIX_FMT_YUVJ440P || f->format == AV_PIX_FMT_YUVJ411P;
    sws_setColorspaceDetails(sws, inv, full, inv, 1, 0, 1 << 16, 1 << 16);
    uint8_t *dst[4] = {rgb, NULL, NULL, NULL};
    int stride[4] = {3 * f->width, 0, 0, 0};
    int h = sws_scale(sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst, stride);
    sws_freeContext(sws);
    if (h != f->height)
        return vdn_fail(err, errlen, "%s: converting %s to RGB failed", name,
                        av_get_pix_fmt_name(f->format));
    return 0;
}

/* JPEG and VP8 frames as libjpeg-turbo and libwebp convert them (image_yuv.c); 1 when the
 * layout is not one of theirs. */
static int yuv_like_pillow(const AVFrame *f, vdn_image_format fmt, uint8_t *rgb) {
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(f->format);
    if (!d || (d->flags & (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BE)) ||
        d->nb_components < 3 || d->comp[0].depth != 8 || !(d->flags & AV_PIX_FMT_FLAG_PLANAR))
        return 1;
    vdn_yuv_planes p = {f->data[0],
                        f->data[1],
                        f->data[2],
                        (size_t)f->linesize[0],
                        (size_t)f->linesize[1],
                        (size_t)f->linesize[2],
                        f->width,
                        f->height,
                        d->log2_chroma_w,
                        d->log2_chroma_h};
    if (fmt == VDN_IMAGE_JPEG && f->color_range != AVCOL_RANGE_MPEG)
        return vdn_jpeg_ycc_to_rgb(&p, rgb) ? 1 : 0;
    if (fmt == VDN_IMAGE_WEBP) return vdn_webp_yuv_to_rgb(&p, rgb) ? 1 : 0;
    return 1;
}

/* The frame as Pillow's convert("RGB") has it. */
static int frame_to_rgb(const AVFrame *f, vdn_image_format fmt, uint8_t *rgb, const char *name,
                        char *err, size_t errlen) {
    int w = f->width;
    for (int y = 0; y < f->height; y++) {
        const uint8_t *s = f->data[0] + (size_t)y * f->linesize[0];
        uint8_t *o = rgb + (size_t)y * w * 3;
        switch (f->format) {
        case AV_PIX_FMT_RGB24:
            memcpy(o, s, (size_t)w * 3);
            break;
        case AV_PIX_FMT_RGBA: /* alpha dropped, not composited */
            for (int x = 0; x < w; x++)
                memcpy(o + 3 * x, s + 4 * x, 3);
            break;
        case AV_PIX_FMT_ARGB:
            for (int x = 0; x < w; x++)
                memcpy(o + 3 * x, s + 4 * x + 1, 3);
            break;
        case AV_PIX_FMT_RGB48BE: /* Pillow's RGB;16B: the high byte */
            for (int x = 0; x < 3 * w; x++)
                o[x] = s[2 * x];
            break;
        case AV_PIX_FMT_RGBA64BE:
            for (int x = 0; x < w; x++)
                for (int c = 0; c < 3; c++)
                    o[3 * x + c] = s[8 * x + 2 * c];
            break;
        case AV_PIX_FMT_GRAY8:
            for (int x = 0; x < w; x++)
                o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = s[x];
            break;
        case AV_PIX_FMT_YA8:
            for (int x = 0; x < w; x++)
                o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = s[2 * x];
            break;
        case AV_PIX_FMT_YA16BE: /* Pillow's LA;16B: the high byte */
            for (int x = 0; x < w; x++)
                o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = s[4 * x];
            break;
        case AV_PIX_FMT_GRAY16BE: /* Pillow's I / I;16 -> RGB clips at 255 */
            for (int x = 0; x < w; x++) {
                unsigned v = (unsigned)s[2 * x] << 8 | s[2 * x + 1];
                o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = v > 255 ? 255 : (uint8_t)v;
            }
            break;
        case AV_PIX_FMT_MONOBLACK:
            for (int x = 0; x < w; x++)
                o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = (s[x >> 3] >> (7 - (x & 7)) & 1) * 255;
            break;
        case AV_PIX_FMT_PAL8: {
            const uint32_t *pal = (const uint32_t *)f->data[1]; /* 0xAARRGGBB, native order */
            for (int x = 0; x < w; x++) {
                uint32_t p = pal[s[x]];
                o[3 * x] = p >> 16 & 255, o[3 * x + 1] = p >> 8 & 255, o[3 * x + 2] = p & 255;
            }
            break;
        }
        case AV_PIX_FMT_GBRP:
        case AV_PIX_FMT_GBRAP: { /* planar G, B, R (FFmpeg's CMYK JPEGs) */
            const uint8_t *g = s, *b = f->data[1] + (size_t)y * f->linesize[1],
                          *r = f->data[2] + (size_t)y * f->linesize[2];
            for (int x = 0; x < w; x++)
                o[3 * x] = r[x], o[3 * x + 1] = g[x], o[3 * x + 2] = b[x];
            break;
        }
        default:
            if (yuv_like_pillow(f, fmt, rgb) == 0) return 0;
            return yuv_to_rgb(f, rgb, name, err, errlen);
        }
    }
    return 0;
}

static const char *decoder_of(vdn_image_format f, enum AVCodecID *id) {
    *id = f == VDN_IMAGE_PNG    ? AV_CODEC_ID_PNG
          : f == VDN_IMAGE_JPEG ? AV_CODEC_ID_MJPEG
                                : AV_CODEC_ID_WEBP;
    return f == VDN_IMAGE_PNG ? "PNG" : f == VDN_IMAGE_JPEG ? "JPEG" : "WebP";
}

/* One frame out of one packet holding the whole file. */
static int decode_frame(const uint8_t *data, size_t len, const vdn_image_info *info,
                        const char *name, AVFrame *frame, char *err, size_t errlen) {
    enum AVCodecID id;
    const char *fmt = decoder_of(info->format, &id);
    const AVCodec *codec = avcodec_find_decoder(id);
    if (!codec) return vdn_fail(err, errlen, "%s: this FFmpeg has no %s decoder", name, fmt);
    if (av_log_get_level() > AV_LOG_ERROR) av_log_set_level(AV_LOG_ERROR); /* as mp4.c */
    AVCodecContext *dec = avcodec_alloc_context3(codec);
    AVPacket *pkt = av_packet_alloc();
    int rc = -1;
    if (!dec || !pkt || len > INT_MAX - AV_INPUT_BUFFER_PADDING_SIZE ||
        av_new_packet(pkt, (int)len) < 0) {
        vdn_fail(err, errlen, "%s: out of memory for a %zu-byte picture", name, len);
        goto done;
    }
    memcpy(pkt->data, data, len);
    /* FFmpeg's own check before it allocates a frame, on the header's size (already within the
     * caller's limit) with room for the decoders' aligned strides */
    dec->max_pixels = ((long long)info->width + 256) * ((long long)info->height + 256);
    dec->err_recognition = AV_EF_CRCCHECK | AV_EF_EXPLODE;
    dec->thread_count = 1;
    dec->idct_algo = FF_IDCT_INT; /* the IJG integer IDCT, libjpeg's own family */
    int r = avcodec_open2(dec, codec, NULL);
    if (r < 0) {
        averr(err, errlen, name, fmt, r);
        goto done;
    }
    if ((r = avcodec_send_packet(dec, pkt)) < 0 && r != AVERROR(EAGAIN)) {
        averr(err, errlen, name, fmt, r);
        goto done;
    }
    avcodec_send_packet(dec, NULL);
    if ((r = avcodec_receive_frame(dec, frame)) < 0) {
        averr(err, errlen, name, fmt, r);
        goto done;
    }
    if (frame->width != info->width || frame->height != info->height) {
        vdn_fail(err, errlen, "%s: corrupt %s picture (the header says %dx%d, the data %dx%d)",
                 name, fmt, info->width, info->height, frame->width, frame->height);
        goto done;
    }
    if (frame->decode_error_flags || (frame->flags & AV_FRAME_FLAG_CORRUPT)) {
        vdn_fail(err, errlen, "%s: corrupt %s picture (the decoder flagged damaged data)", name,
                 fmt);
        goto done;
    }
    rc = 0;
done:
    av_packet_free(&pkt);
    avcodec_free_context(&dec);
    return rc;
}

int vdn_image_decode(const void *data, size_t len, const char *name, const vdn_image_opts *opts,
                     vdn_image *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!name) name = "picture";
    vdn_image_info info;
    if (vdn_image_probe(data, len, name, opts, &info, err, errlen)) return -1;
    AVFrame *frame = av_frame_alloc();
    if (!frame) return vdn_fail(err, errlen, "%s: out of memory", name);
    int rc = decode_frame(data, len, &info, name, frame, err, errlen);
    if (rc == 0) {
        out->rgb = vdn_xmalloc((size_t)info.width * info.height * 3);
        rc = frame_to_rgb(frame, info.format, out->rgb, name, err, errlen);
    }
    av_frame_free(&frame);
    if (rc) {
        vdn_image_free(out);
        return -1;
    }
    out->width = info.width;
    out->height = info.height;
    out->info = info;
    out->name = vdn_xstrdup(name);
    return 0;
}
