/* Pictures' headers (image.h): which format, what size, whether the data is whole, read from the
 * bytes alone so that a bad or oversized picture is refused before a decoder sees it. Also what
 * the loader does without FFmpeg: files in, sha256, freeing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "image.h"
#include "vdn_util.h"

#define EXPECTED "a PNG, JPEG or WebP picture"

const char *vdn_image_format_name(vdn_image_format f) {
    switch (f) {
    case VDN_IMAGE_PNG:
        return "png";
    case VDN_IMAGE_JPEG:
        return "jpeg";
    case VDN_IMAGE_WEBP:
        return "webp";
    }
    return "?";
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static unsigned be16(const uint8_t *p) {
    return (unsigned)p[0] << 8 | p[1];
}
static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}
static unsigned le24(const uint8_t *p) {
    return (unsigned)p[2] << 16 | (unsigned)p[1] << 8 | p[0];
}

static int png_depth_ok(int ct, int depth) {
    int pow2 = depth == 1 || depth == 2 || depth == 4 || depth == 8;
    switch (ct) {
    case 0:
        return pow2 || depth == 16; /* grey */
    case 3:
        return pow2; /* palette */
    case 2:          /* RGB, grey + alpha, RGBA */
    case 4:
    case 6:
        return depth == 8 || depth == 16;
    }
    return 0;
}

/* ---- PNG: IHDR, then every chunk's length up to IEND; acTL means animated ---- */
static int probe_png(const uint8_t *d, size_t n, const char *name, vdn_image_info *in, char *err,
                     size_t errlen) {
    if (n < 8 + 25 || be32(d + 8) != 13 || memcmp(d + 12, "IHDR", 4))
        return vdn_fail(err, errlen, "%s: truncated or corrupt PNG (no IHDR chunk first)", name);
    uint32_t w = be32(d + 16), h = be32(d + 20);
    int depth = d[24], ct = d[25];
    if (w < 1 || h < 1 || w > 0x7fffffff || h > 0x7fffffff)
        return vdn_fail(err, errlen, "%s: PNG size %ux%u out of range", name, w, h);
    if (!png_depth_ok(ct, depth) || d[26] != 0 || d[27] != 0 || d[28] > 1)
        return vdn_fail(err, errlen,
                        "%s: corrupt PNG header (bit depth %d, colour type %d, compression %d, "
                        "filter %d, interlace %d)",
                        name, depth, ct, d[26], d[27], d[28]);
    static const int chans[7] = {1, 0, 3, 1, 2, 0, 4};
    *in = (vdn_image_info){VDN_IMAGE_PNG, (int)w, (int)h, depth, chans[ct], ct == 3, 1};
    size_t pos = 8;
    int idat = 0;
    for (;;) {
        if (n - pos < 12)
            return vdn_fail(err, errlen, "%s: truncated PNG (the data ends before IEND)", name);
        uint32_t len = be32(d + pos);
        const uint8_t *type = d + pos + 4;
        if (len > 0x7fffffff || len > n - pos - 12)
            return vdn_fail(err, errlen,
                            "%s: truncated PNG (chunk %.4s of %u bytes runs past the end)", name,
                            (const char *)type, len);
        if (!memcmp(type, "acTL", 4) && !idat)
            return vdn_fail(err, errlen,
                            "%s: an animated PNG; expected a still picture (save one frame as "
                            "PNG, JPEG or WebP)",
                            name);
        if (!memcmp(type, "IDAT", 4)) idat = 1;
        if (!memcmp(type, "IEND", 4)) break;
        pos += 12 + (size_t)len;
    }
    if (!idat) return vdn_fail(err, errlen, "%s: corrupt PNG (no IDAT chunk)", name);
    return 0;
}

/* ---- JPEG: markers up to the first scan; the frame header; an end marker after the scan ---- */
static int probe_jpeg(const uint8_t *d, size_t n, const char *name, vdn_image_info *in, char *err,
                      size_t errlen) {
    size_t pos = 2;
    int sof = 0, adobe = -1, ncomp = 0;
    while (1) {
        while (pos < n && d[pos] == 0xff && pos + 1 < n && d[pos + 1] == 0xff)
            pos++;
        if (n - pos < 4 || d[pos] != 0xff)
            return vdn_fail(err, errlen, "%s: truncated or corrupt JPEG (no scan after the header)",
                            name);
        int m = d[pos + 1];
        if (m == 0x01 || (m >= 0xd0 && m <= 0xd7)) { /* no length */
            pos += 2;
            continue;
        }
        if (m == 0xd9 || m == 0xd8)
            return vdn_fail(err, errlen, "%s: corrupt JPEG (marker 0x%02x before any scan)", name,
                            m);
        size_t len = be16(d + pos + 2);
        if (len < 2 || len > n - pos - 2)
            return vdn_fail(err, errlen,
                            "%s: truncated JPEG (a segment of %zu bytes runs past the end)", name,
                            len);
        const uint8_t *s = d + pos + 4; /* the segment's payload, len - 2 bytes */
        if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
            if (len < 8) return vdn_fail(err, errlen, "%s: corrupt JPEG frame header", name);
            if (m != 0xc0 && m != 0xc1 && m != 0xc2)
                return vdn_fail(err, errlen,
                                "%s: a %s JPEG (frame type 0x%02x); expected a baseline or "
                                "progressive JPEG",
                                name,
                                m == 0xc3 || m == 0xcb || m == 0xc7 || m == 0xcf ? "lossless"
                                : m >= 0xc9 ? "arithmetic-coded"
                                            : "hierarchical",
                                m);
            if (s[0] != 8)
                return vdn_fail(err, errlen, "%s: a %d-bit JPEG; expected 8 bits a sample", name,
                                s[0]);
            in->height = (int)be16(s + 1);
            in->width = (int)be16(s + 3);
            ncomp = s[5];
            if (in->width < 1 || in->height < 1)
                return vdn_fail(err, errlen,
                                "%s: a JPEG of %dx%d pixels (a height given only after the scan is "
                                "not supported)",
                                name, in->width, in->height);
            if (ncomp != 1 && ncomp != 3 && ncomp != 4)
                return vdn_fail(err, errlen,
                                "%s: a JPEG of %d components; expected 1 (grey), 3 (colour) or 4 "
                                "(CMYK)",
                                name, ncomp);
            if (len < 8 + 3 * (size_t)ncomp)
                return vdn_fail(err, errlen, "%s: corrupt JPEG frame header", name);
            sof = 1;
        }
        if (m == 0xee && len >= 14 && !memcmp(s, "Adobe", 5)) adobe = s[11];
        if (m == 0xda) break;
        pos += 2 + len;
    }
    if (!sof)
        return vdn_fail(err, errlen, "%s: corrupt JPEG (a scan before the frame header)", name);
    if (ncomp == 4 && adobe < 0)
        return vdn_fail(err, errlen,
                        "%s: a 4-component JPEG without an Adobe marker (CMYK of unknown "
                        "polarity); expected RGB, grey or an Adobe CMYK JPEG",
                        name);
    /* the entropy-coded data never holds 0xFF 0xD9: its presence after the first scan is the
     * end of the picture (bytes after it are ignored, as decoders do) */
    int end = 0;
    for (size_t i = pos + 2; i + 1 < n && !end; i++)
        end = d[i] == 0xff && d[i + 1] == 0xd9;
    if (!end) return vdn_fail(err, errlen, "%s: truncated JPEG (no end-of-image marker)", name);
    in->format = VDN_IMAGE_JPEG;
    in->bit_depth = 8;
    in->channels = ncomp;
    return 0;
}

/* ---- WebP: RIFF size, then VP8X / VP8 / VP8L ---- */
static int probe_webp(const uint8_t *d, size_t n, const char *name, vdn_image_info *in, char *err,
                      size_t errlen) {
    uint32_t riff = le32(d + 4);
    if (riff < 4 || riff > n - 8)
        return vdn_fail(err, errlen,
                        "%s: truncated WebP (the RIFF header says %u bytes, the file has %zu)",
                        name, riff, n - 8);
    size_t end = 8 + (size_t)riff, pos = 12;
    int canvas_w = 0, canvas_h = 0, alpha = 0;
    in->format = VDN_IMAGE_WEBP;
    in->bit_depth = 8;
    while (1) {
        if (end - pos < 8)
            return vdn_fail(err, errlen, "%s: corrupt WebP (no VP8 or VP8L image chunk)", name);
        const uint8_t *c = d + pos + 8;
        uint32_t len = le32(d + pos + 4);
        if (len > end - pos - 8)
            return vdn_fail(err, errlen,
                            "%s: truncated WebP (chunk %.4s of %u bytes runs past the end)", name,
                            (const char *)(d + pos), len);
        if (!memcmp(d + pos, "VP8X", 4)) {
            if (len < 10) return vdn_fail(err, errlen, "%s: corrupt WebP VP8X chunk", name);
            if (c[0] & 0x02)
                return vdn_fail(err, errlen,
                                "%s: an animated WebP; expected a still picture (save one frame "
                                "as PNG, JPEG or WebP)",
                                name);
            alpha = (c[0] & 0x10) != 0;
            canvas_w = (int)le24(c + 4) + 1;
            canvas_h = (int)le24(c + 7) + 1;
        } else if (!memcmp(d + pos, "VP8 ", 4)) {
            if (len < 10 || (c[0] & 1) || c[3] != 0x9d || c[4] != 0x01 || c[5] != 0x2a)
                return vdn_fail(err, errlen, "%s: corrupt WebP (bad VP8 key frame header)", name);
            in->width = (int)((c[6] | c[7] << 8) & 0x3fff);
            in->height = (int)((c[8] | c[9] << 8) & 0x3fff);
            in->channels = alpha ? 4 : 3;
            in->lossless = 0;
            break;
        } else if (!memcmp(d + pos, "VP8L", 4)) {
            if (len < 5 || c[0] != 0x2f)
                return vdn_fail(err, errlen, "%s: corrupt WebP (bad VP8L header)", name);
            uint32_t b = le32(c + 1);
            in->width = (int)(b & 0x3fff) + 1;
            in->height = (int)((b >> 14) & 0x3fff) + 1;
            in->channels = (b >> 28) & 1 ? 4 : 3;
            in->lossless = 1;
            break;
        } else if (!memcmp(d + pos, "ANIM", 4) || !memcmp(d + pos, "ANMF", 4)) {
            return vdn_fail(err, errlen, "%s: an animated WebP; expected a still picture", name);
        }
        pos += 8 + (size_t)len + (len & 1);
        if (pos > end) return vdn_fail(err, errlen, "%s: truncated WebP", name);
    }
    if (in->width < 1 || in->height < 1)
        return vdn_fail(err, errlen, "%s: a WebP of %dx%d pixels", name, in->width, in->height);
    if (canvas_w && (canvas_w != in->width || canvas_h != in->height))
        return vdn_fail(err, errlen,
                        "%s: corrupt WebP (canvas %dx%d, image %dx%d: they must be equal in a "
                        "still picture)",
                        name, canvas_w, canvas_h, in->width, in->height);
    return 0;
}

/* Formats people send by mistake, named in the message. */
static const char *known_other(const uint8_t *d, size_t n) {
    if (n >= 6 && (!memcmp(d, "GIF87a", 6) || !memcmp(d, "GIF89a", 6))) return "a GIF";
    if (n >= 2 && !memcmp(d, "BM", 2)) return "a BMP";
    if (n >= 4 && (!memcmp(d, "II*\0", 4) || !memcmp(d, "MM\0*", 4))) return "a TIFF";
    if (n >= 12 && !memcmp(d + 4, "ftyp", 4)) {
        if (!memcmp(d + 8, "avif", 4) || !memcmp(d + 8, "avis", 4)) return "an AVIF";
        if (!memcmp(d + 8, "hei", 3) || !memcmp(d + 8, "mif1", 4) || !memcmp(d + 8, "msf1", 4))
            return "a HEIF/HEIC";
        return "an MP4/QuickTime file";
    }
    if (n >= 2 && d[0] == 0xff && d[1] == 0x0a) return "a JPEG XL";
    if (n >= 12 && !memcmp(d + 4, "JXL ", 4)) return "a JPEG XL";
    if (n >= 4 && !memcmp(d, "%PDF", 4)) return "a PDF";
    if (n >= 4 && !memcmp(d, "8BPS", 4)) return "a Photoshop file";
    if (n >= 12 && !memcmp(d, "RIFF", 4)) return "a RIFF file that is not WebP";
    return NULL;
}

int vdn_image_probe(const void *data, size_t len, const char *name, const vdn_image_opts *opts,
                    vdn_image_info *info, char *err, size_t errlen) {
    const uint8_t *d = data;
    memset(info, 0, sizeof *info);
    if (!name) name = "picture";
    if (len == 0) return vdn_fail(err, errlen, "%s: empty file; expected " EXPECTED, name);
    int rc;
    if (len >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8))
        rc = probe_png(d, len, name, info, err, errlen);
    else if (len >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff)
        rc = probe_jpeg(d, len, name, info, err, errlen);
    else if (len >= 16 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4))
        rc = probe_webp(d, len, name, info, err, errlen);
    else {
        const char *other = known_other(d, len);
        if (other)
            return vdn_fail(err, errlen, "%s: %s; expected " EXPECTED " (convert it first)", name,
                            other);
        return vdn_fail(err, errlen,
                        "%s: not a picture vdn reads (starts with %02x %02x %02x %02x); expected "
                        "" EXPECTED,
                        name, d[0], len > 1 ? d[1] : 0, len > 2 ? d[2] : 0, len > 3 ? d[3] : 0);
    }
    if (rc) return rc;
    long long limit =
        opts && opts->max_pixels > 0 ? opts->max_pixels : VDN_IMAGE_MAX_PIXELS_DEFAULT;
    long long px = (long long)info->width * info->height;
    if (px > limit)
        return vdn_fail(err, errlen,
                        "%s: %dx%d = %.1f megapixels, over the limit of %.1f megapixels for a "
                        "picture",
                        name, info->width, info->height, px / 1e6, limit / 1e6);
    return 0;
}

/* The file's bytes, refusing what is larger than the limit: a regular file by its size before
 * reading it, anything else (a pipe, a device) once it has given more than the limit. */
static void *read_bounded(const char *path, const vdn_image_opts *opts, size_t *len, char *err,
                          size_t errlen) {
    size_t max = opts && opts->max_bytes ? opts->max_bytes : VDN_IMAGE_MAX_BYTES_DEFAULT;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        vdn_fail(err, errlen, "%s: a directory; expected " EXPECTED, path);
        return NULL;
    }
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (unsigned long long)st.st_size > max) {
        vdn_fail(err, errlen, "%s: %lld bytes, over the limit of %zu bytes for a picture file",
                 path, (long long)st.st_size, max);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        vdn_fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = vdn_xmalloc(cap);
    for (;;) {
        size_t want = cap - n > max + 1 - n ? max + 1 - n : cap - n;
        size_t got = fread(buf + n, 1, want, f);
        n += got;
        if (got < want || n > max) break;
        if (n == cap) {
            cap *= 2;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                vdn_fail(err, errlen, "%s: out of memory reading %zu bytes", path, n);
                return NULL;
            }
            buf = nb;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad || n > max) {
        if (bad)
            vdn_fail(err, errlen, "%s: read error", path);
        else
            vdn_fail(err, errlen, "%s: over the limit of %zu bytes for a picture file", path, max);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int vdn_image_load(const char *path, const vdn_image_opts *opts, vdn_image *out, char *err,
                   size_t errlen) {
    memset(out, 0, sizeof *out);
    size_t len;
    void *data = read_bounded(path, opts, &len, err, errlen);
    if (!data) return -1;
    int rc = vdn_image_decode(data, len, path, opts, out, err, errlen);
    free(data);
    return rc;
}

int vdn_image_file_sha256(const char *path, const vdn_image_opts *opts, char hex[65], char *err,
                          size_t errlen) {
    size_t len;
    void *data = read_bounded(path, opts, &len, err, errlen);
    if (!data) return -1;
    vdn_sha256_hex(data, len, hex);
    free(data);
    return 0;
}

void vdn_image_free(vdn_image *im) {
    if (!im) return;
    free(im->rgb);
    free(im->name);
    memset(im, 0, sizeof *im);
}
