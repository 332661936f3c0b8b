#include "png_write.h"

#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "vdn_util.h"

typedef struct {
    uint8_t *buf;
    size_t len, cap;
} membuf;

static void write_mem(png_structp p, png_bytep data, png_size_t n) {
    membuf *m = png_get_io_ptr(p);
    if (m->len + n > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->len + n)
            cap *= 2;
        uint8_t *b = vdn_xmalloc(cap);
        if (m->len) memcpy(b, m->buf, m->len);
        free(m->buf);
        m->buf = b;
        m->cap = cap;
    }
    memcpy(m->buf + m->len, data, n);
    m->len += n;
}

static void flush_mem(png_structp p) {
    (void)p;
}

int vdn_png_encode(const uint8_t *rgb, int w, int h, uint8_t **out, size_t *len, char *err,
                   size_t errlen) {
    *out = NULL;
    *len = 0;
    if (w <= 0 || h <= 0) return vdn_fail(err, errlen, "png: empty image %dx%d", w, h);
    png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    if (!p) return vdn_fail(err, errlen, "png: libpng could not start");
    png_infop info = png_create_info_struct(p);
    volatile membuf m = {NULL, 0, 0};
    png_bytep *rows = NULL;
    if (!info || setjmp(png_jmpbuf(p))) {
        png_destroy_write_struct(&p, &info);
        free(m.buf);
        free(rows);
        return vdn_fail(err, errlen, "png: libpng failed encoding a %dx%d image", w, h);
    }
    png_set_write_fn(p, (void *)&m, write_mem, flush_mem);
    png_set_IHDR(p, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    rows = vdn_xmalloc((size_t)h * sizeof *rows);
    for (int y = 0; y < h; y++)
        rows[y] = (png_bytep)(rgb + (size_t)y * w * 3);
    png_set_rows(p, info, rows);
    png_write_png(p, info, PNG_TRANSFORM_IDENTITY, NULL);
    png_destroy_write_struct(&p, &info);
    free(rows);
    *out = m.buf;
    *len = m.len;
    return 0;
}

int vdn_png_write_file(const char *path, const uint8_t *rgb, int w, int h, char *err,
                       size_t errlen) {
    uint8_t *buf;
    size_t len;
    if (vdn_png_encode(rgb, w, h, &buf, &len, err, errlen)) return -1;
    int rc = vdn_write_file_atomic(path, buf, len, err, errlen);
    free(buf);
    return rc;
}

char *vdn_base64(const uint8_t *data, size_t len) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = vdn_xmalloc(4 * ((len + 2) / 3) + 1), *o = out;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16;
        if (i + 1 < len) v |= (uint32_t)data[i + 1] << 8;
        if (i + 2 < len) v |= data[i + 2];
        *o++ = tab[(v >> 18) & 63];
        *o++ = tab[(v >> 12) & 63];
        *o++ = i + 1 < len ? tab[(v >> 6) & 63] : '=';
        *o++ = i + 2 < len ? tab[v & 63] : '=';
    }
    *o = 0;
    return out;
}
